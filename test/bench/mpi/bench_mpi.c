/*
 * bench_mpi.c - data-parallel training step time over MPI (make bench-mpi; docs/training.md, "Data-parallel
 * training"): torchvision's ResNet-18 on 3x32x32 inputs (test/bench/train/bench_nets.c, as
 * train_bench --model resnet18), plain SGD lr 0.01, batch 32 per process, dense and pruned (8 patterns of 4
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

#include "pdc_mpi.h"
#include "test/bench/train/bench_nets.h"

static pdc_context *ctx;
static int my_rank, nproc;
static const char *overlap = "1"; /* libpdc_mpi's option overlap */

void bench_die(pdc_status st, const char *what)
{
    fprintf(stderr, "bench_mpi: process %d: %s: %s (%s)\n", my_rank, what, pdc_context_last_error(ctx),
            pdc_status_string(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; the compiler is not told so */
}

/* Median of an MPI_Allreduce of n floats, in ms (every process). */
static double allreduce_ms(size_t n)
{
    float *v = calloc(n ? n : 1, sizeof *v);
    double t[20];
    if (!v) bench_die(PDC_ERR_OUT_OF_MEMORY, "allreduce");
    for (int k = 0; k < 22; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = clock_s(CLOCK_MONOTONIC);
        MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (k >= 2) t[k - 2] = (clock_s(CLOCK_MONOTONIC) - t0) * 1e3;
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
    if (pdc_mpi_set_option(mp, "overlap", overlap)) bench_die(PDC_ERR_INVALID_ARG, pdc_mpi_last_error(mp));
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
    if (!x) bench_die(PDC_ERR_OUT_OF_MEMORY, "data");
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
    if (!r) bench_die(PDC_ERR_OUT_OF_MEMORY, "times");
    for (int k = 0; k < repeats; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < steps; i++) TRY(pdc_trainer_step(t, tx, ty, NULL), "step");
        r[k] = (clock_s(CLOCK_MONOTONIC) - t0) * 1e3 / steps;
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
    pdc_model *m = bench_resnet18(ctx);
    if (strstr(configs, "dense")) bench(m, "dense", threads, steps, repeats);
    if (strstr(configs, "pruned")) bench(m, "pruned", threads, steps, repeats);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    MPI_Finalize();
    return 0;
}
