/*
 * model_builder.h - the model-building helpers of the suites that build models with the public API
 * (test_cpu_*, test_gpu, test_arm, test_ref_*): one context and one model per test (ctx, mdl, made by
 * the suite's fixture), and short calls that add inputs, constants (given, random, pruned), attributes
 * and layers to mdl, asserting each call succeeds; and the tensors a compiled program takes. All static
 * inline: a suite uses what it needs. Include after test/common/testutil.h's system headers; every
 * includer is a single test program.
 */
#ifndef PDC_TEST_MODEL_BUILDER_H
#define PDC_TEST_MODEL_BUILDER_H

#include <stdint.h>

#include "test/common/testutil.h"

#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), ((const char *const[]){__VA_ARGS__})
#define DIMS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static pdc_context *ctx;
static pdc_model *mdl;

/* ------------------------------------------------------------------ the fixture */

/* A fresh context and an empty model `name` (a suite's setup). */
static inline void mb_open(const char *name)
{
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_model_create(ctx, name, &mdl));
}

/* Destroys the model and the context (a suite's teardown). */
static inline void mb_close(void)
{
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ctx = NULL;
}

/* Replaces mdl with a fresh empty model `name` (a test's next case). */
static inline void fresh_model(const char *name)
{
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, name, &mdl));
}

/* ------------------------------------------------------------------ inputs and constants */

static inline void input(const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(mdl, name, rank, dims));
}

static inline void constant(const char *name, size_t rank, const int64_t *dims, const float *data)
{
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, data));
}

/* A constant of random values in [-scale, scale). */
static inline void constant_rand(const char *name, size_t rank, const int64_t *dims, float scale, uint32_t seed)
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

/* Zeroes the elements of the rows x cols matrix w whose bh x bw block is 0 in mask (the blocks row by
 * row, ceil(cols / bw) of them a row; edge blocks partial). */
static inline void zero_pruned_blocks(float *w, int64_t rows, int64_t cols, int64_t bh, int64_t bw, const uint8_t *mask)
{
    int64_t nbc = (cols + bw - 1) / bw;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++)
            if (!mask[(r / bh) * nbc + q / bw]) w[r * cols + q] = 0.0f;
}

/* A constant of random values (seed) pruned over its matrix view (all dims but the last x the last):
 * kind 0 dense, 1 bh x bw blocks, 2 unstructured; block (element) b is kept when draw(&state) % 100 <
 * keep_pct, state starting from seed. The suites pass their own draw, so each keeps its masks. */
static inline void constant_pruned_by(const char *name, size_t rank, const int64_t *dims, int kind, int64_t bh,
                                      int64_t bw, int keep_pct, uint32_t seed, uint32_t (*draw)(uint32_t *state))
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
    zero_pruned_blocks(v, rows, cols, bh, bw, mask);
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
    if (kind == 1) ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, name, bh, bw, (size_t)(nbr * nbc), mask));
    else ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, name, n, mask));
    free(mask);
    free(v);
}

/* A constant `name` of test_fill_random(seed) values, unstructured-pruned: element i kept where mask[i]. */
static inline void constant_masked(const char *name, size_t rank, const int64_t *dims, const uint8_t *mask, uint32_t seed)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *w = malloc((n ? n : 1) * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, n, seed);
    for (size_t i = 0; i < n; i++)
        if (!mask[i]) w[i] = 0.0f;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, w));
    ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, name, n, mask));
    free(w);
}

/* A constant `name` [o, c, k, k] of test_fill_random(seed) values, pattern-pruned: kernel i (of the o x c)
 * keeps the taps of pattern kp[i] of the n_pat masks pats (bit t: tap t, row by row), or none where
 * kp[i] < 0. */
static inline void constant_patterned(const char *name, int64_t o, int64_t c, int64_t k, size_t n_pat,
                                      const uint64_t *pats, const int32_t *kp, uint32_t seed)
{
    size_t taps = (size_t)(k * k), wn = (size_t)(o * c) * taps;
    float *w = malloc(wn * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, wn, seed);
    for (size_t i = 0; i < (size_t)(o * c); i++)
        for (size_t t = 0; t < taps; t++)
            if (kp[i] < 0 || !(pats[kp[i]] >> t & 1)) w[i * taps + t] = 0.0f;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, DIMS(o, c, k, k), w));
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, name, k, k, n_pat, pats, (size_t)(o * c), kp));
    free(w);
}

/* ------------------------------------------------------------------ attributes and layers */

static inline pdc_attrs *attrs(void)
{
    pdc_attrs *a = NULL;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

/* Setters that return a, so that they chain: set_int(set_ints(attrs(), "pads", DIMS(1, 1)), "group", 2). */
static inline pdc_attrs *set_int(pdc_attrs *a, const char *name, int64_t v)
{
    ck_assert_ok(ctx, pdc_attrs_set_int(a, name, v));
    return a;
}

static inline pdc_attrs *set_ints(pdc_attrs *a, const char *name, size_t n, const int64_t *v)
{
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, name, n, v));
    return a;
}

static inline pdc_attrs *set_float(pdc_attrs *a, const char *name, float v)
{
    ck_assert_ok(ctx, pdc_attrs_set_float(a, name, v));
    return a;
}

static inline pdc_attrs *set_string(pdc_attrs *a, const char *name, const char *v)
{
    ck_assert_ok(ctx, pdc_attrs_set_string(a, name, v));
    return a;
}

/* Adds a layer named after its first output; destroys attrs (which may be NULL). */
static inline void layer_n(const char *op, pdc_attrs *a, size_t n_out, const char *const *outs, size_t n_in,
                           const char *const *ins)
{
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, outs[0], op, n_in, ins, n_out, outs, a));
    pdc_attrs_destroy(a);
}

/* Adds a layer named after its output; destroys attrs (may be NULL). */
static inline void layer(const char *op, pdc_attrs *a, const char *out, size_t n_in, const char *const *ins)
{
    layer_n(op, a, 1, &out, n_in, ins);
}

/* An "lstm" or "gru" layer `name` of hidden size h; the direction and linear_before_reset (lbr) set
 * only where given (direction not NULL, lbr >= 0). */
static inline void rnn_layer(const char *op, const char *name, int64_t h, const char *direction, int lbr, size_t n_in,
                             const char *const *ins, size_t n_out, const char *const *outs)
{
    pdc_attrs *a = set_int(attrs(), "hidden_size", h);
    if (direction) set_string(a, "direction", direction);
    if (lbr >= 0) set_int(a, "linear_before_reset", lbr);
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, name, op, n_in, ins, n_out, outs, a));
    pdc_attrs_destroy(a);
}

static inline void output(const char *name) { ck_assert_ok(ctx, pdc_model_mark_output(mdl, name)); }

/* mdl := y = relu(x), x of shape [rows, cols]: the smallest model. */
static inline void relu_model(int64_t rows, int64_t cols)
{
    input("x", DIMS(rows, cols));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
}

/* mdl := y = matmul(a, b), both graph inputs (a product per batch, broadcast). */
static inline void matmul_model(size_t ar, const int64_t *ad, size_t br, const int64_t *bd)
{
    input("a", ar, ad);
    input("b", br, bd);
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
}

/* ------------------------------------------------------------------ a program's tensors */

/* Tensors for prog's inputs, input i filled by test_fill_random from seed + 17 i, and for its outputs,
 * shaped as prog says: *tin and *tout are calloc'd arrays (free_tensors frees each). */
static inline void program_tensors(const pdc_program *prog, uint32_t seed, size_t *n_in, pdc_tensor ***tin,
                                   size_t *n_out, pdc_tensor ***tout)
{
    ck_assert_ok(ctx, pdc_program_num_inputs(prog, n_in));
    ck_assert_ok(ctx, pdc_program_num_outputs(prog, n_out));
    *tin = calloc(*n_in + 1, sizeof **tin);
    *tout = calloc(*n_out + 1, sizeof **tout);
    ck_assert(*tin && *tout);
    for (size_t i = 0; i < *n_in; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_input_info(prog, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &(*tin)[i]));
        test_fill_random(pdc_tensor_data((*tin)[i]), pdc_tensor_size((*tin)[i]), seed + 17u * (uint32_t)i);
    }
    for (size_t i = 0; i < *n_out; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_output_info(prog, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &(*tout)[i]));
    }
}

/* Destroys the n tensors of t (NULL ones skipped) and frees t. */
static inline void free_tensors(pdc_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++) pdc_tensor_destroy(t[i]);
    free(t);
}

#endif
