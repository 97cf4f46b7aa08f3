/*
 * pool.c - reference max/average pooling (2D/3D; 1D works too) and global average pooling.
 *
 * Window taps are at out*stride - pad_begin + k*dilation. A tap is "valid" when it lies in the
 * input and "in the padded extent" when it lies in [-pad_begin, in + pad_end).
 *  - maxpool: max over valid taps (padding never wins).
 *  - avgpool: sum over valid taps divided by the number of valid taps (count_include_pad = 0) or
 *    by the number of taps in the padded extent (count_include_pad = 1; with ceil_mode, taps past
 *    the end padding are not counted, as in ONNX Runtime and PyTorch).
 * A window with no valid tap (possible only with unusual pads/ceil_mode) yields 0.
 */
#include <float.h>

#include "backends/ref/ref.h"

pdc_status ref_pool(const ir_model *m, const ir_layer *l, float *const *buf)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st != PDC_OK) return st;
    if (p.nsp < 1 || p.nsp > IR_MAX_SPATIAL)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "bad spatial rank %d", p.nsp);
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const int is_max = l->op == IR_OP_MAXPOOL;

    ir_window_params_as_3d(&p);
    const int64_t *in = p.in, *out = p.out, *k = p.k, *s = p.stride, *pb = p.pad_begin, *pe = p.pad_end, *d = p.dil;

    const float *x = buf[l->inputs[0]];
    float *y = buf[l->outputs[0]];
    const int64_t planes = p.n * p.c;
    const int64_t in_sp = in[0] * in[1] * in[2];
    const int64_t out_sp = out[0] * out[1] * out[2];

    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_sp;
        float *yp = y + pl * out_sp;
        for (int64_t z = 0; z < out[0]; z++) {
            for (int64_t r = 0; r < out[1]; r++) {
                for (int64_t c = 0; c < out[2]; c++) {
                    double sum = 0.0;
                    float mx = -FLT_MAX;
                    int64_t valid = 0, padded = 0;
                    for (int64_t kz = 0; kz < k[0]; kz++) {
                        int64_t iz = z * s[0] - pb[0] + kz * d[0];
                        if (iz >= in[0] + pe[0]) continue;
                        int vz = iz >= 0 && iz < in[0];
                        for (int64_t kr = 0; kr < k[1]; kr++) {
                            int64_t ir = r * s[1] - pb[1] + kr * d[1];
                            if (ir >= in[1] + pe[1]) continue;
                            int vr = ir >= 0 && ir < in[1];
                            for (int64_t kc = 0; kc < k[2]; kc++) {
                                int64_t ic = c * s[2] - pb[2] + kc * d[2];
                                if (ic >= in[2] + pe[2]) continue;
                                padded++;
                                if (!vz || !vr || ic < 0 || ic >= in[2]) continue;
                                float v = xp[(iz * in[1] + ir) * in[2] + ic];
                                valid++;
                                sum += (double)v;
                                if (v > mx || valid == 1 || v != v) mx = v; /* a NaN wins */
                            }
                        }
                    }
                    float res;
                    if (valid == 0)
                        res = 0.0f;
                    else if (is_max)
                        res = mx;
                    else
                        res = (float)(sum / (double)(p.count_include_pad ? padded : valid));
                    yp[(z * out[1] + r) * out[2] + c] = res;
                }
            }
        }
    }
    return PDC_OK;
}

pdc_status ref_global_avgpool(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const ir_tensor *t = &m->tensors[l->inputs[0]];
    if (t->rank < 2)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input rank %d < 2", t->rank);
    int64_t planes = t->dims[0] * t->dims[1], sp = 1;
    for (int i = 2; i < t->rank; i++) sp *= t->dims[i];
    const float *x = buf[l->inputs[0]];
    float *y = buf[l->outputs[0]];
    for (int64_t pl = 0; pl < planes; pl++) {
        double sum = 0.0;
        for (int64_t i = 0; i < sp; i++) sum += (double)x[pl * sp + i];
        y[pl] = (float)(sum / (double)sp);
    }
    return PDC_OK;
}
