/*
 * conv_ocvec.c - JIT'd dense convolution vectorised over output channels.
 *
 * conv_dense.c vectorises along output rows, so a row of 14, 28 or 56 pixels fills its 16-lane
 * vectors only 7/8 (a 7x7 plane, even laid flat, 49/64). Here a vector holds 16 output channels of
 * one pixel instead:  out[o..o+15][p] += w[o..o+15][c][tap] * x[c][p + tap],  the weights one vector
 * load, the input one broadcast float - the micro-kernel of oneDNN's direct convolution, every lane
 * useful whatever the width. Register tile: OB blocks of `vec` filters x P pixels of an output row
 * (OB * P accumulators); the kernel walks its tile's rows, and per row every input channel and tap.
 * A finished accumulator holds `vec` channels of one pixel and goes to NCHW with one scatter (lane
 * l to output channel ochan[o + l]): a cost per output element, against C * taps FMAs for it.
 * Weights are packed [block group][channel][tap][OB * vec]: one sequential stream per tile row.
 * Input packing, row tiles, bands and the fixed work split are conv.c's (with a pixel tile of P in
 * place of a vector along the row).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

#define OC_MAX_VARIANTS 4
#define OC_MAX_ACC 28
#define OC_MIN_REDUCTION 256 /* input channels x taps per output below which scatters cost too much */

typedef struct ocv_key {
    char tag[8];             /* "ocvN": bump N when the generated code changes */
    int32_t vec, ob;
    conv_kwin w;
    conv_act act;            /* inline activation (cpu_conv_inline_act) */
    int32_t residual;        /* rt added before the activation (ir_epilogue) */
    int32_t n_var;
    int32_t var_ty[OC_MAX_VARIANTS], var_p[OC_MAX_VARIANTS]; /* rows, pixels */
} ocv_key;

typedef void (*ocv_fn)(const float *xt, const float *wpk, const float *bias, const int32_t *oidx, const int64_t *cbase,
                       float *yt, const float *rt, int64_t g0, int64_t g1);

typedef struct ocv_state {
    conv_geom g;
    ocv_key key;
    int64_t p;               /* pixels per tile */
    int var_of[2][2];
    ocv_fn fn[OC_MAX_VARIANTS];
    conv_blocks w;           /* weights and bias in groups of OB blocks of filters */
    int32_t *oidx;           /* per stored filter: ochan * oh * ow, its output plane's offset */
} ocv_state;

static void ocv_free(void *p)
{
    ocv_state *s = p;
    if (!s) return;
    cpu_conv_blocks_release(&s->w);
    pdc_free(s->oidx);
    pdc_free(s);
}

/* ------------------------------------------------------------------ code generation */

/* Transposes the vec x vec matrix whose rows are v[0..vec) in place (vec a power of 2): at each
 * level the off-diagonal half-blocks of every pair of rows h apart swap - log2(vec) rounds of vec
 * two-input shuffles, against a scatter per vector (a scatter of 16 lanes cost Zen 4 about a
 * quarter of ResNet-18's 3x3 convs). */
static void ocv_transpose(pdc_irb *irb, LLVMValueRef *v)
{
    const int vec = irb->vec;
    for (int h = vec / 2; h >= 1; h /= 2) {
        LLVMValueRef lo[64], hi[64];
        for (int j = 0; j < vec; j++) {
            lo[j] = pdc_irb_i32(irb, j & h ? vec + j - h : j);
            hi[j] = pdc_irb_i32(irb, j & h ? vec + j : j + h);
        }
        LLVMValueRef mlo = LLVMConstVector(lo, (unsigned)vec), mhi = LLVMConstVector(hi, (unsigned)vec);
        for (int i = 0; i < vec; i++) {
            if (i & h) continue;
            LLVMValueRef a = v[i], b = v[i + h];
            v[i] = LLVMBuildShuffleVector(irb->b, a, b, mlo, "");
            v[i + h] = LLVMBuildShuffleVector(irb->b, a, b, mhi, "");
        }
    }
}

static void ocv_emit_variant(pdc_irb *irb, const ocv_key *k, const char *prefix, int var)
{
    LLVMBuilderRef B = irb->b;
    const int ty = k->var_ty[var], np = k->var_p[var], ob = k->ob, taps = k->w.kh * k->w.kw, vec = k->vec;
    const int64_t per_c = (int64_t)taps * ob * vec; /* weights of one input channel */
    char name[32];
    snprintf(name, sizeof name, "octile%d", var);
    LLVMTypeRef params[9] = {irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->i64, irb->i64};
    LLVMValueRef fn = pdc_irb_function(irb, prefix, name, 9, params);
    LLVMValueRef xt = LLVMGetParam(fn, 0), wpk = LLVMGetParam(fn, 1), bias = LLVMGetParam(fn, 2),
                 oidx = LLVMGetParam(fn, 3), cbase = LLVMGetParam(fn, 4), yt = LLVMGetParam(fn, 5),
                 rt = LLVMGetParam(fn, 6), g0 = LLVMGetParam(fn, 7), g1 = LLVMGetParam(fn, 8);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(irb->c, fn, "entry"));
    LLVMValueRef acc[OC_MAX_ACC];
    for (int a = 0; a < ob * np; a++) acc[a] = LLVMBuildAlloca(B, irb->vf, "acc");
    LLVMValueRef gv = LLVMBuildAlloca(B, irb->i64, "g"), rv = LLVMBuildAlloca(B, irb->i64, "r"),
                 cv = LLVMBuildAlloca(B, irb->i64, "c");
    LLVMBasicBlockRef ghead = LLVMAppendBasicBlockInContext(irb->c, fn, "group"),
                      gbody = LLVMAppendBasicBlockInContext(irb->c, fn, "group_body"),
                      rhead = LLVMAppendBasicBlockInContext(irb->c, fn, "row"),
                      rbody = LLVMAppendBasicBlockInContext(irb->c, fn, "row_body"),
                      cloop = LLVMAppendBasicBlockInContext(irb->c, fn, "channels"),
                      rend = LLVMAppendBasicBlockInContext(irb->c, fn, "row_end"),
                      gend = LLVMAppendBasicBlockInContext(irb->c, fn, "group_end"),
                      done = LLVMAppendBasicBlockInContext(irb->c, fn, "done");
    LLVMBuildStore(B, g0, gv);
    LLVMBuildBr(B, ghead);
    LLVMPositionBuilderAtEnd(B, ghead);
    LLVMValueRef gg = LLVMBuildLoad2(B, irb->i64, gv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, gg, g1, ""), gbody, done);

    /* a group of OB blocks: its input channels, weights and first filter */
    LLVMPositionBuilderAtEnd(B, gbody);
    LLVMValueRef f0 = LLVMBuildMul(B, gg, pdc_irb_i64(irb, (int64_t)ob * vec), "");
    LLVMValueRef cb = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, cbase, gg));
    LLVMValueRef xg = pdc_irb_gep(irb, irb->f32, xt, LLVMBuildMul(B, cb, pdc_irb_i64(irb, k->w.ps), ""));
    LLVMValueRef wg = pdc_irb_gep(irb, irb->f32, wpk, LLVMBuildMul(B, gg, pdc_irb_i64(irb, k->w.cg * per_c), ""));
    LLVMBuildStore(B, pdc_irb_i64(irb, 0), rv);
    LLVMBuildBr(B, rhead);
    LLVMPositionBuilderAtEnd(B, rhead);
    LLVMValueRef r = LLVMBuildLoad2(B, irb->i64, rv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, r, pdc_irb_i64(irb, ty), ""), rbody, gend);

    /* a row of the tile: accumulators start at the bias */
    LLVMPositionBuilderAtEnd(B, rbody);
    LLVMValueRef xr = pdc_irb_gep(irb, irb->f32, xg, LLVMBuildMul(B, r, pdc_irb_i64(irb, (int64_t)k->w.sy * k->w.wq), ""));
    for (int b = 0; b < ob; b++) {
        LLVMValueRef bv = pdc_irb_load_vec(irb, pdc_irb_gep(irb, irb->f32, bias, LLVMBuildAdd(B, f0, pdc_irb_i64(irb, (int64_t)b * vec), "")));
        for (int p = 0; p < np; p++) LLVMBuildStore(B, bv, acc[b * np + p]);
    }
    LLVMBuildStore(B, pdc_irb_i64(irb, 0), cv);
    LLVMBuildBr(B, cloop);

    /* one input channel: every tap, OB weight vectors against P broadcast pixels */
    LLVMPositionBuilderAtEnd(B, cloop);
    LLVMValueRef c = LLVMBuildLoad2(B, irb->i64, cv, "");
    LLVMValueRef x = pdc_irb_gep(irb, irb->f32, xr, LLVMBuildMul(B, c, pdc_irb_i64(irb, k->w.ps), ""));
    LLVMValueRef wc = pdc_irb_gep(irb, irb->f32, wg, LLVMBuildMul(B, c, pdc_irb_i64(irb, per_c), ""));
    LLVMValueRef cur[OC_MAX_ACC];
    for (int a = 0; a < ob * np; a++) cur[a] = LLVMBuildLoad2(B, irb->vf, acc[a], "");
    /* the weight stream, read once per tile row (from memory on the first) */
    cpu_conv_emit_weight_prefetch(irb, wc, per_c);
    /* a row of taps at a time, each input float loaded once: column e of phase ph feeds pixel
     * p = e - cx of every tap with that phase and column offset cx (explicit reuse, so LLVM keeps
     * just the row's weights and one broadcast live beside the accumulators) */
    for (int ky = 0; ky < k->w.kh; ky++) {
        LLVMValueRef w[64 * 4];
        for (int kx = 0; kx < k->w.kw; kx++)
            for (int b = 0; b < ob; b++)
                w[kx * ob + b] = pdc_irb_load_vec(irb, pdc_irb_gepc(irb, irb->f32, wc, ((int64_t)(ky * k->w.kw + kx) * ob + b) * vec));
        for (int64_t ph = 0; ph < k->w.sx; ph++) {
            int64_t cmax = -1;
            for (int kx = 0; kx < k->w.kw; kx++)
                if ((int64_t)kx * k->w.dx % k->w.sx == ph && (int64_t)kx * k->w.dx / k->w.sx > cmax) cmax = (int64_t)kx * k->w.dx / k->w.sx;
            for (int64_t e = 0; cmax >= 0 && e < np + cmax; e++) {
                LLVMValueRef xs = NULL;
                for (int kx = 0; kx < k->w.kw; kx++) {
                    int64_t cx = (int64_t)kx * k->w.dx / k->w.sx, p = e - cx;
                    if ((int64_t)kx * k->w.dx % k->w.sx != ph || p < 0 || p >= np) continue;
                    if (!xs) xs = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, x, ph * k->w.pstride + (int64_t)ky * k->w.dy * k->w.wq + e));
                    for (int b = 0; b < ob; b++) cur[b * np + p] = pdc_irb_fma(irb, w[kx * ob + b], xs, cur[b * np + p]);
                }
            }
        }
    }
    for (int a = 0; a < ob * np; a++) LLVMBuildStore(B, cur[a], acc[a]);
    LLVMValueRef c1 = LLVMBuildAdd(B, c, pdc_irb_i64(irb, 1), "");
    LLVMBuildStore(B, c1, cv);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, c1, pdc_irb_i64(irb, k->w.cg), ""), cloop, rend);

    /* epilogue of the row: each block's vectors (a pixel's channels each) turned, vec pixels at a
     * time, into vectors of one channel's pixels, then residual, activation and a contiguous
     * (masked) store into that channel's output row */
    LLVMPositionBuilderAtEnd(B, rend);
    LLVMValueRef roff = LLVMBuildMul(B, r, pdc_irb_i64(irb, k->w.ow), "");
    LLVMValueRef yr = pdc_irb_gep(irb, irb->f32, yt, roff);
    LLVMValueRef rr = k->residual ? pdc_irb_gep(irb, irb->f32, rt, roff) : NULL;
    for (int b = 0; b < ob; b++) {
        LLVMValueRef off[64];
        for (int l = 0; l < vec; l++)
            off[l] = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, oidx, LLVMBuildAdd(B, f0, pdc_irb_i64(irb, (int64_t)b * vec + l), "")));
        for (int p0 = 0; p0 < np; p0 += vec) {
            const int n = np - p0 < vec ? np - p0 : vec;
            LLVMValueRef t[64];
            for (int j = 0; j < vec; j++)
                t[j] = j < n ? LLVMBuildLoad2(B, irb->vf, acc[b * np + p0 + j], "") : LLVMGetUndef(irb->vf);
            ocv_transpose(irb, t);
            for (int l = 0; l < vec; l++) {
                LLVMValueRef v = t[l], at = LLVMBuildAdd(B, off[l], pdc_irb_i64(irb, p0), "");
                if (rr) v = LLVMBuildFAdd(B, v, pdc_irb_load_vec_n(irb, pdc_irb_gep(irb, irb->f32, rr, at), n), "");
                v = cpu_conv_emit_act(irb, &k->act, v);
                pdc_irb_store_vec(irb, v, pdc_irb_gep(irb, irb->f32, yr, at), n);
            }
        }
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, r, pdc_irb_i64(irb, 1), ""), rv);
    LLVMBuildBr(B, rhead);

    LLVMPositionBuilderAtEnd(B, gend);
    LLVMBuildStore(B, LLVMBuildAdd(B, gg, pdc_irb_i64(irb, 1), ""), gv);
    LLVMBuildBr(B, ghead);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMBuildRetVoid(B);
}

static pdc_status ocv_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                           LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const ocv_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    for (int v = 0; v < k->n_var; v++) ocv_emit_variant(&irb, k, prefix, v);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

/* ------------------------------------------------------------------ running */

static void ocv_tile(const void *arg, const float *xr, float *yn, const float *rn, int64_t tyi, int64_t txi, int64_t ch)
{
    const ocv_state *s = arg;
    const conv_geom *g = &s->g;
    int v = s->var_of[tyi == g->nty - 1][txi == g->ntx - 1];
    int64_t y0 = tyi * g->ty, x0 = txi * s->p;
    s->fn[v](xr + x0, s->w.wpk, s->w.bias, s->oidx, s->w.cbase, yn + y0 * g->ow + x0, rn ? rn + y0 * g->ow + x0 : NULL, ch,
             ch + 1);
}

static pdc_status ocv_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                          const cpu_exec *x)
{
    (void)m;
    const ocv_state *s = L->state;
    return cpu_conv_run_layer(L, l, buf, x, &s->g, s->w.n, ocv_tile, s);
}

/* ------------------------------------------------------------------ planning */

/* Lanes a row-vectorised kernel fills: along rows, or laid flat for small planes (conv_dense.c). */
static double row_lane_use(const conv_geom *g, int vec)
{
    int64_t nvx = (g->ow + vec - 1) / vec;
    double rows = (double)g->ow / (double)(nvx * vec);
    conv_geom gf = *g;
    if (cpu_conv_layout_flat(&gf, vec, 7)) {
        double flat = (double)(g->oh * g->ow) / (double)(gf.tx * vec);
        if (flat > rows) rows = flat;
    }
    return rows;
}

pdc_status cpu_plan_conv_ocvec(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g0,
                               const ir_fused_params *fp, cpu_layer *L)
{
    const pdc_llvm_target *t = cc->target;
    const int vec = t->vec;
    conv_geom g = *g0;
    const int64_t og = g.o / g.group, taps = g.kh * g.kw;
    /* whole blocks of filters per group; scatter offsets in 32 bits */
    if (og % vec || taps > 64 || g.o * g.oh * g.ow > INT32_MAX) return PDC_ERR_UNSUPPORTED;
    /* Tile: OB blocks x P pixels, the accumulators beside a row of taps' weights (OB * kw vectors)
     * and a broadcast in registers; the fewest pixels computed past the row's end, then the most
     * accumulators, then the most blocks (fewer broadcasts per FMA). */
    int bob = 0;
    int64_t bp = 0, bwaste = 0;
    for (int ob = 4; ob >= 1; ob--) {
        int64_t pmax = (t->n_vregs - ob * g.kw - 1) / ob;
        if (og % ((int64_t)ob * vec) || g.kw > 64) continue;
        if (pmax * ob > OC_MAX_ACC) pmax = OC_MAX_ACC / ob;
        for (int64_t p = pmax < g.ow ? pmax : g.ow; p >= 1; p--) {
            int64_t waste = (g.ow + p - 1) / p * p - g.ow;
            if (!bob || waste < bwaste || (waste == bwaste && p * ob > bp * bob)) bob = ob, bp = p, bwaste = waste;
        }
    }
    if (!bob) return PDC_ERR_UNSUPPORTED;
    /* taken where rows leave lanes idle: every lane is useful here, at the price of a broadcast per
     * input float and a scatter per output vector. So not for 1x1 windows (a broadcast per FMA and
     * block: ResNet-50's 64->256 1x1 at 56x56 took 1.19 ms against 0.53 along rows) nor for short
     * reductions (the scatters: ResNet-18's 64->128 1x1/2, 0.119 against 0.104 ms).
     * PDC_CONV_OCVEC=1/0 forces it on/off, for tuning experiments. */
    const char *force = getenv("PDC_CONV_OCVEC");
    double use = (double)g.ow / (double)((g.ow + bp - 1) / bp * bp);
    if (cc->knobs && cc->knobs->family == PDC_KNOB_OCVEC) {
        /* tuned so: taken wherever the tile fits */
    } else if (force && *force) {
        if (*force == '0') return PDC_ERR_UNSUPPORTED;
    } else if (taps < 2 || g.cg * taps < OC_MIN_REDUCTION || use < 1.05 * row_lane_use(&g, vec)) {
        return PDC_ERR_UNSUPPORTED;
    }
    /* rows: all of them in one tile (the weights stream once per tile), unless the packed input
     * outgrows L2 - then tiles of 4 rows, packed in bands */
    cpu_conv_layout(&g, (int)bp, 1, g.oh);
    if (g.c * g.ps * 4 > CONV_BAND_BYTES) {
        /* 4 rows a tile, or fewer where that gives each thread as many (a band's tiles run on one
         * thread: VGG conv4_1's 28 rows in 7 tiles left one of 2 threads 4 and the other 3) */
        int64_t ty = 4;
        while (ty > 2 && (g.oh + ty - 1) / ty % cc->threads) ty--;
        cpu_conv_layout(&g, (int)bp, 1, ty);
        cpu_conv_band(&g, (int)bp, CONV_BAND_BYTES, cc->threads);
    }

    pdc_context *ctx = cc->ctx;
    const float *w, *bias;
    cpu_conv_operands(cc, m, l, &w, &bias);
    ocv_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->g = g;
    s->p = bp;
    ocv_key *k = &s->key;
    memcpy(k->tag, "ocv6", 5);
    k->vec = vec;
    k->ob = bob;
    cpu_conv_key_window(&g, &k->w);
    /* a fused epilogue (its residual add, then its activation, become ours), then the activation
     * the kernel applies inline */
    ir_fused_params post = *fp;
    k->residual = cpu_plan_epilogue(cc, &post);
    k->act = cpu_conv_inline_act(&post);
    /* variants: full and last row tiles x full and last pixel tiles */
    int32_t rows[2] = {(int32_t)g.ty, (int32_t)(g.oh - (g.nty - 1) * g.ty)};
    int32_t cols[2] = {(int32_t)bp, (int32_t)(g.ow - (g.ntx - 1) * bp)};
    int nv = k->n_var = cpu_conv_tile_variants(&g, rows, cols, NULL, k->var_ty, k->var_p, NULL, s->var_of);

    /* weights [block group][channel][tap][OB * vec]; filters keep their stored order */
    pdc_status st = cpu_conv_blocks_make(ctx, &g, w, bias, (int64_t)bob * vec, &s->w);
    s->oidx = pdc_alloc(ctx, (size_t)g.o * sizeof *s->oidx);
    if (!st && !s->oidx) st = PDC_ERR_OUT_OF_MEMORY;
    for (int64_t o = 0; o < g.o && !st; o++) s->oidx[o] = (int32_t)((fp->out_perm ? fp->out_perm[o] : o) * g.oh * g.ow);
    static const char *const syms[OC_MAX_VARIANTS] = {"octile0", "octile1", "octile2", "octile3"};
    pdc_kernel_desc d = {k, sizeof *k, ocv_emit, k, (size_t)nv, syms};
    void *addrs[OC_MAX_VARIANTS] = {0};
    if (!st) st = pdc_jit_kernel(cc->jit, ctx, &d, addrs, NULL);
    if (st) {
        ocv_free(s);
        return st;
    }
    for (int v = 0; v < nv; v++) s->fn[v] = (ocv_fn)addrs[v];
    L->run = ocv_run;
    L->state = s;
    L->free_state = ocv_free;
    L->thread_floats = cpu_conv_thread_floats(&g);
    cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info,
             "jit dense conv %" PRId64 "x%" PRId64 "%s, output channels vectorised: tile %d filters x %" PRId64
             " pixels%s, %s",
             g.kh, g.kw, g.group > 1 ? " grouped" : "", bob * vec, bp, cpu_conv_band_info(&g), pdc_isa_name(t->isa));
    return PDC_OK;
}
