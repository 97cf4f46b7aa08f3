/*
 * bcr.c - products by block column-row (BCR) pruned weights (IR_SPARSITY_BCR, the prune-bcr pass) for the
 * cpu target. The blocks of one block-row of the weight's [out, in] view cover disjoint columns, so the
 * block-row keeps a list of whole columns: the plan stores, per block-row, the input index of every kept
 * column and that column's bh weights (zeros in the rows its block pruned and past the matrix edge). The
 * product then computes each block-row as one gathered GEMV: bh accumulators (a full vector at bh = 8 or
 * 16; kept in registers for the whole row, for up to BCR_TILE samples at once, which share each load of
 * the weights) take one multiply-add of a column's weights by its gathered input per kept column, and
 * are stored once. Pruned columns cost nothing; pruned rows inside a kept column
 * are computed as zeros (a cpu kernel gains from column pruning: prune-bcr's bcr_col_rate). Each block-row's
 * weights are read once for every sample of the call (all time steps of an RNN's input projection).
 * From BCR_PAR_MIN multiply-adds on, the block-rows are dealt to the threads in fixed chunks; a row's
 * sums do not depend on who computes it, so results are bit-identical for every thread count. The loops
 * are C compiled once per ISA (PDC_ISA_CLONES).
 */
#include <string.h>

#include "backends/cpu/cpu.h"

void cpu_bcr_release(cpu_bcr *b)
{
    pdc_free(b->rowptr);
    pdc_free(b->col);
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
    const int64_t bh = s->bh, bw = s->bw, nbc = (cols + bw - 1) / bw, per = bh + bw;
    /* the slice must start on a block-row and end on one or at the matrix's end */
    if (row0 % bh || (rows % bh && row0 + rows != all_rows) || row0 + rows > all_rows || rows < 1 || cols > INT32_MAX)
        return PDC_ERR_UNSUPPORTED;
    const int64_t br0 = row0 / bh, nbr = (rows + bh - 1) / bh;
    b->rows = rows;
    b->cols = cols;
    b->bh = bh;
    b->nbr = nbr;
    size_t n_cols = 0;
    for (int64_t k = 0; k < nbr * nbc; k++) {
        const uint8_t *f = s->bcr_keep + ((br0 + k / nbc) * nbc + k % nbc) * per;
        size_t nr = 0, nc = 0;
        for (int64_t i = 0; i < bh; i++) nr += f[i] != 0;
        for (int64_t j = 0; j < bw; j++) nc += f[bh + j] != 0;
        n_cols += nc;
        b->kept += nr * nc;
    }
    b->rowptr = pdc_alloc(ctx, (size_t)(nbr + 1) * sizeof *b->rowptr);
    b->col = pdc_alloc(ctx, (n_cols ? n_cols : 1) * sizeof *b->col);
    b->wpk = pdc_calloc(ctx, n_cols ? n_cols * (size_t)bh : 1, sizeof *b->wpk);
    if (!b->rowptr || !b->col || !b->wpk) {
        cpu_bcr_release(b);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    int64_t at = 0;
    for (int64_t br = 0; br < nbr; br++) {
        b->rowptr[br] = at;
        const int64_t r0 = br * bh, h = rows - r0 < bh ? rows - r0 : bh;
        for (int64_t bc = 0; bc < nbc; bc++) {
            const uint8_t *f = s->bcr_keep + ((br0 + br) * nbc + bc) * per;
            for (int64_t j = 0; j < bw && bc * bw + j < cols; j++) {
                if (!f[bh + j]) continue;
                const int64_t c = bc * bw + j;
                b->col[at] = (int32_t)c;
                for (int64_t i = 0; i < h; i++)
                    if (f[i]) b->wpk[at * bh + i] = wt->data[(row0 + r0 + i) * cols + c];
                at++;
            }
        }
    }
    b->rowptr[nbr] = at;
    b->total = (size_t)(rows * cols);
    return PDC_OK;
}

/* One block-row of nl = bh rows (8 or 16: one vector, of type V) for samples [n0, n0 + ns): y[n][0, h) (+)=
 * sum over kept columns k of w[k] x[n][col[k]]; ns <= BCR_TILE samples share each load of a column's weights
 * (per column: one weight load, then per sample one broadcast input and one vector multiply-add). The
 * accumulators are vector variables (GCC's vector extension) in loops unrolled whole, so they stay in registers. */
typedef float bcr_v8 __attribute__((vector_size(32)));
typedef float bcr_v16 __attribute__((vector_size(64)));
#define BCR_TILE 8
#define BCR_PAR_MIN (1 << 16)  /* multiply-adds below which one thread does a product */
#define BCR_CHUNK_MACS (1 << 15) /* multiply-adds a thread takes at a time */
#define BCR_ROW(V, nl, ns)                                                                                       \
    do {                                                                                                         \
        V acc[BCR_TILE];                                                                                         \
        _Pragma("GCC unroll 8") for (int q = 0; q < (ns); q++) acc[q] = (V){0};                                  \
        for (int64_t k = k0; k < k1; k++) {                                                                      \
            V wv;                                                                                                \
            memcpy(&wv, w + k * (nl), sizeof wv);                                                                \
            const float *xk = x + n0 * ldx + col[k];                                                             \
            _Pragma("GCC unroll 8") for (int q = 0; q < (ns); q++) acc[q] += wv * xk[q * ldx];                   \
        }                                                                                                        \
        for (int q = 0; q < (ns); q++) {                                                                         \
            float out[nl], *yn = y + (n0 + q) * ldy + r0;                                                        \
            memcpy(out, &acc[q], sizeof out);                                                                    \
            if (accumulate)                                                                                      \
                for (int64_t i = 0; i < h; i++) yn[i] += out[i];                                                 \
            else                                                                                                 \
                for (int64_t i = 0; i < h; i++) yn[i] = out[i];                                                  \
        }                                                                                                        \
    } while (0)

int cpu_bcr_tile(const cpu_bcr *b) { return b->bh == 8 || b->bh == 16 ? BCR_TILE : 1; }

/* Block-rows [br0, br1) of the product (cpu_bcr_product). */
PDC_ISA_CLONES static void bcr_rows(const cpu_bcr *b, int64_t br0, int64_t br1, int64_t nx, const float *x, int64_t ldx,
                                    float *y, int64_t ldy, int accumulate)
{
    const int64_t bh = b->bh;
    const int32_t *col = b->col;
    const float *w = b->wpk;
    for (int64_t br = br0; br < br1; br++) {
        const int64_t k0 = b->rowptr[br], k1 = b->rowptr[br + 1], r0 = br * bh, h = b->rows - r0 < bh ? b->rows - r0 : bh;
        if (bh == 16 || bh == 8) {
            int64_t n0 = 0;
            for (; n0 + BCR_TILE <= nx; n0 += BCR_TILE) {
                if (bh == 16) BCR_ROW(bcr_v16, 16, BCR_TILE);
                else BCR_ROW(bcr_v8, 8, BCR_TILE);
            }
            for (; n0 < nx; n0++) {
                if (bh == 16) BCR_ROW(bcr_v16, 16, 1);
                else BCR_ROW(bcr_v8, 8, 1);
            }
        } else {
            /* other block heights: straight into y, row by row */
            for (int64_t n = 0; n < nx; n++) {
                const float *xn = x + n * ldx;
                float *yn = y + n * ldy + r0;
                if (!accumulate) memset(yn, 0, (size_t)h * sizeof *yn);
                for (int64_t k = k0; k < k1; k++) {
                    const float xv = xn[col[k]], *wk = w + k * bh;
                    for (int64_t i = 0; i < h; i++) yn[i] += wk[i] * xv;
                }
            }
        }
    }
}

/* Block-rows a thread takes at a time for a product of n samples (pixels), and *nt: 1 below BCR_PAR_MIN
 * multiply-adds. Chunks of about BCR_CHUNK_MACS (at least one per thread); how they are dealt changes no
 * result: each row's sums are the same code in the same order whoever runs it. */
static int64_t bcr_chunk(const cpu_bcr *b, int64_t n, int *nt)
{
    const double macs = (double)b->rowptr[b->nbr] * (double)b->bh * (double)n;
    if (macs < BCR_PAR_MIN || b->nbr < 2) *nt = 1;
    if (*nt <= 1) return b->nbr;
    int64_t chunk = (int64_t)((double)b->nbr * BCR_CHUNK_MACS / macs);
    if (chunk < 1) chunk = 1;
    if (chunk * *nt > b->nbr) chunk = (b->nbr + *nt - 1) / *nt; /* every thread a share */
    return chunk;
}

void cpu_bcr_product(const cpu_bcr *b, int64_t nx, const float *x, int64_t ldx, float *y, int64_t ldy, int accumulate,
                     int nt)
{
    const int64_t chunk = bcr_chunk(b, nx, &nt);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t br0 = 0; br0 < b->nbr; br0 += chunk)
        bcr_rows(b, br0, br0 + chunk < b->nbr ? br0 + chunk : b->nbr, nx, x, ldx, y, ldy, accumulate);
}

/* The planes form: y[r0 + i][p0, p0 + 16) += the block-row's kept columns' weights times x[col[k]][p0, p0 + 16)
 * - sixteen pixels as one vector per row, nl rows (8 or 16) of accumulators in registers, each kept
 * column's input vector loaded once for all of them. */
#define BCR_PLANE(nl)                                                                                            \
    do {                                                                                                         \
        bcr_v16 acc[nl];                                                                                         \
        _Pragma("GCC unroll 16") for (int i = 0; i < (nl); i++) acc[i] = (bcr_v16){0};                           \
        for (int64_t k = k0; k < k1; k++) {                                                                      \
            bcr_v16 xv;                                                                                          \
            memcpy(&xv, x + col[k] * ldx + p0, sizeof xv);                                                       \
            const float *wk = w + k * (nl);                                                                      \
            _Pragma("GCC unroll 16") for (int i = 0; i < (nl); i++) acc[i] += wk[i] * xv;                        \
        }                                                                                                        \
        for (int64_t i = 0; i < h; i++) {                                                                        \
            bcr_v16 yv;                                                                                          \
            float *yr = y + (r0 + i) * ldy + p0;                                                                 \
            memcpy(&yv, yr, sizeof yv);                                                                          \
            yv += acc[i];                                                                                        \
            memcpy(yr, &yv, sizeof yv);                                                                          \
        }                                                                                                        \
    } while (0)

/* Block-rows [br0, br1) of cpu_bcr_product_planes. */
PDC_ISA_CLONES static void bcr_plane_rows(const cpu_bcr *b, int64_t br0, int64_t br1, int64_t np, const float *x,
                                          int64_t ldx, float *y, int64_t ldy)
{
    const int64_t bh = b->bh;
    const int32_t *col = b->col;
    const float *w = b->wpk;
    for (int64_t br = br0; br < br1; br++) {
        const int64_t k0 = b->rowptr[br], k1 = b->rowptr[br + 1], r0 = br * bh, h = b->rows - r0 < bh ? b->rows - r0 : bh;
        int64_t p0 = 0;
        if (bh == 16 || bh == 8)
            for (; p0 + 16 <= np; p0 += 16) {
                if (bh == 16) BCR_PLANE(16);
                else BCR_PLANE(8);
            }
        /* the pixels after the last whole vector, and other block heights: row by row */
        for (int64_t i = 0; i < h && p0 < np; i++) {
            float *yr = y + (r0 + i) * ldy;
            for (int64_t k = k0; k < k1; k++) {
                const float wv = w[k * bh + i], *xr = x + col[k] * ldx;
                for (int64_t p = p0; p < np; p++) yr[p] += wv * xr[p];
            }
        }
    }
}

void cpu_bcr_product_planes(const cpu_bcr *b, int64_t np, const float *x, int64_t ldx, float *y, int64_t ldy, int nt)
{
    const int64_t chunk = bcr_chunk(b, np, &nt);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t br0 = 0; br0 < b->nbr; br0 += chunk)
        bcr_plane_rows(b, br0, br0 + chunk < b->nbr ? br0 + chunk : b->nbr, np, x, ldx, y, ldy);
}
