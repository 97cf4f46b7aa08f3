/*
 * search.c - successive halving over a discrete configuration space (search.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/context.h"
#include "lib/tune/search.h"

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fisher-Yates over a[0..n) with the seed's stream (modulo bias is irrelevant here: any fixed
 * permutation would do, this one only has to depend on the seed alone). */
static void shuffle(size_t *a, size_t n, uint64_t *s)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(s) % i), t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rungs that measure when n configurations start: sizes n, ceil(n/eta), ... while above 1 (one rung
 * for n = 1), written to size[] if not NULL. */
static size_t rung_sizes(size_t n, int eta, size_t *size)
{
    size_t r = 0;
    do {
        if (size) size[r] = n;
        r++;
        n = (n + (size_t)eta - 1) / (size_t)eta;
    } while (n > 1 && r < TUNE_MAX_RUNGS);
    return r;
}

/* Effort per configuration in a rung of `size` of R rungs. */
static int64_t rung_effort(int64_t budget, size_t rungs, size_t size)
{
    return budget / ((int64_t)rungs * (int64_t)size);
}

/* Ranking: cost, then prior, then index. */
typedef struct rank_ctx {
    const double *cost, *prior;
} rank_ctx;
static int better(size_t a, size_t b, const rank_ctx *r)
{
    double ca = r->cost[a], cb = r->cost[b];
    if (ca != cb) return ca < cb;
    if (r->prior && r->prior[a] != r->prior[b]) return r->prior[a] < r->prior[b];
    return a < b;
}
static void sort_ranked(size_t *a, size_t n, const rank_ctx *r)
{
    /* insertion sort: stable, small rungs, and qsort has no user pointer for the ranking */
    for (size_t i = 1; i < n; i++) {
        size_t v = a[i], j = i;
        while (j > 0 && better(v, a[j - 1], r)) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

static pdc_status check_options(pdc_context *ctx, size_t n, const tune_options *o, int *min_effort, int *eta)
{
    *min_effort = o->min_effort > 0 ? o->min_effort : 1;
    *eta = o->eta > 0 ? o->eta : 2;
    if (n == 0) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: the configuration space is empty");
    if (o->eta == 1 || o->eta < 0) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: option eta must be >= 2, got %d", o->eta);
    if (o->min_effort < 0)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: option min_effort must be >= 1, got %d", o->min_effort);
    if (o->budget < *min_effort)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: option budget (%lld units) is less than min_effort (%d)",
                         (long long)o->budget, *min_effort);
    if (o->prior_keep != 0 && !(o->prior_keep > 1))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: option prior_keep must be > 1 or 0, got %g", o->prior_keep);
    if (o->prior_keep > 1 && !o->prior) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: option prior_keep needs a prior");
    if (o->prior)
        for (size_t i = 0; i < n; i++)
            if (isnan(o->prior[i])) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tune: prior of configuration %zu is NaN", i);
    return PDC_OK;
}

/* The configurations rung 0 measures, in cand[0..*n0): those the prior keeps, then as many as the
 * budget gives min_effort each (the best by the prior, else a seeded sample), in index order. */
static void first_rung(size_t n, const tune_options *o, int min_effort, int eta, size_t *cand, size_t *n0, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++) cand[i] = i;
    size_t m = n;
    if (o->prior) {
        const rank_ctx by_prior = {o->prior, NULL};
        sort_ranked(cand, n, &by_prior);
        if (o->prior_keep > 1) {
            double lim = o->prior[cand[0]] * o->prior_keep;
            while (m > 1 && o->prior[cand[m - 1]] > lim) m--;
        }
    }
    while (m > 1 && rung_effort(o->budget, rung_sizes(m, eta, NULL), m) < min_effort) m--;
    if (!o->prior && m < n) shuffle(cand, n, rng); /* a sample: the first m of a seeded permutation */
    /* index order, so the rest depends on the set only */
    for (size_t i = 1; i < m; i++) {
        size_t v = cand[i], j = i;
        while (j > 0 && v < cand[j - 1]) cand[j] = cand[j - 1], j--;
        cand[j] = v;
    }
    *n0 = m;
}

pdc_status tune_search(pdc_context *ctx, size_t n, const tune_options *opt, tune_measure_fn measure, void *user,
                       tune_result *res)
{
    PDC_CHECK_ARG(ctx, opt, "options");
    PDC_CHECK_ARG(ctx, measure, "measure");
    PDC_CHECK_ARG(ctx, res, "result");
    int min_effort, eta;
    pdc_status st = check_options(ctx, n, opt, &min_effort, &eta);
    if (st) return st;
    size_t *cand = pdc_alloc(ctx, n * sizeof *cand), *order = pdc_alloc(ctx, n * sizeof *order);
    double *cost = pdc_alloc(ctx, n * sizeof *cost);
    int *effort_of = pdc_calloc(ctx, n, sizeof *effort_of);
    if (!cand || !order || !cost || !effort_of) {
        st = PDC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    memset(res, 0, sizeof *res);
    uint64_t rng = opt->seed;
    size_t live;
    first_rung(n, opt, min_effort, eta, cand, &live, &rng);
    res->started = live;
    size_t size[TUNE_MAX_RUNGS];
    const size_t rungs = rung_sizes(live, eta, size);
    size_t planned = 0, done_n = 0;
    for (size_t r = 0; r < rungs; r++) planned += size[r];
    const double t0 = now_s();
    const rank_ctx rk = {cost, opt->prior};
    const char *stage = opt->stage ? opt->stage : "tune";
    pdc_progress(ctx, stage, 0, planned);
    res->best = cand[0];
    for (size_t r = 0; r < rungs; r++) {
        const int e = (int)rung_effort(opt->budget, rungs, live);
        /* measured in a seeded order (drift of the machine then favours no index), ranked after */
        memcpy(order, cand, live * sizeof *order);
        shuffle(order, live, &rng);
        size_t k = 0;
        for (; k < live; k++) {
            if ((opt->stop && opt->stop(opt->stop_user)) || (opt->deadline_s > 0 && now_s() - t0 > opt->deadline_s)) {
                res->stopped = 1;
                break;
            }
            size_t c = order[k];
            double v = INFINITY;
            if ((st = measure(user, c, e, &v))) goto done;
            cost[c] = isnan(v) ? INFINITY : v;
            effort_of[c] = e;
            res->spent += e;
            pdc_progress(ctx, stage, ++done_n, planned);
        }
        res->rungs = r + 1;
        res->measured[r] = k;
        res->effort[r] = e;
        if (res->stopped) {
            /* the last complete ranking (cand is sorted from rung 1 on), or rung 0's partial one */
            if (r == 0 && k > 0) {
                sort_ranked(order, k, &rk);
                res->best = order[0];
            } else {
                res->best = cand[0];
            }
            break;
        }
        sort_ranked(cand, live, &rk);
        res->best = cand[0];
        live = (live + (size_t)eta - 1) / (size_t)eta;
    }
    res->best_cost = effort_of[res->best] ? cost[res->best] : INFINITY;
    res->best_effort = effort_of[res->best];
    if (!res->stopped) pdc_progress(ctx, stage, planned, planned);
done:
    pdc_free(cand);
    pdc_free(order);
    pdc_free(cost);
    pdc_free(effort_of);
    return st;
}
