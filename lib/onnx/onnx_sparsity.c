/*
 * onnx_sparsity.c - recognising weights that were pruned before export. A PyTorch pruning loop
 * exports plain dense tensors with exact zeros; the structure of those zeros is turned back into
 * the IR's sparsity description so that passes and backends exploit it and `pdc inspect` reports
 * the compression.
 *
 * Kernel groups (3-D convs, onnx_kgs.c) are tried before patterns.
 *
 * Pattern (conv kernels of kh x kw > 1 or kd x kh x kw > 1, 2-D and 3-D convs): each kernel's non-zero positions form a mask.
 * The layer's patterns are the maximal masks (those not contained in another kernel's mask), in
 * the order their first kernel appears. A kernel takes the smallest pattern that covers its
 * non-zeros (ties: the lower index) - so a kernel that happens to have fewer non-zeros than its
 * pattern is still that pattern - and an all-zero kernel is connectivity-pruned (-1): stray zeros
 * inside a kernel's pattern are stored zeros. Accepted when there are at most ONNX_PATTERN_MAX
 * patterns, the description removes at least one weight and its fill (non-zeros / kept entries) is
 * at least sparsity_min_fill.
 *
 * Block (FC / MatMul / Gemm weights, 1x1 convs, LSTM/GRU gate matrices, in the IR's matrix view):
 * the candidate shapes 1x4, 4x1, 4x4, 2x2, 1x8, 8x1. A block holding any non-zero is kept; a shape
 * fits when at least ONNX_BLOCK_MIN_ZERO_PCT% of the blocks are all zero and the kept blocks'
 * fill (non-zeros / their size) is at least the context option sparsity_min_fill (default 0.95). Real weights hold stray exact zeros
 * (weight decay, fp16 round trips, dead units) inside kept blocks: requiring every zero to lie in a
 * removed block would send a 1x4-pruned layer with two stray zeros to the unstructured kernels. The
 * largest fitting block wins (ties: the higher fill, then the earlier in that list).
 *
 * BCR (block column-row, prune-bcr's structure; tried before block, on the same weights): the candidate
 * block shapes 32x32, 16x16, 8x8, 4x4, 16x8, 8x16, 8x4, 4x8 (edge blocks smaller). In each block a column is
 * kept when it holds a non-zero in the block's rows, a row when it holds one in the block's columns. A shape
 * fits when there are at least two full blocks, every full block keeps the same numbers of rows and columns,
 * fewer than all of them, and the kept
 * entries (kept rows x kept columns) are filled to at least sparsity_min_fill. The largest fitting shape wins
 * (ties: the earlier in the list).
 *
 * Unstructured: otherwise, a per-element mask when at least ONNX_UNSTRUCTURED_MIN_ZERO_PCT% of the
 * weights are zero. Below that the weight stays dense.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/onnx/onnx.h"

static int popcount64(uint64_t v) { return __builtin_popcountll(v); }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Descending popcount. */
static int cmp_pop_desc(const void *a, const void *b)
{
    int x = popcount64(*(const uint64_t *)a), y = popcount64(*(const uint64_t *)b);
    return y - x;
}

pdc_status onnx_detect_pattern(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out)
{
    memset(out, 0, sizeof *out);
    if ((w->rank != 4 && w->rank != 5) || !w->data) return PDC_OK;
    int64_t kd = w->rank == 5 ? w->dims[2] : 0, kh = w->dims[w->rank - 2], kw = w->dims[w->rank - 1];
    size_t win = (size_t)((kd ? kd : 1) * kh * kw), nk = (size_t)(w->dims[0] * w->dims[1]);
    if (win < 2 || win > IR_MAX_PATTERN_WINDOW || nk == 0) return PDC_OK;
    uint64_t *mask = pdc_alloc(ctx, nk * sizeof *mask);
    uint64_t *distinct = pdc_alloc(ctx, nk * sizeof *distinct);
    int32_t *kp = pdc_alloc(ctx, nk * sizeof *kp);
    uint64_t *pat = pdc_alloc(ctx, ONNX_PATTERN_MAX * sizeof *pat);
    if (!mask || !distinct || !kp || !pat) {
        pdc_free(mask);
        pdc_free(distinct);
        pdc_free(kp);
        pdc_free(pat);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t zeros = 0, nd = 0, np = 0;
    for (size_t k = 0; k < nk; k++) {
        uint64_t m = 0;
        for (size_t p = 0; p < win; p++)
            if (w->data[k * win + p] != 0.0f) m |= 1ull << p; /* NaN is a non-zero */
        mask[k] = m;
        zeros += win - (size_t)popcount64(m);
        distinct[k] = m;
    }
    int ok = zeros > 0;
    if (ok) {
        /* distinct non-zero masks, widest first; keep those no wider mask contains */
        qsort(distinct, nk, sizeof *distinct, cmp_u64);
        for (size_t k = 0; k < nk; k++)
            if (distinct[k] && (nd == 0 || distinct[nd - 1] != distinct[k])) distinct[nd++] = distinct[k];
        qsort(distinct, nd, sizeof *distinct, cmp_pop_desc);
        size_t nmax = 0;
        for (size_t i = 0; i < nd && ok; i++) {
            int covered = 0;
            for (size_t j = 0; j < nmax && !covered; j++) covered = !(distinct[i] & ~distinct[j]);
            if (covered) continue;
            if (nmax == ONNX_PATTERN_MAX) ok = 0;
            else distinct[nmax++] = distinct[i];
        }
        nd = nmax;
    }
    if (ok) {
        /* pattern order: the first kernel that has each maximal mask */
        for (size_t k = 0; k < nk && np < nd; k++) {
            int is_max = 0, seen = 0;
            for (size_t j = 0; j < nd && !is_max; j++) is_max = distinct[j] == mask[k];
            for (size_t j = 0; j < np && !seen; j++) seen = pat[j] == mask[k];
            if (is_max && !seen) pat[np++] = mask[k];
        }
        size_t kept = 0;
        for (size_t k = 0; k < nk; k++) {
            int best = -1;
            for (size_t j = 0; j < np && mask[k]; j++)
                if (!(mask[k] & ~pat[j]) && (best < 0 || popcount64(pat[j]) < popcount64(pat[best]))) best = (int)j;
            kp[k] = best;
            if (best >= 0) kept += (size_t)popcount64(pat[best]);
        }
        /* the description must remove something, and its kept entries be mostly non-zero */
        ok = kept < nk * win && (double)(nk * win - zeros) >= ctx->sparsity_min_fill * (double)kept;
    }
    pdc_free(mask);
    pdc_free(distinct);
    if (!ok) {
        pdc_free(kp);
        pdc_free(pat);
        return PDC_OK;
    }
    out->kind = IR_SPARSITY_PATTERN;
    out->kd = kd;
    out->kh = kh;
    out->kw = kw;
    out->n_patterns = np;
    out->patterns = pat;
    out->n_kernels = nk;
    out->kernel_pattern = kp;
    return PDC_OK;
}

pdc_status onnx_detect_block(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out)
{
    static const int64_t shapes[][2] = {{1, 4}, {4, 1}, {4, 4}, {2, 2}, {1, 8}, {8, 1}};
    memset(out, 0, sizeof *out);
    if (w->rank < 1 || !w->data) return PDC_OK;
    int64_t rows, cols;
    ir_weight_matrix_view(w, &rows, &cols);
    size_t n = (size_t)(rows * cols), zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += w->data[i] == 0.0f;
    if (!zeros) return PDC_OK;
    int best = -1;
    double best_fill = 0.0;
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
        int64_t bh = shapes[s][0], bw = shapes[s][1];
        if (bh > rows || bw > cols) continue;
        int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
        size_t zero_blocks = 0, covered = 0;
        for (int64_t br = 0; br < nbr; br++) {
            for (int64_t bc = 0; bc < nbc; bc++) {
                int all_zero = 1;
                size_t size = 0;
                for (int64_t r = br * bh; r < rows && r < (br + 1) * bh && all_zero; r++)
                    for (int64_t c = bc * bw; c < cols && c < (bc + 1) * bw && all_zero; c++, size++)
                        all_zero = w->data[r * cols + c] == 0.0f;
                if (all_zero) {
                    zero_blocks++;
                    covered += size;
                }
            }
        }
        /* every non-zero lies in a kept block, so fill = non-zeros / (all - the zero blocks' elements) */
        size_t kept_size = n - covered, nonzeros = n - zeros;
        int fits = zero_blocks * 100 >= (size_t)ONNX_BLOCK_MIN_ZERO_PCT * (size_t)(nbr * nbc) &&
                   (double)nonzeros >= ctx->sparsity_min_fill * (double)kept_size;
        double fill = kept_size ? (double)nonzeros / (double)kept_size : 1.0;
        int64_t size = bh * bw, best_size = best < 0 ? 0 : shapes[best][0] * shapes[best][1];
        if (fits && (best < 0 || size > best_size || (size == best_size && fill > best_fill))) {
            best = s;
            best_fill = fill;
        }
    }
    if (best < 0) return PDC_OK;
    int64_t bh = shapes[best][0], bw = shapes[best][1], nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
    uint8_t *bm = pdc_calloc(ctx, (size_t)(nbr * nbc), 1);
    if (!bm) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            if (w->data[r * cols + c] != 0.0f) bm[(r / bh) * nbc + c / bw] = 1;
    out->kind = IR_SPARSITY_BLOCK;
    out->bh = bh;
    out->bw = bw;
    out->n_blocks = (size_t)(nbr * nbc);
    out->block_mask = bm;
    return PDC_OK;
}

/* BCR flags of w's rows x cols matrix view in bh x bw blocks into flags (n_blocks * (bh + bw)); 1 if the shape fits
 * (see the header comment). */
static int bcr_fits(const pdc_context *ctx, const float *a, int64_t rows, int64_t cols, int64_t bh, int64_t bw,
                    uint8_t *flags)
{
    const int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
    size_t kept = 0, nonzeros = 0, full = 0;
    int64_t want_r = -1, want_c = -1;
    memset(flags, 0, (size_t)(nbr * nbc * (bh + bw)));
    for (int64_t br = 0; br < nbr; br++)
        for (int64_t bc = 0; bc < nbc; bc++) {
            const int64_t r0 = br * bh, c0 = bc * bw;
            const int64_t h = rows - r0 < bh ? rows - r0 : bh, w = cols - c0 < bw ? cols - c0 : bw;
            uint8_t *rk = flags + (br * nbc + bc) * (bh + bw), *ck = rk + bh;
            int64_t nr = 0, nc = 0;
            for (int64_t i = 0; i < h; i++)
                for (int64_t j = 0; j < w; j++)
                    if (a[(r0 + i) * cols + c0 + j] != 0.0f) { /* NaN is a non-zero */
                        rk[i] = ck[j] = 1;
                        nonzeros++;
                    }
            for (int64_t i = 0; i < h; i++) nr += rk[i];
            for (int64_t j = 0; j < w; j++) nc += ck[j];
            kept += (size_t)(nr * nc);
            if (h < bh || w < bw) continue; /* edge blocks: their own counts */
            full++;
            if (want_r < 0) want_r = nr, want_c = nc;
            if (nr != want_r || nc != want_c) return 0;
        }
    return full >= 2 && want_r * want_c < bh * bw && (double)nonzeros >= ctx->sparsity_min_fill * (double)kept;
}

pdc_status onnx_detect_bcr(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out)
{
    static const int64_t shapes[][2] = {{32, 32}, {16, 16}, {8, 8}, {4, 4}, {16, 8}, {8, 16}, {8, 4}, {4, 8}};
    memset(out, 0, sizeof *out);
    if (w->rank < 1 || !w->data) return PDC_OK;
    int64_t rows, cols;
    ir_weight_matrix_view(w, &rows, &cols);
    int best = -1;
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
        const int64_t bh = shapes[s][0], bw = shapes[s][1];
        if (bh > rows || bw > cols || (best >= 0 && bh * bw <= shapes[best][0] * shapes[best][1])) continue;
        const size_t n = (size_t)(((rows + bh - 1) / bh) * ((cols + bw - 1) / bw) * (bh + bw));
        uint8_t *flags = pdc_alloc(ctx, n);
        if (!flags) {
            ir_sparsity_free(out);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        if (!bcr_fits(ctx, w->data, rows, cols, bh, bw, flags)) {
            pdc_free(flags);
            continue;
        }
        ir_sparsity_free(out);
        *out = (ir_sparsity){.kind = IR_SPARSITY_BCR, .bh = bh, .bw = bw, .n_blocks = n / (size_t)(bh + bw),
                             .bcr_keep = flags};
        best = s;
    }
    return PDC_OK;
}

pdc_status onnx_detect_unstructured(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out)
{
    memset(out, 0, sizeof *out);
    size_t n = ir_tensor_numel(w), zeros = 0;
    if (!n || !w->data) return PDC_OK;
    for (size_t i = 0; i < n; i++) zeros += w->data[i] == 0.0f;
    if (zeros * 100 < (size_t)ONNX_UNSTRUCTURED_MIN_ZERO_PCT * n) return PDC_OK;
    uint8_t *mask = pdc_alloc(ctx, n);
    if (!mask) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) mask[i] = w->data[i] != 0.0f;
    out->kind = IR_SPARSITY_UNSTRUCTURED;
    out->n_mask = n;
    out->mask = mask;
    return PDC_OK;
}

/* Which detector a weight gets: 'k' kernel groups then pattern (3-D), 'p' pattern, 'b' block, 'u'
 * unstructured only. */
static char weight_kind(const ir_layer *l, size_t input, const ir_tensor *w)
{
    switch (l->op) {
    case IR_OP_CONV: {
        if (input != 1) return 0;
        int ones = 1;
        for (int i = 2; i < w->rank; i++) ones &= w->dims[i] == 1;
        if (ones && w->rank >= 4) return 'b';
        return w->rank == 4 ? 'p' : w->rank == 5 ? 'k' : 'u';
    }
    case IR_OP_FC:
    case IR_OP_GEMM:
    case IR_OP_MATMUL: return input == 1 && w->rank == 2 ? 'b' : 0;
    case IR_OP_LSTM:
    case IR_OP_GRU: return input == 1 || input == 2 ? 'b' : 0;
    default: return 0;
    }
}

pdc_status onnx_recognise_sparsity(ir_model *m)
{
    unsigned char *done = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1);
    if (!done) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = PDC_OK;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        for (size_t i = 0; i < l->n_inputs && !st; i++) {
            int t = l->inputs[i];
            if (t < 0 || done[t]) continue;
            const ir_tensor *w = &m->tensors[t];
            char kind = w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_NONE ? weight_kind(l, i, w) : 0;
            if (!kind) continue;
            done[t] = 1;
            ir_sparsity s;
            st = kind == 'k' ? onnx_detect_kgs(m->ctx, w, &s) : PDC_OK;
            if (!st && kind == 'k' && s.kind == IR_SPARSITY_NONE) kind = 'p';
            if (!st && kind != 'k')
                st = kind == 'p'   ? onnx_detect_pattern(m->ctx, w, &s)
                     : kind == 'b' ? onnx_detect_bcr(m->ctx, w, &s)
                                   : onnx_detect_unstructured(m->ctx, w, &s);
            if (!st && s.kind == IR_SPARSITY_NONE && kind == 'b') st = onnx_detect_block(m->ctx, w, &s);
            if (!st && s.kind == IR_SPARSITY_NONE && kind != 'u') st = onnx_detect_unstructured(m->ctx, w, &s);
            if (!st && s.kind != IR_SPARSITY_NONE) st = ir_model_set_sparsity(m, t, &s);
        }
    }
    pdc_free(done);
    if (st) pdc_error_prefix(m->ctx, "ONNX: recognising pruned weights");
    return st;
}
