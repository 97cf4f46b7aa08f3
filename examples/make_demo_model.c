/*
 * make_demo_model.c - builds pdc's demo model with the public builder API and saves it as .pdc:
 * the digits CNN of test/data/README.md, with pruned weights.
 *
 *   image [1,1,8,8] -> conv 3x3 1->16 pad 1 -> relu -> conv 3x3 16->32 pad 1 -> relu
 *                   -> flatten [1,2048] -> fc 2048->10 -> softmax -> probs [1,10]
 *
 * Weights are deterministic pseudo-random (He-uniform, fixed seed), NOT trained: the model shows the
 * compiler, not accuracy, until the training example exists. The sparsity is real, though:
 *  - conv2: pattern pruning: 8 four-entry patterns (each keeps the centre, bit 4 of the 3x3 window);
 *    every kernel is projected onto the pattern that keeps the most of its energy, then the weakest
 *    50% of kernels are removed (connectivity pruning, pattern -1);
 *  - fc: 1x4 block pruning, the 80% of blocks with the smallest L2 norm removed.
 *
 * usage: make_demo_model OUT.pdc [DIGITS.bin IN.bin]
 * With DIGITS.bin (format in test/data/README.md) it also writes the first test digit as a raw
 * little-endian float32 input [1,1,8,8] (pixels / 16) to IN.bin.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"

#define SEED 0x5eed2024u

/* ------------------------------------------------------------------ deterministic random numbers */

static uint64_t rng_state = SEED;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [-bound, bound). */
static float uniform(float bound)
{
    double u = (double)(splitmix64() >> 11) * (1.0 / 9007199254740992.0);   /* [0, 1) */
    return (float)((2.0 * u - 1.0) * bound);
}

/* He-uniform weights (bound sqrt(6 / fan_in)) and small uniform biases. */
static void fill_he(float *w, size_t n, size_t fan_in)
{
    float bound = (float)sqrt(6.0 / (double)fan_in);
    for (size_t i = 0; i < n; i++) w[i] = uniform(bound);
}

static void fill_bias(float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = uniform(0.05f);
}

/* ------------------------------------------------------------------ pruning */

typedef struct scored {
    double score;
    size_t index;
} scored;

/* Ascending by score, ties by index, so the result never depends on qsort's order. */
static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Eight 4-entry patterns over the 3x3 window (bit = row*3 + col), each with the centre (bit 4):
 * the four 2x2 corner squares and the four T shapes. */
#define B(r, c) (1u << ((r) * 3 + (c)))
static const uint64_t demo_patterns[8] = {
    B(0, 0) | B(0, 1) | B(1, 0) | B(1, 1), B(0, 1) | B(0, 2) | B(1, 1) | B(1, 2),
    B(1, 0) | B(1, 1) | B(2, 0) | B(2, 1), B(1, 1) | B(1, 2) | B(2, 1) | B(2, 2),
    B(0, 1) | B(1, 0) | B(1, 1) | B(1, 2), B(0, 1) | B(1, 1) | B(1, 2) | B(2, 1),
    B(1, 0) | B(1, 1) | B(1, 2) | B(2, 1), B(0, 1) | B(1, 0) | B(1, 1) | B(2, 1),
};
#undef B

/* Projects each of n_kernels 3x3 kernels of w onto its best pattern, then removes the weakest
 * `remove` kernels. Zeroes every weight outside its kernel's pattern; fills kernel_pattern. */
static int prune_pattern(float *w, size_t n_kernels, size_t remove, int32_t *kernel_pattern)
{
    scored *s = malloc(n_kernels * sizeof *s);
    if (!s) return -1;
    for (size_t k = 0; k < n_kernels; k++) {
        const float *kw = w + 9 * k;
        double best = -1.0;
        int best_p = 0;
        for (int p = 0; p < 8; p++) {
            double e = 0.0;
            for (int i = 0; i < 9; i++)
                if (demo_patterns[p] >> i & 1u) e += (double)kw[i] * kw[i];
            if (e > best) {
                best = e;
                best_p = p;
            }
        }
        kernel_pattern[k] = best_p;
        s[k].score = best;
        s[k].index = k;
    }
    qsort(s, n_kernels, sizeof *s, cmp_scored);
    for (size_t i = 0; i < remove; i++) kernel_pattern[s[i].index] = -1;
    for (size_t k = 0; k < n_kernels; k++) {
        uint64_t mask = kernel_pattern[k] < 0 ? 0 : demo_patterns[kernel_pattern[k]];
        for (int i = 0; i < 9; i++)
            if (!(mask >> i & 1u)) w[9 * k + (size_t)i] = 0.0f;
    }
    free(s);
    return 0;
}

/* Block-prunes a rows x cols matrix (cols divisible by bw) in 1 x bw blocks: removes the `remove`
 * blocks with the smallest L2 norm, zeroes them and fills mask (row-major block order). */
static int prune_block_1xn(float *w, size_t rows, size_t cols, size_t bw, size_t remove, uint8_t *mask)
{
    size_t per_row = cols / bw, n = rows * per_row;
    scored *s = malloc(n * sizeof *s);
    if (!s) return -1;
    for (size_t b = 0; b < n; b++) {
        const float *p = w + (b / per_row) * cols + (b % per_row) * bw;
        double e = 0.0;
        for (size_t i = 0; i < bw; i++) e += (double)p[i] * p[i];
        s[b].score = e;
        s[b].index = b;
        mask[b] = 1;
    }
    qsort(s, n, sizeof *s, cmp_scored);
    for (size_t i = 0; i < remove; i++) {
        size_t b = s[i].index;
        mask[b] = 0;
        memset(w + (b / per_row) * cols + (b % per_row) * bw, 0, bw * sizeof *w);
    }
    free(s);
    return 0;
}

/* ------------------------------------------------------------------ building the model */

static pdc_context *g_ctx;

/* Reports a failed pdc call (with the context's message) and returns 1. */
static int fail(pdc_status st, const char *what)
{
    const char *msg = pdc_context_last_error(g_ctx);
    fprintf(stderr, "make_demo_model: %s: %s\n", what, *msg ? msg : pdc_status_string(st));
    return 1;
}

#define TRY(call, what)                                  \
    do {                                                 \
        pdc_status st_ = (call);                         \
        if (st_ != PDC_OK) { rc = fail(st_, what); goto done; } \
    } while (0)

static int add_conv(pdc_model *m, pdc_attrs *pad1, const char *name, const char *in, const char *w,
                    const char *b, const char *out)
{
    const char *ins[3] = {in, w, b};
    const char *outs[1] = {out};
    pdc_status st = pdc_model_add_layer(m, name, "conv", 3, ins, 1, outs, pad1);
    return st == PDC_OK ? 0 : fail(st, name);
}

static int add_unary(pdc_model *m, const char *name, const char *op, const char *in, const char *out)
{
    const char *ins[1] = {in};
    const char *outs[1] = {out};
    pdc_status st = pdc_model_add_layer(m, name, op, 1, ins, 1, outs, NULL);
    return st == PDC_OK ? 0 : fail(st, name);
}

static int build_and_save(const char *out_path)
{
    int rc = 0;
    pdc_model *m = NULL;
    pdc_attrs *pad1 = NULL;
    float *conv1_w = malloc(16 * 1 * 9 * sizeof(float)), conv1_b[16];
    float *conv2_w = malloc(32 * 16 * 9 * sizeof(float)), conv2_b[32];
    float *fc_w = malloc(10 * 2048 * sizeof(float)), fc_b[10];
    int32_t *kernel_pattern = malloc(32 * 16 * sizeof(int32_t));
    uint8_t *block_mask = malloc(10 * 512);
    if (!conv1_w || !conv2_w || !fc_w || !kernel_pattern || !block_mask) {
        fprintf(stderr, "make_demo_model: out of memory\n");
        rc = 1;
        goto done;
    }

    /* Weights in creation order, so the stream of random numbers (and the model) never changes. */
    fill_he(conv1_w, 16 * 9, 1 * 9);
    fill_bias(conv1_b, 16);
    fill_he(conv2_w, 32 * 16 * 9, 16 * 9);
    fill_bias(conv2_b, 32);
    fill_he(fc_w, 10 * 2048, 2048);
    fill_bias(fc_b, 10);

    if (prune_pattern(conv2_w, 32 * 16, 32 * 16 / 2, kernel_pattern) != 0 ||
        prune_block_1xn(fc_w, 10, 2048, 4, 10 * 512 * 8 / 10, block_mask) != 0) {
        fprintf(stderr, "make_demo_model: out of memory\n");
        rc = 1;
        goto done;
    }

    TRY(pdc_model_create(g_ctx, "digits_cnn", &m), "create model");
    static const int64_t image_dims[4] = {1, 1, 8, 8};
    static const int64_t conv1_w_dims[4] = {16, 1, 3, 3}, conv1_b_dims[1] = {16};
    static const int64_t conv2_w_dims[4] = {32, 16, 3, 3}, conv2_b_dims[1] = {32};
    static const int64_t fc_w_dims[2] = {10, 2048}, fc_b_dims[1] = {10};
    TRY(pdc_model_add_input(m, "image", 4, image_dims), "input image");
    TRY(pdc_model_add_constant(m, "conv1.w", 4, conv1_w_dims, conv1_w), "conv1.w");
    TRY(pdc_model_add_constant(m, "conv1.b", 1, conv1_b_dims, conv1_b), "conv1.b");
    TRY(pdc_model_add_constant(m, "conv2.w", 4, conv2_w_dims, conv2_w), "conv2.w");
    TRY(pdc_model_add_constant(m, "conv2.b", 1, conv2_b_dims, conv2_b), "conv2.b");
    TRY(pdc_model_add_constant(m, "fc.w", 2, fc_w_dims, fc_w), "fc.w");
    TRY(pdc_model_add_constant(m, "fc.b", 1, fc_b_dims, fc_b), "fc.b");

    static const int64_t pads[4] = {1, 1, 1, 1};
    TRY(pdc_attrs_create(g_ctx, &pad1), "create attrs");
    TRY(pdc_attrs_set_ints(pad1, "pads", 4, pads), "attr pads");

    if (add_conv(m, pad1, "conv1", "image", "conv1.w", "conv1.b", "conv1.out") ||
        add_unary(m, "relu1", "relu", "conv1.out", "relu1.out") ||
        add_conv(m, pad1, "conv2", "relu1.out", "conv2.w", "conv2.b", "conv2.out") ||
        add_unary(m, "relu2", "relu", "conv2.out", "relu2.out") ||
        add_unary(m, "flatten", "flatten", "relu2.out", "flat")) {
        rc = 1;
        goto done;
    }
    {
        const char *ins[3] = {"flat", "fc.w", "fc.b"};
        const char *outs[1] = {"logits"};
        TRY(pdc_model_add_layer(m, "fc", "fc", 3, ins, 1, outs, NULL), "fc");
    }
    if (add_unary(m, "softmax", "softmax", "logits", "probs")) {
        rc = 1;
        goto done;
    }
    TRY(pdc_model_mark_output(m, "probs"), "output probs");

    TRY(pdc_model_set_sparsity_pattern(m, "conv2.w", 3, 3, 8, demo_patterns, 32 * 16, kernel_pattern),
        "pattern sparsity of conv2.w");
    TRY(pdc_model_set_sparsity_block(m, "fc.w", 1, 4, 10 * 512, block_mask), "block sparsity of fc.w");
    TRY(pdc_model_verify(m), "verify");
    TRY(pdc_model_save(m, out_path), out_path);

    printf("make_demo_model: wrote %s: digits CNN, input image [1,1,8,8] -> output probs [1,10]\n", out_path);
    printf("  conv1 3x3 1->16 pad 1 + relu       dense\n");
    printf("  conv2 3x3 16->32 pad 1 + relu      pattern: 8 four-entry patterns (with centre), 256 of 512 "
           "kernels removed\n");
    printf("  flatten, fc 2048->10               block 1x4: 4096 of 5120 blocks removed (80%%)\n");
    printf("  softmax\n");
    printf("  weights: He-uniform pseudo-random, seed 0x%x. NOTE: the weights are random, not trained;\n"
           "  predictions mean nothing until the training example exists.\n",
           (unsigned)SEED);

done:
    pdc_attrs_destroy(pad1);
    pdc_model_destroy(m);
    free(conv1_w);
    free(conv2_w);
    free(fc_w);
    free(kernel_pattern);
    free(block_mask);
    return rc;
}

/* ------------------------------------------------------------------ the demo input */

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Writes the first test digit of digits.bin as 64 little-endian float32 values (pixels / 16). */
static int write_digit(const char *digits_path, const char *in_path)
{
    FILE *f = fopen(digits_path, "rb");
    if (!f) {
        fprintf(stderr, "make_demo_model: %s: cannot open: %s\n", digits_path, strerror(errno));
        return 1;
    }
    unsigned char hdr[20];
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, "DGT1", 4) != 0) {
        fclose(f);
        fprintf(stderr, "make_demo_model: %s: not a digits file (expected magic DGT1)\n", digits_path);
        return 1;
    }
    uint32_t n_train = le32(hdr + 4), n_test = le32(hdr + 8), rows = le32(hdr + 12), cols = le32(hdr + 16);
    if (rows != 8 || cols != 8 || n_test == 0 || n_train > 1000000 || n_test > 1000000) {
        fclose(f);
        fprintf(stderr, "make_demo_model: %s: expected 8x8 images and at least one test sample, got %ux%u, %u test\n",
                digits_path, rows, cols, n_test);
        return 1;
    }
    unsigned char px[64], label;
    long total = (long)n_train + (long)n_test;
    if (fseek(f, 20L + (long)n_train * 64, SEEK_SET) != 0 || fread(px, 1, 64, f) != 64 ||
        fseek(f, 20L + total * 64 + (long)n_train, SEEK_SET) != 0 || fread(&label, 1, 1, f) != 1) {
        fclose(f);
        fprintf(stderr, "make_demo_model: %s: truncated (expected %ld bytes)\n", digits_path, 20L + total * 65);
        return 1;
    }
    fclose(f);

    FILE *o = fopen(in_path, "wb");
    if (!o) {
        fprintf(stderr, "make_demo_model: %s: cannot create: %s\n", in_path, strerror(errno));
        return 1;
    }
    for (int i = 0; i < 64; i++) {
        if (px[i] > 16) {
            fclose(o);
            fprintf(stderr, "make_demo_model: %s: pixel value %u out of range 0..16\n", digits_path, px[i]);
            return 1;
        }
        float v = (float)px[i] / 16.0f;
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                              (unsigned char)(u >> 24)};
        fwrite(b, 1, 4, o);
    }
    if (ferror(o) | (fclose(o) != 0)) {
        fprintf(stderr, "make_demo_model: %s: write error\n", in_path);
        return 1;
    }
    printf("make_demo_model: wrote %s: test digit #0 of %s (sample %u, label %u) as [1,1,8,8] f32, "
           "pixels/16:\n",
           in_path, digits_path, n_train, label);
    for (int r = 0; r < 8; r++) {
        printf("  ");
        for (int c = 0; c < 8; c++) {
            unsigned v = px[r * 8 + c];
            fputs(v >= 12 ? "##" : v >= 6 ? "++" : v >= 2 ? ".." : "  ", stdout);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: make_demo_model OUT.pdc [DIGITS.bin IN.bin]\n");
        return 2;
    }
    if (pdc_context_create(&g_ctx) != PDC_OK) {
        fprintf(stderr, "make_demo_model: cannot create a pdc context\n");
        return 1;
    }
    int rc = build_and_save(argv[1]);
    if (rc == 0 && argc == 4) rc = write_digit(argv[2], argv[3]);
    pdc_context_destroy(g_ctx);
    return rc;
}
