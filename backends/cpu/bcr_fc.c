/*
 * bcr_fc.c - fc, gemm and matmul by a BCR-pruned constant matrix (prune-bcr) on the cpu target: rows of
 * y = act(bias + alpha x w^T) through bcr.c's product (the same packing and kernels as the lstm/gru gate
 * products: per block-row, the kept columns' inputs gathered and their weights as a vector of rows, 8
 * samples per weight load), over the threads from 64K multiply-adds on. gemm.c hands these layers over
 * (cpu_plan_bcr_fc) once it has the weights in the [out, in] layout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct bcr_fc_state {
    cpu_bcr w;
    int64_t n;        /* rows of x */
    float *bias;      /* w.rows entries, or NULL */
    cpu_unary_fn act; /* fused activation, or NULL */
} bcr_fc_state;

static void bcr_fc_free(void *p)
{
    bcr_fc_state *s = p;
    if (!s) return;
    cpu_bcr_release(&s->w);
    pdc_free(s->bias);
    pdc_free(s);
}

static pdc_status bcr_fc_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                             const cpu_exec *x)
{
    (void)m;
    const bcr_fc_state *s = L->state;
    const int64_t o = s->w.rows;
    float *y = cpu_layer_out(L, l, buf);
    for (int64_t i = 0; i < s->n; i++) {
        if (s->bias) memcpy(y + i * o, s->bias, (size_t)o * sizeof *y);
        else memset(y + i * o, 0, (size_t)o * sizeof *y);
    }
    cpu_bcr_product(&s->w, s->n, buf[l->inputs[0]], s->w.cols, y, o, 1, x->threads);
    if (s->act) s->act(y, NULL, y, s->n * o);
    return PDC_OK;
}

pdc_status cpu_plan_bcr_fc(const cpu_compile *cc, const ir_tensor *wt, float alpha, const float *bias,
                           const float *ebias, int64_t rows, const ir_fused_params *fp, const char *what, cpu_layer *L)
{
    int64_t o, k;
    ir_weight_matrix_view(wt, &o, &k);
    pdc_context *ctx = cc->ctx;
    bcr_fc_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cpu_bcr_plan(ctx, wt, 0, o, &s->w);
    if (!st && (bias || ebias)) {
        if (!(s->bias = pdc_alloc(ctx, (size_t)o * sizeof *s->bias))) st = PDC_ERR_OUT_OF_MEMORY;
        else
            for (int64_t j = 0; j < o; j++) s->bias[j] = (bias ? bias[j] : 0.0f) + (ebias ? ebias[j] : 0.0f);
    }
    if (!st) st = cpu_act_kernel(cc, fp, &s->act);
    if (st) {
        bcr_fc_free(s);
        return st;
    }
    if (alpha != 1.0f) /* gemm's alpha, folded into the packed weights */
        for (int64_t i = 0; i < s->w.rowptr[s->w.nbr] * s->w.bh; i++) s->w.wpk[i] *= alpha;
    s->n = rows;
    L->run = bcr_fc_run;
    L->state = s;
    L->free_state = bcr_fc_free;
    snprintf(L->info, sizeof L->info,
             "bcr %s, rows of x: %" PRId64 ", blocks %" PRId64 "x%" PRId64 ", %.0f%% kept (%.2fx fewer FLOPs), %d samples per "
             "weight load",
             what, rows, wt->sparsity.bh, wt->sparsity.bw, 100.0 * (double)s->w.kept / (double)s->w.total,
             s->w.kept ? (double)s->w.total / (double)s->w.kept : 0.0, cpu_bcr_tile(&s->w));
    return PDC_OK;
}
