/*
 * epilogue.h - the layers after a conv that a backend may compute in the conv's epilogue, while the
 * result is still in registers: a residual add, then an activation; or the activation alone.
 * One definition for the cpu target, which fuses them (backends/cpu/cpu_fuse.c), and the plan pass,
 * which keeps the memory they write away from the conv's input (passes/plan.c).
 */
#ifndef PDC_IR_EPILOGUE_H
#define PDC_IR_EPILOGUE_H

#include "ir/params.h"

typedef struct ir_epilogue {
    int residual;         /* the add's other operand (added before the activation), or -1: no add */
    int out;              /* the tensor the epilogue writes: the last taken layer's output */
    int n_layers;         /* layers taken right after the conv: 1 or 2 */
    ir_fused_params act;  /* the activation after the add (act IR_ACT_NONE: none); no out_perm */
} ir_epilogue;

/* 1 and *e if layer li is a conv without an activation of its own whose output only the next
 * layer reads (not a graph output), and that layer is
 *  - an add of it and another operand of the same shape made before the conv (a residual), maybe
 *    followed by an activation that alone reads the add's result (not a graph output), or
 *  - an activation of it.
 * Activations: relu, clip and leaky_relu (one input, one output). Else 0. Graph structure only:
 * whether the memory plan allows writing e->out during the conv is the backend's to check. */
int ir_conv_epilogue(const ir_model *m, size_t li, ir_epilogue *e);

#endif
