/*
 * conv_pack.c - the packed input both conv generators read (layout in conv.h), written on every run.
 *
 * Each channel's phase plane is `lead` zeros, then packed rows - a row inside the input holds
 * dst[j] = x[s*j + off] for the columns j in [j0, j1) and zeros around them, a row above or below
 * the input is zeros - then zeros to the plane's end (a flat plane's last rows, zeros, may run into
 * the next plane's lead: conv.h). With AVX-512 a plane is written in one pass of
 * 16-lane masked loads and stores, each row's zero padding included: rows are short (a 7x7 flat
 * plane's are 8 floats, a 14x14 plane's 16), and as per-row copy loops and memsets the packing took
 * 27 us of ResNet-50's 512@7 layer (0.17 ms at 9x; 7 us now), a cost every thread pays in full.
 */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PACK_X86 1
#endif

#define PACK_MAX_CHUNKS 32 /* 16-lane pieces of a row the AVX-512 packer takes (rows up to 512 floats) */
#define PACK_MAX_PHASES 16 /* phase planes prepared at a time */
#define PACK_PREFETCH_BYTES 4096 /* input prefetched ahead of the packing */

/* One phase plane, the same for every channel. */
typedef struct pack_plane {
    int64_t lead, rows, wq; /* lead zeros, then rows of wq floats */
    int64_t end;            /* the zeros after the rows end here: pstride, less what a shorter band does not read */
    int64_t ra, rb;         /* rows [ra, rb) come from the input, the others are zeros */
    int64_t src, sstride;   /* the channel's input row of packed row ra is at float src; the next sstride apart */
    int64_t s, off, j0, j1; /* dst[j] = row[s*j + off] for j in [j0, j1) */
    /* AVX-512 (avx512 set): per 16-lane piece of a row, the lanes inside the row (st) and the
     * source lanes loaded (stride 1: lo holds the lanes j in [j0, j1); stride 2: the even lanes of
     * two vectors, lo and hi) */
    int avx512;
    int64_t nck;
    uint16_t st[PACK_MAX_CHUNKS], lo[PACK_MAX_CHUNKS], hi[PACK_MAX_CHUNKS];
} pack_plane;

/* `rows` packed rows: dst[j] = src[s*j + off] for j in [j0, j1) (the columns inside the input row),
 * zero for the rest of [0, n); rows dstride and sstride floats apart. The stride-2 copy (every
 * stride-2 layer's column phases) is its own loop, so it vectorises: as a per-element bounds test
 * it took a quarter of ResNet-18's 64->128/2 layer, and a call per row another 5%. */
PDC_ISA_CLONES __attribute__((optimize("O3")))
static void pack_rows(float *restrict dst, int64_t dstride, const float *restrict src, int64_t sstride, int64_t rows,
                      int64_t n, int64_t s, int64_t off, int64_t j0, int64_t j1)
{
    for (int64_t r = 0; r < rows; r++) {
        float *d = dst + r * dstride;
        const float *x = src + r * sstride;
        for (int64_t j = 0; j < j0; j++) d[j] = 0.0f;
        if (s == 1)
            for (int64_t j = j0; j < j1; j++) d[j] = x[j + off];
        else if (s == 2)
            for (int64_t j = j0; j < j1; j++) d[j] = x[2 * j + off];
        else
            for (int64_t j = j0; j < j1; j++) d[j] = x[s * j + off];
        for (int64_t j = j1; j < n; j++) d[j] = 0.0f;
    }
}

static void pack_plane_generic(float *pp, const pack_plane *q, const float *xc)
{
    float *rows = pp + q->lead;
    int64_t end = q->lead + q->rows * q->wq;
    memset(pp, 0, (size_t)q->lead * sizeof *pp);
    memset(rows, 0, (size_t)(q->ra * q->wq) * sizeof *pp); /* rows above the input */
    if (q->rb > q->ra)
        pack_rows(rows + q->ra * q->wq, q->wq, xc + q->src, q->sstride, q->rb - q->ra, q->wq, q->s, q->off, q->j0, q->j1);
    /* rows below the input, and past the plane's rows: zeros (read for lanes that are discarded) */
    memset(rows + q->rb * q->wq, 0, (size_t)((q->rows - q->rb) * q->wq) * sizeof *pp);
    if (q->end > end) memset(pp + end, 0, (size_t)(q->end - end) * sizeof *pp);
}

/* Bits 0..7 of m moved to the even bits 0..14: the source lanes of a stride-2 gather. */
static uint16_t even_lanes(unsigned m)
{
    unsigned r = 0;
    for (int i = 0; i < 8; i++) r |= ((m >> i) & 1u) << (2 * i);
    return (uint16_t)r;
}

/* The AVX-512 packer's masks for q; leaves q->avx512 0 where it does not take the plane (a column
 * stride over 2, rows over PACK_MAX_CHUNKS pieces). */
static void plane_masks(pack_plane *q)
{
    q->nck = (q->wq + 15) / 16;
    if (q->s > 2 || q->nck > PACK_MAX_CHUNKS) return;
    for (int64_t k = 0; k < q->nck; k++) {
        int64_t jc = 16 * k;
        unsigned valid = 0;
        for (int64_t j = 0; j < 16; j++) valid |= (unsigned)(jc + j >= q->j0 && jc + j < q->j1) << j; /* j1 <= wq */
        q->st[k] = (uint16_t)(q->wq - jc >= 16 ? 0xffffu : (1u << (q->wq - jc)) - 1);
        q->lo[k] = q->s == 1 ? (uint16_t)valid : even_lanes(valid & 0xffu);
        q->hi[k] = q->s == 1 ? 0 : even_lanes(valid >> 8);
    }
    q->avx512 = 1;
}

#ifdef PACK_X86
#ifdef __clang__ /* clang ignores "#pragma GCC target" */
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif

/* (no-tree-loop-distribute-patterns: GCC would turn the loop into a memset call, most of the cost
 * of a plane's few-line lead and tail) */
#define PACK_NO_MEMSET __attribute__((optimize("no-tree-loop-distribute-patterns")))

PACK_NO_MEMSET static void zero_avx512(float *p, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(p + i, _mm512_setzero_ps());
    if (i < n) _mm512_mask_storeu_ps(p + i, (__mmask16)((1u << (n - i)) - 1), _mm512_setzero_ps());
}

/* Rows of zeros: n rows of nck masked pieces, wq floats apart. */
static void zero_rows_avx512(float *d, int64_t n, int64_t wq, int64_t nck, const uint16_t *st)
{
    for (int64_t i = 0; i < n; i++, d += wq)
        for (int64_t k = 0; k < nck; k++) _mm512_mask_storeu_ps(d + 16 * k, st[k], _mm512_setzero_ps());
}

/* The plane of channel xc with masked loads and stores: masked-off lanes neither fault nor write.
 * The fields are read into locals first: the stores, through void pointers, may alias *q. */
PACK_NO_MEMSET static void pack_plane_avx512(float *pp, const pack_plane *q, const float *xc)
{
    const int64_t wq = q->wq, nck = q->nck, ra = q->ra, rb = q->rb, sstride = q->sstride;
    const uint16_t *st = q->st, *lo = q->lo, *hi = q->hi;
    float *d = pp + q->lead;
    zero_avx512(pp, q->lead);
    zero_rows_avx512(d, ra, wq, nck, st);
    d += ra * wq;
    /* lane j of piece k reads row[s*(16k + j) + off]; the address of lane 0 may lie before the row
     * (off < 0), and with no row inside the input (rb <= ra) src may lie outside it, so the address
     * is formed as an integer: only unmasked lanes are read */
    uintptr_t x = (uintptr_t)xc + (uintptr_t)((q->src + q->off) * (int64_t)sizeof(float));
    const uintptr_t xstep = (uintptr_t)(sstride * (int64_t)sizeof(float));
    if (q->s == 1) {
        for (int64_t i = ra; i < rb; i++, d += wq, x += xstep)
            for (int64_t k = 0; k < nck; k++)
                _mm512_mask_storeu_ps(d + 16 * k, st[k], _mm512_maskz_loadu_ps(lo[k], (const void *)(x + (uintptr_t)(64 * k))));
    } else {
        const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        for (int64_t i = ra; i < rb; i++, d += wq, x += xstep)
            for (int64_t k = 0; k < nck; k++) {
                __m512 a = _mm512_maskz_loadu_ps(lo[k], (const void *)(x + (uintptr_t)(128 * k)));
                __m512 b = _mm512_maskz_loadu_ps(hi[k], (const void *)(x + (uintptr_t)(128 * k + 64)));
                _mm512_mask_storeu_ps(d + 16 * k, st[k], _mm512_permutex2var_ps(a, evens, b));
            }
    }
    zero_rows_avx512(d, q->rows - rb, wq, nck, st);
    int64_t end = q->lead + q->rows * wq;
    zero_avx512(pp + end, q->end - end);
}

#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

static int have_avx512(void)
{
    static _Atomic int known = -1; /* -1: not asked yet (asking twice is harmless) */
    int v = known;
    if (v < 0) {
        __builtin_cpu_init();
        known = v = __builtin_cpu_supports("avx512f") != 0;
    }
    return v;
}
#else
static int have_avx512(void)
{
    return 0; /* no plane is then set up for the AVX-512 packer */
}
#endif

/* Phase ph's plane for packed rows [r0, r1) (the buffer's rows 0..). */
static void plane_setup(const conv_geom *g, int64_t ph, int64_t r0, int64_t r1, int host_avx512, pack_plane *q)
{
    /* column j of phase ph reads input column s*j + off, inside the row for j in [j0, j1) */
    const int64_t cph = ph % g->sx, s = g->sx * g->px, off = cph * g->px - g->pl;
    int64_t j0 = off >= 0 ? 0 : (-off + s - 1) / s, j1 = g->w - off > 0 ? (g->w - off + s - 1) / s : 0;
    j0 = j0 < g->wq ? j0 : g->wq;
    j1 = j1 < g->wq ? (j1 > j0 ? j1 : j0) : g->wq;
    /* packed row r reads input row r*step + iy0 (flat layouts split rows into sy phases as well:
     * plane ph = row phase * sx + column phase); rows [ra, rb) are inside the input */
    const int64_t step = (g->flat ? g->sy : 1) * g->py, iy0 = (g->flat ? ph / g->sx : 0) * g->py - g->pt;
    int64_t ra = r0, rb;
    while (ra < r1 && ra * step + iy0 < 0) ra++;
    for (rb = ra; rb < r1 && rb * step + iy0 < g->h; rb++) {}
    *q = (pack_plane){.lead = g->lead, .rows = r1 - r0, .wq = g->wq, .ra = ra - r0, .rb = rb - r0,
                      .src = (ra * step + iy0) * g->w, .sstride = step * g->w, .s = s, .off = off, .j0 = j0, .j1 = j1};
    /* past the rows: zeros too (read for lanes that are discarded), as far as rows r1 - r0 read: a
     * band of fewer rows than the buffer holds (the last band, a row tile a thread took from
     * another's share) reads that many rows' floats less (pstride is linear in the rows) */
    int64_t fewer = g->band_rows > r1 - r0 ? g->band_rows - (r1 - r0) : 0;
    q->end = g->pstride - fewer * g->wq;
    if (host_avx512) plane_masks(q);
}

/* Inline by force: as a call, gcc 12 at -O2 deems a function of prefetches alone free of effects
 * and drops the calls (the packer ran with no input prefetch at all for a while, unnoticed). */
static inline __attribute__((always_inline)) void prefetch_floats(const float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
    if (n > 0) __builtin_prefetch(p + n - 1); /* the last line, where p is not line-aligned */
}

/* Channel c's input floats [lo, hi) and its packed planes from phase ph0 on (`planes` floats). */
static inline __attribute__((always_inline)) void prefetch_channel(const conv_geom *g, const float *x, float *xp,
                                                                   int64_t c, int64_t lo, int64_t hi, int64_t ph0,
                                                                   int64_t planes)
{
    prefetch_floats(x + c * g->h * g->w + lo, hi - lo);
    prefetch_floats(xp + c * g->ps + ph0 * g->pstride, planes);
}

static void pack_channels(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1, int64_t r0, int64_t r1,
                          int host_avx512)
{
    pack_plane q[PACK_MAX_PHASES];
    for (int64_t ph0 = 0; ph0 < g->nph; ph0 += PACK_MAX_PHASES) {
        int64_t nph = g->nph - ph0 < PACK_MAX_PHASES ? g->nph - ph0 : PACK_MAX_PHASES;
        /* the floats [lo, hi) of a channel hold every input row these planes read */
        int64_t lo = INT64_MAX, hi = 0;
        for (int64_t i = 0; i < nph; i++) {
            plane_setup(g, ph0 + i, r0, r1, host_avx512, &q[i]);
            if (q[i].rb <= q[i].ra) continue;
            int64_t a = q[i].src, b = q[i].src + (q[i].rb - q[i].ra - 1) * q[i].sstride + g->w;
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
        /* the input is read once, a channel's rows at a time (a few KiB: too short for the hardware
         * prefetcher to ramp up), and may come from memory: prefetched whole channels about
         * PACK_PREFETCH_BYTES ahead (of the larger of the two spans). So are the packed planes:
         * the packing overwrites their lines whole, but each store still waits for its line, from
         * memory after another engine's run (a read prefetch is enough: the buffer is this thread's
         * own, so the line arrives exclusive). ResNet-50 512@7 after oneDNN: packing 19 -> 8 us */
        const int64_t planes = nph * g->pstride, span = hi - lo > planes ? hi - lo : planes;
        int64_t ahead = hi > lo ? (PACK_PREFETCH_BYTES / 4 + span - 1) / span : 0;
        for (int64_t c = c0; c < c1 && c < c0 + ahead; c++) prefetch_channel(g, x, xp, c, lo, hi, ph0, planes);
        /* channel by channel, its phases together: the phases of a strided layer read the same
         * input rows, so the second finds them in L1 */
        for (int64_t c = c0; c < c1; c++) {
            const float *xc = x + c * g->h * g->w;
            if (ahead && c + ahead < c1) prefetch_channel(g, x, xp, c + ahead, lo, hi, ph0, planes);
            for (int64_t i = 0; i < nph; i++) {
                float *pp = xp + c * g->ps + (ph0 + i) * g->pstride;
#ifdef PACK_X86
                if (q[i].avx512) {
                    pack_plane_avx512(pp, &q[i], xc);
                    continue;
                }
#endif
                pack_plane_generic(pp, &q[i], xc);
            }
        }
    }
    int64_t used = g->nph * g->pstride;
    if (g->ps > used)
        for (int64_t c = c0; c < c1; c++) memset(xp + c * g->ps + used, 0, (size_t)(g->ps - used) * sizeof *xp);
    if (c1 == g->c && g->tail > 0) memset(xp + g->c * g->ps, 0, (size_t)g->tail * sizeof *xp);
}

int64_t cpu_conv_plane_zero_tail(const conv_geom *g)
{
    int64_t zeros = INT64_MAX;
    for (int64_t ph = 0; ph < g->nph; ph++) {
        pack_plane q;
        plane_setup(g, ph, 0, g->hq, 0, &q);
        /* after the last row inside the input, its columns past j1 and the rows below; a plane
         * outside the input is all zeros */
        int64_t z = q.rb > q.ra && q.j1 > q.j0 ? (q.rows - q.rb) * q.wq + q.wq - q.j1 : q.lead + q.rows * q.wq;
        zeros = z < zeros ? z : zeros;
    }
    return zeros;
}

void cpu_conv_pack(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1, int64_t r0, int64_t r1)
{
    pack_channels(g, x, xp, c0, c1, r0, r1, have_avx512());
}

void cpu_conv_pack_portable(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1, int64_t r0,
                            int64_t r1)
{
    pack_channels(g, x, xp, c0, c1, r0, r1, 0);
}
