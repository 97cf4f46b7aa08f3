/*
 * train_seq.c - a recurrent classifier trained, pruned and retrained from a host program with pdc's public
 * API only: the digits (the CNN demo's data file) read as sequences, each image's 8 rows one time step of 8
 * pixels.
 *
 *   rows [8, N, 8] -> lstm (hidden 64) -> y_h [1, N, 64] -> reshape [N, 64] -> fc 64->10 -> softmax -> probs [N, 10]
 *
 * Phases (Adam, batch 32, cross-entropy):
 *   dense   --epochs epochs (default 25, lr 0.01) from PyTorch-style initial weights
 *   bcr     the lstm's gate matrices and the fc pruned to 4x fewer weights with block column-row pruning
 *           (prune-bcr: 8x8 blocks, half the columns and half the rows of every block removed), then --retrain
 *           epochs (default 40, lr 0.01) of masked retraining
 * Each phase ends with one line of key=value fields for scripts (train_digits' format):
 *   phase=NAME test_accuracy=X params=N compression=Y latency_ms=Z target=T test_loss=L steps=S step_ms=M
 * params counts kept weights (biases included), compression = all weights / kept weights, latency_ms is the
 * median time of one inference (batch 1) of the exported model compiled for target ("cpu" when this build has
 * it, else "ref"); step_ms is the mean training step time of the phase.
 *
 * usage: train_seq [--data digits.bin] [--out DIR] [--epochs N] [--retrain N] [--seed S] [--quiet]
 * Writes DIR/seq.pdc (default build/demo): the pruned, retrained model.
 */
#include "example_common.h"

enum { T = 8, F = 8, HIDDEN = 64, CLASSES = 10, BATCH = 32 };

static int fail(pdc_status st, const char *what)
{
    const char *msg = pdc_context_last_error(ctx);
    fprintf(stderr, "train_seq: %s: %s (%s)\n", what, *msg ? msg : "failed", pdc_status_string(st));
    return 1;
}

/* ------------------------------------------------------------------ data */

/* The digits as sequences: time step t of sample i is image row t, x [T, n, F]. */
static int to_sequences(dataset *d)
{
    float *seq = malloc(d->n * T * F * sizeof *seq);
    if (!seq) {
        fprintf(stderr, "train_seq: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < d->n; i++)
        for (size_t t = 0; t < T; t++) memcpy(seq + (t * d->n + i) * F, d->x + (i * T + t) * F, F * sizeof *seq);
    free(d->x);
    d->x = seq;
    return 0;
}

/* ------------------------------------------------------------------ the model */

static int build_model(pdc_model **out)
{
    pdc_model *m;
    TRY(pdc_model_create(ctx, "digits_lstm", &m), "create model");
    *out = m;
    static const int64_t rows[3] = {T, 1, F}, w[3] = {1, 4 * HIDDEN, F}, r[3] = {1, 4 * HIDDEN, HIDDEN},
                         b[2] = {1, 8 * HIDDEN}, fw[2] = {CLASSES, HIDDEN}, fb[1] = {CLASSES}, shape[2] = {-1, HIDDEN};
    static float zeros[4 * HIDDEN * HIDDEN]; /* pdc_trainer_init_weights draws the initial weights */
    TRY(pdc_model_add_input(m, "rows", 3, rows), "input");
    TRY(pdc_model_add_constant(m, "lstm.w", 3, w, zeros), "lstm.w");
    TRY(pdc_model_add_constant(m, "lstm.r", 3, r, zeros), "lstm.r");
    TRY(pdc_model_add_constant(m, "lstm.b", 2, b, zeros), "lstm.b");
    TRY(pdc_model_add_constant(m, "fc.w", 2, fw, zeros), "fc.w");
    TRY(pdc_model_add_constant(m, "fc.b", 1, fb, zeros), "fc.b");
    pdc_attrs *la, *ra;
    TRY(pdc_attrs_create(ctx, &la), "attrs");
    pdc_status st = pdc_attrs_create(ctx, &ra);
    if (!st) st = pdc_attrs_set_int(la, "hidden_size", HIDDEN);
    if (!st) st = pdc_attrs_set_ints(ra, "shape", 2, shape);
    /* the lstm's y (every step) is computed but unused: the classifier reads the last hidden state y_h */
    const char *lin[] = {"rows", "lstm.w", "lstm.r", "lstm.b"}, *lout[] = {"lstm.y", "lstm.y_h"};
    const char *rin[] = {"lstm.y_h"}, *rout[] = {"last"};
    const char *fin[] = {"last", "fc.w", "fc.b"}, *fout[] = {"logits"};
    const char *sin[] = {"logits"}, *sout[] = {"probs"};
    if (!st) st = pdc_model_add_layer(m, "lstm", "lstm", 4, lin, 2, lout, la);
    if (!st) st = pdc_model_add_layer(m, "last", "reshape", 1, rin, 1, rout, ra);
    if (!st) st = pdc_model_add_layer(m, "fc", "fc", 3, fin, 1, fout, NULL);
    if (!st) st = pdc_model_add_layer(m, "softmax", "softmax", 1, sin, 1, sout, NULL);
    if (!st) st = pdc_model_mark_output(m, "probs");
    pdc_attrs_destroy(la);
    pdc_attrs_destroy(ra);
    if (st) return fail(st, "build model");
    return 0;
}

/* ------------------------------------------------------------------ training */

typedef struct run {
    pdc_trainer *t;
    const dataset *train, *test;
    float *bx, *by; /* batch buffers */
    size_t *perm;
    int quiet;
    size_t steps;
    double train_s;
} run;

static int evaluate(run *r, const dataset *d, float *loss, float *acc)
{
    const int64_t xd[3] = {T, (int64_t)d->n, F};
    return evaluate_set(r->t, 3, xd, d, loss, acc);
}

/* One epoch over the shuffled training set, the last batch partial. */
static int epoch(run *r, float *mean_loss)
{
    const dataset *d = r->train;
    TRY(pdc_trainer_shuffle(r->t, d->n, r->perm), "shuffle");
    double sum = 0.0;
    const double t0 = now();
    for (size_t at = 0; at < d->n; at += BATCH) {
        const size_t nb = d->n - at < BATCH ? d->n - at : BATCH;
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < nb; i++)
                memcpy(r->bx + (t * nb + i) * F, d->x + (t * d->n + r->perm[at + i]) * F, F * sizeof(float));
        for (size_t i = 0; i < nb; i++) r->by[i] = d->y[r->perm[at + i]];
        const int64_t xd[3] = {T, (int64_t)nb, F};
        float loss;
        if (train_step(r->t, 3, xd, r->bx, nb, r->by, &loss)) return 1;
        sum += (double)loss * (double)nb;
        r->steps++;
    }
    r->train_s += now() - t0;
    *mean_loss = (float)(sum / (double)d->n);
    return 0;
}

static int train_epochs(run *r, const char *phase, int epochs)
{
    for (int e = 1; e <= epochs; e++) {
        float loss, tl, ta;
        if (epoch(r, &loss) || evaluate(r, r->test, &tl, &ta)) return 1;
        if (!r->quiet)
            printf("  %-6s epoch %2d/%d  train_loss %.4f  test_loss %.4f  test_accuracy %.4f\n", phase, e, epochs,
                   (double)loss, (double)tl, (double)ta);
        fflush(stdout);
    }
    return 0;
}

/* ------------------------------------------------------------------ reporting */

/* Median wall time of one batch-1 inference (the first test sample) compiled for cpu, else ref, in ms. */
static int seq_latency(const pdc_model *m, const dataset *test, double *ms, const char **target_out)
{
    static const char *const targets[] = {"cpu", "ref", NULL};
    static const int64_t xd[3] = {T, 1, F};
    float seq[T * F];
    for (size_t t = 0; t < T; t++) memcpy(seq + t * F, test->x + t * test->n * F, F * sizeof(float));
    return latency(m, targets, 3, xd, seq, CLASSES, ms, target_out);
}

static int report(run *r, const char *phase, const char *save_as)
{
    pdc_model *m;
    TRY(pdc_trainer_export(r->t, &m), "export");
    int64_t weights = 0, kept = 0;
    pdc_status st;
    float loss, acc;
    double ms = 0.0;
    const char *target = "?";
    int rc = count_weights(m, &weights, &kept);
    if (!rc) rc = evaluate(r, r->test, &loss, &acc);
    if (!rc) rc = seq_latency(m, r->test, &ms, &target);
    if (!rc && save_as && (st = pdc_model_save(m, save_as))) rc = fail(st, save_as);
    pdc_model_destroy(m);
    if (rc) return rc;
    printf("phase=%s test_accuracy=%.4f params=%lld compression=%.2f latency_ms=%.4f target=%s test_loss=%.4f "
           "steps=%zu step_ms=%.3f\n",
           phase, (double)acc, (long long)kept, (double)weights / (double)(kept ? kept : 1), ms, target, (double)loss,
           r->steps, r->steps ? r->train_s * 1e3 / (double)r->steps : 0.0);
    fflush(stdout);
    r->steps = 0;
    r->train_s = 0.0;
    return 0;
}

/* 4x fewer weights in the lstm's gate matrices (w and r) and the fc: every 8x8 block keeps 4 of its columns and
 * 4 of its rows (prune-bcr). */
static int prune(run *r)
{
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    pdc_status st = pdc_attrs_set_string(a, "bcr_block", "8x8");
    if (!st) st = pdc_attrs_set_float(a, "bcr_col_rate", 0.5f);
    if (!st) st = pdc_attrs_set_float(a, "bcr_row_rate", 0.5f);
    if (!st) st = pdc_trainer_prune(r->t, "prune-bcr", a);
    pdc_attrs_destroy(a);
    if (st) return fail(st, "prune");
    float tl, ta;
    if (evaluate(r, r->test, &tl, &ta)) return 1;
    if (!r->quiet)
        printf("  pruned with prune-bcr, 8x8 blocks keeping 4 columns x 4 rows: test_accuracy %.4f before retraining\n",
               (double)ta);
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = "test/data/digits.bin", *out = "build/demo";
    int epochs = 25, retrain = 40, quiet = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) quiet = 1;
        else if (v && !strcmp(a, "--data")) data = argv[++i];
        else if (v && !strcmp(a, "--out")) out = argv[++i];
        else if (v && !strcmp(a, "--epochs")) epochs = atoi(argv[++i]);
        else if (v && !strcmp(a, "--retrain")) retrain = atoi(argv[++i]);
        else if (v && !strcmp(a, "--seed")) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: train_seq [--data digits.bin] [--out DIR] [--epochs N] [--retrain N] [--seed S] "
                            "[--quiet]\n");
            return 2;
        }
    }
    dataset train = {0, NULL, NULL}, test = {0, NULL, NULL};
    int rc = load_digits("train_seq", data, &train, &test) || to_sequences(&train) || to_sequences(&test);
    if (!rc && pdc_context_create(&ctx) != PDC_OK) rc = 1;
    run r;
    memset(&r, 0, sizeof r);
    r.train = &train;
    r.test = &test;
    r.quiet = quiet;
    r.bx = malloc(BATCH * T * F * sizeof(float));
    r.by = malloc(BATCH * sizeof(float));
    r.perm = malloc((train.n ? train.n : 1) * sizeof *r.perm);
    pdc_model *m = NULL;
    if (!rc && (!r.bx || !r.by || !r.perm)) {
        fprintf(stderr, "train_seq: out of memory\n");
        rc = 1;
    }
    if (!rc) rc = build_model(&m);
    if (!rc) {
        pdc_status st = create_trainer(m, seed, "0.01", NULL, &r.t);
        if (!st) st = pdc_trainer_init_weights(r.t);
        if (st) rc = fail(st, "trainer");
    }
    if (!rc) {
        printf("train_seq: %zu training and %zu test digits as %d steps of %d pixels; lstm hidden %d, Adam, batch %d, "
               "seed %llu\n", train.n, test.n, T, F, HIDDEN, BATCH, seed);
        printf("phase dense: %d epochs, lr 0.01\n", epochs);
        rc = train_epochs(&r, "dense", epochs);
    }
    if (!rc) rc = report(&r, "dense", NULL);
    if (!rc) {
        printf("phase bcr: lstm.w, lstm.r and fc.w block column-row pruned to 1/4, %d epochs of masked retraining, "
               "lr 0.01\n", retrain);
        rc = prune(&r);
    }
    if (!rc) {
        pdc_status st = pdc_trainer_set_option(r.t, "lr", "0.01");
        if (st) rc = fail(st, "lr");
    }
    if (!rc) rc = train_epochs(&r, "bcr", retrain);
    char path[4096];
    snprintf(path, sizeof path, "%s/seq.pdc", out);
    if (!rc) rc = report(&r, "bcr", path);
    if (!rc && !quiet) printf("train_seq: wrote %s (the pruned, retrained model)\n", path);
    pdc_trainer_destroy(r.t);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    free(r.bx);
    free(r.by);
    free(r.perm);
    free_dataset(&train);
    free_dataset(&test);
    return rc;
}
