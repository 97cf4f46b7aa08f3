/*
 * layers.h - what the layer benchmarks share (bench_conv: cpu vs oneDNN/OpenBLAS; gpu_bench: gpu vs
 * cuDNN): the 3x3 layer list, the pattern pruning applied to them, a seeded random stream and timing
 * (bench_now, bench_median: bench_batch uses those too).
 */
#ifndef PDC_TEST_BENCH_LAYERS_H
#define PDC_TEST_BENCH_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "pdc.h"

/* A 3x3 conv, pads 1: c -> o channels over an h x w input, stride s. */
typedef struct layer_case {
    const char *name;
    int c, o, h, w, s;
} layer_case;

/* VGG-16 conv1_2 ... conv5_2 (3_3, 4_3, 5_2 repeat 3_2, 4_2, 5_1's shapes), ResNet-50's 3x3 layers
 * (ResNet-18 shares their shapes) and ResNet-18's stride-2 3x3 layers (the first of stages 2-4). */
extern const layer_case bench_layers[];
extern const size_t bench_n_layers;
/* Output rows and columns of a case. */
int bench_out_h(const layer_case *L);
int bench_out_w(const layer_case *L);

/* The 8 four-entry patterns over the 3x3 window, each with the centre (bit = row*3 + col). */
extern const uint64_t bench_patterns[8];

/* Uniform in [0, 1) from one fixed-seed xorshift stream per process (runs are repeatable). */
double bench_urand(void);
/* The stream's state, to replay it (the same kernels pruned at two rates). */
uint64_t bench_rng_save(void);
void bench_rng_restore(uint64_t state);
/* v[0..n) = a permutation of 0..n-1 from its own xorshift stream *state (the layers' data stream
 * stays as it was, and runs repeat): the benchmarks run their methods in a fresh order each
 * repetition, so that none always follows the same other one. */
void bench_shuffle(int *v, int n, uint64_t *state);
/* n floats uniform in [-scale, scale) from bench_urand (malloc'd; exits when out of memory). */
float *bench_random_floats(size_t n, float scale);
/* Median ms of running p on x into y (one input, one output): 3 untimed runs, then at least 11 timed
 * ones and at least min_time seconds of them (at most 4000). Exits with a message if a run fails. */
double bench_time_program(const pdc_program *p, pdc_tensor *x, pdc_tensor *y, double min_time);
/* Monotonic seconds. */
double bench_now(void);
/* Sorts v; the median of n >= 1 values (NAN for n < 1). */
double bench_median(double *v, int n);

/* He-uniform weights [o][c][3][3] projected onto the best pattern per kernel; the weakest `prune`
 * fraction of kernels (by kept energy) removed. Fills w (zeros where pruned) and kp (pattern index,
 * -1 where removed). Exits with a message when out of memory. */
void bench_pattern_weights(int o, int c, double prune, float *w, int32_t *kp);

#endif
