/*
 * model_builder.h - the model-building helpers of the backend suites (test_cpu, test_gpu, test_arm):
 * one context and one model per test (ctx, mdl, made by the suite's fixture), and short calls that
 * add inputs, random constants, pruned constants and layers to mdl, asserting each call succeeds.
 * Include after test/common/testutil.h's system headers; every includer is a single test program.
 */
#ifndef PDC_TEST_MODEL_BUILDER_H
#define PDC_TEST_MODEL_BUILDER_H

#include <stdint.h>

#include "test/common/testutil.h"

#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), ((const char *const[]){__VA_ARGS__})
#define DIMS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static pdc_context *ctx;
static pdc_model *mdl;

static void input(const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(mdl, name, rank, dims));
}

/* A constant of random values in [-scale, scale). */
static void constant_rand(const char *name, size_t rank, const int64_t *dims, float scale, uint32_t seed)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    test_fill_random(v, n, seed);
    for (size_t i = 0; i < n; i++) v[i] *= scale;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
    free(v);
}

/* A constant of random values (seed) pruned over its matrix view (all dims but the last x the last):
 * kind 0 dense, 1 bh x bw blocks, 2 unstructured; block (element) b is kept when draw(&state) % 100 <
 * keep_pct, state starting from seed. The suites pass their own draw, so each keeps its masks. */
static void constant_pruned_by(const char *name, size_t rank, const int64_t *dims, int kind, int64_t bh, int64_t bw,
                               int keep_pct, uint32_t seed, uint32_t (*draw)(uint32_t *state))
{
    int64_t rows = 1, cols = dims[rank - 1];
    for (size_t i = 0; i + 1 < rank; i++) rows *= dims[i];
    size_t n = (size_t)(rows * cols);
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    test_fill_random(v, n, seed);
    if (kind == 0) {
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
        free(v);
        return;
    }
    if (kind == 2) bh = bw = 1;
    int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
    uint8_t *mask = malloc((size_t)(nbr * nbc));
    ck_assert_ptr_nonnull(mask);
    uint32_t state = seed * 2654435761u + 1u;
    for (int64_t b = 0; b < nbr * nbc; b++) mask[b] = (int)(draw(&state) % 100) < keep_pct;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++)
            if (!mask[(r / bh) * nbc + q / bw]) v[r * cols + q] = 0.0f;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
    if (kind == 1) ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, name, bh, bw, (size_t)(nbr * nbc), mask));
    else ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, name, n, mask));
    free(mask);
    free(v);
}

static pdc_attrs *attrs(void)
{
    pdc_attrs *a = NULL;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

/* Adds a layer named after its output; destroys attrs (may be NULL). */
static void layer(const char *op, pdc_attrs *a, const char *out, size_t n_in, const char *const *ins)
{
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, out, op, n_in, ins, 1, &out, a));
    pdc_attrs_destroy(a);
}

static void output(const char *name) { ck_assert_ok(ctx, pdc_model_mark_output(mdl, name)); }

#endif
