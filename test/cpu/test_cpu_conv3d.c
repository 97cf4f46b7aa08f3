/*
 * test_cpu_conv3d.c - 3-D convs on the "cpu" target (backends/cpu/conv3d.c) against the reference
 * backend: random shapes (batch, groups and depthwise, odd sizes, strides, pads, dilations, kernels
 * 1..3 per axis) with dense, kernel-group (KGS), 3-D pattern and unstructured weights; the fused
 * epilogue (residual add + relu, batchnorm); results the same at 1 and 2 threads; the planes split by
 * their depth taps inside the input (clips 1 and 2 deep, depth dilation, planes reading only padding,
 * groups) and whole planes over the threads.
 */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdlib.h>

#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* A weight [o, cg, kd, kh, kw] of random values; sp 0 dense, 1 kernel groups go x gc with random masks
 * (every 5th kernel removed), 2 unstructured (about 60% kept). */
static void weight3d(const char *name, int64_t o, int64_t cg, const int64_t k[3], int sp, uint32_t seed)
{
    const int64_t win = k[0] * k[1] * k[2], nk = o * cg;
    const size_t n = (size_t)(nk * win);
    float *w = malloc(n * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, n, seed);
    if (sp == 0 || win < 2) {
        constant(name, DIMS(o, cg, k[0], k[1], k[2]), w);
    } else if (sp == 1) {
        const int64_t go = rnd_in(1, o), gc = rnd_in(1, cg);
        const int64_t ngo = (o + go - 1) / go, ngc = (cg + gc - 1) / gc;
        uint64_t *pats = malloc((size_t)(ngo * ngc) * sizeof *pats);
        int32_t *kp = malloc((size_t)nk * sizeof *kp);
        const uint64_t full = (1ull << win) - 1;
        for (int64_t g = 0; g < ngo * ngc; g++) pats[g] = ((uint64_t)rnd() | (uint64_t)rnd() << 32 | 1u) & full;
        for (int64_t i = 0; i < o; i++)
            for (int64_t j = 0; j < cg; j++) {
                const int64_t kk = i * cg + j;
                kp[kk] = kk % 5 == 3 ? -1 : (int32_t)((i / go) * ngc + j / gc);
                for (int64_t p = 0; p < win; p++)
                    if (kp[kk] < 0 || !(pats[kp[kk]] >> p & 1)) w[kk * win + p] = 0.0f;
            }
        constant(name, DIMS(o, cg, k[0], k[1], k[2]), w);
        ck_assert_ok(ctx, pdc_model_set_sparsity_kgs(mdl, name, k[0], k[1], k[2], go, gc, (size_t)(ngo * ngc), pats,
                                                     (size_t)nk, kp));
        free(pats);
        free(kp);
    } else {
        uint8_t *mask = malloc(n);
        for (size_t i = 0; i < n; i++) mask[i] = rnd() % 10 < 6;
        free(w);
        constant_masked(name, DIMS(o, cg, k[0], k[1], k[2]), mask, seed);
        free(mask);
        return;
    }
    free(w);
}

START_TEST(random_shapes_match_ref)
{
    for (int q = 0; q < sweep(36); q++) {
        fresh_model("conv3d");
        const int64_t group = rnd() % 4 == 0 ? rnd_in(2, 3) : 1, cg = rnd_in(1, 4);
        const int depthwise = group == 1 && rnd() % 6 == 0;
        const int64_t c = depthwise ? rnd_in(2, 5) : group * cg, g = depthwise ? c : group;
        const int64_t o = depthwise ? c : g * rnd_in(1, 4), n = rnd_in(1, 2);
        int64_t k[3], s[3], d[3], pb[3], pe[3], in[3];
        for (int i = 0; i < 3; i++) {
            k[i] = rnd_in(1, 3);
            s[i] = rnd_in(1, 2);
            d[i] = k[i] > 1 ? rnd_in(1, 2) : 1;
            pb[i] = rnd_in(0, k[i] - 1);
            pe[i] = rnd_in(0, k[i] - 1);
            in[i] = d[i] * (k[i] - 1) + rnd_in(1, 7);
        }
        const int sp = (int)(rnd() % 3);
        input("x", DIMS(n, c, in[0], in[1], in[2]));
        weight3d("w", o, c / g, k, sp, 100u + (uint32_t)q);
        const int bias = rnd() % 2;
        if (bias) constant_rand("b", DIMS(o), 0.5f, 200u + (uint32_t)q);
        pdc_attrs *a = set_int(attrs(), "group", g);
        set_ints(a, "strides", 3, s);
        set_ints(a, "dilations", 3, d);
        set_ints(a, "pads", 6, (int64_t[]){pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]});
        if (rnd() % 3 == 0) set_string(a, "activation", "relu");
        if (bias) layer("conv", a, "y", NAMES("x", "w", "b"));
        else layer("conv", a, "y", NAMES("x", "w"));
        ck_assert_ok(ctx, pdc_model_mark_output(mdl, "y"));
        char what[200];
        snprintf(what, sizeof what,
                 "case %d: n %lld c %lld o %lld group %lld k %lldx%lldx%lld strides %lld,%lld,%lld sparsity %d", q,
                 (long long)n, (long long)c, (long long)o, (long long)g, (long long)k[0], (long long)k[1],
                 (long long)k[2], (long long)s[0], (long long)s[1], (long long)s[2], sp);
        check_kernels(what, (uint32_t)q, BC_KERNELS({"y", "3-D conv"}));
    }
}
END_TEST

/* x [2, 8, 5, 6, 7] -> conv3d 3x3x3 pad 1 (KGS 4x4, 9 positions) -> [+ batchnorm] -> add x -> relu */
static void residual_block(int with_bn)
{
    fresh_model("block3d");
    input("x", DIMS(2, 8, 5, 6, 7));
    weight3d("w", 8, 8, (int64_t[]){3, 3, 3}, 1, 7);
    constant_rand("b", DIMS(8), 0.3f, 8);
    layer("conv", set_ints(attrs(), "pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}), "y", NAMES("x", "w", "b"));
    const char *sum_in = "y";
    if (with_bn) {
        float var[8];
        for (int i = 0; i < 8; i++) var[i] = 0.5f + 0.1f * (float)i;
        constant_rand("g", DIMS(8), 1.0f, 9);
        constant_rand("be", DIMS(8), 0.5f, 10);
        constant_rand("mu", DIMS(8), 0.5f, 11);
        constant("va", DIMS(8), var);
        layer("batchnorm", NULL, "bn", NAMES("y", "g", "be", "mu", "va"));
        sum_in = "bn";
    }
    layer("add", NULL, "s", NAMES(sum_in, "x"));
    layer("relu", NULL, "r", NAMES("s"));
    ck_assert_ok(ctx, pdc_model_mark_output(mdl, "r"));
}

START_TEST(fused_epilogue_matches_ref)
{
    residual_block(0);
    check_kernels("3-D conv + add + relu", 1, BC_KERNELS({"y", "3-D conv"}, {"y", "+ add 's' + relu 'r' in the epilogue"}));
    residual_block(1);
    check_kernels("3-D conv + batchnorm + add + relu", 2,
                  BC_KERNELS({"y", "3-D conv"}, {"y", "+ batchnorm 'bn' + add 's' + relu 'r' in the epilogue"}));
}
END_TEST

START_TEST(same_results_at_one_and_two_threads)
{
    residual_block(0);
    check_two_threads("3-D block", 3, BC_KERNELS({"y", "3-D conv"}));
}
END_TEST

/* Depth edges: the planes are split by their depth taps inside the input, a kernel per range (where
 * the edges waste >= 1/16 of the taps); with one group the input is read in place (transposed once),
 * else gathered; planes with no tap inside run the full window over zero planes; at 2 threads whole
 * planes go to the threads where they are small and many. Against ref at 2 threads, and the same at
 * 1 and 2 threads. */
START_TEST(depth_edges_and_thread_layouts)
{
    static const struct {
        int64_t c, o, group, d, hw, k[3], dil_d, pad_d[2], sp;
        const char *needle;
    } cases[] = {
        /* r3d_18's layer4: a clip 1 deep, 1 of 3 taps inside */
        {8, 8, 1, 1, 7, {3, 3, 3}, 1, {1, 1}, 0, "1 kernel by depth taps inside the input, input read in place"},
        /* 4 planes, 4 tap ranges [2,3) [1,3) [0,2) [0,1), KGS weights, threads over the planes */
        {6, 5, 1, 2, 5, {3, 3, 3}, 1, {2, 2}, 1, "4 kernels by depth taps inside the input, input read in place, threads over depth planes"},
        /* depth dilation 2: the 2 taps inside are 2 planes apart, gathered from the transposed input */
        {4, 6, 1, 5, 6, {3, 3, 3}, 2, {2, 2}, 2, "kernels by depth taps inside the input, input read in place"},
        /* planes 0 and 6 read no plane of the input: the full window over zero planes, bias only */
        {3, 4, 1, 2, 5, {2, 3, 3}, 1, {3, 3}, 0, "3 kernels by depth taps inside the input"},
        /* two groups: planes gathered channel-major */
        {4, 4, 2, 1, 6, {3, 3, 3}, 1, {1, 1}, 1, "1 kernel by depth taps inside the input, input planes gathered"},
        /* r3d_18's layer1 depth: the edge planes waste 2 of 24 taps (>= 1/16), 3 ranges */
        {4, 4, 1, 8, 5, {3, 3, 3}, 1, {1, 1}, 0, "3 kernels by depth taps inside the input"},
        /* a deep clip: the edge planes waste 2 of 51 taps (< 1/16), one kernel over zero planes */
        {4, 4, 1, 17, 5, {3, 3, 3}, 1, {1, 1}, 0, "1 kernel by depth taps inside the input"},
    };
    env_flag("PDC_OMP_STATIC", 1); /* two threads even on a busy machine */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("edges3d");
        input("x", DIMS(1, cases[q].c, cases[q].d, cases[q].hw, cases[q].hw));
        weight3d("w", cases[q].o, cases[q].c / cases[q].group, cases[q].k, (int)cases[q].sp, 40u + (uint32_t)q);
        constant_rand("b", DIMS(cases[q].o), 0.5f, 50u + (uint32_t)q);
        pdc_attrs *a = set_int(attrs(), "group", cases[q].group);
        set_ints(a, "dilations", 3, (int64_t[]){cases[q].dil_d, 1, 1});
        set_ints(a, "pads", 6, (int64_t[]){cases[q].pad_d[0], 1, 1, cases[q].pad_d[1], 1, 1});
        set_string(a, "activation", "relu");
        layer("conv", a, "y", NAMES("x", "w", "b"));
        ck_assert_ok(ctx, pdc_model_mark_output(mdl, "y"));
        char what[32];
        snprintf(what, sizeof what, "depth edges case %zu", q);
        check_two_threads(what, (uint32_t)q + 60, BC_KERNELS({"y", cases[q].needle}));
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

/* The kernels a 3-D conv gets: the dense families for a dense weight, the pattern family for KGS. */
START_TEST(kernel_families)
{
    fresh_model("dense3d");
    input("x", DIMS(1, 16, 4, 10, 10));
    weight3d("w", 16, 16, (int64_t[]){3, 3, 3}, 0, 1);
    layer("conv", set_ints(attrs(), "pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}), "y", NAMES("x", "w"));
    ck_assert_ok(ctx, pdc_model_mark_output(mdl, "y"));
    check_kernels("dense", 1, BC_KERNELS({"y", "3-D conv: 4 depth planes of jit dense conv 3x3"}));
    fresh_model("kgs3d");
    input("x", DIMS(1, 16, 4, 10, 10));
    weight3d("w", 16, 16, (int64_t[]){3, 3, 3}, 1, 2);
    layer("conv", set_ints(attrs(), "pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}), "y", NAMES("x", "w"));
    ck_assert_ok(ctx, pdc_model_mark_output(mdl, "y"));
    check_kernels("kgs", 2, BC_KERNELS({"y", "3-D conv: 4 depth planes of jit pattern-sparse conv 3x3"}));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_conv3d");
    test_add_tcase(s, "conv3d", bc_setup, bc_teardown, 300,
                   TEST_LIST(random_shapes_match_ref, fused_epilogue_matches_ref, same_results_at_one_and_two_threads,
                             depth_edges_and_thread_layouts, kernel_families));
    return cpu_run(s);
}
