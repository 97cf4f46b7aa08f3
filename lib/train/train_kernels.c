/*
 * train_kernels.c - sparse-times-dense kernels and Adam for the trainer (see train_kernels.h); dense products
 * go to the cpu target's GEMM (cpu_train_sgemm, backends/backend.h).
 *
 * Sparse: a weight matrix with pruned entries is kept as CSR index arrays (tr_csr, lib/train/train.h). spmm reads
 * the kept values packed in entry order (copied from the training weights once per forward pass) and walks Y in
 * column chunks that stay in L1 while every row's kept entries are accumulated in registers; spmm_dw takes one dot
 * product per kept weight (four of a row at a time), nothing for pruned ones, into the dense gradient array.
 *
 * The x86 kernels are compiled for their instruction set with target pragmas and chosen at run time
 * (__builtin_cpu_supports checks the CPU and that the OS saves the vector registers).
 */
#include "lib/train/train_kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TK_X86 1
#endif

/* A weight-gradient result into dw: added, or written over what is there (0 + t: the bits of an add to a zeroed
 * array, which the caller no longer has to clear). */
#define DW_OUT(d, t) ((d) = (accumulate ? (d) : 0.0f) + (t))

/* Below this many multiply-adds a kernel runs on the calling thread: a parallel region costs more. */
#define TK_PARALLEL_MIN_WORK ((size_t)1 << 19)

/* ================================================================== portable C */

static void spmm_generic(size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w,
                         const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p0, size_t p1,
                         int accumulate)
{
    enum { CW = 32 };
    float acc[CW];
    for (size_t p = p0; p < p1; p += CW) {
        size_t nc = p1 - p < CW ? p1 - p : CW;
        for (size_t r = 0; r < rows; r++) {
            float *yr = y + r * ldy + p;
            for (size_t j = 0; j < nc; j++) acc[j] = accumulate ? yr[j] : 0.0f;
            if (bias)
                for (size_t j = 0; j < nc; j++) acc[j] += bias[r];
            for (int32_t e = ptr[r]; e < ptr[r + 1]; e++) {
                const float wv = w[e], *xr = x + (size_t)xrow[e] * ldx + p;
                for (size_t j = 0; j < nc; j++) acc[j] += wv * xr[j];
            }
            memcpy(yr, acc, nc * sizeof *acc);
        }
    }
}

static void spmm_dw_generic(size_t r0, size_t r1, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                            const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate)
{
    for (size_t r = r0; r < r1; r++) {
        const float *dr = dy + r * ldy;
        for (int32_t e = ptr[r]; e < ptr[r + 1]; e++) {
            const float *xr = x + (size_t)xrow[e] * ldx;
            float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            size_t j = 0;
            for (; j + 8 <= p; j += 8)
                for (int q = 0; q < 8; q++) s[q] += dr[j + q] * xr[j + q];
            float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            for (; j < p; j++) t += dr[j] * xr[j];
            DW_OUT(dw[vidx[e]], t);
        }
    }
}

static void adam_generic(size_t n, float *w, const float *g, float *m, float *v, float b1, float b2, float step,
                         float bc2s, float eps)
{
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;
    for (size_t k = 0; k < n; k++) {
        m[k] = b1 * m[k] + c1 * g[k];
        v[k] = b2 * v[k] + c2 * g[k] * g[k];
        w[k] -= step * (m[k] / (sqrtf(v[k]) / bc2s + eps));
    }
}

static void axpy_generic(size_t n, float a, const float *x, float *y)
{
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

static const tk_isa isa_generic = {"generic", spmm_generic, spmm_dw_generic, axpy_generic, adam_generic};

#ifdef TK_X86
/* ================================================================== AVX2 + FMA */
#ifdef __clang__ /* clang ignores "#pragma GCC target" */
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

static void spmm_avx2(size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w,
                      const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p0, size_t p1,
                      int accumulate)
{
    size_t p = p0;
    for (; p + 32 <= p1; p += 32) {
        for (size_t r = 0; r < rows; r++) {
            float *yr = y + r * ldy + p;
            __m256 s0, s1, s2, s3;
            if (accumulate) {
                s0 = _mm256_loadu_ps(yr), s1 = _mm256_loadu_ps(yr + 8), s2 = _mm256_loadu_ps(yr + 16),
                s3 = _mm256_loadu_ps(yr + 24);
            } else {
                s0 = s1 = s2 = s3 = _mm256_setzero_ps();
            }
            if (bias) {
                const __m256 bv = _mm256_set1_ps(bias[r]);
                s0 = _mm256_add_ps(s0, bv), s1 = _mm256_add_ps(s1, bv), s2 = _mm256_add_ps(s2, bv),
                s3 = _mm256_add_ps(s3, bv);
            }
            for (int32_t e = ptr[r]; e < ptr[r + 1]; e++) {
                const __m256 wv = _mm256_set1_ps(w[e]);
                const float *xr = x + (size_t)xrow[e] * ldx + p;
                s0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr), s0);
                s1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr + 8), s1);
                s2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr + 16), s2);
                s3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xr + 24), s3);
            }
            _mm256_storeu_ps(yr, s0), _mm256_storeu_ps(yr + 8, s1), _mm256_storeu_ps(yr + 16, s2),
                _mm256_storeu_ps(yr + 24, s3);
        }
    }
    if (p < p1) spmm_generic(rows, ptr, xrow, w, bias, x, ldx, y, ldy, p, p1, accumulate);
}

static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static void spmm_dw_avx2(size_t r0, size_t r1, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                         const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate)
{
    for (size_t r = r0; r < r1; r++) {
        const float *dr = dy + r * ldy;
        for (int32_t e = ptr[r]; e < ptr[r + 1]; e++) {
            const float *xr = x + (size_t)xrow[e] * ldx;
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            size_t j = 0;
            for (; j + 32 <= p; j += 32) {
                s0 = _mm256_fmadd_ps(_mm256_loadu_ps(dr + j), _mm256_loadu_ps(xr + j), s0);
                s1 = _mm256_fmadd_ps(_mm256_loadu_ps(dr + j + 8), _mm256_loadu_ps(xr + j + 8), s1);
                s2 = _mm256_fmadd_ps(_mm256_loadu_ps(dr + j + 16), _mm256_loadu_ps(xr + j + 16), s2);
                s3 = _mm256_fmadd_ps(_mm256_loadu_ps(dr + j + 24), _mm256_loadu_ps(xr + j + 24), s3);
            }
            for (; j + 8 <= p; j += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(dr + j), _mm256_loadu_ps(xr + j), s0);
            float t = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
            for (; j < p; j++) t += dr[j] * xr[j];
            DW_OUT(dw[vidx[e]], t);
        }
    }
}

static void adam_avx2(size_t n, float *w, const float *g, float *m, float *v, float b1, float b2, float step,
                      float bc2s, float eps)
{
    const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2), c1 = _mm256_set1_ps(1.0f - b1);
    const __m256 c2 = _mm256_set1_ps(1.0f - b2), vs = _mm256_set1_ps(step), vbc = _mm256_set1_ps(bc2s);
    const __m256 ve = _mm256_set1_ps(eps);
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m256 gk = _mm256_loadu_ps(g + k);
        /* separate multiplies and adds (no FMA): the same roundings as the portable loop */
        const __m256 mk = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + k)), _mm256_mul_ps(c1, gk));
        const __m256 vk = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + k)), _mm256_mul_ps(_mm256_mul_ps(c2, gk), gk));
        const __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vk), vbc), ve);
        _mm256_storeu_ps(m + k, mk);
        _mm256_storeu_ps(v + k, vk);
        _mm256_storeu_ps(w + k, _mm256_sub_ps(_mm256_loadu_ps(w + k), _mm256_mul_ps(vs, _mm256_div_ps(mk, den))));
    }
    adam_generic(n - k, w + k, g + k, m + k, v + k, b1, b2, step, bc2s, eps);
}

static void axpy_avx2(size_t n, float a, const float *x, float *y)
{
    const __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

static const tk_isa isa_avx2 = {"avx2", spmm_avx2, spmm_dw_avx2, axpy_avx2, adam_avx2};

/* ================================================================== AVX-512 */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

/* spmm_avx512's blocking: a 64-column tile of X read SPMM_KB rows at a time (32 KB: stays in L1 while every row of Y
 * takes its entries from those X rows), rows of Y in groups of SPMM_RB (their cursors on the stack). A 64-column tile
 * of all of X (K rows x 256 bytes: 147 KB at K = 576) does not fit L1, and streaming it from L2 for every row of Y
 * was the kernel's limit. Each output still sums its entries in CSR order (partial sums stored and reloaded as
 * floats, exactly), so the results are those of the unblocked loop. Needs each row's xrow ascending (tr_csr is). */
#define SPMM_KB 128
#define SPMM_RB 256

static void spmm_avx512(size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w,
                        const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p0, size_t p1,
                        int accumulate)
{
    size_t p = p0;
    for (; p + 64 <= p1; p += 64) {
        for (size_t r0 = 0; r0 < rows; r0 += SPMM_RB) {
            const size_t r1 = rows - r0 < SPMM_RB ? rows : r0 + SPMM_RB;
            int32_t cur[SPMM_RB], xmax = 0;
            for (size_t r = r0; r < r1; r++) {
                cur[r - r0] = ptr[r];
                if (ptr[r + 1] > ptr[r] && xrow[ptr[r + 1] - 1] > xmax) xmax = xrow[ptr[r + 1] - 1];
            }
            for (int32_t kb = 0; kb <= xmax; kb += SPMM_KB) {
                const int32_t kend = kb + SPMM_KB;
                for (size_t r = r0; r < r1; r++) {
                    int32_t e = cur[r - r0];
                    const int32_t end = ptr[r + 1];
                    if (kb && (e == end || xrow[e] >= kend)) continue; /* nothing of this row in the block */
                    float *yr = y + r * ldy + p;
                    __m512 s0, s1, s2, s3;
                    if (kb || accumulate) {
                        s0 = _mm512_loadu_ps(yr), s1 = _mm512_loadu_ps(yr + 16), s2 = _mm512_loadu_ps(yr + 32),
                        s3 = _mm512_loadu_ps(yr + 48);
                    } else {
                        s0 = s1 = s2 = s3 = _mm512_setzero_ps();
                    }
                    if (bias && !kb) {
                        const __m512 bv = _mm512_set1_ps(bias[r]);
                        s0 = _mm512_add_ps(s0, bv), s1 = _mm512_add_ps(s1, bv), s2 = _mm512_add_ps(s2, bv),
                        s3 = _mm512_add_ps(s3, bv);
                    }
                    for (; e < end && xrow[e] < kend; e++) {
                        const __m512 wv = _mm512_set1_ps(w[e]);
                        const float *xr = x + (size_t)xrow[e] * ldx + p;
                        s0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr), s0);
                        s1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 16), s1);
                        s2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 32), s2);
                        s3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xr + 48), s3);
                    }
                    cur[r - r0] = e;
                    _mm512_storeu_ps(yr, s0), _mm512_storeu_ps(yr + 16, s1), _mm512_storeu_ps(yr + 32, s2),
                        _mm512_storeu_ps(yr + 48, s3);
                }
            }
        }
    }
    /* the last < 64 columns, 32 at a time (two vectors, masked where partial); entries alternate between two sets of
     * accumulators added at the end: four dependency chains, where one chain of FMAs per 16 columns left a batch of
     * 1x1 planes (P = 32: ResNet-18's layer4 at batch 32) latency-bound */
    while (p < p1) {
        const size_t nc = p1 - p < 32 ? p1 - p : 32;
        const __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
        const __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffffu : nc > 16 ? (1u << (nc - 16)) - 1u : 0u);
        for (size_t r = 0; r < rows; r++) {
            float *yr = y + r * ldy + p;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
            if (accumulate) a0 = _mm512_maskz_loadu_ps(m0, yr), a1 = _mm512_maskz_loadu_ps(m1, yr + 16);
            if (bias) {
                const __m512 bv = _mm512_set1_ps(bias[r]);
                a0 = _mm512_add_ps(a0, bv), a1 = _mm512_add_ps(a1, bv);
            }
            int32_t e = ptr[r];
            const int32_t end = ptr[r + 1];
            for (; e + 1 < end; e += 2) {
                const __m512 w0 = _mm512_set1_ps(w[e]), w1 = _mm512_set1_ps(w[e + 1]);
                const float *x0 = x + (size_t)xrow[e] * ldx + p, *x1 = x + (size_t)xrow[e + 1] * ldx + p;
                a0 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, x0), a0);
                a1 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m1, x0 + 16), a1);
                b0 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m0, x1), b0);
                b1 = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m1, x1 + 16), b1);
            }
            if (e < end) {
                const __m512 w0 = _mm512_set1_ps(w[e]);
                const float *x0 = x + (size_t)xrow[e] * ldx + p;
                a0 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m0, x0), a0);
                a1 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m1, x0 + 16), a1);
            }
            _mm512_mask_storeu_ps(yr, m0, _mm512_add_ps(a0, b0));
            if (m1) _mm512_mask_storeu_ps(yr + 16, m1, _mm512_add_ps(a1, b1));
        }
        p += nc;
    }
}

/* One kept weight's gradient, a dot product of P floats: four chains of 16 lanes over 64 columns, the last < 64
 * columns 16 at a time into the first chain, then the chains added pairwise and reduced. spmm_dw_avx512 sums every
 * weight in exactly this order, alone or four at a time. */
static float dw_dot_avx512(const float *dr, const float *xr, size_t p)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t j = 0;
    for (; j + 64 <= p; j += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(dr + j), _mm512_loadu_ps(xr + j), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(dr + j + 16), _mm512_loadu_ps(xr + j + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(dr + j + 32), _mm512_loadu_ps(xr + j + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(dr + j + 48), _mm512_loadu_ps(xr + j + 48), s3);
    }
    for (; j < p; j += 16) {
        const size_t nc = p - j < 16 ? p - j : 16;
        const __mmask16 mk = (__mmask16)((1u << nc) - 1u);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, dr + j), _mm512_maskz_loadu_ps(mk, xr + j), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

/* Four kept weights of one row at a time: each dY vector loaded once feeds four dot products (5 loads per 4 FMAs
 * where one weight alone takes 8: the single dot product was load-bound); 16 independent chains. Each weight's sum
 * is dw_dot_avx512's, bit for bit. */
static void spmm_dw_avx512(size_t r0, size_t r1, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                           const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate)
{
    for (size_t r = r0; r < r1; r++) {
        const float *dr = dy + r * ldy;
        int32_t e = ptr[r];
        const int32_t end = ptr[r + 1];
        for (; e + 4 <= end; e += 4) {
            const float *x0 = x + (size_t)xrow[e] * ldx, *x1 = x + (size_t)xrow[e + 1] * ldx;
            const float *x2 = x + (size_t)xrow[e + 2] * ldx, *x3 = x + (size_t)xrow[e + 3] * ldx;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0, d0 = a0, d1 = a0, d2 = a0, d3 = a0;
            size_t j = 0;
            for (; j + 64 <= p; j += 64) {
                const __m512 y0 = _mm512_loadu_ps(dr + j), y1 = _mm512_loadu_ps(dr + j + 16);
                const __m512 y2 = _mm512_loadu_ps(dr + j + 32), y3 = _mm512_loadu_ps(dr + j + 48);
#define DW4(s0, s1, s2, s3, xr)                                                                                     \
    s0 = _mm512_fmadd_ps(y0, _mm512_loadu_ps(xr + j), s0), s1 = _mm512_fmadd_ps(y1, _mm512_loadu_ps(xr + j + 16), s1), \
    s2 = _mm512_fmadd_ps(y2, _mm512_loadu_ps(xr + j + 32), s2), s3 = _mm512_fmadd_ps(y3, _mm512_loadu_ps(xr + j + 48), s3)
                DW4(a0, a1, a2, a3, x0);
                DW4(b0, b1, b2, b3, x1);
                DW4(c0, c1, c2, c3, x2);
                DW4(d0, d1, d2, d3, x3);
#undef DW4
            }
            for (; j < p; j += 16) {
                const size_t nc = p - j < 16 ? p - j : 16;
                const __mmask16 mk = (__mmask16)((1u << nc) - 1u);
                const __m512 yv = _mm512_maskz_loadu_ps(mk, dr + j);
                a0 = _mm512_fmadd_ps(yv, _mm512_maskz_loadu_ps(mk, x0 + j), a0);
                b0 = _mm512_fmadd_ps(yv, _mm512_maskz_loadu_ps(mk, x1 + j), b0);
                c0 = _mm512_fmadd_ps(yv, _mm512_maskz_loadu_ps(mk, x2 + j), c0);
                d0 = _mm512_fmadd_ps(yv, _mm512_maskz_loadu_ps(mk, x3 + j), d0);
            }
            DW_OUT(dw[vidx[e]], _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))));
            DW_OUT(dw[vidx[e + 1]], _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3))));
            DW_OUT(dw[vidx[e + 2]], _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3))));
            DW_OUT(dw[vidx[e + 3]], _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(d0, d1), _mm512_add_ps(d2, d3))));
        }
        for (; e < end; e++) DW_OUT(dw[vidx[e]], dw_dot_avx512(dr, x + (size_t)xrow[e] * ldx, p));
    }
}

static void adam_avx512(size_t n, float *w, const float *g, float *m, float *v, float b1, float b2, float step,
                        float bc2s, float eps)
{
    const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2), c1 = _mm512_set1_ps(1.0f - b1);
    const __m512 c2 = _mm512_set1_ps(1.0f - b2), vs = _mm512_set1_ps(step), vbc = _mm512_set1_ps(bc2s);
    const __m512 ve = _mm512_set1_ps(eps);
    size_t k = 0;
    for (; k + 16 <= n; k += 16) {
        const __m512 gk = _mm512_loadu_ps(g + k);
        const __m512 mk = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + k)), _mm512_mul_ps(c1, gk));
        const __m512 vk = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + k)), _mm512_mul_ps(_mm512_mul_ps(c2, gk), gk));
        const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vk), vbc), ve);
        _mm512_storeu_ps(m + k, mk);
        _mm512_storeu_ps(v + k, vk);
        _mm512_storeu_ps(w + k, _mm512_sub_ps(_mm512_loadu_ps(w + k), _mm512_mul_ps(vs, _mm512_div_ps(mk, den))));
    }
    adam_generic(n - k, w + k, g + k, m + k, v + k, b1, b2, step, bc2s, eps);
}

static void axpy_avx512(size_t n, float a, const float *x, float *y)
{
    const __m512 va = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        const __mmask16 mk = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, mk, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(mk, x + i), _mm512_maskz_loadu_ps(mk, y + i)));
    }
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

static const tk_isa isa_avx512 = {"avx512", spmm_avx512, spmm_dw_avx512, axpy_avx512, adam_avx512};
#endif /* TK_X86 */

/* ================================================================== dispatch */

const tk_isa *tk_isa_named(const char *name)
{
    if (!strcmp(name, "generic")) return &isa_generic;
#ifdef TK_X86
    __builtin_cpu_init();
    if (!strcmp(name, "avx2") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &isa_avx2;
    if (!strcmp(name, "avx512") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return &isa_avx512;
#endif
    return NULL;
}

const tk_isa *tk_isa_best(void)
{
    const tk_isa *isa = tk_isa_named("avx512");
    if (!isa) isa = tk_isa_named("avx2");
    return isa ? isa : &isa_generic;
}

/* ================================================================== drivers */

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

void tk_spmm(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const float *w,
             const float *bias, const float *x, size_t ldx, float *y, size_t ldy, size_t p,
             int accumulate, int threads)
{
    enum { CHUNK = 64 };
    const size_t chunks = ceil_div(p, CHUNK), nnz = rows ? (size_t)ptr[rows] : 0;
    int nt = threads < 1 ? 1 : threads;
    if ((nnz + rows) * p < TK_PARALLEL_MIN_WORK) nt = 1;
    if ((size_t)nt > chunks && rows >= 64 * (size_t)nt) {
        /* fewer column chunks than threads (a batch of small planes): rows split by kept weights instead; each
         * output still comes from one call over the same columns, so the results do not depend on nt */
#pragma omp parallel num_threads(nt)
        {
            const size_t tid = (size_t)omp_get_thread_num(), ntu = (size_t)omp_get_num_threads();
            const size_t e0 = nnz * tid / ntu, e1 = nnz * (tid + 1) / ntu;
            size_t r0 = 0, r1;
            while (r0 < rows && (size_t)ptr[r0] < e0) r0++;
            r1 = r0;
            while (r1 < rows && (size_t)ptr[r1] < e1) r1++;
            if (tid + 1 == ntu) r1 = rows;
            if (r0 < r1)
                isa->spmm(r1 - r0, ptr + r0, xrow, w, bias ? bias + r0 : NULL, x, ldx, y + r0 * ldy, ldy, 0, p,
                          accumulate);
        }
        return;
    }
    if ((size_t)nt > chunks) nt = chunks ? (int)chunks : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const size_t tid = (size_t)omp_get_thread_num(), ntu = (size_t)omp_get_num_threads();
        size_t c0 = chunks * tid / ntu * CHUNK, c1 = chunks * (tid + 1) / ntu * CHUNK;
        if (c1 > p) c1 = p;
        if (c0 < c1) isa->spmm(rows, ptr, xrow, w, bias, x, ldx, y, ldy, c0, c1, accumulate);
    }
}

void tk_spmm_dw(const tk_isa *isa, size_t rows, const int32_t *ptr, const int32_t *xrow, const int32_t *vidx,
                const float *dy, size_t ldy, const float *x, size_t ldx, size_t p, float *dw, int accumulate, int threads)
{
    const size_t nnz = rows ? (size_t)ptr[rows] : 0;
    int nt = threads < 1 ? 1 : threads;
    if (nnz * p < TK_PARALLEL_MIN_WORK) nt = 1;
    if ((size_t)nt > rows) nt = rows ? (int)rows : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* rows split so that each thread gets about the same number of kept weights */
        const size_t tid = (size_t)omp_get_thread_num(), ntu = (size_t)omp_get_num_threads();
        const size_t e0 = nnz * tid / ntu, e1 = nnz * (tid + 1) / ntu;
        size_t r0 = 0, r1 = 0;
        while (r0 < rows && (size_t)ptr[r0] < e0) r0++;
        r1 = r0;
        while (r1 < rows && (size_t)ptr[r1] < e1) r1++;
        if (tid + 1 == ntu) r1 = rows;
        isa->spmm_dw(r0, r1, ptr, xrow, vidx, dy, ldy, x, ldx, p, dw, accumulate);
    }
}
