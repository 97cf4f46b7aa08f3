/*
 * train_ops.c - forward and backward passes of single layers.
 *
 * Forward: conv and fc run the trainer's kernels (train_conv.c) unless the option kernels=ref asks for
 * the reference kernels; batchnorm in training mode normalises with batch statistics (its reference
 * kernel is the inference form); every other op runs its reference kernel (backends/ref), so the trainer
 * computes exactly what a compiled "ref" program computes.
 *
 * Backward: every function adds its contribution to the gradients of the layer's inputs (tr_grad_acc
 * gives NULL for inputs that need none). Reductions run in a fixed order, so results do not depend on
 * the number of threads.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "ir/index.h"
#include "lib/train/train.h"

#define LAYER_ERR(net, l, status, ...)                                                                           \
    (pdc_error((net)->ctx, (status), __VA_ARGS__),                                                              \
     pdc_error_prefix((net)->ctx, "trainer: layer '%s' (%s)", (l)->name, ir_op_get_info((l)->op)->name), (status))

int tr_op_supported(ir_op op) { return op < IR_OP_COUNT; }

static size_t numel_of(const tr_net *net, int t) { return ir_tensor_numel(&net->exec->tensors[t]); }

/* ------------------------------------------------------------------ activations */

typedef struct act_desc {
    ir_op op;            /* the standalone op (RELU, ..., HARDSIGMOID) */
    float lo, hi, alpha, beta;
} act_desc;

static act_desc act_of_fused(const ir_fused_params *fp)
{
    act_desc a = {IR_OP_RELU, fp->act_min, fp->act_max, fp->act_alpha, 0.0f};
    switch (fp->act) {
    case IR_ACT_CLIP: a.op = IR_OP_CLIP; break;
    case IR_ACT_LEAKY_RELU: a.op = IR_OP_LEAKY_RELU; break;
    case IR_ACT_SIGMOID: a.op = IR_OP_SIGMOID; break;
    case IR_ACT_TANH: a.op = IR_OP_TANH; break;
    case IR_ACT_HARDSWISH: a.op = IR_OP_HARDSWISH; break;
    default: break;
    }
    return a;
}

static act_desc act_of_layer(const ir_layer *l)
{
    act_desc a = {l->op, -INFINITY, INFINITY, 0.01f, 0.5f};
    if (l->op == IR_OP_CLIP) {
        a.lo = ir_attr_float(&l->attrs, "min", -INFINITY);
        a.hi = ir_attr_float(&l->attrs, "max", INFINITY);
    } else if (l->op == IR_OP_LEAKY_RELU) {
        a.alpha = ir_attr_float(&l->attrs, "alpha", 0.01f);
    } else if (l->op == IR_OP_HARDSIGMOID) {
        a.alpha = ir_attr_float(&l->attrs, "alpha", 0.2f);
        a.beta = ir_attr_float(&l->attrs, "beta", 0.5f);
    }
    return a;
}

/* out[i] (+)= dy[i] * f'(x[i]) (y = f(x) given too); out may alias dy or x. */
static void act_backward(const act_desc *a, size_t n, const float *x, const float *y, const float *dy, float *out,
                         int accumulate)
{
#define ACT_LOOP(deriv)                                                                                            \
    do {                                                                                                           \
        if (accumulate) {                                                                                          \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++) {                                                   \
                const float xv = x[i], yv = y[i];                                                                  \
                (void)xv, (void)yv;                                                                                \
                out[i] += dy[i] * (deriv);                                                                         \
            }                                                                                                      \
        } else {                                                                                                   \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++) {                                                   \
                const float xv = x[i], yv = y[i];                                                                  \
                (void)xv, (void)yv;                                                                                \
                out[i] = dy[i] * (deriv);                                                                          \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)
    const float lo = a->lo, hi = a->hi, alpha = a->alpha, beta = a->beta;
    switch (a->op) {
    case IR_OP_RELU:
        /* both operands loaded unconditionally: a select, not a branch (a conditional load would keep this
         * loop scalar, with a mispredicted branch per element) */
        if (accumulate) {
#pragma omp simd
            for (size_t i = 0; i < n; i++) {
                const float g = dy[i];
                out[i] += x[i] > 0.0f ? g : 0.0f;
            }
        } else {
#pragma omp simd
            for (size_t i = 0; i < n; i++) {
                const float g = dy[i];
                out[i] = x[i] > 0.0f ? g : 0.0f;
            }
        }
        break;
    case IR_OP_CLIP: ACT_LOOP(xv > lo && xv < hi ? 1.0f : 0.0f); break;
    case IR_OP_LEAKY_RELU: ACT_LOOP(xv >= 0.0f ? 1.0f : alpha); break;
    case IR_OP_SIGMOID: ACT_LOOP(yv * (1.0f - yv)); break;
    case IR_OP_TANH: ACT_LOOP(1.0f - yv * yv); break;
    case IR_OP_HARDSWISH: ACT_LOOP(xv < -3.0f ? 0.0f : xv > 3.0f ? 1.0f : (2.0f * xv + 3.0f) / 6.0f); break;
    case IR_OP_HARDSIGMOID: ACT_LOOP(alpha * xv + beta > 0.0f && alpha * xv + beta < 1.0f ? alpha : 0.0f); break;
    default: ACT_LOOP(1.0f); break;
    }
#undef ACT_LOOP
}

pdc_status tr_fused_forward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(net->exec, l, &fp);
    if (st || fp.act == IR_ACT_NONE) return st;
    tr_layer *lr = &net->layers[li];
    const size_t n = numel_of(net, l->outputs[0]);
    if (n > lr->pre_cap || !lr->pre) {
        float *p = pdc_alloc_aligned(net->ctx, n, sizeof *p);
        if (!p) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(lr->pre);
        lr->pre = p;
        lr->pre_cap = n;
    }
    float *y = net->val[l->outputs[0]];
    memcpy(lr->pre, y, n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = ir_act_apply(&fp, y[i]);
    return PDC_OK;
}

pdc_status tr_fused_backward(tr_net *net, size_t li, const float **dy)
{
    const ir_layer *l = &net->exec->layers[li];
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(net->exec, l, &fp);
    if (st || fp.act == IR_ACT_NONE) return st;
    /* the pre-activation buffer becomes d(pre-activation): it is not needed after this */
    float *pre = net->layers[li].pre;
    const act_desc a = act_of_fused(&fp);
    act_backward(&a, numel_of(net, l->outputs[0]), pre, net->val[l->outputs[0]], *dy, pre, 0);
    *dy = pre;
    return PDC_OK;
}

/* ------------------------------------------------------------------ batchnorm */

typedef struct bn_geom {
    size_t n, c, sp;
    double eps;
} bn_geom;

static void bn_geom_get(const tr_net *net, const ir_layer *l, bn_geom *g)
{
    const ir_tensor *t = &net->exec->tensors[l->inputs[0]];
    g->n = (size_t)t->dims[0];
    g->c = t->rank > 1 ? (size_t)t->dims[1] : 1;
    g->sp = 1;
    for (int i = 2; i < t->rank; i++) g->sp *= (size_t)t->dims[i];
    g->eps = (double)ir_attr_float(&l->attrs, "epsilon", 1e-5f);
}

/* Per-channel sums of n doubles summed over every process by the batchnorm sync (option of data-parallel
 * training, pdc_trainer_set_batchnorm_sync); a no-op without one. */
static pdc_status bn_sync(tr_net *net, const ir_layer *l, double *sums, size_t n)
{
    if (!net->bn_sync) return PDC_OK;
    char msg[512] = "";
    const pdc_status st = net->bn_sync(net->bn_sync_user, sums, n, msg, sizeof msg);
    return st ? LAYER_ERR(net, l, st, "synchronising batch statistics: %s", *msg ? msg : pdc_status_string(st)) : PDC_OK;
}

/* net->bn_tmp holds at least n doubles. */
static pdc_status bn_tmp(tr_net *net, size_t n)
{
    if (n <= net->bn_tmp_cap) return PDC_OK;
    double *t = pdc_alloc(net->ctx, n * sizeof *t);
    if (!t) return PDC_ERR_OUT_OF_MEMORY;
    pdc_free(net->bn_tmp);
    net->bn_tmp = t;
    net->bn_tmp_cap = n;
    return PDC_OK;
}

/* Training mode: normalise with the batch's mean and (biased) variance - over every process's batch with a
 * batchnorm sync; aux keeps per channel the mean, 1/sqrt(var + eps) and the unbiased variance for the
 * running statistics (tr_net_commit_bn), bn_count the number of values the statistics are over. */
static pdc_status bn_forward_train(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    tr_layer *lr = &net->layers[li];
    bn_geom g;
    bn_geom_get(net, l, &g);
    if (3 * g.c > lr->aux_cap || !lr->aux) {
        float *a = pdc_alloc(net->ctx, 3 * g.c * sizeof *a);
        if (!a) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(lr->aux);
        lr->aux = a;
        lr->aux_cap = 3 * g.c;
    }
    pdc_status st = bn_tmp(net, 2 * g.c + 1);
    if (st) return st;
    const float *x = net->val[l->inputs[0]], *scale = net->val[l->inputs[1]], *bias = net->val[l->inputs[2]];
    float *y = net->val[l->outputs[0]];
    double *sum = net->bn_tmp, *sq = net->bn_tmp + g.c + 1;
    /* one thread per channel, sums in double in vector lanes (a fixed order whatever the thread count) */
    const int nt = g.n * g.c * g.sp >= ((size_t)1 << 16) ? net->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t c = 0; c < g.c; c++) {
        double s = 0.0;
        for (size_t i = 0; i < g.n; i++) {
            const float *xp = x + (i * g.c + c) * g.sp;
#pragma omp simd reduction(+ : s)
            for (size_t k = 0; k < g.sp; k++) s += (double)xp[k];
        }
        sum[c] = s;
    }
    sum[g.c] = (double)(g.n * g.sp);
    if ((st = bn_sync(net, l, sum, g.c + 1))) return st;
    const double cnt = sum[g.c];
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t c = 0; c < g.c; c++) {
        const double mean = sum[c] / cnt;
        double q = 0.0;
        for (size_t i = 0; i < g.n; i++) {
            const float *xp = x + (i * g.c + c) * g.sp;
#pragma omp simd reduction(+ : q)
            for (size_t k = 0; k < g.sp; k++) q += ((double)xp[k] - mean) * ((double)xp[k] - mean);
        }
        sq[c] = q;
    }
    if ((st = bn_sync(net, l, sq, g.c))) return st;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t c = 0; c < g.c; c++) {
        const double mean = sum[c] / cnt, q = sq[c];
        const double var = q / cnt, inv = 1.0 / sqrt(var + g.eps);
        lr->aux[c] = (float)mean;
        lr->aux[g.c + c] = (float)inv;
        lr->aux[2 * g.c + c] = (float)(cnt > 1 ? q / (cnt - 1) : var);
        const double sc = (double)scale[c] * inv, be = (double)bias[c];
        for (size_t i = 0; i < g.n; i++) {
            const float *xp = x + (i * g.c + c) * g.sp;
            float *yp = y + (i * g.c + c) * g.sp;
            for (size_t k = 0; k < g.sp; k++) yp[k] = (float)(sc * ((double)xp[k] - mean) + be);
        }
    }
    lr->bn_count = cnt;
    return PDC_OK;
}

void tr_net_commit_bn(tr_net *net, const tr_options *opt)
{
    const double mom = opt->bn_momentum;
    for (size_t li = 0; li < net->exec->n_layers; li++) {
        const ir_layer *l = &net->exec->layers[li];
        if (l->op != IR_OP_BATCHNORM || !net->layers[li].aux) continue;
        bn_geom g;
        bn_geom_get(net, l, &g);
        float *mean = net->val[l->inputs[3]], *var = net->val[l->inputs[4]];
        const float *aux = net->layers[li].aux;
        for (size_t c = 0; c < g.c; c++) {
            mean[c] = (float)((1.0 - mom) * (double)mean[c] + mom * (double)aux[c]);
            var[c] = (float)((1.0 - mom) * (double)var[c] + mom * (double)aux[2 * g.c + c]);
        }
    }
}

static pdc_status bn_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const tr_layer *lr = &net->layers[li];
    if (!lr->aux) return LAYER_ERR(net, l, PDC_ERR_INTERNAL, "backward without a training forward pass");
    bn_geom g;
    bn_geom_get(net, l, &g);
    pdc_status st = bn_tmp(net, 4 * g.c);
    if (st) return st;
    const float *x = net->val[l->inputs[0]], *scale = net->val[l->inputs[1]], *dy = net->grad[l->outputs[0]];
    float *dx = tr_grad_acc(net, l->inputs[0]), *dscale = tr_grad_acc(net, l->inputs[1]);
    float *dbias = tr_grad_acc(net, l->inputs[2]);
    const double cnt = lr->bn_count;
    /* sdy, sdyx: this process's sums (the weight gradients: the gradient reducer sums those over the
     * processes); all: every process's (the input gradient through the shared statistics) */
    double *sdy = net->bn_tmp, *sdyx = sdy + g.c, *all = sdy + 2 * g.c;
    /* one thread per channel, sums in double in vector lanes (a fixed order whatever the thread count) */
    const int nt = g.n * g.c * g.sp >= ((size_t)1 << 16) ? net->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t c = 0; c < g.c; c++) {
        const double mean = (double)lr->aux[c], inv = (double)lr->aux[g.c + c];
        double a = 0.0, b = 0.0;
        for (size_t i = 0; i < g.n; i++) {
            const float *xp = x + (i * g.c + c) * g.sp, *dp = dy + (i * g.c + c) * g.sp;
#pragma omp simd reduction(+ : a, b)
            for (size_t k = 0; k < g.sp; k++) {
                a += (double)dp[k];
                b += (double)dp[k] * ((double)xp[k] - mean) * inv;
            }
        }
        sdy[c] = a;
        sdyx[c] = b;
        if (dscale) dscale[c] += (float)b;
        if (dbias) dbias[c] += (float)a;
    }
    memcpy(all, sdy, 2 * g.c * sizeof *all);
    if ((st = bn_sync(net, l, all, 2 * g.c))) return st;
    if (!dx) return PDC_OK;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t c = 0; c < g.c; c++) {
        const double mean = (double)lr->aux[c], inv = (double)lr->aux[g.c + c];
        const double k1 = (double)scale[c] * inv / cnt, a = all[c], b = all[g.c + c];
        for (size_t i = 0; i < g.n; i++) {
            const float *xp = x + (i * g.c + c) * g.sp, *dp = dy + (i * g.c + c) * g.sp;
            float *dxp = dx + (i * g.c + c) * g.sp;
            for (size_t k = 0; k < g.sp; k++) {
                const double xh = ((double)xp[k] - mean) * inv;
                dxp[k] += (float)(k1 * (cnt * (double)dp[k] - a - xh * b));
            }
        }
    }
    return PDC_OK;
}

/* A process without samples in a step takes part in every batchnorm sync of the others' step with zeros:
 * forward (li < 0): every batchnorm layer's two syncs in layer order; backward: layer li's, if it has one. */
pdc_status tr_bn_sync_empty(tr_net *net, long li)
{
    const ir_model *m = net->exec;
    for (size_t k = li < 0 ? 0 : (size_t)li; k < (li < 0 ? m->n_layers : (size_t)li + 1); k++) {
        const ir_layer *l = &m->layers[k];
        if (l->op != IR_OP_BATCHNORM) continue;
        if (li >= 0 && (l->outputs[0] < 0 || !net->needs_grad[l->outputs[0]])) continue;
        const ir_tensor *t = &net->model->tensors[l->inputs[0]];
        const size_t c = t->rank > 1 ? (size_t)t->dims[1] : 1;
        pdc_status st = bn_tmp(net, 2 * c + 1);
        if (st) return st;
        /* forward: the sums and the count, then the squared deviations; backward: both gradient sums */
        for (int call = 0; call < (li < 0 ? 2 : 1); call++) {
            memset(net->bn_tmp, 0, (2 * c + 1) * sizeof *net->bn_tmp);
            if ((st = bn_sync(net, l, net->bn_tmp, li >= 0 ? 2 * c : call ? c : c + 1))) return st;
        }
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ add, sub, mul, div */

static pdc_status binary_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const ir_tensor *ta = &net->exec->tensors[l->inputs[0]], *tb = &net->exec->tensors[l->inputs[1]];
    const ir_tensor *ty = &net->exec->tensors[l->outputs[0]];
    const int r = ty->rank;
    int64_t s[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    ir_broadcast_strides(ta->rank, ta->dims, r, ty->dims, 1, s[0]);
    ir_broadcast_strides(tb->rank, tb->dims, r, ty->dims, 1, s[1]);
    const float *a = net->val[l->inputs[0]], *b = net->val[l->inputs[1]], *dy = net->grad[l->outputs[0]];
    const size_t n = ir_tensor_numel(ty);
    if ((l->op == IR_OP_ADD || l->op == IR_OP_SUB) && ir_tensor_numel(ta) == n && ir_tensor_numel(tb) == n &&
        l->inputs[0] != l->inputs[1]) {
        /* no broadcasting (a residual add): each gradient is dy (or -dy), copied where it is the first write */
        for (int j = 0; j < 2; j++) {
            int acc;
            float *d = tr_grad_out(net, l->inputs[j], &acc);
            if (!d) continue;
            const float sign = j == 1 && l->op == IR_OP_SUB ? -1.0f : 1.0f;
            if (acc)
                for (size_t i = 0; i < n; i++) d[i] += sign * dy[i];
            else if (sign > 0)
                memcpy(d, dy, n * sizeof *d);
            else
                for (size_t i = 0; i < n; i++) d[i] = -dy[i];
        }
        return PDC_OK;
    }
    float *da = tr_grad_acc(net, l->inputs[0]), *db = tr_grad_acc(net, l->inputs[1]);
    const ir_op op = l->op;
    for (size_t i = 0; i < n; i++) {
        const float g = dy[i];
        const int64_t oa = off[0], ob = off[1];
        switch (op) {
        case IR_OP_ADD:
            if (da) da[oa] += g;
            if (db) db[ob] += g;
            break;
        case IR_OP_SUB:
            if (da) da[oa] += g;
            if (db) db[ob] -= g;
            break;
        case IR_OP_MUL:
            if (da) da[oa] += g * b[ob];
            if (db) db[ob] += g * a[oa];
            break;
        default: /* div */
            if (da) da[oa] += g / b[ob];
            if (db) db[ob] -= g * a[oa] / (b[ob] * b[ob]);
            break;
        }
        ir_index_next(r, ty->dims, idx, 2, s, off);
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ data movement */

static pdc_status concat_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const ir_tensor *ty = &net->exec->tensors[l->outputs[0]];
    int axis;
    pdc_status st = ir_axis_get(net->exec, l, ir_attr_int(&l->attrs, "axis", 0), ty->rank, &axis);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= ty->dims[i];
    for (int i = axis + 1; i < ty->rank; i++) inner *= ty->dims[i];
    const float *dy = net->grad[l->outputs[0]];
    const int64_t row = ty->dims[axis] * inner;
    int64_t at = 0;
    for (size_t j = 0; j < l->n_inputs; j++) {
        const int64_t chunk = net->exec->tensors[l->inputs[j]].dims[axis] * inner;
        float *dx = tr_grad_acc(net, l->inputs[j]);
        if (dx)
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < chunk; k++) dx[o * chunk + k] += dy[o * row + at + k];
        at += chunk;
    }
    return PDC_OK;
}

static pdc_status copy_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    int acc;
    float *dx = tr_grad_out(net, l->inputs[0], &acc);
    const float *dy = net->grad[l->outputs[0]];
    const size_t n = numel_of(net, l->outputs[0]);
    if (dx && !acc) memcpy(dx, dy, n * sizeof *dx);
    else if (dx)
#pragma omp simd
        for (size_t i = 0; i < n; i++) dx[i] += dy[i];
    return PDC_OK;
}

static pdc_status transpose_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const ir_tensor *tx = &net->exec->tensors[l->inputs[0]], *ty = &net->exec->tensors[l->outputs[0]];
    float *dx = tr_grad_acc(net, l->inputs[0]);
    if (!dx) return PDC_OK;
    const int r = tx->rank;
    size_t np = 0;
    const int64_t *perm_attr = ir_attr_ints(&l->attrs, "perm", &np);
    int64_t perm[PDC_MAX_RANK], s[1][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off = 0;
    for (int i = 0; i < r; i++) perm[i] = perm_attr ? perm_attr[i] : r - 1 - i;
    ir_transpose_strides(r, tx->dims, perm, s[0]);
    const float *dy = net->grad[l->outputs[0]];
    const size_t n = ir_tensor_numel(ty);
    for (size_t i = 0; i < n; i++) {
        dx[off] += dy[i];
        ir_index_next(r, ty->dims, idx, 1, s, &off);
    }
    return PDC_OK;
}

static pdc_status softmax_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const ir_tensor *t = &net->exec->tensors[l->inputs[0]];
    float *dx = tr_grad_acc(net, l->inputs[0]);
    if (!dx) return PDC_OK;
    int axis;
    pdc_status st = ir_axis_get(net->exec, l, ir_attr_int(&l->attrs, "axis", -1), t->rank, &axis);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    const int64_t len = t->dims[axis];
    for (int i = 0; i < axis; i++) outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
    const float *y = net->val[l->outputs[0]], *dy = net->grad[l->outputs[0]];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            const int64_t base = o * len * inner + in;
            double s = 0.0;
            for (int64_t k = 0; k < len; k++) s += (double)dy[base + k * inner] * (double)y[base + k * inner];
            for (int64_t k = 0; k < len; k++)
                dx[base + k * inner] += (float)((double)y[base + k * inner] * ((double)dy[base + k * inner] - s));
        }
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ pooling */

/* Max pooling's forward pass (the reference kernel's result: the first maximal tap of the window, 0 for a window
 * with no input in it), keeping in training where each maximum came from, so the backward pass is one add per
 * output instead of a second walk over every window. One thread per plane. */
static pdc_status maxpool_forward(tr_net *net, size_t li, int training)
{
    const ir_layer *l = &net->exec->layers[li];
    tr_layer *lr = &net->layers[li];
    ir_window_params p;
    pdc_status st = ir_window_params_get(net->exec, l, &p);
    if (st) return st;
    ir_window_params_as_3d(&p);
    const int64_t *in = p.in, *out = p.out, *k = p.k, *s = p.stride, *pb = p.pad_begin, *d = p.dil;
    const int64_t planes = p.n * p.c, in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2];
    if (in_sp > INT32_MAX) return LAYER_ERR(net, l, PDC_ERR_OVERFLOW, "planes of more than 2^31 elements");
    const size_t total = (size_t)(planes * out_sp);
    if (training && (total > lr->argmax_cap || !lr->argmax)) {
        int32_t *a = pdc_alloc(net->ctx, (total ? total : 1) * sizeof *a);
        if (!a) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(lr->argmax);
        lr->argmax = a;
        lr->argmax_cap = total;
    }
    const float *x = net->val[l->inputs[0]];
    float *y = net->val[l->outputs[0]];
    int32_t *am = training ? lr->argmax : NULL;
    const int nt = total * (size_t)(k[0] * k[1] * k[2]) >= ((size_t)1 << 16) ? net->threads : 1;
    /* 2-D windows wholly inside the input (ResNet's 3x3/2 pooling: all but the first row and column) take the same
     * taps in the same order without the bounds checks and 64-bit index arithmetic per tap (3% of a ResNet-18 step) */
    const int flat = in[0] == 1 && k[0] == 1 && out[0] == 1 && pb[0] == 0;
    int64_t r_lo = 0, r_hi = 0, c_lo = 0, c_hi = 0; /* interior outputs: [r_lo, r_hi) x [c_lo, c_hi) */
    if (flat) {
        /* first window starting at or after 0; last whose last tap is before the end */
        const int64_t rn = in[1] + pb[1] - (k[1] - 1) * d[1] - 1, cn = in[2] + pb[2] - (k[2] - 1) * d[2] - 1;
        r_lo = (pb[1] + s[1] - 1) / s[1], c_lo = (pb[2] + s[2] - 1) / s[2];
        r_hi = rn < 0 ? 0 : rn / s[1] + 1, c_hi = cn < 0 ? 0 : cn / s[2] + 1;
        if (r_hi > out[1]) r_hi = out[1];
        if (c_hi > out[2]) c_hi = out[2];
    }
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_sp;
        float *yp = y + pl * out_sp;
        int32_t *ap = am ? am + pl * out_sp : NULL;
        for (int64_t z = 0; z < out[0]; z++)
            for (int64_t r = 0; r < out[1]; r++)
                for (int64_t c = 0; c < out[2]; c++) {
                    if (flat && r >= r_lo && r < r_hi && c >= c_lo && c < c_hi) {
                        const int32_t i0 = (int32_t)((r * s[1] - pb[1]) * in[2] + c * s[2] - pb[2]);
                        const int32_t rs = (int32_t)(d[1] * in[2]), cs = (int32_t)d[2];
                        const int32_t kh = (int32_t)k[1], kw = (int32_t)k[2];
                        int32_t at = i0;
                        float mx = xp[i0];
                        for (int32_t kr = 0; kr < kh; kr++)
                            for (int32_t kc = 0; kc < kw; kc++) {
                                const int32_t i = i0 + kr * rs + kc * cs;
                                const float v = xp[i];
                                const int take = v > mx; /* the first tap is taken above, as below */
                                mx = take ? v : mx;
                                at = take ? i : at;
                            }
                        yp[r * out[2] + c] = mx;
                        if (ap) ap[r * out[2] + c] = at;
                        continue;
                    }
                    int64_t best = -1;
                    float mx = 0.0f;
                    for (int64_t kz = 0; kz < k[0]; kz++) {
                        const int64_t iz = z * s[0] - pb[0] + kz * d[0];
                        if (iz < 0 || iz >= in[0]) continue;
                        for (int64_t kr = 0; kr < k[1]; kr++) {
                            const int64_t ir = r * s[1] - pb[1] + kr * d[1];
                            if (ir < 0 || ir >= in[1]) continue;
                            const float *row = xp + (iz * in[1] + ir) * in[2];
                            for (int64_t kc = 0; kc < k[2]; kc++) {
                                const int64_t ic = c * s[2] - pb[2] + kc * d[2];
                                if (ic < 0 || ic >= in[2]) continue;
                                /* selects, not branches: which tap wins is data, and mispredicted */
                                const float v = row[ic];
                                const int take = best < 0 || v > mx;
                                mx = take ? v : mx;
                                best = take ? (iz * in[1] + ir) * in[2] + ic : best;
                            }
                        }
                    }
                    const int64_t o = (z * out[1] + r) * out[2] + c;
                    yp[o] = best < 0 ? 0.0f : mx;
                    if (ap) ap[o] = (int32_t)best;
                }
    }
    lr->argmax_valid = training;
    return PDC_OK;
}

static pdc_status pool_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    float *dx = tr_grad_acc(net, l->inputs[0]);
    if (!dx) return PDC_OK;
    const tr_layer *lr = &net->layers[li];
    if (l->op == IR_OP_MAXPOOL && lr->argmax_valid) {
        /* each output's gradient to where its maximum came from, outputs in order (as the walk below) */
        const ir_tensor *ti = &net->exec->tensors[l->inputs[0]], *to = &net->exec->tensors[l->outputs[0]];
        const size_t planes = (size_t)(ti->dims[0] * ti->dims[1]), in_sp = ir_tensor_numel(ti) / planes,
                     out_sp = ir_tensor_numel(to) / planes;
        const float *dy = net->grad[l->outputs[0]];
        const int nt = planes * out_sp >= ((size_t)1 << 16) ? net->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (size_t pl = 0; pl < planes; pl++) {
            const int32_t *ap = lr->argmax + pl * out_sp;
            const float *dyp = dy + pl * out_sp;
            float *dxp = dx + pl * in_sp;
            for (size_t o = 0; o < out_sp; o++)
                if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
        }
        return PDC_OK;
    }
    ir_window_params p;
    pdc_status st = ir_window_params_get(net->exec, l, &p);
    if (st) return st;
    const int is_max = l->op == IR_OP_MAXPOOL;
    ir_window_params_as_3d(&p);
    const int64_t *in = p.in, *out = p.out, *k = p.k, *s = p.stride, *pb = p.pad_begin, *pe = p.pad_end, *d = p.dil;
    const float *x = net->val[l->inputs[0]], *dy = net->grad[l->outputs[0]];
    const int64_t planes = p.n * p.c, in_sp = in[0] * in[1] * in[2], out_sp = out[0] * out[1] * out[2];
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_sp;
        float *dxp = dx + pl * in_sp;
        const float *dyp = dy + pl * out_sp;
        for (int64_t z = 0; z < out[0]; z++)
            for (int64_t r = 0; r < out[1]; r++)
                for (int64_t c = 0; c < out[2]; c++) {
                    /* the same walk as the reference kernel: the first maximal tap wins */
                    int64_t valid = 0, padded = 0, best = -1;
                    float mx = -FLT_MAX;
                    for (int pass = 0; pass < 2; pass++) {
                        const float g = dyp[(z * out[1] + r) * out[2] + c];
                        const double share = pass == 1 && !is_max && valid
                                                 ? (double)g / (double)(p.count_include_pad ? padded : valid)
                                                 : 0.0;
                        for (int64_t kz = 0; kz < k[0]; kz++) {
                            const int64_t iz = z * s[0] - pb[0] + kz * d[0];
                            if (iz >= in[0] + pe[0]) continue;
                            const int vz = iz >= 0 && iz < in[0];
                            for (int64_t kr = 0; kr < k[1]; kr++) {
                                const int64_t ir = r * s[1] - pb[1] + kr * d[1];
                                if (ir >= in[1] + pe[1]) continue;
                                const int vr = ir >= 0 && ir < in[1];
                                for (int64_t kc = 0; kc < k[2]; kc++) {
                                    const int64_t ic = c * s[2] - pb[2] + kc * d[2];
                                    if (ic >= in[2] + pe[2]) continue;
                                    if (pass == 0) padded++;
                                    if (!vz || !vr || ic < 0 || ic >= in[2]) continue;
                                    const int64_t at = (iz * in[1] + ir) * in[2] + ic;
                                    if (pass == 0) {
                                        valid++;
                                        if (xp[at] > mx || valid == 1) {
                                            mx = xp[at];
                                            best = at;
                                        }
                                    } else if (!is_max) {
                                        dxp[at] += (float)share;
                                    }
                                }
                            }
                        }
                        if (pass == 0 && is_max) {
                            if (best >= 0) dxp[best] += g;
                            break;
                        }
                    }
                }
    }
    return PDC_OK;
}

static pdc_status global_avgpool_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    float *dx = tr_grad_acc(net, l->inputs[0]);
    if (!dx) return PDC_OK;
    const ir_tensor *t = &net->exec->tensors[l->inputs[0]];
    int64_t planes = t->dims[0] * t->dims[1], sp = 1;
    for (int i = 2; i < t->rank; i++) sp *= t->dims[i];
    const float *dy = net->grad[l->outputs[0]];
    for (int64_t pl = 0; pl < planes; pl++) {
        const float g = (float)((double)dy[pl] / (double)sp);
        for (int64_t i = 0; i < sp; i++) dx[pl * sp + i] += g;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ gemm, matmul */

static pdc_status gemm_backward(tr_net *net, size_t li, const float *dy)
{
    const ir_layer *l = &net->exec->layers[li];
    ir_gemm_params p;
    pdc_status st = ir_gemm_params_get(net->exec, l, &p);
    if (st) return st;
    const float *a = net->val[l->inputs[0]], *b = net->val[l->inputs[1]];
    float *da = tr_grad_acc(net, l->inputs[0]), *db = tr_grad_acc(net, l->inputs[1]);
    const int has_c = l->n_inputs > 2 && l->inputs[2] >= 0;
    float *dc = has_c ? tr_grad_acc(net, l->inputs[2]) : NULL;
    const int64_t M = p.m, N = p.n, K = p.k;
    const double alpha = (double)p.alpha;
    if (da) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t kk = 0; kk < K; kk++) {
                double s = 0.0;
                for (int64_t j = 0; j < N; j++)
                    s += (double)dy[i * N + j] * (double)(p.trans_b ? b[j * K + kk] : b[kk * N + j]);
                da[p.trans_a ? kk * M + i : i * K + kk] += (float)(alpha * s);
            }
    }
    if (db) {
        for (int64_t kk = 0; kk < K; kk++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0.0;
                for (int64_t i = 0; i < M; i++)
                    s += (double)(p.trans_a ? a[kk * M + i] : a[i * K + kk]) * (double)dy[i * N + j];
                db[p.trans_b ? j * K + kk : kk * N + j] += (float)(alpha * s);
            }
    }
    if (dc) {
        const ir_tensor *ct = &net->exec->tensors[l->inputs[2]];
        int64_t cm = 1, cn = 1;
        if (ct->rank >= 1) cn = ct->dims[ct->rank - 1];
        if (ct->rank == 2) cm = ct->dims[0];
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                dc[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] += (float)((double)p.beta * (double)dy[i * N + j]);
    }
    return PDC_OK;
}

static pdc_status matmul_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const ir_tensor *ta = &net->exec->tensors[l->inputs[0]], *tb = &net->exec->tensors[l->inputs[1]];
    const ir_tensor *ty = &net->exec->tensors[l->outputs[0]];
    const int64_t M = ta->dims[ta->rank - 2], K = ta->dims[ta->rank - 1], N = tb->dims[tb->rank - 1];
    const int nb = ty->rank - 2;
    int64_t bs[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    ir_broadcast_strides(ta->rank - 2, ta->dims, nb, ty->dims, M * K, bs[0]);
    ir_broadcast_strides(tb->rank - 2, tb->dims, nb, ty->dims, K * N, bs[1]);
    int64_t batches = 1;
    for (int i = 0; i < nb; i++) batches *= ty->dims[i];
    const float *a = net->val[l->inputs[0]], *b = net->val[l->inputs[1]], *dy = net->grad[l->outputs[0]];
    float *da = tr_grad_acc(net, l->inputs[0]), *db = tr_grad_acc(net, l->inputs[1]);
    for (int64_t bi = 0; bi < batches; bi++) {
        const float *dyb = dy + bi * M * N;
        const int64_t oa = off[0], ob = off[1];
        if (da)
            for (int64_t i = 0; i < M; i++)
                for (int64_t kk = 0; kk < K; kk++) {
                    double s = 0.0;
                    for (int64_t j = 0; j < N; j++) s += (double)dyb[i * N + j] * (double)b[ob + kk * N + j];
                    da[oa + i * K + kk] += (float)s;
                }
        if (db)
            for (int64_t kk = 0; kk < K; kk++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0.0;
                    for (int64_t i = 0; i < M; i++) s += (double)a[oa + i * K + kk] * (double)dyb[i * N + j];
                    db[ob + kk * N + j] += (float)s;
                }
        ir_index_next(nb, ty->dims, idx, 2, bs, off);
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ dispatch */

static ref_kernel ref_kernel_of(ir_op op)
{
    switch (op) {
    case IR_OP_CONV: return ref_conv;
    case IR_OP_FC:
    case IR_OP_GEMM: return ref_gemm;
    case IR_OP_MATMUL: return ref_matmul;
    case IR_OP_BATCHNORM: return ref_batchnorm;
    IR_CASE_ACTIVATION: return ref_unary;
    case IR_OP_ADD:
    case IR_OP_MUL:
    case IR_OP_SUB:
    case IR_OP_DIV: return ref_binary;
    case IR_OP_CONCAT: return ref_concat;
    case IR_OP_MAXPOOL:
    case IR_OP_AVGPOOL: return ref_pool;
    case IR_OP_GLOBAL_AVGPOOL: return ref_global_avgpool;
    case IR_OP_FLATTEN:
    case IR_OP_RESHAPE: return ref_copy;
    case IR_OP_TRANSPOSE: return ref_transpose;
    case IR_OP_SOFTMAX: return ref_softmax;
    default: return NULL;
    }
}

pdc_status tr_op_forward(tr_net *net, size_t li, const tr_options *opt, int training)
{
    const ir_layer *l = &net->exec->layers[li];
    if (l->op == IR_OP_BATCHNORM && training) return bn_forward_train(net, li);
    if (l->op == IR_OP_MAXPOOL && opt->kernels != TR_KERNELS_REF) return maxpool_forward(net, li, training);
    if ((l->op == IR_OP_CONV || l->op == IR_OP_FC) && opt->kernels != TR_KERNELS_REF) return tr_dense_forward(net, li);
    if (l->op == IR_OP_LSTM || l->op == IR_OP_GRU) return tr_rnn_forward(net, li); /* keeps what backward needs */
    if (opt->kernels == TR_KERNELS_CPU && cpu_eltwise_has(net->cpu, li))
        return cpu_eltwise_run(net->cpu, net->exec, li, net->val);
    if (l->op == IR_OP_RELU && opt->kernels == TR_KERNELS_NATIVE) { /* the reference kernel's formula, vectorised */
        const float *x = net->val[l->inputs[0]];
        float *y = net->val[l->outputs[0]];
        const size_t n = numel_of(net, l->outputs[0]);
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i]; /* NaN stays NaN */
        return PDC_OK;
    }
    const ref_kernel k = ref_kernel_of(l->op);
    if (!k) return LAYER_ERR(net, l, PDC_ERR_UNSUPPORTED, "no forward kernel");
    pdc_status st = k(net->exec, l, net->val);
    if (st) return st;
    const int pi = l->op == IR_OP_CONV || l->op == IR_OP_FC ? net->layers[li].w_param : -1;
    if (pi >= 0 && net->params[pi].sparse) /* the sparse backward reads the kept weights packed, as tr_dense_forward does */
        tr_csr_pack(net, &net->params[pi], net->val[l->inputs[1]]);
    /* the fused activation of conv/fc/gemm keeps its input for the backward pass */
    return tr_fused_forward(net, li);
}

pdc_status tr_op_backward(tr_net *net, size_t li, const tr_options *opt)
{
    (void)opt;
    const ir_layer *l = &net->exec->layers[li];
    const float *dy = net->grad[l->outputs[0]];
    switch (l->op) {
    case IR_OP_CONV:
    case IR_OP_FC: return tr_dense_backward(net, li);
    case IR_OP_GEMM: {
        pdc_status st = tr_fused_backward(net, li, &dy);
        return st ? st : gemm_backward(net, li, dy);
    }
    case IR_OP_MATMUL: return matmul_backward(net, li);
    case IR_OP_BATCHNORM: return bn_backward(net, li);
    IR_CASE_ACTIVATION: {
        int acc;
        float *dx = tr_grad_out(net, l->inputs[0], &acc);
        if (dx) {
            const act_desc a = act_of_layer(l);
            act_backward(&a, numel_of(net, l->outputs[0]), net->val[l->inputs[0]], net->val[l->outputs[0]], dy, dx, acc);
        }
        return PDC_OK;
    }
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV: return binary_backward(net, li);
    case IR_OP_CONCAT: return concat_backward(net, li);
    case IR_OP_MAXPOOL:
    case IR_OP_AVGPOOL: return pool_backward(net, li);
    case IR_OP_GLOBAL_AVGPOOL: return global_avgpool_backward(net, li);
    case IR_OP_FLATTEN:
    case IR_OP_RESHAPE: return copy_backward(net, li);
    case IR_OP_TRANSPOSE: return transpose_backward(net, li);
    case IR_OP_SOFTMAX: return softmax_backward(net, li);
    case IR_OP_LSTM:
    case IR_OP_GRU: return tr_rnn_backward(net, li);
    default: return LAYER_ERR(net, l, PDC_ERR_UNSUPPORTED, "no backward pass");
    }
}
