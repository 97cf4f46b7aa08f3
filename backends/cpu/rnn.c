/*
 * rnn.c - LSTM and GRU for the cpu target (ONNX semantics, as backends/ref/rnn.c documents them):
 * the input projections of all time steps in one GEMM per direction (x[T*B, I] w^T, biases
 * folded in), then per step one GEMM for the recurrent part (h[B, H] r^T) and the gates in C.
 * GEMMs are OpenBLAS's; block sparsity in w or r is not exploited here (the gate GEMMs run dense
 * with the zeros) - pdc inspect says so. Arithmetic is float (the reference uses double): results
 * agree to rounding.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct rnn_state {
    ir_rnn_params p;
    int lstm;
    int64_t g;              /* gates: 4 (lstm) or 3 (gru) */
} rnn_state;

static void rnn_free(void *p) { pdc_free(p); }

/* The reference's sigmoid, so saturated values agree exactly. */
static float sigf(float x)
{
    if (x >= 0.0f) return (float)(1.0 / (1.0 + exp(-(double)x)));
    double e = exp((double)x);
    return (float)(e / (1.0 + e));
}

static int in_at(const ir_layer *l, size_t i) { return i < l->n_inputs ? l->inputs[i] : -1; }
static int out_at(const ir_layer *l, size_t i) { return i < l->n_outputs ? l->outputs[i] : -1; }

static pdc_status rnn_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf, const cpu_exec *x)
{
    (void)m;
    const rnn_state *s = L->state;
    const ir_rnn_params *p = &s->p;
    const int64_t ns = p->seq, nb = p->batch, ni = p->input, nh = p->hidden, nd = p->dirs, ng = s->g, ngh = ng * nh;
    const float *xin = buf[in_at(l, 0)], *w = buf[in_at(l, 1)], *r = buf[in_at(l, 2)];
    const float *bias = in_at(l, 3) >= 0 ? buf[in_at(l, 3)] : NULL;
    const float *h0 = in_at(l, 5) >= 0 ? buf[in_at(l, 5)] : NULL;
    const float *c0 = s->lstm && in_at(l, 6) >= 0 ? buf[in_at(l, 6)] : NULL;
    float *y = buf[out_at(l, 0)];
    float *yh = out_at(l, 1) >= 0 ? buf[out_at(l, 1)] : NULL;
    float *yc = s->lstm && out_at(l, 2) >= 0 ? buf[out_at(l, 2)] : NULL;
    /* scratch: xw[ns*nb*ngh], h[nb*nh], c[nb*nh], hr[nb*ngh], rh[nb*nh] */
    float *xw = x->scratch, *h = xw + ns * nb * ngh, *c = h + nb * nh, *hr = c + nb * nh, *rh = hr + nb * ngh;
    for (int64_t d = 0; d < nd; d++) {
        const int rev = p->reverse_only || d == 1;
        const float *wd = w + d * ngh * ni, *rd = r + d * ngh * nh;
        const float *wb = bias ? bias + d * 2 * ngh : NULL, *rb = bias ? wb + ngh : NULL;
        /* xw = x w^ns + Wb (+ Rb except GRU's h gate, whose Rb sits inside the reset product) */
        for (int64_t q = 0; q < ns * nb; q++)
            for (int64_t j = 0; j < ngh; j++)
                xw[q * ngh + j] = (wb ? wb[j] : 0.0f) + (rb && (s->lstm || j < 2 * nh) ? rb[j] : 0.0f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(ns * nb), (int)ngh, (int)ni, 1.0f, xin, (int)ni, wd,
                    (int)ni, 1.0f, xw, (int)ngh);
        for (int64_t i = 0; i < nb * nh; i++) {
            h[i] = h0 ? h0[d * nb * nh + i] : 0.0f;
            c[i] = c0 ? c0[d * nb * nh + i] : 0.0f;
        }
        for (int64_t step = 0; step < ns; step++) {
            const int64_t t = rev ? ns - 1 - step : step;
            /* recurrent products h r^ns for every gate (GRU: z and r only) */
            int64_t nrec = s->lstm ? ngh : 2 * nh;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)nrec, (int)nh, 1.0f, h, (int)nh, rd, (int)nh,
                        0.0f, hr, (int)ngh);
            for (int64_t b = 0; b < nb; b++) {
                const float *a = xw + (t * nb + b) * ngh;
                const float *ar = hr + b * ngh;
                float *hb = h + b * nh, *cb = c + b * nh;
                if (s->lstm) {
                    for (int64_t k = 0; k < nh; k++) {
                        float ig = sigf(a[k] + ar[k]), og = sigf(a[nh + k] + ar[nh + k]);
                        float fg = sigf(a[2 * nh + k] + ar[2 * nh + k]), cg = tanhf(a[3 * nh + k] + ar[3 * nh + k]);
                        cb[k] = fg * cb[k] + ig * cg;
                        hb[k] = og * tanhf(cb[k]);
                    }
                }
            }
            if (!s->lstm) {
                /* reset gate, then the h gate's recurrent part with it */
                for (int64_t b = 0; b < nb; b++)
                    for (int64_t k = 0; k < nh; k++) {
                        float rg = sigf(xw[(t * nb + b) * ngh + nh + k] + hr[b * ngh + nh + k]);
                        hr[b * ngh + nh + k] = rg; /* r, kept for the lbr case */
                        rh[b * nh + k] = p->linear_before_reset ? h[b * nh + k] : rg * h[b * nh + k];
                    }
                /* (r*h) Rh^ns or h Rh^ns into hr's third block */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)nh, (int)nh, 1.0f, rh, (int)nh,
                            rd + 2 * nh * nh, (int)nh, 0.0f, hr + 2 * nh, (int)ngh);
                for (int64_t b = 0; b < nb; b++) {
                    const float *a = xw + (t * nb + b) * ngh;
                    float *ar = hr + b * ngh, *hb = h + b * nh;
                    for (int64_t k = 0; k < nh; k++) {
                        float rec = ar[2 * nh + k] + (rb ? rb[2 * nh + k] : 0.0f);
                        if (p->linear_before_reset) rec *= ar[nh + k];
                        float zg = sigf(a[k] + ar[k]);
                        float hc = tanhf(a[2 * nh + k] + rec);
                        hb[k] = (1.0f - zg) * hc + zg * hb[k];
                    }
                }
            }
            for (int64_t b = 0; b < nb; b++) memcpy(y + ((t * nd + d) * nb + b) * nh, h + b * nh, (size_t)nh * sizeof *y);
        }
        if (yh) memcpy(yh + d * nb * nh, h, (size_t)(nb * nh) * sizeof *yh);
        if (yc) memcpy(yc + d * nb * nh, c, (size_t)(nb * nh) * sizeof *yc);
    }
    return PDC_OK;
}

pdc_status cpu_plan_rnn(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                        size_t why_cap)
{
    if (l->op != IR_OP_LSTM && l->op != IR_OP_GRU) return PDC_ERR_UNSUPPORTED;
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(m, l, &p);
    if (st) return st;
    if (in_at(l, 0) < 0 || in_at(l, 1) < 0 || in_at(l, 2) < 0 || out_at(l, 0) < 0 || in_at(l, 4) >= 0 ||
        ir_attrs_find(&l->attrs, "clip") || ir_attr_int(&l->attrs, "input_forget", 0) != 0 || p.dirs < 1 ||
        p.dirs > 2 || p.hidden < 1) {
        snprintf(why, why_cap, "%s with sequence_lens, clip or input_forget", ir_op_get_info(l->op)->name);
        return PDC_ERR_UNSUPPORTED;
    }
    if (p.seq * p.batch > INT32_MAX || p.input > INT32_MAX || 4 * p.hidden > INT32_MAX) {
        snprintf(why, why_cap, "dims beyond BLAS's int range");
        return PDC_ERR_UNSUPPORTED;
    }
    rnn_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->p = p;
    s->lstm = l->op == IR_OP_LSTM;
    s->g = s->lstm ? 4 : 3;
    cpu_blas_single_thread();
    int64_t gh = s->g * p.hidden;
    L->run = rnn_run;
    L->state = s;
    L->free_state = rnn_free;
    L->scratch_floats = (size_t)(p.seq * p.batch * gh + 2 * p.batch * p.hidden + p.batch * gh + p.batch * p.hidden);
    const ir_tensor *wt = &m->tensors[l->inputs[1]], *rt = &m->tensors[l->inputs[2]];
    snprintf(L->info, sizeof L->info, "%s: OpenBLAS GEMMs for input (all steps at once) and recurrent projections%s",
             ir_op_get_info(l->op)->name,
             wt->sparsity.kind != IR_SPARSITY_NONE || rt->sparsity.kind != IR_SPARSITY_NONE
                 ? " (weight sparsity not exploited: dense gate GEMMs)" : "");
    return PDC_OK;
}
