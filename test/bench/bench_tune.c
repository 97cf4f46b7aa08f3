/*
 * bench_tune.c - kernel auto-tuning (pdc_model_tune) against the cpu target's heuristics: on the
 * VGG-16 and ResNet-50 3x3 layers at 4.5x and 9x and on whole pruned ResNet-18 and VGG-16 (4.5x),
 * at each thread count given: the time tuning took, the compile time with the database against an
 * object-cache hit without it, and the median run time tuned against default, their runs
 * alternated in rounds so that the shared host's drift hits both alike.
 *
 * PDC_OMP_STATIC is set: the team is the thread count asked for, while other processes run too.
 * Each case starts from an empty cache folder of its own (so tuning pays for its JIT compiles, as
 * on a first `pdc tune`). Run it with PDC_CPU_FEATURES=-avx512f to tune for AVX2 (make bench-tune
 * does both); the ISA is part of the database key.
 *
 * usage: bench_tune [--threads 1,2] [--cases SUBSTRING,...] [--layer-budget S] [--model-budget S]
 *                   [--rounds N] [--out FILE]
 * --cases: only the cases whose name contains one of the substrings: "resnet18@,vgg16@" the whole
 * models, "resnet50.512@7" one layer at both sparsities, "conv4_1@9x" one at one.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv_case.h"
#include "layers.h"
#include "models.h"

#define RUNS_PER_ROUND 10

static void die(pdc_context *ctx, pdc_status st, const char *what)
{
    fprintf(stderr, "bench_tune: %s: %s\n", what, ctx ? pdc_context_last_error(ctx) : pdc_status_string(st));
    exit(1);
}
#define PDC(ctx, call)                                   \
    do {                                                 \
        pdc_status st_ = (call);                         \
        if (st_ != PDC_OK) die((ctx), st_, #call);       \
    } while (0)

static pdc_tensor *io(pdc_context *ctx, const pdc_program *p, int output)
{
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_tensor *t;
    PDC(ctx, (output ? pdc_program_output_info : pdc_program_input_info)(p, 0, NULL, &rank, dims));
    PDC(ctx, pdc_tensor_create(ctx, rank, dims, &t));
    float *d = pdc_tensor_data(t);
    for (size_t i = 0; i < pdc_tensor_size(t); i++) d[i] = (float)bench_urand() - 0.5f;
    return t;
}

/* Median and fastest ms of a's and b's runs, alternated: `rounds` rounds of RUNS_PER_ROUND runs each. */
static void race(pdc_context *ctx, pdc_program *a, pdc_program *b, int rounds, double *ma, double *mb, double *fa,
                 double *fb)
{
    pdc_tensor *x = io(ctx, a, 0), *ya = io(ctx, a, 1), *yb = io(ctx, b, 1);
    int n = rounds * RUNS_PER_ROUND;
    double *ta = malloc((size_t)n * sizeof *ta), *tb = malloc((size_t)n * sizeof *tb);
    for (int w = 0; w < 2; w++) {
        PDC(ctx, pdc_program_run(a, 1, &x, 1, &ya));
        PDC(ctx, pdc_program_run(b, 1, &x, 1, &yb));
    }
    for (int r = 0; r < rounds; r++)
        for (int s = 0; s < 2; s++) {
            pdc_program *p = (r + s) % 2 ? b : a;
            double *t = p == a ? ta : tb;
            for (int i = 0; i < RUNS_PER_ROUND; i++) {
                double t0 = bench_now();
                PDC(ctx, pdc_program_run(p, 1, &x, 1, p == a ? &ya : &yb));
                t[r * RUNS_PER_ROUND + i] = (bench_now() - t0) * 1e3;
            }
        }
    /* the tuned program computes what the default one does */
    const float *da = pdc_tensor_data(ya), *db = pdc_tensor_data(yb);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < pdc_tensor_size(ya); i++) {
        worst = fmax(worst, fabs((double)da[i] - (double)db[i]));
        scale = fmax(scale, fabs((double)da[i]));
    }
    if (worst > 1e-4 * scale) {
        fprintf(stderr, "bench_tune: tuned and default outputs differ by %g (scale %g)\n", worst, scale);
        exit(1);
    }
    *ma = bench_median(ta, n); /* sorts */
    *mb = bench_median(tb, n);
    *fa = ta[0];
    *fb = tb[0];
    free(ta);
    free(tb);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(ya);
    pdc_tensor_destroy(yb);
}

static FILE *out;
static char choices[4096]; /* the PDC_NOTE_TUNED texts of a case: "layer: configuration; ..." */

static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    if (kind != PDC_NOTE_TUNED) return;
    size_t n = strlen(choices), k = strcspn(text, ":");
    snprintf(choices + n, sizeof choices - n, "%s%s: %.*s", n ? "; " : "", layer, (int)k, text);
}

/* One case: m tuned in a fresh cache at `threads`, against its default program. */
static void run_case(const char *name, pdc_model *(*make)(pdc_context *, const void *), const void *arg, int threads,
                     double budget_s, int rounds)
{
    char dir[] = "/tmp/pdc_bench_tune_XXXXXX", t[16];
    if (!mkdtemp(dir)) die(NULL, PDC_ERR_IO, "mkdtemp");
    pdc_context *ctx;
    PDC(NULL, pdc_context_create(&ctx));
    snprintf(t, sizeof t, "%d", threads);
    PDC(ctx, pdc_context_set_option(ctx, "threads", t));
    PDC(ctx, pdc_context_set_option(ctx, "cache_dir", dir));
    PDC(ctx, pdc_context_set_note_handler(ctx, on_note, NULL));
    choices[0] = 0;
    pdc_model *m = make(ctx, arg);
    pdc_program *def, *tuned;
    PDC(ctx, pdc_context_set_option(ctx, "tune", "off"));
    PDC(ctx, pdc_compile(ctx, m, "cpu", &def)); /* fills the object cache */
    pdc_program_destroy(def);
    double t0 = bench_now();
    PDC(ctx, pdc_compile(ctx, m, "cpu", &def)); /* an object-cache hit */
    double hit_ms = (bench_now() - t0) * 1e3;
    pdc_attrs *opt;
    PDC(ctx, pdc_attrs_create(ctx, &opt));
    PDC(ctx, pdc_attrs_set_int(opt, "budget_s", (int64_t)budget_s));
    size_t n_tuned = 0;
    t0 = bench_now();
    PDC(ctx, pdc_model_tune(ctx, m, "cpu", opt, &n_tuned));
    double tune_s = bench_now() - t0;
    PDC(ctx, pdc_context_set_option(ctx, "tune", "cached"));
    /* the first compile with the database JITs the tuned kernels with the model's fused epilogues
     * (the layer was tuned alone); the second is what every later compile costs */
    PDC(ctx, pdc_compile(ctx, m, "cpu", &tuned));
    pdc_program_destroy(tuned);
    t0 = bench_now();
    PDC(ctx, pdc_compile(ctx, m, "cpu", &tuned));
    double db_ms = (bench_now() - t0) * 1e3;
    double md, mt, fd, ft;
    race(ctx, def, tuned, rounds, &md, &mt, &fd, &ft);
    const char *kernel = "";
    size_t nl = 0;
    if (pdc_model_num_layers(m, &nl) == PDC_OK && nl == 1) pdc_program_layer_kernel(tuned, 0, NULL, &kernel);
    fprintf(out, "%s\t%d\t%.4f\t%.4f\t%.3f\t%.4f\t%.4f\t%.3f\t%zu\t%.1f\t%.1f\t%.1f\t%s\t%s\n", name, threads, md, mt,
            md / mt, fd, ft, fd / ft, n_tuned, tune_s, hit_ms, db_ms, kernel, choices);
    fflush(out);
    if (out != stdout)
        printf("%-26s %d thr: median default %8.4f tuned %8.4f ms %.3fx; fastest %.4f %.4f %.3fx (%zu tuned in %.1f s; "
               "compile: hit %.1f ms, with database %.1f ms)\n",
               name, threads, md, mt, md / mt, fd, ft, fd / ft, n_tuned, tune_s, hit_ms, db_ms);
    fflush(stdout);
    pdc_attrs_destroy(opt);
    pdc_program_destroy(def);
    pdc_program_destroy(tuned);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "bench_tune: could not remove %s\n", dir);
}

/* Whether case `name` is one of the comma-separated substrings of `cases` ("": every case). */
static int wanted(const char *name, const char *cases)
{
    if (!*cases) return 1;
    for (const char *s = cases; *s;) {
        size_t n = strcspn(s, ",");
        for (const char *p = name; n && *p; p++)
            if (!strncmp(p, s, n)) return 1;
        s += n + (s[n] == ',');
    }
    return 0;
}

typedef struct layer_arg {
    const layer_case *L;
    const conv_data *d;
    int nine;
} layer_arg;

static pdc_model *make_layer(pdc_context *ctx, const void *arg)
{
    const layer_arg *a = arg;
    return bench_conv_model(ctx, a->L, a->nine ? a->d->w9 : a->d->w45, a->nine ? a->d->kp9 : a->d->kp45, a->d->b);
}

static pdc_model *make_model(pdc_context *ctx, const void *arg)
{
    const bench_prune pr = {1, 0.5, 0.25, 0};
    pdc_model *m = bench_build_model(ctx, arg, 224, &pr);
    if (!m) exit(1);
    return m;
}

int main(int argc, char **argv)
{
    const char *threads_list = "1,2", *cases = "", *out_path = NULL;
    double layer_budget = 8, model_budget = 120;
    int rounds = 6;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_list = argv[++i];
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = argv[++i];
        else if (!strcmp(argv[i], "--layer-budget") && i + 1 < argc) layer_budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--model-budget") && i + 1 < argc) model_budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else {
            fprintf(stderr, "usage: bench_tune [--threads 1,2] [--cases SUBSTRING,...] [--layer-budget S] [--model-budget S] "
                            "[--rounds N] [--out FILE]\n");
            return 2;
        }
    }
    /* a team of `threads` whatever else the host runs (team.c would shrink it under load, and a
     * tuned and a default run would then be timed with different teams) */
    setenv("PDC_OMP_STATIC", "1", 1);
    out = out_path ? fopen(out_path, "a") : stdout;
    if (!out) {
        perror(out_path);
        return 1;
    }
    if (out_path) setvbuf(stdout, NULL, _IOLBF, 0);
    const char *isa = getenv("PDC_CPU_FEATURES") && strstr(getenv("PDC_CPU_FEATURES"), "-avx512f") ? "avx2" : "host";
    fprintf(out, "# bench_tune isa=%s: case\tthreads\tdefault_ms\ttuned_ms\tgain\tdefault_min_ms\ttuned_min_ms\tgain_min"
                 "\tlayers_tuned\ttune_s\tcompile_hit_ms"
                 "\tcompile_db_ms\ttuned_kernel\tchoices\n", isa);
    FILE *la = fopen("/proc/loadavg", "r");
    char load[128] = "?\n";
    if (la) {
        if (!fgets(load, sizeof load, la)) snprintf(load, sizeof load, "?\n");
        fclose(la);
    }
    fprintf(out, "# load average at start: %s", load);
    int threads[8], nt = 0;
    for (const char *s = threads_list; *s && nt < 8;) {
        threads[nt++] = atoi(s);
        s = strchr(s, ',') ? strchr(s, ',') + 1 : s + strlen(s);
    }
    /* the layers: VGG-16 and ResNet-50 3x3 (bench_layers' first 12), drawn in bench_conv's order */
    for (size_t i = 0; i < 12; i++) {
        const layer_case *L = &bench_layers[i];
        conv_data d;
        conv_data_make(L, &d);
        for (int nine = 0; nine < 2; nine++) {
            char name[96];
            snprintf(name, sizeof name, "%s@%s", L->name, nine ? "9x" : "4.5x");
            if (!wanted(name, cases)) continue;
            layer_arg a = {L, &d, nine};
            for (int k = 0; k < nt; k++) run_case(name, make_layer, &a, threads[k], layer_budget, rounds);
        }
        conv_data_free(&d);
    }
    static const char *const models[] = {"resnet18", "vgg16"};
    for (size_t i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s@4.5x", models[i]);
        if (!wanted(name, cases)) continue;
        for (int k = 0; k < nt; k++) run_case(name, make_model, models[i], threads[k], model_budget, rounds);
    }
    if (out != stdout) fclose(out);
    return 0;
}
