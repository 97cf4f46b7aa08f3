/*
 * test_cpu.c - the "cpu" target against the reference backend.
 *
 * Every model is built with the public API, compiled for "ref" and for "cpu", run on the same
 * pseudo-random inputs, and each output must match: max |cpu - ref| <= 1e-5 x max |ref|. Shapes are
 * drawn at random (odd sizes, strides, pads, dilations, groups, channel counts that are not a
 * multiple of the vector width) from fixed seeds, so a failure names a reproducible case. Tests also
 * check which kernel each layer got (pdc_program_layer_kernel): a JIT kernel where one applies, the
 * reference kernel with a reason where not - never an error.
 *
 * Under valgrind (which hides AVX-512 from the program: the JIT must then choose AVX2) and in
 * sanitizer builds the random sweeps run fewer cases. Kernels are cached in a fresh temporary
 * cache_dir per test process.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "test/testutil.h"

#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), ((const char *const[]){__VA_ARGS__})
#define DIMS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static pdc_context *ctx;
static pdc_model *mdl;
static char cache_dir[256];

/* Random sweeps: number of cases, fewer under valgrind and sanitizers. */
static int sweep(int n)
{
#if defined(__SANITIZE_ADDRESS__)
    n = (n + 2) / 3;
#endif
    if (RUNNING_ON_VALGRIND) n = (n + 7) / 8;
    return n < 1 ? 1 : n;
}

static uint32_t rng = 12345u;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}
/* Uniform in [lo, hi]. */
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

/* Every test of this process shares one fresh kernel cache (made in main, removed at exit), so a
 * kernel compiled by one test is loaded by the next, as it would be for a user. */
static void setup(void)
{
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
    ck_assert_ok(ctx, pdc_model_create(ctx, "cpu_test", &mdl));
}

static void teardown(void)
{
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ctx = NULL;
}

/* ------------------------------------------------------------------ builder helpers */

static void input(const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(mdl, name, rank, dims));
}

/* A constant of random values in [-scale, scale). */
static void constant_rand(const char *name, size_t rank, const int64_t *dims, float scale, uint32_t seed)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    test_fill_random(v, n, seed);
    for (size_t i = 0; i < n; i++) v[i] *= scale;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
    free(v);
}

static pdc_attrs *attrs(void)
{
    pdc_attrs *a = NULL;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

/* Adds a layer named after its output; destroys attrs (may be NULL). */
static void layer(const char *op, pdc_attrs *a, const char *out, size_t n_in, const char *const *ins)
{
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, out, op, n_in, ins, 1, &out, a));
    pdc_attrs_destroy(a);
}

static void output(const char *name) { ck_assert_ok(ctx, pdc_model_mark_output(mdl, name)); }

/* ------------------------------------------------------------------ running and comparing */

/* max |got - want| <= tol * max |want| (exact when want is all zeros). */
static void assert_close(const float *got, const float *want, size_t n, const char *what)
{
    float scale = 0.0f, worst = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(want[i]));
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= worst)) {
            worst = d;
            at = i;
        }
    }
    ck_assert_msg(worst <= 1e-5f * scale, "%s: element %zu of %zu: cpu %.9g, ref %.9g (|diff| %.3g > 1e-5 x %.3g)", what,
                  at, n, (double)got[at], (double)want[at], (double)worst, (double)scale);
}

/* Runs prog on inputs seeded with seed; returns the outputs (malloc'd, caller frees each and the array). */
static float **run_prog(pdc_program *prog, uint32_t seed, size_t *n_out_ret, size_t **sizes_ret)
{
    size_t n_in, n_out;
    ck_assert_ok(ctx, pdc_program_num_inputs(prog, &n_in));
    ck_assert_ok(ctx, pdc_program_num_outputs(prog, &n_out));
    pdc_tensor **tin = calloc(n_in + 1, sizeof *tin), **tout = calloc(n_out + 1, sizeof *tout);
    float **res = calloc(n_out + 1, sizeof *res);
    size_t *sizes = calloc(n_out + 1, sizeof *sizes);
    for (size_t i = 0; i < n_in; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_input_info(prog, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &tin[i]));
        test_fill_random(pdc_tensor_data(tin[i]), pdc_tensor_size(tin[i]), seed + 17u * (uint32_t)i);
    }
    for (size_t i = 0; i < n_out; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_output_info(prog, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &tout[i]));
    }
    ck_assert_ok(ctx, pdc_program_run(prog, n_in, tin, n_out, tout));
    for (size_t i = 0; i < n_out; i++) {
        sizes[i] = pdc_tensor_size(tout[i]);
        res[i] = malloc((sizes[i] ? sizes[i] : 1) * sizeof(float));
        memcpy(res[i], pdc_tensor_data(tout[i]), sizes[i] * sizeof(float));
        pdc_tensor_destroy(tout[i]);
    }
    for (size_t i = 0; i < n_in; i++) pdc_tensor_destroy(tin[i]);
    free(tin);
    free(tout);
    *n_out_ret = n_out;
    *sizes_ret = sizes;
    return res;
}

static void free_outputs(float **r, size_t n, size_t *sizes)
{
    for (size_t i = 0; i < n; i++) free(r[i]);
    free(r);
    free(sizes);
}

/* Compiles mdl for cpu and ref, runs both, compares every output. Returns the cpu program. */
static pdc_program *check_matches_ref(const char *what, uint32_t seed)
{
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &pc));
    ck_assert_str_eq(pdc_program_target(pc), "cpu");
    size_t nr, nc, *sr, *sc;
    float **want = run_prog(pr, seed, &nr, &sr);
    float **got = run_prog(pc, seed, &nc, &sc);
    ck_assert_uint_eq(nr, nc);
    for (size_t i = 0; i < nr; i++) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s, output %zu", what, i);
        ck_assert_uint_eq(sr[i], sc[i]);
        assert_close(got[i], want[i], sr[i], msg);
    }
    free_outputs(want, nr, sr);
    free_outputs(got, nc, sc);
    pdc_program_destroy(pr);
    return pc;
}

/* The kernel text of the layer named `name` in prog. */
static const char *kernel_of(const pdc_program *prog, const char *name)
{
    size_t n;
    ck_assert_ok(ctx, pdc_program_num_layers(prog, &n));
    for (size_t i = 0; i < n; i++) {
        const char *ln, *k;
        ck_assert_ok(ctx, pdc_program_layer_kernel(prog, i, &ln, &k));
        if (!strcmp(ln, name)) return k;
    }
    ck_abort_msg("no layer %s", name);
    return "";
}

#define ck_assert_kernel(prog, layer_name, needle)                                                          \
    do {                                                                                                    \
        const char *k__ = kernel_of((prog), (layer_name));                                                  \
        ck_assert_msg(strstr(k__, (needle)) != NULL, "layer %s: kernel \"%s\" lacks \"%s\"", (layer_name), k__, \
                      (needle));                                                                            \
    } while (0)

/* The ISA the JIT must pick on this host: AVX-512 if the CPU (as this process sees it) has it.
 * valgrind's CPU has no AVX-512, so under valgrind this expects AVX2. */
static const char *expected_isa(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
    return "sse";
}

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
    pdc_program *p = check_matches_ref("unary chain", 7u + (uint32_t)_i);
    ck_assert_kernel(p, "y0", "jit elementwise relu");
    ck_assert_kernel(p, "y0", expected_isa());
    ck_assert_kernel(p, "y5", "ref fallback: sigmoid");
    pdc_program_destroy(p);
}
END_TEST

START_TEST(binary_broadcast_matches_ref)
{
    static const char *const ops[] = {"add", "sub", "mul", "div"};
    for (int c = 0; c < sweep(24); c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "bcast", &mdl));
        int64_t d[4] = {rnd_in(1, 2), rnd_in(1, 5), rnd_in(1, 9), rnd_in(1, 21)};
        int64_t e[4];
        for (int i = 0; i < 4; i++) e[i] = rnd() % 3 == 0 ? 1 : d[i];
        int rb = (int)rnd_in(1, 4); /* b may have lower rank */
        input("a", 4, d);
        input("b", (size_t)rb, e + 4 - rb);
        const char *op = ops[c % 4];
        layer(op, NULL, "y", NAMES("a", "b"));
        output("y");
        char what[128];
        snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld with rank-%d operand", op, (long long)d[0], (long long)d[1],
                 (long long)d[2], (long long)d[3], rb);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "y", "jit elementwise");
        pdc_program_destroy(p);
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
    pdc_program *p = check_matches_ref("c - x", 4);
    ck_assert_kernel(p, "y", "38 runs of 35 (scalar x vector)");
    pdc_program_destroy(p);
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

/* ------------------------------------------------------------------ API, fallbacks, ISA */

START_TEST(layer_kernel_api)
{
    input("x", DIMS(2, 3));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &pc));
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

START_TEST(every_op_compiles_for_cpu)
{
    /* Ops without a cpu kernel still compile and run: the reference kernel runs them. */
    input("x", DIMS(1, 4, 5, 6));
    layer("softmax", NULL, "s", NAMES("x"));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "perm", DIMS(0, 2, 3, 1)));
    layer("transpose", a, "t", NAMES("s"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "axis", 1));
    layer("concat", a, "c", NAMES("t", "t"));
    layer("flatten", NULL, "f", NAMES("c"));
    output("f");
    pdc_program *p = check_matches_ref("softmax/transpose/concat/flatten", 5);
    ck_assert_kernel(p, "s", "ref fallback");
    pdc_program_destroy(p);
}
END_TEST

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
    pdc_model_destroy(mdl);
    mdl = NULL;
    pdc_context_destroy(ctx);
    ck_assert_int_eq(setenv("PDC_CPU_FEATURES", "-avx512f", 1), 0);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
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
    TCase *tc = tcase_create("eltwise");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, unary_ops_match_ref, 0, 6);
    tcase_add_test(tc, binary_broadcast_matches_ref);
    tcase_add_test(tc, constant_operand);
    tcase_add_test(tc, same_input_twice);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layer_kernel_api);
    tcase_add_test(tc, every_op_compiles_for_cpu);
    tcase_add_test(tc, isa_follows_host_and_override);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(cache_dir, sizeof cache_dir, "%s/pdc-test-cpu-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    int rc = test_run_suite(cpu_suite());
    nftw(cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
