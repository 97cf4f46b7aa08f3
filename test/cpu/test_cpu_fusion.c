/*
 * test_cpu_fusion.c - the "cpu" target's epilogues against the reference backend: a residual add and
 * a relu, an activation layer and a batchnorm fused into each conv family's epilogue (with and without
 * the memory plan, and where they must not be: an activation of the conv's own, hardsigmoid, statistics
 * that are not constants, shared intermediates, graph outputs, broadcasting, memory shared with the
 * input), and a bias add and an activation fused into fc and matmul on each of their kernels.
 */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdlib.h>

#include "backends/cpu/conv/conv.h"
#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* ------------------------------------------------------------------ conv epilogues */

START_TEST(conv_residual_add_relu_fused)
{
    /* conv -> add(shortcut) -> relu: the conv's epilogue adds the shortcut and applies the relu; the
     * add and relu layers do nothing. Every conv family: pattern rows (batch 2), pattern flat 7x7,
     * batch 2 for each family, dense 1x1 (a ResNet downsampling block: the 1x1 conv runs second and takes the 3x3's output
     * as its residual; 6x6 flat and 20x20 along rows), dense vectorised over output channels, the
     * channel-major pattern kernel (a downsampling block whose strided 3x3 runs second: 10x10 along
     * rows, 7x7 flat), and with the memory plan applied */
    static const struct {
        const char *kind;
        int64_t n, c, h;
        int plan; /* 1: the memory plan applied; 2: and a stem conv, so the block input is in the arena */
    } cases[] = {{"pattern", 2, 16, 20, 0}, {"pattern", 1, 16, 7, 0}, {"downsample", 2, 16, 12, 0},
                 {"dense", 2, 32, 14, 0},   {"pattern", 1, 16, 20, 1}, {"downsample", 1, 16, 12, 1},
                 {"downsample", 2, 16, 40, 0}, {"downsample", 1, 16, 16, 2}, {"strided", 2, 16, 20, 0},
                 {"strided", 1, 16, 14, 1}};
    setenv("PDC_CONV_WINO", "0", 1); /* the 14x14 dense case is the output-channel kernel's here (Winograd: test_cpu_conv) */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("residual");
        int64_t c = cases[q].c, h = cases[q].h;
        input("x", DIMS(cases[q].n, c, h, h));
        constant_rand("b1", DIMS(c), 0.2f, 3);
        constant_rand("b2", DIMS(c), 0.2f, 4);
        const char *fused_conv = "c2", *xin = "x";
        if (cases[q].plan == 2) {
            /* a block input in the arena, dying at the 1x1 conv: the plan must not hand its memory
             * to the block's result, which the fused conv writes while it reads that input */
            pattern_weight("w0", c, c, 40);
            layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "x0", NAMES("x", "w0", "b1"));
            xin = "x0";
        }
        if (!strcmp(cases[q].kind, "downsample")) {
            pattern_weight("w1", c, c, (uint32_t)q + 1);
            constant_rand("w2", DIMS(c, c, 1, 1), 0.3f, 5);
            layer("conv", conv_attrs(1, 1, 1, 2, 2, 1, "relu"), "a", NAMES(xin, "w1", "b1"));
            layer("conv", set_ints(attrs(), "strides", DIMS(2, 2)), "c2", NAMES(xin, "w2", "b2"));
            layer("add", NULL, "s", NAMES("a", "c2"));
        } else if (!strcmp(cases[q].kind, "strided")) {
            pattern_weight("w1", c, c, (uint32_t)q + 1);
            pattern_weight("w2", c, c, (uint32_t)q + 2);
            constant_rand("w3", DIMS(c, c, 1, 1), 0.3f, 8);
            layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "a", NAMES(xin, "w1", "b1"));
            layer("conv", set_ints(attrs(), "strides", DIMS(2, 2)), "d", NAMES(xin, "w3", "b2"));
            layer("conv", conv_attrs(1, 1, 1, 2, 2, 1, NULL), "c2", NAMES("a", "w2", "b2"));
            layer("add", NULL, "s", NAMES("c2", "d"));
        } else {
            if (!strcmp(cases[q].kind, "dense")) {
                constant_rand("w1", DIMS(c, c, 3, 3), 0.3f, 6);
                constant_rand("w2", DIMS(c, c, 3, 3), 0.3f, 7);
            } else {
                pattern_weight("w1", c, c, (uint32_t)q + 1);
                pattern_weight("w2", c, c, (uint32_t)q + 2);
            }
            layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "a", NAMES("x", "w1", "b1"));
            layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c2", NAMES("a", "w2", "b2"));
            layer("add", NULL, "s", NAMES("c2", "x"));
        }
        layer("relu", NULL, "y", NAMES("s"));
        output("y");
        if (cases[q].plan) ck_assert_ok(ctx, pdc_model_transform(mdl, "plan", NULL));
        char desc[64];
        snprintf(desc, sizeof desc, "residual case %zu (%s)", q, cases[q].kind);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 31);
        /* with the plan too: it keeps the fused result out of the conv's input (passes/plan.c) */
        ck_assert_kernel(p, fused_conv, "+ add 's' + relu 'y' in the epilogue");
        ck_assert_kernel(p, "s", "fused into the epilogue of c2");
        ck_assert_kernel(p, "y", "fused into the epilogue of c2");
        if (!strcmp(cases[q].kind, "dense")) ck_assert_kernel(p, fused_conv, "output channels vectorised");
        if (!strcmp(cases[q].kind, "strided")) ck_assert_kernel(p, fused_conv, "channel-major");
        if ((q == 1 || q == 9) && !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, fused_conv, "flat vector");
        pdc_program_destroy(p);
    }
    unsetenv("PDC_CONV_WINO");
}
END_TEST

START_TEST(conv_residual_fusion_limits)
{
    /* what is not fused: a conv with an activation of its own (the add comes first), a conv output
     * that is also a graph output, a relu whose input is read elsewhere (the add alone is fused),
     * an add of operands of different shapes (broadcasting), PDC_CPU_FUSE=0 */
    for (int q = 0; q < 5; q++) {
        fresh_model("limits");
        input("x", DIMS(1, 16, 10, 10));
        pattern_weight("w", 16, 16, (uint32_t)q + 11);
        constant_rand("b", DIMS(16), 0.2f, 2);
        constant_rand("k", DIMS(1, 16, 1, 1), 0.5f, 3);
        layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, q == 0 ? "relu" : NULL), "c", NAMES("x", "w", "b"));
        layer("add", NULL, "s", NAMES("c", q == 3 ? "k" : "x"));
        layer("relu", NULL, "y", NAMES("s"));
        output("y");
        if (q == 1) output("c");
        if (q == 2) output("s");
        if (q == 4) setenv("PDC_CPU_FUSE", "0", 1);
        char desc[64];
        snprintf(desc, sizeof desc, "limits case %d", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 41);
        unsetenv("PDC_CPU_FUSE");
        if (q == 2) {
            ck_assert_kernel(p, "s", "fused into the epilogue of c");
            ck_assert_kernel(p, "y", "jit elementwise relu");
        } else {
            ck_assert_kernel(p, "s", "jit elementwise add");
        }
        pdc_program_destroy(p);
    }
    /* the memory plan's sharing: the tensor written may not share memory with the conv's input, and
     * shares the residual's only exactly. x -> a = conv(x), b = conv(x), c = conv(b), y = relu(c + a):
     * conv c (layer 2) reads b and takes a as its residual */
    fresh_model("alias");
    input("x", DIMS(1, 16, 10, 10));
    pattern_weight("w", 16, 16, 21);
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "a", NAMES("x", "w"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "b", NAMES("x", "w"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c", NAMES("b", "w"));
    layer("add", NULL, "s", NAMES("c", "a"));
    layer("relu", NULL, "y", NAMES("s"));
    output("y");
    const ir_model *m = mdl;
    size_t nt = m->n_tensors, off[16], num[16];
    ck_assert_uint_le(nt, 16);
    int ta = -1, tb = -1, ty = -1;
    for (size_t t = 0; t < nt; t++) {
        off[t] = m->tensors[t].kind == IR_TENSOR_ACT ? 2000 * t : CPU_NO_SLOT; /* disjoint */
        num[t] = 1600;
        if (!strcmp(m->tensors[t].name, "a")) ta = (int)t;
        if (!strcmp(m->tensors[t].name, "b")) tb = (int)t;
        if (!strcmp(m->tensors[t].name, "y")) ty = (int)t;
    }
    ir_epilogue r;
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &r), 1);
    ck_assert_int_eq(r.residual, ta);
    ck_assert_int_eq(r.out, ty);
    ck_assert_int_eq(r.n_layers, 2);
    ck_assert_int_eq(r.act.act, IR_ACT_RELU);
    size_t keep = off[ty];
    off[ty] = off[ta]; /* the residual's memory exactly: element by element in place */
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &r), 1);
    off[ty] = off[ta] + 400; /* part of it: an element would be written before another reads it */
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &r), 0);
    off[ty] = off[tb] + 800; /* the conv's input, read until the conv ends */
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &r), 0);
    off[ty] = keep;
    ck_assert_int_eq(cpu_fuse_epilogue(m, 0, off, num, &r), 0); /* conv a feeds an add two layers on */
}
END_TEST

/* mdl := conv (pattern-sparse or dense, 3x3 pad 1, stride s) of x (1 x c x h x h) into "c", then the
 * activation layer `act` into "y"; clip with bounds -0.5 / 0.75, leaky_relu with slope 0.2. */
static void conv_then_activation(const char *act, int64_t c, int64_t h, int64_t s, int dense, uint32_t seed)
{
    fresh_model("conv_act");
    input("x", DIMS(1, c, h, h));
    if (dense) constant_rand("w", DIMS(c, c, 3, 3), 0.3f, seed);
    else pattern_weight("w", c, c, seed);
    constant_rand("b", DIMS(c), 0.2f, seed + 1);
    layer("conv", conv_attrs(1, 1, 1, s, s, 1, NULL), "c", NAMES("x", "w", "b"));
    pdc_attrs *a = attrs();
    if (!strcmp(act, "clip")) {
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "min", -0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "max", 0.75f));
    }
    if (!strcmp(act, "leaky_relu")) ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.2f));
    layer(act, a, "y", NAMES("c"));
}

START_TEST(conv_activation_fused)
{
    /* an activation layer right after a conv (an imported model that was not canonicalized) runs in
     * the conv's epilogue, in every conv family: the pattern kernel along rows and on a flat plane,
     * channel-major (stride 2), dense along rows and vectorised over output channels */
    static const struct {
        const char *act, *family;
        int64_t c, h, s;
        int dense;
    } cases[] = {{"relu", "jit pattern-sparse conv 3x3", 16, 20, 1, 0},  {"clip", "flat vector", 16, 7, 1, 0},
                 {"leaky_relu", "channel-major", 16, 20, 2, 0}, {"clip", "output channels vectorised", 32, 14, 1, 1},
                 {"leaky_relu", "jit dense conv 3x3, tile", 8, 20, 1, 1}, {"sigmoid", "jit pattern-sparse conv 3x3", 16, 20, 1, 0},
                 {"tanh", "flat vector", 16, 7, 1, 0},         {"sigmoid", "channel-major", 16, 20, 2, 0},
                 {"tanh", "output channels vectorised", 32, 14, 1, 1}, {"sigmoid", "jit dense conv 3x3, tile", 8, 20, 1, 1},
                 {"hardswish", "jit pattern-sparse conv 3x3", 16, 20, 1, 0}, {"hardswish", "flat vector", 16, 7, 1, 0},
                 {"hardswish", "channel-major", 16, 20, 2, 0}, {"hardswish", "output channels vectorised", 32, 14, 1, 1},
                 {"hardswish", "jit dense conv 3x3, tile", 8, 20, 1, 1}};
    setenv("PDC_CONV_WINO", "0", 1); /* the 14x14 dense cases are the output-channel kernel's here */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        conv_then_activation(cases[q].act, cases[q].c, cases[q].h, cases[q].s, cases[q].dense, (uint32_t)q + 61);
        output("y");
        char desc[64], want[64];
        snprintf(desc, sizeof desc, "conv + %s, case %zu", cases[q].act, q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 71);
        snprintf(want, sizeof want, " + %s 'y' in the epilogue", cases[q].act);
        ck_assert_kernel(p, "c", want);
        ck_assert_kernel(p, "y", "fused into the epilogue of c");
        if (strcmp(cases[q].family, "flat vector") || !strcmp(expected_isa(), "avx512")) /* flat: avx512 */
            ck_assert_kernel(p, "c", cases[q].family);
        pdc_program_destroy(p);
    }
    /* what is not fused: an elementwise op that is no activation kind (hardsigmoid), a conv output
     * read by a second layer too, a conv output that is also a graph output */
    for (int q = 0; q < 3; q++) {
        conv_then_activation(q == 0 ? "hardsigmoid" : "relu", 16, 10, 1, 0, (uint32_t)q + 81);
        if (q == 1) layer("relu", NULL, "z", NAMES("c"));
        output("y");
        if (q == 1) output("z");
        if (q == 2) output("c");
        pdc_program *p = check_matches_ref("conv + activation, not fused", (uint32_t)q + 91);
        ck_assert_kernel_lacks(p, q, "y", "fused");
        ck_assert_kernel_lacks(p, q, "c", "epilogue");
        pdc_program_destroy(p);
    }
    unsetenv("PDC_CONV_WINO");
}
END_TEST

/* Layer `out` := batchnorm(in) over c (<= 64) channels: constants out.scale (0.5 to 1.5), out.bias,
 * out.mean (or graph input `mean` if not NULL), out.var (0 to 1). */
static void batchnorm_layer(const char *out, const char *in, int64_t c, uint32_t seed, const char *mean)
{
    static const char *const part[4] = {"scale", "bias", "mean", "var"};
    char names[4][48];
    const char *ins[5] = {in, names[0], names[1], names[2], names[3]};
    float v[64];
    ck_assert_int_le(c, 64);
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s.%s", out, part[i]);
        test_fill_random(v, (size_t)c, seed + (uint32_t)i);
        for (int64_t k = 0; k < c; k++) v[k] = i == 0 ? 1.0f + 0.5f * v[k] : i == 3 ? fabsf(v[k]) : v[k];
        if (i == 2 && mean) ins[3] = mean;
        else ck_assert_ok(ctx, pdc_model_add_constant(mdl, names[i], DIMS(c), v));
    }
    layer("batchnorm", NULL, out, 5, ins);
}

/* mdl := x [1, c, h, h] -> conv 3x3 c (stride s, pads 1, `group` groups; bias if `bias`, filters
 * reordered if `perm`) -> batchnorm n -> add(n, x) s if `residual` -> activation y if `act` (not NULL). */
static void conv_then_batchnorm(int64_t c, int64_t h, int64_t s, int64_t group, int dense, int bias, int perm,
                                int residual, const char *act, uint32_t seed)
{
    fresh_model("conv_bn");
    input("x", DIMS(1, c, h, h));
    if (dense) constant_rand("w", DIMS(c, c / group, 3, 3), 0.3f, seed);
    else pattern_weight("w", c, c / group, seed);
    if (bias) constant_rand("b", DIMS(c), 0.2f, seed + 1);
    pdc_attrs *a = conv_case_attrs(1, s, s, 1, NULL, group, c, perm);
    if (bias) layer("conv", a, "c", NAMES("x", "w", "b"));
    else layer("conv", a, "c", NAMES("x", "w"));
    batchnorm_layer("n", "c", c, seed + 2, NULL);
    if (residual) layer("add", NULL, "s", NAMES("n", "x"));
    if (act) {
        a = attrs();
        if (!strcmp(act, "leaky_relu")) ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.2f));
        layer(act, a, "y", 1, (const char *const[]){residual ? "s" : "n"});
    }
}

START_TEST(conv_batchnorm_fused)
{
    /* a batchnorm right after a conv (an imported model that was not canonicalized) is folded into
     * the weights the conv packs, in every conv family, with or without a conv bias, with
     * reordered filters (out_perm, group 1 only: the batchnorm's channel of each stored filter), grouped and
     * depthwise, alone or followed by a residual add and an activation */
    static const struct {
        const char *family, *act;
        int64_t c, h, s, group;
        int dense, bias, perm, residual;
        const char *want;
    } cases[] = {
        {"jit pattern-sparse conv 3x3", "relu", 16, 20, 1, 1, 0, 1, 0, 0, " + batchnorm 'n' + relu 'y' in the epilogue"},
        {"flat vector", NULL, 16, 7, 1, 1, 0, 0, 0, 0, " + batchnorm 'n' in the epilogue"},
        {"channel-major", "leaky_relu", 16, 20, 2, 1, 0, 1, 1, 0, " + batchnorm 'n' + leaky_relu 'y' in the epilogue"},
        {"output channels vectorised", "relu", 32, 14, 1, 1, 1, 1, 1, 1, " + batchnorm 'n' + add 's' + relu 'y' in the epilogue"},
        {"jit dense conv 3x3, tile", NULL, 8, 20, 1, 1, 1, 1, 0, 1, " + batchnorm 'n' + add 's' in the epilogue"},
        {"jit pattern-sparse conv 3x3", "relu", 16, 20, 1, 2, 0, 1, 0, 1, " + batchnorm 'n' + add 's' + relu 'y' in the epilogue"},
        {"depthwise", "relu", 16, 20, 1, 16, 1, 1, 0, 0, " + batchnorm 'n' + relu 'y' in the epilogue"},
        {"by Winograd F(4x4, 3x3)", "relu", 32, 28, 1, 1, 1, 1, 1, 1, " + batchnorm 'n' + add 's' + relu 'y' in the epilogue"},
    };
    const float tol = bc_tolerance;
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        /* Winograd (AVX-512, by its default rules) only where the case names it; it rounds
         * otherwise (test_cpu_conv) */
        const int wino = strstr(cases[q].family, "Winograd") != NULL;
        if (wino) unsetenv("PDC_CONV_WINO");
        else setenv("PDC_CONV_WINO", "0", 1);
        bc_tolerance = wino ? 3e-5f : tol;
        if (wino && strcmp(expected_isa(), "avx512")) continue;
        conv_then_batchnorm(cases[q].c, cases[q].h, cases[q].s, cases[q].group, cases[q].dense, cases[q].bias,
                            cases[q].perm, cases[q].residual, cases[q].act, (uint32_t)q + 121);
        output(cases[q].act ? "y" : cases[q].residual ? "s" : "n");
        char desc[64];
        snprintf(desc, sizeof desc, "conv + batchnorm, case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 131);
        ck_assert_kernel(p, "c", cases[q].want);
        ck_assert_kernel(p, "n", "fused into the epilogue of c");
        if (q != 1 || !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "c", cases[q].family); /* flat: avx512 */
        pdc_program_destroy(p);
    }
    bc_tolerance = tol;
    unsetenv("PDC_CONV_WINO");
    /* what is not fused: statistics that are not constants (the mean a graph input), a conv output
     * that a second layer reads too; a batchnorm output that is a graph output ends the epilogue */
    for (int q = 0; q < 3; q++) {
        fresh_model("conv_bn");
        input("x", DIMS(1, 16, 10, 10));
        if (q == 0) input("mean", DIMS(16));
        pattern_weight("w", 16, 16, (uint32_t)q + 141);
        layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c", NAMES("x", "w"));
        batchnorm_layer("n", "c", 16, (uint32_t)q + 151, q == 0 ? "mean" : NULL);
        layer("relu", NULL, "y", NAMES("n"));
        if (q == 1) layer("relu", NULL, "z", NAMES("c"));
        output("y");
        if (q == 1) output("z");
        if (q == 2) output("n");
        pdc_program *p = check_matches_ref("conv + batchnorm, not fused", (uint32_t)q + 161);
        if (q == 2) {
            ck_assert_kernel(p, "c", " + batchnorm 'n' in the epilogue");
        } else {
            ck_assert_kernel_lacks(p, q, "c", "epilogue");
            ck_assert_kernel_lacks(p, q, "n", "fused");
        }
        ck_assert_kernel_lacks(p, q, "y", "fused");
        if (q == 0) ck_assert_kernel(p, "n", "ref fallback: batchnorm statistics not constant");
        pdc_program_destroy(p);
    }
    /* a ResNet block as exported (conv -> batchnorm -> relu -> conv -> batchnorm -> add -> relu)
     * with the memory plan: both epilogues fused */
    fresh_model("block");
    input("x", DIMS(1, 16, 12, 12));
    pattern_weight("w1", 16, 16, 171);
    pattern_weight("w2", 16, 16, 172);
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c1", NAMES("x", "w1"));
    batchnorm_layer("n1", "c1", 16, 173, NULL);
    layer("relu", NULL, "r1", NAMES("n1"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c2", NAMES("r1", "w2"));
    batchnorm_layer("n2", "c2", 16, 174, NULL);
    layer("add", NULL, "s", NAMES("n2", "r1"));
    layer("relu", NULL, "y", NAMES("s"));
    output("y");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "plan", NULL));
    check_kernels("planned block", 181,
                  BC_KERNELS({"c1", " + batchnorm 'n1' + relu 'r1' in the epilogue"},
                             {"c2", " + batchnorm 'n2' + add 's' + relu 'y' in the epilogue"}));
    ir_epilogue e;
    ck_assert_int_eq(ir_layer_epilogue(mdl, 3, &e), 1);
    ck_assert_int_eq(e.bn, 4);
    ck_assert_int_eq(e.n_layers, 3);
    ck_assert_int_eq(e.residual, mdl->layers[2].outputs[0]);
    ck_assert_int_eq(e.act.act, IR_ACT_RELU);
}
END_TEST

START_TEST(conv_activation_fused_planned)
{
    /* a chain conv -> relu -> conv -> clip, then a residual block ending in add -> leaky_relu, with the
     * memory plan: each activation's output is planned as live from its conv on (passes/plan.c), so
     * it never takes the memory of the conv's input, which dies at the conv; fused all the same */
    fresh_model("chain");
    input("x", DIMS(1, 16, 12, 12));
    pattern_weight("w1", 16, 16, 101);
    pattern_weight("w2", 16, 16, 102);
    pattern_weight("w3", 16, 16, 103);
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c1", NAMES("x", "w1"));
    layer("relu", NULL, "r1", NAMES("c1"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c2", NAMES("r1", "w2"));
    layer("clip", set_float(set_float(attrs(), "min", 0.0f), "max", 0.5f), "r2", NAMES("c2"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c3", NAMES("r2", "w3"));
    layer("add", NULL, "s", NAMES("c3", "r2"));
    layer("leaky_relu", set_float(attrs(), "alpha", 0.1f), "y", NAMES("s"));
    output("y");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "plan", NULL));
    check_kernels("planned chain", 111,
                  BC_KERNELS({"c1", " + relu 'r1' in the epilogue"},
                             {"c2", " + clip 'r2' in the epilogue"},
                             {"c3", " + add 's' + leaky_relu 'y' in the epilogue"}));
    /* the sharing, checked directly (layers: c1 r1 c2 r2 c3 s y): the activation's output may not
     * share memory with the conv's input */
    const ir_model *m = mdl;
    size_t nt = m->n_tensors, off[16], num[16];
    ck_assert_uint_le(nt, 16);
    for (size_t t = 0; t < nt; t++) {
        off[t] = m->tensors[t].kind == IR_TENSOR_ACT ? 4000 * t : CPU_NO_SLOT; /* disjoint */
        num[t] = 16 * 144;
    }
    int r1 = m->layers[1].outputs[0], r2 = m->layers[3].outputs[0];
    ck_assert_int_eq(m->layers[2].inputs[0], r1);
    ir_epilogue e;
    ck_assert_int_eq(cpu_fuse_epilogue(m, 0, off, num, &e), 1);
    ck_assert_int_eq(e.residual, -1);
    ck_assert_int_eq(e.out, r1);
    ck_assert_int_eq(e.n_layers, 1);
    ck_assert_int_eq(e.act.act, IR_ACT_RELU);
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &e), 1);
    ck_assert_int_eq(e.out, r2);
    ck_assert_int_eq(e.act.act, IR_ACT_CLIP);
    ck_assert(e.act.act_min == 0.0f && e.act.act_max == 0.5f);
    off[r2] = off[r1] + 16; /* r2 over part of r1, which conv c2 reads until it ends */
    ck_assert_int_eq(cpu_fuse_epilogue(m, 2, off, num, &e), 0);
    ck_assert_int_eq(cpu_fuse_epilogue(m, 1, off, num, &e), 0); /* a relu, not a conv */
}
END_TEST

/* ------------------------------------------------------------------ fc and matmul epilogues */

START_TEST(product_epilogue_fused)
{
    /* an fc or a matmul, then an add of a constant along the last axis (a bias: PyTorch's nn.Linear on
     * a 3-D input exports MatMul -> Add), then an activation: each kernel family takes them */
    /* own_bias: an fc's own bias, 1 a constant, 2 a graph input; w_input: a matmul's second operand
     * a graph input [2, 40, 24] (a product per batch) */
    static const struct {
        const char *op, *act;
        int rows, sparse, bias_rank, bias_first, own_bias, w_input;
        const char *want;
    } cases[] = {
        {"matmul", "relu", 12, 0, 1, 0, 0, 0, "jit dense matmul for 12 rows"},
        {"matmul", "tanh", 12, 1, 3, 1, 0, 0, "jit block-sparse matmul"},
        {"matmul", NULL, 40, 0, 2, 0, 0, 0, "blas sgemm 40x24x40"},
        {"matmul", "sigmoid", 40, 1, 1, 0, 0, 0, "jit block-sparse matmul"},
        {"matmul", "clip", 12, 0, 1, 1, 0, 1, "blas sgemm 6x24x40, batched"},
        {"fc", "hardswish", 1, 0, 1, 0, 1, 0, "blas sgemm/sgemv"},
        {"fc", "leaky_relu", 5, 1, 2, 1, 1, 0, "jit block-sparse fc"},
        {"fc", NULL, 6, 0, 1, 0, 0, 0, "jit dense fc for batch 6"},
        {"fc", "relu", 40, 0, 1, 0, 2, 0, "blas sgemm 40x24x40"},
    };
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("product");
        int mm = !strcmp(cases[q].op, "matmul");
        int64_t rows = cases[q].rows;
        if (mm) input("x", DIMS(2, rows / 2, 40)); /* rows even */
        else input("x", DIMS(rows, 40));
        /* a matmul's weights [in, out], an fc's [out, in] */
        int64_t wr = mm ? 40 : 24, wc = mm ? 24 : 40;
        if (cases[q].w_input) input("w", DIMS(2, wr, wc));
        else if (cases[q].sparse) constant_pruned("w", DIMS(wr, wc), 1, 4, 2, 30, (uint32_t)q);
        else constant_rand("w", DIMS(wr, wc), 0.2f, (uint32_t)q + 3);
        if (cases[q].own_bias == 1) constant_rand("fb", DIMS(24), 0.5f, (uint32_t)q + 5);
        if (cases[q].own_bias == 2) input("fb", DIMS(24));
        if (cases[q].bias_rank == 1) constant_rand("b", DIMS(24), 0.5f, (uint32_t)q + 7);
        else if (cases[q].bias_rank == 2) constant_rand("b", DIMS(1, 24), 0.5f, (uint32_t)q + 7);
        else constant_rand("b", DIMS(1, 1, 24), 0.5f, (uint32_t)q + 7);
        if (cases[q].own_bias) layer(cases[q].op, NULL, "p", NAMES("x", "w", "fb"));
        else layer(cases[q].op, NULL, "p", NAMES("x", "w"));
        if (cases[q].bias_first) layer("add", NULL, "s", NAMES("b", "p"));
        else layer("add", NULL, "s", NAMES("p", "b"));
        pdc_attrs *a = NULL;
        if (cases[q].act && !strcmp(cases[q].act, "leaky_relu")) {
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.2f));
        } else if (cases[q].act && !strcmp(cases[q].act, "clip")) {
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "min", -0.3f));
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "max", 0.6f));
        }
        if (cases[q].act) layer(cases[q].act, a, "y", NAMES("s"));
        output(cases[q].act ? "y" : "s");
        char desc[64], want[96];
        snprintf(desc, sizeof desc, "%s + add + %s, case %zu", cases[q].op, cases[q].act ? cases[q].act : "-", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 191);
        ck_assert_kernel(p, "p", cases[q].want);
        if (cases[q].act) snprintf(want, sizeof want, " + add 's' + %s 'y' in the epilogue", cases[q].act);
        else snprintf(want, sizeof want, " + add 's' in the epilogue");
        ck_assert_kernel(p, "p", want);
        ck_assert_kernel(p, "s", "fused into the epilogue of p");
        pdc_program_destroy(p);
    }
    /* not fused: an add of a graph input, of a constant that is not along the last axis only ([M, N];
     * after an fc and after a matmul), of a product that a second layer reads too, after an fc with
     * an activation of its own */
    for (int q = 0; q < 5; q++) {
        fresh_model("product");
        input("x", DIMS(4, 40));
        int64_t wr = q == 4 ? 40 : 24, wc = q == 4 ? 24 : 40; /* a matmul's [in, out], an fc's [out, in] */
        constant_rand("w", DIMS(wr, wc), 0.2f, 9);
        if (q == 0) input("b", DIMS(24));
        else if (q == 1 || q == 4) constant_rand("b", DIMS(4, 24), 0.5f, 10);
        else constant_rand("b", DIMS(24), 0.5f, 10);
        pdc_attrs *a = NULL;
        if (q == 3) {
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
        }
        layer(q == 4 ? "matmul" : "fc", a, "p", NAMES("x", "w"));
        layer("add", NULL, "s", NAMES("p", "b"));
        layer("relu", NULL, "y", NAMES("s"));
        output("y");
        if (q == 2) {
            layer("sigmoid", NULL, "z", NAMES("p"));
            output("z");
        }
        pdc_program *p = check_matches_ref("fc + add, not fused", (uint32_t)q + 201);
        ck_assert_kernel_lacks(p, q, "p", "epilogue");
        ck_assert_kernel(p, "s", "jit elementwise add");
        pdc_program_destroy(p);
    }
    /* with the memory plan: the add's output planned away from the product's input */
    fresh_model("linear");
    input("x", DIMS(2, 8, 64));
    constant_rand("w1", DIMS(64, 64), 0.2f, 11);
    constant_rand("b1", DIMS(64), 0.5f, 12);
    constant_pruned("w2", DIMS(64, 64), 1, 4, 4, 25, 13);
    constant_rand("b2", DIMS(64), 0.5f, 14);
    layer("relu", NULL, "r", NAMES("x"));
    layer("matmul", NULL, "p1", NAMES("r", "w1"));
    layer("add", NULL, "s1", NAMES("p1", "b1"));
    layer("relu", NULL, "y1", NAMES("s1"));
    layer("matmul", NULL, "p2", NAMES("y1", "w2"));
    layer("add", NULL, "y", NAMES("p2", "b2"));
    output("y");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "plan", NULL));
    check_kernels("planned linear layers", 211,
                  BC_KERNELS({"p1", " + add 's1' + relu 'y1' in the epilogue"}, {"p2", " + add 'y' in the epilogue"}));
    ir_epilogue e;
    ck_assert_int_eq(ir_layer_epilogue(mdl, 1, &e), 1);
    ck_assert_int_eq(e.bn, -1);
    ck_assert_int_eq(e.residual, -1);
    ck_assert_int_eq(e.n_layers, 2);
    ck_assert_str_eq(mdl->tensors[e.bias].name, "b1");
    ck_assert_int_eq(e.act.act, IR_ACT_RELU);
    /* a memory plan (say, saved with an older model) that gives the epilogue's output the memory of
     * the product's second operand, an activation: refused (the product reads it until it ends) */
    fresh_model("qk");
    input("q", DIMS(4, 40));
    input("k", DIMS(40, 24));
    layer("relu", NULL, "kr", NAMES("k"));
    layer("matmul", NULL, "p", NAMES("q", "kr"));
    layer("relu", NULL, "y", NAMES("p"));
    output("y");
    size_t off[8], num[8];
    ck_assert_uint_le(mdl->n_tensors, 8);
    for (size_t t = 0; t < mdl->n_tensors; t++) {
        off[t] = mdl->tensors[t].kind == IR_TENSOR_ACT ? 1000 * t : CPU_NO_SLOT; /* disjoint */
        num[t] = ir_tensor_numel(&mdl->tensors[t]);
    }
    ck_assert_int_eq(cpu_fuse_epilogue(mdl, 1, off, num, &e), 1);
    int kr = mdl->layers[1].inputs[1], y = mdl->layers[2].outputs[0];
    off[y] = off[kr];
    ck_assert_int_eq(cpu_fuse_epilogue(mdl, 1, off, num, &e), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_fusion");
    bc_add_some_cases(s, bc_setup, bc_teardown, 0);
    test_add_tcase(s, "fusion", bc_setup, bc_teardown, 300,
                   TEST_LIST(conv_residual_add_relu_fused, conv_residual_fusion_limits, conv_activation_fused,
                             conv_activation_fused_planned, conv_batchnorm_fused, product_epilogue_fused));
    return cpu_run(s);
}
