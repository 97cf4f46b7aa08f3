/*
 * prune_bcr.c - the prune-bcr pass: block column-row (BCR) sparsity, GRIM's structure for the weight
 * matrices of recurrent and linear layers. The matrix, in the ONNX/PyTorch [out, in] layout (as prune-block
 * sees it: fc, gemm/matmul constant right operands, lstm/gru gate stacks, 1x1 convs with block_convs=1), is
 * cut into bcr_block blocks (row-major; blocks at the right and bottom edges are smaller). In every block:
 *
 *   1. columns: each of the block's w' columns scores the sum of squares of its entries in the block (rows in
 *      increasing order, in double); the floor(bcr_col_rate x w') lowest-scoring columns are removed;
 *   2. rows: each of the block's h' rows scores the sum of squares of its entries in the kept columns
 *      (columns in increasing order); the floor(bcr_row_rate x h') lowest-scoring rows are removed.
 *
 * Ties: the column (row) with the higher index within the block is removed first. So every full block keeps
 * the same number of columns and rows, and an edge block the same shares (floored). The kept entries of a
 * block are the kept rows x the kept columns; everything else becomes exactly zero. The IR description
 * (IR_SPARSITY_BCR) is of the stored layout: matmul and gemm (transB = 0) operands [in, out] get bw x bh
 * blocks whose row and column flags are those of the [out, in] choice swapped.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct scored {
    double score;
    int64_t index;
} scored;

/* Highest score first; ties: the lower index first (kept first). */
static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* keep[i] = 1 for the `kept` best of n scores (s is scratch of n entries holding them). */
static void keep_best(scored *s, int64_t n, int64_t kept, uint8_t *keep)
{
    qsort(s, (size_t)n, sizeof *s, by_score);
    for (int64_t i = 0; i < n; i++) keep[s[i].index] = i < kept;
}

/* Chooses the kept rows and columns of every block of the rows x cols matrix a ([out, in]) and zeroes the rest;
 * flags: n_blocks * (bh + bw), per block the row flags then the column flags. */
static pdc_status choose(const pdc_context *ctx, float *a, int64_t rows, int64_t cols, int64_t bh, int64_t bw,
                         double col_rate, double row_rate, uint8_t *flags)
{
    const int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
    scored *s = pdc_alloc(ctx, (size_t)(bh > bw ? bh : bw) * sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    memset(flags, 0, (size_t)(nbr * nbc * (bh + bw)));
    for (int64_t br = 0; br < nbr; br++)
        for (int64_t bc = 0; bc < nbc; bc++) {
            const int64_t r0 = br * bh, c0 = bc * bw;
            const int64_t h = rows - r0 < bh ? rows - r0 : bh, w = cols - c0 < bw ? cols - c0 : bw;
            uint8_t *rk = flags + (br * nbc + bc) * (bh + bw), *ck = rk + bh;
            for (int64_t j = 0; j < w; j++) {
                double q = 0.0;
                for (int64_t i = 0; i < h; i++) {
                    const double v = (double)a[(r0 + i) * cols + c0 + j];
                    q += v * v;
                }
                s[j] = (scored){q, j};
            }
            keep_best(s, w, w - (int64_t)floor(col_rate * (double)w), ck);
            for (int64_t i = 0; i < h; i++) {
                double q = 0.0;
                for (int64_t j = 0; j < w; j++) {
                    const double v = ck[j] ? (double)a[(r0 + i) * cols + c0 + j] : 0.0;
                    q += v * v;
                }
                s[i] = (scored){q, i};
            }
            keep_best(s, h, h - (int64_t)floor(row_rate * (double)h), rk);
            for (int64_t i = 0; i < h; i++)
                for (int64_t j = 0; j < w; j++)
                    if (!rk[i] || !ck[j]) a[(r0 + i) * cols + c0 + j] = 0.0f;
        }
    pdc_free(s);
    return PDC_OK;
}

static size_t bcr_slots(const ir_model *m, const ir_layer *l, size_t *slots, int *transposed)
{
    return pass_matrix_slots(m, l, IR_SPARSITY_BCR, slots, transposed);
}

static pdc_status prune_matrix(ir_model *m, const ir_layer *l, int t, int transposed, const pass_options *opt)
{
    const pdc_context *ctx = m->ctx;
    ir_tensor *w = &m->tensors[t];
    const int64_t bh = opt->bcr_h, bw = opt->bcr_w;
    int64_t rows, cols; /* the [out, in] view */
    const size_t n = ir_tensor_numel(w);
    float *a = w->data, *tmp = NULL;
    if (transposed) { /* stored [in, out] = [K, N] */
        rows = w->dims[1];
        cols = w->dims[0];
        if (!(tmp = pdc_alloc(ctx, (n ? n : 1) * sizeof *tmp))) return PDC_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < cols; i++)
            for (int64_t j = 0; j < rows; j++) tmp[j * cols + i] = w->data[i * rows + j];
        a = tmp;
    } else {
        ir_weight_matrix_view(w, &rows, &cols);
    }
    const size_t nbr = (size_t)((rows + bh - 1) / bh), nbc = (size_t)((cols + bw - 1) / bw), per = (size_t)(bh + bw);
    const size_t n_flags = nbr * nbc * per;
    uint8_t *flags = pdc_alloc(ctx, n_flags ? n_flags : 1);
    ir_sparsity s = {.kind = IR_SPARSITY_BCR, .bh = transposed ? bw : bh, .bw = transposed ? bh : bw,
                     .n_blocks = nbr * nbc};
    s.bcr_keep = pdc_alloc(ctx, n_flags ? n_flags : 1);
    pdc_status st = flags && s.bcr_keep ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    if (!st)
        st = choose(ctx, a, rows, cols, bh, bw, pass_rate_for(&opt->bcr_col_rate, l->name),
                    pass_rate_for(&opt->bcr_row_rate, l->name), flags);
    if (!st && transposed) {
        for (int64_t i = 0; i < cols; i++)
            for (int64_t j = 0; j < rows; j++) w->data[i * rows + j] = tmp[j * cols + i];
        /* stored [K, N] in bw x bh blocks: block (i, j) is the view's (j, i), its rows the view block's columns */
        for (size_t i = 0; i < nbc; i++)
            for (size_t j = 0; j < nbr; j++) {
                const uint8_t *from = flags + (j * nbc + i) * per;
                uint8_t *to = s.bcr_keep + (i * nbr + j) * per;
                memcpy(to, from + bh, (size_t)bw);
                memcpy(to + bw, from, (size_t)bh);
            }
    } else if (!st) {
        memcpy(s.bcr_keep, flags, n_flags);
    }
    pdc_free(tmp);
    pdc_free(flags);
    if (st) {
        ir_sparsity_free(&s);
        return st;
    }
    return ir_model_set_sparsity(m, t, &s);
}

static void note_bcr(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-bcr", l->name, "bcr %" PRId64 "x%" PRId64 " columns %.3g%% rows %.3g%%",
             opt->bcr_h, opt->bcr_w, pass_rate_for(&opt->bcr_col_rate, l->name) * 100.0,
             pass_rate_for(&opt->bcr_row_rate, l->name) * 100.0);
}

pdc_status pass_prune_bcr(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-bcr", PASS_FAMILY_BLOCK, bcr_slots, prune_matrix, note_bcr};
    return pass_prune_layers(m, opt, &p);
}
