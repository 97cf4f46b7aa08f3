/*
 * gpu_kernels.c - the gpu kernels of the ops without weights to pack: activations, broadcasting
 * add/sub/mul/div, batchnorm (scale and shift folded at compile time), pooling, global average
 * pooling, softmax, concat, transpose, flatten/reshape. One thread per output element, except
 * softmax (one thread per row along the axis) and global average pooling (one per plane). Shapes,
 * strides and offsets are constants, so index arithmetic is divisions by constants.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"
#include "ir/index.h"
#include "ir/ops/batchnorm.h"

/* Offset sum(i_d * s[d]) of the row-major multi-index of idx over dims[0..r). */
static LLVMValueRef strided(gpu_kb *kb, LLVMValueRef idx, int r, const int64_t *dims, const int64_t *s)
{
    LLVMValueRef off = kb_i64(kb, 0), rem = idx;
    for (int d = r - 1; d >= 0; d--) {
        if (s[d]) off = kb_add(kb, off, kb_mulc(kb, d ? kb_remc(kb, rem, dims[d]) : rem, s[d]));
        if (d) rem = kb_divc(kb, rem, dims[d]);
    }
    return off;
}

/* ------------------------------------------------------------------ elementwise */

typedef struct unary_p {
    gpu_ref x, y;
    gpu_act a;
} unary_p;

static void gen_unary(gpu_kb *kb, const void *vp)
{
    const unary_p *p = vp;
    kb_st(kb, p->y, kb->idx, kb_act(kb, &p->a, kb_ld(kb, p->x, kb->idx)));
}

typedef struct binary_p {
    gpu_ref a, b, y;
    ir_op op;
    int r;
    int64_t dims[PDC_MAX_RANK], sa[PDC_MAX_RANK], sb[PDC_MAX_RANK];
} binary_p;

static void gen_binary(gpu_kb *kb, const void *vp)
{
    const binary_p *p = vp;
    LLVMValueRef a = kb_ld(kb, p->a, strided(kb, kb->idx, p->r, p->dims, p->sa));
    LLVMValueRef b = kb_ld(kb, p->b, strided(kb, kb->idx, p->r, p->dims, p->sb));
    LLVMValueRef v = p->op == IR_OP_ADD ? kb_fadd(kb, a, b)
                   : p->op == IR_OP_SUB ? kb_fsub(kb, a, b)
                   : p->op == IR_OP_MUL ? kb_fmul(kb, a, b)
                                        : kb_fdiv(kb, a, b);
    kb_st(kb, p->y, kb->idx, v);
}

/* ------------------------------------------------------------------ data movement */

typedef struct copy_p {
    gpu_ref x, y;
    int r;                                        /* transpose: rank; 0: plain copy */
    int64_t dims[PDC_MAX_RANK], s[PDC_MAX_RANK];  /* output dims, input stride per output dim */
} copy_p;

static void gen_copy(gpu_kb *kb, const void *vp)
{
    const copy_p *p = vp;
    LLVMValueRef src = p->r ? strided(kb, kb->idx, p->r, p->dims, p->s) : kb->idx;
    kb_st(kb, p->y, kb->idx, kb_ld(kb, p->x, src));
}

typedef struct concat_p {
    gpu_ref y;
    int64_t row;              /* output elements per outer index */
    size_t n;
    gpu_ref x[64];
    int64_t chunk[64];        /* elements of input j per outer index */
} concat_p;

static void gen_concat(gpu_kb *kb, const void *vp)
{
    const concat_p *p = vp;
    LLVMValueRef o = kb_divc(kb, kb->idx, p->row), r = kb_remc(kb, kb->idx, p->row);
    int64_t at = 0;
    for (size_t j = 0; j < p->n; j++) {
        if (p->chunk[j] > 0) {
            kb_if I;
            LLVMValueRef in = kb_and(kb, kb_icmp(kb, LLVMIntSGE, r, kb_i64(kb, at)),
                                     kb_icmp(kb, LLVMIntSLT, r, kb_i64(kb, at + p->chunk[j])));
            kb_if_begin(kb, &I, in);
            LLVMValueRef src = kb_add(kb, kb_mulc(kb, o, p->chunk[j]), kb_addc(kb, r, -at));
            kb_st(kb, p->y, kb->idx, kb_ld(kb, p->x[j], src));
            kb_if_end(kb, &I);
        }
        at += p->chunk[j];
    }
}

/* ------------------------------------------------------------------ softmax, batchnorm */

typedef struct softmax_p {
    gpu_ref x, y;
    int64_t len, inner;
} softmax_p;

static void gen_softmax(gpu_kb *kb, const void *vp)
{
    const softmax_p *p = vp;
    /* row idx: outer index idx / inner, position idx % inner, elements `inner` apart */
    LLVMValueRef base = kb_add(kb, kb_mulc(kb, kb_divc(kb, kb->idx, p->inner), p->len * p->inner),
                               kb_remc(kb, kb->idx, p->inner));
    LLVMValueRef mx = kb_var(kb, kb->f32, kb_ld(kb, p->x, base));
    kb_loop L;
    LLVMValueRef k = kb_for(kb, &L, kb_i64(kb, 1), kb_i64(kb, p->len));
    LLVMValueRef v = kb_ld(kb, p->x, kb_add(kb, base, kb_mulc(kb, k, p->inner)));
    LLVMValueRef cur = kb_get(kb, kb->f32, mx);
    kb_set(kb, mx, kb_sel(kb, kb_fcmp(kb, LLVMRealOGT, v, cur), v, cur));
    kb_endfor(kb, &L);
    LLVMValueRef m = kb_get(kb, kb->f32, mx);
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    k = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, p->len));
    LLVMValueRef at = kb_add(kb, base, kb_mulc(kb, k, p->inner));
    LLVMValueRef e = kb_exp(kb, kb_fsub(kb, kb_ld(kb, p->x, at), m));
    kb_st(kb, p->y, at, e); /* y holds the exponentials until the sum is known */
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, kb->f32, sum), e));
    kb_endfor(kb, &L);
    LLVMValueRef s = kb_get(kb, kb->f32, sum);
    k = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, p->len));
    at = kb_add(kb, base, kb_mulc(kb, k, p->inner));
    kb_st(kb, p->y, at, kb_fdiv(kb, kb_ld(kb, p->y, at), s));
    kb_endfor(kb, &L);
}

typedef struct bn_p {
    gpu_ref x, y, g, be;
    int64_t c, sp;
} bn_p;

static void gen_batchnorm(gpu_kb *kb, const void *vp)
{
    const bn_p *p = vp;
    LLVMValueRef c = kb_remc(kb, kb_divc(kb, kb->idx, p->sp), p->c);
    kb_st(kb, p->y, kb->idx, kb_fma(kb, kb_ld(kb, p->x, kb->idx), kb_ld(kb, p->g, c), kb_ld(kb, p->be, c)));
}

/* ------------------------------------------------------------------ pooling */

typedef struct pool_p {
    gpu_ref x, y;
    int is_max, cip;
    int64_t in[3], out[3], k[3], s[3], pb[3], pe[3], d[3];
} pool_p;

static void gen_pool(gpu_kb *kb, const void *vp)
{
    const pool_p *p = vp;
    const int64_t out_sp = p->out[0] * p->out[1] * p->out[2], in_sp = p->in[0] * p->in[1] * p->in[2];
    LLVMValueRef pl = kb_divc(kb, kb->idx, out_sp), pix = kb_remc(kb, kb->idx, out_sp);
    LLVMValueRef o[3] = {kb_divc(kb, pix, p->out[1] * p->out[2]), kb_remc(kb, kb_divc(kb, pix, p->out[2]), p->out[1]),
                         kb_remc(kb, pix, p->out[2])};
    LLVMValueRef xbase = kb_mulc(kb, pl, in_sp);
    LLVMValueRef mx = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    LLVMValueRef valid = kb_var(kb, kb->i64, kb_i64(kb, 0));
    LLVMValueRef padded = kb_var(kb, kb->i64, kb_i64(kb, 0));
    kb_loop L[3];
    LLVMValueRef pos[3], ok = NULL, inpad = NULL;
    for (int a = 0; a < 3; a++) {
        LLVMValueRef t = kb_for(kb, &L[a], kb_i64(kb, 0), kb_i64(kb, p->k[a]));
        pos[a] = kb_add(kb, kb_addc(kb, kb_mulc(kb, o[a], p->s[a]), -p->pb[a]), kb_mulc(kb, t, p->d[a]));
        LLVMValueRef in_ext = kb_icmp(kb, LLVMIntSLT, pos[a], kb_i64(kb, p->in[a] + p->pe[a]));
        LLVMValueRef v = kb_and(kb, kb_icmp(kb, LLVMIntSGE, pos[a], kb_i64(kb, 0)),
                                kb_icmp(kb, LLVMIntSLT, pos[a], kb_i64(kb, p->in[a])));
        ok = ok ? kb_and(kb, ok, v) : v;
        inpad = inpad ? kb_and(kb, inpad, in_ext) : in_ext;
    }
    kb_set(kb, padded, kb_add(kb, kb_get(kb, kb->i64, padded), LLVMBuildZExt(kb->b, inpad, kb->i64, "")));
    kb_if I;
    kb_if_begin(kb, &I, ok);
    LLVMValueRef at = kb_add(kb, xbase, kb_add(kb, kb_mulc(kb, pos[0], p->in[1] * p->in[2]),
                                               kb_add(kb, kb_mulc(kb, pos[1], p->in[2]), pos[2])));
    LLVMValueRef v = kb_ld(kb, p->x, at);
    LLVMValueRef cnt = kb_get(kb, kb->i64, valid), cur = kb_get(kb, kb->f32, mx);
    /* the first valid tap is taken, later ones if greater or NaN (as the reference: a NaN wins and
     * stays, since nothing compares greater than a NaN) */
    LLVMValueRef take = LLVMBuildOr(kb->b, kb_icmp(kb, LLVMIntEQ, cnt, kb_i64(kb, 0)),
                                    LLVMBuildOr(kb->b, kb_fcmp(kb, LLVMRealOGT, v, cur),
                                                kb_fcmp(kb, LLVMRealUNO, v, v), ""), "");
    kb_set(kb, mx, kb_sel(kb, take, v, cur));
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, kb->f32, sum), v));
    kb_set(kb, valid, kb_addc(kb, cnt, 1));
    kb_if_end(kb, &I);
    for (int a = 2; a >= 0; a--) kb_endfor(kb, &L[a]);
    LLVMValueRef nv = kb_get(kb, kb->i64, valid);
    LLVMValueRef res;
    if (p->is_max) {
        res = kb_get(kb, kb->f32, mx);
    } else {
        LLVMValueRef div = p->cip ? kb_get(kb, kb->i64, padded) : nv;
        res = kb_fdiv(kb, kb_get(kb, kb->f32, sum), LLVMBuildSIToFP(kb->b, div, kb->f32, ""));
    }
    res = kb_sel(kb, kb_icmp(kb, LLVMIntEQ, nv, kb_i64(kb, 0)), kb_f32(kb, 0.0f), res);
    kb_st(kb, p->y, kb->idx, res);
}

typedef struct gap_p {
    gpu_ref x, y;
    int64_t sp;
} gap_p;

static void gen_gap(gpu_kb *kb, const void *vp)
{
    const gap_p *p = vp;
    LLVMValueRef base = kb_mulc(kb, kb->idx, p->sp);
    LLVMValueRef sum = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    kb_loop L;
    LLVMValueRef i = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, p->sp));
    kb_set(kb, sum, kb_fadd(kb, kb_get(kb, kb->f32, sum), kb_ld(kb, p->x, kb_add(kb, base, i))));
    kb_endfor(kb, &L);
    kb_st(kb, p->y, kb->idx, kb_fdiv(kb, kb_get(kb, kb->f32, sum), kb_f32(kb, (float)p->sp)));
}

/* ------------------------------------------------------------------ planner */

#define NEW(T) ((T *)pdc_calloc(p->ctx, 1, sizeof(T)))

static pdc_status add(gpu_plan *p, size_t li, const char *what, gpu_gen_fn gen, void *params, int64_t total)
{
    if (!params) return PDC_ERR_OUT_OF_MEMORY;
    return gpu_plan_kernel1(p, (int)li, what, gen, params, NULL, total) < 0 ? PDC_ERR_OUT_OF_MEMORY : PDC_OK;
}

/* 3-D view of a window layer (leading dims of size 1). */
static void window3(const ir_window_params *w, int64_t *in, int64_t *out, int64_t *k, int64_t *s, int64_t *pb,
                    int64_t *pe, int64_t *d)
{
    int lead = 3 - w->nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        in[i] = i < lead ? 1 : w->in[j];
        out[i] = i < lead ? 1 : w->out[j];
        k[i] = i < lead ? 1 : w->k[j];
        s[i] = i < lead ? 1 : w->stride[j];
        pb[i] = i < lead ? 0 : w->pad_begin[j];
        pe[i] = i < lead ? 0 : w->pad_end[j];
        d[i] = i < lead ? 1 : w->dil[j];
    }
}

pdc_status gpu_plan_simple(gpu_plan *p, const ir_model *m, size_t li)
{
    const ir_layer *l = &m->layers[li];
    const char *op = ir_op_get_info(l->op)->name;
    char *info = p->info[li];
    gpu_ref x = gpu_in(p, l, 0), y = gpu_out(p, l, 0);
    if (y.off < 0) return GPU_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing output");
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    const int64_t ny = (int64_t)ir_tensor_numel(ty);
    pdc_status st;
    switch (l->op) {
    IR_CASE_ACTIVATION: {
        unary_p *u = NEW(unary_p);
        if (!u) return PDC_ERR_OUT_OF_MEMORY;
        u->x = x;
        u->y = y;
        switch (l->op) {
        case IR_OP_RELU: u->a.kind = GPU_ACT_RELU; break;
        case IR_OP_CLIP:
            u->a = (gpu_act){GPU_ACT_CLIP, ir_attr_float(&l->attrs, "min", -INFINITY),
                             ir_attr_float(&l->attrs, "max", INFINITY)};
            break;
        case IR_OP_LEAKY_RELU: u->a = (gpu_act){GPU_ACT_LEAKY, ir_attr_float(&l->attrs, "alpha", 0.01f), 0}; break;
        case IR_OP_SIGMOID: u->a.kind = GPU_ACT_SIGMOID; break;
        case IR_OP_TANH: u->a.kind = GPU_ACT_TANH; break;
        case IR_OP_HARDSWISH: u->a.kind = GPU_ACT_HARDSWISH; break;
        default:
            u->a = (gpu_act){GPU_ACT_HARDSIGMOID, ir_attr_float(&l->attrs, "alpha", 0.2f),
                             ir_attr_float(&l->attrs, "beta", 0.5f)};
            break;
        }
        snprintf(info, sizeof p->info[0], "ptx elementwise %s, thread per element", op);
        return add(p, li, op, gen_unary, u, ny);
    }
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV: {
        binary_p *b = NEW(binary_p);
        if (!b) return PDC_ERR_OUT_OF_MEMORY;
        b->a = x;
        b->b = gpu_in(p, l, 1);
        b->y = y;
        b->op = l->op;
        b->r = ty->rank;
        memcpy(b->dims, ty->dims, sizeof b->dims);
        const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]];
        if (ir_broadcast_strides(ta->rank, ta->dims, b->r, ty->dims, 1, b->sa) ||
            ir_broadcast_strides(tb->rank, tb->dims, b->r, ty->dims, 1, b->sb)) {
            pdc_free(b);
            return GPU_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inputs do not broadcast to the output");
        }
        snprintf(info, sizeof p->info[0], "ptx elementwise %s with broadcasting, thread per element", op);
        return add(p, li, op, gen_binary, b, ny);
    }
    case IR_OP_FLATTEN:
    case IR_OP_RESHAPE: {
        copy_p *c = NEW(copy_p);
        if (!c) return PDC_ERR_OUT_OF_MEMORY;
        c->x = x;
        c->y = y;
        snprintf(info, sizeof p->info[0], "ptx copy (%s), thread per element", op);
        return add(p, li, op, gen_copy, c, ny);
    }
    case IR_OP_TRANSPOSE: {
        const ir_tensor *tx = &m->tensors[l->inputs[0]];
        copy_p *c = NEW(copy_p);
        if (!c) return PDC_ERR_OUT_OF_MEMORY;
        c->x = x;
        c->y = y;
        c->r = tx->rank;
        size_t np = 0;
        const int64_t *perm = ir_attr_ints(&l->attrs, "perm", &np);
        int64_t pm[PDC_MAX_RANK];
        for (int i = 0; i < c->r; i++) {
            c->dims[i] = ty->dims[i];
            pm[i] = perm && np == (size_t)c->r ? perm[i] : c->r - 1 - i;
        }
        ir_transpose_strides(c->r, tx->dims, pm, c->s);
        snprintf(info, sizeof p->info[0], "ptx transpose, thread per output element");
        return add(p, li, op, gen_copy, c, ny);
    }
    case IR_OP_CONCAT: {
        int axis;
        if ((st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", 0), ty->rank, &axis))) return st;
        if (l->n_inputs > 64) return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "more than 64 inputs");
        concat_p *c = NEW(concat_p);
        if (!c) return PDC_ERR_OUT_OF_MEMORY;
        int64_t inner = 1;
        for (int i = axis + 1; i < ty->rank; i++) inner *= ty->dims[i];
        c->y = y;
        c->row = ty->dims[axis] * inner;
        c->n = l->n_inputs;
        for (size_t j = 0; j < l->n_inputs; j++) {
            c->x[j] = gpu_in(p, l, j);
            c->chunk[j] = l->inputs[j] >= 0 ? m->tensors[l->inputs[j]].dims[axis] * inner : 0;
        }
        snprintf(info, sizeof p->info[0], "ptx concat of %zu inputs, thread per output element", l->n_inputs);
        return add(p, li, op, gen_concat, c, ny);
    }
    case IR_OP_SOFTMAX: {
        const ir_tensor *tx = &m->tensors[l->inputs[0]];
        int axis;
        if ((st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", -1), tx->rank, &axis))) return st;
        softmax_p *s = NEW(softmax_p);
        if (!s) return PDC_ERR_OUT_OF_MEMORY;
        s->x = x;
        s->y = y;
        s->len = tx->dims[axis];
        s->inner = 1;
        for (int i = axis + 1; i < tx->rank; i++) s->inner *= tx->dims[i];
        snprintf(info, sizeof p->info[0], "ptx softmax, thread per row of %lld", (long long)s->len);
        return add(p, li, op, gen_softmax, s, s->len ? ny / s->len : 0);
    }
    case IR_OP_BATCHNORM: {
        const ir_tensor *tx = &m->tensors[l->inputs[0]];
        for (size_t i = 1; i < 5; i++)
            if (l->n_inputs <= i || l->inputs[i] < 0 || m->tensors[l->inputs[i]].kind != IR_TENSOR_CONST)
                return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "scale, bias, mean and var must be constants");
        if (tx->rank < 2) return GPU_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input rank %d < 2", tx->rank);
        bn_p *b = NEW(bn_p);
        if (!b) return PDC_ERR_OUT_OF_MEMORY;
        b->x = x;
        b->y = y;
        b->c = tx->dims[1];
        b->sp = 1;
        for (int i = 2; i < tx->rank; i++) b->sp *= tx->dims[i];
        int64_t g = gpu_plan_wts(p, (size_t)b->c), be = g < 0 ? -1 : gpu_plan_wts(p, (size_t)b->c);
        if (be < 0) {
            pdc_free(b);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        for (int64_t c = 0; c < b->c; c++) {
            double gg, shift;
            ir_batchnorm_channel(m, l, c, &gg, &shift);
            p->wts[g + c] = (float)gg;
            p->wts[be + c] = (float)shift;
        }
        b->g = (gpu_ref){1, g};
        b->be = (gpu_ref){1, be};
        snprintf(info, sizeof p->info[0], "ptx batchnorm (folded scale/shift), thread per element");
        return add(p, li, op, gen_batchnorm, b, ny);
    }
    case IR_OP_MAXPOOL:
    case IR_OP_AVGPOOL: {
        ir_window_params w;
        if ((st = ir_window_params_get(m, l, &w))) return st;
        pool_p *q = NEW(pool_p);
        if (!q) return PDC_ERR_OUT_OF_MEMORY;
        q->x = x;
        q->y = y;
        q->is_max = l->op == IR_OP_MAXPOOL;
        q->cip = w.count_include_pad;
        window3(&w, q->in, q->out, q->k, q->s, q->pb, q->pe, q->d);
        snprintf(info, sizeof p->info[0], "ptx %s %lldx%lldx%lld, thread per output element", op,
                 (long long)q->k[0], (long long)q->k[1], (long long)q->k[2]);
        return add(p, li, op, gen_pool, q, ny);
    }
    case IR_OP_GLOBAL_AVGPOOL: {
        const ir_tensor *tx = &m->tensors[l->inputs[0]];
        if (tx->rank < 2) return GPU_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input rank %d < 2", tx->rank);
        gap_p *g = NEW(gap_p);
        if (!g) return PDC_ERR_OUT_OF_MEMORY;
        g->x = x;
        g->y = y;
        g->sp = 1;
        for (int i = 2; i < tx->rank; i++) g->sp *= tx->dims[i];
        snprintf(info, sizeof p->info[0], "ptx global average pool, thread per plane of %lld", (long long)g->sp);
        return add(p, li, op, gen_gap, g, tx->dims[0] * tx->dims[1]);
    }
    default:
        return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "op %s has no gpu kernel", op);
    }
}
