/*
 * expect.h - hand-computed expectations, for the reference backend's suites (test/ref/test_ref_*.c):
 * a model built with model_builder.h's calls is compiled for "ref" and run through pdc_program_run on
 * given inputs; every expected output must come out with its shape and its values (within TOL relative
 * to max(1, max |want|)), and the inputs must come back unmodified. Short forms for the common models:
 * one input through one layer (op1_case), an input and a constant through one layer (binary_case).
 */
#ifndef PDC_TEST_EXPECT_H
#define PDC_TEST_EXPECT_H

#include <stdint.h>

#include "test/common/testutil.h"
#include "test/common/model_builder.h"

#define TOL 1e-5f

/* "rank, dims" for the builder calls: SHAPE(2, 3) -> 2, (const int64_t[]){2, 3} */
#define SHAPE DIMS
#define F(...) ((const float[]){__VA_ARGS__})

/* An expected graph output: its name, shape and values. */
typedef struct expect {
    const char *name;
    size_t rank;
    const int64_t *dims;
    const float *data;
} expect;

/* "count, array" for run_expect: the inputs' data, INS(x, z); the expected outputs, in the order the
 * program lists them, OUTS({"y", SHAPE(2, 2), F(1, 2, 3, 4)}, {"z", SHAPE(1), F(5)}). */
#define INS(...) (sizeof((const float *[]){__VA_ARGS__}) / sizeof(const float *)), ((const float *const[]){__VA_ARGS__})
#define OUTS(...) (sizeof((const expect[]){__VA_ARGS__}) / sizeof(expect)), ((const expect[]){__VA_ARGS__})

/* The suites' fixture: a fresh context and an empty model. */
static inline void ref_setup(void) { mb_open("ref_ops"); }

static inline float *copy_floats(const float *src, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

/* Marks want's outputs as graph outputs (in that order), compiles the model for "ref", runs it on ins
 * (one array per graph input, shapes from the program) and checks every output's shape and values;
 * also checks the inputs were not modified. */
static inline void run_expect(size_t n_in, const float *const *ins, size_t n_out, const expect *want)
{
    for (size_t i = 0; i < n_out; i++) output(want[i].name);
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

/* One input x, one output "y" of shape dims and values want. */
static inline void run1(const float *x, size_t rank, const int64_t *dims, const float *want)
{
    run_expect(INS(x), OUTS({"y", rank, dims, want}));
}

/* y = op(x) with attrs a (may be NULL): x of shape xs, y of shape ys. */
static inline void op1_case(const char *op, pdc_attrs *a, size_t xr, const int64_t *xd, const float *x, size_t yr,
                            const int64_t *yd, const float *want)
{
    input("x", xr, xd);
    layer(op, a, "y", NAMES("x"));
    run1(x, yr, yd, want);
}

/* y = op(a, b) with attrs at (may be NULL): input a of shape as, constant b of shape bs, y of shape ys. */
static inline void binary_case(const char *op, pdc_attrs *at, size_t ar, const int64_t *ad, const float *a, size_t br,
                               const int64_t *bd, const float *b, size_t yr, const int64_t *yd, const float *want)
{
    input("a", ar, ad);
    constant("b", br, bd, b);
    layer(op, at, "y", NAMES("a", "b"));
    run1(a, yr, yd, want);
}

/* 1, 2, ..., 25: a 4x4 (its first 16) or 5x5 input whose element (r, c) is r * side + c + 1. */
static const float seq[25] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};

#endif
