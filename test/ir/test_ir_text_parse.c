/*
 * test_ir_text_parse.c - the IR text form (.pdcir) as people write it: a hand-written model with
 * comments, blank lines, odd spacing, CRLF, quoted names, escapes, elided weights and every sparsity
 * kind parses to the expected model (and is a fixed point once printed); the model line is optional
 * and the length is respected; the public pdc_model_print / pdc_model_parse; NULL arguments; and
 * malformed text - each case with its status, line, column and message, *out untouched.
 * Printing models built here is in test_ir_text_print.c.
 */
#include <stdint.h>

#include "ir/ir.h"
#include "test/common/internals.h"

/* ---------------------------------------------------------------- hand-written text */

static const char hand_text[] =
    "# a hand-written model\n"
    "\n"
    "pdcir 1   # version\n"
    "model \"hand made\"\n"
    "input \"in put\" : f32[ 1 , 1, 4,4 ]\r\n"
    "const w : f32[2,1,3,3] = [1,0,0, 0,1,0, 0,0,1,   0,0,0, 0,2.5e0,0, 0,0,0]\n"
    "   # comment lines may sit between a const and its sparsity\n"
    "\tsparsity pattern 3x3 patterns=[0x111, 16] kernels=[0, 1]\n"
    "const b : f32[2] = dense < elided >\n"
    "const fcw : f32[3,8] = [1,1,1,1, 0,0,0,0, 1,1,1,1, 1,1,1,1, 0,0,0,0, 0,0,0,0]\n"
    "  sparsity block 1x4 mask=\"101100\"\n"
    "layer c = conv(\"in put\", w, b) -> (y) {pads=[1, 1, 1, 1], group=1, note=\"a\\x41\\tb\"}\n"
    "layer r = relu(y) -> (z : f32[1,2,4,4])   \n"
    "layer f = flatten(z) -> (fl) {axis=1}\n"
    "layer g = gemm(fl, fl, -) -> (gg) {transB=1, alpha=2, beta=-.5, gamma=+1.5E+2}\n"
    "output z\n"
    "output gg";

START_TEST(hand_written_text_parses)
{
    ir_model *m = parse_ok(hand_text);
    ck_assert_str_eq(m->name, "hand made");
    ck_assert_uint_eq(m->n_inputs, 1);
    const ir_tensor *x = &m->tensors[m->inputs[0]];
    ck_assert_str_eq(x->name, "in put");
    ck_assert_int_eq(x->rank, 4);
    ck_assert_int_eq(x->dims[2], 4);

    const ir_tensor *w = tensor(m, "w");
    ck_assert_int_eq(w->kind, IR_TENSOR_CONST);
    const float want_w[18] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2.5f, 0, 0, 0, 0};
    ck_assert_mem_eq(w->data, want_w, sizeof want_w);
    ck_assert_int_eq(w->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(w->sparsity.kh, 3);
    ck_assert_int_eq(w->sparsity.kw, 3);
    ck_assert_uint_eq(w->sparsity.n_patterns, 2);
    ck_assert_uint_eq(w->sparsity.patterns[0], 0x111);
    ck_assert_uint_eq(w->sparsity.patterns[1], 16);
    ck_assert_uint_eq(w->sparsity.n_kernels, 2);
    ck_assert_int_eq(w->sparsity.kernel_pattern[0], 0);
    ck_assert_int_eq(w->sparsity.kernel_pattern[1], 1);

    const ir_tensor *b = tensor(m, "b");
    ck_assert(b->data[0] == 0.0f && b->data[1] == 0.0f);
    ck_assert_int_eq(b->sparsity.kind, IR_SPARSITY_NONE);

    const ir_tensor *fcw = tensor(m, "fcw");
    ck_assert_int_eq(fcw->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(fcw->sparsity.bh, 1);
    ck_assert_int_eq(fcw->sparsity.bw, 4);
    ck_assert_mem_eq(fcw->sparsity.block_mask, ((const uint8_t[]){1, 0, 1, 1, 0, 0}), 6);

    ck_assert_uint_eq(m->n_layers, 4);
    const ir_layer *c = &m->layers[0];
    ck_assert_str_eq(c->name, "c");
    ck_assert_int_eq(c->op, IR_OP_CONV);
    size_t n;
    const int64_t *pads = ir_attr_ints(&c->attrs, "pads", &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(pads[0] + pads[1] + pads[2] + pads[3], 4);
    ck_assert_int_eq(ir_attrs_find(&c->attrs, "group")->type, IR_ATTR_INT);
    ck_assert_str_eq(ir_attr_string(&c->attrs, "note", ""), "aA\tb");
    ck_assert_str_eq(c->attrs.items[0].name, "pads"); /* order kept */
    ck_assert_str_eq(c->attrs.items[2].name, "note");

    const ir_tensor *y = tensor(m, "y");
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->dims[1], 2);
    ck_assert_int_eq(y->dims[3], 4);
    ck_assert_int_eq(tensor(m, "fl")->dims[1], 32);
    ck_assert_int_eq(tensor(m, "gg")->dims[0], 1);
    ck_assert_int_eq(tensor(m, "gg")->dims[1], 1);

    const ir_layer *g = &m->layers[3];
    ck_assert_int_eq(ir_attrs_find(&g->attrs, "alpha")->type, IR_ATTR_INT); /* "2" is an int */
    ck_assert_int_eq(ir_attrs_find(&g->attrs, "beta")->type, IR_ATTR_FLOAT);
    ck_assert(ir_attrs_find(&g->attrs, "beta")->f == -0.5f);
    ck_assert(ir_attrs_find(&g->attrs, "gamma")->f == 150.0f);
    ck_assert_int_eq(g->inputs[2], -1);

    ck_assert_uint_eq(m->n_outputs, 2);
    ck_assert_str_eq(m->tensors[m->outputs[0]].name, "z");
    ck_assert_str_eq(m->tensors[m->outputs[1]].name, "gg");

    /* The canonical print of it is a fixed point too. */
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

START_TEST(model_line_is_optional_and_len_is_respected)
{
    const char text[] = "pdcir 1\ninput x : f32[2]\nlayer r = relu(x) -> (y)\noutput y\nGARBAGE THAT IS NOT PARSED";
    size_t len = strlen(text) - strlen("GARBAGE THAT IS NOT PARSED");
    ir_model *m = NULL;
    ck_assert_ok(ctx, ir_parse(ctx, text, len, &m));
    ck_assert_str_eq(m->name, "model");
    ck_assert_uint_eq(m->n_layers, 1);
    ir_model_destroy(m);
    /* The whole buffer is rejected at the garbage line. */
    ck_assert_status(ctx, ir_parse(ctx, text, strlen(text), &m), PDC_ERR_PARSE);
    ck_assert_error_has(ctx, "line 5, column 1:");
    /* A header alone is an empty model. */
    m = parse_ok("pdcir 1");
    ck_assert_uint_eq(m->n_tensors, 0);
    ir_model_destroy(m);
}
END_TEST

/* Through the public API: pdc_model_print / pdc_model_parse (which also runs the verifier). */
START_TEST(public_api_round_trip)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "pub", &m));
    int64_t xd[] = {1, 2, 4, 4}, wd[] = {3, 2, 3, 3};
    float w[54];
    test_fill_random(w, 54, 3);
    ck_assert_ok(ctx, pdc_model_add_input(m, "x", 4, xd));
    ck_assert_ok(ctx, pdc_model_add_constant(m, "w", 4, wd, w));
    const char *in[] = {"x", "w"}, *out[] = {"y"};
    ck_assert_ok(ctx, pdc_model_add_layer(m, "conv", "conv", 2, in, 1, out, NULL));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    char *text;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &text));
    pdc_model *m2;
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m2));
    char *text2;
    ck_assert_ok(ctx, pdc_model_print(m2, 0, &text2));
    ck_assert_str_eq(text, text2);
    pdc_string_free(text);
    pdc_string_free(text2);
    pdc_model_destroy(m2);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(null_arguments)
{
    ir_model *m = NULL;
    char *text = NULL;
    ck_assert_int_eq(ir_parse(NULL, "pdcir 1", 7, &m), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_parse(ctx, "pdcir 1", 7, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_parse(ctx, NULL, 7, &m), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ir_print(NULL, 0, &text), PDC_ERR_INVALID_ARG);
    m = parse_ok("pdcir 1\n");
    ck_assert_status(ctx, ir_print(m, 0, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_print(m, 0x80, &text), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(text);
    ir_model_destroy(m);
}
END_TEST

/* ---------------------------------------------------------------- malformed text */

typedef struct bad_case {
    const char *text;
    pdc_status status;
    const char *where;   /* message prefix, e.g. "line 2, column 5:" or "line 3:" */
    const char *keyword; /* must appear in the message */
} bad_case;

#define H "pdcir 1\n"
#define X4 H "input x : f32[1,4]\n"

static const bad_case bad_cases[] = {
    /* header */
    {"", PDC_ERR_PARSE, "line 1, column 1:", "expected the header 'pdcir 1', found end of input"},
    {"input x : f32[1]\n", PDC_ERR_PARSE, "line 1, column 1:", "found 'input'"},
    {"pdcirx 1\n", PDC_ERR_PARSE, "line 1, column 1:", "'pdcir 1'"},
    {"pdcir 2\n", PDC_ERR_PARSE, "line 1, column 7:", "unsupported pdcir version 2"},
    {"pdcir\n", PDC_ERR_PARSE, "line 1, column 6:", "found end of line"},
    {"pdcir 1 trailing\n", PDC_ERR_PARSE, "line 1, column 9:", "expected end of line, found 'trailing'"},
    {"# only a comment\n\npdcir 1.0\n", PDC_ERR_PARSE, "line 3, column 7:", "found '1.0'"},
    {H "pdcir 1\n", PDC_ERR_PARSE, "line 2, column 1:", "duplicate 'pdcir'"},
    {H "input x : f32[1]\nmodel \"late\"\n", PDC_ERR_PARSE, "line 3, column 1:", "right after the header"},
    {H "model \"\"\n", PDC_ERR_PARSE, "line 2, column 7:", "expected the model name, found an empty name"},
    {H "model \"a\\x01\"\n", PDC_ERR_INVALID_ARG, "line 2:", "invalid model name"},
    {H "input \"a\\tb\" : f32[1]\n", PDC_ERR_INVALID_ARG, "line 2:", "invalid tensor name"},
    /* statements and garbage */
    {H "bogus stuff\n", PDC_ERR_PARSE, "line 2, column 1:", "unknown statement 'bogus'"},
    {H "$\n", PDC_ERR_PARSE, "line 2, column 1:", "found '$'"},
    {H "input x : f32[1] extra\n", PDC_ERR_PARSE, "line 2, column 18:", "expected end of line, found 'extra'"},
    {H "input x : f32[1]\n\x01\n", PDC_ERR_PARSE, "line 3, column 1:", "byte 0x01"},
    /* strings and names */
    {H "model \"abc\n", PDC_ERR_PARSE, "line 2, column 7:", "unterminated string"},
    {H "model \"abc", PDC_ERR_PARSE, "line 2, column 7:", "unterminated string"},
    {H "model \"a\\qb\"\n", PDC_ERR_PARSE, "line 2, column 9:", "unknown escape"},
    {H "model \"a\\x0\"\n", PDC_ERR_PARSE, "line 2, column 9:", "two hex digits"},
    {H "model \"a\\x00\"\n", PDC_ERR_PARSE, "line 2, column 9:", "\\x00"},
    {H "input - : f32[1]\n", PDC_ERR_PARSE, "line 2, column 7:", "expected an input name, found '-'"},
    {H "input x f32[1]\n", PDC_ERR_PARSE, "line 2, column 9:", "expected ':'"},
    {H "input onnx::x : f32[1]\n", PDC_ERR_PARSE, "line 2, column 12:",
     "expected a type such as f32[1,3,224,224], found ':'"},
    /* types and dims */
    {H "input x : f16[1]\n", PDC_ERR_PARSE, "line 2, column 11:", "unsupported dtype 'f16'"},
    {H "input x : [1]\n", PDC_ERR_PARSE, "line 2, column 11:", "expected a type"},
    {H "input x : f32[1,0]\n", PDC_ERR_PARSE, "line 2, column 17:", "bad dimension 0"},
    {H "input x : f32[-3]\n", PDC_ERR_PARSE, "line 2, column 15:", "bad dimension -3"},
    {H "input x : f32[1,2.5]\n", PDC_ERR_PARSE, "line 2, column 17:", "found '2.5'"},
    {H "input x : f32[1,,2]\n", PDC_ERR_PARSE, "line 2, column 17:", "expected a dimension"},
    {H "input x : f32[1 2]\n", PDC_ERR_PARSE, "line 2, column 17:", "expected ',' or ']', found '2'"},
    {H "input x : f32[1,2\n", PDC_ERR_PARSE, "line 2, column 18:", "found end of line"},
    {H "input x : f32[99999999999999999999]\n", PDC_ERR_PARSE, "line 2, column 15:", "out of range"},
    {H "input x : f32[1,2,3,4,5,6,7,8,9]\n", PDC_ERR_PARSE, "line 2, column 31:", "too many dimensions"},
    {H "input x : f32[]\n", PDC_ERR_PARSE, "line 2, column 7:", "at least one dimension"},
    {H "input x : f32[12abc]\n", PDC_ERR_PARSE, "line 2, column 15:", "malformed number '12abc'"},
    {H "const c : f32[?] = [1]\n", PDC_ERR_PARSE, "line 2, column 15:", "symbolic"},
    {H "const c : f32[4294967296,4294967296,4294967296] = dense<elided>\n", PDC_ERR_PARSE, "line 2, column 11:",
     "overflows"},
    /* duplicates and unknown names */
    {H "input x : f32[1]\ninput x : f32[2]\n", PDC_ERR_PARSE, "line 3, column 7:", "tensor 'x' is already defined"},
    {H "input x : f32[1]\nconst x : f32[1] = [1]\n", PDC_ERR_PARSE, "line 3, column 7:", "already defined"},
    {X4 "layer l = relu(x) -> (y)\nlayer l = relu(y) -> (z)\n", PDC_ERR_PARSE, "line 4, column 7:",
     "layer 'l' is already defined"},
    {X4 "layer l = relu(x) -> (x)\n", PDC_ERR_PARSE, "line 3, column 23:", "tensor 'x' is already defined"},
    {X4 "layer l = lstm(x, x, x) -> (y, y)\n", PDC_ERR_PARSE, "line 3, column 32:", "tensor 'y' is already defined"},
    {X4 "layer l = relu(\"\") -> (y)\n", PDC_ERR_PARSE, "line 3, column 16:", "found an empty name"},
    {X4 "layer l = relu(x) -> (y, \"\")\n", PDC_ERR_PARSE, "line 3, column 26:", "found an empty name"},
    {X4 "layer l = relu(z) -> (y)\n", PDC_ERR_PARSE, "line 3, column 16:", "unknown tensor 'z'"},
    {X4 "layer l = add(x, \"onnx::a\") -> (y)\n", PDC_ERR_PARSE, "line 3, column 18:", "unknown tensor 'onnx::a'"},
    {H "output nope\n", PDC_ERR_PARSE, "line 2, column 8:", "unknown tensor 'nope'"},
    /* layers */
    {X4 "layer l = frob(x) -> (y)\n", PDC_ERR_PARSE, "line 3, column 11:", "unknown op 'frob'"},
    {X4 "layer l = relu(x) (y)\n", PDC_ERR_PARSE, "line 3, column 19:", "expected '->'"},
    {X4 "layer l = relu(x) -> y\n", PDC_ERR_PARSE, "line 3, column 22:", "expected '(' and the outputs, found 'y'"},
    {X4 "layer l = relu(x -> (y)\n", PDC_ERR_PARSE, "line 3, column 18:", "expected ',' or ')'"},
    {X4 "layer l = relu(x) -> (y) {a=1\n", PDC_ERR_PARSE, "line 3, column 30:", "expected ',' or '}'"},
    {X4 "layer l = relu(x) -> (y) {a=1, a=2}\n", PDC_ERR_PARSE, "line 3, column 32:", "attribute 'a' is given twice"},
    {X4 "layer l = relu(x) -> (y) {1a=1}\n", PDC_ERR_PARSE, "line 3, column 27:", "expected an attribute name"},
    {X4 "layer l = relu(x) -> (y) {a=1.5.2}\n", PDC_ERR_PARSE, "line 3, column 29:", "malformed number '1.5.2'"},
    {X4 "layer l = relu(x) -> (y) {a=[1.5]}\n", PDC_ERR_PARSE, "line 3, column 30:",
     "expected an integer, found '1.5'"},
    {X4 "layer l = relu(x) -> (y) {a=bare}\n", PDC_ERR_PARSE, "line 3, column 29:", "expected an attribute value"},
    {X4 "layer l = relu(x) -> (y) {a=1e}\n", PDC_ERR_PARSE, "line 3, column 29:", "no digits in the exponent"},
    {X4 "layer l = relu(x) -> (y) {a=0x}\n", PDC_ERR_PARSE, "line 3, column 29:", "no hex digits"},
    {X4 "layer l = relu(x) -> (y) {a=9223372036854775808}\n", PDC_ERR_PARSE, "line 3, column 29:", "out of range"},
    {X4 "layer l = relu(x) -> (y) {a=1e39}\n", PDC_ERR_PARSE, "line 3, column 29:", "out of range for f32"},
    {X4 "layer l = relu(x) -> (y) {a=nan}\n", PDC_ERR_INVALID_ARG, "line 3, column 29:", "NaN"},
    {X4 "layer l = relu(x) -> (y : f32[1,5])\n", PDC_ERR_SHAPE, "line 3, column 23:",
     "declared f32[1,5] but its inferred shape is f32[1,4]"},
    {X4 "layer l = relu(x) -> (y : f32[1,4,1])\n", PDC_ERR_SHAPE, "line 3, column 23:", "inferred"},
    {H "input x : f32[?,4]\nlayer l = relu(x) -> (y : f32[?,4])\n", PDC_ERR_SHAPE, "line 3, column 23:",
     "declared f32[?,4] but its inferred shape is unknown"},
    {X4 "layer l = relu(x) -> (-)\n", PDC_ERR_INVALID_ARG, "line 3:", "output 0 is required"},
    {X4 "layer l = relu(x) -> (-, y)\n", PDC_ERR_INVALID_ARG, "line 3:", "2 outputs, expected 1..1"},
    {X4 "layer l = relu(x) -> (- : f32[1])\n", PDC_ERR_PARSE, "line 3, column 25:", "expected ',' or ')', found ':'"},
    {X4 "layer l = relu(x, x) -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "2 inputs, expected 1..1"},
    {X4 "layer l = relu() -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "0 inputs"},
    {X4 "layer l = relu(-) -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "input 0 is required"},
    {X4 "const w : f32[3,5] = dense<elided>\nlayer l = fc(x, w) -> (y)\n", PDC_ERR_SHAPE, "line 4: layer 'l' (fc)",
     "weight 'w'"},
    {X4 "layer l = concat(x, x) -> (y)\n", PDC_ERR_INVALID_MODEL, "line 3: layer 'l' (concat)", "axis"},
    {X4 "output x\n", PDC_ERR_INVALID_ARG, "line 3:", "must be produced by a layer"},
    {X4 "layer l = relu(x) -> (y)\noutput y\noutput y\n", PDC_ERR_INVALID_ARG, "line 5:", "already an output"},
    /* constants */
    {H "const w : f32[2,2] = [1, 2, 3]\n", PDC_ERR_PARSE, "line 2, column 22:",
     "expected 4 values for its shape, got 3"},
    {H "const w : f32[2,2] = [1, 2, 3, 4, 5]\n", PDC_ERR_PARSE, "line 2, column 22:", "expected 4 values"},
    {H "const w : f32[2] = []\n", PDC_ERR_PARSE, "line 2, column 20:", "got 0"},
    {H "const w : f32[2] = [1, x]\n", PDC_ERR_PARSE, "line 2, column 24:", "expected a number, found 'x'"},
    {H "const w : f32[2] = [1 2]\n", PDC_ERR_PARSE, "line 2, column 23:", "expected ',' or ']'"},
    {H "const w : f32[2] = [1,", PDC_ERR_PARSE, "line 2, column 23:", "expected a number, found end of input"},
    {H "const w : f32[1] = [1e999]\n", PDC_ERR_PARSE, "line 2, column 21:", "out of range for f32"},
    {H "const w : f32[1] = [infinity]\n", PDC_ERR_PARSE, "line 2, column 21:", "expected a number"},
    {H "const w : f32[1] = zeros\n", PDC_ERR_PARSE, "line 2, column 20:", "dense<elided>"},
    {H "const w : f32[1] = dense<hidden>\n", PDC_ERR_PARSE, "line 2, column 26:", "'elided'"},
    {H "const w : f32[1] = [1]]\n", PDC_ERR_PARSE, "line 2, column 23:", "expected end of line, found ']'"},
    {H "const w : f32[1] [1]\n", PDC_ERR_PARSE, "line 2, column 18:", "expected '='"},
    {H "const w : f32[2] = [1,\n2]\n", PDC_ERR_PARSE, "line 2, column 23:", "found end of line"},
    /* sparsity */
    {X4 "sparsity unstructured mask=\"1\"\n", PDC_ERR_PARSE, "line 3, column 1:", "must directly follow"},
    {H "sparsity unstructured mask=\"1\"\n", PDC_ERR_PARSE, "line 2, column 1:", "must directly follow"},
    {H "const w : f32[4] = [1,0,0,1]\ninput x : f32[1]\nsparsity unstructured mask=\"1001\"\n", PDC_ERR_PARSE,
     "line 4, column 1:", "must directly follow"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\"\n sparsity unstructured mask=\"1111\"\n",
     PDC_ERR_PARSE, "line 4, column 2:", "already has a sparsity line"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"10x1\"\n", PDC_ERR_PARSE, "line 3, column 32:",
     "expected '0', '1' or '\"' in mask, found 'x1'"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\n", PDC_ERR_PARSE, "line 3, column 29:",
     "unterminated mask"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=1001\n", PDC_ERR_PARSE, "line 3, column 29:",
     "quoted mask"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\" x\n", PDC_ERR_PARSE, "line 3, column 36:",
     "expected end of line"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"101\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "mask has 3 entries, expected 4"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"0111\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "element 0 is 1 but its sparsity prunes it"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity random mask=\"1011\"\n", PDC_ERR_PARSE, "line 3, column 11:",
     "expected a sparsity kind (pattern, block, unstructured or bcr), found 'random'"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 1y4 mask=\"11\"\n", PDC_ERR_PARSE, "line 3, column 18:",
     "expected 'x' (as in 3x3)"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 1x mask=\"11\"\n", PDC_ERR_PARSE, "line 3, column 19:",
     "expected the block shape"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 2x4 mask=\"11\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "block mask has 2 entries, expected 1"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x1ff] kernels=[2]\n",
     PDC_ERR_INVALID_MODEL, "line 3:", "kernel 0 has pattern id 2"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[-1] kernels=[0]\n", PDC_ERR_PARSE,
     "line 3, column 33:", "non-negative"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x1ff] kernels=[4294967296]\n",
     PDC_ERR_PARSE, "line 3, column 49:", "kernel pattern id 4294967296 is out of range"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 kernels=[0]\n", PDC_ERR_PARSE,
     "line 3, column 23:", "patterns=[...]"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x10000000000000000] kernels=[0]\n",
     PDC_ERR_PARSE, "line 3, column 33:", "out of range (uint64)"},
    /* an embedded NUL is garbage, not the end of the text */
    {H "input x : f32[1]\n\0\n", PDC_ERR_PARSE, "line 3, column 1:", "byte 0x00"},
};

static size_t bad_len(const bad_case *c)
{
    /* The NUL case: its length runs to the final newline. */
    size_t n = strlen(c->text);
    if (strstr(c->keyword, "byte 0x00")) n += 2;
    return n;
}

START_TEST(malformed_text_is_rejected)
{
    const bad_case *c = &bad_cases[_i];
    ir_model *m = (ir_model *)(uintptr_t)0x1;
    pdc_status st = ir_parse(ctx, c->text, bad_len(c), &m);
    const char *msg = pdc_context_last_error(ctx);
    ck_assert_msg(st == c->status, "case %d (%s): got %s, expected %s: %s", _i, c->text, pdc_status_string(st),
                  pdc_status_string(c->status), msg);
    ck_assert_msg(m == (ir_model *)(uintptr_t)0x1, "case %d: *out changed on failure", _i);
    ck_assert_msg(strncmp(msg, c->where, strlen(c->where)) == 0,
                  "case %d (%s): message \"%s\" does not start with \"%s\"", _i, c->text, msg, c->where);
    ck_assert_msg(strstr(msg, c->keyword) != NULL, "case %d (%s): message \"%s\" lacks \"%s\"", _i, c->text, msg,
                  c->keyword);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ir_text_parse");
    TCase *tc = test_add_tcase(s, "parse", ctx_setup, ctx_teardown, 300,
                               TEST_LIST(hand_written_text_parses, model_line_is_optional_and_len_is_respected,
                                         public_api_round_trip, null_arguments));
    tcase_add_loop_test(tc, malformed_text_is_rejected, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    return test_run_suite(s);
}
