/*
 * backend_compare.h - a target against the reference backend, for the suites that check a backend
 * (through backend_cases.h: the cpu suites and test_gpu): the fixture (one context and model per test,
 * a kernel cache shared by the whole process), the random stream the shared cases draw their shapes
 * from, running a program on pseudo-random inputs, the comparison (check_matches_ref: every output of
 * the target within bc_tolerance x max |ref| of ref's), the kernel each layer got (kernel_of,
 * ck_assert_kernel, lists of them: BC_KERNELS), the shared cases' names (bc_case) and the suite's main
 * (bc_main). Included by backend_cases.h, which holds the shared cases themselves.
 */
#ifndef PDC_TEST_BACKEND_COMPARE_H
#define PDC_TEST_BACKEND_COMPARE_H

#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "test/common/model_builder.h"

static const char *bc_target = "";  /* "cpu", "gpu": set by bc_main */
static float bc_tolerance = 1e-5f; /* relative to max |ref| */
static char cache_dir[256];         /* a fresh kernel cache for the whole process */
/* How run_prog runs a program; a suite may swap in its own (cpu_cases.h: from inside a parallel region). */
static pdc_status (*bc_run)(const pdc_program *, size_t, pdc_tensor *const *, size_t,
                            pdc_tensor *const *) = pdc_program_run;

/* Random sweeps: number of cases, fewer under valgrind and sanitizers. */
static int sweep(int n)
{
#if defined(__SANITIZE_ADDRESS__)
    n = (n + 2) / 3;
#endif
    if (RUNNING_ON_VALGRIND) n = (n + 7) / 8;
    return n < 1 ? 1 : n;
}

#define BC_RNG_SEED 12345u
static uint32_t rng = BC_RNG_SEED;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}
/* Uniform in [lo, hi]. */
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint32_t)(hi - lo + 1)); }

/* v := 0, 1, ..., n - 1 shuffled with rnd() (Fisher-Yates, from the back). */
static void random_perm(int64_t *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd() % (uint32_t)(i + 1)), tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
}

/* constant_pruned's masks come from the shared stream rnd(). */
static uint32_t draw_rnd(uint32_t *state)
{
    (void)state;
    return rnd();
}

/* kind 0 dense, 1 bh x bw blocks, 2 unstructured; keep_pct of the blocks (elements) kept. */
static void constant_pruned(const char *name, size_t rank, const int64_t *dims, int kind, int64_t bh, int64_t bw,
                            int keep_pct, uint32_t seed)
{
    constant_pruned_by(name, rank, dims, kind, bh, bw, keep_pct, seed, draw_rnd);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

/* Every test of this process shares one fresh kernel cache (made in bc_main, removed at exit), so a
 * kernel compiled by one test is loaded by the next, as it would be for a user. The random stream
 * restarts per test, so a test draws the same cases whether tests fork or not (CK_FORK=no). */
static void bc_setup(void)
{
    rng = BC_RNG_SEED;
    char name[32];
    snprintf(name, sizeof name, "%s_test", bc_target);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
    ck_assert_ok(ctx, pdc_model_create(ctx, name, &mdl));
}

static void bc_teardown(void) { mb_close(); }

/* ------------------------------------------------------------------ running and comparing */

/* max |got - want| <= bc_tolerance * max |want| (exact when want is all zeros). */
static void assert_close(const float *got, const float *want, size_t n, const char *what)
{
    test_assert_close(got, want, n, bc_tolerance, bc_target, what);
}

/* Runs prog on inputs seeded with seed; returns the outputs (malloc'd, caller frees each and the array). */
static float **run_prog(pdc_program *prog, uint32_t seed, size_t *n_out_ret, size_t **sizes_ret)
{
    size_t n_in, n_out;
    pdc_tensor **tin, **tout;
    program_tensors(prog, seed, &n_in, &tin, &n_out, &tout);
    float **res = calloc(n_out + 1, sizeof *res);
    size_t *sizes = calloc(n_out + 1, sizeof *sizes);
    ck_assert_ok(ctx, bc_run(prog, n_in, tin, n_out, tout));
    for (size_t i = 0; i < n_out; i++) {
        sizes[i] = pdc_tensor_size(tout[i]);
        res[i] = malloc((sizes[i] ? sizes[i] : 1) * sizeof(float));
        memcpy(res[i], pdc_tensor_data(tout[i]), sizes[i] * sizeof(float));
    }
    free_tensors(tin, n_in);
    free_tensors(tout, n_out);
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

/* Compiles mdl for bc_target and ref, runs both, compares every output. Returns the target's program. */
static pdc_program *check_matches_ref(const char *what, uint32_t seed)
{
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, bc_target, &pc));
    ck_assert_str_eq(pdc_program_target(pc), bc_target);
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

/* check_matches_ref, the description printf'd from fmt. */
static inline pdc_program *matches_ref_v(uint32_t seed, const char *fmt, va_list ap)
{
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    return check_matches_ref(what, seed);
}

static inline pdc_program *matches_ref(uint32_t seed, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline pdc_program *matches_ref(uint32_t seed, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pdc_program *p = matches_ref_v(seed, fmt, ap);
    va_end(ap);
    return p;
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

/* Asserts the kernel of layer `layer_name` lacks `needle`; the message names case number q. */
#define ck_assert_kernel_lacks(prog, q, layer_name, needle)                                                 \
    do {                                                                                                    \
        const char *k__ = kernel_of((prog), (layer_name));                                                  \
        ck_assert_msg(strstr(k__, (needle)) == NULL, "case %d: layer %s: kernel \"%s\" has \"%s\"", (int)(q), \
                      (layer_name), k__, (needle));                                                         \
    } while (0)

/* The shared cases whose kernels the suite checks (bc_expect_kernels); variant as noted. */
typedef enum {
    BC_UNARY,          /* layers y0 (relu) .. y6 (tanh) */
    BC_BINARY,         /* y */
    BC_CONST_OPERAND,  /* y = c - x, c per channel */
    BC_BATCHNORM,      /* y */
    BC_CONV_RANDOM,    /* y; variant: sp_kind */
    BC_CONV_PATTERN,   /* y: 3x3, 8 patterns, 50% kernels kept */
    BC_FC,             /* y; variant: 0 dense, 1 block, 2 unstructured, 3 dense at batch 2-32 */
    BC_GEMM,           /* y */
    BC_MATMUL,         /* y */
    BC_MATMUL_CONST,   /* y = x [..., M, K] times a constant [K, N]; variant: 0 dense, 1 block, 2 unstructured, and
                        * +3 where the rows (x's leading dims times M) are 2-32 and K, N >= 8, +6 where a sparse
                        * weight keeps more than half of its blocks (edge blocks counted whole) */
    BC_RNN,            /* rnn; variant: weights 0 dense, 1 block, 2 unstructured */
    BC_POOL,           /* y max/avg pool, g global average pool */
    BC_EVERY_OP,       /* s softmax, t transpose, c concat, f flatten, r reshape */
    BC_SOFTMAX,        /* y; variant: 1 along an inner axis (columns), 0 along the last (rows) */
    BC_MOVE,           /* t transpose, c concat, r reshape; variant: 1 if the transpose moves the last dim */
} bc_case;

/* A layer and what its kernel text must contain; a list of them ends with a NULL layer. */
typedef struct {
    const char *layer, *needle;
} bc_kernel;

/* A list of bc_kernel: BC_KERNELS({"y", "jit "}, {"g", "pool"}). */
#define BC_KERNELS(...) ((const bc_kernel[]){__VA_ARGS__, {NULL, NULL}})

/* Asserts (ck_assert_kernel) each (layer, needle) of the list k (which may be empty). */
static inline void bc_assert_kernels(const pdc_program *p, const bc_kernel *k)
{
    for (; k->layer; k++) ck_assert_kernel(p, k->layer, k->needle);
}

/* mdl against ref (check_matches_ref with what, seed), and its layers' kernels as listed (BC_KERNELS). */
static inline void check_kernels(const char *what, uint32_t seed, const bc_kernel *kernels)
{
    pdc_program *p = check_matches_ref(what, seed);
    bc_assert_kernels(p, kernels);
    pdc_program_destroy(p);
}

/* Defined by the suite: asserts (ck_assert_kernel) the kernels its target gave case `which`. */
static void bc_expect_kernels(bc_case which, const pdc_program *p, int variant);

/* Shared case `which`: mdl against ref on inputs from seed (check_matches_ref, described by fmt), and
 * the kernels the suite expects for it (bc_expect_kernels with variant). */
static void check_case(bc_case which, int variant, uint32_t seed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_case(bc_case which, int variant, uint32_t seed, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pdc_program *p = matches_ref_v(seed, fmt, ap);
    va_end(ap);
    bc_expect_kernels(which, p, variant);
    pdc_program_destroy(p);
}

/* ------------------------------------------------------------------ the suite */

static TCase *bc_tcase(Suite *s, const char *name, double timeout, SFun setup, SFun teardown)
{
    return test_add_tcase(s, name, setup, teardown, timeout, NULL);
}

/* Runs suite s for target with tolerance tol in a fresh kernel cache, removed afterwards. */
static int bc_main(const char *target, float tol, Suite *s)
{
    bc_target = target;
    bc_tolerance = tol;
    if (!test_make_temp_dir(cache_dir, sizeof cache_dir, target)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    int rc = test_run_suite(s);
    nftw(cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}

#endif
