/*
 * conv.c - JIT'd direct convolution, specialised on the layer's sparsity patterns.
 *
 * A pattern-pruned conv is  out[o] = sum over kept (c, tap) of w[o,c,tap] * shift_tap(in[c]).
 * Per layer and per pattern, the generator emits code whose tap offsets are constants:
 *
 *  - Input packing (each run, conv_pack.c): every input channel is copied into zero-padded planes
 *    with a row stride Wq that is a multiple of 16 and just wide enough for the columns valid outputs read; a
 *    column stride sx > 1 is split into sx phase planes (the stride of a one-tap axis is taken by the
 *    packing instead), so every tap becomes (phase, constant row offset, constant column offset) and
 *    output pixels along a row are contiguous vectors whatever the stride or dilation. An input whose
 *    packed form outgrows half of L2 is packed and computed in row bands, a buffer per thread
 *    (cpu_conv_run_image, shared with conv_dense.c).
 *  - Register tile: TY output rows x TX vectors of one output channel stay in registers. For each
 *    kept kernel, the pattern's code loads each input row vector once and uses it for every tap
 *    that falls in the tile (rows q = i*sy + ky*dy coincide for different (i, ky)): load-redundancy
 *    elimination. With AVX-512 ("shift mode", emit_shift_body) rows are loaded as aligned vectors
 *    and every column is shuffled out of them, so one load serves all columns as well; elsewhere
 *    each column loads its own unaligned vectors. Weights are broadcast once per kernel.
 *  - Filter-kernel reorder: filters run in order of decreasing kernel count (balanced chunks,
 *    similar loop trip counts back to back); within a filter its kernels are grouped by pattern, so
 *    each pattern's loop runs its kernels together; weights are packed in exactly that order, so
 *    the weight stream is sequential. out_perm and our own order are both undone on the store.
 *  - Each kernel prefetches the first line of every row a later kernel reads (its channel is data,
 *    so the hardware prefetcher cannot follow; CONV_PREFETCH_VECTORS of work ahead), and a line of
 *    the weight stream 8 KiB ahead.
 *  - Small planes (row stride 1, at most 7 vectors): rows laid end to end, every tap one offset over
 *    the whole plane, accumulation split over 16 chains (conv.h). Rows share their zero padding
 *    where the stride allows (a 7x7 plane's rows are 8 floats), and a lead chosen over all kernels
 *    weighs shuffles against cache lines read; each pattern prefetches just the lines it reads.
 *  - Epilogue: bias (the accumulators start at it), the residual add and the activation inline
 *    (pdc_irb_act: any fused activation), masked stores for the last partial vector of a row.
 *
 * Layers whose every kernel is dense go to conv_dense.c (several filters per tile) when it takes
 * them; otherwise they run here with one pattern covering the whole window. Unstructured or block
 * sparsity on a conv becomes per-kernel masks (distinct masks are the patterns; more than
 * CONV_MAX_PATTERNS distinct masks run as dense windows with the zeros). Work is split into (tile,
 * filter chunk) items of fixed size, so every output element is computed by one call in one fixed
 * order: results do not depend on the thread count.
 */
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"

typedef void (*conv_tile_fn)(const float *xt, const int64_t *meta, const int32_t *cidx, const float *wpk,
                             const float *bias, const int64_t *ochan, float *yt, const float *rt, int64_t k0, int64_t k1);

typedef struct conv_state {
    cpu_conv_plan p;             /* geometry, key, packed arrays (conv.h) */
    conv_tile_fn fn[CONV_MAX_VARIANTS];
} conv_state;

void cpu_conv_plan_release(cpu_conv_plan *p)
{
    pdc_free(p->kmask);
    pdc_free(p->meta);
    pdc_free(p->cidx);
    pdc_free(p->wpk);
    pdc_free(p->bias);
    pdc_free(p->ochan);
    memset(p, 0, sizeof *p);
}

static void conv_free(void *p)
{
    conv_state *s = p;
    if (!s) return;
    cpu_conv_plan_release(&s->p);
    pdc_free(s);
}

/* Branch-free and inline: baseline x86-64 has no popcnt instruction, and planning counts the kept taps of
 * every kernel (a million 1x1 kernels in a block-pruned ResNet-50 layer). */
static inline __attribute__((always_inline)) int popcount64(uint64_t v)
{
    v -= v >> 1 & 0x5555555555555555ull;
    v = (v & 0x3333333333333333ull) + (v >> 2 & 0x3333333333333333ull);
    v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)(v * 0x0101010101010101ull >> 56);
}

/* ------------------------------------------------------------------ code generation */

typedef struct conv_gen {
    pdc_irb irb;
    const conv_key *k;
    LLVMValueRef fn;
    LLVMValueRef acc[32];        /* allocas, [i * tx + j] */
    int oom;                     /* a generator table could not be allocated: the emit fails */
} conv_gen;

static LLVMValueRef acc_load(conv_gen *G, int idx) { return LLVMBuildLoad2(G->irb.b, G->irb.vf, G->acc[idx], ""); }
static void acc_store(conv_gen *G, int idx, LLVMValueRef v) { LLVMBuildStore(G->irb.b, v, G->acc[idx]); }

/* Does tap (ky, kx) feed output row r/sy of a ty-row tile from input row q? Returns the row or -1. */
static int tap_row(const conv_key *k, int ty, int64_t q, int ky)
{
    int64_t r = q - (int64_t)ky * k->w.dy;
    return r >= 0 && r % k->w.sy == 0 && r / k->w.sy < ty ? (int)(r / k->w.sy) : -1;
}

/* The vector at float e + base of x, from the aligned vectors A[i] (at base + 16i, loaded on first
 * use): as loaded when e is a multiple of 16, else one lane shuffle (valignd) of two of them. */
static LLVMValueRef aligned_at(pdc_irb *irb, LLVMValueRef *A, LLVMValueRef x, int64_t base, int64_t e)
{
    int64_t v0 = e / 16, sh = e % 16;
    for (int64_t vi = v0; vi <= v0 + (sh ? 1 : 0); vi++)
        if (!A[vi]) A[vi] = pdc_irb_load_vec(irb, pdc_irb_gepc(irb, irb->f32, x, base + vi * 16));
    if (!sh) return A[v0];
    /* valignd, as inline asm: LLVM lowers the equivalent shufflevector to vpermt2ps, which
     * overwrites a source (a register copy per shuffle) and is slower on Zen 5 */
    char text[48];
    snprintf(text, sizeof text, "valignd $$%d, $1, $2, $0", (int)sh);
    LLVMTypeRef ft = LLVMFunctionType(irb->vf, (LLVMTypeRef[]){irb->vf, irb->vf}, 2, 0);
    LLVMValueRef asmv = LLVMGetInlineAsm(ft, text, strlen(text), "=v,v,v", 6, 0, 0, LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(irb->b, ft, asmv, (LLVMValueRef[]){A[v0], A[v0 + 1]}, 2, "");
}

/* The reads of one kernel of pattern `mask` over a flat plane in shift mode: marks in `line` the
 * aligned 16-float vectors it loads (its cache lines) and returns how many vectors it shuffles out
 * of them. Planning weighs both to choose the lead; the kernel prefetches exactly those lines. */
static int64_t flat_shift_reads(int kh, int kw, int sy, int sx, int dy, int dx, int64_t wq, int64_t pstride, int64_t nv,
                                int64_t lead, uint64_t mask, uint8_t *line)
{
    int64_t shuffles = 0, seen[CONV_MAX_TAPS * 8];
    int n_seen = 0;
    for (int b = 0; b < kh * kw; b++) {
        if (!(mask >> b & 1)) continue;
        int64_t off = lead + cpu_conv_flat_offset(sy, sx, dy, dx, wq, pstride, b / kw, b % kw);
        for (int64_t j = 0; j < nv; j++) {
            int64_t e = off + j * 16, dup = 0;
            line[e / 16] = 1;
            if (e % 16 == 0) continue;
            line[e / 16 + 1] = 1;
            for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == e;
            if (!dup && n_seen < (int)(sizeof seen / sizeof *seen)) seen[n_seen++] = e;
            shuffles += !dup;
        }
    }
    return shuffles;
}

/*
 * Shift mode (AVX-512): each input row a kernel needs is loaded once as aligned vectors A[i] (16 floats
 * at column 16i of the tile's row), and a column offset e = lead + cx that is not a multiple of 16 is
 * taken out of two of them with one lane shuffle (valignd): an unaligned 512-bit load spans two cache
 * lines and costs two load slots, the shuffle runs beside the FMAs. Every column of the pattern then
 * reuses the row's loads (load-redundancy elimination across columns as well as rows).
 */
static void emit_shift_body(conv_gen *G, uint64_t mask, int ty, int tx, LLVMValueRef x, LLVMValueRef w,
                            const int *widx, LLVMValueRef *cur)
{
    const conv_key *k = G->k;
    pdc_irb *irb = &G->irb;
    enum { MAXV = CONV_SHIFT_MAX_VECTORS };
    LLVMValueRef wv[CONV_MAX_TAPS];
    int max_ky = 0;
    for (int b = 0; b < k->w.kh * k->w.kw; b++)
        if (widx[b] >= 0) {
            wv[b] = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, w, widx[b]));
            if (b / k->w.kw > max_ky) max_ky = b / k->w.kw;
        }
    int64_t qmax = (int64_t)(ty - 1) * k->w.sy + (int64_t)max_ky * k->w.dy;
    for (int64_t q = 0; q <= qmax; q++) {
        LLVMValueRef A[8][MAXV]; /* [phase][vector] of row q, loaded on first use */
        memset(A, 0, sizeof A);
        for (int kx = 0; kx < k->w.kw; kx++) {
            int rows[CONV_MAX_TAPS], any = 0;
            for (int ky = 0; ky < k->w.kh; ky++) {
                rows[ky] = mask >> (ky * k->w.kw + kx) & 1 ? tap_row(k, ty, q, ky) : -1;
                any |= rows[ky] >= 0;
            }
            if (!any) continue;
            int64_t phase = (int64_t)kx * k->w.dx % k->w.sx, e = k->lead + (int64_t)kx * k->w.dx / k->w.sx;
            for (int j = 0; j < tx; j++) {
                LLVMValueRef v = aligned_at(irb, A[phase], x, phase * k->w.pstride + q * k->w.wq, e + (int64_t)j * 16);
                for (int ky = 0; ky < k->w.kh; ky++) {
                    if (rows[ky] < 0) continue;
                    int a = rows[ky] * tx + j;
                    cur[a] = pdc_irb_fma(irb, wv[ky * k->w.kw + kx], v, cur[a]);
                }
            }
        }
    }
}

/* The body of one kernel of pattern `mask`: x points at the kernel's input channel (tile origin),
 * w at its weights (popcount(mask) floats, in tap order). */
static void emit_pattern_body(conv_gen *G, uint64_t mask, int ty, int tx, LLVMValueRef x, LLVMValueRef w)
{
    const conv_key *k = G->k;
    pdc_irb *irb = &G->irb;
    /* weight index of every tap (taps in mask order); a column's weights are broadcast just before
     * the column is processed, so only that column's weights compete with the tile for registers */
    int widx[CONV_MAX_TAPS];
    LLVMValueRef wv[CONV_MAX_TAPS];
    int t = 0;
    for (int b = 0; b < k->w.kh * k->w.kw; b++) widx[b] = mask >> b & 1 ? t++ : -1;
    LLVMValueRef cur[32];
    for (int a = 0; a < ty * tx * k->ksets; a++) cur[a] = acc_load(G, a);
    if (k->w.flat) {
        /* every tap one constant offset over the flattened plane; the t-th tap accumulates into
         * set t % ksets (more independent FMA chains than vectors); equal loads are merged by CSE */
        int tn = 0;
        /* shift mode: the plane's aligned vectors, each loaded once for every tap that reads it,
         * and each shuffled vector once (taps a row pair apart, 16 floats, share all but one); every
         * offset read is below ps + tail (the last plane's reads) */
        LLVMValueRef *A = NULL, *S = NULL;
        if (k->shift) {
            A = calloc((size_t)((k->w.ps + k->w.tail) / 16 + 2), sizeof *A);
            S = calloc((size_t)(k->w.ps + k->w.tail + 16), sizeof *S);
            if (!A || !S) {
                free(A);
                free(S);
                G->oom = 1;
                return;
            }
        }
        for (int b = 0; b < k->w.kh * k->w.kw; b++) {
            if (widx[b] < 0) continue;
            int ky = b / k->w.kw, kx = b % k->w.kw;
            LLVMValueRef w1 = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, w, widx[b]));
            int64_t off = cpu_conv_flat_offset(k->w.sy, k->w.sx, k->w.dy, k->w.dx, k->w.wq, k->w.pstride, ky, kx);
            int set = tn++ % k->ksets;
            for (int j = 0; j < tx; j++) {
                LLVMValueRef v;
                if (A) {
                    int64_t e = k->lead + off + (int64_t)j * 16;
                    if (!S[e]) S[e] = aligned_at(irb, A, x, 0, e);
                    v = S[e];
                } else {
                    v = pdc_irb_load_vec(irb, pdc_irb_gepc(irb, irb->f32, x, off + (int64_t)j * k->vec));
                }
                int a = set * tx + j;
                cur[a] = pdc_irb_fma(irb, w1, v, cur[a]);
            }
        }
        free(A);
        free(S);
        for (int a = 0; a < tx * k->ksets; a++) acc_store(G, a, cur[a]);
        return;
    }
    if (k->shift) {
        emit_shift_body(G, mask, ty, tx, x, w, widx, cur);
        for (int a = 0; a < ty * tx; a++) acc_store(G, a, cur[a]);
        return;
    }
    for (int kx = 0; kx < k->w.kw; kx++) {
        int has = 0, max_ky = -1;
        for (int ky = 0; ky < k->w.kh; ky++)
            if (mask >> (ky * k->w.kw + kx) & 1) {
                has = 1;
                max_ky = ky;
            }
        if (!has) continue;
        for (int ky = 0; ky < k->w.kh; ky++) {
            int b = ky * k->w.kw + kx;
            if (widx[b] >= 0) wv[b] = pdc_irb_load_splat(irb, pdc_irb_gepc(irb, irb->f32, w, widx[b]));
        }
        int64_t phase = (int64_t)kx * k->w.dx % k->w.sx, cx = (int64_t)kx * k->w.dx / k->w.sx;
        int64_t qmax = (int64_t)(ty - 1) * k->w.sy + (int64_t)max_ky * k->w.dy;
        /* every input row q the tile needs for this column, in order; each loaded once */
        for (int64_t q = 0; q <= qmax; q++) {
            int used = 0;
            for (int ky = 0; ky < k->w.kh && !used; ky++) {
                if (!(mask >> (ky * k->w.kw + kx) & 1)) continue;
                int64_t r = q - (int64_t)ky * k->w.dy;
                if (r >= 0 && r % k->w.sy == 0 && r / k->w.sy < ty) used = 1;
            }
            if (!used) continue;
            for (int j = 0; j < tx; j++) {
                int64_t off = phase * k->w.pstride + q * k->w.wq + cx + (int64_t)j * k->vec;
                LLVMValueRef v = pdc_irb_load_vec(irb, pdc_irb_gepc(irb, irb->f32, x, off));
                for (int ky = 0; ky < k->w.kh; ky++) {
                    if (!(mask >> (ky * k->w.kw + kx) & 1)) continue;
                    int64_t r = q - (int64_t)ky * k->w.dy;
                    if (r < 0 || r % k->w.sy || r / k->w.sy >= ty) continue;
                    int a = (int)(r / k->w.sy) * tx + j;
                    cur[a] = pdc_irb_fma(irb, wv[ky * k->w.kw + kx], v, cur[a]);
                }
            }
        }
    }
    for (int a = 0; a < ty * tx; a++) acc_store(G, a, cur[a]);
}

LLVMValueRef cpu_conv_emit_act(pdc_irb *irb, const conv_act *a, LLVMValueRef v)
{
    ir_fused_params p = {.act = (ir_act_kind)a->act, .act_min = a->act_min, .act_max = a->act_max,
                         .act_alpha = a->act_alpha};
    return pdc_irb_act(irb, &p, v);
}

conv_act cpu_conv_inline_act(const ir_fused_params *fp)
{
    conv_act a = {(int32_t)fp->act, 0.0f, 0.0f, 0.0f};
    /* only the parameters the activation reads: equal kernels get equal keys */
    a.act_min = fp->act == IR_ACT_CLIP ? fp->act_min : 0.0f;
    a.act_max = fp->act == IR_ACT_CLIP ? fp->act_max : 0.0f;
    a.act_alpha = fp->act == IR_ACT_LEAKY_RELU ? fp->act_alpha : 0.0f;
    return a;
}

void cpu_conv_emit_flat_store(pdc_irb *irb, LLVMValueRef v, LLVMValueRef yk, LLVMValueRef rk, const conv_act *a,
                              int64_t p0, int64_t wq, int64_t ow, int64_t rows)
{
    LLVMBuilderRef B = irb->b;
    if (!rk) v = cpu_conv_emit_act(irb, a, v);
    for (int64_t y = p0 / wq; y < rows && y * wq < p0 + irb->vec; y++) {
        LLVMValueRef lanes[64];
        int any = 0;
        for (int l = 0; l < irb->vec; l++) {
            int64_t p = p0 + l;
            int on = p >= y * wq && p < y * wq + ow;
            any |= on;
            lanes[l] = LLVMConstInt(irb->i1, (unsigned long long)on, 0);
        }
        if (!any) continue;
        LLVMValueRef mask = LLVMConstVector(lanes, (unsigned)irb->vec);
        LLVMValueRef off = pdc_irb_i64(irb, p0 + y * (ow - wq));
        LLVMValueRef dst = LLVMBuildGEP2(B, irb->f32, yk, &off, 1, ""); /* may point before yk: not inbounds */
        LLVMValueRef w = v;
        if (rk) {
            /* the residual's pixels of this row, read under the same mask as the store */
            LLVMValueRef src = LLVMBuildGEP2(B, irb->f32, rk, &off, 1, "");
            w = LLVMBuildFAdd(B, v, pdc_irb_load_masked(irb, src, mask), "");
            w = cpu_conv_emit_act(irb, a, w);
        }
        pdc_irb_store_masked(irb, w, dst, mask);
    }
}

void cpu_conv_emit_row_store(pdc_irb *irb, LLVMValueRef v, LLVMValueRef yk, LLVMValueRef rk, const conv_act *a,
                             int64_t off, int n)
{
    if (rk) v = LLVMBuildFAdd(irb->b, v, pdc_irb_load_vec_n(irb, pdc_irb_gepc(irb, irb->f32, rk, off), n), "");
    pdc_irb_store_vec(irb, cpu_conv_emit_act(irb, a, v), pdc_irb_gepc(irb, irb->f32, yk, off), n);
}

/* One tile function: loops over filters k0..k1, each over its patterns' kernel lists. */
static void emit_variant(conv_gen *G, const char *prefix, int var)
{
    const conv_key *k = G->k;
    pdc_irb *irb = &G->irb;
    LLVMBuilderRef B = irb->b;
    int ty = k->var_ty[var], tx = k->var_tx[var], last = k->var_last[var];
    char name[32];
    snprintf(name, sizeof name, "tile%d", var);
    LLVMTypeRef params[10] = {irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->ptr, irb->i64, irb->i64};
    LLVMValueRef fn = pdc_irb_function(irb, prefix, name, 10, params);
    G->fn = fn;
    LLVMValueRef xt = LLVMGetParam(fn, 0), meta = LLVMGetParam(fn, 1), cidx = LLVMGetParam(fn, 2),
                 wpk = LLVMGetParam(fn, 3), bias = LLVMGetParam(fn, 4), ochan = LLVMGetParam(fn, 5),
                 yt = LLVMGetParam(fn, 6), rt = LLVMGetParam(fn, 7), k0 = LLVMGetParam(fn, 8), k1 = LLVMGetParam(fn, 9);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(irb->c, fn, "entry");
    LLVMPositionBuilderAtEnd(B, entry);
    const int nacc = ty * tx * k->ksets, ahead = ty * tx >= CONV_PREFETCH_VECTORS ? 1 : CONV_PREFETCH_VECTORS / (ty * tx);
    for (int a = 0; a < nacc; a++) G->acc[a] = LLVMBuildAlloca(B, irb->vf, "acc");
    LLVMValueRef kv = LLVMBuildAlloca(B, irb->i64, "k");
    LLVMValueRef iv = LLVMBuildAlloca(B, irb->i64, "i");
    LLVMValueRef wpv = LLVMBuildAlloca(B, irb->ptr, "wp");
    LLVMBuildStore(B, k0, kv);
    LLVMBasicBlockRef fhead = LLVMAppendBasicBlockInContext(irb->c, fn, "filter");
    LLVMBasicBlockRef fbody = LLVMAppendBasicBlockInContext(irb->c, fn, "filter_body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(irb->c, fn, "done");
    LLVMBuildBr(B, fhead);
    LLVMPositionBuilderAtEnd(B, fhead);
    LLVMValueRef kk = LLVMBuildLoad2(B, irb->i64, kv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, kk, k1, ""), fbody, done);

    LLVMPositionBuilderAtEnd(B, fbody);
    LLVMValueRef b0 = pdc_irb_load_splat(irb, pdc_irb_gep(irb, irb->f32, bias, kk));
    for (int a = 0; a < nacc; a++) acc_store(G, a, a < ty * tx ? b0 : LLVMConstNull(irb->vf));
    LLVMValueRef mrow = pdc_irb_gep(irb, irb->i64, meta, LLVMBuildMul(B, kk, pdc_irb_i64(irb, 2 * k->n_pat + 1), ""));
    for (int p = 0; p < k->n_pat; p++) {
        uint64_t mask = k->pat[p];
        int nt = popcount64(mask);
        LLVMValueRef lo = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, mrow, p));
        LLVMValueRef hi = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, mrow, p + 1));
        LLVMValueRef wst = pdc_irb_load_i64(irb, pdc_irb_gepc(irb, irb->i64, mrow, k->n_pat + 1 + p));
        LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(irb->c, fn, "kernels");
        LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(irb->c, fn, "next_pattern");
        LLVMBuildStore(B, lo, iv);
        LLVMBuildStore(B, pdc_irb_gep(irb, irb->f32, wpk, wst), wpv);
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, lo, hi, ""), loop, after);
        LLVMPositionBuilderAtEnd(B, loop);
        LLVMValueRef i = LLVMBuildLoad2(B, irb->i64, iv, "");
        LLVMValueRef wp = LLVMBuildLoad2(B, irb->ptr, wpv, "");
        LLVMValueRef c = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, cidx, i));
        LLVMValueRef x = pdc_irb_gep(irb, irb->f32, xt, LLVMBuildMul(B, c, pdc_irb_i64(irb, k->w.ps), ""));
        /* software prefetch: the first line of every row a kernel `ahead` reads (its channel is
         * data, so the hardware prefetcher cannot guess it; whole rows cost more than they save);
         * small tiles (flat planes) look further ahead, so the lines arrive in time from L2 */
        LLVMValueRef cn = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, cidx, LLVMBuildAdd(B, i, pdc_irb_i64(irb, ahead), "")));
        LLVMValueRef xn = pdc_irb_gep(irb, irb->f32, xt, LLVMBuildMul(B, cn, pdc_irb_i64(irb, k->w.ps), ""));
        if (k->w.flat && k->shift) {
            /* the lines this pattern's kernels read (the next kernel is of the same pattern but
             * at the loop's end) */
            uint8_t line[CONV_FLAT_MAX_LINES] = {0};
            flat_shift_reads(k->w.kh, k->w.kw, k->w.sy, k->w.sx, k->w.dy, k->w.dx, k->w.wq, k->w.pstride, tx, k->lead, mask, line);
            for (int64_t f = 0; f < CONV_FLAT_MAX_LINES; f++)
                if (line[f]) pdc_irb_prefetch(irb, pdc_irb_gepc(irb, irb->f32, xn, f * 16));
        } else if (k->w.flat) {
            for (int64_t ph = 0; ph < (int64_t)k->w.sx * k->w.sy; ph++)
                for (int64_t f = 0; f < k->w.pstride; f += 16) pdc_irb_prefetch(irb, pdc_irb_gepc(irb, irb->f32, xn, ph * k->w.pstride + f));
        } else {
            int64_t rows = (int64_t)(ty - 1) * k->w.sy + (int64_t)(k->w.kh - 1) * k->w.dy + 1;
            for (int64_t ph = 0; ph < k->w.sx; ph++)
                for (int64_t q = 0; q < rows; q++)
                    pdc_irb_prefetch(irb, pdc_irb_gepc(irb, irb->f32, xn, ph * k->w.pstride + q * k->w.wq + k->lead));
        }
        /* and the weight stream ahead: read once per tile, from memory when the layer's weights
         * outgrow the caches, sooner than the hardware prefetcher does (a line per kernel: all of
         * the stream for patterns of up to 16 taps) */
        pdc_irb_prefetch(irb, pdc_irb_gepc(irb, irb->f32, wp, CONV_WEIGHT_PREFETCH_FLOATS));
        emit_pattern_body(G, mask, ty, tx, x, wp);
        LLVMValueRef i1 = LLVMBuildAdd(B, i, pdc_irb_i64(irb, 1), "");
        LLVMBuildStore(B, i1, iv);
        LLVMBuildStore(B, pdc_irb_gepc(irb, irb->f32, wp, nt), wpv);
        LLVMValueRef latch = LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, i1, hi, ""), loop, after);
        /* flat planes: a kernel is ~45 instructions; two per iteration let the scheduler overlap one's
         * loads and shuffles with the other's FMAs (ResNet-50 512@7 at 4.5x: 0.316 -> 0.307 ms) */
        if (k->w.flat) pdc_irb_loop_unroll(irb, latch, 2);
        LLVMPositionBuilderAtEnd(B, after);
    }
    /* epilogue: residual, activation and stores to output channel ochan[k] */
    LLVMValueRef oc = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, ochan, kk));
    LLVMValueRef ooff = LLVMBuildMul(B, oc, pdc_irb_i64(irb, k->w.ohw), "");
    LLVMValueRef yk = pdc_irb_gep(irb, irb->f32, yt, ooff);
    LLVMValueRef rk = k->residual ? pdc_irb_gep(irb, irb->f32, rt, ooff) : NULL;
    if (k->w.flat) {
        /* flat vector j holds pixels p = j*vec + lane, (y, x) = (p / wq, p % wq), valid for x < ow:
         * one masked store per output row it touches, placed so lane l lands at y*ow + x */
        for (int j = 0; j < tx; j++) {
            LLVMValueRef v = acc_load(G, j);
            for (int q = 1; q < k->ksets; q++) v = LLVMBuildFAdd(B, v, acc_load(G, q * tx + j), "");
            cpu_conv_emit_flat_store(irb, v, yk, rk, &k->act, (int64_t)j * k->vec, k->w.wq, k->w.ow, k->w.oh);
        }
    } else {
        for (int i = 0; i < ty; i++)
            for (int j = 0; j < tx; j++)
                cpu_conv_emit_row_store(irb, acc_load(G, i * tx + j), yk, rk, &k->act, (int64_t)i * k->w.ow + (int64_t)j * k->vec,
                                        j == tx - 1 ? last : k->vec);
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, kk, pdc_irb_i64(irb, 1), ""), kv);
    LLVMBuildBr(B, fhead);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMBuildRetVoid(B);
}

pdc_status cpu_conv_emit_tiles(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                               LLVMModuleRef m, const char *prefix)
{
    conv_gen G;
    memset(&G, 0, sizeof G);
    G.k = arg;
    pdc_irb_init(&G.irb, c, m, t->vec);
    for (int v = 0; v < G.k->n_var && !G.oom; v++) emit_variant(&G, prefix, v);
    pdc_irb_dispose(&G.irb);
    return G.oom ? pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "conv kernel %s: out of memory for the generator's tables", prefix)
                 : PDC_OK;
}

/* ------------------------------------------------------------------ planning */

void cpu_conv_key_window(const conv_geom *g, conv_kwin *w)
{
    w->kh = (int32_t)g->kh;
    w->kw = (int32_t)g->kw;
    w->sy = (int32_t)g->sy;
    w->sx = (int32_t)g->sx;
    w->dy = (int32_t)g->dy;
    w->dx = (int32_t)g->dx;
    w->flat = g->flat;
    w->cg = g->cg;
    w->hq = g->hq;
    w->wq = g->wq;
    w->ps = g->ps;
    w->pstride = g->pstride;
    w->tail = g->tail;
    w->ow = g->ow;
    w->oh = g->oh;
    w->ohw = g->oh * g->ow;
}

pdc_status cpu_conv_geometry(const ir_model *m, const ir_layer *l, conv_geom *g, char *why, size_t why_cap)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    if (p.nsp > 2) {
        snprintf(why, why_cap, "%d-D conv", p.nsp);
        return PDC_ERR_UNSUPPORTED;
    }
    memset(g, 0, sizeof *g);
    g->n = p.n;
    g->c = p.c;
    g->o = p.o;
    g->group = p.group;
    g->cg = p.c / p.group;
    ir_window_params_as_2d(&p);
    g->h = p.in[0];
    g->w = p.in[1];
    g->kh = p.k[0];
    g->kw = p.k[1];
    g->sy = p.stride[0];
    g->sx = p.stride[1];
    g->dy = p.dil[0];
    g->dx = p.dil[1];
    g->pt = p.pad_begin[0];
    g->pl = p.pad_begin[1];
    g->oh = p.out[0];
    g->ow = p.out[1];
    /* an axis with one tap (1x1 convs): its stride is taken by the packing, which copies only the
     * rows/columns that tap reads, and the kernel sees stride 1 */
    g->py = g->px = 1;
    if (g->kh == 1) g->py = g->sy, g->sy = 1, g->dy = 1;
    if (g->kw == 1) g->px = g->sx, g->sx = 1, g->dx = 1;
    if (g->kh * g->kw > CONV_MAX_TAPS) {
        snprintf(why, why_cap, "kernel window %" PRId64 "x%" PRId64 " has more than %d taps", g->kh, g->kw, CONV_MAX_TAPS);
        return PDC_ERR_UNSUPPORTED;
    }
    if (g->sx > 8 || g->sy > 64 || g->dx > 64 || g->dy > 64 || g->ow > (1 << 20) || g->oh > (1 << 20)) {
        snprintf(why, why_cap, "stride/dilation/size outside the JIT's range");
        return PDC_ERR_UNSUPPORTED;
    }
    return PDC_OK;
}

/* Plane stride for `rows` packed rows: past the rows the packer writes (whole rows after the lead)
 * and past the last float the last row's vectors read, rounded up to 16 (shift mode's aligned loads
 * end there: the last vector, at e, is shuffled out of the aligned vectors that cover [e, e + 16)). */
static int64_t conv_rows_pstride(const conv_geom *g, int vec, int64_t rows)
{
    int64_t reach = g->lead + (rows - 1) * g->wq + g->nvx * vec + (g->kw - 1) * g->dx / g->sx;
    int64_t written = g->lead + rows * g->wq;
    return ((reach > written ? reach : written) + 15) / 16 * 16;
}

/* Packed rows that bt row tiles read. */
static int64_t conv_band_rows(const conv_geom *g, int64_t bt)
{
    int64_t rows = (bt * g->ty - 1) * g->sy + (g->kh - 1) * g->dy + 1;
    return rows < g->hq ? rows : g->hq;
}

/* Buffers of `rows` packed rows per phase plane. */
static void conv_plane_rows(conv_geom *g, int vec, int64_t rows)
{
    g->band_rows = rows;
    g->pstride = conv_rows_pstride(g, vec, rows);
    g->ps = g->nph * g->pstride;
}

void cpu_conv_layout(conv_geom *g, int vec, int64_t tx, int64_t ty)
{
    g->nvx = (g->ow + vec - 1) / vec;
    g->tx = tx < 1 ? 1 : tx > g->nvx ? g->nvx : tx;
    g->ntx = (g->nvx + g->tx - 1) / g->tx;
    if (ty > g->oh) ty = g->oh;
    if (ty < 1) ty = 1;
    int64_t nty = (g->oh + ty - 1) / ty;
    g->ty = (g->oh + nty - 1) / nty; /* balanced row tiles */
    g->nty = (g->oh + g->ty - 1) / g->ty;
    g->nph = g->sx;
    /* rows as dense as alignment allows: a row holds the columns valid outputs read; the vectors of
     * a row's last tile read on into the next row for lanes past ow, which are never stored */
    g->wq = (g->ow + (g->kw - 1) * g->dx / g->sx + 15) / 16 * 16;
    g->hq = (g->oh - 1) * g->sy + (g->kh - 1) * g->dy + 1;
    g->flat = 0;
    g->tail = 0;
    g->nband = g->band_groups = 1;
    conv_plane_rows(g, vec, g->hq);
}

void cpu_conv_band(conv_geom *g, int vec, int64_t band_bytes, int threads)
{
    /* a band's tiles run on one thread: with fewer row tiles than threads, keep the whole input
     * and spread (tile, chunk) pieces instead */
    if (g->flat || g->nty < (int64_t)threads) return;
    if (g->c * g->ps * 4 <= band_bytes) {
        /* it fits, but where the row tiles split evenly, a band per thread: each thread packs just
         * the rows its tiles read (packing all of it, each thread spent its share twice) */
        if (threads < 2 || g->nty % threads) return;
        g->nband = g->band_groups = threads;
        conv_plane_rows(g, vec, conv_band_rows(g, g->nty / threads));
        return;
    }
    /* fewer than two row tiles per thread: the threads' shares would be uneven */
    if (g->nty < 2 * (int64_t)threads) return;
    int64_t bt = 1;
    while (bt < g->nty && g->c * g->nph * conv_rows_pstride(g, vec, conv_band_rows(g, bt + 1)) * 4 <= band_bytes) bt++;
    /* a multiple of the threads, near-equal bands: the threads' shares of row tiles stay even */
    int64_t nband = (g->nty + bt - 1) / bt;
    nband = (nband + threads - 1) / threads * threads;
    if (nband > g->nty) nband = g->nty;
    g->nband = nband;
    g->band_groups = nband % threads ? 1 : threads;
    bt = (g->nty + nband - 1) / nband; /* row tiles of the largest band */
    conv_plane_rows(g, vec, conv_band_rows(g, bt));
}

void cpu_conv_band_tiles(const conv_geom *g, int64_t b, int64_t *t0, int64_t *t1)
{
    /* the row tiles split near-evenly into band_groups contiguous groups (a thread's contiguous
     * share of the bands, cpu_conv_run_image), each group's near-evenly into its bands: 14 row
     * tiles in 6 bands for 2 threads are 3, 2, 2 | 3, 2, 2, 7 each (bands of 3, 3, 2, 2, 2, 2 in a
     * row left 8 and 6: VGG-16 conv3_1's threads were busy 2.01 and 1.56 ms). No band has more
     * than ceil(nty / nband) tiles, what the band buffer is sized for. */
    int64_t per = g->nband / g->band_groups, k = b / per, j = b % per;
    int64_t first = k * g->nty / g->band_groups, n = (k + 1) * g->nty / g->band_groups - first;
    int64_t q = n / per, r = n % per;
    *t0 = first + j * q + (j < r ? j : r);
    *t1 = *t0 + q + (j < r);
}

void cpu_conv_band_of(const conv_geom *g, int64_t tyi, int64_t *t0, int64_t *t1)
{
    for (int64_t b = 0; b < g->nband; b++) {
        cpu_conv_band_tiles(g, b, t0, t1);
        if (tyi < *t1) return;
    }
}

/* Row stride of a flat plane: the columns valid outputs read, ow + the widest column offset; at
 * column stride 1, rows can share their zero padding instead - a read past a row's end lands in
 * the next row's left padding, which holds the zero it needs (for 3x3 "same" convs, one column
 * less: a 7x7 plane's rows of 8, and taps a row apart 16 floats apart, so they share shuffles). */
static int64_t flat_row_stride(const conv_geom *g)
{
    int64_t wq = g->ow + (g->kw - 1) * g->dx / g->sx;
    if (g->sx == 1 && g->px == 1) {
        int64_t shared = g->ow + (g->kw - 1) * g->dx - g->pl; /* reads past the row stay in the next row's padding */
        if (shared < g->pl + g->w) shared = g->pl + g->w;     /* the row's own data fits */
        if (shared < g->ow) shared = g->ow;
        if (shared < wq) wq = shared;
    }
    return wq;
}

void cpu_conv_flat_planes(conv_geom *g, int64_t lanes)
{
    int64_t max_cx = (g->kw - 1) * g->dx / g->sx, max_ry = (g->kh - 1) * g->dy / g->sy;
    g->flat = 1;
    g->wq = flat_row_stride(g);
    g->hq = g->oh + max_ry;
    g->nph = g->sx * g->sy;
    g->nband = g->band_groups = 1;
    g->band_rows = g->hq;
    /* Planes overlap. The next plane starts as soon as this one's data has ended (past what valid
     * outputs read: the rows, and a row's shared padding after the last), rounded to 16: this
     * plane's last rows, zeros (usually padding), then lie in the next one's lead, and the lanes
     * past the outputs read on into the next plane. ResNet-50's 512@7 plane: 80 floats
     * instead of 112 (every thread packs all of it, its lines from memory after another engine's
     * run), and the layer between oneDNN's runs 0.328-0.381 -> 0.315-0.325 ms at 4.5x, 0.176-0.178
     * -> 0.167-0.172 at 9x. */
    int64_t rows_end = g->lead + g->hq * g->wq, past = g->ow + max_cx - g->wq;
    int64_t data_end = rows_end - cpu_conv_plane_zero_tail(g), need = g->hq * g->wq + (past > 0 ? past : 0);
    g->pstride = ((data_end > need ? data_end : need) + 15) / 16 * 16;
    g->ps = g->nph * g->pstride;
    /* the last plane: every read, `lanes` lanes past the largest tap offset (which covers its
     * rows: lanes >= oh * wq) */
    int64_t reach = g->lead + lanes + max_ry * g->wq + max_cx;
    g->tail = reach > g->pstride ? (reach - g->pstride + 15) / 16 * 16 : 0;
}

int cpu_conv_layout_flat(conv_geom *g, int vec, int max_vectors)
{
    if (g->ow * 2 > vec) return 0;
    int64_t nv = (g->oh * flat_row_stride(g) + vec - 1) / vec;
    if (nv > max_vectors) return 0;
    g->lead = 0;
    cpu_conv_flat_planes(g, nv * vec);
    g->nvx = nv;
    g->tx = nv;
    g->ntx = 1;
    g->ty = g->oh; /* one tile: the whole plane */
    g->nty = 1;
    return 1;
}

/* Shift mode on flat planes: the lead (zeros before each plane) with the cheapest reads over all
 * kernels, counting a shuffle as 1 and a cache line loaded as CONV_FLAT_LINE_COST (from L2 at
 * about 2 cycles a line, where a shuffle takes a share of the FMA ports). */
static int64_t flat_lead(const conv_geom *g, const uint64_t *pats, size_t n_pat, const uint64_t *kmask)
{
    int64_t count[CONV_MAX_PATTERNS] = {0};
    for (int64_t i = 0; i < g->o * g->cg; i++)
        for (size_t p = 0; p < n_pat; p++)
            if (kmask[i] == pats[p]) count[p]++;
    int64_t nlines = ((g->pstride + 16) * g->nph + 16 * g->nvx + 64) / 16 + 2, best = 0, best_cost = -1;
    uint8_t *line = calloc((size_t)nlines, 1);
    if (!line) return 0;
    for (int64_t lead = 0; lead < 16; lead++) {
        int64_t cost = 0;
        for (size_t p = 0; p < n_pat; p++) {
            memset(line, 0, (size_t)nlines);
            int64_t sh = flat_shift_reads((int)g->kh, (int)g->kw, (int)g->sy, (int)g->sx, (int)g->dy, (int)g->dx, g->wq,
                                          g->pstride + 16, g->nvx, lead, pats[p], line);
            int64_t lines = 0;
            for (int64_t i = 0; i < nlines; i++) lines += line[i];
            cost += count[p] * (sh + CONV_FLAT_LINE_COST * lines);
        }
        if (best_cost < 0 || cost < best_cost) best = lead, best_cost = cost;
    }
    free(line);
    return best;
}

/* Shift mode's lead: zeros before each row's data that align the column offset with the most kept taps. */
static int64_t shift_lead(const conv_geom *g, const uint64_t *kmask)
{
    int64_t count[16] = {0}, kept[64] = {0}, taps = g->kh * g->kw;
    for (int64_t i = 0; i < g->o * g->cg; i++) /* kept kernels per tap first: no division per kernel */
        for (int64_t b = 0; b < taps; b++) kept[b] += (int64_t)(kmask[i] >> b & 1);
    for (int64_t b = 0; b < taps; b++) count[(b % g->kw) * g->dx / g->sx % 16] += kept[b];
    int64_t best = 0;
    for (int64_t c = 1; c < 16; c++)
        if (count[c] > count[best]) best = c;
    return (16 - best) % 16;
}

/* Pattern kernels: TY rows x TX vectors of one filter within an accumulator budget, at most max_tx
 * vectors across. A tuned tile (kn), else PDC_CONV_TILE = "TYxTX" (for experiments), overrides the
 * choice where it fits the budget. */
static void conv_tiling(conv_geom *g, int vec, int budget, int max_tx, const pdc_layer_knobs *kn)
{
    int64_t nvx = (g->ow + vec - 1) / vec;
    int64_t ntx = (nvx + max_tx - 1) / max_tx;
    int64_t tx = (nvx + ntx - 1) / ntx;
    if (tx > budget) tx = budget;
    int64_t ty = budget / tx;
    const char *ov = getenv("PDC_CONV_TILE");
    long oy, ox;
    if (kn->tile_y >= 1 && kn->tile_x >= 1 && (int64_t)kn->tile_y * kn->tile_x <= budget) ty = kn->tile_y, tx = kn->tile_x;
    else if (ov && sscanf(ov, "%ldx%ld", &oy, &ox) == 2 && oy >= 1 && ox >= 1 && oy * ox <= budget) ty = oy, tx = ox;
    cpu_conv_layout(g, vec, tx, ty);
}

/* Row tiles loading unaligned vectors (no shift mode): a loaded vector serves the taps of its
 * column that fall in the tile's rows, so in a tile of one row every FMA has a load of its own.
 * With AVX-512's 28 accumulators a full row of 7 vectors still leaves 4 rows; AVX2's 12 made that
 * 1 row x 7: tiles of 3 rows or more instead (VGG-16 conv3_1 at 4.5x on Zen 3, one thread: 10.7 ->
 * 7.3 ms, 3x4 against 1x7). */
static int row_tile_max_tx(const pdc_llvm_target *t, int budget)
{
    return t->n_vregs >= 32 ? 7 : budget / 3;
}

static pdc_status conv_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x);

/* Execution order of filters: most kernels first (ties: lower stored index first). */
typedef struct filt_rank {
    int64_t count, index;
} filt_rank;
static int cmp_filt(const void *a, const void *b)
{
    const filt_rank *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

pdc_status cpu_conv_plan_init(pdc_context *ctx, const ir_model *m, const ir_layer *l, cpu_conv_plan *P, char *why,
                              size_t why_cap)
{
    memset(P, 0, sizeof *P);
    if (l->op != IR_OP_CONV) return PDC_ERR_UNSUPPORTED;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
    if (wt->kind != IR_TENSOR_CONST || (bt && bt->kind != IR_TENSOR_CONST)) {
        snprintf(why, why_cap, "conv weights or bias are not constants");
        return PDC_ERR_UNSUPPORTED;
    }
    conv_geom g;
    pdc_status st = cpu_conv_geometry(m, l, &g, why, why_cap);
    if (st) return st;
    if ((st = ir_fused_params_get(m, l, &P->fp))) return st;
    P->g = g;
    P->w = wt->data;
    P->b = bt ? bt->data : NULL;

    /* per-kernel masks */
    const int64_t taps = g.kh * g.kw, n_kern = g.o * g.cg;
    uint64_t full = taps == 64 ? ~0ull : ((1ull << taps) - 1);
    P->full = full;
    uint64_t *kmask = P->kmask = pdc_alloc(ctx, (size_t)n_kern * sizeof *kmask);
    if (!kmask) return PDC_ERR_OUT_OF_MEMORY;
    uint64_t *pats = P->pats;
    const int dense = wt->sparsity.kind == IR_SPARSITY_NONE, pattern = wt->sparsity.kind == IR_SPARSITY_PATTERN;
    /* other kinds: the kept entries of a filter's kernels at a time (a call per kernel was a tenth of a
     * cached compile of a block-pruned ResNet-50, whose 1x1 kernels are single weights) */
    uint8_t *keep = dense || pattern ? NULL : pdc_alloc(ctx, (size_t)(g.cg * taps));
    if (!dense && !pattern && !keep) return PDC_ERR_OUT_OF_MEMORY;
    if (dense)
        for (int64_t kidx = 0; kidx < n_kern; kidx++) kmask[kidx] = full;
    else if (pattern)
        for (int64_t kidx = 0; kidx < n_kern; kidx++) {
            const int32_t pid = wt->sparsity.kernel_pattern[kidx];
            kmask[kidx] = pid < 0 ? 0 : wt->sparsity.patterns[pid] & full;
        }
    else
        for (int64_t f = 0; f < g.o; f++) {
            ir_sparsity_mask_range(wt, &wt->sparsity, (size_t)(f * g.cg * taps), (size_t)(g.cg * taps), keep);
            for (int64_t c = 0; c < g.cg; c++) {
                uint64_t mk = 0;
                for (int64_t b = 0; b < taps; b++) mk |= (uint64_t)keep[c * taps + b] << b;
                kmask[f * g.cg + c] = mk;
            }
        }
    pdc_free(keep);
    /* distinct non-empty masks = patterns (a linear scan: there are at most CONV_MAX_PATTERNS + 1
     * before we stop), sorted so equal sets give equal keys */
    size_t n_pat = 0, last = 0;
    for (int64_t kidx = 0; kidx < n_kern && n_pat <= CONV_MAX_PATTERNS; kidx++) {
        uint64_t mk = kmask[kidx];
        if ((mk == 0) | (mk == pats[last])) continue; /* one branch, predicted (pats[0] is 0 until set) */
        size_t i = 0;
        while (i < n_pat && pats[i] != mk) i++;
        if (i == n_pat) pats[n_pat++] = mk;
        last = i;
    }
    qsort(pats, n_pat, sizeof *pats, cmp_u64);
    if (n_pat > CONV_MAX_PATTERNS) {
        /* too many distinct masks to specialise: run every non-empty kernel over the full window */
        P->as_dense = 1;
        for (int64_t kidx = 0; kidx < n_kern; kidx++)
            if (kmask[kidx]) kmask[kidx] = full;
        pats[0] = full;
        n_pat = 1;
    }
    if (n_pat == 0) { /* everything pruned: bias only */
        pats[0] = full;
        n_pat = 1;
    }
    P->n_pat = n_pat;
    int64_t nonempty = 0, kept_taps = 0; /* locals: P->kept_taps may alias kmask[], a store per kernel */
    for (int64_t kidx = 0; kidx < n_kern; kidx++) {
        nonempty += kmask[kidx] != 0;
        kept_taps += popcount64(kmask[kidx]);
    }
    P->kept_kernels = nonempty;
    P->kept_taps = kept_taps;
    P->all_dense = n_pat == 1 && pats[0] == full && nonempty == n_kern;
    return PDC_OK;
}

int cpu_conv_max_taps(const cpu_conv_plan *P)
{
    int max_taps = 0;
    for (size_t p = 0; p < P->n_pat; p++)
        if (popcount64(P->pats[p]) > max_taps) max_taps = popcount64(P->pats[p]);
    return max_taps;
}

int cpu_conv_row_budget(const pdc_llvm_target *t, int max_taps, int shift)
{
    if (shift) return max_taps <= 4 ? 16 : 12;
    return t->n_vregs >= 32 ? (max_taps <= 4 ? 28 : 20) : (max_taps <= 4 ? 12 : 10);
}

pdc_status cpu_conv_plan_pack(pdc_context *ctx, const pdc_llvm_target *t,
                              int64_t band_bytes, int threads, cpu_conv_plan *P)
{
    conv_geom g = P->g;
    const ir_fused_params fp = P->fp;
    const uint64_t *kmask = P->kmask, *pats = P->pats;
    const size_t n_pat = P->n_pat;
    const int64_t taps = g.kh * g.kw;

    /* Accumulators: patterns of up to 4 taps keep their weights in 4 registers beside 28
     * accumulators (LLVM then folds single-use input loads into the FMAs); denser windows need
     * more registers for weights and loaded rows, so 20 (more spill in the inner loop). AVX2 has
     * 16 registers. */
    const int max_taps = cpu_conv_max_taps(P);
    int budget = cpu_conv_row_budget(t, max_taps, 0);
    int ksets = 1, shift = 0;
    if (cpu_conv_layout_flat(&g, t->vec, t->n_vregs >= 32 ? 7 : 4)) {
        /* the generator's tables of the plane's vectors and lines (the lead adds at most a line per phase) */
        shift = t->vec == 16 && (g.ps + g.tail) / 16 + g.nph + 2 < CONV_FLAT_MAX_LINES;
        if (shift) {
            g.lead = flat_lead(&g, pats, n_pat, kmask);
            cpu_conv_flat_planes(&g, g.tx * t->vec);
        }
        /* 16 independent accumulation chains: 8 keep two FMA ports busy at latency 4, the rest
         * absorb the latency of the loads and shuffles feeding them (ResNet-50 512@7 at 4.5x:
         * 0.332 ms with 8, 0.316 ms with 16) */
        ksets = (int)((16 + g.tx - 1) / g.tx);
        if (ksets * g.tx > budget) ksets = (int)(budget / g.tx);
        if (ksets < 1) ksets = 1;
    } else {
        shift = t->vec == 16;
        if (shift) {
            /* the column offset most kept taps read becomes aligned; the tile keeps registers for
             * the row's aligned vectors and the shuffled one */
            g.lead = shift_lead(&g, kmask);
            budget = cpu_conv_row_budget(t, max_taps, 1);
        }
        /* shift mode: taller tiles, fewer rows loaded (and shuffled) per output row */
        conv_tiling(&g, t->vec, budget, shift ? 4 : row_tile_max_tx(t, budget), &P->knobs);
        if (shift && (g.lead + (g.kw - 1) * g.dx / g.sx) / 16 + g.tx + 2 > CONV_SHIFT_MAX_VECTORS) {
            /* columns too far apart for the generator's row table (wide dilation): unaligned loads */
            shift = 0;
            g.lead = 0;
            budget = cpu_conv_row_budget(t, max_taps, 0);
            conv_tiling(&g, t->vec, budget, row_tile_max_tx(t, budget), &P->knobs);
        }
    }
    if (band_bytes > 0 && !P->knobs.whole) cpu_conv_band(&g, t->vec, band_bytes, threads);
    P->g = g;
    /* Packed whole, a layer's threads share (tile, chunk) pieces (cpu_conv_run_image), and a thread
     * that runs out of its own takes the other's from the back: they finish at most a piece apart.
     * Filters run heaviest first, so one piece can be a large part of a thread's time: at 2 threads,
     * ResNet-50 256@14 (16 chunks of 16) left its threads busy 127 and 117 us at 4.5x; with chunks
     * of 8, 120 and 124 (0.133 -> 0.129 ms), VGG-16 conv5 0.546-0.551 -> 0.529-0.530 ms; 512@7
     * unchanged. Banded layers keep 16: their pieces are row tile x chunk, many more. */
    P->chunk = g.nband == 1 && threads > 1 ? CONV_FILTER_CHUNK / 2 : CONV_FILTER_CHUNK;
    if (P->knobs.chunk > 0) P->chunk = P->knobs.chunk;
    P->ksets = ksets;

    conv_key *k = &P->key;
    memset(k, 0, sizeof *k);
    memcpy(k->tag, "conv19", 7);
    k->vec = t->vec;
    k->n_vregs = t->n_vregs;
    k->n_pat = (int32_t)n_pat;
    for (size_t p = 0; p < n_pat; p++) k->pat[p] = pats[p];
    cpu_conv_key_window(&g, &k->w);
    k->ksets = ksets;
    k->shift = shift;
    k->lead = g.lead;
    k->act = cpu_conv_inline_act(&fp);
    k->n_var = cpu_conv_row_variants(&g, t->vec, k->var_ty, k->var_tx, k->var_last, P->var_of);

    /* filter order, kernel lists, packed weights */
    filt_rank *order = pdc_alloc(ctx, (size_t)g.o * sizeof *order);
    if (!order) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t o = 0; o < g.o; o++) {
        int64_t cnt = 0;
        for (int64_t c = 0; c < g.cg; c++) cnt += kmask[o * g.cg + c] != 0;
        order[o].count = cnt;
        order[o].index = o;
    }
    qsort(order, (size_t)g.o, sizeof *order, cmp_filt);
    P->n_meta = (size_t)g.o * (2 * n_pat + 1);
    P->n_cidx = (size_t)(P->kept_kernels + CONV_PREFETCH_VECTORS); /* read (as prefetch addresses) past the last kernel */
    P->n_wpk = (size_t)P->kept_taps + 1;
    P->meta = pdc_alloc(ctx, P->n_meta * sizeof *P->meta);
    P->cidx = pdc_calloc(ctx, P->n_cidx, sizeof *P->cidx);
    P->wpk = pdc_calloc(ctx, P->n_wpk, sizeof *P->wpk);
    P->bias = pdc_alloc(ctx, (size_t)g.o * sizeof *P->bias);
    P->ochan = pdc_alloc(ctx, (size_t)g.o * sizeof *P->ochan);
    if (!P->meta || !P->cidx || !P->wpk || !P->bias || !P->ochan) {
        pdc_free(order);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    int64_t ci = 0, wi = 0;
    for (int64_t e = 0; e < g.o; e++) {
        int64_t o = order[e].index, gidx = o / (g.o / g.group);
        int64_t *mr = P->meta + e * (int64_t)(2 * n_pat + 1);
        P->bias[e] = P->b ? P->b[o] : 0.0f;
        P->ochan[e] = fp.out_perm ? fp.out_perm[o] : o;
        for (size_t p = 0; p < n_pat; p++) {
            mr[p] = ci;
            mr[n_pat + 1 + p] = wi;
            for (int64_t c = 0; c < g.cg; c++) {
                uint64_t mk = kmask[o * g.cg + c];
                if (mk != pats[p]) continue;
                P->cidx[ci++] = (int32_t)(gidx * g.cg + c);
                const float *src = P->w + (o * g.cg + c) * taps;
                for (int64_t b = 0; b < taps; b++)
                    if (mk >> b & 1) P->wpk[wi++] = src[b];
            }
        }
        mr[n_pat] = ci;
    }
    pdc_free(order);
    return PDC_OK;
}

void cpu_conv_plan_info(const cpu_conv_plan *P, const pdc_llvm_target *t, char *buf, size_t cap)
{
    const conv_geom g = P->g;
    char tile[96];
    if (g.flat)
        snprintf(tile, sizeof tile, "plane as %" PRId64 " flat vector%s x%d%s%s", g.tx, g.tx == 1 ? "" : "s", P->ksets,
                 P->ksets > 1 ? " accumulator sets" : "", P->key.shift ? ", aligned + lane shifts" : "");
    else
        snprintf(tile, sizeof tile, "tile %" PRId64 "x%" PRId64 "x%d%s%s", g.ty, g.tx, t->vec,
                 P->key.shift ? ", aligned rows + lane shifts" : "", cpu_conv_band_info(&g));
    cpu_conv_plan_describe(P, t, tile, buf, cap);
}

void cpu_conv_plan_describe(const cpu_conv_plan *P, const pdc_llvm_target *t, const char *tile, char *buf, size_t cap)
{
    const conv_geom g = P->g;
    double dense_taps = (double)(g.o * g.cg * g.kh * g.kw), kept_taps = (double)P->kept_taps;
    if (P->as_dense || (P->n_pat == 1 && P->pats[0] == P->full && P->kept_kernels == g.o * g.cg))
        snprintf(buf, cap, "jit %sdirect conv %" PRId64 "x%" PRId64 "%s, %s, %s",
                 P->as_dense ? "dense (sparsity too irregular to specialise) " : "dense ", g.kh, g.kw,
                 g.group > 1 ? (g.cg == 1 ? " depthwise" : " grouped") : "", tile, pdc_isa_name(t->isa));
    else
        snprintf(buf, cap,
                 "jit pattern-sparse conv %" PRId64 "x%" PRId64 "%s, %zu pattern%s, %.0f%% kernels kept, %.2fx fewer "
                 "FLOPs, %s, %s",
                 g.kh, g.kw, g.group > 1 ? " grouped" : "", P->n_pat, P->n_pat == 1 ? "" : "s",
                 100.0 * (double)P->kept_kernels / (double)(g.o * g.cg), kept_taps > 0 ? dense_taps / kept_taps : 0.0,
                 tile, pdc_isa_name(t->isa));
}

pdc_status cpu_plan_conv(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap)
{
    if (l->op != IR_OP_CONV) return PDC_ERR_UNSUPPORTED;
    pdc_context *ctx = cc->ctx;
    conv_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cpu_conv_plan_init(ctx, m, l, &s->p, why, why_cap);
    if (st) goto fail;
    cpu_conv_operands(cc, m, l, &s->p.w, &s->p.b);
    if (cc->knobs) s->p.knobs = *cc->knobs;
    /* Every kernel dense: the multi-filter dense kernel shares each input load across filters.
     * Strided pattern layers: channel-major order. A tuned family goes first; the rows kernel
     * (below) takes every layer the others refuse. */
    /* (a family is honoured only for the layers conv_knobs.c offers it for: dense families for dense
     * layers, channel-major for pattern layers) */
    const int32_t fam = s->p.knobs.family;
    const int dense = s->p.all_dense;
    st = dense ? PDC_ERR_UNSUPPORTED : cpu_plan_conv_bcr(cc, m, l, &s->p.g, &s->p.fp, L);
    if (st == PDC_ERR_UNSUPPORTED && dense && fam == PDC_KNOB_AUTO)
        st = cpu_plan_conv_depthwise(cc, m, l, &s->p.g, &s->p.fp, L);
    if (st == PDC_ERR_UNSUPPORTED && dense && fam == PDC_KNOB_AUTO) st = cpu_plan_conv_wino(cc, m, l, &s->p.g, &s->p.fp, L);
    if (st == PDC_ERR_UNSUPPORTED && dense && (fam == PDC_KNOB_OCVEC || fam == PDC_KNOB_AUTO)) st = cpu_plan_conv_ocvec(cc, m, l, &s->p.g, &s->p.fp, L);
    if (st == PDC_ERR_UNSUPPORTED && dense && (fam == PDC_KNOB_DENSE || fam == PDC_KNOB_AUTO || fam == PDC_KNOB_OCVEC))
        st = cpu_plan_conv_dense(cc, m, l, &s->p.g, &s->p.fp, L);
    if (st == PDC_ERR_UNSUPPORTED && !dense && (fam == PDC_KNOB_CMAJOR || fam == PDC_KNOB_AUTO))
        st = cpu_plan_conv_cmajor(cc, &s->p, L);
    if (st != PDC_ERR_UNSUPPORTED) goto fail; /* taken (or a real failure): our plan is not needed */
    st = PDC_OK;
    /* a fused epilogue: its residual add, then its activation, become ours */
    int res = cpu_plan_epilogue(cc, &s->p.fp);
    if ((st = cpu_conv_plan_pack(ctx, cc->target, CONV_BAND_BYTES, cc->threads, &s->p))) goto fail;
    s->p.key.residual = res;
    static const char *const syms[CONV_MAX_VARIANTS] = {"tile0", "tile1", "tile2", "tile3"};
    pdc_kernel_desc d = {&s->p.key, sizeof s->p.key, cpu_conv_emit_tiles, &s->p.key, (size_t)s->p.key.n_var, syms};
    void *addrs[CONV_MAX_VARIANTS] = {0};
    if ((st = pdc_jit_kernel(cc->jit, ctx, &d, addrs, NULL))) goto fail;
    for (int v = 0; v < s->p.key.n_var; v++) s->fn[v] = (conv_tile_fn)addrs[v];
    pdc_free(s->p.kmask);
    s->p.kmask = NULL;
    s->p.w = s->p.b = NULL; /* packed; the folded arrays they may point to are freed after planning */
    L->run = conv_run;
    L->state = s;
    L->free_state = conv_free;
    L->thread_floats = cpu_conv_thread_floats(&s->p.g);
    cpu_take_epilogue(cc, L);
    cpu_conv_plan_info(&s->p, cc->target, L->info, sizeof L->info);
    return PDC_OK;
fail:
    conv_free(s);
    return st;
}

int cpu_conv_tile_variants(const conv_geom *g, const int32_t rows[2], const int32_t cols[2], const int32_t lasts[2],
                           int32_t *var_ty, int32_t *var_tx, int32_t *var_last, int var_of[2][2])
{
    int nv = 0;
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++) {
            var_of[r][c] = -1;
            if ((!r && g->nty == 1) || (!c && g->ntx == 1)) continue; /* no full tile before the last */
            int q = 0;
            while (q < nv && !(var_ty[q] == rows[r] && var_tx[q] == cols[c] && (!lasts || var_last[q] == lasts[c]))) q++;
            if (q == nv) {
                var_ty[nv] = rows[r];
                var_tx[nv] = cols[c];
                if (lasts) var_last[nv] = lasts[c];
                nv++;
            }
            var_of[r][c] = q;
        }
    return nv;
}

int cpu_conv_row_variants(const conv_geom *g, int vec, int32_t *var_ty, int32_t *var_tx, int32_t *var_last,
                          int var_of[2][2])
{
    /* flat: one row of vectors covers the plane */
    int32_t rows[2] = {g->flat ? 1 : (int32_t)g->ty, g->flat ? 1 : (int32_t)(g->oh - (g->nty - 1) * g->ty)};
    int32_t cols[2] = {(int32_t)g->tx, (int32_t)(g->nvx - (g->ntx - 1) * g->tx)};
    int32_t lasts[2] = {vec, g->flat ? vec : (int32_t)(g->ow - (g->nvx - 1) * vec)};
    return cpu_conv_tile_variants(g, rows, cols, lasts, var_ty, var_tx, var_last, var_of);
}

pdc_status cpu_conv_blocks_make(pdc_context *ctx, const conv_geom *g, const float *w, const float *bias, int64_t bsz,
                                conv_blocks *b)
{
    const int64_t taps = g->kh * g->kw, og = g->o / g->group;
    b->n = g->o / bsz;
    b->wpk = pdc_alloc(ctx, (size_t)(g->o * g->cg * taps) * sizeof *b->wpk);
    b->bias = pdc_alloc(ctx, (size_t)g->o * sizeof *b->bias);
    b->cbase = pdc_alloc(ctx, (size_t)b->n * sizeof *b->cbase);
    if (!b->wpk || !b->bias || !b->cbase) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t k = 0; k < b->n; k++) {
        b->cbase[k] = (k * bsz / og) * g->cg;
        for (int64_t f = 0; f < bsz; f++) {
            int64_t o = k * bsz + f;
            b->bias[o] = bias ? bias[o] : 0.0f;
            for (int64_t c = 0; c < g->cg; c++)
                for (int64_t tp = 0; tp < taps; tp++)
                    b->wpk[((k * g->cg + c) * taps + tp) * bsz + f] = w[(o * g->cg + c) * taps + tp];
        }
    }
    return PDC_OK;
}

void cpu_conv_blocks_release(conv_blocks *b)
{
    pdc_free(b->wpk);
    pdc_free(b->bias);
    pdc_free(b->cbase);
    memset(b, 0, sizeof *b);
}

void cpu_conv_emit_weight_prefetch(pdc_irb *irb, LLVMValueRef wc, int64_t per)
{
    int64_t ahead = (CONV_WEIGHT_PREFETCH_FLOATS + per - 1) / per * per;
    for (int64_t f = 0; f < per; f += 16) pdc_irb_prefetch(irb, pdc_irb_gepc(irb, irb->f32, wc, ahead + f));
}

/* ------------------------------------------------------------------ running */

void cpu_conv_run_image(const conv_geom *g, int64_t nchunk, const float *xn, float *yn, const float *rn,
                        const cpu_exec *x, cpu_conv_tile_fn tile, const void *arg)
{
    float *const *own = x->own;
    int nt = x->threads;
    if (g->nband > 1) {
        /* a band at a time per thread: packed into the thread's buffer when its first piece comes,
         * then its pieces while the buffer is in L2 (packing the whole input first would stream it
         * through memory). The (row tile, column tile, chunk) pieces are numbered row tile by row
         * tile and dealt out in contiguous shares of whole row tiles (shares.c), a thread's share
         * its group of bands (cpu_conv_band_tiles): from layer to layer a thread keeps to the same
         * rows and reads mostly what it wrote (pooling splits its rows the same way). A thread done
         * early takes pieces from the back of another's share, packing just the rows of that row
         * tile: the two vCPUs of a shared host often run at different speeds (VGG-16 conv3_1 at one
         * thread 2.98-3.02 ms on one, 2.62-2.66 on the other, minutes apart), and a fixed split of
         * the bands left the faster core idle for the difference. */
        const int64_t per_row = g->ntx * nchunk;
        cpu_share_split(x->shares, nt, g->nty, per_row);
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            const int me = omp_get_thread_num();
            float *xb = own[me];
            int64_t t0 = 0, t1 = 0; /* the row tiles packed in xb */
            for (int64_t it, run; (it = cpu_share_next(x->shares, me, nt, &run)) >= 0;)
                for (const int64_t end = it + run; it < end; it++) {
                    const int64_t tyi = it / per_row;
                    if (tyi < t0 || tyi >= t1) {
                        if (cpu_share_owns(me, nt, g->nty, tyi))
                            cpu_conv_band_of(g, tyi, &t0, &t1);
                        else
                            t0 = tyi, t1 = tyi + 1;
                        const int64_t r0 = t0 * g->ty * g->sy, rows = conv_band_rows(g, t1 - t0);
                        cpu_conv_pack(g, xn, xb, 0, g->c, r0, r0 + rows < g->hq ? r0 + rows : g->hq);
                    }
                    tile(arg, xb + (tyi - t0) * g->ty * g->sy * g->wq, yn, rn, tyi, it % per_row / nchunk, it % nchunk);
                }
        }
        return;
    }
    /* every thread packs the whole input into its own buffer, then takes (tile, chunk) pieces: its
     * tiles read only what its own core wrote (packing a share each, the threads read half of their
     * input from the other core's cache: ResNet-50 128@28 at 4.5x, 2 threads, 0.218 against 0.165 ms
     * on a busy host), and no thread waits for the other's packing. The pieces are dealt out in
     * contiguous shares (shares.c), chunk by chunk, each chunk over every tile: a thread reads its
     * share of the weights once, and again from L1/L2 for the next tile (tile by tile, each thread
     * streamed all the weights once per tile it took: ResNet-18's 256->512/2 at 4.5x, in 2 column
     * tiles of 2 chunks, 0.115-0.145 -> 0.093-0.097 ms at 2 threads, 1 thread unchanged). */
    const int64_t ntile = g->nty * g->ntx, items = ntile * nchunk;
    cpu_share_split(x->shares, nt, items, 1);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int me = omp_get_thread_num();
        const float *xb = xn;
        if (!g->in_place) {
            cpu_conv_pack(g, xn, own[me], 0, g->c, 0, g->hq);
            xb = own[me];
        }
        for (int64_t it, run; (it = cpu_share_next(x->shares, me, nt, &run)) >= 0;)
            for (const int64_t end = it + run; it < end; it++) {
                int64_t t = it % ntile, tyi = t / g->ntx;
                tile(arg, xb + tyi * g->ty * g->sy * g->wq, yn, rn, tyi, t % g->ntx, it / ntile);
            }
    }
}

int cpu_conv_input_in_place(const conv_geom *g)
{
    return !g->flat && g->nph == 1 && g->lead == 0 && g->px == 1 && g->py == 1 && g->pt == 0 && g->pl == 0 &&
           g->wq == g->w && g->hq == g->h && g->nband == 1 && g->pstride == g->h * g->w && g->ps == g->pstride &&
           g->tail == 0;
}

const char *cpu_conv_band_info(const conv_geom *g)
{
    if (g->in_place) return ", input read in place";
    return g->nband > 1 ? ", packed in row bands" : "";
}

size_t cpu_conv_thread_floats(const conv_geom *g)
{
    if (g->in_place) return 0;
    return ((size_t)(g->c * g->ps + g->tail) + 15) / 16 * 16; /* a packed input (or band) */
}

/* Filters of chunk ch in the tile (tyi, txi); xr: the packed input at the tile's first row. */
static void conv_tile(const void *arg, const float *xr, float *yn, const float *rn, int64_t tyi, int64_t txi,
                      int64_t ch)
{
    const conv_state *s = arg;
    const conv_geom *g = &s->p.g;
    int v = s->p.var_of[tyi == g->nty - 1][txi == g->ntx - 1];
    int64_t y0 = tyi * g->ty, x0 = txi * g->tx * s->p.key.vec;
    int64_t k0 = ch * s->p.chunk, k1 = k0 + s->p.chunk < g->o ? k0 + s->p.chunk : g->o;
    s->fn[v](xr + x0, s->p.meta, s->p.cidx, s->p.wpk, s->p.bias, s->p.ochan, yn + y0 * g->ow + x0,
             rn ? rn + y0 * g->ow + x0 : NULL, k0, k1);
}

pdc_status cpu_conv_run_layer(const cpu_layer *L, const ir_layer *l, float *const *buf, const cpu_exec *x,
                              const conv_geom *g, int64_t nchunk, cpu_conv_tile_fn tile, const void *arg)
{
    const float *in = buf[l->inputs[0]], *res = cpu_conv_residual(L, buf);
    float *out = cpu_layer_out(L, l, buf);
    const int64_t oimg = g->o * g->oh * g->ow;
    for (int64_t n = 0; n < g->n; n++)
        cpu_conv_run_image(g, nchunk, in + n * g->c * g->h * g->w, out + n * oimg, res ? res + n * oimg : NULL, x,
                           tile, arg);
    return PDC_OK;
}

static pdc_status conv_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const conv_state *s = L->state;
    return cpu_conv_run_layer(L, l, buf, x, &s->p.g, (s->p.g.o + s->p.chunk - 1) / s->p.chunk, conv_tile,
                              s);
}
