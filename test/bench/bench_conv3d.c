/*
 * bench_conv3d.c - pdc's "cpu" target on the 3x3x3 convs of torchvision's r3d_18 at 1x3x8x112x112
 * against oneDNN's direct 3-D convolution, batch 1, fp32, at 1 and 2 threads, methods interleaved repetition
 * by repetition (shuffled order), median of the repetitions after a warm-up. oneDNN's OpenMP team is set
 * with omp_set_num_threads: libgomp reads OMP_NUM_THREADS before main, so setting it here would leave
 * oneDNN on every core (its "1 thread" figures recorded before 2026-11-29 ran on 2 threads).
 *
 *   pdc dense      the layer dense, compiled for "cpu" (backends/cpu/conv3d.c), timed through
 *                  pdc_program_run from NCDHW input to NCDHW output
 *   pdc kgs K      the same weights pruned by prune-kgs (4x4 kernel groups, K of 27 positions kept:
 *                  K = 7, 3.9x fewer weights; K = 3, 9x fewer; at most 8 distinct masks per layer)
 *   oneDNN direct  the dense weights, algorithm direct, in the layouts it prefers (reorders done once,
 *                  outside the timing: its best case)
 * Every pdc output is checked against oneDNN's on the same (dense or pruned, zero-filled) weights.
 * Writes a TSV (default test/bench/results_conv3d.tsv) and prints a table with each pdc method's speed-up
 * over oneDNN.
 *
 * --clock thread-cpu times the 1-thread rows in CPU time of the calling thread (both pdc and oneDNN run
 * there at 1 thread), not wall time: on a host shared with other processes the time this process is
 * descheduled then stays out of the figures (2-thread rows stay in wall time).
 *
 * usage: bench_conv3d [--out FILE] [--reps N] [--cases SUBSTRING] [--threads LIST] [--clock wall|thread-cpu]
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dnnl_conv.h"
#include "layers.h"
#include "pdc.h"

#define PD(x)                                                                                                   \
    do {                                                                                                        \
        pdc_status s_ = (x);                                                                                    \
        if (s_ != PDC_OK) {                                                                                     \
            fprintf(stderr, "bench_conv3d: %s: %s\n", #x, pdc_context_last_error(ctx));                        \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

typedef struct shape {
    const char *name;
    int64_t c, o, d, h, w, s; /* input channels, output channels, input depth/height/width, stride */
} shape;

/* r3d_18's 3x3x3 convs (pad 1) at a 1x3x8x112x112 clip; the stem (3x7x7) and 1x1x1 shortcuts left out */
static const shape shapes[] = {
    {"layer1 64x8x56x56", 64, 64, 8, 56, 56, 1},        {"layer2.0.conv1 64->128 s2", 64, 128, 8, 56, 56, 2},
    {"layer2 128x4x28x28", 128, 128, 4, 28, 28, 1},     {"layer3.0.conv1 128->256 s2", 128, 256, 4, 28, 28, 2},
    {"layer3 256x2x14x14", 256, 256, 2, 14, 14, 1},     {"layer4.0.conv1 256->512 s2", 256, 512, 2, 14, 14, 2},
    {"layer4 512x1x7x7", 512, 512, 1, 7, 7, 1},
};

static pdc_context *ctx;
static int thread_clock; /* --clock thread-cpu */

/* kgs_masks: at most 8 distinct group masks per layer, so each mask's 3 depth slices fit the 2-D pattern
 * generator's 32 patterns (more run as dense windows) */
#define BENCH_KGS_MASKS 8

static int64_t out_dim(int64_t in, int64_t s) { return (in + 2 - 3) / s + 1; }

/* ------------------------------------------------------------------ oneDNN */

/* ------------------------------------------------------------------ pdc */

typedef struct pconv {
    pdc_program *prog;
    pdc_tensor *in, *out;
    float *w; /* the weights the program has (pruned: zero-filled), for oneDNN's check */
    size_t kept;
} pconv;

/* The layer as a model, pruned by prune-kgs with `keep` positions (0: dense), compiled for cpu at the
 * context's threads. */
static void pconv_make(pconv *p, const shape *S, const float *x, const float *w, const float *b, int keep)
{
    memset(p, 0, sizeof *p);
    pdc_model *m;
    PD(pdc_model_create(ctx, "conv3d", &m));
    const int64_t xd[5] = {1, S->c, S->d, S->h, S->w}, wd[5] = {S->o, S->c, 3, 3, 3}, bd[1] = {S->o};
    PD(pdc_model_add_input(m, "x", 5, xd));
    PD(pdc_model_add_constant(m, "w", 5, wd, w));
    PD(pdc_model_add_constant(m, "b", 1, bd, b));
    pdc_attrs *a;
    PD(pdc_attrs_create(ctx, &a));
    const int64_t pads[6] = {1, 1, 1, 1, 1, 1}, st[3] = {S->s, S->s, S->s};
    PD(pdc_attrs_set_ints(a, "pads", 6, pads));
    PD(pdc_attrs_set_ints(a, "strides", 3, st));
    const char *ins[3] = {"x", "w", "b"}, *outs[1] = {"y"};
    PD(pdc_model_add_layer(m, "conv", "conv", 3, ins, 1, outs, a));
    pdc_attrs_destroy(a);
    PD(pdc_model_mark_output(m, "y"));
    if (keep) {
        PD(pdc_attrs_create(ctx, &a));
        PD(pdc_attrs_set_int(a, "include_stem", 1));
        PD(pdc_attrs_set_int(a, "kgs_keep", keep));
        PD(pdc_attrs_set_int(a, "kgs_masks", BENCH_KGS_MASKS));
        PD(pdc_model_transform(m, "prune-kgs", a));
        pdc_attrs_destroy(a);
    }
    /* the pass's weights: its projection on a copy (the same bits, test_prune_kgs checks it) */
    const size_t nw = (size_t)(S->o * S->c * 27);
    p->w = malloc(nw * sizeof *p->w);
    memcpy(p->w, w, nw * sizeof *w);
    if (keep) PD(pdc_prune_project_kgs(ctx, p->w, S->o, S->c, 27, 4, 4, (size_t)keep, BENCH_KGS_MASKS, NULL, NULL));
    p->kept = keep ? (size_t)(S->o * S->c * keep) : nw;
    PD(pdc_compile(ctx, m, "cpu", &p->prog));
    pdc_model_destroy(m);
    const int64_t yd[5] = {1, S->o, out_dim(S->d, S->s), out_dim(S->h, S->s), out_dim(S->w, S->s)};
    PD(pdc_tensor_create(ctx, 5, xd, &p->in));
    PD(pdc_tensor_create(ctx, 5, yd, &p->out));
    memcpy(pdc_tensor_data(p->in), x, (size_t)(S->c * S->d * S->h * S->w) * sizeof *x);
}

static void pconv_run(pconv *p) { PD(pdc_program_run(p->prog, 1, &p->in, 1, &p->out)); }

static void pconv_free(pconv *p)
{
    pdc_program_destroy(p->prog);
    pdc_tensor_destroy(p->in);
    pdc_tensor_destroy(p->out);
    free(p->w);
}

/* ------------------------------------------------------------------ the run */

static double max_rel_err(const float *a, const float *b, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) s = fmax(s, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - (double)b[i]));
    return s > 0 ? e / s : e;
}

static void fill(float *v, size_t n, uint32_t seed, float scale)
{
    for (size_t i = 0; i < n; i++) {
        seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
        v[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f);
    }
}

/* Seconds: CPU time of the calling thread with --clock thread-cpu at 1 thread, else wall time. */
static double now(int th)
{
    if (!thread_clock || th != 1) return bench_now();
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { M = 4 };
static const int keeps[M - 1] = {0, 7, 3};
static const char *const names[M] = {"pdc dense", "pdc kgs 7/27", "pdc kgs 3/27", "oneDNN direct"};

/* Layer S at th threads (pdc and oneDNN): each method timed, printed and written to tsv. */
static void run_layer(FILE *tsv, const shape *S, int th, int reps, const float *x, const float *w, const float *b,
                      float *yref)
{
    const size_t nw = (size_t)(S->o * S->c * 27);
    const size_t ny = (size_t)(S->o * out_dim(S->d, S->s) * out_dim(S->h, S->s) * out_dim(S->w, S->s));
    char ths[16];
    snprintf(ths, sizeof ths, "%d", th);
    PD(pdc_context_set_option(ctx, "threads", ths));
    omp_set_num_threads(th); /* oneDNN's team */
    pconv P[M - 1];
    double err[M] = {0};
    for (int k = 0; k < M - 1; k++) {
        pconv_make(&P[k], S, x, w, b, keeps[k]);
        pconv_run(&P[k]);
        dconv check; /* oneDNN on the weights pdc has (pruned: zero-filled) */
        dconv_make(&check, 3, (const int64_t[]){S->d, S->h, S->w}, S->c, S->o, S->s, 0, x, P[k].w, b, yref);
        dconv_free(&check);
        err[k] = max_rel_err(pdc_tensor_data(P[k].out), yref, ny);
    }
    dconv D;
    dconv_make(&D, 3, (const int64_t[]){S->d, S->h, S->w}, S->c, S->o, S->s, 0, x, w, b, yref);
    double t[M][100];
    uint32_t order = 12345u;
    for (int r = 0; r <= reps; r++) { /* repetition 0: warm-up */
        int perm[M] = {0, 1, 2, 3};
        for (int i = M - 1; i > 0; i--) {
            order ^= order << 13, order ^= order >> 17, order ^= order << 5;
            const int j = (int)(order % (uint32_t)(i + 1)), s = perm[i];
            perm[i] = perm[j];
            perm[j] = s;
        }
        for (int i = 0; i < M; i++) {
            const int k = perm[i];
            const double t0 = now(th);
            if (k < M - 1) pconv_run(&P[k]);
            else dconv_run(&D);
            if (r) t[k][r - 1] = (now(th) - t0) * 1e3;
        }
    }
    double med[M];
    for (int k = 0; k < M; k++) med[k] = bench_median(t[k], reps);
    for (int k = 0; k < M; k++) {
        const size_t kept = k < M - 1 ? P[k].kept : nw;
        printf("%-28s %2d %-14s %10zu %8.2f %10.3f %8.2fx %9.1e\n", S->name, th, names[k], kept,
               (double)nw / (double)kept, med[k], med[M - 1] / med[k], err[k]);
        fprintf(tsv, "%s\t%d\t%s\t%zu\t%.2f\t%.4f\t%.3f\t%.2e\n", S->name, th, names[k], kept,
                (double)nw / (double)kept, med[k], med[M - 1] / med[k], err[k]);
    }
    fflush(stdout);
    for (int k = 0; k < M - 1; k++) pconv_free(&P[k]);
    dconv_free(&D);
}

int main(int argc, char **argv)
{
    const char *out = "test/bench/results_conv3d.tsv", *only = NULL, *threads_list = "1,2";
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--cases")) only = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads_list = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--clock") && !strcmp(argv[i + 1], "wall")) thread_clock = 0, i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--clock") && !strcmp(argv[i + 1], "thread-cpu")) thread_clock = 1, i++;
        else {
            fprintf(stderr, "usage: bench_conv3d [--out FILE] [--reps N] [--cases SUBSTRING] [--threads LIST] "
                            "[--clock wall|thread-cpu]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 99) reps = 7;
    /* a 2-thread row runs at 2 threads: pdc otherwise shrinks a run's team to 1 while another process
     * is runnable (team.c) */
    setenv("PDC_OMP_STATIC", "1", 1);
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    FILE *tsv = fopen(out, "w");
    if (!tsv) {
        perror(out);
        return 1;
    }
    fprintf(tsv, "layer\tthreads\tmethod\tkept_weights\tcompression\tmedian_ms\tspeedup_vs_onednn\tmax_rel_err\n");
    printf("%-28s %2s %-14s %10s %8s %10s %9s %9s\n", "layer", "th", "method", "kept", "compr.", "median ms",
           "vs oneDNN", "rel.err");
    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
        const shape *S = &shapes[q];
        if (only && !strstr(S->name, only)) continue;
        const size_t nx = (size_t)(S->c * S->d * S->h * S->w), nw = (size_t)(S->o * S->c * 27);
        const size_t ny = (size_t)(S->o * out_dim(S->d, S->s) * out_dim(S->h, S->s) * out_dim(S->w, S->s));
        float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc((size_t)S->o * sizeof *b);
        float *yref = malloc(ny * sizeof *yref);
        fill(x, nx, 7u + (uint32_t)q, 1.0f);
        fill(w, nw, 11u + (uint32_t)q, 0.1f);
        fill(b, (size_t)S->o, 13u, 0.1f);
        for (const char *tp = threads_list; *tp;) {
            const int th = atoi(tp);
            while (*tp && *tp != ',') tp++;
            if (*tp == ',') tp++;
            if (th >= 1) run_layer(tsv, S, th, reps, x, w, b, yref);
        }
        free(x);
        free(w);
        free(b);
        free(yref);
    }
    fclose(tsv);
    pdc_context_destroy(ctx);
    return 0;
}
