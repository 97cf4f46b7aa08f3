/*
 * rnn.c - reference LSTM and GRU with ONNX (opset 13) semantics, sigmoid/tanh activations only.
 *
 *  inputs  x[T,B,I], w[D,G*H,I], r[D,G*H,H], b[D,2*G*H]? (Wb then Rb), seq_lens? (must be absent),
 *          h0[D,B,H]?, c0[D,B,H]? (lstm)
 *  outputs y[T,D,B,H], y_h[D,B,H]?, y_c[D,B,H]? (lstm)
 *  Direction d runs backwards in time when direction == "reverse", or d == 1 of "bidirectional";
 *  y[t, d] is the hidden state after consuming x[t] in either case.
 *
 *  LSTM (gates i, o, f, c):  i = s(.), o = s(.), f = s(.), c~ = tanh(.),
 *                            C = f*C + i*c~, H = o*tanh(C)      where (.) = x Wg^T + H Rg^T + Wbg + Rbg
 *  GRU (gates z, r, h):      z = s(x Wz^T + H Rz^T + Wbz + Rbz), r likewise,
 *                            h~ = tanh(x Wh^T + (r*H) Rh^T + Rbh + Wbh)          linear_before_reset = 0
 *                            h~ = tanh(x Wh^T + r*(H Rh^T + Rbh) + Wbh)          linear_before_reset != 0
 *                            H = (1-z)*h~ + z*H
 * Arithmetic is in double; scratch comes from pdc_alloc per call (thread-safe).
 */
#include <math.h>

#include "backends/ref/ref.h"

static double sig(double x)
{
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static int in_at(const ir_layer *l, size_t i) { return i < l->n_inputs ? l->inputs[i] : -1; }
static int out_at(const ir_layer *l, size_t i) { return i < l->n_outputs ? l->outputs[i] : -1; }

static pdc_status rnn_run(const ir_model *m, const ir_layer *l, float *const *buf, int lstm)
{
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(m, l, &p);
    if (st != PDC_OK) return st;
    const int64_t G = lstm ? 4 : 3;
    if (in_at(l, 0) < 0 || in_at(l, 1) < 0 || in_at(l, 2) < 0 || out_at(l, 0) < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing x, w, r or y");
    if (in_at(l, 4) >= 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "sequence_lens is not supported");
    if (ir_attrs_find(&l->attrs, "clip") || ir_attr_int(&l->attrs, "input_forget", 0) != 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "clip and input_forget are not supported");
    if (p.dirs < 1 || p.dirs > 2 || p.hidden < 1)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "bad directions or hidden size");

    const int64_t T = p.seq, B = p.batch, I = p.input, H = p.hidden, D = p.dirs;
    const float *x = buf[in_at(l, 0)];
    const float *w = buf[in_at(l, 1)];
    const float *r = buf[in_at(l, 2)];
    const float *bias = in_at(l, 3) >= 0 ? buf[in_at(l, 3)] : NULL;
    const float *h0 = in_at(l, 5) >= 0 ? buf[in_at(l, 5)] : NULL;
    const float *c0 = (lstm && in_at(l, 6) >= 0) ? buf[in_at(l, 6)] : NULL;
    float *y = buf[out_at(l, 0)];
    float *yh = out_at(l, 1) >= 0 ? buf[out_at(l, 1)] : NULL;
    float *yc = (lstm && out_at(l, 2) >= 0) ? buf[out_at(l, 2)] : NULL;

    /* scratch: h[B*H], c[B*H], a[G*H] (gate pre-activations), rh[H] (GRU: recurrent part of gate h) */
    size_t n_scratch = (size_t)(2 * B * H + G * H + H);
    double *scratch = pdc_alloc(m->ctx, n_scratch * sizeof(double));
    if (!scratch) {
        pdc_error_prefix(m->ctx, "layer '%s' (%s)", l->name, ir_op_get_info(l->op)->name);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    double *h = scratch, *c = h + B * H, *a = c + B * H, *rh = a + G * H;

    for (int64_t d = 0; d < D; d++) {
        const int rev = p.reverse_only || d == 1;
        const float *wd = w + d * G * H * I;
        const float *rd = r + d * G * H * H;
        const float *wb = bias ? bias + d * 2 * G * H : NULL;
        const float *rb = bias ? wb + G * H : NULL;
        for (int64_t i = 0; i < B * H; i++) {
            h[i] = h0 ? (double)h0[d * B * H + i] : 0.0;
            c[i] = c0 ? (double)c0[d * B * H + i] : 0.0;
        }
        for (int64_t step = 0; step < T; step++) {
            const int64_t t = rev ? T - 1 - step : step;
            for (int64_t bb = 0; bb < B; bb++) {
                const float *xt = x + (t * B + bb) * I;
                double *hb = h + bb * H, *cb = c + bb * H;
                /* input part plus biases for every gate row; recurrent part for all but GRU's h gate */
                for (int64_t j = 0; j < G * H; j++) {
                    double acc = wb ? (double)wb[j] : 0.0;
                    for (int64_t i = 0; i < I; i++) acc += (double)xt[i] * (double)wd[j * I + i];
                    const int gru_h = !lstm && j >= 2 * H;
                    if (!gru_h) {
                        if (rb) acc += (double)rb[j];
                        for (int64_t k = 0; k < H; k++) acc += hb[k] * (double)rd[j * H + k];
                    }
                    a[j] = acc;
                }
                if (lstm) {
                    for (int64_t k = 0; k < H; k++) {
                        double ig = sig(a[k]), og = sig(a[H + k]), fg = sig(a[2 * H + k]), cg = tanh(a[3 * H + k]);
                        cb[k] = fg * cb[k] + ig * cg;
                        hb[k] = og * tanh(cb[k]);
                    }
                } else {
                    /* a[0..H) = z pre-activation, a[H..2H) = r (made a gate value here),
                     * a[2H..3H) = x Wh^T + Wbh */
                    for (int64_t k = 0; k < H; k++) a[H + k] = sig(a[H + k]);
                    for (int64_t k = 0; k < H; k++) {
                        const int64_t j = 2 * H + k;
                        const double rg = a[H + k];
                        double acc = rb ? (double)rb[j] : 0.0;
                        if (p.linear_before_reset) {
                            for (int64_t q = 0; q < H; q++) acc += hb[q] * (double)rd[j * H + q];
                            rh[k] = rg * acc;
                        } else {
                            for (int64_t q = 0; q < H; q++) acc += a[H + q] * hb[q] * (double)rd[j * H + q];
                            rh[k] = acc;
                        }
                    }
                    for (int64_t k = 0; k < H; k++) {
                        double zg = sig(a[k]);
                        double hc = tanh(a[2 * H + k] + rh[k]);
                        hb[k] = (1.0 - zg) * hc + zg * hb[k];
                    }
                }
                float *yt = y + ((t * D + d) * B + bb) * H;
                for (int64_t k = 0; k < H; k++) yt[k] = (float)hb[k];
            }
        }
        for (int64_t i = 0; i < B * H; i++) {
            if (yh) yh[d * B * H + i] = (float)h[i];
            if (yc) yc[d * B * H + i] = (float)c[i];
        }
    }
    pdc_free(scratch);
    return PDC_OK;
}

pdc_status ref_lstm(const ir_model *m, const ir_layer *l, float *const *buf) { return rnn_run(m, l, buf, 1); }

pdc_status ref_gru(const ir_model *m, const ir_layer *l, float *const *buf) { return rnn_run(m, l, buf, 0); }
