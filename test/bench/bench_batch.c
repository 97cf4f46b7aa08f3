/*
 * bench_batch.c - fc and LSTM products at batch 1, 8 and 32: pdc "cpu" dense and block-pruned
 * against OpenBLAS on the same dense product.
 *
 *   - fc 512 -> 2048 (+ relu) and an LSTM with hidden size 512 over 32 steps, weights random;
 *     "dense" as built, "block" pruned by the prune-block pass in 4x16 blocks at 75% (4x fewer
 *     multiply-adds). Median run time of each at 1 and 2 threads.
 *   - for the fc, OpenBLAS alone on the dense product: cblas_sgemm (cblas_sgemv at batch 1) with as
 *     many OpenBLAS threads, bias and relu left out (what pdc's dense path ran before its packed
 *     kernels). ideal = that time / the compression.
 *
 * Writes a TSV (case, batch, threads, compression, pdc_ms, openblas_ms, ideal_ms; "-" where there is
 * no OpenBLAS counterpart) and prints it.
 * usage: bench_batch [--out FILE] [--threads LIST] [--min-time S]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "pdc.h"

void openblas_set_num_threads(int n); /* OpenBLAS's own, not in cblas.h */

static pdc_context *ctx;

static void check(pdc_status st, const char *what)
{
    if (st == PDC_OK) return;
    fprintf(stderr, "bench_batch: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

static float *random_floats(size_t n, float scale, unsigned seed)
{
    float *v = malloc(n * sizeof *v);
    if (!v) {
        fprintf(stderr, "bench_batch: out of memory\n");
        exit(1);
    }
    srand(seed);
    for (size_t i = 0; i < n; i++) v[i] = scale * ((float)rand() / (float)RAND_MAX - 0.5f);
    return v;
}

/* The benchmark's model: fc (lstm 0) K -> O at `batch`, or an LSTM of hidden size H over T steps. */
enum { K = 512, O = 2048, H = 512, T = 32 };
static pdc_model *make_model(int lstm, int64_t batch, int block)
{
    pdc_model *m;
    pdc_attrs *a;
    check(pdc_model_create(ctx, lstm ? "lstm" : "fc", &m), "model");
    check(pdc_attrs_create(ctx, &a), "attrs");
    if (lstm) {
        float *w = random_floats((size_t)4 * H * H, 0.2f, 1), *b = random_floats((size_t)8 * H, 0.2f, 2);
        check(pdc_model_add_input(m, "x", 3, (const int64_t[]){T, batch, H}), "input");
        check(pdc_model_add_constant(m, "W", 3, (const int64_t[]){1, 4 * H, H}, w), "W");
        check(pdc_model_add_constant(m, "R", 3, (const int64_t[]){1, 4 * H, H}, w), "R");
        check(pdc_model_add_constant(m, "B", 2, (const int64_t[]){1, 8 * H}, b), "B");
        check(pdc_attrs_set_int(a, "hidden_size", H), "hidden_size");
        check(pdc_model_add_layer(m, "rnn", "lstm", 4, (const char *const[]){"x", "W", "R", "B"}, 1,
                                  (const char *const[]){"y"}, a), "lstm");
        free(w);
        free(b);
    } else {
        float *w = random_floats((size_t)O * K, 0.1f, 3), *b = random_floats(O, 0.2f, 4);
        check(pdc_model_add_input(m, "x", 2, (const int64_t[]){batch, K}), "input");
        check(pdc_model_add_constant(m, "w", 2, (const int64_t[]){O, K}, w), "w");
        check(pdc_model_add_constant(m, "b", 1, (const int64_t[]){O}, b), "b");
        check(pdc_attrs_set_string(a, "activation", "relu"), "activation");
        check(pdc_model_add_layer(m, "fc", "fc", 3, (const char *const[]){"x", "w", "b"}, 1, (const char *const[]){"y"}, a),
              "fc");
        free(w);
        free(b);
    }
    pdc_attrs_destroy(a);
    check(pdc_model_mark_output(m, "y"), "output");
    if (block) {
        check(pdc_attrs_create(ctx, &a), "attrs");
        check(pdc_attrs_set_string(a, "block", "4x16:0.75"), "block");
        check(pdc_model_transform(m, "prune-block", a), "prune-block");
        pdc_attrs_destroy(a);
    }
    return m;
}

/* Median ms of fn(arg) after warm-up, for at least min_time seconds and 11 runs. */
static double median_ms(void (*fn)(void *), void *arg, double min_time)
{
    enum { MAX = 4000 };
    static double t[MAX];
    int n = 0;
    double spent = 0;
    for (int w = 0; w < 3; w++) fn(arg);
    while ((n < 11 || spent < min_time) && n < MAX) {
        double t0 = bench_now();
        fn(arg);
        t[n] = (bench_now() - t0) * 1e3;
        spent += t[n] / 1e3;
        n++;
    }
    return bench_median(t, n);
}

typedef struct {
    pdc_program *p;
    pdc_tensor *x, *y;
} pdc_job;

static void run_pdc(void *arg)
{
    pdc_job *j = arg;
    check(pdc_program_run(j->p, 1, &j->x, 1, &j->y), "run");
}

typedef struct {
    int batch;
    const float *x, *w;
    float *y;
} blas_job;

static void run_blas(void *arg)
{
    blas_job *j = arg;
    if (j->batch == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, O, K, 1.0f, j->w, K, j->x, 1, 0.0f, j->y, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->batch, O, K, 1.0f, j->x, K, j->w, K, 0.0f, j->y, O);
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_batch.tsv", *threads_list = "1,2";
    double min_time = 0.5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_list = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_batch [--out FILE] [--threads LIST] [--min-time S]\n");
            return 2;
        }
    }
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "bench_batch: cannot write %s\n", out_path);
        return 1;
    }
    fprintf(out, "case\tbatch\tthreads\tcompression\tpdc_ms\topenblas_ms\tideal_ms\n");
    printf("%-10s %5s %7s %11s %9s %11s %9s\n", "case", "batch", "threads", "compression", "pdc_ms", "openblas_ms",
           "ideal_ms");
    static const int batches[] = {1, 8, 32};
    for (int lstm = 0; lstm < 2; lstm++)
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            const int batch = batches[bi];
            float *xv = random_floats((size_t)batch * (lstm ? (size_t)T * H : K), 1.0f, 5);
            float *wd = random_floats((size_t)O * K, 0.1f, 3), *yb = malloc((size_t)batch * O * sizeof *yb);
            for (const char *tl = threads_list; *tl;) {
                int threads = atoi(tl);
                char tv[16];
                snprintf(tv, sizeof tv, "%d", threads);
                check(pdc_context_set_option(ctx, "threads", tv), "threads");
                double blas = -1.0;
                if (!lstm) {
                    blas_job bj = {batch, xv, wd, yb};
                    openblas_set_num_threads(threads);
                    blas = median_ms(run_blas, &bj, min_time);
                    openblas_set_num_threads(1); /* as pdc sets it (its threads call BLAS single-threaded) */
                }
                double dense_ms = 0;
                for (int block = 0; block < 2; block++) {
                    pdc_model *m = make_model(lstm, batch, block);
                    pdc_program *p;
                    check(pdc_compile(ctx, m, "cpu", &p), "compile");
                    pdc_job j = {p, NULL, NULL};
                    const int64_t xd[3] = {T, batch, H}, fd[2] = {batch, K};
                    const int64_t yl[4] = {T, 1, batch, H}, yf[2] = {batch, O};
                    check(pdc_tensor_create(ctx, lstm ? 3 : 2, lstm ? xd : fd, &j.x), "x");
                    check(pdc_tensor_create(ctx, lstm ? 4 : 2, lstm ? yl : yf, &j.y), "y");
                    memcpy(pdc_tensor_data(j.x), xv, (size_t)batch * (lstm ? (size_t)T * H : K) * sizeof(float));
                    double ms = median_ms(run_pdc, &j, min_time);
                    double compression = block ? 4.0 : 1.0;
                    if (!block) dense_ms = ms;
                    const double base = lstm ? dense_ms : blas;
                    char name[16];
                    snprintf(name, sizeof name, "%s_%s", lstm ? "lstm" : "fc", block ? "block" : "dense");
                    char bl[32] = "-";
                    if (!lstm) snprintf(bl, sizeof bl, "%.4f", blas);
                    fprintf(out, "%s\t%d\t%d\t%.2f\t%.4f\t%s\t%.4f\n", name, batch, threads, compression, ms, bl,
                            base / compression);
                    printf("%-10s %5d %7d %11.2f %9.4f %11s %9.4f\n", name, batch, threads, compression, ms, bl,
                           base / compression);
                    fflush(stdout);
                    pdc_tensor_destroy(j.x);
                    pdc_tensor_destroy(j.y);
                    pdc_program_destroy(p);
                    pdc_model_destroy(m);
                }
                while (*tl && *tl != ',') tl++;
                if (*tl == ',') tl++;
            }
            free(xv);
            free(wd);
            free(yb);
        }
    fclose(out);
    pdc_context_destroy(ctx);
    return 0;
}
