/*
 * train_kernels.h - internal: the dense and sparse matrix kernels the trainer's conv and fc layers
 * are built on (lib/train/train_kernels.c), with one implementation per instruction set (AVX-512, AVX2+FMA,
 * portable C) chosen once at run time from the CPU's features.
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
    size_t mr, nr;       /* GEMM register tile: mr rows of A x nr columns of B */
    /* tile[mr][nr] = sum_k ap[k*mr + i] * bp[k*ldb + j] (ap: a packed A panel; bp: nr columns of B) */
    void (*micro)(size_t k, const float *ap, const float *bp, size_t ldb, float *tile);
    /* Sparse rows times dense matrix, columns [p0, p1) of Y:
     *   Y[r,p] = (accumulate ? Y[r,p] : 0) + (bias ? bias[r] : 0) + sum_{e=ptr[r]}^{ptr[r+1]-1} w[vidx[e]] * X[xrow[e],p] */
    void (*spmm)(size_t rows, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx, const float *w,
                 const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p0, size_t p1,
                 int accumulate);
    /* Gradient of the kept weights of rows [r0, r1): dw[vidx[e]] += sum_{p<P} dy[r,p] * X[xrow[e],p]. */
    void (*spmm_dw)(size_t r0, size_t r1, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                    const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw);
    /* tile[i][j] = sum_{q<k} a[i][q] * b[j][q] for a 4 x 4 tile, rows given by pointers (contiguous along q) */
    void (*micro_nt)(size_t k, const float *const *a, const float *const *b, float *tile);
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

/* Floats of work space tk_gemm needs. */
size_t tk_gemm_work(const tk_isa *isa, size_t m, size_t n, size_t k, int threads);
/*
 * C = (accumulate ? C : 0) + A B, where A is m x k with element (i,kk) at a[i*ars + kk*acs] (any strides, so
 * a transposed operand costs nothing), B is k x n row-major with row stride ldb, and C has element (i,j) at
 * c[i*crs + j*ccs]. work: tk_gemm_work floats. threads >= 1.
 */
void tk_gemm(const tk_isa *isa, size_t m, size_t n, size_t k, const float *a, ptrdiff_t ars, ptrdiff_t acs,
             const float *b, size_t ldb, float *c, ptrdiff_t crs, ptrdiff_t ccs, int accumulate, float *work,
             int threads);

/* Packed-A GEMM, for one A times many B (e.g. a conv weight times every image): tk_pack_a fills ap
 * (tk_pack_floats floats) from A as tk_gemm reads it; tk_gemm_packed then needs threads x
 * tk_gemm_thread_floats floats of work. */
size_t tk_pack_floats(const tk_isa *isa, size_t m, size_t k);
void tk_pack_a(const tk_isa *isa, size_t m, size_t k, const float *a, ptrdiff_t ars, ptrdiff_t acs, float *ap);
size_t tk_gemm_thread_floats(const tk_isa *isa, size_t k);
void tk_gemm_packed(const tk_isa *isa, size_t m, size_t n, size_t k, const float *ap, const float *b, size_t ldb,
                    float *c, ptrdiff_t crs, ptrdiff_t ccs, int accumulate, float *work, int threads);

/* C = (accumulate ? C : 0) + A B^T with A m x k (row stride lda) and B n x k (row stride ldb), both contiguous
 * along k (dot-product form: no packing; for long k, e.g. a weight gradient summed over every output pixel).
 * C element (i,j) at c[i*crs + j*ccs]. */
void tk_gemm_nt(const tk_isa *isa, size_t m, size_t n, size_t k, const float *a, size_t lda, const float *b,
                size_t ldb, float *c, ptrdiff_t crs, ptrdiff_t ccs, int accumulate, int threads);

/* Parallel spmm over column ranges (threads >= 1). */
void tk_spmm(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
             const float *w, const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p,
             int accumulate, int threads);
/* Parallel spmm_dw over rows. */
void tk_spmm_dw(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int threads);

#endif
