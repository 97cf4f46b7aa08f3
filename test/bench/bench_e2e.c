/*
 * bench_e2e.c - whole networks: pdc "cpu" against ONNX Runtime on the same model, and compile time.
 *
 *   - pruned ResNet-18 and VGG-16 at 224x224, batch 1 (models.h: 3x3 convs 8 patterns of 4 with
 *     50% connectivity, VGG fc 1x4 blocks at 10% density): pdc median run time at 1 and 2 threads;
 *     the same model saved as ONNX (pdc_model_save_onnx, zeros included) and timed in ONNX Runtime
 *     (onnxruntime-node, driven by ort_bench.js) at the same thread counts; outputs compared.
 *   - compile time of a pruned ResNet-50 for "cpu": cold (empty kernel cache) and warm (a fresh
 *     context reading the cache the cold compile wrote).
 *
 * usage: bench_e2e [--out FILE] [--threads LIST] [--min-time S] [--no-ort] [--models LIST]
 * Needs node and test/bench/ort/node_modules/onnxruntime-node (make deps-bench) unless --no-ort.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "layers.h"
#include "models.h"
#include "pdc.h"

static void die(pdc_context *ctx, const char *what)
{
    fprintf(stderr, "bench_e2e: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

static int rm_entry(const char *p, const struct stat *sb, int f, struct FTW *ftw)
{
    (void)sb, (void)f, (void)ftw;
    return remove(p);
}

/* Median ms of running prog (after warm-up) for at least min_time seconds and 7 runs. */
static double time_runs(pdc_context *ctx, pdc_program *prog, pdc_tensor *x, pdc_tensor *y, double min_time)
{
    double t[1000];
    int n = 0;
    double spent = 0;
    for (int w = 0; w < 3; w++)
        if (pdc_program_run(prog, 1, &x, 1, &y) != PDC_OK) die(ctx, "run");
    while ((n < 7 || spent < min_time) && n < 1000) {
        double t0 = bench_now();
        if (pdc_program_run(prog, 1, &x, 1, &y) != PDC_OK) die(ctx, "run");
        t[n] = (bench_now() - t0) * 1e3;
        spent += t[n] / 1e3;
        n++;
    }
    return bench_median(t, n);
}

static double compile_seconds(pdc_context *ctx, const pdc_model *m, pdc_program **out)
{
    double t0 = bench_now();
    if (pdc_compile(ctx, m, "cpu", out) != PDC_OK) die(ctx, "compile");
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_e2e.tsv", *threads_list = "1,2", *models = "resnet18,vgg16";
    double min_time = 1.0;
    int use_ort = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_list = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--models") && i + 1 < argc) models = argv[++i];
        else if (!strcmp(argv[i], "--no-ort")) use_ort = 0;
        else {
            fprintf(stderr, "usage: bench_e2e [--out FILE] [--threads 1,2] [--min-time S] [--models LIST] [--no-ort]\n");
            return 2;
        }
    }
    FILE *tsv = fopen(out_path, "w");
    if (!tsv) {
        perror(out_path);
        return 1;
    }
    char tmp[] = "/tmp/pdc-bench-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    fprintf(tsv, "case\tthreads\tpdc_ms\tort_ms\tspeedup\tmax_rel_err\n");
    double rt0 = bench_core_round_trip_ns();
    printf("core-to-core round trip (host.h): %.0f ns\n", rt0);
    printf("%-28s %2s %10s %10s %8s %12s\n", "model", "th", "pdc ms", "ORT ms", "x ORT", "max rel err");
    const bench_prune pruned = {1, 0.5, 0.10, 0};

    char list[256];
    snprintf(list, sizeof list, "%s", models);
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        pdc_context *ctx = NULL;
        if (pdc_context_create(&ctx) != PDC_OK) return 1;
        pdc_model *m = bench_build_model(ctx, name, 224, &pruned);
        if (!m) return 1;
        char onnx[512], in_path[512], out_ort[512];
        snprintf(onnx, sizeof onnx, "%s/%s.onnx", tmp, name);
        snprintf(in_path, sizeof in_path, "%s/%s.in", tmp, name);
        snprintf(out_ort, sizeof out_ort, "%s/%s.ort.out", tmp, name);
        if (use_ort && pdc_model_save_onnx(m, onnx) != PDC_OK) die(ctx, "save ONNX");
        int64_t xd[4] = {1, 3, 224, 224}, yd[2] = {1, 1000};
        pdc_tensor *x = NULL, *y = NULL;
        if (pdc_tensor_create(ctx, 4, xd, &x) != PDC_OK || pdc_tensor_create(ctx, 2, yd, &y) != PDC_OK) die(ctx, "tensor");
        float *xv = pdc_tensor_data(x);
        uint32_t s = 7;
        for (size_t i = 0; i < pdc_tensor_size(x); i++) {
            s = s * 1664525u + 1013904223u;
            xv[i] = (float)(s >> 8) / 16777216.0f * 2.0f - 1.0f;
        }
        FILE *fi = fopen(in_path, "wb");
        if (!fi || fwrite(xv, sizeof(float), pdc_tensor_size(x), fi) != pdc_tensor_size(x)) return 1;
        fclose(fi);
        char tl[64];
        snprintf(tl, sizeof tl, "%s", threads_list);
        char *save = NULL;
        for (char *tp = strtok_r(tl, ",", &save); tp; tp = strtok_r(NULL, ",", &save)) {
            int th = atoi(tp);
            if (pdc_context_set_option(ctx, "threads", tp) != PDC_OK) die(ctx, "threads");
            pdc_program *prog = NULL;
            compile_seconds(ctx, m, &prog);
            double pms = time_runs(ctx, prog, x, y, min_time);
            double oms = NAN, err = NAN;
            if (use_ort) {
                char cmd[2048], line[512] = "";
                snprintf(cmd, sizeof cmd, "ORT_INPUT_DIMS='[1,3,224,224]' node test/bench/ort_bench.js %s %s %s %d %g", onnx,
                         in_path, out_ort, th, min_time);
                FILE *p = popen(cmd, "r");
                if (!p || !fgets(line, sizeof line, p)) {
                    fprintf(stderr, "bench_e2e: ONNX Runtime run failed: %s\n", cmd);
                    return 1;
                }
                pclose(p);
                char *mk = strstr(line, "\"median_ms\":");
                if (mk) oms = atof(mk + 12);
                float ref[1000];
                FILE *fo = fopen(out_ort, "rb");
                if (fo && fread(ref, sizeof(float), 1000, fo) == 1000) {
                    double sc = 0, e = 0;
                    const float *yv = pdc_tensor_data(y);
                    for (int i = 0; i < 1000; i++) sc = fmax(sc, fabs(ref[i]));
                    for (int i = 0; i < 1000; i++) e = fmax(e, fabs((double)yv[i] - ref[i]));
                    err = sc > 0 ? e / sc : e;
                }
                if (fo) fclose(fo);
            }
            char label[64];
            snprintf(label, sizeof label, "%s-pruned@224", name);
            fprintf(tsv, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3g\n", label, th, pms, oms, oms / pms, err);
            printf("%-28s %2d %10.3f %10.3f %8.2f %12.3g\n", label, th, pms, oms, oms / pms, err);
            fflush(stdout);
            fflush(tsv);
            pdc_program_destroy(prog);
        }
        pdc_tensor_destroy(x);
        pdc_tensor_destroy(y);
        pdc_model_destroy(m);
        pdc_context_destroy(ctx);
    }

    /* compile time: pruned ResNet-50, cold and from the cache */
    char cache[600];
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    double t_cold = 0, t_warm = 0;
    for (int pass = 0; pass < 2; pass++) {
        pdc_context *ctx = NULL;
        if (pdc_context_create(&ctx) != PDC_OK) return 1;
        if (pdc_context_set_option(ctx, "cache_dir", cache) != PDC_OK) die(ctx, "cache_dir");
        pdc_model *m = bench_build_model(ctx, "resnet50", 224, &pruned);
        if (!m) return 1;
        pdc_program *prog = NULL;
        double t = compile_seconds(ctx, m, &prog);
        if (pass) t_warm = t;
        else t_cold = t;
        pdc_program_destroy(prog);
        pdc_model_destroy(m);
        pdc_context_destroy(ctx);
    }
    fprintf(tsv, "resnet50-pruned compile cold s\t-\t%.3f\t-\t-\t-\nresnet50-pruned compile cached s\t-\t%.3f\t-\t-\t-\n", t_cold,
            t_warm);
    printf("compile pruned ResNet-50 for cpu: cold %.3f s, from the kernel cache %.3f s\n", t_cold, t_warm);
    double rt1 = bench_core_round_trip_ns();
    fprintf(tsv, "core-to-core round trip ns, before and after\t-\t%.0f\t%.0f\t-\t-\n", rt0, rt1);
    printf("core-to-core round trip: %.0f ns\n", rt1);
    fclose(tsv);
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    printf("wrote %s\n", out_path);
    return 0;
}
