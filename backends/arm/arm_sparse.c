/*
 * arm_sparse.c - block-sparse matrix-vector products in the AArch64 module, through the cpu
 * target's block-sparse generator (backends/cpu/gemm.c: cpu_bsr_plan_pack, cpu_bsr_emit - write once,
 * retarget). The planner runs with the NEON description, so the packing (block rows, kept blocks in
 * execution order, edge blocks zero-padded) and the conditions (block shape limits, "too dense to
 * gain" above half the blocks kept) are the cpu target's; the row pointers, column offsets and packed
 * weights become read-only globals - the pruned zeros are not stored - and the kernel, one per block
 * shape and module, gets internal linkage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/arm/arm.h"
#include "backends/cpu/cpu.h"

pdc_status arm_bsr_plan(arm_gen *G, const ir_tensor *wt, int64_t row0, int64_t rows, arm_bsr *S)
{
    memset(S, 0, sizeof *S);
    cpu_bsr b;
    pdc_status st = cpu_bsr_plan_pack(G->ctx, &G->t, wt, row0, rows, &b);
    if (st) return st;
    /* the kernel: shared by every product of this block shape in the module */
    char prefix[48], name[64];
    /* a '.' in the name: never a C identifier, so never a model's NAME_run */
    snprintf(prefix, sizeof prefix, "bsr.%" PRId64 "x%" PRId64, b.bh, b.bw);
    snprintf(name, sizeof name, "%s_run", prefix);
    S->fn = LLVMGetNamedFunction(G->irb.m, name);
    if (!S->fn) {
        LLVMBasicBlockRef here = LLVMGetInsertBlock(G->irb.b);
        st = cpu_bsr_emit(&b.key, G->ctx, &G->t, G->irb.c, G->irb.m, prefix);
        if (here) LLVMPositionBuilderAtEnd(G->irb.b, here);
        S->fn = st ? NULL : LLVMGetNamedFunction(G->irb.m, name);
        if (!st && !S->fn) st = pdc_error(G->ctx, PDC_ERR_INTERNAL, "emit: block-sparse kernel '%s' missing", name);
        if (st) {
            cpu_bsr_release(&b);
            return st;
        }
        LLVMSetLinkage(S->fn, LLVMInternalLinkage);
    }
    S->fty = LLVMGlobalGetValueType(S->fn);
    const size_t nblk = (size_t)b.rowptr[b.nbr];
    S->rowptr = arm_const_bytes(G, b.rowptr, (size_t)(b.nbr + 1) * sizeof *b.rowptr, "bsr_rowptr");
    S->col = arm_const_bytes(G, b.col, nblk * sizeof *b.col, "bsr_col");
    S->wpk = arm_const_bytes(G, b.wpk, nblk * (size_t)(b.bh * b.bw) * sizeof *b.wpk, "bsr_w");
    S->k = b.k;
    S->kpad = cpu_bsr_kpad(&b);
    S->o = b.o;
    S->nbr = b.nbr;
    S->bh = b.bh;
    S->bw = b.bw;
    S->kept = b.kept;
    S->total = b.total;
    cpu_bsr_release(&b);
    return PDC_OK;
}

LLVMValueRef arm_bsr_input(arm_gen *G, const arm_bsr *S, LLVMValueRef x, LLVMValueRef buf)
{
    if (S->kpad == S->k) return x;
    arm_move(G, buf, x, S->k);
    arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, buf, S->k), S->kpad - S->k);
    return buf;
}

void arm_bsr_call(arm_gen *G, const arm_bsr *S, LLVMValueRef x, LLVMValueRef bias, LLVMValueRef y)
{
    LLVMValueRef args[9] = {x, S->rowptr, S->col, S->wpk, bias, y, arm_i64(G, 0), arm_i64(G, S->nbr), arm_i64(G, S->o)};
    LLVMBuildCall2(G->irb.b, S->fty, S->fn, args, 9, "");
}
