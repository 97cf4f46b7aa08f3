/*
 * bench_conv3d.c - pdc's "cpu" target on the 3x3x3 convs of torchvision's r3d_18 at 1x3x8x112x112
 * against oneDNN's direct 3-D convolution, batch 1, fp32, 1 thread, methods interleaved repetition by
 * repetition (shuffled order), median of the repetitions after a warm-up.
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
 * usage: bench_conv3d [--out FILE] [--reps N] [--cases SUBSTRING]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "layers.h"
#include "pdc.h"

#define DN(x)                                                                                                   \
    do {                                                                                                        \
        dnnl_status_t s_ = (x);                                                                                 \
        if (s_ != dnnl_success) {                                                                               \
            fprintf(stderr, "bench_conv3d: %s:%d: oneDNN call failed (%d): %s\n", __FILE__, __LINE__, (int)s_, #x); \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)
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

/* kgs_masks: at most 8 distinct group masks per layer, so each mask's 3 depth slices fit the 2-D pattern
 * generator's 32 patterns (more run as dense windows) */
#define BENCH_KGS_MASKS 8

static int64_t out_dim(int64_t in, int64_t s) { return (in + 2 - 3) / s + 1; }

/* ------------------------------------------------------------------ oneDNN */

typedef struct dconv {
    dnnl_engine_t eng;
    dnnl_stream_t str;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bia, dst;
} dconv;

static void reorder(dconv *d, const dnnl_memory_desc_t *from, dnnl_memory_t a, const dnnl_memory_desc_t *to,
                    dnnl_memory_t b)
{
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DN(dnnl_reorder_primitive_desc_create(&rpd, from, d->eng, to, d->eng, NULL));
    DN(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    DN(dnnl_primitive_execute(r, d->str, 2, args));
    DN(dnnl_stream_wait(d->str));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
}

static void dconv_run(dconv *d)
{
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_BIAS, d->bia},
                               {DNNL_ARG_DST, d->dst}};
    DN(dnnl_primitive_execute(d->prim, d->str, 4, args));
    DN(dnnl_stream_wait(d->str));
}

/* Direct 3-D conv of x (NCDHW) with w (OIDHW), b, in oneDNN's preferred layouts; one run's output
 * (NCDHW) into y. */
static void dconv_make(dconv *d, const shape *S, const float *x, const float *w, const float *b, float *y)
{
    memset(d, 0, sizeof *d);
    DN(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&d->str, d->eng, dnnl_stream_default_flags));
    const int64_t od = out_dim(S->d, S->s), oh = out_dim(S->h, S->s), ow = out_dim(S->w, S->s);
    dnnl_dims_t sd = {1, S->c, S->d, S->h, S->w}, wd = {S->o, S->c, 3, 3, 3}, bd = {S->o}, dd = {1, S->o, od, oh, ow};
    dnnl_dims_t st = {S->s, S->s, S->s}, pad = {1, 1, 1};
    dnnl_memory_desc_t smd, wmd, bmd, dmd, usmd, uwmd, udmd;
    DN(dnnl_memory_desc_init_by_tag(&smd, 5, sd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&wmd, 5, wd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
    DN(dnnl_memory_desc_init_by_tag(&dmd, 5, dd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&usmd, 5, sd, dnnl_f32, dnnl_ncdhw));
    DN(dnnl_memory_desc_init_by_tag(&uwmd, 5, wd, dnnl_f32, dnnl_oidhw));
    DN(dnnl_memory_desc_init_by_tag(&udmd, 5, dd, dnnl_f32, dnnl_ncdhw));
    dnnl_convolution_desc_t cd;
    DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd, &bmd, &dmd,
                                          st, pad, pad));
    dnnl_primitive_desc_t pd;
    DN(dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, NULL));
    const dnnl_memory_desc_t *psmd = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pwmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pdmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    DN(dnnl_primitive_create(&d->prim, pd));
    DN(dnnl_memory_create(&d->src, psmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->wei, pwmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->bia, &bmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->dst, pdmd, d->eng, DNNL_MEMORY_ALLOCATE));
    void *bp;
    DN(dnnl_memory_get_data_handle(d->bia, &bp));
    memcpy(bp, b, (size_t)S->o * sizeof *b);
    dnnl_memory_t us, uw, ud;
    DN(dnnl_memory_create(&us, &usmd, d->eng, (void *)x));
    DN(dnnl_memory_create(&uw, &uwmd, d->eng, (void *)w));
    DN(dnnl_memory_create(&ud, &udmd, d->eng, y));
    reorder(d, &usmd, us, psmd, d->src);
    reorder(d, &uwmd, uw, pwmd, d->wei);
    dconv_run(d);
    reorder(d, pdmd, d->dst, &udmd, ud);
    dnnl_memory_destroy(us);
    dnnl_memory_destroy(uw);
    dnnl_memory_destroy(ud);
    dnnl_primitive_desc_destroy(pd);
}

static void dconv_free(dconv *d)
{
    dnnl_primitive_destroy(d->prim);
    dnnl_memory_destroy(d->src);
    dnnl_memory_destroy(d->wei);
    dnnl_memory_destroy(d->bia);
    dnnl_memory_destroy(d->dst);
    dnnl_stream_destroy(d->str);
    dnnl_engine_destroy(d->eng);
}

/* ------------------------------------------------------------------ pdc */

typedef struct pconv {
    pdc_program *prog;
    pdc_tensor *in, *out;
    float *w; /* the weights the program has (pruned: zero-filled), for oneDNN's check */
    size_t kept;
} pconv;

/* The layer as a model, pruned by prune-kgs with `keep` positions (0: dense), compiled for cpu at 1 thread. */
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

int main(int argc, char **argv)
{
    const char *out = "test/bench/results_conv3d.tsv", *only = NULL;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--cases")) only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_conv3d [--out FILE] [--reps N] [--cases SUBSTRING]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 99) reps = 7;
    setenv("OMP_NUM_THREADS", "1", 1);
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    PD(pdc_context_set_option(ctx, "threads", "1"));
    FILE *tsv = fopen(out, "w");
    if (!tsv) {
        perror(out);
        return 1;
    }
    fprintf(tsv, "layer\tmethod\tkept_weights\tcompression\tmedian_ms\tspeedup_vs_onednn\tmax_rel_err\n");
    printf("%-28s %-14s %10s %8s %10s %9s %9s\n", "layer (1 thread)", "method", "kept", "compr.", "median ms",
           "vs oneDNN", "rel.err");
    enum { M = 4 };
    static const int keeps[M - 1] = {0, 7, 3};
    static const char *const names[M] = {"pdc dense", "pdc kgs 7/27", "pdc kgs 3/27", "oneDNN direct"};
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
        pconv P[M - 1];
        double err[M] = {0};
        for (int k = 0; k < M - 1; k++) {
            pconv_make(&P[k], S, x, w, b, keeps[k]);
            pconv_run(&P[k]);
            dconv check; /* oneDNN on the weights pdc has (pruned: zero-filled) */
            dconv_make(&check, S, x, P[k].w, b, yref);
            dconv_free(&check);
            err[k] = max_rel_err(pdc_tensor_data(P[k].out), yref, ny);
        }
        dconv D;
        dconv_make(&D, S, x, w, b, yref);
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
                const double t0 = bench_now();
                if (k < M - 1) pconv_run(&P[k]);
                else dconv_run(&D);
                if (r) t[k][r - 1] = (bench_now() - t0) * 1e3;
            }
        }
        double med[M];
        for (int k = 0; k < M; k++) med[k] = bench_median(t[k], reps);
        for (int k = 0; k < M; k++) {
            const size_t kept = k < M - 1 ? P[k].kept : nw;
            printf("%-28s %-14s %10zu %8.2f %10.3f %8.2fx %9.1e\n", S->name, names[k], kept,
                   (double)nw / (double)kept, med[k], med[M - 1] / med[k], err[k]);
            fprintf(tsv, "%s\t%s\t%zu\t%.2f\t%.4f\t%.3f\t%.2e\n", S->name, names[k], kept, (double)nw / (double)kept,
                    med[k], med[M - 1] / med[k], err[k]);
        }
        fflush(stdout);
        for (int k = 0; k < M - 1; k++) pconv_free(&P[k]);
        dconv_free(&D);
        free(x);
        free(w);
        free(b);
        free(yref);
    }
    fclose(tsv);
    pdc_context_destroy(ctx);
    return 0;
}
