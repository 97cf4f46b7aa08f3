/*
 * plan.c - pruning planned to a latency budget (pdc_model_plan, `pdc plan`; docs/predict.md).
 *
 * Each prunable layer gets a short list of choices, "dense" first: a 3x3 conv that pattern pruning
 * takes (not the stem) 8 patterns of 4 entries with connectivity 0, 25, 50, 62.5, 75 or 87.5%; an
 * fc / matmul by a constant, an lstm or a gru 1x4 blocks with 50, 62.5, 75, 87.5 or 93.75% removed.
 * Each choice has a predicted time (the latency model on the facts that choice would give the layer)
 * and a loss: the share of the layer's squared weight magnitude it removes, computed with the very
 * projections the prune passes run. The plan minimises the sum of the losses subject to the sum of
 * the predicted times <= the budget: a multiple-choice knapsack, solved exactly by dynamic
 * programming over the time axis cut into COST_PLAN_STEPS steps, each choice's time rounded up to a
 * whole step (so a plan found always meets the budget by prediction).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cost/plan.h"
#include "passes/project.h"

#define COST_PLAN_STEPS 4000

static const double conn_rates[] = {0.0, 0.25, 0.5, 0.625, 0.75, 0.875};
static const double block_rates[] = {0.5, 0.625, 0.75, 0.875, 0.9375};
#define N_CONN (sizeof conn_rates / sizeof conn_rates[0])
#define N_BLOCK (sizeof block_rates / sizeof block_rates[0])

pdc_status cost_plan_solve(const pdc_context *ctx, size_t n, const size_t *n_choices, const double *const *time,
                           const double *const *loss, double budget, size_t *choice, int *feasible)
{
    /* fastest choice per layer: the answer when nothing meets the budget */
    double fastest = 0;
    for (size_t l = 0; l < n; l++) {
        size_t best = 0;
        for (size_t c = 1; c < n_choices[l]; c++)
            if (time[l][c] < time[l][best] || (time[l][c] == time[l][best] && loss[l][c] < loss[l][best])) best = c;
        choice[l] = best;
        fastest += time[l][best];
    }
    *feasible = 0;
    if (!(budget > 0) || fastest > budget) return PDC_OK;
    const size_t S = COST_PLAN_STEPS;
    double unit = budget / (double)S;
    double *dp = pdc_alloc(ctx, (S + 1) * sizeof *dp), *nx = pdc_alloc(ctx, (S + 1) * sizeof *nx);
    uint8_t *pick = n ? pdc_alloc(ctx, n * (S + 1)) : NULL;
    if (!dp || !nx || (n && !pick)) {
        pdc_free(dp);
        pdc_free(nx);
        pdc_free(pick);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    /* dp[s]: least loss of the layers so far within s steps */
    for (size_t s = 0; s <= S; s++) dp[s] = 0;
    for (size_t l = 0; l < n; l++) {
        for (size_t s = 0; s <= S; s++) {
            nx[s] = INFINITY;
            pick[l * (S + 1) + s] = 0;
        }
        for (size_t c = 0; c < n_choices[l]; c++) {
            double steps = ceil(time[l][c] / unit - 1e-9);
            if (steps < 0) steps = 0;
            if (steps > (double)S) continue;
            size_t k = (size_t)steps;
            for (size_t s = k; s <= S; s++) {
                double v = dp[s - k] + loss[l][c];
                if (v < nx[s]) {
                    nx[s] = v;
                    pick[l * (S + 1) + s] = (uint8_t)c;
                }
            }
        }
        double *t = dp;
        dp = nx;
        nx = t;
    }
    if (isfinite(dp[S])) {
        *feasible = 1;
        size_t s = S;
        for (size_t l = n; l-- > 0;) {
            size_t c = pick[l * (S + 1) + s];
            choice[l] = c;
            s -= (size_t)ceil(time[l][c] / unit - 1e-9 < 0 ? 0 : ceil(time[l][c] / unit - 1e-9));
        }
    }
    pdc_free(dp);
    pdc_free(nx);
    pdc_free(pick);
    return PDC_OK;
}

/* squared norms of the kernels (pattern) or blocks of a candidate, and their ranking */
static double sq(double x) { return x * x; }

/* Loss (share of ||w||^2 removed) of each connectivity rate after the 8x4 pattern projection, and the kept
 * weight counts. */
static pdc_status conv_choices(const ir_model *m, const ir_tensor *w, const char *who, double *loss, size_t *kept)
{
    const pdc_context *ctx = m->ctx;
    int64_t o = w->dims[0], c = w->dims[1], kh = w->dims[2], kw = w->dims[3];
    size_t nk = (size_t)(o * c), win = (size_t)(kh * kw), n = nk * win;
    float *copy = pdc_alloc(ctx, n * sizeof *copy);
    int32_t *kp = pdc_alloc(ctx, nk * sizeof *kp);
    pass_ranked *r = pdc_alloc(ctx, nk * sizeof *r);
    uint64_t pats[8];
    pdc_status st = copy && kp && r ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    double total = 0;
    if (!st) {
        memcpy(copy, w->data, n * sizeof *copy);
        for (size_t i = 0; i < n; i++) total += sq(w->data[i]);
        st = project_pattern(ctx, who, copy, o, c, kh, kw, 8, 4, 0, pats, kp);
    }
    if (!st) {
        double after = 0;
        for (size_t k = 0; k < nk; k++) {
            double e = 0;
            for (size_t i = 0; i < win; i++) e += sq(copy[k * win + i]);
            r[k].key = e;
            r[k].index = k;
            after += e;
        }
        pass_rank(r, nk);
        for (size_t q = 0; q < N_CONN; q++) {
            size_t drop = pass_rate_count(conn_rates[q], nk);
            double removed = total - after;
            size_t kept_k = 0;
            for (size_t k = 0; k < drop; k++) removed += r[k].key;
            for (size_t k = drop; k < nk; k++) kept_k++;
            loss[q] = total > 0 ? removed / total : 0;
            kept[q] = kept_k * 4;
        }
    }
    pdc_free(copy);
    pdc_free(kp);
    pdc_free(r);
    return st;
}

/* Loss of each block rate (1x4 blocks of the [rows, cols] view, as prune-block numbers them) over the
 * layer's matrices t[0..nt), and the kept weights. */
static pdc_status block_choices(const ir_model *m, const ir_tensor *const *t, size_t nt, double *loss, size_t *kept)
{
    const pdc_context *ctx = m->ctx;
    double total = 0, removed[N_BLOCK] = {0};
    size_t kept_w[N_BLOCK] = {0};
    for (size_t q = 0; q < nt; q++) {
        int64_t rows, cols;
        ir_weight_matrix_view(t[q], &rows, &cols);
        size_t bc = (size_t)((cols + 3) / 4), nb = (size_t)rows * bc;
        pass_ranked *r = pdc_alloc(ctx, (nb ? nb : 1) * sizeof *r);
        if (!r) return PDC_ERR_OUT_OF_MEMORY;
        for (size_t b = 0; b < nb; b++) {
            size_t row = b / bc, c0 = (b % bc) * 4;
            double e = 0;
            for (size_t c = c0; c < c0 + 4 && c < (size_t)cols; c++) e += sq(t[q]->data[row * (size_t)cols + c]);
            r[b].key = e;
            r[b].index = b;
            total += e;
        }
        pass_ranked *sorted = r;
        pass_rank(sorted, nb);
        for (size_t k = 0; k < N_BLOCK; k++) {
            size_t drop = pass_rate_count(block_rates[k], nb);
            for (size_t b = 0; b < drop; b++) removed[k] += sorted[b].key;
            /* weights of the kept blocks (edge blocks may be narrower) */
            for (size_t b = drop; b < nb; b++) {
                size_t c0 = (sorted[b].index % bc) * 4;
                kept_w[k] += (size_t)cols - c0 < 4 ? (size_t)cols - c0 : 4;
            }
        }
        pdc_free(r);
    }
    for (size_t k = 0; k < N_BLOCK; k++) {
        loss[k] = total > 0 ? removed[k] / total : 0;
        kept[k] = kept_w[k];
    }
    return PDC_OK;
}

void cost_plan_free(cost_plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        pdc_free(p->layers[i].time);
        pdc_free(p->layers[i].loss);
        pdc_free(p->layers[i].rate);
    }
    pdc_free(p->layers);
    memset(p, 0, sizeof *p);
}

pdc_status cost_plan_build(pdc_context *ctx, const ir_model *m, const cost_profile *prof, int threads, cost_plan *p)
{
    memset(p, 0, sizeof *p);
    cost_layer *facts = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *facts);
    uint8_t *stems = NULL;
    pdc_status st = facts ? cost_model_facts(m, facts) : PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = pass_find_stems(m, &stems);
    if (!st && !(p->layers = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *p->layers))) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; !st && li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        double dense_ms = cost_layer_ms(prof, &facts[li], threads);
        const char *why = NULL;
        int kind = 0; /* 1 pattern, 2 block */
        const ir_tensor *mats[2] = {NULL, NULL};
        size_t nm = 0;
        if (l->op == IR_OP_CONV && !stems[li] && pass_pattern_eligible(m, l, &why)) {
            const ir_tensor *w = &m->tensors[l->inputs[1]];
            if (w->sparsity.kind == IR_SPARSITY_NONE && w->dims[2] == 3 && w->dims[3] == 3) kind = 1;
        } else if ((l->op == IR_OP_FC || l->op == IR_OP_MATMUL) && l->n_inputs > 1 && l->inputs[1] >= 0) {
            const ir_tensor *w = &m->tensors[l->inputs[1]];
            if (w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_NONE && w->rank == 2) {
                kind = 2;
                mats[nm++] = w;
            }
        } else if ((l->op == IR_OP_LSTM || l->op == IR_OP_GRU) && l->n_inputs > 2) {
            for (size_t s = 1; s <= 2; s++) {
                const ir_tensor *w = l->inputs[s] >= 0 ? &m->tensors[l->inputs[s]] : NULL;
                if (w && w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_NONE) mats[nm++] = w;
            }
            if (nm == 2) kind = 2;
        }
        if (!kind) {
            p->fixed_ms += dense_ms;
            continue;
        }
        cost_plan_layer *pl = &p->layers[p->n];
        size_t nc = 1 + (kind == 1 ? N_CONN : N_BLOCK);
        pl->layer = li;
        pl->kind = kind;
        pl->n_choices = nc;
        pl->time = pdc_calloc(ctx, nc, sizeof *pl->time);
        pl->loss = pdc_calloc(ctx, nc, sizeof *pl->loss);
        pl->rate = pdc_calloc(ctx, nc, sizeof *pl->rate);
        p->n++;
        if (!pl->time || !pl->loss || !pl->rate) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        pl->time[0] = dense_ms;
        double loss[N_CONN > N_BLOCK ? N_CONN : N_BLOCK];
        size_t kept[N_CONN > N_BLOCK ? N_CONN : N_BLOCK];
        char who[300];
        snprintf(who, sizeof who, "layer '%s'", l->name);
        double total_w = 0;
        if (kind == 1) {
            st = conv_choices(m, &m->tensors[l->inputs[1]], who, loss, kept);
            total_w = (double)ir_tensor_numel(&m->tensors[l->inputs[1]]);
        } else {
            st = block_choices(m, mats, nm, loss, kept);
            for (size_t q = 0; q < nm; q++) total_w += (double)ir_tensor_numel(mats[q]);
        }
        if (st) break;
        for (size_t c = 1; c < nc; c++) {
            cost_layer f = facts[li];
            double keep = total_w > 0 ? (double)kept[c - 1] / total_w : 1;
            /* the products lose what the removed weights did; a fused activation (one op per output,
             * ir_layer_stats) and the bias stay */
            double act = ir_attrs_find(&l->attrs, "activation") ? (double)ir_tensor_numel(&m->tensors[l->outputs[0]]) : 0;
            f.flops = act + (facts[li].flops - act) * keep;
            f.wbytes = facts[li].wbytes - 4.0 * (total_w - (double)kept[c - 1]);
            int strided = 0;
            if (kind == 1) {
                const ir_attr *a = ir_attrs_find(&l->attrs, "strides");
                for (size_t i = 0; a && a->type == IR_ATTR_INTS && i < a->n; i++) strided |= a->ints[i] > 1;
                f.family = strided ? COST_CONV_SPARSE_S : COST_CONV_SPARSE;
            } else {
                int rnn = l->op == IR_OP_LSTM || l->op == IR_OP_GRU;
                f.family = keep <= 0.5 ? (rnn ? COST_RNN_SPARSE : COST_FC_SPARSE) : facts[li].family;
            }
            pl->time[c] = cost_layer_ms(prof, &f, threads);
            pl->loss[c] = loss[c - 1];
            pl->rate[c] = kind == 1 ? conn_rates[c - 1] : block_rates[c - 1];
        }
    }
    pdc_free(facts);
    pdc_free(stems);
    if (st) cost_plan_free(p);
    return st;
}

/* Appends to a growing string. */
static pdc_status cat(const pdc_context *ctx, char **s, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static pdc_status cat(const pdc_context *ctx, char **s, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*s ? *s + *len : NULL, *s ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return pdc_error(ctx, PDC_ERR_INTERNAL, "plan: formatting failed");
        if (*s && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return PDC_OK;
        }
        size_t need = *len + (size_t)n + 1;
        if (pdc_grow(ctx, (void **)s, cap, need < 256 ? 256 : need, 1)) return PDC_ERR_OUT_OF_MEMORY;
    }
}

pdc_status cost_plan_text(const pdc_context *ctx, const ir_model *m, const cost_plan *p, const size_t *choice,
                          char **text_out)
{
    char *s = NULL;
    size_t len = 0, cap = 0;
    int any_p = 0, any_b = 0;
    for (size_t i = 0; i < p->n; i++)
        if (choice[i]) any_p |= p->layers[i].kind == 1, any_b |= p->layers[i].kind == 2;
    pdc_status st = PDC_OK;
    const char *pipe = any_p && any_b ? "prune-pattern,prune-connectivity,prune-block"
                       : any_p        ? "prune-pattern,prune-connectivity"
                       : any_b        ? "prune-block"
                                      : "";
    st = cat(ctx, &s, &len, &cap, "%s", pipe);
    if (!st && (any_p || any_b)) {
        st = cat(ctx, &s, &len, &cap, " layers=");
        int first = 1;
        for (size_t i = 0; !st && i < p->n; i++)
            if (choice[i]) {
                st = cat(ctx, &s, &len, &cap, "%s%s", first ? "" : ",", m->layers[p->layers[i].layer].name);
                first = 0;
            }
    }
    if (!st && any_p) {
        st = cat(ctx, &s, &len, &cap, " patterns=8 pattern_size=4 connectivity=0");
        for (size_t i = 0; !st && i < p->n; i++)
            if (choice[i] && p->layers[i].kind == 1 && p->layers[i].rate[choice[i]] > 0)
                st = cat(ctx, &s, &len, &cap, ",%s=%g", m->layers[p->layers[i].layer].name, p->layers[i].rate[choice[i]]);
    }
    if (!st && any_b) {
        st = cat(ctx, &s, &len, &cap, " block=1x4 block_rate=0.5");
        for (size_t i = 0; !st && i < p->n; i++)
            if (choice[i] && p->layers[i].kind == 2)
                st = cat(ctx, &s, &len, &cap, ",%s=%g", m->layers[p->layers[i].layer].name, p->layers[i].rate[choice[i]]);
    }
    if (!st && !s) st = cat(ctx, &s, &len, &cap, "%s", "");
    if (st) {
        pdc_free(s);
        return st;
    }
    *text_out = s;
    return PDC_OK;
}

size_t cost_plan_weights(const ir_model *m, const cost_plan_layer *pl, int *tensors)
{
    const ir_layer *l = &m->layers[pl->layer];
    size_t n = 0;
    if (l->op == IR_OP_LSTM || l->op == IR_OP_GRU) {
        tensors[n++] = l->inputs[1];
        tensors[n++] = l->inputs[2];
    } else {
        tensors[n++] = l->inputs[1];
    }
    return n;
}

pdc_status cost_plan_project(const ir_model *m, const cost_plan_layer *pl, size_t c, int t, float *w)
{
    const pdc_context *ctx = m->ctx;
    const ir_tensor *x = &m->tensors[t];
    char who[300];
    snprintf(who, sizeof who, "layer '%s'", m->layers[pl->layer].name);
    if (c == 0) return PDC_OK;
    if (pl->kind == 1) {
        int64_t o = x->dims[0], ci = x->dims[1], kh = x->dims[2], kw = x->dims[3];
        uint64_t pats[8];
        int32_t *kp = pdc_alloc(ctx, (size_t)(o * ci) * sizeof *kp);
        pdc_status st = kp ? project_pattern(ctx, who, w, o, ci, kh, kw, 8, 4, 0, pats, kp) : PDC_ERR_OUT_OF_MEMORY;
        if (!st && pl->rate[c] > 0) st = project_connectivity(ctx, who, w, o, ci, kh * kw, pl->rate[c], NULL);
        pdc_free(kp);
        return st;
    }
    int64_t rows, cols;
    ir_weight_matrix_view(x, &rows, &cols);
    return project_block(ctx, who, w, rows, cols, 1, 4, pl->rate[c], NULL);
}
