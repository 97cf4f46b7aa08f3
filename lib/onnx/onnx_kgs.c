/*
 * onnx_kgs.c - recognising kernel-group sparsity (RT3D's KGS) in a 3-D conv weight [O, C/g, kd, kh, kw]
 * exported with exact zeros: the kernel grid [O, C/g] cut into go x gc tiles (edge tiles partial), every
 * kernel of a tile keeping the same window positions.
 *
 * For each group shape go x gc with go, gc powers of two up to 32 (not 1x1) that fits the grid, largest
 * group first and on equal sizes the larger go first: a group's mask is the union of its kernels' non-zero positions, a kernel with no
 * non-zero is connectivity-pruned (-1). The shape is accepted when some group keeps less than the whole
 * window (otherwise plain patterns describe the weight as well), the description removes at least one
 * weight, and the kept entries' fill (non-zeros / kept entries) is at least the context option
 * sparsity_min_fill - stray zeros inside kept positions are stored zeros, as for the other kinds. The
 * patterns are the distinct group masks in the order their first group appears (groups row-major).
 */
#include <string.h>

#include "lib/onnx/onnx.h"

/* Group sides tried, each of go and gc (not both 1); larger groups first (go*gc, then go). */
static const int64_t sides[] = {32, 16, 8, 4, 2, 1};
#define N_SIDES (sizeof sides / sizeof sides[0])

/* Tries group go x gc on the kernel masks; on success fills out (owning new arrays). */
static pdc_status try_shape(const pdc_context *ctx, const ir_tensor *w, const uint64_t *mask, size_t nonzeros,
                            int64_t go, int64_t gc, ir_sparsity *out, int *found)
{
    const int64_t o = w->dims[0], c = w->dims[1];
    const size_t win = (size_t)(w->dims[2] * w->dims[3] * w->dims[4]), nk = (size_t)(o * c);
    const uint64_t full = win == 64 ? ~0ull : (1ull << win) - 1;
    const size_t ngroups = (size_t)(((o + go - 1) / go) * ((c + gc - 1) / gc));
    uint64_t *pat = pdc_alloc(ctx, ngroups * sizeof *pat);
    int32_t *kp = pdc_alloc(ctx, nk * sizeof *kp);
    if (!pat || !kp) {
        pdc_free(pat);
        pdc_free(kp);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t np = 0, kept = 0;
    int partial = 0;
    for (int64_t g0 = 0; g0 < o; g0 += go)
        for (int64_t g1 = 0; g1 < c; g1 += gc) {
            uint64_t gm = 0;
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) gm |= mask[i * c + j];
            int32_t id = -1;
            if (gm) {
                for (size_t q = 0; q < np && id < 0; q++)
                    if (pat[q] == gm) id = (int32_t)q;
                if (id < 0) pat[id = (int32_t)np++] = gm;
                partial |= gm != full;
            }
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) {
                    int32_t k = mask[i * c + j] ? id : -1;
                    kp[i * c + j] = k;
                    if (k >= 0) kept += (size_t)__builtin_popcountll(gm);
                }
        }
    *found = partial && kept < nk * win && (double)nonzeros >= ctx->sparsity_min_fill * (double)kept;
    if (!*found) {
        pdc_free(pat);
        pdc_free(kp);
        return PDC_OK;
    }
    memset(out, 0, sizeof *out);
    out->kind = IR_SPARSITY_PATTERN;
    out->kd = w->dims[2];
    out->kh = w->dims[3];
    out->kw = w->dims[4];
    out->go = go;
    out->gc = gc;
    out->n_patterns = np;
    out->patterns = pat; /* ngroups >= np entries; the tail is unused */
    out->n_kernels = nk;
    out->kernel_pattern = kp;
    return PDC_OK;
}

pdc_status onnx_detect_kgs(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out)
{
    memset(out, 0, sizeof *out);
    if (w->rank != 5 || !w->data) return PDC_OK;
    const size_t win = (size_t)(w->dims[2] * w->dims[3] * w->dims[4]), nk = (size_t)(w->dims[0] * w->dims[1]);
    if (win < 2 || win > IR_MAX_PATTERN_WINDOW || nk == 0) return PDC_OK;
    uint64_t *mask = pdc_alloc(ctx, nk * sizeof *mask);
    if (!mask) return PDC_ERR_OUT_OF_MEMORY;
    size_t nonzeros = 0;
    for (size_t k = 0; k < nk; k++) {
        uint64_t m = 0;
        for (size_t p = 0; p < win; p++)
            if (w->data[k * win + p] != 0.0f) m |= 1ull << p; /* NaN is a non-zero */
        mask[k] = m;
        nonzeros += (size_t)__builtin_popcountll(m);
    }
    pdc_status st = PDC_OK;
    int found = 0;
    for (int64_t size = sides[0] * sides[0]; size > 1 && !st && !found; size /= 2)
        for (size_t i = 0; i < N_SIDES && !st && !found; i++) {
            const int64_t go = sides[i], gc = size / go;
            if (size % go || gc > sides[0] || go > w->dims[0] || gc > w->dims[1]) continue;
            st = try_shape(ctx, w, mask, nonzeros, go, gc, out, &found);
        }
    pdc_free(mask);
    return st;
}
