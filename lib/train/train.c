/*
 * train.c - the public trainer API (include/pdc.h "Training"): options, steps, evaluation, weights,
 * pruning in the loop (masked retraining and ADMM, both through the pruning passes) and export.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api_internal.h"
#include "lib/train/train.h"
#include "passes/pass_manager.h"

/* ------------------------------------------------------------------ options */

typedef enum { OT_CHOICE, OT_DOUBLE, OT_U64, OT_INT } opt_type;
#define U64_ANY 18446744073709551616.0 /* 2^64: every uint64 is in range (strtoull refuses beyond) */

typedef struct opt_def {
    const char *name;
    opt_type type;
    size_t off;
    double lo, hi;          /* OT_DOUBLE, OT_U64, OT_INT: accepted range */
    int lo_open, hi_open;   /* OT_DOUBLE: exclusive bounds */
    const char *const *choices; /* OT_CHOICE: NULL-terminated, value = index */
} opt_def;

static const char *const loss_names[] = {"cross_entropy", "mse", NULL};
static const char *const optimizer_names[] = {"sgd", "adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "step", "cosine", NULL};
static const char *const kernels_names[] = {"native", "ref", "cpu", NULL};
static const char *const sparse_names[] = {"auto", "on", "off", NULL};

#define OFF(f) offsetof(tr_options, f)
static const opt_def opt_defs[] = {
    {"loss", OT_CHOICE, OFF(loss), 0, 0, 0, 0, loss_names},
    {"optimizer", OT_CHOICE, OFF(optimizer), 0, 0, 0, 0, optimizer_names},
    {"lr", OT_DOUBLE, OFF(lr), 0, INFINITY, 1, 1, NULL},
    {"momentum", OT_DOUBLE, OFF(momentum), 0, 1, 0, 1, NULL},
    {"nesterov", OT_INT, OFF(nesterov), 0, 1, 0, 0, NULL},
    {"weight_decay", OT_DOUBLE, OFF(weight_decay), 0, INFINITY, 0, 1, NULL},
    {"beta1", OT_DOUBLE, OFF(beta1), 0, 1, 0, 1, NULL},
    {"beta2", OT_DOUBLE, OFF(beta2), 0, 1, 0, 1, NULL},
    {"eps", OT_DOUBLE, OFF(eps), 0, INFINITY, 1, 1, NULL},
    {"lr_schedule", OT_CHOICE, OFF(schedule), 0, 0, 0, 0, schedule_names},
    {"lr_step", OT_U64, OFF(lr_step), 1, U64_ANY, 0, 0, NULL},
    {"lr_gamma", OT_DOUBLE, OFF(lr_gamma), 0, 1, 1, 0, NULL},
    {"lr_total_steps", OT_U64, OFF(lr_total_steps), 1, U64_ANY, 0, 0, NULL},
    {"lr_min", OT_DOUBLE, OFF(lr_min), 0, INFINITY, 0, 1, NULL},
    {"batch", OT_U64, OFF(batch), 1, 65536, 0, 0, NULL},
    {"seed", OT_U64, OFF(seed), 0, U64_ANY, 0, 0, NULL},
    {"bn_momentum", OT_DOUBLE, OFF(bn_momentum), 0, 1, 0, 0, NULL},
    {"threads", OT_INT, OFF(threads), 0, 4096, 0, 0, NULL},
    {"kernels", OT_CHOICE, OFF(kernels), 0, 0, 0, 0, kernels_names},
    {"sparse", OT_CHOICE, OFF(sparse), 0, 0, 0, 0, sparse_names},
    {"sparse_threshold", OT_DOUBLE, OFF(sparse_threshold), 0, 1, 0, 0, NULL},
    {"recompute", OT_INT, OFF(recompute), 0, 1, 0, 0, NULL},
    {"micro_batch", OT_U64, OFF(micro_batch), 0, 65536, 0, 0, NULL},
};
#undef OFF
#define N_OPTS (sizeof opt_defs / sizeof opt_defs[0])

const char *const tr_option_names[] = {"loss", "optimizer", "lr", "momentum", "nesterov", "weight_decay", "beta1",
                                       "beta2", "eps", "lr_schedule", "lr_step", "lr_gamma", "lr_total_steps",
                                       "lr_min", "batch", "seed", "bn_momentum", "threads", "kernels", "sparse",
                                       "sparse_threshold", "recompute", "micro_batch", NULL};

void tr_options_default(tr_options *o)
{
    memset(o, 0, sizeof *o);
    o->loss = TR_LOSS_CROSS_ENTROPY;
    o->optimizer = TR_OPT_ADAM;
    o->schedule = TR_SCHED_CONSTANT;
    o->kernels = TR_KERNELS_NATIVE;
    o->sparse = TR_SPARSE_AUTO;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->lr_gamma = 0.1;
    o->lr_step = 1000;
    o->lr_total_steps = 10000;
    o->bn_momentum = 0.1;
    o->sparse_threshold = 0.6;
    o->batch = 32;
}

static const opt_def *find_opt(const char *name)
{
    for (size_t i = 0; i < N_OPTS; i++)
        if (!strcmp(opt_defs[i].name, name)) return &opt_defs[i];
    return NULL;
}

static void list_choices(const char *const *c, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0; c[i]; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", i ? (c[i + 1] ? ", " : " or ") : "", c[i]);
    }
}

pdc_status tr_options_set(const pdc_context *ctx, tr_options *o, const char *name, const char *value)
{
    const opt_def *d = find_opt(name);
    if (!d)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "trainer: unknown option \"%s\" (known: loss, optimizer, lr, momentum, nesterov, weight_decay, "
                         "beta1, beta2, eps, lr_schedule, lr_step, lr_gamma, lr_total_steps, lr_min, batch, seed, "
                         "bn_momentum, threads, kernels, sparse, sparse_threshold, recompute, micro_batch)",
                         name);
    char *base = (char *)o + d->off, *end = NULL;
    switch (d->type) {
    case OT_CHOICE:
        for (int i = 0; d->choices[i]; i++)
            if (!strcmp(d->choices[i], value)) {
                *(int *)(void *)base = i;
                return PDC_OK;
            }
        {
            char list[128];
            list_choices(d->choices, list, sizeof list);
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s: expected %s, got \"%s\"", name, list, value);
        }
    case OT_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        int ok = *value && !*end && !errno && isfinite(v) && (d->lo_open ? v > d->lo : v >= d->lo) &&
                 (d->hi_open ? v < d->hi : v <= d->hi);
        if (!ok)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s: expected a number in %c%g, %g%c, got \"%s\"",
                             name, d->lo_open ? '(' : '[', d->lo, d->hi, d->hi_open ? ')' : ']', value);
        *(double *)(void *)base = v;
        return PDC_OK;
    }
    case OT_U64:
    case OT_INT: {
        errno = 0;
        unsigned long long v = (*value >= '0' && *value <= '9') ? strtoull(value, &end, 10) : 0;
        int ok = end && !*end && !errno && (double)v >= d->lo && (double)v <= d->hi;
        if (!ok) {
            if (d->hi > 1e18)
                return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s: expected an integer >= %.0f, got \"%s\"",
                                 name, d->lo, value);
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s: expected an integer %.0f..%.0f, got \"%s\"",
                             name, d->lo, d->hi, value);
        }
        if (d->type == OT_INT)
            *(int *)(void *)base = (int)v;
        else if (d->off == offsetof(tr_options, batch))
            *(size_t *)(void *)base = (size_t)v;
        else
            *(uint64_t *)(void *)base = (uint64_t)v;
        return PDC_OK;
    }
    }
    return PDC_ERR_INTERNAL;
}

int tr_options_get(const tr_options *o, const char *name, char *buf, size_t cap)
{
    const opt_def *d = find_opt(name);
    if (!d) return 0;
    const char *base = (const char *)o + d->off;
    switch (d->type) {
    case OT_CHOICE: snprintf(buf, cap, "%s", d->choices[*(const int *)(const void *)base]); break;
    case OT_DOUBLE: snprintf(buf, cap, "%.17g", *(const double *)(const void *)base); break;
    case OT_INT: snprintf(buf, cap, "%d", *(const int *)(const void *)base); break;
    case OT_U64:
        if (d->off == offsetof(tr_options, batch))
            snprintf(buf, cap, "%zu", *(const size_t *)(const void *)base);
        else
            snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)(const void *)base);
        break;
    }
    return 1;
}

/* ------------------------------------------------------------------ create, destroy */

static void sync_threads(pdc_trainer *t)
{
    int n = t->opt.threads ? t->opt.threads : t->ctx->threads;
    if (n <= 0) n = omp_get_num_procs();
    t->net->threads = n < 1 ? 1 : n;
    t->net->recompute = t->opt.recompute;
}

PDC_API pdc_status pdc_trainer_create(pdc_context *ctx, const pdc_model *model, pdc_trainer **trainer_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, model, "model");
    PDC_CHECK_ARG(ctx, trainer_out, "trainer_out");
    pdc_status st = ir_verify(model);
    if (st) {
        pdc_error_prefix(ctx, "pdc_trainer_create");
        return st;
    }
    pdc_trainer *t = pdc_calloc(ctx, 1, sizeof *t);
    if (!t) return PDC_ERR_OUT_OF_MEMORY;
    t->ctx = ctx;
    tr_options_default(&t->opt);
    ir_model *copy;
    if ((st = ir_model_clone(model, &copy))) {
        pdc_free(t);
        return st;
    }
    copy->ctx = ctx;
    if ((st = tr_net_create(ctx, copy, &t->opt, &t->net))) {
        pdc_free(t);
        return st;
    }
    tr_rng_seed(t->rng, t->opt.seed);
    sync_threads(t);
    pdc_object_created(ctx);
    *trainer_out = t;
    return PDC_OK;
}

static void admm_clear(pdc_trainer *t)
{
    for (size_t i = 0; t->net && i < t->net->n_params; i++) {
        tr_param *p = &t->net->params[i];
        pdc_free(p->admm_z);
        pdc_free(p->admm_u);
        p->admm_z = p->admm_u = NULL;
    }
    pdc_free(t->admm_pipeline);
    t->admm_pipeline = NULL;
    ir_attrs_free(&t->admm_options);
    t->admm = 0;
    t->rho = 0.0;
}

PDC_API void pdc_trainer_destroy(pdc_trainer *trainer)
{
    if (!trainer) return;
    pdc_object_destroyed(trainer->ctx);
    admm_clear(trainer);
    tr_net_destroy(trainer->net);
    pdc_free(trainer->packed);
    pdc_free(trainer->bucket_off);
    pdc_free(trainer->bucket_layer);
    pdc_free(trainer);
}

#define TRAINER_CHECK(t)                                                                           \
    do {                                                                                           \
        if (!(t)) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: trainer is NULL", __func__); \
    } while (0)

/* ------------------------------------------------------------------ options API */

PDC_API pdc_status pdc_trainer_set_option(pdc_trainer *trainer, const char *name, const char *value)
{
    TRAINER_CHECK(trainer);
    pdc_context *ctx = trainer->ctx;
    PDC_CHECK_ARG(ctx, name, "name");
    PDC_CHECK_ARG(ctx, value, "value");
    if (!strcmp(name, "step") || !strcmp(name, "current_lr") || !strcmp(name, "isa"))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s is read-only", name);
    tr_options o = trainer->opt;
    pdc_status st = tr_options_set(ctx, &o, name, value);
    if (st) return st;
    if (trainer->step > 0 && (o.loss != trainer->opt.loss || o.optimizer != trainer->opt.optimizer))
        return pdc_error(ctx, PDC_ERR_INVALID_STATE, "trainer: option %s cannot change after %llu steps", name,
                         (unsigned long long)trainer->step);
    tr_net *net = trainer->net;
    if (o.batch != trainer->opt.batch) {
        if ((st = tr_net_prepare(net, o.batch))) {
            tr_net_prepare(net, trainer->opt.batch);
            return st;
        }
    }
    if (o.sparse != trainer->opt.sparse || o.sparse_threshold != trainer->opt.sparse_threshold) {
        if ((st = tr_net_update_sparse(net, &o))) {
            tr_net_update_sparse(net, &trainer->opt);
            return st;
        }
    }
    if (!strcmp(name, "seed")) tr_rng_seed(trainer->rng, o.seed);
    trainer->opt = o;
    sync_threads(trainer);
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_get_option(const pdc_trainer *trainer, const char *name, char *buf, size_t cap)
{
    TRAINER_CHECK(trainer);
    pdc_context *ctx = trainer->ctx;
    PDC_CHECK_ARG(ctx, name, "name");
    PDC_CHECK_ARG(ctx, buf, "buf");
    char tmp[128];
    if (!strcmp(name, "step"))
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)trainer->step);
    else if (!strcmp(name, "current_lr"))
        snprintf(tmp, sizeof tmp, "%.17g", tr_lr_at(&trainer->opt, trainer->step));
    else if (!strcmp(name, "isa"))
        snprintf(tmp, sizeof tmp, "%s", trainer->net->isa->name);
    else if (!tr_options_get(&trainer->opt, name, tmp, sizeof tmp))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: unknown option \"%s\"", name);
    const size_t n = strlen(tmp);
    if (n + 1 > cap)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: option %s: buffer of %zu bytes too small for %zu", name, cap,
                         n + 1);
    memcpy(buf, tmp, n + 1);
    return PDC_OK;
}

/* ------------------------------------------------------------------ weights */

PDC_API pdc_status pdc_trainer_init_weights(pdc_trainer *trainer)
{
    TRAINER_CHECK(trainer);
    if (trainer->admm)
        return pdc_error(trainer->ctx, PDC_ERR_INVALID_STATE, "trainer: weights cannot be redrawn while ADMM is on");
    tr_net *net = trainer->net;
    ir_model *m = net->model;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (l->op == IR_OP_BATCHNORM) {
            static const float fill[4] = {1.0f, 0.0f, 0.0f, 1.0f};
            for (size_t s = 1; s < 5 && s < l->n_inputs; s++) {
                const int pi = l->inputs[s] >= 0 ? net->param_of[l->inputs[s]] : -1;
                if (pi < 0) continue;
                float *d = m->tensors[l->inputs[s]].data;
                for (size_t k = 0; k < net->params[pi].n; k++) d[k] = fill[s - 1];
            }
            continue;
        }
        if (l->op == IR_OP_LSTM || l->op == IR_OP_GRU) { /* PyTorch's: w, r and b uniform in +-1/sqrt(hidden) */
            const float bound = (float)(1.0 / sqrt((double)ir_attr_int(&l->attrs, "hidden_size", 1)));
            for (size_t s = 1; s < 4 && s < l->n_inputs; s++) {
                const int pi = l->inputs[s] >= 0 ? net->param_of[l->inputs[s]] : -1;
                if (pi < 0) continue;
                float *d = m->tensors[l->inputs[s]].data;
                for (size_t k = 0; k < net->params[pi].n; k++) d[k] = bound * tr_rng_symmetric(trainer->rng);
            }
            continue;
        }
        if (l->op != IR_OP_CONV && l->op != IR_OP_FC && l->op != IR_OP_GEMM) continue;
        if (l->n_inputs < 2 || l->inputs[1] < 0 || net->param_of[l->inputs[1]] < 0) continue;
        const ir_tensor *w = &m->tensors[l->inputs[1]];
        size_t fan_in = 1;
        if (l->op == IR_OP_GEMM)
            fan_in = (size_t)(ir_attr_int(&l->attrs, "transB", 0) ? w->dims[w->rank - 1] : w->dims[0]);
        else
            for (int d = 1; d < w->rank; d++) fan_in *= (size_t)w->dims[d];
        const float bound = (float)(1.0 / sqrt((double)(fan_in ? fan_in : 1)));
        for (size_t s = 1; s < 3 && s < l->n_inputs; s++) {
            const int pi = l->inputs[s] >= 0 ? net->param_of[l->inputs[s]] : -1;
            if (pi < 0) continue;
            tr_param *p = &net->params[pi];
            float *d = m->tensors[p->tensor].data;
            for (size_t k = 0; k < p->n; k++) d[k] = bound * tr_rng_symmetric(trainer->rng);
        }
    }
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (p->m) memset(p->m, 0, p->n * sizeof *p->m);
        if (p->v) memset(p->v, 0, p->n * sizeof *p->v);
    }
    tr_net_apply_masks(net);
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_shuffle(pdc_trainer *trainer, size_t n, size_t *perm_out)
{
    TRAINER_CHECK(trainer);
    if (n && !perm_out) return pdc_error(trainer->ctx, PDC_ERR_INVALID_ARG, "%s: perm_out is NULL", __func__);
    for (size_t i = 0; i < n; i++) perm_out[i] = i;
    for (size_t i = n; i > 1; i--) {
        const size_t j = (size_t)tr_rng_below(trainer->rng, i);
        const size_t tmp = perm_out[i - 1];
        perm_out[i - 1] = perm_out[j];
        perm_out[j] = tmp;
    }
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_num_weights(const pdc_trainer *trainer, size_t *n_out)
{
    TRAINER_CHECK(trainer);
    PDC_CHECK_ARG(trainer->ctx, n_out, "n_out");
    *n_out = trainer->net->n_params;
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_weight_info(const pdc_trainer *trainer, size_t i, const char **name_out,
                                           size_t *rank_out, int64_t *dims_out, size_t *kept_out, int *trainable_out)
{
    TRAINER_CHECK(trainer);
    const tr_net *net = trainer->net;
    if (i >= net->n_params)
        return pdc_error(trainer->ctx, PDC_ERR_NOT_FOUND, "trainer: weight %zu does not exist (there are %zu)", i,
                         net->n_params);
    const tr_param *p = &net->params[i];
    const ir_tensor *t = &net->model->tensors[p->tensor];
    if (name_out) *name_out = t->name;
    if (rank_out) *rank_out = (size_t)t->rank;
    if (dims_out) memcpy(dims_out, t->dims, (size_t)t->rank * sizeof *dims_out);
    if (kept_out) *kept_out = p->kept;
    if (trainable_out) *trainable_out = p->trainable;
    return PDC_OK;
}

static pdc_status find_weight(const pdc_trainer *t, const char *name, size_t n, const tr_param **out)
{
    PDC_CHECK_ARG(t->ctx, name, "name");
    const int pi = tr_net_find_param(t->net, name);
    if (pi < 0)
        return pdc_error(t->ctx, PDC_ERR_NOT_FOUND, "trainer: no weight or layer named '%s' (see pdc_trainer_weight_info)",
                         name);
    const tr_param *p = &t->net->params[pi];
    if (n != p->n)
        return pdc_error(t->ctx, PDC_ERR_INVALID_ARG, "trainer: weight '%s' has %zu elements, got %zu",
                         t->net->model->tensors[p->tensor].name, p->n, n);
    *out = p;
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_get_weights(const pdc_trainer *trainer, const char *name, float *data, size_t n)
{
    TRAINER_CHECK(trainer);
    const tr_param *p;
    pdc_status st = find_weight(trainer, name, n, &p);
    if (st) return st;
    PDC_CHECK_ARG(trainer->ctx, data, "data");
    memcpy(data, trainer->net->model->tensors[p->tensor].data, n * sizeof *data);
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_set_weights(pdc_trainer *trainer, const char *name, const float *data, size_t n)
{
    TRAINER_CHECK(trainer);
    const tr_param *p;
    pdc_status st = find_weight(trainer, name, n, &p);
    if (st) return st;
    PDC_CHECK_ARG(trainer->ctx, data, "data");
    const char *tn = trainer->net->model->tensors[p->tensor].name;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(data[i]))
            return pdc_error(trainer->ctx, PDC_ERR_INVALID_ARG, "trainer: weight '%s' element %zu is %g", tn, i,
                             (double)data[i]);
        if (p->mask && !p->mask[i] && data[i] != 0.0f)
            return pdc_error(trainer->ctx, PDC_ERR_INVALID_ARG,
                             "trainer: weight '%s' element %zu is pruned but the new value is %g (must be 0)", tn, i,
                             (double)data[i]);
    }
    memcpy(trainer->net->model->tensors[p->tensor].data, data, n * sizeof *data);
    return PDC_OK;
}

/* ------------------------------------------------------------------ step, evaluate */

PDC_API pdc_status pdc_trainer_step(pdc_trainer *trainer, const pdc_tensor *inputs, const pdc_tensor *labels,
                                    float *loss_out)
{
    TRAINER_CHECK(trainer);
    pdc_context *ctx = trainer->ctx;
    /* with a reducer, a process may have no samples in a step but must still take part in it */
    const int empty = trainer->reducer && !inputs && !labels;
    if (!empty) {
        PDC_CHECK_ARG(ctx, inputs, "inputs");
        PDC_CHECK_ARG(ctx, labels, "labels");
    }
    tr_net *net = trainer->net;
    const tr_options *opt = &trainer->opt;
    size_t n = 0;
    pdc_status st = empty ? PDC_OK : tr_net_check_batch(net, opt, inputs, labels, &n);
    if (st) return st;
    if (n > opt->batch)
        return pdc_error(ctx, PDC_ERR_SHAPE, "trainer: a batch of %zu samples is larger than option batch (%zu)", n,
                         opt->batch);
    sync_threads(trainer);
    const unsigned long long step_no = (unsigned long long)trainer->step + 1;
    double loss;
    if (trainer->reducer || trainer->bn_sync || opt->micro_batch) {
        if ((st = tr_step_gradients(trainer, empty ? NULL : inputs, empty ? NULL : labels, n, &loss))) return st;
    } else {
        if ((st = tr_net_prepare(net, n)) || (st = tr_net_forward(net, inputs->data, opt, 1)) ||
            (st = tr_net_loss(net, opt, labels->data, 1, &loss, NULL)))
            return st;
        if (!isfinite(loss))
            return pdc_error(ctx, PDC_ERR_NUMERIC, "trainer: step %llu: the loss is %s (weights unchanged)", step_no,
                             isnan(loss) ? "NaN" : "infinite");
        if ((st = tr_net_backward(net, opt))) return st;
    }
    const char *bad;
    if (!tr_grads_finite(net, &bad))
        return pdc_error(ctx, PDC_ERR_NUMERIC,
                         "trainer: step %llu: the gradient of weight '%s' is NaN or infinite (loss %g; weights unchanged)",
                         step_no, bad, loss);
    tr_optimizer_update(net, opt, trainer->step, trainer->admm ? trainer->rho : 0.0);
    if (n) tr_net_commit_bn(net, opt); /* the update left pruned weights and their state at zero */
    trainer->step++;
    if (loss_out) *loss_out = (float)loss;
    return PDC_OK;
}

/* Samples [at, at + chunk) of the n in inputs: where they are (batch dim 0), or gathered into tmp (sequences
 * [T, N, F], batch dim 1; tmp holds T * chunk * F floats). */
static const float *samples_at(const tr_net *net, const pdc_tensor *inputs, size_t n, size_t at, size_t chunk, float *tmp)
{
    if (net->batch_axis == 0 || chunk == n) return inputs->data + at * (inputs->numel / n);
    const size_t T = (size_t)inputs->dims[0], F = inputs->numel / (T * n);
    for (size_t t = 0; t < T; t++) memcpy(tmp + t * chunk * F, inputs->data + (t * n + at) * F, chunk * F * sizeof *tmp);
    return tmp;
}

PDC_API pdc_status pdc_trainer_evaluate(pdc_trainer *trainer, const pdc_tensor *inputs, const pdc_tensor *labels,
                                        float *loss_out, float *accuracy_out)
{
    TRAINER_CHECK(trainer);
    pdc_context *ctx = trainer->ctx;
    PDC_CHECK_ARG(ctx, inputs, "inputs");
    PDC_CHECK_ARG(ctx, labels, "labels");
    tr_net *net = trainer->net;
    const tr_options *opt = &trainer->opt;
    size_t n;
    pdc_status st = tr_net_check_batch(net, opt, inputs, labels, &n);
    if (st) return st;
    sync_threads(trainer);
    const size_t lab_per = labels->numel / n;
    float *tmp = NULL;
    if (net->batch_axis && n > opt->batch && !(tmp = pdc_alloc(ctx, inputs->numel / n * opt->batch * sizeof *tmp)))
        return PDC_ERR_OUT_OF_MEMORY;
    double total = 0.0;
    size_t correct = 0, per_out = 0;
    for (size_t at = 0; at < n; at += opt->batch) {
        const size_t chunk = n - at < opt->batch ? n - at : opt->batch;
        double loss;
        size_t ok;
        if ((st = tr_net_prepare(net, chunk)) ||
            (st = tr_net_forward(net, samples_at(net, inputs, n, at, chunk, tmp), opt, 0)) ||
            (st = tr_net_loss(net, opt, labels->data + at * lab_per, 0, &loss, &ok))) {
            pdc_free(tmp);
            return st;
        }
        total += loss * (double)chunk;
        correct += ok;
        per_out = ir_tensor_numel(&net->exec->tensors[net->output]) / chunk;
    }
    pdc_free(tmp);
    if (loss_out) *loss_out = (float)(total / (double)n);
    if (accuracy_out)
        *accuracy_out = opt->loss == TR_LOSS_MSE && per_out <= 1 ? NAN : (float)((double)correct / (double)n);
    return PDC_OK;
}

/* ------------------------------------------------------------------ pruning */

/* The pipeline must hold pruning passes only (other passes would change the model's structure). */
pdc_status tr_check_prune_pipeline(const pdc_context *ctx, const char *pipeline)
{
    const char *s = pipeline, *end = pass_pipeline_options(pipeline); /* options may follow the passes */
    while (s < end) {
        while (*s == ' ' || *s == ',') s++;
        if (s >= end) break;
        const char *e = s;
        while (e < end && *e != ',') e++;
        size_t len = (size_t)(e - s);
        while (len && s[len - 1] == ' ') len--;
        if (len && (len < 7 || strncmp(s, "prune-", 6)))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "trainer: pass '%.*s' is not a pruning pass (the trainer runs prune-pattern, "
                             "prune-connectivity, prune-block, prune-bcr and prune-unstructured only)",
                             (int)len, s);
        s = e;
    }
    return PDC_OK;
}

/* A new net for model (taken over) with the optimizer and ADMM state of the current one; swapped in on success. */
static pdc_status replace_net(pdc_trainer *t, ir_model *model)
{
    tr_net *net;
    pdc_status st = tr_net_create(t->ctx, model, &t->opt, &net);
    if (st) return st;
    if ((st = tr_net_adopt_state(net, t->net))) {
        tr_net_destroy(net);
        return st;
    }
    tr_net_destroy(t->net);
    t->net = net;
    sync_threads(t);
    return PDC_OK;
}

static pdc_status prune_with(pdc_trainer *t, const char *pipeline, const ir_attrs *options)
{
    ir_model *m;
    pdc_status st = ir_model_clone(t->net->model, &m);
    if (st) return st;
    pdc_attrs wrap = {t->ctx, {0, 0, NULL}};
    if (options) wrap.list = *options;
    if ((st = pdc_model_transform(m, pipeline, options ? &wrap : NULL))) {
        ir_model_destroy(m);
        return st;
    }
    return replace_net(t, m);
}

PDC_API pdc_status pdc_trainer_prune(pdc_trainer *trainer, const char *pipeline, const pdc_attrs *options)
{
    TRAINER_CHECK(trainer);
    PDC_CHECK_ARG(trainer->ctx, pipeline, "pipeline");
    pdc_status st = tr_check_prune_pipeline(trainer->ctx, pipeline);
    return st ? st : prune_with(trainer, pipeline, options ? &options->list : NULL);
}

/* 1 if the pruned copy's sparsity of tensor t differs from the net's mask. */
static int sparsity_changed(const ir_tensor *pruned, const tr_param *p)
{
    if (pruned->sparsity.kind == IR_SPARSITY_NONE) return 0;
    for (size_t i = 0; i < p->n; i++)
        if (ir_sparsity_keeps(pruned, i) != (p->mask ? p->mask[i] != 0 : 1)) return 1;
    return 0;
}

pdc_status tr_admm_project(pdc_trainer *t, tr_net *net, int init)
{
    ir_model *m;
    pdc_status st = ir_model_clone(net->model, &m);
    if (st) return st;
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->admm_u) continue;
        float *d = m->tensors[p->tensor].data;
        for (size_t k = 0; k < p->n; k++) d[k] += p->admm_u[k];
    }
    pdc_attrs wrap = {t->ctx, t->admm_options};
    if ((st = pdc_model_transform(m, t->admm_pipeline, &wrap))) {
        ir_model_destroy(m);
        return st;
    }
    if (init) {
        for (size_t i = 0; i < net->n_params && !st; i++) {
            tr_param *p = &net->params[i];
            const int mt = ir_model_find_tensor(m, net->model->tensors[p->tensor].name);
            if (!p->trainable || mt < 0 || !sparsity_changed(&m->tensors[mt], p)) continue;
            p->admm_z = pdc_alloc(t->ctx, p->n * sizeof *p->admm_z);
            p->admm_u = pdc_calloc(t->ctx, p->n, sizeof *p->admm_u);
            if (!p->admm_z || !p->admm_u) st = PDC_ERR_OUT_OF_MEMORY;
        }
    }
    for (size_t i = 0; i < net->n_params && !st; i++) {
        tr_param *p = &net->params[i];
        if (!p->admm_z) continue;
        const int mt = ir_model_find_tensor(m, net->model->tensors[p->tensor].name);
        if (mt < 0 || ir_tensor_numel(&m->tensors[mt]) != p->n) {
            st = pdc_error(t->ctx, PDC_ERR_INTERNAL, "trainer: ADMM: the pipeline changed weight '%s'",
                           net->model->tensors[p->tensor].name);
            break;
        }
        memcpy(p->admm_z, m->tensors[mt].data, p->n * sizeof *p->admm_z);
    }
    ir_model_destroy(m);
    return st;
}

PDC_API pdc_status pdc_trainer_admm_begin(pdc_trainer *trainer, const char *pipeline, const pdc_attrs *options,
                                          float rho)
{
    TRAINER_CHECK(trainer);
    pdc_context *ctx = trainer->ctx;
    PDC_CHECK_ARG(ctx, pipeline, "pipeline");
    if (trainer->admm) return pdc_error(ctx, PDC_ERR_INVALID_STATE, "trainer: ADMM is already on");
    if (!(rho > 0.0f) || !isfinite(rho))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: ADMM rho is %g, expected a finite number > 0", (double)rho);
    pdc_status st = tr_check_prune_pipeline(ctx, pipeline);
    if (st) return st;
    trainer->admm_pipeline = pdc_strdup(ctx, pipeline);
    if (!trainer->admm_pipeline) return PDC_ERR_OUT_OF_MEMORY;
    if (options && (st = ir_attrs_copy(ctx, &trainer->admm_options, &options->list))) {
        admm_clear(trainer);
        return st;
    }
    trainer->rho = rho;
    if ((st = tr_admm_project(trainer, trainer->net, 1))) {
        admm_clear(trainer);
        return st;
    }
    size_t targets = 0;
    for (size_t i = 0; i < trainer->net->n_params; i++) targets += trainer->net->params[i].admm_z != NULL;
    if (!targets) {
        admm_clear(trainer);
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: ADMM: pipeline '%s' prunes no weight of this model", pipeline);
    }
    trainer->admm = 1;
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_admm_update(pdc_trainer *trainer, double *residual_out)
{
    TRAINER_CHECK(trainer);
    if (!trainer->admm) return pdc_error(trainer->ctx, PDC_ERR_INVALID_STATE, "trainer: ADMM is not on");
    tr_net *net = trainer->net;
    pdc_status st = tr_admm_project(trainer, net, 0);
    if (st) return st;
    double rr = 0.0, ww = 0.0;
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->admm_z) continue;
        const float *w = net->model->tensors[p->tensor].data;
        for (size_t k = 0; k < p->n; k++) {
            const float d = w[k] - p->admm_z[k];
            p->admm_u[k] += d;
            rr += (double)d * d;
            ww += (double)w[k] * w[k];
        }
    }
    if (residual_out) *residual_out = sqrt(rr) / fmax(sqrt(ww), 1e-12);
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_admm_end(pdc_trainer *trainer)
{
    TRAINER_CHECK(trainer);
    if (!trainer->admm) return pdc_error(trainer->ctx, PDC_ERR_INVALID_STATE, "trainer: ADMM is not on");
    pdc_status st = prune_with(trainer, trainer->admm_pipeline, &trainer->admm_options);
    if (st) return st;
    admm_clear(trainer);
    return PDC_OK;
}

/* ------------------------------------------------------------------ checkpoints, export */

PDC_API pdc_status pdc_trainer_save(const pdc_trainer *trainer, const char *path)
{
    TRAINER_CHECK(trainer);
    PDC_CHECK_ARG(trainer->ctx, path, "path");
    return tr_checkpoint_save(trainer, path);
}

PDC_API pdc_status pdc_trainer_load(pdc_trainer *trainer, const char *path)
{
    TRAINER_CHECK(trainer);
    PDC_CHECK_ARG(trainer->ctx, path, "path");
    return tr_checkpoint_load(trainer, path);
}

PDC_API pdc_status pdc_trainer_export(const pdc_trainer *trainer, pdc_model **model_out)
{
    TRAINER_CHECK(trainer);
    PDC_CHECK_ARG(trainer->ctx, model_out, "model_out");
    pdc_status st = ir_model_clone(trainer->net->model, model_out);
    if (!st) pdc_object_created((*model_out)->ctx);
    return st;
}
