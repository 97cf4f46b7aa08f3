/*
 * epilogue.h - the layers after a conv, an fc or a matmul that a backend may compute in its
 * epilogue, while the result is still in registers or cache: after a conv a batchnorm (folded into
 * the weights), then a residual add, then an activation; after an fc or a matmul a bias add, then
 * an activation; each one optional.
 * One definition for the cpu target, which fuses them (backends/cpu/cpu_fuse.c), and the plan pass,
 * which keeps the memory they write away from the layer's input (passes/plan.c).
 */
#ifndef PDC_IR_EPILOGUE_H
#define PDC_IR_EPILOGUE_H

#include "ir/ops/params.h"

typedef struct ir_epilogue {
    int bn;               /* conv: the batchnorm layer right after it, folded into its weights, or -1 */
    int residual;         /* conv: the add's other operand (added before the activation), or -1: no add */
    int bias;             /* fc, matmul: the constant the add adds along the last axis, or -1: no add */
    int out;              /* the tensor the epilogue writes: the last taken layer's output */
    int n_layers;         /* layers taken right after the layer: 1 to 3 */
    ir_fused_params act;  /* the activation after the add (act IR_ACT_NONE: none); no out_perm */
} ir_epilogue;

/* 1 and *e if layer li is a conv, an fc or a matmul without an activation of its own whose output
 * only the next layer reads (not a graph output), and the layers after it are, in this order and
 * each reading only the one before (whose output nothing else reads and is not a graph output):
 *  - conv: maybe a batchnorm with constant statistics (ir_batchnorm_foldable), if the conv's
 *    weights and bias are constants;
 *  - conv: maybe an add of the value so far and another operand of the same shape made before the
 *    conv (a residual);
 *  - fc, matmul: maybe an add of the value so far and a constant [N] or [1, ..., 1, N] along its
 *    last axis (a bias);
 *  - maybe an activation: relu, clip, leaky_relu, sigmoid, tanh or hardswish (one input, one output);
 * at least one of them. Else 0. Graph structure only: whether the memory plan allows writing
 * e->out during the layer is the backend's to check. */
int ir_layer_epilogue(const ir_model *m, size_t li, ir_epilogue *e);

#endif
