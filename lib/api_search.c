/*
 * api_search.c - pdc_search: the tuners' successive-halving engine (lib/tune/search.c) for a host
 * program's own configurations (hyperparameters of retraining, examples/search_digits.c).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/api_internal.h"
#include "lib/core/context.h"
#include "lib/tune/search.h"

typedef struct search_call {
    pdc_search_fn fn;
    void *user;
} search_call;

static pdc_status measure(void *user, size_t config, int effort, double *cost)
{
    const search_call *c = user;
    return c->fn(c->user, config, effort, cost);
}

/* Option name as an integer in lo..hi (INT, or a decimal STRING). */
static pdc_status opt_int(pdc_context *ctx, const ir_attr *a, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v = 0;
    char *end = NULL;
    if (a->type == IR_ATTR_INT) v = a->i;
    else if (a->type == IR_ATTR_STRING && *a->s) v = strtoll(a->s, &end, 10);
    if ((a->type != IR_ATTR_INT && (a->type != IR_ATTR_STRING || !*a->s || *end)) || v < lo || v > hi)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_search: option %s: expected an integer in %lld..%lld", a->name,
                         (long long)lo, (long long)hi);
    *out = v;
    return PDC_OK;
}

PDC_API pdc_status pdc_search(pdc_context *ctx, size_t n, const pdc_attrs *options, pdc_search_fn fn, void *user,
                              size_t *best_out, double *best_cost_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, fn, "measure");
    PDC_CHECK_ARG(ctx, best_out, "best_out");
    tune_options o = {.seed = 1, .stage = "search"};
    int have_budget = 0;
    for (size_t i = 0; options && i < options->list.n; i++) {
        const ir_attr *a = &options->list.items[i];
        int64_t v = 0;
        pdc_status st = PDC_OK;
        if (!strcmp(a->name, "budget")) {
            if (!(st = opt_int(ctx, a, 1, INT64_MAX / 2, &v))) o.budget = v, have_budget = 1;
        } else if (!strcmp(a->name, "seed")) {
            if (!(st = opt_int(ctx, a, 0, INT64_MAX, &v))) o.seed = (uint64_t)v;
        } else if (!strcmp(a->name, "min_effort")) {
            if (!(st = opt_int(ctx, a, 1, 1 << 30, &v))) o.min_effort = (int)v;
        } else if (!strcmp(a->name, "eta")) {
            if (!(st = opt_int(ctx, a, 2, 1 << 20, &v))) o.eta = (int)v;
        } else {
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "pdc_search: unknown option '%s' (known: budget, seed, min_effort, eta)", a->name);
        }
        if (st) return st;
    }
    if (!have_budget) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_search: option budget is required");
    search_call c = {fn, user};
    tune_result r;
    pdc_status st = tune_search(ctx, n, &o, measure, &c, &r);
    if (st) return st;
    *best_out = r.best;
    if (best_cost_out) *best_cost_out = r.best_cost;
    return PDC_OK;
}
