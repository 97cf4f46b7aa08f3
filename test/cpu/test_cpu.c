/*
 * test_cpu.c - the "cpu" target against the reference backend.
 *
 * The shared cases of test/common/backend_cases.h (random elementwise, conv of every sparsity kind, fc/gemm/
 * matmul, LSTM/GRU, pooling, batchnorm, the ONNX test models, the demo model: each compiled for "ref"
 * and for "cpu", run on the same pseudo-random inputs, max |cpu - ref| <= 1e-5 x max |ref|), with the
 * cpu's kernel choices (pdc_program_layer_kernel: a JIT kernel where one applies, the reference
 * kernel with a reason where not - never an error), plus the cpu's own: flat-vector small planes,
 * thread invariance, block-sparse RNN gates, the kernel cache, the ISA and its overrides.
 *
 * Under valgrind (which hides AVX-512 from the program: the JIT must then choose AVX2) and in
 * sanitizer builds the random sweeps run fewer cases. Kernels are cached in a fresh temporary
 * cache_dir per test process.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <inttypes.h>
#include <omp.h>
#include <stdatomic.h>
#include <float.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/conv/conv.h"
#include "backends/llvm/llvm.h"
#include "test/common/testutil.h"
#include "test/common/backend_cases.h"

/* The ISA the JIT must pick on this host: AVX-512 if the CPU (as this process sees it) has it.
 * valgrind's CPU has no AVX-512, so under valgrind this expects AVX2. */
static const char *expected_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
    return "sse";
}

/* The cpu's kernel for each shared case of backend_cases.h. */
static void bc_expect_kernels(bc_case which, const pdc_program *p, int variant)
{
    switch (which) {
    case BC_UNARY:
        ck_assert_kernel(p, "y0", "jit elementwise relu");
        ck_assert_kernel(p, "y0", expected_isa());
        ck_assert_kernel(p, "y5", "jit elementwise sigmoid");
        ck_assert_kernel(p, "y6", "jit elementwise tanh");
        break;
    case BC_BINARY: ck_assert_kernel(p, "y", "jit elementwise"); break;
    case BC_CONST_OPERAND: ck_assert_kernel(p, "y", "38 runs of 35 (scalar x vector)"); break;
    case BC_BATCHNORM: ck_assert_kernel(p, "y", "batchnorm as a per-channel multiply-add"); break;
    case BC_CONV_RANDOM: ck_assert_kernel(p, "y", "jit "); break;
    case BC_CONV_PATTERN:
        ck_assert_kernel(p, "y", "jit pattern-sparse conv 3x3, 8 patterns, 50% kernels kept, 4.50x fewer FLOPs");
        ck_assert_kernel(p, "y", expected_isa());
        break;
    case BC_FC:
        ck_assert_kernel(p, "y", variant == 0 ? "blas" : variant == 3 ? "jit dense fc for batch" : "jit block-sparse fc");
        break;
    case BC_GEMM:
    case BC_MATMUL: ck_assert_kernel(p, "y", "blas sgemm"); break;
    case BC_MATMUL_CONST: {
        /* sparse weights on the block-sparse kernel (transposed to [N, K]) unless they keep more than
         * half; dense ones (and those) packed in 8x8 blocks for 2-32 rows, else OpenBLAS */
        int kind = variant % 3, small = variant % 6 >= 3, too_dense = variant >= 6;
        ck_assert_kernel(p, "y", kind && !too_dense ? "jit block-sparse matmul, " : small ? "jit dense matmul for " : "blas sgemm");
        if (kind && !too_dense)
            ck_assert_kernel(p, "y", kind == 1 ? " of the transposed weights" : "unstructured as blocks 1x1 of the transposed");
        break;
    }
    case BC_RNN:
        /* dense: OpenBLAS, or the lanes kernel for few rows where the gate slices fall on its blocks */
        if (variant == 0) ck_assert_msg(!strstr(kernel_of(p, "rnn"), "block-sparse"), "%s", kernel_of(p, "rnn"));
        break;
    case BC_POOL: /* "max pool KxK" or "average pool KxK" (1-D ones too), not "ref fallback: ... pooling" */
        ck_assert_kernel(p, "y", "pool ");
        ck_assert_kernel(p, "g", "global average pool");
        break;
    case BC_EVERY_OP:
        ck_assert_kernel(p, "s", "jit softmax");
        ck_assert_kernel(p, "t", "transpose as");
        ck_assert_kernel(p, "c", "concat of 2 inputs");
        ck_assert_kernel(p, "f", "flatten: a copy");
        ck_assert_kernel(p, "r", "reshape: a copy");
        break;
    case BC_SOFTMAX: ck_assert_kernel(p, "y", variant ? "vectors across columns" : "jit softmax, "); break;
    case BC_MOVE:
        if (variant) {
            ck_assert_kernel(p, "t", "tiles");
        } else {
            const char *k = kernel_of(p, "t");
            ck_assert_msg(strstr(k, "copied in runs") || strstr(k, "transpose that keeps the order: a copy"),
                          "layer t: kernel \"%s\" neither copies runs nor the whole", k);
        }
        ck_assert_kernel(p, "c", "concat of");
        ck_assert_kernel(p, "r", "reshape: a copy");
        break;
    }
}

/* ------------------------------------------------------------------ convolution */

/* Attributes of a 2-D conv: pads top = bottom = pt, left pl, right pr; strides; dilation; activation. */
static pdc_attrs *conv_attrs(int64_t pt, int64_t pl, int64_t pr, int64_t sy, int64_t sx, int64_t dil, const char *act)
{
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(pt, pl, pt, pr)));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", DIMS(sy, sx)));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", DIMS(dil, dil)));
    if (act) ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", act)); /* NULL: none */
    return a;
}

/* conv_attrs with pads `pad` all round, groups, clip bounds for "clip" (act NULL: none) and, with perm, an out_perm
 * over o (<= 64) channels (reversed, rotated by 3). */
static pdc_attrs *conv_case_attrs(int64_t pad, int64_t sy, int64_t sx, int64_t dil, const char *act, int64_t group,
                                  int64_t o, int perm)
{
    pdc_attrs *a = conv_attrs(pad, pad, pad, sy, sx, dil, act);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", group));
    if (act && !strcmp(act, "clip")) {
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", -0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_max", 0.75f));
    }
    if (perm) {
        int64_t pv[64];
        ck_assert(o <= 64);
        for (int64_t i = 0; i < o; i++) pv[i] = (o - 1 - i + 3) % o;
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", (size_t)o, pv));
    }
    return a;
}

/* pdc_program_run from thread 0 of a team of 2 (nesting off, libgomp's default): the program's own
 * regions get a team of 1, whatever it was compiled for. No check inside the region: a failed one
 * would jump out of it. */
static int outer_team;
static pdc_status run_in_parallel_region(const pdc_program *p, size_t ni, pdc_tensor *const *in, size_t no,
                                         pdc_tensor *const *out)
{
    pdc_status st = PDC_ERR_INTERNAL;
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 0) {
        outer_team = omp_get_num_threads();
        st = pdc_program_run(p, ni, in, no, out);
    }
    return st;
}

/* Compiles mdl with threads = 1 and = 2 and requires bit-identical outputs, also from the 2-thread
 * program run on a team of 1. */
static void check_thread_invariance(const char *what)
{
    /* 1 thread, 2, and 2 asked but a team of 1: that thread then takes every piece of the other's
     * share from its back (a banded conv's row tiles packed one at a time) - where the program runs
     * 2 threads (PDC_OMP_STATIC, or a machine not busy) */
    float *res[3] = {NULL, NULL, NULL};
    size_t n0 = 0;
    const int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(1);
    for (int t = 0; t < 3; t++) {
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", t ? "2" : "1"));
        pdc_program *p = NULL;
        ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &p));
        size_t no, *sz;
        if (t == 2) bc_run = run_in_parallel_region, outer_team = 0;
        float **r = run_prog(p, 5, &no, &sz);
        bc_run = pdc_program_run;
        if (t == 2) ck_assert_int_eq(outer_team, 2);
        res[t] = r[0];
        n0 = sz[0];
        for (size_t i = 1; i < no; i++) free(r[i]);
        free(r);
        free(sz);
        pdc_program_destroy(p);
    }
    omp_set_max_active_levels(levels);
    ck_assert_msg(memcmp(res[0], res[1], n0 * sizeof(float)) == 0, "%s: threads 1 and 2 differ", what);
    ck_assert_msg(memcmp(res[0], res[2], n0 * sizeof(float)) == 0, "%s: threads 1 and 2 on a team of 1 differ", what);
    for (int t = 0; t < 3; t++) free(res[t]);
}

/* A fresh context (and no model) whose JIT sees the host's features narrowed by `features`
 * (PDC_CPU_FEATURES; NULL: the host's own). */
static void reopen_context(const char *features)
{
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    if (features) ck_assert_int_eq(setenv("PDC_CPU_FEATURES", features, 1), 0);
    else unsetenv("PDC_CPU_FEATURES");
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
}

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
            pdc_model_destroy(mdl);
            ck_assert_ok(ctx, pdc_model_create(ctx, "wide", &mdl));
            int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k, which = cases[q].which;
            input("x", DIMS(2, c, cases[q].h, cases[q].w));
            size_t wn = (size_t)(o * c * k * k);
            float *w = malloc(wn * sizeof *w);
            int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
            uint8_t *mask = malloc(wn);
            test_fill_random(w, wn, (uint32_t)q + 41);
            for (int64_t i = 0; i < o * c; i++) {
                kp[i] = i % 3 == 1 ? -1 : (int32_t)(i * 7 % 4);
                for (int64_t b = 0; b < k * k; b++) {
                    size_t e = (size_t)(i * k * k + b);
                    int keep = which < 3 ? kp[i] >= 0 && (sets[which][kp[i]] >> b & 1) : which == 3 ? e * 7 % 5 < 2 : kp[i] >= 0;
                    mask[e] = (uint8_t)keep;
                    if (!keep) w[e] = 0.0f;
                }
            }
            ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, (const int64_t[]){o, c, k, k}, w));
            if (which < 3) ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w", 3, 3, 4, sets[which], (size_t)(o * c), kp));
            else ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w", wn, mask));
            free(mask);
            free(w);
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
    static const uint64_t pats[4] = {0x1b, 0x3a, 0xb2, 0x9a};
    setenv("PDC_OMP_STATIC", "1", 1); /* two threads even on a busy machine: both band buffers used */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "bands", &mdl));
        int64_t c = cases[q].c, o = cases[q].o, d = cases[q].dil;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        float *w = malloc((size_t)(o * c * 9) * sizeof *w);
        int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
        test_fill_random(w, (size_t)(o * c * 9), (uint32_t)q + 3);
        for (int64_t i = 0; i < o * c; i++) {
            kp[i] = i % 3 == 1 ? -1 : (int32_t)(i * 7 % 4);
            for (int b = 0; b < 9 && !cases[q].dense; b++)
                if (kp[i] < 0 || !(pats[kp[i]] >> b & 1)) w[i * 9 + b] = 0.0f;
        }
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, (const int64_t[]){o, c, 3, 3}, w));
        if (!cases[q].dense) ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w", 3, 3, 4, pats, (size_t)(o * c), kp));
        free(w);
        free(kp);
        layer("conv", conv_attrs(d, d, d, cases[q].s, cases[q].s, d, "relu"), "y", NAMES("x", "w"));
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "banded case %zu", q);
        if (q == 3) ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 9);
        ck_assert_kernel(p, "y", cases[q].dense ? "jit dense conv" : "jit pattern-sparse conv");
        ck_assert_kernel(p, "y", "packed in row bands");
        pdc_program_destroy(p);
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
    setenv("PDC_OMP_STATIC", "1", 1);
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        if (cases[q].force) setenv("PDC_CONV_OCVEC", "1", 1);
        else unsetenv("PDC_CONV_OCVEC");
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "ocvec", &mdl));
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
        if (q == 8) ck_assert_msg(!strstr(kernel_of(p, "y"), "output channels"), "case 8: %s", kernel_of(p, "y"));
        else ck_assert_kernel(p, "y", "output channels vectorised");
        if (q == 6) ck_assert_kernel(p, "y", "packed in row bands");
        pdc_program_destroy(p);
        if (q == 1 || q == 6) check_thread_invariance(desc);
    }
    unsetenv("PDC_CONV_OCVEC");
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

/* A 3x3 weight "name" [o, c, 3, 3] pattern-pruned: 4 patterns of 4 taps, every third kernel removed. */
static void pattern_weight(const char *name, int64_t o, int64_t c, uint32_t seed)
{
    static const uint64_t pats[4] = {0x1b, 0x3a, 0xb2, 0x9a};
    float *w = malloc((size_t)(o * c * 9) * sizeof *w);
    int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
    ck_assert(w && kp);
    test_fill_random(w, (size_t)(o * c * 9), seed);
    for (int64_t i = 0; i < o * c; i++) {
        kp[i] = i % 3 == 1 ? -1 : (int32_t)(i * 7 % 4);
        for (int b = 0; b < 9; b++)
            if (kp[i] < 0 || !(pats[kp[i]] >> b & 1)) w[i * 9 + b] = 0.0f;
    }
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, 4, (const int64_t[]){o, c, 3, 3}, w));
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, name, 3, 3, 4, pats, (size_t)(o * c), kp));
    free(w);
    free(kp);
}

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
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "residual", &mdl));
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
            pdc_attrs *a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", DIMS(2, 2)));
            layer("conv", a, "c2", NAMES(xin, "w2", "b2"));
            layer("add", NULL, "s", NAMES("a", "c2"));
        } else if (!strcmp(cases[q].kind, "strided")) {
            pattern_weight("w1", c, c, (uint32_t)q + 1);
            pattern_weight("w2", c, c, (uint32_t)q + 2);
            constant_rand("w3", DIMS(c, c, 1, 1), 0.3f, 8);
            layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, "relu"), "a", NAMES(xin, "w1", "b1"));
            pdc_attrs *a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", DIMS(2, 2)));
            layer("conv", a, "d", NAMES(xin, "w3", "b2"));
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
            pdc_attrs *a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
            layer("conv", a, "c2", NAMES("a", "w2", "b2"));
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
}
END_TEST

START_TEST(conv_residual_fusion_limits)
{
    /* what is not fused: a conv with an activation of its own (the add comes first), a conv output
     * that is also a graph output, a relu whose input is read elsewhere (the add alone is fused),
     * an add of operands of different shapes (broadcasting), PDC_CPU_FUSE=0 */
    for (int q = 0; q < 5; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "limits", &mdl));
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
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "alias", &mdl));
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
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "conv_act", &mdl));
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
        ck_assert_msg(!strstr(kernel_of(p, "y"), "fused"), "case %d: %s", q, kernel_of(p, "y"));
        ck_assert_msg(!strstr(kernel_of(p, "c"), "epilogue"), "case %d: %s", q, kernel_of(p, "c"));
        pdc_program_destroy(p);
    }
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
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "conv_bn", &mdl));
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
    };
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
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
    /* what is not fused: statistics that are not constants (the mean a graph input), a conv output
     * that a second layer reads too; a batchnorm output that is a graph output ends the epilogue */
    for (int q = 0; q < 3; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "conv_bn", &mdl));
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
            ck_assert_msg(!strstr(kernel_of(p, "c"), "epilogue"), "case %d: %s", q, kernel_of(p, "c"));
            ck_assert_msg(!strstr(kernel_of(p, "n"), "fused"), "case %d: %s", q, kernel_of(p, "n"));
        }
        ck_assert_msg(!strstr(kernel_of(p, "y"), "fused"), "case %d: %s", q, kernel_of(p, "y"));
        if (q == 0) ck_assert_kernel(p, "n", "ref fallback: batchnorm statistics not constant");
        pdc_program_destroy(p);
    }
    /* a ResNet block as exported (conv -> batchnorm -> relu -> conv -> batchnorm -> add -> relu)
     * with the memory plan: both epilogues fused */
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "block", &mdl));
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
    pdc_program *p = check_matches_ref("planned block", 181);
    ck_assert_kernel(p, "c1", " + batchnorm 'n1' + relu 'r1' in the epilogue");
    ck_assert_kernel(p, "c2", " + batchnorm 'n2' + add 's' + relu 'y' in the epilogue");
    pdc_program_destroy(p);
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
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "chain", &mdl));
    input("x", DIMS(1, 16, 12, 12));
    pattern_weight("w1", 16, 16, 101);
    pattern_weight("w2", 16, 16, 102);
    pattern_weight("w3", 16, 16, 103);
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c1", NAMES("x", "w1"));
    layer("relu", NULL, "r1", NAMES("c1"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c2", NAMES("r1", "w2"));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "min", 0.0f));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "max", 0.5f));
    layer("clip", a, "r2", NAMES("c2"));
    layer("conv", conv_attrs(1, 1, 1, 1, 1, 1, NULL), "c3", NAMES("r2", "w3"));
    layer("add", NULL, "s", NAMES("c3", "r2"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.1f));
    layer("leaky_relu", a, "y", NAMES("s"));
    output("y");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "plan", NULL));
    pdc_program *p = check_matches_ref("planned chain", 111);
    ck_assert_kernel(p, "c1", " + relu 'r1' in the epilogue");
    ck_assert_kernel(p, "c2", " + clip 'r2' in the epilogue");
    ck_assert_kernel(p, "c3", " + add 's' + leaky_relu 'y' in the epilogue");
    pdc_program_destroy(p);
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

/* mdl := y = op(x), x of n x c x h x w, a 2-D pool: kernel kh x kw, stride s, pads pad all round,
 * dilation dil. */
static void pool_model(const char *op, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t s,
                       int64_t pad, int64_t dil)
{
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, op, &mdl));
    input("x", DIMS(n, c, h, w));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", DIMS(kh, kw)));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", DIMS(s, s)));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", DIMS(dil, dil)));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(pad, pad, pad, pad)));
    layer(op, a, "y", NAMES("x"));
    output("y");
}

/* sigmoid and tanh are straight-line IR (backends/llvm/irb_math.c), not libm: against the reference
 * (double-precision exp, tanhf) over [-20, 20] in steps of 1/1024 and at the edges - signed zeros,
 * tiny and denormal inputs, the tanh series' switch at 0.5, the exp clamp near +-88, huge values,
 * infinities, NaN - within a relative 2.4e-7, 2 to 4 ulps (the worst seen is 2: a tolerance of 3 x
 * 2^-24 fails at tanh(-0.775)); results below 1e-37 within 1e-37 (the clamp keeps 2^n a normal
 * float, so sigmoid(-100) is 5e-39, not 4e-44). The edges come first and last; the last 7 run in
 * the scalar tail after the vector loop. */
START_TEST(sigmoid_tanh_close_to_reference)
{
    static const float edge[] = {0.0f,  -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 0.49999997f, 0.5f, -0.5f,
                                 1.0f,  -1.0f, 9.0f,   -9.0f,   20.0f,  -20.0f,  87.0f,       -87.0f, 88.5f,
                                 -88.5f, 100.0f, -100.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
    const size_t ne = sizeof edge / sizeof *edge, nsweep = 40963, n = 2 * ne + nsweep;
    ck_assert_uint_eq(n % 8, 7); /* n % 16 too */
    input("x", DIMS(1, (int64_t)n));
    layer("sigmoid", NULL, "s", NAMES("x"));
    layer("tanh", NULL, "t", NAMES("x"));
    output("s");
    output("t");
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &pc));
    ck_assert_kernel(pc, "s", "jit elementwise sigmoid");
    ck_assert_kernel(pc, "t", "jit elementwise tanh");
    pdc_tensor *x, *out[2][2];
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, (int64_t)n), &x));
    for (int b = 0; b < 2; b++)
        for (int o = 0; o < 2; o++) ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, (int64_t)n), &out[b][o]));
    float *xv = pdc_tensor_data(x);
    for (size_t i = 0; i < ne; i++) xv[i] = xv[n - ne + i] = edge[i];
    for (size_t i = 0; i < nsweep; i++) xv[ne + i] = -20.0f + (float)i / 1024.0f;
    ck_assert_ok(ctx, pdc_program_run(pr, 1, &x, 2, out[0]));
    ck_assert_ok(ctx, pdc_program_run(pc, 1, &x, 2, out[1]));
    for (int o = 0; o < 2; o++) {
        const float *want = pdc_tensor_data(out[0][o]), *got = pdc_tensor_data(out[1][o]);
        for (size_t i = 0; i < n; i++) {
            if (isnan(want[i])) {
                ck_assert_msg(isnan(got[i]), "%s(%g): %g, want NaN", o ? "tanh" : "sigmoid", xv[i], got[i]);
                continue;
            }
            double tol = 4.0 * FLT_EPSILON / 2.0 * fabs(want[i]) + 1e-37; /* 4 x 2^-24 */
            ck_assert_msg(fabs((double)got[i] - want[i]) <= tol, "%s(%.9g) at %zu: %.9g, reference %.9g",
                          o ? "tanh" : "sigmoid", xv[i], i, got[i], want[i]);
        }
    }
    pdc_tensor_destroy(x);
    for (int b = 0; b < 2; b++)
        for (int o = 0; o < 2; o++) pdc_tensor_destroy(out[b][o]);
    pdc_program_destroy(pr);
    pdc_program_destroy(pc);
}
END_TEST

START_TEST(maxpool_window_outside_input)
{
    /* padding and dilation wider than the input: output columns 1 and 2 have no tap inside it and
     * must be 0 as in the reference (the separable max would leave -inf there) */
    pool_model("maxpool", 1, 2, 3, 2, 2, 2, 1, 3, 4);
    pdc_program *p = check_matches_ref("maxpool window outside the input", 3);
    ck_assert_kernel(p, "y", "separable");
    pdc_program_destroy(p);
}
END_TEST

START_TEST(maxpool_wide_rows_and_tall_windows)
{
    /* the max pool's vector passes against the reference: rows of several 16-lane blocks and a
     * partial one (stride 2: 3x3 with padding, 2x2, dilated 3x5), windows of more rows than a
     * down pass takes at once (10 and 17), stride 1, a row narrower than a vector, and 17 outputs
     * of a 16-wide window, whose last block reads 30 floats past the row buffer's reach */
    static const struct {
        int64_t c, h, w, kh, kw, s, pad, dil;
    } cases[] = {{3, 40, 75, 3, 3, 2, 1, 1}, {2, 36, 100, 2, 2, 2, 0, 1}, {2, 30, 70, 3, 5, 2, 2, 2},
                 {2, 30, 50, 10, 3, 2, 0, 1}, {1, 40, 33, 17, 2, 1, 3, 1}, {4, 21, 70, 3, 3, 1, 1, 1},
                 {3, 12, 5, 3, 3, 2, 1, 1},   {1, 20, 48, 3, 16, 2, 0, 1}};
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pool_model("maxpool", 2, cases[q].c, cases[q].h, cases[q].w, cases[q].kh, cases[q].kw, cases[q].s,
                   cases[q].pad, cases[q].dil);
        char desc[64];
        snprintf(desc, sizeof desc, "max pool case %zu", q);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 61);
        ck_assert_kernel(p, "y", "separable");
        pdc_program_destroy(p);
    }
}
END_TEST

START_TEST(pooling_rows_split_over_threads)
{
    /* at 2 threads each thread takes a contiguous share of the output rows of every plane (odd row
     * counts, padding rows at both ends of a share's input, max and average), or of the planes
     * where the rows are few (7 and 1 output rows); outputs must match the reference and be the
     * same at 1 and 2 threads. Every case has 16384 outputs or more, so two threads run. */
    static const struct {
        const char *op;
        int64_t c, h, w, k, s, pad;
    } cases[] = {{"maxpool", 24, 61, 47, 3, 2, 1}, {"avgpool", 8, 45, 50, 3, 1, 1}, {"maxpool", 32, 33, 70, 2, 2, 0},
                 {"maxpool", 300, 14, 16, 3, 2, 1}, {"avgpool", 1100, 3, 17, 3, 1, 0}};
    setenv("PDC_OMP_STATIC", "1", 1); /* two threads even on a busy machine */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pool_model(cases[q].op, 1, cases[q].c, cases[q].h, cases[q].w, cases[q].k, cases[q].k, cases[q].s, cases[q].pad,
                   1);
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        pdc_program *p = check_matches_ref(cases[q].op, (uint32_t)q + 7);
        ck_assert_kernel(p, "y", "pool");
        pdc_program_destroy(p);
        check_thread_invariance(cases[q].op);
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

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
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "flat", &mdl));
        int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k;
        input("x", DIMS(1, c, cases[q].h, cases[q].w));
        size_t wn = (size_t)(o * c * k * k);
        float *w = malloc(wn * sizeof *w);
        int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
        test_fill_random(w, wn, (uint32_t)q + 1);
        if (cases[q].sparse && k == 3) {
            for (int64_t i = 0; i < o * c; i++) {
                kp[i] = i % 3 == 0 ? -1 : (int32_t)(i % 4);
                for (int b = 0; b < 9; b++)
                    if (kp[i] < 0 || !(pats[kp[i]] >> b & 1)) w[i * 9 + b] = 0.0f;
            }
        }
        uint8_t *mask = malloc(wn);
        for (size_t i = 0; i < wn; i++) {
            mask[i] = (i * 7) % 5 < 2;
            if (cases[q].sparse && k == 5 && !mask[i]) w[i] = 0.0f;
        }
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, (const int64_t[]){o, c, k, k}, w));
        if (cases[q].sparse && k == 3)
            ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w", 3, 3, 4, pats, (size_t)(o * c), kp));
        if (cases[q].sparse && k == 5) ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w", wn, mask));
        free(mask);
        free(w);
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
    setenv("PDC_OMP_STATIC", "1", 1);
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        if (cases[q].force) setenv("PDC_CONV_CMAJOR", "1", 1);
        else unsetenv("PDC_CONV_CMAJOR");
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "cmajor", &mdl));
        int64_t c = cases[q].c, o = cases[q].o, k = cases[q].k, d = cases[q].dil, cg = c / cases[q].group;
        input("x", DIMS(cases[q].n, c, cases[q].h, cases[q].w));
        if (k == 3) {
            pattern_weight("w", o, cg, (uint32_t)q + 50);
        } else {
            size_t wn = (size_t)(o * cg * k * k);
            float *w = malloc(wn * sizeof *w);
            uint8_t *mask = malloc(wn);
            ck_assert(w && mask);
            test_fill_random(w, wn, (uint32_t)q + 50);
            for (size_t i = 0; i < wn; i++) { /* five masks, over all 25 taps together */
                mask[i] = (i / 25 * 3 + i % 25 * 7) % 5 < 2;
                if (!mask[i]) w[i] = 0.0f;
            }
            ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, (const int64_t[]){o, cg, k, k}, w));
            ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w", wn, mask));
            free(w);
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
        if (q == 9) ck_assert_msg(!strstr(kernel_of(p, "y"), "channel-major"), "case 9: %s", kernel_of(p, "y"));
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

/* ------------------------------------------------------------------ threads, rnn */

/* Graph outputs go straight into the caller's buffers where that is safe, else through the arena:
 * an output a later layer reads (c), an output passed in the input's own tensor while a later
 * layer still reads the input (r = c + x would read c instead of x), a program with a
 * reference-kernel layer (which could fail mid-run, and a failed run must leave outputs alone). */
START_TEST(outputs_in_callers_buffers_or_copied)
{
    for (int fallback = 0; fallback < 2; fallback++) {
        input("x", DIMS(1, 8, 20, 20));
        constant_rand("w", DIMS(8, 8, 3, 3), 0.3f, 7);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
        layer("conv", a, "c", NAMES("x", "w"));
        layer("add", NULL, "r", NAMES("c", "x"));
        if (fallback) { /* q = r through a 3-D pooling of window 1, which the cpu target leaves to the reference */
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "shape", DIMS(1, 8, 4, 10, 10)));
            layer("reshape", a, "r1", NAMES("r"));
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", DIMS(1, 1, 1)));
            layer("avgpool", a, "p", NAMES("r1"));
            a = attrs();
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "shape", DIMS(1, 8, 20, 20)));
            layer("reshape", a, "q", NAMES("p"));
        }
        output("c");
        output(fallback ? "q" : "r");
        pdc_program *pc = check_matches_ref(fallback ? "with a ref layer" : "all jit", 3);
        ck_assert_kernel(pc, fallback ? "p" : "r", fallback ? "ref fallback: 3-D pooling" : "jit elementwise");
        pdc_program *pr = NULL;
        ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
        size_t n = 8 * 20 * 20;
        pdc_tensor *x, *c, *r, *r2;
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &x));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &c));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &r));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &r2));
        test_fill_random(pdc_tensor_data(x), n, 11);
        ck_assert_ok(ctx, pdc_program_run(pr, 1, &x, 2, (pdc_tensor *[]){c, r}));
        /* the input's tensor as output 0: the conv's result may land in it only after the run */
        ck_assert_ok(ctx, pdc_program_run(pc, 1, &x, 2, (pdc_tensor *[]){x, r2}));
        assert_close(pdc_tensor_data(x), pdc_tensor_data(c), n, "output 0 in the input's tensor");
        assert_close(pdc_tensor_data(r2), pdc_tensor_data(r), n, "output 1 beside it");
        pdc_tensor_destroy(x), pdc_tensor_destroy(c), pdc_tensor_destroy(r), pdc_tensor_destroy(r2);
        pdc_program_destroy(pr);
        pdc_program_destroy(pc);
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "second", &mdl));
    }
}
END_TEST

START_TEST(results_do_not_depend_on_threads)
{
    input("x", DIMS(1, 24, 30, 30));
    constant_rand("w", DIMS(40, 24, 3, 3), 0.3f, 1);
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    layer("conv", a, "c", NAMES("x", "w"));
    constant_rand("w1", DIMS(32, 40, 1, 1), 0.3f, 2);
    layer("conv", NULL, "c1", NAMES("c", "w1"));
    layer("flatten", NULL, "f", NAMES("c1"));
    constant_rand("w2", DIMS(300, 28800), 0.01f, 3);
    layer("fc", NULL, "y", NAMES("f", "w2"));
    output("y");
    check_thread_invariance("conv, 1x1 conv, fc");
}
END_TEST

START_TEST(team_size_rule_and_loadavg_parsing)
{
    /* the runnable count of /proc/loadavg, and the team: at most `threads`, at most the cores other
     * processes leave free, never below one */
    ck_assert_int_eq(cpu_loadavg_running("0.31 0.71 0.77 2/150 12345\n"), 2);
    ck_assert_int_eq(cpu_loadavg_running("1.00 1.00 1.00 17/903 1"), 17);
    ck_assert_int_eq(cpu_loadavg_running("0.31 0.71 0.77"), -1);
    ck_assert_int_eq(cpu_loadavg_running("garbage"), -1);
    ck_assert_int_eq(cpu_loadavg_running("0,31 0,71 0,77 3/150 12345"), 3); /* any decimal point */
    ck_assert_int_eq(cpu_loadavg_running(NULL), -1);
    ck_assert_int_eq(cpu_team_for(2, 2, 0), 2);
    ck_assert_int_eq(cpu_team_for(2, 2, 1), 1);
    ck_assert_int_eq(cpu_team_for(2, 2, 5), 1);
    ck_assert_int_eq(cpu_team_for(4, 16, 3), 4);
    ck_assert_int_eq(cpu_team_for(8, 16, 10), 6);
    ck_assert_int_eq(cpu_team_for(2, 2, -1), 2);
    /* on this machine: within [1, threads] */
    int n = cpu_team_size(2);
    ck_assert(n >= 1 && n <= 2);
    ck_assert_int_eq(cpu_team_size(1), 1);
}
END_TEST

/* The next item of cpu_share_next where every run is 1 long. */
static int64_t next1(cpu_share *sh, int t, int nt)
{
    int64_t count = 0, it = cpu_share_next(sh, t, nt, &count);
    if (it >= 0) ck_assert_int_eq(count, 1);
    return it;
}

START_TEST(work_shares_each_item_once)
{
    /* one thread at a time, so the order is known: thread t's own share front to back (in runs of
     * a sixteenth of it, at least 1), then the back of the next threads' shares, one at a time */
    enum { MAXT = 8, N = 4000 };
    cpu_share *sh = aligned_alloc(64, MAXT * sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    cpu_share_split(sh, 3, 10, 1); /* [0,3) [3,6) [6,10) */
    static const int64_t want0[] = {0, 1, 2, 5, 4, 3, 9, 8, 7, 6, -1};
    for (int i = 0; i < 11; i++) ck_assert_int_eq(next1(sh, 0, 3), want0[i]);
    ck_assert_int_eq(next1(sh, 1, 3), -1);
    ck_assert_int_eq(next1(sh, 2, 3), -1);
    cpu_share_split(sh, 2, 7, 3); /* 7 units of 3 items: [0,9) [9,21) */
    ck_assert(cpu_share_owns(0, 2, 7, 2) && !cpu_share_owns(0, 2, 7, 3));
    ck_assert(cpu_share_owns(1, 2, 7, 3) && cpu_share_owns(1, 2, 7, 6) && !cpu_share_owns(1, 2, 7, 2));
    for (int64_t i = 0; i < 9; i++) ck_assert_int_eq(next1(sh, 0, 2), i);
    ck_assert_int_eq(next1(sh, 1, 2), 9);
    ck_assert_int_eq(next1(sh, 0, 2), 20); /* the back of thread 1's */
    /* shares of 40: runs of 2 (a sixteenth) from the front while 16 or more are left, then 1; a
     * thief takes 1 */
    cpu_share_split(sh, 2, 80, 1);
    int64_t cnt = 0;
    ck_assert_int_eq(cpu_share_next(sh, 0, 2, &cnt), 0);
    ck_assert_int_eq(cnt, 2);
    for (int64_t want = 40; want < 80; want += cnt) {
        ck_assert_int_eq(cpu_share_next(sh, 1, 2, &cnt), want);
        ck_assert_int_eq(cnt, 80 - want >= 16 ? 2 : 1);
    }
    ck_assert_int_eq(cpu_share_next(sh, 1, 2, &cnt), 39); /* thread 1's done: the back of thread 0's */
    ck_assert_int_eq(cnt, 1);
    ck_assert_int_eq(cpu_share_next(sh, 0, 2, &cnt), 2);
    ck_assert_int_eq(cnt, 2);
    cpu_share_split(sh, 3, 2, 1); /* fewer items than threads: [0,0) [0,1) [1,2) */
    ck_assert_int_eq(next1(sh, 0, 3), 0); /* the back of thread 1's */
    ck_assert_int_eq(next1(sh, 2, 3), 1);
    ck_assert_int_eq(next1(sh, 1, 3), -1);
    ck_assert_int_eq(next1(sh, 2, 3), -1);

    /* real teams of 1, 2, 3 and 8 threads over a split for 8: every item exactly once, a thread's own
     * items in increasing order, a thread that starts only after the others have finished finds its
     * whole share taken by them, and the shares of threads the team lacks are taken too */
    static const int teams[] = {1, 2, 3, 8};
    static const int64_t counts[] = {0, 1, 7, N};
    for (size_t ti = 0; ti < sizeof teams / sizeof teams[0]; ti++)
        for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
            int64_t n = counts[ni];
            static _Atomic int taken[N];
            static int64_t by[N];
            for (int64_t i = 0; i < n; i++) {
                atomic_store(&taken[i], 0);
                by[i] = -1;
            }
            int team = teams[ti], split = MAXT;
            _Atomic int ordered = 1, finished = 0, got = 0, outside = 0;
            cpu_share_split(sh, split, n, 1);
#pragma omp parallel num_threads(team)
            {
                int me = omp_get_thread_num(), nt = omp_get_num_threads();
                if (me == 0) /* held back until the others ran out of work */
                    while (atomic_load(&finished) < nt - 1) nanosleep(&(struct timespec){0, 100000}, NULL);
                int64_t last = -1, lo = n * me / split, hi = n * (me + 1) / split;
                for (int64_t it, run; (it = cpu_share_next(sh, me, split, &run)) >= 0;)
                    for (const int64_t end = it + run; it < end; it++) {
                        if (it >= n || run < 1) {
                            outside = 1;
                            break;
                        }
                        atomic_fetch_add(&taken[it], 1);
                        by[it] = me;
                        if (it >= lo && it < hi) {
                            if (it <= last) ordered = 0;
                            last = it;
                        }
                    }
                if (me > 0) atomic_fetch_add(&finished, 1);
                if (me == 0) got = nt;
            }
            ck_assert_msg(!outside, "team %d, %" PRId64 " items: an item past the end", got, n);
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(taken[i] == 1, "team %d, %" PRId64 " items: item %" PRId64 " taken %d times", got, n,
                              i, (int)taken[i]);
                if (got > 1) ck_assert_msg(by[i] != 0, "team %d: item %" PRId64 " left to thread 0", got, i);
            }
            ck_assert_msg(ordered, "team %d: a thread's own items out of order", got);
        }
    free(sh);
}
END_TEST

/* An LSTM/GRU's products are split over the threads from 64K multiply-adds (rnn.c RNN_PAR_MIN),
 * the recurrent one by rows of r: hidden 128 (LSTM: 512 x 128) and 192 (GRU's z and r: 384 x 192)
 * at batch 1 (sgemv) and 3 (sgemm), against the reference at 2 threads, and bit-identical at 1 and
 * 2 (PDC_OMP_STATIC: the team is what the option says, whatever else the host runs). */
START_TEST(rnn_recurrent_rows_split_over_threads)
{
    /* 64K weights or more: a dense LSTM 128 and GRU 192 at batch 1 (recurrent rows split for sgemv,
     * the input projections of 3 steps on the lanes kernel), an LSTM 256 with 4x4 blocks (40% kept,
     * 105K weights; its rows split by the block-sparse product), a dense LSTM 128 at batch 33 (both
     * products on OpenBLAS sgemm, in chunks of columns) */
    ck_assert_int_eq(setenv("PDC_OMP_STATIC", "1", 1), 0);
    for (int q = 0; q < 4; q++) {
        const int lstm = q != 1, sparse = q == 2;
        const char *desc = q == 0 ? "lstm 128" : q == 1 ? "gru 192" : q == 2 ? "lstm 256 4x4 blocks" : "lstm 128 batch 33";
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "rnn_threads", &mdl));
        const int64_t H = q == 0 || q == 3 ? 128 : q == 1 ? 192 : 256, G = lstm ? 4 : 3, I = 24;
        input("x", DIMS(3, q == 3 ? 33 : 1, I));
        constant_rand("w", DIMS(1, G * H, I), 0.3f, 5);
        if (sparse) constant_pruned("r", DIMS(1, G * H, H), 1, 4, 4, 40, 6);
        else constant_rand("r", DIMS(1, G * H, H), 0.15f, 6);
        constant_rand("b", DIMS(1, 2 * G * H), 0.3f, 7);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", H));
        ck_assert_ok(ctx, pdc_model_add_layer(mdl, "rnn", lstm ? "lstm" : "gru", 4, (const char *const[]){"x", "w", "r", "b"},
                                              1, (const char *const[]){"y"}, a));
        pdc_attrs_destroy(a);
        output("y");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        pdc_program *p = check_matches_ref(desc, 11);
        ck_assert_kernel(p, "rnn", sparse ? "r jit block-sparse" : q == 3 ? "OpenBLAS GEMMs" : "w jit dense for 3 rows, r OpenBLAS");
        pdc_program_destroy(p);
        check_thread_invariance(desc);
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(gemm_activation_per_block)
{
    /* a fused activation runs on each thread's block right after its product: blocks of rows
     * (200x300 by 300x8), of columns (8x300 by 300x200, each row of a block a separate run), and
     * a block-sparse fc's block-rows (o 300 in 2x4 blocks), all with several blocks, at 2 threads */
    static const struct {
        int64_t m, k, n;
        const char *act;
    } cases[] = {{200, 300, 8, "tanh"}, {8, 300, 200, "hardswish"}, {3, 300, 300, "sigmoid"}};
    ck_assert_int_eq(setenv("PDC_OMP_STATIC", "1", 1), 0);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "gemm_act", &mdl));
        input("a", DIMS(cases[q].m, cases[q].k));
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", cases[q].act));
        if (q < 2) {
            constant_rand("b", DIMS(cases[q].n, cases[q].k), 0.2f, (uint32_t)q + 3);
            ck_assert_ok(ctx, pdc_attrs_set_int(a, "transB", 1));
            layer("gemm", a, "y", NAMES("a", "b"));
        } else {
            constant_pruned("w", DIMS(cases[q].n, cases[q].k), 1, 2, 4, 30, 9);
            layer("fc", a, "y", NAMES("a", "w"));
        }
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "%s %lldx%lldx%lld", cases[q].act, (long long)cases[q].m, (long long)cases[q].k,
                 (long long)cases[q].n);
        pdc_program *p = check_matches_ref(desc, (uint32_t)q + 5);
        ck_assert_kernel(p, "y", q < 2 ? "blas sgemm" : "jit block-sparse fc");
        pdc_program_destroy(p);
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(dense_small_batches_packed)
{
    /* dense fc: batch 1 on sgemv; 2, 9 and 32 on the lanes kernel (one group, groups of the vector
     * width and a partial one); 33 on sgemm; 300 outputs (several chunks of block-rows and a partial
     * 8x8 block) and a fused tanh, at 2 threads against ref, then bit-identical at 1 and 2 */
    static const int64_t batches[] = {1, 2, 9, 32, 33};
    ck_assert_int_eq(setenv("PDC_OMP_STATIC", "1", 1), 0);
    for (size_t q = 0; q < sizeof batches / sizeof batches[0]; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "fc", &mdl));
        input("x", DIMS(batches[q], 203));
        constant_rand("w", DIMS(300, 203), 0.2f, (uint32_t)q + 1);
        constant_rand("b", DIMS(300), 0.5f, (uint32_t)q + 7);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "tanh"));
        layer("fc", a, "y", NAMES("x", "w", "b"));
        output("y");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        char what[48];
        snprintf(what, sizeof what, "dense fc at batch %lld", (long long)batches[q]);
        pdc_program *p = check_matches_ref(what, (uint32_t)q);
        char want[48];
        snprintf(want, sizeof want, "jit dense fc for batch %lld,", (long long)batches[q]);
        ck_assert_kernel(p, "y", batches[q] == 1 ? "blas sgemm/sgemv" : batches[q] == 33 ? "blas sgemm 33x" : want);
        pdc_program_destroy(p);
        check_thread_invariance(what);
    }
    /* a bidirectional LSTM, hidden 64 (gate slices on 8x8 blocks), batch 4 over 3 steps: the recurrent
     * product of the batch (64K multiply-adds: split over the threads) and the input projection of
     * the 12 rows on the lanes kernel */
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "lstm", &mdl));
    input("x", DIMS(3, 4, 40));
    constant_rand("w", DIMS(2, 256, 40), 0.2f, 11);
    constant_rand("r", DIMS(2, 256, 64), 0.15f, 12);
    constant_rand("b", DIMS(2, 512), 0.3f, 13);
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", 64));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", "bidirectional"));
    layer("lstm", a, "y", NAMES("x", "w", "r", "b"));
    output("y");
    pdc_program *p = check_matches_ref("dense lstm at batch 4", 3);
    ck_assert_kernel(p, "y", "w jit dense for 12 rows, r jit dense for 4 rows");
    pdc_program_destroy(p);
    check_thread_invariance("dense lstm at batch 4");
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(matmul_const_weights_on_sparse_kernels)
{
    /* a transformer's linear layers: x [2, 24, 256] (48 rows: groups of samples per vector lane over
     * several chunks of block-rows) by a constant [256, 300] pruned in 16x4 blocks of its stored
     * layout, and x [3, 5, 40] (15 rows) by a dense [40, 64]; at 2 threads against ref, then
     * bit-identical at 1 and 2 */
    ck_assert_int_eq(setenv("PDC_OMP_STATIC", "1", 1), 0);
    for (int q = 0; q < 2; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "matmul", &mdl));
        if (q == 0) {
            input("x", DIMS(2, 24, 256));
            constant_pruned("w", DIMS(256, 300), 1, 16, 4, 25, 17);
        } else {
            input("x", DIMS(3, 5, 40));
            constant_rand("w", DIMS(40, 64), 0.2f, 18);
        }
        layer("matmul", NULL, "y", NAMES("x", "w"));
        output("y");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
        const char *what = q ? "dense matmul of 15 rows" : "block-sparse matmul of 48 rows";
        pdc_program *p = check_matches_ref(what, (uint32_t)q + 40);
        ck_assert_kernel(p, "y", q ? "jit dense matmul for 15 rows, weights packed in 8x8 blocks"
                                   : "jit block-sparse matmul, blocks 4x16 of the transposed weights");
        ck_assert_kernel(p, "y", "samples per weight load");
        pdc_program_destroy(p);
        check_thread_invariance(what);
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

START_TEST(matmul_batches_split_over_threads)
{
    /* attention's q k^T: a product per (batch, head), here a [2, 3, 70, 48] by b [3, 48, 90] broadcast
     * over the first dim, six products of two column chunks each shared by the threads in one
     * region; at 2 threads against ref, then bit-identical at 1 and 2 */
    ck_assert_int_eq(setenv("PDC_OMP_STATIC", "1", 1), 0);
    input("a", DIMS(2, 3, 70, 48));
    input("b", DIMS(3, 48, 90));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
    pdc_program *p = check_matches_ref("batched matmul", 51);
    ck_assert_kernel(p, "y", "blas sgemm 70x90x48, batched");
    pdc_program_destroy(p);
    check_thread_invariance("batched matmul");
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

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
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "product", &mdl));
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
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "product", &mdl));
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
        ck_assert_msg(!strstr(kernel_of(p, "p"), "epilogue"), "case %d: %s", q, kernel_of(p, "p"));
        ck_assert_kernel(p, "s", "jit elementwise add");
        pdc_program_destroy(p);
    }
    /* with the memory plan: the add's output planned away from the product's input */
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "linear", &mdl));
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
    pdc_program *p = check_matches_ref("planned linear layers", 211);
    ck_assert_kernel(p, "p1", " + add 's1' + relu 'y1' in the epilogue");
    ck_assert_kernel(p, "p2", " + add 'y' in the epilogue");
    pdc_program_destroy(p);
    ir_epilogue e;
    ck_assert_int_eq(ir_layer_epilogue(mdl, 1, &e), 1);
    ck_assert_int_eq(e.bn, -1);
    ck_assert_int_eq(e.residual, -1);
    ck_assert_int_eq(e.n_layers, 2);
    ck_assert_str_eq(mdl->tensors[e.bias].name, "b1");
    ck_assert_int_eq(e.act.act, IR_ACT_RELU);
    /* a memory plan (say, saved with an older model) that gives the epilogue's output the memory of
     * the product's second operand, an activation: refused (the product reads it until it ends) */
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "qk", &mdl));
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

START_TEST(rnn_block_sparse_uses_jit)
{
    /* block-pruned bidirectional LSTM and unstructured GRU: every gate product on the sparse kernel */
    rng = 4242u;
    for (int c = 0; c < 2; c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "rnn", &mdl));
        int lstm = c == 0;
        int64_t T = 3, B = 2, I = 13, H = 8, G = lstm ? 4 : 3, D = lstm ? 2 : 1;
        input("x", DIMS(T, B, I));
        constant_pruned("w", DIMS(D, G * H, I), lstm ? 1 : 2, 4, 4, 25, rnd());
        constant_pruned("r", DIMS(D, G * H, H), lstm ? 1 : 2, 4, 4, 25, rnd());
        constant_rand("b", DIMS(D, 2 * G * H), 0.5f, rnd());
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", H));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", lstm ? "bidirectional" : "forward"));
        const char *outs[3] = {"y", "yh", "yc"};
        ck_assert_ok(ctx, pdc_model_add_layer(mdl, "rnn", lstm ? "lstm" : "gru", 4, (const char *const[]){"x", "w", "r", "b"},
                                              lstm ? 3 : 2, outs, a));
        pdc_attrs_destroy(a);
        output("y");
        output("yh");
        if (lstm) output("yc");
        pdc_program *p = check_matches_ref(lstm ? "block-sparse lstm" : "unstructured gru", (uint32_t)c);
        ck_assert_kernel(p, "rnn", "w jit block-sparse");
        ck_assert_kernel(p, "rnn", "r jit block-sparse");
        pdc_program_destroy(p);
    }
}
END_TEST

/* ------------------------------------------------------------------ kernel cache */

/* A model with a few distinct kernels: a conv, an fc with block sparsity, an activation (after the
 * flatten, so that it is not fused into the conv). */
static void cache_model(void)
{
    input("x", DIMS(1, 5, 9, 11));
    constant_rand("w", DIMS(6, 5, 3, 3), 0.5f, 1);
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    layer("conv", a, "c", NAMES("x", "w"));
    layer("flatten", NULL, "f", NAMES("c"));
    layer("leaky_relu", NULL, "r", NAMES("f"));
    float w2[7 * 594];
    uint8_t mask[7 * 594];
    test_fill_random(w2, 7 * 594, 2);
    for (int i = 0; i < 7 * 594; i++) {
        mask[i] = i % 5 == 0;
        if (!mask[i]) w2[i] = 0.0f;
    }
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w2", 2, (const int64_t[]){7, 594}, w2));
    ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w2", 7 * 594, mask));
    layer("fc", NULL, "y", NAMES("r", "w2"));
    output("y");
}

/* A fresh context (and model) using cache directory dir; returns the JIT statistics after compiling. */
static void compile_in_fresh_context(const char *dir, size_t *built, size_t *cached)
{
    pdc_model_destroy(mdl);
    pdc_context_destroy(ctx);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", dir));
    ck_assert_ok(ctx, pdc_model_create(ctx, "cache", &mdl));
    cache_model();
    pdc_program_destroy(check_matches_ref("cache model", 3));
    pdc_jit_stats(ctx->jit, built, cached, NULL);
}

static int count_entries(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".o") && !strstr(e->d_name, ".tmp")) n++;
    closedir(d);
    return n;
}

/* Damages every cache entry in a different way (by index): truncated, a flipped byte in the object,
 * a foreign header, empty. */
static void damage_entries(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int i = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".o")) continue;
        char f[2048];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        struct stat sb;
        ck_assert_int_eq(stat(f, &sb), 0);
        FILE *fp = fopen(f, "r+b");
        ck_assert_ptr_nonnull(fp);
        switch (i++ % 4) {
        case 0: ck_assert_int_eq(ftruncate(fileno(fp), sb.st_size / 2), 0); break;
        case 1: {
            fseek(fp, sb.st_size - 100, SEEK_SET);
            int ch = fgetc(fp);
            fseek(fp, sb.st_size - 100, SEEK_SET);
            fputc(ch ^ 0x5a, fp);
            break;
        }
        case 2: fwrite("NOTANOBJECT!", 1, 12, fp); break;
        default: ck_assert_int_eq(ftruncate(fileno(fp), 0), 0); break;
        }
        fclose(fp);
    }
    closedir(d);
}

START_TEST(cache_second_compile_loads_objects)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fresh", cache_dir);
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3);
    ck_assert_uint_eq(cached, 0);
    int n = count_entries(dir);
    ck_assert_int_eq(n, (int)built);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, 0);
    ck_assert_uint_eq(cached, (size_t)n);
}
END_TEST

START_TEST(cache_damaged_entries_are_rebuilt)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/damaged", cache_dir);
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    size_t n = built;
    damage_entries(dir);
    /* every damaged entry is a miss: rebuilt, results still right, entries rewritten */
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, n);
    ck_assert_uint_eq(cached, 0);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, 0);
    ck_assert_uint_eq(cached, n);
}
END_TEST

START_TEST(cache_unwritable_dir_still_compiles)
{
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/plainfile", cache_dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", file); /* a directory under a regular file cannot exist */
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3); /* nothing could be cached */
}
END_TEST

START_TEST(identical_layers_share_kernels)
{
    /* two convs of the same shape and pattern set compile one kernel */
    input("x", DIMS(1, 4, 10, 10));
    constant_rand("w1", DIMS(4, 4, 3, 3), 0.5f, 1);
    constant_rand("w2", DIMS(4, 4, 3, 3), 0.5f, 2);
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    layer("conv", a, "c1", NAMES("x", "w1"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    layer("conv", a, "c2", NAMES("c1", "w2"));
    output("c2");
    pdc_program_destroy(check_matches_ref("two convs", 1));
    size_t shared = 0;
    pdc_jit_stats(ctx->jit, NULL, NULL, &shared);
    ck_assert_uint_ge(shared, 1);
}
END_TEST

/* ------------------------------------------------------------------ ISA */

START_TEST(isa_follows_host_and_override)
{
    /* The JIT reads the host's features; PDC_CPU_FEATURES may only narrow them. */
    input("x", DIMS(1, 40));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
    pdc_program *p = check_matches_ref("relu", 1);
    ck_assert_kernel(p, "y", expected_isa());
    pdc_program_destroy(p);

    /* a new context picks the variables up */
    reopen_context("-avx512f");
    ck_assert_ok(ctx, pdc_model_create(ctx, "isa", &mdl));
    input("x", DIMS(1, 40));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
    p = check_matches_ref("relu without avx512", 1);
    if (strcmp(expected_isa(), "sse")) ck_assert_kernel(p, "y", "avx2");
    pdc_program_destroy(p);

    /* bad overrides are errors, never silently ignored and never a crash */
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ck_assert_int_eq(setenv("PDC_CPU_FEATURES", "+nosuchfeature", 1), 0);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_model_create(ctx, "isa", &mdl));
    input("x", DIMS(1, 40));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
    pdc_program *bad = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "cpu", &bad), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "nosuchfeature");
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(setenv("PDC_CPU_FEATURES", "", 1), 0);
    ck_assert_int_eq(setenv("PDC_CPU", "pentium-nonsense", 1), 0);
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "cpu", &bad), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "PDC_CPU");
    unsetenv("PDC_CPU");
    unsetenv("PDC_CPU_FEATURES");
}
END_TEST

static Suite *cpu_suite(void)
{
    Suite *s = suite_create("cpu");
    bc_tcases t = bc_add_cases(s, bc_setup, bc_teardown);
    tcase_add_test(t.conv, conv_input_packing);
    tcase_add_test(t.conv, conv_flat_planes_overlap);
    tcase_add_test(t.conv, conv_band_tiles_even_and_covering);
    tcase_add_test(t.conv, conv_small_planes_flat);
    tcase_add_test(t.conv, conv_strided_channel_major);
    tcase_add_test(t.conv, conv_wide_rows_shift_mode);
    tcase_add_test(t.conv, conv_large_inputs_packed_in_bands);
    tcase_add_test(t.conv, conv_dense_output_channel_vectors);
    tcase_add_test(t.conv, conv_residual_add_relu_fused);
    tcase_add_test(t.conv, conv_residual_fusion_limits);
    tcase_add_test(t.conv, conv_activation_fused);
    tcase_add_test(t.conv, conv_activation_fused_planned);
    tcase_add_test(t.conv, conv_batchnorm_fused);
    tcase_add_test(t.eltwise, sigmoid_tanh_close_to_reference);
    tcase_add_test(t.pool, maxpool_window_outside_input);
    tcase_add_test(t.pool, maxpool_wide_rows_and_tall_windows);
    tcase_add_test(t.pool, pooling_rows_split_over_threads);
    tcase_add_test(t.gemm, outputs_in_callers_buffers_or_copied);
    tcase_add_test(t.gemm, results_do_not_depend_on_threads);
    tcase_add_test(t.gemm, gemm_activation_per_block);
    tcase_add_test(t.gemm, dense_small_batches_packed);
    tcase_add_test(t.gemm, matmul_const_weights_on_sparse_kernels);
    tcase_add_test(t.gemm, matmul_batches_split_over_threads);
    tcase_add_test(t.gemm, product_epilogue_fused);
    tcase_add_test(t.gemm, rnn_block_sparse_uses_jit);
    tcase_add_test(t.gemm, rnn_recurrent_rows_split_over_threads);
    tcase_add_test(t.api, team_size_rule_and_loadavg_parsing);
    tcase_add_test(t.api, work_shares_each_item_once);
    tcase_add_test(t.api, isa_follows_host_and_override);

    TCase *tc = bc_tcase(s, "cache", 300, bc_setup, bc_teardown);
    tcase_add_test(tc, cache_second_compile_loads_objects);
    tcase_add_test(tc, cache_damaged_entries_are_rebuilt);
    tcase_add_test(tc, cache_unwritable_dir_still_compiles);
    tcase_add_test(tc, identical_layers_share_kernels);
    return s;
}

int main(void) { return bc_main("cpu", 1e-5f, cpu_suite()); }
