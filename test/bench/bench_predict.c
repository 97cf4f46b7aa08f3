/*
 * bench_predict.c - `make bench-predict`: the latency model (pdc_model_predict) against measured
 * times, on ResNet-18, VGG-16, MobileNetV2 (224x224) and a two-layer LSTM (64 steps), each dense and
 * pruned, on 1 and 2 threads. For each: the predicted total against the median wall time of a run
 * (pdc_program_run), and per layer (pdc_program_run_timed, medians) the error of every layer above
 * 5% of the total. Writes test/bench/results_predict.tsv (--out) and prints a markdown table for
 * docs/predict.md. Uses this host's latency profile (run `pdc calibrate` first), else the defaults.
 *
 *   bench_predict [--out FILE] [--runs N] [--save DIR]   (--save: also write each model as DIR/NAME.pdc)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "models.h"

typedef struct config {
    const char *model, *variant;
    int hw;
} config;

static const config configs[] = {
    {"resnet18", "dense", 224}, {"resnet18", "pruned", 224},    {"vgg16", "dense", 224}, {"vgg16", "pruned", 224},
    {"mobilenetv2", "dense", 224}, {"mobilenetv2", "pruned", 224}, {"lstm", "dense", 64}, {"lstm", "pruned", 64},
};

static char defaults_note[1024];
static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    (void)layer;
    if (kind == PDC_NOTE_PREDICT_DEFAULTS) snprintf(defaults_note, sizeof defaults_note, "%s", text);
}

/* The 1-minute load average: other processes' runnable tasks (the machine is shared). */
static double loadavg(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

static pdc_model *build(pdc_context *ctx, const config *c)
{
    int convs = strcmp(c->model, "mobilenetv2") && strcmp(c->model, "lstm");
    bench_prune pr = {convs && !strcmp(c->variant, "pruned"), 0.5, 0.2, 0};
    pdc_model *m = bench_build_model(ctx, c->model, c->hw, &pr);
    if (!m || convs || strcmp(c->variant, "pruned")) return m;
    /* MobileNetV2: 1x4 blocks of the 1x1 convs and the fc, half removed; LSTM: 80% of the gate blocks */
    pdc_attrs *a = NULL;
    pdc_status st = pdc_attrs_create(ctx, &a);
    if (!st) st = pdc_attrs_set_string(a, "block", "1x4");
    if (!st) st = pdc_attrs_set_float(a, "block_rate", !strcmp(c->model, "lstm") ? 0.8f : 0.5f);
    if (!st && !strcmp(c->model, "mobilenetv2")) st = pdc_attrs_set_int(a, "block_convs", 1);
    if (!st) st = pdc_model_transform(m, "prune-block", a);
    pdc_attrs_destroy(a);
    if (st) {
        fprintf(stderr, "bench_predict: pruning %s: %s\n", c->model, pdc_context_last_error(ctx));
        pdc_model_destroy(m);
        return NULL;
    }
    return m;
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_predict.tsv", *save = NULL;
    int runs = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--save") && i + 1 < argc) save = argv[++i];
        else {
            fprintf(stderr, "usage: bench_predict [--out FILE] [--runs N] [--save DIR]\n");
            return 2;
        }
    }
    if (runs < 3) runs = 3;
    FILE *tsv = fopen(out_path, "w");
    if (!tsv) {
        perror(out_path);
        return 1;
    }
    fprintf(tsv, "model\tvariant\tthreads\tpredicted_ms\tmeasured_ms\terror_pct\tlayers_over_5pct\tworst_layer\tworst_layer_error_pct\tloadavg\n");
    printf("| model | variant | threads | predicted ms | measured ms | error | layers > 5%% | worst of them | load |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---|---:|\n");
    int fails = 0;
    for (size_t ci = 0; ci < sizeof configs / sizeof configs[0]; ci++) {
        const config *c = &configs[ci];
        for (int threads = 1; threads <= 2; threads++) {
            pdc_context *ctx = NULL;
            if (pdc_context_create(&ctx)) return 1;
            pdc_context_set_note_handler(ctx, on_note, NULL);
            char tb[8];
            snprintf(tb, sizeof tb, "%d", threads);
            pdc_context_set_option(ctx, "threads", tb);
            pdc_model *m = build(ctx, c);
            if (!m) return 1;
            if (save && threads == 1) {
                char path[512];
                snprintf(path, sizeof path, "%s/%s-%s.pdc", save, c->model, c->variant);
                if (pdc_model_save(m, path)) fprintf(stderr, "bench_predict: %s\n", pdc_context_last_error(ctx));
            }
            size_t n = 0;
            pdc_model_num_layers(m, &n);
            double *pred = calloc(n, sizeof *pred), *lay = calloc(n, sizeof *lay), *all = calloc(n * (size_t)runs, sizeof *all);
            double *tot = calloc((size_t)runs, sizeof *tot), total_pred = 0;
            pdc_attrs *opt = NULL;
            pdc_attrs_create(ctx, &opt);
            pdc_attrs_set_int(opt, "threads", threads);
            if (pdc_model_predict(ctx, m, "cpu", opt, &total_pred, pred)) {
                fprintf(stderr, "bench_predict: predict: %s\n", pdc_context_last_error(ctx));
                return 1;
            }
            pdc_program *prog = NULL;
            if (pdc_compile(ctx, m, "cpu", &prog)) {
                fprintf(stderr, "bench_predict: compile: %s\n", pdc_context_last_error(ctx));
                return 1;
            }
            size_t rank;
            int64_t dims[PDC_MAX_RANK];
            pdc_tensor *in = NULL, *out = NULL;
            pdc_program_input_info(prog, 0, NULL, &rank, dims);
            pdc_tensor_create(ctx, rank, dims, &in);
            float *d = pdc_tensor_data(in);
            for (size_t k = 0; k < pdc_tensor_size(in); k++) d[k] = (float)(2.0 * bench_urand() - 1.0);
            pdc_program_output_info(prog, 0, NULL, &rank, dims);
            pdc_tensor_create(ctx, rank, dims, &out);
            for (int w = 0; w < 2; w++) pdc_program_run(prog, 1, &in, 1, &out);
            /* whole runs and timed runs alternate, so both see the same machine state; with
             * PDC_LAYER_CLOCK=thread-cpu (1 thread only) the total is the sum of the layers' CPU times */
            const char *lc = getenv("PDC_LAYER_CLOCK");
            int cpu_clock = lc && !strcmp(lc, "thread-cpu");
            if (cpu_clock && threads > 1) {
                pdc_tensor_destroy(in);
                pdc_tensor_destroy(out);
                pdc_program_destroy(prog);
                pdc_attrs_destroy(opt);
                free(pred);
                free(lay);
                free(all);
                free(tot);
                pdc_model_destroy(m);
                pdc_context_destroy(ctx);
                continue;
            }
            for (int r = 0; r < runs; r++) {
                double t0 = bench_now();
                pdc_program_run(prog, 1, &in, 1, &out);
                tot[r] = (bench_now() - t0) * 1e3;
                pdc_program_run_timed(prog, 1, &in, 1, &out, lay);
                double sum = 0;
                for (size_t l = 0; l < n; l++) {
                    all[l * (size_t)runs + (size_t)r] = lay[l];
                    sum += lay[l];
                }
                if (cpu_clock) tot[r] = sum;
            }
            double meas = bench_median(tot, runs);
            int big = 0;
            double worst = 0;
            const char *worst_name = "-";
            char wn[128] = "-";
            for (size_t l = 0; l < n; l++) {
                double ml = bench_median(all + l * (size_t)runs, runs);
                if (ml < 0.05 * meas) continue;
                big++;
                double e = 100.0 * (pred[l] - ml) / ml;
                if (fabs(e) > fabs(worst) || !strcmp(worst_name, "-")) {
                    worst = e;
                    pdc_model_layer_string(m, l, PDC_FIELD_NAME, &worst_name);
                    snprintf(wn, sizeof wn, "%s", worst_name);
                }
            }
            double err = 100.0 * (total_pred - meas) / meas;
            if (fabs(err) > 15 || fabs(worst) > 25) fails++;
            double load = loadavg();
            printf("| %s | %s | %d | %.2f | %.2f | %+.1f%% | %d | %s %+.1f%% | %.1f |\n", c->model, c->variant, threads,
                   total_pred, meas, err, big, wn, worst, load);
            fprintf(tsv, "%s\t%s\t%d\t%.3f\t%.3f\t%.1f\t%d\t%s\t%.1f\t%.2f\n", c->model, c->variant, threads, total_pred,
                    meas, err, big, wn, worst, load);
            fflush(stdout);
            pdc_tensor_destroy(in);
            pdc_tensor_destroy(out);
            pdc_program_destroy(prog);
            pdc_attrs_destroy(opt);
            free(pred);
            free(lay);
            free(all);
            free(tot);
            pdc_model_destroy(m);
            pdc_context_destroy(ctx);
        }
    }
    fclose(tsv);
    printf("\nprofile: %s\n", defaults_note[0] ? defaults_note : "calibrated (this host's latency profile)");
    printf("%d rows outside 15%% total / 25%% per layer%s\n", fails,
           getenv("PDC_LAYER_CLOCK") ? " (times: the calling thread's CPU time, PDC_LAYER_CLOCK)" : "");
    return 0;
}
