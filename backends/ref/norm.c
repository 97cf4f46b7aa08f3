/*
 * norm.c - reference batch normalisation, inference form (ONNX BatchNormalization, opset 13):
 *   y = scale[c] * (x - mean[c]) / sqrt(var[c] + epsilon) + bias[c]     over x[N,C,...]
 */
#include <math.h>

#include "backends/ref/ref.h"

pdc_status ref_batchnorm(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->n_inputs < 5 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "needs 5 inputs");
    for (size_t i = 0; i < 5; i++)
        if (l->inputs[i] < 0)
            return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "input %zu is absent", i);
    const ir_tensor *t = &m->tensors[l->inputs[0]];
    if (t->rank < 2)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input rank %d < 2", t->rank);
    const int64_t N = t->dims[0], C = t->dims[1];
    int64_t sp = 1;
    for (int i = 2; i < t->rank; i++) sp *= t->dims[i];
    const double eps = (double)ir_attr_float(&l->attrs, "epsilon", 1e-5f);

    const float *x = buf[l->inputs[0]];
    const float *scale = buf[l->inputs[1]], *bias = buf[l->inputs[2]];
    const float *mean = buf[l->inputs[3]], *var = buf[l->inputs[4]];
    float *y = buf[l->outputs[0]];
    for (int64_t c = 0; c < C; c++) {
        const double g = (double)scale[c] / sqrt((double)var[c] + eps);
        const double mu = (double)mean[c], be = (double)bias[c];
        for (int64_t n = 0; n < N; n++) {
            const float *xp = x + (n * C + c) * sp;
            float *yp = y + (n * C + c) * sp;
            for (int64_t i = 0; i < sp; i++) yp[i] = (float)(g * ((double)xp[i] - mu) + be);
        }
    }
    return PDC_OK;
}
