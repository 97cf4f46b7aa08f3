/*
 * mpi_check.c - the MPI job test/mpi/mpi.sh runs on 1, 2 and 3 processes (libpdc_mpi, public API only).
 *
 * Trains a small CNN (conv, batchnorm, relu, conv, relu, fc) on 200 synthetic samples for EPOCHS epochs:
 * global batches of 48 from the trainer's shuffle, micro-batches of 8, the micro-batches of each global
 * batch split over the processes in order (the last batch has one: two of three processes have none).
 * pdc_mpi_prune prunes conv2 after epoch 1. Process 0 writes every trained weight to OUT (raw float32),
 * so runs on different process counts can be compared with cmp.
 *
 * usage: mpi_check EPOCHS OUT [--reduction sum|deterministic] [--save-after E CKPT] [--load CKPT]
 *                  [--timeout S] [--fault lr|weights|stall] [--micro M] [--overlap 0|1] [--sync-bn 0|1] [--admm]
 * --admm: instead of pruning after epoch 1, ADMM towards the same pruning from epoch 1 (pdc_mpi_admm_begin,
 * pdc_mpi_admm_update after each epoch), hard-pruned (pdc_mpi_admm_end) after epoch 3.
 * --fault: process 1 sets another lr / perturbs a weight / stops stepping; the job must fail with a clear
 * message (printed by process 0 as "mpi_check: ERROR: ...", then MPI_Abort).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pdc_mpi.h"

static const char model_text[] =
    "pdcir 1\nmodel \"mpi_check\"\ninput x : f32[1,2,4,4]\nconst c1w : f32[8,2,3,3] = dense<elided>\n"
    "const s : f32[8] = dense<elided>\nconst b : f32[8] = dense<elided>\nconst mean : f32[8] = dense<elided>\n"
    "const var : f32[8] = dense<elided>\nconst c2w : f32[8,8,3,3] = dense<elided>\n"
    "const c2b : f32[8] = dense<elided>\nconst fw : f32[4,128] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w) -> (a) {pads=[1,1,1,1]}\nlayer bn = batchnorm(a, s, b, mean, var) -> (an)\n"
    "layer r1 = relu(an) -> (bb)\nlayer conv2 = conv(bb, c2w, c2b) -> (c) {pads=[1,1,1,1]}\n"
    "layer r2 = relu(c) -> (d)\nlayer flat = flatten(d) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\noutput z\n";

enum { N = 200, IN = 32, GLOBAL = 48, MICRO = 8, STEPS_PER_EPOCH = (N + GLOBAL - 1) / GLOBAL };

static pdc_context *ctx;
static pdc_mpi *mp;
static int rank, size;

static int die(pdc_status st, const char *what)
{
    const char *msg = mp && *pdc_mpi_last_error(mp) ? pdc_mpi_last_error(mp) : pdc_context_last_error(ctx);
    printf("mpi_check: ERROR: process %d: %s: %s (%s)\n", rank, what, msg, pdc_status_string(st));
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
    return 3;
}
#define TRY(call, what)                                                                                              \
    do {                                                                                                             \
        pdc_status st_ = (call);                                                                                     \
        if (st_) return die(st_, what);                                                                              \
    } while (0)

/* This process's samples of global batch [at, at + nb) of perm: its share of the micro-batches, in order. */
static void my_share(size_t nb, size_t *from, size_t *count)
{
    const size_t leaves = (nb + MICRO - 1) / MICRO;
    const size_t l0 = leaves * (size_t)rank / (size_t)size, l1 = leaves * (size_t)(rank + 1) / (size_t)size;
    *from = l0 * MICRO;
    const size_t end = l1 * MICRO < nb ? l1 * MICRO : nb;
    *count = end > *from ? end - *from : 0;
}

static int step(pdc_trainer *t, const float *x, const float *y, const size_t *perm, size_t at, size_t nb)
{
    size_t from, n;
    my_share(nb, &from, &n);
    if (!n) {
        TRY(pdc_trainer_step(t, NULL, NULL, NULL), "step");
        return 0;
    }
    float bx[GLOBAL * IN], by[GLOBAL];
    for (size_t i = 0; i < n; i++) {
        memcpy(bx + i * IN, x + perm[at + from + i] * IN, IN * sizeof(float));
        by[i] = y[perm[at + from + i]];
    }
    const int64_t xd[4] = {(int64_t)n, 2, 4, 4}, yd[1] = {(int64_t)n};
    pdc_tensor *tx, *ty;
    TRY(pdc_tensor_wrap(ctx, 4, xd, bx, &tx), "wrap");
    TRY(pdc_tensor_wrap(ctx, 1, yd, by, &ty), "wrap");
    const pdc_status st = pdc_trainer_step(t, tx, ty, NULL);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    TRY(st, "step");
    return 0;
}

static int write_weights(pdc_trainer *t, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return die(PDC_ERR_IO, path);
    size_t nw;
    TRY(pdc_trainer_num_weights(t, &nw), "weights");
    for (size_t i = 0; i < nw; i++) {
        const char *name;
        size_t r, n = 1;
        int64_t dims[PDC_MAX_RANK];
        int trainable;
        TRY(pdc_trainer_weight_info(t, i, &name, &r, dims, NULL, &trainable), "weight info");
        if (!trainable) continue; /* batchnorm running statistics are per process */
        for (size_t d = 0; d < r; d++) n *= (size_t)dims[d];
        float *w = malloc(n * sizeof *w);
        if (!w) return die(PDC_ERR_OUT_OF_MEMORY, "weights");
        TRY(pdc_trainer_get_weights(t, name, w, n), "get weights");
        fwrite(w, sizeof *w, n, f);
        free(w);
    }
    return fclose(f) ? die(PDC_ERR_IO, path) : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (!rank) fprintf(stderr, "usage: mpi_check EPOCHS OUT [options] (see test/mpi/mpi_check.c)\n");
        MPI_Finalize();
        return 2;
    }
    const int epochs = atoi(argv[1]);
    const char *out = argv[2], *reduction = "deterministic", *micro = "8", *overlap = "1", *sync_bn = "0", *save = NULL, *load = NULL, *fault = "", *timeout = "60";
    int save_after = -1, admm = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--reduction") && i + 1 < argc) reduction = argv[++i];
        else if (!strcmp(argv[i], "--save-after") && i + 2 < argc) {
            save_after = atoi(argv[++i]);
            save = argv[++i];
        } else if (!strcmp(argv[i], "--load") && i + 1 < argc) load = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = argv[++i];
        else if (!strcmp(argv[i], "--fault") && i + 1 < argc) fault = argv[++i];
        else if (!strcmp(argv[i], "--micro") && i + 1 < argc) micro = argv[++i];
        else if (!strcmp(argv[i], "--overlap") && i + 1 < argc) overlap = argv[++i];
        else if (!strcmp(argv[i], "--sync-bn") && i + 1 < argc) sync_bn = argv[++i];
        else if (!strcmp(argv[i], "--admm")) admm = 1;
    }
    static float x[N * IN], y[N];
    uint32_t r = 11;
    for (size_t i = 0; i < N; i++) { /* the label is the quadrant with the largest sum of the first channel */
        float q[4] = {0, 0, 0, 0};
        for (size_t k = 0; k < IN; k++) {
            r = r * 1664525u + 1013904223u;
            x[i * IN + k] = (float)(r >> 8) / 16777216.0f - 0.5f;
            if (k < 16) q[(k / 8) * 2 + (k % 4) / 2] += x[i * IN + k];
        }
        int best = 0;
        for (int c = 1; c < 4; c++)
            if (q[c] > q[best]) best = c;
        y[i] = (float)best;
    }
    TRY(pdc_context_create(&ctx), "context");
    pdc_model *m;
    pdc_trainer *t;
    TRY(pdc_model_parse(ctx, model_text, sizeof model_text - 1, &m), "parse");
    TRY(pdc_trainer_create(ctx, m, &t), "trainer");
    const char *const opts[] = {"batch", "48", "seed", "5", "lr", "0.01", "micro_batch", micro, "threads", "1"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i += 2) TRY(pdc_trainer_set_option(t, opts[i], opts[i + 1]), opts[i]);
    TRY(pdc_trainer_init_weights(t), "init weights");
    if (rank == 1 && !strcmp(fault, "lr")) TRY(pdc_trainer_set_option(t, "lr", "0.02"), "lr");
    if (rank == 1 && !strcmp(fault, "weights")) {
        float fb[4];
        TRY(pdc_trainer_get_weights(t, "fb", fb, 4), "fb");
        fb[2] += 1e-3f;
        TRY(pdc_trainer_set_weights(t, "fb", fb, 4), "fb");
    }
    TRY(pdc_mpi_attach(ctx, t, MPI_COMM_WORLD, &mp), "attach");
    TRY(pdc_mpi_set_option(mp, "reduction", reduction), "reduction");
    TRY(pdc_mpi_set_option(mp, "timeout", timeout), "timeout");
    TRY(pdc_mpi_set_option(mp, "overlap", overlap), "overlap");
    TRY(pdc_mpi_set_option(mp, "sync_batchnorm", sync_bn), "sync_batchnorm");
    int first_epoch = 0;
    if (load) {
        TRY(pdc_mpi_load(mp, load), "load");
        char s[32];
        TRY(pdc_trainer_get_option(t, "step", s, sizeof s), "step");
        first_epoch = (int)(strtoull(s, NULL, 10) / STEPS_PER_EPOCH);
    }
    size_t perm[N];
    for (int e = first_epoch; e < epochs; e++) {
        if (e == 1) { /* pruning decided on process 0's weights (a resumed run has its masks from the checkpoint) */
            pdc_attrs *a;
            TRY(pdc_attrs_create(ctx, &a), "attrs");
            TRY(pdc_attrs_set_int(a, "patterns", 4), "attrs");
            TRY(pdc_attrs_set_int(a, "pattern_size", 4), "attrs");
            TRY(pdc_attrs_set_string(a, "layers", "conv2"), "attrs");
            const pdc_status st = admm ? pdc_mpi_admm_begin(mp, "prune-pattern", a, 0.01f)
                                       : pdc_mpi_prune(mp, "prune-pattern", a);
            pdc_attrs_destroy(a);
            TRY(st, admm ? "admm begin" : "prune");
        }
        TRY(pdc_trainer_shuffle(t, N, perm), "shuffle");
        for (size_t at = 0; at < N; at += GLOBAL) {
            if (rank == 1 && !strcmp(fault, "stall") && e == 2) {
                sleep(6); /* longer than the others' timeout: they must give up first */
                MPI_Finalize();
                return 0;
            }
            if (step(t, x, y, perm, at, N - at < GLOBAL ? N - at : GLOBAL)) return 3;
        }
        if (admm && e >= 1 && e <= 3) {
            double residual;
            TRY(e < 3 ? pdc_mpi_admm_update(mp, &residual) : pdc_mpi_admm_end(mp), "admm");
        }
        if (e + 1 == save_after) TRY(pdc_mpi_save(mp, save), "save");
    }
    pdc_mpi_stats stats;
    TRY(pdc_mpi_get_stats(mp, &stats), "stats");
    if (rank == 0) {
        if (write_weights(t, out)) return 3;
        printf("mpi_check: processes=%d reduction=%s epochs=%d reductions=%llu floats=%llu dense_floats=%llu "
               "bucket_floats=%llu\n", size, reduction, epochs, (unsigned long long)stats.steps,
               (unsigned long long)stats.floats, (unsigned long long)stats.dense_floats,
               (unsigned long long)stats.bucket_floats);
    }
    pdc_mpi_detach(mp);
    pdc_trainer_destroy(t);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    MPI_Finalize();
    return 0;
}
