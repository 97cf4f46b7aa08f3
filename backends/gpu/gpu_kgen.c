/*
 * gpu_kgen.c - turns a plan's kernels into LLVM functions: the two index sources (NVPTX special
 * registers for PTX, a host loop over every (block, thread) index for emulation), the small IR
 * vocabulary the generators use (typed loads from the two arenas, loops, ifs, locals), and the math
 * that has no libdevice here: exp as ex2.approx on PTX, sigmoid and tanh built from it.
 *
 * Each kernel is "one thread's work": the generator writes straight-line code (with its own loops)
 * for thread index idx, which the entry has already checked against the kernel's total. Locals are
 * allocas in the entry block; O3's SROA turns them into registers, so PTX has no local memory.
 */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Target.h>

#include "backends/gpu/gpu.h"

const char *const gpu_archs[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", NULL};

int gpu_arch_valid(const char *arch)
{
    for (size_t i = 0; gpu_archs[i]; i++)
        if (!strcmp(gpu_archs[i], arch)) return 1;
    return 0;
}

void gpu_arch_list(char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; gpu_archs[i]; i++) {
        if (i) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, gpu_archs[i], cap - strlen(buf) - 1);
    }
}

gpu_act gpu_act_from_fused(const ir_fused_params *fp)
{
    gpu_act a = {GPU_ACT_NONE, 0, 0};
    switch (fp->act) {
    case IR_ACT_NONE: break;
    case IR_ACT_RELU: a.kind = GPU_ACT_RELU; break;
    case IR_ACT_CLIP: a = (gpu_act){GPU_ACT_CLIP, fp->act_min, fp->act_max}; break;
    case IR_ACT_LEAKY_RELU: a = (gpu_act){GPU_ACT_LEAKY, fp->act_alpha, 0}; break;
    case IR_ACT_SIGMOID: a.kind = GPU_ACT_SIGMOID; break;
    case IR_ACT_TANH: a.kind = GPU_ACT_TANH; break;
    case IR_ACT_HARDSWISH: a.kind = GPU_ACT_HARDSWISH; break;
    }
    return a;
}

/* ------------------------------------------------------------------ vocabulary */

LLVMValueRef kb_i64(gpu_kb *kb, int64_t v) { return LLVMConstInt(kb->i64, (unsigned long long)v, 1); }
LLVMValueRef kb_i32(gpu_kb *kb, int32_t v) { return LLVMConstInt(kb->i32, (unsigned long long)(int64_t)v, 1); }
LLVMValueRef kb_f32(gpu_kb *kb, float v) { return LLVMConstReal(kb->f32, (double)v); }

static LLVMValueRef addr(gpu_kb *kb, gpu_ref r, LLVMValueRef i, LLVMTypeRef elem)
{
    LLVMValueRef at = kb_addc(kb, i, r.off);
    return LLVMBuildInBoundsGEP2(kb->b, elem, r.wts ? kb->wts : kb->act, &at, 1, "");
}

LLVMValueRef kb_ld(gpu_kb *kb, gpu_ref r, LLVMValueRef i)
{
    LLVMValueRef v = LLVMBuildLoad2(kb->b, kb->f32, addr(kb, r, i, kb->f32), "");
    LLVMSetAlignment(v, 4);
    return v;
}

LLVMValueRef kb_ldi(gpu_kb *kb, gpu_ref r, LLVMValueRef i)
{
    LLVMValueRef v = LLVMBuildLoad2(kb->b, kb->i32, addr(kb, r, i, kb->i32), "");
    LLVMSetAlignment(v, 4);
    return LLVMBuildSExt(kb->b, v, kb->i64, "");
}

void kb_st(gpu_kb *kb, gpu_ref r, LLVMValueRef i, LLVMValueRef v)
{
    LLVMValueRef s = LLVMBuildStore(kb->b, v, addr(kb, r, i, kb->f32));
    LLVMSetAlignment(s, 4);
}

LLVMValueRef kb_add(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(kb->b, a, b, ""); }
LLVMValueRef kb_sub(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWSub(kb->b, a, b, ""); }
LLVMValueRef kb_mul(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(kb->b, a, b, ""); }
LLVMValueRef kb_addc(gpu_kb *kb, LLVMValueRef a, int64_t c) { return c ? kb_add(kb, a, kb_i64(kb, c)) : a; }
LLVMValueRef kb_mulc(gpu_kb *kb, LLVMValueRef a, int64_t c) { return c == 1 ? a : kb_mul(kb, a, kb_i64(kb, c)); }
LLVMValueRef kb_divc(gpu_kb *kb, LLVMValueRef a, int64_t c)
{
    return c == 1 ? a : LLVMBuildUDiv(kb->b, a, kb_i64(kb, c), "");
}
LLVMValueRef kb_remc(gpu_kb *kb, LLVMValueRef a, int64_t c)
{
    return c == 1 ? kb_i64(kb, 0) : LLVMBuildURem(kb->b, a, kb_i64(kb, c), "");
}
LLVMValueRef kb_fadd(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(kb->b, a, b, ""); }
LLVMValueRef kb_fsub(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(kb->b, a, b, ""); }
LLVMValueRef kb_fmul(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(kb->b, a, b, ""); }
LLVMValueRef kb_fdiv(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(kb->b, a, b, ""); }
LLVMValueRef kb_icmp(gpu_kb *kb, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildICmp(kb->b, p, a, b, "");
}
LLVMValueRef kb_fcmp(gpu_kb *kb, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(kb->b, p, a, b, "");
}
LLVMValueRef kb_and(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAnd(kb->b, a, b, ""); }
LLVMValueRef kb_sel(gpu_kb *kb, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(kb->b, c, a, b, "");
}

/* A call of intrinsic `name` overloaded on f32 (or not overloaded: plain declaration float(float...)). */
static LLVMValueRef call_f32(gpu_kb *kb, const char *name, int overloaded, unsigned n, LLVMValueRef *args)
{
    LLVMTypeRef params[3] = {kb->f32, kb->f32, kb->f32};
    LLVMValueRef f;
    LLVMTypeRef ft;
    if (overloaded) {
        unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
        f = LLVMGetIntrinsicDeclaration(kb->m, id, &kb->f32, 1);
        ft = LLVMIntrinsicGetType(kb->c, id, &kb->f32, 1);
    } else {
        ft = LLVMFunctionType(kb->f32, params, n, 0);
        f = LLVMGetNamedFunction(kb->m, name);
        if (!f) f = LLVMAddFunction(kb->m, name, ft);
    }
    return LLVMBuildCall2(kb->b, ft, f, args, n, "");
}

LLVMValueRef kb_fma(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[3] = {a, b, c};
    return call_f32(kb, "llvm.fmuladd", 1, 3, args);
}

LLVMValueRef kb_exp(gpu_kb *kb, LLVMValueRef x)
{
    if (!kb->ptx) return call_f32(kb, "llvm.exp", 1, 1, &x);
    /* no libdevice: 2^(x log2 e) with the hardware approximation (relative error about 2^-22);
     * +-inf and large |x| saturate to inf / 0 as expf does */
    LLVMValueRef y = kb_fmul(kb, x, kb_f32(kb, 1.4426950408889634f));
    return call_f32(kb, "llvm.nvvm.ex2.approx.ftz.f", 0, 1, &y);
}

LLVMValueRef kb_sigmoid(gpu_kb *kb, LLVMValueRef x)
{
    /* 1 / (1 + e^-x): e^-x overflows to +inf for very negative x, giving exactly 0 */
    LLVMValueRef one = kb_f32(kb, 1.0f);
    LLVMValueRef e = kb_exp(kb, LLVMBuildFNeg(kb->b, x, ""));
    return kb_fdiv(kb, one, kb_fadd(kb, one, e));
}

LLVMValueRef kb_tanh(gpu_kb *kb, LLVMValueRef x)
{
    /* 1 - 2 / (e^2x + 1): saturates to +-1 without inf/inf; near 0 the absolute error is ~1e-7.
     * Small |x| use x - x^3/3 + 2x^5/15 (error < 1e-8 below 0.05) to keep relative accuracy. */
    LLVMValueRef one = kb_f32(kb, 1.0f);
    LLVMValueRef e = kb_exp(kb, kb_fmul(kb, x, kb_f32(kb, 2.0f)));
    LLVMValueRef big = kb_fsub(kb, one, kb_fdiv(kb, kb_f32(kb, 2.0f), kb_fadd(kb, e, one)));
    LLVMValueRef x2 = kb_fmul(kb, x, x);
    LLVMValueRef poly = kb_fma(kb, x2, kb_f32(kb, 2.0f / 15.0f), kb_f32(kb, -1.0f / 3.0f));
    LLVMValueRef small = kb_fma(kb, kb_fmul(kb, x2, x), poly, x);
    LLVMValueRef ax = call_f32(kb, "llvm.fabs", 1, 1, &x);
    return kb_sel(kb, kb_fcmp(kb, LLVMRealOLT, ax, kb_f32(kb, 0.05f)), small, big);
}

static LLVMValueRef clampf(gpu_kb *kb, LLVMValueRef v, float lo, float hi)
{
    /* v < lo ? lo : (v > hi ? hi : v): NaN passes through, as in the reference */
    LLVMValueRef l = kb_f32(kb, lo), h = kb_f32(kb, hi);
    LLVMValueRef t = kb_sel(kb, kb_fcmp(kb, LLVMRealOGT, v, h), h, v);
    return kb_sel(kb, kb_fcmp(kb, LLVMRealOLT, v, l), l, t);
}

LLVMValueRef kb_act(gpu_kb *kb, const gpu_act *a, LLVMValueRef x)
{
    LLVMValueRef zero = kb_f32(kb, 0.0f);
    switch (a->kind) {
    case GPU_ACT_NONE: return x;
    case GPU_ACT_RELU: return kb_sel(kb, kb_fcmp(kb, LLVMRealOLE, x, zero), zero, x); /* NaN passes */
    case GPU_ACT_CLIP: return clampf(kb, x, a->a, a->b);
    case GPU_ACT_LEAKY:
        return kb_sel(kb, kb_fcmp(kb, LLVMRealOGE, x, zero), x, kb_fmul(kb, x, kb_f32(kb, a->a)));
    case GPU_ACT_SIGMOID: return kb_sigmoid(kb, x);
    case GPU_ACT_TANH: return kb_tanh(kb, x);
    case GPU_ACT_HARDSWISH: {
        LLVMValueRef t = clampf(kb, kb_fadd(kb, x, kb_f32(kb, 3.0f)), 0.0f, 6.0f);
        return kb_fdiv(kb, kb_fmul(kb, x, t), kb_f32(kb, 6.0f));
    }
    case GPU_ACT_HARDSIGMOID:
        return clampf(kb, kb_fadd(kb, kb_fmul(kb, kb_f32(kb, a->a), x), kb_f32(kb, a->b)), 0.0f, 1.0f);
    }
    return x;
}

LLVMValueRef kb_var(gpu_kb *kb, LLVMTypeRef t, LLVMValueRef init)
{
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(kb->b);
    LLVMValueRef first = LLVMGetFirstInstruction(kb->entry);
    if (first) LLVMPositionBuilderBefore(kb->b, first);
    else LLVMPositionBuilderAtEnd(kb->b, kb->entry);
    LLVMValueRef v = LLVMBuildAlloca(kb->b, t, "");
    LLVMPositionBuilderAtEnd(kb->b, cur);
    LLVMBuildStore(kb->b, init, v);
    return v;
}

LLVMValueRef kb_get(gpu_kb *kb, LLVMTypeRef t, LLVMValueRef var) { return LLVMBuildLoad2(kb->b, t, var, ""); }
void kb_set(gpu_kb *kb, LLVMValueRef var, LLVMValueRef v) { LLVMBuildStore(kb->b, v, var); }

LLVMValueRef kb_for(gpu_kb *kb, kb_loop *L, LLVMValueRef begin, LLVMValueRef end)
{
    L->var = kb_var(kb, kb->i64, begin);
    L->head = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "body");
    L->exit = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "exit");
    LLVMBuildBr(kb->b, L->head);
    LLVMPositionBuilderAtEnd(kb->b, L->head);
    LLVMValueRef i = kb_get(kb, kb->i64, L->var);
    LLVMBuildCondBr(kb->b, kb_icmp(kb, LLVMIntSLT, i, end), body, L->exit);
    LLVMPositionBuilderAtEnd(kb->b, body);
    return kb_get(kb, kb->i64, L->var);
}

void kb_endfor(gpu_kb *kb, kb_loop *L)
{
    kb_set(kb, L->var, kb_addc(kb, kb_get(kb, kb->i64, L->var), 1));
    LLVMBuildBr(kb->b, L->head);
    LLVMPositionBuilderAtEnd(kb->b, L->exit);
}

void kb_if_begin(gpu_kb *kb, kb_if *I, LLVMValueRef cond)
{
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "then");
    I->els = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "else");
    I->done = NULL;
    LLVMBuildCondBr(kb->b, cond, then, I->els);
    LLVMPositionBuilderAtEnd(kb->b, then);
}

void kb_if_else(gpu_kb *kb, kb_if *I)
{
    I->done = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "endif");
    LLVMBuildBr(kb->b, I->done);
    LLVMPositionBuilderAtEnd(kb->b, I->els);
}

void kb_if_end(gpu_kb *kb, kb_if *I)
{
    if (!I->done) { /* no else: the else block is the join */
        LLVMBuildBr(kb->b, I->els);
        LLVMPositionBuilderAtEnd(kb->b, I->els);
        return;
    }
    LLVMBuildBr(kb->b, I->done);
    LLVMPositionBuilderAtEnd(kb->b, I->done);
}

/* ------------------------------------------------------------------ tiled kernels: phases, shared memory */

void kb_phase_begin(gpu_kb *kb)
{
    kb->in_phase = 1;
    if (kb->ptx) {
        kb->tid = kb->ptx_tid;
        return;
    }
    kb_loop L;
    kb->tid = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, GPU_BLOCK));
    kb->tloop.var = L.var;
    kb->tloop.head = L.head;
    kb->tloop.exit = L.exit;
}

void kb_phase_end(gpu_kb *kb, int barrier)
{
    kb->in_phase = 0;
    kb->tid = NULL;
    if (!kb->ptx) {
        kb_loop L = {kb->tloop.var, kb->tloop.head, kb->tloop.exit};
        kb_endfor(kb, &L);
        return;
    }
    if (!barrier) return;
    /* the declaration from the intrinsic table carries its attributes (convergent, nounwind) */
    static const char name[] = "llvm.nvvm.barrier0";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(kb->m, id, NULL, 0);
    LLVMBuildCall2(kb->b, LLVMIntrinsicGetType(kb->c, id, NULL, 0), f, NULL, 0, "");
}

/* An alloca in the entry block (before its first instruction). */
static LLVMValueRef entry_alloca(gpu_kb *kb, LLVMTypeRef t)
{
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(kb->b);
    LLVMValueRef first = LLVMGetFirstInstruction(kb->entry);
    if (first) LLVMPositionBuilderBefore(kb->b, first);
    else LLVMPositionBuilderAtEnd(kb->b, kb->entry);
    LLVMValueRef v = LLVMBuildAlloca(kb->b, t, "");
    LLVMSetAlignment(v, 16);
    LLVMPositionBuilderAtEnd(kb->b, cur);
    return v;
}

LLVMValueRef kb_shared(gpu_kb *kb, int64_t n)
{
    LLVMTypeRef at = LLVMArrayType2(kb->f32, (uint64_t)n);
    if (!kb->ptx) return entry_alloca(kb, at);
    char name[64];
    snprintf(name, sizeof name, "%s_smem%d", kb->kname, kb->n_shared++);
    LLVMValueRef g = LLVMAddGlobalInAddressSpace(kb->m, at, name, 3);
    LLVMSetInitializer(g, LLVMGetUndef(at));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetAlignment(g, 16);
    return g;
}

static LLVMValueRef saddr(gpu_kb *kb, LLVMValueRef base, LLVMValueRef i)
{
    return LLVMBuildInBoundsGEP2(kb->b, kb->f32, base, &i, 1, "");
}

LLVMValueRef kb_sld(gpu_kb *kb, LLVMValueRef base, LLVMValueRef i)
{
    LLVMValueRef v = LLVMBuildLoad2(kb->b, kb->f32, saddr(kb, base, i), "");
    LLVMSetAlignment(v, 4);
    return v;
}

void kb_sst(gpu_kb *kb, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
    LLVMSetAlignment(LLVMBuildStore(kb->b, v, saddr(kb, base, i)), 4);
}

LLVMValueRef kb_tvar(gpu_kb *kb)
{
    return entry_alloca(kb, kb->ptx ? kb->f32 : LLVMArrayType2(kb->f32, GPU_BLOCK));
}

LLVMValueRef kb_tget(gpu_kb *kb, LLVMValueRef var)
{
    return LLVMBuildLoad2(kb->b, kb->f32, kb->ptx ? var : saddr(kb, var, kb->tid), "");
}

void kb_tset(gpu_kb *kb, LLVMValueRef var, LLVMValueRef v)
{
    LLVMBuildStore(kb->b, v, kb->ptx ? var : saddr(kb, var, kb->tid));
}

/* ------------------------------------------------------------------ entries */

static LLVMValueRef sreg(gpu_kb *kb, const char *name)
{
    LLVMValueRef f = LLVMGetNamedFunction(kb->m, name);
    LLVMTypeRef ft = LLVMFunctionType(kb->i32, NULL, 0, 0);
    if (!f) f = LLVMAddFunction(kb->m, name, ft);
    return LLVMBuildZExt(kb->b, LLVMBuildCall2(kb->b, ft, f, NULL, 0, ""), kb->i64, "");
}

static void add_attr(gpu_kb *kb, LLVMValueRef f, unsigned idx, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(f, idx, LLVMCreateEnumAttribute(kb->c, kind, 0));
}

/* !nvvm.annotations: kb->fn is a kernel entry, launched with exactly GPU_BLOCK threads (.maxntid,
 * so ptxas allocates registers for that block size; a larger launch would fail). */
static void mark_kernel(gpu_kb *kb)
{
    LLVMValueRef md[3] = {kb->fn, LLVMMDStringInContext(kb->c, "kernel", 6), kb_i32(kb, 1)};
    LLVMAddNamedMetadataOperand(kb->m, "nvvm.annotations", LLVMMDNodeInContext(kb->c, md, 3));
    LLVMValueRef nt[3] = {kb->fn, LLVMMDStringInContext(kb->c, "maxntidx", 8), kb_i32(kb, GPU_BLOCK)};
    LLVMAddNamedMetadataOperand(kb->m, "nvvm.annotations", LLVMMDNodeInContext(kb->c, nt, 3));
}

static void build_kernel(gpu_kb *kb, const gpu_kernel *k, const char *prefix)
{
    char full[96];
    LLVMTypeRef params[5] = {kb->ptr, kb->ptr, kb->i32, kb->i32, kb->i32};
    unsigned np = kb->ptx ? 3 : 5;
    if (kb->ptx) snprintf(full, sizeof full, "%s", k->name);
    else snprintf(full, sizeof full, "%s_%s", prefix, k->name);
    LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(kb->c), params, np, 0);
    kb->fn = LLVMAddFunction(kb->m, full, ft);
    add_attr(kb, kb->fn, LLVMAttributeFunctionIndex, "nounwind");
    kb->act = LLVMGetParam(kb->fn, 0);
    kb->wts = LLVMGetParam(kb->fn, 1);
    kb->entry = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "entry");
    LLVMBasicBlockRef work = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "work");
    LLVMBasicBlockRef ret = LLVMAppendBasicBlockInContext(kb->c, kb->fn, "ret");
    LLVMPositionBuilderAtEnd(kb->b, kb->entry);
    kb->arg = LLVMBuildSExt(kb->b, LLVMGetParam(kb->fn, 2), kb->i64, "");
    kb->kname = k->name;
    kb->n_shared = 0;
    kb->idx = kb->block = kb->tid = kb->ptx_tid = NULL;
    kb_loop L = {0};
    if (k->tiled) {
        /* the whole block's phases: every thread reaches every barrier, so no early exit */
        if (kb->ptx) {
            mark_kernel(kb);
            kb->block = sreg(kb, "llvm.nvvm.read.ptx.sreg.ctaid.x");
            kb->ptx_tid = sreg(kb, "llvm.nvvm.read.ptx.sreg.tid.x");
        } else {
            LLVMValueRef grid = LLVMBuildZExt(kb->b, LLVMGetParam(kb->fn, 3), kb->i64, "");
            kb->block = kb_for(kb, &L, kb_i64(kb, 0), grid);
        }
        LLVMBuildBr(kb->b, work);
        LLVMPositionBuilderAtEnd(kb->b, work);
        k->gen(kb, k->params);
        if (!kb->ptx) kb_endfor(kb, &L);
        LLVMBuildBr(kb->b, ret);
        LLVMPositionBuilderAtEnd(kb->b, ret);
        LLVMBuildRetVoid(kb->b);
        return;
    }
    if (kb->ptx) {
        mark_kernel(kb);
        kb->idx = kb_add(kb, kb_mul(kb, sreg(kb, "llvm.nvvm.read.ptx.sreg.ctaid.x"),
                                    sreg(kb, "llvm.nvvm.read.ptx.sreg.ntid.x")),
                         sreg(kb, "llvm.nvvm.read.ptx.sreg.tid.x"));
    } else {
        /* emulation: every (block, thread) index of the launch, in order */
        LLVMValueRef grid = LLVMBuildZExt(kb->b, LLVMGetParam(kb->fn, 3), kb->i64, "");
        LLVMValueRef block = LLVMBuildZExt(kb->b, LLVMGetParam(kb->fn, 4), kb->i64, "");
        kb->idx = kb_for(kb, &L, kb_i64(kb, 0), kb_mul(kb, grid, block));
    }
    LLVMBasicBlockRef skip = kb->ptx ? ret : LLVMAppendBasicBlockInContext(kb->c, kb->fn, "latch");
    LLVMBuildCondBr(kb->b, kb_icmp(kb, LLVMIntSLT, kb->idx, kb_i64(kb, k->total)), work, skip);
    LLVMPositionBuilderAtEnd(kb->b, work);
    k->gen(kb, k->params);
    LLVMBuildBr(kb->b, skip);
    if (!kb->ptx) {
        LLVMPositionBuilderAtEnd(kb->b, skip);
        kb_endfor(kb, &L);
        LLVMBuildBr(kb->b, ret);
    }
    LLVMPositionBuilderAtEnd(kb->b, ret);
    LLVMBuildRetVoid(kb->b);
}

pdc_status gpu_kgen_module(const pdc_context *ctx, const gpu_plan *p, int ptx, LLVMContextRef c, LLVMModuleRef m,
                           const char *prefix)
{
    (void)ctx;
    gpu_kb kb = {0};
    kb.c = c;
    kb.m = m;
    kb.b = LLVMCreateBuilderInContext(c);
    kb.f32 = LLVMFloatTypeInContext(c);
    kb.i32 = LLVMInt32TypeInContext(c);
    kb.i64 = LLVMInt64TypeInContext(c);
    kb.i1 = LLVMInt1TypeInContext(c);
    kb.ptr = LLVMPointerTypeInContext(c, ptx ? 1 : 0); /* PTX: global memory, direct ld.global/st.global */
    kb.ptx = ptx;
    for (size_t i = 0; i < p->n_kernels; i++) build_kernel(&kb, &p->kernels[i], prefix);
    LLVMDisposeBuilder(kb.b);
    return PDC_OK;
}

pdc_status gpu_kgen_ptx(const pdc_context *ctx, const gpu_plan *p, const char *arch, char **text_out, size_t *len_out)
{
    *text_out = NULL;
    *len_out = 0;
    if (!gpu_arch_valid(arch)) {
        char list[128];
        gpu_arch_list(list, sizeof list);
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "gpu: unknown arch '%s' (valid: %s)", arch, list);
    }
    LLVMTargetMachineRef tm = NULL;
    /* no PTX feature: LLVM uses the lowest PTX ISA the SM allows, which the most drivers accept */
    pdc_status st = pdc_llvm_aot_machine(ctx, "nvptx64-nvidia-cuda", arch, "", LLVMRelocDefault, &tm);
    if (st) return st;
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("pdc_gpu", c);
    pdc_llvm_aot_prepare(tm, m);
    st = gpu_kgen_module(ctx, p, 1, c, m, "");
    void *data = NULL;
    size_t n = 0;
    if (!st) st = pdc_llvm_aot_emit(ctx, tm, m, "the gpu kernels", LLVMAssemblyFile, &data, &n);
    LLVMDisposeModule(m);
    LLVMContextDispose(c);
    LLVMDisposeTargetMachine(tm);
    if (st) return st;
    *text_out = data;
    *len_out = n;
    return PDC_OK;
}
