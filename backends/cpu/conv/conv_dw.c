/*
 * conv_dw.c - dense 3x3 depthwise convolution on AVX-512, reading the NCHW input where it lies.
 *
 * A depthwise conv does 9 multiply-adds an output, about 2 (stride 1) or half of one (stride 2) an
 * input float: the packed-input families (conv.c) first copied the whole input into padded phase
 * planes, and that copy took 70% of MobileNetV2's stride-2 depthwise layers (96 channels of 112x112:
 * 0.36 ms at 1 thread, ONNX Runtime 0.17 ms). Here each output vector of 16 pixels reads its three
 * input rows straight from the tensor with masked loads: lanes outside the row read nothing and count
 * as zeros, which is the padding. At stride 2 the even and odd columns come out of two loaded vectors
 * with one permute each. Per output vector, each input row's taps accumulate in their own register
 * (three short chains instead of one of nine), added in a fixed order: results do not depend on the
 * thread count. Bias, the residual add and the activation (none, relu, clip, leaky relu) are applied
 * before the one masked store. Hosts without AVX-512 and other activations keep the packed families.
 */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"
#include "backends/cpu/conv/conv_avx512.h"


typedef struct dw_state {
    int64_t n, c, h, w, oh, ow, s, pt, pl;
    float *wk;               /* [c][9] */
    float *bias;             /* [c] */
    conv_act act;
} dw_state;

static void dw_free(void *p)
{
    dw_state *s = p;
    if (!s) return;
    pdc_free(s->wk);
    pdc_free(s->bias);
    pdc_free(s);
}

#ifdef CONV_X86
/* row[base + i] for the lanes in m (the columns inside the row; zeros elsewhere): the address is formed
 * as an integer, since it may lie before the row, and masked-off lanes are not read. */
CONV_AVX512 static inline __m512 dw_load(const float *row, int64_t base, __mmask16 m)
{
    uintptr_t a = (uintptr_t)row + (uintptr_t)(base * (int64_t)sizeof(float));
    return _mm512_maskz_loadu_ps(m, (const void *)a);
}

/* acc + the three taps of one input row for one output vector: the columns base + kx (stride 1) or
 * base + 2j + kx (stride 2, lane j), each load masked to the row (m[i]: the mask of load i). */
CONV_AVX512 static inline __m512 dw_row(const float *row, int64_t base, int64_t st, const __mmask16 *m, __m512 k0,
                                      __m512 k1, __m512 k2, __m512 acc)
{
    __m512 t0, t1, t2;
    if (st == 1) {
        t0 = dw_load(row, base, m[0]);
        t1 = dw_load(row, base + 1, m[1]);
        t2 = dw_load(row, base + 2, m[2]);
    } else {
        const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        __m512 a = dw_load(row, base, m[0]), c = dw_load(row, base + 16, m[1]);
        __m512 a2 = dw_load(row, base + 2, m[2]), c2 = dw_load(row, base + 18, m[3]);
        t0 = _mm512_permutex2var_ps(a, evens, c);
        t1 = _mm512_permutex2var_ps(a, odds, c);
        t2 = _mm512_permutex2var_ps(a2, evens, c2);
    }
    acc = _mm512_fmadd_ps(k0, t0, acc);
    acc = _mm512_fmadd_ps(k1, t1, acc);
    return _mm512_fmadd_ps(k2, t2, acc);
}

/* One plane: x its input (h x w), y its output and r its residual (NULL: none), oh x ow. A column of
 * output vectors at a time, top to bottom: the load masks are the column's, and the rows it reads
 * come again from L1 for the next output row. */
CONV_AVX512 static void dw_plane(const dw_state *s, const float *x, float *y, const float *r, int64_t ch)
{
    const int64_t w = s->w, ow = s->ow, oh = s->oh, h = s->h, st = s->s, pt = s->pt;
    const float *wk = s->wk + ch * 9;
    const __m512 k0 = _mm512_set1_ps(wk[0]), k1 = _mm512_set1_ps(wk[1]), k2 = _mm512_set1_ps(wk[2]),
                 k3 = _mm512_set1_ps(wk[3]), k4 = _mm512_set1_ps(wk[4]), k5 = _mm512_set1_ps(wk[5]),
                 k6 = _mm512_set1_ps(wk[6]), k7 = _mm512_set1_ps(wk[7]), k8 = _mm512_set1_ps(wk[8]);
    const __m512 b = _mm512_set1_ps(s->bias[ch]);
    for (int64_t ox0 = 0; ox0 < ow; ox0 += 16) {
        const int64_t base = ox0 * st - s->pl; /* the input column of tap kx = 0, lane 0 */
        __mmask16 m[4];
        if (st == 1)
            for (int i = 0; i < 3; i++) m[i] = conv_lanes(-(base + i), w - (base + i));
        else
            for (int i = 0; i < 4; i++) {
                int64_t at = base + (i & 1) * 16 + (i >> 1) * 2;
                m[i] = conv_lanes(-at, w - at);
            }
        const __mmask16 out = conv_lanes(0, ow - ox0);
        for (int64_t oy = 0; oy < oh; oy++) {
            const int64_t iy = oy * st - pt; /* the input row of ky = 0; rows outside the input are zeros */
            __m512 a0 = b, a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
            if (iy >= 0 && iy < h) a0 = dw_row(x + iy * w, base, st, m, k0, k1, k2, a0);
            if (iy + 1 >= 0 && iy + 1 < h) a1 = dw_row(x + (iy + 1) * w, base, st, m, k3, k4, k5, a1);
            if (iy + 2 >= 0 && iy + 2 < h) a2 = dw_row(x + (iy + 2) * w, base, st, m, k6, k7, k8, a2);
            __m512 v = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
            if (r) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(out, r + oy * ow + ox0));
            _mm512_mask_storeu_ps(y + oy * ow + ox0, out, conv_act_avx512(&s->act, v));
        }
    }
}

static pdc_status dw_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf, const cpu_exec *x)
{
    (void)m;
    const dw_state *s = L->state;
    const float *in = buf[l->inputs[0]], *res = cpu_conv_residual(L, buf);
    float *out = cpu_layer_out(L, l, buf);
    const int64_t planes = s->n * s->c, isp = s->h * s->w, osp = s->oh * s->ow;
    const int nt = planes >= 2 ? x->threads : 1;
    /* contiguous shares of the planes: each output is computed by one call, whatever the threads */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t q = 0; q < planes; q++) {
        dw_plane(s, in + q * isp, out + q * osp, res ? res + q * osp : NULL, q % s->c);
    }
    return PDC_OK;
}
#endif

pdc_status cpu_plan_conv_depthwise(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                                   const ir_fused_params *fp, cpu_layer *L)
{
#ifdef CONV_X86
    if (g->group != g->c || g->o != g->c || g->kh != 3 || g->kw != 3 || g->dy != 1 || g->dx != 1 || g->sy != g->sx ||
        (g->sx != 1 && g->sx != 2) || g->pt > 2 || g->pl > 2)
        return PDC_ERR_UNSUPPORTED;
    if (!conv_c_avx512(cc->target)) return PDC_ERR_UNSUPPORTED;
    ir_fused_params post = *fp;
    cpu_plan_epilogue(cc, &post); /* a residual is read through cpu_conv_residual at run time */
    conv_act act = cpu_conv_inline_act(&post);
    if (!conv_c_act_supported(&act)) return PDC_ERR_UNSUPPORTED;
    pdc_context *ctx = cc->ctx;
    const float *w, *bias;
    cpu_conv_operands(cc, m, l, &w, &bias);
    dw_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    *s = (dw_state){.n = g->n, .c = g->c, .h = g->h, .w = g->w, .oh = g->oh, .ow = g->ow, .s = g->sx, .pt = g->pt,
                    .pl = g->pl, .act = act};
    s->wk = pdc_alloc(ctx, (size_t)(g->c * 9) * sizeof *s->wk);
    s->bias = pdc_alloc(ctx, (size_t)g->c * sizeof *s->bias);
    if (!s->wk || !s->bias) {
        dw_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    memcpy(s->wk, w, (size_t)(g->c * 9) * sizeof *s->wk);
    for (int64_t c = 0; c < g->c; c++) s->bias[c] = bias ? bias[c] : 0.0f; /* (out_perm needs group 1) */
    L->run = dw_run;
    L->state = s;
    L->free_state = dw_free;
    L->thread_floats = 0;
    cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info, "direct conv 3x3 depthwise, stride %" PRId64 ", input read in place with masked loads, %s",
             g->sx, pdc_isa_name(cc->target->isa));
    return PDC_OK;
#else
    (void)cc, (void)m, (void)l, (void)g, (void)fp, (void)L;
    return PDC_ERR_UNSUPPORTED;
#endif
}
