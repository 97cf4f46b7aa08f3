/*
 * softmax.c - JIT'd softmax along one axis, y = e^(x - max) / sum e^(x - max), with pdc_irb_exp
 * (no libm call, so the loops stay vector code).
 *
 * The tensor is outer x len x inner, len along the axis. The kernel is specialised on the layout:
 * - rows (inner == 1: class scores, attention): each row of len contiguous floats is reduced in a
 *   vector accumulator, its last partial vector under a mask, then across the lanes;
 * - columns (inner > 1: per-pixel class scores, axis 1 of NCHW): vec neighbouring columns at a time,
 *   each lane a softmax of its own over elements inner floats apart, so no step crosses lanes.
 * The max skips NaNs (x > max), but a NaN still makes its softmax's sum and so every output NaN, as
 * in the reference; e^(x - max) below e^-87.3 is 0 (a logit of -inf gives 0). Sums are in float
 * where the reference's are in double: a relative difference of about 1e-6 for len in the thousands.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

#define SMAX_PAR_MIN 32768  /* elements below which one thread does the layer */
#define SMAX_PIECE 16384    /* elements a thread takes at a time */

typedef struct smax_key {
    char tag[8];            /* "smax3": bump when the generated code changes (cached objects) */
    int32_t vec;
    int32_t columns;        /* 1: vectors across columns; 0: along rows */
} smax_key;

/* rows: count rows, row r at x + r * stride (len floats); columns: count columns from x, element k
 * of column c at x + k * stride + c, in blocks of SMAX_BLOCK. */
typedef void (*smax_fn)(const float *x, float *y, int64_t len, int64_t stride, int64_t count);

typedef struct smax_state {
    smax_fn fn;
    int64_t outer, len, inner;
    int columns;
} smax_state;

typedef struct smax_gen {
    pdc_irb *irb;
    LLVMValueRef fn, x, y, len, stride;
    LLVMValueRef k_var, c_var;  /* i64 allocas of the entry block */
    LLVMValueRef acc;           /* rows: a vector alloca */
    LLVMValueRef mx, sum;       /* columns: [SMAX_BLOCK] float allocas, per column of a block */
} smax_gen;

#define SMAX_BLOCK 256 /* columns a column kernel reduces together (1 KiB of each row) */

static LLVMValueRef ld(pdc_irb *irb, LLVMValueRef p, LLVMValueRef mask)
{
    return mask ? pdc_irb_load_masked(irb, p, mask) : pdc_irb_load_vec(irb, p);
}

static void st(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask)
{
    if (mask) pdc_irb_store_masked(irb, v, p, mask);
    else pdc_irb_store_vec(irb, v, p, irb->vec);
}

/* One vector of a pass at element offset `at` of x and y, accumulating in the vector at slot:
 * 0: max(slot, x), 1: y = e^(x - m), slot += y, 2: y *= m (m: the max, then the reciprocal of the
 * sum). Lanes off in mask (past a row's or a block's end) are not read or written and leave slot as
 * it is. */
static void smax_step(smax_gen *g, int pass, LLVMValueRef at, LLVMValueRef mask, LLVMValueRef slot, LLVMValueRef m)
{
    pdc_irb *irb = g->irb;
    LLVMBuilderRef B = irb->b;
    if (pass == 2) {
        LLVMValueRef py = pdc_irb_gep(irb, irb->f32, g->y, at);
        st(irb, LLVMBuildFMul(B, ld(irb, py, mask), m, ""), py, mask);
        return;
    }
    LLVMValueRef acc = pdc_irb_load_vec(irb, slot);
    LLVMValueRef v = ld(irb, pdc_irb_gep(irb, irb->f32, g->x, at), mask);
    if (pass == 0) {
        if (mask) v = LLVMBuildSelect(B, mask, v, pdc_irb_f32_like(irb, v, -INFINITY), "");
        acc = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, v, acc, ""), v, acc, "");
    } else {
        /* e^d for d = x - max below -87.3 (where pdc_irb_exp clamps, about 1e-38) is 0: a logit of
         * -inf (a masked position) gets exactly 0, as in the reference */
        LLVMValueRef d = LLVMBuildFSub(B, v, m, "");
        LLVMValueRef e = pdc_irb_exp(irb, d);
        e = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, d, pdc_irb_f32_like(irb, d, -87.3f), ""),
                            LLVMConstNull(irb->vf), e, "");
        st(irb, e, pdc_irb_gep(irb, irb->f32, g->y, at), mask);
        if (mask) e = LLVMBuildSelect(B, mask, e, LLVMConstNull(irb->vf), "");
        acc = LLVMBuildFAdd(B, acc, e, "");
    }
    pdc_irb_store_vec(irb, acc, slot, irb->vec);
}

static LLVMValueRef splat_f(pdc_irb *irb, float v) { return pdc_irb_f32_like(irb, LLVMGetUndef(irb->vf), v); }

/* The softmax of the row of len floats at base: each pass over its whole vectors, then the rest under
 * a mask; the max and the sum across the lanes between the passes. */
static void smax_row(smax_gen *g, LLVMValueRef base)
{
    pdc_irb *irb = g->irb;
    LLVMBuilderRef B = irb->b;
    LLVMValueRef whole = LLVMBuildAnd(B, g->len, pdc_irb_i64(irb, -(int64_t)irb->vec), "");
    LLVMValueRef tail = pdc_irb_lanes_below(irb, LLVMBuildSub(B, g->len, whole, ""));
    LLVMValueRef m = NULL;
    for (int pass = 0; pass < 3; pass++) {
        if (pass < 2) pdc_irb_store_vec(irb, pass == 0 ? splat_f(irb, -INFINITY) : LLVMConstNull(irb->vf), g->acc, irb->vec);
        pdc_irb_loop lp;
        LLVMValueRef i = pdc_irb_loop_begin(irb, g->fn, &lp, g->k_var, pdc_irb_i64(irb, 0), whole, irb->vec, "vectors");
        smax_step(g, pass, LLVMBuildAdd(B, base, i, ""), NULL, g->acc, m);
        pdc_irb_loop_end(irb, &lp, i);
        smax_step(g, pass, LLVMBuildAdd(B, base, whole, ""), tail, g->acc, m);
        if (pass == 0) m = pdc_irb_splat(irb, pdc_irb_reduce_max(irb, pdc_irb_load_vec(irb, g->acc)));
        if (pass == 1)
            m = pdc_irb_splat(irb, LLVMBuildFDiv(B, pdc_irb_f32(irb, 1.0f), pdc_irb_reduce_add(irb, pdc_irb_load_vec(irb, g->acc)), ""));
    }
}

/* arr[0, span) = v (span: a multiple of vec, at most SMAX_BLOCK) */
static void smax_fill(smax_gen *g, LLVMValueRef arr, LLVMValueRef span, LLVMValueRef v)
{
    pdc_irb *irb = g->irb;
    pdc_irb_loop lp;
    LLVMValueRef c = pdc_irb_loop_begin(irb, g->fn, &lp, g->c_var, pdc_irb_i64(irb, 0), span, irb->vec, "fill");
    pdc_irb_store_vec(irb, v, pdc_irb_gep(irb, irb->f32, arr, c), irb->vec);
    pdc_irb_loop_end(irb, &lp, c);
}

/* The softmax of n <= SMAX_BLOCK columns from base, lane by lane: each pass row by row over the
 * block (so each row's part is read in one run, wherever the rows fall in the cache's sets), whole
 * vectors and then, if any, the rest under a mask; per-column max and sum live in g->mx and g->sum
 * (their first span floats: n rounded up to whole vectors). */
static void smax_columns(smax_gen *g, LLVMValueRef base, LLVMValueRef n)
{
    pdc_irb *irb = g->irb;
    LLVMBuilderRef B = irb->b;
    LLVMValueRef whole = LLVMBuildAnd(B, n, pdc_irb_i64(irb, -(int64_t)irb->vec), "");
    LLVMValueRef has_tail = LLVMBuildICmp(B, LLVMIntSLT, whole, n, "");
    LLVMValueRef tail = pdc_irb_lanes_below(irb, LLVMBuildSub(B, n, whole, ""));
    LLVMValueRef span = LLVMBuildAnd(B, LLVMBuildAdd(B, n, pdc_irb_i64(irb, irb->vec - 1), ""),
                                     pdc_irb_i64(irb, -(int64_t)irb->vec), "");
    smax_fill(g, g->mx, span, splat_f(irb, -INFINITY));
    smax_fill(g, g->sum, span, LLVMConstNull(irb->vf));
    for (int pass = 0; pass < 3; pass++) {
        LLVMValueRef slots = pass == 0 ? g->mx : g->sum;
        pdc_irb_loop lk, lc;
        LLVMValueRef k = pdc_irb_loop_begin(irb, g->fn, &lk, g->k_var, pdc_irb_i64(irb, 0), g->len, 1, "rows");
        LLVMValueRef row = LLVMBuildAdd(B, base, LLVMBuildMul(B, k, g->stride, ""), "");
        LLVMValueRef c = pdc_irb_loop_begin(irb, g->fn, &lc, g->c_var, pdc_irb_i64(irb, 0), whole, irb->vec, "vectors");
        LLVMBasicBlockRef rest = NULL, next = NULL;
        for (int last = 0; last < 2; last++) {
            LLVMValueRef at = last ? whole : c;
            LLVMValueRef slot = pdc_irb_gep(irb, irb->f32, slots, at);
            LLVMValueRef m = pass == 0 ? NULL : pdc_irb_load_vec(irb, pdc_irb_gep(irb, irb->f32, pass == 1 ? g->mx : g->sum, at));
            smax_step(g, pass, LLVMBuildAdd(B, row, at, ""), last ? tail : NULL, slot, m);
            if (last) break;
            pdc_irb_loop_end(irb, &lc, c);
            /* the rest only if there is one: at n == SMAX_BLOCK its slot would be past the arrays */
            rest = LLVMAppendBasicBlockInContext(irb->c, g->fn, "rest");
            next = LLVMAppendBasicBlockInContext(irb->c, g->fn, "next");
            LLVMBuildCondBr(B, has_tail, rest, next);
            LLVMPositionBuilderAtEnd(B, rest);
        }
        LLVMBuildBr(B, next);
        LLVMPositionBuilderAtEnd(B, next);
        pdc_irb_loop_end(irb, &lk, k);
        if (pass == 1) { /* sum -> its reciprocal */
            LLVMValueRef i = pdc_irb_loop_begin(irb, g->fn, &lc, g->c_var, pdc_irb_i64(irb, 0), span, irb->vec, "reciprocal");
            LLVMValueRef p = pdc_irb_gep(irb, irb->f32, g->sum, i);
            pdc_irb_store_vec(irb, LLVMBuildFDiv(B, splat_f(irb, 1.0f), pdc_irb_load_vec(irb, p), ""), p, irb->vec);
            pdc_irb_loop_end(irb, &lc, i);
        }
    }
}

static pdc_status smax_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                            LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const smax_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    LLVMBuilderRef B = irb.b;
    LLVMTypeRef params[5] = {irb.ptr, irb.ptr, irb.i64, irb.i64, irb.i64};
    smax_gen g = {.irb = &irb, .fn = pdc_irb_function(&irb, prefix, "run", 5, params)};
    g.x = LLVMGetParam(g.fn, 0);
    g.y = LLVMGetParam(g.fn, 1);
    g.len = LLVMGetParam(g.fn, 2);
    g.stride = LLVMGetParam(g.fn, 3);
    LLVMValueRef count = LLVMGetParam(g.fn, 4);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(c, g.fn, "entry"));
    LLVMValueRef item_var = LLVMBuildAlloca(B, irb.i64, "item");
    g.k_var = LLVMBuildAlloca(B, irb.i64, "k");
    g.c_var = LLVMBuildAlloca(B, irb.i64, "c");
    g.acc = LLVMBuildAlloca(B, irb.vf, "acc");
    LLVMTypeRef block = LLVMArrayType2(irb.f32, SMAX_BLOCK);
    g.mx = LLVMBuildAlloca(B, block, "mx");
    g.sum = LLVMBuildAlloca(B, block, "sum");
    pdc_irb_loop lp;
    if (!k->columns) {
        LLVMValueRef r = pdc_irb_loop_begin(&irb, g.fn, &lp, item_var, pdc_irb_i64(&irb, 0), count, 1, "items");
        smax_row(&g, LLVMBuildMul(B, r, g.stride, ""));
        pdc_irb_loop_end(&irb, &lp, r);
    } else {
        LLVMValueRef b0 = pdc_irb_loop_begin(&irb, g.fn, &lp, item_var, pdc_irb_i64(&irb, 0), count, SMAX_BLOCK, "items");
        LLVMValueRef left = LLVMBuildSub(B, count, b0, "");
        LLVMValueRef big = LLVMBuildICmp(B, LLVMIntSGT, left, pdc_irb_i64(&irb, SMAX_BLOCK), "");
        smax_columns(&g, b0, LLVMBuildSelect(B, big, pdc_irb_i64(&irb, SMAX_BLOCK), left, ""));
        pdc_irb_loop_end(&irb, &lp, b0);
    }
    LLVMBuildRetVoid(B);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

static pdc_status smax_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const smax_state *s = L->state;
    const float *in = buf[l->inputs[0]];
    float *out = buf[l->outputs[0]];
    int64_t total = s->outer * s->len * s->inner;
    int nt = total >= SMAX_PAR_MIN ? x->threads : 1;
    if (!s->columns) {
        /* pieces of whole rows */
        int64_t rows = s->len >= SMAX_PIECE ? 1 : SMAX_PIECE / s->len;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int64_t r0 = 0; r0 < s->outer; r0 += rows)
            s->fn(in + r0 * s->len, out + r0 * s->len, s->len, s->len, s->outer - r0 < rows ? s->outer - r0 : rows);
        return PDC_OK;
    }
    /* pieces of about SMAX_PIECE elements: a run of columns (a multiple of 64) of one outer slice,
     * or whole slices where a slice is smaller */
    int64_t cols = SMAX_PIECE / s->len / 64 * 64;
    if (cols < 64) cols = 64;
    if (cols >= s->inner) {
        const int64_t slab = s->len * s->inner, slices = SMAX_PIECE / slab > 1 ? SMAX_PIECE / slab : 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int64_t o0 = 0; o0 < s->outer; o0 += slices)
            for (int64_t o = o0; o < s->outer && o < o0 + slices; o++)
                s->fn(in + o * slab, out + o * slab, s->len, s->inner, s->inner);
        return PDC_OK;
    }
    int64_t per = (s->inner + cols - 1) / cols, pieces = s->outer * per;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t p = 0; p < pieces; p++) {
        int64_t o = p / per, c0 = p % per * cols;
        int64_t at = o * s->len * s->inner + c0;
        s->fn(in + at, out + at, s->len, s->inner, s->inner - c0 < cols ? s->inner - c0 : cols);
    }
    return PDC_OK;
}

static void smax_free(void *p) { pdc_free(p); }

pdc_status cpu_plan_softmax(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                            size_t why_cap)
{
    if (l->op != IR_OP_SOFTMAX) return PDC_ERR_UNSUPPORTED;
    if (l->inputs[0] < 0 || l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    const ir_tensor *t = &m->tensors[l->inputs[0]];
    int64_t axis = ir_attr_int(&l->attrs, "axis", -1);
    if (axis < 0) axis += t->rank;
    if (axis < 0 || axis >= t->rank) {
        snprintf(why, why_cap, "axis %lld out of range for rank %d", (long long)ir_attr_int(&l->attrs, "axis", -1),
                 t->rank);
        return PDC_ERR_UNSUPPORTED;
    }
    int64_t outer = 1, inner = 1, len = t->dims[axis];
    for (int i = 0; i < axis; i++) outer *= t->dims[i];
    for (int i = (int)axis + 1; i < t->rank; i++) inner *= t->dims[i];
    if (outer < 1 || inner < 1 || len < 1) {
        snprintf(why, why_cap, "empty tensor");
        return PDC_ERR_UNSUPPORTED;
    }
    smax_key k;
    memset(&k, 0, sizeof k); /* padding bytes too: the key is hashed */
    memcpy(k.tag, "smax3", 6);
    k.vec = cc->target->vec;
    k.columns = inner > 1;
    static const char *const syms[] = {"run"};
    pdc_kernel_desc d = {&k, sizeof k, smax_emit, &k, 1, syms};
    void *addr = NULL;
    pdc_status st = pdc_jit_kernel(cc->jit, cc->ctx, &d, &addr, NULL);
    if (st) return st;
    smax_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    *s = (smax_state){(smax_fn)addr, outer, len, inner, k.columns};
    L->run = smax_run;
    L->state = s;
    L->free_state = smax_free;
    if (k.columns)
        snprintf(L->info, sizeof L->info, "jit softmax over %lld, %lld x %lld columns, vectors across columns, %s",
                 (long long)len, (long long)outer, (long long)inner, pdc_isa_name(cc->target->isa));
    else
        snprintf(L->info, sizeof L->info, "jit softmax, %lld row%s of %lld, %s", (long long)outer, outer == 1 ? "" : "s",
                 (long long)len, pdc_isa_name(cc->target->isa));
    return PDC_OK;
}
