/*
 * conv_avx512.h - what the C-written AVX-512 conv kernels share (conv_dw.c, conv_wino.c): lane masks, the
 * inline activations with the reference's NaN rules (ir_act_apply), and whether a layer can take them.
 * Every function carries the AVX-512 target, so it inlines into a kernel compiled for it too (compiled
 * for baseline x86-64 before inlining, GCC lowered such helpers lane by lane).
 */
#ifndef PDC_BACKENDS_CPU_CONV_AVX512_H
#define PDC_BACKENDS_CPU_CONV_AVX512_H

#include "backends/cpu/conv/conv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CONV_X86 1
#define CONV_AVX512 __attribute__((target("avx512f")))

/* Lanes [lo, hi) of a 16-lane mask (empty where hi <= lo). */
CONV_AVX512 static inline __mmask16 conv_lanes(int64_t lo, int64_t hi)
{
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    if (hi <= lo) return 0;
    return (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
}

/* The activations the kernel applies inline (conv_c_act_supported); v unchanged for IR_ACT_NONE. */
CONV_AVX512 static inline __m512 conv_act_avx512(const conv_act *a, __m512 v)
{
    const __m512 zero = _mm512_setzero_ps();
    switch (a->act) {
    case IR_ACT_RELU: return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LE_OQ), zero); /* NaN stays */
    case IR_ACT_CLIP:
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_set1_ps(a->act_min), _CMP_LT_OQ), _mm512_set1_ps(a->act_min));
        return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_set1_ps(a->act_max), _CMP_GT_OQ), _mm512_set1_ps(a->act_max));
    case IR_ACT_LEAKY_RELU:
        return _mm512_mask_mov_ps(_mm512_mul_ps(v, _mm512_set1_ps(a->act_alpha)), _mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ), v);
    default: return v;
    }
}

/* Whether conv_act_avx512 applies activation a, and whether this host and target run AVX-512. */
static inline int conv_c_act_supported(const conv_act *a)
{
    return a->act == IR_ACT_NONE || a->act == IR_ACT_RELU || a->act == IR_ACT_CLIP || a->act == IR_ACT_LEAKY_RELU;
}
static inline int conv_c_avx512(const pdc_llvm_target *t) { return t->vec == 16 && __builtin_cpu_supports("avx512f"); }
#endif

#endif
