/*
 * search_digits.c - hyperparameters of pruning-retraining found by successive halving (pdc_search, the
 * engine pdc tune uses), with pdc's public API only, on the digits CNN of train_digits.c.
 *
 * The dense net is trained as the demo trains it (Adam 1e-3, batch 32, 20 epochs, seed 1) on the
 * training set less its last 20%, which is the validation set; the test set is touched only by the
 * final report. Then 16 configurations of the demo's pruning (8 patterns of 4 + 50% connectivity on
 * conv1 and conv2, 80% of fc's 1x4 blocks) are retrained from that dense net:
 *
 *   learning rate 3e-4, 1e-3, 3e-3, 1e-2  x  optimizer adam, sgd (momentum 0.9)
 *   x  pruning at once (masked retraining) or after ADMM (rho 1e-3, the first half of the first rung)
 *
 * and the retraining epochs are the search's effort: rung r asks a configuration for `effort` epochs in
 * all, so the 16 get 2 epochs, the best 8 go on to 4, the best 4 to 8, the best 2 to 16; the signal is
 * the validation accuracy. A survivor continues from its checkpoint (pdc_trainer_save / _load: weights,
 * masks, optimizer state), it does not start again.
 *
 * Then, for comparison, the demo's hand-set recipe (adam 1e-3, pruning at once, 10 epochs) on the same
 * split, and (unless --no-full) every configuration trained fully (16 epochs each): the best accuracy
 * and the total training time of each way. Last, as a search is used: the winning configuration and
 * the hand-set recipe each retrained from the dense net on the whole training set (the validation
 * digits too), with 3 retraining seeds, their mean test accuracy - one 450-digit test of one run
 * moves by a point between seeds. Prints one key=value line per result for scripts.
 *
 * usage: search_digits [--data digits.bin] [--out DIR] [--budget EPOCHS] [--seed S] [--threads T] [--no-full]
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc.h"

#define N_CONFIGS 16
#define REFITS 3 /* retraining seeds of the final comparison */

static pdc_context *ctx;

static int fail(pdc_status st, const char *what)
{
    const char *msg = pdc_context_last_error(ctx);
    fprintf(stderr, "search_digits: %s: %s (%s)\n", what, *msg ? msg : "failed", pdc_status_string(st));
    return 1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct dataset {
    size_t n;
    float *x, *y; /* n x 64 pixels / 16; n labels */
} dataset;

/* digits.bin (test/data/README.md): "DGT1", u32 n_train, n_test, 8, 8, pixels, labels. */
static int load_digits(const char *path, dataset *train, dataset *test)
{
    FILE *f = fopen(path, "rb");
    unsigned char h[20];
    if (!f || fread(h, 1, 20, f) != 20 || memcmp(h, "DGT1", 4)) {
        fprintf(stderr, "search_digits: %s: %s\n", path, f ? "not a digits file" : strerror(errno));
        if (f) fclose(f);
        return 1;
    }
    size_t nt = (size_t)h[4] | (size_t)h[5] << 8 | (size_t)h[6] << 16 | (size_t)h[7] << 24;
    size_t ne = (size_t)h[8] | (size_t)h[9] << 8 | (size_t)h[10] << 16 | (size_t)h[11] << 24;
    if (nt + ne > 1000000 || !nt || !ne) {
        fprintf(stderr, "search_digits: %s: bad sizes\n", path);
        fclose(f);
        return 1;
    }
    unsigned char *px = malloc((nt + ne) * 65);
    int rc = !px || fread(px, 1, (nt + ne) * 65, f) != (nt + ne) * 65;
    fclose(f);
    if (rc) {
        fprintf(stderr, "search_digits: %s: truncated\n", path);
        free(px);
        return 1;
    }
    dataset *d[2] = {train, test};
    for (int s = 0; s < 2; s++) {
        d[s]->n = s ? ne : nt;
        d[s]->x = malloc(d[s]->n * 64 * sizeof(float));
        d[s]->y = malloc(d[s]->n * sizeof(float));
        if (!d[s]->x || !d[s]->y) rc = 1;
        for (size_t i = 0; i < d[s]->n && !rc; i++) {
            size_t k = s ? nt + i : i;
            for (int p = 0; p < 64; p++) d[s]->x[i * 64 + (size_t)p] = (float)px[k * 64 + (size_t)p] / 16.0f;
            d[s]->y[i] = (float)px[(nt + ne) * 64 + k];
        }
    }
    free(px);
    return rc;
}

/* ------------------------------------------------------------------ training (as train_digits.c) */

static dataset train, valid, test;
static float bx[32 * 64], by[32];
static size_t *perm;
static double train_s; /* seconds spent in training steps, all of them */

static int epoch(pdc_trainer *t)
{
    pdc_status st = pdc_trainer_shuffle(t, train.n, perm);
    double t0 = now();
    for (size_t at = 0; at < train.n && !st; at += 32) {
        size_t nb = train.n - at < 32 ? train.n - at : 32;
        for (size_t i = 0; i < nb; i++) {
            memcpy(bx + i * 64, train.x + perm[at + i] * 64, 64 * sizeof(float));
            by[i] = train.y[perm[at + i]];
        }
        const int64_t xd[4] = {(int64_t)nb, 1, 8, 8}, yd[1] = {(int64_t)nb};
        pdc_tensor *x = NULL, *y = NULL;
        float loss;
        st = pdc_tensor_wrap(ctx, 4, xd, bx, &x);
        if (!st) st = pdc_tensor_wrap(ctx, 1, yd, by, &y);
        if (!st) st = pdc_trainer_step(t, x, y, &loss);
        pdc_tensor_destroy(x);
        pdc_tensor_destroy(y);
    }
    train_s += now() - t0;
    return st ? fail(st, "training step") : 0;
}

static int accuracy(pdc_trainer *t, const dataset *d, float *acc)
{
    const int64_t xd[4] = {(int64_t)d->n, 1, 8, 8}, yd[1] = {(int64_t)d->n};
    pdc_tensor *x = NULL, *y = NULL;
    float loss;
    pdc_status st = pdc_tensor_wrap(ctx, 4, xd, d->x, &x);
    if (!st) st = pdc_tensor_wrap(ctx, 1, yd, d->y, &y);
    if (!st) st = pdc_trainer_evaluate(t, x, y, &loss, acc);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    return st ? fail(st, "evaluate") : 0;
}

static pdc_model *build_model(void)
{
    static const int64_t image[4] = {1, 1, 8, 8}, c1w[4] = {16, 1, 3, 3}, c1b[1] = {16}, c2w[4] = {32, 16, 3, 3},
                         c2b[1] = {32}, fw[2] = {10, 2048}, fb[1] = {10}, pads[4] = {1, 1, 1, 1};
    static float zeros[10 * 2048];
    static const char *const names[] = {"conv1.w", "conv1.b", "conv2.w", "conv2.b", "fc.w", "fc.b"};
    const int64_t *dims[] = {c1w, c1b, c2w, c2b, fw, fb};
    const size_t ranks[] = {4, 1, 4, 1, 2, 1};
    pdc_model *m = NULL;
    pdc_attrs *a = NULL;
    pdc_status st = pdc_model_create(ctx, "digits_cnn", &m);
    if (!st) st = pdc_model_add_input(m, "image", 4, image);
    for (int i = 0; i < 6 && !st; i++) st = pdc_model_add_constant(m, names[i], ranks[i], dims[i], zeros);
    if (!st) st = pdc_attrs_create(ctx, &a);
    if (!st) st = pdc_attrs_set_ints(a, "pads", 4, pads);
    const char *c1in[] = {"image", "conv1.w", "conv1.b"}, *c1o[] = {"c1"}, *r1in[] = {"c1"}, *r1o[] = {"r1"};
    const char *c2in[] = {"r1", "conv2.w", "conv2.b"}, *c2o[] = {"c2"}, *r2in[] = {"c2"}, *r2o[] = {"r2"};
    const char *fin[] = {"r2"}, *fo[] = {"flat"}, *gin[] = {"flat", "fc.w", "fc.b"}, *go[] = {"logits"};
    const char *sin[] = {"logits"}, *so[] = {"probs"};
    if (!st) st = pdc_model_add_layer(m, "conv1", "conv", 3, c1in, 1, c1o, a);
    if (!st) st = pdc_model_add_layer(m, "relu1", "relu", 1, r1in, 1, r1o, NULL);
    if (!st) st = pdc_model_add_layer(m, "conv2", "conv", 3, c2in, 1, c2o, a);
    if (!st) st = pdc_model_add_layer(m, "relu2", "relu", 1, r2in, 1, r2o, NULL);
    if (!st) st = pdc_model_add_layer(m, "flatten", "flatten", 1, fin, 1, fo, NULL);
    if (!st) st = pdc_model_add_layer(m, "fc", "fc", 3, gin, 1, go, NULL);
    if (!st) st = pdc_model_add_layer(m, "softmax", "softmax", 1, sin, 1, so, NULL);
    if (!st) st = pdc_model_mark_output(m, "probs");
    pdc_attrs_destroy(a);
    if (st) {
        fail(st, "build model");
        pdc_model_destroy(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------------ the configurations */

typedef struct config {
    double lr;
    const char *optimizer;
    double rho;          /* 0: prune at once; else ADMM with this rho first */
    int epochs;          /* retraining epochs done (its checkpoint holds them) */
    double valid_acc;
} config;

static config cfg[N_CONFIGS];
static pdc_model *dense;      /* the trained dense net */
static const char *out_dir;
static const char *threads;
static uint64_t seed = 1;
static int64_t epochs_run;    /* retraining epochs, all configurations */

static pdc_status prune_options(pdc_attrs **out)
{
    pdc_attrs *a = NULL;
    pdc_status st = pdc_attrs_create(ctx, &a);
    if (!st) st = pdc_attrs_set_int(a, "patterns", 8);
    if (!st) st = pdc_attrs_set_int(a, "pattern_size", 4);
    if (!st) st = pdc_attrs_set_float(a, "connectivity", 0.5f);
    if (!st) st = pdc_attrs_set_string(a, "block", "1x4");
    if (!st) st = pdc_attrs_set_float(a, "block_rate", 0.8f);
    if (!st) st = pdc_attrs_set_string(a, "layers", "conv1,conv2,fc");
    if (st) pdc_attrs_destroy(a);
    else *out = a;
    return st;
}
#define PIPELINE "prune-pattern,prune-connectivity,prune-block"

/* A trainer for configuration c from the dense net: its optimizer, rate and seed set, pruned (at once,
 * or after `admm_epochs` epochs of ADMM). */
static int start(const config *c, int admm_epochs, uint64_t train_seed, pdc_trainer **out)
{
    pdc_trainer *t = NULL;
    pdc_attrs *a = NULL;
    char v[32], s[32];
    snprintf(v, sizeof v, "%g", c->lr);
    snprintf(s, sizeof s, "%llu", (unsigned long long)train_seed);
    pdc_status st = pdc_trainer_create(ctx, dense, &t);
    if (!st) st = pdc_trainer_set_option(t, "seed", s);
    if (!st) st = pdc_trainer_set_option(t, "batch", "32");
    if (!st) st = pdc_trainer_set_option(t, "optimizer", c->optimizer);
    if (!st) st = pdc_trainer_set_option(t, "lr", v);
    if (!st && !strcmp(c->optimizer, "sgd")) st = pdc_trainer_set_option(t, "momentum", "0.9");
    if (!st && threads) st = pdc_trainer_set_option(t, "threads", threads);
    if (!st) st = prune_options(&a);
    if (!st && c->rho > 0 && admm_epochs > 0) {
        st = pdc_trainer_admm_begin(t, PIPELINE, a, (float)c->rho);
        for (int e = 0; e < admm_epochs && !st; e++) {
            if (epoch(t)) st = PDC_ERR_INTERNAL;
            double res;
            if (!st) st = pdc_trainer_admm_update(t, &res);
        }
        if (!st) st = pdc_trainer_admm_end(t);
    } else if (!st) {
        st = pdc_trainer_prune(t, PIPELINE, a);
    }
    pdc_attrs_destroy(a);
    if (st) {
        pdc_trainer_destroy(t);
        return fail(st, "start a configuration");
    }
    *out = t;
    return 0;
}

static void ckpt_path(size_t i, char *buf, size_t cap) { snprintf(buf, cap, "%s/search-%02zu.ckpt", out_dir, i); }

/* pdc_search's measurement: configuration i retrained to `effort` epochs in all (continuing from its
 * checkpoint), cost 1 - validation accuracy. */
static pdc_status measure(void *user, size_t i, int effort, double *cost)
{
    (void)user;
    config *c = &cfg[i];
    pdc_trainer *t = NULL;
    char path[4096];
    ckpt_path(i, path, sizeof path);
    int remaining = effort - c->epochs;
    if (c->epochs == 0) {
        int admm = c->rho > 0 ? (effort + 1) / 2 : 0; /* ADMM takes the first half of the first rung */
        if (start(c, admm, seed, &t)) return PDC_ERR_INTERNAL;
        remaining -= admm;
        epochs_run += admm;
    } else {
        pdc_status st = pdc_trainer_create(ctx, dense, &t);
        if (!st) st = pdc_trainer_load(t, path);
        if (st) {
            pdc_trainer_destroy(t);
            return fail(st, path), st;
        }
    }
    for (int e = 0; e < remaining; e++)
        if (epoch(t)) {
            pdc_trainer_destroy(t);
            return PDC_ERR_INTERNAL;
        }
    epochs_run += remaining > 0 ? remaining : 0;
    c->epochs = effort;
    float acc = 0;
    pdc_status st = accuracy(t, &valid, &acc) ? PDC_ERR_INTERNAL : pdc_trainer_save(t, path);
    pdc_trainer_destroy(t);
    if (st) return st;
    c->valid_acc = acc;
    *cost = 1.0 - acc;
    printf("  config %2zu (%-4s lr %-6g %s) %2d epochs  validation accuracy %.4f\n", i, c->optimizer, c->lr,
           c->rho > 0 ? "admm" : "at once", effort, (double)acc);
    fflush(stdout);
    return PDC_OK;
}

/* Configuration c retrained from scratch for `epochs` epochs with train_seed; its test accuracy, and
 * its validation accuracy unless valid_acc is NULL. */
static int train_fully(const config *c, int epochs, uint64_t train_seed, float *test_acc, float *valid_acc)
{
    pdc_trainer *t;
    int admm = c->rho > 0 ? 1 : 0; /* as the search's first rung at 2 epochs: one epoch of ADMM */
    if (start(c, admm, train_seed, &t)) return 1;
    int rc = 0;
    for (int e = admm; e < epochs && !rc; e++) rc = epoch(t);
    if (!rc) rc = accuracy(t, &test, test_acc);
    if (!rc && valid_acc) rc = accuracy(t, &valid, valid_acc);
    pdc_trainer_destroy(t);
    return rc;
}

int main(int argc, char **argv)
{
    const char *data = "test/data/digits.bin";
    int64_t budget = 128;
    int full = 1;
    out_dir = "build/search";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = argv[++i];
        else if (!strcmp(argv[i], "--no-full")) full = 0;
        else {
            fprintf(stderr, "usage: search_digits [--data digits.bin] [--out DIR] [--budget EPOCHS] [--seed S] "
                            "[--threads T] [--no-full]\n");
            return 2;
        }
    }
    if (load_digits(data, &train, &test)) return 1;
    /* the last 20% of the training set validates */
    valid.n = train.n / 5;
    train.n -= valid.n;
    valid.x = train.x + train.n * 64;
    valid.y = train.y + train.n;
    perm = malloc((train.n + valid.n) * sizeof *perm); /* the refit trains on both */
    if (!perm || pdc_context_create(&ctx) != PDC_OK) return 1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", out_dir);
    if (system(cmd)) return 1;

    /* the dense net, as the demo trains it */
    pdc_model *m = build_model();
    pdc_trainer *t = NULL;
    char s[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
    pdc_status st = m ? pdc_trainer_create(ctx, m, &t) : PDC_ERR_INTERNAL;
    if (!st) st = pdc_trainer_set_option(t, "seed", s);
    if (!st) st = pdc_trainer_set_option(t, "batch", "32");
    if (!st && threads) st = pdc_trainer_set_option(t, "threads", threads);
    if (!st) st = pdc_trainer_init_weights(t);
    for (int e = 0; e < 20 && !st; e++)
        if (epoch(t)) st = PDC_ERR_INTERNAL;
    float acc = 0;
    if (!st && accuracy(t, &test, &acc)) st = PDC_ERR_INTERNAL;
    if (!st) st = pdc_trainer_export(t, &dense);
    pdc_trainer_destroy(t);
    pdc_model_destroy(m);
    if (st) return fail(st, "dense training");
    printf("dense: 20 epochs on %zu digits (%zu validate), test accuracy %.4f\n", train.n, valid.n, (double)acc);

    static const double lrs[4] = {3e-4, 1e-3, 3e-3, 1e-2};
    for (int i = 0; i < N_CONFIGS; i++)
        cfg[i] = (config){lrs[i % 4], i / 4 % 2 ? "sgd" : "adam", i / 8 ? 1e-3 : 0.0, 0, 0.0};

    /* the search */
    printf("search: successive halving over %d configurations, budget %lld epochs\n", N_CONFIGS, (long long)budget);
    pdc_attrs *o = NULL;
    size_t best = 0;
    double best_cost = 0;
    train_s = 0;
    double t0 = now();
    st = pdc_attrs_create(ctx, &o);
    if (!st) st = pdc_attrs_set_int(o, "budget", budget);
    if (!st) st = pdc_attrs_set_int(o, "min_effort", 2);
    if (!st) st = pdc_search(ctx, N_CONFIGS, o, measure, NULL, &best, &best_cost);
    pdc_attrs_destroy(o);
    if (st) return fail(st, "search");
    double search_s = now() - t0, search_train_s = train_s;
    const config *b = &cfg[best];
    /* the winner's test accuracy, from its checkpoint */
    char path[4096];
    ckpt_path(best, path, sizeof path);
    float best_test = 0;
    st = pdc_trainer_create(ctx, dense, &t);
    if (!st) st = pdc_trainer_load(t, path);
    if (!st && accuracy(t, &test, &best_test)) st = PDC_ERR_INTERNAL;
    pdc_trainer_destroy(t);
    if (st) return fail(st, path);
    printf("search=best config=%zu optimizer=%s lr=%g pruning=%s epochs=%d valid_accuracy=%.4f test_accuracy=%.4f "
           "epochs_run=%lld train_s=%.2f total_s=%.2f\n",
           best, b->optimizer, b->lr, b->rho > 0 ? "admm" : "at_once", b->epochs, 1.0 - best_cost, (double)best_test,
           (long long)epochs_run, search_train_s, search_s);

    /* the demo's hand-set recipe on the same split */
    const config hand = {1e-3, "adam", 0.0, 0, 0.0};
    float hand_test = 0, hand_valid = 0;
    train_s = 0;
    if (train_fully(&hand, 10, seed, &hand_test, &hand_valid)) return 1;
    printf("search=hand_set optimizer=adam lr=0.001 pruning=at_once epochs=10 valid_accuracy=%.4f test_accuracy=%.4f "
           "train_s=%.2f\n", (double)hand_valid, (double)hand_test, train_s);

    if (full) {
        /* every configuration trained as long as the search's winner was */
        int epochs = b->epochs;
        float top = -1, top_test = 0;
        size_t top_i = 0;
        train_s = 0;
        t0 = now();
        for (size_t i = 0; i < N_CONFIGS; i++) {
            float ta, va;
            if (train_fully(&cfg[i], epochs, seed, &ta, &va)) return 1;
            if (va > top) top = va, top_i = i, top_test = ta;
        }
        printf("search=all_full configs=%d epochs=%d best_config=%zu valid_accuracy=%.4f test_accuracy=%.4f "
               "epochs_run=%d train_s=%.2f total_s=%.2f\n",
               N_CONFIGS, epochs, top_i, (double)top, (double)top_test, N_CONFIGS * epochs, train_s, now() - t0);
    }
    /* the winner and the hand-set recipe as they would be used: retrained on the whole training set
     * (validation included, so no validation accuracy), 3 retraining seeds each */
    train.n += valid.n;
    float refit[2][REFITS];
    double mean[2] = {0, 0};
    train_s = 0;
    for (int r = 0; r < REFITS; r++) {
        if (train_fully(b, b->epochs, seed + 1000 * (uint64_t)r, &refit[0][r], NULL) ||
            train_fully(&hand, 10, seed + 1000 * (uint64_t)r, &refit[1][r], NULL))
            return 1;
        mean[0] += refit[0][r] / (double)REFITS;
        mean[1] += refit[1][r] / (double)REFITS;
    }
    train.n -= valid.n;
    printf("search=refit digits=%zu seeds=%d winner_test=%.4f hand_set_test=%.4f winner_tests=", train.n + valid.n,
           REFITS, mean[0], mean[1]);
    for (int w = 0; w < 2; w++)
        for (int r = 0; r < REFITS; r++)
            printf("%.4f%s", (double)refit[w][r], r + 1 < REFITS ? "," : w ? "" : " hand_set_tests=");
    printf(" train_s=%.2f\n", train_s);
    pdc_model_destroy(dense);
    pdc_context_destroy(ctx);
    free(perm);
    free(train.x);
    free(train.y);
    free(test.x);
    free(test.y);
    return 0;
}
