/*
 * train_rnn.c - lstm and gru in the trainer: a forward pass that keeps what backpropagation through time
 * needs, and the backward pass. Semantics are backends/ref/rnn.c's (ONNX opset 13, default activations,
 * every direction, optional bias, h0, c0, outputs y, y_h, y_c; linear_before_reset for gru).
 *
 * Layouts (ONNX): x[T,B,I], w[D,G*H,I], r[D,G*H,H], b[D,2*G*H] (Wb then Rb), h0/c0[D,B,H], y[T,D,B,H],
 * y_h/y_c[D,B,H]. Gate order: lstm i, o, f, c; gru z, r, h.
 *
 * Saved per direction d, time t and sample b (the layer's aux buffer, S = G*H + H floats each):
 *   lstm  [i o f g | c]  gate values after their activation, then the cell state after step t
 *   gru   [z r h~ | q]   gate values, then q = h_prev Rh^T + Rbh (linear_before_reset) or (r*h_prev) Rh^T + Rbh
 * The hidden state after step t is y[t, d] itself, so h_prev is y of the previous step (or h0 / zero).
 *
 * Products are cpu_train_sgemm (the conv/fc GEMM, bit-identical for any thread count): the input part of
 * every gate for all T steps at once, the recurrent part step by step; in the backward pass the weight and
 * input gradients of all steps at once from the gathered gate gradients dA[T*B, G*H] (lstm: dR too, from
 * every step's h_prev gathered), gru's dR and dh_prev step by step. Pruned weights get gradients like kept
 * ones there; the optimizer's masks zero them. A pruned w (and lstm's r) that the trainer's option sparse=on
 * puts on the sparse kernels (tr_param.sparse: CSR of the kept weights) has those all-steps products on
 * train_kernels.c's instead (dW, dR: one dot product per kept weight; dx: the kept weights only), over
 * transposed operands; the forward pass and the per-step products stay dense.
 */
#include <math.h>
#include <string.h>

#include "lib/train/train.h"

static int in_at(const ir_layer *l, size_t i) { return i < l->n_inputs ? l->inputs[i] : -1; }
static int out_at(const ir_layer *l, size_t i) { return i < l->n_outputs ? l->outputs[i] : -1; }

static float sigf(float x)
{
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

typedef struct rnn_shape {
    size_t T, B, I, H, D, G, S;
    int lstm, lbr, reverse_only;
} rnn_shape;

static pdc_status shape_of(tr_net *net, const ir_layer *l, rnn_shape *s)
{
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(net->exec, l, &p);
    if (st) return st;
    s->T = (size_t)p.seq, s->B = (size_t)p.batch, s->I = (size_t)p.input, s->H = (size_t)p.hidden;
    s->D = (size_t)p.dirs, s->G = (size_t)p.gates, s->S = s->G * s->H + s->H;
    s->lstm = l->op == IR_OP_LSTM, s->lbr = p.linear_before_reset, s->reverse_only = p.reverse_only;
    return PDC_OK;
}

/* Time index of processing step k of direction d. */
static size_t time_of(const rnn_shape *s, size_t d, size_t k) { return s->reverse_only || d == 1 ? s->T - 1 - k : k; }

/* Hidden state before processing step k of direction d: y of the previous step, h0, or zeros. */
static const float *h_before(const rnn_shape *s, const float *y, const float *h0, const float *zeros, size_t d, size_t k)
{
    if (k == 0) return h0 ? h0 + d * s->B * s->H : zeros;
    return y + (time_of(s, d, k - 1) * s->D + d) * s->B * s->H;
}

static float *saved_at(const rnn_shape *s, float *aux, size_t d, size_t t) { return aux + (d * s->T + t) * s->B * s->S; }

pdc_status tr_rnn_forward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    tr_layer *lr = &net->layers[li];
    rnn_shape s;
    pdc_status st = shape_of(net, l, &s);
    if (st) return st;
    const size_t T = s.T, B = s.B, I = s.I, H = s.H, G = s.G, S = s.S, GH = G * H;
    const size_t need = s.D * T * B * S;
    if (need > lr->aux_cap || !lr->aux) {
        float *a = pdc_alloc_aligned(net->ctx, need ? need : 1, sizeof *a);
        if (!a) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(lr->aux);
        lr->aux = a;
        lr->aux_cap = need;
    }
    if ((st = tr_net_work(net, 2 * B * H))) return st;
    float *zeros = net->work, *rh = zeros + B * H;
    memset(zeros, 0, B * H * sizeof *zeros);
    const float *x = net->val[in_at(l, 0)], *w = net->val[in_at(l, 1)], *r = net->val[in_at(l, 2)];
    const float *bias = in_at(l, 3) >= 0 ? net->val[in_at(l, 3)] : NULL;
    const float *h0 = in_at(l, 5) >= 0 ? net->val[in_at(l, 5)] : NULL;
    const float *c0 = s.lstm && in_at(l, 6) >= 0 ? net->val[in_at(l, 6)] : NULL;
    float *y = net->val[out_at(l, 0)];
    float *yh = out_at(l, 1) >= 0 ? net->val[out_at(l, 1)] : NULL;
    float *yc = s.lstm && out_at(l, 2) >= 0 ? net->val[out_at(l, 2)] : NULL;

    for (size_t d = 0; d < s.D; d++) {
        const float *wd = w + d * GH * I, *rd = r + d * GH * H;
        const float *wb = bias ? bias + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
        float *aux = saved_at(&s, lr->aux, d, 0);
        /* the input part of every gate, all steps at once: rows t*B + b of x times w^T, into the gate slots */
        cpu_train_sgemm(0, 1, T * B, GH, I, 1.0f, x, I, wd, I, 0.0f, aux, S, net->threads);
        for (size_t k = 0; k < T; k++) {
            const size_t t = time_of(&s, d, k);
            const float *hp = h_before(&s, y, h0, zeros, d, k);
            float *a = saved_at(&s, lr->aux, d, t), *ht = y + (t * s.D + d) * B * H;
            /* recurrent part: every lstm gate; gru's z and r (its h gate's comes after r, into q) */
            cpu_train_sgemm(0, 1, B, s.lstm ? GH : 2 * H, H, 1.0f, hp, H, rd, H, 1.0f, a, S, net->threads);
            if (s.lstm) {
                const float *cp = k == 0 ? (c0 ? c0 + d * B * H : zeros) : saved_at(&s, lr->aux, d, time_of(&s, d, k - 1)) + GH;
                for (size_t b = 0; b < B; b++) {
                    float *ab = a + b * S, *cb = ab + GH;
                    const float *cpb = cp + b * (k == 0 ? H : S);
                    for (size_t j = 0; j < H; j++) {
                        float pi = ab[j], po = ab[H + j], pf = ab[2 * H + j], pg = ab[3 * H + j];
                        if (wb) {
                            pi += wb[j] + rb[j], po += wb[H + j] + rb[H + j];
                            pf += wb[2 * H + j] + rb[2 * H + j], pg += wb[3 * H + j] + rb[3 * H + j];
                        }
                        const float ig = sigf(pi), og = sigf(po), fg = sigf(pf), gg = tanhf(pg);
                        const float c = fg * cpb[j] + ig * gg;
                        ab[j] = ig, ab[H + j] = og, ab[2 * H + j] = fg, ab[3 * H + j] = gg, cb[j] = c;
                        ht[b * H + j] = og * tanhf(c);
                    }
                }
            } else {
                for (size_t b = 0; b < B; b++) {
                    float *ab = a + b * S;
                    for (size_t j = 0; j < 2 * H; j++)
                        ab[j] = sigf(ab[j] + (wb ? wb[j] + rb[j] : 0.0f));
                    if (!s.lbr)
                        for (size_t j = 0; j < H; j++) rh[b * H + j] = ab[H + j] * hp[b * H + j];
                }
                cpu_train_sgemm(0, 1, B, H, H, 1.0f, s.lbr ? hp : rh, H, rd + 2 * H * H, H, 0.0f, a + GH, S, net->threads);
                for (size_t b = 0; b < B; b++) {
                    float *ab = a + b * S, *q = ab + GH;
                    for (size_t j = 0; j < H; j++) {
                        if (rb) q[j] += rb[2 * H + j];
                        const float in = ab[2 * H + j] + (wb ? wb[2 * H + j] : 0.0f);
                        const float hc = tanhf(in + (s.lbr ? ab[H + j] * q[j] : q[j]));
                        ab[2 * H + j] = hc;
                        ht[b * H + j] = (1.0f - ab[j]) * hc + ab[j] * hp[b * H + j];
                    }
                }
            }
        }
        /* final states: the last processed step's (T >= 1: the trainer's shapes are concrete and positive) */
        const size_t tl = time_of(&s, d, T - 1);
        if (yh) memcpy(yh + d * B * H, y + (tl * s.D + d) * B * H, B * H * sizeof *yh);
        if (yc)
            for (size_t b = 0; b < B; b++)
                memcpy(yc + (d * B + b) * H, saved_at(&s, lr->aux, d, tl) + b * S + GH, H * sizeof *yc);
    }
    return PDC_OK;
}

/* The parameter behind input tensor t when the trainer put it on the sparse kernels, else NULL. */
static tr_param *sparse_param(tr_net *net, int t)
{
    const int pi = t >= 0 ? net->param_of[t] : -1;
    return pi >= 0 && net->params[pi].sparse ? &net->params[pi] : NULL;
}

/* dst[c * rows + r] = src[r * cols + c] */
static void transpose_to(const float *src, size_t rows, size_t cols, float *dst)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

/* The gradient of output o written in this backward pass, or NULL (none, or nothing reached it). */
static const float *out_grad(const tr_net *net, const ir_layer *l, size_t o)
{
    const int t = out_at(l, o);
    if (t < 0 || !net->grad[t] || net->touched[t] != net->epoch) return NULL;
    return net->grad[t];
}

pdc_status tr_rnn_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const tr_layer *lr = &net->layers[li];
    rnn_shape s;
    pdc_status st = shape_of(net, l, &s);
    if (st) return st;
    const size_t T = s.T, B = s.B, I = s.I, H = s.H, G = s.G, S = s.S, GH = G * H, BH = B * H, TB = T * B;
    tr_param *pw = sparse_param(net, in_at(l, 1));
    const tr_param *pr = s.lstm ? sparse_param(net, in_at(l, 2)) : NULL;
    /* work: dA[D][T*B, G*H], zeros, dh, dc, dh_prev, u (gru: dA_h Rh or dq), rh (gru: r*h_prev); lstm: hps[T*B, H]
     * (every step's h_prev); sparse products: dAt[D*G*H, T*B] (dA transposed), then xt, dxt [I, T*B] (w),
     * hpt[H, T*B] (r) */
    const size_t n_hps = s.lstm ? TB * H : 0, n_dat = pw || pr ? s.D * GH * TB : 0;
    if ((st = tr_net_work(net, s.D * TB * GH + 6 * BH + n_hps + n_dat + (pw ? 2 * I * TB : 0) + (pr ? H * TB : 0))))
        return st;
    float *dA = net->work, *zeros = dA + s.D * TB * GH, *dh = zeros + BH, *dc = dh + BH, *dhp = dc + BH;
    float *u = dhp + BH, *rh = u + BH, *hps = rh + BH, *dAt = hps + n_hps, *xt = dAt + n_dat, *dxt = xt + (pw ? I * TB : 0);
    float *hpt = dxt + (pw ? I * TB : 0);
    memset(zeros, 0, BH * sizeof *zeros);
    const float *x = net->val[in_at(l, 0)], *w = net->val[in_at(l, 1)], *r = net->val[in_at(l, 2)];
    const float *h0 = in_at(l, 5) >= 0 ? net->val[in_at(l, 5)] : NULL;
    const float *c0 = s.lstm && in_at(l, 6) >= 0 ? net->val[in_at(l, 6)] : NULL;
    const float *y = net->val[out_at(l, 0)];
    const float *dy = out_grad(net, l, 0), *dyh = out_grad(net, l, 1), *dyc = s.lstm ? out_grad(net, l, 2) : NULL;
    float *dx = tr_grad_acc(net, in_at(l, 0)), *dw = tr_grad_acc(net, in_at(l, 1)), *dr = tr_grad_acc(net, in_at(l, 2));
    float *db = tr_grad_acc(net, in_at(l, 3)), *dh0 = tr_grad_acc(net, in_at(l, 5));
    float *dc0 = s.lstm ? tr_grad_acc(net, in_at(l, 6)) : NULL;

    for (size_t d = 0; d < s.D; d++) {
        const float *wd = w + d * GH * I, *rd = r + d * GH * H;
        float *dwd = dw ? dw + d * GH * I : NULL, *drd = dr ? dr + d * GH * H : NULL;
        float *dwb = db ? db + d * 2 * GH : NULL, *drb = dwb ? dwb + GH : NULL;
        memcpy(dh, dyh ? dyh + d * BH : zeros, BH * sizeof *dh);
        memcpy(dc, dyc ? dyc + d * BH : zeros, BH * sizeof *dc);
        float *dAd = dA + d * TB * GH;
        for (size_t k = T; k-- > 0;) {
            const size_t t = time_of(&s, d, k);
            const float *hp = h_before(&s, y, h0, zeros, d, k);
            const float *a = saved_at(&s, lr->aux, d, t);
            float *da = dAd + t * B * GH;
            if (dy)
                for (size_t i = 0; i < BH; i++) dh[i] += dy[(t * s.D + d) * BH + i];
            if (s.lstm) {
                const float *cp = k == 0 ? (c0 ? c0 + d * BH : zeros) : saved_at(&s, lr->aux, d, time_of(&s, d, k - 1)) + GH;
                for (size_t b = 0; b < B; b++) {
                    const float *ab = a + b * S, *cpb = cp + b * (k == 0 ? H : S);
                    float *dab = da + b * GH;
                    for (size_t j = 0; j < H; j++) {
                        const float ig = ab[j], og = ab[H + j], fg = ab[2 * H + j], gg = ab[3 * H + j];
                        const float tc = tanhf(ab[GH + j]), g = dh[b * H + j];
                        const float dct = dc[b * H + j] + g * og * (1.0f - tc * tc);
                        dab[j] = dct * gg * ig * (1.0f - ig);
                        dab[H + j] = g * tc * og * (1.0f - og);
                        dab[2 * H + j] = dct * cpb[j] * fg * (1.0f - fg);
                        dab[3 * H + j] = dct * ig * (1.0f - gg * gg);
                        dc[b * H + j] = dct * fg;
                    }
                }
                /* dh_prev = dA R (dR after the last step, from every step's h_prev) */
                cpu_train_sgemm(0, 0, B, H, GH, 1.0f, da, GH, rd, H, 0.0f, dhp, H, net->threads);
                if (drd) memcpy(hps + t * BH, hp, BH * sizeof *hps);
                if (drb)
                    for (size_t b = 0; b < B; b++)
                        for (size_t j = 0; j < GH; j++) drb[j] += da[b * GH + j];
            } else {
                /* h gate first: its pre-activation's gradient, then u = the gradient of its recurrent term */
                for (size_t b = 0; b < B; b++) {
                    const float *ab = a + b * S, *hpb = hp + b * H;
                    float *dab = da + b * GH;
                    for (size_t j = 0; j < H; j++) {
                        const float z = ab[j], hc = ab[2 * H + j], g = dh[b * H + j];
                        dab[j] = g * (hpb[j] - hc) * z * (1.0f - z);
                        dab[2 * H + j] = g * (1.0f - z) * (1.0f - hc * hc);
                        dhp[b * H + j] = g * z;
                    }
                }
                /* u: the gradient of the h gate's recurrent term q (lbr: dA_h * r) or of q's product (dA_h) */
                for (size_t b = 0; b < B; b++)
                    for (size_t j = 0; j < H; j++) {
                        const float rg = a[b * S + H + j];
                        u[b * H + j] = s.lbr ? da[b * GH + 2 * H + j] * rg : da[b * GH + 2 * H + j];
                        if (!s.lbr) rh[b * H + j] = rg * hp[b * H + j];
                    }
                if (s.lbr) {
                    for (size_t b = 0; b < B; b++)
                        for (size_t j = 0; j < H; j++) {
                            const float rg = a[b * S + H + j], q = a[b * S + GH + j];
                            da[b * GH + H + j] = da[b * GH + 2 * H + j] * q * rg * (1.0f - rg);
                        }
                    cpu_train_sgemm(0, 0, B, H, H, 1.0f, u, H, rd + 2 * H * H, H, 1.0f, dhp, H, net->threads);
                } else {
                    /* v = dA_h Rh, the gradient of r*h_prev: r's and h_prev's gradients from it (rh as scratch after
                     * dRh has used it) */
                    if (drd) cpu_train_sgemm(1, 0, H, H, B, 1.0f, u, H, rh, H, 1.0f, drd + 2 * H * H, H, net->threads);
                    cpu_train_sgemm(0, 0, B, H, H, 1.0f, u, H, rd + 2 * H * H, H, 0.0f, rh, H, net->threads);
                    for (size_t b = 0; b < B; b++)
                        for (size_t j = 0; j < H; j++) {
                            const float rg = a[b * S + H + j], v = rh[b * H + j];
                            da[b * GH + H + j] = v * hp[b * H + j] * rg * (1.0f - rg);
                            dhp[b * H + j] += v * rg;
                        }
                }
                /* z and r: dh_prev += dA_zr R_zr; dR_zr += dA_zr^T h_prev */
                cpu_train_sgemm(0, 0, B, H, 2 * H, 1.0f, da, GH, rd, H, 1.0f, dhp, H, net->threads);
                if (drd) {
                    cpu_train_sgemm(1, 0, 2 * H, H, B, 1.0f, da, GH, hp, H, 1.0f, drd, H, net->threads);
                    if (s.lbr) cpu_train_sgemm(1, 0, H, H, B, 1.0f, u, H, hp, H, 1.0f, drd + 2 * H * H, H, net->threads);
                }
                if (drb)
                    for (size_t b = 0; b < B; b++) {
                        for (size_t j = 0; j < 2 * H; j++) drb[j] += da[b * GH + j];
                        for (size_t j = 0; j < H; j++) drb[2 * H + j] += u[b * H + j];
                    }
            }
            memcpy(dh, dhp, BH * sizeof *dh);
        }
        if (dh0)
            for (size_t i = 0; i < BH; i++) dh0[d * BH + i] += dh[i];
        if (dc0)
            for (size_t i = 0; i < BH; i++) dc0[d * BH + i] += dc[i];
        if (n_dat) transpose_to(dAd, TB, GH, dAt + d * GH * TB);
        /* lstm, all steps at once: dR += dA^T h_prev (rows d*GH.. of the sparse r: its CSR's rows) */
        if (drd && pr) {
            transpose_to(hps, TB, H, hpt);
            tk_spmm_dw(net->isa, GH, pr->fwd.ptr + d * GH, pr->fwd.idx, pr->fwd.vidx, dAt + d * GH * TB, TB, hpt, TB,
                       TB, dr, 1, net->threads);
        } else if (drd && s.lstm) {
            cpu_train_sgemm(1, 0, GH, H, TB, 1.0f, dAd, GH, hps, H, 1.0f, drd, H, net->threads);
        }
        /* all steps at once: dW += dA^T x, dx += dA W (dense w; sparse below), dWb += column sums of dA */
        if (dwd && !pw) cpu_train_sgemm(1, 0, GH, I, TB, 1.0f, dAd, GH, x, I, 1.0f, dwd, I, net->threads);
        if (dx && !pw) cpu_train_sgemm(0, 0, TB, I, GH, 1.0f, dAd, GH, wd, I, 1.0f, dx, I, net->threads);
        if (dwb)
            for (size_t i = 0; i < TB; i++)
                for (size_t j = 0; j < GH; j++) dwb[j] += dAd[i * GH + j];
    }
    if (pw && (dw || dx)) {
        /* sparse w, every direction at once (dAt's rows are w's rows): dW over the kept weights, dx^T = w^T dA^T */
        transpose_to(x, TB, I, xt);
        if (dw) tk_spmm_dw(net->isa, s.D * GH, pw->fwd.ptr, pw->fwd.idx, pw->fwd.vidx, dAt, TB, xt, TB, TB, dw, 1, net->threads);
        if (dx) {
            tr_csr_pack(net, pw, w); /* the kept weights in tr's order (the forward pass here is dense) */
            tk_spmm(net->isa, I, pw->tr.ptr, pw->tr.idx, pw->tr.val, NULL, dAt, TB, dxt, TB, TB, 0, net->threads);
            for (size_t i = 0; i < TB; i++)
                for (size_t j = 0; j < I; j++) dx[i * I + j] += dxt[j * TB + i];
        }
    }
    return PDC_OK;
}
