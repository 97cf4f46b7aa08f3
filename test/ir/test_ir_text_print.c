/*
 * test_ir_text_print.c - the IR text form (.pdcir) of models built here: print -> parse -> print is
 * byte-identical for every op and every sparsity kind, alone and together, with and without
 * weights, and the parsed model equals the original (weights bit for bit, attributes of every type
 * with escapes, inf, -0.0 and denormals, names that need quoting, absent inputs and outputs,
 * symbolic shapes); the exact canonical text of a small model; elided weights parse as zeros; every
 * prefix and random corruptions of a printed model, and an out-of-memory sweep, fail cleanly.
 * Hand-written and malformed text is in test_ir_text_parse.c.
 */
#include <float.h>
#include <stdint.h>

#include "ir/ir.h"
#include "test/common/internals.h"

/* ---------------------------------------------------------------- builders */

static void set_pattern(ir_model *m, const char *name, int64_t kh, int64_t kw, size_t n_pat, const uint64_t *pat,
                        uint32_t seed)
{
    const ir_tensor *t = tensor(m, name);
    ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kh = kh, .kw = kw, .n_patterns = n_pat};
    s.n_kernels = (size_t)(t->dims[0] * t->dims[1]);
    s.patterns = pdc_alloc(ctx, n_pat * sizeof *s.patterns);
    s.kernel_pattern = pdc_alloc(ctx, s.n_kernels * sizeof *s.kernel_pattern);
    memcpy(s.patterns, pat, n_pat * sizeof *pat);
    for (size_t k = 0; k < s.n_kernels; k++) s.kernel_pattern[k] = (int32_t)((k * 7 + seed) % (n_pat + 1)) - 1;
    attach_sparsity(m, name, &s);
}

static uint8_t *random_mask(size_t n, uint32_t seed)
{
    uint8_t *mask = pdc_alloc(ctx, n ? n : 1);
    uint32_t x = seed * 2654435761u + 7u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        mask[i] = (x >> 8) % 3 != 0;
    }
    return mask;
}

static void set_block(ir_model *m, const char *name, int64_t bh, int64_t bw, uint32_t seed)
{
    int64_t rows, cols;
    ir_weight_matrix_view(tensor(m, name), &rows, &cols);
    ir_sparsity s = {.kind = IR_SPARSITY_BLOCK, .bh = bh, .bw = bw};
    s.n_blocks = (size_t)(((rows + bh - 1) / bh) * ((cols + bw - 1) / bw));
    s.block_mask = random_mask(s.n_blocks, seed);
    attach_sparsity(m, name, &s);
}

static void set_unstructured(ir_model *m, const char *name, uint32_t seed)
{
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED};
    s.n_mask = ir_tensor_numel(tensor(m, name));
    s.mask = random_mask(s.n_mask, seed);
    attach_sparsity(m, name, &s);
}

/*
 * One model with every op in ops.def, every sparsity kind, absent optional inputs and outputs,
 * names that need quoting, and attributes of every type (including escapes, inf, -0.0, denormals).
 */
static ir_model *all_ops_model(void)
{
    ir_model *m;
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_model_create(ctx, "all \"ops\"\\model", &m));
    add_input(m, "x", DIMS(1, 2, 6, 6));
    add_input(m, "seq", DIMS(5, 1, 3));
    add_const(m, "onnx::Conv_12", 1, DIMS(4, 2, 3, 3));
    add_const(m, "cb", 2, DIMS(4));
    add_const(m, "bn.scale", 3, DIMS(4));
    add_const(m, "bn.bias", 4, DIMS(4));
    add_const(m, "bn.mean", 5, DIMS(4));
    add_const(m, "bn.var", 0, DIMS(4));
    add_const(m, "fcw", 6, DIMS(10, 72));
    add_const(m, "fcb", 7, DIMS(10));
    add_const(m, "gb", 8, DIMS(10, 5));
    add_const(m, "gc", 9, DIMS(5));
    add_const(m, "mmw", 10, DIMS(8, 3));
    add_const(m, "lw", 11, DIMS(1, 16, 3));
    add_const(m, "lr", 12, DIMS(1, 16, 4));
    add_const(m, "lb", 13, DIMS(1, 32));
    add_const(m, "h0", 14, DIMS(1, 1, 4));
    add_const(m, "c\xc3\xa7" "0", 15, DIMS(1, 1, 4)); /* UTF-8 in a name: printed quoted, raw */
    add_const(m, "gw", 16, DIMS(2, 12, 3));
    add_const(m, "gr", 17, DIMS(2, 12, 4));
    add_const(m, "gbias", 18, DIMS(2, 24));
    float *one = pdc_alloc(ctx, sizeof *one);
    *one = -2.5f;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "scalar", 0, NULL, one));
    add_const(m, "specials", 0, DIMS(9));
    float *sp = tensor(m, "specials")->data;
    sp[0] = 0.1f;
    sp[1] = -0.0f;
    sp[2] = 1e-45f; /* smallest denormal */
    sp[3] = FLT_MAX;
    sp[4] = -FLT_MAX;
    sp[5] = 1.0f / 3.0f;
    sp[6] = 16777216.0f;
    sp[7] = 1.17549435e-38f;
    sp[8] = 123456789.0f;

    const uint64_t pats[] = {0x1d, 0xba, 0x1ff};
    set_pattern(m, "onnx::Conv_12", 3, 3, 3, pats, 1);
    set_block(m, "fcw", 2, 4, 3);
    set_unstructured(m, "gb", 4);

    set_conv_window(ctx, &a);
    add_op(m, "/layer1/Conv", IR_OP_CONV, NAMES("x", "onnx::Conv_12", "cb"), NAMES("/layer1/Conv_output_0"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "epsilon", 1e-5f));
    add_op(m, "bn", IR_OP_BATCHNORM, NAMES("/layer1/Conv_output_0", "bn.scale", "bn.bias", "bn.mean", "bn.var"),
              NAMES("bn"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "note", "q\"b\\n\nt\tc\x01 d\x7f utf8 \xc3\xa7 # not a comment"));
    add_op(m, "relu", IR_OP_RELU, NAMES("bn"), NAMES("r"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", 6.0f));
    add_op(m, "clip6", IR_OP_CLIP, NAMES("r"), NAMES("c6"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", -INFINITY));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", INFINITY));
    add_op(m, "clip_inf", IR_OP_CLIP, NAMES("bn"), NAMES("ci"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 0.01f));
    add_op(m, "leaky", IR_OP_LEAKY_RELU, NAMES("ci"), NAMES("lk"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "empty", 0, NULL));
    add_op(m, "sig", IR_OP_SIGMOID, NAMES("lk"), NAMES("sg"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "big", INT64_MIN));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "big2", INT64_MAX));
    add_op(m, "tanh", IR_OP_TANH, NAMES("sg"), NAMES("tn"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_big", 1e10f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_int", 100000000.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_negzero", -0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_tiny", 1e-45f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_third", 1.0f / 3.0f));
    add_op(m, "hswish", IR_OP_HARDSWISH, NAMES("tn"), NAMES("hw"), &a);
    ir_attrs_free(&a);

    add_op(m, "add", IR_OP_ADD, NAMES("c6", "hw"), NAMES("ad"), NULL);
    add_op(m, "mul", IR_OP_MUL, NAMES("ad", "sg"), NAMES("mu"), NULL);
    add_op(m, "sub", IR_OP_SUB, NAMES("mu", "ad"), NAMES("sb"), NULL);
    add_op(m, "div", IR_OP_DIV, NAMES("sb", "scalar"), NAMES("dv"), NULL);
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 1.0f / 6.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "beta", 0.5f));
    add_op(m, "hsigmoid", IR_OP_HARDSIGMOID, NAMES("dv"), NAMES("hsg"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    add_op(m, "cat", IR_OP_CONCAT, NAMES("ad", "mu"), NAMES("ct"), &a);
    ir_attrs_free(&a);

    int64_t k2[] = {2, 2}, k3[] = {3, 3}, pads[] = {1, 1, 1, 1};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "kernel_shape", 2, k2));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, k2));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "ceil_mode", 0));
    add_op(m, "maxpool", IR_OP_MAXPOOL, NAMES("ct"), NAMES("mp"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "kernel_shape", 2, k3));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "pads", 4, pads));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "count_include_pad", 1));
    add_op(m, "avgpool", IR_OP_AVGPOOL, NAMES("mp"), NAMES("ap"), &a);
    ir_attrs_free(&a);

    add_op(m, "gap", IR_OP_GLOBAL_AVGPOOL, NAMES("ap"), NAMES("gp"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    add_op(m, "flatten", IR_OP_FLATTEN, NAMES("ap"), NAMES("fl"), &a);
    ir_attrs_free(&a);

    add_op(m, "fc", IR_OP_FC, NAMES("fl", "fcw", "fcb"), NAMES("fo"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 0.5f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "beta", 2.0f));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transA", 0));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transB", 0));
    add_op(m, "gemm", IR_OP_GEMM, NAMES("fo", "gb", "gc"), NAMES("go"), &a);
    ir_attrs_free(&a);

    int64_t shape[] = {1, 8, 9}, perm[] = {0, 2, 1};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "shape", 3, shape));
    add_op(m, "reshape", IR_OP_RESHAPE, NAMES("ap"), NAMES("rs"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "perm", 3, perm));
    add_op(m, "transpose", IR_OP_TRANSPOSE, NAMES("rs"), NAMES("tr"), &a);
    ir_attrs_free(&a);

    add_op(m, "matmul", IR_OP_MATMUL, NAMES("tr", "mmw"), NAMES("mm"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", -1));
    add_op(m, "softmax", IR_OP_SOFTMAX, NAMES("mm"), NAMES("sm"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "forward"));
    add_op(m, "lstm", IR_OP_LSTM, NAMES("seq", "lw", "lr", "lb", NULL, "h0", "c\xc3\xa7" "0"),
              NAMES("-", NULL, "lyc"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "bidirectional"));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "linear_before_reset", 1));
    add_op(m, "gru", IR_OP_GRU, NAMES("seq", "gw", "gr", "gbias"), NAMES("gy", "gyh"), &a);
    ir_attrs_free(&a);

    add_op(m, "with space", IR_OP_RELU, NAMES("sm"), NAMES("sp ace"), NULL);

    const char *outs[] = {"sp ace", "go", "gp", "-", "lyc", "gy", "gyh"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ck_assert_ok(ctx, ir_model_mark_output(m, outs[i]));
    return m;
}

/* ---------------------------------------------------------------- round trips */

START_TEST(all_ops_model_covers_every_op_and_sparsity_kind)
{
    ir_model *m = all_ops_model();
    int seen_op[IR_OP_COUNT] = {0}, seen_sp[4] = {0};
    for (size_t i = 0; i < m->n_layers; i++) seen_op[m->layers[i].op] = 1;
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == IR_TENSOR_CONST) seen_sp[m->tensors[i].sparsity.kind] = 1;
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(seen_op[op], "op %s is not in the round-trip model", ir_op_get_info((ir_op)op)->name);
    for (int k = 0; k < 4; k++) ck_assert_msg(seen_sp[k], "sparsity kind %d is not in the round-trip model", k);
    ir_model_destroy(m);
}
END_TEST

START_TEST(all_ops_fixed_point)
{
    ir_model *m = all_ops_model();
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

START_TEST(all_ops_fixed_point_elided)
{
    ir_model *m = all_ops_model();
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    ir_model_destroy(m);
}
END_TEST

/* Each op alone, in a model of its own (a failure names the op). */
START_TEST(single_op_fixed_point)
{
    ir_model *big = all_ops_model();
    const ir_layer *src = NULL;
    for (size_t i = 0; i < big->n_layers && !src; i++)
        if ((int)big->layers[i].op == _i) src = &big->layers[i];
    ck_assert_ptr_nonnull(src);
    /* Rebuild just this layer: its inputs become graph inputs / constants of the same shape. */
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, ir_op_get_info(src->op)->name, &m));
    const char *in[16], *out[16];
    for (size_t k = 0; k < src->n_inputs; k++) {
        in[k] = NULL;
        if (src->inputs[k] < 0) continue;
        const ir_tensor *t = &big->tensors[src->inputs[k]];
        in[k] = t->name;
        if (t->kind == IR_TENSOR_CONST) {
            size_t n = ir_tensor_numel(t);
            float *d = pdc_alloc(ctx, n * sizeof *d);
            memcpy(d, t->data, n * sizeof *d);
            ck_assert_ok(ctx, ir_model_add_constant_owned(m, t->name, t->rank, t->dims, d));
            ir_sparsity s;
            ck_assert_ok(ctx, ir_sparsity_copy(ctx, &s, &t->sparsity));
            ck_assert_ok(ctx, ir_model_set_sparsity(m, ir_model_find_tensor(m, t->name), &s));
        } else if (ir_model_find_tensor(m, t->name) < 0) {
            add_input(m, t->name, t->rank, t->dims);
        }
    }
    for (size_t k = 0; k < src->n_outputs; k++)
        out[k] = src->outputs[k] < 0 ? NULL : big->tensors[src->outputs[k]].name;
    add_op(m, src->name, src->op, src->n_inputs, in, src->n_outputs, out, &src->attrs);
    ck_assert_ok(ctx, ir_model_mark_output(m, out[0]));
    assert_fixed_point(m, 0);
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    ir_model_destroy(m);
    ir_model_destroy(big);
}
END_TEST

/* Each sparsity kind alone, on a weight of the shape it applies to. */
START_TEST(each_sparsity_kind_fixed_point)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "sparse", &m));
    add_input(m, "x", DIMS(1, 3, 5, 5));
    add_const(m, "w", 21, DIMS(6, 3, 3, 3));
    const uint64_t pats[] = {0x1ff, 0x010, 0x145, 0x0aa};
    switch (_i) {
    case IR_SPARSITY_NONE: break;
    case IR_SPARSITY_PATTERN: set_pattern(m, "w", 3, 3, 4, pats, 5); break;
    case IR_SPARSITY_BLOCK: set_block(m, "w", 4, 5, 6); break; /* 6x27 matrix: partial edge blocks */
    case IR_SPARSITY_UNSTRUCTURED: set_unstructured(m, "w", 7); break;
    }
    ck_assert_int_eq(tensor(m, "w")->sparsity.kind, _i);
    add_op(m, "conv", IR_OP_CONV, NAMES("x", "w", NULL), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "y"));
    assert_fixed_point(m, 0);
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    char *text = print_ok(m, 0);
    static const char *const expect[] = {"= [", "  sparsity pattern 3x3 patterns=[0x1ff, 0x10, 0x145, 0xaa] kernels=[",
                                         "  sparsity block 4x5 mask=\"", "  sparsity unstructured mask=\""};
    assert_contains(text, expect[_i]);
    if (_i == IR_SPARSITY_NONE) ck_assert_ptr_null(strstr(text, "sparsity"));
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* Layers fed by a symbolic input have unknown shapes: printed without a type, and still a fixed point. */
START_TEST(symbolic_input_fixed_point)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "sym", &m));
    add_input(m, "x", DIMS(-1, 3, 8, 8));
    add_const(m, "w", 1, DIMS(4, 3, 1, 1));
    add_op(m, "conv", IR_OP_CONV, NAMES("x", "w"), NAMES("y"), NULL);
    add_op(m, "relu", IR_OP_RELU, NAMES("y"), NAMES("z"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));
    char *text = print_ok(m, 0);
    assert_contains(text, "input x : f32[?,3,8,8]\n");
    assert_contains(text, "layer conv = conv(x, w) -> (y)\n");
    assert_contains(text, "layer relu = relu(y) -> (z)\n");
    pdc_free(text);
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

/* The exact canonical text of a small model (the format documented in docs/ir.md). */
START_TEST(canonical_text_of_small_model)
{
    ir_model *m;
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_model_create(ctx, "tiny", &m));
    add_input(m, "x", DIMS(1, 4));
    float *w = pdc_alloc(ctx, 8 * sizeof *w);
    const float wv[8] = {0.5f, -1.0f, 0.0f, 2.25f, 1e-5f, 3.0f, -0.0f, 100.0f};
    memcpy(w, wv, sizeof wv);
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", DIMS(2, 4), w));
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = 8};
    s.mask = pdc_alloc(ctx, 8);
    memcpy(s.mask, (const uint8_t[]){1, 1, 0, 1, 1, 1, 1, 1}, 8);
    ck_assert_ok(ctx, ir_model_set_sparsity(m, ir_model_find_tensor(m, "w"), &s));
    add_op(m, "fc", IR_OP_FC, NAMES("x", "w", NULL), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", INFINITY));
    add_op(m, "onnx::Clip_3", IR_OP_CLIP, NAMES("y"), NAMES("z"), &a);
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));

    char *text = print_ok(m, 0);
    ck_assert_str_eq(text, "pdcir 1\n"
                           "model \"tiny\"\n"
                           "input x : f32[1,4]\n"
                           "const w : f32[2,4] = [0.5, -1, 0, 2.25, 1e-05, 3, -0, 100]\n"
                           "  sparsity unstructured mask=\"11011111\"\n"
                           "layer fc = fc(x, w, -) -> (y : f32[1,2])\n"
                           "layer \"onnx::Clip_3\" = clip(y) -> (z : f32[1,2]) {min=0.0, max=inf}\n"
                           "output z\n");
    pdc_free(text);
    text = print_ok(m, PDC_PRINT_ELIDE_WEIGHTS);
    assert_contains(text, "const w : f32[2,4] = dense<elided>\n  sparsity unstructured mask=\"11011111\"\n");
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

START_TEST(attribute_and_name_spelling)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    assert_contains(text, "model \"all \\\"ops\\\"\\\\model\"\n");
    assert_contains(text, "{epsilon=1e-05}");
    assert_contains(text, "{min=-inf, max=inf}");
    assert_contains(text, "{min=0.0, max=6.0}");
    assert_contains(text, "{alpha=0.01}");
    assert_contains(text, "{alpha=0.5, beta=2.0, transA=0, transB=0}");
    assert_contains(text, "f_big=1e+10, f_int=1e+08, f_negzero=-0.0, f_tiny=1.4013e-45, f_third=0.33333334}");
    assert_contains(text, "{big=-9223372036854775808, big2=9223372036854775807}");
    assert_contains(text, "{empty=[]}");
    assert_contains(text, "{note=\"q\\\"b\\\\n\\nt\\tc\\x01 d\\x7f utf8 \xc3\xa7 # not a comment\"}");
    assert_contains(text, "{strides=[1,1], pads=[1,1,1,1], dilations=[1,1], group=1}");
    assert_contains(text,
                    "layer /layer1/Conv = conv(x, \"onnx::Conv_12\", cb) -> (/layer1/Conv_output_0 : f32[1,4,6,6])");
    assert_contains(text, "layer lstm = lstm(seq, lw, lr, lb, -, h0, \"c\xc3\xa7" "0\") -> "
                          "(\"-\" : f32[5,1,1,4], -, lyc : f32[1,1,4])"
                          " {hidden_size=4, direction=\"forward\"}\n");
    assert_contains(text, "layer gru = gru(seq, gw, gr, gbias) -> (gy : f32[5,2,1,4], gyh : f32[2,1,4])");
    assert_contains(text, "layer \"with space\" = relu(sm) -> (\"sp ace\" : f32[1,9,3])\n");
    assert_contains(text, "const scalar : f32[] = [");
    assert_contains(text, "const specials : f32[9] = [0.1, -0, 1.4013e-45, 3.4028235e+38, -3.4028235e+38, 0.33333334, "
                          "16777216, 1.1754944e-38, 1.2345679e+08]\n");
    assert_contains(text, "output \"sp ace\"\noutput go\noutput gp\noutput \"-\"\noutput lyc\n");
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* inf, -inf and nan weights survive (NaN prints as "nan"). */
START_TEST(nonfinite_weights_round_trip)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "nf", &m));
    add_input(m, "x", DIMS(1, 3));
    float *d = pdc_alloc(ctx, 3 * sizeof *d);
    d[0] = INFINITY;
    d[1] = -INFINITY;
    d[2] = -NAN;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "c", DIMS(1, 3), d));
    add_op(m, "add", IR_OP_ADD, NAMES("x", "c"), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "y"));
    char *text = print_ok(m, 0);
    assert_contains(text, "const c : f32[1,3] = [inf, -inf, nan]\n");
    ir_model *m2 = parse_ok(text);
    const float *p = tensor(m2, "c")->data;
    ck_assert(isinf(p[0]) && p[0] > 0);
    ck_assert(isinf(p[1]) && p[1] < 0);
    ck_assert(isnan(p[2]));
    assert_fixed_point(m, 0);
    ir_model_destroy(m2);
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* ---------------------------------------------------------------- printed text, parsed back */

START_TEST(elided_weights_parse_as_zeros)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, PDC_PRINT_ELIDE_WEIGHTS);
    ck_assert_ptr_null(strstr(text, "= [")); /* no weight leaked into the text */
    ir_model *m2 = parse_ok(text);
    size_t consts = 0;
    for (size_t i = 0; i < m2->n_tensors; i++) {
        const ir_tensor *t = &m2->tensors[i];
        if (t->kind != IR_TENSOR_CONST) continue;
        consts++;
        size_t n = ir_tensor_numel(t);
        ck_assert_uint_gt(n, 0);
        for (size_t k = 0; k < n; k++)
            ck_assert_msg(t->data[k] == 0.0f, "%s[%zu] = %g", t->name, k, (double)t->data[k]);
    }
    ck_assert_uint_eq(consts, 21);
    /* Printed in full, the zeros show. */
    char *full = print_ok(m2, 0);
    assert_contains(full, "const cb : f32[4] = [0, 0, 0, 0]\n");
    pdc_free(full);
    pdc_free(text);
    ir_model_destroy(m2);
    ir_model_destroy(m);
}
END_TEST

/* Every prefix of a valid text and many corrupted copies: never a crash or leak, and a model is
 * returned only on success. */
START_TEST(truncated_and_corrupted_text_never_crashes)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    ir_model_destroy(m);
    size_t len = strlen(text);
    size_t ok = 0, failed = 0;
    for (size_t n = 0; n < len; n += (n < 2000 ? 1 : 37)) {
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, text, n, &out);
        if (st == PDC_OK) {
            ok++;
            ck_assert_ptr_nonnull(out);
            ir_model_destroy(out);
        } else {
            failed++;
            ck_assert_ptr_null(out);
            ck_assert_msg(!strncmp(pdc_context_last_error(ctx), "line ", 5), "prefix %zu: message \"%s\"", n,
                          pdc_context_last_error(ctx));
        }
    }
    ck_assert_uint_gt(ok, 0);   /* e.g. cut right after a complete line */
    ck_assert_uint_gt(failed, 0);
    char *copy = pdc_alloc(ctx, len + 1);
    uint32_t x = 12345;
    static const char junk[] = "\"\\#-?,:=[](){}<>0x9e.\n \t\0abc";
    for (int iter = 0; iter < 400; iter++) {
        memcpy(copy, text, len + 1);
        for (int k = 0; k < 3; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            copy[x % len] = junk[(x >> 16) % (sizeof junk - 1)];
        }
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, copy, len, &out);
        if (st == PDC_OK) {
            char *again = print_ok(out, 0);
            pdc_free(again);
            ir_model_destroy(out);
        } else {
            ck_assert_ptr_null(out);
        }
    }
    pdc_free(copy);
    pdc_free(text);
}
END_TEST

/* Allocation failures at every size limit: the status is OUT_OF_MEMORY and nothing leaks. */
START_TEST(allocation_failures_are_clean)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    ir_model_destroy(m);
    int saw_oom = 0, saw_ok = 0;
    for (size_t limit = 1; limit <= (1u << 16); limit *= 2) {
        char opt[32];
        snprintf(opt, sizeof opt, "%zu", limit);
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", opt));
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, text, strlen(text), &out);
        ck_assert_msg(st == PDC_OK || st == PDC_ERR_OUT_OF_MEMORY, "limit %zu: %s: %s", limit, pdc_status_string(st),
                      pdc_context_last_error(ctx));
        if (st == PDC_OK) {
            saw_ok = 1;
            char *again = NULL;
            st = ir_print(out, 0, &again);
            ck_assert(st == PDC_OK || st == PDC_ERR_OUT_OF_MEMORY);
            pdc_free(again);
            ir_model_destroy(out);
        } else {
            saw_oom = 1;
            ck_assert_ptr_null(out);
        }
    }
    ck_assert(saw_oom && saw_ok);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    pdc_free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ir_text_print");
    TCase *tc = test_add_tcase(s, "round_trip", ctx_setup, ctx_teardown, 120,
                               TEST_LIST(all_ops_model_covers_every_op_and_sparsity_kind, all_ops_fixed_point,
                                         all_ops_fixed_point_elided));
    tcase_add_loop_test(tc, single_op_fixed_point, 0, IR_OP_COUNT);
    tcase_add_loop_test(tc, each_sparsity_kind_fixed_point, 0, 4);
    test_add_tests(tc, TEST_LIST(symbolic_input_fixed_point, canonical_text_of_small_model,
                                 attribute_and_name_spelling, nonfinite_weights_round_trip));
    test_add_tcase(s, "parse", ctx_setup, ctx_teardown, 300,
                   TEST_LIST(elided_weights_parse_as_zeros, truncated_and_corrupted_text_never_crashes,
                             allocation_failures_are_clean));
    return test_run_suite(s);
}
