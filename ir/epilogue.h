/*
 * epilogue.h - the layers after a conv that a backend may compute in the conv's epilogue, while the
 * result is still in registers: a batchnorm (folded into the weights), then a residual add, then an
 * activation; each one optional.
 * One definition for the cpu target, which fuses them (backends/cpu/cpu_fuse.c), and the plan pass,
 * which keeps the memory they write away from the conv's input (passes/plan.c).
 */
#ifndef PDC_IR_EPILOGUE_H
#define PDC_IR_EPILOGUE_H

#include "ir/params.h"

typedef struct ir_epilogue {
    int bn;               /* the batchnorm layer right after the conv, folded into its weights, or -1 */
    int residual;         /* the add's other operand (added before the activation), or -1: no add */
    int out;              /* the tensor the epilogue writes: the last taken layer's output */
    int n_layers;         /* layers taken right after the conv: 1 to 3 */
    ir_fused_params act;  /* the activation after the add (act IR_ACT_NONE: none); no out_perm */
} ir_epilogue;

/* 1 and *e if layer li is a conv without an activation of its own whose output only the next
 * layer reads (not a graph output), and the layers after it are, in this order and each reading
 * only the one before (whose output nothing else reads and is not a graph output):
 *  - maybe a batchnorm with constant statistics (ir_batchnorm_foldable), if the conv's weights and
 *    bias are constants;
 *  - maybe an add of the value so far and another operand of the same shape made before the conv
 *    (a residual);
 *  - maybe an activation: relu, clip, leaky_relu, sigmoid, tanh or hardswish (one input, one output);
 * at least one of them. Else 0. Graph structure only: whether the memory plan allows writing
 * e->out during the conv is the backend's to check. */
int ir_conv_epilogue(const ir_model *m, size_t li, ir_epilogue *e);

#endif
