/*
 * pool_rows.h - the row passes of the cpu max pool (pool.c) for one vector width: included by
 * pool.c once per width, with
 *   POOL_LANES   floats a vector (16 or 8), POOL_V / POOL_I its float and int32 GCC vector types,
 *   POOL_EVENS(dst, p)  dst = p[0], p[2], ..., the even lanes of the two vectors at p,
 *   POOL_NAME(f) the name of this width's f, POOL_TARGET the attributes that pick its ISA;
 * it undefines them at its end.
 * GCC lowers a generic vector wider than the ISA's registers lane by lane where it shuffles (the
 * 16-float version compiled for AVX2 was nearly all scalar moves: ResNet-18's 3x3 pool of
 * 64x112x112 took 2.2 ms on a Zen 3 core), so each ISA gets the width of its registers.
 */

/* m = v > m || v is NaN ? v : m, lane by lane (the scalar loops' rule: of equal values the first stays;
 * a NaN wins and stays, as in the reference). */
#define POOL_MAX_INTO(m, v)                                                                                     \
    do {                                                                                                        \
        POOL_I gt_ = ((v) > (m)) | ((v) != (v));                                                                \
        (m) = (POOL_V)(((POOL_I)(v) & gt_) | ((POOL_I)(m) & ~gt_));                                             \
    } while (0)

/* t[j] = the max of rows[i][j - pl] over i < nr (and t[j] itself unless first) for the row
 * buffer's columns inside the input, -inf outside (never above a value inside). The rows' maxima
 * are taken in registers and t is stored once, not updated row by row. */
POOL_INLINE_TARGET static inline __attribute__((always_inline)) void POOL_NAME(max_down)(float *restrict t, const float *const *rows, int nr,
                                                                      int64_t tw, int64_t pl, int64_t iw, int first)
{
    int64_t j0 = pl < 0 ? 0 : pl < tw ? pl : tw, j1 = pl + iw < tw ? pl + iw : tw;
    if (j1 < j0) j1 = j0;
    if (first) {
        for (int64_t j = 0; j < j0; j++) t[j] = -INFINITY;
        for (int64_t j = j1; j < tw; j++) t[j] = -INFINITY;
    }
    int64_t j = j0;
    for (; j + POOL_LANES <= j1; j += POOL_LANES) {
        POOL_V m, v;
        int i = 0;
        if (first) memcpy(&m, rows[i++] + (j - pl), sizeof m);
        else memcpy(&m, t + j, sizeof m);
        for (; i < nr; i++) {
            memcpy(&v, rows[i] + (j - pl), sizeof v);
            POOL_MAX_INTO(m, v);
        }
        memcpy(t + j, &m, sizeof m);
    }
    for (; j < j1; j++) {
        float m = first ? rows[0][j - pl] : t[j];
        for (int i = first; i < nr; i++) m = POOL_TAKES(rows[i][j - pl], m) ? rows[i][j - pl] : m;
        t[j] = m;
    }
}

/* y[c] = max over kc of t[c * sx + kc * dx], c in [0, ow). Stride 2 (ResNet's and VGG's pools)
 * takes POOL_LANES outputs at a time, each tap's even lanes shuffled out of two vectors: gcc left that
 * loop scalar. */
POOL_INLINE_TARGET static inline __attribute__((always_inline)) void POOL_NAME(max_across)(float *restrict y, const float *restrict t, int64_t ow,
                                                                        int64_t sx, int64_t kw, int64_t dx)
{
    if (sx == 2) {
        for (int64_t c = 0; c < ow; c += POOL_LANES) {
            POOL_V m, e; /* outputs c.. c + POOL_LANES - 1: t[2c + kc*dx + 2j], j < POOL_LANES, for each kc */
            POOL_EVENS(m, t + 2 * c);
            for (int64_t kc = 1; kc < kw; kc++) {
                POOL_EVENS(e, t + 2 * c + kc * dx);
                POOL_MAX_INTO(m, e);
            }
            if (c + POOL_LANES <= ow) memcpy(y + c, &m, sizeof m);
            else memcpy(y + c, &m, (size_t)(ow - c) * sizeof *y);
        }
        return;
    }
    for (int64_t c = 0; c < ow; c++) y[c] = t[c * sx];
    for (int64_t kc = 1; kc < kw; kc++) {
        const float *tr = t + kc * dx;
        if (sx == 1)
            for (int64_t c = 0; c < ow; c++) y[c] = POOL_TAKES(tr[c], y[c]) ? tr[c] : y[c];
        else
            for (int64_t c = 0; c < ow; c++) y[c] = POOL_TAKES(tr[c * sx], y[c]) ? tr[c * sx] : y[c];
    }
}

/* Output rows [r0, r1) of one plane of a max pool (row z * oh + r: depth z, row r); t:
 * POOL_ROW_BATCH row buffers of tw + POOL_ROW_SLACK floats. A window with no tap inside the input gives 0, as in the reference. One
 * function per ISA with its passes inlined (not a call per pass), the down passes of a batch of
 * rows before their across passes: an across pass right after its own down pass reads vectors
 * that straddle stores still in flight, which the core cannot forward. With the vector passes,
 * ResNet-18's 3x3 pool of 64x112x112 at 1 thread: 0.17 -> 0.10 ms. */
POOL_TARGET __attribute__((optimize("O3")))
static void POOL_NAME(max_rows)(const pool_state *s, const float *xp, float *yp, float *t, int64_t r0, int64_t r1)
{
    const ir_window_params *p = &s->p;
    const int64_t ow = p->out[2], tws = s->tw + POOL_ROW_SLACK;
    for (int b = 0; b < POOL_ROW_BATCH; b++) memset(t + b * tws + s->tw, 0, POOL_ROW_SLACK * sizeof *t);
    int64_t z = r0 / p->out[1], r = r0 % p->out[1]; /* the next row's depth and row (no division a row) */
    for (int64_t rb = r0; rb < r1; rb += POOL_ROW_BATCH) {
        int n = r1 - rb < POOL_ROW_BATCH ? (int)(r1 - rb) : POOL_ROW_BATCH, any[POOL_ROW_BATCH] = {0};
        for (int b = 0; b < n; b++) {
            const float *rows[POOL_DOWN_ROWS];
            int nr = 0;
            /* the window's input rows, depth plane by depth plane, POOL_DOWN_ROWS at a time */
            for (int64_t kz = 0; kz < p->k[0]; kz++) {
                const int64_t iz = z * p->stride[0] - p->pad_begin[0] + kz * p->dil[0];
                if (iz < 0 || iz >= p->in[0]) continue;
                for (int64_t kr = 0; kr < p->k[1]; kr++) {
                    const int64_t ir = r * p->stride[1] - p->pad_begin[1] + kr * p->dil[1];
                    if (ir < 0 || ir >= p->in[1]) continue;
                    rows[nr++] = xp + (iz * p->in[1] + ir) * p->in[2];
                    if (nr == POOL_DOWN_ROWS) {
                        POOL_NAME(max_down)(t + b * tws, rows, nr, s->tw, p->pad_begin[2], p->in[2], !any[b]);
                        any[b] = 1;
                        nr = 0;
                    }
                }
            }
            if (nr) {
                POOL_NAME(max_down)(t + b * tws, rows, nr, s->tw, p->pad_begin[2], p->in[2], !any[b]);
                any[b] = 1;
            }
            if (++r == p->out[1]) r = 0, z++;
        }
        for (int b = 0; b < n; b++) {
            float *yr = yp + (rb + b) * ow;
            if (!any[b]) {
                memset(yr, 0, (size_t)ow * sizeof *yr);
                continue;
            }
            POOL_NAME(max_across)(yr, t + b * tws, ow, p->stride[2], p->k[2], p->dil[2]);
            for (int64_t c = 0; s->col_valid && c < ow; c++)
                if (!s->col_valid[c]) yr[c] = 0.0f;
        }
    }
}

/* the parameters, for the next width */
#undef POOL_MAX_INTO
#undef POOL_LANES
#undef POOL_V
#undef POOL_I
#undef POOL_NAME
#undef POOL_TARGET
#undef POOL_INLINE_TARGET
#undef POOL_EVENS
