/*
 * bench_nets.c - torchvision's ResNet-18, VGG-16 (CIFAR-style classifier) and MobileNetV2 for [N, 3, 32, 32]
 * inputs and 10 classes, for the training benchmarks (bench_nets.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_nets.h"

static pdc_context *ctx; /* the builder's, for TRY */

typedef struct rn_builder {
    pdc_model *m;
    int n; /* unique-name counter */
} rn_builder;

static void rn_name(rn_builder *b, char *buf, size_t cap, const char *stem) { snprintf(buf, cap, "%s%d", stem, b->n++); }

static void rn_const(rn_builder *b, const char *name, int rank, const int64_t *dims, float value)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc(n * sizeof *v);
    if (!v) bench_die(PDC_ERR_OUT_OF_MEMORY, name);
    for (size_t i = 0; i < n; i++) v[i] = value;
    TRY(pdc_model_add_constant(b->m, name, rank, dims, v), name);
    free(v);
}

enum { ACT_NONE, ACT_RELU, ACT_RELU6 };

/* conv k x k (no bias; with a bias when there is no batchnorm), stride s, pad k/2, `group` groups, then batchnorm if
 * bn, then the activation act; out: the result's name */
static void conv_act(rn_builder *b, const char *in, int c, int o, int k, int s, int group, int bn_on, int act, char *out,
                     size_t cap)
{
    char w[32], cv[32], g[32], be[32], mu[32], va[32], bn[32], bias[32];
    rn_name(b, w, sizeof w, "conv_w");
    rn_name(b, cv, sizeof cv, "conv");
    rn_const(b, w, 4, (const int64_t[]){o, c / group, k, k}, 0.0f);
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    const int64_t p = k / 2;
    TRY(pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p}), "pads");
    TRY(pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){s, s}), "strides");
    if (group > 1) TRY(pdc_attrs_set_int(a, "group", group), "group");
    if (!bn_on) {
        rn_name(b, bias, sizeof bias, "conv_b");
        const int64_t od = o;
        rn_const(b, bias, 1, &od, 0.0f);
    }
    const char *ci[] = {in, w, bias}, *co[] = {cv};
    TRY(pdc_model_add_layer(b->m, cv, "conv", bn_on ? 2 : 3, ci, 1, co, a), cv);
    pdc_attrs_destroy(a);
    if (!bn_on) {
        snprintf(bn, sizeof bn, "%s", cv);
        goto activation;
    }
    rn_name(b, g, sizeof g, "bn_g");
    rn_name(b, be, sizeof be, "bn_b");
    rn_name(b, mu, sizeof mu, "bn_mean");
    rn_name(b, va, sizeof va, "bn_var");
    rn_name(b, bn, sizeof bn, "bn");
    const int64_t od = o;
    rn_const(b, g, 1, &od, 1.0f);
    rn_const(b, be, 1, &od, 0.0f);
    rn_const(b, mu, 1, &od, 0.0f);
    rn_const(b, va, 1, &od, 1.0f);
    const char *bi[] = {cv, g, be, mu, va}, *bo[] = {bn};
    TRY(pdc_model_add_layer(b->m, bn, "batchnorm", 5, bi, 1, bo, NULL), bn);
activation:
    if (act == ACT_RELU) {
        rn_name(b, out, cap, "relu");
        const char *ri[] = {bn}, *ro[] = {out};
        TRY(pdc_model_add_layer(b->m, out, "relu", 1, ri, 1, ro, NULL), out);
    } else if (act == ACT_RELU6) {
        rn_name(b, out, cap, "relu6");
        const char *ri[] = {bn}, *ro[] = {out};
        TRY(pdc_attrs_create(ctx, &a), "attrs");
        TRY(pdc_attrs_set_float(a, "min", 0.0f), "min");
        TRY(pdc_attrs_set_float(a, "max", 6.0f), "max");
        TRY(pdc_model_add_layer(b->m, out, "clip", 1, ri, 1, ro, a), out);
        pdc_attrs_destroy(a);
    } else {
        snprintf(out, cap, "%s", bn);
    }
}

static void rn_conv_bn(rn_builder *b, const char *in, int c, int o, int k, int s, int relu, char *out, size_t cap)
{
    conv_act(b, in, c, o, k, s, 1, 1, relu ? ACT_RELU : ACT_NONE, out, cap);
}

static void add_layer1(rn_builder *b, const char *op, const char *in, pdc_attrs *a, char *out, size_t cap)
{
    rn_name(b, out, cap, op);
    const char *li[] = {in}, *lo[] = {out};
    TRY(pdc_model_add_layer(b->m, out, op, 1, li, 1, lo, a), out);
}

/* global average pooling, flatten, fc c -> 10 named "logits" */
static void classifier(rn_builder *b, const char *x, int c)
{
    char gp[32], fl[32];
    add_layer1(b, "global_avgpool", x, NULL, gp, sizeof gp);
    add_layer1(b, "flatten", gp, NULL, fl, sizeof fl);
    rn_const(b, "fc.w", 2, (const int64_t[]){10, c}, 0.0f);
    rn_const(b, "fc.b", 1, (const int64_t[]){10}, 0.0f);
    const char *li[] = {fl, "fc.w", "fc.b"}, *lo[] = {"logits"};
    TRY(pdc_model_add_layer(b->m, "fc", "fc", 3, li, 1, lo, NULL), "fc");
    TRY(pdc_model_mark_output(b->m, "logits"), "output");
}

/* torchvision's VGG-16 convolutions (13 3x3 convs with bias and relu, 5 max pools; no batchnorm) with a CIFAR-style
 * classifier: the 512-channel 1x1 map of a 32x32 input averaged and one fc 512 -> 10 */
pdc_model *bench_vgg16(pdc_context *context)
{
    ctx = context;
    static const int cfg[] = {64, 64, -1, 128, 128, -1, 256, 256, 256, -1, 512, 512, 512, -1, 512, 512, 512, -1};
    rn_builder b = {NULL, 0};
    TRY(pdc_model_create(ctx, "vgg16", &b.m), "model");
    TRY(pdc_model_add_input(b.m, "image", 4, (const int64_t[]){1, 3, 32, 32}), "input");
    char x[32] = "image", t[32];
    int c = 3;
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        if (cfg[i] < 0) {
            pdc_attrs *a;
            TRY(pdc_attrs_create(ctx, &a), "attrs");
            TRY(pdc_attrs_set_ints(a, "kernel_shape", 2, (const int64_t[]){2, 2}), "attrs");
            TRY(pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){2, 2}), "attrs");
            add_layer1(&b, "maxpool", x, a, t, sizeof t);
            pdc_attrs_destroy(a);
        } else {
            conv_act(&b, x, c, cfg[i], 3, 1, 1, 0, ACT_RELU, t, sizeof t);
            c = cfg[i];
        }
        snprintf(x, sizeof x, "%s", t);
    }
    classifier(&b, x, c);
    return b.m;
}

/* torchvision's MobileNetV2 (width 1.0; inverted residual blocks: 1x1 expand, 3x3 depthwise, 1x1 project, batchnorm
 * after each, relu6 after the first two, residual add where the shape stays) for 10 classes on 32x32 inputs */
pdc_model *bench_mobilenetv2(pdc_context *context)
{
    ctx = context;
    static const int cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}}; /* t, c, n, s */
    rn_builder b = {NULL, 0};
    TRY(pdc_model_create(ctx, "mobilenetv2", &b.m), "model");
    TRY(pdc_model_add_input(b.m, "image", 4, (const int64_t[]){1, 3, 32, 32}), "input");
    char x[32], t[32], u[32], v[32];
    conv_act(&b, "image", 3, 32, 3, 2, 1, 1, ACT_RELU6, x, sizeof x);
    int c = 32;
    for (int i = 0; i < 7; i++) {
        for (int j = 0; j < cfg[i][2]; j++) {
            const int s = j == 0 ? cfg[i][3] : 1, hid = c * cfg[i][0], o = cfg[i][1];
            if (cfg[i][0] != 1)
                conv_act(&b, x, c, hid, 1, 1, 1, 1, ACT_RELU6, t, sizeof t);
            else
                snprintf(t, sizeof t, "%s", x);
            conv_act(&b, t, hid, hid, 3, s, hid, 1, ACT_RELU6, u, sizeof u);
            conv_act(&b, u, hid, o, 1, 1, 1, 1, ACT_NONE, v, sizeof v);
            if (s == 1 && c == o) {
                char sum[32];
                rn_name(&b, sum, sizeof sum, "add");
                const char *ai[] = {v, x}, *ao[] = {sum};
                TRY(pdc_model_add_layer(b.m, sum, "add", 2, ai, 1, ao, NULL), sum);
                snprintf(x, sizeof x, "%s", sum);
            } else {
                snprintf(x, sizeof x, "%s", v);
            }
            c = o;
        }
    }
    conv_act(&b, x, c, 1280, 1, 1, 1, 1, ACT_RELU6, t, sizeof t);
    classifier(&b, t, 1280);
    return b.m;
}

pdc_model *bench_resnet18(pdc_context *context)
{
    ctx = context;
    rn_builder b = {NULL, 0};
    TRY(pdc_model_create(ctx, "resnet18", &b.m), "model");
    TRY(pdc_model_add_input(b.m, "image", 4, (const int64_t[]){1, 3, 32, 32}), "input");
    char x[32], t[32], u[32], sc[32], s2[32];
    rn_conv_bn(&b, "image", 3, 64, 7, 2, 1, t, sizeof t);
    pdc_attrs *a;
    TRY(pdc_attrs_create(ctx, &a), "attrs");
    TRY(pdc_attrs_set_ints(a, "kernel_shape", 2, (const int64_t[]){3, 3}), "attrs");
    TRY(pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){2, 2}), "attrs");
    TRY(pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){1, 1, 1, 1}), "attrs");
    {
        const char *pi[] = {t}, *po[] = {"pool"};
        TRY(pdc_model_add_layer(b.m, "maxpool", "maxpool", 1, pi, 1, po, a), "maxpool");
    }
    pdc_attrs_destroy(a);
    snprintf(x, sizeof x, "pool");
    int c = 64;
    for (int stage = 0; stage < 4; stage++) {
        const int planes = 64 << stage;
        for (int i = 0; i < 2; i++) {
            const int s = stage > 0 && i == 0 ? 2 : 1;
            rn_conv_bn(&b, x, c, planes, 3, s, 1, t, sizeof t);
            rn_conv_bn(&b, t, planes, planes, 3, 1, 0, u, sizeof u);
            if (s != 1 || c != planes)
                rn_conv_bn(&b, x, c, planes, 1, s, 0, sc, sizeof sc);
            else
                snprintf(sc, sizeof sc, "%s", x);
            rn_name(&b, s2, sizeof s2, "add");
            const char *ai[] = {u, sc}, *ao[] = {s2};
            TRY(pdc_model_add_layer(b.m, s2, "add", 2, ai, 1, ao, NULL), s2);
            rn_name(&b, x, sizeof x, "relu");
            const char *ri[] = {s2}, *ro[] = {x};
            TRY(pdc_model_add_layer(b.m, x, "relu", 1, ri, 1, ro, NULL), x);
            c = planes;
        }
    }
    {
        const char *gi[] = {x}, *go[] = {"gap"}, *fi[] = {"gap"}, *fo[] = {"flat"};
        TRY(pdc_model_add_layer(b.m, "gap", "global_avgpool", 1, gi, 1, go, NULL), "gap");
        TRY(pdc_model_add_layer(b.m, "flatten", "flatten", 1, fi, 1, fo, NULL), "flatten");
    }
    rn_const(&b, "fc.w", 2, (const int64_t[]){10, 512}, 0.0f);
    rn_const(&b, "fc.b", 1, (const int64_t[]){10}, 0.0f);
    const char *li[] = {"flat", "fc.w", "fc.b"}, *lo[] = {"logits"};
    TRY(pdc_model_add_layer(b.m, "fc", "fc", 3, li, 1, lo, NULL), "fc");
    TRY(pdc_model_mark_output(b.m, "logits"), "output");
    return b.m;
}
