/*
 * eltwise.c - JIT'd elementwise kernels: activations (relu, clip, leaky_relu, hardswish,
 * hardsigmoid, sigmoid, tanh) and add/sub/mul/div with numpy broadcasting.
 *
 * One kernel computes y[i] = a[i] (op) b[i] over a contiguous run of n elements, where each operand
 * is either a vector run or one value broadcast over the run; the kernel is specialised on the op,
 * its constants and the two operand kinds. Broadcasting is reduced at compile time to a list of runs:
 * the trailing dims over which both operands are uniformly contiguous or uniformly broadcast form a
 * run; the leading dims enumerate runs, whose operand offsets are tabulated. The arithmetic is
 * exactly the reference kernel's (same comparisons, no contraction), so results match bit for bit,
 * except sigmoid and tanh: straight-line IR (irb_math.c) within about 2 ulp of the reference's libm.
 * batchnorm (inference form, constant statistics) is a per-channel y = x * a[c] + b[c] with a and b
 * folded at compile time in double precision.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/index.h"
#include "ir/ops/batchnorm.h"

#define ELT_MAX_RUNS (1u << 20)
#define ELT_PAR_MIN 65536 /* elements below which one thread does the layer */

typedef struct elt_key {
    char tag[8];            /* "eltw3": bump when the generated code changes (cached objects) */
    int32_t op;             /* ir_op */
    int32_t a_vec, b_vec;   /* 1: operand varies along the run; 0: one value broadcast (b unused for unary) */
    int32_t vec;
    float p0, p1;           /* clip min/max, leaky alpha, hardsigmoid alpha/beta */
} elt_key;

typedef cpu_unary_fn elt_fn; /* b is read only by binary ops */

typedef struct elt_state {
    elt_fn fn;
    size_t runs, inner;     /* runs of inner elements */
    int64_t *offs;          /* per run: a offset, b offset (NULL: one run at 0, 0) */
    int unary;
    int a_vec, b_vec;       /* as in the key */
} elt_state;

static void elt_free(void *p)
{
    elt_state *s = p;
    if (!s) return;
    pdc_free(s->offs);
    pdc_free(s);
}

/* The op applied to values of type t (a vector or a scalar float). */
static LLVMValueRef elt_op(pdc_irb *irb, const elt_key *k, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = irb->b;
    ir_fused_params act = {0};
    if (ir_act_from_op((ir_op)k->op, &act.act)) {
        act.act_min = act.act_alpha = k->p0;
        act.act_max = k->p1;
        return pdc_irb_act(irb, &act, a);
    }
    switch ((ir_op)k->op) {
    case IR_OP_HARDSIGMOID: {
        LLVMValueRef zero = LLVMConstNull(t), one = pdc_irb_f32_like(irb, a, 1.0f);
        LLVMValueRef v = LLVMBuildFAdd(B, LLVMBuildFMul(B, pdc_irb_f32_like(irb, a, k->p0), a, ""),
                                       pdc_irb_f32_like(irb, a, k->p1), "");
        LLVMValueRef hi = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, v, one, ""), one, v, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, v, zero, ""), zero, hi, "");
    }
    case IR_OP_ADD: return LLVMBuildFAdd(B, a, b, "");
    case IR_OP_SUB: return LLVMBuildFSub(B, a, b, "");
    case IR_OP_MUL: return LLVMBuildFMul(B, a, b, "");
    case IR_OP_DIV: return LLVMBuildFDiv(B, a, b, "");
    default: return a;
    }
}

/* Operand value at index i: a vector (or scalar) load, or the broadcast value. */
static LLVMValueRef elt_operand(pdc_irb *irb, LLVMValueRef base, int is_vec, LLVMValueRef i, int vector)
{
    if (!is_vec) {
        LLVMValueRef s = LLVMBuildLoad2(irb->b, irb->f32, base, "");
        LLVMSetAlignment(s, 4);
        return vector ? pdc_irb_splat(irb, s) : s;
    }
    LLVMValueRef p = pdc_irb_gep(irb, irb->f32, base, i);
    if (vector) return pdc_irb_load_vec(irb, p);
    LLVMValueRef s = LLVMBuildLoad2(irb->b, irb->f32, p, "");
    LLVMSetAlignment(s, 4);
    return s;
}

/* for (i = start; i < limit; i += step) y[i..] = op(a[i..], b[i..]) with vectors or scalars. */
static void elt_loop(pdc_irb *irb, const elt_key *k, LLVMValueRef fn, LLVMValueRef a, LLVMValueRef b, LLVMValueRef y,
                     LLVMValueRef start, LLVMValueRef limit, int vector, LLVMValueRef *end_out)
{
    LLVMBuilderRef B = irb->b;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(irb->c, fn, "head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(irb->c, fn, "body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(irb->c, fn, "done");
    int64_t step = vector ? irb->vec : 1;
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    LLVMValueRef i = LLVMBuildPhi(B, irb->i64, "i");
    LLVMValueRef next = LLVMBuildAdd(B, i, pdc_irb_i64(irb, step), "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLE, next, limit, ""), body, done);
    LLVMPositionBuilderAtEnd(B, body);
    LLVMTypeRef t = vector ? irb->vf : irb->f32;
    LLVMValueRef va = elt_operand(irb, a, k->a_vec, i, vector);
    LLVMValueRef vb = k->op == IR_OP_ADD || k->op == IR_OP_SUB || k->op == IR_OP_MUL || k->op == IR_OP_DIV
                          ? elt_operand(irb, b, k->b_vec, i, vector)
                          : NULL;
    LLVMValueRef r = elt_op(irb, k, t, va, vb);
    LLVMValueRef st = LLVMBuildStore(B, r, pdc_irb_gep(irb, irb->f32, y, i));
    LLVMSetAlignment(st, 4);
    LLVMBuildBr(B, head);
    LLVMValueRef in_v[2] = {start, next};
    LLVMBasicBlockRef in_b[2] = {pre, body};
    LLVMAddIncoming(i, in_v, in_b, 2);
    LLVMPositionBuilderAtEnd(B, done);
    *end_out = i;
}

static pdc_status elt_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                           LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const elt_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    LLVMTypeRef params[4] = {irb.ptr, irb.ptr, irb.ptr, irb.i64};
    LLVMValueRef fn = pdc_irb_function(&irb, prefix, "run", 4, params);
    LLVMSetFunctionCallConv(fn, LLVMCCallConv);
    LLVMValueRef a = LLVMGetParam(fn, 0), b = LLVMGetParam(fn, 1), y = LLVMGetParam(fn, 2), n = LLVMGetParam(fn, 3);
    /* a and b may be the same buffer (x + x), and y may be a (an activation applied in place, as
     * fc/gemm do): each element is read before it is written, so no pointer is noalias */
    unsigned na = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (unsigned i = 1; i <= 3; i++) LLVMRemoveEnumAttributeAtIndex(fn, i, na);
    LLVMPositionBuilderAtEnd(irb.b, LLVMAppendBasicBlockInContext(c, fn, "entry"));
    LLVMValueRef end;
    elt_loop(&irb, k, fn, a, b, y, pdc_irb_i64(&irb, 0), n, 1, &end);
    LLVMValueRef end2;
    elt_loop(&irb, k, fn, a, b, y, end, n, 0, &end2);
    LLVMBuildRetVoid(irb.b);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

static pdc_status elt_kernel(const cpu_compile *cc, elt_key *k, elt_fn *fn)
{
    static const char *const syms[] = {"run"};
    pdc_kernel_desc d = {k, sizeof *k, elt_emit, k, 1, syms};
    void *addr = NULL;
    pdc_status st = pdc_jit_kernel(cc->jit, cc->ctx, &d, &addr, NULL);
    *fn = st ? NULL : (elt_fn)addr;
    return st;
}

static void elt_key_init(elt_key *k, ir_op op, int vec)
{
    memset(k, 0, sizeof *k); /* padding bytes too: the key is hashed */
    memcpy(k->tag, "eltw3", 6);
    k->op = (int32_t)op;
    k->vec = vec;
}

/* The key's parameters of activation act (those it reads, so equal activations share a kernel;
 * elt_op reads them back). */
static void elt_key_act(elt_key *k, const ir_fused_params *act)
{
    k->p0 = act->act == IR_ACT_CLIP ? act->act_min : act->act == IR_ACT_LEAKY_RELU ? act->act_alpha : 0.0f;
    k->p1 = act->act == IR_ACT_CLIP ? act->act_max : 0.0f;
}

pdc_status cpu_act_kernel(const cpu_compile *cc, const ir_fused_params *act, cpu_unary_fn *fn)
{
    static const ir_op op_of[] = {[IR_ACT_RELU] = IR_OP_RELU, [IR_ACT_CLIP] = IR_OP_CLIP,
                                  [IR_ACT_LEAKY_RELU] = IR_OP_LEAKY_RELU, [IR_ACT_SIGMOID] = IR_OP_SIGMOID,
                                  [IR_ACT_TANH] = IR_OP_TANH, [IR_ACT_HARDSWISH] = IR_OP_HARDSWISH};
    *fn = NULL;
    if (act->act == IR_ACT_NONE) return PDC_OK;
    elt_key k;
    elt_key_init(&k, op_of[act->act], cc->target->vec);
    elt_key_act(&k, act); /* as cpu_plan_eltwise keys that activation's layer: one shared kernel */
    k.a_vec = 1;
    return elt_kernel(cc, &k, fn);
}

static pdc_status elt_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                          const cpu_exec *x)
{
    (void)m;
    const elt_state *s = L->state;
    const float *a = buf[l->inputs[0]];
    const float *b = s->unary ? a : buf[l->inputs[1]];
    float *y = buf[l->outputs[0]];
    size_t total = s->runs * s->inner;
    int nt = total >= ELT_PAR_MIN ? x->threads : 1;
    if (s->runs == 1) {
        /* one run: split it in vector-aligned chunks, taken dynamically (a thread that loses its
         * core delays only the chunk it holds) */
        size_t chunk = 16384;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (size_t c0 = 0; c0 < s->inner; c0 += chunk) {
            size_t n = s->inner - c0 < chunk ? s->inner - c0 : chunk;
            const int64_t ao = s->offs ? s->offs[0] : 0, bo = s->offs ? s->offs[1] : 0;
            /* a broadcast operand (one value) keeps its offset; a vector one advances with the chunk */
            s->fn(a + ao + (s->a_vec ? (int64_t)c0 : 0), b + bo + (s->b_vec ? (int64_t)c0 : 0), y + c0, (int64_t)n);
        }
        return PDC_OK;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 8) if (nt > 1)
    for (size_t r = 0; r < s->runs; r++)
        s->fn(a + s->offs[2 * r], b + s->offs[2 * r + 1], y + r * s->inner, (int64_t)s->inner);
    return PDC_OK;
}

/* ------------------------------------------------------------------ batchnorm */

typedef struct bn_state {
    int64_t n, c, sp;
    float *a, *b;            /* per channel: y = x * a + b */
} bn_state;

static void bn_free(void *p)
{
    bn_state *s = p;
    if (!s) return;
    pdc_free(s->a);
    pdc_free(s->b);
    pdc_free(s);
}

PDC_ISA_CLONES __attribute__((optimize("O3")))
static void bn_plane(float *restrict y, const float *restrict x, int64_t n, float a, float b)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(x[i], a, b);
}

static pdc_status bn_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf, const cpu_exec *x)
{
    (void)m;
    const bn_state *s = L->state;
    const float *in = buf[l->inputs[0]];
    float *out = buf[l->outputs[0]];
    int64_t planes = s->n * s->c;
    int nt = planes * s->sp >= ELT_PAR_MIN ? x->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (nt > 1)
    for (int64_t q = 0; q < planes; q++) bn_plane(out + q * s->sp, in + q * s->sp, s->sp, s->a[q % s->c], s->b[q % s->c]);
    return PDC_OK;
}

static pdc_status plan_batchnorm(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                                 size_t why_cap)
{
    if (l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    if (!ir_batchnorm_foldable(m, l)) {
        snprintf(why, why_cap, "batchnorm statistics not constants of one value per channel, or scale and shift not finite");
        return PDC_ERR_UNSUPPORTED;
    }
    const ir_tensor *t = &m->tensors[l->inputs[0]];
    bn_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->n = t->dims[0];
    s->c = t->dims[1];
    s->sp = 1;
    for (int i = 2; i < t->rank; i++) s->sp *= t->dims[i];
    s->a = pdc_alloc(cc->ctx, (size_t)s->c * sizeof *s->a);
    s->b = pdc_alloc(cc->ctx, (size_t)s->c * sizeof *s->b);
    if (!s->a || !s->b) {
        bn_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t c = 0; c < s->c; c++) {
        double g, shift;
        ir_batchnorm_channel(m, l, c, &g, &shift);
        s->a[c] = (float)g;
        s->b[c] = (float)shift;
    }
    L->run = bn_run;
    L->state = s;
    L->free_state = bn_free;
    snprintf(L->info, sizeof L->info, "batchnorm as a per-channel multiply-add (statistics folded at compile time)");
    return PDC_OK;
}

pdc_status cpu_plan_eltwise(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                            size_t why_cap)
{
    elt_key k;
    elt_key_init(&k, l->op, cc->target->vec);
    int unary = 1;
    if (l->op == IR_OP_BATCHNORM) return plan_batchnorm(cc, m, l, L, why, why_cap);
    ir_fused_params act;
    switch (l->op) {
    case IR_OP_RELU: case IR_OP_CLIP: case IR_OP_LEAKY_RELU: case IR_OP_HARDSWISH: case IR_OP_SIGMOID:
    case IR_OP_TANH:
        ir_act_layer_params(l, &act);
        elt_key_act(&k, &act);
        break;
    case IR_OP_HARDSIGMOID:
        k.p0 = ir_attr_float(&l->attrs, "alpha", 0.2f);
        k.p1 = ir_attr_float(&l->attrs, "beta", 0.5f);
        break;
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: unary = 0; break;
    default: return PDC_ERR_UNSUPPORTED;
    }
    if (l->inputs[0] < 0 || l->outputs[0] < 0 || (!unary && (l->n_inputs < 2 || l->inputs[1] < 0)))
        return PDC_ERR_UNSUPPORTED;
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    const int r = ty->rank;
    int64_t bs[2][PDC_MAX_RANK] = {{0}}, *sa = bs[0], *sb = bs[1];
    size_t inner = 1, runs = 1;
    int split = 0; /* dims [split, r) form the run */
    if (unary) {
        inner = ir_tensor_numel(ty);
        k.a_vec = 1;
    } else {
        const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]];
        if (r < 1 || ir_broadcast_strides(ta->rank, ta->dims, r, ty->dims, 1, sa) ||
            ir_broadcast_strides(tb->rank, tb->dims, r, ty->dims, 1, sb))
            return PDC_ERR_UNSUPPORTED;
        /* Trailing dims (of size > 1) where each operand is uniformly contiguous or broadcast. */
        int a_kind = -1, b_kind = -1;
        int64_t ea = 1, eb = 1; /* expected contiguous strides */
        split = r;
        for (int d = r - 1; d >= 0; d--) {
            if (ty->dims[d] == 1) {
                split = d;
                continue;
            }
            int ak = sa[d] != 0, bk = sb[d] != 0;
            if ((a_kind >= 0 && ak != a_kind) || (b_kind >= 0 && bk != b_kind)) break;
            if ((ak && sa[d] != ea) || (bk && sb[d] != eb)) break;
            a_kind = ak;
            b_kind = bk;
            ea *= ak ? ty->dims[d] : 1;
            eb *= bk ? ty->dims[d] : 1;
            inner *= (size_t)ty->dims[d];
            split = d;
        }
        k.a_vec = a_kind != 0;
        k.b_vec = b_kind != 0;
        for (int d = 0; d < split; d++) runs *= (size_t)ty->dims[d];
        if (runs > ELT_MAX_RUNS) {
            snprintf(why, why_cap, "broadcast splits into %zu runs (more than %u)", runs, ELT_MAX_RUNS);
            return PDC_ERR_UNSUPPORTED;
        }
    }
    elt_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->runs = runs;
    s->inner = inner;
    s->unary = unary;
    s->a_vec = k.a_vec;
    s->b_vec = k.b_vec;
    if (!unary) {
        s->offs = pdc_calloc(cc->ctx, 2 * runs, sizeof *s->offs);
        if (!s->offs) {
            elt_free(s);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        int64_t idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
        for (size_t q = 0; q < runs; q++) {
            s->offs[2 * q] = off[0];
            s->offs[2 * q + 1] = off[1];
            ir_index_next(split, ty->dims, idx, 2, bs, off);
        }
    }
    pdc_status st = elt_kernel(cc, &k, &s->fn);
    if (st) {
        elt_free(s);
        return st;
    }
    L->run = elt_run;
    L->state = s;
    L->free_state = elt_free;
    if (unary)
        snprintf(L->info, sizeof L->info, "jit elementwise %s, %s", ir_op_get_info(l->op)->name, pdc_isa_name(cc->target->isa));
    else
        snprintf(L->info, sizeof L->info, "jit elementwise %s, %zu run%s of %zu (%s%s), %s", ir_op_get_info(l->op)->name,
                 runs, runs == 1 ? "" : "s", inner, k.a_vec ? "vector" : "scalar", k.b_vec ? " x vector" : " x scalar",
                 pdc_isa_name(cc->target->isa));
    return PDC_OK;
}

