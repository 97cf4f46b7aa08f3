/*
 * softmax.c - reference softmax along one axis (ONNX opset 13): y = exp(x - max) / sum exp(x - max).
 */
#include <math.h>

#include "backends/ref/ref.h"

pdc_status ref_softmax(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const ir_tensor *t = &m->tensors[l->inputs[0]];
    int axis;
    pdc_status st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", -1), t->rank, &axis);
    if (st != PDC_OK) return st;
    int64_t outer = 1, inner = 1;
    const int64_t len = t->dims[axis];
    for (int i = 0; i < axis; i++) outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];

    const float *x = buf[l->inputs[0]];
    float *y = buf[l->outputs[0]];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            const float *xp = x + o * len * inner + in;
            float *yp = y + o * len * inner + in;
            float mx = xp[0];
            for (int64_t k = 1; k < len; k++)
                if (xp[k * inner] > mx) mx = xp[k * inner];
            double sum = 0.0;
            for (int64_t k = 0; k < len; k++) sum += exp((double)xp[k * inner] - (double)mx);
            for (int64_t k = 0; k < len; k++) yp[k * inner] = (float)(exp((double)xp[k * inner] - (double)mx) / sum);
        }
    }
    return PDC_OK;
}
