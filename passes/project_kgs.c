/*
 * project_kgs.c - the kernel-group projection (RT3D's KGS) behind pdc_prune_project_kgs and the
 * prune-kgs pass: the kernel grid [O, C] of a 3-D conv weight is cut into go x gc groups and each
 * group keeps the same `keep` window positions, those of largest group norm. Tie-breaks as in
 * include/pdc.h, so another implementation reproduces the result bit for bit.
 */
#include <inttypes.h>
#include <string.h>

#include "passes/project.h"

pdc_status project_kgs(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c, int64_t kernel_size,
                       int64_t go, int64_t gc, size_t keep, const uint8_t *kernel_keep, uint64_t *group_masks)
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
    const size_t win = (size_t)kernel_size;
    size_t g = 0;
    for (int64_t g0 = 0; g0 < o; g0 += go)
        for (int64_t g1 = 0; g1 < c; g1 += gc, g++) {
            /* position norms over the group's kept kernels, in increasing kernel index */
            double norm[IR_MAX_PATTERN_WINDOW] = {0};
            int live = 0;
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) {
                    const size_t k = (size_t)(i * c + j);
                    if (kernel_keep && !kernel_keep[k]) continue;
                    live = 1;
                    for (size_t p = 0; p < win; p++) norm[p] += (double)w[k * win + p] * (double)w[k * win + p];
                }
            /* the keep largest norms; strict '>' keeps the lower position on equal norms */
            uint64_t mask = 0;
            for (size_t n = 0; live && n < keep; n++) {
                size_t best = win;
                for (size_t p = 0; p < win; p++)
                    if (!(mask >> p & 1) && (best == win || norm[p] > norm[best])) best = p;
                mask |= 1ull << best;
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
    return PDC_OK;
}

PDC_API pdc_status pdc_prune_project_kgs(pdc_context *ctx, float *weights, int64_t out_channels, int64_t in_channels,
                                         int64_t kernel_size, int64_t group_out, int64_t group_in, size_t keep,
                                         const uint8_t *kernel_keep, uint64_t *group_masks)
{
    if (!ctx) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: ctx is NULL", __func__);
    return project_kgs(ctx, __func__, weights, out_channels, in_channels, kernel_size, group_out, group_in, keep,
                       kernel_keep, group_masks);
}
