/*
 * train_kernels.h - internal: the sparse matrix kernels the trainer's conv and fc layers use for pruned
 * weights, and Adam (lib/train/train_kernels.c), with one implementation per instruction set (AVX-512,
 * AVX2+FMA, portable C) chosen once at run time from the CPU's features. Dense products are the cpu
 * target's GEMM (cpu_train_sgemm in backends/backend.h).
 *
 * Determinism: every output element is computed by exactly one thread, always summing in the same
 * order, so results do not depend on the number of threads (they may differ between instruction
 * sets: the vector width changes the summation order).
 */
#ifndef PDC_LIB_TRAIN_KERNELS_H
#define PDC_LIB_TRAIN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The kernels of one instruction set. */
typedef struct tk_isa {
    const char *name;    /* "avx512", "avx2", "generic" */
    /* Sparse rows times dense matrix, columns [p0, p1) of Y, the kept values w in entry order (packed: read as one
     * stream, not gathered from the dense weights):
     *   Y[r,p] = (accumulate ? Y[r,p] : 0) + (bias ? bias[r] : 0) + sum_{e=ptr[r]}^{ptr[r+1]-1} w[e] * X[xrow[e],p] */
    void (*spmm)(size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w, const float *bias,
                 const float *x, size_t ldx, float *y, size_t ldy, size_t p0, size_t p1, int accumulate);
    /* Gradient of the kept weights of rows [r0, r1):
     *   dw[vidx[e]] = (accumulate ? dw[vidx[e]] : 0) + sum_{p<P} dy[r,p] * X[xrow[e],p]
     * (other elements of dw untouched: a pruned weight's gradient stays what it was). */
    void (*spmm_dw)(size_t r0, size_t r1, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                    const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate);
    /* y[i] += a * x[i] for i < n */
    void (*axpy)(size_t n, float a, const float *x, float *y);
    /* Adam's moment and weight update over n elements (PyTorch's formula and order of operations; sqrt and
     * division are correctly rounded in every implementation, so all give the same bits):
     *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  w -= step (m / (sqrt(v) / bc2s + eps)) */
    void (*adam)(size_t n, float *w, const float *g, float *m, float *v, float b1, float b2, float step, float bc2s,
                 float eps);
} tk_isa;

/* The best kernels this CPU runs. */
const tk_isa *tk_isa_best(void);
/* The kernels called name ("avx512", "avx2", "generic") if this CPU runs them, else NULL. */
const tk_isa *tk_isa_named(const char *name);

/* Parallel spmm over column ranges, or over rows when there are fewer 64-column chunks than threads (threads >= 1;
 * each output element from one call over the same columns either way). */
void tk_spmm(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w,
             const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p,
             int accumulate, int threads);
/* Parallel spmm_dw over rows. */
void tk_spmm_dw(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate, int threads);

#endif
