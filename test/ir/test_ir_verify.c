/*
 * test_ir_verify.c - the verifier and shape inference, through the internal IR: each broken fact
 * is planted by hand in an otherwise valid model and must be reported with the layer or tensor
 * name; shape inference is checked against hand-computed shapes for every op family.
 */
#include <math.h>

#include "ir/ir.h"
#include "ir/ops/params.h"
#include "test/common/internals.h"

/* x[1,4,6,6] -> conv(w[8,4,3,3], stride 2, pad 1) -> y -> relu -> z (output) */
static ir_model *valid_model(void)
{
    ir_model *m = new_model("v");
    add_input(m, "x", DIMS(1, 4, 6, 6));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", DIMS(8, 4, 3, 3), NULL));
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, (int64_t[]){2, 2}));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "pads", 4, (int64_t[]){1, 1, 1, 1}));
    const char *in[] = {"x", "w"}, *out[] = {"y"}, *rin[] = {"y"}, *rout[] = {"z"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "conv", IR_OP_CONV, 2, in, 1, out, &a));
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_model_add_layer(m, "relu", IR_OP_RELU, 1, rin, 1, rout, NULL));
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));
    ck_assert_ok(ctx, ir_verify(m));
    return m;
}

/* ir_verify(m) fails with `status` and a message that says `needle`; m is destroyed. */
static void assert_refused(ir_model *m, pdc_status status, const char *needle)
{
    ck_assert_status(ctx, ir_verify(m), status);
    ck_assert_error_has(ctx, needle);
    ir_model_destroy(m);
}

START_TEST(valid_model_shapes)
{
    ir_model *m = valid_model();
    const ir_tensor *y = &m->tensors[ir_model_find_tensor(m, "y")];
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->dims[1], 8);
    ck_assert_int_eq(y->dims[2], 3); /* (6 + 2 - 3) / 2 + 1 */
    ck_assert_int_eq(y->dims[3], 3);
    ir_model_destroy(m);
}
END_TEST

START_TEST(wrong_stored_shape_is_reported)
{
    ir_model *m = valid_model();
    m->tensors[ir_model_find_tensor(m, "z")].dims[2] = 4;
    ck_assert_status(ctx, ir_verify(m), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "layer 'relu': output 'z' has shape 1x8x4x3 but the op gives 1x8x3x3");
    /* The verifier restored what it found. */
    ck_assert_int_eq(m->tensors[ir_model_find_tensor(m, "z")].dims[2], 4);
    ir_model_destroy(m);
}
END_TEST

START_TEST(use_before_definition_is_reported)
{
    ir_model *m = valid_model();
    /* relu now reads its own output: a cycle */
    m->layers[1].inputs[0] = ir_model_find_tensor(m, "z");
    assert_refused(m, PDC_ERR_INVALID_MODEL, "layer 'relu' uses 'z' before layer 'relu' produces it");
}
END_TEST

START_TEST(duplicate_and_orphan_tensors_are_reported)
{
    ir_model *m = valid_model();
    pdc_free(m->tensors[1].name);
    m->tensors[1].name = pdc_strdup(ctx, "x");
    assert_refused(m, PDC_ERR_INVALID_MODEL, "tensor 'x' is defined twice");

    m = valid_model();
    m->tensors[ir_model_find_tensor(m, "y")].producer = 1;
    assert_refused(m, PDC_ERR_INVALID_MODEL, "tensor 'y' claims layer 'relu' as producer");
}
END_TEST

START_TEST(pruned_weight_must_be_zero)
{
    ir_model *m = valid_model();
    int w = ir_model_find_tensor(m, "w");
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = 288};
    s.mask = pdc_calloc(ctx, 288, 1);
    ck_assert_ok(ctx, ir_model_set_sparsity(m, w, &s));
    ck_assert_ok(ctx, ir_verify(m));
    m->tensors[w].data[17] = 0.5f; /* corrupt a pruned weight behind the IR's back */
    assert_refused(m, PDC_ERR_INVALID_MODEL, "tensor 'w': element 17 is 0.5");
}
END_TEST

/* Pattern and block sparsity are checked by their structure (not a mask per element): the first offending
 * element is named, whatever kernel, block or edge it sits in; -0 is a zero, NaN is not. */
START_TEST(pruned_weight_found_by_structure)
{
    ir_model *m = valid_model();
    int w = ir_model_find_tensor(m, "w");
    float *d = m->tensors[w].data;
    ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kh = 3, .kw = 3, .n_patterns = 2, .n_kernels = 32};
    const uint64_t pats[2] = {0x1d0 /* taps 4, 6, 7, 8 */, 0x00b /* taps 0, 1, 3 */};
    int32_t ids[32];
    for (int k = 0; k < 32; k++) ids[k] = k % 5 == 4 ? -1 : k % 2;
    s.patterns = pdc_alloc(ctx, sizeof pats);
    s.kernel_pattern = pdc_alloc(ctx, sizeof ids);
    memcpy(s.patterns, pats, sizeof pats);
    memcpy(s.kernel_pattern, ids, sizeof ids);
    for (int k = 0; k < 32; k++)
        for (int t = 0; t < 9; t++) d[k * 9 + t] = ids[k] >= 0 && pats[ids[k]] >> t & 1 ? 1.0f + (float)t : 0.0f;
    ck_assert_ok(ctx, ir_model_set_sparsity(m, w, &s));
    d[13 * 9 + 2] = -0.0f; /* kernel 13 (pattern 1) drops tap 2: a negative zero is a zero */
    ck_assert_ok(ctx, ir_verify(m));
    d[14 * 9 + 5] = 0.25f; /* kernel 14 is pruned whole */
    d[20 * 9 + 2] = 3.0f;  /* a later offender: the first is named */
    ck_assert_status(ctx, ir_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "tensor 'w': element 131 is 0.25");
    d[14 * 9 + 5] = 0.0f;
    d[20 * 9 + 2] = NAN;
    assert_refused(m, PDC_ERR_INVALID_MODEL, "element 182 is nan");

    /* block: the [8, 36] matrix view in 3x5 blocks, edges partial both ways (8 = 3+3+2 rows, 36 = 7*5+1) */
    m = valid_model();
    w = ir_model_find_tensor(m, "w");
    d = m->tensors[w].data;
    ir_sparsity b = {.kind = IR_SPARSITY_BLOCK, .bh = 3, .bw = 5, .n_blocks = 24};
    b.block_mask = pdc_calloc(ctx, 24, 1);
    for (int i = 0; i < 24; i++) b.block_mask[i] = i % 3 == 0;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 36; c++) d[r * 36 + c] = b.block_mask[(r / 3) * 8 + c / 5] ? 1.0f : 0.0f;
    ck_assert_ok(ctx, ir_model_set_sparsity(m, w, &b));
    ck_assert_ok(ctx, ir_verify(m));
    d[7 * 36 + 35] = 2.0f; /* row 7, column 35: block (2, 7), the corner, pruned (2*8+7 = 23) */
    assert_refused(m, PDC_ERR_INVALID_MODEL, "tensor 'w': element 287 is 2");
}
END_TEST

START_TEST(model_without_outputs_is_reported)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "empty", &m));
    assert_refused(m, PDC_ERR_INVALID_MODEL, "has no outputs");
}
END_TEST

/* Adds layer `op` over the named inputs and returns the output shape as text. */
static const char *infer(ir_model *m, ir_op op, size_t n_in, const char *const *in, const ir_attrs *a)
{
    static char buf[128];
    static int k;
    char name[32], out[32];
    snprintf(name, sizeof name, "l%d", k);
    snprintf(out, sizeof out, "t%d", k++);
    const char *outs[] = {out};
    pdc_status st = ir_model_add_layer(m, name, op, n_in, in, 1, outs, a);
    if (st) return pdc_context_last_error(ctx);
    const ir_tensor *t = &m->tensors[ir_model_find_tensor(m, out)];
    ir_format_shape(t->rank, t->dims, buf, sizeof buf);
    return buf;
}

START_TEST(shape_inference_per_op)
{
    ir_model *m = new_model("shapes");
    add_input(m, "x", DIMS(2, 6, 7, 9));
    add_input(m, "v", DIMS(5, 3, 4));
    add_input(m, "row", DIMS(9));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "dw", DIMS(6, 1, 3, 3), NULL));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "mw", DIMS(4, 10), NULL));
    const char *x[] = {"x"}, *xdw[] = {"x", "dw"}, *xr[] = {"x", "row"}, *vv[] = {"v", "mw"}, *xx[] = {"x", "x"};
    ir_attrs a = {0};

    /* depthwise conv, dilation 2, no pad: 7 - 4 = 3, 9 - 4 = 5 */
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "group", 6));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "dilations", 2, (int64_t[]){2, 2}));
    ck_assert_str_eq(infer(m, IR_OP_CONV, 2, xdw, &a), "2x6x3x5");
    ir_attrs_free(&a);
    /* maxpool 2x2 stride 2, floor vs ceil: 7 -> 3 or 4, 9 -> 4 or 5 */
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "kernel_shape", 2, (int64_t[]){2, 2}));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, (int64_t[]){2, 2}));
    ck_assert_str_eq(infer(m, IR_OP_MAXPOOL, 1, x, &a), "2x6x3x4");
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "ceil_mode", 1));
    ck_assert_str_eq(infer(m, IR_OP_AVGPOOL, 1, x, &a), "2x6x4x5");
    ir_attrs_free(&a);
    ck_assert_str_eq(infer(m, IR_OP_GLOBAL_AVGPOOL, 1, x, NULL), "2x6x1x1");
    ck_assert_str_eq(infer(m, IR_OP_ADD, 2, xr, NULL), "2x6x7x9");
    ck_assert_str_eq(infer(m, IR_OP_MUL, 2, xx, NULL), "2x6x7x9");
    ck_assert_str_eq(infer(m, IR_OP_FLATTEN, 1, x, NULL), "2x378");
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 0));
    ck_assert_str_eq(infer(m, IR_OP_FLATTEN, 1, x, &a), "1x756");
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "shape", 3, (int64_t[]){0, -1, 3}));
    ck_assert_str_eq(infer(m, IR_OP_RESHAPE, 1, x, &a), "2x126x3");
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "shape", 2, (int64_t[]){5, 5}));
    ck_assert_ptr_nonnull(strstr(infer(m, IR_OP_RESHAPE, 1, x, &a), "cannot reshape 'x' (2x6x7x9, 756 elements)"));
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "perm", 4, (int64_t[]){0, 2, 3, 1}));
    ck_assert_str_eq(infer(m, IR_OP_TRANSPOSE, 1, x, &a), "2x7x9x6");
    ir_attrs_free(&a);
    ck_assert_str_eq(infer(m, IR_OP_TRANSPOSE, 1, x, NULL), "9x7x6x2");
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", -1));
    ck_assert_str_eq(infer(m, IR_OP_CONCAT, 2, xx, &a), "2x6x7x18");
    ir_attrs_free(&a);
    ck_assert_str_eq(infer(m, IR_OP_MATMUL, 2, vv, NULL), "5x3x10");
    ck_assert_ptr_nonnull(strstr(infer(m, IR_OP_MATMUL, 2, (const char *[]){"v", "dw"}, NULL),
                                 "inner dimensions differ: 'v' has K=4, 'dw' has K=3"));
    ck_assert_ptr_nonnull(strstr(infer(m, IR_OP_ADD, 2, (const char *[]){"x", "v"}, NULL), "do not broadcast"));
    ir_model_destroy(m);
}
END_TEST

START_TEST(shape_inference_rnn_and_gemm)
{
    ir_model *m = new_model("rnn");
    add_input(m, "x", DIMS(7, 2, 5));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", DIMS(2, 12, 5), NULL));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "r", DIMS(2, 12, 3), NULL));
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 3));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "bidirectional"));
    const char *in[] = {"x", "w", "r"}, *out[] = {"y", "yh", "yc"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "lstm", IR_OP_LSTM, 3, in, 3, out, &a));
    char s[64];
    const ir_tensor *y = &m->tensors[ir_model_find_tensor(m, "y")];
    ir_format_shape(y->rank, y->dims, s, sizeof s);
    ck_assert_str_eq(s, "7x2x2x3");
    const ir_tensor *yc = &m->tensors[ir_model_find_tensor(m, "yc")];
    ir_format_shape(yc->rank, yc->dims, s, sizeof s);
    ck_assert_str_eq(s, "2x2x3");
    /* Same weights as a forward-only GRU: 12 = 3 gates x 4, but hidden_size 3 wants 9 rows. */
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "sideways"));
    const char *gout[] = {"g"};
    ck_assert_status(ctx, ir_model_add_layer(m, "gru", IR_OP_GRU, 3, in, 1, gout, &a), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "direction is \"sideways\"");
    ir_attrs_free(&a);

    add_input(m, "a", DIMS(4, 3));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "b", DIMS(5, 4), NULL));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transA", 1));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transB", 1));
    const char *gin[] = {"a", "b"}, *go[] = {"ab"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "gemm", IR_OP_GEMM, 2, gin, 1, go, &a));
    const ir_tensor *ab = &m->tensors[ir_model_find_tensor(m, "ab")];
    ck_assert_int_eq(ab->dims[0], 3);
    ck_assert_int_eq(ab->dims[1], 5);
    ir_attrs_free(&a);
    ir_model_destroy(m);
}
END_TEST

START_TEST(clone_is_deep)
{
    ir_model *m = valid_model(), *c;
    ck_assert_ok(ctx, ir_model_clone(m, &c));
    ck_assert_ok(ctx, ir_verify(c));
    ck_assert_ptr_ne(c->tensors[1].data, m->tensors[1].data);
    ck_assert_str_eq(c->layers[0].name, "conv");
    ir_model_destroy(m);
    ck_assert_ok(ctx, ir_verify(c));
    ir_model_destroy(c);
}
END_TEST

int main(void)
{
    return run_tests("ir_verify", ctx_setup, ctx_teardown, 0,
                     TEST_LIST(valid_model_shapes, wrong_stored_shape_is_reported, use_before_definition_is_reported,
                               duplicate_and_orphan_tensors_are_reported, pruned_weight_must_be_zero,
                               pruned_weight_found_by_structure,
                               model_without_outputs_is_reported, shape_inference_per_op,
                               shape_inference_rnn_and_gemm, clone_is_deep));
}
