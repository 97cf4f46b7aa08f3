/*
 * project_kgs.c - the kernel-group projection (RT3D's KGS) behind pdc_prune_project_kgs and the
 * prune-kgs pass: the kernel grid [O, C] of a 3-D conv weight is cut into go x gc groups and each
 * group keeps the same `keep` window positions, those of largest group norm - or, with a limited set
 * of masks for the layer (n_masks), the set's mask that keeps the most of the group's norm. Tie-breaks
 * as in include/pdc.h, so another implementation reproduces the result bit for bit.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "passes/project.h"

typedef struct mask_count {
    uint64_t mask;
    size_t count;
} mask_count;

/* Higher count first, then the smaller bitmask. */
static int by_count(const void *a, const void *b)
{
    const mask_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->mask < y->mask ? -1 : x->mask > y->mask;
}

/* The n_masks most frequent of the groups' natural masks (nonzero ones), higher count first, then the
 * smaller bitmask, into set; returns how many (fewer when fewer are distinct). */
static size_t choose_set(const pdc_context *ctx, const uint64_t *natural, size_t ng, size_t n_masks, uint64_t *set,
                         pdc_status *st)
{
    mask_count *mc = pdc_alloc(ctx, (ng ? ng : 1) * sizeof *mc);
    if (!mc) {
        *st = PDC_ERR_OUT_OF_MEMORY;
        return 0;
    }
    size_t nd = 0;
    for (size_t g = 0; g < ng; g++) {
        if (!natural[g]) continue;
        size_t q = 0;
        while (q < nd && mc[q].mask != natural[g]) q++;
        if (q == nd) mc[nd++] = (mask_count){natural[g], 0};
        mc[q].count++;
    }
    qsort(mc, nd, sizeof *mc, by_count);
    const size_t n = nd < n_masks ? nd : n_masks;
    for (size_t q = 0; q < n; q++) set[q] = mc[q].mask;
    pdc_free(mc);
    return n;
}

pdc_status project_kgs(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c, int64_t kernel_size,
                       int64_t go, int64_t gc, size_t keep, size_t n_masks, const uint8_t *kernel_keep,
                       uint64_t *group_masks)
{
    if (!w) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: weights is NULL", who);
    if (o < 1 || c < 1 || o > IR_DIM_MAX || c > IR_DIM_MAX)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: channels %" PRId64 "x%" PRId64 " outside 1..%d", who, o, c,
                         IR_DIM_MAX);
    if (kernel_size < 1 || kernel_size > IR_MAX_PATTERN_WINDOW)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: kernel_size %" PRId64 " is outside 1..%d", who, kernel_size,
                         IR_MAX_PATTERN_WINDOW);
    if (go < 1 || gc < 1 || go > o || gc > c)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "%s: kernel group %" PRId64 "x%" PRId64 " is not within the %" PRId64 "x%" PRId64 " kernel grid",
                         who, go, gc, o, c);
    if (keep < 1 || keep > (size_t)kernel_size)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: %zu kept positions per group, expected 1..%" PRId64, who, keep,
                         kernel_size);
    size_t total;
    if (pdc_mul_overflow((size_t)(o * c), (size_t)kernel_size, &total))
        return pdc_error(ctx, PDC_ERR_OVERFLOW, "%s: weight size overflows", who);
    const size_t win = (size_t)kernel_size, ng = (size_t)(((o + go - 1) / go) * ((c + gc - 1) / gc));
    /* per group: the position norms over its kept kernels (in increasing kernel index), its natural mask */
    double *norm = pdc_calloc(ctx, ng * win, sizeof *norm);
    uint64_t *natural = pdc_calloc(ctx, ng, sizeof *natural), set[IR_MAX_PATTERN_WINDOW];
    pdc_status st = norm && natural ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    size_t g = 0;
    for (int64_t g0 = 0; !st && g0 < o; g0 += go)
        for (int64_t g1 = 0; g1 < c; g1 += gc, g++) {
            double *nm = norm + g * win;
            int live = 0;
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) {
                    const size_t k = (size_t)(i * c + j);
                    if (kernel_keep && !kernel_keep[k]) continue;
                    live = 1;
                    for (size_t p = 0; p < win; p++) nm[p] += (double)w[k * win + p] * (double)w[k * win + p];
                }
            /* the keep largest norms; strict '>' keeps the lower position on equal norms */
            for (size_t n = 0; live && n < keep; n++) {
                size_t best = win;
                for (size_t p = 0; p < win; p++)
                    if (!(natural[g] >> p & 1) && (best == win || nm[p] > nm[best])) best = p;
                natural[g] |= 1ull << best;
            }
        }
    /* a limited set: every group onto the mask of the set that keeps the largest group norm (the earlier
     * mask on equal norms) */
    const size_t cap = n_masks < IR_MAX_PATTERN_WINDOW ? n_masks : IR_MAX_PATTERN_WINDOW;
    const size_t n_set = !st && cap ? choose_set(ctx, natural, ng, cap, set, &st) : 0;
    g = 0;
    for (int64_t g0 = 0; !st && g0 < o; g0 += go)
        for (int64_t g1 = 0; g1 < c; g1 += gc, g++) {
            uint64_t mask = natural[g];
            if (mask && n_set) {
                double best = -1.0;
                for (size_t q = 0; q < n_set; q++) {
                    double sum = 0.0;
                    for (size_t p = 0; p < win; p++)
                        if (set[q] >> p & 1) sum += norm[g * win + p];
                    if (sum > best) best = sum, mask = set[q];
                }
            }
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) {
                    const size_t k = (size_t)(i * c + j);
                    const uint64_t km = kernel_keep && !kernel_keep[k] ? 0 : mask;
                    for (size_t p = 0; p < win; p++)
                        if (!(km >> p & 1)) w[k * win + p] = 0.0f;
                }
            if (group_masks) group_masks[g] = mask;
        }
    pdc_free(norm);
    pdc_free(natural);
    return st;
}

PDC_API pdc_status pdc_prune_project_kgs(pdc_context *ctx, float *weights, int64_t out_channels, int64_t in_channels,
                                         int64_t kernel_size, int64_t group_out, int64_t group_in, size_t keep,
                                         size_t n_masks, const uint8_t *kernel_keep, uint64_t *group_masks)
{
    if (!ctx) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: ctx is NULL", __func__);
    return project_kgs(ctx, __func__, weights, out_channels, in_channels, kernel_size, group_out, group_in, keep,
                       n_masks, kernel_keep, group_masks);
}
