/*
 * bench_r3d18.c - a pruned r3d_18 end to end: pdc's "cpu" target against ONNX Runtime at 1 thread.
 *
 * The network is torchvision's r3d_18 (VideoResNet: stem conv 3x7x7 stride 1x2x2 + BN + relu, four
 * stages of two basic blocks of 3x3x3 convs with BN, 64/128/256/512 channels, stride 2 and a 1x1x1
 * downsampling conv at the start of stages 2-4, global average pooling, fc to 400 classes) built here
 * layer for layer with random weights and batchnorm statistics (no torchvision needed), at a
 * 1x3x8x112x112 clip. canonicalize folds the batchnorms; prune-kgs then prunes every 3x3x3 conv but the
 * stem (4x4 kernel groups, 7 of 27 positions, at most 8 masks per layer: 3.9x fewer weights there).
 * The pruned model is saved as ONNX (zeros included) and timed in ONNX Runtime (test/bench/ort_bench.js,
 * needs make deps-bench), and compiled for "cpu" and timed in pdc; outputs compared. The dense model is
 * timed in pdc too. Median of at least 5 runs and --min-time seconds.
 *
 * --save DIR also writes both models as DIR/r3d18-dense.pdc and DIR/r3d18-kgs.pdc (for `pdc predict --measure`).
 *
 * usage: bench_r3d18 [--out FILE] [--min-time S] [--no-ort] [--save DIR]
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"
#include "pdc.h"

static pdc_context *ctx;
static pdc_model *m;
static uint32_t seed = 1;

static void die(const char *what)
{
    fprintf(stderr, "bench_r3d18: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

static float rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* A constant `name` of n random values, scale x [-1, 1) (+ offset). */
static void constant(const char *name, size_t rank, const int64_t *dims, float scale, float offset)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = offset + scale * rnd();
    if (pdc_model_add_constant(m, name, rank, dims, v) != PDC_OK) die(name);
    free(v);
}

static void layer(const char *name, const char *op, const char *const *ins, size_t n_in, const char *out, pdc_attrs *a)
{
    if (pdc_model_add_layer(m, name, op, n_in, ins, 1, &out, a) != PDC_OK) die(name);
    pdc_attrs_destroy(a);
}

/* conv (no bias) kd x k x k, stride (sd, s, s), pad (pd, p, p), then batchnorm and maybe relu: out "<name>.out" */
static void conv_bn(const char *name, const char *in, int64_t c, int64_t o, int64_t kd, int64_t k, int64_t sd, int64_t s,
                    int64_t pd, int64_t p, int relu, char *out, size_t cap)
{
    char w[96], y[96], g[96], b[96], mu[96], var[96], bn[96], z[96];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(y, sizeof y, "%s.conv", name);
    constant(w, 5, (int64_t[]){o, c, kd, k, k}, sqrtf(2.0f / (float)(c * kd * k * k)), 0.0f);
    pdc_attrs *a;
    if (pdc_attrs_create(ctx, &a) != PDC_OK) die("attrs");
    pdc_attrs_set_ints(a, "strides", 3, (int64_t[]){sd, s, s});
    pdc_attrs_set_ints(a, "pads", 6, (int64_t[]){pd, p, p, pd, p, p});
    layer(name, "conv", (const char *[]){in, w}, 2, y, a);
    snprintf(g, sizeof g, "%s.bn.g", name);
    snprintf(b, sizeof b, "%s.bn.b", name);
    snprintf(mu, sizeof mu, "%s.bn.mean", name);
    snprintf(var, sizeof var, "%s.bn.var", name);
    snprintf(bn, sizeof bn, "%s.bn", name);
    constant(g, 1, (int64_t[]){o}, 0.2f, 1.0f);
    constant(b, 1, (int64_t[]){o}, 0.1f, 0.0f);
    constant(mu, 1, (int64_t[]){o}, 0.1f, 0.0f);
    constant(var, 1, (int64_t[]){o}, 0.2f, 1.0f);
    snprintf(z, sizeof z, "%s.bnout", name);
    layer(bn, "batchnorm", (const char *[]){y, g, b, mu, var}, 5, z, NULL);
    snprintf(out, cap, relu ? "%s.out" : "%s.bnout", name);
    if (relu) {
        char rn[96];
        snprintf(rn, sizeof rn, "%s.relu", name);
        layer(rn, "relu", (const char *[]){z}, 1, out, NULL);
    }
}

static void build(void)
{
    if (pdc_model_create(ctx, "r3d_18", &m) != PDC_OK) die("model");
    if (pdc_model_add_input(m, "clip", 5, (int64_t[]){1, 3, 8, 112, 112}) != PDC_OK) die("input");
    char x[96], t1[96], t2[96], sc[96], sum[128], rl[96];
    conv_bn("stem", "clip", 3, 64, 3, 7, 1, 2, 1, 3, 1, x, sizeof x);
    static const int64_t widths[4] = {64, 128, 256, 512};
    int64_t c = 64;
    for (int st = 0; st < 4; st++)
        for (int blk = 0; blk < 2; blk++) {
            const int64_t o = widths[st], s = st && !blk ? 2 : 1;
            char n1[64], n2[64], nd[64], na[64], nr[64];
            snprintf(n1, sizeof n1, "layer%d.%d.conv1", st + 1, blk);
            snprintf(n2, sizeof n2, "layer%d.%d.conv2", st + 1, blk);
            conv_bn(n1, x, c, o, 3, 3, s, s, 1, 1, 1, t1, sizeof t1);
            conv_bn(n2, t1, o, o, 3, 3, 1, 1, 1, 1, 0, t2, sizeof t2);
            if (s != 1 || c != o) {
                snprintf(nd, sizeof nd, "layer%d.%d.downsample", st + 1, blk);
                conv_bn(nd, x, c, o, 1, 1, s, s, 0, 0, 0, sc, sizeof sc);
            } else {
                snprintf(sc, sizeof sc, "%s", x);
            }
            snprintf(na, sizeof na, "layer%d.%d.add", st + 1, blk);
            snprintf(nr, sizeof nr, "layer%d.%d.relu", st + 1, blk);
            snprintf(sum, sizeof sum, "%s.out", na);
            layer(na, "add", (const char *[]){t2, sc}, 2, sum, NULL);
            snprintf(rl, sizeof rl, "%s.out", nr);
            layer(nr, "relu", (const char *[]){sum}, 1, rl, NULL);
            snprintf(x, sizeof x, "%s", rl);
            c = o;
        }
    layer("avgpool", "global_avgpool", (const char *[]){x}, 1, "pooled", NULL);
    layer("flatten", "flatten", (const char *[]){"pooled"}, 1, "flat", NULL);
    constant("fc.w", 2, (int64_t[]){400, 512}, 0.05f, 0.0f);
    constant("fc.b", 1, (int64_t[]){400}, 0.05f, 0.0f);
    layer("fc", "fc", (const char *[]){"flat", "fc.w", "fc.b"}, 3, "logits", NULL);
    if (pdc_model_mark_output(m, "logits") != PDC_OK) die("output");
    if (pdc_model_transform(m, "canonicalize", NULL) != PDC_OK) die("canonicalize");
}

static double time_pdc(const pdc_model *model, pdc_tensor *x, pdc_tensor *y, double min_time)
{
    pdc_program *p;
    if (pdc_compile(ctx, model, "cpu", &p) != PDC_OK) die("compile");
    double t[1000];
    int n = 0;
    double spent = 0;
    if (pdc_program_run(p, 1, &x, 1, &y) != PDC_OK) die("run"); /* warm-up */
    while ((n < 5 || spent < min_time) && n < 1000) {
        const double t0 = bench_now();
        if (pdc_program_run(p, 1, &x, 1, &y) != PDC_OK) die("run");
        t[n] = (bench_now() - t0) * 1e3;
        spent += t[n++] / 1e3;
    }
    pdc_program_destroy(p);
    return bench_median(t, n);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    const char *out = "test/bench/results_r3d18.tsv";
    double min_time = 2.0;
    int use_ort = 1;
    const char *save = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-ort")) use_ort = 0;
        else if (!strcmp(argv[i], "--save") && i + 1 < argc) save = argv[++i];
        else {
            fprintf(stderr, "usage: bench_r3d18 [--out FILE] [--min-time S] [--no-ort] [--save DIR]\n");
            return 2;
        }
    }
    setenv("OMP_NUM_THREADS", "1", 1);
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    if (pdc_context_set_option(ctx, "threads", "1") != PDC_OK) die("threads");
    build(); /* twice, from the same seed: the pruned copy */
    pdc_model *dense = m;
    seed = 1;
    build();
    pdc_model *pruned = m;
    m = dense;
    pdc_attrs *a;
    if (pdc_attrs_create(ctx, &a) != PDC_OK) die("attrs");
    pdc_attrs_set_int(a, "kgs_keep", 7);
    pdc_attrs_set_int(a, "kgs_masks", 8);
    if (pdc_model_transform(pruned, "prune-kgs", a) != PDC_OK) die("prune-kgs");
    pdc_attrs_destroy(a);
    if (save) {
        char path[1024];
        snprintf(path, sizeof path, "%s/r3d18-dense.pdc", save);
        if (pdc_model_save(dense, path) != PDC_OK) die("save the dense model");
        snprintf(path, sizeof path, "%s/r3d18-kgs.pdc", save);
        if (pdc_model_save(pruned, path) != PDC_OK) die("save the pruned model");
    }
    int64_t weights = 0, kept = 0;
    size_t nl = 0;
    pdc_model_num_layers(pruned, &nl);
    for (size_t i = 0; i < nl; i++) {
        int64_t w = 0, k = 0;
        pdc_model_layer_stat(pruned, i, PDC_STAT_WEIGHTS, &w);
        pdc_model_layer_stat(pruned, i, PDC_STAT_KEPT_WEIGHTS, &k);
        weights += w;
        kept += k;
    }
    const int64_t xd[5] = {1, 3, 8, 112, 112}, yd[2] = {1, 400};
    pdc_tensor *x, *y;
    if (pdc_tensor_create(ctx, 5, xd, &x) != PDC_OK || pdc_tensor_create(ctx, 2, yd, &y) != PDC_OK) die("tensor");
    float *xv = pdc_tensor_data(x);
    for (size_t i = 0; i < pdc_tensor_size(x); i++) xv[i] = rnd();
    const double dense_ms = time_pdc(m, x, y, min_time);
    const double pdc_ms = time_pdc(pruned, x, y, min_time);
    double ort_ms = NAN, err = NAN;
    char tmp[] = "/tmp/pdc-r3d18-XXXXXX";
    if (use_ort && mkdtemp(tmp)) {
        char onnx[256], in[256], oout[256], cmd[1024], line[512] = "";
        snprintf(onnx, sizeof onnx, "%s/r3d18.onnx", tmp);
        snprintf(in, sizeof in, "%s/in.bin", tmp);
        snprintf(oout, sizeof oout, "%s/out.bin", tmp);
        if (pdc_model_save_onnx(pruned, onnx) != PDC_OK) die("save ONNX");
        FILE *f = fopen(in, "wb");
        if (!f || fwrite(xv, sizeof(float), pdc_tensor_size(x), f) != pdc_tensor_size(x)) return 1;
        fclose(f);
        snprintf(cmd, sizeof cmd, "ORT_INPUT_DIMS='[1,3,8,112,112]' node test/bench/ort_bench.js %s %s %s 1 %g", onnx, in,
                 oout, min_time);
        FILE *p = popen(cmd, "r");
        if (p && fgets(line, sizeof line, p)) {
            char *mk = strstr(line, "\"median_ms\":");
            if (mk) ort_ms = atof(mk + 12);
        }
        if (p) pclose(p);
        float ref[400];
        FILE *fo = fopen(oout, "rb");
        if (fo && fread(ref, sizeof(float), 400, fo) == 400) {
            const float *yv = pdc_tensor_data(y);
            double sc = 0, e = 0;
            for (int i = 0; i < 400; i++) sc = fmax(sc, fabs(ref[i]));
            for (int i = 0; i < 400; i++) e = fmax(e, fabs((double)yv[i] - ref[i]));
            err = sc > 0 ? e / sc : e;
        }
        if (fo) fclose(fo);
        nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    }
    FILE *tsv = fopen(out, "w");
    if (!tsv) {
        perror(out);
        return 1;
    }
    fprintf(tsv, "model\tthreads\tweights\tkept\tpdc_dense_ms\tpdc_ms\tort_ms\tspeedup_vs_ort\tmax_rel_err\n");
    fprintf(tsv, "r3d_18-kgs@1x3x8x112x112\t1\t%lld\t%lld\t%.2f\t%.2f\t%.2f\t%.3f\t%.3g\n", (long long)weights,
            (long long)kept, dense_ms, pdc_ms, ort_ms, ort_ms / pdc_ms, err);
    fclose(tsv);
    printf("r3d_18 1x3x8x112x112, 1 thread: weights %lld, kept %lld (%.2fx); pdc dense %.1f ms, pdc KGS %.1f ms, "
           "ONNX Runtime (pruned model, zeros) %.1f ms: %.2fx; max rel err %.3g\n",
           (long long)weights, (long long)kept, (double)weights / (double)kept, dense_ms, pdc_ms, ort_ms,
           ort_ms / pdc_ms, err);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_model_destroy(pruned);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
