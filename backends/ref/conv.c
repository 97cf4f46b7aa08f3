/*
 * conv.c - reference convolution: one generic loop nest for 1, 2 and 3 spatial dims (missing dims
 * are padded to size 1), with strides, pads, dilations and groups (depthwise = group == C == O).
 * Layouts (ONNX): x[N,C,D,H,W], w[O,C/group,KD,KH,KW], b[O], y[N,O,OD,OH,OW]. Accumulates in double.
 * With out_perm (group 1 only), stored filter o and bias o produce output channel out_perm[o].
 */
#include "backends/ref/ref.h"

pdc_status ref_conv(const ir_model *m, const ir_layer *l, float *const *buf)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st != PDC_OK) return st;
    if (p.nsp < 1 || p.nsp > IR_MAX_SPATIAL || p.group < 1 || p.c % p.group != 0 || p.o % p.group != 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "bad channel/group configuration");
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");

    /* Pad the spatial description to 3 dims: leading dims of size 1. */
    int64_t in[3], out[3], k[3], s[3], pb[3], d[3];
    int lead = 3 - p.nsp;
    for (int i = 0; i < 3; i++) {
        if (i < lead) {
            in[i] = out[i] = k[i] = s[i] = d[i] = 1;
            pb[i] = 0;
        } else {
            int j = i - lead;
            in[i] = p.in[j];
            out[i] = p.out[j];
            k[i] = p.k[j];
            s[i] = p.stride[j];
            pb[i] = p.pad_begin[j];
            d[i] = p.dil[j];
        }
    }

    /* Filters reordered by the reorder pass: stored filter o computes output channel out_perm[o]. */
    ir_fused_params fp;
    if ((st = ir_fused_params_get(m, l, &fp)) != PDC_OK) return st;

    const float *x = buf[l->inputs[0]];
    const float *w = buf[l->inputs[1]];
    const ir_tensor *wp = ref_pruned(m, l->inputs[1]);
    const float *b = (l->n_inputs > 2 && l->inputs[2] >= 0) ? buf[l->inputs[2]] : NULL;
    float *y = buf[l->outputs[0]];

    const int64_t cg = p.c / p.group, og = p.o / p.group;
    const int64_t in_sp = in[0] * in[1] * in[2];
    const int64_t out_sp = out[0] * out[1] * out[2];
    const int64_t k_sp = k[0] * k[1] * k[2];

    for (int64_t n = 0; n < p.n; n++) {
        for (int64_t o = 0; o < p.o; o++) {
            const int64_t g = o / og;
            float *yo = y + (n * p.o + (fp.out_perm ? fp.out_perm[o] : o)) * out_sp;
            for (int64_t z = 0; z < out[0]; z++) {
                for (int64_t r = 0; r < out[1]; r++) {
                    for (int64_t c = 0; c < out[2]; c++) {
                        double acc = b ? (double)b[o] : 0.0;
                        for (int64_t ci = 0; ci < cg; ci++) {
                            const float *xc = x + (n * p.c + g * cg + ci) * in_sp;
                            const float *wk = w + (o * cg + ci) * k_sp;
                            for (int64_t kz = 0; kz < k[0]; kz++) {
                                int64_t iz = z * s[0] - pb[0] + kz * d[0];
                                if (iz < 0 || iz >= in[0]) continue;
                                for (int64_t kr = 0; kr < k[1]; kr++) {
                                    int64_t ir = r * s[1] - pb[1] + kr * d[1];
                                    if (ir < 0 || ir >= in[1]) continue;
                                    for (int64_t kc = 0; kc < k[2]; kc++) {
                                        int64_t ic = c * s[2] - pb[2] + kc * d[2];
                                        if (ic < 0 || ic >= in[2]) continue;
                                        int64_t wi = (kz * k[1] + kr) * k[2] + kc;
                                        if (wp && !ir_sparsity_keeps(wp, (size_t)((o * cg + ci) * k_sp + wi)))
                                            continue;
                                        acc += (double)xc[(iz * in[1] + ir) * in[2] + ic] * (double)wk[wi];
                                    }
                                }
                            }
                        }
                        yo[(z * out[1] + r) * out[2] + c] = (float)acc;
                    }
                }
            }
        }
    }
    return PDC_OK;
}
