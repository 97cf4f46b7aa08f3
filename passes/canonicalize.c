/*
 * canonicalize.c - the canonicalize pass: rewrites that leave the model's outputs unchanged (up to
 * float rounding) and give later passes and backends fewer, fatter layers. Repeated until nothing
 * changes, each round in this order:
 *  1. identity layers removed: identity/dropout ops (if the op table has them), reshape/flatten to
 *     the same shape, transpose by the identity permutation, clip without bounds, concat of one input;
 *  2. constant folding: a layer whose inputs are all constants is evaluated with the reference
 *     kernels and its outputs become constants;
 *  3. batchnorm folded into the conv/fc before it (w' = w*g, b' = (b - mean)*g + beta with
 *     g = scale/sqrt(var + eps)) when nothing else reads the conv's output;
 *  4. a constant per-channel (or scalar) add after conv/fc/gemm folded into its bias;
 *  5. an activation after conv/fc/gemm fused into it (attribute activation, ir/ops/fused.c);
 *  6. dead layers (no output read, none a graph output) and unused constants removed.
 * Rewrites 3-5 need the intermediate tensor to have exactly one reader and not be a graph output, and
 * leave layers with out_perm (reorder) alone where the channel order matters. Constants a rewrite
 * changes are first copied if another layer shares them. Any memory plan is dropped (run plan last).
 */
#include <math.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/ops/batchnorm.h"
#include "ir/ops/params.h"
#include "passes/passes.h"

typedef pdc_status (*step_fn)(ir_model *m, const pass_options *opt, uint8_t *drop_layer, uint8_t *drop_tensor,
                               int *changed);

static void drop_with_outputs(const ir_model *m, size_t li, uint8_t *dl, uint8_t *dt)
{
    dl[li] = 1;
    for (size_t i = 0; i < m->layers[li].n_outputs; i++)
        if (m->layers[li].outputs[i] >= 0) dt[m->layers[li].outputs[i]] = 1;
}

static int same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank < 0 || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] < 0 || a->dims[i] != b->dims[i]) return 0;
    return 1;
}

/* The layer producing activation x if it is a `want` op writing x as output 0, x has no other reader
 * and is not a graph output, and the layer carries no fused activation yet; else -1. */
static int sole_producer(const ir_model *m, int x, int want_conv_fc, int want_gemm)
{
    const ir_tensor *t = &m->tensors[x];
    if (t->kind != IR_TENSOR_ACT || t->producer < 0 || ir_model_tensor_uses(m, x) != 1) return -1;
    const ir_layer *p = &m->layers[t->producer];
    int ok = (want_conv_fc && (p->op == IR_OP_CONV || p->op == IR_OP_FC)) || (want_gemm && p->op == IR_OP_GEMM);
    if (!ok || p->outputs[0] != x || ir_attrs_find(&p->attrs, "activation")) return -1;
    return t->producer;
}

/* Layer p now writes y (the output of layer li, which goes away with p's old output x). */
static void take_output(ir_model *m, int p, int x, size_t li, uint8_t *dl, uint8_t *dt)
{
    int y = m->layers[li].outputs[0];
    m->layers[p].outputs[0] = y;
    m->tensors[y].producer = p;
    dl[li] = 1;
    dt[x] = 1;
}

/* ------------------------------------------------------------------ 1. identities */

static int is_identity(const ir_model *m, const ir_layer *l)
{
    ir_op op;
    if (ir_op_from_name("identity", &op) && l->op == op) return 1;
    if (ir_op_from_name("dropout", &op) && l->op == op) return l->n_outputs < 2 || l->outputs[1] < 0;
    if (l->n_inputs < 1 || l->inputs[0] < 0) return 0;
    const ir_tensor *x = &m->tensors[l->inputs[0]], *y = &m->tensors[l->outputs[0]];
    switch (l->op) {
    case IR_OP_RESHAPE:
    case IR_OP_FLATTEN: return same_shape(x, y);
    case IR_OP_TRANSPOSE: {
        size_t n;
        const int64_t *perm = ir_attr_ints(&l->attrs, "perm", &n);
        if (!perm) return x->rank <= 1;
        for (size_t i = 0; i < n; i++)
            if (perm[i] != (int64_t)i) return 0;
        return 1;
    }
    case IR_OP_CLIP:
        return ir_attr_float(&l->attrs, "min", -INFINITY) == -INFINITY &&
               ir_attr_float(&l->attrs, "max", INFINITY) == INFINITY;
    case IR_OP_CONCAT: return l->n_inputs == 1;
    default: return 0;
    }
}

static pdc_status remove_identities(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)opt;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (!is_identity(m, l)) continue;
        int x = l->inputs[0], y = l->outputs[0];
        if (!ir_model_is_output(m, y)) {
            ir_model_replace_uses(m, y, x);
            drop_with_outputs(m, li, dl, dt);
        } else if (m->tensors[x].kind == IR_TENSOR_ACT && ir_model_tensor_uses(m, x) == 1) {
            /* y is a graph output: x's producer writes y directly */
            int p = m->tensors[x].producer;
            ir_layer *pl = &m->layers[p];
            for (size_t i = 0; i < pl->n_outputs; i++)
                if (pl->outputs[i] == x) pl->outputs[i] = y;
            m->tensors[y].producer = p;
            dl[li] = 1;
            dt[x] = 1;
        } else {
            continue;
        }
        *changed = 1;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ 2. constant folding */

static pdc_status fold_constants(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)dt;
    if (!opt->eval_layer) return PDC_OK;
    float **buf = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, sizeof *buf);
    if (!buf) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = PDC_OK;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        int foldable = 0;
        for (size_t i = 0; i < l->n_inputs; i++) {
            if (l->inputs[i] < 0) continue;
            foldable = m->tensors[l->inputs[i]].kind == IR_TENSOR_CONST;
            if (!foldable) break;
        }
        for (size_t i = 0; i < l->n_outputs && foldable; i++)
            if (l->outputs[i] >= 0 && ir_model_is_output(m, l->outputs[i])) foldable = 0;
        if (!foldable) continue;
        for (size_t i = 0; i < l->n_inputs; i++)
            if (l->inputs[i] >= 0) buf[l->inputs[i]] = m->tensors[l->inputs[i]].data;
        for (size_t i = 0; i < l->n_outputs && !st; i++) {
            int t = l->outputs[i];
            size_t n;
            if (t < 0) continue;
            if (!ir_numel(m->tensors[t].rank, m->tensors[t].dims, &n)) foldable = 0;
            else if (!(buf[t] = pdc_calloc(m->ctx, n ? n : 1, sizeof(float)))) st = PDC_ERR_OUT_OF_MEMORY;
        }
        if (!st && foldable) {
            st = opt->eval_layer(m, l, buf);
            if (st == PDC_ERR_UNSUPPORTED) {
                st = PDC_OK; /* no reference kernel: leave the layer */
                foldable = 0;
            }
        }
        for (size_t i = 0; i < l->n_outputs; i++) {
            int t = l->outputs[i];
            if (t < 0 || !buf[t]) continue;
            if (!st && foldable) {
                ir_tensor *out = &m->tensors[t];
                out->kind = IR_TENSOR_CONST;
                out->data = buf[t];
                out->producer = -1;
            } else {
                pdc_free(buf[t]);
            }
            buf[t] = NULL;
        }
        if (!st && foldable) {
            dl[li] = 1;
            *changed = 1;
        }
    }
    pdc_free(buf);
    return st;
}

/* ------------------------------------------------------------------ 3. batchnorm */

static pdc_status fold_batchnorm(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)opt;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *bn = &m->layers[li];
        if (bn->op != IR_OP_BATCHNORM) continue;
        int x = bn->inputs[0];
        int p = sole_producer(m, x, 1, 0);
        const ir_tensor *prm[4];
        int consts = p >= 0;
        for (int i = 0; i < 4 && consts; i++) consts = (prm[i] = pass_const_input(m, bn, (size_t)i + 1)) != NULL;
        if (!consts || ir_attrs_find(&m->layers[p].attrs, "out_perm") || !pass_const_input(m, &m->layers[p], 1)) continue;
        const ir_layer *pl = &m->layers[p];
        if (pl->n_inputs > 2 && pl->inputs[2] >= 0 && !pass_const_input(m, pl, 2)) continue;
        int64_t o = pass_const_input(m, pl, 1)->dims[0]; /* output channels */
        if (prm[0]->rank != 1 || prm[0]->dims[0] != o || !ir_batchnorm_foldable(m, bn)) continue;
        double *g = pdc_alloc(m->ctx, (size_t)o * sizeof *g), *shift = pdc_alloc(m->ctx, (size_t)o * sizeof *shift);
        pdc_status st = g && shift ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
        for (int64_t c = 0; c < o && !st; c++) ir_batchnorm_channel(m, bn, c, &g[c], &shift[c]);
        int wt, bt = -1;
        if (!st) st = pass_private_constant(m, (size_t)p, 1, &wt);
        if (!st && m->layers[p].n_inputs > 2 && m->layers[p].inputs[2] >= 0)
            st = pass_private_constant(m, (size_t)p, 2, &bt);
        if (!st && bt < 0) {
            float *zero = pdc_calloc(m->ctx, (size_t)o, sizeof *zero);
            st = zero ? pass_add_constant(m, m->layers[p].name, ".bias", 1, &o, zero, &bt) : PDC_ERR_OUT_OF_MEMORY;
            if (!st) st = ir_layer_set_input(m, (size_t)p, 2, bt);
        }
        if (!st) {
            ir_tensor *w = &m->tensors[wt], *b = &m->tensors[bt];
            size_t per = ir_tensor_numel(w) / (size_t)o;
            for (int64_t c = 0; c < o; c++) {
                for (size_t k = 0; k < per; k++) w->data[(size_t)c * per + k] = (float)((double)w->data[(size_t)c * per + k] * g[c]);
                b->data[c] = (float)((double)b->data[c] * g[c] + shift[c]);
            }
            ir_sparsity_free(&b->sparsity);
            take_output(m, p, x, li, dl, dt);
            *changed = 1;
        }
        pdc_free(g);
        pdc_free(shift);
        if (st) return st;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ 4. bias add */

/* Values per output channel (o of them) of constant c added to x [N, O, ...], if c is a scalar or
 * varies along axis 1 only; 0 otherwise. */
static int channel_values(const ir_tensor *x, const ir_tensor *c, int64_t o, float *vals)
{
    size_t n = ir_tensor_numel(c);
    if (n == 1) {
        for (int64_t j = 0; j < o; j++) vals[j] = c->data[0];
        return 1;
    }
    int ax = 1 - (x->rank - c->rank); /* c's axis aligned with x's axis 1 */
    if (c->rank > x->rank || ax < 0) return 0;
    for (int i = 0; i < c->rank; i++)
        if (i == ax ? c->dims[i] != o : c->dims[i] != 1) return 0;
    memcpy(vals, c->data, (size_t)o * sizeof *vals);
    return 1;
}

static pdc_status fold_bias(ir_model *m, size_t p, const float *vals, int64_t o, int *done)
{
    const ir_layer *pl = &m->layers[p];
    int bt = -1;
    pdc_status st;
    *done = 0;
    const ir_tensor *b0 = pl->n_inputs > 2 && pl->inputs[2] >= 0 ? &m->tensors[pl->inputs[2]] : NULL;
    if (b0 && b0->kind != IR_TENSOR_CONST) return PDC_OK;
    if (pl->op == IR_OP_GEMM) {
        /* c' = beta*c + vals, broadcast along the rows; needs c's last dim to be N (or no c) */
        if (b0 && (b0->rank < 1 || b0->dims[b0->rank - 1] != o)) return PDC_OK;
    }
    if (b0) {
        if ((st = pass_private_constant(m, p, 2, &bt))) return st;
        ir_tensor *b = &m->tensors[bt];
        float beta = pl->op == IR_OP_GEMM ? ir_attr_float(&m->layers[p].attrs, "beta", 1.0f) : 1.0f;
        size_t n = ir_tensor_numel(b);
        for (size_t i = 0; i < n; i++) b->data[i] = beta * b->data[i] + vals[i % (size_t)o];
        ir_sparsity_free(&b->sparsity);
    } else {
        float *copy = pdc_alloc(m->ctx, (size_t)o * sizeof *copy);
        if (!copy) return PDC_ERR_OUT_OF_MEMORY;
        memcpy(copy, vals, (size_t)o * sizeof *copy);
        if ((st = pass_add_constant(m, m->layers[p].name, ".bias", 1, &o, copy, &bt))) return st;
        if ((st = ir_layer_set_input(m, p, 2, bt))) return st;
    }
    if (m->layers[p].op == IR_OP_GEMM && (st = ir_attrs_set_float(m->ctx, &m->layers[p].attrs, "beta", 1.0f))) return st;
    *done = 1;
    return PDC_OK;
}

static pdc_status fuse_bias_add(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)opt;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (l->op != IR_OP_ADD) continue;
        for (int side = 0; side < 2; side++) {
            int x = l->inputs[side];
            const ir_tensor *c = pass_const_input(m, l, (size_t)(1 - side));
            int p = c ? sole_producer(m, x, 1, 1) : -1;
            if (p < 0 || ir_attrs_find(&m->layers[p].attrs, "out_perm")) continue;
            const ir_tensor *xt = &m->tensors[x];
            if (xt->rank < 2 || !same_shape(xt, &m->tensors[l->outputs[0]])) continue;
            int64_t o = xt->dims[1];
            float *vals = pdc_alloc(m->ctx, (size_t)o * sizeof *vals);
            if (!vals) return PDC_ERR_OUT_OF_MEMORY;
            int done = 0;
            pdc_status st = channel_values(xt, c, o, vals) ? fold_bias(m, (size_t)p, vals, o, &done) : PDC_OK;
            pdc_free(vals);
            if (st) return st;
            if (done) {
                take_output(m, p, x, li, dl, dt);
                *changed = 1;
                break;
            }
        }
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ 5. activation */

static pdc_status fuse_activation(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)opt;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        ir_act_kind act;
        if (!ir_act_from_op(l->op, &act)) continue;
        int x = l->inputs[0];
        int p = sole_producer(m, x, 1, 1);
        if (p < 0) continue;
        ir_attrs *pa = &m->layers[p].attrs;
        pdc_status st = ir_attrs_set_string(m->ctx, pa, "activation", ir_act_name(act));
        if (!st && act == IR_ACT_CLIP && ir_attrs_find(&l->attrs, "min"))
            st = ir_attrs_set_float(m->ctx, pa, "act_min", ir_attr_float(&l->attrs, "min", -INFINITY));
        if (!st && act == IR_ACT_CLIP && ir_attrs_find(&l->attrs, "max"))
            st = ir_attrs_set_float(m->ctx, pa, "act_max", ir_attr_float(&l->attrs, "max", INFINITY));
        if (!st && act == IR_ACT_LEAKY_RELU && ir_attrs_find(&l->attrs, "alpha"))
            st = ir_attrs_set_float(m->ctx, pa, "act_alpha", ir_attr_float(&l->attrs, "alpha", 0.01f));
        if (st) return st;
        take_output(m, p, x, li, dl, dt);
        *changed = 1;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ 6. dead code */

static pdc_status remove_dead(ir_model *m, const pass_options *opt, uint8_t *dl, uint8_t *dt, int *changed)
{
    (void)opt;
    uint8_t *used = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1);
    if (!used) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->n_outputs; i++) used[m->outputs[i]] = 1;
    for (size_t li = m->n_layers; li-- > 0;) {
        const ir_layer *l = &m->layers[li];
        int live = 0;
        for (size_t i = 0; i < l->n_outputs; i++) live |= l->outputs[i] >= 0 && used[l->outputs[i]];
        if (!live) {
            drop_with_outputs(m, li, dl, dt);
            *changed = 1;
            continue;
        }
        for (size_t i = 0; i < l->n_inputs; i++)
            if (l->inputs[i] >= 0) used[l->inputs[i]] = 1;
    }
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (m->tensors[t].kind == IR_TENSOR_CONST && !used[t]) {
            dt[t] = 1;
            *changed = 1;
        }
    }
    pdc_free(used);
    return PDC_OK;
}

/* ------------------------------------------------------------------ driver */

/* Runs one rewrite over the model, then removes what it marked. */
static pdc_status run_step(ir_model *m, const pass_options *opt, step_fn fn, int *changed)
{
    size_t nl = m->n_layers, nt = m->n_tensors;
    uint8_t *dl = pdc_calloc(m->ctx, nl ? nl : 1, 1), *dt = pdc_calloc(m->ctx, nt ? nt : 1, 1);
    pdc_status st = dl && dt ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    int step_changed = 0;
    if (!st) st = fn(m, opt, dl, dt, &step_changed);
    if (!st && step_changed && m->n_tensors > nt) {
        /* the step added constants: they are kept */
        uint8_t *grown = pdc_calloc(m->ctx, m->n_tensors, 1);
        if (!grown) st = PDC_ERR_OUT_OF_MEMORY;
        else memcpy(grown, dt, nt);
        pdc_free(dt);
        dt = grown;
    }
    if (!st && step_changed) st = ir_model_compact(m, dl, dt);
    pdc_free(dl);
    pdc_free(dt);
    *changed |= step_changed;
    return st;
}

pdc_status pass_canonicalize(ir_model *m, const pass_options *opt)
{
    static const step_fn steps[] = {remove_identities, fold_constants, fold_batchnorm, fuse_bias_add,
                                    fuse_activation, remove_dead};
    ir_arena_drop(m);
    int changed = 1;
    pdc_status st = PDC_OK;
    while (changed && !st) {
        changed = 0;
        for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !st; i++) st = run_step(m, opt, steps[i], &changed);
    }
    return st ? st : ir_model_infer_shapes(m);
}
