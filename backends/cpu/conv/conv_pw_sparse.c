/*
 * conv_pw_sparse.c - pruned 1x1 convolutions without padding, on AVX-512: each filter's kept input
 * channels (a list of channels and weights) times the dense input.
 *
 * The pattern family (conv.c) runs a pruned 1x1 conv as a one-tap pattern: a packing pass copies the
 * input, and every FMA loads its own input vector from a tile too large for L1 (ResNet-50's 256->64
 * at 56x56 with 1x4 blocks at 25%: 0.70 ms at 1 thread, about 40 GFLOP/s of kept multiply-adds, a
 * quarter of it packing; strided ones, the downsampling shortcuts, several times slower still). Here
 * a thread copies a tile of 64 output pixels of every input channel into its own buffer, channel after
 * channel (one stream each, in order; a strided conv gathers the pixels its outputs read), then every
 * filter walks its kept channels, two filters at a time: per kept entry of each, one broadcast weight,
 * four input vectors and four FMAs into eight independent accumulators. Planes a 64-pixel tile fits
 * badly (14x14) take tiles of 32 pixels, four filters at a time. Filters run in order of decreasing
 * kept count, so the lists run side by side about as long (the rest of each runs alone). A plane's last
 * tile masks its loads and stores. Each output is summed by one call in the order of its filter's
 * list: results do not depend on the thread count; threads take contiguous shares of (tile, chunk of
 * 64 filters) pieces. Bias, the residual add and the activation (none, relu, clip, leaky relu) are
 * applied before the store.
 */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"
#include "backends/cpu/conv/conv_x86.h"

#define PWS_WIDE 4               /* vectors of pixels a wide tile (filters in pairs) */
#define PWS_NARROW 2             /* a narrow one (filters in fours): planes a wide tile fits badly */
#define PWS_MAX_DENSITY 0.5      /* denser layers are the dense family's */
#define PWS_CHUNK 64             /* filters a work item (an even number: pairs stay pairs) */

typedef struct pws_state {
    int64_t n, c, o, hw;         /* images, input channels, filters, output pixels a plane */
    int64_t ihw, iw, ow, sy, sx; /* input pixels a plane, input and output row widths, strides */
    int nv;                      /* vectors of pixels a tile: PWS_WIDE or PWS_NARROW */
    int64_t *start;              /* per executed filter f: its kept entries [start[f], start[f + 1]) */
    int32_t *chan;               /* per kept entry: the input channel */
    float *wv;                   /* per kept entry: the weight */
    float *bias;                 /* per executed filter */
    int64_t *ochan;              /* per executed filter: its output channel */
    conv_act act;
} pws_state;

static void pws_free(void *p)
{
    pws_state *s = p;
    if (!s) return;
    pdc_free(s->start);
    pdc_free(s->chan);
    pdc_free(s->wv);
    pdc_free(s->bias);
    pdc_free(s->ochan);
    pdc_free(s);
}

#ifdef CONV_X86
/* The tile's outputs of executed filter f from its accumulators a[0..nv) (bias was their start): the
 * residual (r, NULL: none) added, the activation applied, stored where the plane has pixels (m). */
CONV_AVX512 static inline void pws_store(const pws_state *s, const __m512 *a, float *y, const float *r, int64_t f,
                                         int64_t p0, const __mmask16 *m)
{
    const int64_t at = s->ochan[f] * s->hw + p0;
    for (int v = 0; v < s->nv; v++) {
        __m512 x = a[v];
        if (r) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m[v], r + at + 16 * v));
        _mm512_mask_storeu_ps(y + at + 16 * v, m[v], conv_act_avx512(&s->act, x));
    }
}

/* acc0.. += w * the input vectors of kept entry e (xt: the tile's copy, a channel every 16 * n floats),
 * for n = 4 and 2 vectors. Written out: as a loop over an array, GCC kept the accumulators in memory. */
#define PWS_ENTRY4(acc, e)                                                                                      \
    do {                                                                                                        \
        const float *x_ = xt + (int64_t)s->chan[e] * (16 * PWS_WIDE);                                           \
        const __m512 w_ = _mm512_set1_ps(s->wv[e]);                                                             \
        acc[0] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_), acc[0]);                                               \
        acc[1] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_ + 16), acc[1]);                                          \
        acc[2] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_ + 32), acc[2]);                                          \
        acc[3] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_ + 48), acc[3]);                                          \
    } while (0)
#define PWS_ENTRY2(acc, e)                                                                                      \
    do {                                                                                                        \
        const float *x_ = xt + (int64_t)s->chan[e] * (16 * PWS_NARROW);                                         \
        const __m512 w_ = _mm512_set1_ps(s->wv[e]);                                                             \
        acc[0] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_), acc[0]);                                               \
        acc[1] = _mm512_fmadd_ps(w_, _mm512_load_ps(x_ + 16), acc[1]);                                          \
    } while (0)
#define PWS_START(acc, n, f)                                                                                    \
    do {                                                                                                        \
        const __m512 b_ = _mm512_set1_ps(s->bias[f]);                                                           \
        for (int v_ = 0; v_ < (n); v_++) acc[v_] = b_;                                                          \
    } while (0)

/* Wide tiles: pixels [p0, p0 + 64) of executed filters [f0, f1), two filters at a time (eight
 * accumulators), from the tile's input copied into xt (zeros past the plane). */
CONV_AVX512 static void pws_tile_wide(const pws_state *s, const float *xt, float *y, const float *r, int64_t p0,
                                      int64_t f0, int64_t f1, const __mmask16 *m)
{
    int64_t f = f0;
    for (; f + 1 < f1; f += 2) {
        __m512 a[PWS_WIDE], b[PWS_WIDE];
        PWS_START(a, PWS_WIDE, f);
        PWS_START(b, PWS_WIDE, f + 1);
        int64_t ea = s->start[f], na = s->start[f + 1], eb = na, nb = s->start[f + 2];
        for (; ea < na && eb < nb; ea++, eb++) {
            PWS_ENTRY4(a, ea);
            PWS_ENTRY4(b, eb);
        }
        for (; ea < na; ea++) PWS_ENTRY4(a, ea);
        for (; eb < nb; eb++) PWS_ENTRY4(b, eb);
        pws_store(s, a, y, r, f, p0, m);
        pws_store(s, b, y, r, f + 1, p0, m);
    }
    if (f < f1) {
        __m512 a[PWS_WIDE];
        PWS_START(a, PWS_WIDE, f);
        for (int64_t e = s->start[f]; e < s->start[f + 1]; e++) PWS_ENTRY4(a, e);
        pws_store(s, a, y, r, f, p0, m);
    }
}

/* Narrow tiles: pixels [p0, p0 + 32), four filters at a time (eight accumulators again). */
CONV_AVX512 static void pws_tile_narrow(const pws_state *s, const float *xt, float *y, const float *r, int64_t p0,
                                        int64_t f0, int64_t f1, const __mmask16 *m)
{
    int64_t f = f0;
    for (; f + 3 < f1; f += 4) {
        __m512 a[PWS_NARROW], b[PWS_NARROW], c[PWS_NARROW], d[PWS_NARROW];
        PWS_START(a, PWS_NARROW, f);
        PWS_START(b, PWS_NARROW, f + 1);
        PWS_START(c, PWS_NARROW, f + 2);
        PWS_START(d, PWS_NARROW, f + 3);
        int64_t ea = s->start[f], na = s->start[f + 1], eb = na, nb = s->start[f + 2], ec = nb, nc = s->start[f + 3],
                ed = nc, nd = s->start[f + 4];
        for (; ea < na && eb < nb && ec < nc && ed < nd; ea++, eb++, ec++, ed++) {
            PWS_ENTRY2(a, ea);
            PWS_ENTRY2(b, eb);
            PWS_ENTRY2(c, ec);
            PWS_ENTRY2(d, ed);
        }
        for (; ea < na; ea++) PWS_ENTRY2(a, ea);
        for (; eb < nb; eb++) PWS_ENTRY2(b, eb);
        for (; ec < nc; ec++) PWS_ENTRY2(c, ec);
        for (; ed < nd; ed++) PWS_ENTRY2(d, ed);
        pws_store(s, a, y, r, f, p0, m);
        pws_store(s, b, y, r, f + 1, p0, m);
        pws_store(s, c, y, r, f + 2, p0, m);
        pws_store(s, d, y, r, f + 3, p0, m);
    }
    for (; f < f1; f++) {
        __m512 a[PWS_NARROW];
        PWS_START(a, PWS_NARROW, f);
        for (int64_t e = s->start[f]; e < s->start[f + 1]; e++) PWS_ENTRY2(a, e);
        pws_store(s, a, y, r, f, p0, m);
    }
}

/* The tile's input, channel after channel, into xt (16 * nv floats a channel, zeros past the plane, m):
 * read in order, one stream per channel, where the filters' lists visit channels in any order. A strided
 * conv gathers the pixels its outputs read (int32 offsets within a plane: the planner checks they fit). */
CONV_AVX512 static void pws_copy(const pws_state *s, const float *x, float *xt, int64_t p0, const __mmask16 *m)
{
    const int64_t tile = 16 * s->nv;
    if (s->sy == 1 && s->sx == 1 && s->ow == s->iw) {
        for (int64_t c = 0; c < s->c; c++)
            for (int v = 0; v < s->nv; v++)
                _mm512_store_ps(xt + c * tile + 16 * v, _mm512_maskz_loadu_ps(m[v], x + c * s->ihw + p0 + 16 * v));
        return;
    }
    __m512i idx[PWS_WIDE];
    for (int v = 0; v < s->nv; v++) {
        int32_t at[16];
        for (int l = 0; l < 16; l++) {
            const int64_t p = p0 + 16 * v + l, oy = p / s->ow, ox = p % s->ow;
            at[l] = p < s->hw ? (int32_t)(oy * s->sy * s->iw + ox * s->sx) : 0;
        }
        idx[v] = _mm512_loadu_si512(at);
    }
    for (int64_t c = 0; c < s->c; c++)
        for (int v = 0; v < s->nv; v++)
            _mm512_store_ps(xt + c * tile + 16 * v,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m[v], idx[v], x + c * s->ihw, 4));
}

/* One piece: the tile at p0 of filters [f0, f1), its input copied first unless xt holds it already. */
CONV_AVX512 static void pws_piece(const pws_state *s, const float *x, float *xt, int copy, float *y, const float *r,
                                  int64_t p0, int64_t f0, int64_t f1)
{
    __mmask16 m[PWS_WIDE];
    for (int v = 0; v < s->nv; v++) m[v] = conv_lanes(0, s->hw - p0 - 16 * v);
    if (copy) pws_copy(s, x, xt, p0, m);
    if (s->nv == PWS_WIDE) pws_tile_wide(s, xt, y, r, p0, f0, f1, m);
    else pws_tile_narrow(s, xt, y, r, p0, f0, f1, m);
}

static pdc_status pws_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf, const cpu_exec *x)
{
    (void)m;
    const pws_state *s = L->state;
    const float *in = buf[l->inputs[0]], *res = cpu_conv_residual(L, buf);
    float *out = cpu_layer_out(L, l, buf);
    /* (tile, filter chunk) pieces, a tile's chunks in a row: small planes have few tiles to share */
    const int64_t tile = 16 * s->nv, ntile = (s->hw + tile - 1) / tile, nchunk = (s->o + PWS_CHUNK - 1) / PWS_CHUNK;
    const int64_t items = s->n * ntile * nchunk;
    const int nt = items >= 2 ? x->threads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *xt = x->own[omp_get_thread_num()];
        int64_t copied = -1; /* the (image, tile) whose input xt holds */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            const int64_t t = it / nchunk, n = t / ntile, p0 = t % ntile * tile, f0 = it % nchunk * PWS_CHUNK;
            pws_piece(s, in + n * s->c * s->ihw, xt, t != copied, out + n * s->o * s->hw,
                      res ? res + n * s->o * s->hw : NULL, p0, f0, f0 + PWS_CHUNK < s->o ? f0 + PWS_CHUNK : s->o);
            copied = t;
        }
    }
    return PDC_OK;
}

typedef struct pws_rank {
    int64_t count, o;
} pws_rank;

static int pws_by_count(const void *a, const void *b)
{
    const pws_rank *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return (x->o > y->o) - (x->o < y->o);
}
#endif

pdc_status cpu_plan_conv_pw_sparse(const cpu_compile *cc, const cpu_conv_plan *P, cpu_layer *L)
{
#ifdef CONV_X86
    const conv_geom *g = &P->g;
    /* (a 1x1 window's strides are the packing's: py, px) */
    if (g->kh != 1 || g->kw != 1 || g->pt != 0 || g->pl != 0 || (g->oh - 1) * g->py >= g->h ||
        (g->ow - 1) * g->px >= g->w || g->group != 1 || P->all_dense || g->h * g->w > INT32_MAX ||
        !conv_c_avx512(cc->target))
        return PDC_ERR_UNSUPPORTED;
    const int64_t o = g->o, c = g->c, nk = o * c;
    int64_t kept = 0;
    for (int64_t i = 0; i < nk; i++) kept += P->kmask[i] != 0;
    if ((double)kept > PWS_MAX_DENSITY * (double)nk || c > INT32_MAX) return PDC_ERR_UNSUPPORTED;
    ir_fused_params post = P->fp;
    cpu_plan_epilogue(cc, &post); /* a residual is read through cpu_conv_residual at run time */
    const conv_act act = cpu_conv_inline_act(&post);
    if (!conv_c_act_supported(&act)) return PDC_ERR_UNSUPPORTED;

    pdc_context *ctx = cc->ctx;
    pws_state *s = pdc_calloc(ctx, 1, sizeof *s);
    pws_rank *order = pdc_alloc(ctx, (size_t)o * sizeof *order);
    if (!s || !order) {
        pdc_free(order);
        pdc_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    /* narrow tiles where wide ones waste clearly more of the plane's last tile (14x14: 196 pixels in 4 wide
     * tiles of 64 are 60 lanes idle, in 7 narrow ones 28) */
    const int64_t hw = g->oh * g->ow, waste_wide = (hw + 63) / 64 * 64 - hw, waste_narrow = (hw + 31) / 32 * 32 - hw;
    *s = (pws_state){.n = g->n, .c = c, .o = o, .hw = hw, .ihw = g->h * g->w, .iw = g->w, .ow = g->ow, .sy = g->py,
                     .sx = g->px, .act = act,
                     .nv = waste_wide - waste_narrow >= (hw + 7) / 8 ? PWS_NARROW : PWS_WIDE};
    s->start = pdc_alloc(ctx, (size_t)(o + 1) * sizeof *s->start);
    s->chan = pdc_alloc(ctx, (size_t)(kept ? kept : 1) * sizeof *s->chan);
    s->wv = pdc_alloc(ctx, (size_t)(kept ? kept : 1) * sizeof *s->wv);
    s->bias = pdc_alloc(ctx, (size_t)o * sizeof *s->bias);
    s->ochan = pdc_alloc(ctx, (size_t)o * sizeof *s->ochan);
    if (!s->start || !s->chan || !s->wv || !s->bias || !s->ochan) {
        pdc_free(order);
        pws_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t f = 0; f < o; f++) {
        order[f].o = f;
        order[f].count = 0;
        for (int64_t ch = 0; ch < c; ch++) order[f].count += P->kmask[f * c + ch] != 0;
    }
    qsort(order, (size_t)o, sizeof *order, pws_by_count);
    int64_t e = 0;
    for (int64_t f = 0; f < o; f++) {
        const int64_t of = order[f].o;
        s->start[f] = e;
        s->bias[f] = P->b ? P->b[of] : 0.0f;
        s->ochan[f] = P->fp.out_perm ? P->fp.out_perm[of] : of;
        for (int64_t ch = 0; ch < c; ch++)
            if (P->kmask[of * c + ch]) {
                s->chan[e] = (int32_t)ch;
                s->wv[e++] = P->w[of * c + ch];
            }
    }
    s->start[o] = e;
    pdc_free(order);
    L->run = pws_run;
    L->state = s;
    L->free_state = pws_free;
    L->thread_floats = (size_t)(c * 16 * s->nv); /* the tile's input */
    cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info,
             "sparse conv 1x1, %.0f%% kernels kept (%.2fx fewer FLOPs), tiles of %d pixels, filters in %s, %s",
             100.0 * (double)kept / (double)nk, kept ? (double)nk / (double)kept : 0.0, 16 * s->nv,
             s->nv == PWS_WIDE ? "pairs" : "fours", pdc_isa_name(cc->target->isa));
    return PDC_OK;
#else
    (void)cc, (void)P, (void)L;
    return PDC_ERR_UNSUPPORTED;
#endif
}
