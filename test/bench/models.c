/*
 * models.c - ResNet-18/50 and VGG-16 for the benchmarks, built with the public API (see models.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models.h"

typedef struct builder {
    pdc_context *ctx;
    pdc_model *m;
    const bench_prune *pr;
    int n;          /* unique-name counter */
    int failed;
    uint64_t rng;
} builder;

/* The 8 four-entry patterns over the 3x3 window, each with the centre (bit = row*3 + col). */
static const uint64_t patterns[8] = {0x1b, 0x36, 0xd8, 0x1b0, 0x3a, 0xb2, 0xb8, 0x9a};

static double urand(builder *b)
{
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    return (double)(b->rng >> 11) * (1.0 / 9007199254740992.0);
}

static void check(builder *b, pdc_status st, const char *what)
{
    if (st == PDC_OK || b->failed) return;
    fprintf(stderr, "bench: building %s: %s\n", what, pdc_context_last_error(b->ctx));
    b->failed = 1;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}

static void uniq(builder *b, char *buf, size_t cap, const char *stem) { snprintf(buf, cap, "%s%d", stem, b->n++); }

/* Weights [o, c, k, k] He-uniform; a 3x3 conv with c > 3 is pattern-pruned when pruning. */
static void add_conv_weights(builder *b, const char *name, int o, int c, int k)
{
    size_t n = (size_t)o * c * k * k, nk = (size_t)o * c;
    float *w = malloc(n * sizeof *w);
    int32_t *kp = NULL;
    double bound = sqrt(6.0 / (double)(c * k * k));
    for (size_t i = 0; i < n; i++) w[i] = (float)((2.0 * urand(b) - 1.0) * bound);
    int sparse = b->pr->prune && k == 3 && c > 3;
    if (sparse) {
        kp = malloc(nk * sizeof *kp);
        double *score = malloc(nk * sizeof *score), *sorted = malloc(nk * sizeof *sorted);
        for (size_t q = 0; q < nk; q++) {
            float *kw = w + 9 * q;
            double best = -1;
            int bp = 0;
            for (int p = 0; p < 8; p++) {
                double e = 0;
                for (int i = 0; i < 9; i++)
                    if (patterns[p] >> i & 1) e += (double)kw[i] * kw[i];
                if (e > best) best = e, bp = p;
            }
            kp[q] = bp;
            score[q] = sorted[q] = best;
            for (int i = 0; i < 9; i++)
                if (!(patterns[bp] >> i & 1)) kw[i] = 0.0f;
        }
        qsort(sorted, nk, sizeof *sorted, cmp_double);
        size_t drop = (size_t)(b->pr->connectivity * (double)nk), dropped = 0;
        double thr = drop ? sorted[drop - 1] : -1.0;
        for (size_t q = 0; q < nk && dropped < drop; q++)
            if (score[q] <= thr) {
                kp[q] = -1;
                memset(w + 9 * q, 0, 9 * sizeof *w);
                dropped++;
            }
        free(score);
        free(sorted);
    }
    int64_t dims[4] = {o, c, k, k};
    check(b, pdc_model_add_constant(b->m, name, 4, dims, w), name);
    if (sparse) check(b, pdc_model_set_sparsity_pattern(b->m, name, 3, 3, 8, patterns, nk, kp), name);
    free(kp);
    free(w);
}

static void add_vector(builder *b, const char *name, int n, double scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = (float)((2.0 * urand(b) - 1.0) * scale);
    int64_t d = n;
    check(b, pdc_model_add_constant(b->m, name, 1, &d, v), name);
    free(v);
}

/* conv k x k, stride s, pad k/2, bias, optional fused relu; returns the output name in out. */
static void conv(builder *b, const char *in, int c, int o, int k, int s, int relu, char *out, size_t cap)
{
    char w[64], bias[64];
    uniq(b, w, sizeof w, "w");
    uniq(b, bias, sizeof bias, "b");
    uniq(b, out, cap, "conv");
    add_conv_weights(b, w, o, c, k);
    add_vector(b, bias, o, 0.05);
    pdc_attrs *a = NULL;
    check(b, pdc_attrs_create(b->ctx, &a), "attrs");
    if (b->failed) return;
    int64_t p = k / 2;
    check(b, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p}), "pads");
    check(b, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){s, s}), "strides");
    if (relu) check(b, pdc_attrs_set_string(a, "activation", "relu"), "activation");
    const char *o_ = out;
    check(b, pdc_model_add_layer(b->m, out, "conv", 3, (const char *const[]){in, w, bias}, 1, &o_, a), out);
    pdc_attrs_destroy(a);
}

static void op1(builder *b, const char *op, const char *in, char *out, size_t cap, pdc_attrs *a)
{
    uniq(b, out, cap, op);
    const char *o_ = out;
    check(b, pdc_model_add_layer(b->m, out, op, 1, &in, 1, &o_, a), out);
}

static void add_relu(builder *b, const char *x, const char *y, char *out, size_t cap)
{
    char s[64];
    uniq(b, s, sizeof s, "add");
    const char *o_ = s;
    check(b, pdc_model_add_layer(b->m, s, "add", 2, (const char *const[]){x, y}, 1, &o_, NULL), s);
    op1(b, "relu", s, out, cap, NULL);
}

static void maxpool(builder *b, const char *in, int k, int s, int p, char *out, size_t cap)
{
    pdc_attrs *a = NULL;
    check(b, pdc_attrs_create(b->ctx, &a), "attrs");
    if (b->failed) return;
    check(b, pdc_attrs_set_ints(a, "kernel_shape", 2, (const int64_t[]){k, k}), "kernel_shape");
    check(b, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){s, s}), "strides");
    check(b, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p}), "pads");
    op1(b, "maxpool", in, out, cap, a);
    pdc_attrs_destroy(a);
}

/* fc [o, k]; VGG's fc layers block-pruned when pruning; output named `name` if given. */
static void fc(builder *b, const char *in, int k, int o, int relu, int prunable, const char *name, char *out,
               size_t cap)
{
    char w[64], bias[64];
    uniq(b, w, sizeof w, "fcw");
    uniq(b, bias, sizeof bias, "fcb");
    if (name) snprintf(out, cap, "%s", name);
    else uniq(b, out, cap, "fc");
    size_t n = (size_t)o * k;
    float *wv = malloc(n * sizeof *wv);
    double bound = sqrt(6.0 / (double)k);
    for (size_t i = 0; i < n; i++) wv[i] = (float)((2.0 * urand(b) - 1.0) * bound);
    uint8_t *mask = NULL;
    size_t nb = n / 4;
    if (b->pr->prune && prunable && k % 4 == 0) {
        mask = malloc(nb);
        for (size_t q = 0; q < nb; q++) {
            mask[q] = urand(b) < b->pr->fc_density;
            if (!mask[q]) memset(wv + 4 * q, 0, 4 * sizeof *wv);
        }
    }
    int64_t dims[2] = {o, k};
    check(b, pdc_model_add_constant(b->m, w, 2, dims, wv), w);
    if (mask) check(b, pdc_model_set_sparsity_block(b->m, w, 1, 4, nb, mask), w);
    free(mask);
    free(wv);
    add_vector(b, bias, o, 0.05);
    pdc_attrs *a = NULL;
    check(b, pdc_attrs_create(b->ctx, &a), "attrs");
    if (b->failed) return;
    if (relu) check(b, pdc_attrs_set_string(a, "activation", "relu"), "activation");
    const char *o_ = out;
    check(b, pdc_model_add_layer(b->m, out, "fc", 3, (const char *const[]){in, w, bias}, 1, &o_, a), out);
    pdc_attrs_destroy(a);
}

static void resnet(builder *b, int depth, int hw)
{
    char x[64], t[64], u[64], v[64], sc[64];
    check(b, pdc_model_add_input(b->m, "image", 4, (const int64_t[]){1, 3, hw, hw}), "image");
    conv(b, "image", 3, 64, 7, 2, 1, t, sizeof t);
    maxpool(b, t, 3, 2, 1, x, sizeof x);
    static const int blocks18[4] = {2, 2, 2, 2}, blocks50[4] = {3, 4, 6, 3};
    const int *blocks = depth == 18 ? blocks18 : blocks50;
    int c = 64;
    for (int stage = 0; stage < 4; stage++) {
        int planes = 64 << stage;
        if (stage == 3 && b->pr->variant) b->rng ^= 0x9e3779b97f4a7c15ull * (uint64_t)b->pr->variant;
        for (int i = 0; i < blocks[stage]; i++) {
            int s = stage > 0 && i == 0 ? 2 : 1;
            int out_c = depth == 18 ? planes : planes * 4;
            if (depth == 18) {
                conv(b, x, c, planes, 3, s, 1, t, sizeof t);
                conv(b, t, planes, planes, 3, 1, 0, u, sizeof u);
            } else {
                conv(b, x, c, planes, 1, 1, 1, t, sizeof t);
                conv(b, t, planes, planes, 3, s, 1, v, sizeof v);
                conv(b, v, planes, out_c, 1, 1, 0, u, sizeof u);
            }
            if (s != 1 || c != out_c) conv(b, x, c, out_c, 1, s, 0, sc, sizeof sc);
            else snprintf(sc, sizeof sc, "%s", x);
            add_relu(b, u, sc, x, sizeof x);
            c = out_c;
        }
    }
    op1(b, "global_avgpool", x, t, sizeof t, NULL);
    op1(b, "flatten", t, u, sizeof u, NULL);
    fc(b, u, c, 1000, 0, 0, "logits", v, sizeof v);
}

static void vgg16(builder *b, int hw)
{
    static const int cfg[] = {64, 64, -1, 128, 128, -1, 256, 256, 256, -1, 512, 512, 512, -1, 512, 512, 512, -1};
    char x[64], t[64];
    check(b, pdc_model_add_input(b->m, "image", 4, (const int64_t[]){1, 3, hw, hw}), "image");
    snprintf(x, sizeof x, "image");
    int c = 3, side = hw;
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        if (cfg[i] < 0) {
            maxpool(b, x, 2, 2, 0, t, sizeof t);
            side /= 2;
        } else {
            conv(b, x, c, cfg[i], 3, 1, 1, t, sizeof t);
            c = cfg[i];
        }
        snprintf(x, sizeof x, "%s", t);
    }
    op1(b, "flatten", x, t, sizeof t, NULL);
    fc(b, t, c * side * side, 4096, 1, 1, NULL, x, sizeof x);
    fc(b, x, 4096, 4096, 1, 1, NULL, t, sizeof t);
    fc(b, t, 4096, 1000, 0, 1, "logits", x, sizeof x);
}

/* A conv with groups (MobileNetV2's depthwise 3x3 when group == c), never pattern-pruned. */
static void gconv(builder *b, const char *in, int c, int o, int k, int s, int group, const char *act, char *out,
                  size_t cap)
{
    char w[64], bias[64];
    uniq(b, w, sizeof w, "w");
    uniq(b, bias, sizeof bias, "b");
    uniq(b, out, cap, "conv");
    size_t n = (size_t)o * (size_t)(c / group) * (size_t)(k * k);
    float *wv = malloc(n * sizeof *wv);
    double bound = sqrt(6.0 / (double)(c / group * k * k));
    for (size_t i = 0; i < n; i++) wv[i] = (float)((2.0 * urand(b) - 1.0) * bound);
    int64_t dims[4] = {o, c / group, k, k};
    check(b, pdc_model_add_constant(b->m, w, 4, dims, wv), w);
    free(wv);
    add_vector(b, bias, o, 0.05);
    pdc_attrs *a = NULL;
    check(b, pdc_attrs_create(b->ctx, &a), "attrs");
    if (b->failed) return;
    int64_t p = k / 2;
    check(b, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p}), "pads");
    check(b, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){s, s}), "strides");
    check(b, pdc_attrs_set_int(a, "group", group), "group");
    if (act) check(b, pdc_attrs_set_string(a, "activation", act), "activation");
    const char *o_ = out;
    check(b, pdc_model_add_layer(b->m, out, "conv", 3, (const char *const[]){in, w, bias}, 1, &o_, a), out);
    pdc_attrs_destroy(a);
}

/* MobileNetV2 (width 1.0): inverted residual blocks, relu for relu6; dense (pruned variants are made
 * with pdc_model_transform by the caller). */
static void mobilenetv2(builder *b, int hw)
{
    static const int cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    char x[64], t[64], u[64], v[64];
    check(b, pdc_model_add_input(b->m, "image", 4, (const int64_t[]){1, 3, hw, hw}), "image");
    gconv(b, "image", 3, 32, 3, 2, 1, "relu", x, sizeof x);
    int c = 32;
    for (int i = 0; i < 7; i++)
        for (int r = 0; r < cfg[i][2]; r++) {
            int s = r == 0 ? cfg[i][3] : 1, e = c * cfg[i][0], o = cfg[i][1];
            const char *h = x;
            if (cfg[i][0] != 1) {
                gconv(b, x, c, e, 1, 1, 1, "relu", t, sizeof t);
                h = t;
            }
            gconv(b, h, e, e, 3, s, e, "relu", u, sizeof u);
            gconv(b, u, e, o, 1, 1, 1, NULL, v, sizeof v);
            if (s == 1 && c == o) {
                char sum[64];
                uniq(b, sum, sizeof sum, "add");
                const char *o_ = sum;
                check(b, pdc_model_add_layer(b->m, sum, "add", 2, (const char *const[]){v, x}, 1, &o_, NULL), sum);
                snprintf(x, sizeof x, "%s", sum);
            } else snprintf(x, sizeof x, "%s", v);
            c = o;
        }
    gconv(b, x, c, 1280, 1, 1, 1, "relu", t, sizeof t);
    op1(b, "global_avgpool", t, u, sizeof u, NULL);
    op1(b, "flatten", u, v, sizeof v, NULL);
    fc(b, v, 1280, 1000, 0, 0, "logits", x, sizeof x);
}

/* Two stacked LSTMs over hw steps: input 256, hidden 512, batch 1; then an fc on the last layer's
 * output sequence flattened per step ([T, 512] -> [T, 256]). */
static void lstm2(builder *b, int steps)
{
    const int in = 256, hid = 512;
    check(b, pdc_model_add_input(b->m, "image", 3, (const int64_t[]){steps, 1, in}), "image");
    const char *x = "image";
    char y[2][64], r[2][64];
    int k = in;
    for (int l = 0; l < 2; l++) {
        char w[64], rw[64];
        uniq(b, w, sizeof w, "lw");
        uniq(b, rw, sizeof rw, "lr");
        int64_t wd[3] = {1, 4 * hid, k}, rd[3] = {1, 4 * hid, hid};
        size_t nw = (size_t)4 * hid * k, nr = (size_t)4 * hid * hid;
        float *wv = malloc((nw > nr ? nw : nr) * sizeof *wv);
        for (size_t i = 0; i < nw; i++) wv[i] = (float)((2.0 * urand(b) - 1.0) * 0.05);
        check(b, pdc_model_add_constant(b->m, w, 3, wd, wv), w);
        for (size_t i = 0; i < nr; i++) wv[i] = (float)((2.0 * urand(b) - 1.0) * 0.05);
        check(b, pdc_model_add_constant(b->m, rw, 3, rd, wv), rw);
        free(wv);
        pdc_attrs *a = NULL;
        check(b, pdc_attrs_create(b->ctx, &a), "attrs");
        if (b->failed) return;
        check(b, pdc_attrs_set_int(a, "hidden_size", hid), "hidden_size");
        uniq(b, y[l], sizeof y[l], "lstm");
        const char *o_ = y[l];
        check(b, pdc_model_add_layer(b->m, y[l], "lstm", 3, (const char *const[]){x, w, rw}, 1, &o_, a), y[l]);
        pdc_attrs_destroy(a);
        check(b, pdc_attrs_create(b->ctx, &a), "attrs");
        if (b->failed) return;
        check(b, pdc_attrs_set_ints(a, "shape", 3, (const int64_t[]){steps, 1, hid}), "shape");
        op1(b, "reshape", y[l], r[l], sizeof r[l], a);
        pdc_attrs_destroy(a);
        x = r[l];
        k = hid;
    }
    pdc_attrs *a = NULL;
    check(b, pdc_attrs_create(b->ctx, &a), "attrs");
    if (b->failed) return;
    char f[64], o[64];
    check(b, pdc_attrs_set_ints(a, "shape", 2, (const int64_t[]){steps, hid}), "shape");
    op1(b, "reshape", x, f, sizeof f, a);
    pdc_attrs_destroy(a);
    fc(b, f, hid, 256, 0, 0, "logits", o, sizeof o);
}

pdc_model *bench_build_model(pdc_context *ctx, const char *name, int hw, const bench_prune *pr)
{
    builder b = {ctx, NULL, pr, 0, 0, 0x2545f4914f6cdd1dull};
    if (pr->variant < 0) b.rng ^= 0x9e3779b97f4a7c15ull * (uint64_t)(-pr->variant);
    if (pdc_model_create(ctx, name, &b.m) != PDC_OK) {
        fprintf(stderr, "bench: %s\n", pdc_context_last_error(ctx));
        return NULL;
    }
    if (!strcmp(name, "resnet18")) resnet(&b, 18, hw);
    else if (!strcmp(name, "resnet50")) resnet(&b, 50, hw);
    else if (!strcmp(name, "vgg16")) vgg16(&b, hw);
    else if (!strcmp(name, "mobilenetv2")) mobilenetv2(&b, hw);
    else if (!strcmp(name, "lstm")) lstm2(&b, hw);
    else {
        fprintf(stderr, "bench: unknown model %s\n", name);
        b.failed = 1;
    }
    if (!b.failed) check(&b, pdc_model_mark_output(b.m, "logits"), "output");
    if (b.failed) {
        pdc_model_destroy(b.m);
        return NULL;
    }
    return b.m;
}
