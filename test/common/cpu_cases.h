/*
 * cpu_cases.h - what the cpu suites (test/cpu/test_cpu_*.c) share: the shared cases of backend_cases.h
 * with the cpu's kernel for each (bc_expect_kernels), the ISA the JIT must pick, conv attributes and
 * pattern-pruned weights, the thread-invariance check, a context whose JIT sees narrowed CPU features,
 * and the run (cpu_run: "cpu" against "ref", max |cpu - ref| <= 1e-5 x max |ref|). Each suite takes its
 * own part of the shared tcases (bc_add_some_cases), so that every shared case runs in one of them.
 *
 * Under valgrind (which hides AVX-512 from the program: the JIT must then choose AVX2) and in sanitizer
 * builds the random sweeps run fewer cases. Kernels are cached in a fresh temporary cache_dir per test
 * process. A suite defines _XOPEN_SOURCE 700 before its first include (backend_cases.h's nftw, mkdtemp).
 */
#ifndef PDC_TEST_CPU_CASES_H
#define PDC_TEST_CPU_CASES_H

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "test/common/testutil.h"
#include "test/common/backend_cases.h"

/* The ISA the JIT must pick on this host: AVX-512 if the CPU (as this process sees it) has it.
 * valgrind's CPU has no AVX-512, so under valgrind this expects AVX2. */
static inline const char *expected_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
    return "sse";
}

/* The cpu's kernels for each shared case of backend_cases.h, whatever its variant (bc_expect_kernels
 * adds those that depend on it). */
static const bc_kernel cpu_kernels[][6] = {
    [BC_UNARY] = {{"y0", "jit elementwise relu"}, {"y5", "jit elementwise sigmoid"}, {"y6", "jit elementwise tanh"}},
    [BC_BINARY] = {{"y", "jit elementwise"}},
    [BC_CONST_OPERAND] = {{"y", "38 runs of 35 (scalar x vector)"}},
    [BC_BATCHNORM] = {{"y", "batchnorm as a per-channel multiply-add"}},
    [BC_CONV_RANDOM] = {{"y", "jit "}},
    [BC_CONV_PATTERN] = {{"y", "jit pattern-sparse conv 3x3, 8 patterns, 50% kernels kept, 4.50x fewer FLOPs"}},
    [BC_GEMM] = {{"y", "blas sgemm"}},
    [BC_MATMUL] = {{"y", "blas sgemm"}},
    /* "max pool KxK" or "average pool KxK" (1-D ones too), not "ref fallback: ... pooling" */
    [BC_POOL] = {{"y", "pool "}, {"g", "global average pool"}},
    [BC_EVERY_OP] = {{"s", "jit softmax"},
                     {"t", "transpose as"},
                     {"c", "concat of 2 inputs"},
                     {"f", "flatten: a copy"},
                     {"r", "reshape: a copy"}},
    [BC_MOVE] = {{"c", "concat of"}, {"r", "reshape: a copy"}},
};

/* The cpu's kernel for each shared case of backend_cases.h. */
static void bc_expect_kernels(bc_case which, const pdc_program *p, int variant)
{
    bc_assert_kernels(p, cpu_kernels[which]);
    if (which == BC_UNARY) ck_assert_kernel(p, "y0", expected_isa());
    if (which == BC_CONV_PATTERN) ck_assert_kernel(p, "y", expected_isa());
    if (which == BC_FC)
        ck_assert_kernel(p, "y", variant == 0 ? "blas" : variant == 3 ? "jit dense fc for batch" : "jit block-sparse fc");
    if (which == BC_MATMUL_CONST) {
        /* sparse weights on the block-sparse kernel (transposed to [N, K]) unless they keep more than
         * half; dense ones (and those) packed in 8x8 blocks for 2-32 rows, else OpenBLAS */
        int kind = variant % 3, small = variant % 6 >= 3, too_dense = variant >= 6;
        ck_assert_kernel(p, "y", kind && !too_dense ? "jit block-sparse matmul, " : small ? "jit dense matmul for " : "blas sgemm");
        if (kind && !too_dense)
            ck_assert_kernel(p, "y", kind == 1 ? " of the transposed weights" : "unstructured as blocks 1x1 of the transposed");
    }
    /* a dense rnn: OpenBLAS, or the lanes kernel for few rows where the gate slices fall on its blocks */
    if (which == BC_RNN && variant == 0)
        ck_assert_msg(!strstr(kernel_of(p, "rnn"), "block-sparse"), "%s", kernel_of(p, "rnn"));
    if (which == BC_SOFTMAX) ck_assert_kernel(p, "y", variant ? "vectors across columns" : "jit softmax, ");
    if (which == BC_MOVE && variant) ck_assert_kernel(p, "t", "tiles");
    if (which == BC_MOVE && !variant) {
        const char *k = kernel_of(p, "t");
        ck_assert_msg(strstr(k, "copied in runs") || strstr(k, "transpose that keeps the order: a copy"),
                      "layer t: kernel \"%s\" neither copies runs nor the whole", k);
    }
}

/* Attributes of a 2-D conv: pads top = bottom = pt, left pl, right pr; strides; dilation; activation. */
static inline pdc_attrs *conv_attrs(int64_t pt, int64_t pl, int64_t pr, int64_t sy, int64_t sx, int64_t dil, const char *act)
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
static inline pdc_attrs *conv_case_attrs(int64_t pad, int64_t sy, int64_t sx, int64_t dil, const char *act, int64_t group,
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
static inline pdc_status run_in_parallel_region(const pdc_program *p, size_t ni, pdc_tensor *const *in, size_t no,
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
static inline void check_thread_invariance(const char *what)
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

/* At 2 threads: mdl against ref (check_matches_ref with what, seed), its layers' kernels as listed
 * (BC_KERNELS); then bit-identical at 1 and 2 threads (check_thread_invariance). */
static inline void check_two_threads(const char *what, uint32_t seed, const bc_kernel *kernels)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
    check_kernels(what, seed, kernels);
    check_thread_invariance(what);
}

/* A fresh context (and no model) whose JIT sees the host's features narrowed by `features`
 * (PDC_CPU_FEATURES; NULL: the host's own). */
static inline void reopen_context(const char *features)
{
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    if (features) ck_assert_int_eq(setenv("PDC_CPU_FEATURES", features, 1), 0);
    else unsetenv("PDC_CPU_FEATURES");
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
}

/* The 4 patterns of 4 taps the cpu suites' 3x3 weights use. */
static const uint64_t cpu_pats[4] = {0x1b, 0x3a, 0xb2, 0x9a};

/* Kernel i of pattern_weight's: removed (-1) when i % 3 == 1, else pattern i * 7 % 4 of cpu_pats. */
static inline int32_t cpu_kernel_pattern(int64_t i) { return i % 3 == 1 ? -1 : (int32_t)(i * 7 % 4); }

/* A 3x3 weight "name" [o, c, 3, 3] pattern-pruned: cpu_pats, every third kernel removed (test_fill_random(seed)
 * values). */
static inline void pattern_weight(const char *name, int64_t o, int64_t c, uint32_t seed)
{
    int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
    ck_assert_ptr_nonnull(kp);
    for (int64_t i = 0; i < o * c; i++) kp[i] = cpu_kernel_pattern(i);
    constant_patterned(name, o, c, 3, 4, cpu_pats, kp, seed);
    free(kp);
}

/* Sets environment variable `name` to "1" if on, else removes it. */
static inline void env_flag(const char *name, int on)
{
    if (on) ck_assert_int_eq(setenv(name, "1", 1), 0);
    else unsetenv(name);
}

/* Runs a cpu suite: "cpu" against "ref" within 1e-5 x max |ref|, in a fresh kernel cache. */
static inline int cpu_run(Suite *s) { return bc_main("cpu", 1e-5f, s); }

#endif
