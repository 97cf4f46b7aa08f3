/*
 * arm_bcr.c - products by block column-row (BCR) pruned weights in the AArch64 module. The packing is
 * the cpu target's (backends/cpu/bcr.c, cpu_bcr_plan: per block-row, the kept columns' input indices and
 * bh weights each, zeros where the block pruned a row); the row pointers, indices and packed weights
 * become read-only globals, the pruned zeros are not stored. Each block-row is one gathered GEMV: a
 * <bh x float> accumulator (bh / 4 NEON registers at bh = 4, 8, 16) takes, per kept column, its weights
 * times the one input that column reads, loaded once and broadcast; then it is added to y. The code is
 * emitted inline at the call: a loop over the full block-rows, and the edge block-row (fewer than bh
 * rows) after it, storing only its rows. A 1x1 conv takes the planes form: per kept column and row, the
 * column's input plane times the weight onto the row's output plane.
 */
#include "backends/arm/arm.h"
#include "backends/cpu/cpu.h"

pdc_status arm_bcr_plan(arm_gen *G, const ir_tensor *wt, int64_t row0, int64_t rows, arm_bcr *S)
{
    cpu_bcr b;
    pdc_status st = cpu_bcr_plan(G->ctx, wt, row0, rows, &b);
    if (st) return st;
    const size_t n_cols = (size_t)b.rowptr[b.nbr];
    S->rowptr = arm_const_bytes(G, b.rowptr, (size_t)(b.nbr + 1) * sizeof *b.rowptr, "bcr_rowptr");
    S->col = arm_const_bytes(G, b.col, (n_cols ? n_cols : 1) * sizeof *b.col, "bcr_col");
    S->wpk = arm_const_bytes(G, b.wpk, (n_cols ? n_cols : 1) * (size_t)b.bh * sizeof *b.wpk, "bcr_w");
    S->rows = b.rows;
    S->bh = b.bh;
    S->kept = b.kept;
    S->total = b.total;
    cpu_bcr_release(&b);
    return PDC_OK;
}

/* y[r0, r0 + h) += block-row br's product (br: an i64 value; h <= bh rows stored). */
static void bcr_row(arm_gen *G, const arm_bcr *S, LLVMValueRef x, LLVMValueRef y, LLVMValueRef br, int64_t h)
{
    pdc_irb *irb = &G->irb;
    LLVMBuilderRef B = irb->b;
    LLVMTypeRef vt = LLVMVectorType(irb->f32, (unsigned)S->bh);
    LLVMValueRef k0 = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, S->rowptr, br));
    LLVMValueRef k1 = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, S->rowptr, arm_addc(G, br, 1)));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcr_head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcr_col");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcr_done");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    LLVMValueRef k = LLVMBuildPhi(B, irb->i64, "k"), acc = LLVMBuildPhi(B, vt, "acc");
    LLVMValueRef zero = LLVMConstNull(vt);
    LLVMAddIncoming(k, &k0, &pre, 1);
    LLVMAddIncoming(acc, &zero, &pre, 1);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, k, k1, ""), body, done);
    /* one kept column: its input, broadcast, times its bh weights */
    LLVMPositionBuilderAtEnd(B, body);
    LLVMValueRef c = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, S->col, k));
    LLVMValueRef xv = arm_ldf(G, x, c);
    LLVMValueRef xs = LLVMBuildInsertElement(B, LLVMGetUndef(vt), xv, pdc_irb_i32(irb, 0), "");
    xs = LLVMBuildShuffleVector(B, xs, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(irb->i32, (unsigned)S->bh)), "");
    LLVMValueRef wv = LLVMBuildLoad2(B, vt, pdc_irb_gep(irb, irb->f32, S->wpk, arm_mulc(G, k, S->bh)), "");
    LLVMSetAlignment(wv, 4);
    LLVMValueRef acc2 = pdc_irb_fma(irb, xs, wv, acc), k2 = LLVMBuildNSWAdd(B, k, arm_i64(G, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(k, &k2, &latch, 1);
    LLVMAddIncoming(acc, &acc2, &latch, 1);
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMValueRef at = pdc_irb_gep(irb, irb->f32, y, arm_mulc(G, br, S->bh));
    if (h == S->bh) {
        LLVMValueRef yv = LLVMBuildLoad2(B, vt, at, "");
        LLVMSetAlignment(yv, 4);
        LLVMValueRef s = LLVMBuildStore(B, LLVMBuildFAdd(B, yv, acc, ""), at);
        LLVMSetAlignment(s, 4);
        return;
    }
    for (int64_t i = 0; i < h; i++) {
        LLVMValueRef li = arm_i64(G, i);
        arm_stf(G, at, li, LLVMBuildFAdd(B, arm_ldf(G, at, li), LLVMBuildExtractElement(B, acc, pdc_irb_i32(irb, (int32_t)i), ""), ""));
    }
}

void arm_bcr_product(arm_gen *G, const arm_bcr *S, LLVMValueRef x, LLVMValueRef y)
{
    const int64_t full = S->rows / S->bh, tail = S->rows % S->bh;
    if (full > 0) {
        arm_loop L;
        LLVMValueRef br = arm_loop_begin(G, full, &L);
        bcr_row(G, S, x, y, br, S->bh);
        arm_loop_end(G, &L);
    }
    if (tail) bcr_row(G, S, x, y, arm_i64(G, full), tail);
}

/* y[r0 + i][0, np) += block-row br's kept columns' weights times their input planes x[col[k]][0, np), for
 * i < h: per kept column and row one unit-stride loop over the pixels (NEON-vectorised by LLVM), the
 * column's plane read from L1 once per kept row. */
static void bcr_plane_row(arm_gen *G, const arm_bcr *S, LLVMValueRef x, int64_t np, LLVMValueRef y, LLVMValueRef br,
                          int64_t h)
{
    pdc_irb *irb = &G->irb;
    LLVMBuilderRef B = irb->b;
    LLVMValueRef k0 = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, S->rowptr, br));
    LLVMValueRef k1 = pdc_irb_load_i64(irb, pdc_irb_gep(irb, irb->i64, S->rowptr, arm_addc(G, br, 1)));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcrp_head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcrp_col");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(irb->c, G->fn, "bcrp_done");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    LLVMValueRef k = LLVMBuildPhi(B, irb->i64, "k");
    LLVMAddIncoming(k, &k0, &pre, 1);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, k, k1, ""), body, done);
    LLVMPositionBuilderAtEnd(B, body);
    LLVMValueRef c = pdc_irb_load_i32_as_i64(irb, pdc_irb_gep(irb, irb->i32, S->col, k));
    LLVMValueRef xc = pdc_irb_gep(irb, irb->f32, x, arm_mulc(G, c, np));
    LLVMValueRef wk = pdc_irb_gep(irb, irb->f32, S->wpk, arm_mulc(G, k, S->bh));
    arm_loop Li, Lp;
    LLVMValueRef i = arm_loop_begin(G, h, &Li);
    LLVMValueRef wv = arm_ldf(G, wk, i);
    LLVMValueRef yr = pdc_irb_gep(irb, irb->f32, y, arm_mulc(G, arm_add(G, arm_mulc(G, br, S->bh), i), np));
    LLVMValueRef p = arm_loop_begin(G, np, &Lp);
    arm_stf(G, yr, p, pdc_irb_fma(irb, wv, arm_ldf(G, xc, p), arm_ldf(G, yr, p)));
    arm_loop_end(G, &Lp);
    arm_loop_end(G, &Li);
    LLVMValueRef k2 = LLVMBuildNSWAdd(B, k, arm_i64(G, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(k, &k2, &latch, 1);
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, done);
}

void arm_bcr_product_planes(arm_gen *G, const arm_bcr *S, LLVMValueRef x, int64_t np, LLVMValueRef y)
{
    const int64_t full = S->rows / S->bh, tail = S->rows % S->bh;
    if (full > 0) {
        arm_loop L;
        LLVMValueRef br = arm_loop_begin(G, full, &L);
        bcr_plane_row(G, S, x, np, y, br, S->bh);
        arm_loop_end(G, &L);
    }
    if (tail) bcr_plane_row(G, S, x, np, y, arm_i64(G, full), tail);
}
