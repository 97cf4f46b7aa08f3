/*
 * train_reduce.c - the step's gradients over micro-batches (option micro_batch) and through a gradient
 * reducer (pdc_trainer_set_reducer): the data-parallel step (docs/training.md, "Data-parallel training").
 *
 * Every micro-batch's gradient is the gradient of the sum of its samples' losses, packed to the kept entries
 * of the trainable weights. The parts are summed by a fixed pairwise tree (or by the reducer, across
 * processes), then divided by the number of samples. The tree depends only on the number of micro-batches,
 * so a reducer that applies it over the parts of every process in global order reproduces one process.
 * With one part and a bucket function, each weight's gradient is handed over as soon as the backward pass
 * completed it, so that its communication overlaps the rest of the backward pass.
 */
#include <math.h>
#include <string.h>

#include "lib/api_internal.h"
#include "lib/train/train.h"

/* Floats of one packed gradient: the kept entries of every trainable parameter. */
static size_t packed_floats(const tr_net *net)
{
    size_t n = 0;
    for (size_t i = 0; i < net->n_params; i++)
        if (net->params[i].trainable) n += net->params[i].kept;
    return n;
}

static void pack(const tr_net *net, float *dst)
{
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        if (!p->mask) {
            memcpy(dst, p->grad, p->n * sizeof *dst);
            dst += p->n;
            continue;
        }
        for (size_t k = 0; k < p->n; k++)
            if (p->mask[k]) *dst++ = p->grad[k];
    }
}

/* ------------------------------------------------------------------ buckets (pdc_gradient_bucket) */

/* Per parameter: its offset in the packed gradient and the first layer reading it (-1: none). */
static pdc_status plan_buckets(pdc_trainer *t)
{
    tr_net *net = t->net;
    if (net->n_params > t->bucket_cap) {
        size_t *off = pdc_alloc(t->ctx, net->n_params * sizeof *off);
        int *layer = pdc_alloc(t->ctx, net->n_params * sizeof *layer);
        if (!off || !layer) {
            pdc_free(off);
            pdc_free(layer);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        pdc_free(t->bucket_off);
        pdc_free(t->bucket_layer);
        t->bucket_off = off;
        t->bucket_layer = layer;
        t->bucket_cap = net->n_params;
    }
    size_t at = 0;
    for (size_t i = 0; i < net->n_params; i++) {
        t->bucket_off[i] = at;
        at += net->params[i].trainable ? net->params[i].kept : 0;
        t->bucket_layer[i] = -1;
    }
    const ir_model *m = net->model;
    for (size_t li = m->n_layers; li-- > 0;)
        for (size_t k = 0; k < m->layers[li].n_inputs; k++) {
            const int tn = m->layers[li].inputs[k];
            if (tn >= 0 && net->param_of[tn] >= 0) t->bucket_layer[net->param_of[tn]] = (int)li;
        }
    t->bucket_st = PDC_OK;
    t->bucket_msg[0] = '\0';
    return PDC_OK;
}

/* Packs trainable parameter i's final gradient (zero if nothing reached it) and hands it over. */
static void hand_over(pdc_trainer *t, size_t i, int empty)
{
    tr_net *net = t->net;
    const tr_param *p = &net->params[i];
    if (!p->trainable || t->bucket_st) return;
    float *dst = t->packed + t->bucket_off[i];
    if (empty) {
        memset(dst, 0, p->kept * sizeof *dst);
    } else {
        const float *g = tr_grad_acc(net, p->tensor); /* zeroes a gradient no layer wrote in this pass */
        for (size_t k = 0; k < p->n; k++)
            if (!p->mask || p->mask[k]) *dst++ = g[k];
    }
    t->bucket_st = t->bucket(t->reducer_user, t->packed, t->bucket_off[i], p->kept, t->bucket_msg,
                             sizeof t->bucket_msg);
}

static void layer_done(void *user, size_t li)
{
    pdc_trainer *t = user;
    for (size_t i = 0; i < t->net->n_params; i++)
        if (t->bucket_layer[i] == (int)li) hand_over(t, i, 0);
}

/* Every parameter not handed over by the backward pass, in the order a backward pass would have. */
static void hand_over_rest(pdc_trainer *t, int empty)
{
    if (empty)
        for (size_t li = t->net->model->n_layers; li-- > 0;)
            for (size_t i = 0; i < t->net->n_params; i++)
                if (t->bucket_layer[i] == (int)li) hand_over(t, i, 1);
    for (size_t i = 0; i < t->net->n_params; i++)
        if (t->bucket_layer[i] < 0) hand_over(t, i, empty);
}

/* A process without samples, with a batchnorm sync: the others' syncs and hand-overs in their order (the
 * forward pass's syncs, then per layer from the last: its backward sync, then the weights it completed). */
static pdc_status empty_with_bn_sync(pdc_trainer *t, int buckets)
{
    pdc_status st = tr_bn_sync_empty(t->net, -1);
    for (size_t li = t->net->model->n_layers; li-- > 0 && !st;) {
        st = tr_bn_sync_empty(t->net, (long)li);
        for (size_t i = 0; buckets && i < t->net->n_params && !st; i++)
            if (t->bucket_layer[i] == (int)li) hand_over(t, i, 1);
    }
    if (!st && buckets)
        for (size_t i = 0; i < t->net->n_params; i++)
            if (t->bucket_layer[i] < 0) hand_over(t, i, 1);
    return st;
}

/* ------------------------------------------------------------------ the step */

/* grad = src / samples at the kept entries, 0 at the pruned ones. */
static void unpack(tr_net *net, const float *src, float samples)
{
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        for (size_t k = 0; k < p->n; k++) p->grad[k] = !p->mask || p->mask[k] ? *src++ / samples : 0.0f;
    }
}

/* parts[a] = the pairwise-tree sum of parts [a, a + count), each n floats (pdc.h, pdc_gradient_reducer). */
static void tree_sum(float *parts, size_t n, size_t a, size_t count)
{
    if (count < 2) return;
    size_t h = 1;
    while (h * 2 < count) h *= 2;
    tree_sum(parts, n, a, h);
    tree_sum(parts, n, a + h, count - h);
    float *l = parts + a * n;
    const float *r = parts + (a + h) * n;
    for (size_t k = 0; k < n; k++) l[k] += r[k];
}

pdc_status tr_step_gradients(pdc_trainer *t, const pdc_tensor *inputs, const pdc_tensor *labels, size_t n,
                             double *loss)
{
    pdc_context *ctx = t->ctx;
    tr_net *net = t->net;
    const tr_options *opt = &t->opt;
    const unsigned long long step_no = (unsigned long long)t->step + 1;
    const size_t micro = opt->micro_batch ? opt->micro_batch : (n ? n : 1);
    const size_t parts = (n + micro - 1) / micro, floats = packed_floats(net);
    const size_t want = (parts ? parts : 1) * (floats ? floats : 1);
    if (want > t->packed_cap) {
        float *b = pdc_alloc(ctx, want * sizeof *b);
        if (!b) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(t->packed);
        t->packed = b;
        t->packed_cap = want;
    }
    if (t->bn_sync && parts > 1)
        return pdc_error(ctx, PDC_ERR_INVALID_STATE,
                         "trainer: step %llu: synchronised batchnorm needs one forward pass per step: option "
                         "micro_batch is %zu, the batch %zu", step_no, opt->micro_batch, n);
    if (!parts) memset(t->packed, 0, floats * sizeof *t->packed);
    /* one part: its weights' gradients travel while the backward pass goes on */
    const int buckets = t->reducer && t->bucket && parts <= 1;
    if (buckets && plan_buckets(t)) return PDC_ERR_OUT_OF_MEMORY;
    const size_t in_per = n ? inputs->numel / n : 0, lab_per = n ? labels->numel / n : 0;
    double total = 0.0;
    pdc_status st = PDC_OK;
    net->loss_sum = 1;
    net->bn_sync = t->bn_sync;
    net->bn_sync_user = t->bn_sync_user;
    if (!parts && t->bn_sync) st = empty_with_bn_sync(t, buckets);
    for (size_t i = 0; i < parts && !st; i++) {
        const size_t at = i * micro, m = n - at < micro ? n - at : micro;
        double l;
        if ((st = tr_net_prepare(net, m)) || (st = tr_net_forward(net, inputs->data + at * in_per, opt, 1)) ||
            (st = tr_net_loss(net, opt, labels->data + at * lab_per, 1, &l, NULL)))
            break;
        if (!isfinite(l)) {
            st = pdc_error(ctx, PDC_ERR_NUMERIC, "trainer: step %llu: the loss is %s (weights unchanged)", step_no,
                           isnan(l) ? "NaN" : "infinite");
            break;
        }
        if (buckets) {
            net->layer_done = layer_done;
            net->layer_done_user = t;
        }
        st = tr_net_backward(net, opt);
        net->layer_done = NULL;
        net->layer_done_user = NULL;
        if (st) break;
        if (!buckets) pack(net, t->packed + i * floats);
        total += l * (double)m;
    }
    net->loss_sum = 0;
    net->bn_sync = NULL;
    net->bn_sync_user = NULL;
    if (st) return st;
    if (buckets) {
        if (parts || !t->bn_sync) hand_over_rest(t, parts == 0);
        if (t->bucket_st)
            return pdc_error(ctx, t->bucket_st, "trainer: step %llu: gradient reduction: %s", step_no,
                             *t->bucket_msg ? t->bucket_msg : pdc_status_string(t->bucket_st));
    }
    double samples = (double)n;
    if (t->reducer) {
        char msg[512] = "";
        if ((st = t->reducer(t->reducer_user, t->packed, floats, parts, &samples, msg, sizeof msg)))
            return pdc_error(ctx, st, "trainer: step %llu: gradient reduction: %s", step_no,
                             *msg ? msg : pdc_status_string(st));
    } else {
        tree_sum(t->packed, floats, 0, parts);
    }
    if (!(samples >= 1.0))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "trainer: step %llu: no process had samples (%g in all)", step_no,
                         samples);
    unpack(net, t->packed, (float)samples);
    *loss = n ? total / (double)n : 0.0;
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_set_reducer(pdc_trainer *trainer, pdc_gradient_reducer reducer,
                                           pdc_gradient_bucket bucket, void *user)
{
    if (!trainer) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: trainer is NULL", __func__);
    trainer->reducer = reducer;
    trainer->bucket = reducer ? bucket : NULL;
    trainer->reducer_user = reducer ? user : NULL;
    return PDC_OK;
}

PDC_API pdc_status pdc_trainer_set_batchnorm_sync(pdc_trainer *trainer, pdc_batchnorm_sync sync, void *user)
{
    if (!trainer) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: trainer is NULL", __func__);
    trainer->bn_sync = sync;
    trainer->bn_sync_user = sync ? user : NULL;
    return PDC_OK;
}
