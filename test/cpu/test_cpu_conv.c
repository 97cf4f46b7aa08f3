/*
 * test_cpu_conv.c - the "cpu" target's convolutions against the reference backend: the shared conv
 * cases of test/common/backend_cases.h (random 1-D/2-D convs of every sparsity kind, the benchmarks'
 * pattern layer, the demo model, the ONNX test models) with the cpu's kernel choices, and the cpu's
 * own conv kernels: wide rows in shift mode (and narrowed to AVX2), inputs packed in row bands, dense
 * convs vectorised over output channels, small planes as flat vectors, strided pattern convs in
 * channel-major order; and the input packer, float by float, against its definition.
 */
#define _XOPEN_SOURCE 700
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/cpu/conv/conv.h"
#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* ------------------------------------------------------------------ conv kernels */

START_TEST(conv_wide_rows_shift_mode)
{
    /* rows wider than half a vector: on AVX-512 each input row is loaded as aligned vectors and the
     * other columns shuffled out of them, with the most used column aligned by a lead of zeros; on
     * AVX2 (run here too where the host has AVX-512) unaligned loads, in tiles of 3 rows or more
     * where the output has them (a loaded row then serves the taps of several rows). Cases:
     * several column tiles, a partial last vector, strides (phase planes), dilation, asymmetric pads,
     * 5x5 windows, a pattern set whose taps sit mostly in column 0 or 2 (other leads), dense windows */
    static const struct {
        int64_t c, o, h, w, k, sy, sx, dil, pl, pr, which;
    } cases[] = {{9, 20, 6, 70, 3, 1, 1, 1, 1, 1, 0},  {7, 11, 9, 129, 3, 1, 1, 1, 1, 1, 1}, {5, 13, 7, 61, 3, 2, 2, 1, 1, 0, 0},
                 {6, 9, 8, 40, 3, 1, 3, 2, 2, 1, 2},   {4, 6, 9, 33, 5, 1, 1, 1, 2, 2, 3},  {5, 7, 5, 50, 3, 1, 1, 1, 0, 2, 2},
                 {3, 17, 11, 18, 3, 1, 1, 1, 1, 1, 1}, {8, 8, 4, 96, 3, 1, 2, 1, 1, 1, 4}};
    /* 0: the benchmark's 8 patterns (centre column most used); 1: left columns; 2: right columns;
     * 3: unstructured 5x5; 4: dense 3x3 windows with some kernels removed */
    static const uint64_t sets[3][4] = {{0x1b, 0x3a, 0xb2, 0x9a}, {0x49, 0x9, 0x41, 0x1b}, {0x124, 0x24, 0x104, 0x36}};
    setenv("PDC_CONV_CMAJOR", "0", 1); /* strided cases: conv.c's phase planes, not channel-major */
    const int avx512 = !strcmp(expected_isa(), "avx512");
    for (int round = 0; round < (avx512 ? 2 : 1); round++) {
        if (round) reopen_context("-avx512f"); /* the second round: AVX2 on an AVX-512 host */
        const char *isa = round ? "avx2" : expected_isa();
        for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
            fresh_model("wide");
            int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k, which = cases[q].which;
            input("x", DIMS(2, c, cases[q].h, cases[q].w));
            size_t wn = (size_t)(o * c * k * k);
            int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
            uint8_t *mask = malloc(wn);
            ck_assert(kp && mask);
            for (int64_t i = 0; i < o * c; i++) kp[i] = cpu_kernel_pattern(i);
            for (size_t e = 0; e < wn; e++) mask[e] = which == 3 ? e * 7 % 5 < 2 : kp[e / (size_t)(k * k)] >= 0;
            if (which < 3) constant_patterned("w", o, c, k, 4, sets[which], kp, (uint32_t)q + 41);
            else constant_masked("w", DIMS(o, c, k, k), mask, (uint32_t)q + 41);
            free(mask);
            free(kp);
            constant_rand("b", DIMS(o), 0.2f, 7);
            pdc_attrs *a = conv_attrs((k / 2) * cases[q].dil, cases[q].pl, cases[q].pr, cases[q].sy, cases[q].sx,
                                      cases[q].dil, "leaky_relu");
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_alpha", 0.1f));
            layer("conv", a, "y", NAMES("x", "w", "b"));
            output("y");
            char desc[96];
            snprintf(desc, sizeof desc, "wide case %zu (%s)", q, isa);
            pdc_program *p = check_matches_ref(desc, (uint32_t)q);
            ck_assert_kernel(p, "y", isa);
            if (!strcmp(isa, "avx512")) ck_assert_kernel(p, "y", "aligned rows + lane shifts");
            if (!strcmp(isa, "avx2")) {
                int64_t oh = (cases[q].h + 2 * (k / 2) * cases[q].dil - (k - 1) * cases[q].dil - 1) / cases[q].sy + 1;
                long ty = 0, tx = 0;
                const char *tile = strstr(kernel_of(p, "y"), "tile ");
                ck_assert_msg(tile && sscanf(tile, "tile %ldx%ldx8", &ty, &tx) == 2, "%s: %s", desc, kernel_of(p, "y"));
                /* no more row tiles than tiles of 3 rows make (they are balanced: 4 rows are 2 + 2) */
                ck_assert_msg((oh + ty - 1) / ty <= (oh + 2) / 3 && ty * tx <= 12, "%s: tile %ldx%ld, %" PRId64 " output rows",
                              desc, ty, tx, oh);
            }
            pdc_program_destroy(p);
        }
    }
    if (avx512) reopen_context(NULL);
    unsetenv("PDC_CONV_CMAJOR");
}
END_TEST

START_TEST(conv_large_inputs_packed_in_bands)
{
    /* a packed input larger than the band budget (512 KiB) is packed and computed band by band,
     * into a buffer per thread: pattern-sparse and dense kernels, stride 2, dilation, batch 2; and
     * one that fits, compiled for two threads, in a band per thread (its row tiles split evenly);
     * the output must match the reference and not depend on the thread count */
    static const struct {
        int64_t n, c, o, h, w, s, dil;
        int dense;
    } cases[] = {{2, 64, 20, 24, 70, 1, 1, 0}, {1, 48, 16, 50, 60, 2, 1, 1}, {1, 40, 12, 28, 100, 1, 2, 0},
                 {1, 16, 16, 28, 28, 1, 1, 0}};
    env_flag("PDC_OMP_STATIC", 1); /* two threads even on a busy machine: both band buffers used */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("bands");
        int64_t c = cases[q].c, o = cases[q].o, d = cases[q].dil;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        if (cases[q].dense) constant_rand("w", DIMS(o, c, 3, 3), 1.0f, (uint32_t)q + 3); /* the same values, not pruned */
        else pattern_weight("w", o, c, (uint32_t)q + 3);
        layer("conv", conv_attrs(d, d, d, cases[q].s, cases[q].s, d, "relu"), "y", NAMES("x", "w"));
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "banded case %zu", q);
        if (q == 3) ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        check_kernels(desc, (uint32_t)q + 9,
                      BC_KERNELS({"y", cases[q].dense ? "jit dense conv" : "jit pattern-sparse conv"},
                                 {"y", "packed in row bands"}));
        check_thread_invariance(desc);
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(conv_dense_output_channel_vectors)
{
    /* dense convs whose rows would leave vector lanes idle run vectorised over output channels:
     * 3x3, 5x5 and 1x1 windows, stride 2 and batch 2, dilation with a partial last pixel tile, three
     * blocks of filters per tile (48), groups, out_perm, inline and after-kernel activations, an
     * input packed in row bands (bit-identical at 1 and 2 threads), rows in several pixel tiles
     * with a shorter last one (29 = 15 + 14) */
    static const struct {
        int64_t n, c, o, h, w, k, s, dil, group;
        const char *act;
        int perm, force; /* force: PDC_CONV_OCVEC=1 (1x1 windows and short reductions go along rows) */
    } cases[] = {{1, 32, 32, 14, 14, 3, 1, 1, 1, "relu", 1, 0},   {2, 12, 48, 9, 9, 3, 2, 1, 1, "clip", 0, 1},
                 {1, 32, 64, 11, 13, 3, 1, 2, 1, "sigmoid", 0, 0}, {1, 32, 64, 6, 20, 1, 1, 1, 1, "relu", 1, 1},
                 {1, 64, 32, 10, 10, 3, 1, 1, 2, "leaky_relu", 0, 0}, {1, 12, 16, 7, 12, 5, 1, 1, 1, "relu", 0, 0},
                 {1, 64, 32, 70, 28, 3, 1, 1, 1, "relu", 0, 0},   {1, 32, 16, 5, 29, 3, 1, 1, 1, "relu", 1, 0},
                 {1, 16, 32, 14, 14, 3, 1, 1, 1, "relu", 0, 0}};
    env_flag("PDC_OMP_STATIC", 1);
    setenv("PDC_CONV_WINO", "0", 1); /* case 6 (70x28) would go to Winograd */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        env_flag("PDC_CONV_OCVEC", cases[q].force);
        fresh_model("ocvec");
        int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k, d = cases[q].dil, pad = (k / 2) * d;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        constant_rand("w", DIMS(o, c / cases[q].group, k, k), 0.3f, (uint32_t)q + 5);
        constant_rand("b", DIMS(o), 0.2f, (uint32_t)q + 6);
        pdc_attrs *a = conv_case_attrs(pad, cases[q].s, cases[q].s, d, cases[q].act, cases[q].group, o, cases[q].perm);
        layer("conv", a, "y", NAMES("x", "w", "b"));
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "output-channel case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 21);
        /* the last case reduces over 16 x 9 < 256 products per output: along rows */
        if (q == 8) ck_assert_kernel_lacks(p, 8, "y", "output channels");
        else ck_assert_kernel(p, "y", "output channels vectorised");
        if (q == 6) ck_assert_kernel(p, "y", "packed in row bands");
        pdc_program_destroy(p);
        if (q == 1 || q == 6) check_thread_invariance(desc);
    }
    unsetenv("PDC_CONV_OCVEC");
    unsetenv("PDC_CONV_WINO");
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(conv_small_planes_flat)
{
    /* planes of <= 8 columns run as flat vectors spanning rows: pattern and dense, 7x7 and odd shapes,
     * column and row strides (rows split into phase planes), dilation; left/right pads other than
     * the window's half (pl, pr; -1: the half), which decide how much padding rows can share */
    static const struct {
        int64_t c, o, h, w, k, sx, dil, sparse, sy, pl, pr;
    } cases[] = {{20, 24, 7, 7, 3, 1, 1, 1, 1, -1, -1},  {16, 16, 7, 7, 3, 1, 1, 0, 1, -1, -1},
                 {5, 9, 9, 6, 3, 2, 1, 1, 1, -1, -1},    {6, 8, 5, 8, 3, 1, 2, 0, 1, -1, -1},
                 {3, 12, 4, 3, 1, 1, 1, 0, 1, -1, -1},   {7, 7, 10, 7, 5, 1, 1, 1, 1, -1, -1},
                 {16, 24, 14, 14, 3, 2, 1, 1, 2, -1, -1}, {12, 16, 13, 13, 3, 2, 1, 0, 2, -1, -1},
                 {8, 8, 9, 5, 3, 1, 1, 1, 2, -1, -1},    {6, 9, 15, 11, 3, 2, 2, 1, 3, -1, -1},
                 {5, 8, 11, 11, 5, 2, 1, 1, 2, -1, -1},  {20, 24, 7, 6, 3, 1, 1, 1, 1, 1, 2},
                 {16, 16, 7, 6, 3, 1, 1, 1, 1, 2, 0},    {12, 16, 6, 6, 3, 1, 1, 0, 1, 0, 1},
                 {12, 20, 5, 5, 3, 1, 1, 1, 1, 2, 2},    {9, 16, 6, 4, 5, 1, 1, 0, 1, 3, 1},
                 {12, 16, 5, 5, 3, 1, 1, 1, 1, 3, 0}};
    static const uint64_t pats[4] = {0x1b, 0x3a, 0xb2, 0x92};
    setenv("PDC_CONV_OCVEC", "0", 1); /* dense cases: conv_dense.c's flat layout, not output-channel vectors */
    setenv("PDC_CONV_CMAJOR", "0", 1); /* strided pattern cases: conv.c's flat planes, not channel-major */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("flat");
        int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k;
        input("x", DIMS(1, c, cases[q].h, cases[q].w));
        size_t wn = (size_t)(o * c * k * k);
        int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
        uint8_t *mask = malloc(wn);
        ck_assert(kp && mask);
        for (int64_t i = 0; i < o * c; i++) kp[i] = i % 3 == 0 ? -1 : (int32_t)(i % 4);
        for (size_t i = 0; i < wn; i++) mask[i] = (i * 7) % 5 < 2;
        if (cases[q].sparse && k == 3) constant_patterned("w", o, c, 3, 4, pats, kp, (uint32_t)q + 1);
        else if (cases[q].sparse && k == 5) constant_masked("w", DIMS(o, c, k, k), mask, (uint32_t)q + 1);
        else constant_rand("w", DIMS(o, c, k, k), 1.0f, (uint32_t)q + 1); /* dense: the values unscaled */
        free(mask);
        free(kp);
        constant_rand("b", DIMS(o), 0.2f, 3);
        int64_t pad = (k / 2) * cases[q].dil, pl = cases[q].pl < 0 ? pad : cases[q].pl, pr = cases[q].pr < 0 ? pad : cases[q].pr;
        layer("conv", conv_attrs(pad, pl, pr, cases[q].sy, cases[q].sx, cases[q].dil, "relu"), "y", NAMES("x", "w", "b"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "flat case %zu", q);
        pdc_program *p = check_matches_ref(what, (uint32_t)q);
        /* (case 3's dilated 8-column plane wastes about as many lanes flat as along rows: either is fine) */
        if (strcmp(expected_isa(), "avx512") == 0 && q != 3) {
            ck_assert_kernel(p, "y", "flat vector");
            if (cases[q].sparse) ck_assert_kernel(p, "y", "aligned + lane shifts"); /* dense: conv_dense.c */
        }
        pdc_program_destroy(p);
    }
    unsetenv("PDC_CONV_OCVEC");
    unsetenv("PDC_CONV_CMAJOR");
}
END_TEST

START_TEST(conv_pointwise_flat_rows)
{
    /* dense 1x1 convs at stride 1 without padding run over the plane as one row of h*w pixels; where
     * that row is whole vectors (16x16, 4x12: 256 and 48 pixels) the kernel reads the input where it lies,
     * batch 2 included (each image's planes from its own offset); so is a plane that ends inside a vector
     * (14x14: 196 pixels, the last vector's loads masked). 7x7 keeps the flat layout on AVX-512; a strided
     * or padded 1x1 conv is packed as before. Against the reference, and
     * bit-identical at 1 and 2 threads. */
    static const struct {
        int64_t n, c, o, h, w, s, pad;
        const char *kernel; /* what the kernel's description must say (AVX-512 hosts) */
    } cases[] = {{2, 24, 48, 16, 16, 1, 0, "input read in place"}, {1, 8, 16, 4, 12, 1, 0, "input read in place"},
                 {2, 16, 32, 14, 14, 1, 0, "input read in place"}, {1, 16, 32, 7, 7, 1, 0, "flat vectors"},
                 {2, 16, 32, 16, 16, 2, 0, "jit dense conv 1x1"},   {1, 16, 32, 16, 16, 1, 1, "jit dense conv 1x1"}};
    setenv("PDC_CONV_OCVEC", "0", 1);
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("pointwise");
        int64_t c = cases[q].c, o = cases[q].o;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        constant_rand("w", DIMS(o, c, 1, 1), 1.0f, (uint32_t)q + 61);
        constant_rand("b", DIMS(o), 0.2f, (uint32_t)q + 62);
        layer("conv", conv_attrs(cases[q].pad, cases[q].pad, cases[q].pad, cases[q].s, cases[q].s, 1, "relu"), "y",
              NAMES("x", "w", "b"));
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "pointwise case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 63);
        if (!strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "y", cases[q].kernel);
        /* (on AVX2 the 7x7 plane is no flat layout's: 8-lane vectors, rows wider than half a vector) */
        if (q >= 4) ck_assert_kernel_lacks(p, q, "y", "in place");
        pdc_program_destroy(p);
        check_thread_invariance(desc);
    }
    unsetenv("PDC_CONV_OCVEC");
}
END_TEST

/* Conv x (w, b) with attributes a, then (residual) an add of x and a relu, the model's output "y"; returns
 * the conv's output name (the layer whose kernel the tests look at). */
static const char *conv_maybe_residual(pdc_attrs *a, int residual)
{
    const char *conv_out = residual ? "d" : "y";
    layer("conv", a, conv_out, NAMES("x", "w", "b"));
    if (residual) {
        layer("add", NULL, "s", NAMES("d", "x"));
        layer("relu", NULL, "y", NAMES("s"));
    }
    output("y");
    return conv_out;
}

START_TEST(conv_depthwise_in_place)
{
    /* dense 3x3 depthwise convs on AVX-512 read the input where it lies with masked loads (conv_dw.c):
     * stride 1 and 2, odd sizes (rows of 33 and 37: a partial last vector), asymmetric pads (0 above,
     * 2 left, 1 right), batch 2, relu/clip/leaky relu inline and a residual add + relu taken
     * from the next layers; a sigmoid keeps the packed family. Against the reference, and bit-identical
     * at 1 and 2 threads. */
    static const struct {
        int64_t n, c, h, w, s, pt, pl, pr;
        const char *act;
        int residual, in_place;
    } cases[] = {{2, 16, 17, 33, 1, 1, 1, 1, "relu", 0, 1},      {1, 24, 20, 37, 2, 1, 1, 1, "clip", 0, 1},
                 {1, 8, 12, 18, 1, 0, 2, 1, "leaky_relu", 0, 1}, {2, 16, 14, 14, 1, 1, 1, 1, NULL, 1, 1},
                 {1, 12, 7, 7, 2, 1, 1, 1, "relu", 0, 1},        {1, 8, 10, 20, 1, 1, 1, 1, "sigmoid", 0, 0}};
    const int avx512 = !strcmp(expected_isa(), "avx512");
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("depthwise");
        int64_t c = cases[q].c;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        constant_rand("w", DIMS(c, 1, 3, 3), 1.0f, (uint32_t)q + 71);
        constant_rand("b", DIMS(c), 0.2f, (uint32_t)q + 72);
        pdc_attrs *a = conv_case_attrs(1, cases[q].s, cases[q].s, 1, cases[q].act, c, c, 0);
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(cases[q].pt, cases[q].pl, cases[q].pt, cases[q].pr)));
        const char *conv_out = conv_maybe_residual(a, cases[q].residual);
        char desc[64];
        snprintf(desc, sizeof desc, "depthwise case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 73);
        if (avx512 && cases[q].in_place) ck_assert_kernel(p, conv_out, "input read in place with masked loads");
        if (cases[q].residual && avx512) ck_assert_kernel(p, "y", "fused into the epilogue");
        if (!cases[q].in_place) ck_assert_kernel_lacks(p, q, conv_out, "masked loads");
        pdc_program_destroy(p);
        check_thread_invariance(desc);
    }
}
END_TEST

START_TEST(conv_strided_channel_major)
{
    /* strided pattern-sparse convs run channel-major (conv_cmajor.c): rows in several column tiles
     * with a partial last vector and out_perm, flat planes (batch 2, groups; an 8x8 plane of 5
     * vectors in two column tiles), a column-only stride with dilation, unstructured 5x5 windows,
     * more filters than a chunk of accumulators (300: chunks of 256 on AVX-512; 170 in column
     * tiles of 3 vectors, whose pieces go chunk by chunk), an input packed in row bands, and
     * stride 1 when forced; inline and after-kernel activations. Too few kernels per channel
     * (2 filters) stay with conv.c. */
    static const struct {
        int64_t n, c, o, h, w, k, sy, sx, dil, group;
        const char *act;
        int perm, force;
    } cases[] = {{1, 16, 24, 20, 70, 3, 2, 2, 1, 1, "relu", 1, 0},  {2, 12, 20, 9, 9, 3, 2, 2, 1, 1, "clip", 0, 0},
                 {1, 8, 32, 14, 14, 3, 2, 2, 1, 2, "sigmoid", 0, 0}, {1, 6, 16, 15, 40, 3, 1, 2, 2, 1, "leaky_relu", 0, 0},
                 {1, 8, 12, 11, 11, 5, 2, 2, 1, 1, "relu", 0, 0},   {1, 4, 300, 10, 10, 3, 2, 2, 1, 1, "relu", 0, 0},
                 {1, 64, 16, 112, 112, 3, 2, 2, 1, 1, "relu", 0, 0}, {1, 16, 16, 12, 40, 3, 1, 1, 1, 1, "relu", 0, 1},
                 {1, 8, 16, 16, 16, 3, 2, 2, 1, 1, "relu", 0, 0},    {1, 8, 2, 14, 14, 3, 2, 2, 1, 1, "relu", 0, 0},
                 {1, 8, 300, 16, 16, 3, 2, 2, 1, 1, "relu", 0, 0}};
    env_flag("PDC_OMP_STATIC", 1);
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        env_flag("PDC_CONV_CMAJOR", cases[q].force);
        fresh_model("cmajor");
        int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k, d = cases[q].dil, cg = c / cases[q].group;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        if (k == 3) {
            pattern_weight("w", o, cg, (uint32_t)q + 50);
        } else {
            size_t wn = (size_t)(o * cg * k * k);
            uint8_t *mask = malloc(wn);
            ck_assert_ptr_nonnull(mask);
            for (size_t i = 0; i < wn; i++) mask[i] = (i / 25 * 3 + i % 25 * 7) % 5 < 2; /* five masks, over all 25 taps */
            constant_masked("w", DIMS(o, cg, k, k), mask, (uint32_t)q + 50);
            free(mask);
        }
        constant_rand("b", DIMS(o), 0.2f, (uint32_t)q + 51);
        int64_t pad = (k / 2) * d;
        pdc_attrs *a = conv_case_attrs(pad, cases[q].sy, cases[q].sx, d, cases[q].act, cases[q].group, o, cases[q].perm);
        layer("conv", a, "y", NAMES("x", "w", "b"));
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "channel-major case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 61);
        /* case 9: 2 filters, too few kernels per channel; a 5x5 union of 25 taps leaves AVX2's 16
         * registers no tile: conv.c's kernel for both */
        if (q == 9) ck_assert_kernel_lacks(p, 9, "y", "channel-major");
        else if (k == 3 || !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "y", "channel-major");
        if (q == 1 && !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "y", "flat vectors in tiles of");
        if (q == 5 && !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "y", "256 filters a chunk");
        if ((q == 8 || q == 10) && !strcmp(expected_isa(), "avx512"))
            ck_assert_kernel(p, "y", "plane as 5 flat vectors in tiles of 3");
        if (q == 10 && !strcmp(expected_isa(), "avx512")) ck_assert_kernel(p, "y", "170 filters a chunk");
        if (q == 6) ck_assert_kernel(p, "y", "packed in row bands");
        pdc_program_destroy(p);
        if (q == 1 || q == 6 || q == 10) check_thread_invariance(desc);
    }
    unsetenv("PDC_CONV_CMAJOR");
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

/* ------------------------------------------------------------------ the input packer */

/* What the packer must write at float t of channel c's planes (conv.h's layout), from its definition. */
static float packed_at(const conv_geom *g, const float *x, int64_t c, int64_t t, int64_t r0, int64_t rows)
{
    int64_t ph = t / g->pstride, u = t % g->pstride - g->lead;
    if (ph >= g->nph || u < 0 || u >= rows * g->wq) return 0.0f; /* lead, tail, past the planes */
    int64_t r = r0 + u / g->wq, j = u % g->wq;
    int64_t iy = (g->flat ? r * g->sy + ph / g->sx : r) * g->py - g->pt;
    int64_t ix = (j * g->sx + ph % g->sx) * g->px - g->pl;
    if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) return 0.0f;
    return x[(c * g->h + iy) * g->w + ix];
}

/* n floats against an inaccessible page, right after one (at_start) or right before one, so that
 * the first read outside them faults (masked vector loads are checked by neither ASan nor valgrind). */
typedef struct guarded {
    char *block;
    size_t bytes;
} guarded;

static float *guarded_floats(guarded *gd, size_t n, int at_start)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), data = (n * sizeof(float) + page - 1) / page * page;
    gd->bytes = data + 2 * page;
    void *p = NULL;
    ck_assert_int_eq(posix_memalign(&p, page, gd->bytes), 0);
    gd->block = p;
    ck_assert_int_eq(mprotect(gd->block, page, PROT_NONE), 0);
    ck_assert_int_eq(mprotect(gd->block + page + data, page, PROT_NONE), 0);
    return (float *)(at_start ? gd->block + page : gd->block + page + data - n * sizeof(float));
}

static void guarded_free(guarded *gd)
{
    ck_assert_int_eq(mprotect(gd->block, gd->bytes, PROT_READ | PROT_WRITE), 0);
    free(gd->block);
}

START_TEST(conv_band_tiles_even_and_covering)
{
    /* every split cpu_conv_band makes (nband a multiple of band_groups, at most nty): bands of
     * contiguous row tiles covering [0, nty), none empty or larger than ceil(nty / nband) (what the
     * band buffer holds), and each group (a thread's contiguous share) within one row tile of the
     * others: 14 tiles in 6 bands for 2 threads are 3, 2, 2 | 3, 2, 2 */
    for (int64_t groups = 1; groups <= 4; groups++)
        for (int64_t nty = 1; nty <= 60; nty++)
            for (int64_t nband = groups; nband <= nty; nband += groups) {
                conv_geom g;
                memset(&g, 0, sizeof g);
                g.nty = nty, g.nband = nband, g.band_groups = groups;
                int64_t next = 0, cap = (nty + nband - 1) / nband, share = 0, lo = nty, hi = 0;
                for (int64_t b = 0; b < nband; b++) {
                    int64_t t0, t1;
                    cpu_conv_band_tiles(&g, b, &t0, &t1);
                    ck_assert_msg(t0 == next && t1 > t0 && t1 - t0 <= cap,
                                  "nty %ld, %ld bands, %ld groups: band %ld is [%ld, %ld)", (long)nty, (long)nband,
                                  (long)groups, (long)b, (long)t0, (long)t1);
                    share += t1 - t0, next = t1;
                    if ((b + 1) % (nband / groups) == 0) {
                        lo = share < lo ? share : lo, hi = share > hi ? share : hi;
                        share = 0;
                    }
                }
                ck_assert_int_eq(next, nty);
                ck_assert_msg(hi - lo <= 1, "nty %ld, %ld bands, %ld groups: shares of %ld to %ld row tiles", (long)nty,
                              (long)nband, (long)groups, (long)lo, (long)hi);
            }
    /* the example of the comment */
    conv_geom g;
    memset(&g, 0, sizeof g);
    g.nty = 14, g.nband = 6, g.band_groups = 2;
    static const int64_t want[6] = {3, 2, 2, 3, 2, 2};
    for (int64_t b = 0; b < 6; b++) {
        int64_t t0, t1;
        cpu_conv_band_tiles(&g, b, &t0, &t1);
        ck_assert_int_eq(t1 - t0, want[b]);
    }
}
END_TEST

START_TEST(conv_input_packing)
{
    /* the packed input, every float of it (zeros included), against its definition, for the
     * AVX-512 packer (where the host has it) and the portable one: strides 1-3 (2: the vector
     * stride-2 gather), one-tap axis strides, paddings (wider than a vector too), flat planes
     * (rows split into phases; 25 of them, more than are prepared at a time), bands (in buffers for
     * more rows: the floats past what they read left alone), leads and tails, rows shorter and
     * longer than a vector, channels left alone; the input against inaccessible pages, so a lane
     * read outside it faults */
    uint32_t seed = 12345;
#define RND(n) ((int64_t)((seed = seed * 1664525u + 1013904223u) >> 8) % (n))
    for (int q = 0; q < 400; q++) {
        conv_geom g = {0};
        g.c = 1 + RND(4);
        g.h = 1 + RND(20);
        g.w = 1 + RND(q % 4 ? 20 : 70);
        g.sx = q % 40 ? 1 + RND(3) : 5;
        g.sy = q % 40 ? 1 + RND(3) : 5;
        g.px = 1 + RND(4) / 3; /* mostly 1 */
        g.py = 1 + RND(4) / 3;
        g.pl = RND(q % 5 ? 4 : 40);
        g.pt = RND(4);
        g.flat = q % 40 ? RND(3) == 0 : 1;
        g.nph = g.flat ? g.sx * g.sy : g.sx;
        g.wq = 1 + RND(q % 4 ? 24 : 80);
        g.lead = RND(20);
        int64_t hq = (g.h + 2 * g.pt) / (g.flat ? g.sy : 1) + 1;
        int64_t r0 = RND(3) ? 0 : RND(hq), r1 = r0 + 1 + RND(hq - r0);
        /* a buffer for more rows than packed (a band's buffer, sized for the largest): the zeros
         * after the rows stop where the rows packed stop reading, that many rows' floats earlier */
        g.band_rows = RND(3) ? r1 - r0 : r1 - r0 + 1 + RND(3);
        g.pstride = g.lead + g.band_rows * g.wq + RND(40);
        const int64_t end = g.pstride - (g.band_rows - (r1 - r0)) * g.wq;
        g.ps = g.nph * g.pstride + RND(3) * 7;
        size_t xn = (size_t)(g.c * g.h * g.w), pn = (size_t)(g.c * g.ps);
        guarded gx;
        float *x = guarded_floats(&gx, xn, q % 2), *want = malloc(pn * sizeof *want), *got = malloc(pn * sizeof *got);
        test_fill_random(x, xn, (uint32_t)q + 7);
        for (int64_t c = 0; c < g.c; c++)
            for (int64_t t = 0; t < g.ps; t++)
                want[c * g.ps + t] = t < g.nph * g.pstride && t % g.pstride >= end ? 1e30f /* left alone */
                                                                                     : packed_at(&g, x, c, t, r0, r1 - r0);
        for (int portable = 0; portable < 2; portable++) {
            for (size_t i = 0; i < pn; i++) got[i] = 1e30f; /* whatever the packer leaves shows */
            /* channels [c0, c1): the others are left alone */
            int64_t c0 = g.c > 1 ? 1 : 0, c1 = g.c > 2 && q % 3 == 0 ? g.c - 1 : g.c;
            (portable ? cpu_conv_pack_portable : cpu_conv_pack)(&g, x, got, c0, c1, r0, r1);
            for (int64_t i = 0; i < (int64_t)pn; i++) {
                float w = i < c0 * g.ps || i >= c1 * g.ps ? 1e30f : want[i];
                if (got[i] != w)
                    ck_abort_msg("case %d (%s): c %" PRId64 " w %" PRId64 " s %" PRId64 "x%" PRId64 " flat %d wq %" PRId64
                                 " lead %" PRId64 " rows %" PRId64 "-%" PRId64 ": float %" PRId64 " is %g, not %g",
                                 q, portable ? "portable" : "default", g.c, g.w, g.sy, g.sx, g.flat, g.wq, g.lead, r0, r1,
                                 i, (double)got[i], (double)w);
            }
        }
        guarded_free(&gx);
        free(want);
        free(got);
    }
#undef RND
}
END_TEST

START_TEST(conv_flat_planes_overlap)
{
    /* flat planes overlap (a plane's last rows, padding, lie in the next one's lead): packed for
     * real flat layouts - 16 and 8 lanes, strides (of one-tap axes too, taken by the packing),
     * dilations, pads, every lead - every float a valid output reads holds its definition, and every
     * lane's read, discarded or not, lies inside the buffer (the tail; against an inaccessible page)
     * on a float the packer wrote, as does the aligned vector shift mode loads it from */
    uint32_t seed = 777;
#define RND(n) ((int64_t)((seed = seed * 1664525u + 1013904223u) >> 8) % (n))
    int tested = 0;
    for (int q = 0; q < 300; q++) {
        conv_geom g = {0};
        g.c = 1 + RND(3);
        g.kh = 1 + RND(3), g.kw = 1 + RND(3);
        g.sy = 1 + RND(2), g.sx = 1 + RND(2);
        g.dy = 1 + RND(2), g.dx = 1 + RND(2);
        g.h = g.kh + RND(10), g.w = g.kw + RND(10);
        g.pt = RND(g.kh), g.pl = RND(g.kw);
        int64_t pb = RND(g.kh), pr = RND(g.kw);
        g.py = g.px = 1;
        g.oh = (g.h + g.pt + pb - g.dy * (g.kh - 1) - 1) / g.sy + 1;
        g.ow = (g.w + g.pl + pr - g.dx * (g.kw - 1) - 1) / g.sx + 1;
        /* as cpu_conv_geometry: a one-tap axis's stride is the packing's */
        if (g.kh == 1) g.py = g.sy, g.sy = 1, g.dy = 1;
        if (g.kw == 1) g.px = g.sx, g.sx = 1, g.dx = 1;
        const int vec = q % 3 == 2 ? 8 : 16;
        if (q == 0) /* ResNet-50's 512@7 */
            g.kh = g.kw = 3, g.sy = g.sx = g.dy = g.dx = 1, g.h = g.w = 7, g.pt = g.pl = 1, g.oh = g.ow = 7;
        if (g.oh < 1 || g.ow < 1 || !cpu_conv_layout_flat(&g, vec, vec == 16 ? 7 : 4)) continue;
        g.lead = q == 0 ? 15 : vec == 16 ? RND(16) : 0; /* a lead only in shift mode (16 lanes) */
        cpu_conv_flat_planes(&g, g.nvx * vec);
        if (q == 0) { /* 80 floats a plane instead of 112; the last one reads 17 past them */
            ck_assert_int_eq(g.pstride, 80);
            ck_assert_int_eq(g.tail, 32);
        }
        size_t xn = (size_t)(g.c * g.h * g.w), pn = (size_t)(g.c * g.ps + g.tail);
        guarded gx, gp;
        float *x = guarded_floats(&gx, xn, q % 2), *got = guarded_floats(&gp, pn, 0);
        test_fill_random(x, xn, (uint32_t)q + 3);
        for (int portable = 0; portable < 2; portable++) {
            for (size_t i = 0; i < pn; i++) got[i] = 1e30f;
            (portable ? cpu_conv_pack_portable : cpu_conv_pack)(&g, x, got, 0, g.c, 0, g.hq);
            for (int64_t c = 0; c < g.c; c++)
                for (int64_t ky = 0; ky < g.kh; ky++)
                    for (int64_t kx = 0; kx < g.kw; kx++) {
                        int64_t at = c * g.ps + g.lead +
                                     cpu_conv_flat_offset(g.sy, g.sx, g.dy, g.dx, g.wq, g.pstride, ky, kx);
                        for (int64_t p = 0; p < g.nvx * vec; p++) {
                            int64_t y = p / g.wq, xo = p % g.wq, i = at + p, line_end = (i / 16 + 1) * 16;
                            ck_assert_msg(line_end <= (int64_t)pn && got[i] != 1e30f && got[line_end - 1] != 1e30f,
                                          "case %d: lane %ld of tap %ld,%ld reads float %ld of %zu, unwritten", q, (long)p,
                                          (long)ky, (long)kx, (long)i, pn);
                            if (y >= g.oh || xo >= g.ow) continue; /* a discarded lane */
                            int64_t iy = (y * g.sy + ky * g.dy) * g.py - g.pt, ix = (xo * g.sx + kx * g.dx) * g.px - g.pl;
                            float want = iy < 0 || iy >= g.h || ix < 0 || ix >= g.w ? 0.0f : x[(c * g.h + iy) * g.w + ix];
                            ck_assert_msg(got[i] == want,
                                          "case %d (%s): %ldx%ld s%ld,%ld d%ld,%ld pad %ld,%ld lead %ld pstride %ld: "
                                          "output %ld,%ld tap %ld,%ld reads %g, not %g",
                                          q, portable ? "portable" : "default", (long)g.h, (long)g.w, (long)g.sy,
                                          (long)g.sx, (long)g.dy, (long)g.dx, (long)g.pt, (long)g.pl, (long)g.lead,
                                          (long)g.pstride, (long)y, (long)xo, (long)ky, (long)kx, (double)got[i],
                                          (double)want);
                        }
                    }
        }
        tested++;
        guarded_free(&gx);
        guarded_free(&gp);
    }
    ck_assert_int_gt(tested, 100);
#undef RND
}
END_TEST

START_TEST(conv_dense_winograd)
{
    /* dense 3x3 stride-1 convs with output planes from 14x14 and 32+ input channels run by Winograd
     * F(4x4, 3x3) on AVX-512 (conv_wino.c): planes that end inside a tile (30x29, 31x33), pads 0, 1
     * and 2, batch 2, out_perm, relu/clip/leaky relu/none inline, a residual add + relu taken from the
     * next layers, tile rows of more than one vector of tiles (70 wide: 18 tiles), several blocks an
     * image (64 channels of 56x56: 3 blocks, split by filters at 2 threads; bit-identical at 1 and 2
     * threads), and layers under the size rules forced onto it (PDC_CONV_WINO=1: few channels, a 7x7
     * plane, a tile and a half). Against the reference (Winograd rounds differently, below); a sigmoid,
     * a stride of 2, a dilation, groups, a 13x14 plane and 3 input channels keep the direct families. */
    static const struct {
        int64_t n, c, o, h, w, pad, s, dil, group;
        const char *act;
        int perm, residual, force, wino;
    } cases[] = {{1, 32, 32, 28, 28, 1, 1, 1, 1, "relu", 0, 0, 0, 1},      {2, 8, 16, 30, 29, 1, 1, 1, 1, "clip", 1, 0, 1, 1},
                 {1, 12, 24, 33, 31, 0, 1, 1, 1, "leaky_relu", 0, 0, 1, 1}, {1, 16, 8, 28, 30, 2, 1, 1, 1, NULL, 0, 0, 1, 1},
                 {1, 24, 24, 32, 70, 1, 1, 1, 1, NULL, 0, 1, 1, 1},       {1, 64, 64, 56, 56, 1, 1, 1, 1, NULL, 0, 1, 0, 1},
                 {1, 16, 16, 7, 7, 1, 1, 1, 1, "relu", 1, 0, 1, 1},       {1, 32, 32, 13, 14, 1, 1, 1, 1, "relu", 0, 0, 0, 0},
                 {1, 32, 32, 28, 28, 1, 1, 1, 1, "sigmoid", 0, 0, 0, 0},  {1, 32, 32, 56, 56, 1, 2, 1, 1, "relu", 0, 0, 0, 0},
                 {1, 32, 32, 32, 32, 2, 1, 2, 1, "relu", 0, 0, 0, 0},     {1, 32, 32, 32, 32, 1, 1, 1, 2, "relu", 0, 0, 0, 0},
                 {1, 3, 32, 28, 28, 1, 1, 1, 1, "relu", 0, 0, 0, 0}};
    const int avx512 = !strcmp(expected_isa(), "avx512");
    /* Winograd's transforms (coefficients up to 5 on the input, 8 on the output) round otherwise than
     * a direct sum: case 1 (8 channels, clipped at 0.75) is 9.4e-6 off, over the suite's 1e-5 x 0.75 */
    const float tol = bc_tolerance;
    bc_tolerance = 3e-5f;
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        env_flag("PDC_CONV_WINO", cases[q].force);
        fresh_model("winograd");
        int64_t c = cases[q].c, o = cases[q].o;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        constant_rand("w", DIMS(o, c / cases[q].group, 3, 3), 0.3f, (uint32_t)q + 81);
        constant_rand("b", DIMS(o), 0.2f, (uint32_t)q + 82);
        pdc_attrs *a = conv_case_attrs(cases[q].pad, cases[q].s, cases[q].s, cases[q].dil, cases[q].act, cases[q].group,
                                       o, cases[q].perm);
        const char *conv_out = conv_maybe_residual(a, cases[q].residual);
        char desc[64];
        snprintf(desc, sizeof desc, "winograd case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 83);
        if (avx512 && cases[q].wino) ck_assert_kernel(p, conv_out, "by Winograd F(4x4, 3x3)");
        if (avx512 && cases[q].residual) ck_assert_kernel(p, "y", "fused into the epilogue");
        if (!avx512 || !cases[q].wino) ck_assert_kernel_lacks(p, q, conv_out, "Winograd");
        pdc_program_destroy(p);
        if (q == 1 || q == 5) check_thread_invariance(desc);
    }
    bc_tolerance = tol;
    unsetenv("PDC_CONV_WINO");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_conv");
    bc_tcases t = bc_add_some_cases(s, bc_setup, bc_teardown, BC_TC_CONV);
    test_add_tests(t.conv, TEST_LIST(conv_input_packing, conv_flat_planes_overlap, conv_band_tiles_even_and_covering,
                                     conv_small_planes_flat, conv_pointwise_flat_rows, conv_depthwise_in_place,
                                     conv_strided_channel_major, conv_wide_rows_shift_mode,
                                     conv_large_inputs_packed_in_bands, conv_dense_output_channel_vectors,
                                     conv_dense_winograd));
    return cpu_run(s);
}
