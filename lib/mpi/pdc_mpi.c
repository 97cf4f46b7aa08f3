/*
 * pdc_mpi.c - libpdc_mpi (include/pdc_mpi.h): a pdc_trainer's gradient reducer over MPI, the agreement check
 * of the first step, rank-0 checkpoints and pruning decided on process 0. Public pdc API only.
 *
 * Every collective is non-blocking and waited for with a deadline (option timeout), so that a process that
 * died or stopped stepping makes the others fail with a message instead of hanging.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc_mpi.h"

enum { RED_SUM = 0, RED_DETERMINISTIC = 1 };

struct pdc_mpi {
    pdc_context *ctx;
    pdc_trainer *trainer;
    MPI_Comm comm;
    int rank, size;
    int reduction;
    double timeout;
    int check;             /* 1: the next reduction first checks that every process agrees */
    int overlap;           /* option overlap: buckets reduced during the backward pass */
    int sync_bn;           /* option sync_batchnorm */
    MPI_Request *reqs;     /* this step's bucket reductions in flight */
    size_t n_reqs, reqs_cap;
    float *gather;         /* deterministic: every process's parts */
    size_t gather_cap;
    pdc_mpi_stats stats;
    char msg[512];
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pdc_status fail(pdc_mpi *m, pdc_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->msg, sizeof m->msg, fmt, ap);
    va_end(ap);
    return st;
}

/* A pdc call's failure: its message from the context. */
static pdc_status fail_pdc(pdc_mpi *m, pdc_status st, const char *what)
{
    const char *e = pdc_context_last_error(m->ctx);
    return fail(m, st, "process %d: %s: %s", m->rank, what, e && *e ? e : pdc_status_string(st));
}

/* Waits for req until the deadline, yielding the CPU between polls (processes often share cores). */
static pdc_status wait_for(pdc_mpi *m, MPI_Request *req, int rc, const char *what)
{
    if (rc != MPI_SUCCESS) return fail(m, PDC_ERR_IO, "process %d: %s: MPI error %d", m->rank, what, rc);
    const double deadline = now() + m->timeout;
    for (long polls = 0;; polls++) {
        int done = 0;
        if ((rc = MPI_Test(req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return fail(m, PDC_ERR_IO, "process %d: %s: MPI error %d", m->rank, what, rc);
        if (done) return PDC_OK;
        if (now() > deadline)
            return fail(m, PDC_ERR_IO,
                        "process %d: %s: no answer from the other processes within %g s (option timeout): a process "
                        "died or stopped stepping; end the job (MPI_Abort)",
                        m->rank, what, m->timeout);
        if (polls > 200) nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

static pdc_status bcast(pdc_mpi *m, void *buf, int count, MPI_Datatype type, const char *what)
{
    MPI_Request req;
    return wait_for(m, &req, MPI_Ibcast(buf, count, type, 0, m->comm, &req), what);
}

static pdc_status allgather(pdc_mpi *m, const void *mine, void *all, int count, MPI_Datatype type, const char *what)
{
    MPI_Request req;
    return wait_for(m, &req, MPI_Iallgather(mine, count, type, all, count, type, m->comm, &req), what);
}

/* Every process's status after a local step: the first failure (lowest process) on every process. */
static pdc_status agree_status(pdc_mpi *m, pdc_status mine, const char *what)
{
    int *all = malloc((size_t)m->size * sizeof *all), me = (int)mine;
    if (!all) return fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
    pdc_status st = allgather(m, &me, all, 1, MPI_INT, what);
    for (int r = 0; r < m->size && !st; r++)
        if (all[r]) {
            st = (pdc_status)all[r];
            if (r != m->rank) fail(m, st, "%s failed on process %d (%s)", what, r, pdc_status_string(st));
        }
    free(all);
    return st;
}

/* ------------------------------------------------------------------ the agreement check */

/* Every option but "threads" (which may differ with the cores each process has), and the step count. */
static const char *const checked_options[] = {
    "loss", "optimizer", "lr", "momentum", "nesterov", "weight_decay", "beta1", "beta2", "eps", "lr_schedule",
    "lr_step", "lr_gamma", "lr_total_steps", "lr_min", "batch", "seed", "bn_momentum", "kernels", "sparse",
    "sparse_threshold", "recompute", "micro_batch", "step"};
#define N_CHECKED (sizeof checked_options / sizeof checked_options[0])
enum { FP_WEIGHTS = 0, FP_STRUCTURE = 1, FP_VALUES = 2, FP_REDUCTION = 3, FP_OPTIONS = 4, FP_N = FP_OPTIONS + N_CHECKED };

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Hash of weight i's values into *h; the weight's element count into *numel. */
static pdc_status weight_hash(pdc_mpi *m, size_t i, uint64_t *h, size_t *numel, float **buf, size_t *cap)
{
    const char *name;
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_status st = pdc_trainer_weight_info(m->trainer, i, &name, &rank, dims, NULL, NULL);
    if (st) return fail_pdc(m, st, "weight info");
    size_t n = 1;
    for (size_t d = 0; d < rank; d++) n *= (size_t)dims[d];
    if (n > *cap) {
        float *b = realloc(*buf, n * sizeof *b);
        if (!b) return fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
        *buf = b;
        *cap = n;
    }
    if ((st = pdc_trainer_get_weights(m->trainer, name, *buf, n))) return fail_pdc(m, st, "get weights");
    *h = fnv(14695981039346656037ull, *buf, n * sizeof **buf);
    *numel = n;
    return PDC_OK;
}

static pdc_status fingerprint(pdc_mpi *m, uint64_t fp[FP_N])
{
    size_t nw = 0;
    pdc_status st = pdc_trainer_num_weights(m->trainer, &nw);
    if (st) return fail_pdc(m, st, "weights");
    memset(fp, 0, FP_N * sizeof *fp);
    fp[FP_WEIGHTS] = nw;
    fp[FP_STRUCTURE] = fp[FP_VALUES] = 14695981039346656037ull;
    fp[FP_REDUCTION] = (uint64_t)m->reduction | (uint64_t)m->sync_bn << 8;
    float *buf = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < nw && !st; i++) {
        const char *name;
        size_t rank, kept;
        int64_t dims[PDC_MAX_RANK];
        int trainable;
        if ((st = pdc_trainer_weight_info(m->trainer, i, &name, &rank, dims, &kept, &trainable))) {
            st = fail_pdc(m, st, "weight info");
            break;
        }
        const uint64_t facts[3] = {rank, kept, (uint64_t)trainable};
        fp[FP_STRUCTURE] = fnv(fnv(fnv(fp[FP_STRUCTURE], name, strlen(name) + 1), dims, rank * sizeof *dims), facts,
                               sizeof facts);
        uint64_t h;
        size_t n;
        if (!(st = weight_hash(m, i, &h, &n, &buf, &cap))) fp[FP_VALUES] = fnv(fp[FP_VALUES], &h, sizeof h);
    }
    free(buf);
    for (size_t k = 0; k < N_CHECKED && !st; k++) {
        char v[128];
        if ((st = pdc_trainer_get_option(m->trainer, checked_options[k], v, sizeof v))) return fail_pdc(m, st, "option");
        fp[FP_OPTIONS + k] = fnv(14695981039346656037ull, v, strlen(v));
    }
    return st;
}

/* The first weight whose values differ between process 0 and process r (collective). */
static pdc_status name_weight(pdc_mpi *m, int r, size_t nw)
{
    uint64_t *mine = malloc(nw * sizeof *mine), *all = malloc(nw * (size_t)m->size * sizeof *all);
    float *buf = NULL;
    size_t cap = 0, n;
    pdc_status st = mine && all ? PDC_OK : fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < nw && !st; i++) st = weight_hash(m, i, &mine[i], &n, &buf, &cap);
    if (!st) st = allgather(m, mine, all, (int)nw, MPI_UINT64_T, "checking that the processes agree");
    for (size_t i = 0; i < nw && !st; i++)
        if (all[(size_t)r * nw + i] != all[i]) {
            const char *name = "?";
            pdc_trainer_weight_info(m->trainer, i, &name, NULL, NULL, NULL, NULL);
            st = fail(m, PDC_ERR_INVALID_ARG,
                      "weight '%s' differs between process 0 and process %d (create every trainer from the same "
                      "model, seed and pdc_trainer_init_weights)",
                      name, r);
        }
    free(buf);
    free(mine);
    free(all);
    return st ? st : fail(m, PDC_ERR_INVALID_ARG, "the weights differ between process 0 and process %d", r);
}

/* Collective: PDC_OK if every process has process 0's model, weights and options. */
static pdc_status agree(pdc_mpi *m)
{
    uint64_t fp[FP_N], *all = malloc((size_t)m->size * FP_N * sizeof *all);
    if (!all) return fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
    pdc_status st = fingerprint(m, fp);
    /* a process that failed locally still takes part, with a fingerprint nobody has */
    if (st) memset(fp, 0xff, sizeof fp);
    pdc_status gst = allgather(m, fp, all, FP_N, MPI_UINT64_T, "checking that the processes agree");
    if (st || gst) {
        free(all);
        return st ? st : gst;
    }
    for (int r = 1; r < m->size && !st; r++) {
        const uint64_t *f = all + (size_t)r * FP_N;
        if (f[FP_WEIGHTS] != all[FP_WEIGHTS] || f[FP_STRUCTURE] != all[FP_STRUCTURE])
            st = fail(m, PDC_ERR_INVALID_ARG,
                      "process %d's model differs from process 0's (weight names, shapes or kept counts: pruned "
                      "differently?)", r);
        else if (f[FP_REDUCTION] != all[FP_REDUCTION])
            st = fail(m, PDC_ERR_INVALID_ARG,
                      "option reduction or sync_batchnorm differs between process 0 and process %d", r);
        for (size_t k = 0; k < N_CHECKED && !st; k++)
            if (f[FP_OPTIONS + k] != all[FP_OPTIONS + k])
                st = fail(m, PDC_ERR_INVALID_ARG, "trainer option %s differs between process 0 and process %d",
                          checked_options[k], r);
        if (!st && f[FP_VALUES] != all[FP_VALUES]) st = name_weight(m, r, (size_t)all[FP_WEIGHTS]);
    }
    free(all);
    return st;
}

/* ------------------------------------------------------------------ the reducer */

/* The trainer's pairwise tree (pdc.h, pdc_gradient_reducer): parts[a] = sum of parts [a, a + count). A copy of
 * lib/train/train_reduce.c's on purpose: libpdc_mpi may use only the public API, which documents the order
 * rather than exporting it; test/mpi checks that both give the same bits. */
static void tree_sum(float *parts, size_t n, size_t a, size_t count)
{
    if (count < 2) return;
    size_t h = 1;
    while (h * 2 < count) h *= 2;
    tree_sum(parts, n, a, h);
    tree_sum(parts, n, a + h, count - h);
    float *l = parts + a * n;
    const float *r = parts + (a + h) * n;
    for (size_t k = 0; k < n; k++) l[k] += r[k];
}

static pdc_status reduce_deterministic(pdc_mpi *m, float *g, size_t n, size_t parts, double *samples)
{
    int *counts = malloc(2 * (size_t)m->size * sizeof *counts), mine = (int)parts;
    double *all_samples = malloc((size_t)m->size * sizeof *all_samples);
    pdc_status st = counts && all_samples ? PDC_OK : fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = allgather(m, &mine, counts, 1, MPI_INT, "gathering the part counts");
    if (!st) st = allgather(m, samples, all_samples, 1, MPI_DOUBLE, "gathering the sample counts");
    size_t total = 0;
    for (int r = 0; r < m->size && !st; r++) total += (size_t)counts[r];
    if (!st && total * n > INT_MAX)
        st = fail(m, PDC_ERR_OVERFLOW, "deterministic reduction: %zu parts of %zu floats exceed MPI's int counts",
                  total, n);
    if (!st && total * n > m->gather_cap) {
        float *b = realloc(m->gather, total * n * sizeof *b);
        if (!b) st = fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
        else {
            m->gather = b;
            m->gather_cap = total * n;
        }
    }
    if (!st) {
        int *rc = counts + m->size, at = 0;
        for (int r = 0; r < m->size; r++) { /* counts become floats, rc their offsets */
            counts[r] *= (int)n;
            rc[r] = at;
            at += counts[r];
        }
        MPI_Request req;
        st = wait_for(m, &req,
                      MPI_Iallgatherv(g, (int)(parts * n), MPI_FLOAT, m->gather, counts, rc, MPI_FLOAT, m->comm, &req),
                      "gathering the gradients");
    }
    if (!st) {
        tree_sum(m->gather, n, 0, total);
        if (total) memcpy(g, m->gather, n * sizeof *g);
        else memset(g, 0, n * sizeof *g);
        double s = 0.0;
        for (int r = 0; r < m->size; r++) s += all_samples[r];
        *samples = s;
    }
    free(counts);
    free(all_samples);
    return st;
}

static pdc_status reduce_sum(pdc_mpi *m, float *g, size_t n, size_t parts, double *samples)
{
    if (n > INT_MAX) return fail(m, PDC_ERR_OVERFLOW, "%zu gradient floats exceed MPI's int counts", n);
    MPI_Request req[2];
    pdc_status st = PDC_OK;
    if (m->n_reqs) { /* the buckets of the backward pass: finish them */
        for (size_t i = 0; i < m->n_reqs && !st; i++) st = wait_for(m, &m->reqs[i], MPI_SUCCESS, "summing the gradients");
        m->n_reqs = 0;
    } else {
        tree_sum(g, n, 0, parts);
        int rc = MPI_Iallreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &req[0]);
        st = wait_for(m, &req[0], rc, "summing the gradients");
    }
    if (!st)
        st = wait_for(m, &req[1], MPI_Iallreduce(MPI_IN_PLACE, samples, 1, MPI_DOUBLE, MPI_SUM, m->comm, &req[1]),
                      "summing the sample counts");
    return st;
}

/* Elements of every trainable weight: what would travel without pruning. */
static uint64_t dense_floats(const pdc_mpi *m)
{
    size_t nw = 0;
    uint64_t total = 0;
    pdc_trainer_num_weights(m->trainer, &nw);
    for (size_t i = 0; i < nw; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        int trainable = 0;
        if (pdc_trainer_weight_info(m->trainer, i, NULL, &rank, dims, NULL, &trainable) || !trainable) continue;
        uint64_t e = 1;
        for (size_t d = 0; d < rank; d++) e *= (uint64_t)dims[d];
        total += e;
    }
    return total;
}

/* A weight's gradient completed by the backward pass: its sum starts now (option overlap, reduction sum,
 * after the first step's agreement check); MPI_Testall lets the reductions in flight progress. */
static pdc_status bucket(void *user, float *g, size_t offset, size_t n, char *msg, size_t msg_cap)
{
    pdc_mpi *m = user;
    if (m->check || m->reduction != RED_SUM || !n) return PDC_OK; /* the reducer does it all */
    if (m->n_reqs == m->reqs_cap) {
        const size_t cap = m->reqs_cap ? 2 * m->reqs_cap : 64;
        MPI_Request *r = realloc(m->reqs, cap * sizeof *r);
        if (!r) {
            snprintf(msg, msg_cap, "out of memory");
            return PDC_ERR_OUT_OF_MEMORY;
        }
        m->reqs = r;
        m->reqs_cap = cap;
    }
    int rc = n > INT_MAX ? MPI_ERR_COUNT
                         : MPI_Iallreduce(MPI_IN_PLACE, g + offset, (int)n, MPI_FLOAT, MPI_SUM, m->comm,
                                          &m->reqs[m->n_reqs]);
    if (rc != MPI_SUCCESS) {
        snprintf(msg, msg_cap, "process %d: summing a gradient bucket: MPI error %d", m->rank, rc);
        return PDC_ERR_IO;
    }
    m->n_reqs++;
    m->stats.bucket_floats += n;
    int done;
    MPI_Testall((int)m->n_reqs, m->reqs, &done, MPI_STATUSES_IGNORE);
    return PDC_OK;
}

static pdc_status reducer(void *user, float *g, size_t n, size_t parts, double *samples, char *msg, size_t msg_cap)
{
    pdc_mpi *m = user;
    const double t0 = now();
    pdc_status st = PDC_OK;
    if (m->check && !(st = agree(m))) m->check = 0;
    if (!st)
        st = m->reduction == RED_DETERMINISTIC ? reduce_deterministic(m, g, n, parts, samples)
                                               : reduce_sum(m, g, n, parts, samples);
    if (st) {
        snprintf(msg, msg_cap, "%s", m->msg);
        return st;
    }
    m->stats.steps++;
    m->stats.floats += m->reduction == RED_DETERMINISTIC ? parts * n : n;
    m->stats.dense_floats += m->reduction == RED_DETERMINISTIC ? parts * dense_floats(m) : dense_floats(m);
    m->stats.wait_s += now() - t0;
    return PDC_OK;
}

/* Option sync_batchnorm: per-channel batchnorm sums over every process (pdc_batchnorm_sync). */
static pdc_status bn_sync(void *user, double *sums, size_t n, char *msg, size_t msg_cap)
{
    pdc_mpi *m = user;
    MPI_Request req;
    pdc_status st = n > INT_MAX ? fail(m, PDC_ERR_OVERFLOW, "%zu batchnorm sums exceed MPI's int counts", n)
                                : wait_for(m, &req,
                                           MPI_Iallreduce(MPI_IN_PLACE, sums, (int)n, MPI_DOUBLE, MPI_SUM, m->comm, &req),
                                           "summing batch statistics");
    if (st) snprintf(msg, msg_cap, "%s", m->msg);
    return st;
}

/* ------------------------------------------------------------------ API */

pdc_status pdc_mpi_attach(pdc_context *ctx, pdc_trainer *trainer, MPI_Comm comm, pdc_mpi **out)
{
    if (!ctx || !trainer || !out) return PDC_ERR_INVALID_ARG;
    pdc_mpi *m = calloc(1, sizeof *m);
    if (!m) return PDC_ERR_OUT_OF_MEMORY;
    m->ctx = ctx;
    m->trainer = trainer;
    m->timeout = 60.0;
    m->check = 1;
    m->overlap = 1;
    if (MPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) {
        free(m);
        return PDC_ERR_IO;
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    pdc_status st = pdc_trainer_set_reducer(trainer, reducer, bucket, m);
    if (st) {
        MPI_Comm_free(&m->comm);
        free(m);
        return st;
    }
    *out = m;
    return PDC_OK;
}

void pdc_mpi_detach(pdc_mpi *m)
{
    if (!m) return;
    pdc_trainer_set_reducer(m->trainer, NULL, NULL, NULL);
    pdc_trainer_set_batchnorm_sync(m->trainer, NULL, NULL);
    MPI_Comm_free(&m->comm);
    free(m->gather);
    free(m->reqs);
    free(m);
}

const char *pdc_mpi_last_error(const pdc_mpi *m) { return m ? m->msg : "pdc_mpi is NULL"; }
int pdc_mpi_rank(const pdc_mpi *m) { return m ? m->rank : -1; }
int pdc_mpi_size(const pdc_mpi *m) { return m ? m->size : 0; }

pdc_status pdc_mpi_set_option(pdc_mpi *m, const char *name, const char *value)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    if (!name || !value) return fail(m, PDC_ERR_INVALID_ARG, "pdc_mpi_set_option: name or value is NULL");
    if (!strcmp(name, "reduction")) {
        if (!strcmp(value, "sum")) m->reduction = RED_SUM;
        else if (!strcmp(value, "deterministic")) m->reduction = RED_DETERMINISTIC;
        else return fail(m, PDC_ERR_INVALID_ARG, "option reduction is \"%s\", expected sum or deterministic", value);
        m->check = 1;
        return PDC_OK;
    }
    if (!strcmp(name, "timeout")) {
        char *end;
        const double t = strtod(value, &end);
        if (end == value || *end || !(t > 0.0) || !isfinite(t))
            return fail(m, PDC_ERR_INVALID_ARG, "option timeout is \"%s\", expected seconds > 0", value);
        m->timeout = t;
        return PDC_OK;
    }
    if (!strcmp(name, "overlap")) {
        if (strcmp(value, "0") && strcmp(value, "1"))
            return fail(m, PDC_ERR_INVALID_ARG, "option overlap is \"%s\", expected 0 or 1", value);
        m->overlap = value[0] == '1';
        return pdc_trainer_set_reducer(m->trainer, reducer, m->overlap ? bucket : NULL, m);
    }
    if (!strcmp(name, "sync_batchnorm")) {
        if (strcmp(value, "0") && strcmp(value, "1"))
            return fail(m, PDC_ERR_INVALID_ARG, "option sync_batchnorm is \"%s\", expected 0 or 1", value);
        m->sync_bn = value[0] == '1';
        m->check = 1;
        return pdc_trainer_set_batchnorm_sync(m->trainer, m->sync_bn ? bn_sync : NULL, m);
    }
    return fail(m, PDC_ERR_INVALID_ARG, "unknown option '%s' (reduction, timeout, overlap, sync_batchnorm)", name);
}

pdc_status pdc_mpi_get_stats(const pdc_mpi *m, pdc_mpi_stats *out)
{
    if (!m || !out) return PDC_ERR_INVALID_ARG;
    *out = m->stats;
    return PDC_OK;
}

pdc_status pdc_mpi_save(pdc_mpi *m, const char *path)
{
    if (!m || !path) return PDC_ERR_INVALID_ARG;
    int status = 0;
    char text[sizeof m->msg] = "";
    if (m->rank == 0) {
        const pdc_status st = pdc_trainer_save(m->trainer, path);
        if (st) {
            fail_pdc(m, st, "save");
            snprintf(text, sizeof text, "%s", m->msg);
        }
        status = (int)st;
    }
    pdc_status st = bcast(m, &status, 1, MPI_INT, "saving a checkpoint");
    if (!st) st = bcast(m, text, (int)sizeof text, MPI_CHAR, "saving a checkpoint");
    if (st) return st;
    if (status && m->rank) fail(m, (pdc_status)status, "%s", text);
    return (pdc_status)status;
}

pdc_status pdc_mpi_load(pdc_mpi *m, const char *path)
{
    if (!m || !path) return PDC_ERR_INVALID_ARG;
    pdc_status st = pdc_trainer_load(m->trainer, path);
    if (st) fail_pdc(m, st, "load");
    m->check = 1;
    return agree_status(m, st, "loading a checkpoint");
}

pdc_status pdc_mpi_sync_weights(pdc_mpi *m)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    size_t nw = 0;
    pdc_status st = pdc_trainer_num_weights(m->trainer, &nw);
    if (st) return fail_pdc(m, st, "weights");
    /* the processes have the same weight names and sizes (checked at the first step) */
    float *buf = NULL;
    pdc_status local = PDC_OK;
    for (size_t i = 0; i < nw && !st; i++) {
        const char *name;
        size_t rank, n = 1;
        int64_t dims[PDC_MAX_RANK];
        if ((st = pdc_trainer_weight_info(m->trainer, i, &name, &rank, dims, NULL, NULL))) break;
        for (size_t d = 0; d < rank; d++) n *= (size_t)dims[d];
        float *b = realloc(buf, n * sizeof *b);
        if (!b) {
            st = fail(m, PDC_ERR_OUT_OF_MEMORY, "out of memory");
            break;
        }
        buf = b;
        if ((st = pdc_trainer_get_weights(m->trainer, name, buf, n)) ||
            (st = bcast(m, buf, (int)n, MPI_FLOAT, "broadcasting the weights")))
            break;
        /* a refusal (a pruned entry non-zero: masks differ) is reported once every weight went round */
        pdc_status s2 = m->rank ? pdc_trainer_set_weights(m->trainer, name, buf, n) : PDC_OK;
        if (s2 && !local) local = fail_pdc(m, s2, "set weights");
    }
    free(buf);
    return st ? st : agree_status(m, local, "taking process 0's weights");
}

/* A trainer call made on process 0's weights, every process's status agreed on, then the agreement check. */
static pdc_status on_rank0_weights(pdc_mpi *m, pdc_status (*call)(pdc_mpi *, void *), void *arg, const char *what,
                                   int check)
{
    pdc_status st = pdc_mpi_sync_weights(m);
    if (st) return st;
    st = call(m, arg);
    if (st) fail_pdc(m, st, what);
    if ((st = agree_status(m, st, what))) return st;
    if (!check) return PDC_OK;
    m->check = 0;
    return agree(m);
}

typedef struct prune_args {
    const char *pipeline;
    const pdc_attrs *options;
    float rho;
    double *residual;
} prune_args;

static pdc_status call_prune(pdc_mpi *m, void *a)
{
    const prune_args *p = a;
    return pdc_trainer_prune(m->trainer, p->pipeline, p->options);
}
static pdc_status call_admm_begin(pdc_mpi *m, void *a)
{
    const prune_args *p = a;
    return pdc_trainer_admm_begin(m->trainer, p->pipeline, p->options, p->rho);
}
static pdc_status call_admm_update(pdc_mpi *m, void *a)
{
    return pdc_trainer_admm_update(m->trainer, ((prune_args *)a)->residual);
}
static pdc_status call_admm_end(pdc_mpi *m, void *a)
{
    (void)a;
    return pdc_trainer_admm_end(m->trainer);
}

pdc_status pdc_mpi_prune(pdc_mpi *m, const char *pipeline, const pdc_attrs *options)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    prune_args a = {pipeline, options, 0.0f, NULL};
    return on_rank0_weights(m, call_prune, &a, "pruning", 1);
}

pdc_status pdc_mpi_admm_begin(pdc_mpi *m, const char *pipeline, const pdc_attrs *options, float rho)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    prune_args a = {pipeline, options, rho, NULL};
    return on_rank0_weights(m, call_admm_begin, &a, "starting ADMM", 0);
}

pdc_status pdc_mpi_admm_update(pdc_mpi *m, double *residual_out)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    prune_args a = {NULL, NULL, 0.0f, residual_out};
    return on_rank0_weights(m, call_admm_update, &a, "the ADMM update", 0);
}

pdc_status pdc_mpi_admm_end(pdc_mpi *m)
{
    if (!m) return PDC_ERR_INVALID_ARG;
    return on_rank0_weights(m, call_admm_end, NULL, "ending ADMM", 1);
}
