/*
 * bench_bcr.c - the cpu target's block column-row (BCR) products beyond the RNN cells, and their threads: an
 * fc 1024 -> 1024 at batch 1 and 8, a 1x1 conv 256 -> 256 on 28x28 and an LSTM (input and hidden 512, 32
 * steps) at batch 1, each dense and prune-bcr'd in 16x16 blocks to 4x fewer weights (4 of every block's 16
 * columns kept), at 1 and 2 threads. Dense fc runs on OpenBLAS (sgemv at batch 1) or the packed dense
 * kernel, dense 1x1 conv on the JIT dense conv kernel. Every pruned output is checked against the same
 * model on the reference target.
 *
 * Writes a TSV (case, batch, threads, compression, ms, vs_dense = the dense time at the same threads / ms,
 * vs_1t = the same model's 1-thread time / ms, max_rel_err against ref) and prints it; "# load average"
 * lines before and after (the host is shared).
 * usage: bench_bcr [--out FILE] [--min-time S]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "pdc.h"

static pdc_context *ctx;

static void check(pdc_status st, const char *what)
{
    if (st == PDC_OK) return;
    fprintf(stderr, "bench_bcr: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

static void constant(pdc_model *m, const char *name, int rank, const int64_t *dims, float scale)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = bench_random_floats(n, scale);
    check(pdc_model_add_constant(m, name, (size_t)rank, dims, v), name);
    free(v);
}

enum { FC, CONV, LSTM };

/* Case c at `batch`, dense or BCR-pruned to 1/4 of its weights; its input dims into in_dims / *in_rank. */
static pdc_model *make_model(int c, int64_t batch, int pruned, int64_t *in_dims, int *in_rank)
{
    pdc_model *m;
    pdc_attrs *a = NULL;
    check(pdc_model_create(ctx, "bcr", &m), "model");
    if (c == FC) {
        *in_rank = 2, in_dims[0] = batch, in_dims[1] = 1024;
        constant(m, "w", 2, (const int64_t[]){1024, 1024}, 0.05f);
        constant(m, "b", 1, (const int64_t[]){1024}, 0.1f);
    } else if (c == CONV) {
        *in_rank = 4, in_dims[0] = batch, in_dims[1] = 256, in_dims[2] = 28, in_dims[3] = 28;
        constant(m, "w", 4, (const int64_t[]){256, 256, 1, 1}, 0.1f);
        constant(m, "b", 1, (const int64_t[]){256}, 0.1f);
    } else {
        *in_rank = 3, in_dims[0] = 32, in_dims[1] = batch, in_dims[2] = 512;
        constant(m, "w", 3, (const int64_t[]){1, 2048, 512}, 0.1f);
        constant(m, "r", 3, (const int64_t[]){1, 2048, 512}, 0.1f);
        constant(m, "b", 2, (const int64_t[]){1, 4096}, 0.1f);
        check(pdc_attrs_create(ctx, &a), "attrs");
        check(pdc_attrs_set_int(a, "hidden_size", 512), "hidden_size");
    }
    check(pdc_model_add_input(m, "x", (size_t)*in_rank, in_dims), "input");
    static const char *const ops[] = {"fc", "conv", "lstm"};
    const char *ins[] = {"x", "w", c == LSTM ? "r" : "b", "b"};
    check(pdc_model_add_layer(m, "y", ops[c], c == LSTM ? 4 : 3, ins, 1, (const char *const[]){"y"}, a), "layer");
    pdc_attrs_destroy(a);
    check(pdc_model_mark_output(m, "y"), "output");
    if (pruned) {
        check(pdc_attrs_create(ctx, &a), "attrs");
        check(pdc_attrs_set_string(a, "bcr_block", "16x16"), "bcr_block");
        check(pdc_attrs_set_float(a, "bcr_col_rate", 0.75f), "bcr_col_rate");
        check(pdc_attrs_set_int(a, "block_convs", 1), "block_convs");
        check(pdc_attrs_set_int(a, "include_stem", 1), "include_stem");
        check(pdc_model_transform(m, "prune-bcr", a), "prune-bcr");
        pdc_attrs_destroy(a);
    }
    return m;
}

/* Output tensor of p (one output). */
static pdc_tensor *output_of(pdc_program *p)
{
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    check(pdc_program_output_info(p, 0, NULL, &rank, dims), "output shape");
    pdc_tensor *y;
    check(pdc_tensor_create(ctx, rank, dims, &y), "y");
    return y;
}

static void note_load(FILE *out, const char *when)
{
    char line[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) snprintf(line, sizeof line, "?");
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    fprintf(out, "# load average %s: %s\n", when, line);
    printf("# load average %s: %s\n", when, line);
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_bcr.tsv";
    double min_time = 0.5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_bcr [--out FILE] [--min-time S]\n");
            return 2;
        }
    }
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "bench_bcr: cannot write %s\n", out_path);
        return 1;
    }
    fprintf(out, "case\tbatch\tthreads\tcompression\tms\tvs_dense\tvs_1t\tmax_rel_err\n");
    note_load(out, "before");
    printf("%-6s %5s %7s %11s %9s %8s %6s %11s\n", "case", "batch", "threads", "compression", "ms", "vs_dense", "vs_1t",
           "max_rel_err");
    static const struct {
        int c;
        int64_t batch;
        const char *name;
    } cases[] = {{FC, 1, "fc"}, {FC, 8, "fc"}, {CONV, 1, "conv1x1"}, {LSTM, 1, "lstm"}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        double dense[3] = {NAN, NAN, NAN}, one = NAN;
        for (int pruned = 0; pruned < 2; pruned++) {
            int64_t dims[4];
            int rank;
            pdc_model *m = make_model(cases[ci].c, cases[ci].batch, pruned, dims, &rank);
            pdc_tensor *x;
            check(pdc_tensor_create(ctx, (size_t)rank, dims, &x), "x");
            float *xv = pdc_tensor_data(x);
            for (size_t i = 0; i < pdc_tensor_size(x); i++) xv[i] = 0.5f * (float)(2.0 * bench_urand() - 1.0);
            /* the reference output, for the pruned model's check */
            pdc_program *rp = NULL;
            pdc_tensor *ry = NULL;
            if (pruned) {
                check(pdc_compile(ctx, m, "ref", &rp), "compile ref");
                ry = output_of(rp);
                check(pdc_program_run(rp, 1, &x, 1, &ry), "run ref");
            }
            for (int threads = 1; threads <= 2; threads++) {
                char tv[8];
                snprintf(tv, sizeof tv, "%d", threads);
                check(pdc_context_set_option(ctx, "threads", tv), "threads");
                pdc_program *p;
                check(pdc_compile(ctx, m, "cpu", &p), "compile");
                pdc_tensor *y = output_of(p);
                const double ms = bench_time_program(p, x, y, min_time);
                double err = NAN;
                if (pruned) {
                    const float *a = pdc_tensor_data(y), *b = pdc_tensor_data(ry);
                    double sc = 0, e = 0;
                    for (size_t i = 0; i < pdc_tensor_size(y); i++) sc = fmax(sc, fabs((double)b[i]));
                    for (size_t i = 0; i < pdc_tensor_size(y); i++) e = fmax(e, fabs((double)a[i] - (double)b[i]));
                    err = sc > 0 ? e / sc : e;
                }
                if (!pruned) dense[threads] = ms;
                if (threads == 1) one = ms;
                fprintf(out, "%s\t%lld\t%d\t%d\t%.4f\t%.2f\t%.2f\t%.1e\n", cases[ci].name, (long long)cases[ci].batch,
                        threads, pruned ? 4 : 1, ms, dense[threads] / ms, one / ms, err);
                printf("%-6s %5lld %7d %11d %9.4f %8.2f %6.2f %11.1e\n", cases[ci].name, (long long)cases[ci].batch, threads,
                       pruned ? 4 : 1, ms, dense[threads] / ms, one / ms, err);
                fflush(stdout);
                pdc_tensor_destroy(y);
                pdc_program_destroy(p);
            }
            pdc_tensor_destroy(ry);
            pdc_program_destroy(rp);
            pdc_tensor_destroy(x);
            pdc_model_destroy(m);
        }
    }
    note_load(out, "after");
    fclose(out);
    pdc_context_destroy(ctx);
    return 0;
}
