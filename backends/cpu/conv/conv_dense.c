/*
 * conv_dense.c - JIT'd dense convolution with several filters per register tile.
 *
 * When every kernel of a filter group is dense (no pattern to exploit) the filters of a conv group
 * share their input completely, so the register tile spans To filters x TY rows x TX vectors: per
 * input channel and tap, TY*TX input vectors are loaded once and each feeds To FMAs (one per
 * filter, weights broadcast), so loads per FMA fall to 1/To and the L2 traffic per FMA by To as
 * well - the GEMM micro-kernel shape, without im2col. The channel loop has a compile-time trip count
 * (the group's channels); weights are packed [filter group][channel][tap][To] in that order.
 * Input packing, tiling into row/column tiles with tail variants, the epilogue (bias, residual,
 * inline activation, out_perm, masked row tails) and the fixed work split are those of conv.c.
 * 1x1 convolutions are this kernel with one tap: a register-blocked GEMM over pixels.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

#define DC_MAX_VARIANTS 4
#define DC_MAX_ACC 28
#define DC_GROUP_CHUNK 2     /* filter groups per work item */

typedef struct dconv_key {
    char tag[8];             /* "dconvN": bump N when the generated code changes */
    int32_t vec, to;
    conv_kwin w;             /* flat: a small plane as one row of flat vectors (conv.h) */
    conv_act act;            /* inline activation (cpu_conv_inline_act) */
    int32_t residual;        /* rt added before the activation (ir_epilogue) */
    int32_t tail_loads;      /* the input read in place up to a row's end inside a vector: its loads masked */
    int32_t n_var;
    int32_t var_ty[DC_MAX_VARIANTS], var_tx[DC_MAX_VARIANTS], var_last[DC_MAX_VARIANTS];
} dconv_key;

typedef void (*dconv_fn)(const float *xt, const float *wpk, const float *bias, const int64_t *ochan,
                         const int64_t *cbase, float *yt, const float *rt, int64_t g0, int64_t g1);

typedef struct dconv_state {
    conv_geom g;
    dconv_key key;
    int var_of[2][2];
    dconv_fn fn[DC_MAX_VARIANTS];
    conv_blocks w;           /* weights and bias in blocks of To filters */
    int64_t *ochan;
} dconv_state;

static void dconv_free(void *p)
{
    dconv_state *s = p;
    if (!s) return;
    cpu_conv_blocks_release(&s->w);
    pdc_free(s->ochan);
    pdc_free(s);
}

/* ------------------------------------------------------------------ code generation */

static void dc_emit_variant(pdc_irb *irb, const dconv_key *k, const char *prefix, int var)
{
    LLVMBuilderRef B = irb->b;
    const int ty = k->var_ty[var], tx = k->var_tx[var], last = k->var_last[var], to = k->to;
    const int taps = k->w.kh * k->w.kw, na = ty * tx;
    char name[32];
    snprintf(name, sizeof name, "dtile%d", var);
    LLVMTypeRef params[9] = {irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->i64, irb->i64};
    LLVMValueRef fn = pdc_irb_function(irb, prefix, name, 9, params);
    LLVMValueRef xt = LLVMGetParam(fn, 0), wpk = LLVMGetParam(fn, 1), bias = LLVMGetParam(fn, 2),
                 ochan = LLVMGetParam(fn, 3), cbase = LLVMGetParam(fn, 4), yt = LLVMGetParam(fn, 5),
                 rt = LLVMGetParam(fn, 6), g0 = LLVMGetParam(fn, 7), g1 = LLVMGetParam(fn, 8);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(irb->c, fn, "entry"));
    LLVMValueRef acc[DC_MAX_ACC];
    for (int a = 0; a < to * na; a++) acc[a] = LLVMBuildAlloca(B, irb->vf, "acc");
    LLVMValueRef gv = LLVMBuildAlloca(B, irb->i64, "g"), cv = LLVMBuildAlloca(B, irb->i64, "c");
    LLVMBuildStore(B, g0, gv);
    LLVMBasicBlockRef ghead = LLVMAppendBasicBlockInContext(irb->c, fn, "group"),
                      gbody = LLVMAppendBasicBlockInContext(irb->c, fn, "group_body"),
                      cloop = LLVMAppendBasicBlockInContext(irb->c, fn, "channels"),
                      gend = LLVMAppendBasicBlockInContext(irb->c, fn, "group_end"),
                      done = LLVMAppendBasicBlockInContext(irb->c, fn, "done");
    LLVMBuildBr(B, ghead);
    LLVMPositionBuilderAtEnd(B, ghead);
    LLVMValueRef gg = LLVMBuildLoad2(B, irb->i64, gv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, gg, g1, ""), gbody, done);

    LLVMPositionBuilderAtEnd(B, gbody);
    LLVMValueRef f0 = LLVMBuildMul(B, gg, pdc_irb_i64(irb, to), "");
    for (int f = 0; f < to; f++) {
        LLVMValueRef bv = pdc_irb_load_splat(irb, pdc_irb_gep(irb, irb->f32, bias, LLVMBuildAdd(B, f0, pdc_irb_i64(irb, f), "")));
        for (int a = 0; a < na; a++) LLVMBuildStore(B, bv, acc[f * na + a]);
    }
    LLVMValueRef cb = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, cbase, gg));
    LLVMValueRef xg = pdc_irb_gep(irb, irb->f32, xt, LLVMBuildMul(B, cb, pdc_irb_i64(irb, k->w.ps), ""));
    LLVMValueRef wg = pdc_irb_gep(irb, irb->f32, wpk, LLVMBuildMul(B, gg, pdc_irb_i64(irb, k->w.cg * taps * to), ""));
    LLVMBuildStore(B, pdc_irb_i64(irb, 0), cv);
    LLVMBuildBr(B, cloop);

    /* one input channel: every tap, To filters */
    LLVMPositionBuilderAtEnd(B, cloop);
    LLVMValueRef c = LLVMBuildLoad2(B, irb->i64, cv, "");
    LLVMValueRef x = pdc_irb_gep(irb, irb->f32, xg, LLVMBuildMul(B, c, pdc_irb_i64(irb, k->w.ps), ""));
    LLVMValueRef wc = pdc_irb_gep(irb, irb->f32, wg, LLVMBuildMul(B, c, pdc_irb_i64(irb, taps * to), ""));
    LLVMValueRef cur[DC_MAX_ACC];
    for (int a = 0; a < to * na; a++) cur[a] = LLVMBuildLoad2(B, irb->vf, acc[a], "");
    /* the weight stream, read once per tile */
    cpu_conv_emit_weight_prefetch(irb, wc, (int64_t)taps * to);
    for (int ky = 0; ky < k->w.kh; ky++)
        for (int kx = 0; kx < k->w.kw; kx++) {
            int64_t phase = (int64_t)kx * k->w.dx % k->w.sx, cx = (int64_t)kx * k->w.dx / k->w.sx;
            LLVMValueRef v[DC_MAX_ACC];
            for (int i = 0; i < ty; i++)
                for (int j = 0; j < tx; j++) {
                    int64_t off = k->w.flat ? cpu_conv_flat_offset(k->w.sy, k->w.sx, k->w.dy, k->w.dx, k->w.wq, k->w.pstride, ky, kx) +
                                                (int64_t)j * k->vec
                                          : phase * k->w.pstride + ((int64_t)i * k->w.sy + (int64_t)ky * k->w.dy) * k->w.wq + cx +
                                                (int64_t)j * k->vec;
                    LLVMValueRef at = pdc_irb_gepc(irb, irb->f32, x, off);
                    v[i * tx + j] = k->tail_loads && j == tx - 1 ? pdc_irb_load_vec_n(irb, at, last) : pdc_irb_load_vec(irb, at);
                }
            int tap = ky * k->w.kw + kx;
            for (int f = 0; f < to; f++) {
                LLVMValueRef w = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, wc, (int64_t)tap * to + f));
                for (int a = 0; a < na; a++) cur[f * na + a] = pdc_irb_fma(irb, w, v[a], cur[f * na + a]);
            }
        }
    for (int a = 0; a < to * na; a++) LLVMBuildStore(B, cur[a], acc[a]);
    LLVMValueRef c1 = LLVMBuildAdd(B, c, pdc_irb_i64(irb, 1), "");
    LLVMBuildStore(B, c1, cv);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, c1, pdc_irb_i64(irb, k->w.cg), ""), cloop, gend);

    /* epilogue: each filter to its output channel, after its residual channel and activation */
    LLVMPositionBuilderAtEnd(B, gend);
    for (int f = 0; f < to; f++) {
        LLVMValueRef oc = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, ochan, LLVMBuildAdd(B, f0, pdc_irb_i64(irb, f), "")));
        LLVMValueRef ooff = LLVMBuildMul(B, oc, pdc_irb_i64(irb, k->w.ohw), "");
        LLVMValueRef yk = pdc_irb_gep(irb, irb->f32, yt, ooff);
        LLVMValueRef rk = k->residual ? pdc_irb_gep(irb, irb->f32, rt, ooff) : NULL;
        if (k->w.flat) {
            /* vector j holds flat pixels j*vec + lane = (y, x) with x < ow valid: a masked store per row */
            for (int j = 0; j < tx; j++)
                cpu_conv_emit_flat_store(irb, LLVMBuildLoad2(B, irb->vf, acc[f * na + j], ""), yk, rk, &k->act,
                                         (int64_t)j * k->vec, k->w.wq, k->w.ow, k->w.oh);
        } else {
            for (int i = 0; i < ty; i++)
                for (int j = 0; j < tx; j++)
                    cpu_conv_emit_row_store(irb, LLVMBuildLoad2(B, irb->vf, acc[f * na + i * tx + j], ""), yk, rk, &k->act,
                                            (int64_t)i * k->w.ow + (int64_t)j * k->vec, j == tx - 1 ? last : k->vec);
        }
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, gg, pdc_irb_i64(irb, 1), ""), gv);
    LLVMBuildBr(B, ghead);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMBuildRetVoid(B);
}

static pdc_status dc_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                          LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const dconv_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    for (int v = 0; v < k->n_var; v++) dc_emit_variant(&irb, k, prefix, v);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

/* ------------------------------------------------------------------ running */

static void dconv_tile(const void *arg, const float *xr, float *yn, const float *rn, int64_t tyi, int64_t txi,
                       int64_t ch)
{
    const dconv_state *s = arg;
    const conv_geom *g = &s->g;
    int v = s->var_of[tyi == g->nty - 1][txi == g->ntx - 1];
    int64_t y0 = tyi * g->ty, x0 = txi * g->tx * s->key.vec;
    int64_t a = ch * DC_GROUP_CHUNK, b = a + DC_GROUP_CHUNK < s->w.n ? a + DC_GROUP_CHUNK : s->w.n;
    s->fn[v](xr + x0, s->w.wpk, s->w.bias, s->ochan, s->w.cbase, yn + y0 * g->ow + x0, rn ? rn + y0 * g->ow + x0 : NULL, a, b);
}

static pdc_status dconv_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                            const cpu_exec *x)
{
    (void)m;
    const dconv_state *s = L->state;
    return cpu_conv_run_layer(L, l, buf, x, &s->g, (s->w.n + DC_GROUP_CHUNK - 1) / DC_GROUP_CHUNK, dconv_tile, s);
}

/* ------------------------------------------------------------------ planning */

pdc_status cpu_plan_conv_dense(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g0,
                               const ir_fused_params *fp, cpu_layer *L)
{
    const pdc_llvm_target *t = cc->target;
    conv_geom g = *g0;
    const int64_t og = g.o / g.group, taps = g.kh * g.kw;
    if (og < 2 || taps > 64) return PDC_ERR_UNSUPPORTED;
    /* A 1x1 conv at stride 1 without padding is a product over pixels whatever the plane's shape: as one
     * row of h*w pixels its tiles run along the whole plane (a 56x56 plane's rows of 3.5 vectors wasted an
     * eighth of every FMA), and where that row is whole vectors the input is read in place. Planes small
     * enough for the flat layout keep it. */
    const int pointwise = taps == 1 && g.py == 1 && g.px == 1 && g.pt == 0 && g.pl == 0 && g.oh == g.h && g.ow == g.w &&
                          g.ow * 2 > t->vec;
    if (pointwise) {
        g.w = g.ow = g.h * g.w;
        g.h = g.oh = 1;
    }
    /* Tile: To filters (dividing the group's filters) x TY rows x TX vectors, with the loaded
     * vectors and one weight also in registers: (To + 1) * TY * TX + 1 <= registers. Most FMAs per
     * tile first, then the most filters (fewest loads). */
    int regs = t->n_vregs, best = 0, bto = 1, bty = 1, btx = 1;
    int64_t nvx = (g.ow + t->vec - 1) / t->vec;
    for (int to = 8; to >= 2; to--) {
        if (og % to) continue;
        for (int tx = 1; tx <= 7 && tx <= nvx; tx++)
            for (int ty = 1; ty <= 7 && ty <= g.oh; ty++) {
                int n = to * ty * tx;
                if ((to + 1) * ty * tx + 1 > regs || n > DC_MAX_ACC) continue;
                /* equal: the first found is the tallest (the rows of a tile share input rows at
                 * stride 1); at larger row strides the widest wins (ResNet's 7x7/2 stem: 3 vectors
                 * across 1.07 ms, 3 rows 1.38 ms) */
                int wider = g.sy > 1 && tx > btx;
                if (n > best || (n == best && (to > bto || (to == bto && wider)))) best = n, bto = to, bty = ty, btx = tx;
            }
    }
    if (best == 0 || best < 6) return PDC_ERR_UNSUPPORTED; /* e.g. a prime number of filters per group */
    conv_geom gf = g;
    if (cpu_conv_layout_flat(&gf, t->vec, 7)) {
        /* a small plane: all of it in TX flat vectors, as many filters as then fit */
        int fto = 0;
        for (int to = 8; to >= 2; to--)
            if (og % to == 0 && (to + 1) * gf.tx + 1 <= regs && to * gf.tx <= DC_MAX_ACC) {
                fto = to;
                break;
            }
        /* flat when it wastes clearly fewer lanes than vectors along rows */
        double row_eff = (double)g.ow / (double)(nvx * t->vec);
        double flat_eff = (double)(g.oh * g.ow) / (double)(gf.tx * t->vec);
        if (fto && flat_eff > 1.3 * row_eff) g = gf, bto = fto;
    }
    int tail_loads = 0;
    if (!g.flat) {
        cpu_conv_layout(&g, t->vec, btx, bty);
        g.in_place = cpu_conv_input_in_place(&g);
        if (!g.in_place && pointwise && g.nty == 1) {
            /* a plane of pixels that ends inside a vector (14x14: 196): read in place all the same, the
             * last vector's loads masked, so nothing past the plane is read */
            g.ps = g.pstride = g.w;
            g.in_place = tail_loads = 1;
        }
        if (!g.in_place) cpu_conv_band(&g, t->vec, CONV_BAND_BYTES, cc->threads);
    }

    pdc_context *ctx = cc->ctx;
    const float *w, *bias;
    cpu_conv_operands(cc, m, l, &w, &bias);
    dconv_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->g = g;
    dconv_key *k = &s->key;
    memset(k, 0, sizeof *k);
    memcpy(k->tag, "dconv10", 8);
    k->vec = t->vec;
    k->to = bto;
    k->tail_loads = tail_loads;
    cpu_conv_key_window(&g, &k->w);
    /* a fused epilogue (its residual add, then its activation, become ours), then the activation
     * the kernel applies inline */
    ir_fused_params post = *fp;
    k->residual = cpu_plan_epilogue(cc, &post);
    k->act = cpu_conv_inline_act(&post);
    int nv = k->n_var = cpu_conv_row_variants(&g, t->vec, k->var_ty, k->var_tx, k->var_last, s->var_of);

    /* weights [filter group][channel][tap][To]; filters keep their stored order */
    pdc_status st = cpu_conv_blocks_make(ctx, &g, w, bias, bto, &s->w);
    s->ochan = pdc_alloc(ctx, (size_t)g.o * sizeof *s->ochan);
    if (!st && !s->ochan) st = PDC_ERR_OUT_OF_MEMORY;
    for (int64_t o = 0; o < g.o && !st; o++) s->ochan[o] = fp->out_perm ? fp->out_perm[o] : o;
    static const char *const syms[DC_MAX_VARIANTS] = {"dtile0", "dtile1", "dtile2", "dtile3"};
    pdc_kernel_desc d = {k, sizeof *k, dc_emit, k, (size_t)nv, syms};
    void *addrs[DC_MAX_VARIANTS] = {0};
    if (!st) st = pdc_jit_kernel(cc->jit, ctx, &d, addrs, NULL);
    if (st) {
        dconv_free(s);
        return st;
    }
    for (int v = 0; v < nv; v++) s->fn[v] = (dconv_fn)addrs[v];
    L->run = dconv_run;
    L->state = s;
    L->free_state = dconv_free;
    L->thread_floats = cpu_conv_thread_floats(&g);
    cpu_take_epilogue(cc, L);
    if (g.flat)
        snprintf(L->info, sizeof L->info, "jit dense conv %" PRId64 "x%" PRId64 "%s, tile %d filters x plane as %" PRId64
                 " flat vectors, %s", g.kh, g.kw, g.group > 1 ? " grouped" : "", bto, g.tx, pdc_isa_name(t->isa));
    else
        snprintf(L->info, sizeof L->info,
                 "jit dense conv %" PRId64 "x%" PRId64 "%s, tile %d filters x %" PRId64 "x%" PRId64 "x%d%s, %s", g.kh, g.kw,
                 g.group > 1 ? " grouped" : "", bto, g.ty, g.tx, t->vec, cpu_conv_band_info(&g), pdc_isa_name(t->isa));
    return PDC_OK;
}
