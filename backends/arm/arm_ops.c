/*
 * arm_ops.c - every op but conv and the recurrent cells as plain LLVM IR loop nests for the
 * AArch64 module (the device has no pdc runtime, only libc).
 *
 * Shapes are known at emit time, so every loop has a constant trip count and every tensor a
 * constant address; innermost loops run along unit-stride data so LLVM's loop vectoriser turns them
 * into NEON code (fmla on v.4s). Constant matrices of fc/gemm are transposed at emit time where
 * that makes the inner loop unit-stride (y[i, :] += a[i, k] * B[k, :], no reduction, so no
 * reassociation is needed to vectorise). Block- or unstructured-pruned constant weights of fc (and
 * gemm with transB) go through gemm.c's block-sparse generator (arm_sparse.c) where the cpu target's
 * conditions hold, one matrix-vector product per row. Activations are the straight-line IR every
 * JIT'd kernel applies (pdc_irb_act: sigmoid and tanh without libm, so their loops vectorise too),
 * and softmax's exp is pdc_irb_exp: the module calls no libm function. Semantics follow
 * backends/ref (accumulation is in float here, not double).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/arm/arm.h"
#include "ir/ops/batchnorm.h"

/* ------------------------------------------------------------------ shared helpers */

LLVMValueRef arm_i64(arm_gen *G, int64_t v) { return pdc_irb_i64(&G->irb, v); }
LLVMValueRef arm_f32(arm_gen *G, float v) { return pdc_irb_f32(&G->irb, v); }

LLVMValueRef arm_add(arm_gen *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(G->irb.b, a, b, ""); }

LLVMValueRef arm_addc(arm_gen *G, LLVMValueRef a, int64_t c)
{
    return c ? LLVMBuildNSWAdd(G->irb.b, a, arm_i64(G, c), "") : a;
}

LLVMValueRef arm_mulc(arm_gen *G, LLVMValueRef a, int64_t c)
{
    if (c == 0) return arm_i64(G, 0);
    return c == 1 ? a : LLVMBuildNSWMul(G->irb.b, a, arm_i64(G, c), "");
}

LLVMValueRef arm_affine(arm_gen *G, LLVMValueRef a, int64_t ca, LLVMValueRef b, int64_t cb, int64_t c)
{
    LLVMValueRef v = arm_mulc(G, a, ca);
    if (b && cb) v = arm_add(G, v, arm_mulc(G, b, cb));
    return arm_addc(G, v, c);
}

LLVMValueRef arm_loop_begin(arm_gen *G, int64_t n, arm_loop *L)
{
    LLVMBuilderRef B = G->irb.b;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    L->body = LLVMAppendBasicBlockInContext(G->irb.c, G->fn, "loop");
    L->n = n;
    LLVMBuildBr(B, L->body);
    LLVMPositionBuilderAtEnd(B, L->body);
    L->phi = LLVMBuildPhi(B, G->irb.i64, "i");
    LLVMValueRef zero = arm_i64(G, 0);
    LLVMAddIncoming(L->phi, &zero, &pre, 1);
    return L->phi;
}

void arm_loop_end(arm_gen *G, arm_loop *L)
{
    LLVMBuilderRef B = G->irb.b;
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMValueRef next = LLVMBuildNUWAdd(B, L->phi, arm_i64(G, 1), "");
    LLVMAddIncoming(L->phi, &next, &latch, 1);
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(G->irb.c, G->fn, "exit");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntULT, next, arm_i64(G, L->n), ""), L->body, exit);
    LLVMPositionBuilderAtEnd(B, exit);
}

LLVMValueRef arm_ldf(arm_gen *G, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMValueRef v = LLVMBuildLoad2(G->irb.b, G->irb.f32, pdc_irb_gep(&G->irb, G->irb.f32, base, idx), "");
    LLVMSetAlignment(v, 4);
    return v;
}

void arm_stf(arm_gen *G, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
    LLVMValueRef s = LLVMBuildStore(G->irb.b, v, pdc_irb_gep(&G->irb, G->irb.f32, base, idx));
    LLVMSetAlignment(s, 4);
}

static LLVMValueRef sel(arm_gen *G, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(G->irb.b, c, a, b, "");
}
static LLVMValueRef fcmp(arm_gen *G, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(G->irb.b, p, a, b, "");
}
static LLVMValueRef fmul(arm_gen *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(G->irb.b, a, b, ""); }
static LLVMValueRef fadd(arm_gen *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(G->irb.b, a, b, ""); }
static LLVMValueRef fsub(arm_gen *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(G->irb.b, a, b, ""); }
static LLVMValueRef fdiv(arm_gen *G, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(G->irb.b, a, b, ""); }

static LLVMValueRef clampf(arm_gen *G, LLVMValueRef v, float lo, float hi)
{
    LLVMValueRef l = arm_f32(G, lo), h = arm_f32(G, hi);
    v = sel(G, fcmp(G, LLVMRealOLT, v, l), l, v);
    return sel(G, fcmp(G, LLVMRealOGT, v, h), h, v);
}

LLVMValueRef arm_act(arm_gen *G, const ir_fused_params *p, LLVMValueRef v) { return pdc_irb_act(&G->irb, p, v); }

void arm_act_inplace(arm_gen *G, const ir_fused_params *p, LLVMValueRef y, int64_t n)
{
    if (p->act == IR_ACT_NONE) return;
    arm_loop L;
    LLVMValueRef i = arm_loop_begin(G, n, &L);
    arm_stf(G, y, i, arm_act(G, p, arm_ldf(G, y, i)));
    arm_loop_end(G, &L);
}

void arm_zero(arm_gen *G, LLVMValueRef dst, int64_t n)
{
    if (n <= 0) return;
    LLVMBuildMemSet(G->irb.b, dst, LLVMConstInt(LLVMInt8TypeInContext(G->irb.c), 0, 0), arm_i64(G, n * 4), 4);
}

void arm_move(arm_gen *G, LLVMValueRef dst, LLVMValueRef src, int64_t n)
{
    if (n <= 0 || dst == src) return;
    LLVMBuildMemMove(G->irb.b, dst, 4, src, 4, arm_i64(G, n * 4));
}

pdc_status arm_unsupported(arm_gen *G, const ir_layer *l, const char *why)
{
    return pdc_error(G->ctx, PDC_ERR_UNSUPPORTED, "emit: layer '%s' (op %s): %s", l->name,
                     ir_op_get_info(l->op)->name, why);
}

/* Nested loops over dims[0..r) (outermost first); idx[d] receives each index. */
typedef struct arm_nest {
    arm_loop L[PDC_MAX_RANK];
    int r;
} arm_nest;
static void nest_begin(arm_gen *G, arm_nest *N, int r, const int64_t *dims, LLVMValueRef *idx)
{
    N->r = r;
    for (int d = 0; d < r; d++) idx[d] = arm_loop_begin(G, dims[d], &N->L[d]);
}
static void nest_end(arm_gen *G, arm_nest *N)
{
    for (int d = N->r - 1; d >= 0; d--) arm_loop_end(G, &N->L[d]);
}
/* sum idx[d] * stride[d] */
static LLVMValueRef nest_offset(arm_gen *G, int r, LLVMValueRef *idx, const int64_t *stride)
{
    LLVMValueRef off = arm_i64(G, 0);
    int any = 0;
    for (int d = 0; d < r; d++) {
        if (!stride[d]) continue;
        LLVMValueRef t = arm_mulc(G, idx[d], stride[d]);
        off = any ? arm_add(G, off, t) : t;
        any = 1;
    }
    return off;
}

static int64_t numel(const ir_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

/* ------------------------------------------------------------------ element-wise */

static pdc_status emit_unary(arm_gen *G, const ir_layer *l, LLVMValueRef x, LLVMValueRef y, int64_t n)
{
    ir_fused_params p = {0};
    p.act_alpha = 0.01f;
    arm_loop L;
    if (l->op == IR_OP_HARDSIGMOID) {
        float al = ir_attr_float(&l->attrs, "alpha", 0.2f), be = ir_attr_float(&l->attrs, "beta", 0.5f);
        LLVMValueRef i = arm_loop_begin(G, n, &L);
        LLVMValueRef v = fadd(G, fmul(G, arm_f32(G, al), arm_ldf(G, x, i)), arm_f32(G, be));
        arm_stf(G, y, i, clampf(G, v, 0.0f, 1.0f));
        arm_loop_end(G, &L);
        return PDC_OK;
    }
    if (!ir_act_layer_params(l, &p)) return arm_unsupported(G, l, "not an activation");
    LLVMValueRef i = arm_loop_begin(G, n, &L);
    arm_stf(G, y, i, arm_act(G, &p, arm_ldf(G, x, i)));
    arm_loop_end(G, &L);
    return PDC_OK;
}

/* Strides of t against output shape od (rank r), right-aligned; broadcast dims get 0. */
static void bcast_strides(const ir_tensor *t, int r, const int64_t *od, int64_t *strides)
{
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        int ti = i - (r - t->rank);
        if (ti < 0 || t->dims[ti] == 1 || od[i] == 1) {
            strides[i] = 0;
            if (ti >= 0) stride *= t->dims[ti];
            continue;
        }
        strides[i] = stride;
        stride *= t->dims[ti];
    }
}

static pdc_status emit_binary(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]];
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    int r = ty->rank;
    int64_t sa[PDC_MAX_RANK], sb[PDC_MAX_RANK], sy[PDC_MAX_RANK];
    bcast_strides(ta, r, ty->dims, sa);
    bcast_strides(tb, r, ty->dims, sb);
    bcast_strides(ty, r, ty->dims, sy);
    LLVMValueRef a, b, y;
    pdc_status st;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &a)) || (st = arm_tensor_ptr(G, l->inputs[1], &b)) ||
        (st = arm_tensor_ptr(G, l->outputs[0], &y)))
        return st;
    arm_nest N;
    LLVMValueRef idx[PDC_MAX_RANK];
    nest_begin(G, &N, r, ty->dims, idx);
    LLVMValueRef va = arm_ldf(G, a, nest_offset(G, r, idx, sa));
    LLVMValueRef vb = arm_ldf(G, b, nest_offset(G, r, idx, sb));
    LLVMValueRef v;
    switch (l->op) {
    case IR_OP_ADD: v = fadd(G, va, vb); break;
    case IR_OP_SUB: v = fsub(G, va, vb); break;
    case IR_OP_MUL: v = fmul(G, va, vb); break;
    default: v = fdiv(G, va, vb); break;
    }
    arm_stf(G, y, nest_offset(G, r, idx, sy), v);
    nest_end(G, &N);
    return PDC_OK;
}

/* y = g[c] * x + h[c], with g = scale/sqrt(var+eps) and h = bias - mean*g folded at emit time
 * (in double, as the reference computes them). Needs constant parameters. */
static pdc_status emit_batchnorm(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    for (int i = 1; i < 5; i++)
        if (m->tensors[l->inputs[i]].kind != IR_TENSOR_CONST)
            return arm_unsupported(G, l, "batchnorm parameters are not constants");
    const ir_tensor *tx = &m->tensors[l->inputs[0]];
    if (tx->rank < 2) return arm_unsupported(G, l, "input rank < 2");
    int64_t N = tx->dims[0], C = tx->dims[1], sp = 1;
    for (int i = 2; i < tx->rank; i++) sp *= tx->dims[i];
    float *gh = pdc_alloc(G->ctx, (size_t)(2 * C) * sizeof *gh);
    if (!gh) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t c = 0; c < C; c++) {
        double g, shift;
        ir_batchnorm_channel(m, l, c, &g, &shift);
        gh[c] = (float)g;
        gh[C + c] = (float)shift;
    }
    LLVMValueRef par = arm_const_bytes(G, gh, (size_t)(2 * C) * sizeof *gh, "bn");
    pdc_free(gh);
    LLVMValueRef x, y;
    pdc_status st;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    arm_loop Ln, Lc, Li;
    LLVMValueRef n = arm_loop_begin(G, N, &Ln);
    LLVMValueRef c = arm_loop_begin(G, C, &Lc);
    LLVMValueRef g = arm_ldf(G, par, c), h = arm_ldf(G, par, arm_addc(G, c, C));
    LLVMValueRef base = arm_affine(G, n, C * sp, c, sp, 0);
    LLVMValueRef i = arm_loop_begin(G, sp, &Li);
    LLVMValueRef at = arm_add(G, base, i);
    arm_stf(G, y, at, pdc_irb_fma(&G->irb, g, arm_ldf(G, x, at), h));
    arm_loop_end(G, &Li);
    arm_loop_end(G, &Lc);
    arm_loop_end(G, &Ln);
    return PDC_OK;
}

/* ------------------------------------------------------------------ data movement */

static pdc_status emit_concat(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    int axis;
    pdc_status st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", 0), ty->rank, &axis);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= ty->dims[i];
    for (int i = axis + 1; i < ty->rank; i++) inner *= ty->dims[i];
    LLVMValueRef y;
    if ((st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    const int64_t row = ty->dims[axis] * inner;
    int64_t at = 0;
    for (size_t j = 0; j < l->n_inputs; j++) {
        LLVMValueRef x;
        if ((st = arm_tensor_ptr(G, l->inputs[j], &x))) return st;
        const int64_t chunk = m->tensors[l->inputs[j]].dims[axis] * inner;
        arm_loop Lo, Li;
        LLVMValueRef o = arm_loop_begin(G, outer, &Lo);
        LLVMValueRef i = arm_loop_begin(G, chunk, &Li);
        arm_stf(G, y, arm_affine(G, o, row, i, 1, at), arm_ldf(G, x, arm_affine(G, o, chunk, i, 1, 0)));
        arm_loop_end(G, &Li);
        arm_loop_end(G, &Lo);
        at += chunk;
    }
    return PDC_OK;
}

static pdc_status emit_transpose(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    const ir_tensor *tx = &m->tensors[l->inputs[0]], *ty = &m->tensors[l->outputs[0]];
    int r = tx->rank;
    size_t np = 0;
    const int64_t *pa = ir_attr_ints(&l->attrs, "perm", &np);
    int64_t xs[PDC_MAX_RANK], s[PDC_MAX_RANK], ys[PDC_MAX_RANK];
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        xs[i] = stride;
        stride *= tx->dims[i];
    }
    stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        ys[i] = stride;
        stride *= ty->dims[i];
    }
    for (int i = 0; i < r; i++) s[i] = xs[pa && np == (size_t)r ? pa[i] : r - 1 - i];
    LLVMValueRef x, y;
    pdc_status st;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    arm_nest N;
    LLVMValueRef idx[PDC_MAX_RANK];
    nest_begin(G, &N, r, ty->dims, idx);
    arm_stf(G, y, nest_offset(G, r, idx, ys), arm_ldf(G, x, nest_offset(G, r, idx, s)));
    nest_end(G, &N);
    return PDC_OK;
}

/* ------------------------------------------------------------------ pooling, softmax */

static pdc_status emit_pool(arm_gen *G, const ir_layer *l)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(G->m, l, &p);
    if (st) return st;
    ir_window_params_as_3d(&p);
    const int64_t *in = p.in, *out = p.out, *k = p.k, *s = p.stride, *pb = p.pad_begin, *pe = p.pad_end, *d = p.dil;
    const int is_max = l->op == IR_OP_MAXPOOL;
    LLVMValueRef x, y;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    LLVMBuilderRef B = G->irb.b;
    const int64_t in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2];
    /* accumulators: allocas in the entry block (promoted to registers by mem2reg) */
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(B);
    LLVMPositionBuilderAtEnd(B, LLVMGetEntryBasicBlock(G->fn));
    LLVMValueRef first = LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(G->fn));
    if (first) LLVMPositionBuilderBefore(B, first);
    LLVMValueRef a_sum = LLVMBuildAlloca(B, G->irb.f32, "sum"), a_cnt = LLVMBuildAlloca(B, G->irb.i64, "valid");
    LLVMValueRef a_pad = LLVMBuildAlloca(B, G->irb.i64, "padded");
    LLVMPositionBuilderAtEnd(B, cur);
    arm_loop Lp, Lz, Lr, Lc, Kz, Kr, Kc;
    LLVMValueRef pl = arm_loop_begin(G, p.n * p.c, &Lp);
    LLVMValueRef z = arm_loop_begin(G, out[0], &Lz);
    LLVMValueRef r = arm_loop_begin(G, out[1], &Lr);
    LLVMValueRef c = arm_loop_begin(G, out[2], &Lc);
    LLVMBuildStore(B, arm_f32(G, is_max ? -INFINITY : 0.0f), a_sum);
    LLVMBuildStore(B, arm_i64(G, 0), a_cnt);
    LLVMBuildStore(B, arm_i64(G, 0), a_pad);
    LLVMValueRef kz = arm_loop_begin(G, k[0], &Kz);
    LLVMValueRef kr = arm_loop_begin(G, k[1], &Kr);
    LLVMValueRef kc = arm_loop_begin(G, k[2], &Kc);
    LLVMValueRef iz = arm_affine(G, z, s[0], kz, d[0], -pb[0]);
    LLVMValueRef ir = arm_affine(G, r, s[1], kr, d[1], -pb[1]);
    LLVMValueRef ic = arm_affine(G, c, s[2], kc, d[2], -pb[2]);
    LLVMValueRef crd[3] = {iz, ir, ic}, ext = NULL, valid = NULL;
    for (int i = 0; i < 3; i++) {
        LLVMValueRef e = LLVMBuildICmp(B, LLVMIntSLT, crd[i], arm_i64(G, in[i] + pe[i]), "");
        LLVMValueRef v = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, crd[i], arm_i64(G, 0), ""),
                                      LLVMBuildICmp(B, LLVMIntSLT, crd[i], arm_i64(G, in[i]), ""), "");
        ext = ext ? LLVMBuildAnd(B, ext, e, "") : e;
        valid = valid ? LLVMBuildAnd(B, valid, v, "") : v;
    }
    valid = LLVMBuildAnd(B, valid, ext, "");
    /* clamped address: always in bounds, the value is discarded when not valid */
    LLVMValueRef at = NULL;
    for (int i = 0; i < 3; i++) {
        LLVMValueRef q = crd[i];
        q = sel(G, LLVMBuildICmp(B, LLVMIntSLT, q, arm_i64(G, 0), ""), arm_i64(G, 0), q);
        q = sel(G, LLVMBuildICmp(B, LLVMIntSGE, q, arm_i64(G, in[i]), ""), arm_i64(G, in[i] - 1), q);
        at = at ? arm_add(G, arm_mulc(G, at, in[i]), q) : q;
    }
    LLVMValueRef v = arm_ldf(G, x, arm_add(G, arm_mulc(G, pl, in_sp), at));
    LLVMValueRef acc = LLVMBuildLoad2(B, G->irb.f32, a_sum, "");
    /* max: v > acc or v NaN (a NaN wins and stays, as in the reference) */
    LLVMValueRef nacc = is_max ? sel(G, LLVMBuildOr(B, fcmp(G, LLVMRealOGT, v, acc), fcmp(G, LLVMRealUNO, v, v), ""), v, acc)
                               : fadd(G, acc, v);
    LLVMBuildStore(B, sel(G, valid, nacc, acc), a_sum);
    LLVMValueRef cnt = LLVMBuildLoad2(B, G->irb.i64, a_cnt, "");
    LLVMBuildStore(B, LLVMBuildAdd(B, cnt, LLVMBuildZExt(B, valid, G->irb.i64, ""), ""), a_cnt);
    LLVMValueRef pad = LLVMBuildLoad2(B, G->irb.i64, a_pad, "");
    LLVMBuildStore(B, LLVMBuildAdd(B, pad, LLVMBuildZExt(B, ext, G->irb.i64, ""), ""), a_pad);
    arm_loop_end(G, &Kc);
    arm_loop_end(G, &Kr);
    arm_loop_end(G, &Kz);
    LLVMValueRef sum = LLVMBuildLoad2(B, G->irb.f32, a_sum, "");
    LLVMValueRef nv = LLVMBuildLoad2(B, G->irb.i64, a_cnt, "");
    LLVMValueRef res = sum;
    if (!is_max) {
        LLVMValueRef den = p.count_include_pad ? LLVMBuildLoad2(B, G->irb.i64, a_pad, "") : nv;
        res = fdiv(G, sum, LLVMBuildSIToFP(B, den, G->irb.f32, ""));
    }
    res = sel(G, LLVMBuildICmp(B, LLVMIntEQ, nv, arm_i64(G, 0), ""), arm_f32(G, 0.0f), res);
    LLVMValueRef oat = arm_add(G, arm_mulc(G, pl, out_sp), arm_affine(G, arm_affine(G, z, out[1], r, 1, 0), out[2], c, 1, 0));
    arm_stf(G, y, oat, res);
    arm_loop_end(G, &Lc);
    arm_loop_end(G, &Lr);
    arm_loop_end(G, &Lz);
    arm_loop_end(G, &Lp);
    return PDC_OK;
}

static pdc_status emit_global_avgpool(arm_gen *G, const ir_layer *l)
{
    const ir_tensor *t = &G->m->tensors[l->inputs[0]];
    if (t->rank < 2) return arm_unsupported(G, l, "input rank < 2");
    int64_t planes = t->dims[0] * t->dims[1], sp = 1;
    for (int i = 2; i < t->rank; i++) sp *= t->dims[i];
    LLVMValueRef x, y;
    pdc_status st;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    LLVMBuilderRef B = G->irb.b;
    arm_loop Lp, Li;
    LLVMValueRef pl = arm_loop_begin(G, planes, &Lp);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMValueRef i = arm_loop_begin(G, sp, &Li);
    LLVMValueRef acc = LLVMBuildPhi(B, G->irb.f32, "acc");
    LLVMValueRef zero = arm_f32(G, 0.0f);
    LLVMAddIncoming(acc, &zero, &pre, 1);
    LLVMValueRef nacc = fadd(G, acc, arm_ldf(G, x, arm_affine(G, pl, sp, i, 1, 0)));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(acc, &nacc, &latch, 1);
    arm_loop_end(G, &Li);
    arm_stf(G, y, pl, fdiv(G, nacc, arm_f32(G, (float)sp)));
    arm_loop_end(G, &Lp);
    return PDC_OK;
}

/* Reduction over k in [0, len) of f(x[base + k*inner]); op 0 = max, 1 = sum of exp(x - mx). */
static LLVMValueRef reduce(arm_gen *G, LLVMValueRef x, LLVMValueRef base, int64_t len, int64_t inner, int op,
                           LLVMValueRef mx)
{
    LLVMBuilderRef B = G->irb.b;
    arm_loop L;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMValueRef k = arm_loop_begin(G, len, &L);
    LLVMValueRef acc = LLVMBuildPhi(B, G->irb.f32, "acc");
    LLVMValueRef init = arm_f32(G, op == 0 ? -INFINITY : 0.0f);
    LLVMAddIncoming(acc, &init, &pre, 1);
    LLVMValueRef v = arm_ldf(G, x, arm_add(G, base, arm_mulc(G, k, inner)));
    LLVMValueRef nacc = op == 0 ? sel(G, fcmp(G, LLVMRealOGT, v, acc), v, acc) : fadd(G, acc, pdc_irb_exp(&G->irb, fsub(G, v, mx)));
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMAddIncoming(acc, &nacc, &latch, 1);
    arm_loop_end(G, &L);
    return nacc;
}

static pdc_status emit_softmax(arm_gen *G, const ir_layer *l)
{
    const ir_tensor *t = &G->m->tensors[l->inputs[0]];
    int axis;
    pdc_status st = ir_axis_get(G->m, l, ir_attr_int(&l->attrs, "axis", -1), t->rank, &axis);
    if (st) return st;
    int64_t outer = 1, inner = 1, len = t->dims[axis];
    for (int i = 0; i < axis; i++) outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
    LLVMValueRef x, y;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    arm_loop Lo, Li, Lk;
    LLVMValueRef o = arm_loop_begin(G, outer, &Lo);
    LLVMValueRef in = arm_loop_begin(G, inner, &Li);
    LLVMValueRef base = arm_affine(G, o, len * inner, in, 1, 0);
    LLVMValueRef mx = reduce(G, x, base, len, inner, 0, NULL);
    LLVMValueRef sum = reduce(G, x, base, len, inner, 1, mx);
    LLVMValueRef rs = fdiv(G, arm_f32(G, 1.0f), sum);
    LLVMValueRef k = arm_loop_begin(G, len, &Lk);
    LLVMValueRef at = arm_add(G, base, arm_mulc(G, k, inner));
    arm_stf(G, y, at, fmul(G, pdc_irb_exp(&G->irb, fsub(G, arm_ldf(G, x, at), mx)), rs));
    arm_loop_end(G, &Lk);
    arm_loop_end(G, &Li);
    arm_loop_end(G, &Lo);
    return PDC_OK;
}

/* ------------------------------------------------------------------ fc, gemm, matmul */

/*
 * y[i, j] (i < M, j < N, row stride N) = sum_k A(i, k) * B(k, j), accumulated into y's row with
 * unit stride along j. A(i, k) = a[aoff + i*sam + k*sak], B(k, j) = b[boff + k*sbk + j*sbn].
 */
static void emit_matmul_core(arm_gen *G, LLVMValueRef a, LLVMValueRef aoff, int64_t sam, int64_t sak, LLVMValueRef b,
                             LLVMValueRef boff, int64_t sbk, int64_t sbn, LLVMValueRef y, LLVMValueRef yoff,
                             int64_t M, int64_t K, int64_t N)
{
    arm_loop Li, Lj, Lk, Lj2;
    LLVMValueRef i = arm_loop_begin(G, M, &Li);
    LLVMValueRef yrow = arm_add(G, yoff, arm_mulc(G, i, N));
    LLVMValueRef j = arm_loop_begin(G, N, &Lj);
    arm_stf(G, y, arm_add(G, yrow, j), arm_f32(G, 0.0f));
    arm_loop_end(G, &Lj);
    LLVMValueRef k = arm_loop_begin(G, K, &Lk);
    LLVMValueRef av = arm_ldf(G, a, arm_add(G, aoff, arm_affine(G, i, sam, k, sak, 0)));
    LLVMValueRef brow = arm_add(G, boff, arm_mulc(G, k, sbk));
    LLVMValueRef j2 = arm_loop_begin(G, N, &Lj2);
    LLVMValueRef at = arm_add(G, yrow, j2);
    LLVMValueRef bv = arm_ldf(G, b, arm_add(G, brow, arm_mulc(G, j2, sbn)));
    arm_stf(G, y, at, pdc_irb_fma(&G->irb, av, bv, arm_ldf(G, y, at)));
    arm_loop_end(G, &Lj2);
    arm_loop_end(G, &Lk);
    arm_loop_end(G, &Li);
}

static pdc_status emit_gemm_epilogue(arm_gen *G, const ir_layer *l, const ir_gemm_params *pp, LLVMValueRef y);

/* The bias a sparse fc/gemm/matmul row starts from: fc's (constant) or zeros (p->n floats). */
static pdc_status sparse_bias(arm_gen *G, const ir_layer *l, const ir_gemm_params *p, LLVMValueRef *bias)
{
    if (l->op == IR_OP_FC && l->n_inputs > 2 && l->inputs[2] >= 0) return arm_tensor_ptr(G, l->inputs[2], bias);
    float *z = pdc_calloc(G->ctx, (size_t)p->n, sizeof *z);
    if (!z) return PDC_ERR_OUT_OF_MEMORY;
    *bias = arm_const_bytes(G, z, (size_t)p->n * sizeof *z, "zeros");
    pdc_free(z);
    return PDC_OK;
}

/* y[i, :] = bias + W a[i, :] for every row i through the BCR kernel (arm_bcr.c). */
static pdc_status emit_gemm_bcr(arm_gen *G, const ir_layer *l, const ir_gemm_params *p, const arm_bcr *C,
                                LLVMValueRef a, LLVMValueRef y)
{
    LLVMValueRef bias;
    pdc_status st = sparse_bias(G, l, p, &bias);
    if (st) return st;
    arm_loop L;
    LLVMValueRef i = arm_loop_begin(G, p->m, &L);
    LLVMValueRef yi = pdc_irb_gep(&G->irb, G->irb.f32, y, arm_mulc(G, i, p->n));
    arm_move(G, yi, bias, p->n);
    arm_bcr_product(G, C, pdc_irb_gep(&G->irb, G->irb.f32, a, arm_mulc(G, i, p->k)), yi);
    arm_loop_end(G, &L);
    return PDC_OK;
}

/* y[i, :] = bias + W a[i, :] for every row i through the block-sparse kernel; bias: fc's (constant)
 * or zeros. */
static pdc_status emit_gemm_sparse(arm_gen *G, const ir_layer *l, const ir_gemm_params *p, const arm_bsr *S,
                                   LLVMValueRef a, LLVMValueRef y)
{
    LLVMValueRef bias;
    pdc_status st = sparse_bias(G, l, p, &bias);
    if (st) return st;
    /* rows of A are read kpad floats far: through a zero-padded copy where kpad > k */
    LLVMValueRef buf = S->kpad != S->k ? arm_scratch(G, (size_t)S->kpad) : NULL;
    arm_loop L;
    LLVMValueRef i = arm_loop_begin(G, p->m, &L);
    LLVMValueRef xi = pdc_irb_gep(&G->irb, G->irb.f32, a, arm_mulc(G, i, p->k));
    LLVMValueRef yi = pdc_irb_gep(&G->irb, G->irb.f32, y, arm_mulc(G, i, p->n));
    arm_bsr_call(G, S, arm_bsr_input(G, S, xi, buf), bias, yi);
    arm_loop_end(G, &L);
    return PDC_OK;
}

static pdc_status emit_gemm(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    ir_gemm_params p;
    pdc_status st = ir_gemm_params_get(m, l, &p);
    if (st) return st;
    const ir_tensor *tb = &m->tensors[l->inputs[1]];
    LLVMValueRef a, b, y;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &a)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    const int fc = l->op == IR_OP_FC, has_c = l->n_inputs > 2 && l->inputs[2] >= 0;
    /* BCR-, block- or unstructured-pruned constant B = W^T (fc; gemm with transB, without transA): the
     * BCR or block-sparse kernel, one y row = bias + W x per row of A, as the cpu target does for fc */
    const ir_tensor *tc = has_c ? &m->tensors[l->inputs[2]] : NULL;
    if (tb->kind == IR_TENSOR_CONST && p.trans_b && !p.trans_a && tb->rank == 2 && tb->dims[0] == p.n &&
        tb->dims[1] == p.k && (!fc || !tc || tc->kind == IR_TENSOR_CONST)) {
        arm_bcr C;
        st = arm_bcr_plan(G, tb, 0, p.n, &C);
        if (st != PDC_ERR_UNSUPPORTED) {
            if (!st) st = emit_gemm_bcr(G, l, &p, &C, a, y);
            if (st || fc) return st;
            return emit_gemm_epilogue(G, l, &p, y);
        }
        arm_bsr S;
        st = arm_bsr_plan(G, tb, 0, p.n, &S);
        if (st != PDC_ERR_UNSUPPORTED) {
            if (!st) st = emit_gemm_sparse(G, l, &p, &S, a, y);
            if (st || fc) return st; /* fc: the bias was the kernel's; gemm: alpha and C below */
            return emit_gemm_epilogue(G, l, &p, y);
        }
    }
    int64_t sbk = p.trans_b ? 1 : p.n, sbn = p.trans_b ? p.k : 1;
    if (tb->kind == IR_TENSOR_CONST && p.trans_b) {
        /* constant B^T: stored as [K, N] so the inner loop runs along unit-stride rows */
        float *bt = pdc_alloc(G->ctx, (size_t)(p.k * p.n) * sizeof *bt);
        if (!bt) return PDC_ERR_OUT_OF_MEMORY;
        for (int64_t kk = 0; kk < p.k; kk++)
            for (int64_t j = 0; j < p.n; j++) bt[kk * p.n + j] = tb->data[j * p.k + kk];
        b = arm_const_bytes(G, bt, (size_t)(p.k * p.n) * sizeof *bt, "wT");
        pdc_free(bt);
        sbk = p.n, sbn = 1;
    } else if ((st = arm_tensor_ptr(G, l->inputs[1], &b))) {
        return st;
    }
    LLVMValueRef zero = arm_i64(G, 0);
    emit_matmul_core(G, a, zero, p.trans_a ? 1 : p.k, p.trans_a ? p.m : 1, b, zero, sbk, sbn, y, zero, p.m, p.k, p.n);
    return emit_gemm_epilogue(G, l, &p, y);
}

/* y = alpha * y + beta * C (C broadcast; fc: the bias) where that is not the identity. */
static pdc_status emit_gemm_epilogue(arm_gen *G, const ir_layer *l, const ir_gemm_params *pp, LLVMValueRef y)
{
    const ir_model *m = G->m;
    const ir_gemm_params p = *pp;
    pdc_status st;
    int has_c = l->n_inputs > 2 && l->inputs[2] >= 0;
    if (p.alpha != 1.0f || has_c) {
        LLVMValueRef c = NULL;
        int64_t cm = 1, cn = 1;
        if (has_c) {
            const ir_tensor *ct = &m->tensors[l->inputs[2]];
            if (ct->rank > 2) return arm_unsupported(G, l, "bias rank > 2");
            if (ct->rank >= 1) cn = ct->dims[ct->rank - 1];
            if (ct->rank == 2) cm = ct->dims[0];
            if ((st = arm_tensor_ptr(G, l->inputs[2], &c))) return st;
        }
        arm_loop Li, Lj;
        LLVMValueRef i = arm_loop_begin(G, p.m, &Li);
        LLVMValueRef j = arm_loop_begin(G, p.n, &Lj);
        LLVMValueRef at = arm_affine(G, i, p.n, j, 1, 0);
        LLVMValueRef v = fmul(G, arm_f32(G, p.alpha), arm_ldf(G, y, at));
        if (c) {
            LLVMValueRef cv = arm_ldf(G, c, arm_affine(G, i, cm == 1 ? 0 : cn, j, cn == 1 ? 0 : 1, 0));
            v = pdc_irb_fma(&G->irb, arm_f32(G, p.beta), cv, v);
        }
        arm_stf(G, y, at, v);
        arm_loop_end(G, &Lj);
        arm_loop_end(G, &Li);
    }
    return PDC_OK;
}

static pdc_status emit_matmul(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]];
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    if (ta->rank < 2 || tb->rank < 2 || ty->rank < 2) return arm_unsupported(G, l, "operands of rank < 2");
    const int64_t M = ta->dims[ta->rank - 2], K = ta->dims[ta->rank - 1], N = tb->dims[tb->rank - 1];
    const int nb = ty->rank - 2;
    int64_t sa[PDC_MAX_RANK], sb[PDC_MAX_RANK], sy[PDC_MAX_RANK];
    /* batch strides, right-aligned, broadcast dims 0 */
    const ir_tensor *ops[2] = {ta, tb};
    int64_t *str[2] = {sa, sb}, mat[2] = {M * K, K * N};
    for (int q = 0; q < 2; q++) {
        int tbr = ops[q]->rank - 2;
        int64_t stride = mat[q];
        for (int i = nb - 1; i >= 0; i--) {
            int ti = i - (nb - tbr);
            if (ti < 0) {
                str[q][i] = 0;
                continue;
            }
            int64_t dim = ops[q]->dims[ti];
            str[q][i] = (dim == 1 && ty->dims[i] != 1) ? 0 : stride;
            stride *= dim;
        }
    }
    int64_t stride = M * N;
    for (int i = nb - 1; i >= 0; i--) {
        sy[i] = stride;
        stride *= ty->dims[i];
    }
    LLVMValueRef a, b, y;
    pdc_status st;
    if ((st = arm_tensor_ptr(G, l->inputs[0], &a)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
    /* by a BCR-, block- or unstructured-pruned constant matrix (a linear layer on x [..., M, K]): x's
     * leading dims are rows of one product, on the block-sparse kernel through the transpose [N, K]
     * of the weights, as the cpu target runs it */
    if (tb->kind == IR_TENSOR_CONST && tb->rank == 2 && tb->sparsity.kind != IR_SPARSITY_NONE && K > 0) {
        ir_tensor wt;
        if ((st = ir_matrix_transpose(G->ctx, tb, &wt))) return st;
        ir_gemm_params p = {.m = numel(ta) / K, .n = N, .k = K};
        arm_bcr C;
        st = arm_bcr_plan(G, &wt, 0, N, &C);
        if (st != PDC_ERR_UNSUPPORTED) {
            ir_matrix_transpose_free(&wt);
            return st ? st : emit_gemm_bcr(G, l, &p, &C, a, y);
        }
        arm_bsr S;
        st = arm_bsr_plan(G, &wt, 0, N, &S);
        ir_matrix_transpose_free(&wt);
        if (st != PDC_ERR_UNSUPPORTED) return st ? st : emit_gemm_sparse(G, l, &p, &S, a, y);
    }
    if ((st = arm_tensor_ptr(G, l->inputs[1], &b))) return st;
    arm_nest Nn;
    LLVMValueRef idx[PDC_MAX_RANK];
    nest_begin(G, &Nn, nb, ty->dims, idx);
    emit_matmul_core(G, a, nest_offset(G, nb, idx, sa), K, 1, b, nest_offset(G, nb, idx, sb), N, 1, y,
                     nest_offset(G, nb, idx, sy), M, K, N);
    nest_end(G, &Nn);
    return PDC_OK;
}

/* ------------------------------------------------------------------ dispatch */

pdc_status arm_emit_op(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    pdc_status st;
    switch (l->op) {
    IR_CASE_ACTIVATION: {
        LLVMValueRef x, y;
        if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
        return emit_unary(G, l, x, y, numel(&m->tensors[l->outputs[0]]));
    }
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: return emit_binary(G, l);
    case IR_OP_BATCHNORM: return emit_batchnorm(G, l);
    case IR_OP_CONCAT: return emit_concat(G, l);
    case IR_OP_FLATTEN: case IR_OP_RESHAPE: {
        LLVMValueRef x, y;
        if ((st = arm_tensor_ptr(G, l->inputs[0], &x)) || (st = arm_tensor_ptr(G, l->outputs[0], &y))) return st;
        arm_move(G, y, x, numel(&m->tensors[l->outputs[0]]));
        return PDC_OK;
    }
    case IR_OP_TRANSPOSE: return emit_transpose(G, l);
    case IR_OP_MAXPOOL: case IR_OP_AVGPOOL: return emit_pool(G, l);
    case IR_OP_GLOBAL_AVGPOOL: return emit_global_avgpool(G, l);
    case IR_OP_SOFTMAX: return emit_softmax(G, l);
    case IR_OP_FC: case IR_OP_GEMM: return emit_gemm(G, l);
    case IR_OP_MATMUL: return emit_matmul(G, l);
    case IR_OP_LSTM: case IR_OP_GRU: return arm_emit_rnn(G, l);
    default: return arm_unsupported(G, l, "no AArch64 generator for this op");
    }
}
