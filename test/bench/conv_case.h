/*
 * conv_case.h - one benchmark layer as pdc runs it (bench_conv: pdc against oneDNN and OpenBLAS;
 * bench_scaling: pdc at 2 threads against itself at 1; gpu_bench: the gpu target against cuDNN):
 * the layer's input, bias and weights at the three rates, drawn the same way in every program so
 * they time the same layers, the layer as a pdc model, and compiled for "cpu".
 */
#ifndef PDC_TEST_BENCH_CONV_CASE_H
#define PDC_TEST_BENCH_CONV_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "layers.h"
#include "pdc.h"

/* A layer's data: input x, bias b; weights pattern-pruned with 50% of kernels removed (w45, pattern
 * per kernel kp45: 4.5x), 75% removed (w9, kp9: the same kernels, more of them removed) and dense
 * (wd: the unpruned projected weights). */
typedef struct conv_data {
    size_t nx, ny, nw;
    float *x, *b, *w45, *w9, *wd;
    int32_t *kp45, *kp9;
    double compr45, compr9; /* dense weights / kept ones */
} conv_data;

/* Draws L's data from the benchmarks' random stream (in the order bench_conv always has). Exits
 * with a message when out of memory. */
void conv_data_make(const layer_case *L, conv_data *d);
void conv_data_free(conv_data *d);

/* y = conv3x3(x, w, pads 1, L's stride) + b as a model in ctx; pattern-sparse per kp where kp is
 * not NULL. Exits with pdc's message on failure. */
pdc_model *bench_conv_model(pdc_context *ctx, const layer_case *L, const float *w, const int32_t *kp, const float *b);

/* The layer compiled for "cpu" at `threads`, with its input wrapped and its output allocated. */
typedef struct conv_prog {
    pdc_context *ctx;
    pdc_program *prog;
    pdc_tensor *x, *y;
    char kernel[200]; /* the kernel pdc chose (pdc_program_layer_kernel) */
} conv_prog;

/* Compiles L over input x with weights w (pattern-sparse per kp where kp is not NULL) and bias b.
 * Exits with pdc's message on failure. */
void conv_prog_make(conv_prog *p, const layer_case *L, int threads, const float *x, const float *w, const int32_t *kp,
                    const float *b);
void conv_prog_run(conv_prog *p);
void conv_prog_free(conv_prog *p);

/* Reads n floats with th threads, each its static share, as a network's layers would have left
 * them: an input just written, activation memory just used. */
void bench_warm(const float *p, size_t n, int th);

#endif
