/*
 * backend_cases.h - the cases the cpu suites (test/cpu/test_cpu_*.c, through cpu_cases.h) and
 * test_gpu.c share: a model is built with the public API, compiled for "ref" and for the suite's target
 * (bc_target), run on the same pseudo-random inputs, and every output must match: max |target - ref|
 * <= bc_tolerance x max |ref|. Shapes are drawn at random (odd sizes, strides, pads, dilations, groups,
 * sparsity kinds, fused activations, out_perm, channel counts off the vector width) from fixed seeds,
 * so a failure names a reproducible case; plus the ONNX test models and the demo model. Under valgrind
 * and in ASan builds the random sweeps run fewer cases.
 *
 * Which kernel a layer must get differs per target: each shared case hands its program to the
 * suite's bc_expect_kernels(case, program, variant), which asserts the target's kernel strings (a
 * table of bc_kernel lists for what does not depend on the variant, bc_assert_kernels).
 *
 * The including suite defines bc_expect_kernels, calls bc_add_cases (every shared tcase) or
 * bc_add_some_cases (some: a suite split over several programs takes each in one of them), adds its
 * own tests to them, and runs through bc_main, which sets bc_target / bc_tolerance and the kernel
 * cache directory every test of the process shares. The comparisons themselves (check_matches_ref,
 * check_case, check_kernels, which the suites' own tests use too) are in backend_compare.h.
 */
#ifndef PDC_TEST_BACKEND_CASES_H
#define PDC_TEST_BACKEND_CASES_H

#include "test/common/backend_compare.h"

/* ------------------------------------------------------------------ elementwise */

static const char *const unary_ops[] = {"relu", "clip", "leaky_relu", "hardswish", "hardsigmoid", "sigmoid", "tanh"};

START_TEST(unary_ops_match_ref)
{
    /* n = 1 .. 70: vector bodies, tails, and both */
    int64_t n = 1 + _i * 13 % 70;
    input("x", DIMS(1, n));
    char prev[16] = "x";
    for (size_t k = 0; k < sizeof unary_ops / sizeof unary_ops[0]; k++) {
        pdc_attrs *a = NULL;
        if (!strcmp(unary_ops[k], "clip")) {
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "min", -0.25f));
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "max", 0.5f));
        }
        char out[16];
        snprintf(out, sizeof out, "y%zu", k);
        layer(unary_ops[k], a, out, 1, (const char *const[]){prev});
        output(out);
        snprintf(prev, sizeof prev, "%s", out);
    }
    check_case(BC_UNARY, 0, 7u + (uint32_t)_i, "unary chain");
}
END_TEST

START_TEST(binary_broadcast_matches_ref)
{
    static const char *const ops[] = {"add", "sub", "mul", "div"};
    for (int c = 0; c < sweep(24); c++) {
        fresh_model("bcast");
        int64_t d[4] = {rnd_in(1, 2), rnd_in(1, 5), rnd_in(1, 9), rnd_in(1, 21)};
        int64_t e[4];
        for (int i = 0; i < 4; i++) e[i] = rnd() % 3 == 0 ? 1 : d[i];
        int rb = (int)rnd_in(1, 4); /* b may have lower rank */
        input("a", 4, d);
        input("b", (size_t)rb, e + 4 - rb);
        const char *op = ops[c % 4];
        layer(op, NULL, "y", NAMES("a", "b"));
        output("y");
        check_case(BC_BINARY, 0, (uint32_t)c, "%s %lldx%lldx%lldx%lld with rank-%d operand", op, (long long)d[0],
                   (long long)d[1], (long long)d[2], (long long)d[3], rb);
    }
}
END_TEST

START_TEST(constant_operand)
{
    /* a per-channel constant, as a bias add after a conv */
    input("x", DIMS(2, 19, 5, 7));
    constant_rand("c", DIMS(19, 1, 1), 1.0f, 9);
    layer("sub", NULL, "y", NAMES("c", "x"));
    output("y");
    check_case(BC_CONST_OPERAND, 0, 4, "c - x");
}
END_TEST

START_TEST(batchnorm_matches_ref)
{
    input("x", DIMS(2, 5, 7, 3));
    constant_rand("scale", DIMS(5), 1.0f, 1);
    constant_rand("bias", DIMS(5), 1.0f, 2);
    constant_rand("mean", DIMS(5), 1.0f, 3);
    float var[5] = {0.5f, 1.0f, 2.0f, 0.1f, 3.0f};
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "var", 1, (const int64_t[]){5}, var));
    layer("batchnorm", set_float(attrs(), "epsilon", 1e-3f), "y", NAMES("x", "scale", "bias", "mean", "var"));
    output("y");
    check_case(BC_BATCHNORM, 0, 5, "batchnorm");
}
END_TEST

START_TEST(same_input_twice)
{
    input("a", DIMS(3, 37));
    layer("mul", NULL, "y", NAMES("a", "a"));
    output("y");
    pdc_program_destroy(check_matches_ref("a*a", 3));
}
END_TEST

/* ------------------------------------------------------------------ convolution */

typedef enum { SP_DENSE, SP_PATTERN, SP_BLOCK, SP_UNSTRUCTURED } sp_kind;
static const char *const sp_names[] = {"dense", "pattern", "block", "unstructured"};

/* Fused activations conv, fc and gemm take (NULL: none). */
static const char *const fused_acts[] = {NULL, "relu", "clip", "leaky_relu", "sigmoid", "tanh", "hardswish"};
#define N_FUSED_ACTS (sizeof fused_acts / sizeof fused_acts[0])

/* Sets fused activation act (NULL: none) on a: clip with bounds -0.5 / 0.75, leaky_relu with slope 0.2. */
static void set_fused_activation(pdc_attrs *a, const char *act)
{
    if (!act) return;
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", act));
    if (!strcmp(act, "clip")) {
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", -0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_max", 0.75f));
    }
    if (!strcmp(act, "leaky_relu")) ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_alpha", 0.2f));
}

/* A random conv layer "y" = conv(x, w[, b]) with fused activation / out_perm / sparsity as drawn;
 * describes it in desc. nsp: 1 or 2 spatial dims. */
static void random_conv(int nsp, sp_kind sp, char *desc, size_t cap)
{
    int64_t n = rnd_in(1, 2), g = rnd() % 4 == 0 ? rnd_in(2, 3) : 1;
    int64_t cg = rnd_in(1, 7), og = rnd_in(1, 13);
    if (rnd() % 6 == 0) cg = 1, og = 1, g = rnd_in(2, 9); /* depthwise */
    int64_t c = cg * g, o = og * g;
    int64_t k[2], st[2], dl[2], pb[2], pe[2], in[2];
    for (int d = 0; d < 2; d++) {
        k[d] = rnd_in(1, 5);
        st[d] = rnd() % 3 == 0 ? rnd_in(2, 3) : 1;
        dl[d] = rnd() % 4 == 0 ? 2 : 1;
        pb[d] = rnd_in(0, 2);
        pe[d] = rnd_in(0, 2);
        int64_t span = dl[d] * (k[d] - 1) + 1;
        in[d] = rnd_in(span > pb[d] + pe[d] ? span - pb[d] - pe[d] : 1, 23);
    }
    if (nsp == 1) k[0] = 1, st[0] = 1, dl[0] = 1, pb[0] = pe[0] = 0, in[0] = 1;
    if (nsp == 1 && sp == SP_PATTERN) sp = SP_DENSE; /* pattern sparsity is for 2-D convs */
    int has_bias = rnd() % 3 != 0;
    const char *act = fused_acts[rnd() % N_FUSED_ACTS];
    int perm = g == 1 && rnd() % 3 == 0;

    if (nsp == 2) input("x", DIMS(n, c, in[0], in[1]));
    else input("x", DIMS(n, c, in[1]));
    int64_t wd[4] = {o, cg, k[0], k[1]};
    size_t wn = (size_t)(o * cg * k[0] * k[1]), taps = (size_t)(k[0] * k[1]);
    float *w = malloc(wn * sizeof *w);
    test_fill_random(w, wn, rnd());
    /* sparsity: zero what is pruned, then describe it */
    uint64_t pats[6];
    int32_t *kp = malloc((size_t)(o * cg) * sizeof *kp);
    uint8_t *mask = malloc(wn);
    size_t n_pat = (size_t)rnd_in(1, 6), nb = 0;
    int64_t bh = rnd_in(1, 4), bw = rnd_in(1, 4);
    if (sp == SP_PATTERN) {
        for (size_t p = 0; p < n_pat; p++) {
            pats[p] = (uint64_t)rnd() | (uint64_t)rnd() << 32;
            pats[p] &= taps == 64 ? ~0ull : (1ull << taps) - 1;
            if (!pats[p]) pats[p] = 1;
        }
        for (int64_t q = 0; q < o * cg; q++) {
            kp[q] = rnd() % 3 == 0 ? -1 : (int32_t)(rnd() % n_pat);
            for (size_t b = 0; b < taps; b++)
                if (kp[q] < 0 || !(pats[kp[q]] >> b & 1)) w[(size_t)q * taps + b] = 0.0f;
        }
    } else if (sp == SP_BLOCK) {
        /* the matrix view: [O, C/g*kh*kw] for 2-D weights, [O*C/g, kw] for 1-D ones */
        int64_t rows = nsp == 2 ? o : o * cg, cols = nsp == 2 ? cg * k[0] * k[1] : k[1];
        int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
        nb = (size_t)(nbr * nbc);
        for (size_t b = 0; b < nb; b++) mask[b] = rnd() % 2;
        zero_pruned_blocks(w, rows, cols, bh, bw, mask);
    } else if (sp == SP_UNSTRUCTURED) {
        for (size_t i = 0; i < wn; i++) {
            mask[i] = rnd() % 3 != 0;
            if (!mask[i]) w[i] = 0.0f;
        }
    }
    if (nsp == 2) ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, wd, w));
    else ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 3, (const int64_t[]){o, cg, k[1]}, w));
    if (sp == SP_PATTERN)
        ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w", k[0], k[1], n_pat, pats, (size_t)(o * cg), kp));
    else if (sp == SP_BLOCK) ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, "w", bh, bw, nb, mask));
    else if (sp == SP_UNSTRUCTURED) ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w", wn, mask));
    free(w);
    free(kp);
    free(mask);
    if (has_bias) constant_rand("b", DIMS(o), 0.5f, rnd());

    pdc_attrs *a = attrs();
    int nd = nsp == 2 ? 2 : 1, d0 = 2 - nd;
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", (size_t)nd, st + d0));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", (size_t)nd, dl + d0));
    int64_t pads[4] = {pb[d0], nd == 2 ? pb[1] : pe[1], pe[0], pe[1]};
    if (nd == 1) pads[0] = pb[1], pads[1] = pe[1];
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", (size_t)(2 * nd), pads));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", g));
    set_fused_activation(a, act);
    if (perm) {
        int64_t *pv = malloc((size_t)o * sizeof *pv);
        random_perm(pv, o);
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", (size_t)o, pv));
        free(pv);
    }
    if (has_bias) layer("conv", a, "y", NAMES("x", "w", "b"));
    else layer("conv", a, "y", NAMES("x", "w"));
    output("y");
    snprintf(desc, cap,
             "conv%dd n%lld c%lld o%lld g%lld in %lldx%lld k %lldx%lld s %lldx%lld d %lldx%lld pads %lld,%lld,%lld,%lld "
             "%s%s act %s%s",
             nsp, (long long)n, (long long)c, (long long)o, (long long)g, (long long)in[0], (long long)in[1],
             (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)dl[0], (long long)dl[1],
             (long long)pb[0], (long long)pb[1], (long long)pe[0], (long long)pe[1], sp_names[sp],
             has_bias ? " bias" : "", act ? act : "none", perm ? " out_perm" : "");
}

START_TEST(conv_random_matches_ref)
{
    /* _i: sparsity kind; 2-D and 1-D convs of random shape */
    sp_kind sp = (sp_kind)_i;
    rng = 1000u + (uint32_t)_i * 7919u;
    for (int c = 0; c < sweep(30); c++) {
        fresh_model("conv");
        char desc[512];
        random_conv(c % 5 == 4 ? 1 : 2, sp, desc, sizeof desc);
        check_case(BC_CONV_RANDOM, (int)_i, (uint32_t)c, "%s", desc);
    }
}
END_TEST

/* 8 four-entry 3x3 patterns with the centre: the pattern set the benchmarks time. */
static const uint64_t bench_pats[8] = {0x1b, 0x36, 0xd8, 0x1b0, 0x3a, 0xb2, 0xb8, 0x9a};

START_TEST(conv_vgg_like_pattern_layer)
{
    /* the benchmarks' 8 patterns, 50% connectivity: the layer shape the benchmarks time, small enough
     * for a unit test; channel counts that are not multiples of 16 */
    int64_t c = 21, o = 38, h = 19, w = 23;
    input("x", DIMS(1, c, h, w));
    int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
    for (int64_t q = 0; q < o * c; q++) kp[q] = q % 2 ? -1 : (int32_t)(rnd() % 8);
    constant_patterned("w", o, c, 3, 8, bench_pats, kp, 99);
    free(kp);
    constant_rand("b", DIMS(o), 0.1f, 5);
    layer("conv", set_string(set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "activation", "relu"), "y", NAMES("x", "w", "b"));
    output("y");
    check_case(BC_CONV_PATTERN, 0, 11, "pattern 3x3 21->38 @19x23");
}
END_TEST

START_TEST(onnx_test_models_match_ref)
{
    /* the ONNX import test models (test/data/onnx): ResNet-, VGG-, MobileNetV2-like nets, a pattern-
     * pruned CNN, block-pruned fc, LSTM, GRU; symbolic dims set to 1 */
    static const char *const names[] = {"resnet_small", "vgg_small",   "mobilenetv2_small", "pattern_cnn",
                                        "block_fc",     "autopad",     "lstm",              "gru",
                                        "softmax_v11"};
    int found = 0;
    for (size_t q = 0; q < sizeof names / sizeof names[0]; q++) {
        char file[64];
        snprintf(file, sizeof file, "onnx/%s.onnx", names[q]);
        const char *path = test_data_path(file);
        if (access(path, R_OK) != 0) continue;
        found++;
        pdc_model_destroy(mdl);
        mdl = NULL;
        ck_assert_ok(ctx, pdc_model_load(ctx, path, &mdl));
        size_t n_in = 0;
        ck_assert_ok(ctx, pdc_model_num_inputs(mdl, &n_in));
        for (size_t i = 0; i < n_in; i++) {
            const char *nm;
            size_t rank;
            int64_t dims[PDC_MAX_RANK];
            ck_assert_ok(ctx, pdc_model_input_info(mdl, i, &nm, &rank, dims));
            int sym = 0;
            for (size_t d = 0; d < rank; d++)
                if (dims[d] < 0) dims[d] = 1, sym = 1;
            if (sym) ck_assert_ok(ctx, pdc_model_set_input_shape(mdl, nm, rank, dims));
        }
        pdc_program *p = check_matches_ref(names[q], (uint32_t)q);
        pdc_program_destroy(p);
    }
    if (!found) fprintf(stderr, "test_%s: no ONNX test models under %s, skipped\n", bc_target, test_data_path("onnx"));
}
END_TEST

START_TEST(demo_model_matches_ref)
{
    /* the model examples/make_demo_model.c builds: dense conv, pattern conv, block-sparse fc, softmax */
    pdc_model_destroy(mdl);
    mdl = NULL;
    const char *path = getenv("PDC_DEMO_MODEL");
    if (!path) {
        /* build the same structure here (weights random) when the demo file is not given */
        ck_assert_ok(ctx, pdc_model_create(ctx, "demo", &mdl));
        input("image", DIMS(1, 1, 8, 8));
        constant_rand("w1", DIMS(16, 1, 3, 3), 1.0f, 1);
        constant_rand("b1", DIMS(16), 0.05f, 2);
        layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c1", NAMES("image", "w1", "b1"));
        layer("relu", NULL, "r1", NAMES("c1"));
        int32_t kp[32 * 16];
        for (int q = 0; q < 32 * 16; q++) kp[q] = (q * 7) % 3 == 0 ? -1 : q % 8;
        constant_patterned("w2", 32, 16, 3, 8, bench_pats, kp, 3);
        constant_rand("b2", DIMS(32), 0.05f, 4);
        layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c2", NAMES("r1", "w2", "b2"));
        layer("relu", NULL, "r2", NAMES("c2"));
        layer("flatten", NULL, "f", NAMES("r2"));
        constant_rand("w3", DIMS(10, 2048), 0.05f, 5);
        constant_rand("b3", DIMS(10), 0.05f, 6);
        layer("fc", NULL, "logits", NAMES("f", "w3", "b3"));
        layer("softmax", NULL, "probs", NAMES("logits"));
        output("probs");
    } else {
        ck_assert_ok(ctx, pdc_model_load(ctx, path, &mdl));
    }
    pdc_program_destroy(check_matches_ref("demo model", 21));
}
END_TEST

/* ------------------------------------------------------------------ fc, gemm, matmul, rnn */

/* A rows x cols constant `name` of test_fill_random(seed) values, pruned with masks drawn from rnd():
 * kind 0 dense; 1 in bh x bw blocks, each kept when rnd() % 10 < 3; 2 unstructured, each element kept
 * when rnd() % 10 < 2. Returns how many blocks (elements) it keeps; 0 when dense. */
static int64_t random_pruned_matrix(const char *name, int64_t rows, int64_t cols, int kind, int64_t bh, int64_t bw,
                                    uint32_t seed)
{
    size_t wn = (size_t)(rows * cols);
    float *w = malloc(wn * sizeof *w);
    uint8_t *mask = malloc(wn);
    ck_assert(w && mask);
    test_fill_random(w, wn, seed);
    int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw, kept = 0;
    if (kind == 1) {
        for (int64_t b = 0; b < nbr * nbc; b++) kept += mask[b] = rnd() % 10 < 3;
        zero_pruned_blocks(w, rows, cols, bh, bw, mask);
    } else if (kind == 2) {
        for (size_t q = 0; q < wn; q++)
            if (!(mask[q] = rnd() % 10 < 2)) w[q] = 0.0f;
            else kept++;
    }
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, DIMS(rows, cols), w));
    if (kind == 1) ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, name, bh, bw, (size_t)(nbr * nbc), mask));
    if (kind == 2) ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, name, wn, mask));
    free(mask);
    free(w);
    return kept;
}

START_TEST(fc_random_matches_ref)
{
    /* _i: 0 dense, 1 block-sparse, 2 unstructured (kernel variants: those, and 3 dense at batch 2-32) */
    rng = 77u + (uint32_t)_i;
    for (int c = 0; c < sweep(16); c++) {
        fresh_model("fc");
        /* every 4th case a batch of 4..40: the sparse kernels' several-samples form, in groups */
        int64_t n = c % 4 == 1 ? rnd_in(4, 40) : rnd_in(1, 3), k = rnd_in(1, 300), o = rnd_in(1, 70), bh = rnd_in(1, 4),
                bw = rnd_in(1, 8);
        int has_bias = rnd() % 2;
        input("x", DIMS(n, k));
        random_pruned_matrix("w", o, k, (int)_i, bh, bw, rnd());
        pdc_attrs *a = attrs();
        const char *act = fused_acts[rnd() % N_FUSED_ACTS];
        set_fused_activation(a, act);
        if (has_bias) {
            constant_rand("b", DIMS(o), 0.5f, rnd());
            layer("fc", a, "y", NAMES("x", "w", "b"));
        } else {
            layer("fc", a, "y", NAMES("x", "w"));
        }
        output("y");
        check_case(BC_FC, _i ? (int)_i : n >= 2 && n <= 32 ? 3 : 0, (uint32_t)c, "fc n%lld k%lld o%lld %s %lldx%lld act %s",
                   (long long)n, (long long)k, (long long)o, _i == 0 ? "dense" : _i == 1 ? "block" : "unstructured",
                   (long long)bh, (long long)bw, act ? act : "none");
    }
}
END_TEST

START_TEST(gemm_random_matches_ref)
{
    rng = 4242u;
    for (int c = 0; c < sweep(16); c++) {
        fresh_model("gemm");
        int64_t mm = rnd_in(1, 40), kk = rnd_in(1, 90), nn = rnd_in(1, 50);
        int ta = rnd() % 2, tb = rnd() % 2, cform = (int)(rnd() % 5);
        if (ta) input("a", DIMS(kk, mm));
        else input("a", DIMS(mm, kk));
        if (tb) constant_rand("b", DIMS(nn, kk), 1.0f, rnd());
        else input("b", DIMS(kk, nn));
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transA", ta));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transB", tb));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.75f));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "beta", -1.5f));
        const char *act = fused_acts[rnd() % N_FUSED_ACTS];
        set_fused_activation(a, act);
        /* C: absent, scalar, [N], [M,1], [M,N] */
        if (cform == 1) constant_rand("c", DIMS(1), 1.0f, 3);
        else if (cform == 2) constant_rand("c", DIMS(nn), 1.0f, 3);
        else if (cform == 3) input("c", DIMS(mm, 1));
        else if (cform == 4) input("c", DIMS(mm, nn));
        if (cform) layer("gemm", a, "y", NAMES("a", "b", "c"));
        else layer("gemm", a, "y", NAMES("a", "b"));
        output("y");
        check_case(BC_GEMM, 0, (uint32_t)c, "gemm %lldx%lldx%lld ta%d tb%d c%d act %s", (long long)mm, (long long)kk,
                   (long long)nn, ta, tb, cform, act ? act : "none");
    }
}
END_TEST

START_TEST(matmul_broadcast_matches_ref)
{
    matmul_model(DIMS(2, 1, 5, 7), DIMS(3, 7, 4));
    check_case(BC_MATMUL, 0, 8, "matmul [2,1,5,7] x [3,7,4]");
}
END_TEST

START_TEST(matmul_const_random_matches_ref)
{
    /* _i: the weight [K, N] 0 dense, 1 block-sparse in its stored layout, 2 unstructured; x of rank 2-4 */
    rng = 515u + (uint32_t)_i;
    for (int c = 0; c < sweep(16); c++) {
        fresh_model("matmul");
        int rank = (int)rnd_in(2, 4);
        int64_t xd[4], rows = 1, k = rnd_in(1, 120), n = rnd_in(1, 70), bh = rnd_in(1, 8), bw = rnd_in(1, 4);
        for (int d = 0; d < rank - 1; d++) rows *= (xd[d] = d == rank - 2 ? rnd_in(1, 12) : rnd_in(1, 3));
        xd[rank - 1] = k;
        input("x", (size_t)rank, xd);
        /* blocks bh x bw of the stored [K, N] (bh along K); kept ones counted whole, edges included */
        int64_t kept = random_pruned_matrix("w", k, n, (int)_i, bh, bw, rnd());
        layer("matmul", NULL, "y", NAMES("x", "w"));
        output("y");
        int64_t cells = _i == 1 ? bh * bw : 1;
        int variant = (int)_i + (rows >= 2 && rows <= 32 && k >= 8 && n >= 8 ? 3 : 0) +
                      (_i && 2 * kept * cells > k * n ? 6 : 0);
        check_case(BC_MATMUL_CONST, variant, (uint32_t)c, "matmul of %lld rows, k%lld n%lld %s %lldx%lld", (long long)rows,
                   (long long)k, (long long)n, _i == 0 ? "dense" : _i == 1 ? "block" : "unstructured", (long long)bh,
                   (long long)bw);
    }
}
END_TEST

START_TEST(rnn_random_matches_ref)
{
    /* LSTM and GRU: directions, initial states, optional outputs, linear_before_reset */
    rng = 31337u;
    for (int c = 0; c < sweep(12); c++) {
        fresh_model("rnn");
        int lstm = c % 2 == 0;
        int64_t T = rnd_in(1, 5), B = rnd_in(1, 3), I = rnd_in(1, 9), H = rnd_in(1, 7), G = lstm ? 4 : 3;
        static const char *const dirs[] = {"forward", "reverse", "bidirectional"};
        int di = (int)(rnd() % 3);
        int64_t D = di == 2 ? 2 : 1;
        /* weights: dense, block-pruned (blocks of 1 or H rows: aligned with the gates; or any) or unstructured */
        int kind = c % 3;
        int64_t bh = rnd() % 3 == 0 ? rnd_in(1, 4) : rnd() % 2 ? H : 1, bw = rnd_in(1, 8);
        input("x", DIMS(T, B, I));
        constant_pruned("w", DIMS(D, G * H, I), kind, bh, bw, 30, rnd());
        constant_pruned("r", DIMS(D, G * H, H), kind, bh, bw, 30, rnd());
        constant_rand("b", DIMS(D, 2 * G * H), 0.5f, rnd());
        input("h0", DIMS(D, B, H));
        if (lstm) input("c0", DIMS(D, B, H));
        const char *ins[7] = {"x", "w", "r", "b", "", "h0", "c0"}, *outs[3] = {"y", "yh", "yc"};
        if (lstm) rnn_layer("lstm", "rnn", H, dirs[di], -1, 7, ins, 3, outs);
        else rnn_layer("gru", "rnn", H, dirs[di], (c / 2) % 2, 6, ins, 2, outs);
        output("y");
        output("yh");
        if (lstm) output("yc");
        check_case(BC_RNN, kind, (uint32_t)c, "%s T%lld B%lld I%lld H%lld %s %s %lldx%lld", lstm ? "lstm" : "gru",
                   (long long)T, (long long)B, (long long)I, (long long)H, dirs[di],
                   kind == 0 ? "dense" : kind == 1 ? "block" : "unstructured", (long long)bh, (long long)bw);
    }
}
END_TEST

/* ------------------------------------------------------------------ pooling */

START_TEST(pool_random_matches_ref)
{
    rng = 555u;
    for (int c = 0; c < sweep(24); c++) {
        fresh_model("pool");
        /* every third case 1-D: the same window along one dim (dim 0 of these arrays unused) */
        const int nsp = c % 3 == 2 ? 1 : 2, d0 = 2 - nsp;
        int64_t k[2] = {rnd_in(1, 4), rnd_in(1, 4)}, st[2] = {rnd_in(1, 3), rnd_in(1, 3)}, dl[2], pads[4], in[2];
        for (int d = 0; d < 2; d++) {
            dl[d] = rnd() % 4 == 0 ? 2 : 1;
            pads[d] = rnd_in(0, k[d] - 1 < 2 ? k[d] - 1 : 2);
            pads[d + 2] = rnd_in(0, k[d] - 1 < 2 ? k[d] - 1 : 2);
            in[d] = rnd_in(dl[d] * (k[d] - 1) + 1, 20);
        }
        int64_t xd[4] = {rnd_in(1, 2), rnd_in(1, 5), in[0], in[1]};
        if (nsp == 1) xd[2] = in[1];
        input("x", (size_t)(2 + nsp), xd);
        int is_max = rnd() % 2;
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", (size_t)nsp, k + d0));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", (size_t)nsp, st + d0));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", (size_t)nsp, dl + d0));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 2 * (size_t)nsp, nsp == 2 ? pads : (const int64_t[]){pads[1], pads[3]}));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "ceil_mode", rnd() % 2));
        if (!is_max) ck_assert_ok(ctx, pdc_attrs_set_int(a, "count_include_pad", rnd() % 2));
        layer(is_max ? "maxpool" : "avgpool", a, "y", NAMES("x"));
        layer("global_avgpool", NULL, "g", NAMES("y"));
        output("y");
        output("g");
        if (nsp == 1)
            check_case(BC_POOL, 0, (uint32_t)c, "1-D %s k%lld s%lld d%lld in %lld", is_max ? "maxpool" : "avgpool",
                       (long long)k[1], (long long)st[1], (long long)dl[1], (long long)in[1]);
        else
            check_case(BC_POOL, 0, (uint32_t)c, "%s k%lldx%lld s%lldx%lld d%lldx%lld in %lldx%lld",
                       is_max ? "maxpool" : "avgpool", (long long)k[0], (long long)k[1], (long long)st[0],
                       (long long)st[1], (long long)dl[0], (long long)dl[1], (long long)in[0], (long long)in[1]);
    }
}
END_TEST

/* ------------------------------------------------------------------ API */

START_TEST(layer_kernel_api)
{
    relu_model(2, 3);
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, bc_target, &pc));
    size_t n = 0;
    ck_assert_ok(ctx, pdc_program_num_layers(pc, &n));
    ck_assert_uint_eq(n, 1);
    const char *name = NULL, *k = NULL;
    ck_assert_ok(ctx, pdc_program_layer_kernel(pr, 0, &name, &k));
    ck_assert_str_eq(name, "y");
    ck_assert_str_eq(k, "reference interpreter");
    ck_assert_ok(ctx, pdc_program_layer_kernel(pc, 0, NULL, NULL));
    ck_assert_status(ctx, pdc_program_layer_kernel(pc, 1, &name, &k), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "out of range");
    ck_assert_status(ctx, pdc_program_layer_kernel(NULL, 0, &name, &k), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_program_num_layers(pc, NULL), PDC_ERR_INVALID_ARG);
    pdc_program_destroy(pr);
    pdc_program_destroy(pc);
}
END_TEST

START_TEST(every_op_matches_ref)
{
    /* ops the target may run on its own kernels or on the reference one (bc_expect_kernels says
     * which): never an error */
    input("x", DIMS(1, 4, 5, 6));
    layer("softmax", NULL, "s", NAMES("x"));
    layer("transpose", set_ints(attrs(), "perm", DIMS(0, 2, 3, 1)), "t", NAMES("s"));
    layer("concat", set_int(attrs(), "axis", 1), "c", NAMES("t", "t"));
    layer("flatten", NULL, "f", NAMES("c"));
    layer("reshape", set_ints(attrs(), "shape", DIMS(2, -1)), "r", NAMES("f"));
    output("r");
    check_case(BC_EVERY_OP, 0, 5, "softmax/transpose/concat/flatten/reshape");
}
END_TEST

/* ------------------------------------------------------------------ softmax, data movement */

/* Halves random dims of d (rank r) until it has at most cap elements. */
static void shrink_dims(int64_t *d, int r, int64_t cap)
{
    for (;;) {
        int64_t n = 1;
        for (int i = 0; i < r; i++) n *= d[i];
        if (n <= cap) return;
        int i = (int)(rnd() % (uint32_t)r);
        d[i] = (d[i] + 1) / 2;
    }
}

/* "2x3x4" (sep "x") or "2,3,4" (sep ","). */
static void ints_text(char *out, size_t cap, int r, const int64_t *d, const char *sep)
{
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < r && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? sep : "", (long long)d[i]);
}

START_TEST(softmax_random_matches_ref)
{
    /* along the last axis (rows) and an inner one (columns): lengths below, at and past a vector,
     * column runs past a block of 256, logits up to +-30 (so the max must come off), layers large
     * enough to be split over the threads */
    for (int c = 0; c < sweep(32); c++) {
        fresh_model("softmax");
        int r = (int)rnd_in(1, 4);
        int64_t d[4];
        for (int i = 0; i < r; i++) d[i] = rnd_in(1, 24);
        if (rnd() % 3 == 0) d[r - 1] = rnd_in(200, 900);
        shrink_dims(d, r, 150000);
        int64_t axis = rnd_in(-r, r - 1);
        input("x", (size_t)r, d);
        constant_rand("scale", (size_t)r, d, 30.0f, 100u + (uint32_t)c);
        layer("mul", NULL, "z", NAMES("x", "scale"));
        layer("softmax", set_int(attrs(), "axis", axis), "y", NAMES("z"));
        output("y");
        char shape[64];
        ints_text(shape, sizeof shape, r, d, "x");
        int inner = 0;
        for (int i = (int)(axis < 0 ? axis + r : axis) + 1; i < r; i++) inner |= d[i] > 1;
        check_case(BC_SOFTMAX, inner, 40u + (uint32_t)c, "softmax axis %lld of %s", (long long)axis, shape);
    }
}
END_TEST

START_TEST(softmax_masked_logits_give_zero)
{
    /* logits of -inf (masked positions, as in attention) give exactly 0, along rows and across
     * columns (a tail of columns included) */
    static const int64_t shapes[2][4] = {{2, 3, 5, 37}, {1, 19, 3, 70}};
    static const int64_t axes[2] = {-1, 1};
    for (int q = 0; q < 2; q++) {
        fresh_model("masked");
        size_t n = 1;
        for (int i = 0; i < 4; i++) n *= (size_t)shapes[q][i];
        float *mask = malloc(n * sizeof *mask);
        for (size_t i = 0; i < n; i++) mask[i] = i % 4 == 1 ? -INFINITY : 0.0f; /* no softmax all masked */
        input("x", 4, shapes[q]);
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, "mask", 4, shapes[q], mask));
        layer("add", NULL, "z", NAMES("x", "mask"));
        layer("softmax", set_int(attrs(), "axis", axes[q]), "y", NAMES("z"));
        output("y");
        char what[64];
        snprintf(what, sizeof what, "masked softmax, axis %lld", (long long)axes[q]);
        pdc_program *p = check_matches_ref(what, 9u);
        size_t no, *sizes;
        float **got = run_prog(p, 9u, &no, &sizes);
        for (size_t i = 1; i < n; i += 4)
            ck_assert_msg(got[0][i] == 0.0f, "%s: element %zu is %g, not 0", what, i, (double)got[0][i]);
        free_outputs(got, no, sizes);
        free(mask);
        pdc_program_destroy(p);
    }
}
END_TEST

START_TEST(transpose_concat_reshape_random_match_ref)
{
    /* x -> transpose (random perm, rank 1..5) -> t; concat of t and 0..3 more inputs along a random
     * axis -> c; reshape to one dim -> r. Dims of 1 (dropped when merging), perms that keep runs
     * (channel shuffle) and that move the last dim (tiles), some large enough for the threads. */
    for (int c = 0; c < sweep(32); c++) {
        fresh_model("move");
        int r = (int)rnd_in(1, 5);
        int64_t d[5], perm[5], td[5];
        for (int i = 0; i < r; i++) d[i] = rnd() % 5 == 0 ? 1 : rnd_in(1, 12);
        if (rnd() % 3 == 0) d[rnd() % (uint32_t)r] = rnd_in(40, 300);
        shrink_dims(d, r, 120000);
        random_perm(perm, r);
        for (int i = 0; i < r; i++) td[i] = d[perm[i]];
        input("x", (size_t)r, d);
        layer("transpose", set_ints(attrs(), "perm", (size_t)r, perm), "t", NAMES("x"));
        int n_more = (int)rnd_in(0, 3);
        int64_t axis = rnd_in(-r, r - 1), ax = axis < 0 ? axis + r : axis;
        const char *ins[4] = {"t", "u1", "u2", "u3"};
        for (int j = 1; j <= n_more; j++) {
            int64_t ud[5];
            memcpy(ud, td, sizeof ud);
            ud[ax] = rnd_in(1, 7);
            input(ins[j], (size_t)r, ud);
        }
        layer("concat", set_int(attrs(), "axis", axis), "c", (size_t)(1 + n_more), ins);
        layer("reshape", set_ints(attrs(), "shape", DIMS(-1)), "r", NAMES("c"));
        output("t");
        output("c");
        output("r");
        char shape[64], order[64];
        ints_text(shape, sizeof shape, r, d, "x");
        ints_text(order, sizeof order, r, perm, ",");
        /* the last dim moves if, dims of 1 left out, the input's last one is not the output's last */
        int last_in = -1, last_out = -1;
        for (int i = 0; i < r; i++) {
            if (d[i] > 1) last_in = i;
            if (td[i] > 1) last_out = (int)perm[i];
        }
        check_case(BC_MOVE, last_in != last_out, 60u + (uint32_t)c, "transpose of %s by (%s), concat of %d on axis %lld",
                   shape, order, 1 + n_more, (long long)axis);
    }
}
END_TEST

/* ------------------------------------------------------------------ the suite and main */

/* The shared tcases (added to s in this order, each with the fixture and its timeout); the suite adds
 * its own tests to them and its own tcases after them. */
typedef struct {
    TCase *eltwise, *conv, *gemm, *pool, *api;
} bc_tcases;

/* Which shared tcases a suite takes (bc_add_some_cases). */
enum { BC_TC_ELTWISE = 1, BC_TC_CONV = 2, BC_TC_GEMM = 4, BC_TC_POOL = 8, BC_TC_API = 16, BC_TC_ALL = 31 };

/* The shared tcases of `which` (BC_TC_* or'd; those left out are NULL in the result). setup must call
 * bc_setup, teardown bc_teardown (or be them). A suite split over several programs takes each shared
 * tcase in one of them. */
static bc_tcases bc_add_some_cases(Suite *s, SFun setup, SFun teardown, unsigned which)
{
    bc_tcases t = {NULL, NULL, NULL, NULL, NULL};
    if (which & BC_TC_ELTWISE) {
        t.eltwise = bc_tcase(s, "eltwise", 120, setup, teardown);
        tcase_add_loop_test(t.eltwise, unary_ops_match_ref, 0, 6);
        test_add_tests(t.eltwise, TEST_LIST(binary_broadcast_matches_ref, constant_operand, same_input_twice,
                                            batchnorm_matches_ref));
    }
    if (which & BC_TC_CONV) {
        t.conv = bc_tcase(s, "conv", 300, setup, teardown);
        tcase_add_loop_test(t.conv, conv_random_matches_ref, SP_DENSE, SP_UNSTRUCTURED + 1);
        test_add_tests(t.conv,
                       TEST_LIST(conv_vgg_like_pattern_layer, demo_model_matches_ref, onnx_test_models_match_ref));
    }
    if (which & BC_TC_GEMM) {
        t.gemm = bc_tcase(s, "gemm", 300, setup, teardown);
        tcase_add_loop_test(t.gemm, fc_random_matches_ref, 0, 3);
        test_add_tests(t.gemm, TEST_LIST(gemm_random_matches_ref, matmul_broadcast_matches_ref));
        tcase_add_loop_test(t.gemm, matmul_const_random_matches_ref, 0, 3);
        tcase_add_test(t.gemm, rnn_random_matches_ref);
    }
    if (which & BC_TC_POOL)
        t.pool = test_add_tcase(s, "pool", setup, teardown, 120, TEST_LIST(pool_random_matches_ref));
    if (which & BC_TC_API)
        t.api = test_add_tcase(s, "api", setup, teardown, 120,
                               TEST_LIST(layer_kernel_api, every_op_matches_ref, softmax_random_matches_ref,
                                         softmax_masked_logits_give_zero, transpose_concat_reshape_random_match_ref));
    return t;
}

/* Every shared tcase (bc_add_some_cases). */
static inline bc_tcases bc_add_cases(Suite *s, SFun setup, SFun teardown)
{
    return bc_add_some_cases(s, setup, teardown, BC_TC_ALL);
}

#endif
