/*
 * conv_bcr.c - 1x1 convolutions (stride 1, no padding, one group) whose weights are BCR-pruned (prune-bcr
 * with block_convs=1): per image, the [O, C] weight matrix times the [C, H*W] input planes through bcr.c's
 * planes product (the lstm/gru and fc packing: per block-row of filters, the kept input channels and their
 * weights; sixteen pixels per vector, a block-row's filters in registers, each kept channel's pixels loaded
 * once for all of them). The output starts as bias (+ a fused residual); a fused activation runs over
 * each image's output after its product. A batchnorm fused after the conv is folded into the weights
 * (cpu_conv_operands): it scales whole filters, so the pruned entries stay zeros and the BCR description
 * holds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

typedef struct bcr_conv_state {
    cpu_bcr w;
    float *bias;      /* o entries */
    int64_t n, c, o, np;
    int residual;     /* a fused residual add */
    cpu_unary_fn act; /* fused activation, or NULL */
} bcr_conv_state;

static void bcr_conv_free(void *p)
{
    bcr_conv_state *s = p;
    if (!s) return;
    cpu_bcr_release(&s->w);
    pdc_free(s->bias);
    pdc_free(s);
}

static pdc_status bcr_conv_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                               const cpu_exec *x)
{
    (void)m;
    const bcr_conv_state *s = L->state;
    const float *in = buf[l->inputs[0]], *res = s->residual ? buf[L->epi.residual] : NULL;
    float *out = cpu_layer_out(L, l, buf);
    const int64_t np = s->np, per = s->o * np;
    for (int64_t n = 0; n < s->n; n++) {
        float *y = out + n * per;
        for (int64_t o = 0; o < s->o; o++) {
            float *yr = y + o * np;
            const float *rr = res ? res + n * per + o * np : NULL;
            for (int64_t p = 0; p < np; p++) yr[p] = s->bias[o] + (rr ? rr[p] : 0.0f);
        }
        cpu_bcr_product_planes(&s->w, np, in + n * s->c * np, np, y, np, x->threads);
        if (s->act) s->act(y, NULL, y, per);
    }
    return PDC_OK;
}

pdc_status cpu_plan_conv_bcr(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                             const ir_fused_params *fp, cpu_layer *L)
{
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    if (wt->sparsity.kind != IR_SPARSITY_BCR || g->kh != 1 || g->kw != 1 || g->sy != 1 || g->sx != 1 || g->group != 1 ||
        g->pt != 0 || g->pl != 0 || g->oh != g->h || g->ow != g->w || fp->out_perm)
        return PDC_ERR_UNSUPPORTED;
    pdc_context *ctx = cc->ctx;
    const float *w, *bias;
    cpu_conv_operands(cc, m, l, &w, &bias);
    ir_tensor folded = *wt; /* the weights the kernel computes with, under the tensor's BCR description */
    folded.data = (float *)w;
    bcr_conv_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cpu_bcr_plan(ctx, &folded, 0, g->o, &s->w);
    if (!st && !(s->bias = pdc_alloc(ctx, (size_t)g->o * sizeof *s->bias))) st = PDC_ERR_OUT_OF_MEMORY;
    ir_fused_params post = *fp;
    s->residual = cpu_plan_epilogue(cc, &post);
    if (!st) st = cpu_act_kernel(cc, &post, &s->act);
    if (st) {
        bcr_conv_free(s);
        return st;
    }
    for (int64_t o = 0; o < g->o; o++) s->bias[o] = bias ? bias[o] : 0.0f;
    s->n = g->n;
    s->c = g->c;
    s->o = g->o;
    s->np = g->h * g->w;
    L->run = bcr_conv_run;
    L->state = s;
    L->free_state = bcr_conv_free;
    cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info,
             "bcr conv 1x1, blocks %" PRId64 "x%" PRId64 ", %.0f%% kept (%.2fx fewer FLOPs), %s",
             wt->sparsity.bh, wt->sparsity.bw, 100.0 * (double)s->w.kept / (double)s->w.total,
             s->w.kept ? (double)s->w.total / (double)s->w.kept : 0.0,
             s->w.bh == 8 || s->w.bh == 16 ? "a block-row's filters x 16 pixels in registers" : "filter by filter");
    return PDC_OK;
}
