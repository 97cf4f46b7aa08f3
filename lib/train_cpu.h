/*
 * train_cpu.h - internal: the trainer's use of the "cpu" backend's kernels (option kernels=cpu),
 * implemented in backends/cpu/train_bridge.c, which alone sees the backend's LLVM-facing headers.
 *
 * Only kernels that do not capture trained values are used: the cpu backend's elementwise kernels
 * (activations, add/sub/mul/div) take every operand at run time and compute bit for bit what the
 * reference kernels compute. Its convolution kernels pack the weights when they are compiled, so
 * conv and fc keep the trainer's own kernels (a weight update every step would mean a new compile).
 */
#ifndef PDC_LIB_TRAIN_CPU_H
#define PDC_LIB_TRAIN_CPU_H

#include "lib/train.h"

/* Plans the cpu kernels for the exec model's current shapes (once per batch size). */
pdc_status tr_cpu_prepare(tr_net *net);
/* 1 if layer li has a cpu kernel. */
int tr_cpu_has(const tr_net *net, size_t li);
/* Runs layer li's cpu kernel on net->val. */
pdc_status tr_cpu_forward(tr_net *net, size_t li);
/* Frees the planned kernels (the JIT'd code stays in the context's cache). */
void tr_cpu_free(tr_net *net);

#endif
