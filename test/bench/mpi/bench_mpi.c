/*
 * bench_mpi.c - data-parallel training step time over MPI (make bench-mpi; docs/training.md, "Data-parallel
 * training"): torchvision's ResNet-18 on 3x32x32 inputs (as test/bench/train/train_bench.c builds it: the
 * builder is copied from there), plain SGD lr 0.01, batch 32 per process, dense and pruned (8 patterns of 4
 * + 50% connectivity on every 3x3 conv but the stem, option sparse=auto), with libpdc_mpi's default
 * reduction (sum, overlap on). Run on 1 and on 2 processes; process 0 prints per configuration:
 *   mpi model=resnet18 config=C processes=P threads=T batch_per_process=32 step_ms_median=X step_ms_min=Y
 *       samples_per_s=S sent_floats_per_step=K sent_mb_per_step=M dense_mb_per_step=D overlap=O wait_ms_per_step=W
 *       allreduce_ms=A
 * wait_ms_per_step: time a step waited for its gradients after the backward pass (communication the overlap
 * did not hide, and the slower process); allreduce_ms: one MPI_Allreduce of the step's kept gradients alone
 * (median of 20), the link's cost for the scaling model.
 *
 * usage: bench_mpi [--threads T] [--steps N] [--repeats R] [--configs dense,pruned] [--overlap 1|0]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc_mpi.h"

static pdc_context *ctx;
static int my_rank, nproc;
static const char *overlap = "1"; /* libpdc_mpi's option overlap */

static void die(pdc_status st, const char *what)
{
    fprintf(stderr, "bench_mpi: process %d: %s: %s (%s)\n", my_rank, what, pdc_context_last_error(ctx),
            pdc_status_string(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define TRY(call, what)                                                                                          \
    do {                                                                                                         \
        pdc_status st_ = (call);                                                                                 \
        if (st_) die(st_, what);                                                                                 \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- ResNet-18 as torchvision builds it, 10 classes, for [N, 3, 32, 32] inputs */
typedef struct rn_builder {
    pdc_model *m;
    int n; /* unique-name counter */
} rn_builder;

static void rn_name(rn_builder *b, char *buf, size_t cap, const char *stem) { snprintf(buf, cap, "%s%d", stem, b->n++); }

static void rn_const(rn_builder *b, const char *name, int rank, const int64_t *dims, float value)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc(n * sizeof *v);
    if (!v) exit(1);
    for (size_t i = 0; i < n; i++) v[i] = value;
    TRY(pdc_model_add_constant(b->m, name, rank, dims, v), name);
    free(v);
}

enum { ACT_NONE, ACT_RELU, ACT_RELU6 };

/* conv k x k (no bias; with a bias when there is no batchnorm), stride s, pad k/2, `group` groups, then batchnorm if
 * bn, then the activation act; out: the result's name */
static void conv_act(rn_builder *b, const char *in, int c, int o, int k, int s, int group, int bn_on, int act, char *out,
                     size_t cap)
{
    char w[32], cv[32], g[32], be[32], mu[32], va[32], bn[32], bias[32];
    rn_name(b, w, sizeof w, "conv_w");
    rn_name(b, cv, sizeof cv, "conv");
    rn_const(b, w, 4, (const int64_t[]){o, c / group, k, k}, 0.0f);
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    const int64_t p = k / 2;
    TRY(pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p}), "pads");
    TRY(pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){s, s}), "strides");
    if (group > 1) TRY(pdc_attrs_set_int(a, "group", group), "group");
    if (!bn_on) {
        rn_name(b, bias, sizeof bias, "conv_b");
        const int64_t od = o;
        rn_const(b, bias, 1, &od, 0.0f);
    }
    const char *ci[] = {in, w, bias}, *co[] = {cv};
    TRY(pdc_model_add_layer(b->m, cv, "conv", bn_on ? 2 : 3, ci, 1, co, a), cv);
    pdc_attrs_destroy(a);
    if (!bn_on) {
        snprintf(bn, sizeof bn, "%s", cv);
        goto activation;
    }
    rn_name(b, g, sizeof g, "bn_g");
    rn_name(b, be, sizeof be, "bn_b");
    rn_name(b, mu, sizeof mu, "bn_mean");
    rn_name(b, va, sizeof va, "bn_var");
    rn_name(b, bn, sizeof bn, "bn");
    const int64_t od = o;
    rn_const(b, g, 1, &od, 1.0f);
    rn_const(b, be, 1, &od, 0.0f);
    rn_const(b, mu, 1, &od, 0.0f);
    rn_const(b, va, 1, &od, 1.0f);
    const char *bi[] = {cv, g, be, mu, va}, *bo[] = {bn};
    TRY(pdc_model_add_layer(b->m, bn, "batchnorm", 5, bi, 1, bo, NULL), bn);
activation:
    if (act == ACT_RELU) {
        rn_name(b, out, cap, "relu");
        const char *ri[] = {bn}, *ro[] = {out};
        TRY(pdc_model_add_layer(b->m, out, "relu", 1, ri, 1, ro, NULL), out);
    } else if (act == ACT_RELU6) {
        rn_name(b, out, cap, "relu6");
        const char *ri[] = {bn}, *ro[] = {out};
        TRY(pdc_attrs_create(ctx, &a), "attrs");
        TRY(pdc_attrs_set_float(a, "min", 0.0f), "min");
        TRY(pdc_attrs_set_float(a, "max", 6.0f), "max");
        TRY(pdc_model_add_layer(b->m, out, "clip", 1, ri, 1, ro, a), out);
        pdc_attrs_destroy(a);
    } else {
        snprintf(out, cap, "%s", bn);
    }
}

static void rn_conv_bn(rn_builder *b, const char *in, int c, int o, int k, int s, int relu, char *out, size_t cap)
{
    conv_act(b, in, c, o, k, s, 1, 1, relu ? ACT_RELU : ACT_NONE, out, cap);
}

static pdc_model *build_resnet18(void)
{
    rn_builder b = {NULL, 0};
    TRY(pdc_model_create(ctx, "resnet18", &b.m), "model");
    TRY(pdc_model_add_input(b.m, "image", 4, (const int64_t[]){1, 3, 32, 32}), "input");
    char x[32], t[32], u[32], sc[32], s2[32];
    rn_conv_bn(&b, "image", 3, 64, 7, 2, 1, t, sizeof t);
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    TRY(pdc_attrs_set_ints(a, "kernel_shape", 2, (const int64_t[]){3, 3}), "attrs");
    TRY(pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){2, 2}), "attrs");
    TRY(pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){1, 1, 1, 1}), "attrs");
    {
        const char *pi[] = {t}, *po[] = {"pool"};
        TRY(pdc_model_add_layer(b.m, "maxpool", "maxpool", 1, pi, 1, po, a), "maxpool");
    }
    pdc_attrs_destroy(a);
    snprintf(x, sizeof x, "pool");
    int c = 64;
    for (int stage = 0; stage < 4; stage++) {
        const int planes = 64 << stage;
        for (int i = 0; i < 2; i++) {
            const int s = stage > 0 && i == 0 ? 2 : 1;
            rn_conv_bn(&b, x, c, planes, 3, s, 1, t, sizeof t);
            rn_conv_bn(&b, t, planes, planes, 3, 1, 0, u, sizeof u);
            if (s != 1 || c != planes)
                rn_conv_bn(&b, x, c, planes, 1, s, 0, sc, sizeof sc);
            else
                snprintf(sc, sizeof sc, "%s", x);
            rn_name(&b, s2, sizeof s2, "add");
            const char *ai[] = {u, sc}, *ao[] = {s2};
            TRY(pdc_model_add_layer(b.m, s2, "add", 2, ai, 1, ao, NULL), s2);
            rn_name(&b, x, sizeof x, "relu");
            const char *ri[] = {s2}, *ro[] = {x};
            TRY(pdc_model_add_layer(b.m, x, "relu", 1, ri, 1, ro, NULL), x);
            c = planes;
        }
    }
    {
        const char *gi[] = {x}, *go[] = {"gap"}, *fi[] = {"gap"}, *fo[] = {"flat"};
        TRY(pdc_model_add_layer(b.m, "gap", "global_avgpool", 1, gi, 1, go, NULL), "gap");
        TRY(pdc_model_add_layer(b.m, "flatten", "flatten", 1, fi, 1, fo, NULL), "flatten");
    }
    rn_const(&b, "fc.w", 2, (const int64_t[]){10, 512}, 0.0f);
    rn_const(&b, "fc.b", 1, (const int64_t[]){10}, 0.0f);
    const char *li[] = {"flat", "fc.w", "fc.b"}, *lo[] = {"logits"};
    TRY(pdc_model_add_layer(b.m, "fc", "fc", 3, li, 1, lo, NULL), "fc");
    TRY(pdc_model_mark_output(b.m, "logits"), "output");
    return b.m;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of an MPI_Allreduce of n floats, in ms (every process). */
static double allreduce_ms(size_t n)
{
    float *v = calloc(n ? n : 1, sizeof *v);
    double t[20];
    if (!v) die(PDC_ERR_OUT_OF_MEMORY, "allreduce");
    for (int k = 0; k < 22; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (k >= 2) t[k - 2] = (now() - t0) * 1e3;
    }
    free(v);
    qsort(t, 20, sizeof t[0], cmp_double);
    return t[10];
}

static void bench(const pdc_model *m, const char *config, const char *threads, int steps, int repeats)
{
    const int pruned = !strcmp(config, "pruned");
    pdc_trainer *t;
    TRY(pdc_trainer_create(ctx, m, &t), "trainer");
    TRY(pdc_trainer_set_option(t, "threads", threads), "threads");
    TRY(pdc_trainer_set_option(t, "seed", "1"), "seed");
    TRY(pdc_trainer_set_option(t, "optimizer", "sgd"), "optimizer");
    TRY(pdc_trainer_set_option(t, "lr", "0.01"), "lr");
    TRY(pdc_trainer_init_weights(t), "init");
    pdc_mpi *mp;
    TRY(pdc_mpi_attach(ctx, t, MPI_COMM_WORLD, &mp), "attach");
    if (pdc_mpi_set_option(mp, "overlap", overlap)) die(PDC_ERR_INVALID_ARG, pdc_mpi_last_error(mp));
    if (pruned) {
        pdc_attrs *a;
        TRY(pdc_attrs_create(ctx, &a), "attrs");
        TRY(pdc_attrs_set_int(a, "patterns", 8), "attrs");
        TRY(pdc_attrs_set_int(a, "pattern_size", 4), "attrs");
        TRY(pdc_attrs_set_float(a, "connectivity", 0.5f), "attrs");
        TRY(pdc_mpi_prune(mp, "prune-pattern,prune-connectivity", a), "prune");
        pdc_attrs_destroy(a);
    }
    enum { PER = 3 * 32 * 32 };
    float *x = malloc(32 * PER * sizeof *x), y[32];
    if (!x) die(PDC_ERR_OUT_OF_MEMORY, "data");
    uint32_t s = 12345u + 7919u * (uint32_t)my_rank; /* each process its own samples */
    for (size_t i = 0; i < 32 * PER; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 28) / 16.0f;
    }
    for (int i = 0; i < 32; i++) y[i] = (float)((i + my_rank) % 10);
    const int64_t xd[4] = {32, 3, 32, 32}, yd[1] = {32};
    pdc_tensor *tx, *ty;
    TRY(pdc_tensor_wrap(ctx, 4, xd, x, &tx), "wrap");
    TRY(pdc_tensor_wrap(ctx, 1, yd, y, &ty), "wrap");
    for (int i = 0; i < 2; i++) TRY(pdc_trainer_step(t, tx, ty, NULL), "step");
    pdc_mpi_stats s0, s1;
    TRY(pdc_mpi_get_stats(mp, &s0), "stats");
    double *r = malloc((size_t)repeats * sizeof *r);
    if (!r) die(PDC_ERR_OUT_OF_MEMORY, "times");
    for (int k = 0; k < repeats; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        for (int i = 0; i < steps; i++) TRY(pdc_trainer_step(t, tx, ty, NULL), "step");
        r[k] = (now() - t0) * 1e3 / steps;
    }
    TRY(pdc_mpi_get_stats(mp, &s1), "stats");
    qsort(r, (size_t)repeats, sizeof *r, cmp_double);
    const double n = (double)(s1.steps - s0.steps), sent = (double)(s1.floats - s0.floats) / n,
                 dense = (double)(s1.dense_floats - s0.dense_floats) / n;
    const double ar = allreduce_ms((size_t)sent);
    if (my_rank == 0)
        printf("mpi model=resnet18 config=%s processes=%d threads=%s batch_per_process=32 step_ms_median=%.1f "
               "step_ms_min=%.1f samples_per_s=%.1f sent_floats_per_step=%.0f sent_mb_per_step=%.2f "
               "dense_mb_per_step=%.2f overlap=%s wait_ms_per_step=%.2f allreduce_ms=%.2f\n",
               config, nproc, threads, r[repeats / 2], r[0], 32.0 * nproc * 1e3 / r[repeats / 2], sent, sent * 4e-6,
               dense * 4e-6, overlap, (s1.wait_s - s0.wait_s) * 1e3 / n, ar);
    fflush(stdout);
    free(r);
    free(x);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_mpi_detach(mp);
    pdc_trainer_destroy(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    const char *threads = "1", *configs = "dense,pruned";
    int steps = 3, repeats = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--configs")) configs = argv[i + 1];
        else if (!strcmp(argv[i], "--overlap")) overlap = argv[i + 1];
    }
    if (steps < 1 || repeats < 1) {
        if (my_rank == 0)
            fprintf(stderr, "usage: bench_mpi [--threads T] [--steps N] [--repeats R] [--configs dense,pruned] "
                            "[--overlap 1|0]\n");
        MPI_Finalize();
        return 2;
    }
    TRY(pdc_context_create(&ctx), "context");
    pdc_model *m = build_resnet18();
    if (strstr(configs, "dense")) bench(m, "dense", threads, steps, repeats);
    if (strstr(configs, "pruned")) bench(m, "pruned", threads, steps, repeats);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    MPI_Finalize();
    return 0;
}
