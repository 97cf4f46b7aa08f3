/*
 * api_predict.c - the public latency API: pdc_model_predict, pdc_calibrate, pdc_program_run_timed
 * (the model itself: lib/cost/, docs/predict.md).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/gpu/gpu_props.h"
#include "lib/api_internal.h"
#include "lib/cost/gpu_cost.h"
#include "lib/cost/plan.h"
#include "lib/train/train.h"

/* Option `name` of list as an integer (INT, or a STRING holding one); dflt if absent. */
static pdc_status opt_int(const pdc_context *ctx, const ir_attrs *list, const char *name, int64_t lo, int64_t hi,
                          int64_t dflt, int64_t *out)
{
    const ir_attr *a = list ? ir_attrs_find(list, name) : NULL;
    int64_t v = dflt;
    if (a && a->type == IR_ATTR_INT) v = a->i;
    else if (a && a->type == IR_ATTR_STRING) {
        char *e = NULL;
        long long x = strtoll(a->s, &e, 10);
        if (!*a->s || *e) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: '%s' is not an integer", name, a->s);
        v = x;
    } else if (a) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected an integer", name);
    if (v < lo || v > hi)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: %lld is outside %lld..%lld", name, (long long)v,
                         (long long)lo, (long long)hi);
    *out = v;
    return PDC_OK;
}

static pdc_status opt_check_known(const pdc_context *ctx, const ir_attrs *list, const char *const *known, const char *fn)
{
    for (size_t i = 0; list && i < list->n; i++) {
        int ok = 0;
        for (size_t k = 0; known[k]; k++) ok |= !strcmp(list->items[i].name, known[k]);
        if (!ok) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: unknown option '%s'", fn, list->items[i].name);
    }
    return PDC_OK;
}

static const char *opt_string(const ir_attrs *list, const char *name)
{
    const ir_attr *a = list ? ir_attrs_find(list, name) : NULL;
    return a && a->type == IR_ATTR_STRING ? a->s : NULL;
}

static int threads_of(int v)
{
    if (v > 0) return v;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

static pdc_status check_target(pdc_context *ctx, const char *target, const char *fn)
{
    if (!target || !strcmp(target, "cpu") || !strcmp(target, "auto")) return PDC_OK;
    if (!strcmp(target, "gpu"))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED,
                         "%s: target 'gpu' has no calibrated latency model (its roofline is for pdc_model_predict only)", fn);
    if (!strcmp(target, "ref"))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s: target '%s' has no latency model (only 'cpu' has)", fn, target);
    return pdc_error(ctx, PDC_ERR_UNKNOWN_TARGET, "%s: unknown target '%s'", fn, target);
}

pdc_status cost_predict_model(pdc_context *ctx, const ir_model *m, const cost_profile *p, int threads,
                              double *total, double *per_layer)
{
    cost_layer *f = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *f);
    if (!f) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cost_model_facts(m, f);
    double sum = 0;
    for (size_t i = 0; !st && i < m->n_layers; i++) {
        double t = cost_layer_ms(p, &f[i], threads);
        if (per_layer) per_layer[i] = t;
        sum += t;
    }
    pdc_free(f);
    if (!st) *total = sum;
    return st;
}

PDC_API pdc_status pdc_model_predict(pdc_context *ctx, const pdc_model *model, const char *target,
                                     const pdc_attrs *options, double *total_ms_out, double *per_layer_ms)
{
    PDC_CHECK_ARG(ctx, model, "model");
    PDC_CHECK_ARG(ctx, total_ms_out, "total_ms_out");
    pdc_status st = target && !strcmp(target, "gpu") ? PDC_OK : check_target(ctx, target, __func__);
    if (st) return st;
    const ir_attrs *list = options ? &options->list : NULL;
    static const char *const known[] = {"threads", "profile", NULL};
    int64_t threads = 0;
    if ((st = opt_check_known(ctx, list, known, __func__)) ||
        (st = opt_int(ctx, list, "threads", 0, 4096, ctx->threads, &threads)))
        return st;
    double total = 0;
    if (target && !strcmp(target, "gpu")) { /* the analytic roofline of device 0 (lib/cost/gpu_cost.h) */
        gpu_props g;
        if ((st = gpu_props_query(ctx, &g)) || (st = cost_gpu_predict_model(model, &g, &total, per_layer_ms, NULL)))
            return st;
        *total_ms_out = total;
        return PDC_OK;
    }
    cost_profile p;
    char why[1024];
    if ((st = cost_profile_for_host(ctx, opt_string(list, "profile"), &p, why, sizeof why))) return st;
    if (why[0]) pdc_note(ctx, PDC_NOTE_PREDICT_DEFAULTS, "predict", "", "%s", why);
    st = cost_predict_model(ctx, model, &p, threads_of((int)threads), &total, per_layer_ms);
    if (!st) *total_ms_out = total;
    return st;
}

PDC_API pdc_status pdc_calibrate(pdc_context *ctx, const char *target, const pdc_attrs *options, char **path_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    pdc_status st = check_target(ctx, target, __func__);
    if (st) return st;
    const ir_attrs *list = options ? &options->list : NULL;
    static const char *const known[] = {"threads", "profile", "budget_s", NULL};
    int64_t threads = 0, budget = 40;
    if ((st = opt_check_known(ctx, list, known, __func__)) ||
        (st = opt_int(ctx, list, "threads", 0, 4096, ctx->threads, &threads)) ||
        (st = opt_int(ctx, list, "budget_s", 1, 3600, 40, &budget)))
        return st;
    cost_profile p;
    if ((st = cost_calibrate(ctx, threads_of((int)threads), (double)budget, &p))) return st;
    char path[PDC_PATH_MAX + 64];
    const char *given = opt_string(list, "profile");
    if (given) snprintf(path, sizeof path, "%s", given);
    else cost_profile_path(ctx, p.key, path, sizeof path);
    if ((st = cost_profile_save(ctx, &p, path))) return st;
    if (path_out) {
        char *s = pdc_strdup(ctx, path);
        if (!s) return PDC_ERR_OUT_OF_MEMORY;
        *path_out = s;
    }
    return PDC_OK;
}

PDC_API pdc_status pdc_program_run_timed(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                                         size_t n_outputs, pdc_tensor *const *outputs, double *layer_ms)
{
    if (!program) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: program is NULL", __func__);
    pdc_context *ctx = program->ctx;
    PDC_CHECK_ARG(ctx, layer_ms, "layer_ms");
    if (program->backend != &pdc_backend_cpu)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s: per-layer times need the 'cpu' target, this program is '%s'",
                         __func__, program->backend->name);
    pdc_program_io io;
    pdc_status st = pdc_program_io_get(program, n_inputs, inputs, n_outputs, outputs, &io);
    if (st) return st;
    st = pdc_cpu_run_timed(program, io.in, io.out, io.live, layer_ms);
    pdc_program_io_free(&io);
    return st;
}

/* pdc_model_plan, and pdc_trainer_plan when trainer is given: then each choice's loss is measured on the
 * calibration set inputs / labels (lib/cost/sensitivity.c) instead of the weight magnitude it removes. */
static pdc_status plan_model(pdc_context *ctx, const pdc_model *model, const char *target, double latency_ms,
                             const pdc_attrs *options, pdc_trainer *trainer, const pdc_tensor *inputs,
                             const pdc_tensor *labels, char **plan_out, double *predicted_ms_out, const char *fn)
{
    pdc_status st = check_target(ctx, target, fn);
    if (st) return st;
    if (!(latency_ms > 0) || !isfinite(latency_ms))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: the latency budget must be a positive number of ms, got %g",
                         fn, latency_ms);
    const ir_attrs *list = options ? &options->list : NULL;
    static const char *const known[] = {"threads", "profile", NULL};
    int64_t threads = 0;
    if ((st = opt_check_known(ctx, list, known, fn)) ||
        (st = opt_int(ctx, list, "threads", 0, 4096, ctx->threads, &threads)))
        return st;
    if ((st = ir_verify(model))) return st;
    cost_profile prof;
    char why[1024];
    if ((st = cost_profile_for_host(ctx, opt_string(list, "profile"), &prof, why, sizeof why))) return st;
    if (why[0]) pdc_note(ctx, PDC_NOTE_PREDICT_DEFAULTS, "predict", "", "%s", why);
    cost_plan p;
    if ((st = cost_plan_build(ctx, model, &prof, threads_of((int)threads), &p))) return st;
    if (trainer && (st = cost_plan_sensitivity(trainer, model, &p, inputs, labels))) {
        cost_plan_free(&p);
        return st;
    }
    size_t *nc = pdc_calloc(ctx, p.n ? p.n : 1, sizeof *nc), *choice = pdc_calloc(ctx, p.n ? p.n : 1, sizeof *choice);
    const double **tm = pdc_calloc(ctx, p.n ? p.n : 1, sizeof *tm), **ls = pdc_calloc(ctx, p.n ? p.n : 1, sizeof *ls);
    char *text = NULL;
    int feasible = 0;
    if (!nc || !choice || !tm || !ls) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; !st && i < p.n; i++) {
        nc[i] = p.layers[i].n_choices;
        tm[i] = p.layers[i].time;
        ls[i] = p.layers[i].loss;
    }
    if (!st) st = cost_plan_solve(ctx, p.n, nc, tm, ls, latency_ms - p.fixed_ms, choice, &feasible);
    double predicted = p.fixed_ms;
    for (size_t i = 0; !st && i < p.n; i++) predicted += p.layers[i].time[choice[i]];
    if (!st) st = cost_plan_text(ctx, model, &p, choice, &text);
    if (!st) {
        *plan_out = text;
        if (predicted_ms_out) *predicted_ms_out = predicted;
        (void)feasible; /* infeasible: the fastest plan, and *predicted_ms_out > latency_ms says so */
    }
    pdc_free(nc);
    pdc_free(choice);
    pdc_free(tm);
    pdc_free(ls);
    cost_plan_free(&p);
    return st;
}

PDC_API pdc_status pdc_model_plan(pdc_context *ctx, const pdc_model *model, const char *target, double latency_ms,
                                  const pdc_attrs *options, char **plan_out, double *predicted_ms_out)
{
    PDC_CHECK_ARG(ctx, model, "model");
    PDC_CHECK_ARG(ctx, plan_out, "plan_out");
    return plan_model(ctx, model, target, latency_ms, options, NULL, NULL, NULL, plan_out, predicted_ms_out, __func__);
}

PDC_API pdc_status pdc_trainer_plan(pdc_trainer *trainer, const char *target, double latency_ms,
                                    const pdc_attrs *options, const pdc_tensor *inputs, const pdc_tensor *labels,
                                    char **plan_out, double *predicted_ms_out)
{
    if (!trainer) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: trainer is NULL", __func__);
    pdc_context *ctx = trainer->ctx;
    PDC_CHECK_ARG(ctx, inputs, "inputs");
    PDC_CHECK_ARG(ctx, labels, "labels");
    PDC_CHECK_ARG(ctx, plan_out, "plan_out");
    pdc_model *model;
    pdc_status st = pdc_trainer_export(trainer, &model);
    if (st) return st;
    st = plan_model(ctx, model, target, latency_ms, options, trainer, inputs, labels, plan_out, predicted_ms_out,
                    __func__);
    pdc_model_destroy(model);
    return st;
}
