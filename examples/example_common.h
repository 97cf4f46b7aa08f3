/*
 * example_common.h - what the training examples (train_digits.c, train_digits_mpi.c, train_seq.c,
 * train_clips3d.c) share: the error macro, the clock, the digits.bin reader, the kept-weights count, the
 * batch-1 latency and, for the two digits CNN demos, their model and test-digit file. Public API only.
 *
 * Include it once, then define fail(), which reports on stderr with the example's name and returns 1 (the
 * functions here return fail(status, what) on an error). Everything is static inline: an example that uses
 * only some of it still compiles with -Werror.
 */
#ifndef PDC_EXAMPLE_COMMON_H
#define PDC_EXAMPLE_COMMON_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc.h"

static pdc_context *ctx;

static int fail(pdc_status st, const char *what);

#define TRY(call, what)                                                                                              \
    do {                                                                                                             \
        pdc_status st_ = (call);                                                                                     \
        if (st_ != PDC_OK) return fail(st_, what);                                                                   \
    } while (0)

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ data */

typedef struct dataset {
    size_t n;
    float *x; /* n samples in the example's layout; as read, n x 64: image rows, pixels / 16 */
    float *y; /* n labels as floats */
} dataset;

static inline uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Reads digits.bin (format in test/data/README.md) into a training and a test set of 8x8 images; errors on
 * stderr, prefixed with prog. */
static inline int load_digits(const char *prog, const char *path, dataset *train, dataset *test)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return 1;
    }
    unsigned char hdr[20];
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, "DGT1", 4) != 0) {
        fclose(f);
        fprintf(stderr, "%s: %s: not a digits file (magic DGT1)\n", prog, path);
        return 1;
    }
    const size_t n_train = le32(hdr + 4), n_test = le32(hdr + 8), total = n_train + n_test;
    if (le32(hdr + 12) != 8 || le32(hdr + 16) != 8 || n_train == 0 || n_test == 0 || total > 1000000) {
        fclose(f);
        fprintf(stderr, "%s: %s: expected 8x8 images and non-empty sets\n", prog, path);
        return 1;
    }
    unsigned char *px = malloc(total * 64), *lab = malloc(total);
    train->x = malloc(n_train * 64 * sizeof(float));
    train->y = malloc(n_train * sizeof(float));
    test->x = malloc(n_test * 64 * sizeof(float));
    test->y = malloc(n_test * sizeof(float));
    int rc = 0;
    if (!px || !lab || !train->x || !train->y || !test->x || !test->y) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    } else if (fread(px, 1, total * 64, f) != total * 64 || fread(lab, 1, total, f) != total) {
        fprintf(stderr, "%s: %s: truncated\n", prog, path);
        rc = 1;
    }
    for (size_t i = 0; i < total && !rc; i++) {
        dataset *d = i < n_train ? train : test;
        const size_t j = i < n_train ? i : i - n_train;
        if (lab[i] > 9) {
            fprintf(stderr, "%s: %s: sample %zu has label %u\n", prog, path, i, lab[i]);
            rc = 1;
            break;
        }
        for (int k = 0; k < 64; k++) d->x[j * 64 + (size_t)k] = (float)px[i * 64 + (size_t)k] / 16.0f;
        d->y[j] = (float)lab[i];
    }
    train->n = n_train;
    test->n = n_test;
    free(px);
    free(lab);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------ training */

/* A trainer for m as the examples train: Adam at learning rate lr, batch 32, seed; threads unless NULL. The
 * caller sets what else it needs, then draws the initial weights. */
static inline pdc_status create_trainer(pdc_model *m, unsigned long long seed, const char *lr, const char *threads,
                                        pdc_trainer **t)
{
    char seed_s[32];
    snprintf(seed_s, sizeof seed_s, "%llu", seed);
    pdc_status st = pdc_trainer_create(ctx, m, t);
    if (!st) st = pdc_trainer_set_option(*t, "seed", seed_s);
    if (!st) st = pdc_trainer_set_option(*t, "optimizer", "adam");
    if (!st) st = pdc_trainer_set_option(*t, "lr", lr);
    if (!st) st = pdc_trainer_set_option(*t, "batch", "32");
    if (!st && threads) st = pdc_trainer_set_option(*t, "threads", threads);
    return st;
}

/* One training step on the nb samples x (rank dims xd) with labels y; nb 0 (a process without a share of the
 * batch, train_digits_mpi) steps with no tensors. */
static inline int train_step(pdc_trainer *t, size_t rank, const int64_t *xd, float *x, size_t nb, float *y,
                             float *loss)
{
    const int64_t yd[1] = {(int64_t)nb};
    pdc_tensor *tx = NULL, *ty = NULL;
    pdc_status st = PDC_OK;
    if (nb) {
        TRY(pdc_tensor_wrap(ctx, rank, xd, x, &tx), "wrap");
        st = pdc_tensor_wrap(ctx, 1, yd, y, &ty);
    }
    *loss = 0.0f;
    if (!st) st = pdc_trainer_step(t, tx, ty, loss);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    return st ? fail(st, "step") : 0;
}

/* The trainer's loss and accuracy on the whole set d, its samples laid out as xd (rank dims). */
static inline int evaluate_set(pdc_trainer *t, size_t rank, const int64_t *xd, const dataset *d, float *loss,
                               float *acc)
{
    const int64_t yd[1] = {(int64_t)d->n};
    pdc_tensor *x, *y = NULL;
    TRY(pdc_tensor_wrap(ctx, rank, xd, d->x, &x), "wrap");
    pdc_status st = pdc_tensor_wrap(ctx, 1, yd, d->y, &y);
    if (!st) st = pdc_trainer_evaluate(t, x, y, loss, acc);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    return st ? fail(st, "evaluate") : 0;
}

static inline void free_dataset(dataset *d)
{
    free(d->x);
    free(d->y);
}

/* ------------------------------------------------------------------ reporting */

/* All weights and kept weights (biases included) of m's layers. */
static inline int count_weights(const pdc_model *m, int64_t *weights, int64_t *kept)
{
    *weights = *kept = 0;
    size_t nl = 0;
    pdc_status st = pdc_model_num_layers(m, &nl);
    for (size_t i = 0; i < nl && !st; i++) {
        int64_t w, k;
        st = pdc_model_layer_stat(m, i, PDC_STAT_WEIGHTS, &w);
        if (!st) st = pdc_model_layer_stat(m, i, PDC_STAT_KEPT_WEIGHTS, &k);
        *weights += w;
        *kept += k;
    }
    return st ? fail(st, "layer statistics") : 0;
}

/* Median wall time in ms of one inference of m (input: in_rank dims, batch 1; output [1, classes]) compiled for
 * the first target of the NULL-terminated list that this build has; *target_out: that target. */
static inline int latency(const pdc_model *m, const char *const *targets, size_t in_rank, const int64_t *dims,
                          const float *input, int64_t classes, double *ms, const char **target_out)
{
    pdc_program *p = NULL;
    pdc_status st = PDC_ERR_UNSUPPORTED;
    for (size_t i = 0; targets[i] && st; i++) {
        st = pdc_compile(ctx, m, targets[i], &p);
        if (!st) *target_out = targets[i];
        else if (st != PDC_ERR_UNSUPPORTED && st != PDC_ERR_UNKNOWN_TARGET) return fail(st, "compile");
    }
    if (st) return fail(st, "compile");
    const int64_t yd[2] = {1, classes};
    float *out = malloc((size_t)classes * sizeof *out);
    pdc_tensor *x = NULL, *y = NULL;
    st = out ? pdc_tensor_wrap(ctx, in_rank, dims, (float *)(uintptr_t)input, &x) : PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = pdc_tensor_wrap(ctx, 2, yd, out, &y);
    enum { RUNS = 51 };
    double t[RUNS];
    for (int i = 0; i < RUNS + 5 && !st; i++) {
        const double t0 = now();
        st = pdc_program_run(p, 1, &x, 1, &y);
        if (i >= 5) t[i - 5] = (now() - t0) * 1e3;
    }
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
    free(out);
    if (st) return fail(st, "run");
    for (int i = 1; i < RUNS; i++) /* insertion sort, then the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            const double s = t[j];
            t[j] = t[j - 1];
            t[j - 1] = s;
        }
    *ms = t[RUNS / 2];
    return 0;
}

/* ------------------------------------------------------------------ the digits CNN (train_digits*.c) */

static inline int build_digits_cnn(pdc_model **out)
{
    pdc_model *m;
    TRY(pdc_model_create(ctx, "digits_cnn", &m), "create model");
    *out = m;
    static const int64_t image[4] = {1, 1, 8, 8}, c1w[4] = {16, 1, 3, 3}, c1b[1] = {16}, c2w[4] = {32, 16, 3, 3},
                         c2b[1] = {32}, fw[2] = {10, 2048}, fb[1] = {10}, pads[4] = {1, 1, 1, 1};
    TRY(pdc_model_add_input(m, "image", 4, image), "input");
    /* zeros: pdc_trainer_init_weights draws the initial weights */
    static float zeros[10 * 2048];
    TRY(pdc_model_add_constant(m, "conv1.w", 4, c1w, zeros), "conv1.w");
    TRY(pdc_model_add_constant(m, "conv1.b", 1, c1b, zeros), "conv1.b");
    TRY(pdc_model_add_constant(m, "conv2.w", 4, c2w, zeros), "conv2.w");
    TRY(pdc_model_add_constant(m, "conv2.b", 1, c2b, zeros), "conv2.b");
    TRY(pdc_model_add_constant(m, "fc.w", 2, fw, zeros), "fc.w");
    TRY(pdc_model_add_constant(m, "fc.b", 1, fb, zeros), "fc.b");
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    pdc_status st = pdc_attrs_set_ints(a, "pads", 4, pads);
    const char *c1in[] = {"image", "conv1.w", "conv1.b"}, *c1out[] = {"conv1.out"};
    const char *r1in[] = {"conv1.out"}, *r1out[] = {"relu1.out"};
    const char *c2in[] = {"relu1.out", "conv2.w", "conv2.b"}, *c2out[] = {"conv2.out"};
    const char *r2in[] = {"conv2.out"}, *r2out[] = {"relu2.out"};
    const char *fin[] = {"relu2.out"}, *fout[] = {"flat"};
    const char *gin[] = {"flat", "fc.w", "fc.b"}, *gout[] = {"logits"};
    const char *sin[] = {"logits"}, *sout[] = {"probs"};
    if (!st) st = pdc_model_add_layer(m, "conv1", "conv", 3, c1in, 1, c1out, a);
    if (!st) st = pdc_model_add_layer(m, "relu1", "relu", 1, r1in, 1, r1out, NULL);
    if (!st) st = pdc_model_add_layer(m, "conv2", "conv", 3, c2in, 1, c2out, a);
    if (!st) st = pdc_model_add_layer(m, "relu2", "relu", 1, r2in, 1, r2out, NULL);
    if (!st) st = pdc_model_add_layer(m, "flatten", "flatten", 1, fin, 1, fout, NULL);
    if (!st) st = pdc_model_add_layer(m, "fc", "fc", 3, gin, 1, gout, NULL);
    if (!st) st = pdc_model_add_layer(m, "softmax", "softmax", 1, sin, 1, sout, NULL);
    if (!st) st = pdc_model_mark_output(m, "probs");
    pdc_attrs_destroy(a);
    if (st) return fail(st, "build model");
    return 0;
}

/* The demo's pruning (docs/passes.md): 8 patterns of 4 entries + 50% connectivity on conv1 and conv2, and with
 * with_fc 80% of the fc's 1x4 blocks; *pipeline: the passes. */
static inline int digits_prune_options(int with_fc, pdc_attrs **out, const char **pipeline)
{
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    pdc_status st = pdc_attrs_set_int(a, "patterns", 8);
    if (!st) st = pdc_attrs_set_int(a, "pattern_size", 4);
    if (!st) st = pdc_attrs_set_float(a, "connectivity", 0.5f);
    if (!st && with_fc) st = pdc_attrs_set_string(a, "block", "1x4");
    if (!st && with_fc) st = pdc_attrs_set_float(a, "block_rate", 0.8f);
    /* The layers are named, and a named layer is pruned whatever the passes' safe defaults say: conv1
     * reads the image, so by default it would stay dense as a stem. Here it is pruned on purpose - the
     * digits CNN is tiny (conv1 has 144 weights of 25,290) and retraining recovers the accuracy - so
     * that the demo shows pattern pruning on both convs. */
    if (!st) st = pdc_attrs_set_string(a, "layers", with_fc ? "conv1,conv2,fc" : "conv1,conv2");
    *pipeline = with_fc ? "prune-pattern,prune-connectivity,prune-block" : "prune-pattern,prune-connectivity";
    if (st) {
        pdc_attrs_destroy(a);
        return fail(st, "pruning options");
    }
    *out = a;
    return 0;
}

/* A digits demo's phase line up to step_ms, not ended (train_digits_mpi adds fields): test loss and accuracy,
 * kept weights, batch-1 latency on the best target and on ref of m, the exported model, which is saved to save_as
 * unless NULL; steps and train_s: the phase's training steps and time. */
static inline int print_digits_phase(const pdc_model *m, const char *phase, const dataset *test, float loss,
                                     float acc, size_t steps, double train_s, const char *save_as)
{
    int64_t weights = 0, kept = 0;
    pdc_status st;
    double ms = 0.0, ref_ms = 0.0;
    const char *target = "?", *ref = "?";
    static const char *const best[] = {"cpu", "ref", NULL}, *const ref_only[] = {"ref", NULL};
    static const int64_t image[4] = {1, 1, 8, 8};
    int rc = count_weights(m, &weights, &kept);
    if (!rc) rc = latency(m, best, 4, image, test->x, 10, &ms, &target);
    if (!rc) rc = latency(m, ref_only, 4, image, test->x, 10, &ref_ms, &ref);
    if (!rc && save_as && (st = pdc_model_save(m, save_as))) rc = fail(st, save_as);
    if (rc) return rc;
    printf("phase=%s test_accuracy=%.4f params=%lld compression=%.2f latency_ms=%.4f target=%s latency_ref_ms=%.4f "
           "test_loss=%.4f steps=%zu train_s=%.2f step_ms=%.3f",
           phase, (double)acc, (long long)kept, (double)weights / (double)(kept ? kept : 1), ms, target, ref_ms,
           (double)loss, steps, train_s, steps ? train_s * 1e3 / (double)steps : 0.0);
    return 0;
}

/* Test digit #0 as raw little-endian float32 [1,1,8,8] (pixels / 16), for `pdc run`. */
static inline int write_digit(const char *prog, const dataset *test, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return 1;
    }
    for (int i = 0; i < 64; i++) {
        uint32_t u;
        memcpy(&u, &test->x[i], 4);
        const unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                                    (unsigned char)(u >> 24)};
        fwrite(b, 1, 4, f);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: %s: write error\n", prog, path);
        return 1;
    }
    return 0;
}

#endif
