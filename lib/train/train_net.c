/*
 * train_net.c - the network a trainer runs (see train.h): which constants are parameters, their masks
 * (from the IR's sparsity descriptions) and sparse index arrays, the execution model whose batch dim
 * follows the batch, activation and gradient buffers, and the forward pass, loss and backward pass.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "lib/api_internal.h"
#include "lib/train/train.h"

void tr_csr_free(tr_csr *c)
{
    pdc_free(c->ptr);
    pdc_free(c->idx);
    pdc_free(c->vidx);
    pdc_free(c->src);
    pdc_free(c->val);
    memset(c, 0, sizeof *c);
}

static void param_free(tr_param *p)
{
    pdc_free(p->grad);
    pdc_free(p->m);
    pdc_free(p->v);
    pdc_free(p->mask);
    pdc_free(p->admm_z);
    pdc_free(p->admm_u);
    tr_csr_free(&p->fwd);
    tr_csr_free(&p->tr);
}

void tr_net_destroy(tr_net *net)
{
    if (!net) return;
    cpu_eltwise_free(net->cpu);
    for (size_t i = 0; i < net->n_params; i++) param_free(&net->params[i]);
    pdc_free(net->params);
    if (net->layers && net->model) {
        for (size_t li = 0; li < net->model->n_layers; li++) {
            pdc_free(net->layers[li].col);
            pdc_free(net->layers[li].pre);
            pdc_free(net->layers[li].aux);
            pdc_free(net->layers[li].argmax);
        }
    }
    pdc_free(net->layers);
    if (net->val && net->model) {
        for (size_t t = 0; t < net->model->n_tensors; t++) {
            if (net->model->tensors[t].kind == IR_TENSOR_ACT) pdc_free(net->val[t]);
            if (net->grad && net->param_of && net->param_of[t] < 0) pdc_free(net->grad[t]);
        }
    }
    pdc_free(net->val);
    pdc_free(net->grad);
    pdc_free(net->cap);
    pdc_free(net->gcap);
    pdc_free(net->param_of);
    pdc_free(net->needs_grad);
    pdc_free(net->touched);
    pdc_free(net->work);
    pdc_free(net->bn_tmp);
    pdc_free(net->shared_col);
    ir_model_destroy(net->exec);
    ir_model_destroy(net->model);
    pdc_free(net);
}

pdc_status tr_net_work(tr_net *net, size_t n)
{
    if (n <= net->work_cap) return PDC_OK;
    float *w = pdc_alloc_aligned(net->ctx, n, sizeof *w);
    if (!w) return PDC_ERR_OUT_OF_MEMORY;
    pdc_free(net->work);
    net->work = w;
    net->work_cap = n;
    return PDC_OK;
}

/* ------------------------------------------------------------------ building */

int tr_net_find_param(const tr_net *net, const char *name)
{
    int t = ir_model_find_tensor(net->model, name);
    if (t < 0) {
        int li = ir_model_find_layer(net->model, name);
        if (li < 0) return -1;
        const ir_layer *l = &net->model->layers[li];
        if (l->n_inputs < 2 || l->inputs[1] < 0) return -1;
        t = l->inputs[1];
    }
    return net->param_of[t];
}

/* Which layers read tensor t's values in a way that makes it a statistic (batchnorm mean/var). */
static int is_bn_statistic(const ir_model *m, int t)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (l->op != IR_OP_BATCHNORM) continue;
        for (size_t i = 3; i < l->n_inputs && i < 5; i++)
            if (l->inputs[i] == t) return 1;
    }
    return 0;
}

static pdc_status build_mask(tr_net *net, tr_param *p)
{
    const ir_tensor *t = &net->model->tensors[p->tensor];
    pdc_free(p->mask);
    p->mask = NULL;
    p->kept = p->n;
    if (t->sparsity.kind == IR_SPARSITY_NONE) return PDC_OK;
    p->mask = pdc_alloc(net->ctx, p->n ? p->n : 1);
    if (!p->mask) return PDC_ERR_OUT_OF_MEMORY;
    size_t kept = 0;
    for (size_t i = 0; i < p->n; i++) kept += (p->mask[i] = (uint8_t)ir_sparsity_keeps(t, i)) != 0;
    p->kept = kept;
    return PDC_OK;
}

/* The weight of a conv/fc layer as a matrix [rows = O, cols = K]; col_of maps a kept column to the row of
 * the layer's [K, P] operand (groups: offset g*K for rows of group g). */
static pdc_status build_csr(tr_net *net, tr_param *p, const ir_layer *l)
{
    const ir_tensor *w = &net->model->tensors[p->tensor];
    int64_t vrows, vcols; /* conv [O, C/g*k...], fc [O, K], lstm/gru [D*G*H, I or H] */
    ir_weight_matrix_view(w, &vrows, &vcols);
    const size_t rows = (size_t)vrows, cols = p->n / rows;
    size_t og = rows, group = 1;
    if (l->op == IR_OP_CONV) {
        group = (size_t)ir_attr_int(&l->attrs, "group", 1);
        og = rows / group;
    }
    tr_csr_free(&p->fwd);
    tr_csr_free(&p->tr);
    const pdc_context *ctx = net->ctx;
    const size_t nnz = p->kept, trows = group * cols;
    if (nnz > INT32_MAX || p->n > INT32_MAX) return pdc_error(ctx, PDC_ERR_OVERFLOW, "weight '%s' is too large for the sparse kernels", w->name);
    tr_csr *f = &p->fwd, *r = &p->tr;
    f->ptr = pdc_calloc(ctx, rows + 1, sizeof *f->ptr);
    f->idx = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *f->idx);
    f->vidx = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *f->vidx);
    r->ptr = pdc_calloc(ctx, trows + 1, sizeof *r->ptr);
    r->idx = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *r->idx);
    r->src = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *r->src);
    f->val = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *f->val);
    r->val = pdc_alloc(ctx, (nnz ? nnz : 1) * sizeof *r->val);
    if (!f->ptr || !f->idx || !f->vidx || !r->ptr || !r->idx || !r->src || !f->val || !r->val) {
        tr_csr_free(f);
        tr_csr_free(r);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    f->rows = rows, f->cols = trows, f->nnz = nnz;
    r->rows = trows, r->cols = rows, r->nnz = nnz;
    size_t e = 0;
    for (size_t o = 0; o < rows; o++) {
        const size_t g = o / og;
        f->ptr[o] = (int32_t)e;
        for (size_t k = 0; k < cols; k++) {
            if (!p->mask[o * cols + k]) continue;
            f->idx[e] = (int32_t)(g * cols + k);
            f->vidx[e] = (int32_t)(o * cols + k);
            r->ptr[g * cols + k + 1]++;
            e++;
        }
    }
    f->ptr[rows] = (int32_t)e;
    for (size_t i = 0; i < trows; i++) r->ptr[i + 1] += r->ptr[i];
    /* transpose: walk rows o in order so every column's entries are in increasing o */
    int32_t *fill = pdc_alloc(ctx, (trows ? trows : 1) * sizeof *fill);
    if (!fill) {
        tr_csr_free(f);
        tr_csr_free(r);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    memcpy(fill, r->ptr, trows * sizeof *fill);
    for (size_t o = 0; o < rows; o++) {
        for (int32_t q = f->ptr[o]; q < f->ptr[o + 1]; q++) {
            int32_t at = fill[f->idx[q]]++;
            r->idx[at] = (int32_t)o;
            r->src[at] = q;
        }
    }
    pdc_free(fill);
    return PDC_OK;
}

void tr_csr_pack(const tr_net *net, tr_param *p, const float *w)
{
    const tr_csr *f = &p->fwd, *r = &p->tr;
    float *fv = f->val, *tv = r->val;
    const size_t nnz = f->nnz;
    /* fwd's copy reads w in its own order (vidx ascends); tr's gathers from that copy, 1/kept of w's size (scattering
     * into tr's copy from the first loop took twice as long: a cache miss per write) */
    const int nt = nnz < ((size_t)1 << 18) ? 1 : net->threads;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (size_t e = 0; e < nnz; e++) fv[e] = w[f->vidx[e]];
#pragma omp for schedule(static)
        for (size_t e = 0; e < nnz; e++) tv[e] = fv[r->src[e]];
    }
}

pdc_status tr_net_update_sparse(tr_net *net, const tr_options *opt)
{
    for (size_t i = 0; i < net->n_params; i++) {
        net->params[i].sparse = 0;
        tr_csr_free(&net->params[i].fwd);
        tr_csr_free(&net->params[i].tr);
    }
    for (size_t li = 0; li < net->model->n_layers; li++) {
        const ir_layer *l = &net->model->layers[li];
        const int rnn = l->op == IR_OP_LSTM || l->op == IR_OP_GRU;
        if (l->op != IR_OP_CONV && l->op != IR_OP_FC && !rnn) continue;
        /* conv/fc: the weight; lstm: w and r, gru: w (train_rnn.c's products of all steps at once) */
        for (size_t s = 1; s <= (l->op == IR_OP_LSTM ? 2u : 1u); s++) {
            const int pi = rnn ? (s < l->n_inputs && l->inputs[s] >= 0 ? net->param_of[l->inputs[s]] : -1)
                               : net->layers[li].w_param;
            if (pi < 0) continue;
            tr_param *p = &net->params[pi];
            if (!p->mask || p->sparse || opt->sparse == TR_SPARSE_OFF) continue;
            /* lstm/gru only when asked: their sparse products measured no faster than the dense ones (a BCR
             * LSTM 512, batch 8: within the shared host's noise, docs/training.md) */
            if (rnn && opt->sparse != TR_SPARSE_ON) continue;
            if (opt->sparse == TR_SPARSE_AUTO && (double)p->kept > opt->sparse_threshold * (double)p->n) continue;
            /* A small fc costs less dense (dot products straight from x) than sparse (x and y transposed around
             * the sparse product): auto keeps fc weights below TR_SPARSE_FC_MIN_WEIGHTS dense. */
            if (opt->sparse == TR_SPARSE_AUTO && l->op == IR_OP_FC && p->n < TR_SPARSE_FC_MIN_WEIGHTS) continue;
            pdc_status st = build_csr(net, p, l);
            if (st) return st;
            p->sparse = 1;
            /* the sparse weight gradient writes kept weights only: the pruned ones' must be zero (the dense
             * products may have written them) */
            if (p->grad) memset(p->grad, 0, p->n * sizeof *p->grad);
        }
    }
    return PDC_OK;
}

/* Sequences [T, N, F] (ONNX's layout for lstm/gru) have their batch in dim 1. */
static int batch_axis_of(const ir_model *m, int input)
{
    if (m->tensors[input].rank != 3) return 0;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if ((l->op == IR_OP_LSTM || l->op == IR_OP_GRU) && l->n_inputs > 0 && l->inputs[0] == input) return 1;
    }
    return 0;
}

/* The batch to build for: option batch, or the one learned initial states (constant h0/c0 [D, N, H] of an
 * lstm/gru) fix - a model with them trains and evaluates at that batch only. */
static size_t first_batch(const tr_net *net, const tr_options *opt)
{
    const ir_model *m = net->model;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (l->op != IR_OP_LSTM && l->op != IR_OP_GRU) continue;
        for (size_t i = 5; i < l->n_inputs; i++) {
            const ir_tensor *s = l->inputs[i] >= 0 ? &m->tensors[l->inputs[i]] : NULL;
            if (s && s->kind == IR_TENSOR_CONST && s->rank == 3 && s->dims[1] >= 1) return (size_t)s->dims[1];
        }
    }
    return opt->batch;
}

static pdc_status check_input(const tr_net *net)
{
    const ir_tensor *in = &net->model->tensors[net->input];
    if (in->rank < 1)
        return pdc_error(net->ctx, PDC_ERR_SHAPE, "trainer: input '%s' has rank %d (needs a batch dim)", in->name, in->rank);
    for (int d = 0; d < in->rank; d++) {
        if (d != net->batch_axis && in->dims[d] < 1) {
            char s[128];
            ir_format_shape(in->rank, in->dims, s, sizeof s);
            return pdc_error(net->ctx, PDC_ERR_SHAPE,
                             "trainer: input '%s' has shape %s: only the batch dim (%d) may be symbolic; fix the others with "
                             "pdc_model_set_input_shape",
                             in->name, s, net->batch_axis);
        }
    }
    return PDC_OK;
}

/* Checks every layer once shapes are concrete: op has a backward pass, and its variant is supported. */
static pdc_status check_layers(const tr_net *net)
{
    const ir_model *m = net->exec;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        const char *op = ir_op_get_info(l->op)->name;
        if (!tr_op_supported(l->op))
            return pdc_error(net->ctx, PDC_ERR_UNSUPPORTED, "trainer: layer '%s': op %s has no backward pass yet", l->name, op);
        ir_fused_params fp;
        pdc_status st = ir_fused_params_get(m, l, &fp);
        if (st) return st;
        if (fp.n_perm)
            return pdc_error(net->ctx, PDC_ERR_UNSUPPORTED,
                             "trainer: layer '%s' has reordered filters (out_perm, the reorder pass): train before reordering",
                             l->name);
        for (size_t o = 1; o < l->n_outputs && l->op != IR_OP_LSTM && l->op != IR_OP_GRU; o++)
            if (l->outputs[o] >= 0)
                return pdc_error(net->ctx, PDC_ERR_UNSUPPORTED, "trainer: layer '%s': more than one output", l->name);
    }
    return PDC_OK;
}

/* needs_grad of each layer output: whether any input of its layer needs one (layers in order, so it
 * propagates from the tensors already marked). */
static void propagate_needs_grad(tr_net *net)
{
    const ir_model *model = net->model;
    for (size_t li = 0; li < model->n_layers; li++) {
        const ir_layer *l = &model->layers[li];
        uint8_t any = 0;
        for (size_t i = 0; i < l->n_inputs; i++) any |= l->inputs[i] >= 0 && net->needs_grad[l->inputs[i]];
        for (size_t o = 0; o < l->n_outputs; o++)
            if (l->outputs[o] >= 0) net->needs_grad[l->outputs[o]] = any;
    }
}

pdc_status tr_net_create(pdc_context *ctx, ir_model *model, const tr_options *opt, tr_net **out)
{
    tr_net *net = pdc_calloc(ctx, 1, sizeof *net);
    if (!net) {
        ir_model_destroy(model);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    net->ctx = ctx;
    net->model = model;
    net->isa = tk_isa_best();
    net->shared_col_layer = -1;
    net->threads = 1; /* the trainer sets it from its options before every step */
    pdc_status st = PDC_OK;
    if (model->n_inputs != 1 || model->n_outputs < 1) {
        st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: model '%s' has %zu inputs and %zu outputs (needs 1 input and at least 1 output)",
                       model->name, model->n_inputs, model->n_outputs);
        goto fail;
    }
    net->input = model->inputs[0];
    net->output = model->outputs[0];
    net->batch_axis = batch_axis_of(model, net->input);
    if ((st = check_input(net))) goto fail;

    const size_t nt = model->n_tensors ? model->n_tensors : 1, nl = model->n_layers ? model->n_layers : 1;
    net->param_of = pdc_alloc(ctx, nt * sizeof *net->param_of);
    for (size_t t = 0; net->param_of && t < nt; t++) net->param_of[t] = -1; /* read by tr_net_destroy */
    net->needs_grad = pdc_calloc(ctx, nt, 1);
    net->touched = pdc_calloc(ctx, nt, sizeof *net->touched);
    net->val = pdc_calloc(ctx, nt, sizeof *net->val);
    net->grad = pdc_calloc(ctx, nt, sizeof *net->grad);
    net->cap = pdc_calloc(ctx, nt, sizeof *net->cap);
    net->gcap = pdc_calloc(ctx, nt, sizeof *net->gcap);
    net->layers = pdc_calloc(ctx, nl, sizeof *net->layers);
    net->params = pdc_calloc(ctx, nt, sizeof *net->params);
    if (!net->param_of || !net->needs_grad || !net->touched || !net->val || !net->grad || !net->cap || !net->gcap ||
        !net->layers || !net->params) {
        st = PDC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (size_t t = 0; t < model->n_tensors; t++) net->param_of[t] = -1;

    /* parameters: every constant some layer reads, in tensor order */
    for (size_t t = 0; t < model->n_tensors; t++) {
        const ir_tensor *tt = &model->tensors[t];
        if (tt->kind != IR_TENSOR_CONST) continue;
        int used = 0;
        for (size_t li = 0; li < model->n_layers && !used; li++)
            for (size_t i = 0; i < model->layers[li].n_inputs; i++) used |= model->layers[li].inputs[i] == (int)t;
        if (!used) continue;
        tr_param *p = &net->params[net->n_params];
        p->tensor = (int)t;
        p->n = ir_tensor_numel(tt);
        p->trainable = !is_bn_statistic(model, (int)t);
        net->param_of[t] = (int)net->n_params++;
        if (p->trainable) {
            p->grad = pdc_alloc_aligned(ctx, p->n, sizeof(float));
            p->m = pdc_alloc_aligned(ctx, p->n, sizeof(float));
            p->v = pdc_alloc_aligned(ctx, p->n, sizeof(float));
            if (!p->grad || !p->m || !p->v) {
                st = PDC_ERR_OUT_OF_MEMORY;
                goto fail;
            }
        }
        if ((st = build_mask(net, p))) goto fail;
        net->val[t] = tt->data;
    }

    /* layers: weight and bias parameters of conv and fc; the final softmax the cross-entropy folds in */
    net->head_softmax = -1;
    for (size_t li = 0; li < model->n_layers; li++) {
        const ir_layer *l = &model->layers[li];
        tr_layer *lr = &net->layers[li];
        lr->w_param = lr->b_param = -1;
        if (l->op == IR_OP_CONV || l->op == IR_OP_FC) {
            if (l->n_inputs > 1 && l->inputs[1] >= 0) lr->w_param = net->param_of[l->inputs[1]];
            if (l->n_inputs > 2 && l->inputs[2] >= 0) lr->b_param = net->param_of[l->inputs[2]];
        }
        if (l->op == IR_OP_SOFTMAX && l->outputs[0] == net->output) net->head_softmax = (int)li;
    }

    /* which tensors need a gradient: trained constants and everything computed from them */
    for (size_t t = 0; t < model->n_tensors; t++)
        net->needs_grad[t] = net->param_of[t] >= 0 && net->params[net->param_of[t]].trainable;
    propagate_needs_grad(net);

    /* the execution copy: no constant data (the kernels read net->val), no memory plan (shapes change) */
    if ((st = ir_model_clone(model, &net->exec))) goto fail;
    for (size_t t = 0; t < net->exec->n_tensors; t++) {
        ir_tensor *tt = &net->exec->tensors[t];
        if (tt->kind == IR_TENSOR_CONST) {
            pdc_free(tt->data);
            tt->data = NULL;
        }
    }
    for (size_t li = 0; li < net->exec->n_layers; li++) {
        ir_attrs *a = &net->exec->layers[li].attrs;
        for (size_t i = 0; i < a->n; i++) {
            if (strcmp(a->items[i].name, "arena_offsets")) continue;
            pdc_free(a->items[i].name);
            pdc_free(a->items[i].ints);
            pdc_free(a->items[i].s);
            memmove(&a->items[i], &a->items[i + 1], (a->n - i - 1) * sizeof *a->items);
            a->n--;
            break;
        }
    }
    if ((st = tr_net_prepare(net, first_batch(net, opt)))) goto fail;
    if ((st = check_layers(net))) goto fail;
    if ((st = tr_net_update_sparse(net, opt))) goto fail;
    *out = net;
    return PDC_OK;
fail:
    tr_net_destroy(net);
    return st;
}

pdc_status tr_net_enable_input_grad(tr_net *net)
{
    net->input_grad = 1;
    net->needs_grad[net->input] = 1;
    propagate_needs_grad(net);
    net->exec_n = 0; /* re-prepare: buffers for the new gradients */
    return PDC_OK;
}

/* ------------------------------------------------------------------ shapes and buffers */

static pdc_status ensure(const pdc_context *ctx, float **buf, size_t *cap, size_t need)
{
    if (need <= *cap && *buf) return PDC_OK;
    float *b = pdc_alloc_aligned(ctx, need ? need : 1, sizeof *b);
    if (!b) return PDC_ERR_OUT_OF_MEMORY;
    pdc_free(*buf);
    *buf = b;
    *cap = need;
    return PDC_OK;
}

pdc_status tr_net_prepare(tr_net *net, size_t n)
{
    ir_model *m = net->exec;
    ir_tensor *in = &m->tensors[net->input];
    const int ax = net->batch_axis;
    if ((size_t)in->dims[ax] != n || net->exec_n != n) {
        const int64_t saved = in->dims[ax];
        in->dims[ax] = (int64_t)n;
        pdc_status st = ir_model_infer_shapes(m);
        if (st) {
            pdc_error_prefix(net->ctx, "trainer: with a batch of %zu", n);
            in->dims[ax] = saved;
            if (net->exec_n) ir_model_infer_shapes(m);
            return st;
        }
        net->exec_n = n;
    }
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (tt->kind == IR_TENSOR_CONST) continue;
        size_t ne;
        if (!ir_numel(tt->rank, tt->dims, &ne))
            return pdc_error(net->ctx, PDC_ERR_OVERFLOW, "trainer: tensor '%s' is too large", tt->name);
        pdc_status st;
        if (tt->kind == IR_TENSOR_ACT && (st = ensure(net->ctx, &net->val[t], &net->cap[t], ne))) return st;
        if ((net->needs_grad[t] || ((int)t == net->input && net->input_grad)) &&
            (st = ensure(net->ctx, &net->grad[t], &net->gcap[t], ne)))
            return st;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ forward, loss, backward */

int tr_net_skips(const tr_net *net, const tr_options *opt, size_t li)
{
    return opt->loss == TR_LOSS_CROSS_ENTROPY && (int)li == net->head_softmax;
}

int tr_net_loss_tensor(const tr_net *net, const tr_options *opt)
{
    if (opt->loss == TR_LOSS_CROSS_ENTROPY && net->head_softmax >= 0)
        return net->model->layers[net->head_softmax].inputs[0];
    return net->output;
}

pdc_status tr_net_forward(tr_net *net, const float *x, const tr_options *opt, int training)
{
    net->val[net->input] = (float *)(uintptr_t)x; /* never written */
    if (opt->kernels == TR_KERNELS_CPU && (!net->cpu || net->cpu_planned_n != net->exec_n)) {
        /* planned once per batch size: the shapes change with it */
        cpu_eltwise_free(net->cpu);
        net->cpu = NULL;
        pdc_status st = cpu_eltwise_plan(net->ctx, net->exec, net->threads, &net->cpu);
        if (st) {
            pdc_error_prefix(net->ctx, "trainer: cpu kernels");
            return st;
        }
        net->cpu_planned_n = net->exec_n;
    }
    for (size_t li = 0; li < net->exec->n_layers; li++) {
        if (tr_net_skips(net, opt, li)) continue;
        net->layers[li].col_valid = 0;
        net->layers[li].argmax_valid = 0;
        pdc_status st = tr_op_forward(net, li, opt, training);
        if (st) return st;
    }
    return PDC_OK;
}

float *tr_grad_acc(tr_net *net, int t)
{
    if (t < 0) return NULL;
    float *g;
    size_t n;
    const int pi = net->param_of[t];
    if (pi >= 0) {
        const tr_param *p = &net->params[pi];
        if (!p->trainable) return NULL;
        g = p->grad;
        n = p->n;
    } else {
        if (!net->grad[t]) return NULL;
        g = net->grad[t];
        n = ir_tensor_numel(&net->exec->tensors[t]);
    }
    if (net->touched[t] != net->epoch) {
        memset(g, 0, n * sizeof *g);
        net->touched[t] = net->epoch;
    }
    return g;
}

float *tr_grad_out(tr_net *net, int t, int *accumulate)
{
    if (t < 0) return NULL;
    float *g;
    const int pi = net->param_of[t];
    if (pi >= 0)
        g = net->params[pi].trainable ? net->params[pi].grad : NULL;
    else
        g = net->grad[t];
    if (!g) return NULL;
    *accumulate = net->touched[t] == net->epoch;
    net->touched[t] = net->epoch;
    return g;
}

void tr_net_begin_backward(tr_net *net)
{
    if (++net->epoch == 0) { /* wrapped: forget every mark */
        memset(net->touched, 0, net->exec->n_tensors * sizeof *net->touched);
        net->epoch = 1;
    }
}

pdc_status tr_net_loss(tr_net *net, const tr_options *opt, const float *labels, int grad, double *loss,
                       size_t *correct)
{
    const int lt = tr_net_loss_tensor(net, opt);
    const ir_tensor *t = &net->exec->tensors[lt];
    const size_t n = (size_t)t->dims[0], per = ir_tensor_numel(t) / n;
    const float *y = net->val[lt];
    /* the gradient of the mean over the batch, or of the sum over its samples (each sample's loss a mean) */
    const double per_n = net->loss_sum ? 1.0 : (double)n;
    float *g = NULL;
    if (grad) {
        tr_net_begin_backward(net);
        g = tr_grad_acc(net, lt);
    }
    double total = 0.0;
    size_t ok = 0;
    if (opt->loss == TR_LOSS_CROSS_ENTROPY) {
        for (size_t i = 0; i < n; i++) {
            const float *z = y + i * per;
            const size_t label = (size_t)labels[i];
            size_t best = 0;
            for (size_t c = 1; c < per; c++)
                if (z[c] > z[best]) best = c;
            const double mx = (double)z[best];
            double s = 0.0;
            for (size_t c = 0; c < per; c++) s += exp((double)z[c] - mx);
            const double lse = mx + log(s);
            total += lse - (double)z[label];
            ok += best == label;
            if (g) {
                for (size_t c = 0; c < per; c++)
                    g[i * per + c] = (float)((exp((double)z[c] - lse) - (c == label ? 1.0 : 0.0)) / per_n);
            }
        }
        *loss = total / (double)n;
    } else {
        const size_t all = n * per;
        for (size_t i = 0; i < all; i++) {
            const double d = (double)y[i] - (double)labels[i];
            total += d * d;
            if (g) g[i] = (float)(2.0 * d / (per_n * (double)per));
        }
        for (size_t i = 0; i < n && per > 1; i++) {
            size_t by = 0, bt = 0;
            for (size_t c = 1; c < per; c++) {
                if (y[i * per + c] > y[i * per + by]) by = c;
                if (labels[i * per + c] > labels[i * per + bt]) bt = c;
            }
            ok += by == bt;
        }
        *loss = total / (double)all;
    }
    if (correct) *correct = ok;
    return PDC_OK;
}

pdc_status tr_net_backward(tr_net *net, const tr_options *opt)
{
    const ir_model *m = net->exec;
    for (size_t li = m->n_layers; li-- > 0;) {
        const ir_layer *l = &m->layers[li];
        /* a gradient nobody wrote (an output the loss does not depend on) is zero: nothing to propagate (lstm/gru:
         * unless another output, y_h or y_c, got one) */
        int reached = 0;
        for (size_t o = 0; o < l->n_outputs; o++)
            reached |= l->outputs[o] >= 0 && net->needs_grad[l->outputs[o]] && net->touched[l->outputs[o]] == net->epoch;
        if (reached && !tr_net_skips(net, opt, li)) {
            pdc_status st = tr_op_backward(net, li, opt);
            if (st) return st;
        }
        if (net->layer_done) net->layer_done(net->layer_done_user, li);
    }
    /* parameters no layer reached have zero gradients */
    for (size_t i = 0; i < net->n_params; i++)
        if (net->params[i].trainable) tr_grad_acc(net, net->params[i].tensor);
    return PDC_OK;
}

/* ------------------------------------------------------------------ batches */

pdc_status tr_net_check_batch(const tr_net *net, const tr_options *opt, const pdc_tensor *inputs,
                              const pdc_tensor *labels, size_t *n_out)
{
    const pdc_context *ctx = net->ctx;
    const ir_tensor *in = &net->model->tensors[net->input];
    char want[128], got[128];
    const int ax = net->batch_axis;
    if (inputs->rank != in->rank) goto bad_input;
    for (int d = 0; d < in->rank; d++)
        if (d != ax && inputs->dims[d] != in->dims[d]) goto bad_input;
    const size_t n = (size_t)inputs->dims[ax];
    /* the output's shape for this batch: the exec model's with dim 0 = n */
    const int lt = tr_net_loss_tensor(net, opt);
    const ir_tensor *ot = &net->exec->tensors[lt];
    if (opt->loss == TR_LOSS_CROSS_ENTROPY) {
        if (ot->rank != 2)
            return pdc_error(ctx, PDC_ERR_SHAPE,
                             "trainer: cross-entropy needs logits of rank 2 [N, classes]; tensor '%s' has rank %d", ot->name,
                             ot->rank);
        if (labels->rank != 1 || (size_t)labels->dims[0] != n) {
            ir_format_shape(labels->rank, labels->dims, got, sizeof got);
            return pdc_error(ctx, PDC_ERR_SHAPE, "trainer: labels have shape %s, expected [%zu] (one class index per sample)",
                             got, n);
        }
        const int64_t classes = ot->dims[1];
        for (size_t i = 0; i < n; i++) {
            const float v = labels->data[i];
            if (!(v >= 0.0f && v < (float)classes) || v != floorf(v))
                return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                                 "trainer: label of sample %zu is %g, expected a class index 0..%lld", i, (double)v,
                                 (long long)classes - 1);
        }
    } else {
        int bad = labels->rank != ot->rank || (size_t)labels->dims[0] != n;
        for (int d = 1; d < ot->rank && !bad; d++) bad = labels->dims[d] != ot->dims[d];
        if (bad) {
            int64_t dims[PDC_MAX_RANK];
            memcpy(dims, ot->dims, sizeof dims);
            dims[0] = (int64_t)n;
            ir_format_shape(ot->rank, dims, want, sizeof want);
            ir_format_shape(labels->rank, labels->dims, got, sizeof got);
            return pdc_error(ctx, PDC_ERR_SHAPE, "trainer: targets have shape %s, expected %s (the output '%s' for %zu samples)",
                             got, want, ot->name, n);
        }
    }
    *n_out = n;
    return PDC_OK;
bad_input: {
        int64_t dims[PDC_MAX_RANK];
        memcpy(dims, in->dims, sizeof dims);
        dims[ax] = -1;
        ir_format_shape(in->rank, dims, want, sizeof want);
        ir_format_shape(inputs->rank, inputs->dims, got, sizeof got);
        return pdc_error(ctx, PDC_ERR_SHAPE, "trainer: inputs have shape %s, expected %s (N samples of input '%s')", got,
                         want, in->name);
    }
}

/* ------------------------------------------------------------------ state */

void tr_net_apply_masks(tr_net *net)
{
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->mask) continue;
        float *w = net->model->tensors[p->tensor].data, *state[3] = {p->m, p->v, p->admm_u};
        const uint8_t *mk = p->mask;
        /* selects on values loaded unconditionally (branch-free, vectorised) */
#pragma omp simd
        for (size_t k = 0; k < p->n; k++) {
            const float v = w[k];
            w[k] = mk[k] ? v : 0.0f;
        }
        for (int s = 0; s < 3; s++) {
            float *a = state[s];
            if (!a) continue;
#pragma omp simd
            for (size_t k = 0; k < p->n; k++) {
                const float v = a[k];
                a[k] = mk[k] ? v : 0.0f;
            }
        }
    }
}

pdc_status tr_net_adopt_state(tr_net *to, const tr_net *from)
{
    for (size_t i = 0; i < to->n_params; i++) {
        tr_param *p = &to->params[i];
        const int t = ir_model_find_tensor(from->model, to->model->tensors[p->tensor].name);
        if (t < 0 || from->param_of[t] < 0) continue;
        const tr_param *q = &from->params[from->param_of[t]];
        if (q->n != p->n) continue;
        if (p->m && q->m) memcpy(p->m, q->m, p->n * sizeof *p->m);
        if (p->v && q->v) memcpy(p->v, q->v, p->n * sizeof *p->v);
        if (q->admm_z) {
            p->admm_z = pdc_alloc(to->ctx, p->n * sizeof *p->admm_z);
            p->admm_u = pdc_alloc(to->ctx, p->n * sizeof *p->admm_u);
            if (!p->admm_z || !p->admm_u) return PDC_ERR_OUT_OF_MEMORY;
            memcpy(p->admm_z, q->admm_z, p->n * sizeof *p->admm_z);
            memcpy(p->admm_u, q->admm_u, p->n * sizeof *p->admm_u);
        }
    }
    tr_net_apply_masks(to);
    return PDC_OK;
}
