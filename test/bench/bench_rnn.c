/*
 * bench_rnn.c - LSTM and GRU (input and hidden 512, 32 steps, one direction, bias) at batch 1 and 8, one thread:
 * pdc "cpu" dense, block column-row pruned (prune-bcr, 16x16 blocks) at 4x (4 of every block's 16 columns kept)
 * and 8x (2 of 16; rows all kept: the cpu kernel gains from column pruning, see backends/cpu/bcr.c), and ONNX Runtime on the dense model (onnxruntime-node through ort_bench.js;
 * ONNX Runtime has no sparse LSTM/GRU). Weights random in +-0.1, inputs in +-0.5; every pdc output is compared
 * with ONNX Runtime's on the same weights (the pruned models' own ONNX export).
 *
 * Writes a TSV (case, batch, compression, pdc_ms, ort_ms, vs_ort = ort_ms / pdc_ms, vs_dense = the dense pdc
 * time / pdc_ms, max_rel_err against ONNX Runtime) and prints it.
 * usage: bench_rnn [--out FILE] [--min-time S] [--no-ort]
 * ONNX Runtime: test/bench/ort/node_modules/onnxruntime-node (make deps-bench), or $ORT_NODE_MODULE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "pdc.h"

enum { T = 32, I = 512, H = 512 };

static pdc_context *ctx;

static void check(pdc_status st, const char *what)
{
    if (st == PDC_OK) return;
    fprintf(stderr, "bench_rnn: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

/* The cell at `batch`, dense or BCR-pruned to 1/compression of w and r. */
static pdc_model *make_model(int lstm, int64_t batch, int compression)
{
    const int64_t G = lstm ? 4 : 3;
    pdc_model *m;
    pdc_attrs *a;
    check(pdc_model_create(ctx, lstm ? "lstm" : "gru", &m), "model");
    float *w = bench_random_floats((size_t)(G * H * I), 0.1f), *r = bench_random_floats((size_t)(G * H * H), 0.1f);
    float *b = bench_random_floats((size_t)(2 * G * H), 0.1f);
    check(pdc_model_add_input(m, "x", 3, (const int64_t[]){T, batch, I}), "input");
    check(pdc_model_add_constant(m, "W", 3, (const int64_t[]){1, G * H, I}, w), "W");
    check(pdc_model_add_constant(m, "R", 3, (const int64_t[]){1, G * H, H}, r), "R");
    check(pdc_model_add_constant(m, "B", 2, (const int64_t[]){1, 2 * G * H}, b), "B");
    check(pdc_attrs_create(ctx, &a), "attrs");
    check(pdc_attrs_set_int(a, "hidden_size", H), "hidden_size");
    check(pdc_model_add_layer(m, "rnn", lstm ? "lstm" : "gru", 4, (const char *const[]){"x", "W", "R", "B"}, 1,
                              (const char *const[]){"y"}, a), "layer");
    pdc_attrs_destroy(a);
    free(w);
    free(r);
    free(b);
    check(pdc_model_mark_output(m, "y"), "output");
    if (compression > 1) {
        check(pdc_attrs_create(ctx, &a), "attrs");
        check(pdc_attrs_set_string(a, "bcr_block", "16x16"), "bcr_block");
        check(pdc_attrs_set_float(a, "bcr_col_rate", compression == 4 ? 0.75f : 0.875f), "bcr_col_rate");
        check(pdc_model_transform(m, "prune-bcr", a), "prune-bcr");
        pdc_attrs_destroy(a);
    }
    return m;
}

/* ONNX Runtime's median ms on model m (saved as ONNX) for input x at 1 thread; its output into ort_y. */
static double time_ort(const pdc_model *m, const float *x, size_t nx, int64_t batch, float *ort_y, size_t ny,
                       double min_time)
{
    const char *onnx = "build/bench_rnn.onnx", *in = "build/bench_rnn_in.bin", *out = "build/bench_rnn_out.bin";
    check(pdc_model_save_onnx(m, onnx), "save onnx");
    FILE *f = fopen(in, "wb");
    if (!f || fwrite(x, sizeof *x, nx, f) != nx || fclose(f)) {
        fprintf(stderr, "bench_rnn: cannot write %s\n", in);
        exit(1);
    }
    char cmd[1024], line[512] = "";
    snprintf(cmd, sizeof cmd, "ORT_INPUT_DIMS='[%d,%lld,%d]' node test/bench/ort_bench.js %s %s %s 1 %g", T,
             (long long)batch, I, onnx, in, out, min_time);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(line, sizeof line, p)) {
        fprintf(stderr, "bench_rnn: ONNX Runtime run failed: %s\n", cmd);
        exit(1);
    }
    pclose(p);
    const char *mk = strstr(line, "\"median_ms\":");
    FILE *fo = fopen(out, "rb");
    if (!mk || !fo || fread(ort_y, sizeof *ort_y, ny, fo) != ny) {
        fprintf(stderr, "bench_rnn: unexpected ONNX Runtime result: %s\n", line);
        exit(1);
    }
    fclose(fo);
    return atof(mk + 12);
}

/* A "# load average ..." line: the host is shared, so the recording says how busy it was. */
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
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_rnn.tsv";
    double min_time = 0.5;
    int use_ort = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-ort")) use_ort = 0;
        else {
            fprintf(stderr, "usage: bench_rnn [--out FILE] [--min-time S] [--no-ort]\n");
            return 2;
        }
    }
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    check(pdc_context_set_option(ctx, "threads", "1"), "threads");
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "bench_rnn: cannot write %s\n", out_path);
        return 1;
    }
    fprintf(out, "case\tbatch\tcompression\tpdc_ms\tort_ms\tvs_ort\tvs_dense\tmax_rel_err\n");
    note_load(out, "before");
    printf("%-10s %5s %11s %9s %9s %7s %8s %11s\n", "case", "batch", "compression", "pdc_ms", "ort_ms", "vs_ort",
           "vs_dense", "max_rel_err");
    static const int batches[] = {1, 8}, compressions[] = {1, 4, 8};
    for (int lstm = 1; lstm >= 0; lstm--)
        for (size_t bi = 0; bi < 2; bi++) {
            const int64_t batch = batches[bi];
            const size_t nx = (size_t)(T * batch * I), ny = (size_t)(T * batch * H);
            float *xv = bench_random_floats(nx, 0.5f), *oy = malloc(ny * sizeof *oy);
            double dense_ms = NAN;
            for (size_t ci = 0; ci < 3; ci++) {
                pdc_model *m = make_model(lstm, batch, compressions[ci]);
                pdc_program *p;
                check(pdc_compile(ctx, m, "cpu", &p), "compile");
                pdc_tensor *x, *y;
                check(pdc_tensor_create(ctx, 3, (const int64_t[]){T, batch, I}, &x), "x");
                check(pdc_tensor_create(ctx, 4, (const int64_t[]){T, 1, batch, H}, &y), "y");
                memcpy(pdc_tensor_data(x), xv, nx * sizeof *xv);
                const double ms = bench_time_program(p, x, y, min_time);
                if (ci == 0) dense_ms = ms;
                double ort_ms = NAN, err = NAN;
                if (use_ort) {
                    /* ONNX Runtime on this model's weights (pruned ones as zeros): the dense time where dense */
                    ort_ms = time_ort(m, xv, nx, batch, oy, ny, min_time);
                    const float *yv = pdc_tensor_data(y);
                    double sc = 0, e = 0;
                    for (size_t i = 0; i < ny; i++) sc = fmax(sc, fabs((double)oy[i]));
                    for (size_t i = 0; i < ny; i++) e = fmax(e, fabs((double)yv[i] - (double)oy[i]));
                    err = sc > 0 ? e / sc : e;
                }
                static double ort_dense;
                if (ci == 0) ort_dense = ort_ms;
                const char *name = lstm ? "lstm" : "gru";
                char cname[32];
                snprintf(cname, sizeof cname, "%s_%s", name, ci ? "bcr" : "dense");
                fprintf(out, "%s\t%lld\t%d\t%.4f\t%.4f\t%.2f\t%.2f\t%.1e\n", cname, (long long)batch, compressions[ci],
                        ms, ort_dense, ort_dense / ms, dense_ms / ms, err);
                printf("%-10s %5lld %11d %9.4f %9.4f %7.2f %8.2f %11.1e\n", cname, (long long)batch, compressions[ci], ms,
                       ort_dense, ort_dense / ms, dense_ms / ms, err);
                fflush(stdout);
                pdc_tensor_destroy(x);
                pdc_tensor_destroy(y);
                pdc_program_destroy(p);
                pdc_model_destroy(m);
            }
            free(xv);
            free(oy);
        }
    note_load(out, "after");
    fclose(out);
    pdc_context_destroy(ctx);
    return 0;
}
