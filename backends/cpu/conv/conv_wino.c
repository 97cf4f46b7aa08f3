/*
 * conv_wino.c - dense 3x3 stride-1 convolution by Winograd F(4x4, 3x3) on AVX-512.
 *
 * The direct dense kernels (conv_ocvec.c, conv_dense.c) run ResNet-18's and VGG-16's 3x3 layers at
 * 90-95% of the FMA peak, so only fewer multiplies make them faster: Winograd's F(4x4, 3x3) computes
 * a 4x4 output tile from a 6x6 input tile with 36 products per (filter, channel) instead of 144. Per
 * image, a block of whole tile rows at a time (its transformed input sized to stay in L2):
 *   1. input transform  V[xi][c][t] = (B^T d B)[xi], d the tile's 6x6 input (zeros outside);
 *   2. per 8 filters x 32 tiles, the 36 products M[xi] = U[xi] V[xi] (into an L1-sized buffer),
 *   3. and at once their output transform Y = A^T M A, bias, residual, activation, stored into NCHW.
 * U = G g G^T is made once at compile time (36 floats per 3x3 kernel: 4x the weights). Planes under
 * 14x14 stay with the direct kernels: at 7x7 a third of each tile is padding and U is streamed for
 * few outputs (ResNet-18's 512@7 took 4.7 ms here, 2.3 direct); at 14x14 it still gains (256@14:
 * 1.9-2.0 against 2.1 ms, VGG-16's 512@14 9.0 against 11.4-12.3).
 * Transforms run on 16 tiles at once (a vector lane each): the input rows are first split by column
 * mod 4, so tile j's columns 4j..4j+5 are lane j of six contiguous runs.
 * Blocks are fixed by the shape and each is computed by one thread, so results do not depend on the
 * thread count. Rounding differs from the direct kernels (the transforms scale by up to 5 and 8).
 * VGG-16's first layer (3 channels) ran 2.8 ms direct and 10 ms here: from 32 input channels only.
 * PDC_CONV_WINO=1/0 forces it on/off (the size rules only).
 */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"
#include "backends/cpu/conv/conv_avx512.h"

#define WINO_MIN_PLANE 14           /* output planes smaller than this stay direct (see above) */
#define WINO_MIN_CHANNELS 32        /* fewer input channels: the transforms outweigh the products saved */
#define WINO_BLOCK_FLOATS (192 << 10) /* V of a block: about 768 KiB, inside a 1 MiB L2 */

typedef struct wino_state {
    int64_t n, c, h, w, o, oh, ow, pt, pl;
    int64_t th, tw;          /* tile rows and columns */
    int64_t tw16;            /* tw rounded up to whole vectors */
    int64_t rows;            /* tile rows of the largest block (blocks split the th rows evenly) */
    int64_t nblk;            /* blocks an image */
    int64_t cap;             /* V and M row stride: a block's tiles rounded up to 32 */
    float *u;                /* [36][o / 8][c][8]: 8 filters of a channel side by side */
    float *bias;             /* [o] (stored filter order) */
    int64_t *dst;            /* per stored filter: its output channel */
    conv_act act;
} wino_state;

static void wino_free(void *p)
{
    wino_state *s = p;
    if (!s) return;
    pdc_free(s->u);
    pdc_free(s->bias);
    pdc_free(s->dst);
    pdc_free(s);
}

/* Transform matrices of F(4x4, 3x3) (Lavin and Gray), interpolation points 0, +-1, +-2. */
static const float wino_bt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const float wino_at[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* U[xi][o][c] = (G g G^T) of every kernel, in double (G's sixths and 24ths) rounded once. */
static void wino_weights(const float *w, int64_t o, int64_t c, float *u)
{
    static const double gm[6][3] = {{1.0 / 4, 0, 0},
                                    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                    {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                    {0, 0, 1}};
    for (int64_t f = 0; f < o; f++)
        for (int64_t ch = 0; ch < c; ch++) {
            const float *k = w + (f * c + ch) * 9;
            double gk[6][3];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 3; j++) gk[i][j] = gm[i][0] * k[j] + gm[i][1] * k[3 + j] + gm[i][2] * k[6 + j];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++)
                    u[(((int64_t)(i * 6 + j) * (o / 8) + f / 8) * c + ch) * 8 + f % 8] =
                        (float)(gk[i][0] * gm[j][0] + gk[i][1] * gm[j][1] + gk[i][2] * gm[j][2]);
        }
}

#ifdef CONV_X86

/* Columns at..at+15 of an input row of w floats, zeros outside it: the address is formed as an
 * integer, since it may lie before the row, and masked-off lanes are not read. */
CONV_AVX512 static inline __m512 wino_load_row(const float *row, int64_t at, int64_t w)
{
    const int64_t lo = at < 0 ? -at : 0, hi = w - at > 16 ? 16 : w - at;
    const __mmask16 m = hi <= lo ? 0 : (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
    return _mm512_maskz_loadu_ps(m, (const void *)((uintptr_t)row + (uintptr_t)(at * (int64_t)sizeof(float))));
}

/* The input transform of tile row ti of channel plane x into v (V[0] at the tile row's first tile;
 * xi apart by vstride): d[r][m][j] = x[4ti + r - pt][4j + m - pl] (zeros outside) for the four
 * column classes m (tile j's columns 4 and 5 are classes 0 and 1 of tile j + 1), then the 1-D
 * transform down the six rows and along the six columns, 16 tiles a vector (lanes past the tile row
 * are computed from whatever d holds there and not stored). z: d, 6 * 4 * (tw16 + 16) floats. */
CONV_AVX512 static void wino_input_row(const wino_state *s, const float *x, int64_t ti, float *v, int64_t vstride,
                                       float *z)
{
    const int64_t tw = s->tw, n = s->tw16 + 16;
    float *d = z; /* [6][4][n] */
    for (int r = 0; r < 6; r++) {
        const int64_t iy = 4 * ti + r - s->pt;
        float *dr = d + (int64_t)r * 4 * n;
        if (iy < 0 || iy >= s->h) {
            memset(dr, 0, (size_t)(4 * n) * sizeof *dr);
            continue;
        }
        /* 16 tiles' 64 columns at a time: four masked loads (columns outside the row read as zeros),
         * split by column mod 4 with two rounds of permutes */
        const float *xr = x + iy * s->w;
        const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        for (int64_t j0 = 0; j0 <= tw; j0 += 16) {
            __m512 q[4];
            for (int i = 0; i < 4; i++) {
                const int64_t at = 4 * j0 + 16 * i - s->pl;
                q[i] = wino_load_row(xr, at, s->w);
            }
            const __m512 a = _mm512_permutex2var_ps(q[0], ev, q[1]), b2 = _mm512_permutex2var_ps(q[0], od, q[1]);
            const __m512 c = _mm512_permutex2var_ps(q[2], ev, q[3]), e = _mm512_permutex2var_ps(q[2], od, q[3]);
            _mm512_storeu_ps(dr + 0 * n + j0, _mm512_permutex2var_ps(a, ev, c));
            _mm512_storeu_ps(dr + 1 * n + j0, _mm512_permutex2var_ps(b2, ev, e));
            _mm512_storeu_ps(dr + 2 * n + j0, _mm512_permutex2var_ps(a, od, c));
            _mm512_storeu_ps(dr + 3 * n + j0, _mm512_permutex2var_ps(b2, od, e));
        }
    }
    for (int64_t j0 = 0; j0 < tw; j0 += 16) {
        const __mmask16 keep = conv_lanes(0, tw - j0);
        __m512 col[6][6]; /* [k][c]: row transform k at column c of the tile */
        for (int m = 0; m < 6; m++) {
            const int64_t cls = m & 3, off = j0 + (m >> 2);
            __m512 dv[6];
            for (int r = 0; r < 6; r++) dv[r] = _mm512_loadu_ps(d + ((int64_t)r * 4 + cls) * n + off);
            for (int k = 0; k < 6; k++) {
                __m512 acc = _mm512_setzero_ps();
                for (int r = 0; r < 6; r++)
                    if (wino_bt[k][r] != 0.0f) acc = _mm512_fmadd_ps(_mm512_set1_ps(wino_bt[k][r]), dv[r], acc);
                col[k][m] = acc;
            }
        }
        for (int k = 0; k < 6; k++)
            for (int l = 0; l < 6; l++) {
                __m512 acc = _mm512_setzero_ps();
                for (int m = 0; m < 6; m++)
                    if (wino_bt[l][m] != 0.0f) acc = _mm512_fmadd_ps(_mm512_set1_ps(wino_bt[l][m]), col[k][m], acc);
                _mm512_mask_storeu_ps(v + (int64_t)(k * 6 + l) * vstride + j0, keep, acc);
            }
    }
}

/* The output transform of one filter's products for 16 tiles of the block (lanes; block tiles t0..,
 * tile rows from r0): m at M[xi = 0] (xi apart by mstride), into output plane y (residual plane r or
 * NULL). A run of lanes in one tile row becomes 4 output rows of 4 columns a tile, interleaved back
 * into rows, then bias, residual and activation on whole vectors of the row. */
CONV_AVX512 static void wino_output(const wino_state *s, const float *m, int64_t mstride, int64_t r0, int64_t t0,
                                    int64_t nt, float bias, float *y, const float *r)
{
    const int64_t tw = s->tw, ow = s->ow;
    float out[4][4][16] __attribute__((aligned(64))); /* [i][jj][tile lane] */
    float row[64] __attribute__((aligned(64)));
    __m512 sum[4][6];
    for (int l = 0; l < 6; l++) {
        __m512 mk[6];
        for (int k = 0; k < 6; k++) mk[k] = _mm512_load_ps(m + (int64_t)(k * 6 + l) * mstride);
        for (int i = 0; i < 4; i++) {
            __m512 acc = _mm512_setzero_ps();
            for (int k = 0; k < 6; k++)
                if (wino_at[i][k] != 0.0f) acc = _mm512_fmadd_ps(_mm512_set1_ps(wino_at[i][k]), mk[k], acc);
            sum[i][l] = acc;
        }
    }
    for (int i = 0; i < 4; i++)
        for (int jj = 0; jj < 4; jj++) {
            __m512 acc = _mm512_setzero_ps();
            for (int l = 0; l < 6; l++)
                if (wino_at[jj][l] != 0.0f) acc = _mm512_fmadd_ps(_mm512_set1_ps(wino_at[jj][l]), sum[i][l], acc);
            _mm512_store_ps(out[i][jj], acc);
        }
    const __m512 b = _mm512_set1_ps(bias);
    for (int64_t ls = 0; ls < 16 && t0 + ls < nt;) {
        const int64_t ti = r0 + (t0 + ls) / tw, tj = (t0 + ls) % tw;
        int64_t len = tw - tj < 16 - ls ? tw - tj : 16 - ls;
        if (len > nt - t0 - ls) len = nt - t0 - ls;
        const int64_t x0 = 4 * tj, nx = ow - x0 < 4 * len ? ow - x0 : 4 * len;
        for (int i = 0; i < 4 && 4 * ti + i < s->oh; i++) {
            const int64_t oy = 4 * ti + i;
            for (int64_t t = 0; t < len; t++)
                for (int jj = 0; jj < 4; jj++) row[t * 4 + jj] = out[i][jj][ls + t];
            for (int64_t q = 0; q < nx; q += 16) {
                const __mmask16 mk = conv_lanes(0, nx - q);
                __m512 vv = _mm512_add_ps(_mm512_load_ps(row + q), b);
                if (r) vv = _mm512_add_ps(vv, _mm512_maskz_loadu_ps(mk, r + oy * ow + x0 + q));
                _mm512_mask_storeu_ps(y + oy * ow + x0 + q, mk, conv_act_avx512(&s->act, vv));
            }
        }
        ls += len;
    }
}

/* The 36 products for 8 filters (f0..) and NV vectors of tiles (t0..): M[xi][i][lane] = sum over c of
 * U[xi][f0 + i][c] V[xi][c][t0 + lane], into m ([36][8][32]). Each loaded V vector feeds 8 FMAs
 * (o a multiple of 8; V rows of cap floats, a multiple of 16: the lanes past the block's tiles are
 * computed and never stored). */
#define WINO_PRODUCT(NV)                                                                                   \
    CONV_AVX512 static void wino_product##NV(const wino_state *s, const float *v, int64_t cap, int64_t f0,  \
                                             int64_t t0, float *m)                                         \
    {                                                                                                      \
        const int64_t c = s->c, o = s->o;                                                                  \
        for (int xi = 0; xi < 36; xi++) {                                                                  \
            __m512 acc[8][NV];                                                                             \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) for (int q = 0; q < NV; q++) acc[i][q] =     \
                _mm512_setzero_ps();                                                                       \
            const float *uf = s->u + ((int64_t)xi * o + f0) * c, *vt = v + (int64_t)xi * c * cap + t0;     \
            for (int64_t ch = 0; ch < c; ch++) {                                                           \
                __m512 vv[NV];                                                                             \
                for (int q = 0; q < NV; q++) vv[q] = _mm512_loadu_ps(vt + ch * cap + 16 * q);              \
                _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {                                      \
                    const __m512 w = _mm512_set1_ps(uf[ch * 8 + i]);                                       \
                    for (int q = 0; q < NV; q++) acc[i][q] = _mm512_fmadd_ps(w, vv[q], acc[i][q]);         \
                }                                                                                          \
            }                                                                                              \
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) for (int q = 0; q < NV; q++)                \
                _mm512_store_ps(m + ((int64_t)xi * 8 + i) * 32 + 16 * q, acc[i][q]);                       \
        }                                                                                                  \
    }
WINO_PRODUCT(1)
WINO_PRODUCT(2)

/* Floats of one thread's scratch: V of a block, the products of one tile chunk and the input
 * transform's rows. */
static int64_t wino_scratch_floats(const wino_state *s)
{
    return (36 * s->c * s->cap + 36 * 8 * 32 + 24 * (s->tw16 + 16) + 16 + 15) / 16 * 16;
}

/* Block b of image xn: tile rows [b * rows, ...) transformed, then per 8 filters (groups [g0, g1) of
 * them) and 32 tiles the products and their output transform (the products stay in L1). */
CONV_AVX512 static void wino_block(const wino_state *s, const float *xn, float *yn, const float *rn, int64_t b,
                                   int64_t g0, int64_t g1, float *scr)
{
    const int64_t r0 = b * s->th / s->nblk, r1 = (b + 1) * s->th / s->nblk;
    const int64_t nt = (r1 - r0) * s->tw, plane = s->h * s->w, oplane = s->oh * s->ow;
    const int64_t cap = s->cap; /* the row stride of V, whatever this block's size */
    float *v = scr, *m = v + 36 * s->c * cap, *z = m + 36 * 8 * 32;
    for (int64_t c = 0; c < s->c; c++)
        for (int64_t ti = r0; ti < r1; ti++)
            wino_input_row(s, xn + c * plane, ti, v + c * cap + (ti - r0) * s->tw, s->c * cap, z);
    for (int64_t f0 = 8 * g0; f0 < 8 * g1; f0 += 8)
        for (int64_t t0 = 0; t0 < nt; t0 += 32) {
            const int nv = nt - t0 > 16 ? 2 : 1;
            if (nv == 2) wino_product2(s, v, cap, f0, t0, m);
            else wino_product1(s, v, cap, f0, t0, m);
            for (int i = 0; i < 8; i++) {
                const int64_t oc = s->dst[f0 + i];
                for (int q = 0; q < nv; q++)
                    wino_output(s, m + i * 32 + 16 * q, 8 * 32, r0, t0 + 16 * q, nt, s->bias[f0 + i], yn + oc * oplane,
                                rn ? rn + oc * oplane : NULL);
            }
        }
}

static pdc_status wino_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const wino_state *s = L->state;
    const float *in = buf[l->inputs[0]], *res = cpu_conv_residual(L, buf);
    float *out = cpu_layer_out(L, l, buf);
    /* items: (image, block) pairs, and where they do not split evenly over the threads each also in
     * `parts` shares of the filters (each share transforms the block's input again: 3 blocks on 2
     * threads had run as 2 + 1). An output is the same arithmetic whoever computes it, so results do
     * not depend on the thread count. */
    const int64_t pairs = s->n * s->nblk, groups = s->o / 8;
    int64_t parts = x->threads > 1 && pairs % x->threads ? x->threads : 1;
    if (parts > groups) parts = groups;
    const int64_t items = pairs * parts;
    const int nt = items >= 2 ? x->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t q = 0; q < items; q++) {
        const int64_t pr = q / parts, part = q % parts, img = pr / s->nblk, b = pr % s->nblk;
        wino_block(s, in + img * s->c * s->h * s->w, out + img * s->o * s->oh * s->ow,
                   res ? res + img * s->o * s->oh * s->ow : NULL, b, groups * part / parts, groups * (part + 1) / parts,
                   x->own[omp_get_thread_num()]);
    }
    return PDC_OK;
}
#endif

pdc_status cpu_plan_conv_wino(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                              const ir_fused_params *fp, cpu_layer *L)
{
#ifdef CONV_X86
    if (g->group != 1 || g->kh != 3 || g->kw != 3 || g->sy != 1 || g->sx != 1 || g->dy != 1 || g->dx != 1 ||
        g->pt > 2 || g->pl > 2 || g->o % 8)
        return PDC_ERR_UNSUPPORTED;
    if (!conv_c_avx512(cc->target)) return PDC_ERR_UNSUPPORTED;
    /* taken from 14x14 output planes and 32 input channels up (PDC_CONV_WINO=1/0 forces it on/off,
     * for experiments) */
    const char *force = getenv("PDC_CONV_WINO");
    if (force && *force == '0') return PDC_ERR_UNSUPPORTED;
    if (!(force && *force == '1') && (g->oh < WINO_MIN_PLANE || g->ow < WINO_MIN_PLANE || g->c < WINO_MIN_CHANNELS))
        return PDC_ERR_UNSUPPORTED;
    if (cc->knobs && cc->knobs->family != PDC_KNOB_AUTO) return PDC_ERR_UNSUPPORTED; /* the tuner chose */
    ir_fused_params post = *fp;
    cpu_plan_epilogue(cc, &post); /* a residual is read through cpu_conv_residual at run time */
    conv_act act = cpu_conv_inline_act(&post);
    if (!conv_c_act_supported(&act)) return PDC_ERR_UNSUPPORTED;
    pdc_context *ctx = cc->ctx;
    const float *w, *bias;
    cpu_conv_operands(cc, m, l, &w, &bias);
    wino_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    *s = (wino_state){.n = g->n, .c = g->c, .h = g->h, .w = g->w, .o = g->o, .oh = g->oh, .ow = g->ow, .pt = g->pt,
                      .pl = g->pl, .act = act};
    s->th = (g->oh + 3) / 4;
    s->tw = (g->ow + 3) / 4;
    s->tw16 = (s->tw + 15) / 16 * 16;
    /* blocks: as few as keep V within WINO_BLOCK_FLOATS (at least a tile row each), their count
     * rounded up to a multiple of the threads where the batch does not split over them, and the tile
     * rows shared out evenly (ResNet-18's 64@56: 14 rows in blocks of 6, 6, 2 ran 1.16x faster on 2
     * threads than on 1; in 4 blocks of 3-4 rows each thread gets 7). A tile's arithmetic does not
     * depend on its block, so neither do the results. */
    int64_t most = WINO_BLOCK_FLOATS / (36 * g->c * s->tw);
    if (most < 1) most = 1;
    s->nblk = (s->th + most - 1) / most;
    const int64_t t = cc->threads > 1 ? cc->threads : 1;
    if (g->n % t && s->nblk % t) s->nblk = (s->nblk + t - 1) / t * t;
    if (s->nblk > s->th) s->nblk = s->th;
    s->rows = (s->th + s->nblk - 1) / s->nblk;
    s->cap = (s->rows * s->tw + 15) / 16 * 16;
    s->u = pdc_alloc(ctx, (size_t)(36 * g->o * g->c) * sizeof *s->u);
    s->bias = pdc_alloc(ctx, (size_t)g->o * sizeof *s->bias);
    s->dst = pdc_alloc(ctx, (size_t)g->o * sizeof *s->dst);
    if (!s->u || !s->bias || !s->dst) {
        wino_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    wino_weights(w, g->o, g->c, s->u);
    for (int64_t f = 0; f < g->o; f++) {
        s->bias[f] = bias ? bias[f] : 0.0f;
        s->dst[f] = fp->out_perm ? fp->out_perm[f] : f;
    }
    L->run = wino_run;
    L->state = s;
    L->free_state = wino_free;
    L->thread_floats = (size_t)wino_scratch_floats(s);
    cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info,
             "dense conv 3x3 by Winograd F(4x4, 3x3): %" PRId64 " tile rows of %" PRId64
             " tiles a block, 36 products each, %s",
             s->rows, s->tw, pdc_isa_name(cc->target->isa));
    return PDC_OK;
#else
    (void)cc, (void)m, (void)l, (void)g, (void)fp, (void)L;
    return PDC_ERR_UNSUPPORTED;
#endif
}
