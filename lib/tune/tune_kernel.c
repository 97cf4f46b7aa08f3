/*
 * tune_kernel.c - tunes the cpu target's conv and fc layers one at a time: each layer alone in a model of
 * its own, compiled with every configuration the backend lists (pdc_cpu_knob_space) and timed under
 * successive halving (search.c); then the model's knobs from the database (tune.h).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/context.h"
#include "lib/tune/search.h"
#include "lib/tune/tune.h"

/* Timed runs a configuration gets per rung in the first rung, and the side-by-side check's rounds. */
#define TUNE_UNITS_PER_RUNG 3
#define TUNE_CHECK_ROUNDS 5
#define TUNE_CHECK_RUNS 3
/* The winner replaces the heuristics only if it is faster by more than this share (noise), in the
 * median of the side-by-side rounds and in at least TUNE_CHECK_WINS of them. */
#define TUNE_MIN_GAIN 0.03
#define TUNE_CHECK_WINS 4

int tune_threads(const pdc_context *ctx)
{
    if (ctx->threads > 0) return ctx->threads;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Layer li of m alone: its input a graph input, its weights and bias copied with their sparsity. */
static pdc_status one_layer_model(pdc_context *ctx, const ir_model *m, size_t li, ir_model **out)
{
    const ir_layer *l = &m->layers[li];
    ir_model *o = NULL;
    pdc_status st = ir_model_create(ctx, "tune", &o);
    const char *ins[3] = {"x", "w", l->n_inputs > 2 && l->inputs[2] >= 0 ? "b" : NULL};
    const ir_tensor *x = &m->tensors[l->inputs[0]];
    if (!st) st = ir_model_add_input(o, "x", x->rank, x->dims);
    for (size_t i = 1; i < 3 && !st; i++) {
        if (!ins[i]) continue;
        const ir_tensor *t = &m->tensors[l->inputs[i]];
        if (t->kind != IR_TENSOR_CONST) {
            st = PDC_ERR_UNSUPPORTED;
            break;
        }
        size_t n = ir_tensor_numel(t);
        float *d = pdc_alloc(ctx, n * sizeof *d);
        if (!d) st = PDC_ERR_OUT_OF_MEMORY;
        else {
            memcpy(d, t->data, n * sizeof *d);
            st = ir_model_add_constant_owned(o, ins[i], t->rank, t->dims, d);
        }
        if (!st && t->sparsity.kind != IR_SPARSITY_NONE) {
            ir_sparsity s;
            if (!(st = ir_sparsity_copy(ctx, &s, &t->sparsity))) st = ir_model_set_sparsity(o, ir_model_find_tensor(o, ins[i]), &s);
        }
    }
    const char *outs[1] = {"y"};
    if (!st) st = ir_model_add_layer(o, "layer", l->op, ins[2] ? 3 : 2, ins, 1, outs, &l->attrs);
    if (!st) st = ir_model_mark_output(o, "y");
    if (st) {
        ir_model_destroy(o);
        return st;
    }
    *out = o;
    return PDC_OK;
}

static void program_release(pdc_program *p)
{
    if (!p) return;
    if (p->state) p->backend->destroy(p);
    ir_model_destroy(p->model);
    pdc_free(p->knobs);
    pdc_free(p);
}

/* A cpu program of m (one layer) with knobs k, built as pdc_compile would (m is verified). */
static pdc_status compile_with(pdc_context *ctx, const ir_model *m, const pdc_layer_knobs *k, pdc_program **out)
{
    pdc_program *p = pdc_calloc(ctx, 1, sizeof *p);
    if (!p) return PDC_ERR_OUT_OF_MEMORY;
    p->ctx = ctx;
    p->backend = &pdc_backend_cpu;
    pdc_status st = (p->knobs = pdc_alloc(ctx, sizeof *p->knobs)) ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    if (!st) {
        *p->knobs = *k;
        st = ir_model_clone(m, &p->model);
    }
    if (!st) st = p->backend->compile(p);
    if (st) {
        program_release(p);
        return st;
    }
    *out = p;
    return PDC_OK;
}

typedef struct bench {
    pdc_context *ctx;
    const ir_model *m;
    const pdc_layer_knobs *space;
    pdc_program **prog; /* per configuration, compiled when first measured and kept: compiling (the JIT
                         * and the weights' packing) costs more than the runs of a rung, and the
                         * survivors of a rung are measured again */
    const float *x;
    float *y;
    double *t; /* scratch: one time per run */
    size_t t_cap;
} bench;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The fastest of `runs` timed runs (after one untimed) of configuration c, in ms: other processes only
 * ever add time to a run, so on a shared machine the minimum is the steadiest estimate of the kernel's
 * own speed (the median moved by 2x on a 2-core host at load 8). */
static pdc_status bench_config(void *user, size_t c, int runs, double *ms)
{
    bench *b = user;
    pdc_status st = b->prog[c] ? PDC_OK : compile_with(b->ctx, b->m, &b->space[c], &b->prog[c]);
    if (st) return st;
    const pdc_program *p = b->prog[c];
    if ((size_t)runs > b->t_cap) runs = (int)b->t_cap;
    const float *in[1] = {b->x};
    float *outp[1] = {b->y};
    st = p->backend->run(p, in, outp, NULL);
    for (int r = 0; r < runs && !st; r++) {
        double t0 = now_ms();
        st = p->backend->run(p, in, outp, NULL);
        b->t[r] = now_ms() - t0;
    }
    if (st) return st;
    qsort(b->t, (size_t)runs, sizeof *b->t, cmp_double);
    *ms = b->t[0];
    return PDC_OK;
}

/* Median of TUNE_CHECK_ROUNDS measurements of a and b, alternated (drift hits both alike), and the
 * rounds a won by more than TUNE_MIN_GAIN. */
static pdc_status side_by_side(bench *b, size_t ca, size_t cb, double *ma, double *mb, int *a_wins)
{
    double va[TUNE_CHECK_ROUNDS], vb[TUNE_CHECK_ROUNDS];
    pdc_status st = PDC_OK;
    *a_wins = 0;
    for (int r = 0; r < TUNE_CHECK_ROUNDS && !st; r++) {
        st = bench_config(b, ca, TUNE_CHECK_RUNS, &va[r]);
        if (!st) st = bench_config(b, cb, TUNE_CHECK_RUNS, &vb[r]);
        if (!st) *a_wins += va[r] < (1.0 - TUNE_MIN_GAIN) * vb[r];
    }
    if (st) return st;
    qsort(va, TUNE_CHECK_ROUNDS, sizeof *va, cmp_double);
    qsort(vb, TUNE_CHECK_ROUNDS, sizeof *vb, cmp_double);
    *ma = va[TUNE_CHECK_ROUNDS / 2];
    *mb = vb[TUNE_CHECK_ROUNDS / 2];
    return PDC_OK;
}

pdc_status tune_layer(pdc_context *ctx, const ir_model *m, size_t li, double budget_s, tune_entry *e,
                      size_t *n_configs)
{
    memset(e, 0, sizeof *e);
    *n_configs = 0;
    ir_model *lm = NULL;
    pdc_layer_knobs *space = NULL;
    size_t n = 0;
    bench b = {ctx, NULL, NULL, NULL, NULL, NULL, NULL, 0};
    float *x = NULL;
    pdc_status st = one_layer_model(ctx, m, li, &lm);
    if (!st) st = pdc_cpu_knob_space(ctx, lm, 0, &space, &n);
    if (!st) *n_configs = n;
    if (!st && n > 1) {
        size_t nx = ir_tensor_numel(&lm->tensors[lm->inputs[0]]), ny = ir_tensor_numel(&lm->tensors[lm->outputs[0]]);
        x = pdc_alloc(ctx, nx * sizeof *x);
        b.y = pdc_alloc(ctx, ny * sizeof *b.y);
        b.t_cap = (size_t)TUNE_UNITS_PER_RUNG * n * TUNE_MAX_RUNGS; /* above any one measurement's runs */
        b.t = pdc_alloc(ctx, b.t_cap * sizeof *b.t);
        b.prog = pdc_calloc(ctx, n, sizeof *b.prog);
        if (!x || !b.y || !b.t || !b.prog) st = PDC_ERR_OUT_OF_MEMORY;
        uint32_t s = 12345;
        for (size_t i = 0; x && i < nx; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
    }
    b.m = lm;
    b.space = space;
    b.x = x;
    if (!st && n > 1) {
        char stage[160];
        snprintf(stage, sizeof stage, "tune %s", m->layers[li].name);
        size_t rungs = 0;
        for (size_t k = n; k > 1; k = (k + 1) / 2) rungs++;
        tune_options o = {.seed = 1, .budget = (int64_t)(TUNE_UNITS_PER_RUNG * n * rungs), .deadline_s = budget_s, .stage = stage};
        tune_result r;
        st = tune_search(ctx, n, &o, bench_config, &b, &r);
        if (!st)
            pdc_log(ctx, PDC_LOG_INFO, "tune: layer '%s': %zu configurations, %zu rungs (first %zu x %d runs)%s; best %zu: %.4f ms",
                    m->layers[li].name, n, r.rungs, r.measured[0], r.effort[0], r.stopped ? ", stopped at the deadline" : "",
                    r.best, r.best_cost);
        if (!st && r.best != 0 && r.best_effort > 0) {
            double mt = 0, md = 0;
            int wins = 0;
            st = side_by_side(&b, r.best, 0, &mt, &md, &wins);
            e->tuned_ms = mt;
            e->default_ms = md;
            if (!st && mt < (1.0 - TUNE_MIN_GAIN) * md && wins >= TUNE_CHECK_WINS) e->knobs = space[r.best];
            else e->tuned_ms = md;
        } else if (!st) {
            e->tuned_ms = e->default_ms = r.best_effort > 0 ? r.best_cost : 0.0;
        }
    }
    for (size_t c = 0; b.prog && c < n; c++) program_release(b.prog[c]);
    pdc_free(b.prog);
    ir_model_destroy(lm);
    pdc_free(space);
    pdc_free(x);
    pdc_free(b.y);
    pdc_free(b.t);
    if (st) pdc_error_prefix(ctx, "tune: layer '%s'", m->layers[li].name);
    return st;
}

static void knobs_text(const pdc_layer_knobs *k, char *buf, size_t cap)
{
    static const char *const fam[PDC_KNOB_FAMILIES] = {"heuristics", "rows", "channel-major", "output-channel vectors",
                                                       "dense multi-filter"};
    int n = snprintf(buf, cap, "%s", fam[k->family]);
    if (k->tile_y) n += snprintf(buf + n, cap - (size_t)n, ", tile %dx%d", (int)k->tile_y, (int)k->tile_x);
    if (k->chunk) n += snprintf(buf + n, cap - (size_t)n, ", %d filters a chunk", (int)k->chunk);
    if (k->whole) n += snprintf(buf + n, cap - (size_t)n, ", packed whole");
    if (k->threads) snprintf(buf + n, cap - (size_t)n, ", on %d thread%s", (int)k->threads, k->threads > 1 ? "s" : "");
}

pdc_status tune_model_knobs(pdc_context *ctx, const ir_model *m, tune_mode mode, double budget_s,
                            pdc_layer_knobs **out, size_t *n_tuned)
{
    *out = NULL;
    if (n_tuned) *n_tuned = 0;
    if (mode == TUNE_OFF || !m->n_layers) return PDC_OK;
    /* never tuned here: no signatures to compute (hashing every conv's kept positions was a tenth of a
     * cached compile of a block-pruned ResNet-50) */
    if (mode == TUNE_CACHED && tune_db_empty(ctx)) return PDC_OK;
    const int threads = tune_threads(ctx);
    pdc_layer_knobs *knobs = pdc_calloc(ctx, m->n_layers, sizeof *knobs);
    char **keys = pdc_calloc(ctx, m->n_layers, sizeof *keys);
    uint8_t *have = pdc_calloc(ctx, m->n_layers, 1); /* 1: in the database, 2: to tune */
    char *key = pdc_alloc(ctx, TUNE_KEY_MAX), host[512];
    pdc_status st = knobs && keys && have && key ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = pdc_cpu_host_key(ctx, host, sizeof host);
    size_t found = 0, missing = 0, tuned = 0;
    /* look every distinct signature up once; a repeat takes the first one's entry */
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        pdc_status ks = tune_layer_key(ctx, m, li, threads, host, key, TUNE_KEY_MAX);
        if (ks == PDC_ERR_UNSUPPORTED) continue;
        if ((st = ks)) break;
        size_t first = 0;
        while (first < li && !(keys[first] && !strcmp(keys[first], key))) first++;
        if (!(keys[li] = pdc_strdup(ctx, key))) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        if (first < li) continue;
        tune_entry e;
        if (tune_db_get(ctx, key, &e)) {
            knobs[li] = e.knobs;
            have[li] = 1;
            found++;
        } else if (mode == TUNE_ON) {
            have[li] = 2;
            missing++;
        }
    }
    for (size_t li = 0; li < m->n_layers && !st && missing; li++) {
        if (have[li] != 2) continue;
        tune_entry e;
        size_t n_configs;
        if ((st = tune_layer(ctx, m, li, budget_s / (double)missing, &e, &n_configs))) break;
        if (n_configs < 2) { /* the heuristics are all there is (an fc on one thread): no entry */
            have[li] = 0;
            continue;
        }
        knobs[li] = e.knobs;
        have[li] = 1;
        tuned++;
        char what[128];
        knobs_text(&e.knobs, what, sizeof what);
        pdc_note(ctx, PDC_NOTE_TUNED, "tune", m->layers[li].name, "%s: %.3f ms (heuristics %.3f ms)", what, e.tuned_ms,
                 e.default_ms);
        if (tune_db_put(ctx, keys[li], &e)) {
            /* still used by this compile; the next one tunes again */
            pdc_log(ctx, PDC_LOG_WARN, "%s", pdc_context_last_error(ctx));
        }
    }
    /* repeats of a signature take their first layer's knobs */
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        if (!keys[li] || have[li]) continue;
        for (size_t f = 0; f < li; f++)
            if (keys[f] && have[f] && !strcmp(keys[f], keys[li])) {
                knobs[li] = knobs[f];
                have[li] = 1;
                break;
            }
    }
    for (size_t li = 0; keys && li < m->n_layers; li++) pdc_free(keys[li]);
    pdc_free(keys);
    pdc_free(have);
    pdc_free(key);
    if (!st && found + tuned > 0) *out = knobs;
    else pdc_free(knobs);
    if (!st && n_tuned) *n_tuned = tuned;
    return st;
}
