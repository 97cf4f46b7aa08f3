/*
 * conv_cmajor.c - JIT'd pattern-sparse convolution in channel-major order, for strided layers.
 *
 * conv.c computes one filter at a time over a register tile, loading for each of its kernels the
 * input rows the kernel's taps read. At stride 2 the taps of a kernel share no input - each FMA
 * needs a cache line of its own - and a tile's input over all channels (ResNet-18's 64->128/2: 64
 * x 3.8 KB) does not stay in L1, so such layers ran from L2 at a third of the FMA rate (0.33 ms for
 * 26 MFLOP). Here the loops are swapped. Per tile (ty rows x tx vectors: nacc vectors, few) and per
 * input channel, the vectors every tap of the patterns' union reads are loaded into registers once;
 * then every kept kernel on that channel - of all filters of a chunk, grouped by pattern, so each
 * pattern's loop has constant taps - adds its taps to its filter's accumulators, which live in a
 * buffer in the thread's private scratch (chunk x nacc vectors, 32 KiB: in L1; not on the stack,
 * which an embedding program's threads may keep small). A kernel costs nacc loads and stores
 * of accumulators besides its taps x nacc FMAs, and a tile reads its input once.
 *
 * Input packing, row tiles, bands, the fused epilogue and the fixed work split (tile, chunk) are
 * conv.c's; small planes are laid flat (conv.h) and split into column tiles of nacc vectors.
 */
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

#define CM_MAX_VARIANTS 4
#define CM_MAX_ACC 4               /* accumulator vectors of a filter in a tile */
#define CM_MIN_KERNELS 8            /* kept kernels per channel and chunk below which conv.c does better */
#define CM_ACC_BYTES (32 << 10)    /* a chunk's accumulators: two thirds of a 48 KiB L1 (longer
                                      * lists than 16 KiB: 256->512/2 at 4.5x 0.238 -> 0.195 ms) */

typedef struct cm_key {
    char tag[8];                 /* "cmN": bump N when the generated code changes */
    int32_t vec, nacc, chunk;    /* lanes; accumulator vectors per filter; filters per chunk (buffer size) */
    int32_t n_pat;
    conv_kwin w;
    conv_act act;                /* inline activation (cpu_conv_inline_act) */
    int32_t residual;            /* rt added before the activation (ir_epilogue) */
    int32_t n_var;
    int32_t var_ty[CM_MAX_VARIANTS], var_tx[CM_MAX_VARIANTS], var_last[CM_MAX_VARIANTS];
    int32_t var_x0[CM_MAX_VARIANTS]; /* flat: the tile's first vector of the plane */
    uint64_t pat[CONV_MAX_PATTERNS];
} cm_key;

/* Tile variant: chunk ch of the tile at xt (packed input) / yt, rt (output, residual), accumulating in
 * acc (chunk x nacc vectors, 64-byte aligned). */
typedef void (*cm_fn)(const float *xt, const int64_t *meta, const int32_t *kslot, const float *wpk,
                      const float *bias, const int64_t *ochan, const int64_t *chunks, float *yt, const float *rt,
                      float *acc, int64_t ch);

typedef struct cm_state {
    conv_geom g;
    cm_key key;
    int var_of[2][2];            /* row layout: [last row tile][last column tile] -> variant */
    cm_fn fn[CM_MAX_VARIANTS];   /* flat: one per column tile */
    int64_t *meta;               /* per (chunk, channel, pattern): first kernel, first weight; + an end */
    int32_t *kslot;              /* per kernel: its filter's accumulators, floats into the chunk's buffer */
    float *wpk, *bias;           /* weights in kernel order; bias per filter */
    int64_t *ochan, *chunks;     /* per filter: output channel; per chunk: first filter, filters, first channel */
    int64_t n_chunks;
    size_t pack_floats;          /* a thread's private scratch: its packed input, then its accumulators */
} cm_state;

/* What a run's tiles share: the layer and the threads' private scratch. */
typedef struct cm_run_arg {
    const cm_state *s;
    float *const *own;
} cm_run_arg;

static void cm_free(void *p)
{
    cm_state *s = p;
    if (!s) return;
    pdc_free(s->meta);
    pdc_free(s->kslot);
    pdc_free(s->wpk);
    pdc_free(s->bias);
    pdc_free(s->ochan);
    pdc_free(s->chunks);
    pdc_free(s);
}

/* ------------------------------------------------------------------ code generation */

/* Floats from the tile origin to what accumulator vector a (row a / tx, vector a % tx; flat: vector
 * a) reads for tap (ky, kx). */
static int64_t cm_tap_offset(const cm_key *k, int tx, int a, int ky, int kx)
{
    const conv_kwin *w = &k->w;
    if (w->flat) return cpu_conv_flat_offset(w->sy, w->sx, w->dy, w->dx, w->wq, w->pstride, ky, kx) + (int64_t)a * k->vec;
    int64_t i = a / tx, j = a % tx, cx = (int64_t)kx * w->dx;
    return cx % w->sx * w->pstride + (i * w->sy + (int64_t)ky * w->dy) * w->wq + cx / w->sx + j * k->vec;
}

/* Adds v to the n values of set unless there; returns the new count. */
static int cm_add_unique(int64_t *set, int n, int64_t v)
{
    for (int q = 0; q < n; q++)
        if (set[q] == v) return n;
    set[n] = v;
    return n + 1;
}

/* Accumulators: whole vectors at vector-aligned places of the buffer. */
static LLVMValueRef cm_load_acc(pdc_irb *irb, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(irb->b, irb->vf, p, "");
    LLVMSetAlignment(v, (unsigned)irb->vec * 4);
    return v;
}

static void cm_store_acc(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p)
{
    LLVMSetAlignment(LLVMBuildStore(irb->b, v, p), (unsigned)irb->vec * 4);
}

static void cm_emit_variant(pdc_irb *irb, const cm_key *k, const char *prefix, int var)
{
    LLVMBuilderRef B = irb->b;
    const int ty = k->var_ty[var], tx = k->var_tx[var], na = ty * tx, vec = k->vec, nacc = k->nacc;
    char name[32];
    snprintf(name, sizeof name, "cmtile%d", var);
    LLVMTypeRef params[11] = {irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr,
                              irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->i64};
    LLVMValueRef fn = pdc_irb_function(irb, prefix, name, 11, params);
    LLVMValueRef xt = LLVMGetParam(fn, 0), meta = LLVMGetParam(fn, 1), kslot = LLVMGetParam(fn, 2),
                 wpk = LLVMGetParam(fn, 3), bias = LLVMGetParam(fn, 4), ochan = LLVMGetParam(fn, 5),
                 chunks = LLVMGetParam(fn, 6), yt = LLVMGetParam(fn, 7), rt = LLVMGetParam(fn, 8),
                 buf = LLVMGetParam(fn, 9), ch = LLVMGetParam(fn, 10);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(irb->c, fn, "entry"));
    LLVMValueRef sv = LLVMBuildAlloca(B, irb->i64, "s"), cv = LLVMBuildAlloca(B, irb->i64, "c"),
                 iv = LLVMBuildAlloca(B, irb->i64, "i"), wpv = LLVMBuildAlloca(B, irb->ptr, "wp");
    LLVMValueRef cr = pdc_irb_gep(irb, irb->i64, chunks, LLVMBuildMul(B, ch, pdc_irb_i64(irb, 3), ""));
    LLVMValueRef f0 = pdc_irb_load_i64(irb, cr), nf = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, cr, 1)),
                 cb = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, cr, 2));
    LLVMValueRef slot_floats = pdc_irb_i64(irb, (int64_t)nacc * vec);

    /* the chunk's accumulators start at the bias */
    pdc_irb_loop lp;
    LLVMValueRef s = pdc_irb_loop_begin(irb, fn, &lp, sv, pdc_irb_i64(irb, 0), nf, 1, "init");
    LLVMValueRef b0 = pdc_irb_load_splat(irb, pdc_irb_gep(irb, irb->f32, bias, LLVMBuildAdd(B, f0, s, "")));
    LLVMValueRef ap = pdc_irb_gep(irb, irb->f32, buf, LLVMBuildMul(B, s, slot_floats, ""));
    for (int a = 0; a < na; a++) cm_store_acc(irb, b0, pdc_irb_gepc(irb, irb->f32, ap, (int64_t)a * vec));
    pdc_irb_loop_end(irb, &lp, s);

    /* per input channel: the union's tap vectors, then each pattern's kernels */
    uint64_t uni = 0;
    for (int p = 0; p < k->n_pat; p++) uni |= k->pat[p];
    LLVMValueRef xg = pdc_irb_gep(irb, irb->f32, xt, LLVMBuildMul(B, cb, pdc_irb_i64(irb, k->w.ps), ""));
    LLVMValueRef c = pdc_irb_loop_begin(irb, fn, &lp, cv, pdc_irb_i64(irb, 0), pdc_irb_i64(irb, k->w.cg), 1, "channel");
    LLVMValueRef x = pdc_irb_gep(irb, irb->f32, xg, LLVMBuildMul(B, c, pdc_irb_i64(irb, k->w.ps), ""));
    /* the next channel's lines, a channel's worth of kernels ahead (its address is a constant
     * stride on, but 64 kernels between two channels hide the pattern from the hardware); past the
     * last channel the address leaves the buffer, so no inbounds GEP. Tiles start on a cache line
     * with 16-float vectors, on half of one with 8: then every half line is prefetched. */
    {
        LLVMValueRef kps = pdc_irb_i64(irb, k->w.ps);
        LLVMValueRef xn = LLVMBuildGEP2(B, irb->f32, x, &kps, 1, "");
        const int64_t gran = vec % 16 ? 8 : 16;
        int64_t lines[CONV_MAX_TAPS * CM_MAX_ACC * 2];
        int nl = 0;
        for (int b = 0; b < k->w.kh * k->w.kw; b++)
            for (int a = 0; uni >> b & 1 && a < na; a++)
                for (int e = 0; e < 2; e++) {
                    int64_t off = cm_tap_offset(k, tx, a, b / k->w.kw, b % k->w.kw) + (e ? vec - 1 : 0);
                    nl = cm_add_unique(lines, nl, off / gran);
                }
        for (int q = 0; q < nl; q++) {
            LLVMValueRef o = pdc_irb_i64(irb, lines[q] * gran);
            pdc_irb_prefetch(irb, LLVMBuildGEP2(B, irb->f32, xn, &o, 1, ""));
        }
    }
    LLVMValueRef T[CONV_MAX_TAPS][CM_MAX_ACC];
    for (int b = 0; b < k->w.kh * k->w.kw; b++)
        for (int a = 0; uni >> b & 1 && a < na; a++)
            T[b][a] = pdc_irb_load_vec(irb,
                                       pdc_irb_gepc(irb, irb->f32, x, cm_tap_offset(k, tx, a, b / k->w.kw, b % k->w.kw)));
    LLVMValueRef mbase = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, ch, pdc_irb_i64(irb, k->w.cg), ""), c, ""),
                                      pdc_irb_i64(irb, k->n_pat), "");
    for (int p = 0; p < k->n_pat; p++) {
        uint64_t mask = k->pat[p];
        LLVMValueRef li = LLVMBuildAdd(B, mbase, pdc_irb_i64(irb, p), "");
        LLVMValueRef mr = pdc_irb_gep(irb, irb->i64, meta, LLVMBuildMul(B, li, pdc_irb_i64(irb, 2), ""));
        LLVMValueRef lo = pdc_irb_load_i64(irb, mr), wst = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, mr, 1)),
                     hi = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, mr, 2));
        LLVMBuildStore(B, pdc_irb_gep(irb, irb->f32, wpk, wst), wpv);
        pdc_irb_loop kl;
        LLVMValueRef i = pdc_irb_loop_begin(irb, fn, &kl, iv, lo, hi, 1, "kernels");
        LLVMValueRef wp = LLVMBuildLoad2(B, irb->ptr, wpv, "");
        LLVMValueRef slot = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, kslot, i));
        LLVMValueRef kp = pdc_irb_gep(irb, irb->f32, buf, slot);
        LLVMValueRef cur[CM_MAX_ACC];
        for (int a = 0; a < na; a++) cur[a] = cm_load_acc(irb, pdc_irb_gepc(irb, irb->f32, kp, (int64_t)a * vec));
        int t = 0;
        for (int b = 0; b < k->w.kh * k->w.kw; b++) {
            if (!(mask >> b & 1)) continue;
            LLVMValueRef w = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, wp, t++));
            for (int a = 0; a < na; a++) cur[a] = pdc_irb_fma(irb, w, T[b][a], cur[a]);
        }
        for (int a = 0; a < na; a++) cm_store_acc(irb, cur[a], pdc_irb_gepc(irb, irb->f32, kp, (int64_t)a * vec));
        LLVMBuildStore(B, pdc_irb_gepc(irb, irb->f32, wp, t), wpv);
        /* not unrolled: a pattern's list on a channel is short (8 kernels for 128 filters at 50%),
         * and the remainder loop of an unrolled one costs a second mispredicted exit
         * (ResNet-18's 256->512/2 at 4.5x: 0.274 -> 0.239 ms) */
        pdc_irb_loop_unroll(irb, pdc_irb_loop_end(irb, &kl, i), 1);
    }
    pdc_irb_loop_end(irb, &lp, c);

    /* epilogue: residual, activation and stores to output channel ochan[f] */
    s = pdc_irb_loop_begin(irb, fn, &lp, sv, pdc_irb_i64(irb, 0), nf, 1, "store");
    LLVMValueRef oc = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, ochan, LLVMBuildAdd(B, f0, s, "")));
    LLVMValueRef ooff = LLVMBuildMul(B, oc, pdc_irb_i64(irb, k->w.ohw), "");
    LLVMValueRef yk = pdc_irb_gep(irb, irb->f32, yt, ooff);
    LLVMValueRef rk = k->residual ? pdc_irb_gep(irb, irb->f32, rt, ooff) : NULL;
    ap = pdc_irb_gep(irb, irb->f32, buf, LLVMBuildMul(B, s, slot_floats, ""));
    for (int a = 0; a < na; a++) {
        LLVMValueRef v = cm_load_acc(irb, pdc_irb_gepc(irb, irb->f32, ap, (int64_t)a * vec));
        if (k->w.flat)
            cpu_conv_emit_flat_store(irb, v, yk, rk, &k->act, (int64_t)(k->var_x0[var] + a) * vec, k->w.wq, k->w.ow,
                                     k->w.oh);
        else
            cpu_conv_emit_row_store(irb, v, yk, rk, &k->act, (int64_t)(a / tx) * k->w.ow + (int64_t)(a % tx) * vec,
                                    a % tx == tx - 1 ? k->var_last[var] : vec);
    }
    pdc_irb_loop_end(irb, &lp, s);
    LLVMBuildRetVoid(B);
}

static pdc_status cm_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                          LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const cm_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    for (int v = 0; v < k->n_var; v++) cm_emit_variant(&irb, k, prefix, v);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

/* ------------------------------------------------------------------ running */

static void cm_tile(const void *arg, const float *xr, float *yn, const float *rn, int64_t tyi, int64_t txi, int64_t ch)
{
    const cm_run_arg *r = arg;
    const cm_state *s = r->s;
    const conv_geom *g = &s->g;
    float *acc = r->own[omp_get_thread_num()] + s->pack_floats;
    int64_t x0 = txi * g->tx * s->key.vec;
    if (g->flat) { /* a variant per column tile, which knows where its pixels go */
        s->fn[txi](xr + x0, s->meta, s->kslot, s->wpk, s->bias, s->ochan, s->chunks, yn, rn, acc, ch);
        return;
    }
    int v = s->var_of[tyi == g->nty - 1][txi == g->ntx - 1];
    int64_t yo = tyi * g->ty * g->ow + x0;
    s->fn[v](xr + x0, s->meta, s->kslot, s->wpk, s->bias, s->ochan, s->chunks, yn + yo, rn ? rn + yo : NULL, acc, ch);
}

static pdc_status cm_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                         const cpu_exec *x)
{
    (void)m;
    const cm_state *s = L->state;
    cm_run_arg r = {s, x->own};
    return cpu_conv_run_layer(L, l, buf, x, &s->g, s->n_chunks, cm_tile, &r);
}

/* ------------------------------------------------------------------ planning */

/* Distinct vectors a ty x tx tile (flat: tx vectors) of layout g reads for the taps in uni: its tap
 * vectors, which stay in registers through a channel's kernels. */
static int cm_tap_vectors(const conv_geom *g, int vec, uint64_t uni, int ty, int tx)
{
    cm_key k;
    memset(&k, 0, sizeof k);
    k.vec = vec;
    cpu_conv_key_window(g, &k.w);
    int64_t seen[CONV_MAX_TAPS * CM_MAX_ACC];
    int n = 0;
    for (int b = 0; b < k.w.kh * k.w.kw; b++)
        for (int a = 0; uni >> b & 1 && a < ty * tx; a++)
            n = cm_add_unique(seen, n, cm_tap_offset(&k, tx, a, b / k.w.kw, b % k.w.kw));
    return n;
}

/* Kernel lists of P's layer in chunk order: per (chunk, channel, pattern) the kernels of the chunk's
 * filters in stored order, each with its accumulator slot and its weights. */
static pdc_status cm_pack(pdc_context *ctx, const cpu_conv_plan *P, int64_t chunk, cm_state *s)
{
    const conv_geom *g = &P->g;
    const int64_t og = g->o / g->group, per_group = (og + chunk - 1) / chunk, taps = g->kh * g->kw;
    const size_t np = P->n_pat;
    s->n_chunks = g->group * per_group;
    size_t n_lists = (size_t)(s->n_chunks * g->cg) * np;
    s->meta = pdc_alloc(ctx, (2 * n_lists + 2) * sizeof *s->meta);
    s->kslot = pdc_alloc(ctx, ((size_t)P->kept_kernels + 1) * sizeof *s->kslot);
    s->wpk = pdc_alloc(ctx, ((size_t)P->kept_taps + 1) * sizeof *s->wpk);
    s->bias = pdc_alloc(ctx, (size_t)g->o * sizeof *s->bias);
    s->ochan = pdc_alloc(ctx, (size_t)g->o * sizeof *s->ochan);
    s->chunks = pdc_alloc(ctx, (size_t)(3 * s->n_chunks) * sizeof *s->chunks);
    if (!s->meta || !s->kslot || !s->wpk || !s->bias || !s->ochan || !s->chunks) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t o = 0; o < g->o; o++) {
        s->bias[o] = P->b ? P->b[o] : 0.0f;
        s->ochan[o] = P->fp.out_perm ? P->fp.out_perm[o] : o;
    }
    int64_t ki = 0, wi = 0, li = 0;
    for (int64_t ch = 0; ch < s->n_chunks; ch++) {
        int64_t grp = ch / per_group, f0 = grp * og + ch % per_group * chunk;
        int64_t f1 = f0 + chunk < (grp + 1) * og ? f0 + chunk : (grp + 1) * og;
        s->chunks[3 * ch] = f0;
        s->chunks[3 * ch + 1] = f1 - f0;
        s->chunks[3 * ch + 2] = grp * g->cg;
        for (int64_t c = 0; c < g->cg; c++)
            for (size_t p = 0; p < np; p++, li++) {
                s->meta[2 * li] = ki;
                s->meta[2 * li + 1] = wi;
                for (int64_t o = f0; o < f1; o++) {
                    uint64_t mk = P->kmask[o * g->cg + c];
                    if (mk != P->pats[p]) continue;
                    s->kslot[ki++] = (int32_t)((o - f0) * s->key.nacc * s->key.vec);
                    const float *src = P->w + (o * g->cg + c) * taps;
                    for (int64_t b = 0; b < taps; b++)
                        if (mk >> b & 1) s->wpk[wi++] = src[b];
                }
            }
    }
    s->meta[2 * li] = ki; /* the end of the last list */
    s->meta[2 * li + 1] = wi;
    return PDC_OK;
}

pdc_status cpu_plan_conv_cmajor(const cpu_compile *cc, const cpu_conv_plan *P, cpu_layer *L)
{
    const pdc_llvm_target *t = cc->target;
    const int vec = t->vec;
    conv_geom g = P->g;
    uint64_t uni = 0;
    for (size_t p = 0; p < P->n_pat; p++) uni |= P->pats[p];
    /* taken for strided layers, where conv.c's kernels read a line per FMA from L2 (ResNet-18's
     * 64->128/2 at 4.5x: 0.170 ms here against 0.336; at stride 1 both run alike at 4.5x and conv.c
     * wins at 9x). PDC_CONV_CMAJOR = 1/0 forces it on/off, for tuning experiments and tests. */
    const char *force = getenv("PDC_CONV_CMAJOR");
    const int forced = (force && *force == '1') || P->knobs.family == PDC_KNOB_CMAJOR; /* or tuned so */
    if ((force && *force == '0' && !forced) || (!forced && g.sy * g.sx == 1)) return PDC_ERR_UNSUPPORTED;
    /* the tile: the most accumulator vectors whose tap vectors (distinct offsets: taps a row apart
     * share them across the tile's rows) fit in registers beside them and a weight */
    g.lead = 0;
    int nacc = 0;
    if (cpu_conv_layout_flat(&g, vec, 7)) {
        /* column tiles of nacc vectors, a variant each (where it stores is a constant) */
        for (int n = g.nvx < CM_MAX_ACC ? (int)g.nvx : CM_MAX_ACC; n >= 1 && !nacc; n--)
            if ((g.nvx + n - 1) / n <= CM_MAX_VARIANTS && cm_tap_vectors(&g, vec, uni, 1, n) + n + 1 <= t->n_vregs) nacc = n;
        /* as few tiles, as even: a kernel costs about as much per tile whatever its vectors (4
         * vectors in tiles of 3 and 1: ResNet-18's 256->512/2 0.221 against 0.196 ms in 2 and 2) */
        g.ntx = nacc ? (g.nvx + nacc - 1) / nacc : 0;
        nacc = g.ntx ? (int)((g.nvx + g.ntx - 1) / g.ntx) : 0;
        g.tx = nacc;
    }
    if (!nacc) {
        g = P->g;
        g.lead = 0;
        int64_t nvx = (g.ow + vec - 1) / vec, bty = 0, btx = 0;
        for (int64_t tx = nvx < CM_MAX_ACC ? nvx : CM_MAX_ACC; tx >= 1; tx--)
            for (int64_t ty = CM_MAX_ACC / tx < g.oh ? CM_MAX_ACC / tx : g.oh; ty >= 1; ty--) {
                cpu_conv_layout(&g, vec, tx, ty);
                if (ty * tx > bty * btx && cm_tap_vectors(&g, vec, uni, (int)ty, (int)tx) + ty * tx + 1 <= t->n_vregs)
                    bty = ty, btx = tx;
            }
        if (!bty) return PDC_ERR_UNSUPPORTED;
        cpu_conv_layout(&g, vec, btx, bty);
        cpu_conv_band(&g, vec, CONV_BAND_BYTES, cc->threads);
        nacc = (int)(g.ty * g.tx);
    }
    const int64_t og = g.o / g.group;
    int64_t chunk = CM_ACC_BYTES / ((int64_t)nacc * vec * 4);
    if (chunk > og) chunk = og;
    /* and where a channel's kernels in a chunk are enough to pay for loading its tap vectors and for
     * a buffer per chunk (a depthwise conv has one) */
    if (!forced && (double)chunk * (double)P->kept_kernels < CM_MIN_KERNELS * (double)(g.o * g.cg))
        return PDC_ERR_UNSUPPORTED;

    pdc_context *ctx = cc->ctx;
    cm_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->g = g;
    cm_key *k = &s->key;
    memcpy(k->tag, "cm2", 4);
    k->vec = vec;
    k->nacc = nacc;
    k->chunk = (int32_t)chunk;
    k->n_pat = (int32_t)P->n_pat;
    for (size_t p = 0; p < P->n_pat; p++) k->pat[p] = P->pats[p];
    cpu_conv_key_window(&g, &k->w);
    ir_fused_params fp = P->fp;
    k->residual = cpu_plan_epilogue(cc, &fp);
    k->act = cpu_conv_inline_act(&fp);
    if (g.flat) {
        k->n_var = (int32_t)g.ntx;
        for (int v = 0; v < k->n_var; v++) {
            k->var_ty[v] = 1;
            k->var_tx[v] = (int32_t)(g.nvx - v * g.tx < g.tx ? g.nvx - v * g.tx : g.tx);
            k->var_last[v] = vec;
            k->var_x0[v] = (int32_t)(v * g.tx);
        }
    } else {
        k->n_var = cpu_conv_row_variants(&g, vec, k->var_ty, k->var_tx, k->var_last, s->var_of);
    }
    pdc_status st = cm_pack(ctx, P, chunk, s);
    static const char *const syms[CM_MAX_VARIANTS] = {"cmtile0", "cmtile1", "cmtile2", "cmtile3"};
    pdc_kernel_desc d = {k, sizeof *k, cm_emit, k, (size_t)k->n_var, syms};
    void *addrs[CM_MAX_VARIANTS] = {0};
    if (!st) st = pdc_jit_kernel(cc->jit, ctx, &d, addrs, NULL);
    if (st) {
        cm_free(s);
        return st;
    }
    for (int v = 0; v < k->n_var; v++) s->fn[v] = (cm_fn)addrs[v];
    L->run = cm_run;
    L->state = s;
    L->free_state = cm_free;
    s->pack_floats = cpu_conv_thread_floats(&g);
    L->thread_floats = s->pack_floats + (size_t)(k->chunk * k->nacc * k->vec); /* then the accumulators */
    cpu_take_epilogue(cc, L);
    char tile[128];
    if (g.flat)
        snprintf(tile, sizeof tile, "channel-major: plane as %" PRId64 " flat vectors in tiles of %" PRId64 ", %" PRId64
                 " filters a chunk", g.nvx, g.tx, chunk);
    else
        snprintf(tile, sizeof tile, "channel-major: tile %" PRId64 "x%" PRId64 "x%d, %" PRId64 " filters a chunk%s", g.ty,
                 g.tx, vec, chunk, cpu_conv_band_info(&g));
    cpu_conv_plan_describe(P, t, tile, L->info, sizeof L->info);
    return PDC_OK;
}
