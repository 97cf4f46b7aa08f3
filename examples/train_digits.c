/*
 * train_digits.c - pruning-retraining from a host program, with pdc's public API only: trains the digits
 * CNN, prunes it, retrains it, compiles and saves it. This is what `make demo` runs.
 *
 *   image [N,1,8,8] -> conv 3x3 1->16 pad 1 -> relu -> conv 3x3 16->32 pad 1 -> relu
 *                   -> flatten [N,2048] -> fc 2048->10 -> softmax -> probs [N,10]
 *
 * Phases (Adam lr 1e-3, batch 32, cross-entropy, as the PyTorch reference in test/data/README.md):
 *   dense           20 epochs from PyTorch-style initial weights; checkpoint saved
 *   pattern_conn    8 patterns of 4 entries + 50% connectivity pruning on conv1 and conv2 (the prune-pattern
 *                   and prune-connectivity passes; conv1, the stem, named in option "layers" so that it is
 *                   pruned too), then 10 epochs of masked retraining
 *   pattern_conn_fc the dense checkpoint reloaded, the same pruning plus 80% of the fc's 1x4 blocks
 *                   (prune-block), then 10 epochs of masked retraining   (--no-fc to skip)
 *   admm            the dense checkpoint reloaded, 12 epochs of ADMM towards pattern_conn_fc's sparsity,
 *                   hard pruning, 10 epochs of masked retraining         (--admm to run it)
 *   planned         the dense checkpoint reloaded, pruning planned to a latency budget of F x the dense
 *                   model's predicted 1-thread time with a calibration set (pdc_trainer_plan: the last 256
 *                   training digits), then 10 epochs of masked retraining (--plan F to run it)
 * Each phase ends with one line of key=value fields for scripts:
 *   phase=NAME test_accuracy=X params=N compression=Y latency_ms=Z target=T ...
 * params counts kept weights (biases included), compression = all weights / kept weights, latency_ms is
 * the median time of one inference (batch 1) of the model compiled for target ("cpu" when this build has
 * it, else "ref"), latency_ref_ms the same on "ref"; step_ms is the mean training step time of the phase.
 *
 * usage: train_digits [--data digits.bin] [--out DIR] [--epochs N] [--retrain N] [--admm-epochs N]
 *                     [--seed S] [--threads T] [--no-fc] [--admm] [--plan F] [--profile FILE] [--quiet]
 * Writes to DIR (default build/demo): digits.pdc (the last phase's pruned model), digits-dense.pdc,
 * dense.ckpt (the checkpoint) and digit0.bin (test digit #0 as raw float32 [1,1,8,8], pixels / 16).
 */
#include "example_common.h"

static int fail(pdc_status st, const char *what)
{
    const char *msg = pdc_context_last_error(ctx);
    fprintf(stderr, "train_digits: %s: %s (%s)\n", what, *msg ? msg : "failed", pdc_status_string(st));
    return 1;
}

/* ------------------------------------------------------------------ training */

typedef struct run {
    pdc_trainer *t;
    const dataset *train, *test;
    float *bx, *by;         /* batch buffers */
    size_t *perm;
    size_t batch;
    int quiet;
    size_t steps;
    double train_s;
} run;

static int evaluate(run *r, const dataset *d, float *loss, float *acc)
{
    const int64_t xd[4] = {(int64_t)d->n, 1, 8, 8};
    return evaluate_set(r->t, 4, xd, d, loss, acc);
}

/* One epoch over the shuffled training set, the last batch partial (as PyTorch's DataLoader). */
static int epoch(run *r, float *mean_loss)
{
    const dataset *d = r->train;
    TRY(pdc_trainer_shuffle(r->t, d->n, r->perm), "shuffle");
    double sum = 0.0;
    const double t0 = now();
    for (size_t at = 0; at < d->n; at += r->batch) {
        const size_t nb = d->n - at < r->batch ? d->n - at : r->batch;
        for (size_t i = 0; i < nb; i++) {
            memcpy(r->bx + i * 64, d->x + r->perm[at + i] * 64, 64 * sizeof(float));
            r->by[i] = d->y[r->perm[at + i]];
        }
        const int64_t xd[4] = {(int64_t)nb, 1, 8, 8};
        float loss;
        if (train_step(r->t, 4, xd, r->bx, nb, r->by, &loss)) return 1;
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
            printf("  %-15s epoch %2d/%d  train_loss %.4f  test_loss %.4f  test_accuracy %.4f\n", phase, e, epochs,
                   (double)loss, (double)tl, (double)ta);
        fflush(stdout);
    }
    return 0;
}

/* ------------------------------------------------------------------ reporting */

static int report(run *r, const char *phase, const char *save_as)
{
    pdc_model *m;
    TRY(pdc_trainer_export(r->t, &m), "export");
    float loss, acc;
    int rc = evaluate(r, r->test, &loss, &acc);
    if (!rc) rc = print_digits_phase(m, phase, r->test, loss, acc, r->steps, r->train_s, save_as);
    pdc_model_destroy(m);
    if (rc) return rc;
    printf("\n");
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
        st = pdc_trainer_admm_begin(r->t, pipeline, a, (float)admm_rho_milli / 1000.0f);
        for (int e = 1; e <= admm_epochs && !st; e++) {
            float loss, tl, ta;
            double res = 0.0;
            if (epoch(r, &loss)) {
                pdc_attrs_destroy(a);
                return 1;
            }
            st = pdc_trainer_admm_update(r->t, &res);
            if (!st && evaluate(r, r->test, &tl, &ta) == 0 && !r->quiet)
                printf("  %-15s epoch %2d/%d  train_loss %.4f  test_accuracy %.4f  admm_residual %.4f\n", "admm", e,
                       admm_epochs, (double)loss, (double)ta, res);
        }
        if (!st) st = pdc_trainer_admm_end(r->t);
    } else {
        st = pdc_trainer_prune(r->t, pipeline, a);
    }
    pdc_attrs_destroy(a);
    if (st) return fail(st, "prune");
    float tl, ta;
    if (evaluate(r, r->test, &tl, &ta)) return 1;
    if (!r->quiet) printf("  %-15s pruned with %s: test_accuracy %.4f before retraining\n", "", pipeline, (double)ta);
    return 0;
}

/* Prunes as planned for a budget of `fraction` x the dense model's predicted time on 1 thread, each choice
 * weighed on the last 256 training digits; profile: a latency profile (pdc calibrate -o) or NULL for this
 * host's. Without a calibrated profile the built-in constants may find no plan that meets the budget: the
 * fastest one is applied, and the line says so. */
static int prune_planned(run *r, double fraction, const char *profile)
{
    pdc_model *m;
    TRY(pdc_trainer_export(r->t, &m), "export");
    pdc_attrs *one = NULL;
    double dense_ms = 0, planned_ms = 0;
    pdc_status st = pdc_attrs_create(ctx, &one);
    if (!st) st = pdc_attrs_set_int(one, "threads", 1);
    if (!st && profile) st = pdc_attrs_set_string(one, "profile", profile);
    if (!st) st = pdc_model_predict(ctx, m, "cpu", one, &dense_ms, NULL);
    pdc_model_destroy(m);
    const size_t nc = r->train->n < 256 ? r->train->n : 256, at = r->train->n - nc;
    const int64_t xd[4] = {(int64_t)nc, 1, 8, 8}, yd[1] = {(int64_t)nc};
    pdc_tensor *x = NULL, *y = NULL;
    char *plan = NULL;
    if (!st) st = pdc_tensor_wrap(ctx, 4, xd, r->train->x + at * 64, &x);
    if (!st) st = pdc_tensor_wrap(ctx, 1, yd, r->train->y + at, &y);
    if (!st) st = pdc_trainer_plan(r->t, "cpu", fraction * dense_ms, one, x, y, &plan, &planned_ms);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_attrs_destroy(one);
    if (st) return fail(st, "plan");
    printf("  %-15s budget %.4f ms (%.0f%% of dense %.4f ms), predicted %.4f ms%s: %s\n", "", fraction * dense_ms,
           100 * fraction, dense_ms, planned_ms, planned_ms > fraction * dense_ms ? " (no plan meets it: the fastest)" : "",
           plan[0] ? plan : "(dense)");
    st = plan[0] ? pdc_trainer_prune(r->t, plan, NULL) : PDC_OK;
    pdc_string_free(plan);
    if (st) return fail(st, "prune");
    float tl, ta;
    if (evaluate(r, r->test, &tl, &ta)) return 1;
    if (!r->quiet) printf("  %-15s test_accuracy %.4f before retraining\n", "", (double)ta);
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = "test/data/digits.bin", *out = "build/demo", *threads = NULL;
    int epochs = 20, retrain = 10, admm_epochs = 12, with_fc = 1, admm = 0, quiet = 0;
    double plan_fraction = 0;
    const char *profile = NULL;
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
        else if (v && !strcmp(a, "--plan") && (plan_fraction = atof(argv[++i])) > 0 && plan_fraction <= 1) continue;
        else if (v && !strcmp(a, "--profile")) profile = argv[++i];
        else {
            fprintf(stderr, "usage: train_digits [--data digits.bin] [--out DIR] [--epochs N] [--retrain N] "
                            "[--admm-epochs N] [--seed S] [--threads T] [--no-fc] [--admm] [--plan F (0 < F <= 1)] "
                            "[--profile FILE] [--quiet]\n");
            return 2;
        }
    }
    dataset train = {0, NULL, NULL}, test = {0, NULL, NULL};
    if (load_digits("train_digits", data, &train, &test)) return 1;
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    char path[4096], ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s/dense.ckpt", out);
    run r;
    memset(&r, 0, sizeof r);
    r.train = &train;
    r.test = &test;
    r.batch = 32;
    r.quiet = quiet;
    r.bx = malloc(r.batch * 64 * sizeof(float));
    r.by = malloc(r.batch * sizeof(float));
    r.perm = malloc(train.n * sizeof *r.perm);
    pdc_model *m = NULL;
    int rc = !r.bx || !r.by || !r.perm;
    if (rc) fprintf(stderr, "train_digits: out of memory\n");
    if (!rc) rc = build_digits_cnn(&m);
    if (!rc) {
        pdc_status st = create_trainer(m, seed, "0.001", threads, &r.t);
        if (!st) st = pdc_trainer_init_weights(r.t);
        if (st) rc = fail(st, "trainer");
    }
    if (!rc) {
        char isa[32] = "?";
        pdc_trainer_get_option(r.t, "isa", isa, sizeof isa);
        printf("train_digits: %zu training and %zu test digits; Adam lr 0.001, batch 32, seed %llu, kernels %s\n",
               train.n, test.n, seed, isa);
        printf("phase dense: %d epochs\n", epochs);
        rc = train_epochs(&r, "dense", epochs);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/digits-dense.pdc", out);
        rc = report(&r, "dense", path);
    }
    if (!rc) {
        pdc_status st = pdc_trainer_save(r.t, ckpt);
        if (st) rc = fail(st, ckpt);
        else if (!quiet) printf("  checkpoint saved: %s\n", ckpt);
    }
    if (!rc) {
        printf("phase pattern_conn: 8 patterns of 4 + 50%% connectivity on conv1 and conv2, %d epochs of masked "
               "retraining\n", retrain);
        rc = prune(&r, 0, 0, 0);
    }
    if (!rc) rc = train_epochs(&r, "pattern_conn", retrain);
    snprintf(path, sizeof path, "%s/digits.pdc", out);
    if (!rc) rc = report(&r, "pattern_conn", with_fc ? NULL : path);
    if (!rc && with_fc) {
        printf("phase pattern_conn_fc: dense checkpoint reloaded; the same + 80%% of fc's 1x4 blocks, %d epochs\n",
               retrain);
        pdc_status st = pdc_trainer_load(r.t, ckpt);
        if (st) rc = fail(st, ckpt);
        if (!rc) rc = prune(&r, 1, 0, 0);
        if (!rc) rc = train_epochs(&r, "pattern_conn_fc", retrain);
        if (!rc) rc = report(&r, "pattern_conn_fc", path);
    }
    if (!rc && admm) {
        printf("phase admm: dense checkpoint reloaded; %d epochs of ADMM (rho 0.001) towards pattern_conn%s, hard "
               "pruning, %d epochs\n", admm_epochs, with_fc ? "_fc" : "", retrain);
        pdc_status st = pdc_trainer_load(r.t, ckpt);
        if (st) rc = fail(st, ckpt);
        if (!rc) rc = prune(&r, with_fc, 1, admm_epochs);
        if (!rc) rc = train_epochs(&r, "admm", retrain);
        if (!rc) rc = report(&r, "admm", NULL);
    }
    if (!rc && plan_fraction > 0) {
        printf("phase planned: dense checkpoint reloaded; pruning planned to %.0f%% of the dense latency with a "
               "calibration set, %d epochs\n", 100 * plan_fraction, retrain);
        pdc_status st = pdc_trainer_load(r.t, ckpt);
        if (st) rc = fail(st, ckpt);
        if (!rc) rc = prune_planned(&r, plan_fraction, profile);
        if (!rc) rc = train_epochs(&r, "planned", retrain);
        if (!rc) rc = report(&r, "planned", NULL);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/digit0.bin", out);
        rc = write_digit("train_digits", &test, path);
        if (!rc && !quiet)
            printf("train_digits: wrote %s/digits.pdc (the pruned, retrained model), %s/digits-dense.pdc, %s and %s "
                   "(test digit #0, label %d)\n", out, out, ckpt, path, (int)test.y[0]);
    }
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
