/*
 * arm_conv.c - a conv layer in the AArch64 module, through the cpu target's pattern-conv generator
 * (backends/cpu/conv/conv.c: write once, retarget). The planner runs with the NEON description (4 floats
 * per q register, 32 registers), so tiles, the pattern-specialised tile functions and the packed
 * arrays (meta, channel indices, kept weights in execution order, bias, output channels) are the
 * same construction as on the host; the arrays become read-only globals and the tile functions get
 * internal linkage. Around them this file emits, in IR, what conv.c's run function does in C:
 * packing the input into zero-padded (phase-split) planes in the scratch area, the loop over tiles
 * calling the right variant for every filter, and the activation the tile code does not inline.
 *
 * Dense layers use the same generator with one full-window pattern (the multi-filter dense family
 * of conv_dense.c is not retargeted). A BCR-pruned 1x1 conv runs on arm_bcr.c's planes product instead. One thread: every tile runs all filters in one call. A 3-D conv
 * runs as the 2-D conv of each output depth plane (emit_conv3d), split by depth taps as on the cpu target.
 */
#include <stdio.h>
#include <string.h>

#include "backends/arm/arm.h"
#include "backends/cpu/conv/conv.h"
#include "backends/cpu/conv3d_taps.h"

/* ceil(a / b) for b > 0 */
static int64_t cdiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* IR version of cpu_conv_pack for all channels of one image: x (c*h*w floats) -> xp. Row and
 * column ranges that read the image are found at emit time, so the copy loops carry no bounds
 * checks and the padding is memset. */
static void emit_pack(arm_gen *G, const conv_geom *g, LLVMValueRef x, LLVMValueRef xp)
{
    arm_loop Lc;
    LLVMValueRef c = arm_loop_begin(G, g->c, &Lc);
    LLVMValueRef xc = pdc_irb_gep(&G->irb, G->irb.f32, x, arm_mulc(G, c, g->h * g->w));
    LLVMValueRef pc = pdc_irb_gep(&G->irb, G->irb.f32, xp, arm_mulc(G, c, g->ps));
    for (int64_t ph = 0; ph < g->nph; ph++) {
        LLVMValueRef pp = pdc_irb_gepc(&G->irb, G->irb.f32, pc, ph * g->pstride);
        /* padded row r reads image row iy = r*ra + rb */
        int64_t ra = (g->flat ? g->sy : 1) * g->py, rb = (g->flat ? ph / g->sx : 0) * g->py - g->pt, cph = ph % g->sx;
        int64_t r0 = clamp64(cdiv(-rb, ra), 0, g->hq), r1 = clamp64(cdiv(g->h - rb, ra), r0, g->hq);
        /* column j reads image column ix = ca*j + cb */
        int64_t ca = g->sx * g->px, cb = cph * g->px - g->pl;
        int64_t j0 = clamp64(cdiv(-cb, ca), 0, g->wq), j1 = clamp64(cdiv(g->w - cb, ca), j0, g->wq);
        arm_zero(G, pp, r0 * g->wq);
        arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, pp, r1 * g->wq), (g->hq - r1) * g->wq);
        if (r1 > r0) {
            arm_loop Lr, Lj;
            LLVMValueRef r = arm_loop_begin(G, r1 - r0, &Lr);
            LLVMValueRef dst = pdc_irb_gep(&G->irb, G->irb.f32, pp, arm_mulc(G, arm_addc(G, r, r0), g->wq));
            LLVMValueRef src = pdc_irb_gep(&G->irb, G->irb.f32, xc, arm_affine(G, r, ra * g->w, NULL, 0, (r0 * ra + rb) * g->w));
            arm_zero(G, dst, j0);
            if (j1 > j0) {
                LLVMValueRef j = arm_loop_begin(G, j1 - j0, &Lj);
                arm_stf(G, dst, arm_addc(G, j, j0), arm_ldf(G, src, arm_affine(G, j, ca, NULL, 0, ca * j0 + cb)));
                arm_loop_end(G, &Lj);
            }
            arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, dst, j1), g->wq - j1);
            arm_loop_end(G, &Lr);
        }
        /* past the plane's rows: zeros (flat layouts read there for lanes they discard) */
        arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, pp, g->hq * g->wq), g->pstride - g->hq * g->wq);
    }
    arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, pc, g->nph * g->pstride), g->ps - g->nph * g->pstride);
    arm_loop_end(G, &Lc);
    /* after the last channel: what its flat planes read past c * ps */
    arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, xp, g->c * g->ps), g->tail);
}

/* A conv's plan and what the module holds of it: the tile functions and the packed arrays. */
typedef struct arm_conv {
    cpu_conv_plan P;
    LLVMValueRef tile[CONV_MAX_VARIANTS];
    LLVMTypeRef tty;
    LLVMValueRef meta, cidx, wpk, bias, ochan;
} arm_conv;

/* Plans conv l of model m (the module's, or a 2-D stand-in: part of a 3-D conv) and emits its tile
 * functions and arrays; release C->P either way. */
static pdc_status conv_prepare(arm_gen *G, const ir_model *m, const ir_layer *l, int part, arm_conv *C)
{
    char why[200] = "";
    pdc_status st = cpu_conv_plan_init(G->ctx, m, l, &C->P, why, sizeof why);
    if (!st) st = cpu_conv_plan_pack(G->ctx, &G->t, 0, 1, &C->P);
    if (st == PDC_ERR_UNSUPPORTED) return arm_unsupported(G, l, why[0] ? why : "not supported by the conv generator");
    if (st) return st;
    /* the tile functions, internal to the module (part >= 0: one of a layer's several 2-D convs) */
    char prefix[32];
    if (part < 0) snprintf(prefix, sizeof prefix, "L%zu", G->li);
    else snprintf(prefix, sizeof prefix, "L%zu_%d", G->li, part);
    LLVMBasicBlockRef here = LLVMGetInsertBlock(G->irb.b);
    if ((st = cpu_conv_emit_tiles(&C->P.key, G->ctx, &G->t, G->irb.c, G->irb.m, prefix))) return st;
    LLVMPositionBuilderAtEnd(G->irb.b, here);
    for (int v = 0; v < C->P.key.n_var; v++) {
        char name[64];
        snprintf(name, sizeof name, "%s_tile%d", prefix, v);
        C->tile[v] = LLVMGetNamedFunction(G->irb.m, name);
        LLVMSetLinkage(C->tile[v], LLVMInternalLinkage);
        C->tty = LLVMGlobalGetValueType(C->tile[v]);
    }
    const cpu_conv_plan *P = &C->P;
    C->meta = arm_const_bytes(G, P->meta, P->n_meta * sizeof *P->meta, "meta");
    C->cidx = arm_const_bytes(G, P->cidx, P->n_cidx * sizeof *P->cidx, "cidx");
    C->wpk = arm_const_bytes(G, P->wpk, P->n_wpk * sizeof *P->wpk, "wpk");
    C->bias = arm_const_bytes(G, P->bias, (size_t)P->g.o * sizeof *P->bias, "bias");
    C->ochan = arm_const_bytes(G, P->ochan, (size_t)P->g.o * sizeof *P->ochan, "ochan");
    return PDC_OK;
}

/* Floats of scratch conv_image packs into. */
static int64_t conv_packed_floats(const arm_conv *C) { return C->P.g.c * C->P.g.ps + C->P.g.tail; }

/* One image: x (c*h*w floats) packed into xp, every tile of y (o*oh*ow floats) computed. */
static void conv_image(arm_gen *G, const arm_conv *C, LLVMValueRef x, LLVMValueRef xp, LLVMValueRef y)
{
    const conv_geom *g = &C->P.g;
    const conv_key *k = &C->P.key;
    emit_pack(G, g, x, xp);
    /* tiles: rows [0, nty-1) and the last row tile, columns likewise; each region one variant */
    for (int r = 0; r < 2; r++)
        for (int cx = 0; cx < 2; cx++) {
            int64_t ty0 = r ? g->nty - 1 : 0, nty = r ? 1 : g->nty - 1;
            int64_t tx0 = cx ? g->ntx - 1 : 0, ntx = cx ? 1 : g->ntx - 1;
            if (nty <= 0 || ntx <= 0) continue;
            int v = C->P.var_of[r][cx];
            arm_loop Ly, Lx;
            LLVMValueRef tyi = arm_addc(G, arm_loop_begin(G, nty, &Ly), ty0);
            LLVMValueRef txi = arm_addc(G, arm_loop_begin(G, ntx, &Lx), tx0);
            LLVMValueRef y0 = arm_mulc(G, tyi, g->ty), x0 = arm_mulc(G, txi, g->tx * k->vec);
            LLVMValueRef xt = pdc_irb_gep(&G->irb, G->irb.f32, xp, arm_add(G, arm_mulc(G, y0, g->sy * g->wq), x0));
            LLVMValueRef yt = pdc_irb_gep(&G->irb, G->irb.f32, y, arm_add(G, arm_mulc(G, y0, g->ow), x0));
            LLVMValueRef args[10] = {xt, C->meta, C->cidx, C->wpk, C->bias, C->ochan, yt,
                                     LLVMConstNull(G->irb.ptr), /* no residual */
                                     arm_i64(G, 0), arm_i64(G, g->o)};
            LLVMBuildCall2(G->irb.b, C->tty, C->tile[v], args, 10, "");
            arm_loop_end(G, &Lx);
            arm_loop_end(G, &Ly);
        }
}

/*
 * A 3-D conv: output depth plane od is the 2-D conv cpu_conv3d_as_2d describes over the input planes of
 * the depth taps it runs (backends/cpu/conv3d.c, conv3d_taps.h: those inside the input where the clip's
 * edge planes would waste enough taps over zero planes, else the whole window), one 2-D conv per range of
 * taps. Per image and plane (unrolled: depths are few), those planes are gathered into scratch (zeros for
 * a depth outside the input), the range's 2-D tiles run, and the result is scattered into the plane.
 */
static pdc_status emit_conv3d(arm_gen *G, const ir_layer *l)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(G->m, l, &p);
    if (st) return st;
    const ir_tensor *wt = &G->m->tensors[l->inputs[1]];
    const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &G->m->tensors[l->inputs[2]] : NULL;
    if (wt->kind != IR_TENSOR_CONST || (bt && bt->kind != IR_TENSOR_CONST))
        return arm_unsupported(G, l, "3-D conv with a weight or bias computed at run time");
    const int64_t od_n = p.out[0], kd = p.k[0], plane = p.in[1] * p.in[2], oplane = p.out[1] * p.out[2];
    const int split = cpu_conv3d_split(&p);
    /* the ranges of taps, in order of first use, and each plane's */
    arm_conv *C = pdc_calloc(G->ctx, (size_t)od_n, sizeof *C);
    ir_model **m2 = pdc_calloc(G->ctx, (size_t)od_n, sizeof *m2); /* alive while C is */
    int64_t *k0s = pdc_calloc(G->ctx, (size_t)od_n * 2, sizeof *k0s);
    int *part_of = pdc_calloc(G->ctx, (size_t)od_n, sizeof *part_of);
    int n_parts = 0;
    if (!C || !m2 || !k0s || !part_of) st = PDC_ERR_OUT_OF_MEMORY;
    int64_t packed = 0;
    for (int64_t od = 0; od < od_n && !st; od++) {
        int64_t k0, k1;
        cpu_conv3d_plane_taps(&p, split, od, &k0, &k1);
        int i = 0;
        while (i < n_parts && (k0s[2 * i] != k0 || k0s[2 * i + 1] != k1)) i++;
        if (i == n_parts) {
            st = cpu_conv3d_as_2d(G->ctx, G->m, l, wt->data, bt ? bt->data : NULL, 0, k0, k1, &m2[i]);
            if (!st) st = conv_prepare(G, m2[i], &m2[i]->layers[0], i, &C[i]);
            if (st) break;
            k0s[2 * i] = k0, k0s[2 * i + 1] = k1;
            if (conv_packed_floats(&C[i]) > packed) packed = conv_packed_floats(&C[i]);
            n_parts++;
        }
        part_of[od] = i;
    }
    LLVMValueRef x, y;
    if (!st) st = arm_tensor_ptr(G, l->inputs[0], &x);
    if (!st) st = arm_tensor_ptr(G, l->outputs[0], &y);
    if (!st) {
        const int64_t gathered = p.c * kd * plane;
        LLVMValueRef xp = arm_scratch(G, (size_t)(packed + gathered + p.o * oplane));
        LLVMValueRef xg = pdc_irb_gepc(&G->irb, G->irb.f32, xp, packed);
        LLVMValueRef yg = pdc_irb_gepc(&G->irb, G->irb.f32, xg, gathered);
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t od = 0; od < od_n; od++) {
                const int i = part_of[od];
                const int64_t k0 = k0s[2 * i], nk = k0s[2 * i + 1] - k0;
                for (int64_t j = 0; j < nk; j++) {
                    const int64_t id = od * p.stride[0] + (k0 + j) * p.dil[0] - p.pad_begin[0];
                    arm_loop Lc;
                    LLVMValueRef c = arm_loop_begin(G, p.c, &Lc);
                    LLVMValueRef dst = pdc_irb_gep(&G->irb, G->irb.f32, xg, arm_affine(G, c, nk * plane, NULL, 0, j * plane));
                    if (id < 0 || id >= p.in[0]) {
                        arm_zero(G, dst, plane);
                    } else {
                        LLVMValueRef src = pdc_irb_gep(&G->irb, G->irb.f32, x,
                                                       arm_affine(G, c, p.in[0] * plane, NULL, 0,
                                                                  (n * p.c * p.in[0] + id) * plane));
                        arm_move(G, dst, src, plane);
                    }
                    arm_loop_end(G, &Lc);
                }
                conv_image(G, &C[i], xg, xp, yg);
                arm_loop Lo;
                LLVMValueRef o = arm_loop_begin(G, p.o, &Lo);
                arm_move(G,
                         pdc_irb_gep(&G->irb, G->irb.f32, y,
                                     arm_affine(G, o, od_n * oplane, NULL, 0, (n * p.o * od_n + od) * oplane)),
                         pdc_irb_gep(&G->irb, G->irb.f32, yg, arm_mulc(G, o, oplane)), oplane);
                arm_loop_end(G, &Lo);
            }
    }
    for (int i = 0; C && m2 && i < od_n; i++) {
        cpu_conv_plan_release(&C[i].P);
        ir_model_destroy(m2[i]);
    }
    pdc_free(C);
    pdc_free(m2);
    pdc_free(k0s);
    pdc_free(part_of);
    return st;
}

/* A 1x1 conv (stride 1, no padding, one group, no out_perm) with BCR-pruned weights: per image, the output
 * planes start as the bias and take arm_bcr.c's planes product, then the fused activation;
 * PDC_ERR_UNSUPPORTED (nothing on ctx) for any other conv. */
static pdc_status emit_conv_bcr(arm_gen *G, const ir_layer *l)
{
    const ir_tensor *wt = &G->m->tensors[l->inputs[1]];
    if (wt->sparsity.kind != IR_SPARSITY_BCR) return PDC_ERR_UNSUPPORTED;
    cpu_conv_plan P;
    char why[200];
    pdc_status st = cpu_conv_plan_init(G->ctx, G->m, l, &P, why, sizeof why);
    const conv_geom *g = &P.g;
    if (!st && (g->kh != 1 || g->kw != 1 || g->sy != 1 || g->sx != 1 || g->group != 1 || g->pt != 0 || g->pl != 0 ||
                g->oh != g->h || g->ow != g->w || P.fp.out_perm))
        st = PDC_ERR_UNSUPPORTED;
    arm_bcr S;
    if (!st) st = arm_bcr_plan(G, wt, 0, g->o, &S);
    LLVMValueRef x, y;
    if (!st) st = arm_tensor_ptr(G, l->inputs[0], &x);
    if (!st) st = arm_tensor_ptr(G, l->outputs[0], &y);
    float *bias = st ? NULL : pdc_calloc(G->ctx, (size_t)g->o, sizeof *bias);
    if (!st && !bias) st = PDC_ERR_OUT_OF_MEMORY;
    if (st) {
        cpu_conv_plan_release(&P);
        return st;
    }
    for (int64_t o = 0; P.b && o < g->o; o++) bias[o] = P.b[o];
    LLVMValueRef bv = arm_const_bytes(G, bias, (size_t)g->o * sizeof *bias, "bias");
    pdc_free(bias);
    const int64_t np = g->h * g->w;
    for (int64_t n = 0; n < g->n; n++) {
        LLVMValueRef xn = pdc_irb_gepc(&G->irb, G->irb.f32, x, n * g->c * np);
        LLVMValueRef yn = pdc_irb_gepc(&G->irb, G->irb.f32, y, n * g->o * np);
        arm_loop Lo, Lp;
        LLVMValueRef o = arm_loop_begin(G, g->o, &Lo);
        LLVMValueRef bo = arm_ldf(G, bv, o), yo = pdc_irb_gep(&G->irb, G->irb.f32, yn, arm_mulc(G, o, np));
        LLVMValueRef p = arm_loop_begin(G, np, &Lp);
        arm_stf(G, yo, p, bo);
        arm_loop_end(G, &Lp);
        arm_loop_end(G, &Lo);
        arm_bcr_product_planes(G, &S, xn, np, yn);
        arm_act_inplace(G, &P.fp, yn, g->o * np);
    }
    cpu_conv_plan_release(&P);
    return PDC_OK;
}

pdc_status arm_emit_conv(arm_gen *G, const ir_layer *l)
{
    if (G->m->tensors[l->inputs[1]].rank == 5) return emit_conv3d(G, l);
    pdc_status bst = emit_conv_bcr(G, l);
    if (bst != PDC_ERR_UNSUPPORTED) return bst;
    arm_conv C;
    memset(&C, 0, sizeof C);
    pdc_status st = conv_prepare(G, G->m, l, -1, &C);
    LLVMValueRef x, y;
    if (!st) st = arm_tensor_ptr(G, l->inputs[0], &x);
    if (!st) st = arm_tensor_ptr(G, l->outputs[0], &y);
    if (!st) {
        const conv_geom *g = &C.P.g;
        LLVMValueRef xp = arm_scratch(G, (size_t)conv_packed_floats(&C));
        for (int64_t n = 0; n < g->n; n++)
            conv_image(G, &C, pdc_irb_gepc(&G->irb, G->irb.f32, x, n * g->c * g->h * g->w), xp,
                       pdc_irb_gepc(&G->irb, G->irb.f32, y, n * g->o * g->oh * g->ow));
    }
    cpu_conv_plan_release(&C.P);
    return st;
}
