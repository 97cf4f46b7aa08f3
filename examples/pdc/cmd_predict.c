/*
 * cmd_predict.c - `pdc predict` (the latency model's per-layer and total prediction, on 1 and N
 * threads, optionally next to measured times) and `pdc calibrate` (measure this host for it).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_IO 64

const char cli_predict_synopsis[] =
    "pdc predict MODEL [--target cpu|gpu] [--threads N] [--batch B] [--profile FILE] [--measure] [--repeat N] "
    "[--shape NAME=DIMS]... [--json]";
const char cli_predict_help[] =
    "usage: pdc predict MODEL [--target cpu|gpu] [--threads N] [--batch B] [--profile FILE] [--measure] [--repeat N]\n"
    "                   [--shape NAME=DIMS]... [--json]\n"
    "\n"
    "Predicts MODEL's run time on the cpu target without compiling it, per layer and in total, on 1\n"
    "thread and on N threads, next to each layer's effective MFLOPs and bytes of kept weights. The\n"
    "constants come from this host's latency profile (pdc calibrate); without one the built-in\n"
    "defaults are used and a line on stderr says so. See docs/predict.md.\n"
    "\n"
    "Options:\n"
    "  -t, --target NAME  cpu (the default; auto means cpu), or gpu: an analytic roofline of device 0's\n"
    "                     attributes (constants unvalidated on real hardware; threads do not apply)\n"
    "  --threads N        threads to predict for (0 = all cores, the default)\n"
    "  --batch B          fix dim 0 (the batch) of every graph input to B first; it must be symbolic\n"
    "  --profile FILE     use this latency profile instead of this host's\n"
    "  --measure          also compile the model for the cpu target, time it layer by layer (median of\n"
    "                     --repeat runs after 3 warm-up runs) and print the error of each prediction\n"
    "  -n, --repeat N     timed runs with --measure (default 20)\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME; may be repeated\n"
    "  --json             print one JSON object on the last line: model, target, threads, profile,\n"
    "                     total_ms, total_1thread_ms, layers (name, op, predicted_ms,\n"
    "                     predicted_1thread_ms, mflops, weight_bytes; with --measure measured_ms),\n"
    "                     with --measure measured_total_ms\n"
    "  -h, --help         show this help\n";

const char cli_calibrate_synopsis[] = "pdc calibrate [--target cpu] [--threads N] [--budget SECONDS] [-o FILE]";
const char cli_calibrate_help[] =
    "usage: pdc calibrate [--target cpu] [--threads N] [--budget SECONDS] [-o FILE]\n"
    "\n"
    "Measures this host for the latency model: short micro-benchmarks of every cpu kernel family on\n"
    "1 thread and on N threads, then fits each family's constants and writes the latency profile\n"
    "(versioned, keyed by CPU model, ISA and LLVM version) into the cache folder\n"
    "(cache_dir/profiles/), where pdc predict and pdc plan find it. Exits 0 when the profile is written.\n"
    "\n"
    "Options:\n"
    "  -t, --target NAME  cpu (the default)\n"
    "  --threads N        threads of the multi-thread measurements (0 = all cores, the default)\n"
    "  --budget SECONDS   about how long to measure (default 40, at most 3600)\n"
    "  -o, --output FILE  write the profile here instead\n"
    "  -h, --help         show this help\n";

enum { OPT_TARGET = 1, OPT_THREADS, OPT_BATCH, OPT_PROFILE, OPT_MEASURE, OPT_REPEAT, OPT_JSON, OPT_BUDGET, OPT_OUTPUT };
static const cli_opt predict_opts[] = {{"target", 't', 1, OPT_TARGET},   {"threads", 0, 1, OPT_THREADS},
                                       {"batch", 0, 1, OPT_BATCH},       {"profile", 0, 1, OPT_PROFILE},
                                       {"measure", 0, 0, OPT_MEASURE},   {"repeat", 'n', 1, OPT_REPEAT},
                                       {"shape", 0, 1, CLI_OPT_SHAPE},   {"json", 0, 0, OPT_JSON},
                                       {NULL, 0, 0, 0}};
static const cli_opt calibrate_opts[] = {{"target", 't', 1, OPT_TARGET}, {"threads", 0, 1, OPT_THREADS},
                                         {"budget", 0, 1, OPT_BUDGET},   {"output", 'o', 1, OPT_OUTPUT},
                                         {NULL, 0, 0, 0}};

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || !*v || *end || n < lo || n > hi) return -1;
    *out = n;
    return 0;
}

/* Notes of pdc_model_predict: the PDC_NOTE_PREDICT_DEFAULTS text, kept for printing. */
typedef struct note_box {
    char text[1024];
} note_box;

static void keep_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)pass;
    (void)layer;
    if (kind == PDC_NOTE_PREDICT_DEFAULTS) snprintf(((note_box *)user)->text, sizeof ((note_box *)user)->text, "%s", text);
}

/* Compiles model for cpu and writes each layer's median time over `repeat` runs into meas[]. */
static int measure(pdc_context *ctx, const char *path, const pdc_model *model, long repeat, size_t n_layers,
                   double *meas, double *total)
{
    pdc_program *prog = NULL;
    pdc_status st = pdc_compile(ctx, model, "cpu", &prog);
    if (st) return cli_lib_error(ctx, st, path, "compile");
    size_t n_in = 0, n_out = 0;
    pdc_program_num_inputs(prog, &n_in);
    pdc_program_num_outputs(prog, &n_out);
    pdc_tensor *in[MAX_IO] = {0}, *out[MAX_IO] = {0};
    int rc = CLI_EXIT_OK;
    if (n_in > MAX_IO || n_out > MAX_IO) rc = cli_error(path, "more than %d inputs or outputs", MAX_IO);
    uint32_t s = 0x12345678u;
    for (size_t i = 0; i < n_in && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_input_info(prog, i, NULL, &rank, dims)) || (st = pdc_tensor_create(ctx, rank, dims, &in[i])))
            rc = cli_lib_error(ctx, st, path, "input");
        else {
            float *d = pdc_tensor_data(in[i]);
            for (size_t k = 0; k < pdc_tensor_size(in[i]); k++) {
                s = s * 1664525u + 1013904223u;
                d[k] = (float)(s >> 8) / 8388608.0f - 1.0f;
            }
        }
    }
    for (size_t i = 0; i < n_out && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_output_info(prog, i, NULL, &rank, dims)) || (st = pdc_tensor_create(ctx, rank, dims, &out[i])))
            rc = cli_lib_error(ctx, st, path, "output");
    }
    double *all = calloc((size_t)repeat * (n_layers ? n_layers : 1), sizeof *all), *one = calloc(n_layers + 1, sizeof *one);
    double *tot = calloc((size_t)repeat, sizeof *tot);
    if (rc == CLI_EXIT_OK && (!all || !one || !tot)) rc = cli_error(path, "out of memory");
    for (long r = 0; r < 3 + repeat && rc == CLI_EXIT_OK; r++) {
        if ((st = pdc_program_run_timed(prog, n_in, in, n_out, out, one))) rc = cli_lib_error(ctx, st, path, "run");
        else if (r >= 3) {
            double t = 0;
            for (size_t l = 0; l < n_layers; l++) {
                all[l * (size_t)repeat + (size_t)(r - 3)] = one[l];
                t += one[l];
            }
            tot[r - 3] = t;
        }
    }
    if (rc == CLI_EXIT_OK) {
        for (size_t l = 0; l < n_layers; l++) {
            double *v = all + l * (size_t)repeat;
            qsort(v, (size_t)repeat, sizeof *v, cli_cmp_double);
            meas[l] = repeat % 2 ? v[repeat / 2] : 0.5 * (v[repeat / 2 - 1] + v[repeat / 2]);
        }
        qsort(tot, (size_t)repeat, sizeof *tot, cli_cmp_double);
        *total = repeat % 2 ? tot[repeat / 2] : 0.5 * (tot[repeat / 2 - 1] + tot[repeat / 2]);
    }
    free(all);
    free(one);
    free(tot);
    for (size_t i = 0; i < MAX_IO; i++) {
        pdc_tensor_destroy(in[i]);
        pdc_tensor_destroy(out[i]);
    }
    pdc_program_destroy(prog);
    return rc;
}

/* --batch: dim 0 of every graph input of rank >= 1 becomes b. */
static int set_batch(pdc_context *ctx, pdc_model *model, const char *path, long b)
{
    size_t n = 0;
    pdc_model_num_inputs(model, &n);
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        pdc_status st = pdc_model_input_info(model, i, &name, &rank, dims);
        if (!st && rank >= 1) {
            char keep[256];
            snprintf(keep, sizeof keep, "%s", name);
            dims[0] = b;
            st = pdc_model_set_input_shape(model, keep, rank, dims);
        }
        if (st) return cli_lib_error(ctx, st, path, "--batch");
    }
    return CLI_EXIT_OK;
}

int cmd_predict(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "predict", cli_predict_synopsis, cli_predict_help, predict_opts);
    cli_model_args a = {0};
    const char *target = "cpu", *profile = NULL, *v;
    long threads = 0, batch = 0, repeat = 20;
    int json = 0, do_measure = 0, id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_TARGET: target = v; break;
        case OPT_THREADS:
            if (parse_long(v, 0, 4096, &threads))
                return cli_usage_error("predict", cli_predict_synopsis, "--threads expects 0..4096, got '%s'", v);
            break;
        case OPT_BATCH:
            if (parse_long(v, 1, 1 << 20, &batch))
                return cli_usage_error("predict", cli_predict_synopsis, "--batch expects 1..1048576, got '%s'", v);
            break;
        case OPT_PROFILE: profile = v; break;
        case OPT_MEASURE: do_measure = 1; break;
        case OPT_REPEAT:
            if (parse_long(v, 1, 100000, &repeat))
                return cli_usage_error("predict", cli_predict_synopsis, "--repeat expects 1..100000, got '%s'", v);
            break;
        case OPT_JSON: json = 1; break;
        default: break;
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    if (!a.path) return cli_usage_error("predict", cli_predict_synopsis, "missing MODEL");
    if (strcmp(target, "cpu") && strcmp(target, "auto") && strcmp(target, "gpu"))
        return cli_usage_error("predict", cli_predict_synopsis, "--target: only cpu (calibrated) and gpu (roofline) have a latency model, got '%s'",
                               target);
    if (do_measure && !strcmp(target, "gpu"))
        return cli_usage_error("predict", cli_predict_synopsis, "--measure times layers on the cpu target only");
    const char *shown = strcmp(target, "gpu") ? "cpu" : "gpu";
    pdc_context *ctx = NULL;
    pdc_model *model = NULL;
    pdc_attrs *opt1 = NULL, *optn = NULL;
    double *p1 = NULL, *pn = NULL, *meas = NULL;
    note_box note = {""};
    int rc = cli_open_model(&a, &ctx, &model);
    if (rc == CLI_EXIT_OK && batch) rc = set_batch(ctx, model, a.path, batch);
    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%ld", threads);
    pdc_status st = PDC_OK;
    if (rc == CLI_EXIT_OK) {
        pdc_context_set_note_handler(ctx, keep_note, &note);
        if ((st = pdc_context_set_option(ctx, "threads", tbuf)) || (st = pdc_attrs_create(ctx, &opt1)) ||
            (st = pdc_attrs_create(ctx, &optn)) || (st = pdc_attrs_set_int(opt1, "threads", 1)) ||
            (st = pdc_attrs_set_int(optn, "threads", threads)) ||
            (profile && ((st = pdc_attrs_set_string(opt1, "profile", profile)) ||
                         (st = pdc_attrs_set_string(optn, "profile", profile)))))
            rc = cli_lib_error(ctx, st, a.path, NULL);
    }
    size_t n = 0;
    double t1 = 0, tn = 0, mtotal = 0;
    if (rc == CLI_EXIT_OK) {
        pdc_model_num_layers(model, &n);
        p1 = calloc(n + 1, sizeof *p1);
        pn = calloc(n + 1, sizeof *pn);
        meas = calloc(n + 1, sizeof *meas);
        if (!p1 || !pn || !meas) rc = cli_error(a.path, "out of memory");
    }
    if (rc == CLI_EXIT_OK && ((st = pdc_model_predict(ctx, model, target, opt1, &t1, p1)) ||
                              (st = pdc_model_predict(ctx, model, target, optn, &tn, pn))))
        rc = cli_lib_error(ctx, st, a.path, "predict");
    if (rc == CLI_EXIT_OK && do_measure) rc = measure(ctx, a.path, model, repeat, n, meas, &mtotal);
    if (rc == CLI_EXIT_OK) {
        /* N = all cores resolved as the library resolves it: the ratio of the two predictions needs it, so
         * ask a compiled program only when measuring; otherwise print the option */
        if (note.text[0]) fprintf(stderr, "pdc predict: %s\n", note.text);
        if (!json) {
            printf("model: %s\ntarget: %s, threads: %ld%s, profile: %s\n", a.path, shown, threads, threads ? "" : " (all cores)",
                   shown[0] == 'g' ? "none (roofline)" : note.text[0] ? "built-in defaults" : "calibrated");
            printf("%4s  %-24s %-16s %10s %11s %11s %11s", "#", "layer", "op", "MFLOPs", "weight KB", "1-thread ms",
                   "N-thread ms");
            if (do_measure) printf(" %11s %7s", "measured ms", "error");
            printf("\n");
        }
        for (size_t i = 0; i < n && !json; i++) {
            const char *name = "", *op = "";
            int64_t fl = 0, by = 0;
            pdc_model_layer_string(model, i, PDC_FIELD_NAME, &name);
            char nbuf[256];
            snprintf(nbuf, sizeof nbuf, "%s", name);
            pdc_model_layer_string(model, i, PDC_FIELD_OP, &op);
            pdc_model_layer_stat(model, i, PDC_STAT_EFFECTIVE_FLOPS, &fl);
            pdc_model_layer_stat(model, i, PDC_STAT_BYTES, &by);
            printf("%4zu  %-24s %-16s %10.3f %11.1f %11.4f %11.4f", i, nbuf, op, (double)fl * 1e-6, (double)by / 1024.0,
                   p1[i], pn[i]);
            if (do_measure) {
                if (meas[i] > 0.0005) printf(" %11.4f %+6.1f%%", meas[i], 100.0 * (pn[i] - meas[i]) / meas[i]);
                else printf(" %11.4f %7s", meas[i], "-");
            }
            printf("\n");
        }
        if (!json) {
            printf("      %-24s %-16s %10s %11s %11.3f %11.3f", "total", "", "", "", t1, tn);
            if (do_measure) printf(" %11.3f %+6.1f%%", mtotal, 100.0 * (tn - mtotal) / mtotal);
            printf("\n");
        } else {
            printf("{\"model\": ");
            cli_json_string(a.path);
            printf(", \"target\": \"%s\", \"threads\": %ld, \"profile\": \"%s\", \"total_ms\": %.6g, \"total_1thread_ms\": %.6g",
                   shown, threads, shown[0] == 'g' ? "roofline" : note.text[0] ? "defaults" : "calibrated", tn, t1);
            if (do_measure) printf(", \"measured_total_ms\": %.6g", mtotal);
            printf(", \"layers\": [");
            for (size_t i = 0; i < n; i++) {
                const char *name = "", *op = "";
                int64_t fl = 0, by = 0;
                pdc_model_layer_string(model, i, PDC_FIELD_NAME, &name);
                printf("%s{\"name\": ", i ? ", " : "");
                cli_json_string(name);
                pdc_model_layer_string(model, i, PDC_FIELD_OP, &op);
                printf(", \"op\": ");
                cli_json_string(op);
                pdc_model_layer_stat(model, i, PDC_STAT_EFFECTIVE_FLOPS, &fl);
                pdc_model_layer_stat(model, i, PDC_STAT_BYTES, &by);
                printf(", \"predicted_ms\": %.6g, \"predicted_1thread_ms\": %.6g, \"mflops\": %.6g, \"weight_bytes\": %lld",
                       pn[i], p1[i], (double)fl * 1e-6, (long long)by);
                if (do_measure) printf(", \"measured_ms\": %.6g", meas[i]);
                printf("}");
            }
            printf("]}\n");
        }
    }
    free(p1);
    free(pn);
    free(meas);
    pdc_attrs_destroy(opt1);
    pdc_attrs_destroy(optn);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}

int cmd_calibrate(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "calibrate", cli_calibrate_synopsis, cli_calibrate_help, calibrate_opts);
    const char *target = "cpu", *out = NULL, *v;
    long threads = 0, budget = 40;
    int id;
    while ((id = cli_next(&p, &v)) != CLI_ARG_END) {
        switch (id) {
        case OPT_TARGET: target = v; break;
        case OPT_THREADS:
            if (parse_long(v, 0, 4096, &threads))
                return cli_usage_error("calibrate", cli_calibrate_synopsis, "--threads expects 0..4096, got '%s'", v);
            break;
        case OPT_BUDGET:
            if (parse_long(v, 1, 3600, &budget))
                return cli_usage_error("calibrate", cli_calibrate_synopsis, "--budget expects 1..3600 seconds, got '%s'", v);
            break;
        case OPT_OUTPUT: out = v; break;
        case CLI_ARG_HELP: fputs(cli_calibrate_help, stdout); return CLI_EXIT_OK;
        case CLI_ARG_BAD: return CLI_EXIT_USAGE;
        case CLI_ARG_POSITIONAL:
            return cli_usage_error("calibrate", cli_calibrate_synopsis, "unexpected argument '%s'", v);
        default: break;
        }
    }
    if (strcmp(target, "cpu"))
        return cli_usage_error("calibrate", cli_calibrate_synopsis, "--target: only cpu can be calibrated, got '%s'", target);
    pdc_context *ctx = NULL;
    if (cli_context_create(&ctx) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    pdc_attrs *opt = NULL;
    char *path = NULL;
    pdc_status st;
    int rc = CLI_EXIT_OK;
    if ((st = pdc_attrs_create(ctx, &opt)) || (st = pdc_attrs_set_int(opt, "threads", threads)) ||
        (st = pdc_attrs_set_int(opt, "budget_s", budget)) || (out && (st = pdc_attrs_set_string(opt, "profile", out))) ||
        (st = pdc_calibrate(ctx, "cpu", opt, &path)))
        rc = cli_lib_error(ctx, st, out ? out : "calibrate", NULL);
    else printf("wrote %s\n", path);
    pdc_string_free(path);
    pdc_attrs_destroy(opt);
    pdc_context_destroy(ctx);
    return rc;
}
