/*
 * pool.c - 2-D max/average pooling and global average pooling for the cpu target, with the
 * reference's semantics (padding, dilation, ceil_mode, count_include_pad). Max pooling runs
 * separably: per output row, the max down the window's rows into a row buffer (contiguous passes),
 * then across the window's columns (strided passes): about kh + kw vector operations a vector of
 * outputs instead of kh * kw, and the padding costs nothing. The max of a set does not depend on the
 * order, so results equal the reference's exactly (NaN inputs and ties between -0 and +0 aside: the
 * reference keeps a NaN only when it is a window's first valid tap, and the first of equal values
 * in its row-major order). Average pooling splits the output so that the interior (every tap inside
 * the input: no bounds checks, no divisor lookups) runs straight-line and the border keeps the
 * reference's per-tap checks; equal to the reference to rounding (float sums). Threads take
 * contiguous shares of the output rows of every plane (the rows the producing conv's same thread
 * wrote), or of the planes where there are too few rows for even shares.
 */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct pool_state {
    ir_window_params p;
    int is_max, global;
    int64_t planes, sp;      /* global: planes and plane size */
    /* average: interior output range, every tap valid */
    int64_t r0, r1, c0, c1;
    /* max: per output column, whether its window has a column inside the input (NULL: all do); the
     * floats of a row buffer's reach (a thread has POOL_ROW_BATCH buffers of tw + POOL_ROW_SLACK) */
    uint8_t *col_valid;
    int64_t tw;
} pool_state;

static void pool_free(void *p)
{
    pool_state *s = p;
    if (!s) return;
    pdc_free(s->col_valid);
    pdc_free(s);
}

/* The reference computation of one average-pool output (checks every tap). */
static float avg_one(const pool_state *s, const float *xp, int64_t r, int64_t c)
{
    const ir_window_params *p = &s->p;
    double sum = 0.0;
    int64_t valid = 0, padded = 0;
    for (int64_t kr = 0; kr < p->k[0]; kr++) {
        int64_t ir = r * p->stride[0] - p->pad_begin[0] + kr * p->dil[0];
        if (ir >= p->in[0] + p->pad_end[0]) continue;
        int vr = ir >= 0 && ir < p->in[0];
        for (int64_t kc = 0; kc < p->k[1]; kc++) {
            int64_t ic = c * p->stride[1] - p->pad_begin[1] + kc * p->dil[1];
            if (ic >= p->in[1] + p->pad_end[1]) continue;
            padded++;
            if (!vr || ic < 0 || ic >= p->in[1]) continue;
            valid++;
            sum += (double)xp[ir * p->in[1] + ic];
        }
    }
    if (valid == 0) return 0.0f;
    return (float)(sum / (double)(p->count_include_pad ? padded : valid));
}

/* Interior of one output row of an average pool, y[c] for c in [c0, c1): taps visited one at a time
 * over the whole row, so each loop is a (strided) vector loop. Compiled for AVX-512, AVX2 and
 * baseline x86-64 and picked at load time by the CPU (the library itself is built for baseline
 * x86-64). */
PDC_ISA_CLONES __attribute__((optimize("O3")))
static void avg_row(float *restrict y, const float *restrict x, int64_t iw, int64_t c0, int64_t c1, int64_t sx,
                    int64_t kh, int64_t kw, int64_t dy, int64_t dx, float inv)
{
    for (int64_t c = c0; c < c1; c++) y[c] = 0.0f;
    for (int64_t kr = 0; kr < kh; kr++)
        for (int64_t kc = 0; kc < kw; kc++) {
            const float *xr = x + kr * dy * iw + kc * dx;
            if (sx == 1)
                for (int64_t c = c0; c < c1; c++) y[c] += xr[c];
            else if (sx == 2)
                for (int64_t c = c0; c < c1; c++) y[c] += xr[2 * c];
            else
                for (int64_t c = c0; c < c1; c++) y[c] += xr[c * sx];
        }
    for (int64_t c = c0; c < c1; c++) y[c] *= inv;
}

/* 16 floats in GCC's generic vectors: one AVX-512 register in the avx512f clone, two or four
 * narrower ones in the others. Used only inside the clones, through macros: a function taking or
 * returning one would change the baseline ABI. */
typedef float pool_v16 __attribute__((vector_size(64)));
typedef int32_t pool_i16 __attribute__((vector_size(64)));

/* m = v > m ? v : m, lane by lane (the scalar loops' rule: of equal values the first stays). */
#define V16_MAX_INTO(m, v)                                                                                      \
    do {                                                                                                        \
        pool_i16 gt_ = (v) > (m);                                                                               \
        (m) = (pool_v16)(((pool_i16)(v) & gt_) | ((pool_i16)(m) & ~gt_));                                       \
    } while (0)
/* dst = p[0], p[2], ..., p[30]: the even lanes of two vectors. */
#define V16_EVENS(dst, p)                                                                                       \
    do {                                                                                                        \
        pool_v16 lo_, hi_;                                                                                      \
        memcpy(&lo_, (p), sizeof lo_);                                                                          \
        memcpy(&hi_, (p) + 16, sizeof hi_);                                                                     \
        (dst) = __builtin_shufflevector(lo_, hi_, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);   \
    } while (0)

/* Floats a row buffer holds past the windows' reach: max_across's last block of 16 outputs reads
 * whole vectors, up to 31 floats past it. Zeroed once a call, so that the lanes past ow (never
 * stored) hold defined, ordinary values. */
#define POOL_ROW_SLACK 32
/* Rows whose down passes run before their across passes (max_rows). */
#define POOL_ROW_BATCH 4
/* Input rows a down pass takes at once. */
#define POOL_DOWN_ROWS 8

/* t[j] = the max of rows[i][j - pl] over i < nr (and t[j] itself unless first) for the row
 * buffer's columns inside the input, -inf outside (never above a value inside). The rows' maxima
 * are taken in registers and t is stored once, not updated row by row. */
static inline __attribute__((always_inline)) void max_down(float *restrict t, const float *const *rows, int nr,
                                                           int64_t tw, int64_t pl, int64_t iw, int first)
{
    int64_t j0 = pl < 0 ? 0 : pl < tw ? pl : tw, j1 = pl + iw < tw ? pl + iw : tw;
    if (j1 < j0) j1 = j0;
    if (first) {
        for (int64_t j = 0; j < j0; j++) t[j] = -INFINITY;
        for (int64_t j = j1; j < tw; j++) t[j] = -INFINITY;
    }
    int64_t j = j0;
    for (; j + 16 <= j1; j += 16) {
        pool_v16 m, v;
        int i = 0;
        if (first) memcpy(&m, rows[i++] + (j - pl), sizeof m);
        else memcpy(&m, t + j, sizeof m);
        for (; i < nr; i++) {
            memcpy(&v, rows[i] + (j - pl), sizeof v);
            V16_MAX_INTO(m, v);
        }
        memcpy(t + j, &m, sizeof m);
    }
    for (; j < j1; j++) {
        float m = first ? rows[0][j - pl] : t[j];
        for (int i = first; i < nr; i++) m = rows[i][j - pl] > m ? rows[i][j - pl] : m;
        t[j] = m;
    }
}

/* y[c] = max over kc of t[c * sx + kc * dx], c in [0, ow). Stride 2 (ResNet's and VGG's pools)
 * takes 16 outputs at a time, each tap's even lanes shuffled out of two vectors: gcc left that
 * loop scalar. */
static inline __attribute__((always_inline)) void max_across(float *restrict y, const float *restrict t, int64_t ow,
                                                             int64_t sx, int64_t kw, int64_t dx)
{
    if (sx == 2) {
        for (int64_t c = 0; c < ow; c += 16) {
            pool_v16 m, e; /* outputs c.. c + 15: t[2c + kc*dx + 2j], j < 16, for each kc */
            V16_EVENS(m, t + 2 * c);
            for (int64_t kc = 1; kc < kw; kc++) {
                V16_EVENS(e, t + 2 * c + kc * dx);
                V16_MAX_INTO(m, e);
            }
            if (c + 16 <= ow) memcpy(y + c, &m, sizeof m);
            else memcpy(y + c, &m, (size_t)(ow - c) * sizeof *y);
        }
        return;
    }
    for (int64_t c = 0; c < ow; c++) y[c] = t[c * sx];
    for (int64_t kc = 1; kc < kw; kc++) {
        const float *tr = t + kc * dx;
        if (sx == 1)
            for (int64_t c = 0; c < ow; c++) y[c] = tr[c] > y[c] ? tr[c] : y[c];
        else
            for (int64_t c = 0; c < ow; c++) y[c] = tr[c * sx] > y[c] ? tr[c * sx] : y[c];
    }
}

/* Output rows [r0, r1) of one plane of a max pool; t: POOL_ROW_BATCH row buffers of tw +
 * POOL_ROW_SLACK floats. A window with no tap inside the input gives 0, as in the reference. One
 * function per ISA with its passes inlined (not a call per pass), the down passes of a batch of
 * rows before their across passes: an across pass right after its own down pass reads vectors
 * that straddle stores still in flight, which the core cannot forward. With the vector passes,
 * ResNet-18's 3x3 pool of 64x112x112 at 1 thread: 0.17 -> 0.10 ms. */
PDC_ISA_CLONES __attribute__((optimize("O3")))
static void max_rows(const pool_state *s, const float *xp, float *yp, float *t, int64_t r0, int64_t r1)
{
    const ir_window_params *p = &s->p;
    const int64_t ow = p->out[1], tws = s->tw + POOL_ROW_SLACK;
    for (int b = 0; b < POOL_ROW_BATCH; b++) memset(t + b * tws + s->tw, 0, POOL_ROW_SLACK * sizeof *t);
    for (int64_t rb = r0; rb < r1; rb += POOL_ROW_BATCH) {
        int n = r1 - rb < POOL_ROW_BATCH ? (int)(r1 - rb) : POOL_ROW_BATCH, any[POOL_ROW_BATCH] = {0};
        for (int b = 0; b < n; b++) {
            const float *rows[POOL_DOWN_ROWS];
            int nr = 0;
            for (int64_t kr = 0; kr < p->k[0]; kr++) {
                int64_t ir = (rb + b) * p->stride[0] - p->pad_begin[0] + kr * p->dil[0];
                if (ir >= 0 && ir < p->in[0]) rows[nr++] = xp + ir * p->in[1];
                if (nr == POOL_DOWN_ROWS || (nr && kr == p->k[0] - 1)) {
                    max_down(t + b * tws, rows, nr, s->tw, p->pad_begin[1], p->in[1], !any[b]);
                    any[b] = 1;
                    nr = 0;
                }
            }
        }
        for (int b = 0; b < n; b++) {
            float *yr = yp + (rb + b) * ow;
            if (!any[b]) {
                memset(yr, 0, (size_t)ow * sizeof *yr);
                continue;
            }
            max_across(yr, t + b * tws, ow, p->stride[1], p->k[1], p->dil[1]);
            for (int64_t c = 0; s->col_valid && c < ow; c++)
                if (!s->col_valid[c]) yr[c] = 0.0f;
        }
    }
}

/* Output rows [r0, r1) of one plane of an average pool. */
static void avg_rows(const pool_state *s, const float *xp, float *yp, int64_t r0, int64_t r1)
{
    const ir_window_params *p = &s->p;
    const int64_t ow = p->out[1], iw = p->in[1];
    const float inv = 1.0f / (float)(p->k[0] * p->k[1]); /* interior: every tap valid and in the padded extent */
    for (int64_t r = r0; r < r1; r++) {
        float *yr = yp + r * ow;
        if (r < s->r0 || r >= s->r1 || s->c0 >= s->c1) {
            for (int64_t c = 0; c < ow; c++) yr[c] = avg_one(s, xp, r, c);
            continue;
        }
        for (int64_t c = 0; c < s->c0; c++) yr[c] = avg_one(s, xp, r, c);
        /* x points so that output column c's first tap is x[c * sx] */
        const float *x = xp + (r * p->stride[0] - p->pad_begin[0]) * iw - p->pad_begin[1];
        avg_row(yr, x, iw, s->c0, s->c1, p->stride[1], p->k[0], p->k[1], p->dil[0], p->dil[1], inv);
        for (int64_t c = s->c1; c < ow; c++) yr[c] = avg_one(s, xp, r, c);
    }
}

static pdc_status pool_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const pool_state *s = L->state;
    const float *in = buf[l->inputs[0]];
    float *out = buf[l->outputs[0]];
    if (s->global) {
        int nt = s->planes * s->sp >= 65536 ? x->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (nt > 1)
        for (int64_t q = 0; q < s->planes; q++) {
            const float *xp = in + q * s->sp;
            double sum = 0.0;
            for (int64_t i = 0; i < s->sp; i++) sum += (double)xp[i];
            out[q] = (float)(sum / (double)s->sp);
        }
        return PDC_OK;
    }
    const ir_window_params *p = &s->p;
    int64_t isp = p->in[0] * p->in[1], osp = p->out[0] * p->out[1];
    int nt = s->planes * osp >= 16384 ? x->threads : 1;
    /* each thread a contiguous share of the rows, of every plane: the rows the producing conv's
     * same thread wrote (its row bands are split the same way), not half of them from the other
     * core's cache, as a split by planes read them (cpu_conv_run_image); by planes where the rows
     * are too few for even shares (below 8 a thread) */
    int by_rows = p->out[0] >= 8 * (int64_t)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int th = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t r0 = by_rows ? p->out[0] * th / n : 0, r1 = by_rows ? p->out[0] * (th + 1) / n : p->out[0];
        int64_t q0 = by_rows ? 0 : s->planes * th / n, q1 = by_rows ? s->planes : s->planes * (th + 1) / n;
        float *t = s->is_max ? x->own[th] : NULL; /* the row buffer: max only */
        for (int64_t q = q0; q < q1; q++) {
            if (s->is_max) max_rows(s, in + q * isp, out + q * osp, t, r0, r1);
            else avg_rows(s, in + q * isp, out + q * osp, r0, r1);
        }
    }
    return PDC_OK;
}

/* Output range [lo, hi) along one dim where every tap is inside the input. */
static void interior(int64_t out, int64_t in, int64_t k, int64_t st, int64_t pb, int64_t dl, int64_t *lo, int64_t *hi)
{
    *lo = (pb + st - 1) / st;                       /* first r with r*st - pb >= 0 */
    int64_t last = in - 1 - (k - 1) * dl + pb;      /* r*st <= last */
    *hi = last < 0 ? 0 : last / st + 1;
    if (*hi > out) *hi = out;
    if (*lo > *hi) *lo = *hi;
}

pdc_status cpu_plan_pool(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap)
{
    if (l->op != IR_OP_MAXPOOL && l->op != IR_OP_AVGPOOL && l->op != IR_OP_GLOBAL_AVGPOOL) return PDC_ERR_UNSUPPORTED;
    if (l->inputs[0] < 0 || l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    pool_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    if (l->op == IR_OP_GLOBAL_AVGPOOL) {
        const ir_tensor *t = &m->tensors[l->inputs[0]];
        if (t->rank < 2) {
            pool_free(s);
            return PDC_ERR_UNSUPPORTED;
        }
        s->global = 1;
        s->planes = t->dims[0] * t->dims[1];
        s->sp = 1;
        for (int i = 2; i < t->rank; i++) s->sp *= t->dims[i];
        snprintf(L->info, sizeof L->info, "global average pool, %" PRId64 " planes of %" PRId64, s->planes, s->sp);
    } else {
        pdc_status st = ir_window_params_get(m, l, &s->p);
        if (st) {
            pool_free(s);
            return st;
        }
        if (s->p.nsp != 2) {
            snprintf(why, why_cap, "%d-D pooling", s->p.nsp);
            pool_free(s);
            return PDC_ERR_UNSUPPORTED;
        }
        s->is_max = l->op == IR_OP_MAXPOOL;
        s->planes = s->p.n * s->p.c;
        const ir_window_params *p = &s->p;
        interior(p->out[0], p->in[0], p->k[0], p->stride[0], p->pad_begin[0], p->dil[0], &s->r0, &s->r1);
        interior(p->out[1], p->in[1], p->k[1], p->stride[1], p->pad_begin[1], p->dil[1], &s->c0, &s->c1);
        if (s->is_max) {
            /* the row buffer spans every column a window reaches; a window may miss the input
             * altogether (padding and dilation wider than it), and then gives 0 */
            s->tw = ((p->out[1] - 1) * p->stride[1] + (p->k[1] - 1) * p->dil[1] + 1 + 15) / 16 * 16;
            s->col_valid = pdc_calloc(cc->ctx, (size_t)p->out[1], 1);
            if (!s->col_valid) {
                pool_free(s);
                return PDC_ERR_OUT_OF_MEMORY;
            }
            int64_t nvalid = 0;
            for (int64_t c = 0; c < p->out[1]; c++) {
                for (int64_t kc = 0; kc < p->k[1]; kc++) {
                    int64_t ic = c * p->stride[1] - p->pad_begin[1] + kc * p->dil[1];
                    if (ic >= 0 && ic < p->in[1]) s->col_valid[c] = 1;
                }
                nvalid += s->col_valid[c];
            }
            if (nvalid == p->out[1]) { /* the usual case: no column to clear after each row */
                pdc_free(s->col_valid);
                s->col_valid = NULL;
            }
            L->thread_floats = (size_t)(POOL_ROW_BATCH * (s->tw + POOL_ROW_SLACK));
            snprintf(L->info, sizeof L->info, "max pool %" PRId64 "x%" PRId64 " stride %" PRId64 ", separable (rows, then columns)",
                     p->k[0], p->k[1], p->stride[1]);
        } else {
            snprintf(L->info, sizeof L->info, "average pool %" PRId64 "x%" PRId64 " stride %" PRId64 ", interior %" PRId64
                     "x%" PRId64 " of %" PRId64 "x%" PRId64 " without border checks",
                     p->k[0], p->k[1], p->stride[1], s->r1 - s->r0, s->c1 - s->c0, p->out[0], p->out[1]);
        }
    }
    L->run = pool_run;
    L->state = s;
    L->free_state = pool_free;
    return PDC_OK;
}
