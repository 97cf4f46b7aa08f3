/*
 * train_bench.c - training step time of the digits CNN (examples/train_digits.c's net: conv3x3 1->16,
 * relu, conv3x3 16->32, relu, flatten, fc 2048->10, softmax cross-entropy; Adam, batch 32), with pdc's
 * public API only. Run by test/bench/train/train_torch.py (`make bench-train`), which times PyTorch on the
 * same net and batch and prints both.
 *
 * Configurations: dense; pruned as in the demo (8 patterns of 4 + 50% connectivity on both convs, 80%
 * of the fc's 1x4 blocks) trained with option sparse=auto (the convs on the sparse kernels; the small fc stays
 * on the dense ones, which are faster for it) and, for the gain, the same pruned net on the dense kernels
 * ("sparse=off": every product dense, pruned weights kept at zero).
 *
 * --model resnet18: torchvision's ResNet-18 (conv without bias + batchnorm + relu, basic blocks, 1x1 downsampling
 * shortcuts with batchnorm, global average pooling, fc 512->10) on 3x32x32 inputs, plain SGD lr 0.01, batch 32
 * (issue #38's figures); "pruned" there is 8 patterns of 4 + 50% connectivity on every 3x3 conv but the stem
 * (the fc and the 1x1 shortcuts stay dense).
 *
 * --model vgg16: torchvision's VGG-16 convolutions (no batchnorm) with a CIFAR-style classifier (global average
 * pooling, fc 512->10); --model mobilenetv2: torchvision's MobileNetV2 with 10 classes; both as ResNet-18 (3x32x32,
 * SGD, batch 32; "pruned": pattern + connectivity on the 3x3 convs the passes take - MobileNetV2's are depthwise,
 * so it stays all but dense).
 *
 * usage: train_bench [--model digits|resnet18|vgg16|mobilenetv2] [--threads LIST] [--steps N] [--repeats R] [--configs LIST]
 *        [--recompute 0|1]
 *        (LIST e.g. "1,2"; defaults digits / 1,2 / 200 / 5 / dense,pruned_sparse_kernels,pruned_dense_kernels)
 * Output, one line per configuration and thread count:
 *   pdc model=M config=NAME threads=T batch=32 step_ms_min=X step_ms_median=Y cpu_ms_min=C isa=Z loss=L peak_mb=P
 * step_ms_*: wall time per step; cpu_ms_min: the calling thread's CPU time per step (threads=1 only, where all
 * work runs on that thread: less disturbed by other load on the machine; 0 otherwise); peak_mb: the most resident
 * memory the process held during the timed steps, less what it held before the trainer was created (the model
 * the trainer is made from is resident already; the trainer's own weights, gradients and state count).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_nets.h"

static pdc_context *ctx;

void bench_die(pdc_status st, const char *what)
{
    fprintf(stderr, "train_bench: %s: %s (%s)\n", what, pdc_context_last_error(ctx), pdc_status_string(st));
    exit(1);
}

static pdc_model *build_digits(void)
{
    static float zeros[10 * 2048];
    static const int64_t image[4] = {1, 1, 8, 8}, c1w[4] = {16, 1, 3, 3}, c1b[1] = {16}, c2w[4] = {32, 16, 3, 3},
                         c2b[1] = {32}, fw[2] = {10, 2048}, fb[1] = {10}, pads[4] = {1, 1, 1, 1};
    pdc_model *m;
    pdc_attrs *a;
    TRY(pdc_model_create(ctx, "digits_cnn", &m), "model");
    TRY(pdc_model_add_input(m, "image", 4, image), "input");
    TRY(pdc_model_add_constant(m, "conv1.w", 4, c1w, zeros), "const");
    TRY(pdc_model_add_constant(m, "conv1.b", 1, c1b, zeros), "const");
    TRY(pdc_model_add_constant(m, "conv2.w", 4, c2w, zeros), "const");
    TRY(pdc_model_add_constant(m, "conv2.b", 1, c2b, zeros), "const");
    TRY(pdc_model_add_constant(m, "fc.w", 2, fw, zeros), "const");
    TRY(pdc_model_add_constant(m, "fc.b", 1, fb, zeros), "const");
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    TRY(pdc_attrs_set_ints(a, "pads", 4, pads), "attrs");
    const char *l1[] = {"image", "conv1.w", "conv1.b"}, *o1[] = {"c1"}, *l2[] = {"c1"}, *o2[] = {"r1"};
    const char *l3[] = {"r1", "conv2.w", "conv2.b"}, *o3[] = {"c2"}, *l4[] = {"c2"}, *o4[] = {"r2"};
    const char *l5[] = {"r2"}, *o5[] = {"flat"}, *l6[] = {"flat", "fc.w", "fc.b"}, *o6[] = {"logits"};
    const char *l7[] = {"logits"}, *o7[] = {"probs"};
    TRY(pdc_model_add_layer(m, "conv1", "conv", 3, l1, 1, o1, a), "conv1");
    TRY(pdc_model_add_layer(m, "relu1", "relu", 1, l2, 1, o2, NULL), "relu1");
    TRY(pdc_model_add_layer(m, "conv2", "conv", 3, l3, 1, o3, a), "conv2");
    TRY(pdc_model_add_layer(m, "relu2", "relu", 1, l4, 1, o4, NULL), "relu2");
    TRY(pdc_model_add_layer(m, "flatten", "flatten", 1, l5, 1, o5, NULL), "flatten");
    TRY(pdc_model_add_layer(m, "fc", "fc", 3, l6, 1, o6, NULL), "fc");
    TRY(pdc_model_add_layer(m, "softmax", "softmax", 1, l7, 1, o7, NULL), "softmax");
    TRY(pdc_model_mark_output(m, "probs"), "output");
    pdc_attrs_destroy(a);
    return m;
}

static int resnet;             /* a 3x32x32 model trained with SGD (--model other than digits) */
static const char *recompute = "0"; /* --recompute 1: trainer option recompute */
static const char *model_name = "digits";

/* VmRSS or VmHWM of this process in MB (/proc/self/status), 0 where unreadable. */
static double status_mb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) kb = strtod(line + strlen(field) + 1, NULL);
    if (f) fclose(f);
    return kb / 1024.0;
}

/* The resident memory now, with the peak reset to it (writing 5 to clear_refs, Linux 4.0+) and freed heap
 * returned first, so that memory freed earlier is not counted. */
static double peak_reset_mb(void)
{
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) fputs("5", f), fclose(f);
    return status_mb("VmRSS:");
}

static void bench(const pdc_model *m, const char *config, int pruned, const char *sparse, const char *threads,
                  int steps, int repeats)
{
    const double rss0 = peak_reset_mb();
    pdc_trainer *t;
    TRY(pdc_trainer_create(ctx, m, &t), "trainer");
    TRY(pdc_trainer_set_option(t, "threads", threads), "threads");
    TRY(pdc_trainer_set_option(t, "seed", "1"), "seed");
    TRY(pdc_trainer_set_option(t, "recompute", recompute), "recompute");
    if (resnet) {
        TRY(pdc_trainer_set_option(t, "optimizer", "sgd"), "optimizer");
        TRY(pdc_trainer_set_option(t, "lr", "0.01"), "lr");
    }
    TRY(pdc_trainer_init_weights(t), "init");
    if (pruned) {
        pdc_attrs *a;
        TRY(pdc_attrs_create(ctx, &a), "attrs");
        TRY(pdc_attrs_set_int(a, "patterns", 8), "attrs");
        TRY(pdc_attrs_set_int(a, "pattern_size", 4), "attrs");
        TRY(pdc_attrs_set_float(a, "connectivity", 0.5f), "attrs");
        if (!resnet) TRY(pdc_attrs_set_string(a, "block", "1x4:0.8"), "attrs");
        TRY(pdc_trainer_prune(t, resnet ? "prune-pattern,prune-connectivity" : "prune-pattern,prune-connectivity,prune-block",
                              a),
            "prune");
        pdc_attrs_destroy(a);
        TRY(pdc_trainer_set_option(t, "sparse", sparse), "sparse");
    }
    const size_t per = resnet ? 3 * 32 * 32 : 64;
    float *x = malloc(32 * per * sizeof *x), y[32];
    if (!x) exit(1);
    uint32_t s = 12345;
    for (size_t i = 0; i < 32 * per; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 28) / 16.0f;
    }
    for (int i = 0; i < 32; i++) y[i] = (float)(i % 10);
    const int64_t xd[4] = {32, resnet ? 3 : 1, resnet ? 32 : 8, resnet ? 32 : 8}, yd[1] = {32};
    pdc_tensor *tx, *ty;
    TRY(pdc_tensor_wrap(ctx, 4, xd, x, &tx), "wrap");
    TRY(pdc_tensor_wrap(ctx, 1, yd, y, &ty), "wrap");
    float loss;
    const int warm = resnet ? 3 : 50;
    for (int i = 0; i < warm; i++) TRY(pdc_trainer_step(t, tx, ty, &loss), "step");
    peak_reset_mb(); /* the peak of the steps: pruning's transient copies are gone by now */
    double *r = malloc((size_t)repeats * sizeof *r), cpu = 1e30;
    if (!r) exit(1);
    for (int k = 0; k < repeats; k++) {
        const double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < steps; i++) TRY(pdc_trainer_step(t, tx, ty, &loss), "step");
        r[k] = (clock_s(CLOCK_MONOTONIC) - t0) * 1e3 / steps;
        const double c = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3 / steps;
        if (c < cpu) cpu = c;
    }
    qsort(r, (size_t)repeats, sizeof *r, cmp_double);
    char isa[32] = "?";
    pdc_trainer_get_option(t, "isa", isa, sizeof isa);
    printf("pdc model=%s config=%s threads=%s batch=32 step_ms_min=%.4f step_ms_median=%.4f cpu_ms_min=%.4f isa=%s "
           "loss=%.4f peak_mb=%.1f\n",
           model_name, config, threads, r[0], r[repeats / 2], strcmp(threads, "1") ? 0.0 : cpu,
           isa, (double)loss, status_mb("VmHWM:") - rss0);
    fflush(stdout);
    free(r);
    free(x);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_trainer_destroy(t);
}

static int wanted(const char *configs, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = configs; (p = strstr(p, name)); p += n)
        if ((p == configs || p[-1] == ',') && (p[n] == ',' || !p[n])) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *threads = "1,2", *model = "digits", *configs = "dense,pruned_sparse_kernels,pruned_dense_kernels";
    int steps = -1, repeats = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--configs")) configs = argv[i + 1];
        else if (!strcmp(argv[i], "--recompute")) recompute = argv[i + 1];
        else steps = 0;
    }
    static const char *const models[] = {"digits", "resnet18", "vgg16", "mobilenetv2"};
    int which = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(model, models[i])) which = i;
    resnet = which > 0;
    model_name = model;
    if (steps < 0) steps = resnet ? 5 : 200;
    if (steps < 1 || repeats < 1 || (argc % 2) != 1 || which < 0) {
        fprintf(stderr, "usage: train_bench [--model digits|resnet18|vgg16|mobilenetv2] [--threads LIST] [--steps N] "
                        "[--repeats R] [--configs LIST] [--recompute 0|1]\n");
        return 2;
    }
    if (pdc_context_create(&ctx)) return 1;
    pdc_model *m = which == 0 ? build_digits() : which == 1 ? bench_resnet18(ctx) : which == 2 ? bench_vgg16(ctx)
                                                                                        : bench_mobilenetv2(ctx);
    char list[64];
    snprintf(list, sizeof list, "%s", threads);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (wanted(configs, "dense")) bench(m, "dense", 0, "auto", tok, steps, repeats);
        if (wanted(configs, "pruned_sparse_kernels")) bench(m, "pruned_sparse_kernels", 1, "auto", tok, steps, repeats);
        if (wanted(configs, "pruned_dense_kernels")) bench(m, "pruned_dense_kernels", 1, "off", tok, steps, repeats);
    }
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
