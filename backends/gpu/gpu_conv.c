/*
 * gpu_conv.c - gpu convolution, 1-D/2-D/3-D, strides, pads, dilation, groups (depthwise), fused
 * activation and out_perm, one thread per (image, output channel, output pixel), pixels fastest so
 * neighbouring threads read neighbouring inputs.
 *
 * The filter's kept kernels are grouped by pattern, as the cpu backend's packing does: for each
 * pattern of the layer's set, per (stored) filter o the range [start_p[o], start_p[o+1]) of its
 * kernels with that pattern, their input channels (cidx_p) and their kept weights (ntaps_p each,
 * packed). The generated code has one loop per pattern whose body is that pattern's taps unrolled:
 * tap offsets are constants and their bounds checks depend only on the pixel, so they are computed
 * once per thread, outside the channel loops. Pruned kernels (pattern -1) are not visited. A dense
 * (or block/unstructured-pruned) weight is one "pattern" holding the whole window.
 *
 * Dense 2-D convolutions (groups 1, weights not pattern-sparse) with at least 256 output pixels use a
 * shared-memory tiled kernel instead: a block of 256 threads computes a TH x TW tile of output pixels
 * (one pixel per thread) for CONV_OCB output channels (CONV_OCB accumulators per thread). Per step of
 * CB input channels it stages the input tile with its halo for those channels and the CONV_OCB x CB
 * filters' weights in shared memory (coalesced along rows / along the weights), barrier, then every
 * thread does CB x taps x CONV_OCB fma from shared memory, barrier. Each staged input element is
 * reused by up to taps x CONV_OCB fma instead of being reloaded per output channel and tap.
 */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"

#define GPU_MAX_TAPS 512 /* taps unrolled per pattern */

#define CONV_OCB 8          /* output channels per tiled block */
#define CONV_SMEM_IN 2048   /* floats of staged input per step (8 KB) */

typedef struct conv_p {
    int tiled;
    int64_t th, tw, tih, tiw, cb; /* tiled: output tile, input tile with halo, channels per step */
    gpu_ref x, y, bias, perm;
    int64_t n, c, o, cg, og;
    int64_t in[3], out[3], k[3], s[3], pb[3], d[3];
    gpu_act act;
    int npat;
    int32_t *ntaps;           /* per pattern */
    int32_t *taps;            /* per pattern, ntaps (kz, ky, kx) triples, concatenated */
    gpu_ref *start, *cidx, *w;/* per pattern: [O+1] int32, [kernels] int32, [kernels * ntaps] float */
} conv_p;

static void free_conv(void *vp)
{
    conv_p *p = vp;
    pdc_free(p->ntaps);
    pdc_free(p->taps);
    pdc_free(p->start);
    pdc_free(p->cidx);
    pdc_free(p->w);
}

static void gen_conv(gpu_kb *kb, const void *vp)
{
    const conv_p *p = vp;
    const int64_t out_sp = p->out[0] * p->out[1] * p->out[2], in_sp = p->in[0] * p->in[1] * p->in[2];
    LLVMValueRef pix = kb_remc(kb, kb->idx, out_sp), t = kb_divc(kb, kb->idx, out_sp);
    LLVMValueRef o = kb_remc(kb, t, p->o), n = kb_divc(kb, t, p->o);
    LLVMValueRef pos[3] = {kb_divc(kb, pix, p->out[1] * p->out[2]), kb_remc(kb, kb_divc(kb, pix, p->out[2]), p->out[1]),
                           kb_remc(kb, pix, p->out[2])};
    for (int a = 0; a < 3; a++) pos[a] = kb_addc(kb, kb_mulc(kb, pos[a], p->s[a]), -p->pb[a]);
    /* first input channel of o's group, in image n */
    LLVMValueRef xg = kb_mulc(kb, kb_add(kb, kb_mulc(kb, n, p->c), kb_mulc(kb, kb_divc(kb, o, p->og), p->cg)), in_sp);
    LLVMValueRef acc = kb_var(kb, kb->f32, p->bias.off >= 0 ? kb_ld(kb, p->bias, o) : kb_f32(kb, 0.0f));
    const int32_t *tap = p->taps;
    for (int pt = 0; pt < p->npat; pt++) {
        int nt = p->ntaps[pt];
        /* per tap: its offset within a channel plane and whether it is inside the input */
        LLVMValueRef off[GPU_MAX_TAPS], ok[GPU_MAX_TAPS];
        for (int q = 0; q < nt; q++) {
            LLVMValueRef okq = NULL, offq = kb_i64(kb, 0);
            for (int a = 0; a < 3; a++) {
                LLVMValueRef i = kb_addc(kb, pos[a], tap[3 * q + a] * p->d[a]);
                /* checked unless every output position keeps this tap inside the input (the end pad
                 * alone can push it out: a 1x1 kernel on a 1x1 plane with a bottom pad) */
                int64_t lo = tap[3 * q + a] * p->d[a] - p->pb[a], hi = lo + (p->out[a] - 1) * p->s[a];
                if (lo < 0 || hi >= p->in[a]) {
                    LLVMValueRef v = kb_and(kb, kb_icmp(kb, LLVMIntSGE, i, kb_i64(kb, 0)),
                                            kb_icmp(kb, LLVMIntSLT, i, kb_i64(kb, p->in[a])));
                    okq = okq ? kb_and(kb, okq, v) : v;
                }
                int64_t stride = a == 0 ? p->in[1] * p->in[2] : a == 1 ? p->in[2] : 1;
                offq = kb_add(kb, offq, kb_mulc(kb, i, stride));
            }
            ok[q] = okq;
            /* out-of-range taps read the channel's first element (always valid) and are zeroed */
            off[q] = okq ? kb_sel(kb, okq, offq, kb_i64(kb, 0)) : offq;
        }
        kb_loop L;
        LLVMValueRef j = kb_for(kb, &L, kb_ldi(kb, p->start[pt], o), kb_ldi(kb, p->start[pt], kb_addc(kb, o, 1)));
        LLVMValueRef xc = kb_add(kb, xg, kb_mulc(kb, kb_ldi(kb, p->cidx[pt], j), in_sp));
        LLVMValueRef wj = kb_mulc(kb, j, nt);
        LLVMValueRef a = kb_get(kb, kb->f32, acc);
        for (int q = 0; q < nt; q++) {
            LLVMValueRef v = kb_ld(kb, p->x, kb_add(kb, xc, off[q]));
            if (ok[q]) v = kb_sel(kb, ok[q], v, kb_f32(kb, 0.0f));
            a = kb_fma(kb, v, kb_ld(kb, p->w[pt], kb_addc(kb, wj, q)), a);
        }
        kb_set(kb, acc, a);
        kb_endfor(kb, &L);
        tap += 3 * nt;
    }
    LLVMValueRef oc = p->perm.off >= 0 ? kb_ldi(kb, p->perm, o) : o;
    LLVMValueRef at = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, n, p->o), oc), out_sp), pix);
    kb_st(kb, p->y, at, kb_act(kb, &p->act, kb_get(kb, kb->f32, acc)));
}

/* Guarded load: ok ? r[i] : 0, without touching r[i] otherwise. */
static LLVMValueRef ld_or_zero(gpu_kb *kb, gpu_ref r, LLVMValueRef i, LLVMValueRef ok)
{
    LLVMValueRef v = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    kb_if I = {0};
    kb_if_begin(kb, &I, ok);
    kb_set(kb, v, kb_ld(kb, r, i));
    kb_if_end(kb, &I);
    return kb_get(kb, kb->f32, v);
}

static LLVMValueRef in_range(gpu_kb *kb, LLVMValueRef v, int64_t hi)
{
    return kb_and(kb, kb_icmp(kb, LLVMIntSGE, v, kb_i64(kb, 0)), kb_icmp(kb, LLVMIntSLT, v, kb_i64(kb, hi)));
}

static void gen_conv_tiled(gpu_kb *kb, const void *vp)
{
    const conv_p *p = vp;
    const int64_t OH = p->out[1], OW = p->out[2], IH = p->in[1], IW = p->in[2], KH = p->k[1], KW = p->k[2];
    const int64_t ksp = KH * KW, tplane = p->tih * p->tiw, CB = p->cb;
    const int64_t ntx = (OW + p->tw - 1) / p->tw, nty = (OH + p->th - 1) / p->th, nob = (p->o + CONV_OCB - 1) / CONV_OCB;
    /* block-uniform: image, output-channel group, tile */
    LLVMValueRef b = kb->block;
    LLVMValueRef bx = kb_remc(kb, b, ntx), by = kb_remc(kb, kb_divc(kb, b, ntx), nty);
    LLVMValueRef bo = kb_remc(kb, kb_divc(kb, b, ntx * nty), nob), bn = kb_divc(kb, b, ntx * nty * nob);
    LLVMValueRef y0 = kb_mulc(kb, by, p->th), x0 = kb_mulc(kb, bx, p->tw), o0 = kb_mulc(kb, bo, CONV_OCB);
    LLVMValueRef iy0 = kb_addc(kb, kb_mulc(kb, y0, p->s[1]), -p->pb[1]), ix0 = kb_addc(kb, kb_mulc(kb, x0, p->s[2]), -p->pb[2]);
    LLVMValueRef xn = kb_mulc(kb, bn, p->c * IH * IW);
    LLVMValueRef sin = kb_shared(kb, CB * tplane), sw = kb_shared(kb, CONV_OCB * CB * ksp);
    LLVMValueRef acc[CONV_OCB];
    for (int q = 0; q < CONV_OCB; q++) acc[q] = kb_tvar(kb);
    kb_phase_begin(kb);
    for (int q = 0; q < CONV_OCB; q++) kb_tset(kb, acc[q], kb_f32(kb, 0.0f));
    kb_phase_end(kb, 0);
    kb_loop L;
    LLVMValueRef c0 = kb_mulc(kb, kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, (p->c + CB - 1) / CB)), CB);
    kb_phase_begin(kb);
    /* input tile + halo of channels c0 .. c0+CB-1: element e = (cb, r, col), 256 at a time */
    for (int64_t e0 = 0; e0 < CB * tplane; e0 += GPU_BLOCK) {
        LLVMValueRef e = kb_addc(kb, kb->tid, e0);
        kb_if G = {0};
        if (e0 + GPU_BLOCK > CB * tplane) kb_if_begin(kb, &G, kb_icmp(kb, LLVMIntSLT, e, kb_i64(kb, CB * tplane)));
        LLVMValueRef cb = kb_divc(kb, e, tplane), rem = kb_remc(kb, e, tplane);
        LLVMValueRef gy = kb_add(kb, iy0, kb_divc(kb, rem, p->tiw)), gx = kb_add(kb, ix0, kb_remc(kb, rem, p->tiw));
        LLVMValueRef ci = kb_add(kb, c0, cb);
        LLVMValueRef ok = kb_and(kb, kb_and(kb, in_range(kb, gy, IH), in_range(kb, gx, IW)),
                                 kb_icmp(kb, LLVMIntSLT, ci, kb_i64(kb, p->c)));
        LLVMValueRef at = kb_add(kb, xn, kb_add(kb, kb_mulc(kb, ci, IH * IW), kb_add(kb, kb_mulc(kb, gy, IW), gx)));
        kb_sst(kb, sin, e, ld_or_zero(kb, p->x, at, ok));
        if (e0 + GPU_BLOCK > CB * tplane) kb_if_end(kb, &G);
    }
    /* weights of filters o0 .. o0+OCB-1 for those channels: element e = (q, cb, tap) */
    for (int64_t e0 = 0; e0 < CONV_OCB * CB * ksp; e0 += GPU_BLOCK) {
        LLVMValueRef e = kb_addc(kb, kb->tid, e0);
        kb_if G = {0};
        if (e0 + GPU_BLOCK > CONV_OCB * CB * ksp)
            kb_if_begin(kb, &G, kb_icmp(kb, LLVMIntSLT, e, kb_i64(kb, CONV_OCB * CB * ksp)));
        LLVMValueRef oc = kb_add(kb, o0, kb_divc(kb, e, CB * ksp)), rem = kb_remc(kb, e, CB * ksp);
        LLVMValueRef ci = kb_add(kb, c0, kb_divc(kb, rem, ksp));
        LLVMValueRef ok = kb_and(kb, kb_icmp(kb, LLVMIntSLT, oc, kb_i64(kb, p->o)), kb_icmp(kb, LLVMIntSLT, ci, kb_i64(kb, p->c)));
        LLVMValueRef at = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, oc, p->c), ci), ksp), kb_remc(kb, rem, ksp));
        kb_sst(kb, sw, e, ld_or_zero(kb, p->w[0], at, ok));
        if (e0 + GPU_BLOCK > CONV_OCB * CB * ksp) kb_if_end(kb, &G);
    }
    kb_phase_end(kb, 1);
    kb_phase_begin(kb);
    {
        LLVMValueRef ty = kb_divc(kb, kb->tid, p->tw), tx = kb_remc(kb, kb->tid, p->tw);
        LLVMValueRef base = kb_add(kb, kb_mulc(kb, ty, p->s[1] * p->tiw), kb_mulc(kb, tx, p->s[2]));
        LLVMValueRef a[CONV_OCB];
        for (int q = 0; q < CONV_OCB; q++) a[q] = kb_tget(kb, acc[q]);
        for (int64_t cb = 0; cb < CB; cb++)
            for (int64_t ky = 0; ky < KH; ky++)
                for (int64_t kx = 0; kx < KW; kx++) {
                    LLVMValueRef v = kb_sld(kb, sin, kb_addc(kb, base, cb * tplane + ky * p->d[1] * p->tiw + kx * p->d[2]));
                    for (int q = 0; q < CONV_OCB; q++)
                        a[q] = kb_fma(kb, v, kb_sld(kb, sw, kb_i64(kb, (q * CB + cb) * ksp + ky * KW + kx)), a[q]);
                }
        for (int q = 0; q < CONV_OCB; q++) kb_tset(kb, acc[q], a[q]);
    }
    kb_phase_end(kb, 1);
    kb_endfor(kb, &L);
    kb_phase_begin(kb);
    {
        LLVMValueRef oy = kb_add(kb, y0, kb_divc(kb, kb->tid, p->tw)), ox = kb_add(kb, x0, kb_remc(kb, kb->tid, p->tw));
        kb_if I = {0};
        kb_if_begin(kb, &I, kb_and(kb, kb_icmp(kb, LLVMIntSLT, oy, kb_i64(kb, OH)), kb_icmp(kb, LLVMIntSLT, ox, kb_i64(kb, OW))));
        LLVMValueRef pix = kb_add(kb, kb_mulc(kb, oy, OW), ox);
        for (int q = 0; q < CONV_OCB; q++) {
            LLVMValueRef o = kb_addc(kb, o0, q);
            kb_if J = {0};
            if (p->o % CONV_OCB) kb_if_begin(kb, &J, kb_icmp(kb, LLVMIntSLT, o, kb_i64(kb, p->o)));
            LLVMValueRef v = kb_tget(kb, acc[q]);
            if (p->bias.off >= 0) v = kb_fadd(kb, v, kb_ld(kb, p->bias, o));
            LLVMValueRef oc = p->perm.off >= 0 ? kb_ldi(kb, p->perm, o) : o;
            LLVMValueRef at = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, bn, p->o), oc), OH * OW), pix);
            kb_st(kb, p->y, at, kb_act(kb, &p->act, v));
            if (p->o % CONV_OCB) kb_if_end(kb, &J);
        }
        kb_if_end(kb, &I);
    }
    kb_phase_end(kb, 0);
}

/* Packs the kernels of pattern pt (mask over the window, or all taps) of constant weight w. */
static pdc_status pack_pattern(gpu_plan *pl, conv_p *p, const ir_tensor *w, int pt, int pattern_sparse,
                               const int32_t *taps, size_t *kept)
{
    const ir_sparsity *s = &w->sparsity;
    const int64_t ksp = p->k[0] * p->k[1] * p->k[2];
    const int nt = p->ntaps[pt];
    size_t count = 0;
    for (int64_t k = 0; k < p->o * p->cg; k++) count += pattern_sparse ? s->kernel_pattern[k] == pt : 1;
    int64_t st = gpu_plan_wts(pl, (size_t)p->o + 1), ci = st < 0 ? -1 : gpu_plan_wts(pl, count);
    int64_t wo = ci < 0 ? -1 : gpu_plan_wts(pl, count * (size_t)nt);
    if (wo < 0) return PDC_ERR_OUT_OF_MEMORY;
    int32_t *start = (int32_t *)(pl->wts + st), *cidx = (int32_t *)(pl->wts + ci);
    float *wp = pl->wts + wo;
    size_t j = 0;
    for (int64_t o = 0; o < p->o; o++) {
        start[o] = (int32_t)j;
        for (int64_t c = 0; c < p->cg; c++) {
            if (pattern_sparse && s->kernel_pattern[o * p->cg + c] != pt) continue;
            cidx[j] = (int32_t)c;
            const float *wk = w->data + (o * p->cg + c) * ksp;
            for (int q = 0; q < nt; q++)
                wp[j * (size_t)nt + (size_t)q] = wk[(taps[3 * q] * p->k[1] + taps[3 * q + 1]) * p->k[2] + taps[3 * q + 2]];
            j++;
        }
    }
    start[p->o] = (int32_t)j;
    p->start[pt] = (gpu_ref){1, st};
    p->cidx[pt] = (gpu_ref){1, ci};
    p->w[pt] = (gpu_ref){1, wo};
    *kept += j;
    return PDC_OK;
}

pdc_status gpu_plan_conv(gpu_plan *pl, const ir_model *m, size_t li)
{
    const ir_layer *l = &m->layers[li];
    ir_window_params w;
    pdc_status st = ir_window_params_get(m, l, &w);
    if (st) return st;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return GPU_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const ir_tensor *tw = &m->tensors[l->inputs[1]];
    if (tw->kind != IR_TENSOR_CONST || !tw->data)
        return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "weights must be a constant");
    if (w.group < 1 || w.c % w.group || w.o % w.group)
        return GPU_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "bad channel/group configuration");
    ir_fused_params fp;
    if ((st = ir_fused_params_get(m, l, &fp))) return st;
    conv_p *p = pdc_calloc(pl->ctx, 1, sizeof *p);
    if (!p) return PDC_ERR_OUT_OF_MEMORY;
    p->x = gpu_in(pl, l, 0);
    p->y = gpu_out(pl, l, 0);
    p->bias = gpu_in(pl, l, 2);
    p->perm = (gpu_ref){1, -1};
    p->n = w.n, p->c = w.c, p->o = w.o, p->cg = w.c / w.group, p->og = w.o / w.group;
    p->act = gpu_act_from_fused(&fp);
    int lead = 3 - w.nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        p->in[i] = i < lead ? 1 : w.in[j];
        p->out[i] = i < lead ? 1 : w.out[j];
        p->k[i] = i < lead ? 1 : w.k[j];
        p->s[i] = i < lead ? 1 : w.stride[j];
        p->pb[i] = i < lead ? 0 : w.pad_begin[j];
        p->d[i] = i < lead ? 1 : w.dil[j];
    }
    const ir_sparsity *sp = &tw->sparsity;
    const int pattern_sparse = sp->kind == IR_SPARSITY_PATTERN && p->k[0] == 1 && sp->kh == p->k[1] &&
                               sp->kw == p->k[2] && sp->n_patterns > 0 && sp->n_kernels == (size_t)(p->o * p->cg);
    const int64_t ksp = p->k[0] * p->k[1] * p->k[2];
    if (ksp > GPU_MAX_TAPS) {
        pdc_free(p);
        return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "window of %lld taps (the gpu kernel unrolls at most %d)",
                             (long long)ksp, GPU_MAX_TAPS);
    }
    p->npat = pattern_sparse ? (int)sp->n_patterns : 1;
    size_t ntap_total = 0;
    p->ntaps = pdc_calloc(pl->ctx, (size_t)p->npat, sizeof *p->ntaps);
    p->start = pdc_calloc(pl->ctx, (size_t)p->npat, sizeof *p->start);
    p->cidx = pdc_calloc(pl->ctx, (size_t)p->npat, sizeof *p->cidx);
    p->w = pdc_calloc(pl->ctx, (size_t)p->npat, sizeof *p->w);
    if (p->ntaps)
        for (int pt = 0; pt < p->npat; pt++) {
            p->ntaps[pt] = pattern_sparse ? __builtin_popcountll(sp->patterns[pt]) : (int32_t)ksp;
            ntap_total += (size_t)p->ntaps[pt];
        }
    p->taps = pdc_calloc(pl->ctx, ntap_total ? 3 * ntap_total : 1, sizeof *p->taps);
    if (!p->ntaps || !p->start || !p->cidx || !p->w || !p->taps) {
        free_conv(p);
        pdc_free(p);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t kept = 0;
    int32_t *tap = p->taps;
    for (int pt = 0; pt < p->npat && !st; pt++) {
        int q = 0;
        for (int64_t kz = 0; kz < p->k[0]; kz++)
            for (int64_t ky = 0; ky < p->k[1]; ky++)
                for (int64_t kx = 0; kx < p->k[2]; kx++)
                    if (!pattern_sparse || (sp->patterns[pt] >> (ky * p->k[2] + kx) & 1)) {
                        tap[3 * q] = (int32_t)kz, tap[3 * q + 1] = (int32_t)ky, tap[3 * q + 2] = (int32_t)kx;
                        q++;
                    }
        st = pack_pattern(pl, p, tw, pt, pattern_sparse, tap, &kept);
        tap += 3 * q;
    }
    if (!st && fp.out_perm) {
        int64_t po = gpu_plan_wts(pl, fp.n_perm);
        if (po < 0) st = PDC_ERR_OUT_OF_MEMORY;
        else {
            for (size_t i = 0; i < fp.n_perm; i++) ((int32_t *)(pl->wts + po))[i] = (int32_t)fp.out_perm[i];
            p->perm = (gpu_ref){1, po};
        }
    }
    if (st) {
        free_conv(p);
        pdc_free(p);
        return st;
    }
    char win[64];
    if (w.nsp == 3) snprintf(win, sizeof win, "%lldx%lldx%lld", (long long)p->k[0], (long long)p->k[1], (long long)p->k[2]);
    else if (w.nsp == 2) snprintf(win, sizeof win, "%lldx%lld", (long long)p->k[1], (long long)p->k[2]);
    else snprintf(win, sizeof win, "%lld", (long long)p->k[2]);
    /* the tiled kernel: dense 2-D, groups 1, a plane of at least one block of pixels, shared memory
     * within CONV_SMEM_IN + the weights of one step */
    if (!pattern_sparse && w.group == 1 && w.nsp == 2 && p->out[1] * p->out[2] >= GPU_BLOCK && ksp <= 49) {
        p->tw = p->out[2] >= 16 ? 16 : 8;
        p->th = GPU_BLOCK / p->tw;
        p->tih = (p->th - 1) * p->s[1] + (p->k[1] - 1) * p->d[1] + 1;
        p->tiw = (p->tw - 1) * p->s[2] + (p->k[2] - 1) * p->d[2] + 1;
        p->cb = CONV_SMEM_IN / (p->tih * p->tiw);
        if (p->cb > 8) p->cb = 8;
        if (p->cb > p->c) p->cb = p->c;
        p->tiled = p->cb >= 1;
    }
    char how[128];
    if (p->tiled)
        snprintf(how, sizeof how, "shared-memory tiles %lldx%lld pixels x %d channels, %lld input channels per step",
                 (long long)p->th, (long long)p->tw, CONV_OCB, (long long)p->cb);
    else
        snprintf(how, sizeof how, "thread per (channel, pixel)");
    const char *kind = pattern_sparse ? "pattern-sparse" : (w.group == w.c && w.group == w.o && w.group > 1) ? "depthwise"
                                                                                                             : "dense";
    if (pattern_sparse)
        snprintf(pl->info[li], sizeof pl->info[0],
                 "ptx pattern-sparse conv %s, %d patterns, %zu of %lld kernels kept%s, thread per (channel, pixel)",
                 win, p->npat, kept, (long long)(p->o * p->cg), fp.out_perm ? ", out_perm" : "");
    else
        snprintf(pl->info[li], sizeof pl->info[0], "ptx %s conv %.30s%s%s, %.90s", kind, win,
                 w.group > 1 && strcmp(kind, "depthwise") ? ", grouped" : "", fp.out_perm ? ", out_perm" : "", how);
    int64_t total = p->n * p->o * p->out[0] * p->out[1] * p->out[2];
    if (p->tiled) {
        int64_t blocks = p->n * ((p->o + CONV_OCB - 1) / CONV_OCB) * ((p->out[1] + p->th - 1) / p->th) *
                         ((p->out[2] + p->tw - 1) / p->tw);
        return gpu_plan_tiled1(pl, (int)li, "conv", gen_conv_tiled, p, free_conv, blocks) < 0 ? PDC_ERR_OUT_OF_MEMORY
                                                                                                : PDC_OK;
    }
    return gpu_plan_kernel1(pl, (int)li, "conv", gen_conv, p, free_conv, total) < 0 ? PDC_ERR_OUT_OF_MEMORY : PDC_OK;
}
