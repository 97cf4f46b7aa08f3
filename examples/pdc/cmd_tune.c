/*
 * cmd_tune.c - `pdc tune`: tune the cpu target's kernels for a model's conv and fc layers (pdc_model_tune)
 * and print what each layer got; later compiles of any model with those layers use the results.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char cli_tune_synopsis[] = "pdc tune MODEL [--target cpu] [--threads N] [--budget-s SECONDS] [--shape NAME=DIMS]...";
const char cli_tune_help[] =
    "usage: pdc tune MODEL [--target cpu] [--threads N] [--budget-s SECONDS] [--shape NAME=DIMS]...\n"
    "\n"
    "Tunes the cpu target's kernels for MODEL's conv and fc layers at N threads: each distinct layer\n"
    "(shapes, attributes, kept weights) is compiled alone with every configuration the backend offers\n"
    "(kernel family, tile, filters a work item, packing, threads the layer runs on) and timed, the\n"
    "slower half dropped at each round (successive halving). Results go to the tuning database in the\n"
    "cache folder (cache_dir/tune/), keyed by the layer, this CPU and ISA, N and pdc's version; every\n"
    "later compile for cpu (pdc run, pdc bench, the C API with the context option tune=cached, the\n"
    "default) of any model with such a layer uses them. Layers the database has are not tuned again.\n"
    "Prints one line per layer tuned and a summary; exits 0 when done.\n"
    "\n"
    "Options:\n"
    "  -t, --target NAME    cpu (the default)\n"
    "  --threads N          threads the tuned programs will run with (0 = all cores, the default)\n"
    "  --budget-s SECONDS   about how long to tune the whole model (default 120, at most 3600)\n"
    "  --shape NAME=DIMS    fix the shape of graph input NAME; may be repeated\n"
    "  -h, --help           show this help\n";

enum { OPT_TARGET = 1, OPT_THREADS, OPT_BUDGET };
static const cli_opt tune_opts[] = {{"target", 't', 1, OPT_TARGET}, {"threads", 0, 1, OPT_THREADS},
                                    {"budget-s", 0, 1, OPT_BUDGET}, {"shape", 0, 1, CLI_OPT_SHAPE},
                                    {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("tune", cli_tune_synopsis, __VA_ARGS__)

typedef struct tune_summary {
    size_t layers;
    double tuned_ms, default_ms;
} tune_summary;

/* PDC_NOTE_TUNED: "CONFIG: T ms (heuristics D ms)" per layer tuned. */
static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)pass;
    if (kind != PDC_NOTE_TUNED) return;
    tune_summary *s = user;
    const char *at = strrchr(text, ':');
    double t = 0, d = 0;
    if (at && sscanf(at, ": %lf ms (heuristics %lf ms)", &t, &d) == 2) {
        s->tuned_ms += t;
        s->default_ms += d;
    }
    s->layers++;
    if (isatty(2)) fprintf(stderr, "\r%*s\r", 100, ""); /* over the progress line (args.c) */
    printf("%-24s %s\n", layer, text);
    fflush(stdout);
}

int cmd_tune(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "tune", cli_tune_synopsis, cli_tune_help, tune_opts);
    cli_model_args a = {0};
    const char *target = "cpu", *threads = NULL, *v;
    long budget = 120;
    int id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_TARGET: target = v; break;
        case OPT_THREADS: threads = v; break;
        case OPT_BUDGET:
            if (cli_parse_count(v, 3600, &budget) || budget < 1)
                return USAGE("--budget-s expects 1..3600 seconds, got '%s'", v);
            break;
        default: break;
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    if (!a.path) return USAGE("missing MODEL");
    if (strcmp(target, "cpu")) return USAGE("--target: only cpu has kernels to tune, got '%s'", target);
    pdc_context *ctx = NULL;
    if (cli_context_create(&ctx) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    if (threads && pdc_context_set_option(ctx, "threads", threads) != PDC_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", pdc_context_last_error(ctx));
        pdc_context_destroy(ctx);
        return USAGE("--threads: %s", msg);
    }
    pdc_model *model = NULL;
    int rc = cli_load_model(ctx, &a, &model);
    tune_summary s = {0, 0, 0};
    pdc_context_set_note_handler(ctx, on_note, &s);
    pdc_attrs *opt = NULL;
    size_t n = 0;
    double t0 = cli_now_ms();
    pdc_status st = PDC_OK;
    if (rc == CLI_EXIT_OK &&
        ((st = pdc_attrs_create(ctx, &opt)) || (st = pdc_attrs_set_int(opt, "budget_s", budget)) ||
         (st = pdc_model_tune(ctx, model, "cpu", opt, &n))))
        rc = cli_lib_error(ctx, st, a.path, "tune");
    if (rc == CLI_EXIT_OK) {
        printf("tuned %zu layer%s in %.1f s", n, n == 1 ? "" : "s", (cli_now_ms() - t0) / 1e3);
        if (s.layers && s.tuned_ms > 0)
            printf(": %.3f ms against the heuristics' %.3f ms (%.2fx, layers alone)", s.tuned_ms, s.default_ms,
                   s.default_ms / s.tuned_ms);
        printf("%s\n", n ? "" : " (the tuning database had every layer)");
    }
    pdc_attrs_destroy(opt);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
