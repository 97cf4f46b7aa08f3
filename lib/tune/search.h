/*
 * search.h - internal: the search engine of the tuners (kernel configurations, tune_kernel.c):
 * successive halving over a discrete space of n configurations (docs/tuning.md).
 *
 * A budget of B effort units (a unit is one repetition of whatever the caller measures: one timed
 * run of a kernel, one epoch of training) is split evenly over the rungs. Rung r measures its n_r
 * survivors with floor(B / (R * n_r)) units each (at least min_effort), keeps the best
 * ceil(n_r / eta) and goes on until one is left, so the total never exceeds B (Karnin et al.,
 * "Almost optimal exploration in multi-armed bandits", 2013). Where B cannot give every configuration
 * min_effort at rung 0, the engine starts from fewer: the best by the prior when there is one, else a
 * sample drawn with the seed.
 *
 * A configuration's cost is what its latest (most measured) rung said; ties go to the better prior,
 * then the lower index, so a search is a function of (n, options, seed, measurements). It stops
 * early, with the best of what it has fully measured, when `stop` says so or the wall-clock deadline
 * passes (both checked between measurements).
 */
#ifndef PDC_LIB_TUNE_SEARCH_H
#define PDC_LIB_TUNE_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "pdc.h"

/* Measures configuration `config` with `effort` units (>= 1); *cost_out lower is better (INFINITY:
 * the configuration failed; NaN counts as that).
 * A status other than PDC_OK ends the search with it. */
typedef pdc_status (*tune_measure_fn)(void *user, size_t config, int effort, double *cost_out);

typedef struct tune_options {
    uint64_t seed;            /* sampling and the order of measurements within a rung */
    int64_t budget;           /* effort units in all (>= min_effort) */
    int min_effort;           /* units a configuration gets at least (>= 1; 0 means 1) */
    int eta;                  /* keep 1/eta of a rung (>= 2; 0 means 2: halving) */
    const double *prior;      /* n predicted costs (lower better) or NULL: ordering and sampling */
    double prior_keep;        /* > 1: drop configurations predicted more than prior_keep x the best
                               * prediction before measuring; 0: keep all */
    double deadline_s;        /* > 0: stop after this many seconds of wall time */
    int (*stop)(void *user);  /* non-zero: stop now (NULL: never) */
    void *stop_user;
    const char *stage;        /* progress stage name (pdc_progress: measurements done of planned) */
} tune_options;

#define TUNE_MAX_RUNGS 64

typedef struct tune_result {
    size_t best;              /* the winner's index */
    double best_cost;         /* its cost at the last rung it was measured in */
    int best_effort;          /* units that measurement had */
    size_t rungs;             /* rungs run (the last possibly cut short) */
    size_t measured[TUNE_MAX_RUNGS]; /* configurations measured in each rung */
    int effort[TUNE_MAX_RUNGS];      /* units each got in that rung */
    int64_t spent;            /* effort units spent in all (<= budget) */
    size_t started;           /* configurations in rung 0 (n, or fewer: budget, prior_keep) */
    int stopped;              /* 1: stop() or the deadline ended it early */
} tune_result;

/* Runs the search over configurations 0..n-1 (n >= 1). PDC_ERR_INVALID_ARG for a bad option (the
 * message names it); a measurement's failure status as it was; PDC_OK with res filled otherwise
 * (also when stopped early, res->stopped = 1, with at least one configuration measured, or else
 * best = the first configuration the rung would have measured and best_effort 0). */
pdc_status tune_search(pdc_context *ctx, size_t n, const tune_options *opt, tune_measure_fn measure, void *user,
                       tune_result *res);

#endif
