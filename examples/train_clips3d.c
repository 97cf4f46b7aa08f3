/*
 * train_clips3d.c - a 3-D CNN trained, pruned with kernel-group sparsity (RT3D's KGS) and retrained from a
 * host program, with pdc's public API only.
 *
 * The task: moving-digit clips. Each clip is 8 frames of 8x8 pixels: one of the digits of
 * test/data/digits.bin moving by half a pixel a frame along (vx, vy) in {-1, 0, 1}^2, drawn per clip from a
 * fixed seed (frame t shifted by (vx*t/2, vy*t/2) pixels, what leaves the frame is gone); the label is the
 * digit. Training clips come from the training digits, test clips from the test digits.
 *
 *   clip [N,1,8,8,8] -> conv3d 3x3x3 1->8 pad 1 -> relu -> maxpool 2x2x2
 *                    -> conv3d 3x3x3 8->16 pad 1 -> relu -> maxpool 2x2x2 -> flatten [N,128]
 *                    -> fc 128->10 -> softmax
 *
 * Phases (Adam lr 2e-3, batch 32, cross-entropy):
 *   dense   --epochs epochs (default 30)
 *   kgs     prune-kgs on both convs (4x4 kernel groups; conv2 keeps 7 of 27 window positions, kgs_rate 0.75;
 *           conv1 - the stem, named in option "layers" - 9, kgs_rate 0.667), then --retrain epochs (default 20)
 *           of masked retraining
 * Each phase ends with a line "phase=NAME test_accuracy=X kept=N compression=Y"; the last line says whether
 * the pruned model is within 0.01 of the dense accuracy, and the exit status is 0 only then.
 *
 * usage: train_clips3d [--data digits.bin] [--epochs N] [--retrain N] [--seed S] [--threads T] [--quiet]
 */
#include "example_common.h"

#define F 8                 /* frames, rows, columns */
#define CLIP (F * F * F)    /* floats per clip */

static int fail(pdc_status st, const char *what)
{
    const char *msg = pdc_context_last_error(ctx);
    fprintf(stderr, "train_clips3d: %s: %s (%s)\n", what, *msg ? msg : "failed", pdc_status_string(st));
    return 1;
}

/* xorshift32: the clips' motions, the same on every machine */
static uint32_t next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* One clip per digit: the digit (n x 64 images, pixels / 16) rolled along its own path. */
static int make_clips(const dataset *img, uint32_t *rng, dataset *c)
{
    c->n = img->n;
    c->x = malloc(img->n * CLIP * sizeof(float));
    c->y = malloc(img->n * sizeof(float));
    if (!c->x || !c->y) {
        fprintf(stderr, "train_clips3d: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < img->n; i++) {
        const int vx = (int)(next(rng) % 3) - 1, vy = (int)(next(rng) % 3) - 1;
        float *clip = c->x + i * CLIP;
        for (int t = 0; t < F; t++)
            for (int r = 0; r < F; r++)
                for (int q = 0; q < F; q++) {
                    /* half a pixel a frame: up to 3 pixels by the last frame; what leaves the frame is gone */
                    const int sr = r - vy * t / 2, sq = q - vx * t / 2;
                    const int in = sr >= 0 && sr < F && sq >= 0 && sq < F;
                    clip[(t * F + r) * F + q] = in ? img->x[i * 64 + (size_t)(sr * F + sq)] : 0.0f;
                }
        c->y[i] = img->y[i];
    }
    return 0;
}

/* digits.bin (format in test/data/README.md) into training and test clips. */
static int load(const char *path, uint32_t seed, dataset *train, dataset *test)
{
    dataset digits[2] = {{0, NULL, NULL}, {0, NULL, NULL}};
    uint32_t rng = seed ? seed : 1;
    const int rc = load_digits("train_clips3d", path, &digits[0], &digits[1]) ||
                   make_clips(&digits[0], &rng, train) || make_clips(&digits[1], &rng, test);
    free_dataset(&digits[0]);
    free_dataset(&digits[1]);
    return rc;
}

static int build_model(pdc_model **out)
{
    pdc_model *m;
    TRY(pdc_model_create(ctx, "clips3d_cnn", &m), "create model");
    *out = m;
    static const int64_t clip[5] = {1, 1, F, F, F}, c1w[5] = {8, 1, 3, 3, 3}, c1b[1] = {8}, c2w[5] = {16, 8, 3, 3, 3},
                         c2b[1] = {16}, fw[2] = {10, 128}, fb[1] = {10}, pads[6] = {1, 1, 1, 1, 1, 1},
                         pool[3] = {2, 2, 2};
    static float zeros[16 * 8 * 27]; /* pdc_trainer_init_weights draws the initial weights */
    TRY(pdc_model_add_input(m, "clip", 5, clip), "input");
    TRY(pdc_model_add_constant(m, "conv1.w", 5, c1w, zeros), "conv1.w");
    TRY(pdc_model_add_constant(m, "conv1.b", 1, c1b, zeros), "conv1.b");
    TRY(pdc_model_add_constant(m, "conv2.w", 5, c2w, zeros), "conv2.w");
    TRY(pdc_model_add_constant(m, "conv2.b", 1, c2b, zeros), "conv2.b");
    TRY(pdc_model_add_constant(m, "fc.w", 2, fw, zeros), "fc.w");
    TRY(pdc_model_add_constant(m, "fc.b", 1, fb, zeros), "fc.b");
    pdc_attrs *conv, *mp;
    TRY(pdc_attrs_create(ctx, &conv), "attrs");
    pdc_status st = pdc_attrs_create(ctx, &mp);
    if (!st) st = pdc_attrs_set_ints(conv, "pads", 6, pads);
    if (!st) st = pdc_attrs_set_ints(mp, "kernel_shape", 3, pool);
    if (!st) st = pdc_attrs_set_ints(mp, "strides", 3, pool);
    static const char *const layers[][4] = {
        /* name, op, inputs (comma-free: one to three), output */
        {"conv1", "conv", "clip conv1.w conv1.b", "a1"}, {"relu1", "relu", "a1", "r1"},
        {"pool1", "maxpool", "r1", "p1"},                {"conv2", "conv", "p1 conv2.w conv2.b", "a2"},
        {"relu2", "relu", "a2", "r2"},                   {"pool2", "maxpool", "r2", "p2"},
        {"flatten", "flatten", "p2", "flat"},            {"fc", "fc", "flat fc.w fc.b", "logits"},
        {"softmax", "softmax", "logits", "probs"},
    };
    for (size_t i = 0; i < sizeof layers / sizeof layers[0] && !st; i++) {
        char ins[64];
        snprintf(ins, sizeof ins, "%s", layers[i][2]);
        const char *in[3], *outp[1] = {layers[i][3]};
        size_t n_in = 0;
        for (char *tok = strtok(ins, " "); tok && n_in < 3; tok = strtok(NULL, " ")) in[n_in++] = tok;
        const char *op = layers[i][1];
        st = pdc_model_add_layer(m, layers[i][0], op, n_in, in, 1, outp,
                                 !strcmp(op, "conv") ? conv : !strcmp(op, "maxpool") ? mp : NULL);
    }
    if (!st) st = pdc_model_mark_output(m, "probs");
    pdc_attrs_destroy(conv);
    pdc_attrs_destroy(mp);
    if (st) return fail(st, "build model");
    return 0;
}

typedef struct run {
    pdc_trainer *t;
    const dataset *train, *test;
    float *bx, *by;
    size_t *perm;
    size_t batch;
    int quiet;
} run;

static int evaluate(run *r, const dataset *d, float *loss, float *acc)
{
    const int64_t xd[5] = {(int64_t)d->n, 1, F, F, F};
    return evaluate_set(r->t, 5, xd, d, loss, acc);
}

static int train_epochs(run *r, const char *phase, int epochs)
{
    const dataset *d = r->train;
    for (int e = 1; e <= epochs; e++) {
        TRY(pdc_trainer_shuffle(r->t, d->n, r->perm), "shuffle");
        double sum = 0.0;
        for (size_t at = 0; at < d->n; at += r->batch) {
            const size_t nb = d->n - at < r->batch ? d->n - at : r->batch;
            for (size_t i = 0; i < nb; i++) {
                memcpy(r->bx + i * CLIP, d->x + r->perm[at + i] * CLIP, CLIP * sizeof(float));
                r->by[i] = d->y[r->perm[at + i]];
            }
            const int64_t xd[5] = {(int64_t)nb, 1, F, F, F};
            float loss;
            if (train_step(r->t, 5, xd, r->bx, nb, r->by, &loss)) return 1;
            sum += (double)loss * (double)nb;
        }
        float tl, ta;
        if (evaluate(r, r->test, &tl, &ta)) return 1;
        if (!r->quiet)
            printf("  %-6s epoch %2d/%d  train_loss %.4f  test_loss %.4f  test_accuracy %.4f\n", phase, e, epochs,
                   sum / (double)d->n, (double)tl, (double)ta);
        fflush(stdout);
    }
    return 0;
}

/* Test accuracy and kept weights of the trainer's model; one line for scripts. */
static int report(run *r, const char *phase, float *acc)
{
    pdc_model *m;
    TRY(pdc_trainer_export(r->t, &m), "export");
    int64_t weights = 0, kept = 0;
    const int rc = count_weights(m, &weights, &kept);
    pdc_model_destroy(m);
    if (rc) return rc;
    float loss;
    if (evaluate(r, r->test, &loss, acc)) return 1;
    printf("phase=%s test_accuracy=%.4f kept=%lld compression=%.2f\n", phase, (double)*acc, (long long)kept,
           (double)weights / (double)(kept ? kept : 1));
    return 0;
}

int main(int argc, char **argv)
{
    const char *data = "test/data/digits.bin", *threads = NULL;
    int epochs = 30, retrain = 20, quiet = 0;
    unsigned long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int v = i + 1 < argc;
        if (!strcmp(a, "--quiet")) quiet = 1;
        else if (v && !strcmp(a, "--data")) data = argv[++i];
        else if (v && !strcmp(a, "--threads")) threads = argv[++i];
        else if (v && !strcmp(a, "--epochs")) epochs = atoi(argv[++i]);
        else if (v && !strcmp(a, "--retrain")) retrain = atoi(argv[++i]);
        else if (v && !strcmp(a, "--seed")) seed = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: train_clips3d [--data digits.bin] [--epochs N] [--retrain N] [--seed S] "
                            "[--threads T] [--quiet]\n");
            return 2;
        }
    }
    dataset train = {0, NULL, NULL}, test = {0, NULL, NULL};
    if (load(data, (uint32_t)seed, &train, &test)) return 1;
    if (pdc_context_create(&ctx) != PDC_OK) return 1;
    run r = {NULL, &train, &test, NULL, NULL, NULL, 32, quiet};
    r.bx = malloc(r.batch * CLIP * sizeof(float));
    r.by = malloc(r.batch * sizeof(float));
    r.perm = malloc(train.n * sizeof *r.perm);
    pdc_model *m = NULL;
    int rc = !r.bx || !r.by || !r.perm;
    if (rc) fprintf(stderr, "train_clips3d: out of memory\n");
    if (!rc) rc = build_model(&m);
    if (!rc) {
        pdc_status st = create_trainer(m, seed, "0.002", threads, &r.t);
        if (!st) st = pdc_trainer_init_weights(r.t);
        if (st) rc = fail(st, "trainer");
    }
    float dense = 0.0f, pruned = 0.0f;
    if (!rc) {
        printf("train_clips3d: %zu training and %zu test clips of 8x8x8; Adam lr 0.002, batch 32, seed %lu\n",
               train.n, test.n, seed);
        rc = train_epochs(&r, "dense", epochs);
    }
    if (!rc) rc = report(&r, "dense", &dense);
    if (!rc) {
        pdc_attrs *a;
        pdc_status st = pdc_attrs_create(ctx, &a);
        if (!st) st = pdc_attrs_set_string(a, "kgs_group", "4x4");
        /* conv2 keeps 27 - floor(0.75 x 27) = 7 positions per group; conv1 reads the clip (the stem): named in
         * "layers", it is pruned too, more gently (27 - floor(0.667 x 27) = 9) */
        if (!st) st = pdc_attrs_set_string(a, "kgs_rate", "0.75,conv1=0.667");
        if (!st) st = pdc_attrs_set_string(a, "layers", "conv1,conv2");
        if (!st) st = pdc_trainer_prune(r.t, "prune-kgs", a);
        pdc_attrs_destroy(a);
        if (st) rc = fail(st, "prune");
    }
    float tl, before = 0.0f;
    if (!rc) rc = evaluate(&r, &test, &tl, &before);
    if (!rc && !quiet) printf("  pruned with prune-kgs: test_accuracy %.4f before retraining\n", (double)before);
    if (!rc) rc = train_epochs(&r, "kgs", retrain);
    if (!rc) rc = report(&r, "kgs", &pruned);
    if (!rc) {
        const int ok = pruned >= dense - 0.01f;
        printf("kgs_within_0.01_of_dense=%s (dense %.4f, kgs %.4f)\n", ok ? "yes" : "no", (double)dense,
               (double)pruned);
        rc = !ok;
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
