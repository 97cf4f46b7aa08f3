/*
 * cmd_bench.c - `pdc bench`: compile a model for a target and time its runs on pseudo-random
 * inputs: warm-up, then N timed runs; prints the median, min and max milliseconds (and the compile
 * time), or one JSON object with --json.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_INPUTS 64

const char cli_bench_synopsis[] =
    "pdc bench MODEL [MODEL... --group] [--target cpu|ref|gpu] [--threads N] [--schedule dag|sequential] "
    "[--repeat N] [--warmup N] [--shape NAME=DIMS]... [--json]";
const char cli_bench_help[] =
    "usage: pdc bench MODEL [MODEL... --group] [--target cpu|ref|gpu] [--threads N] [--schedule dag|sequential]\n"
    "                 [--repeat N] [--warmup N] [--shape NAME=DIMS]... [--json]\n"
    "\n"
    "Compiles MODEL for a target and times it: --warmup untimed runs, then --repeat timed runs on the\n"
    "same pseudo-random inputs (uniform in [-1, 1), fixed seed). Prints the compile time and the\n"
    "median, min and max wall time of one run in milliseconds. With --group the models are compiled\n"
    "as one group (pdc_compile_group: what they share computed once) and one run runs every model.\n"
    "\n"
    "Options:\n"
    "  -t, --target NAME  the target to compile for: cpu (the default), ref (the reference interpreter)\n"
    "                     or gpu; auto picks cpu (the target with a latency model), else gpu, else ref\n"
    "  --threads N        worker threads (0 = all cores, the default); the output gives the number\n"
    "                     the runs used (ref and gpu: 1 host thread)\n"
    "  --schedule S       dag (default): a group's (or a scheduled model's) independent layers side by\n"
    "                     side where predicted faster; sequential: one after the other (context option\n"
    "                     schedule)\n"
    "  -n, --repeat N     timed runs (default 20)\n"
    "  --warmup N         untimed runs first (default 3)\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME, e.g. --shape image=1x3x224x224; may be repeated\n"
    "  --group            the models given are one group\n"
    "  --json             print one JSON object: model, target, threads, runs, compile_ms, median_ms,\n"
    "                     min_ms, max_ms\n"
    CLI_MAX_MEMORY_HELP
    "  -h, --help         show this help\n";

enum { OPT_TARGET = 1, OPT_THREADS, OPT_REPEAT, OPT_WARMUP, OPT_JSON, OPT_SCHEDULE };
static const cli_opt bench_opts[] = {{"target", 't', 1, OPT_TARGET}, {"threads", 0, 1, OPT_THREADS},
                                     {"group", 0, 0, CLI_OPT_GROUP}, {"schedule", 0, 1, OPT_SCHEDULE},
                                     {"repeat", 'n', 1, OPT_REPEAT}, {"warmup", 0, 1, OPT_WARMUP},
                                     {"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY}, {"json", 0, 0, OPT_JSON},
                                     {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("bench", cli_bench_synopsis, __VA_ARGS__)

static int bench_model(pdc_context *ctx, const char *path, const pdc_model *model, const char *target, long repeat,
                       long warmup, int json)
{
    pdc_program *prog = NULL;
    double t0 = cli_now_ms();
    pdc_status st = pdc_compile(ctx, model, target, &prog);
    double compile_ms = cli_now_ms() - t0;
    if (st != PDC_OK) return cli_lib_error(ctx, st, path, "compile");
    size_t n_in = 0, n_out = 0;
    pdc_program_num_inputs(prog, &n_in);
    pdc_program_num_outputs(prog, &n_out);
    int rc = CLI_EXIT_OK;
    pdc_tensor *in[MAX_INPUTS] = {0}, *out[MAX_INPUTS] = {0};
    double *times = calloc((size_t)(repeat ? repeat : 1), sizeof *times);
    if (n_in > MAX_INPUTS || n_out > MAX_INPUTS) rc = cli_error(path, "more than %d inputs or outputs", MAX_INPUTS);
    else if (!times) rc = cli_error(path, "out of memory");
    uint32_t s = 0x12345678u;
    for (size_t i = 0; i < n_in && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_input_info(prog, i, NULL, &rank, dims)) != PDC_OK ||
            (st = pdc_tensor_create(ctx, rank, dims, &in[i])) != PDC_OK) {
            rc = cli_lib_error(ctx, st, path, "input");
            break;
        }
        float *d = pdc_tensor_data(in[i]);
        for (size_t k = 0; k < pdc_tensor_size(in[i]); k++) {
            s = s * 1664525u + 1013904223u;
            d[k] = (float)(s >> 8) / 8388608.0f - 1.0f;
        }
    }
    for (size_t i = 0; i < n_out && rc == CLI_EXIT_OK; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_program_output_info(prog, i, NULL, &rank, dims)) != PDC_OK ||
            (st = pdc_tensor_create(ctx, rank, dims, &out[i])) != PDC_OK)
            rc = cli_lib_error(ctx, st, path, "output");
    }
    for (long r = 0; r < warmup + repeat && rc == CLI_EXIT_OK; r++) {
        double a = cli_now_ms();
        st = pdc_program_run(prog, n_in, in, n_out, out);
        double dt = cli_now_ms() - a;
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, path, "run");
        else if (r >= warmup) times[r - warmup] = dt;
    }
    if (rc == CLI_EXIT_OK) {
        double med = NAN, mn = NAN, mx = NAN;
        if (repeat > 0) {
            qsort(times, (size_t)repeat, sizeof *times, cli_cmp_double);
            med = repeat % 2 ? times[repeat / 2] : 0.5 * (times[repeat / 2 - 1] + times[repeat / 2]);
            mn = times[0];
            mx = times[repeat - 1];
        }
        /* the threads the runs used: the option's 0 (all cores) resolved, 1 on ref and gpu */
        size_t threads = 0;
        char opt[32] = "";
        pdc_program_num_threads(prog, &threads);
        pdc_context_get_option(ctx, "threads", opt, sizeof opt);
        if (json) {
            printf("{\"model\": ");
            cli_json_string(path);
            printf(", \"target\": ");
            cli_json_string(target);
            printf(", \"threads\": %zu, \"runs\": %ld, \"compile_ms\": %.3f, \"median_ms\": %.4f, \"min_ms\": %.4f, "
                   "\"max_ms\": %.4f}\n",
                   threads, repeat, compile_ms, repeat ? med : 0.0, repeat ? mn : 0.0, repeat ? mx : 0.0);
        } else {
            printf("model: %s\ntarget: %s, threads: %zu%s\ncompile: %.1f ms\n", path, target, threads,
                   !strcmp(target, "cpu") && !strcmp(opt, "0") ? " (all cores)" : "", compile_ms);
            if (repeat) printf("run: median %.3f ms, min %.3f ms, max %.3f ms (%ld runs after %ld warm-up)\n", med, mn,
                               mx, repeat, warmup);
        }
    }
    for (size_t i = 0; i < MAX_INPUTS; i++) {
        pdc_tensor_destroy(in[i]);
        pdc_tensor_destroy(out[i]);
    }
    free(times);
    pdc_program_destroy(prog);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "bench", cli_bench_synopsis, cli_bench_help, bench_opts);
    cli_model_args a = {0};
    const char *target = "cpu", *threads = NULL, *schedule = NULL, *v;
    long repeat = 20, warmup = 3;
    int json = 0, id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_TARGET:
            if (!*v) return USAGE("empty --target");
            target = v;
            break;
        case OPT_THREADS: threads = v; break;
        case OPT_SCHEDULE: schedule = v; break;
        case OPT_REPEAT:
            if (cli_parse_count(v, 1000000, &repeat)) return USAGE("--repeat expects a count 0..1000000, got '%s'", v);
            break;
        case OPT_WARMUP:
            if (cli_parse_count(v, 1000000, &warmup)) return USAGE("--warmup expects a count 0..1000000, got '%s'", v);
            break;
        case OPT_JSON: json = 1; break;
        default: break;
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    const char *model_path = a.path;
    if (!model_path) return USAGE("missing MODEL");
    pdc_context *ctx = NULL;
    if (cli_context_create(&ctx) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    int rc = CLI_EXIT_OK;
    if (threads) {
        pdc_status st = pdc_context_set_option(ctx, "threads", threads);
        if (st != PDC_OK) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", pdc_context_last_error(ctx));
            pdc_context_destroy(ctx);
            return USAGE("--threads: %s", msg);
        }
    }
    if (schedule && pdc_context_set_option(ctx, "schedule", schedule) != PDC_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", pdc_context_last_error(ctx));
        pdc_context_destroy(ctx);
        return USAGE("--schedule: %s", msg);
    }
    pdc_model *model = NULL;
    rc = cli_load_model(ctx, &a, &model);
    if (rc == CLI_EXIT_OK) rc = bench_model(ctx, model_path, model, target, repeat, warmup, json);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
