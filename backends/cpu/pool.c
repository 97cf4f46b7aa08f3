/*
 * pool.c - 1-D, 2-D and 3-D max/average pooling and global average pooling for the cpu target, with
 * the reference's semantics (padding, dilation, ceil_mode, count_include_pad). Every window is taken
 * as the 3-D window it equals (ir_window_params_as_3d: a 2-D pool has depth 1), and an output row is
 * a (depth, row) pair of a plane: the input rows a window reaches are those of every depth plane it
 * reaches. Max pooling runs separably: per output row, the max down the window's input rows (kd * kh
 * of them) into a row buffer (contiguous passes), then across the window's columns (strided
 * passes): about kd * kh + kw vector operations a vector of outputs instead of kd * kh * kw, and the
 * padding costs nothing. The max of a set does not depend on the
 * order, so results equal the reference's exactly (NaN inputs and ties between -0 and +0 aside: the
 * reference keeps a NaN only when it is a window's first valid tap, and the first of equal values
 * in its row-major order). Average pooling splits the output so that the interior (every tap inside
 * the input: no bounds checks, no divisor lookups) runs straight-line and the border keeps the
 * reference's per-tap checks; equal to the reference to rounding (float sums). Threads take
 * contiguous shares of the output rows of every plane (the rows the producing conv's same thread
 * wrote), or of the planes where there are too few rows for even shares; a row is computed the
 * same way whichever thread takes it, so results do not depend on the thread count.
 */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct pool_state {
    ir_window_params p;      /* as 3-D: dim 0 depth, 1 rows, 2 columns */
    int is_max, global;
    int64_t planes, sp;      /* global: planes and plane size */
    /* average: interior output range, every tap valid */
    int64_t d0, d1, r0, r1, c0, c1;
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
static float avg_one(const pool_state *s, const float *xp, int64_t z, int64_t r, int64_t c)
{
    const ir_window_params *p = &s->p;
    double sum = 0.0;
    int64_t valid = 0, padded = 0;
    for (int64_t kz = 0; kz < p->k[0]; kz++) {
        int64_t iz = z * p->stride[0] - p->pad_begin[0] + kz * p->dil[0];
        if (iz >= p->in[0] + p->pad_end[0]) continue;
        int vz = iz >= 0 && iz < p->in[0];
        for (int64_t kr = 0; kr < p->k[1]; kr++) {
            int64_t ir = r * p->stride[1] - p->pad_begin[1] + kr * p->dil[1];
            if (ir >= p->in[1] + p->pad_end[1]) continue;
            int vr = vz && ir >= 0 && ir < p->in[1];
            for (int64_t kc = 0; kc < p->k[2]; kc++) {
                int64_t ic = c * p->stride[2] - p->pad_begin[2] + kc * p->dil[2];
                if (ic >= p->in[2] + p->pad_end[2]) continue;
                padded++;
                if (!vr || ic < 0 || ic >= p->in[2]) continue;
                valid++;
                sum += (double)xp[(iz * p->in[1] + ir) * p->in[2] + ic];
            }
        }
    }
    if (valid == 0) return 0.0f;
    return (float)(sum / (double)(p->count_include_pad ? padded : valid));
}

/* Interior of one output row of an average pool, y[c] for c in [c0, c1): taps visited one at a time
 * over the whole row (depth planes dz floats apart, rows dy), so each loop is a (strided) vector loop. Compiled for AVX-512, AVX2 and
 * baseline x86-64 and picked at load time by the CPU (the library itself is built for baseline
 * x86-64). */
PDC_ISA_CLONES __attribute__((optimize("O3")))
static void avg_row(float *restrict y, const float *restrict x, int64_t c0, int64_t c1, int64_t sx, int64_t kd,
                    int64_t kh, int64_t kw, int64_t dz, int64_t dy, int64_t dx, float inv)
{
    for (int64_t c = c0; c < c1; c++) y[c] = 0.0f;
    for (int64_t kz = 0; kz < kd; kz++)
        for (int64_t kr = 0; kr < kh; kr++)
            for (int64_t kc = 0; kc < kw; kc++) {
                const float *xr = x + kz * dz + kr * dy + kc * dx;
                if (sx == 1)
                    for (int64_t c = c0; c < c1; c++) y[c] += xr[c];
                else if (sx == 2)
                    for (int64_t c = c0; c < c1; c++) y[c] += xr[2 * c];
                else
                    for (int64_t c = c0; c < c1; c++) y[c] += xr[c * sx];
            }
    for (int64_t c = c0; c < c1; c++) y[c] *= inv;
}

/* The max pool's row passes in GCC's generic vectors, at the width of the ISA's registers
 * (pool_rows.h): 16 floats with AVX-512, 8 elsewhere. Used only inside these functions: a
 * function taking or returning one would change the baseline ABI. */
typedef float pool_v16 __attribute__((vector_size(64)));
typedef int32_t pool_i16 __attribute__((vector_size(64)));
typedef float pool_v8 __attribute__((vector_size(32)));
typedef int32_t pool_i8 __attribute__((vector_size(32)));

/* Floats a row buffer holds past the windows' reach: max_across's last block of 16 (or 8) outputs
 * reads whole vectors, up to 31 floats past it. Zeroed once a call, so that the lanes past ow (never
 * stored) hold defined, ordinary values. */
#define POOL_ROW_SLACK 32
/* Rows whose down passes run before their across passes (max_rows). */
#define POOL_ROW_BATCH 4
/* Input rows a down pass takes at once. */
#define POOL_DOWN_ROWS 8

/* The scalar max rule of the row passes: v replaces m if greater or NaN (a NaN wins and stays). */
#define POOL_TAKES(v, m) ((v) > (m) || (v) != (v))

#define POOL_LANES 16
#define POOL_V pool_v16
#define POOL_I pool_i16
#define POOL_NAME(f) f##_v16
#define POOL_TARGET __attribute__((target("avx512f")))
#define POOL_INLINE_TARGET POOL_TARGET
#define POOL_EVENS(dst, p)                                                                                      \
    do {                                                                                                        \
        pool_v16 lo_, hi_;                                                                                      \
        memcpy(&lo_, (p), sizeof lo_);                                                                          \
        memcpy(&hi_, (p) + 16, sizeof hi_);                                                                     \
        (dst) = __builtin_shufflevector(lo_, hi_, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);   \
    } while (0)
#include "backends/cpu/pool_rows.h"

#define POOL_LANES 8
#define POOL_V pool_v8
#define POOL_I pool_i8
#define POOL_NAME(f) f##_v8
#define POOL_TARGET PDC_ISA_CLONES_NO_AVX512
#define POOL_INLINE_TARGET /* target_clones cannot go on an always_inline function */
#define POOL_EVENS(dst, p)                                                                                      \
    do {                                                                                                        \
        pool_v8 lo_, hi_;                                                                                       \
        memcpy(&lo_, (p), sizeof lo_);                                                                          \
        memcpy(&hi_, (p) + 8, sizeof hi_);                                                                      \
        (dst) = __builtin_shufflevector(lo_, hi_, 0, 2, 4, 6, 8, 10, 12, 14);                                   \
    } while (0)
#include "backends/cpu/pool_rows.h"

/* Output rows [r0, r1) of one plane of a max pool (row z * oh + r: depth z, row r), at the width of
 * the CPU's registers. */
static void max_rows(const pool_state *s, const float *xp, float *yp, float *t, int64_t r0, int64_t r1)
{
    if (__builtin_cpu_supports("avx512f")) max_rows_v16(s, xp, yp, t, r0, r1);
    else max_rows_v8(s, xp, yp, t, r0, r1);
}

/* Output rows [r0, r1) of one plane of an average pool (row z * oh + r: depth z, row r). */
static void avg_rows(const pool_state *s, const float *xp, float *yp, int64_t r0, int64_t r1)
{
    const ir_window_params *p = &s->p;
    const int64_t ow = p->out[2], iw = p->in[2], ih = p->in[1];
    /* interior: every tap valid and in the padded extent */
    const float inv = 1.0f / (float)(p->k[0] * p->k[1] * p->k[2]);
    for (int64_t zr = r0; zr < r1; zr++) {
        const int64_t z = zr / p->out[1], r = zr % p->out[1];
        float *yr = yp + zr * ow;
        if (z < s->d0 || z >= s->d1 || r < s->r0 || r >= s->r1 || s->c0 >= s->c1) {
            for (int64_t c = 0; c < ow; c++) yr[c] = avg_one(s, xp, z, r, c);
            continue;
        }
        for (int64_t c = 0; c < s->c0; c++) yr[c] = avg_one(s, xp, z, r, c);
        /* x points so that output column c's first tap is x[c * sx] */
        const float *x = xp + ((z * p->stride[0] - p->pad_begin[0]) * ih + r * p->stride[1] - p->pad_begin[1]) * iw -
                         p->pad_begin[2];
        avg_row(yr, x, s->c0, s->c1, p->stride[2], p->k[0], p->k[1], p->k[2], p->dil[0] * ih * iw, p->dil[1] * iw,
                p->dil[2], inv);
        for (int64_t c = s->c1; c < ow; c++) yr[c] = avg_one(s, xp, z, r, c);
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
    const int64_t rows = p->out[0] * p->out[1]; /* a plane's output rows, depth by depth */
    int64_t isp = p->in[0] * p->in[1] * p->in[2], osp = rows * p->out[2];
    int nt = s->planes * osp >= 16384 ? x->threads : 1;
    /* each thread a contiguous share of the rows, of every plane: the rows the producing conv's
     * same thread wrote (its row bands are split the same way), not half of them from the other
     * core's cache, as a split by planes read them (cpu_conv_run_image); by planes where the rows
     * are too few for even shares (below 8 a thread) */
    int by_rows = rows >= 8 * (int64_t)nt;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int th = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t r0 = by_rows ? rows * th / n : 0, r1 = by_rows ? rows * (th + 1) / n : rows;
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
    (void)why, (void)why_cap; /* every window the IR admits (1-D to 3-D) runs here */
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
        const int nsp = s->p.nsp;
        ir_window_params_as_3d(&s->p); /* a 2-D pool is a 3-D one of depth 1, a 1-D one of height 1 too */
        s->is_max = l->op == IR_OP_MAXPOOL;
        s->planes = s->p.n * s->p.c;
        const ir_window_params *p = &s->p;
        interior(p->out[0], p->in[0], p->k[0], p->stride[0], p->pad_begin[0], p->dil[0], &s->d0, &s->d1);
        interior(p->out[1], p->in[1], p->k[1], p->stride[1], p->pad_begin[1], p->dil[1], &s->r0, &s->r1);
        interior(p->out[2], p->in[2], p->k[2], p->stride[2], p->pad_begin[2], p->dil[2], &s->c0, &s->c1);
        /* "3x3x3 " of a 3-D window, nothing of a 2-D one */
        char depth[32] = "";
        if (nsp == 3) snprintf(depth, sizeof depth, "%" PRId64 "x", p->k[0]);
        if (s->is_max) {
            /* the row buffer spans every column a window reaches; a window may miss the input
             * altogether (padding and dilation wider than it), and then gives 0 */
            s->tw = ((p->out[2] - 1) * p->stride[2] + (p->k[2] - 1) * p->dil[2] + 1 + 15) / 16 * 16;
            s->col_valid = pdc_calloc(cc->ctx, (size_t)p->out[2], 1);
            if (!s->col_valid) {
                pool_free(s);
                return PDC_ERR_OUT_OF_MEMORY;
            }
            int64_t nvalid = 0;
            for (int64_t c = 0; c < p->out[2]; c++) {
                for (int64_t kc = 0; kc < p->k[2]; kc++) {
                    int64_t ic = c * p->stride[2] - p->pad_begin[2] + kc * p->dil[2];
                    if (ic >= 0 && ic < p->in[2]) s->col_valid[c] = 1;
                }
                nvalid += s->col_valid[c];
            }
            if (nvalid == p->out[2]) { /* the usual case: no column to clear after each row */
                pdc_free(s->col_valid);
                s->col_valid = NULL;
            }
            L->thread_floats = (size_t)(POOL_ROW_BATCH * (s->tw + POOL_ROW_SLACK));
            snprintf(L->info, sizeof L->info, "max pool %s%" PRId64 "x%" PRId64 " stride %" PRId64 ", separable (%s, then columns)",
                     depth, p->k[1], p->k[2], p->stride[2], nsp == 3 ? "rows of every depth plane" : "rows");
        } else {
            char idepth[64] = "", odepth[32] = "";
            if (nsp == 3) {
                snprintf(idepth, sizeof idepth, "%" PRId64 "x", s->d1 - s->d0);
                snprintf(odepth, sizeof odepth, "%" PRId64 "x", p->out[0]);
            }
            snprintf(L->info, sizeof L->info, "average pool %s%" PRId64 "x%" PRId64 " stride %" PRId64 ", interior %s%" PRId64
                     "x%" PRId64 " of %s%" PRId64 "x%" PRId64 " without border checks",
                     depth, p->k[1], p->k[2], p->stride[2], idepth, s->r1 - s->r0, s->c1 - s->c0, odepth, p->out[1], p->out[2]);
        }
    }
    L->run = pool_run;
    L->state = s;
    L->free_state = pool_free;
    return PDC_OK;
}
