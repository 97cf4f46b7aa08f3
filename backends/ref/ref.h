/*
 * ref.h - the reference interpreter: plain C, one obviously-correct loop nest per op, the oracle
 * every other backend is tested against. Sparsity is not exploited for speed, but pruned weights are
 * structural zeros: conv, fc, gemm and matmul skip the products of pruned positions (they are exactly
 * zero, so finite inputs give the same sums; a NaN or Inf input at a pruned position does not
 * propagate, as on the cpu, gpu and arm targets, whose sparse kernels never compute them - see
 * docs/reliability.md, "Non-finite values").
 */
#ifndef PDC_BACKENDS_REF_H
#define PDC_BACKENDS_REF_H

#include "backends/backend.h"
#include "ir/ops/params.h"

/* Sets an error naming the layer and its op, "layer 'conv1' (conv): message" (as ir/ops/params.c
 * words them); the expression gives status. */
#define REF_LAYER_ERR(m, l, status, ...)                                                                \
    (pdc_error((m)->ctx, (status), __VA_ARGS__),                                                        \
     pdc_error_prefix((m)->ctx, "layer '%s' (%s)", (l)->name, ir_op_get_info((l)->op)->name), (status))

/* One op kernel: reads its inputs from buf[tensor index] and writes its outputs there.
 * buf[-1] is never read: absent optional inputs have index -1 and kernels check for it. */
typedef pdc_status (*ref_kernel)(const ir_model *m, const ir_layer *l, float *const *buf);

pdc_status ref_conv(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_pool(const ir_model *m, const ir_layer *l, float *const *buf);          /* maxpool, avgpool */
pdc_status ref_global_avgpool(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_gemm(const ir_model *m, const ir_layer *l, float *const *buf);          /* fc, gemm */
pdc_status ref_matmul(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_batchnorm(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_unary(const ir_model *m, const ir_layer *l, float *const *buf);         /* activations */
pdc_status ref_binary(const ir_model *m, const ir_layer *l, float *const *buf);        /* add, mul */
pdc_status ref_concat(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_copy(const ir_model *m, const ir_layer *l, float *const *buf);          /* flatten, reshape */
pdc_status ref_transpose(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_softmax(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_lstm(const ir_model *m, const ir_layer *l, float *const *buf);
pdc_status ref_gru(const ir_model *m, const ir_layer *l, float *const *buf);

/* Tensor ti if it is a constant with sparsity (its pruned positions are skipped), else NULL. */
static inline const ir_tensor *ref_pruned(const ir_model *m, int ti)
{
    if (ti < 0) return NULL;
    const ir_tensor *t = &m->tensors[ti];
    return t->kind == IR_TENSOR_CONST && t->sparsity.kind != IR_SPARSITY_NONE ? t : NULL;
}

/* Applies a layer's fused activation (attribute activation, ir/ops/fused.c) to its output 0 in place;
 * no-op without one. */
pdc_status ref_fused_activation(const ir_model *m, const ir_layer *l, float *const *buf);
/* Runs one layer: its op kernel, then its fused activation. Used by the interpreter and by passes
 * that evaluate layers at compile time (constant folding). PDC_ERR_UNSUPPORTED if the op has no kernel. */
pdc_status ref_run_layer(const ir_model *m, const ir_layer *l, float *const *buf);

#endif
