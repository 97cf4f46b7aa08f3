/*
 * conv3d_taps.h - the depth taps the cpu target's 3-D conv (conv3d.c) runs for each output depth
 * plane, for the latency model (lib/cost) to count the work as the kernels do it. Plain C: no LLVM.
 */
#ifndef PDC_BACKENDS_CPU_CONV3D_TAPS_H
#define PDC_BACKENDS_CPU_CONV3D_TAPS_H

#include <stdint.h>

#include "ir/ops/params.h"

/* 1 if the planes of 3-D window p are split by their depth taps inside the input (a 2-D kernel per
 * range): where the edge planes would waste at least 1/16 of the layer's taps over zero planes
 * (conv3d.c's C3_SLICE_WASTE). */
int cpu_conv3d_split(const ir_window_params *p);
/* The depth taps [k0, k1) output depth plane od runs: those inside the input when split (and some
 * are), else the whole window [0, KD). */
void cpu_conv3d_plane_taps(const ir_window_params *p, int split, int64_t od, int64_t *k0, int64_t *k1);

#endif
