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
 * of conv_dense.c is not retargeted). One thread: every tile runs all filters in one call.
 */
#include <stdio.h>

#include "backends/arm/arm.h"
#include "backends/cpu/conv/conv.h"

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

pdc_status arm_emit_conv(arm_gen *G, const ir_layer *l)
{
    char why[200] = "";
    cpu_conv_plan P;
    pdc_status st = cpu_conv_plan_init(G->ctx, G->m, l, &P, why, sizeof why);
    if (!st) st = cpu_conv_plan_pack(G->ctx, &G->t, 0, 1, &P);
    if (st == PDC_ERR_UNSUPPORTED) {
        cpu_conv_plan_release(&P);
        return arm_unsupported(G, l, why[0] ? why : "not supported by the conv generator");
    }
    if (st) {
        cpu_conv_plan_release(&P);
        return st;
    }
    const conv_geom *g = &P.g;
    const conv_key *k = &P.key;
    /* the tile functions, internal to the module */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "L%zu", G->li);
    LLVMBasicBlockRef here = LLVMGetInsertBlock(G->irb.b);
    if ((st = cpu_conv_emit_tiles(&P.key, G->ctx, &G->t, G->irb.c, G->irb.m, prefix))) {
        cpu_conv_plan_release(&P);
        return st;
    }
    LLVMPositionBuilderAtEnd(G->irb.b, here);
    LLVMValueRef tile[CONV_MAX_VARIANTS];
    LLVMTypeRef tty = NULL;
    for (int v = 0; v < k->n_var; v++) {
        char name[64];
        snprintf(name, sizeof name, "%s_tile%d", prefix, v);
        tile[v] = LLVMGetNamedFunction(G->irb.m, name);
        LLVMSetLinkage(tile[v], LLVMInternalLinkage);
        tty = LLVMGlobalGetValueType(tile[v]);
    }
    LLVMValueRef meta = arm_const_bytes(G, P.meta, P.n_meta * sizeof *P.meta, "meta");
    LLVMValueRef cidx = arm_const_bytes(G, P.cidx, P.n_cidx * sizeof *P.cidx, "cidx");
    LLVMValueRef wpk = arm_const_bytes(G, P.wpk, P.n_wpk * sizeof *P.wpk, "wpk");
    LLVMValueRef bias = arm_const_bytes(G, P.bias, (size_t)g->o * sizeof *P.bias, "bias");
    LLVMValueRef ochan = arm_const_bytes(G, P.ochan, (size_t)g->o * sizeof *P.ochan, "ochan");
    LLVMValueRef x, y;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) {
        cpu_conv_plan_release(&P);
        return st;
    }
    LLVMValueRef xp = arm_scratch(G, (size_t)(g->c * g->ps + g->tail));
    for (int64_t n = 0; n < g->n; n++) {
        LLVMValueRef xn = pdc_irb_gepc(&G->irb, G->irb.f32, x, n * g->c * g->h * g->w);
        LLVMValueRef yn = pdc_irb_gepc(&G->irb, G->irb.f32, y, n * g->o * g->oh * g->ow);
        emit_pack(G, g, xn, xp);
        /* tiles: rows [0, nty-1) and the last row tile, columns likewise; each region one variant */
        for (int r = 0; r < 2; r++)
            for (int cx = 0; cx < 2; cx++) {
                int64_t ty0 = r ? g->nty - 1 : 0, nty = r ? 1 : g->nty - 1;
                int64_t tx0 = cx ? g->ntx - 1 : 0, ntx = cx ? 1 : g->ntx - 1;
                if (nty <= 0 || ntx <= 0) continue;
                int v = P.var_of[r][cx];
                arm_loop Ly, Lx;
                LLVMValueRef tyi = arm_addc(G, arm_loop_begin(G, nty, &Ly), ty0);
                LLVMValueRef txi = arm_addc(G, arm_loop_begin(G, ntx, &Lx), tx0);
                LLVMValueRef y0 = arm_mulc(G, tyi, g->ty), x0 = arm_mulc(G, txi, g->tx * k->vec);
                LLVMValueRef xt = pdc_irb_gep(&G->irb, G->irb.f32, xp, arm_add(G, arm_mulc(G, y0, g->sy * g->wq), x0));
                LLVMValueRef yt = pdc_irb_gep(&G->irb, G->irb.f32, yn, arm_add(G, arm_mulc(G, y0, g->ow), x0));
                LLVMValueRef args[10] = {xt, meta, cidx, wpk, bias, ochan, yt, LLVMConstNull(G->irb.ptr), /* no residual */
                                         arm_i64(G, 0), arm_i64(G, g->o)};
                LLVMBuildCall2(G->irb.b, tty, tile[v], args, 10, "");
                arm_loop_end(G, &Lx);
                arm_loop_end(G, &Ly);
            }
    }
    cpu_conv_plan_release(&P);
    return PDC_OK;
}
