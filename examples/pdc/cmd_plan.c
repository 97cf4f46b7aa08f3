/*
 * cmd_plan.c - `pdc plan`: prune a model to a latency budget (pdc_model_plan), print the plan per
 * layer and the predicted and measured time of the result, and save it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cli_plan_synopsis[] =
    "pdc plan MODEL --latency-ms X -o OUT.pdc|OUT.onnx|OUT.pdcir [--target cpu] [--threads N] [--profile FILE] "
    "[--repeat N] [--no-measure] [--refine N] [--calib DATA.bin --labels LABELS.bin] [--shape NAME=DIMS]...";
const char cli_plan_help[] =
    "usage: pdc plan MODEL --latency-ms X -o OUT.pdc|OUT.onnx|OUT.pdcir [--target cpu] [--threads N]\n"
    "                [--profile FILE] [--repeat N] [--no-measure] [--refine N]\n"
    "                [--calib DATA.bin --labels LABELS.bin] [--shape NAME=DIMS]...\n"
    "\n"
    "Chooses per layer how to prune MODEL so that its predicted time on the cpu target meets the\n"
    "budget while removing the least weight magnitude (pdc_model_plan, docs/predict.md) - or, with a\n"
    "calibration set, raising its loss the least (pdc_trainer_plan: each choice tried layer by layer): 3x3 convs\n"
    "(not the stem) stay dense or get 8 patterns of 4 with connectivity 0-87.5%; fc, matmul, lstm and\n"
    "gru weights stay dense or lose 50-93.75% of their 1x4 blocks. Prints the plan per layer, the\n"
    "pipeline and options that pdc_model_transform (and pdc prune) take for it, the predicted time and\n"
    "the measured time of the result (median of --repeat runs), then saves the pruned model. When no\n"
    "plan meets the budget it prints the fastest plan the choices allow, writes nothing and exits 1.\n"
    "\n"
    "Options:\n"
    "  --latency-ms X     the budget in milliseconds (> 0)\n"
    "  -o, --output OUT   the file to write: .pdc, .onnx or .pdcir\n"
    "  -t, --target NAME  cpu (the default; auto means cpu)\n"
    "  --threads N        threads to plan for (0 = all cores, the default)\n"
    "  --profile FILE     use this latency profile instead of this host's (pdc calibrate)\n"
    "  -n, --repeat N     timed runs of the result (default 10)\n"
    "  --no-measure       do not compile and time the result\n"
    "  --refine N         while the result measures over the budget, plan again (up to N times, 0..10,\n"
    "                     default 0) for the budget scaled by budget / measured (at least 0.85)\n"
    "  --calib DATA.bin   calibration samples: raw little-endian f32, N samples of the model input's\n"
    "                     shape after its batch dim (the model ends in logits or a softmax)\n"
    "  --labels L.bin     their N class indices, as f32\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME; may be repeated\n"
    "  -h, --help         show this help\n";

enum { OPT_LATENCY = 1, OPT_OUTPUT, OPT_TARGET, OPT_THREADS, OPT_PROFILE, OPT_REPEAT, OPT_NO_MEASURE, OPT_REFINE,
       OPT_CALIB, OPT_LABELS };
static const cli_opt plan_opts[] = {{"latency-ms", 0, 1, OPT_LATENCY}, {"output", 'o', 1, OPT_OUTPUT},
                                    {"target", 't', 1, OPT_TARGET},    {"threads", 0, 1, OPT_THREADS},
                                    {"profile", 0, 1, OPT_PROFILE},    {"repeat", 'n', 1, OPT_REPEAT},
                                    {"no-measure", 0, 0, OPT_NO_MEASURE}, {"shape", 0, 1, CLI_OPT_SHAPE},
                                    {"refine", 0, 1, OPT_REFINE},      {"calib", 0, 1, OPT_CALIB},
                                    {"labels", 0, 1, OPT_LABELS},
                                    {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("plan", cli_plan_synopsis, __VA_ARGS__)

static char defaults_note[1024];
static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    (void)layer;
    if (kind == PDC_NOTE_PREDICT_DEFAULTS) snprintf(defaults_note, sizeof defaults_note, "%s", text);
}

/* Median wall time of `repeat` runs (after 3 warm-up runs) of model compiled for cpu. */
static int time_model(pdc_context *ctx, const char *path, const pdc_model *model, long repeat, double *ms)
{
    pdc_program *prog = NULL;
    pdc_status st = pdc_compile(ctx, model, "cpu", &prog);
    if (st) return cli_lib_error(ctx, st, path, "compile");
    size_t n_in = 0, n_out = 0;
    pdc_program_num_inputs(prog, &n_in);
    pdc_program_num_outputs(prog, &n_out);
    pdc_tensor *in[64] = {0}, *out[64] = {0};
    int rc = n_in > 64 || n_out > 64 ? cli_error(path, "more than 64 inputs or outputs") : CLI_EXIT_OK;
    uint32_t s = 0x12345678u;
    for (size_t i = 0; i < n_in && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_input_info(prog, i, NULL, &rank, dims)) || (st = pdc_tensor_create(ctx, rank, dims, &in[i])))
            rc = cli_lib_error(ctx, st, path, "input");
        else
            for (size_t k = 0; k < pdc_tensor_size(in[i]); k++) {
                s = s * 1664525u + 1013904223u;
                pdc_tensor_data(in[i])[k] = (float)(s >> 8) / 8388608.0f - 1.0f;
            }
    }
    for (size_t i = 0; i < n_out && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_output_info(prog, i, NULL, &rank, dims)) || (st = pdc_tensor_create(ctx, rank, dims, &out[i])))
            rc = cli_lib_error(ctx, st, path, "output");
    }
    double *t = calloc((size_t)repeat, sizeof *t);
    if (rc == CLI_EXIT_OK && !t) rc = cli_error(path, "out of memory");
    for (long r = 0; r < 3 + repeat && rc == CLI_EXIT_OK; r++) {
        double a = cli_now_ms();
        if ((st = pdc_program_run(prog, n_in, in, n_out, out))) rc = cli_lib_error(ctx, st, path, "run");
        else if (r >= 3) t[r - 3] = cli_now_ms() - a;
    }
    if (rc == CLI_EXIT_OK) {
        qsort(t, (size_t)repeat, sizeof *t, cli_cmp_double);
        *ms = repeat % 2 ? t[repeat / 2] : 0.5 * (t[repeat / 2 - 1] + t[repeat / 2]);
    }
    free(t);
    for (size_t i = 0; i < 64; i++) {
        pdc_tensor_destroy(in[i]);
        pdc_tensor_destroy(out[i]);
    }
    pdc_program_destroy(prog);
    return rc;
}

/* The calibration set for pdc_trainer_plan: N labels from their file's size, N samples of model input
 * 0's shape after its batch dim. */
static int load_calib(pdc_context *ctx, const pdc_model *model, const char *data, const char *labels, pdc_tensor **x,
                      pdc_tensor **y)
{
    size_t n, rank, per = 1;
    int64_t dims[PDC_MAX_RANK];
    int rc = raw_count_f32(labels, &n, "class indices");
    if (rc != CLI_EXIT_OK) return rc;
    pdc_status st = pdc_model_input_info(model, 0, NULL, &rank, dims);
    if (st) return cli_lib_error(ctx, st, data, "calibration set");
    if (rank < 2) return cli_error(data, "the model's input has rank %zu: a calibration set needs a batch dim", rank);
    dims[0] = (int64_t)n;
    for (size_t i = 1; i < rank; i++) per *= (size_t)(dims[i] > 0 ? dims[i] : 1);
    int64_t ldims[1] = {(int64_t)n};
    if ((st = pdc_tensor_create(ctx, rank, dims, x)) || (st = pdc_tensor_create(ctx, 1, ldims, y)))
        return cli_lib_error(ctx, st, data, "calibration set");
    char what[96];
    snprintf(what, sizeof what, "%zu samples of %zu floats", n, per);
    if ((rc = raw_read_f32(data, pdc_tensor_data(*x), n * per, what)) != CLI_EXIT_OK) return rc;
    return raw_read_f32(labels, pdc_tensor_data(*y), n, "class indices");
}

/* The plan for model: by weight magnitude, or measured on the calibration set through trainer. */
static pdc_status plan_for(pdc_context *ctx, const pdc_model *model, pdc_trainer *trainer, const pdc_tensor *x,
                           const pdc_tensor *y, const char *target, double budget, const pdc_attrs *opt, char **plan,
                           double *predicted)
{
    return trainer ? pdc_trainer_plan(trainer, target, budget, opt, x, y, plan, predicted)
                   : pdc_model_plan(ctx, model, target, budget, opt, plan, predicted);
}

/* Prints the `pdc prune` command line that gives the same model. */
static void print_prune_line(const char *model, const char *out, const char *plan)
{
    printf("the same with pdc prune:\n  pdc prune %s -o %s", model, out);
    const char *sp = strchr(plan, ' ');
    printf(" --passes %.*s", (int)(sp ? (size_t)(sp - plan) : strlen(plan)), plan);
    while (sp) {
        const char *tok = sp + 1;
        sp = strchr(tok, ' ');
        size_t len = sp ? (size_t)(sp - tok) : strlen(tok);
        const char *eq = memchr(tok, '=', len);
        if (!eq) continue;
        size_t kl = (size_t)(eq - tok);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)kl, tok);
        for (char *c = key; *c; c++)
            if (*c == '_') *c = '-';
        printf(" --%s %.*s", key, (int)(len - kl - 1), eq + 1);
    }
    printf("\n");
}

int cmd_plan(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "plan", cli_plan_synopsis, cli_plan_help, plan_opts);
    cli_model_args a = {0};
    const char *target = "cpu", *out_path = NULL, *profile = NULL, *v, *latency = NULL, *calib = NULL, *labels = NULL;
    long threads = 0, repeat = 10, refine = 0;
    int measure = 1, id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_LATENCY: latency = v; break;
        case OPT_OUTPUT: out_path = v; break;
        case OPT_TARGET: target = v; break;
        case OPT_THREADS: {
            char *e;
            errno = 0;
            threads = strtol(v, &e, 10);
            if (errno || !*v || *e || threads < 0 || threads > 4096) return USAGE("--threads expects 0..4096, got '%s'", v);
            break;
        }
        case OPT_PROFILE: profile = v; break;
        case OPT_REPEAT: {
            char *e;
            errno = 0;
            repeat = strtol(v, &e, 10);
            if (errno || !*v || *e || repeat < 1 || repeat > 100000) return USAGE("--repeat expects 1..100000, got '%s'", v);
            break;
        }
        case OPT_NO_MEASURE: measure = 0; break;
        case OPT_CALIB: calib = v; break;
        case OPT_LABELS: labels = v; break;
        case OPT_REFINE: {
            char *e2;
            errno = 0;
            refine = strtol(v, &e2, 10);
            if (errno || !*v || *e2 || refine < 0 || refine > 10) return USAGE("--refine expects 0..10, got '%s'", v);
            break;
        }
        default: break;
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    if (!a.path) return USAGE("missing MODEL");
    if (!latency) return USAGE("missing --latency-ms X (the budget in milliseconds)");
    char *e;
    errno = 0;
    double budget = strtod(latency, &e);
    if (errno || !*latency || *e || !isfinite(budget) || budget <= 0)
        return USAGE("--latency-ms expects a budget > 0 ms, got '%s'", latency);
    if (!out_path) return USAGE("missing -o OUT");
    int text = cli_ends_with(out_path, ".pdcir"), onnx = cli_ends_with(out_path, ".onnx");
    if (!text && !onnx && !cli_ends_with(out_path, ".pdc")) return USAGE("OUT must end in .pdc, .onnx or .pdcir: '%s'", out_path);
    if (strcmp(target, "cpu") && strcmp(target, "auto"))
        return USAGE("--target: only cpu has a latency model, got '%s'", target);
    if (!calib != !labels) return USAGE("--calib and --labels go together");

    pdc_context *ctx = NULL;
    pdc_model *model = NULL;
    pdc_attrs *opt = NULL;
    pdc_trainer *trainer = NULL;
    pdc_tensor *cx = NULL, *cy = NULL;
    char *plan = NULL;
    int rc = cli_open_model(&a, &ctx, &model);
    pdc_status st = PDC_OK;
    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%ld", threads);
    if (rc == CLI_EXIT_OK) {
        pdc_context_set_note_handler(ctx, on_note, NULL);
        if ((st = pdc_context_set_option(ctx, "threads", tbuf)) || (st = pdc_attrs_create(ctx, &opt)) ||
            (st = pdc_attrs_set_int(opt, "threads", threads)) || (profile && (st = pdc_attrs_set_string(opt, "profile", profile))))
            rc = cli_lib_error(ctx, st, a.path, NULL);
    }
    size_t n = 0;
    double *before = NULL, *after = NULL, dense_ms = 0, planned_ms = 0, predicted = 0;
    if (rc == CLI_EXIT_OK) {
        pdc_model_num_layers(model, &n);
        before = calloc(n + 1, sizeof *before);
        after = calloc(n + 1, sizeof *after);
        if (!before || !after) rc = cli_error(a.path, "out of memory");
    }
    if (rc == CLI_EXIT_OK && (st = pdc_model_predict(ctx, model, target, opt, &dense_ms, before)))
        rc = cli_lib_error(ctx, st, a.path, "predict");
    if (rc == CLI_EXIT_OK && calib) {
        if ((rc = load_calib(ctx, model, calib, labels, &cx, &cy)) == CLI_EXIT_OK &&
            (st = pdc_trainer_create(ctx, model, &trainer)))
            rc = cli_lib_error(ctx, st, a.path, "calibration set: trainer");
    }
    if (rc == CLI_EXIT_OK && (st = plan_for(ctx, model, trainer, cx, cy, target, budget, opt, &plan, &predicted)))
        rc = cli_lib_error(ctx, st, a.path, "plan");
    if (rc == CLI_EXIT_OK && defaults_note[0]) fprintf(stderr, "pdc plan: %s\n", defaults_note);
    if (rc == CLI_EXIT_OK && plan[0] && (st = pdc_model_transform(model, plan, NULL)))
        rc = cli_lib_error(ctx, st, a.path, "prune");
    if (rc == CLI_EXIT_OK && (st = pdc_model_predict(ctx, model, target, opt, &planned_ms, after)))
        rc = cli_lib_error(ctx, st, a.path, "predict");
    if (rc == CLI_EXIT_OK) {
        printf("model: %s\nbudget: %.3f ms on %ld thread%s (%s); dense: %.3f ms predicted\n", a.path, budget, threads,
               threads == 1 ? "" : "s", threads ? "cpu" : "cpu, all cores", dense_ms);
        printf("%-24s %-52s %10s %10s\n", "layer", "plan", "dense ms", "planned ms");
        for (size_t i = 0; i < n; i++) {
            const char *name = "", *sp = "";
            pdc_model_layer_string(model, i, PDC_FIELD_SPARSITY, &sp);
            char sbuf[128];
            snprintf(sbuf, sizeof sbuf, "%s", sp);
            pdc_model_layer_string(model, i, PDC_FIELD_NAME, &name);
            if (before[i] < 0.0005 && after[i] < 0.0005) continue;
            printf("%-24s %-52s %10.4f %10.4f\n", name, sbuf, before[i], after[i]);
        }
        printf("predicted: %.3f ms (dense %.3f ms, budget %.3f ms)\n", planned_ms, dense_ms, budget);
        if (predicted > budget * (1 + 1e-9)) {
            printf("plan (the fastest the choices allow): %s\n", plan[0] ? plan : "(dense)");
            rc = cli_error(a.path,
                           "no plan meets %.3f ms: the fastest plan the choices allow is predicted at %.3f ms "
                           "(printed above); nothing written",
                           budget, planned_ms);
        } else {
            printf("plan: %s\n", plan[0] ? plan : "(dense: the model meets the budget as it is)");
            if (plan[0]) print_prune_line(a.path, out_path, plan);
        }
    }
    if (rc == CLI_EXIT_OK && measure) {
        double ms = 0;
        rc = time_model(ctx, a.path, model, repeat, &ms);
        if (rc == CLI_EXIT_OK)
            printf("measured: %.3f ms (median of %ld runs; %+.1f%% against the prediction, %+.1f%% against the budget)\n",
                   ms, repeat, 100.0 * (ms - planned_ms) / planned_ms, 100.0 * (ms - budget) / budget);
        /* --refine: while the result measures over the budget, plan again for the budget scaled by
         * budget / measured (the model's error on this model; at least 0.85), from the original model */
        double aim = budget;
        for (long r = 1; rc == CLI_EXIT_OK && r <= refine && ms > budget; r++) {
            aim *= budget / ms < 0.85 ? 0.85 : budget / ms; /* at most 15% a round: one noisy run misleads less */
            pdc_model_destroy(model);
            model = NULL;
            pdc_string_free(plan);
            plan = NULL;
            double pred2 = 0;
            if ((rc = cli_load_model(ctx, &a, &model)) != CLI_EXIT_OK) break;
            if ((st = plan_for(ctx, model, trainer, cx, cy, target, aim, opt, &plan, &pred2))) {
                rc = cli_lib_error(ctx, st, a.path, "plan");
                break;
            }
            if (pred2 > aim * (1 + 1e-9)) {
                rc = cli_error(a.path, "refine %ld: no plan meets %.3f ms (the fastest is predicted at %.3f ms); nothing written",
                               r, aim, pred2);
                break;
            }
            if (plan[0] && (st = pdc_model_transform(model, plan, NULL))) {
                rc = cli_lib_error(ctx, st, a.path, "prune");
                break;
            }
            if ((rc = time_model(ctx, a.path, model, repeat, &ms)) != CLI_EXIT_OK) break;
            printf("refine %ld: planned for %.3f ms: predicted %.3f ms, measured %.3f ms (%+.1f%% against the budget)\n", r,
                   aim, pred2, ms, 100.0 * (ms - budget) / budget);
            printf("plan: %s\n", plan[0] ? plan : "(dense)");
        }
    }
    if (rc == CLI_EXIT_OK) {
        st = text ? pdc_model_save_text(model, out_path, 0) : onnx ? pdc_model_save_onnx(model, out_path) : pdc_model_save(model, out_path);
        if (st) rc = cli_lib_error(ctx, st, out_path, NULL);
        else printf("wrote %s\n", out_path);
    }
    free(before);
    free(after);
    pdc_string_free(plan);
    pdc_attrs_destroy(opt);
    pdc_trainer_destroy(trainer);
    pdc_tensor_destroy(cx);
    pdc_tensor_destroy(cy);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
