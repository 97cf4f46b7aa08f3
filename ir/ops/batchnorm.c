/*
 * batchnorm.c - a batchnorm with constant statistics as a per-channel multiply-add (batchnorm.h).
 */
#include <float.h>
#include <math.h>

#include "ir/ops/batchnorm.h"

void ir_batchnorm_channel(const ir_model *m, const ir_layer *l, int64_t c, double *g, double *shift)
{
    const double eps = (double)ir_attr_float(&l->attrs, "epsilon", 1e-5f);
    const float *scale = m->tensors[l->inputs[1]].data, *bias = m->tensors[l->inputs[2]].data;
    const float *mean = m->tensors[l->inputs[3]].data, *var = m->tensors[l->inputs[4]].data;
    *g = (double)scale[c] / sqrt((double)var[c] + eps);
    *shift = (double)bias[c] - (double)mean[c] * *g;
}

int ir_batchnorm_foldable(const ir_model *m, const ir_layer *l)
{
    if (l->op != IR_OP_BATCHNORM || l->n_inputs != 5 || l->inputs[0] < 0) return 0;
    for (size_t i = 1; i < 5; i++)
        if (l->inputs[i] < 0 || m->tensors[l->inputs[i]].kind != IR_TENSOR_CONST) return 0;
    const ir_tensor *x = &m->tensors[l->inputs[0]];
    if (x->rank < 2) return 0;
    for (size_t i = 1; i < 5; i++)
        if (ir_tensor_numel(&m->tensors[l->inputs[i]]) != (size_t)x->dims[1]) return 0;
    for (int64_t c = 0; c < x->dims[1]; c++) {
        double g, shift;
        ir_batchnorm_channel(m, l, c, &g, &shift);
        if (!(fabs(g) <= FLT_MAX) || !(fabs(shift) <= FLT_MAX)) return 0; /* finite as floats too */
    }
    return 1;
}
