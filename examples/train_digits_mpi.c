/*
 * train_digits_mpi.c - the pruning-retraining demo of train_digits.c, data-parallel over MPI with
 * libpdc_mpi (include/pdc_mpi.h): every process holds the same trainer; each global batch of 32 from the
 * trainer's shuffle is split over the processes in order (at micro-batch boundaries with --micro M), the
 * gradients of the kept weights are summed over the processes, pruning and ADMM are decided on process 0's
 * weights, the checkpoint is written by process 0. Phases as train_digits.c (dense, pattern_conn,
 * pattern_conn_fc, admm with --admm); process 0 prints the same key=value line per phase, with at its end
 * processes=R sent_floats_per_step=K dense_floats_per_step=D (what one process sends per step: the
 * kept gradient entries, and what it would send without pruning).
 *
 *   mpirun --oversubscribe -np 2 build/train_digits_mpi
 *
 * usage: train_digits_mpi [train_digits's options] [--reduction sum|deterministic] [--micro M]
 */
#include "example_common.h"
#include "pdc_mpi.h"

static pdc_mpi *mp;
static int rank = 0, nproc = 1;

static int fail(pdc_status st, const char *what)
{
    const char *msg = mp && *pdc_mpi_last_error(mp) ? pdc_mpi_last_error(mp) : pdc_context_last_error(ctx);
    fprintf(stderr, "train_digits_mpi: process %d: %s: %s (%s)\n", rank, what, *msg ? msg : "failed",
            pdc_status_string(st));
    /* the other processes wait in a collective: end the job rather than leave them to their timeout */
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* ------------------------------------------------------------------ training */

typedef struct run {
    pdc_trainer *t;
    const dataset *train, *test;
    float *bx, *by;         /* batch buffers */
    size_t *perm;
    size_t batch;
    size_t micro;           /* the unit the global batch is split in: option micro_batch, or 1 sample */
    int quiet;
    size_t steps;
    double train_s;
} run;

static int evaluate(run *r, const dataset *d, float *loss, float *acc)
{
    const int64_t xd[4] = {(int64_t)d->n, 1, 8, 8};
    return evaluate_set(r->t, 4, xd, d, loss, acc);
}

/* This process's share [*from, *from + *n) of a global batch of nb: its consecutive run of the batch's
 * units (r->micro samples), so that the processes' parts in rank order are the batch's micro-batches. */
static void share(const run *r, size_t nb, size_t *from, size_t *n)
{
    const size_t units = (nb + r->micro - 1) / r->micro;
    const size_t u0 = units * (size_t)rank / (size_t)nproc, u1 = units * (size_t)(rank + 1) / (size_t)nproc;
    const size_t end = u1 * r->micro < nb ? u1 * r->micro : nb;
    *from = u0 * r->micro;
    *n = end > *from ? end - *from : 0;
}

/* One epoch over the shuffled training set, the last global batch partial (as PyTorch's DataLoader); every
 * process draws the same permutation and takes its share of each global batch (possibly none). */
static int epoch(run *r, float *mean_loss)
{
    const dataset *d = r->train;
    TRY(pdc_trainer_shuffle(r->t, d->n, r->perm), "shuffle");
    double sum[2] = {0.0, 0.0}; /* loss x samples, samples */
    const double t0 = now();
    for (size_t at = 0; at < d->n; at += r->batch) {
        size_t from, nb;
        share(r, d->n - at < r->batch ? d->n - at : r->batch, &from, &nb);
        for (size_t i = 0; i < nb; i++) {
            memcpy(r->bx + i * 64, d->x + r->perm[at + from + i] * 64, 64 * sizeof(float));
            r->by[i] = d->y[r->perm[at + from + i]];
        }
        const int64_t xd[4] = {(int64_t)nb, 1, 8, 8};
        float loss;
        if (train_step(r->t, 4, xd, r->bx, nb, r->by, &loss)) return 1;
        sum[0] += (double)loss * (double)nb;
        sum[1] += (double)nb;
        r->steps++;
    }
    r->train_s += now() - t0;
    MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *mean_loss = (float)(sum[0] / sum[1]);
    return 0;
}

static int train_epochs(run *r, const char *phase, int epochs)
{
    for (int e = 1; e <= epochs; e++) {
        float loss, tl, ta;
        if (epoch(r, &loss) || evaluate(r, r->test, &tl, &ta)) return 1;
        if (!r->quiet && rank == 0)
            printf("  %-15s epoch %2d/%d  train_loss %.4f  test_loss %.4f  test_accuracy %.4f\n", phase, e, epochs,
                   (double)loss, (double)tl, (double)ta);
        fflush(stdout);
    }
    return 0;
}

/* ------------------------------------------------------------------ reporting */

/* Process 0 reports (the others go on to the next collective); the communication per step is the phase's. */
static int report(run *r, const char *phase, const char *save_as)
{
    static pdc_mpi_stats last;
    pdc_mpi_stats now_stats;
    TRY(pdc_mpi_get_stats(mp, &now_stats), "statistics");
    const double reductions = (double)(now_stats.steps - last.steps);
    const double sent = reductions ? (double)(now_stats.floats - last.floats) / reductions : 0.0,
                 dense = reductions ? (double)(now_stats.dense_floats - last.dense_floats) / reductions : 0.0;
    last = now_stats;
    if (rank != 0) {
        r->steps = 0;
        r->train_s = 0.0;
        return 0;
    }
    pdc_model *m;
    TRY(pdc_trainer_export(r->t, &m), "export");
    float loss, acc;
    int rc = evaluate(r, r->test, &loss, &acc);
    if (!rc) rc = print_digits_phase(m, phase, r->test, loss, acc, r->steps, r->train_s, save_as);
    pdc_model_destroy(m);
    if (rc) return rc;
    printf(" processes=%d sent_floats_per_step=%.0f dense_floats_per_step=%.0f\n", nproc, sent, dense);
    fflush(stdout);
    r->steps = 0;
    r->train_s = 0.0;
    return 0;
}

static int prune(run *r, int with_fc, int admm_rho_milli, int admm_epochs)
{
    pdc_attrs *a = NULL;
    const char *pipeline = "";
    if (digits_prune_options(with_fc, &a, &pipeline)) return 1;
    pdc_status st;
    if (admm_epochs > 0) {
        st = pdc_mpi_admm_begin(mp, pipeline, a, (float)admm_rho_milli / 1000.0f);
        for (int e = 1; e <= admm_epochs && !st; e++) {
            float loss, tl, ta;
            double res = 0.0;
            if (epoch(r, &loss)) {
                pdc_attrs_destroy(a);
                return 1;
            }
            st = pdc_mpi_admm_update(mp, &res);
            if (!st && evaluate(r, r->test, &tl, &ta) == 0 && !r->quiet && rank == 0)
                printf("  %-15s epoch %2d/%d  train_loss %.4f  test_accuracy %.4f  admm_residual %.4f\n", "admm", e,
                       admm_epochs, (double)loss, (double)ta, res);
        }
        if (!st) st = pdc_mpi_admm_end(mp);
    } else {
        st = pdc_mpi_prune(mp, pipeline, a);
    }
    pdc_attrs_destroy(a);
    if (st) return fail(st, "prune");
    float tl, ta;
    if (evaluate(r, r->test, &tl, &ta)) return 1;
    if (!r->quiet && rank == 0) printf("  %-15s pruned with %s: test_accuracy %.4f before retraining\n", "", pipeline, (double)ta);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    const char *reduction = "sum";
    size_t micro = 0;
    const char *data = "test/data/digits.bin", *out = "build/demo", *threads = NULL;
    int epochs = 20, retrain = 10, admm_epochs = 12, with_fc = 1, admm = 0, quiet = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-fc")) with_fc = 0;
        else if (!strcmp(a, "--admm")) admm = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (v && !strcmp(a, "--data")) data = argv[++i];
        else if (v && !strcmp(a, "--out")) out = argv[++i];
        else if (v && !strcmp(a, "--threads")) threads = argv[++i];
        else if (v && !strcmp(a, "--epochs")) epochs = atoi(argv[++i]);
        else if (v && !strcmp(a, "--retrain")) retrain = atoi(argv[++i]);
        else if (v && !strcmp(a, "--admm-epochs")) admm_epochs = atoi(argv[++i]);
        else if (v && !strcmp(a, "--seed")) seed = strtoull(argv[++i], NULL, 10);
        else if (v && !strcmp(a, "--reduction")) reduction = argv[++i];
        else if (v && !strcmp(a, "--micro")) micro = (size_t)strtoull(argv[++i], NULL, 10);
        else {
            if (rank == 0)
                fprintf(stderr, "usage: train_digits_mpi [--data digits.bin] [--out DIR] [--epochs N] [--retrain N] "
                                "[--admm-epochs N] [--seed S] [--threads T] [--no-fc] [--admm] [--quiet] "
                                "[--reduction sum|deterministic] [--micro M]\n");
            MPI_Finalize();
            return 2;
        }
    }
    dataset train = {0, NULL, NULL}, test = {0, NULL, NULL};
    if (load_digits("train_digits_mpi", data, &train, &test) || pdc_context_create(&ctx) != PDC_OK) MPI_Abort(MPI_COMM_WORLD, 1);
    char path[4096], ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s/dense.ckpt", out);
    run r;
    memset(&r, 0, sizeof r);
    r.train = &train;
    r.test = &test;
    r.batch = 32;
    r.micro = micro ? micro : 1;
    r.quiet = quiet;
    r.bx = malloc(r.batch * 64 * sizeof(float));
    r.by = malloc(r.batch * sizeof(float));
    r.perm = malloc(train.n * sizeof *r.perm);
    pdc_model *m = NULL;
    int rc = !r.bx || !r.by || !r.perm;
    if (rc) fprintf(stderr, "train_digits_mpi: out of memory\n");
    if (!rc) rc = build_digits_cnn(&m);
    if (!rc) {
        pdc_status st = create_trainer(m, seed, "0.001", threads, &r.t);
        char micro_s[32];
        snprintf(micro_s, sizeof micro_s, "%zu", micro);
        if (!st) st = pdc_trainer_set_option(r.t, "micro_batch", micro_s);
        if (!st) st = pdc_trainer_init_weights(r.t);
        if (st) rc = fail(st, "trainer");
        if (!rc && (st = pdc_mpi_attach(ctx, r.t, MPI_COMM_WORLD, &mp))) rc = fail(st, "attach");
        if (!rc && (st = pdc_mpi_set_option(mp, "reduction", reduction))) rc = fail(st, "reduction");
    }
    if (!rc) {
        char isa[32] = "?";
        pdc_trainer_get_option(r.t, "isa", isa, sizeof isa);
        if (rank == 0) {
            printf("train_digits_mpi: %zu training and %zu test digits; Adam lr 0.001, global batch 32 over %d "
                   "processes, reduction %s, seed %llu, kernels %s\n", train.n, test.n, nproc, reduction, seed, isa);
            printf("phase dense: %d epochs\n", epochs);
        }
        rc = train_epochs(&r, "dense", epochs);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/digits-dense.pdc", out);
        rc = report(&r, "dense", path);
    }
    if (!rc) {
        pdc_status st = pdc_mpi_save(mp, ckpt);
        if (st) rc = fail(st, ckpt);
        else if (!quiet && rank == 0) printf("  checkpoint saved: %s\n", ckpt);
    }
    if (!rc && rank == 0) {
        printf("phase pattern_conn: 8 patterns of 4 + 50%% connectivity on conv1 and conv2, %d epochs of masked "
               "retraining\n", retrain);
    }
    if (!rc) rc = prune(&r, 0, 0, 0);
    if (!rc) rc = train_epochs(&r, "pattern_conn", retrain);
    snprintf(path, sizeof path, "%s/digits.pdc", out);
    if (!rc) rc = report(&r, "pattern_conn", with_fc ? NULL : path);
    if (!rc && with_fc) {
        if (rank == 0)
            printf("phase pattern_conn_fc: dense checkpoint reloaded; the same + 80%% of fc's 1x4 blocks, %d epochs\n",
                   retrain);
        pdc_status st = pdc_mpi_load(mp, ckpt);
        if (st) rc = fail(st, ckpt);
        if (!rc) rc = prune(&r, 1, 0, 0);
        if (!rc) rc = train_epochs(&r, "pattern_conn_fc", retrain);
        if (!rc) rc = report(&r, "pattern_conn_fc", path);
    }
    if (!rc && admm) {
        if (rank == 0)
            printf("phase admm: dense checkpoint reloaded; %d epochs of ADMM (rho 0.001) towards pattern_conn%s, hard "
                   "pruning, %d epochs\n", admm_epochs, with_fc ? "_fc" : "", retrain);
        pdc_status st = pdc_mpi_load(mp, ckpt);
        if (st) rc = fail(st, ckpt);
        if (!rc) rc = prune(&r, with_fc, 1, admm_epochs);
        if (!rc) rc = train_epochs(&r, "admm", retrain);
        if (!rc) rc = report(&r, "admm", NULL);
    }
    if (!rc && rank == 0) {
        snprintf(path, sizeof path, "%s/digit0.bin", out);
        rc = write_digit("train_digits_mpi", &test, path);
        if (!rc && !quiet)
            printf("train_digits_mpi: wrote %s/digits.pdc (the pruned, retrained model), %s/digits-dense.pdc, %s and %s "
                   "(test digit #0, label %d)\n", out, out, ckpt, path, (int)test.y[0]);
    }
    pdc_mpi_detach(mp);
    pdc_trainer_destroy(r.t);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    free(r.bx);
    free(r.by);
    free(r.perm);
    free_dataset(&train);
    free_dataset(&test);
    MPI_Finalize();
    return rc;
}
