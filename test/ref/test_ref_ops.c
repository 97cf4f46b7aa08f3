/*
 * test_ref_ops.c - the reference backend, op by op, against hand-computed values.
 *
 * Every model is built with the public builder API, compiled for "ref" and run through
 * pdc_program_run. Expected numbers are worked out by hand (the arithmetic is in the comments) or,
 * for the recurrent ops, by the recurrence written out with scalar math right here in the test.
 */
#include <pthread.h>
#include <stdint.h>

#include "test/common/testutil.h"

#define TOL 1e-5f

/* "rank, dims" for the builder calls: SHAPE(2, 3) -> 2, (const int64_t[]){2, 3} */
#define SHAPE(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})
#define F(...) ((const float[]){__VA_ARGS__})
#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), ((const char *const[]){__VA_ARGS__})

static pdc_context *ctx;
static pdc_model *mdl;

static void setup(void)
{
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_model_create(ctx, "ref_ops", &mdl));
}

static void teardown(void)
{
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ctx = NULL;
}

/* ------------------------------------------------------------------ builder helpers */

static void input(const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(mdl, name, rank, dims));
}

static void constant(const char *name, size_t rank, const int64_t *dims, const float *data)
{
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, data));
}

static void output(const char *name) { ck_assert_ok(ctx, pdc_model_mark_output(mdl, name)); }

static pdc_attrs *attrs(void)
{
    pdc_attrs *a = NULL;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

static pdc_attrs *set_int(pdc_attrs *a, const char *name, int64_t v)
{
    ck_assert_ok(ctx, pdc_attrs_set_int(a, name, v));
    return a;
}

static pdc_attrs *set_ints(pdc_attrs *a, const char *name, size_t n, const int64_t *v)
{
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, name, n, v));
    return a;
}

static pdc_attrs *set_float(pdc_attrs *a, const char *name, float v)
{
    ck_assert_ok(ctx, pdc_attrs_set_float(a, name, v));
    return a;
}

static pdc_attrs *set_string(pdc_attrs *a, const char *name, const char *v)
{
    ck_assert_ok(ctx, pdc_attrs_set_string(a, name, v));
    return a;
}

/* Adds a layer named after its first output; destroys attrs (which may be NULL). */
static void layer_n(const char *op, pdc_attrs *a, size_t n_out, const char *const *outs, size_t n_in,
                    const char *const *ins)
{
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, outs[0], op, n_in, ins, n_out, outs, a));
    pdc_attrs_destroy(a);
}

static void layer(const char *op, pdc_attrs *a, const char *out, size_t n_in, const char *const *ins)
{
    layer_n(op, a, 1, &out, n_in, ins);
}

/* ------------------------------------------------------------------ running */

typedef struct expect {
    size_t rank;
    const int64_t *dims;
    const float *data;
} expect;

static float *copy_floats(const float *src, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

/* Compiles the model for "ref", runs it on ins (one array per graph input, shapes from the program)
 * and checks every output's shape and values; also checks the inputs were not modified. */
static void run_expect(size_t n_in, const float *const *ins, size_t n_out, const expect *want)
{
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    size_t n;
    ck_assert_ok(ctx, pdc_program_num_inputs(prog, &n));
    ck_assert_uint_eq(n, n_in);
    ck_assert_ok(ctx, pdc_program_num_outputs(prog, &n));
    ck_assert_uint_eq(n, n_out);

    pdc_tensor *tin[8] = {0}, *tout[8] = {0};
    float *bin[8] = {0};
    size_t nin_el[8] = {0};
    ck_assert_uint_le(n_in, 8);
    ck_assert_uint_le(n_out, 8);
    for (size_t i = 0; i < n_in; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_input_info(prog, i, NULL, &rank, dims));
        size_t ne = 1;
        for (size_t d = 0; d < rank; d++) ne *= (size_t)dims[d];
        nin_el[i] = ne;
        bin[i] = copy_floats(ins[i], ne);
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, rank, dims, bin[i], &tin[i]));
    }
    for (size_t i = 0; i < n_out; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        const char *name;
        ck_assert_ok(ctx, pdc_program_output_info(prog, i, &name, &rank, dims));
        ck_assert_msg(rank == want[i].rank, "output %zu (%s): rank %zu, want %zu", i, name, rank, want[i].rank);
        for (size_t d = 0; d < rank; d++)
            ck_assert_msg(dims[d] == want[i].dims[d], "output %zu (%s): dim %zu is %lld, want %lld", i, name, d,
                          (long long)dims[d], (long long)want[i].dims[d]);
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &tout[i]));
    }
    ck_assert_ok(ctx, pdc_program_run(prog, n_in, tin, n_out, tout));
    for (size_t i = 0; i < n_out; i++)
        ck_assert_floats_near(pdc_tensor_data(tout[i]), want[i].data, pdc_tensor_size(tout[i]), TOL);
    for (size_t i = 0; i < n_in; i++) {
        ck_assert_msg(memcmp(bin[i], ins[i], nin_el[i] * sizeof(float)) == 0, "input %zu was modified", i);
        pdc_tensor_destroy(tin[i]);
        free(bin[i]);
    }
    for (size_t i = 0; i < n_out; i++) pdc_tensor_destroy(tout[i]);
    pdc_program_destroy(prog);
}

/* One input, one output. */
static void run1(const float *x, size_t rank, const int64_t *dims, const float *want)
{
    expect e = {rank, dims, want};
    run_expect(1, &x, 1, &e);
}

/* ------------------------------------------------------------------ conv */

static const float seq16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

START_TEST(conv2d_basic)
{
    /* x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,2],[3,4]] (no flip: cross-correlation)
     * y00 = 1+4+12+20 = 37, y01 = 2+6+15+24 = 47, y10 = 4+10+21+32 = 67, y11 = 5+12+24+36 = 77 */
    input("x", SHAPE(1, 1, 3, 3));
    constant("w", SHAPE(1, 1, 2, 2), F(1, 2, 3, 4));
    layer("conv", NULL, "y", NAMES("x", "w"));
    output("y");
    run1(seq16, SHAPE(1, 1, 2, 2), F(37, 47, 67, 77));
}
END_TEST

START_TEST(conv2d_stride_pad_bias)
{
    /* x = 4x4 of 1..16, 3x3 kernels, stride 2, pad 1 -> 2x2 windows at rows/cols {-1..1} and {1..3}.
     * channel 0: all-ones kernel, bias 0.5:  {1,2,5,6}=14, {2,3,4,6,7,8}=30, {5,6,9,10,13,14}=57,
     *            {6,7,8,10,11,12,14,15,16}=99
     * channel 1: +1 at the top-left tap, -1 at the bottom-right tap, bias -1:
     *            0-6, 0-8, 0-14, 6-16  (top-left taps at (-1,-1), (-1,1), (1,-1) are padding) */
    input("x", SHAPE(1, 1, 4, 4));
    constant("w", SHAPE(2, 1, 3, 3), F(1, 1, 1, 1, 1, 1, 1, 1, 1, /**/ 1, 0, 0, 0, 0, 0, 0, 0, -1));
    constant("b", SHAPE(2), F(0.5f, -1));
    pdc_attrs *a = attrs();
    set_ints(a, "strides", SHAPE(2, 2));
    set_ints(a, "pads", SHAPE(1, 1, 1, 1));
    layer("conv", a, "y", NAMES("x", "w", "b"));
    output("y");
    run1(seq16, SHAPE(1, 2, 2, 2), F(14.5f, 30.5f, 57.5f, 99.5f, -7, -9, -15, -11));
}
END_TEST

START_TEST(conv2d_asymmetric_pads)
{
    /* pads = [top 1, left 0, bottom 0, right 1], 1x1 kernel of 2: the 2x2 input lands at rows 1..2,
     * cols 0..1 of a 3x3 output */
    input("x", SHAPE(1, 1, 2, 2));
    constant("w", SHAPE(1, 1, 1, 1), F(2));
    layer("conv", set_ints(attrs(), "pads", SHAPE(1, 0, 0, 1)), "y", NAMES("x", "w"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(1, 1, 3, 3), F(0, 0, 0, 2, 4, 0, 6, 8, 0));
}
END_TEST

START_TEST(conv2d_dilation)
{
    /* x[r][c] = 4r+c+1, w = [[1,2],[3,4]] with dilation 2 taps (0,0),(0,2),(2,0),(2,2):
     * y = 1*x + 2*(x+2) + 3*(x+8) + 4*(x+10) = 10x + 68 for x = x[i][j], i,j in {0,1} */
    input("x", SHAPE(1, 1, 4, 4));
    constant("w", SHAPE(1, 1, 2, 2), F(1, 2, 3, 4));
    layer("conv", set_ints(attrs(), "dilations", SHAPE(2, 2)), "y", NAMES("x", "w"));
    output("y");
    run1(seq16, SHAPE(1, 1, 2, 2), F(78, 88, 118, 128));
}
END_TEST

START_TEST(conv2d_groups)
{
    /* 4 channels [1,2,3,4], group 2: outputs 0,1 see channels {1,2}, outputs 2,3 see {3,4}
     * w rows: [1,1] -> 3, [1,-1] -> -1, [2,0] -> 6, [0,3] -> 12 */
    input("x", SHAPE(1, 4, 1, 1));
    constant("w", SHAPE(4, 2, 1, 1), F(1, 1, 1, -1, 2, 0, 0, 3));
    layer("conv", set_int(attrs(), "group", 2), "y", NAMES("x", "w"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(1, 4, 1, 1), F(3, -1, 6, 12));
}
END_TEST

START_TEST(conv2d_depthwise)
{
    /* channel 0 = 1..9 with an all-ones 2x2 kernel: 2x2 window sums 12, 16, 24, 28
     * channel 1 = all ones with kernel [1,2,3,4] and bias 1: 10 + 1 = 11 everywhere */
    input("x", SHAPE(1, 2, 3, 3));
    constant("w", SHAPE(2, 1, 2, 2), F(1, 1, 1, 1, 1, 2, 3, 4));
    constant("b", SHAPE(2), F(0, 1));
    layer("conv", set_int(attrs(), "group", 2), "y", NAMES("x", "w", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1), SHAPE(1, 2, 2, 2),
         F(12, 16, 24, 28, 11, 11, 11, 11));
}
END_TEST

START_TEST(conv2d_depthwise_multiplier)
{
    /* group = C = 2, O = 4: outputs 0,1 read channel 0 (=1), outputs 2,3 read channel 1 (=10) */
    input("x", SHAPE(1, 2, 1, 1));
    constant("w", SHAPE(4, 1, 1, 1), F(1, 2, 3, 4));
    layer("conv", set_int(attrs(), "group", 2), "y", NAMES("x", "w"));
    output("y");
    run1(F(1, 10), SHAPE(1, 4, 1, 1), F(1, 2, 30, 40));
}
END_TEST

START_TEST(conv1d)
{
    /* w = [1,0,-1], stride 2, pad 1: windows start at -1, 1, 3: y = x[s] - x[s+2]
     * batch 0 = 1..5: (0-2, 2-4, 4-0); batch 1 = 5..1: (0-4, 4-2, 2-0) */
    input("x", SHAPE(2, 1, 5));
    constant("w", SHAPE(1, 1, 3), F(1, 0, -1));
    pdc_attrs *a = attrs();
    set_ints(a, "strides", SHAPE(2));
    set_ints(a, "pads", SHAPE(1, 1));
    layer("conv", a, "y", NAMES("x", "w"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 5, 4, 3, 2, 1), SHAPE(2, 1, 3), F(-2, -2, 4, -4, 2, 2));
}
END_TEST

START_TEST(conv1d_channels_bias)
{
    /* 2 in channels, kernel 2: y[t] = x0[t] + x0[t+1] - x1[t] + b; x0 = [1,2,3], x1 = [10,20,30], b = 100
     * -> 1+2-10+100 = 93, 2+3-20+100 = 85 */
    input("x", SHAPE(1, 2, 3));
    constant("w", SHAPE(1, 2, 2), F(1, 1, -1, 0));
    constant("b", SHAPE(1), F(100));
    layer("conv", NULL, "y", NAMES("x", "w", "b"));
    output("y");
    run1(F(1, 2, 3, 10, 20, 30), SHAPE(1, 1, 2), F(93, 85));
}
END_TEST

START_TEST(conv3d)
{
    /* x[d][h][w] = 4d+2h+w+1 (3x2x2), kernel 2x1x1 = [1, 10]: y = x + 10*(x+4) = 11x + 40 */
    input("x", SHAPE(1, 1, 3, 2, 2));
    constant("w", SHAPE(1, 1, 2, 1, 1), F(1, 10));
    layer("conv", NULL, "y", NAMES("x", "w"));
    output("y");
    run1(seq16, SHAPE(1, 1, 2, 2, 2), F(51, 62, 73, 84, 95, 106, 117, 128));
}
END_TEST

START_TEST(conv3d_stride_pad)
{
    /* 2x2x2 input, all-ones 2x2x2 kernel, pad 1 everywhere, stride 2: windows {-1,0} and {1,2} per dim
     * each contain exactly one input element, so y = x; channel 1 doubles via weight 2, bias 1 */
    input("x", SHAPE(1, 1, 2, 2, 2));
    constant("w", SHAPE(2, 1, 2, 2, 2), F(1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2));
    constant("b", SHAPE(2), F(0, 1));
    pdc_attrs *a = attrs();
    set_ints(a, "strides", SHAPE(2, 2, 2));
    set_ints(a, "pads", SHAPE(1, 1, 1, 1, 1, 1));
    layer("conv", a, "y", NAMES("x", "w", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6, 7, 8), SHAPE(1, 2, 2, 2, 2), F(1, 2, 3, 4, 5, 6, 7, 8, 3, 5, 7, 9, 11, 13, 15, 17));
}
END_TEST

/* ------------------------------------------------------------------ fc, gemm, matmul */

START_TEST(fc_bias)
{
    /* x = [[1,2,3],[4,5,6]], w = [[1,0,-1],[.5,.5,.5]], b = [10,20]
     * row 0: 1-3+10 = 8, 3+20 = 23; row 1: 4-6+10 = 8, 7.5+20 = 27.5 */
    input("x", SHAPE(2, 3));
    constant("w", SHAPE(2, 3), F(1, 0, -1, 0.5f, 0.5f, 0.5f));
    constant("b", SHAPE(2), F(10, 20));
    layer("fc", NULL, "y", NAMES("x", "w", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(2, 2), F(8, 23, 8, 27.5f));
}
END_TEST

START_TEST(fc_flattens)
{
    /* x [1,2,1,2] = [1,2,3,4] flattened to [1,4]; w = [1,-1,2,-2]: 1-2+6-8 = -3 */
    input("x", SHAPE(1, 2, 1, 2));
    constant("w", SHAPE(1, 4), F(1, -1, 2, -2));
    layer("fc", NULL, "y", NAMES("x", "w"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(1, 1), F(-3));
}
END_TEST

START_TEST(gemm_trans_alpha_beta)
{
    /* A stored [3,2] = [[1,2],[3,4],[5,6]], transA -> [[1,3,5],[2,4,6]]
     * B stored [2,3] = [[1,0,1],[0,1,0]], transB -> [[1,0],[0,1],[1,0]]
     * A'B' = [[6,3],[8,4]]; alpha 2 -> [[12,6],[16,8]]; C = [1,2] per row, beta .5 -> + [.5, 1] */
    input("a", SHAPE(3, 2));
    constant("b", SHAPE(2, 3), F(1, 0, 1, 0, 1, 0));
    constant("c", SHAPE(2), F(1, 2));
    pdc_attrs *a = attrs();
    set_int(a, "transA", 1);
    set_int(a, "transB", 1);
    set_float(a, "alpha", 2.0f);
    set_float(a, "beta", 0.5f);
    layer("gemm", a, "y", NAMES("a", "b", "c"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(2, 2), F(12.5f, 7, 16.5f, 9));
}
END_TEST

START_TEST(gemm_column_bias)
{
    /* [[1,2],[3,4]] [[5,6],[7,8]] = [[19,22],[43,50]]; C [2,1] = [1,-1] broadcasts along rows */
    input("a", SHAPE(2, 2));
    constant("b", SHAPE(2, 2), F(5, 6, 7, 8));
    constant("c", SHAPE(2, 1), F(1, -1));
    layer("gemm", NULL, "y", NAMES("a", "b", "c"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(2, 2), F(20, 23, 42, 49));
}
END_TEST

START_TEST(gemm_no_bias_full_c)
{
    /* two layers: y1 = A B (no C, alpha 0.5); y2 = A B + C with C [2,2] and beta 2 */
    input("a", SHAPE(2, 2));
    constant("b", SHAPE(2, 2), F(5, 6, 7, 8));
    constant("c", SHAPE(2, 2), F(1, 2, 3, 4));
    layer("gemm", set_float(attrs(), "alpha", 0.5f), "y1", NAMES("a", "b"));
    layer("gemm", set_float(attrs(), "beta", 2.0f), "y2", NAMES("a", "b", "c"));
    output("y1");
    output("y2");
    const float *in[] = {F(1, 2, 3, 4)};
    expect e[] = {{SHAPE(2, 2), F(9.5f, 11, 21.5f, 25)}, {SHAPE(2, 2), F(21, 26, 49, 58)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(matmul_batch_broadcast_both)
{
    /* a [2,1,1,2]: a0 = [1,2], a1 = [3,4]; b [3,2,1]: b0 = [1,0], b1 = [0,1], b2 = [1,1]
     * y [2,3,1,1], y[i][j] = ai . bj = [[1,2,3],[3,4,7]] */
    input("a", SHAPE(2, 1, 1, 2));
    constant("b", SHAPE(3, 2, 1), F(1, 0, 0, 1, 1, 1));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(2, 3, 1, 1), F(1, 2, 3, 3, 4, 7));
}
END_TEST

START_TEST(matmul_rank2_rhs)
{
    /* a [2,2,3] times b [3,1] = [1,2,3]^T for each batch:
     * [[1,2,3],[4,5,6]] -> 14, 32; [[1,0,0],[0,1,0]] -> 1, 2 */
    input("a", SHAPE(2, 2, 3));
    constant("b", SHAPE(3, 1), F(1, 2, 3));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0), SHAPE(2, 2, 1), F(14, 32, 1, 2));
}
END_TEST

START_TEST(matmul_plain)
{
    /* [1,2;3,4] [[1,0,2],[0,1,3]] = [[1,2,8],[3,4,18]] */
    input("a", SHAPE(2, 2));
    constant("b", SHAPE(2, 3), F(1, 0, 2, 0, 1, 3));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(2, 3), F(1, 2, 8, 3, 4, 18));
}
END_TEST

/* ------------------------------------------------------------------ batchnorm */

START_TEST(batchnorm_values)
{
    /* epsilon .25: channel 0 var 3.75 -> sd 2, scale 1, bias 0, mean 1: (x-1)/2
     *              channel 1 var 0    -> sd .5, scale 2, bias 1, mean 3: (x-3)*4+1
     * n=0: [1,2] -> 0, .5; [3,4] -> 1, 5;  n=1: [5,6] -> 2, 2.5; [7,8] -> 17, 21 */
    input("x", SHAPE(2, 2, 1, 2));
    constant("s", SHAPE(2), F(1, 2));
    constant("b", SHAPE(2), F(0, 1));
    constant("m", SHAPE(2), F(1, 3));
    constant("v", SHAPE(2), F(3.75f, 0));
    layer("batchnorm", set_float(attrs(), "epsilon", 0.25f), "y", NAMES("x", "s", "b", "m", "v"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6, 7, 8), SHAPE(2, 2, 1, 2), F(0, 0.5f, 1, 5, 2, 2.5f, 17, 21));
}
END_TEST

START_TEST(batchnorm_default_epsilon)
{
    /* var = 1 - 1e-5, default epsilon 1e-5 -> sd 1: y = (x - mean) * scale + bias on a rank-2 input */
    input("x", SHAPE(1, 3));
    constant("s", SHAPE(3), F(1, 2, 3));
    constant("b", SHAPE(3), F(0, 0, 1));
    constant("m", SHAPE(3), F(1, 1, 1));
    constant("v", SHAPE(3), F(1 - 1e-5f, 1 - 1e-5f, 1 - 1e-5f));
    layer("batchnorm", NULL, "y", NAMES("x", "s", "b", "m", "v"));
    output("y");
    run1(F(3, 3, 3), SHAPE(1, 3), F(2, 4, 7));
}
END_TEST

/* ------------------------------------------------------------------ activations */

static void unary_case(const char *op, pdc_attrs *a, int64_t n, const float *x, const float *want)
{
    int64_t dims[2] = {1, n};
    input("x", 2, dims);
    layer(op, a, "y", NAMES("x"));
    output("y");
    run1(x, 2, dims, want);
}

START_TEST(act_relu)
{
    unary_case("relu", NULL, 5, F(-2, -0.5f, 0, 0.5f, 3), F(0, 0, 0, 0.5f, 3));
}
END_TEST

START_TEST(act_clip_relu6)
{
    pdc_attrs *a = attrs();
    set_float(a, "min", 0);
    set_float(a, "max", 6);
    unary_case("clip", a, 5, F(-1, 0, 3, 6, 7), F(0, 0, 3, 6, 6));
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

/* ------------------------------------------------------------------ add, mul */

START_TEST(add_row_broadcast)
{
    /* [2,3] + [3] */
    input("a", SHAPE(2, 3));
    constant("b", SHAPE(3), F(10, 20, 30));
    layer("add", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(2, 3), F(11, 22, 33, 14, 25, 36));
}
END_TEST

START_TEST(mul_outer_broadcast)
{
    /* [2,1] * [1,3] -> [2,3] outer product of [2,3] and [1,10,100] */
    input("a", SHAPE(2, 1));
    constant("b", SHAPE(1, 3), F(1, 10, 100));
    layer("mul", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(2, 3), SHAPE(2, 3), F(2, 20, 200, 3, 30, 300));
}
END_TEST

START_TEST(add_rank3_broadcast)
{
    /* a [2,1,2] + b [3,1] -> [2,3,2]: y[i][j][k] = a[i][0][k] + b[j][0]
     * a = [[1,2]],[[3,4]], b = 10,20,30 */
    input("a", SHAPE(2, 1, 2));
    constant("b", SHAPE(3, 1), F(10, 20, 30));
    layer("add", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4), SHAPE(2, 3, 2), F(11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34));
}
END_TEST

START_TEST(mul_same_shape_and_scalar_like)
{
    /* y1 = a * a (same shape); y2 = [1] * a (rank-1 size-1 broadcasts everywhere, on the left) */
    input("a", SHAPE(2, 2));
    constant("k", SHAPE(1), F(-2));
    layer("mul", NULL, "y1", NAMES("a", "a"));
    layer("mul", NULL, "y2", NAMES("k", "a"));
    output("y1");
    output("y2");
    const float *in[] = {F(1, 2, 3, 4)};
    expect e[] = {{SHAPE(2, 2), F(1, 4, 9, 16)}, {SHAPE(2, 2), F(-2, -4, -6, -8)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(add_nchw_channel_bias)
{
    /* [1,2,2,2] + [2,1,1] (per-channel) */
    input("a", SHAPE(1, 2, 2, 2));
    constant("b", SHAPE(2, 1, 1), F(100, 200));
    layer("add", NULL, "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6, 7, 8), SHAPE(1, 2, 2, 2), F(101, 102, 103, 104, 205, 206, 207, 208));
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
    output("y1");
    output("y2");
    const float *in[] = {F(10, 20)};
    expect e[] = {{SHAPE(2, 3), F(9, 8, 7, 19, 18, 17)}, {SHAPE(2, 3), F(-9, -8, -7, -19, -18, -17)}};
    run_expect(1, in, 2, e);
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
    input("a", SHAPE(2, 1));
    constant("b", SHAPE(2, 2), F(3, 4, 5, 6));
    layer("concat", set_int(attrs(), "axis", 1), "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2), SHAPE(2, 3), F(1, 3, 4, 2, 5, 6));
}
END_TEST

START_TEST(concat_negative_axis)
{
    /* [2,1,1] ++ [2,1,2] along axis -1 (= 2) */
    input("a", SHAPE(2, 1, 1));
    constant("b", SHAPE(2, 1, 2), F(3, 4, 5, 6));
    layer("concat", set_int(attrs(), "axis", -1), "y", NAMES("a", "b"));
    output("y");
    run1(F(1, 2), SHAPE(2, 1, 3), F(1, 3, 4, 2, 5, 6));
}
END_TEST

START_TEST(concat_axis0_three_inputs)
{
    /* [1,2] ++ [2,2] ++ [1,2] along axis 0 (given as -2) */
    input("a", SHAPE(1, 2));
    constant("b", SHAPE(2, 2), F(3, 4, 5, 6));
    constant("c", SHAPE(1, 2), F(7, 8));
    layer("concat", set_int(attrs(), "axis", -2), "y", NAMES("a", "b", "c"));
    output("y");
    run1(F(1, 2), SHAPE(4, 2), F(1, 2, 3, 4, 5, 6, 7, 8));
}
END_TEST

/* ------------------------------------------------------------------ pooling */

static pdc_attrs *pool_attrs(size_t nk, const int64_t *k, size_t ns, const int64_t *s, size_t np, const int64_t *p)
{
    pdc_attrs *a = set_ints(attrs(), "kernel_shape", nk, k);
    if (ns) set_ints(a, "strides", ns, s);
    if (np) set_ints(a, "pads", np, p);
    return a;
}

START_TEST(maxpool_basic)
{
    /* 4x4 of 1..16, 2x2 stride 2: maxima are the bottom-right elements 6, 8, 14, 16 */
    input("x", SHAPE(1, 1, 4, 4));
    layer("maxpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL), "y", NAMES("x"));
    output("y");
    run1(seq16, SHAPE(1, 1, 2, 2), F(6, 8, 14, 16));
}
END_TEST

START_TEST(maxpool_padding_never_wins)
{
    /* x = -(1..16), 3x3 stride 2 pad 1: windows {1,2,5,6}, {2,3,4,6,7,8}, {5,6,9,10,13,14}, {6..16}
     * negated maxima -1, -2, -5, -6 (a zero pad would win if padding counted) */
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = -(float)(i + 1);
    input("x", SHAPE(1, 1, 4, 4));
    layer("maxpool", pool_attrs(SHAPE(3, 3), SHAPE(2, 2), SHAPE(1, 1, 1, 1)), "y", NAMES("x"));
    output("y");
    run1(x, SHAPE(1, 1, 2, 2), F(-1, -2, -5, -6));
}
END_TEST

static float seq25[25];
static void fill_seq25(void)
{
    for (int i = 0; i < 25; i++) seq25[i] = (float)(i + 1); /* x[r][c] = 5r + c + 1 */
}

START_TEST(maxpool_ceil_mode)
{
    /* 5x5, 2x2 stride 2: floor -> 2x2 (rows {0,1},{2,3}); ceil -> 3x3 adding the partial window {4}
     * max = x[last row][last col] of each window, rows/cols {1,3,4}: 5r+c+1 */
    fill_seq25();
    input("x", SHAPE(1, 1, 5, 5));
    pdc_attrs *a = pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL);
    layer("maxpool", set_int(a, "ceil_mode", 1), "yc", NAMES("x"));
    layer("maxpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL), "yf", NAMES("x"));
    output("yc");
    output("yf");
    const float *in[] = {seq25};
    expect e[] = {{SHAPE(1, 1, 3, 3), F(7, 9, 10, 17, 19, 20, 22, 24, 25)}, {SHAPE(1, 1, 2, 2), F(7, 9, 17, 19)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(maxpool_dilation)
{
    /* 2x2 kernel, dilation 2 on 4x4 1..16: taps (i,j),(i,j+2),(i+2,j),(i+2,j+2); max is x[i+2][j+2] */
    input("x", SHAPE(1, 1, 4, 4));
    pdc_attrs *a = set_ints(attrs(), "kernel_shape", SHAPE(2, 2));
    layer("maxpool", set_ints(a, "dilations", SHAPE(2, 2)), "y", NAMES("x"));
    output("y");
    run1(seq16, SHAPE(1, 1, 2, 2), F(11, 12, 15, 16));
}
END_TEST

START_TEST(avgpool_ceil_mode)
{
    /* 5x5, 2x2 stride 2, ceil: window rows {0,1},{2,3},{4} (mean .5, 2.5, 4), cols likewise;
     * mean of 5r+c+1 = 5*mean(r) + mean(c) + 1. The partial windows average only what they cover, also
     * with count_include_pad = 1 (no padding there: the divisor stops at the padded input's edge). */
    fill_seq25();
    input("x", SHAPE(1, 1, 5, 5));
    pdc_attrs *a = set_int(pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL), "ceil_mode", 1);
    layer("avgpool", a, "y0", NAMES("x"));
    a = set_int(pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL), "ceil_mode", 1);
    layer("avgpool", set_int(a, "count_include_pad", 1), "y1", NAMES("x"));
    output("y0");
    output("y1");
    const float *want = F(4, 6, 7.5f, 14, 16, 17.5f, 21.5f, 23.5f, 25);
    const float *in[] = {seq25};
    expect e[] = {{SHAPE(1, 1, 3, 3), want}, {SHAPE(1, 1, 3, 3), want}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(avgpool_padding_count_include_pad)
{
    /* 3x3 of 1..9, 3x3 kernel, stride 1, pad 1. Window sums: 12 21 16 / 27 45 33 / 24 39 28 over
     * 4 6 4 / 6 9 6 / 4 6 4 real elements. count_include_pad 0 divides by those, 1 divides by 9. */
    input("x", SHAPE(1, 1, 3, 3));
    layer("avgpool", pool_attrs(SHAPE(3, 3), 0, NULL, SHAPE(1, 1, 1, 1)), "y0", NAMES("x"));
    pdc_attrs *a = pool_attrs(SHAPE(3, 3), 0, NULL, SHAPE(1, 1, 1, 1));
    layer("avgpool", set_int(a, "count_include_pad", 1), "y1", NAMES("x"));
    output("y0");
    output("y1");
    const float *in[] = {seq16};
    expect e[] = {{SHAPE(1, 1, 3, 3), F(3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7)},
                  {SHAPE(1, 1, 3, 3), F(12 / 9.0f, 21 / 9.0f, 16 / 9.0f, 27 / 9.0f, 45 / 9.0f, 33 / 9.0f, 24 / 9.0f,
                                        39 / 9.0f, 28 / 9.0f)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(pool_ceil_mode_with_pads)
{
    /* x = [1,2,3,4] as 1x4, kernel 1x3, stride 2, pads 1 left and right, ceil_mode: output width
     * ceil((4+2-3)/2)+1 = 3, windows at -1..1, 1..3, 3..5 (column 5 is past the right pad).
     *   max: 2, 4, 4
     *   avg, count_include_pad 0: (1+2)/2, (2+3+4)/3, 4/1
     *   avg, count_include_pad 1: (0+1+2)/3, 3, (4+0)/2 (the tap past the padding is not counted) */
    input("x", SHAPE(1, 1, 1, 4));
    const char *ops[3] = {"maxpool", "avgpool", "avgpool"};
    const char *outs[3] = {"ymax", "yavg0", "yavg1"};
    for (int i = 0; i < 3; i++) {
        pdc_attrs *a = pool_attrs(SHAPE(1, 3), SHAPE(1, 2), SHAPE(0, 1, 0, 1));
        set_int(a, "ceil_mode", 1);
        if (i == 2) set_int(a, "count_include_pad", 1);
        layer(ops[i], a, outs[i], NAMES("x"));
        output(outs[i]);
    }
    const float *in[] = {F(1, 2, 3, 4)};
    expect e[] = {{SHAPE(1, 1, 1, 3), F(2, 4, 4)}, {SHAPE(1, 1, 1, 3), F(1.5f, 3, 4)}, {SHAPE(1, 1, 1, 3), F(1, 3, 2)}};
    run_expect(1, in, 3, e);
}
END_TEST

START_TEST(pool_3d)
{
    /* two channels of 2x2x2: 1..8 and 10..80; one 2x2x2 window each: max 8, 80; mean 4.5, 45 */
    input("x", SHAPE(1, 2, 2, 2, 2));
    layer("maxpool", set_ints(attrs(), "kernel_shape", SHAPE(2, 2, 2)), "ymax", NAMES("x"));
    layer("avgpool", set_ints(attrs(), "kernel_shape", SHAPE(2, 2, 2)), "yavg", NAMES("x"));
    output("ymax");
    output("yavg");
    const float *in[] = {F(1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30, 40, 50, 60, 70, 80)};
    expect e[] = {{SHAPE(1, 2, 1, 1, 1), F(8, 80)}, {SHAPE(1, 2, 1, 1, 1), F(4.5f, 45)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(pool_3d_stride)
{
    /* 1x1x2x2x4: kernel 1x2x2 stride 1x2x2 -> 2x1x2; x[d][h][w] = 8d+4h+w+1
     * windows over (h 0..1, w {0,1} or {2,3}): max = x[d][1][2j+1], mean = x[d][0][2j] + 2.5 */
    input("x", SHAPE(1, 1, 2, 2, 4));
    layer("maxpool", pool_attrs(SHAPE(1, 2, 2), SHAPE(1, 2, 2), 0, NULL), "ymax", NAMES("x"));
    layer("avgpool", pool_attrs(SHAPE(1, 2, 2), SHAPE(1, 2, 2), 0, NULL), "yavg", NAMES("x"));
    output("ymax");
    output("yavg");
    const float *in[] = {seq16};
    expect e[] = {{SHAPE(1, 1, 2, 1, 2), F(6, 8, 14, 16)}, {SHAPE(1, 1, 2, 1, 2), F(3.5f, 5.5f, 11.5f, 13.5f)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(global_avgpool_2d_3d)
{
    input("x", SHAPE(1, 2, 2, 2));
    input("z", SHAPE(2, 1, 2, 1, 2));
    layer("global_avgpool", NULL, "y", NAMES("x"));
    layer("global_avgpool", NULL, "w", NAMES("z"));
    output("y");
    output("w");
    const float *in[] = {F(1, 2, 3, 4, 10, 20, 30, 40), F(1, 2, 3, 6, -1, -1, -1, 3)};
    expect e[] = {{SHAPE(1, 2, 1, 1), F(2.5f, 25)}, {SHAPE(2, 1, 1, 1, 1), F(3, 0)}};
    run_expect(2, in, 2, e);
}
END_TEST

/* ------------------------------------------------------------------ flatten, reshape, transpose */

START_TEST(flatten_axes)
{
    static const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    input("x", SHAPE(2, 3, 2));
    layer("flatten", NULL, "y1", NAMES("x"));
    layer("flatten", set_int(attrs(), "axis", 2), "y2", NAMES("x"));
    layer("flatten", set_int(attrs(), "axis", 0), "y0", NAMES("x"));
    output("y1");
    output("y2");
    output("y0");
    const float *in[] = {x};
    expect e[] = {{SHAPE(2, 6), x}, {SHAPE(6, 2), x}, {SHAPE(1, 12), x}};
    run_expect(1, in, 3, e);
}
END_TEST

START_TEST(reshape_zero_and_minus_one)
{
    static const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    input("x", SHAPE(2, 3, 2));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(0, -1)), "y1", NAMES("x"));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(4, -1)), "y2", NAMES("x"));
    layer("reshape", set_ints(attrs(), "shape", SHAPE(0, 0, 1, 2)), "y3", NAMES("x"));
    output("y1");
    output("y2");
    output("y3");
    const float *in[] = {x};
    expect e[] = {{SHAPE(2, 6), x}, {SHAPE(4, 3), x}, {SHAPE(2, 3, 1, 2), x}};
    run_expect(1, in, 3, e);
}
END_TEST

START_TEST(transpose_default_and_perm)
{
    /* default perm reverses: [[1,2,3],[4,5,6]] -> [[1,4],[2,5],[3,6]] */
    input("x", SHAPE(2, 3));
    layer("transpose", NULL, "y", NAMES("x"));
    output("y");
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(3, 2), F(1, 4, 2, 5, 3, 6));
}
END_TEST

START_TEST(transpose_nchw_to_nhwc)
{
    /* x[0][c][h][w] = 6c + 3h + w (C=2, H=2, W=3); perm [0,2,3,1] -> y[0][h][w][c] */
    input("x", SHAPE(1, 2, 2, 3));
    layer("transpose", set_ints(attrs(), "perm", SHAPE(0, 2, 3, 1)), "y", NAMES("x"));
    output("y");
    run1(F(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), SHAPE(1, 2, 3, 2), F(0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11));
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
    input("x", SHAPE(2, 3, 4));
    layer("transpose", set_ints(attrs(), "perm", SHAPE(2, 0, 1)), "y", NAMES("x"));
    output("y");
    run1(x, SHAPE(4, 2, 3), want);
}
END_TEST

/* ------------------------------------------------------------------ softmax */

START_TEST(softmax_last_axis)
{
    /* exp(0), exp(ln2), exp(ln3) = 1, 2, 3 -> 1/6, 1/3, 1/2; a row of 1000s is uniform (no overflow) */
    float l2 = logf(2.0f), l3 = logf(3.0f);
    input("x", SHAPE(2, 3));
    layer("softmax", NULL, "y", NAMES("x"));
    output("y");
    run1(F(0, l2, l3, 1000, 1000, 1000), SHAPE(2, 3), F(1.0f / 6, 1.0f / 3, 0.5f, 1.0f / 3, 1.0f / 3, 1.0f / 3));
}
END_TEST

START_TEST(softmax_axis0)
{
    /* columns [0, ln3] -> [1/4, 3/4] and [0, 1000] -> [0, 1] */
    float l3 = logf(3.0f);
    input("x", SHAPE(2, 2));
    layer("softmax", set_int(attrs(), "axis", 0), "y", NAMES("x"));
    output("y");
    run1(F(0, 0, l3, 1000), SHAPE(2, 2), F(0.25f, 0, 0.75f, 1));
}
END_TEST

START_TEST(softmax_middle_axis)
{
    /* x [1,2,2], axis 1: for each last index j the pair (x[0][0][j], x[0][1][j]) = (0, ln3) */
    float l3 = logf(3.0f);
    input("x", SHAPE(1, 2, 2));
    layer("softmax", set_int(attrs(), "axis", 1), "y", NAMES("x"));
    output("y");
    run1(F(0, 0, l3, l3), SHAPE(1, 2, 2), F(0.25f, 0.25f, 0.75f, 0.75f));
}
END_TEST

/* ------------------------------------------------------------------ lstm, gru */

static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

/* Shared H=1, I=1 weights. LSTM gates i,o,f,c; GRU gates z,r,h. */
static const float lstm_w[4] = {0.5f, -0.3f, 0.8f, 1.2f};
static const float lstm_r[4] = {0.1f, 0.2f, -0.4f, 0.6f};
static const float lstm_b[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.05f, -0.05f, 0.1f, -0.1f};
static const float gru_w[3] = {0.4f, -0.6f, 0.9f};
static const float gru_r[3] = {0.3f, 0.5f, -0.7f};
static const float gru_b[6] = {0.1f, -0.2f, 0.3f, 0.2f, 0.1f, -0.4f};

START_TEST(lstm_forward_h1)
{
    /* T=2, B=1, I=1, H=1, bias, no initial state (h = c = 0). The recurrence, written out: */
    const double xs[2] = {1, -2};
    double h = 0, c = 0, y[2];
    for (int t = 0; t < 2; t++) {
        double x = xs[t];
        double i = sig(0.5 * x + 0.1 * h + 0.1 + 0.05);
        double o = sig(-0.3 * x + 0.2 * h + 0.2 - 0.05);
        double f = sig(0.8 * x - 0.4 * h + 0.3 + 0.1);
        double g = tanh(1.2 * x + 0.6 * h + 0.4 - 0.1);
        c = f * c + i * g;
        h = o * tanh(c);
        y[t] = h;
    }
    /* the same numbers from an independent (Python) evaluation */
    ck_assert_double_eq_tol(y[0], 0.246670928, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.112865269, 1e-8);
    ck_assert_double_eq_tol(c, -0.165096509, 1e-8);

    input("x", SHAPE(2, 1, 1));
    constant("w", SHAPE(1, 4, 1), lstm_w);
    constant("r", SHAPE(1, 4, 1), lstm_r);
    constant("b", SHAPE(1, 8), lstm_b);
    layer_n("lstm", set_int(attrs(), "hidden_size", 1), NAMES("y", "yh", "yc"), NAMES("x", "w", "r", "b"));
    output("y");
    output("yh");
    output("yc");
    const float *in[] = {F(1, -2)};
    expect e[] = {{SHAPE(2, 1, 1, 1), F((float)y[0], (float)y[1])},
                  {SHAPE(1, 1, 1), F((float)h)},
                  {SHAPE(1, 1, 1), F((float)c)}};
    run_expect(1, in, 3, e);
}
END_TEST

START_TEST(lstm_reverse_initial_state)
{
    /* direction reverse, no bias, h0 = 0.3, c0 = -0.5: time runs t = 1 then t = 0; y[t] is the state
     * after consuming x[t]; y_h = y_c's partner after the last step (t = 0). */
    const double xs[2] = {1, -2};
    double h = 0.3, c = -0.5, y[2];
    for (int t = 1; t >= 0; t--) {
        double x = xs[t];
        double i = sig(0.5 * x + 0.1 * h);
        double o = sig(-0.3 * x + 0.2 * h);
        double f = sig(0.8 * x - 0.4 * h);
        double g = tanh(1.2 * x + 0.6 * h);
        c = f * c + i * g;
        h = o * tanh(c);
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], 0.0989351464, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.218482753, 1e-8);
    ck_assert_double_eq_tol(c, 0.243128548, 1e-8);

    input("x", SHAPE(2, 1, 1));
    constant("w", SHAPE(1, 4, 1), lstm_w);
    constant("r", SHAPE(1, 4, 1), lstm_r);
    constant("h0", SHAPE(1, 1, 1), F(0.3f));
    constant("c0", SHAPE(1, 1, 1), F(-0.5f));
    pdc_attrs *a = set_int(attrs(), "hidden_size", 1);
    set_string(a, "direction", "reverse");
    layer_n("lstm", a, NAMES("y", "yh", "yc"), NAMES("x", "w", "r", "", "", "h0", "c0"));
    output("y");
    output("yh");
    output("yc");
    const float *in[] = {F(1, -2)};
    expect e[] = {{SHAPE(2, 1, 1, 1), F((float)y[0], (float)y[1])},
                  {SHAPE(1, 1, 1), F((float)h)},
                  {SHAPE(1, 1, 1), F((float)c)}};
    run_expect(1, in, 3, e);
}
END_TEST

/* One LSTM or GRU direction for H <= 2, I <= 2, B <= 2, written with plain loops. w, r, wb, rb are
 * that direction's slices: w[G*H][I], r[G*H][H], wb[G*H], rb[G*H] (wb/rb NULL = zero). Writes
 * y[t][d][b][k] of a [T,D,B,H] array and the final h (and c) into hT[b][k] (cT). */
static void rnn_oracle(int lstm, int lbr, int T, int D, int d, int B, int I, int H, int reverse, const float *x,
                       const float *w, const float *r, const float *wb, const float *rb, const float *h0,
                       const float *c0, float *y, float *hT, float *cT)
{
    double h[2][2] = {{0}}, c[2][2] = {{0}};
    for (int b = 0; b < B; b++)
        for (int k = 0; k < H; k++) {
            h[b][k] = h0 ? h0[b * H + k] : 0;
            c[b][k] = c0 ? c0[b * H + k] : 0;
        }
    for (int s = 0; s < T; s++) {
        int t = reverse ? T - 1 - s : s;
        for (int b = 0; b < B; b++) {
            double xw[8] = {0}, hr[8] = {0}; /* per gate row: x.W + Wb, h.R + Rb */
            int G = lstm ? 4 : 3;
            for (int j = 0; j < G * H; j++) {
                xw[j] = wb ? wb[j] : 0;
                hr[j] = rb ? rb[j] : 0;
                for (int i = 0; i < I; i++) xw[j] += x[(t * B + b) * I + i] * w[j * I + i];
                for (int k = 0; k < H; k++) hr[j] += h[b][k] * r[j * H + k];
            }
            double hn[2];
            if (lstm) {
                for (int k = 0; k < H; k++) {
                    double ig = sig(xw[k] + hr[k]);
                    double og = sig(xw[H + k] + hr[H + k]);
                    double fg = sig(xw[2 * H + k] + hr[2 * H + k]);
                    double cg = tanh(xw[3 * H + k] + hr[3 * H + k]);
                    c[b][k] = fg * c[b][k] + ig * cg;
                    hn[k] = og * tanh(c[b][k]);
                }
            } else {
                double z[2], rg[2];
                for (int k = 0; k < H; k++) {
                    z[k] = sig(xw[k] + hr[k]);
                    rg[k] = sig(xw[H + k] + hr[H + k]);
                }
                for (int k = 0; k < H; k++) {
                    int j = 2 * H + k;
                    double pre;
                    if (lbr) {
                        pre = xw[j] + rg[k] * hr[j];
                    } else {
                        pre = xw[j] + (rb ? rb[j] : 0);
                        for (int q = 0; q < H; q++) pre += rg[q] * h[b][q] * r[j * H + q];
                    }
                    hn[k] = (1 - z[k]) * tanh(pre) + z[k] * h[b][k];
                }
            }
            for (int k = 0; k < H; k++) {
                h[b][k] = hn[k];
                y[((t * D + d) * B + b) * H + k] = (float)hn[k];
            }
        }
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < H; k++) {
            hT[b * H + k] = (float)h[b][k];
            if (cT) cT[b * H + k] = (float)c[b][k];
        }
}

START_TEST(lstm_bidirectional_h2)
{
    /* T=2, B=2, I=2, H=2, both directions, bias, h0 and c0; outputs y and y_c (y_h absent) */
    enum { T = 2, B = 2, I = 2, H = 2, D = 2, G = 4 };
    float x[T * B * I], w[D * G * H * I], r[D * G * H * H], b[D * 2 * G * H], h0[D * B * H], c0[D * B * H];
    test_fill_random(x, T * B * I, 1);
    test_fill_random(w, D * G * H * I, 2);
    test_fill_random(r, D * G * H * H, 3);
    test_fill_random(b, D * 2 * G * H, 4);
    test_fill_random(h0, D * B * H, 5);
    test_fill_random(c0, D * B * H, 6);
    float y[T * D * B * H], yh[D * B * H], yc[D * B * H];
    for (int d = 0; d < D; d++)
        rnn_oracle(1, 0, T, D, d, B, I, H, d == 1, x, w + d * G * H * I, r + d * G * H * H, b + d * 2 * G * H,
                   b + d * 2 * G * H + G * H, h0 + d * B * H, c0 + d * B * H, y, yh + d * B * H, yc + d * B * H);
    /* y_h equals y at the last step of each direction: t = T-1 forward, t = 0 reverse */
    for (int i = 0; i < B * H; i++) {
        ck_assert_float_eq(yh[i], y[((T - 1) * D + 0) * B * H + i]);
        ck_assert_float_eq(yh[B * H + i], y[(0 * D + 1) * B * H + i]);
    }

    input("x", SHAPE(T, B, I));
    constant("w", SHAPE(D, G * H, I), w);
    constant("r", SHAPE(D, G * H, H), r);
    constant("b", SHAPE(D, 2 * G * H), b);
    constant("h0", SHAPE(D, B, H), h0);
    constant("c0", SHAPE(D, B, H), c0);
    pdc_attrs *a = set_int(attrs(), "hidden_size", H);
    set_string(a, "direction", "bidirectional");
    layer_n("lstm", a, NAMES("y", "", "yc"), NAMES("x", "w", "r", "b", "", "h0", "c0"));
    output("y");
    output("yc");
    const float *in[] = {x};
    expect e[] = {{SHAPE(T, D, B, H), y}, {SHAPE(D, B, H), yc}};
    run_expect(1, in, 2, e);
}
END_TEST

static void gru_h1_case(int lbr, const float *want)
{
    /* T=2, I=1, H=1, bias, h0 = 0.5, written out:
     *   z = sig(.4x + .3h + .1 + .2), r = sig(-.6x + .5h - .2 + .1)
     *   lbr 0: h~ = tanh(.9x + (-.7)(r h) + (-.4) + .3);  lbr 1: h~ = tanh(.9x + r((-.7)h + (-.4)) + .3)
     *   h = (1-z) h~ + z h */
    const double xs[2] = {1, -2};
    double h = 0.5, y[2];
    for (int t = 0; t < 2; t++) {
        double x = xs[t];
        double z = sig(0.4 * x + 0.3 * h + 0.1 + 0.2);
        double r = sig(-0.6 * x + 0.5 * h - 0.2 + 0.1);
        double hh = lbr ? tanh(0.9 * x + r * (-0.7 * h - 0.4) + 0.3) : tanh(0.9 * x - 0.7 * (r * h) - 0.4 + 0.3);
        h = (1 - z) * hh + z * h;
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], want[0], 1e-7);
    ck_assert_double_eq_tol(y[1], want[1], 1e-7);

    input("x", SHAPE(2, 1, 1));
    constant("w", SHAPE(1, 3, 1), gru_w);
    constant("r", SHAPE(1, 3, 1), gru_r);
    constant("b", SHAPE(1, 6), gru_b);
    constant("h0", SHAPE(1, 1, 1), F(0.5f));
    pdc_attrs *a = set_int(attrs(), "hidden_size", 1);
    set_int(a, "linear_before_reset", lbr);
    layer_n("gru", a, NAMES("y", "yh"), NAMES("x", "w", "r", "b", "", "h0"));
    output("y");
    output("yh");
    const float *in[] = {F(1, -2)};
    expect e[] = {{SHAPE(2, 1, 1, 1), F((float)y[0], (float)y[1])}, {SHAPE(1, 1, 1), F((float)h)}};
    run_expect(1, in, 2, e);
}

START_TEST(gru_forward_h1)
{
    gru_h1_case(0, F(0.524205016f, -0.352825571f));
}
END_TEST

START_TEST(gru_linear_before_reset)
{
    gru_h1_case(1, F(0.565923446f, -0.329154067f));
}
END_TEST

START_TEST(gru_reverse_h1)
{
    /* reverse, no bias, no h0: t = 1 first */
    const double xs[2] = {1, -2};
    double h = 0, y[2];
    for (int t = 1; t >= 0; t--) {
        double x = xs[t];
        double z = sig(0.4 * x + 0.3 * h);
        double r = sig(-0.6 * x + 0.5 * h);
        double hh = tanh(0.9 * x - 0.7 * (r * h));
        h = (1 - z) * hh + z * h;
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], -0.012278808, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.653271987, 1e-8);

    input("x", SHAPE(2, 1, 1));
    constant("w", SHAPE(1, 3, 1), gru_w);
    constant("r", SHAPE(1, 3, 1), gru_r);
    pdc_attrs *a = set_int(attrs(), "hidden_size", 1);
    set_string(a, "direction", "reverse");
    layer_n("gru", a, NAMES("y", "yh"), NAMES("x", "w", "r"));
    output("y");
    output("yh");
    const float *in[] = {F(1, -2)};
    expect e[] = {{SHAPE(2, 1, 1, 1), F((float)y[0], (float)y[1])}, {SHAPE(1, 1, 1), F((float)h)}};
    run_expect(1, in, 2, e);
}
END_TEST

static void gru_bidir_case(int lbr)
{
    enum { T = 2, B = 2, I = 2, H = 2, D = 2, G = 3 };
    float x[T * B * I], w[D * G * H * I], r[D * G * H * H], b[D * 2 * G * H], h0[D * B * H];
    test_fill_random(x, T * B * I, 11);
    test_fill_random(w, D * G * H * I, 12);
    test_fill_random(r, D * G * H * H, 13);
    test_fill_random(b, D * 2 * G * H, 14);
    test_fill_random(h0, D * B * H, 15);
    float y[T * D * B * H], yh[D * B * H];
    for (int d = 0; d < D; d++)
        rnn_oracle(0, lbr, T, D, d, B, I, H, d == 1, x, w + d * G * H * I, r + d * G * H * H, b + d * 2 * G * H,
                   b + d * 2 * G * H + G * H, h0 + d * B * H, NULL, y, yh + d * B * H, NULL);

    input("x", SHAPE(T, B, I));
    constant("w", SHAPE(D, G * H, I), w);
    constant("r", SHAPE(D, G * H, H), r);
    constant("b", SHAPE(D, 2 * G * H), b);
    constant("h0", SHAPE(D, B, H), h0);
    pdc_attrs *a = set_int(attrs(), "hidden_size", H);
    set_string(a, "direction", "bidirectional");
    set_int(a, "linear_before_reset", lbr);
    layer_n("gru", a, NAMES("y", "yh"), NAMES("x", "w", "r", "b", "", "h0"));
    output("y");
    output("yh");
    const float *in[] = {x};
    expect e[] = {{SHAPE(T, D, B, H), y}, {SHAPE(D, B, H), yh}};
    run_expect(1, in, 2, e);
}

START_TEST(gru_bidirectional_h2)
{
    gru_bidir_case(0);
}
END_TEST

START_TEST(gru_bidirectional_h2_lbr)
{
    gru_bidir_case(1);
}
END_TEST

START_TEST(rnn_oracle_matches_scalar)
{
    /* the loop oracle agrees with the written-out H=1 LSTM and GRU recurrences above */
    float y[2], hT[1], cT[1];
    rnn_oracle(1, 0, 2, 1, 0, 1, 1, 1, 0, F(1, -2), lstm_w, lstm_r, lstm_b, lstm_b + 4, NULL, NULL, y, hT, cT);
    ck_assert_float_eq_tol(y[0], 0.246670928f, 1e-6f);
    ck_assert_float_eq_tol(y[1], -0.112865269f, 1e-6f);
    ck_assert_float_eq_tol(cT[0], -0.165096509f, 1e-6f);
    for (int lbr = 0; lbr < 2; lbr++) {
        rnn_oracle(0, lbr, 2, 1, 0, 1, 1, 1, 0, F(1, -2), gru_w, gru_r, gru_b, gru_b + 3, F(0.5f), NULL, y, hT, NULL);
        ck_assert_float_eq_tol(y[0], lbr ? 0.565923446f : 0.524205016f, 1e-6f);
        ck_assert_float_eq_tol(y[1], lbr ? -0.329154067f : -0.352825571f, 1e-6f);
    }
}
END_TEST

/* ------------------------------------------------------------------ whole programs, failures */

START_TEST(chain_of_layers)
{
    /* x = [1,-2,3,-4] -> conv 1x1 (w -1) -> [-1,2,-3,4] -> relu -> [0,2,0,4] -> global_avgpool -> 1.5
     * -> flatten [1,1] -> fc w [[1],[-1]] -> [1.5,-1.5] -> softmax -> [sig(3), sig(-3)];
     * the relu activation is a second graph output */
    input("x", SHAPE(1, 1, 2, 2));
    constant("w", SHAPE(1, 1, 1, 1), F(-1));
    constant("fw", SHAPE(2, 1), F(1, -1));
    layer("conv", NULL, "c", NAMES("x", "w"));
    layer("relu", NULL, "r", NAMES("c"));
    layer("global_avgpool", NULL, "g", NAMES("r"));
    layer("flatten", NULL, "f", NAMES("g"));
    layer("fc", NULL, "l", NAMES("f", "fw"));
    layer("softmax", NULL, "p", NAMES("l"));
    output("p");
    output("r");
    const float *in[] = {F(1, -2, 3, -4)};
    float s3 = (float)sig(3.0);
    expect e[] = {{SHAPE(1, 2), F(s3, 1 - s3)}, {SHAPE(1, 1, 2, 2), F(0, 2, 0, 4)}};
    run_expect(1, in, 2, e);
}
END_TEST

START_TEST(failed_run_leaves_output_untouched)
{
    input("x", SHAPE(1, 4));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    float xb[4] = {-1, 2, -3, 4}, yb[4] = {42, 42, 42, 42};
    pdc_tensor *tx = NULL, *ty = NULL;
    /* wrong input shape [1,3] */
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 3), xb, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 4), yb, &ty));
    ck_assert_status(ctx, pdc_program_run(prog, 1, &tx, 1, &ty), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "'x'");
    for (int i = 0; i < 4; i++) ck_assert_float_eq(yb[i], 42);
    pdc_tensor_destroy(tx);
    /* the right shape then works */
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 4), xb, &tx));
    ck_assert_ok(ctx, pdc_program_run(prog, 1, &tx, 1, &ty));
    ck_assert_floats_near(yb, F(0, 2, 0, 4), 4, TOL);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(prog);
}
END_TEST

START_TEST(out_of_memory_run_leaves_output_untouched)
{
    /* two 64 KiB activations; with max_memory 4 KiB the run's arena cannot be had */
    enum { N = 16384 };
    input("x", SHAPE(1, N));
    constant("two", SHAPE(1), F(2));
    layer("relu", NULL, "h", NAMES("x"));
    layer("mul", NULL, "y", NAMES("h", "two"));
    output("y");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    float *xb = malloc(N * sizeof *xb), *yb = malloc(N * sizeof *yb);
    ck_assert_ptr_nonnull(xb);
    ck_assert_ptr_nonnull(yb);
    for (int i = 0; i < N; i++) {
        xb[i] = (float)(i % 7) - 3;
        yb[i] = 42;
    }
    pdc_tensor *tx = NULL, *ty = NULL;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, N), xb, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, N), yb, &ty));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "4096"));
    ck_assert_status(ctx, pdc_program_run(prog, 1, &tx, 1, &ty), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "ref: activation memory");
    for (int i = 0; i < N; i++) ck_assert_float_eq(yb[i], 42);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    ck_assert_ok(ctx, pdc_program_run(prog, 1, &tx, 1, &ty));
    for (int i = 0; i < N; i++) ck_assert_float_eq(yb[i], xb[i] > 0 ? 2 * xb[i] : 0);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(prog);
    free(xb);
    free(yb);
}
END_TEST

typedef struct thread_job {
    const pdc_program *prog;
    pdc_tensor *x, *y;
    int ok;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    j->ok = 1;
    for (int it = 0; it < 200 && j->ok; it++)
        if (pdc_program_run(j->prog, 1, &j->x, 1, &j->y) != PDC_OK) j->ok = 0;
    return NULL;
}

START_TEST(concurrent_runs)
{
    /* y = relu(x) * 2 + 1 from 4 threads at once, each with its own tensors */
    input("x", SHAPE(1, 64));
    constant("two", SHAPE(1), F(2));
    constant("one", SHAPE(1), F(1));
    layer("relu", NULL, "r", NAMES("x"));
    layer("mul", NULL, "m", NAMES("r", "two"));
    layer("add", NULL, "y", NAMES("m", "one"));
    output("y");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    enum { NT = 4 };
    static float xb[NT][64], yb[NT][64];
    thread_job jobs[NT];
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) {
        for (int i = 0; i < 64; i++) xb[t][i] = (float)(i - 32) * (float)(t + 1);
        jobs[t] = (thread_job){prog, NULL, NULL, 0};
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 64), xb[t], &jobs[t].x));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 64), yb[t], &jobs[t].y));
    }
    for (int t = 0; t < NT; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    for (int t = 0; t < NT; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < NT; t++) {
        ck_assert(jobs[t].ok);
        float want[64];
        for (int i = 0; i < 64; i++) want[i] = (xb[t][i] > 0 ? xb[t][i] : 0) * 2 + 1;
        ck_assert_floats_near(yb[t], want, 64, TOL);
        pdc_tensor_destroy(jobs[t].x);
        pdc_tensor_destroy(jobs[t].y);
    }
    pdc_program_destroy(prog);
}
END_TEST

/* ------------------------------------------------------------------ suite */

static Suite *ref_suite(void)
{
    Suite *s = suite_create("ref_ops");
    TCase *tc;

    tc = tcase_create("conv");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, conv2d_basic);
    tcase_add_test(tc, conv2d_stride_pad_bias);
    tcase_add_test(tc, conv2d_asymmetric_pads);
    tcase_add_test(tc, conv2d_dilation);
    tcase_add_test(tc, conv2d_groups);
    tcase_add_test(tc, conv2d_depthwise);
    tcase_add_test(tc, conv2d_depthwise_multiplier);
    tcase_add_test(tc, conv1d);
    tcase_add_test(tc, conv1d_channels_bias);
    tcase_add_test(tc, conv3d);
    tcase_add_test(tc, conv3d_stride_pad);
    suite_add_tcase(s, tc);

    tc = tcase_create("gemm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, fc_bias);
    tcase_add_test(tc, fc_flattens);
    tcase_add_test(tc, gemm_trans_alpha_beta);
    tcase_add_test(tc, gemm_column_bias);
    tcase_add_test(tc, gemm_no_bias_full_c);
    tcase_add_test(tc, matmul_batch_broadcast_both);
    tcase_add_test(tc, matmul_rank2_rhs);
    tcase_add_test(tc, matmul_plain);
    suite_add_tcase(s, tc);

    tc = tcase_create("norm_act");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, batchnorm_values);
    tcase_add_test(tc, batchnorm_default_epsilon);
    tcase_add_test(tc, act_relu);
    tcase_add_test(tc, act_clip_relu6);
    tcase_add_test(tc, act_clip_max_only);
    tcase_add_test(tc, act_clip_no_bounds);
    tcase_add_test(tc, act_leaky_relu);
    tcase_add_test(tc, act_leaky_relu_default);
    tcase_add_test(tc, act_sigmoid);
    tcase_add_test(tc, act_tanh);
    tcase_add_test(tc, act_hardswish);
    tcase_add_test(tc, act_hardsigmoid_default);
    tcase_add_test(tc, act_hardsigmoid_alpha_beta);
    suite_add_tcase(s, tc);

    tc = tcase_create("binary_shape");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, add_row_broadcast);
    tcase_add_test(tc, mul_outer_broadcast);
    tcase_add_test(tc, add_rank3_broadcast);
    tcase_add_test(tc, mul_same_shape_and_scalar_like);
    tcase_add_test(tc, add_nchw_channel_bias);
    tcase_add_test(tc, sub_broadcast_both_sides);
    tcase_add_test(tc, div_channel_and_ieee);
    tcase_add_test(tc, concat_axis1);
    tcase_add_test(tc, concat_negative_axis);
    tcase_add_test(tc, concat_axis0_three_inputs);
    tcase_add_test(tc, flatten_axes);
    tcase_add_test(tc, reshape_zero_and_minus_one);
    tcase_add_test(tc, transpose_default_and_perm);
    tcase_add_test(tc, transpose_nchw_to_nhwc);
    tcase_add_test(tc, transpose_rank3);
    tcase_add_test(tc, softmax_last_axis);
    tcase_add_test(tc, softmax_axis0);
    tcase_add_test(tc, softmax_middle_axis);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, maxpool_basic);
    tcase_add_test(tc, maxpool_padding_never_wins);
    tcase_add_test(tc, maxpool_ceil_mode);
    tcase_add_test(tc, maxpool_dilation);
    tcase_add_test(tc, avgpool_ceil_mode);
    tcase_add_test(tc, avgpool_padding_count_include_pad);
    tcase_add_test(tc, pool_ceil_mode_with_pads);
    tcase_add_test(tc, pool_3d);
    tcase_add_test(tc, pool_3d_stride);
    tcase_add_test(tc, global_avgpool_2d_3d);
    suite_add_tcase(s, tc);

    tc = tcase_create("rnn");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rnn_oracle_matches_scalar);
    tcase_add_test(tc, lstm_forward_h1);
    tcase_add_test(tc, lstm_reverse_initial_state);
    tcase_add_test(tc, lstm_bidirectional_h2);
    tcase_add_test(tc, gru_forward_h1);
    tcase_add_test(tc, gru_linear_before_reset);
    tcase_add_test(tc, gru_reverse_h1);
    tcase_add_test(tc, gru_bidirectional_h2);
    tcase_add_test(tc, gru_bidirectional_h2_lbr);
    suite_add_tcase(s, tc);

    tc = tcase_create("program");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, chain_of_layers);
    tcase_add_test(tc, failed_run_leaves_output_untouched);
    tcase_add_test(tc, out_of_memory_run_leaves_output_untouched);
    tcase_add_test(tc, concurrent_runs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(ref_suite()); }
