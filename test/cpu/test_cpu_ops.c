/*
 * test_cpu_ops.c - the "cpu" target's elementwise ops, pooling, softmax and data movement against the
 * reference backend: the shared cases of test/common/backend_cases.h (unary chains, broadcasting
 * binaries, batchnorm, random pools, softmax along rows and columns, transpose/concat/reshape, the
 * layer-kernel API) with the cpu's kernel choices, and the cpu's own: sigmoid and tanh element by
 * element, the max pool's vector passes, pooling rows split over the threads, 3-D pools (random
 * windows, bit-exact max, rows split over the threads), the ISA the JIT picks and its overrides.
 */
#define _XOPEN_SOURCE 700
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* ------------------------------------------------------------------ elementwise, pooling */

/* mdl := y = op(x), x of n x c x h x w, a 2-D pool: kernel kh x kw, stride s, pads pad all round,
 * dilation dil. */
static void pool_model(const char *op, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t s,
                       int64_t pad, int64_t dil)
{
    fresh_model(op);
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
    check_kernels("maxpool window outside the input", 3, BC_KERNELS({"y", "separable"}));
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
        check_kernels(desc, (uint32_t)q + 61, BC_KERNELS({"y", "separable"}));
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
    env_flag("PDC_OMP_STATIC", 1); /* two threads even on a busy machine */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        pool_model(cases[q].op, 1, cases[q].c, cases[q].h, cases[q].w, cases[q].k, cases[q].k, cases[q].s, cases[q].pad,
                   1);
        check_two_threads(cases[q].op, (uint32_t)q + 7, BC_KERNELS({"y", "pool"}));
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

/* mdl := y = op(x), a 3-D pool of x [n, c, in]: kernel k, strides st, dilations dl, pads pb/pe per axis. */
static void pool3d_model(const char *op, int64_t n, int64_t c, const int64_t in[3], const int64_t k[3], const int64_t st[3],
                         const int64_t dl[3], const int64_t pb[3], const int64_t pe[3], int ceil_mode, int count_pad)
{
    fresh_model(op);
    input("x", DIMS(n, c, in[0], in[1], in[2]));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", 3, k));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 3, st));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", 3, dl));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 6, (int64_t[]){pb[0], pb[1], pb[2], pe[0], pe[1], pe[2]}));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "ceil_mode", ceil_mode));
    if (!strcmp(op, "avgpool")) ck_assert_ok(ctx, pdc_attrs_set_int(a, "count_include_pad", count_pad));
    layer(op, a, "y", NAMES("x"));
    output("y");
}

/* Random 3-D max and average pools (odd sizes, strides, pads, dilations, ceil_mode,
 * count_include_pad, windows that reach past the input) against the reference; a max pool's
 * outputs equal the reference's bit for bit (the max of a set does not depend on the order). */
START_TEST(pool3d_random_matches_ref)
{
    rng = 3303u;
    for (int q = 0; q < sweep(30); q++) {
        const int is_max = q % 2 == 0;
        int64_t in[3], k[3], st[3], dl[3], pb[3], pe[3];
        for (int i = 0; i < 3; i++) {
            k[i] = rnd_in(1, 3);
            st[i] = rnd_in(1, 3);
            dl[i] = k[i] > 1 && rnd() % 4 == 0 ? 2 : 1;
            pb[i] = rnd_in(0, k[i] - 1);
            pe[i] = rnd_in(0, k[i] - 1);
            in[i] = dl[i] * (k[i] - 1) + rnd_in(1, i == 2 ? 40 : 9);
        }
        const int ceil_mode = (int)(rnd() % 2), count_pad = (int)(rnd() % 2);
        const char *op = is_max ? "maxpool" : "avgpool";
        pool3d_model(op, rnd_in(1, 2), rnd_in(1, 4), in, k, st, dl, pb, pe, ceil_mode, count_pad);
        char what[200], needle[64];
        snprintf(what, sizeof what, "case %d: %s k %lldx%lldx%lld s %lld,%lld,%lld in %lldx%lldx%lld ceil %d", q, op,
                 (long long)k[0], (long long)k[1], (long long)k[2], (long long)st[0], (long long)st[1],
                 (long long)st[2], (long long)in[0], (long long)in[1], (long long)in[2], ceil_mode);
        snprintf(needle, sizeof needle, "%s pool %lldx%lldx%lld stride %lld", is_max ? "max" : "average",
                 (long long)k[0], (long long)k[1], (long long)k[2], (long long)st[2]);
        pdc_program *pc = check_matches_ref(what, (uint32_t)q + 300);
        ck_assert_kernel(pc, "y", needle);
        if (is_max) {
            pdc_program *pr = NULL;
            ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
            size_t nr, nc, *sr, *sc;
            float **want = run_prog(pr, (uint32_t)q + 300, &nr, &sr), **got = run_prog(pc, (uint32_t)q + 300, &nc, &sc);
            ck_assert_msg(sr[0] == sc[0] && memcmp(want[0], got[0], sr[0] * sizeof(float)) == 0,
                          "%s: not the reference's values bit for bit", what);
            free(want[0]), free(got[0]), free(want), free(got), free(sr), free(sc);
            pdc_program_destroy(pr);
        }
        pdc_program_destroy(pc);
    }
}
END_TEST

START_TEST(pool3d_rows_split_over_threads)
{
    /* 3-D pools at 2 threads: rows of every depth plane split between them (a share may start and
     * end inside a depth plane), or planes where the rows are few; the same results at 1 and 2
     * threads. Every case has 16384 outputs or more. */
    static const struct {
        const char *op;
        int64_t c, d, h, w, k, s, pad;
    } cases[] = {{"maxpool", 16, 8, 28, 28, 3, 2, 1}, {"avgpool", 12, 7, 19, 33, 3, 1, 1},
                 {"maxpool", 64, 4, 9, 9, 2, 1, 0},   {"avgpool", 600, 3, 4, 16, 2, 1, 1}};
    env_flag("PDC_OMP_STATIC", 1); /* two threads even on a busy machine */
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        const int64_t k = cases[q].k, s = cases[q].s, pd = cases[q].pad;
        pool3d_model(cases[q].op, 1, cases[q].c, (int64_t[]){cases[q].d, cases[q].h, cases[q].w}, (int64_t[]){k, k, k},
                     (int64_t[]){s, s, s}, (int64_t[]){1, 1, 1}, (int64_t[]){pd, pd, pd}, (int64_t[]){pd, pd, pd}, 0, 0);
        check_two_threads(cases[q].op, (uint32_t)q + 17, BC_KERNELS({"y", "pool"}));
    }
    unsetenv("PDC_OMP_STATIC");
}
END_TEST

/* ------------------------------------------------------------------ ISA */

START_TEST(isa_follows_host_and_override)
{
    /* The JIT reads the host's features; PDC_CPU_FEATURES may only narrow them. */
    relu_model(1, 40);
    check_kernels("relu", 1, BC_KERNELS({"y", expected_isa()}));

    /* a new context picks the variables up */
    reopen_context("-avx512f");
    ck_assert_ok(ctx, pdc_model_create(ctx, "isa", &mdl));
    relu_model(1, 40);
    pdc_program *p = check_matches_ref("relu without avx512", 1);
    if (strcmp(expected_isa(), "sse")) ck_assert_kernel(p, "y", "avx2");
    pdc_program_destroy(p);

    /* bad overrides are errors, never silently ignored and never a crash */
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ck_assert_int_eq(setenv("PDC_CPU_FEATURES", "+nosuchfeature", 1), 0);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_model_create(ctx, "isa", &mdl));
    relu_model(1, 40);
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

int main(void)
{
    Suite *s = suite_create("cpu_ops");
    bc_tcases t = bc_add_some_cases(s, bc_setup, bc_teardown, BC_TC_ELTWISE | BC_TC_POOL | BC_TC_API);
    tcase_add_test(t.eltwise, sigmoid_tanh_close_to_reference);
    test_add_tests(t.pool, TEST_LIST(maxpool_window_outside_input, maxpool_wide_rows_and_tall_windows,
                                     pooling_rows_split_over_threads, pool3d_random_matches_ref,
                                     pool3d_rows_split_over_threads));
    tcase_add_test(t.api, isa_follows_host_and_override);
    return cpu_run(s);
}
