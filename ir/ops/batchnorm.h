/*
 * batchnorm.h - a batchnorm with constant statistics as what it is at inference: a per-channel
 * multiply-add y = x * g[c] + shift[c], g = scale / sqrt(var + eps), shift = bias - mean * g.
 * One formula for the pass that folds it into a conv (passes/canonicalize.c), the batchnorm kernels
 * of the cpu, AArch64 and gpu targets and the cpu target's conv epilogue (backends/cpu/cpu_fuse.c).
 */
#ifndef PDC_IR_BATCHNORM_H
#define PDC_IR_BATCHNORM_H

#include "ir/ir.h"

/* 1 if l is a batchnorm whose four statistics are constants of one value per channel of its input
 * (dims[1]) and every channel's g and shift are finite as floats; else 0 (a folded form would not
 * compute what the layer does). */
int ir_batchnorm_foldable(const ir_model *m, const ir_layer *l);

/* Channel c of a foldable batchnorm l, in double. */
void ir_batchnorm_channel(const ir_model *m, const ir_layer *l, int64_t c, double *g, double *shift);

#endif
