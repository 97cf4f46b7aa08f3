/*
 * test_ref_eltwise.c - the reference backend's elementwise and shape ops against hand-computed values:
 * batchnorm, the activations (relu, clip, leaky_relu, sigmoid, tanh, hardswish, hardsigmoid, with and
 * without their attributes), add/sub/mul/div with broadcasting (and IEEE division by zero), concat,
 * flatten, reshape, transpose and softmax.
 *
 * Every model is built with the public builder API, compiled for "ref" and run through
 * pdc_program_run (test/common/expect.h). Expected numbers are worked out by hand (the arithmetic is in
 * the comments).
 */
#include <stdint.h>

#include "test/common/testutil.h"
#include "test/common/expect.h"

/* ------------------------------------------------------------------ batchnorm */

/* y = batchnorm(x; s, b, m, v) with attrs a (may be NULL), the statistics constants of shape [C]; y of
 * x's shape. */
static void batchnorm_case(pdc_attrs *a, size_t xr, const int64_t *xd, const float *x, const float *s, const float *b,
                           const float *m, const float *v, const float *want)
{
    input("x", xr, xd);
    constant("s", SHAPE(xd[1]), s);
    constant("b", SHAPE(xd[1]), b);
    constant("m", SHAPE(xd[1]), m);
    constant("v", SHAPE(xd[1]), v);
    layer("batchnorm", a, "y", NAMES("x", "s", "b", "m", "v"));
    run1(x, xr, xd, want);
}

START_TEST(batchnorm_values)
{
    /* epsilon .25: channel 0 var 3.75 -> sd 2, scale 1, bias 0, mean 1: (x-1)/2
     *              channel 1 var 0    -> sd .5, scale 2, bias 1, mean 3: (x-3)*4+1
     * n=0: [1,2] -> 0, .5; [3,4] -> 1, 5;  n=1: [5,6] -> 2, 2.5; [7,8] -> 17, 21 */
    batchnorm_case(set_float(attrs(), "epsilon", 0.25f), SHAPE(2, 2, 1, 2), F(1, 2, 3, 4, 5, 6, 7, 8), F(1, 2), F(0, 1),
                   F(1, 3), F(3.75f, 0), F(0, 0.5f, 1, 5, 2, 2.5f, 17, 21));
}
END_TEST

START_TEST(batchnorm_default_epsilon)
{
    /* var = 1 - 1e-5, default epsilon 1e-5 -> sd 1: y = (x - mean) * scale + bias on a rank-2 input */
    batchnorm_case(NULL, SHAPE(1, 3), F(3, 3, 3), F(1, 2, 3), F(0, 0, 1), F(1, 1, 1), F(1 - 1e-5f, 1 - 1e-5f, 1 - 1e-5f),
                   F(2, 4, 7));
}
END_TEST

/* ------------------------------------------------------------------ activations */

/* y = op(x) over [1, n]. */
static void unary_case(const char *op, pdc_attrs *a, int64_t n, const float *x, const float *want)
{
    op1_case(op, a, SHAPE(1, n), x, SHAPE(1, n), want);
}

START_TEST(act_relu)
{
    unary_case("relu", NULL, 5, F(-2, -0.5f, 0, 0.5f, 3), F(0, 0, 0, 0.5f, 3));
}
END_TEST

START_TEST(act_clip_relu6)
{
    unary_case("clip", set_float(set_float(attrs(), "min", 0), "max", 6), 5, F(-1, 0, 3, 6, 7), F(0, 0, 3, 6, 6));
}
END_TEST

START_TEST(act_clip_max_only)
{
    unary_case("clip", set_float(attrs(), "max", 1), 3, F(-5, 0.5f, 2), F(-5, 0.5f, 1));
}
END_TEST

START_TEST(act_clip_no_bounds)
{
    unary_case("clip", NULL, 3, F(-100, 0, 1e30f), F(-100, 0, 1e30f));
}
END_TEST

START_TEST(act_leaky_relu)
{
    unary_case("leaky_relu", set_float(attrs(), "alpha", 0.1f), 3, F(-2, 0, 2), F(-0.2f, 0, 2));
}
END_TEST

START_TEST(act_leaky_relu_default)
{
    /* default alpha 0.01 */
    unary_case("leaky_relu", NULL, 2, F(-100, 5), F(-1, 5));
}
END_TEST

START_TEST(act_sigmoid)
{
    /* sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4; saturates without overflow at +-100 */
    float l3 = logf(3.0f);
    unary_case("sigmoid", NULL, 5, F(0, l3, -l3, 100, -100), F(0.5f, 0.75f, 0.25f, 1, 0));
}
END_TEST

START_TEST(act_tanh)
{
    /* tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6 */
    float l2 = logf(2.0f);
    unary_case("tanh", NULL, 4, F(0, l2, -l2, 20), F(0, 0.6f, -0.6f, 1));
}
END_TEST

START_TEST(act_hardswish)
{
    /* x * clip(x+3, 0, 6) / 6: -4 -> 0, -3 -> 0, -1 -> -1*2/6, 0 -> 0, 1 -> 4/6, 3 -> 3, 4 -> 4 */
    unary_case("hardswish", NULL, 7, F(-4, -3, -1, 0, 1, 3, 4), F(0, 0, -1.0f / 3, 0, 2.0f / 3, 3, 4));
}
END_TEST

START_TEST(act_hardsigmoid_default)
{
    /* max(0, min(1, 0.2x + 0.5)): -3 -> 0 (-0.1 clamps), -2.5 -> 0, 0 -> 0.5, 1 -> 0.7, 2.5 -> 1, 4 -> 1 */
    unary_case("hardsigmoid", NULL, 6, F(-3, -2.5f, 0, 1, 2.5f, 4), F(0, 0, 0.5f, 0.7f, 1, 1));
}
END_TEST

START_TEST(act_hardsigmoid_alpha_beta)
{
    /* alpha 1/6, beta 0.5 (PyTorch's Hardsigmoid): -3 -> 0, -1.5 -> 0.25, 0 -> 0.5, 1.5 -> 0.75, 3 -> 1, 9 -> 1 */
    pdc_attrs *a = set_float(set_float(attrs(), "alpha", 1.0f / 6.0f), "beta", 0.5f);
    unary_case("hardsigmoid", a, 6, F(-3, -1.5f, 0, 1.5f, 3, 9), F(0, 0.25f, 0.5f, 0.75f, 1, 1));
}
END_TEST

/* ------------------------------------------------------------------ add, sub, mul, div */

START_TEST(add_row_broadcast)
{
    /* [2,3] + [3] */
    binary_case("add", NULL, SHAPE(2, 3), F(1, 2, 3, 4, 5, 6), SHAPE(3), F(10, 20, 30), SHAPE(2, 3),
                F(11, 22, 33, 14, 25, 36));
}
END_TEST

START_TEST(mul_outer_broadcast)
{
    /* [2,1] * [1,3] -> [2,3] outer product of [2,3] and [1,10,100] */
    binary_case("mul", NULL, SHAPE(2, 1), F(2, 3), SHAPE(1, 3), F(1, 10, 100), SHAPE(2, 3), F(2, 20, 200, 3, 30, 300));
}
END_TEST

START_TEST(add_rank3_broadcast)
{
    /* a [2,1,2] + b [3,1] -> [2,3,2]: y[i][j][k] = a[i][0][k] + b[j][0]
     * a = [[1,2]],[[3,4]], b = 10,20,30 */
    binary_case("add", NULL, SHAPE(2, 1, 2), F(1, 2, 3, 4), SHAPE(3, 1), F(10, 20, 30), SHAPE(2, 3, 2),
                F(11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34));
}
END_TEST

START_TEST(mul_same_shape_and_scalar_like)
{
    /* y1 = a * a (same shape); y2 = [1] * a (rank-1 size-1 broadcasts everywhere, on the left) */
    input("a", SHAPE(2, 2));
    constant("k", SHAPE(1), F(-2));
    layer("mul", NULL, "y1", NAMES("a", "a"));
    layer("mul", NULL, "y2", NAMES("k", "a"));
    run_expect(INS(F(1, 2, 3, 4)), OUTS({"y1", SHAPE(2, 2), F(1, 4, 9, 16)}, {"y2", SHAPE(2, 2), F(-2, -4, -6, -8)}));
}
END_TEST

START_TEST(add_nchw_channel_bias)
{
    /* [1,2,2,2] + [2,1,1] (per-channel) */
    binary_case("add", NULL, SHAPE(1, 2, 2, 2), F(1, 2, 3, 4, 5, 6, 7, 8), SHAPE(2, 1, 1), F(100, 200),
                SHAPE(1, 2, 2, 2), F(101, 102, 103, 104, 205, 206, 207, 208));
}
END_TEST

START_TEST(sub_broadcast_both_sides)
{
    /* a [2,1] - b [3]: y[i][j] = a[i] - b[j]; a = 10, 20; b = 1, 2, 3 -> [9 8 7; 19 18 17];
     * b - a (operands swapped) is the negation: order matters */
    input("a", SHAPE(2, 1));
    constant("b", SHAPE(3), F(1, 2, 3));
    layer("sub", NULL, "y1", NAMES("a", "b"));
    layer("sub", NULL, "y2", NAMES("b", "a"));
    run_expect(INS(F(10, 20)), OUTS({"y1", SHAPE(2, 3), F(9, 8, 7, 19, 18, 17)},
                                    {"y2", SHAPE(2, 3), F(-9, -8, -7, -19, -18, -17)}));
}
END_TEST

START_TEST(div_channel_and_ieee)
{
    /* [1,2,2] / [2,1] per row: row 0 / 4, row 1 / -2; then x / 0 follows IEEE (+inf, -inf, nan) */
    input("a", SHAPE(1, 2, 2));
    constant("d", SHAPE(2, 1), F(4, -2));
    constant("z", SHAPE(1), F(0));
    layer("div", NULL, "y1", NAMES("a", "d"));
    layer("div", NULL, "y2", NAMES("a", "z"));
    output("y1");
    output("y2");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    float x[4] = {2, -6, 0, 8}, y1[4], y2[4];
    int64_t dims[] = {1, 2, 2};
    pdc_tensor *tx, *t1, *t2;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 3, dims, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 3, dims, y1, &t1));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 3, dims, y2, &t2));
    pdc_tensor *outs[] = {t1, t2};
    ck_assert_ok(ctx, pdc_program_run(prog, 1, &tx, 2, outs));
    ck_assert_floats_near(y1, F(0.5f, -1.5f, -0.0f, -4), 4, TOL);
    ck_assert(isinf(y2[0]) && y2[0] > 0);
    ck_assert(isinf(y2[1]) && y2[1] < 0);
    ck_assert(isnan(y2[2]));
    ck_assert(isinf(y2[3]) && y2[3] > 0);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(t1);
    pdc_tensor_destroy(t2);
    pdc_program_destroy(prog);
}
END_TEST

/* ------------------------------------------------------------------ concat */

START_TEST(concat_axis1)
{
    /* [2,1] ++ [2,2] along axis 1: rows [1 | 3 4], [2 | 5 6] */
    binary_case("concat", set_int(attrs(), "axis", 1), SHAPE(2, 1), F(1, 2), SHAPE(2, 2), F(3, 4, 5, 6), SHAPE(2, 3),
                F(1, 3, 4, 2, 5, 6));
}
END_TEST

START_TEST(concat_negative_axis)
{
    /* [2,1,1] ++ [2,1,2] along axis -1 (= 2) */
    binary_case("concat", set_int(attrs(), "axis", -1), SHAPE(2, 1, 1), F(1, 2), SHAPE(2, 1, 2), F(3, 4, 5, 6),
                SHAPE(2, 1, 3), F(1, 3, 4, 2, 5, 6));
}
END_TEST

START_TEST(concat_axis0_three_inputs)
{
    /* [1,2] ++ [2,2] ++ [1,2] along axis 0 (given as -2) */
    input("a", SHAPE(1, 2));
    constant("b", SHAPE(2, 2), F(3, 4, 5, 6));
    constant("c", SHAPE(1, 2), F(7, 8));
    layer("concat", set_int(attrs(), "axis", -2), "y", NAMES("a", "b", "c"));
    run1(F(1, 2), SHAPE(4, 2), F(1, 2, 3, 4, 5, 6, 7, 8));
}
END_TEST

/* ------------------------------------------------------------------ flatten, reshape, transpose */

START_TEST(flatten_axes)
{
    /* x = 1..12 */
    input("x", SHAPE(2, 3, 2));
    layer("flatten", NULL, "y1", NAMES("x"));
    layer("flatten", set_int(attrs(), "axis", 2), "y2", NAMES("x"));
    layer("flatten", set_int(attrs(), "axis", 0), "y0", NAMES("x"));
    run_expect(INS(seq), OUTS({"y1", SHAPE(2, 6), seq}, {"y2", SHAPE(6, 2), seq}, {"y0", SHAPE(1, 12), seq}));
}
END_TEST

START_TEST(reshape_zero_and_minus_one)
{
    /* x = 1..12 */
    input("x", SHAPE(2, 3, 2));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(0, -1)), "y1", NAMES("x"));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(4, -1)), "y2", NAMES("x"));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(0, 0, 1, 2)), "y3", NAMES("x"));
    run_expect(INS(seq), OUTS({"y1", SHAPE(2, 6), seq}, {"y2", SHAPE(4, 3), seq}, {"y3", SHAPE(2, 3, 1, 2), seq}));
}
END_TEST

START_TEST(transpose_default_and_perm)
{
    /* default perm reverses: [[1,2,3],[4,5,6]] -> [[1,4],[2,5],[3,6]] */
    op1_case("transpose", NULL, SHAPE(2, 3), F(1, 2, 3, 4, 5, 6), SHAPE(3, 2), F(1, 4, 2, 5, 3, 6));
}
END_TEST

START_TEST(transpose_nchw_to_nhwc)
{
    /* x[0][c][h][w] = 6c + 3h + w (C=2, H=2, W=3); perm [0,2,3,1] -> y[0][h][w][c] */
    op1_case("transpose", set_ints(attrs(), "perm", SHAPE(0, 2, 3, 1)), SHAPE(1, 2, 2, 3),
             F(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), SHAPE(1, 2, 3, 2), F(0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11));
}
END_TEST

START_TEST(transpose_rank3)
{
    /* x [2,3,4], x[i][j][k] = 12i + 4j + k; perm [2,0,1] -> y [4,2,3], y[k][i][j] = x[i][j][k] */
    float x[24], want[24];
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) want[(k * 2 + i) * 3 + j] = (float)(12 * i + 4 * j + k);
    op1_case("transpose", set_ints(attrs(), "perm", SHAPE(2, 0, 1)), SHAPE(2, 3, 4), x, SHAPE(4, 2, 3), want);
}
END_TEST

/* ------------------------------------------------------------------ softmax */

START_TEST(softmax_last_axis)
{
    /* exp(0), exp(ln2), exp(ln3) = 1, 2, 3 -> 1/6, 1/3, 1/2; a row of 1000s is uniform (no overflow) */
    float l2 = logf(2.0f), l3 = logf(3.0f);
    op1_case("softmax", NULL, SHAPE(2, 3), F(0, l2, l3, 1000, 1000, 1000), SHAPE(2, 3),
             F(1.0f / 6, 1.0f / 3, 0.5f, 1.0f / 3, 1.0f / 3, 1.0f / 3));
}
END_TEST

START_TEST(softmax_axis0)
{
    /* columns [0, ln3] -> [1/4, 3/4] and [0, 1000] -> [0, 1] */
    float l3 = logf(3.0f);
    op1_case("softmax", set_int(attrs(), "axis", 0), SHAPE(2, 2), F(0, 0, l3, 1000), SHAPE(2, 2), F(0.25f, 0, 0.75f, 1));
}
END_TEST

START_TEST(softmax_middle_axis)
{
    /* x [1,2,2], axis 1: for each last index j the pair (x[0][0][j], x[0][1][j]) = (0, ln3) */
    float l3 = logf(3.0f);
    op1_case("softmax", set_int(attrs(), "axis", 1), SHAPE(1, 2, 2), F(0, 0, l3, l3), SHAPE(1, 2, 2),
             F(0.25f, 0.25f, 0.75f, 0.75f));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ref_eltwise");
    test_add_tcase(s, "norm_act", ref_setup, mb_close, 0,
                   TEST_LIST(batchnorm_values, batchnorm_default_epsilon, act_relu, act_clip_relu6, act_clip_max_only,
                             act_clip_no_bounds, act_leaky_relu, act_leaky_relu_default, act_sigmoid, act_tanh,
                             act_hardswish, act_hardsigmoid_default, act_hardsigmoid_alpha_beta));
    test_add_tcase(s, "binary_shape", ref_setup, mb_close, 0,
                   TEST_LIST(add_row_broadcast, mul_outer_broadcast, add_rank3_broadcast, mul_same_shape_and_scalar_like,
                             add_nchw_channel_bias, sub_broadcast_both_sides, div_channel_and_ieee, concat_axis1,
                             concat_negative_axis, concat_axis0_three_inputs, flatten_axes, reshape_zero_and_minus_one,
                             transpose_default_and_perm, transpose_nchw_to_nhwc, transpose_rank3, softmax_last_axis,
                             softmax_axis0, softmax_middle_axis));
    return test_run_suite(s);
}
