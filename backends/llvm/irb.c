/*
 * irb.c - small helpers over the LLVM C builder for the kernel generators: typed GEPs, vector
 * loads and broadcasts, masked stores, llvm.fmuladd. Everything uses opaque pointers and the
 * non-deprecated *2 builder calls.
 */
#include <stdio.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "backends/llvm/llvm.h"

void pdc_irb_init(pdc_irb *irb, LLVMContextRef c, LLVMModuleRef m, int vec)
{
    irb->c = c;
    irb->m = m;
    irb->b = LLVMCreateBuilderInContext(c);
    irb->f32 = LLVMFloatTypeInContext(c);
    irb->i32 = LLVMInt32TypeInContext(c);
    irb->i64 = LLVMInt64TypeInContext(c);
    irb->i1 = LLVMInt1TypeInContext(c);
    irb->ptr = LLVMPointerTypeInContext(c, 0);
    irb->vf = LLVMVectorType(irb->f32, (unsigned)vec);
    irb->vec = vec;
}

void pdc_irb_dispose(pdc_irb *irb)
{
    if (irb->b) LLVMDisposeBuilder(irb->b);
    irb->b = NULL;
}

static void add_fn_attr_enum(pdc_irb *irb, LLVMValueRef f, unsigned idx, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(f, idx, LLVMCreateEnumAttribute(irb->c, kind, 0));
}

LLVMValueRef pdc_irb_function(pdc_irb *irb, const char *prefix, const char *name, unsigned n_params,
                              LLVMTypeRef *params)
{
    char full[256];
    snprintf(full, sizeof full, "%s_%s", prefix, name);
    LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(irb->c), params, n_params, 0);
    LLVMValueRef f = LLVMAddFunction(irb->m, full, ft);
    add_fn_attr_enum(irb, f, LLVMAttributeFunctionIndex, "nounwind");
    /* Explicit vectors get full-width registers either way; this keeps LLVM's own vectoriser
     * (scalar loops in epilogues) at the same width. */
    char width[8];
    snprintf(width, sizeof width, "%d", irb->vec * 32);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(irb->c, "prefer-vector-width", 19, width, (unsigned)strlen(width)));
    for (unsigned i = 0; i < n_params; i++)
        if (params[i] == irb->ptr) add_fn_attr_enum(irb, f, i + 1, "noalias");
    return f;
}

LLVMValueRef pdc_irb_i64(pdc_irb *irb, int64_t v) { return LLVMConstInt(irb->i64, (unsigned long long)v, 1); }
LLVMValueRef pdc_irb_i32(pdc_irb *irb, int32_t v) { return LLVMConstInt(irb->i32, (unsigned long long)(int64_t)v, 1); }
LLVMValueRef pdc_irb_f32(pdc_irb *irb, float v) { return LLVMConstReal(irb->f32, (double)v); }

LLVMValueRef pdc_irb_f32_like(pdc_irb *irb, LLVMValueRef like, float v)
{
    LLVMValueRef s = pdc_irb_f32(irb, v);
    return LLVMGetTypeKind(LLVMTypeOf(like)) == LLVMVectorTypeKind ? pdc_irb_splat(irb, s) : s;
}

LLVMValueRef pdc_irb_gep(pdc_irb *irb, LLVMTypeRef elem, LLVMValueRef base, LLVMValueRef index)
{
    return LLVMBuildInBoundsGEP2(irb->b, elem, base, &index, 1, "");
}

LLVMValueRef pdc_irb_gepc(pdc_irb *irb, LLVMTypeRef elem, LLVMValueRef base, int64_t index)
{
    if (index == 0) return base;
    return pdc_irb_gep(irb, elem, base, pdc_irb_i64(irb, index));
}

LLVMValueRef pdc_irb_splat(pdc_irb *irb, LLVMValueRef scalar)
{
    LLVMValueRef undef = LLVMGetPoison(irb->vf);
    LLVMValueRef v = LLVMBuildInsertElement(irb->b, undef, scalar, pdc_irb_i32(irb, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(irb->i32, (unsigned)irb->vec));
    return LLVMBuildShuffleVector(irb->b, v, undef, zeros, "");
}

LLVMValueRef pdc_irb_load_splat(pdc_irb *irb, LLVMValueRef p)
{
    LLVMValueRef s = LLVMBuildLoad2(irb->b, irb->f32, p, "");
    LLVMSetAlignment(s, 4);
    return pdc_irb_splat(irb, s);
}

LLVMValueRef pdc_irb_load_vec(pdc_irb *irb, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(irb->b, irb->vf, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

LLVMValueRef pdc_irb_load_i32_as_i64(pdc_irb *irb, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(irb->b, irb->i32, p, "");
    LLVMSetAlignment(v, 4);
    return LLVMBuildSExt(irb->b, v, irb->i64, "");
}

LLVMValueRef pdc_irb_load_i64(pdc_irb *irb, LLVMValueRef p)
{
    LLVMValueRef v = LLVMBuildLoad2(irb->b, irb->i64, p, "");
    LLVMSetAlignment(v, 8);
    return v;
}

/* <vec x i1>: lanes below n set */
static LLVMValueRef lanes_below(pdc_irb *irb, int n)
{
    LLVMValueRef lanes[64];
    for (int i = 0; i < irb->vec; i++) lanes[i] = LLVMConstInt(irb->i1, i < n, 0);
    return LLVMConstVector(lanes, (unsigned)irb->vec);
}

/* A call of llvm.masked.<name> overloaded on (float vector, pointer type ptr_t): the load and store
 * forms take a pointer, gather and scatter a vector of pointers. */
static LLVMValueRef masked_call(pdc_irb *irb, const char *name, LLVMTypeRef ptr_t, LLVMValueRef *args)
{
    LLVMTypeRef over[2] = {irb->vf, ptr_t};
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(irb->m, id, over, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(irb->c, id, over, 2);
    return LLVMBuildCall2(irb->b, fty, fn, args, 4, "");
}

void pdc_irb_store_masked(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask)
{
    LLVMValueRef args[4] = {v, p, pdc_irb_i32(irb, 4), mask};
    masked_call(irb, "llvm.masked.store", irb->ptr, args);
}

LLVMValueRef pdc_irb_load_masked(pdc_irb *irb, LLVMValueRef p, LLVMValueRef mask)
{
    /* lanes off are not read, and are 0 */
    LLVMValueRef args[4] = {p, pdc_irb_i32(irb, 4), mask, LLVMConstNull(irb->vf)};
    return masked_call(irb, "llvm.masked.load", irb->ptr, args);
}

LLVMValueRef pdc_irb_load_vec_n(pdc_irb *irb, LLVMValueRef p, int n_valid)
{
    if (n_valid >= irb->vec) return pdc_irb_load_vec(irb, p);
    return pdc_irb_load_masked(irb, p, lanes_below(irb, n_valid));
}

LLVMValueRef pdc_irb_gather(pdc_irb *irb, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMValueRef ptrs = LLVMBuildGEP2(irb->b, irb->f32, base, &idx, 1, ""); /* scalar base, vector index */
    LLVMValueRef args[4] = {ptrs, pdc_irb_i32(irb, 4), lanes_below(irb, irb->vec), LLVMConstNull(irb->vf)};
    return masked_call(irb, "llvm.masked.gather", LLVMVectorType(irb->ptr, (unsigned)irb->vec), args);
}

void pdc_irb_scatter(pdc_irb *irb, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMValueRef ptrs = LLVMBuildGEP2(irb->b, irb->f32, base, &idx, 1, "");
    LLVMValueRef args[4] = {v, ptrs, pdc_irb_i32(irb, 4), lanes_below(irb, irb->vec)};
    masked_call(irb, "llvm.masked.scatter", LLVMVectorType(irb->ptr, (unsigned)irb->vec), args);
}

void pdc_irb_store_vec(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p, int n_valid)
{
    if (n_valid >= irb->vec) {
        LLVMValueRef s = LLVMBuildStore(irb->b, v, p);
        LLVMSetAlignment(s, 4);
        return;
    }
    pdc_irb_store_masked(irb, v, p, lanes_below(irb, n_valid));
}

LLVMValueRef pdc_irb_lanes_below(pdc_irb *irb, LLVMValueRef n)
{
    LLVMValueRef lanes[64];
    for (int i = 0; i < irb->vec; i++) lanes[i] = pdc_irb_i64(irb, i);
    LLVMValueRef nv = LLVMBuildInsertElement(irb->b, LLVMGetUndef(LLVMVectorType(irb->i64, (unsigned)irb->vec)), n,
                                             pdc_irb_i32(irb, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(irb->i32, (unsigned)irb->vec));
    nv = LLVMBuildShuffleVector(irb->b, nv, nv, zeros, "");
    return LLVMBuildICmp(irb->b, LLVMIntSLT, LLVMConstVector(lanes, (unsigned)irb->vec), nv, "");
}

/* llvm.vector.reduce.<name> of v (overloaded on v's type); start, if not NULL, is the first operand. */
static LLVMValueRef reduce_call(pdc_irb *irb, const char *name, LLVMValueRef start, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(irb->m, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(irb->c, id, &t, 1);
    LLVMValueRef args[2] = {start, v};
    return start ? LLVMBuildCall2(irb->b, fty, fn, args, 2, "") : LLVMBuildCall2(irb->b, fty, fn, &args[1], 1, "");
}

LLVMValueRef pdc_irb_reduce_max(pdc_irb *irb, LLVMValueRef v) { return reduce_call(irb, "llvm.vector.reduce.fmax", NULL, v); }

LLVMValueRef pdc_irb_reduce_add(pdc_irb *irb, LLVMValueRef v)
{
    return reduce_call(irb, "llvm.vector.reduce.fadd", pdc_irb_f32(irb, -0.0f), v);
}

LLVMValueRef pdc_irb_loop_begin(pdc_irb *irb, LLVMValueRef fn, pdc_irb_loop *lp, LLVMValueRef var, LLVMValueRef from,
                                LLVMValueRef to, int64_t step, const char *name)
{
    LLVMBuilderRef B = irb->b;
    lp->var = var;
    lp->step = step;
    lp->head = LLVMAppendBasicBlockInContext(irb->c, fn, name);
    lp->body = LLVMAppendBasicBlockInContext(irb->c, fn, "body");
    lp->after = LLVMAppendBasicBlockInContext(irb->c, fn, "after");
    LLVMBuildStore(B, from, var);
    LLVMBuildBr(B, lp->head);
    LLVMPositionBuilderAtEnd(B, lp->head);
    LLVMValueRef i = LLVMBuildLoad2(B, irb->i64, var, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, i, to, ""), lp->body, lp->after);
    LLVMPositionBuilderAtEnd(B, lp->body);
    return i;
}

LLVMValueRef pdc_irb_loop_end(pdc_irb *irb, pdc_irb_loop *lp, LLVMValueRef i)
{
    LLVMBuildStore(irb->b, LLVMBuildAdd(irb->b, i, pdc_irb_i64(irb, lp->step), ""), lp->var);
    LLVMValueRef latch = LLVMBuildBr(irb->b, lp->head);
    LLVMPositionBuilderAtEnd(irb->b, lp->after);
    return latch;
}

void pdc_irb_loop_unroll(pdc_irb *irb, LLVMValueRef latch, unsigned count)
{
    /* !llvm.loop !0, !0 = distinct !{!0, !{!"llvm.loop.unroll.count", i32 count}}: a node whose first
     * operand is itself, made by replacing a temporary */
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(irb->c, NULL, 0);
    LLVMMetadataRef hint[2] = {LLVMMDStringInContext2(irb->c, "llvm.loop.unroll.count", 22),
                               LLVMValueAsMetadata(pdc_irb_i32(irb, (int32_t)count))};
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(irb->c, hint, 2)};
    LLVMMetadataRef loop = LLVMMDNodeInContext2(irb->c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, loop);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(irb->c, "llvm.loop", 9), LLVMMetadataAsValue(irb->c, loop));
}

LLVMValueRef pdc_irb_fma(pdc_irb *irb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    unsigned id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(irb->m, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(irb->c, id, &t, 1);
    LLVMValueRef args[3] = {a, b, c};
    return LLVMBuildCall2(irb->b, fty, fn, args, 3, "");
}

void pdc_irb_prefetch(pdc_irb *irb, LLVMValueRef p)
{
    LLVMTypeRef pt = irb->ptr;
    unsigned id = LLVMLookupIntrinsicID("llvm.prefetch", 13);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(irb->m, id, &pt, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(irb->c, id, &pt, 1);
    /* read, locality 3 (keep in all levels), data cache */
    LLVMValueRef args[4] = {p, pdc_irb_i32(irb, 0), pdc_irb_i32(irb, 3), pdc_irb_i32(irb, 1)};
    LLVMBuildCall2(irb->b, fty, fn, args, 4, "");
}
