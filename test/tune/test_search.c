/*
 * test_search.c - the tuners' search engine (lib/tune/search.c) on synthetic cost functions: it finds
 * the known best (exact and noisy costs), the halving arithmetic (configurations and effort per rung,
 * total effort), the budget (sampling and the prior when it cannot cover every configuration),
 * determinism, stopping early, progress, and its errors. Nothing is timed.
 */
#include <math.h>

#include "lib/core/context.h"
#include "lib/tune/search.h"

#include "test/common/builders.h"

/* A synthetic space: cost(c) = |c - best| + 1, plus noise that shrinks with effort (a hash of the
 * configuration and the call, so runs repeat exactly). Records every call. */
typedef struct synth {
    size_t best;
    double noise;
    size_t calls, call_config[4096];
    int call_effort[4096];
    size_t fail_at; /* 1-based call that fails, 0: none */
    size_t stop_after;
} synth;

static double hash01(uint64_t x)
{
    x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
    x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ull;
    return (double)((x ^ (x >> 33)) >> 11) / 9007199254740992.0;
}

static pdc_status synth_measure(void *user, size_t c, int effort, double *cost)
{
    synth *s = user;
    ck_assert_int_ge(effort, 1);
    if (s->calls < 4096) {
        s->call_config[s->calls] = c;
        s->call_effort[s->calls] = effort;
    }
    s->calls++;
    if (s->fail_at && s->calls == s->fail_at) return pdc_error(NULL, PDC_ERR_IO, "synthetic failure");
    double d = c > s->best ? (double)(c - s->best) : (double)(s->best - c);
    *cost = d + 1.0 + s->noise * (hash01(c * 7919u + s->calls) - 0.5) / sqrt((double)effort);
    return PDC_OK;
}

static int synth_stop(void *user)
{
    synth *s = user;
    return s->stop_after && s->calls >= s->stop_after;
}

START_TEST(finds_known_best)
{
    synth s = {.best = 37};
    tune_options o = {.seed = 1, .budget = 64 * 6 * 4};
    tune_result r;
    ck_assert_ok(ctx, tune_search(ctx, 64, &o, synth_measure, &s, &r));
    ck_assert_uint_eq(r.best, 37);
    ck_assert_double_eq(r.best_cost, 1.0);
    ck_assert(!r.stopped);
    /* noise of +-2 at one unit, shrinking as 1/sqrt(effort): the last rungs still separate 37 from
     * its neighbours */
    synth n = {.best = 37, .noise = 4.0};
    o.budget = 64 * 6 * 64;
    ck_assert_ok(ctx, tune_search(ctx, 64, &o, synth_measure, &n, &r));
    ck_assert_uint_eq(r.best, 37);
    /* a single configuration gets the whole budget in one measurement */
    synth one = {.best = 0};
    ck_assert_ok(ctx, tune_search(ctx, 1, &o, synth_measure, &one, &r));
    ck_assert_uint_eq(one.calls, 1);
    ck_assert_int_eq(one.call_effort[0], (int)o.budget);
    ck_assert_uint_eq(r.best, 0);
}
END_TEST

START_TEST(halving_arithmetic)
{
    /* 16 with eta 2: rungs of 16, 8, 4, 2; budget 128 over 4 rungs = 32 a rung: 2, 4, 8, 16 units */
    synth s = {.best = 5};
    tune_options o = {.seed = 3, .budget = 128};
    tune_result r;
    ck_assert_ok(ctx, tune_search(ctx, 16, &o, synth_measure, &s, &r));
    ck_assert_uint_eq(r.rungs, 4);
    const size_t want_n[] = {16, 8, 4, 2};
    const int want_e[] = {2, 4, 8, 16};
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(r.measured[i], want_n[i]);
        ck_assert_int_eq(r.effort[i], want_e[i]);
    }
    ck_assert_uint_eq(s.calls, 30);
    ck_assert_int_eq(r.spent, 128);
    ck_assert_uint_eq(r.best, 5);
    ck_assert_int_eq(r.best_effort, 16);
    /* the survivors of a rung are its best half: rung 1 measures exactly configurations 1..8 (ranked
     * 5, 4, 6, 3, 7, 2, 8, 1, 9, ...: ties go to the lower index) */
    int seen[16] = {0};
    for (size_t i = 16; i < 24; i++) seen[s.call_config[i]] = 1;
    for (int c = 0; c < 16; c++) ck_assert_int_eq(seen[c], c >= 1 && c <= 8);

    /* 10 with eta 3: rungs of 10, 4, 2; budget 300: 10, 25, 50 units, 100 a rung */
    synth t = {.best = 9};
    o.eta = 3;
    o.budget = 300;
    ck_assert_ok(ctx, tune_search(ctx, 10, &o, synth_measure, &t, &r));
    ck_assert_uint_eq(r.rungs, 3);
    ck_assert_uint_eq(r.measured[0], 10);
    ck_assert_uint_eq(r.measured[1], 4);
    ck_assert_uint_eq(r.measured[2], 2);
    ck_assert_int_eq(r.effort[0], 10);
    ck_assert_int_eq(r.effort[1], 25);
    ck_assert_int_eq(r.effort[2], 50);
    ck_assert_int_eq(r.spent, 300);
    ck_assert_uint_eq(r.best, 9);
}
END_TEST

START_TEST(budget_respected)
{
    /* 100 configurations, 50 units: 12 start (rungs 12, 6, 3, 2: 50 / (4 * 12) = 1 unit; 13 would
     * get 0), and the total stays within the budget */
    synth s = {.best = 0};
    tune_options o = {.seed = 9, .budget = 50};
    tune_result r;
    ck_assert_ok(ctx, tune_search(ctx, 100, &o, synth_measure, &s, &r));
    ck_assert_uint_eq(r.started, 12);
    ck_assert_int_le(r.spent, 50);
    int64_t sum = 0;
    for (size_t i = 0; i < s.calls; i++) sum += s.call_effort[i];
    ck_assert_int_eq(sum, r.spent);
    /* min_effort 3: 5 start (rungs 5, 3, 2: 50 / 15 = 3 units; 6 would get 50 / 18 = 2) */
    synth m = {.best = 0};
    o.min_effort = 3;
    ck_assert_ok(ctx, tune_search(ctx, 100, &o, synth_measure, &m, &r));
    for (size_t i = 0; i < m.calls; i++) ck_assert_int_ge(m.call_effort[i], 3);
    ck_assert_int_le(r.spent, 50);
    ck_assert_uint_eq(r.started, 5);
    ck_assert_int_eq(r.spent, 5 * 3 + 3 * 5 + 2 * 8);

    /* with a prior, the sample is the best predicted: prior = the true cost, so the best is found */
    double prior[100];
    for (int c = 0; c < 100; c++) prior[c] = fabs((double)c - 70.0);
    synth p = {.best = 70};
    o.min_effort = 1;
    o.prior = prior;
    ck_assert_ok(ctx, tune_search(ctx, 100, &o, synth_measure, &p, &r));
    ck_assert_uint_eq(r.started, 12);
    for (size_t i = 0; i < 12; i++) ck_assert_int_le(fabs((double)p.call_config[i] - 70.0), 6);
    ck_assert_uint_eq(r.best, 70);
    /* prior_keep: predicted more than 3x the best prediction (1 + |c - 70| > 3 * 1) is dropped */
    for (int c = 0; c < 100; c++) prior[c] = 1.0 + fabs((double)c - 70.0);
    synth k = {.best = 70};
    o.prior_keep = 3.0;
    o.budget = 1000;
    ck_assert_ok(ctx, tune_search(ctx, 100, &o, synth_measure, &k, &r));
    ck_assert_uint_eq(r.started, 5); /* 68..72 */
    ck_assert_uint_eq(r.best, 70);
}
END_TEST

START_TEST(deterministic_given_seed)
{
    synth a = {.best = 211, .noise = 3.0}, b = a, c = a;
    tune_options o = {.seed = 42, .budget = 300}; /* 300 units cannot cover 500: a seeded sample */
    tune_result ra, rb, rc;
    ck_assert_ok(ctx, tune_search(ctx, 500, &o, synth_measure, &a, &ra));
    ck_assert_ok(ctx, tune_search(ctx, 500, &o, synth_measure, &b, &rb));
    ck_assert_uint_eq(a.calls, b.calls);
    ck_assert_mem_eq(a.call_config, b.call_config, a.calls * sizeof a.call_config[0]);
    ck_assert_mem_eq(a.call_effort, b.call_effort, a.calls * sizeof a.call_effort[0]);
    ck_assert_uint_eq(ra.best, rb.best);
    ck_assert_double_eq(ra.best_cost, rb.best_cost);
    /* another seed: another sample and order */
    o.seed = 43;
    ck_assert_ok(ctx, tune_search(ctx, 500, &o, synth_measure, &c, &rc));
    ck_assert_uint_eq(rc.started, ra.started);
    ck_assert(memcmp(a.call_config, c.call_config, ra.started * sizeof a.call_config[0]) != 0);
}
END_TEST

START_TEST(stops_early_with_best_so_far)
{
    /* stop after 5 measurements of rung 0: the best of those 5 */
    synth s = {.best = 7, .stop_after = 5};
    tune_options o = {.seed = 5, .budget = 16 * 4, .stop = synth_stop, .stop_user = &s};
    tune_result r;
    ck_assert_ok(ctx, tune_search(ctx, 16, &o, synth_measure, &s, &r));
    ck_assert(r.stopped);
    ck_assert_uint_eq(s.calls, 5);
    ck_assert_uint_eq(r.rungs, 1);
    ck_assert_uint_eq(r.measured[0], 5);
    size_t want = s.call_config[0];
    for (size_t i = 1; i < 5; i++) {
        size_t c = s.call_config[i];
        if ((c > 7 ? c - 7 : 7 - c) < (want > 7 ? want - 7 : 7 - want)) want = c;
    }
    ck_assert_uint_eq(r.best, want);
    /* stopped in rung 1: rung 0's winner, which is the best */
    synth t = {.best = 7, .stop_after = 18};
    o.stop_user = &t;
    ck_assert_ok(ctx, tune_search(ctx, 16, &o, synth_measure, &t, &r));
    ck_assert(r.stopped);
    ck_assert_uint_eq(r.rungs, 2);
    ck_assert_uint_eq(r.measured[1], 2);
    ck_assert_uint_eq(r.best, 7);
    /* a deadline already past: nothing measured, the first candidate, effort 0 */
    synth u = {.best = 3};
    tune_options d = {.seed = 5, .budget = 64, .deadline_s = 1e-12};
    ck_assert_ok(ctx, tune_search(ctx, 16, &d, synth_measure, &u, &r));
    ck_assert(r.stopped);
    ck_assert_int_eq(r.best_effort, 0);
    ck_assert(isinf(r.best_cost));
}
END_TEST

static size_t last_done, last_total, progress_calls;
static void on_progress(void *user, const char *stage, size_t done, size_t total)
{
    (void)user;
    ck_assert_str_eq(stage, "kernels");
    ck_assert_uint_ge(done, last_done);
    last_done = done;
    last_total = total;
    progress_calls++;
}

START_TEST(progress_and_errors)
{
    synth s = {.best = 1};
    tune_options o = {.seed = 1, .budget = 128, .stage = "kernels"};
    tune_result r;
    pdc_context_set_progress_handler(ctx, on_progress, NULL);
    ck_assert_ok(ctx, tune_search(ctx, 16, &o, synth_measure, &s, &r));
    ck_assert_uint_eq(last_total, 30);
    ck_assert_uint_eq(last_done, 30);
    ck_assert_uint_eq(progress_calls, 1 + 30 + 1);
    pdc_context_set_progress_handler(ctx, NULL, NULL);

    ck_assert_status(ctx, tune_search(ctx, 0, &o, synth_measure, &s, &r), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "configuration space is empty");
    tune_options bad = o;
    bad.eta = 1;
    ck_assert_status(ctx, tune_search(ctx, 4, &bad, synth_measure, &s, &r), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option eta must be >= 2, got 1");
    bad = o;
    bad.min_effort = 10;
    bad.budget = 9;
    ck_assert_status(ctx, tune_search(ctx, 4, &bad, synth_measure, &s, &r), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option budget (9 units) is less than min_effort (10)");
    bad = o;
    bad.prior_keep = 2;
    ck_assert_status(ctx, tune_search(ctx, 4, &bad, synth_measure, &s, &r), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "prior_keep needs a prior");
    double prior[4] = {1, NAN, 2, 3};
    bad = o;
    bad.prior = prior;
    ck_assert_status(ctx, tune_search(ctx, 4, &bad, synth_measure, &s, &r), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "prior of configuration 1 is NaN");
    /* a measurement's failure ends the search with its status */
    synth f = {.best = 1, .fail_at = 3};
    ck_assert_status(ctx, tune_search(ctx, 16, &o, synth_measure, &f, &r), PDC_ERR_IO);
    ck_assert_uint_eq(f.calls, 3);
}
END_TEST

/* pdc_search's measurement: the synthetic cost through the public signature */
static pdc_status public_measure(void *user, size_t c, int effort, double *cost) { return synth_measure(user, c, effort, cost); }

START_TEST(public_search)
{
    /* the same search as tune_search with the same options (16 of the 20 sampled): the same calls and winner */
    synth a = {.best = 11, .noise = 0.5}, b = a;
    tune_options o = {.seed = 7, .budget = 96, .min_effort = 2, .eta = 3};
    tune_result r;
    ck_assert_ok(ctx, tune_search(ctx, 20, &o, synth_measure, &a, &r));
    pdc_attrs *opt = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(opt, "budget", 96));
    ck_assert_ok(ctx, pdc_attrs_set_string(opt, "seed", "7"));
    ck_assert_ok(ctx, pdc_attrs_set_int(opt, "min_effort", 2));
    ck_assert_ok(ctx, pdc_attrs_set_int(opt, "eta", 3));
    size_t best = 99;
    double cost = 0;
    ck_assert_ok(ctx, pdc_search(ctx, 20, opt, public_measure, &b, &best, &cost));
    ck_assert_uint_eq(best, r.best);
    ck_assert_double_eq(cost, r.best_cost);
    ck_assert_uint_eq(b.calls, a.calls);
    ck_assert_mem_eq(b.call_config, a.call_config, a.calls * sizeof a.call_config[0]);
    /* errors: the option named */
    ck_assert_status(ctx, pdc_search(ctx, 20, NULL, public_measure, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option budget is required");
    pdc_attrs *bad = opt_i("eta", 1);
    ck_assert_ok(ctx, pdc_attrs_set_int(bad, "budget", 10));
    ck_assert_status(ctx, pdc_search(ctx, 20, bad, public_measure, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option eta: expected an integer in 2..");
    pdc_attrs_destroy(bad);
    bad = opt_s("budget", "ten");
    ck_assert_status(ctx, pdc_search(ctx, 20, bad, public_measure, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option budget: expected an integer");
    pdc_attrs_destroy(bad);
    bad = opt_i("rungs", 3);
    ck_assert_status(ctx, pdc_search(ctx, 20, bad, public_measure, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown option 'rungs'");
    pdc_attrs_destroy(bad);
    ck_assert_status(ctx, pdc_search(ctx, 20, opt, NULL, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "measure is NULL");
    ck_assert_status(ctx, pdc_search(ctx, 0, opt, public_measure, &b, &best, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "configuration space is empty");
    pdc_attrs_destroy(opt);
}
END_TEST

int main(void)
{
    return run_tests("search", ctx_setup, ctx_teardown, 30,
                     TEST_LIST(finds_known_best, halving_arithmetic, budget_respected, deterministic_given_seed,
                               stops_early_with_best_so_far, progress_and_errors, public_search));
}
