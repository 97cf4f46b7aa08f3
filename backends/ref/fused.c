/*
 * fused.c - reference post-op for layers that canonicalize fused with their activation
 * (attribute activation on conv, fc and gemm): the activation is applied to the op's output in
 * place, exactly as a separate activation layer would compute it.
 */
#include "backends/ref/ref.h"

pdc_status ref_fused_activation(const ir_model *m, const ir_layer *l, float *const *buf)
{
    ir_fused_params p;
    pdc_status st = ir_fused_params_get(m, l, &p);
    if (st != PDC_OK || p.act == IR_ACT_NONE) return st;
    float *y = buf[l->outputs[0]];
    const size_t n = ir_tensor_numel(&m->tensors[l->outputs[0]]);
    for (size_t i = 0; i < n; i++) y[i] = ir_act_apply(&p, y[i]);
    return PDC_OK;
}
