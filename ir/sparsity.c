/*
 * sparsity.c - the tagged sparsity description of a constant tensor: copy, free, the element
 * masks it implies, and validation against the tensor's shape and weights (pruned weights must be
 * exactly zero; kept weights may also be zero, e.g. a kernel with fewer non-zeros than its pattern).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

void ir_sparsity_free(ir_sparsity *s)
{
    pdc_free(s->patterns);
    pdc_free(s->kernel_pattern);
    pdc_free(s->block_mask);
    pdc_free(s->bcr_keep);
    pdc_free(s->mask);
    memset(s, 0, sizeof *s);
}

static void *dup_array(const pdc_context *ctx, const void *src, size_t n, size_t size, pdc_status *st)
{
    if (!src || !n) return NULL;
    void *d = pdc_calloc(ctx, n, size);
    if (!d) *st = PDC_ERR_OUT_OF_MEMORY;
    else memcpy(d, src, n * size);
    return d;
}

size_t ir_sparsity_bcr_len(const ir_sparsity *s)
{
    return s->kind == IR_SPARSITY_BCR && s->bh > 0 && s->bw > 0 ? s->n_blocks * (size_t)(s->bh + s->bw) : 0;
}

pdc_status ir_sparsity_copy(const pdc_context *ctx, ir_sparsity *dst, const ir_sparsity *src)
{
    pdc_status st = PDC_OK;
    ir_sparsity t = *src;
    t.patterns = dup_array(ctx, src->patterns, src->n_patterns, sizeof *t.patterns, &st);
    t.kernel_pattern = dup_array(ctx, src->kernel_pattern, src->n_kernels, sizeof *t.kernel_pattern, &st);
    t.block_mask = dup_array(ctx, src->block_mask, src->n_blocks, sizeof *t.block_mask, &st);
    t.bcr_keep = dup_array(ctx, src->bcr_keep, ir_sparsity_bcr_len(src), 1, &st);
    t.mask = dup_array(ctx, src->mask, src->n_mask, sizeof *t.mask, &st);
    if (st) {
        ir_sparsity_free(&t);
        return st;
    }
    *dst = t;
    return PDC_OK;
}

static int same_array(const void *a, const void *b, size_t n, size_t size)
{
    return !n || (a && b && !memcmp(a, b, n * size));
}

int ir_sparsity_equal(const ir_sparsity *a, const ir_sparsity *b)
{
    return a->kind == b->kind && a->kd == b->kd && a->kh == b->kh && a->kw == b->kw && a->go == b->go &&
           a->gc == b->gc && a->n_patterns == b->n_patterns &&
           a->n_kernels == b->n_kernels && a->bh == b->bh && a->bw == b->bw && a->n_blocks == b->n_blocks &&
           a->n_mask == b->n_mask && same_array(a->patterns, b->patterns, a->n_patterns, sizeof *a->patterns) &&
           same_array(a->kernel_pattern, b->kernel_pattern, a->n_kernels, sizeof *a->kernel_pattern) &&
           same_array(a->block_mask, b->block_mask, a->kind == IR_SPARSITY_BLOCK ? a->n_blocks : 0, 1) &&
           same_array(a->bcr_keep, b->bcr_keep, ir_sparsity_bcr_len(a), 1) &&
           same_array(a->mask, b->mask, a->n_mask, sizeof *a->mask);
}

void ir_weight_matrix_view(const ir_tensor *w, int64_t *rows, int64_t *cols)
{
    /* Rank >= 4 (2-D/3-D conv weights [O, C/g, k...]) -> [O, C/g*prod(k)]; lower ranks (fc [O,K], RNN gate
     * stacks [D, gates*H, I]) -> [prod(leading dims), last dim]. Decided by rank alone so that the view
     * belongs to the tensor, not to whichever layer consumes it. */
    int64_t r = 1, c = 1;
    if (w->rank >= 4) {
        r = w->dims[0];
        for (int i = 1; i < w->rank; i++) c *= w->dims[i];
    } else if (w->rank >= 1) {
        for (int i = 0; i < w->rank - 1; i++) r *= w->dims[i];
        c = w->dims[w->rank - 1];
    }
    *rows = r;
    *cols = c;
}

pdc_status ir_matrix_transpose(const pdc_context *ctx, const ir_tensor *t, ir_tensor *dst)
{
    memset(dst, 0, sizeof *dst);
    const ir_sparsity *s = &t->sparsity;
    if (t->kind != IR_TENSOR_CONST || !t->data || t->rank != 2 || s->kind == IR_SPARSITY_PATTERN)
        return PDC_ERR_UNSUPPORTED;
    const int64_t r = t->dims[0], c = t->dims[1];
    const size_t n = (size_t)(r * c);
    ir_tensor d = {.name = t->name, .kind = IR_TENSOR_CONST, .rank = 2, .dims = {c, r}, .producer = -1};
    d.sparsity.kind = s->kind;
    d.data = pdc_alloc(ctx, (n ? n : 1) * sizeof *d.data);
    if (s->kind == IR_SPARSITY_BLOCK) {
        /* [r, c] in bh x bw blocks -> [c, r] in bw x bh blocks: the block grid transposes too */
        const size_t nbr = (size_t)((r + s->bh - 1) / s->bh), nbc = (size_t)((c + s->bw - 1) / s->bw);
        d.sparsity.bh = s->bw;
        d.sparsity.bw = s->bh;
        d.sparsity.n_blocks = s->n_blocks;
        if ((d.sparsity.block_mask = pdc_alloc(ctx, s->n_blocks ? s->n_blocks : 1)))
            for (size_t i = 0; i < nbr; i++)
                for (size_t j = 0; j < nbc; j++) d.sparsity.block_mask[j * nbr + i] = s->block_mask[i * nbc + j];
    } else if (s->kind == IR_SPARSITY_BCR) {
        /* the block grid transposes, and each block's kept rows become its kept columns */
        const size_t nbr = (size_t)((r + s->bh - 1) / s->bh), nbc = (size_t)((c + s->bw - 1) / s->bw);
        const size_t per = (size_t)(s->bh + s->bw);
        d.sparsity.bh = s->bw;
        d.sparsity.bw = s->bh;
        d.sparsity.n_blocks = s->n_blocks;
        if ((d.sparsity.bcr_keep = pdc_alloc(ctx, s->n_blocks ? s->n_blocks * per : 1)))
            for (size_t i = 0; i < nbr; i++)
                for (size_t j = 0; j < nbc; j++) {
                    const uint8_t *from = s->bcr_keep + (i * nbc + j) * per;
                    uint8_t *to = d.sparsity.bcr_keep + (j * nbr + i) * per;
                    memcpy(to, from + s->bh, (size_t)s->bw);
                    memcpy(to + s->bw, from, (size_t)s->bh);
                }
    } else if (s->kind == IR_SPARSITY_UNSTRUCTURED) {
        d.sparsity.n_mask = n;
        d.sparsity.mask = pdc_alloc(ctx, n ? n : 1);
    }
    if (!d.data || (s->kind == IR_SPARSITY_BLOCK && !d.sparsity.block_mask) ||
        (s->kind == IR_SPARSITY_BCR && !d.sparsity.bcr_keep) ||
        (s->kind == IR_SPARSITY_UNSTRUCTURED && !d.sparsity.mask)) {
        ir_matrix_transpose_free(&d);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) {
            d.data[j * r + i] = t->data[i * c + j];
            if (d.sparsity.mask) d.sparsity.mask[j * r + i] = s->mask[i * c + j];
        }
    *dst = d;
    return PDC_OK;
}

void ir_matrix_transpose_free(ir_tensor *t)
{
    pdc_free(t->data);
    ir_sparsity_free(&t->sparsity);
    memset(t, 0, sizeof *t);
}

size_t ir_sparsity_window(const ir_sparsity *s) { return (size_t)((s->kd > 0 ? s->kd : 1) * s->kh * s->kw); }

void ir_sparsity_window_text(const ir_sparsity *s, char *buf, size_t cap)
{
    if (s->kd > 0) snprintf(buf, cap, "%" PRId64 "x%" PRId64 "x%" PRId64, s->kd, s->kh, s->kw);
    else snprintf(buf, cap, "%" PRId64 "x%" PRId64, s->kh, s->kw);
}

/* Pattern sparsity: window size implied by the weight's shape ([O, C/g, k...]: the product of k). */
static size_t pattern_window(const ir_tensor *t)
{
    size_t win = 1;
    for (int i = 2; i < t->rank; i++) win *= (size_t)t->dims[i];
    return win;
}

int ir_sparsity_keeps(const ir_tensor *t, size_t index)
{
    const ir_sparsity *s = &t->sparsity;
    switch (s->kind) {
    case IR_SPARSITY_NONE: return 1;
    case IR_SPARSITY_PATTERN: {
        size_t win = pattern_window(t), kernel = index / win, pos = index % win;
        int32_t pid = s->kernel_pattern[kernel];
        return pid >= 0 && (s->patterns[pid] >> pos & 1u);
    }
    case IR_SPARSITY_BLOCK: {
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        int64_t r = (int64_t)index / cols, c = (int64_t)index % cols;
        int64_t bcols = (cols + s->bw - 1) / s->bw;
        return s->block_mask[(r / s->bh) * bcols + c / s->bw] != 0;
    }
    case IR_SPARSITY_UNSTRUCTURED: return s->mask[index] != 0;
    case IR_SPARSITY_BCR: {
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        const int64_t r = (int64_t)index / cols, c = (int64_t)index % cols, bcols = (cols + s->bw - 1) / s->bw;
        const uint8_t *k = s->bcr_keep + (size_t)((r / s->bh) * bcols + c / s->bw) * (size_t)(s->bh + s->bw);
        return k[r % s->bh] && k[s->bh + c % s->bw];
    }
    }
    return 1;
}

void ir_sparsity_mask_range(const ir_tensor *t, const ir_sparsity *s, size_t first, size_t n, uint8_t *keep)
{
    switch (s->kind) {
    case IR_SPARSITY_PATTERN: {
        size_t win = pattern_window(t), kernel = first / win, pos = first % win;
        for (size_t i = 0; i < n; i++) {
            int32_t pid = s->kernel_pattern[kernel];
            keep[i] = pid >= 0 && (s->patterns[pid] >> pos & 1u);
            if (++pos == win) pos = 0, kernel++;
        }
        return;
    }
    case IR_SPARSITY_BLOCK: {
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        const int64_t bcols = (cols + s->bw - 1) / s->bw;
        int64_t r = (int64_t)(first / (size_t)cols), c = (int64_t)(first % (size_t)cols);
        int64_t cb = c / s->bw, cin = c % s->bw, rb = r / s->bh, rin = r % s->bh;
        for (size_t i = 0; i < n; i++) {
            keep[i] = s->block_mask[rb * bcols + cb] != 0;
            if (++cin == s->bw) cin = 0, cb++;
            if (++c == cols) {
                c = cb = cin = 0;
                if (++rin == s->bh) rin = 0, rb++;
            }
        }
        return;
    }
    case IR_SPARSITY_UNSTRUCTURED:
        for (size_t i = 0; i < n; i++) keep[i] = s->mask[first + i] != 0;
        return;
    case IR_SPARSITY_BCR: {
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        const int64_t bcols = (cols + s->bw - 1) / s->bw, per = s->bh + s->bw;
        int64_t r = (int64_t)(first / (size_t)cols), c = (int64_t)(first % (size_t)cols);
        for (size_t i = 0; i < n; i++) {
            const uint8_t *k = s->bcr_keep + ((r / s->bh) * bcols + c / s->bw) * per;
            keep[i] = k[r % s->bh] && k[s->bh + c % s->bw];
            if (++c == cols) c = 0, r++;
        }
        return;
    }
    case IR_SPARSITY_NONE: break;
    }
    memset(keep, 1, n);
}

size_t ir_sparsity_kept(const ir_tensor *t)
{
    size_t n = ir_tensor_numel(t), kept = 0;
    if (t->sparsity.kind == IR_SPARSITY_NONE) return n;
    uint8_t keep[4096];
    for (size_t i = 0; i < n; i += sizeof keep) {
        size_t m = n - i < sizeof keep ? n - i : sizeof keep;
        ir_sparsity_mask_range(t, &t->sparsity, i, m, keep);
        for (size_t j = 0; j < m; j++) kept += keep[j];
    }
    return kept;
}

/* Pattern sparsity: window against the weight's kernel, pattern masks, kernel ids, kernel groups. */
static pdc_status check_pattern(const pdc_context *ctx, const ir_tensor *t, const ir_sparsity *s)
{
    const char *name = t->name;
    char win_text[64];
    ir_sparsity_window_text(s, win_text, sizeof win_text);
    if (s->kd < 0 || (s->kd == 0 && t->rank != 4) || (s->kd > 0 && t->rank != 5))
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                         "tensor '%s': a %s pattern window needs a %s conv weight [O,C,%s], got rank %d", name, win_text,
                         s->kd > 0 ? "3-D" : "2-D", s->kd > 0 ? "kd,kh,kw" : "kh,kw", t->rank);
    const int sp = t->rank - 2; /* spatial dims */
    if ((sp == 3 && s->kd != t->dims[2]) || s->kh != t->dims[sp] || s->kw != t->dims[sp + 1]) {
        char ker[64];
        if (sp == 3) snprintf(ker, sizeof ker, "%" PRId64 "x%" PRId64 "x%" PRId64, t->dims[2], t->dims[3], t->dims[4]);
        else snprintf(ker, sizeof ker, "%" PRId64 "x%" PRId64, t->dims[2], t->dims[3]);
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': pattern window %s does not match kernel %s", name,
                         win_text, ker);
    }
    const size_t win = pattern_window(t);
    if (win > IR_MAX_PATTERN_WINDOW)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "tensor '%s': pattern window %s exceeds %d positions", name,
                         win_text, IR_MAX_PATTERN_WINDOW);
    size_t kernels = (size_t)(t->dims[0] * t->dims[1]);
    if (s->n_kernels != kernels)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': pattern sparsity has %zu kernel ids, expected %zu",
                         name, s->n_kernels, kernels);
    uint64_t valid = win == 64 ? ~0ull : ((1ull << win) - 1);
    for (size_t i = 0; i < s->n_patterns; i++) {
        if (!s->patterns[i] || (s->patterns[i] & ~valid))
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                             "tensor '%s': pattern %zu (0x%" PRIx64 ") is empty or outside the %s window", name, i,
                             s->patterns[i], win_text);
    }
    for (size_t k = 0; k < kernels; k++) {
        int32_t p = s->kernel_pattern[k];
        if (p < -1 || (p >= 0 && (size_t)p >= s->n_patterns))
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                             "tensor '%s': kernel %zu has pattern id %d, expected -1 (pruned) or an index below %zu",
                             name, k, (int)p, s->n_patterns);
    }
    if (!s->go && !s->gc) return PDC_OK;
    const int64_t o = t->dims[0], c = t->dims[1];
    if (s->go < 1 || s->gc < 1 || s->go > o || s->gc > c)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                         "tensor '%s': kernel group %" PRId64 "x%" PRId64 " is not within the %" PRId64 "x%" PRId64
                         " kernel grid (0x0 for none)",
                         name, s->go, s->gc, o, c);
    /* every kernel of a group has the group's one pattern id, or -1 */
    for (int64_t g0 = 0; g0 < o; g0 += s->go)
        for (int64_t g1 = 0; g1 < c; g1 += s->gc) {
            int32_t id = -1;
            for (int64_t i = g0; i < o && i < g0 + s->go; i++)
                for (int64_t j = g1; j < c && j < g1 + s->gc; j++) {
                    int32_t p = s->kernel_pattern[i * c + j];
                    if (p < 0) continue;
                    if (id >= 0 && p != id)
                        return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                                         "tensor '%s': kernel group at (%" PRId64 ", %" PRId64 ") mixes patterns %d and "
                                         "%d (a group's kernels share one pattern or are pruned)",
                                         name, g0, g1, (int)id, (int)p);
                    id = p;
                }
        }
    return PDC_OK;
}

/* Checks shape agreement of a sparsity description with tensor t (not yet attached). */
static pdc_status check_shape(const pdc_context *ctx, const ir_tensor *t, const ir_sparsity *s)
{
    const char *name = t->name;
    size_t numel = ir_tensor_numel(t);
    switch (s->kind) {
    case IR_SPARSITY_NONE: return PDC_OK;
    case IR_SPARSITY_PATTERN: return check_pattern(ctx, t, s);
    case IR_SPARSITY_BLOCK: {
        if (s->bh < 1 || s->bw < 1 || s->bh > IR_DIM_MAX || s->bw > IR_DIM_MAX || t->rank < 1)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': block shape %" PRId64 "x%" PRId64 " is invalid",
                             name, s->bh, s->bw);
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        size_t blocks = (size_t)(((rows + s->bh - 1) / s->bh) * ((cols + s->bw - 1) / s->bw));
        if (s->n_blocks != blocks)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                             "tensor '%s': block mask has %zu entries, expected %zu (%" PRId64 "x%" PRId64
                             " matrix in %" PRId64 "x%" PRId64 " blocks)",
                             name, s->n_blocks, blocks, rows, cols, s->bh, s->bw);
        return PDC_OK;
    }
    case IR_SPARSITY_BCR: {
        if (s->bh < 1 || s->bw < 1 || s->bh > IR_DIM_MAX || s->bw > IR_DIM_MAX || t->rank < 1)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': BCR block shape %" PRId64 "x%" PRId64 " is invalid",
                             name, s->bh, s->bw);
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        const int64_t nbr = (rows + s->bh - 1) / s->bh, nbc = (cols + s->bw - 1) / s->bw;
        if (s->n_blocks != (size_t)(nbr * nbc) || !s->bcr_keep)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                             "tensor '%s': BCR description has %zu blocks, expected %" PRId64 " (%" PRId64 "x%" PRId64
                             " matrix in %" PRId64 "x%" PRId64 " blocks)",
                             name, s->n_blocks, nbr * nbc, rows, cols, s->bh, s->bw);
        /* flags of rows and columns past the matrix edge are 0: one description per sparsity */
        for (int64_t b = 0; b < nbr * nbc; b++) {
            const uint8_t *k = s->bcr_keep + b * (s->bh + s->bw);
            int64_t past = -1;
            for (int64_t i = rows - (b / nbc) * s->bh; i < s->bh && past < 0; i++)
                if (k[i]) past = i;
            for (int64_t j = cols - (b % nbc) * s->bw; j < s->bw && past < 0; j++)
                if (k[s->bh + j]) past = s->bh + j;
            if (past >= 0)
                return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                                 "tensor '%s': BCR block %" PRId64 " keeps %s %" PRId64 ", past the matrix edge", name, b,
                                 past < s->bh ? "row" : "column", past < s->bh ? past : past - s->bh);
        }
        return PDC_OK;
    }
    case IR_SPARSITY_UNSTRUCTURED:
        if (s->n_mask != numel)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': mask has %zu entries, expected %zu", name,
                             s->n_mask, numel);
        return PDC_OK;
    }
    return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': unknown sparsity kind %d", name, (int)s->kind);
}

/* 1 if a float's bits are not those of +0 or -0 (NaN included), without a floating-point compare. */
static inline uint32_t nonzero_bits(const float *x)
{
    uint32_t u;
    memcpy(&u, x, sizeof u);
    return u << 1;
}

/* The first element of t that s prunes and is not 0, or SIZE_MAX. Pattern and block sparsity are walked
 * by their structure (a model's worth of weights is checked at import, load and compile: a mask per element
 * made this a sixth of a cached compile of a block-pruned ResNet-50); other kinds through the mask. */
static size_t first_pruned_nonzero(const ir_tensor *t, const ir_sparsity *s)
{
    const float *d = t->data;
    const size_t n = ir_tensor_numel(t);
    if (s->kind == IR_SPARSITY_PATTERN) {
        const size_t win = pattern_window(t), kernels = win ? n / win : 0;
        const uint64_t full = win >= 64 ? ~0ull : (1ull << win) - 1;
        for (size_t k = 0; k < kernels; k++) {
            const int32_t pid = s->kernel_pattern[k];
            uint32_t bad = 0;
            for (uint64_t m = pid < 0 ? full : ~s->patterns[pid] & full; m; m &= m - 1)
                bad |= nonzero_bits(d + k * win + (size_t)__builtin_ctzll(m));
            if (bad)
                for (uint64_t m = pid < 0 ? full : ~s->patterns[pid] & full; m; m &= m - 1)
                    if (nonzero_bits(d + k * win + (size_t)__builtin_ctzll(m))) return k * win + (size_t)__builtin_ctzll(m);
        }
        return SIZE_MAX;
    }
    if (s->kind == IR_SPARSITY_BLOCK) {
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        const int64_t bcols = (cols + s->bw - 1) / s->bw;
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *mrow = s->block_mask + (r / s->bh) * bcols;
            const float *row = d + r * cols;
            for (int64_t cb = 0; cb < bcols; cb++) {
                if (mrow[cb]) continue;
                const int64_t c1 = (cb + 1) * s->bw < cols ? (cb + 1) * s->bw : cols;
                uint32_t bad = 0;
                for (int64_t c = cb * s->bw; c < c1; c++) bad |= nonzero_bits(row + c);
                for (int64_t c = cb * s->bw; bad && c < c1; c++)
                    if (nonzero_bits(row + c)) return (size_t)(r * cols + c);
            }
        }
        return SIZE_MAX;
    }
    uint8_t keep[4096];
    for (size_t i0 = 0; i0 < n; i0 += sizeof keep) {
        const size_t m = n - i0 < sizeof keep ? n - i0 : sizeof keep;
        ir_sparsity_mask_range(t, s, i0, m, keep);
        uint32_t bad = 0; /* the whole chunk without an exit in the loop (it vectorises); the offender after */
        for (size_t j = 0; j < m; j++) bad |= (uint32_t)!keep[j] & (nonzero_bits(d + i0 + j) != 0);
        for (size_t j = 0; bad && j < m; j++)
            if (!keep[j] && nonzero_bits(d + i0 + j)) return i0 + j;
    }
    return SIZE_MAX;
}

pdc_status ir_sparsity_validate(const pdc_context *ctx, const ir_tensor *t, const ir_sparsity *s)
{
    if (s->kind == IR_SPARSITY_NONE) return PDC_OK;
    if (t->kind != IR_TENSOR_CONST)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "tensor '%s': only constants can carry sparsity", t->name);
    pdc_status st = check_shape(ctx, t, s);
    if (st) return st;
    const size_t i = first_pruned_nonzero(t, s);
    if (i != SIZE_MAX)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                         "tensor '%s': element %zu is %g but its sparsity prunes it (pruned weights must be 0)",
                         t->name, i, (double)t->data[i]);
    return PDC_OK;
}
