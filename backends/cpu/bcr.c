/*
 * bcr.c - products by block column-row (BCR) pruned weights (IR_SPARSITY_BCR, the prune-bcr pass) for the
 * cpu target, GRIM's scheme: a block of the weight's [out, in] view keeps nr whole rows and nc whole columns,
 * so its kept weights are a dense nr x nc matrix. The plan packs each block's kept weights column by column
 * (nc columns of nr consecutive floats) with the indices of its kept rows and columns; the product then, per
 * block and sample, gathers the nc kept inputs once, accumulates nr outputs as full vectors (one vector
 * multiply-add per kept column: nr = 8 fills an AVX register, 16 an AVX-512 one) and scatters them to the
 * kept rows. Each block's weights are read once for every sample of the call (all time steps of an RNN's
 * input projection). One thread; the loops are C compiled once per ISA (PDC_ISA_CLONES).
 */
#include <string.h>

#include "backends/cpu/cpu.h"

void cpu_bcr_release(cpu_bcr *b)
{
    pdc_free(b->blk);
    pdc_free(b->idx);
    pdc_free(b->wpk);
    memset(b, 0, sizeof *b);
}

pdc_status cpu_bcr_plan(pdc_context *ctx, const ir_tensor *wt, int64_t row0, int64_t rows, cpu_bcr *b)
{
    memset(b, 0, sizeof *b);
    const ir_sparsity *s = &wt->sparsity;
    if (wt->kind != IR_TENSOR_CONST || !wt->data || s->kind != IR_SPARSITY_BCR) return PDC_ERR_UNSUPPORTED;
    int64_t all_rows, cols;
    ir_weight_matrix_view(wt, &all_rows, &cols);
    const int64_t bh = s->bh, bw = s->bw, nbc = (cols + bw - 1) / bw;
    /* the slice must start on a block-row and end on one or at the matrix's end */
    if (row0 % bh || (rows % bh && row0 + rows != all_rows) || row0 + rows > all_rows || rows < 1 || bh > INT32_MAX ||
        bw > INT32_MAX)
        return PDC_ERR_UNSUPPORTED;
    const int64_t br0 = row0 / bh, nbr = (rows + bh - 1) / bh, per = bh + bw;
    b->rows = rows;
    b->cols = cols;
    b->n_blocks = nbr * nbc;
    size_t n_idx = 0, n_w = 0;
    for (int64_t k = 0; k < b->n_blocks; k++) {
        const uint8_t *f = s->bcr_keep + ((br0 + k / nbc) * nbc + k % nbc) * per;
        size_t nr = 0, nc = 0;
        for (int64_t i = 0; i < bh; i++) nr += f[i] != 0;
        for (int64_t j = 0; j < bw; j++) nc += f[bh + j] != 0;
        n_idx += nr + nc;
        n_w += nr * nc;
        if ((int64_t)nr > b->max_nr) b->max_nr = (int64_t)nr;
    }
    b->blk = pdc_calloc(ctx, (size_t)(b->n_blocks ? b->n_blocks : 1), sizeof *b->blk);
    b->idx = pdc_alloc(ctx, (n_idx ? n_idx : 1) * sizeof *b->idx);
    b->wpk = pdc_alloc_aligned(ctx, n_w ? n_w : 1, sizeof *b->wpk);
    if (!b->blk || !b->idx || !b->wpk) {
        cpu_bcr_release(b);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t at_idx = 0, at_w = 0;
    for (int64_t k = 0; k < b->n_blocks; k++) {
        const int64_t br = k / nbc, bc = k % nbc;
        const uint8_t *f = s->bcr_keep + ((br0 + br) * nbc + bc) * per;
        cpu_bcr_block *blk = &b->blk[k];
        blk->r0 = (int32_t)(br * bh);
        blk->c0 = (int32_t)(bc * bw);
        blk->idx = (int64_t)at_idx;
        blk->w = (int64_t)at_w;
        for (int64_t i = 0; i < bh; i++)
            if (f[i]) b->idx[at_idx++] = (int32_t)i, blk->nr++;
        for (int64_t j = 0; j < bw; j++)
            if (f[bh + j]) b->idx[at_idx++] = (int32_t)j, blk->nc++;
        const int32_t *ri = b->idx + blk->idx, *ci = ri + blk->nr;
        for (int32_t j = 0; j < blk->nc; j++)
            for (int32_t i = 0; i < blk->nr; i++)
                b->wpk[at_w++] = wt->data[(row0 + blk->r0 + ri[i]) * cols + blk->c0 + ci[j]];
    }
    b->kept = n_w;
    b->total = (size_t)(rows * cols);
    return PDC_OK;
}

PDC_ISA_CLONES void cpu_bcr_product(const cpu_bcr *b, int64_t nx, const float *x, int64_t ldx, float *y, int64_t ldy,
                                    int accumulate, float *acc)
{
    if (!accumulate)
        for (int64_t n = 0; n < nx; n++) memset(y + n * ldy, 0, (size_t)b->rows * sizeof *y);
    for (int64_t k = 0; k < b->n_blocks; k++) {
        const cpu_bcr_block *blk = &b->blk[k];
        const int32_t nr = blk->nr, nc = blk->nc, *ri = b->idx + blk->idx, *ci = ri + nr;
        const float *w = b->wpk + blk->w;
        for (int64_t n = 0; n < nx; n++) {
            const float *xb = x + n * ldx + blk->c0;
            float *yb = y + n * ldy + blk->r0;
            for (int32_t i = 0; i < nr; i++) acc[i] = 0.0f;
            for (int32_t j = 0; j < nc; j++) {
                const float xv = xb[ci[j]], *wj = w + (int64_t)j * nr;
#pragma omp simd
                for (int32_t i = 0; i < nr; i++) acc[i] += wj[i] * xv;
            }
            for (int32_t i = 0; i < nr; i++) yb[ri[i]] += acc[i];
        }
    }
}
