/*
 * project.c - the pruning projections, on plain weight buffers: the public pdc_prune_project_*
 * functions (for a training loop's ADMM Z-step) and the cores the prune-* passes call, so both give
 * the same bits. Every choice has a documented tie-break (include/pdc.h) so that another
 * implementation, e.g. a user's PyTorch script, reproduces the result exactly:
 *  - magnitudes and norms are compared as double-precision values (|w| and sums of w*w taken in
 *    increasing element order);
 *  - counts are floor(rate * n) in double precision, as Python's math.floor(rate * n).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/project.h"

#define PROJ_ERR(ctx, who, status, fmt, ...) pdc_error((ctx), (status), "%s: " fmt, (who), __VA_ARGS__)

static pdc_status check_rate(const pdc_context *ctx, const char *who, const char *what, double rate)
{
    if (!(rate >= 0.0 && rate < 1.0))
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s rate %g is outside [0, 1)", what, rate);
    return PDC_OK;
}

/* prod of dims, each >= 1, into *n; error on bad dims or overflow. */
static pdc_status check_count(const pdc_context *ctx, const char *who, const char *what, int64_t v, size_t *n)
{
    if (v < 1 || v > IR_DIM_MAX)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s is %" PRId64 " (expected 1..%d)", what, v, IR_DIM_MAX);
    if (pdc_mul_overflow(*n, (size_t)v, n)) return PROJ_ERR(ctx, who, PDC_ERR_OVERFLOW, "%s: size overflows", what);
    return PDC_OK;
}

uint64_t project_binomial(unsigned n, unsigned k)
{
    if (k > n) return 0;
    if (k > n - k) k = n - k;
    uint64_t c = 1;
    for (unsigned i = 0; i < k; i++) {
        /* c * (n - i) / (i + 1) is exact at every step; saturate instead of overflowing */
        uint64_t t;
        if (__builtin_mul_overflow(c, (uint64_t)(n - i), &t)) return UINT64_MAX;
        c = t / (i + 1);
    }
    return c;
}

/* ------------------------------------------------------------------ pattern */

typedef struct mask_count {
    uint64_t mask;
    size_t count;
} mask_count;

static int by_mask(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int by_count_then_mask(const void *a, const void *b)
{
    const mask_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->mask < y->mask ? -1 : x->mask > y->mask;
}

/* A kernel's natural pattern: the centre plus the n-1 other positions of largest |w| (lower position
 * first on equal magnitudes). */
static uint64_t natural_pattern(const float *k, unsigned win, unsigned centre, unsigned n)
{
    uint64_t mask = UINT64_C(1) << centre;
    for (unsigned j = 1; j < n; j++) {
        int best = -1;
        double bv = 0.0;
        for (unsigned p = 0; p < win; p++) {
            if (mask >> p & 1u) continue;
            double v = fabs((double)k[p]);
            if (isnan(v)) v = INFINITY;
            if (best < 0 || v > bv) {
                best = (int)p;
                bv = v;
            }
        }
        mask |= UINT64_C(1) << best;
    }
    return mask;
}

/* Valid masks in increasing order: n-1 bits among the win-1 positions other than the centre,
 * enumerated with Gosper's hack on the compressed positions; expand() inserts the centre bit. Removing
 * one fixed bit is monotonic, so compressed order is mask order. */
static uint64_t expand(uint64_t x, unsigned centre)
{
    uint64_t low = x & ((UINT64_C(1) << centre) - 1);
    return low | ((x >> centre) << (centre + 1)) | (UINT64_C(1) << centre);
}

static int in_set(const uint64_t *set, size_t n, uint64_t mask)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == mask) return 1;
    return 0;
}

/* Appends the smallest valid masks not yet in set until it has k entries. */
static void pad_patterns(uint64_t *set, size_t have, size_t k, unsigned win, unsigned centre, unsigned n)
{
    unsigned bits = n - 1, width = win - 1;
    if (bits == 0) {
        if (have < k && !in_set(set, have, expand(0, centre))) set[have++] = expand(0, centre);
        return;
    }
    uint64_t x = (UINT64_C(1) << bits) - 1, limit = UINT64_C(1) << width;
    while (have < k && x < limit) {
        uint64_t mask = expand(x, centre);
        if (!in_set(set, have, mask)) set[have++] = mask;
        uint64_t c = x & (~x + 1), r = x + c;
        x = (((r ^ x) >> 2) / c) | r;
    }
}

static double kept_norm2(const float *k, unsigned win, uint64_t mask)
{
    double s = 0.0;
    for (unsigned p = 0; p < win; p++)
        if (mask >> p & 1u) s += (double)k[p] * (double)k[p];
    return isnan(s) ? INFINITY : s;
}

pdc_status project_pattern_check(const pdc_context *ctx, const char *who, int64_t kh, int64_t kw, size_t n_patterns,
                                 size_t pattern_size)
{
    if (kh % 2 == 0 || kw % 2 == 0)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG,
                        "the %" PRId64 "x%" PRId64 " window has no centre (patterns need odd kh and kw)", kh, kw);
    unsigned win = (unsigned)(kh * kw); /* callers checked kh * kw <= 64 */
    if (pattern_size < 1 || pattern_size > win)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "pattern size %zu is outside 1..%u (the %" PRId64 "x%" PRId64
                        " window)", pattern_size, win, kh, kw);
    uint64_t possible = project_binomial(win - 1, (unsigned)pattern_size - 1);
    if (n_patterns < 1) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s", "the number of patterns must be at least 1");
    if ((uint64_t)n_patterns > possible)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG,
                        "%zu patterns requested, but only %" PRIu64 " patterns of %zu entries contain the centre of a %"
                        PRId64 "x%" PRId64 " window (C(%u,%zu))",
                        n_patterns, possible, pattern_size, kh, kw, win - 1, pattern_size - 1);
    return PDC_OK;
}

pdc_status project_pattern(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c, int64_t kh,
                           int64_t kw, size_t n_patterns, size_t pattern_size, uint32_t flags, uint64_t *patterns,
                           int32_t *kernel_pattern)
{
    size_t kernels = 1, total;
    pdc_status st;
    if ((st = check_count(ctx, who, "out_channels", o, &kernels)) || (st = check_count(ctx, who, "in_channels", c, &kernels)))
        return st;
    size_t winz = 1;
    if ((st = check_count(ctx, who, "kh", kh, &winz)) || (st = check_count(ctx, who, "kw", kw, &winz))) return st;
    if (winz > IR_MAX_PATTERN_WINDOW)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "the %" PRId64 "x%" PRId64 " window has %zu entries (at most %d)",
                        kh, kw, winz, IR_MAX_PATTERN_WINDOW);
    if (pdc_mul_overflow(kernels, winz, &total)) return PROJ_ERR(ctx, who, PDC_ERR_OVERFLOW, "%s", "weight size overflows");
    if (!w || !patterns) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s is NULL", !w ? "weights" : "patterns");
    if (flags & ~(uint32_t)(PDC_PROJECT_GIVEN_PATTERNS | PDC_PROJECT_KEEP_PRUNED))
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "unknown flag bits 0x%x",
                        flags & ~(uint32_t)(PDC_PROJECT_GIVEN_PATTERNS | PDC_PROJECT_KEEP_PRUNED));
    if ((flags & PDC_PROJECT_KEEP_PRUNED) && !kernel_pattern)
        return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s", "PDC_PROJECT_KEEP_PRUNED needs kernel_pattern");
    if (n_patterns < 1) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s", "the number of patterns must be at least 1");
    unsigned win = (unsigned)winz, centre = (unsigned)((kh / 2) * kw + kw / 2);
    uint64_t valid = win == 64 ? UINT64_MAX : (UINT64_C(1) << win) - 1;

    if (flags & PDC_PROJECT_GIVEN_PATTERNS) {
        for (size_t i = 0; i < n_patterns; i++)
            if (!patterns[i] || (patterns[i] & ~valid))
                return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG,
                                "pattern %zu (0x%" PRIx64 ") is empty or outside the %" PRId64 "x%" PRId64 " window", i,
                                patterns[i], kh, kw);
    } else {
        if ((st = project_pattern_check(ctx, who, kh, kw, n_patterns, pattern_size))) return st;
        /* natural patterns of the live kernels, counted */
        uint64_t *nat = pdc_alloc(ctx, (kernels ? kernels : 1) * sizeof *nat);
        mask_count *mc = pdc_alloc(ctx, (kernels ? kernels : 1) * sizeof *mc);
        if (!nat || !mc) {
            pdc_free(nat);
            pdc_free(mc);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        size_t live = 0, distinct = 0;
        for (size_t k = 0; k < kernels; k++) {
            if ((flags & PDC_PROJECT_KEEP_PRUNED) && kernel_pattern[k] < 0) continue;
            nat[live++] = natural_pattern(w + k * win, win, centre, (unsigned)pattern_size);
        }
        qsort(nat, live, sizeof *nat, by_mask);
        for (size_t i = 0; i < live; i++) {
            if (distinct && mc[distinct - 1].mask == nat[i]) mc[distinct - 1].count++;
            else mc[distinct++] = (mask_count){nat[i], 1};
        }
        qsort(mc, distinct, sizeof *mc, by_count_then_mask);
        size_t have = distinct < n_patterns ? distinct : n_patterns;
        for (size_t i = 0; i < have; i++) patterns[i] = mc[i].mask;
        pad_patterns(patterns, have, n_patterns, win, centre, (unsigned)pattern_size);
        pdc_free(nat);
        pdc_free(mc);
    }

    /* project every kernel onto the pattern keeping the largest norm (earlier pattern on ties) */
    for (size_t k = 0; k < kernels; k++) {
        float *kern = w + k * win;
        int32_t best = -1;
        if (!((flags & PDC_PROJECT_KEEP_PRUNED) && kernel_pattern[k] < 0)) {
            double bv = -1.0;
            for (size_t i = 0; i < n_patterns; i++) {
                double v = kept_norm2(kern, win, patterns[i]);
                if (v > bv) {
                    bv = v;
                    best = (int32_t)i;
                }
            }
        }
        uint64_t keep = best >= 0 ? patterns[best] : 0;
        for (unsigned p = 0; p < win; p++)
            if (!(keep >> p & 1u)) kern[p] = 0.0f;
        if (kernel_pattern) kernel_pattern[k] = best;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ connectivity, block, unstructured */

/* Marks in removed[] the floor(rate * n) groups of smallest norms[i] (lower index first on ties). */
static pdc_status rank_and_select(const pdc_context *ctx, const double *norms, size_t n, double rate,
                                  uint8_t *removed)
{
    pass_ranked *r = pdc_alloc(ctx, (n ? n : 1) * sizeof *r);
    if (!r) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) r[i] = (pass_ranked){norms[i], i};
    pass_rank(r, n);
    size_t drop = pass_rate_count(rate, n);
    memset(removed, 0, n);
    for (size_t i = 0; i < drop; i++) removed[r[i].index] = 1;
    pdc_free(r);
    return PDC_OK;
}

pdc_status project_connectivity(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c,
                                int64_t kernel_size, double rate, uint8_t *keep)
{
    size_t kernels = 1, win = 1, total;
    pdc_status st;
    if ((st = check_count(ctx, who, "out_channels", o, &kernels)) || (st = check_count(ctx, who, "in_channels", c, &kernels)) ||
        (st = check_count(ctx, who, "kernel_size", kernel_size, &win)))
        return st;
    if (pdc_mul_overflow(kernels, win, &total)) return PROJ_ERR(ctx, who, PDC_ERR_OVERFLOW, "%s", "weight size overflows");
    if (!w) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s is NULL", "weights");
    if ((st = check_rate(ctx, who, "connectivity", rate))) return st;
    double *norms = pdc_alloc(ctx, kernels * sizeof *norms);
    uint8_t *removed = pdc_alloc(ctx, kernels);
    if (!norms || !removed) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < kernels && !st; k++) {
        double s = 0.0;
        for (size_t p = 0; p < win; p++) s += (double)w[k * win + p] * (double)w[k * win + p];
        norms[k] = s;
    }
    if (!st) st = rank_and_select(ctx, norms, kernels, rate, removed);
    for (size_t k = 0; k < kernels && !st; k++) {
        if (removed[k]) memset(w + k * win, 0, win * sizeof *w);
        if (keep) keep[k] = !removed[k];
    }
    pdc_free(norms);
    pdc_free(removed);
    return st;
}

pdc_status project_block(const pdc_context *ctx, const char *who, float *a, int64_t rows, int64_t cols, int64_t bh,
                         int64_t bw, double rate, uint8_t *keep)
{
    size_t total = 1, dummy = 1;
    pdc_status st;
    if ((st = check_count(ctx, who, "rows", rows, &total)) || (st = check_count(ctx, who, "cols", cols, &total)) ||
        (st = check_count(ctx, who, "block rows", bh, &dummy)) || (st = check_count(ctx, who, "block cols", bw, &dummy)))
        return st;
    if (!a) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s is NULL", "matrix");
    if ((st = check_rate(ctx, who, "block", rate))) return st;
    size_t nbr = (size_t)((rows + bh - 1) / bh), nbc = (size_t)((cols + bw - 1) / bw), nb = nbr * nbc;
    double *norms = pdc_calloc(ctx, nb, sizeof *norms);
    uint8_t *removed = pdc_alloc(ctx, nb);
    if (!norms || !removed) st = PDC_ERR_OUT_OF_MEMORY;
    /* row-major over the matrix: each block's elements are summed in increasing element order */
    for (int64_t r = 0; r < rows && !st; r++)
        for (int64_t c = 0; c < cols; c++) {
            double v = (double)a[r * cols + c];
            norms[(size_t)(r / bh) * nbc + (size_t)(c / bw)] += v * v;
        }
    if (!st) st = rank_and_select(ctx, norms, nb, rate, removed);
    for (int64_t r = 0; r < rows && !st; r++)
        for (int64_t c = 0; c < cols; c++)
            if (removed[(size_t)(r / bh) * nbc + (size_t)(c / bw)]) a[r * cols + c] = 0.0f;
    for (size_t b = 0; b < nb && !st && keep; b++) keep[b] = !removed[b];
    pdc_free(norms);
    pdc_free(removed);
    return st;
}

pdc_status project_unstructured(const pdc_context *ctx, const char *who, float *w, size_t n, double rate,
                                uint8_t *keep)
{
    pdc_status st;
    if (!w) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s is NULL", "weights");
    if (n < 1) return PROJ_ERR(ctx, who, PDC_ERR_INVALID_ARG, "%s", "n must be at least 1");
    if ((st = check_rate(ctx, who, "unstructured", rate))) return st;
    double *norms = pdc_alloc(ctx, n * sizeof *norms);
    uint8_t *removed = pdc_alloc(ctx, n);
    if (!norms || !removed) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && !st; i++) norms[i] = fabs((double)w[i]);
    if (!st) st = rank_and_select(ctx, norms, n, rate, removed);
    for (size_t i = 0; i < n && !st; i++) {
        if (removed[i]) w[i] = 0.0f;
        if (keep) keep[i] = !removed[i];
    }
    pdc_free(norms);
    pdc_free(removed);
    return st;
}

/* ------------------------------------------------------------------ public API */

#define CTX_CHECK(ctx)                                                                          \
    do {                                                                                        \
        if (!(ctx)) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: ctx is NULL", __func__); \
    } while (0)

PDC_API pdc_status pdc_prune_project_pattern(pdc_context *ctx, float *weights, int64_t out_channels,
                                             int64_t in_channels, int64_t kh, int64_t kw, size_t n_patterns,
                                             size_t pattern_size, uint32_t flags, uint64_t *patterns,
                                             int32_t *kernel_pattern)
{
    CTX_CHECK(ctx);
    return project_pattern(ctx, __func__, weights, out_channels, in_channels, kh, kw, n_patterns, pattern_size, flags,
                           patterns, kernel_pattern);
}

PDC_API pdc_status pdc_prune_project_connectivity(pdc_context *ctx, float *weights, int64_t out_channels,
                                                  int64_t in_channels, int64_t kernel_size, double rate,
                                                  uint8_t *kernel_keep)
{
    CTX_CHECK(ctx);
    return project_connectivity(ctx, __func__, weights, out_channels, in_channels, kernel_size, rate, kernel_keep);
}

PDC_API pdc_status pdc_prune_project_block(pdc_context *ctx, float *matrix, int64_t rows, int64_t cols,
                                           int64_t block_rows, int64_t block_cols, double rate, uint8_t *block_keep)
{
    CTX_CHECK(ctx);
    return project_block(ctx, __func__, matrix, rows, cols, block_rows, block_cols, rate, block_keep);
}

PDC_API pdc_status pdc_prune_project_unstructured(pdc_context *ctx, float *weights, size_t n, double rate,
                                                  uint8_t *keep)
{
    CTX_CHECK(ctx);
    return project_unstructured(ctx, __func__, weights, n, rate, keep);
}
