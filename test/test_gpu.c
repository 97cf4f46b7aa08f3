/*
 * test_gpu.c - the "gpu" target (and the "nvptx" emitter) against the reference backend.
 *
 * (a) Every model is built with the public API, compiled for "ref" and for "gpu" on the emulated
 *     device (PDC_GPU_EMULATE=1, set in main: the same plan, PTX generation, arenas, uploads and
 *     launch list, with the kernels' host flavour JIT'd), run on the same pseudo-random inputs, and
 *     every output must match: max |gpu - ref| <= 1e-4 x max |ref|. Shapes are drawn at random
 *     from fixed seeds (strides, pads, dilations, groups, sparsity kinds, fused activations,
 *     out_perm), plus the ONNX test models.
 * (b) The PTX of every op kind and of the test models passes ptxas -arch=sm_80 and -arch=sm_90
 *     (/usr/local/cuda/bin/ptxas or $PDC_PTXAS; skipped with a message where absent).
 * (c) Loader errors: a missing driver library, the toolkit's stub libcuda.so (it exports every
 *     symbol pdc resolves; cuInit fails with CUDA_ERROR_STUB_LIBRARY and the library is unloaded
 *     again), bad gpu_arch values, pdc_model_emit "nvptx", the PTX ISA per arch and the driver it
 *     needs.
 * (d) With PDC_TEST_GPU=1 (make test-gpu) the emulation is off and every test of (a) runs on the
 *     real device; without a usable device those tests then fail instead of being skipped.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <sys/wait.h>

#include "test/testutil.h"
#include "backends/gpu/cuda_api.h"

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
static int real_gpu; /* make test-gpu: PDC_TEST_GPU=1 */

static void setup(void)
{
    /* the loader tests change these; with CK_FORK=no (make test-valgrind) they must not leak into
     * the next test */
    if (!real_gpu) {
        setenv("PDC_GPU_EMULATE", "1", 1);
        unsetenv("PDC_CUDA_LIBRARY");
    }
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", cache_dir));
    ck_assert_ok(ctx, pdc_model_create(ctx, "gpu_test", &mdl));
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

/* A constant of random values pruned over its matrix view (all dims but the last x the last): kind 0
 * dense, 1 bh x bw blocks, 2 unstructured; keep_pct of the blocks (elements) kept. */
static void constant_pruned(const char *name, size_t rank, const int64_t *dims, int kind, int64_t bh, int64_t bw,
                            int keep_pct, uint32_t seed)
{
    int64_t rows = 1, cols = dims[rank - 1];
    for (size_t i = 0; i + 1 < rank; i++) rows *= dims[i];
    size_t n = (size_t)(rows * cols);
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    test_fill_random(v, n, seed);
    if (kind == 0) {
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
        free(v);
        return;
    }
    if (kind == 2) bh = bw = 1;
    int64_t nbr = (rows + bh - 1) / bh, nbc = (cols + bw - 1) / bw;
    uint8_t *mask = malloc((size_t)(nbr * nbc));
    ck_assert_ptr_nonnull(mask);
    for (int64_t b = 0; b < nbr * nbc; b++) mask[b] = (int)(rnd() % 100) < keep_pct;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++)
            if (!mask[(r / bh) * nbc + q / bw]) v[r * cols + q] = 0.0f;
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, name, rank, dims, v));
    if (kind == 1) ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, name, bh, bw, (size_t)(nbr * nbc), mask));
    else ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, name, n, mask));
    free(mask);
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
    ck_assert_msg(worst <= 1e-4f * scale, "%s: element %zu of %zu: gpu %.9g, ref %.9g (|diff| %.3g > 1e-4 x %.3g)", what,
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

/* Compiles mdl for gpu and ref, runs both, compares every output. Returns the gpu program. */
static pdc_program *check_matches_ref(const char *what, uint32_t seed)
{
    pdc_program *pr = NULL, *pc = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &pc));
    ck_assert_str_eq(pdc_program_target(pc), "gpu");
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


/* PTX through ptxas (defined below). */
static char *emit_ptx(const char *arch, const char *dir);
static void check_ptxas(const char *what);

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
    ck_assert_kernel(p, "y0", "ptx elementwise relu");
    ck_assert_kernel(p, "y5", "ptx elementwise sigmoid");
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
        ck_assert_kernel(p, "y", "ptx elementwise");
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
    ck_assert_kernel(p, "y", "broadcasting");
    pdc_program_destroy(p);
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
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "epsilon", 1e-3f));
    layer("batchnorm", a, "y", NAMES("x", "scale", "bias", "mean", "var"));
    output("y");
    pdc_program *p = check_matches_ref("batchnorm", 5);
    ck_assert_kernel(p, "y", "ptx batchnorm");
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


/* ------------------------------------------------------------------ convolution */

typedef enum { SP_DENSE, SP_PATTERN, SP_BLOCK, SP_UNSTRUCTURED } sp_kind;
static const char *const sp_names[] = {"dense", "pattern", "block", "unstructured"};

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
    static const char *const acts[] = {NULL, "relu", "clip", "leaky_relu", "sigmoid", "hardswish"};
    const char *act = acts[rnd() % 6];
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
        for (int64_t r = 0; r < rows; r++)
            for (int64_t q = 0; q < cols; q++)
                if (!mask[(r / bh) * nbc + q / bw]) w[r * cols + q] = 0.0f;
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
    if (act) {
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", act));
        if (!strcmp(act, "clip")) {
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", -0.5f));
            ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_max", 0.75f));
        }
        if (!strcmp(act, "leaky_relu")) ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_alpha", 0.2f));
    }
    if (perm) {
        int64_t *pv = malloc((size_t)o * sizeof *pv);
        for (int64_t i = 0; i < o; i++) pv[i] = i;
        for (int64_t i = o - 1; i > 0; i--) {
            int64_t j = (int64_t)(rnd() % (uint32_t)(i + 1)), tmp = pv[i];
            pv[i] = pv[j];
            pv[j] = tmp;
        }
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
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "conv", &mdl));
        char desc[512];
        random_conv(c % 5 == 4 ? 1 : 2, sp, desc, sizeof desc);
        pdc_program *p = check_matches_ref(desc, (uint32_t)c);
        ck_assert_kernel(p, "y", "ptx ");
        pdc_program_destroy(p);
    }
}
END_TEST


/* Dense 2-D convs with >= 256 output pixels take the shared-memory tiled kernel: input tile + halo
 * and 8 filters' weights staged per step of input channels, phases separated by barriers (run phase
 * by phase over the block on the emulated device). Strides, dilation, asymmetric pads, 1x1 and 5x5,
 * channel counts off the step and group sizes, batch 2, bias, activation, out_perm; PTX via ptxas. */
START_TEST(tiled_conv_matches_ref)
{
    static const struct {
        int64_t n, c, o, h, w, kh, kw, s, d, pt, pl, pb, pr;
        int bias, perm;
    } cs[] = {{2, 5, 13, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, {1, 17, 8, 33, 35, 5, 5, 2, 1, 2, 2, 2, 2, 0, 1},
              {1, 3, 9, 24, 12, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},  {1, 12, 16, 18, 30, 3, 3, 1, 2, 2, 1, 2, 3, 1, 1},
              {1, 9, 7, 16, 16, 3, 3, 1, 1, 0, 1, 2, 1, 0, 0}};
    for (size_t q = 0; q < sizeof cs / sizeof cs[0]; q++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "tconv", &mdl));
        input("x", DIMS(cs[q].n, cs[q].c, cs[q].h, cs[q].w));
        constant_rand("w", DIMS(cs[q].o, cs[q].c, cs[q].kh, cs[q].kw), 0.5f, 11 + (uint32_t)q);
        if (cs[q].bias) constant_rand("b", DIMS(cs[q].o), 0.5f, 3);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){cs[q].s, cs[q].s}));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", 2, (const int64_t[]){cs[q].d, cs[q].d}));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){cs[q].pt, cs[q].pl, cs[q].pb, cs[q].pr}));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", q % 2 ? "relu" : "sigmoid"));
        if (cs[q].perm) {
            int64_t pv[32];
            for (int64_t i = 0; i < cs[q].o; i++) pv[i] = (i * 5 + 3) % cs[q].o;
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", (size_t)cs[q].o, pv));
        }
        if (cs[q].bias) layer("conv", a, "y", NAMES("x", "w", "b"));
        else layer("conv", a, "y", NAMES("x", "w"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "tiled conv case %zu", q);
        pdc_program *p = check_matches_ref(what, 40 + (uint32_t)q);
        ck_assert_kernel(p, "y", "shared-memory tiles");
        pdc_program_destroy(p);
        if (q == 1) check_ptxas("tiled conv 5x5 stride 2");
    }
}
END_TEST

START_TEST(conv_vgg_like_pattern_layer)
{
    /* 8 four-entry patterns with the centre, 50% connectivity: the layer shape the benchmarks time,
     * small enough for a unit test; channel counts that are not multiples of 16 */
    static const uint64_t pats[8] = {0x1b, 0x36, 0xd8, 0x1b0, 0x3a, 0xb2, 0xb8, 0x9a};
    int64_t c = 21, o = 38, h = 19, w = 23;
    input("x", DIMS(1, c, h, w));
    size_t wn = (size_t)(o * c * 9);
    float *wv = malloc(wn * sizeof *wv);
    int32_t *kp = malloc((size_t)(o * c) * sizeof *kp);
    test_fill_random(wv, wn, 99);
    for (int64_t q = 0; q < o * c; q++) {
        kp[q] = q % 2 ? -1 : (int32_t)(rnd() % 8);
        for (int b = 0; b < 9; b++)
            if (kp[q] < 0 || !(pats[kp[q]] >> b & 1)) wv[q * 9 + b] = 0.0f;
    }
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 4, (const int64_t[]){o, c, 3, 3}, wv));
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w", 3, 3, 8, pats, (size_t)(o * c), kp));
    free(wv);
    free(kp);
    constant_rand("b", DIMS(o), 0.1f, 5);
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    layer("conv", a, "y", NAMES("x", "w", "b"));
    output("y");
    pdc_program *p = check_matches_ref("pattern 3x3 21->38 @19x23", 11);
    ck_assert_kernel(p, "y", "ptx pattern-sparse conv 3x3, 8 patterns");
    pdc_program_destroy(p);
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
    if (!found) fprintf(stderr, "test_gpu: no ONNX test models under %s, skipped\n", test_data_path("onnx"));
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
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
        layer("conv", a, "c1", NAMES("image", "w1", "b1"));
        layer("relu", NULL, "r1", NAMES("c1"));
        static const uint64_t pats[8] = {0x1b, 0x36, 0xd8, 0x1b0, 0x3a, 0xb2, 0xb8, 0x9a};
        float w2[32 * 16 * 9];
        int32_t kp[32 * 16];
        test_fill_random(w2, 32 * 16 * 9, 3);
        for (int q = 0; q < 32 * 16; q++) {
            kp[q] = (q * 7) % 3 == 0 ? -1 : q % 8;
            for (int b = 0; b < 9; b++)
                if (kp[q] < 0 || !(pats[kp[q]] >> b & 1)) w2[q * 9 + b] = 0.0f;
        }
        ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w2", 4, (const int64_t[]){32, 16, 3, 3}, w2));
        ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "w2", 3, 3, 8, pats, 32 * 16, kp));
        constant_rand("b2", DIMS(32), 0.05f, 4);
        a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
        layer("conv", a, "c2", NAMES("r1", "w2", "b2"));
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


/* ------------------------------------------------------------------ fc, gemm, matmul */

START_TEST(fc_random_matches_ref)
{
    /* _i: 0 dense, 1 block-sparse, 2 unstructured */
    rng = 77u + (uint32_t)_i;
    for (int c = 0; c < sweep(16); c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "fc", &mdl));
        int64_t n = rnd_in(1, 3), k = rnd_in(1, 300), o = rnd_in(1, 70), bh = rnd_in(1, 4), bw = rnd_in(1, 8);
        int has_bias = rnd() % 2;
        input("x", DIMS(n, k));
        size_t wn = (size_t)(o * k);
        float *w = malloc(wn * sizeof *w);
        test_fill_random(w, wn, rnd());
        if (_i == 1) {
            int64_t nbr = (o + bh - 1) / bh, nbc = (k + bw - 1) / bw;
            uint8_t *mask = malloc((size_t)(nbr * nbc));
            for (int64_t b = 0; b < nbr * nbc; b++) mask[b] = rnd() % 10 < 3;
            for (int64_t r = 0; r < o; r++)
                for (int64_t q = 0; q < k; q++)
                    if (!mask[(r / bh) * nbc + q / bw]) w[r * k + q] = 0.0f;
            ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 2, (const int64_t[]){o, k}, w));
            ck_assert_ok(ctx, pdc_model_set_sparsity_block(mdl, "w", bh, bw, (size_t)(nbr * nbc), mask));
            free(mask);
        } else if (_i == 2) {
            uint8_t *mask = malloc(wn);
            for (size_t q = 0; q < wn; q++) {
                mask[q] = rnd() % 10 < 2;
                if (!mask[q]) w[q] = 0.0f;
            }
            ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 2, (const int64_t[]){o, k}, w));
            ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(mdl, "w", wn, mask));
            free(mask);
        } else {
            ck_assert_ok(ctx, pdc_model_add_constant(mdl, "w", 2, (const int64_t[]){o, k}, w));
        }
        free(w);
        pdc_attrs *a = attrs();
        if (rnd() % 2) ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", rnd() % 2 ? "relu" : "tanh"));
        if (has_bias) {
            constant_rand("b", DIMS(o), 0.5f, rnd());
            layer("fc", a, "y", NAMES("x", "w", "b"));
        } else {
            layer("fc", a, "y", NAMES("x", "w"));
        }
        output("y");
        char what[128];
        snprintf(what, sizeof what, "fc n%lld k%lld o%lld %s %lldx%lld", (long long)n, (long long)k, (long long)o,
                 _i == 0 ? "dense" : _i == 1 ? "block" : "unstructured", (long long)bh, (long long)bw);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "y", _i == 0 ? "ptx dense fc" : "ptx block-sparse fc");
        pdc_program_destroy(p);
    }
}
END_TEST

START_TEST(gemm_random_matches_ref)
{
    rng = 4242u;
    for (int c = 0; c < sweep(16); c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "gemm", &mdl));
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
        /* C: absent, scalar, [N], [M,1], [M,N] */
        if (cform == 1) constant_rand("c", DIMS(1), 1.0f, 3);
        else if (cform == 2) constant_rand("c", DIMS(nn), 1.0f, 3);
        else if (cform == 3) input("c", DIMS(mm, 1));
        else if (cform == 4) input("c", DIMS(mm, nn));
        if (cform) layer("gemm", a, "y", NAMES("a", "b", "c"));
        else layer("gemm", a, "y", NAMES("a", "b"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "gemm %lldx%lldx%lld ta%d tb%d c%d", (long long)mm, (long long)kk, (long long)nn, ta,
                 tb, cform);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "y", "ptx dense");
        pdc_program_destroy(p);
    }
}
END_TEST

START_TEST(matmul_broadcast_matches_ref)
{
    input("a", DIMS(2, 1, 5, 7));
    input("b", DIMS(3, 7, 4));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    pdc_program *p = check_matches_ref("matmul [2,1,5,7] x [3,7,4]", 8);
    ck_assert_kernel(p, "y", "ptx dense");
    pdc_program_destroy(p);
}
END_TEST

/* Dense fc / gemm / matmul with M, N >= 16 take the shared-memory tiled kernel (16x16 tiles, phases
 * separated by barriers; the emulated device runs each phase for the whole block before the next):
 * sizes around and off the tile multiples, transposes, broadcast batches, and its PTX through ptxas. */
START_TEST(tiled_gemm_matches_ref)
{
    static const struct {
        int64_t m, k, n;
        int ta, tb;
    } g[] = {{16, 16, 16, 0, 0}, {17, 33, 31, 0, 1}, {40, 7, 16, 1, 0}, {64, 90, 50, 1, 1}, {31, 1, 47, 0, 0}};
    for (size_t c = 0; c < sizeof g / sizeof g[0]; c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "tiled", &mdl));
        if (g[c].ta) input("a", DIMS(g[c].k, g[c].m));
        else input("a", DIMS(g[c].m, g[c].k));
        if (g[c].tb) constant_rand("b", DIMS(g[c].n, g[c].k), 1.0f, 5);
        else input("b", DIMS(g[c].k, g[c].n));
        constant_rand("c", DIMS(g[c].n), 1.0f, 6);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transA", g[c].ta));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transB", g[c].tb));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
        layer("gemm", a, "y", NAMES("a", "b", "c"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "tiled gemm %lldx%lldx%lld ta%d tb%d", (long long)g[c].m, (long long)g[c].k,
                 (long long)g[c].n, g[c].ta, g[c].tb);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "y", "shared-memory tiles 16x16");
        pdc_program_destroy(p);
    }
    /* fc at batch 20 (tiled) and batch 3 (thread per output) */
    for (int n = 3; n <= 20; n += 17) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "fc", &mdl));
        input("x", DIMS(n, 75));
        constant_rand("w", DIMS(37, 75), 0.5f, 7);
        constant_rand("bias", DIMS(37), 0.5f, 8);
        layer("fc", NULL, "y", NAMES("x", "w", "bias"));
        output("y");
        pdc_program *p = check_matches_ref(n == 20 ? "tiled fc" : "small fc", 9);
        ck_assert_kernel(p, "y", n == 20 ? "shared-memory tiles" : "thread per output");
        pdc_program_destroy(p);
    }
    /* matmul with broadcast batch dims: a block per (batch, tile) */
    pdc_model_destroy(mdl);
    ck_assert_ok(ctx, pdc_model_create(ctx, "mm", &mdl));
    input("a", DIMS(2, 1, 37, 45));
    input("b", DIMS(3, 45, 33));
    layer("matmul", NULL, "y", NAMES("a", "b"));
    output("y");
    pdc_program *p = check_matches_ref("tiled matmul [2,1,37,45] x [3,45,33]", 10);
    ck_assert_kernel(p, "y", "shared-memory tiles");
    pdc_program_destroy(p);
    /* the PTX: shared arrays, bar.sync, accepted by ptxas */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/tiled-XXXXXX", cache_dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *ptx = emit_ptx("sm_80", dir);
    ck_assert_msg(strstr(ptx, ".shared .align 16 .b8 L0_matmul_smem0[1088]") != NULL, "no shared tile in the PTX");
    const char *bar = strstr(ptx, "bar");
    ck_assert_msg(bar != NULL && strstr(ptx, "bar.sync") != NULL, "no barrier in the PTX: %.60s", bar ? bar : "-");
    free(ptx);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    check_ptxas("tiled matmul");
}
END_TEST

START_TEST(rnn_random_matches_ref)
{
    /* LSTM and GRU: directions, initial states, optional outputs, linear_before_reset */
    rng = 31337u;
    for (int c = 0; c < sweep(12); c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "rnn", &mdl));
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
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", H));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", dirs[di]));
        if (!lstm) ck_assert_ok(ctx, pdc_attrs_set_int(a, "linear_before_reset", (c / 2) % 2));
        const char *outs[3] = {"y", "yh", "yc"};
        if (lstm)
            ck_assert_ok(ctx, pdc_model_add_layer(mdl, "rnn", "lstm", 7, (const char *const[]){"x", "w", "r", "b", "", "h0", "c0"},
                                                  3, outs, a));
        else
            ck_assert_ok(ctx, pdc_model_add_layer(mdl, "rnn", "gru", 6, (const char *const[]){"x", "w", "r", "b", "", "h0"},
                                                  2, outs, a));
        pdc_attrs_destroy(a);
        output("y");
        output("yh");
        if (lstm) output("yc");
        char what[128];
        snprintf(what, sizeof what, "%s T%lld B%lld I%lld H%lld %s %s %lldx%lld", lstm ? "lstm" : "gru", (long long)T,
                 (long long)B, (long long)I, (long long)H, dirs[di],
                 kind == 0 ? "dense" : kind == 1 ? "block" : "unstructured", (long long)bh, (long long)bw);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "rnn", "launches per step");
        pdc_program_destroy(p);
    }
}
END_TEST

/* ------------------------------------------------------------------ pooling */

START_TEST(pool_random_matches_ref)
{
    rng = 555u;
    for (int c = 0; c < sweep(24); c++) {
        pdc_model_destroy(mdl);
        ck_assert_ok(ctx, pdc_model_create(ctx, "pool", &mdl));
        int64_t k[2] = {rnd_in(1, 4), rnd_in(1, 4)}, st[2] = {rnd_in(1, 3), rnd_in(1, 3)}, dl[2], pads[4], in[2];
        for (int d = 0; d < 2; d++) {
            dl[d] = rnd() % 4 == 0 ? 2 : 1;
            pads[d] = rnd_in(0, k[d] - 1 < 2 ? k[d] - 1 : 2);
            pads[d + 2] = rnd_in(0, k[d] - 1 < 2 ? k[d] - 1 : 2);
            in[d] = rnd_in(dl[d] * (k[d] - 1) + 1, 20);
        }
        input("x", DIMS(rnd_in(1, 2), rnd_in(1, 5), in[0], in[1]));
        int is_max = rnd() % 2;
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", 2, k));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 2, st));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", 2, dl));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 4, pads));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "ceil_mode", rnd() % 2));
        if (!is_max) ck_assert_ok(ctx, pdc_attrs_set_int(a, "count_include_pad", rnd() % 2));
        layer(is_max ? "maxpool" : "avgpool", a, "y", NAMES("x"));
        layer("global_avgpool", NULL, "g", NAMES("y"));
        output("y");
        output("g");
        char what[128];
        snprintf(what, sizeof what, "%s k%lldx%lld s%lldx%lld d%lldx%lld in %lldx%lld", is_max ? "maxpool" : "avgpool",
                 (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)dl[0],
                 (long long)dl[1], (long long)in[0], (long long)in[1]);
        pdc_program *p = check_matches_ref(what, (uint32_t)c);
        ck_assert_kernel(p, "y", "ptx ");
        ck_assert_kernel(p, "g", "ptx global average pool");
        pdc_program_destroy(p);
    }
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
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &pc));
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


START_TEST(every_op_has_a_gpu_kernel)
{
    input("x", DIMS(1, 4, 5, 6));
    layer("softmax", NULL, "s", NAMES("x"));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "perm", DIMS(0, 2, 3, 1)));
    layer("transpose", a, "t", NAMES("s"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "axis", 1));
    layer("concat", a, "c", NAMES("t", "t"));
    layer("flatten", NULL, "f", NAMES("c"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "shape", DIMS(2, -1)));
    layer("reshape", a, "r", NAMES("f"));
    output("r");
    pdc_program *p = check_matches_ref("softmax/transpose/concat/flatten/reshape", 5);
    ck_assert_kernel(p, "s", "ptx softmax");
    ck_assert_kernel(p, "t", "ptx transpose");
    ck_assert_kernel(p, "c", "ptx concat");
    ck_assert_kernel(p, "r", "ptx copy");
    pdc_program_destroy(p);
}
END_TEST

/* ------------------------------------------------------------------ PTX through ptxas */

static const char *ptxas_path(void)
{
    const char *p = getenv("PDC_PTXAS");
    if (p && *p) return access(p, X_OK) == 0 ? p : NULL;
    return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : NULL;
}

/* pdc_model_emit "nvptx" for arch into a temp dir; returns the PTX text (malloc'd). */
static char *emit_ptx(const char *arch, const char *dir)
{
    pdc_attrs *o = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "arch", arch));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "name", "m"));
    ck_assert_ok(ctx, pdc_model_emit(ctx, mdl, "nvptx", o, dir));
    pdc_attrs_destroy(o);
    char path[512];
    snprintf(path, sizeof path, "%s/m.ptx", dir);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = calloc((size_t)n + 1, 1);
    ck_assert_int_eq(fread(t, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return t;
}

/* The current model's PTX for sm_80 and sm_90 passes ptxas for that arch. */
static void check_ptxas(const char *what)
{
    const char *ptxas = ptxas_path();
    static const char *const archs[] = {"sm_80", "sm_90"};
    for (int i = 0; i < 2; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/ptx-XXXXXX", cache_dir);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char *ptx = emit_ptx(archs[i], dir);
        char target[32];
        snprintf(target, sizeof target, ".target %s", archs[i]);
        ck_assert_msg(strstr(ptx, target) != NULL, "%s: PTX lacks %s", what, target);
        ck_assert_msg(strstr(ptx, ".visible .entry") != NULL, "%s: PTX has no kernel entry", what);
        free(ptx);
        if (ptxas) {
            char cmd[2048], out[512];
            snprintf(out, sizeof out, "%s/m.cubin", dir);
            snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s/m.ptx' -o '%s' 2>'%s/ptxas.log'", ptxas, archs[i], dir, out, dir);
            int rc = system(cmd);
            char log[2048] = "";
            snprintf(cmd, sizeof cmd, "%s/ptxas.log", dir);
            FILE *f = fopen(cmd, "r");
            if (f) {
                size_t n = fread(log, 1, sizeof log - 1, f);
                log[n] = 0;
                fclose(f);
            }
            ck_assert_msg(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s: ptxas -arch=%s rejected the PTX: %s",
                          what, archs[i], log);
        }
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

START_TEST(ptx_of_every_op_passes_ptxas)
{
    if (!ptxas_path()) fprintf(stderr, "test_gpu: ptxas not found (/usr/local/cuda/bin/ptxas, $PDC_PTXAS): PTX is "
                                       "generated and checked for .target, not assembled\n");
    /* one model with every op kind: pattern-sparse, dense, depthwise and 3-D conv, fc dense and
     * block-sparse, gemm, matmul, pools, batchnorm, activations, binaries, softmax, shapes, rnns */
    input("x", DIMS(1, 4, 8, 8));
    float w[8 * 4 * 9];
    int32_t kp[8 * 4];
    uint64_t pats[2] = {0x1b, 0x1b0};
    test_fill_random(w, 8 * 4 * 9, 3);
    for (int k = 0; k < 32; k++) {
        kp[k] = k % 5 == 0 ? -1 : k % 2;
        for (int t = 0; t < 9; t++)
            if (kp[k] < 0 || !(pats[kp[k]] >> t & 1)) w[k * 9 + t] = 0.0f;
    }
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "wp", DIMS(8, 4, 3, 3), w));
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(mdl, "wp", 3, 3, 2, pats, 32, kp));
    pdc_attrs *a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", DIMS(1, 1, 1, 1)));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    layer("conv", a, "c1", NAMES("x", "wp"));
    constant_rand("wd", DIMS(8, 1, 3, 3), 0.5f, 4);
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 8));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", DIMS(2, 2)));
    layer("conv", a, "c2", NAMES("c1", "wd"));
    constant_rand("s", DIMS(8), 0.5f, 5);
    constant_rand("bb", DIMS(8), 0.5f, 6);
    constant_rand("mu", DIMS(8), 0.1f, 7);
    float var[8] = {1, 2, 1, 0.5f, 1, 1, 3, 1};
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "var", DIMS(8), var));
    layer("batchnorm", NULL, "bn", NAMES("c2", "s", "bb", "mu", "var"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", DIMS(2, 2)));
    layer("maxpool", a, "mp", NAMES("bn"));
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", DIMS(2, 2)));
    layer("avgpool", a, "ap", NAMES("bn"));
    layer("add", NULL, "ad", NAMES("mp", "ap"));
    layer("sigmoid", NULL, "sg", NAMES("ad"));
    layer("tanh", NULL, "th", NAMES("sg"));
    layer("global_avgpool", NULL, "gp", NAMES("th"));
    layer("flatten", NULL, "fl", NAMES("gp"));
    constant_pruned("wf", DIMS(12, 8), 1, 4, 4, 50, 8);
    layer("fc", NULL, "fc", NAMES("fl", "wf"));
    layer("softmax", NULL, "sm", NAMES("fc"));
    output("sm");
    /* a 3-D conv and an lstm, a gru and a matmul on a second input */
    input("v", DIMS(1, 2, 3, 4, 5));
    constant_rand("w3", DIMS(3, 2, 2, 2, 2), 0.5f, 9);
    layer("conv", NULL, "c3", NAMES("v", "w3"));
    output("c3");
    input("seq", DIMS(3, 1, 5));
    constant_rand("lw", DIMS(1, 16, 5), 0.5f, 10);
    constant_rand("lr", DIMS(1, 16, 4), 0.5f, 11);
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", 4));
    layer("lstm", a, "ls", NAMES("seq", "lw", "lr"));
    output("ls");
    constant_rand("gw", DIMS(1, 12, 5), 0.5f, 12);
    constant_rand("grr", DIMS(1, 12, 4), 0.5f, 13);
    a = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "hidden_size", 4));
    layer("gru", a, "gr", NAMES("seq", "gw", "grr"));
    output("gr");
    constant_rand("mm", DIMS(5, 3), 0.5f, 14);
    layer("matmul", NULL, "mt", NAMES("seq", "mm"));
    layer("hardswish", NULL, "hs", NAMES("mt"));
    output("hs");
    check_ptxas("every op");
    pdc_program_destroy(check_matches_ref("every op", 21));
}
END_TEST

START_TEST(ptx_of_onnx_models_passes_ptxas)
{
    static const char *const names[] = {"resnet_small", "mobilenetv2_small", "vgg_small", "pattern_cnn", "lstm",
                                        "gru", "block_fc", "softmax_v11"};
    int found = 0;
    for (size_t q = 0; q < sizeof names / sizeof names[0]; q++) {
        char file[256];
        snprintf(file, sizeof file, "onnx/%s.onnx", names[q]);
        if (access(test_data_path(file), R_OK) != 0) continue;
        found = 1;
        pdc_model_destroy(mdl);
        mdl = NULL;
        ck_assert_ok(ctx, pdc_model_load(ctx, test_data_path(file), &mdl));
        check_ptxas(names[q]);
    }
    if (!found) fprintf(stderr, "test_gpu: no ONNX test models under %s, skipped\n", test_data_path("onnx"));
}
END_TEST

/* ------------------------------------------------------------------ driver loading and options */

static void small_model(void)
{
    input("x", DIMS(2, 3));
    layer("relu", NULL, "y", NAMES("x"));
    output("y");
}

START_TEST(missing_driver_library_is_no_device)
{
    if (getenv("PDC_TEST_GPU")) return; /* the real device is wanted in that mode */
    small_model();
    unsetenv("PDC_GPU_EMULATE");
    setenv("PDC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "/nonexistent/libcuda.so.1");
    ck_assert_error_has(ctx, "NVIDIA driver");
    ck_assert_ptr_null(p);
    /* the cpu target is unaffected */
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &p));
    pdc_program_destroy(p);
}
END_TEST

START_TEST(stub_driver_is_no_device)
{
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (getenv("PDC_TEST_GPU")) return;
    if (access(stub, R_OK) != 0) {
        fprintf(stderr, "test_gpu: %s absent, stub-driver test skipped\n", stub);
        return;
    }
    /* the stub exports every symbol pdc resolves (a missing one would fail before cuInit) */
    void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen %s: %s", stub, dlerror());
    size_t n = 0;
    for (; cuda_api_symbols[n]; n++)
        ck_assert_msg(dlsym(h, cuda_api_symbols[n]) != NULL, "the stub lacks %s", cuda_api_symbols[n]);
    ck_assert_uint_eq(n, 20);
    dlclose(h);
    ck_assert_msg(dlopen(stub, RTLD_NOW | RTLD_NOLOAD) == NULL, "the stub is still loaded before the test");

    small_model();
    unsetenv("PDC_GPU_EMULATE");
    setenv("PDC_CUDA_LIBRARY", stub, 1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "cuInit failed with CUDA_ERROR_STUB_LIBRARY (34)");
    ck_assert_error_has(ctx, "stub library");
    ck_assert_ptr_null(p);
    /* the failed cuInit left no handle: the library is unloaded again */
    h = dlopen(stub, RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h);
    ck_assert_msg(h == NULL, "the stub library stayed loaded after the failed cuInit");
    /* twice: nothing stays half-loaded, the load is retried and fails the same way */
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "CUDA_ERROR_STUB_LIBRARY");
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &p));
    pdc_program_destroy(p);
}
END_TEST

/* The PTX ISA LLVM emits per arch, and the driver each needs (README "GPU backend": minimum driver). */
START_TEST(ptx_isa_and_minimum_driver)
{
    static const struct {
        const char *arch, *isa;
        int driver;
    } want[] = {{"sm_75", "6.3", 10000}, {"sm_80", "7.0", 11000}, {"sm_86", "7.1", 11010},
                {"sm_89", "7.8", 11080}, {"sm_90", "7.8", 11080}};
    small_model();
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/isa-XXXXXX", cache_dir);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char *ptx = emit_ptx(want[i].arch, dir);
        char line[64];
        snprintf(line, sizeof line, ".version %s\n.target %s\n.address_size 64", want[i].isa, want[i].arch);
        ck_assert_msg(strstr(ptx, line) != NULL, "%s: expected '%s' in the PTX header", want[i].arch, line);
        /* 64-bit index arithmetic: the global index is widened before the multiply-add */
        ck_assert_msg(strstr(ptx, "mul.wide.u32") != NULL || strstr(ptx, "mad.wide.u32") != NULL,
                      "%s: no 64-bit index arithmetic", want[i].arch);
        free(ptx);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        ck_assert_int_eq(cuda_driver_for_ptx_isa(want[i].isa), want[i].driver);
    }
    ck_assert_int_eq(cuda_driver_for_ptx_isa("8.5"), 12050);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("8.6"), 12070);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("9.0"), 13000);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("x"), 0);
    char buf[96];
    ck_assert_str_eq(cuda_error_text(NULL, 222, buf, sizeof buf), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)");
    ck_assert_str_eq(cuda_error_text(NULL, 9999, buf, sizeof buf), "CUDA error (9999)");
}
END_TEST

START_TEST(gpu_arch_option)
{
    char buf[32];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "auto");
    static const char *const bad[] = {"sm_70", "sm_95", "", "SM_80", "sm_80 ", "compute_80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_status(ctx, pdc_context_set_option(ctx, "gpu_arch", bad[i]), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "sm_75, sm_80, sm_86, sm_89, sm_90");
    }
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "auto");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "gpu_arch", "sm_90"));
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "sm_90");
    if (!getenv("PDC_TEST_GPU")) {
        /* an explicit arch is used as given: on the emulated device sm_90 compiles and runs */
        small_model();
        pdc_program_destroy(check_matches_ref("relu for sm_90", 2));
    }
}
END_TEST

START_TEST(nvptx_emit_files)
{
    small_model();
    char dir[300];
    snprintf(dir, sizeof dir, "%s/emit-XXXXXX", cache_dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *ptx = emit_ptx("sm_90", dir);
    ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90"));
    ck_assert_ptr_nonnull(strstr(ptx, ".entry L0_relu"));
    free(ptx);
    char path[512];
    snprintf(path, sizeof path, "%s/m.launch.txt", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    ck_assert_msg(strstr(text, "launch L0_relu 1 256 0 y: x -> y") != NULL, "launch list: %s", text);
    /* a bad arch is refused with the list, nothing written */
    pdc_attrs *o = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "arch", "sm_95"));
    char dir2[320];
    snprintf(dir2, sizeof dir2, "%s/bad", dir);
    ck_assert_status(ctx, pdc_model_emit(ctx, mdl, "nvptx", o, dir2), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "sm_90");
    ck_assert_int_ne(access(dir2, F_OK), 0);
    pdc_attrs_destroy(o);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

/* A program compiled on this thread runs on others (each run makes the device context current on
 * its own thread: on a real GPU, make test-gpu, this is what it checks). */
typedef struct thread_run {
    pdc_program *prog;
    pdc_tensor *x, *y;
    pdc_status st;
} thread_run;

static void *run_in_thread(void *arg)
{
    thread_run *t = arg;
    t->st = pdc_program_run(t->prog, 1, &t->x, 1, &t->y);
    return NULL;
}

START_TEST(run_from_other_threads)
{
    input("x", DIMS(2, 40));
    constant_rand("w", DIMS(24, 40), 0.5f, 3);
    layer("fc", NULL, "h", NAMES("x", "w"));
    layer("relu", NULL, "y", NAMES("h"));
    output("y");
    pdc_program *pr = NULL, *pg = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &pg));
    thread_run t[3];
    pdc_tensor *want = NULL;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 24), &want));
    for (int i = 0; i < 3; i++) {
        t[i].prog = pg;
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 40), &t[i].x));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 24), &t[i].y));
        test_fill_random(pdc_tensor_data(t[i].x), 80, 100u + (uint32_t)i);
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, run_in_thread, &t[i]), 0);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(t[i].st == PDC_OK, "run on thread %d: %s", i, pdc_context_last_error(ctx));
        ck_assert_ok(ctx, pdc_program_run(pr, 1, &t[i].x, 1, &want));
        assert_close(pdc_tensor_data(t[i].y), pdc_tensor_data(want), 48, "run on another thread");
        pdc_tensor_destroy(t[i].x);
        pdc_tensor_destroy(t[i].y);
    }
    pdc_tensor_destroy(want);
    pdc_program_destroy(pg); /* destroyed on this thread, after runs on others */
    pdc_program_destroy(pr);
}
END_TEST

START_TEST(failed_run_leaves_outputs)
{
    /* shape errors are caught before the device is touched; the output keeps its bytes */
    small_model();
    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &p));
    pdc_tensor *x = NULL, *y = NULL;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 4), &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 3), &y));
    float *yd = pdc_tensor_data(y);
    for (int i = 0; i < 6; i++) yd[i] = 42.0f;
    ck_assert_status(ctx, pdc_program_run(p, 1, &x, 1, &y), PDC_ERR_SHAPE);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(yd[i], 42.0f);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
}
END_TEST

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("eltwise");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, unary_ops_match_ref, 0, 6);
    tcase_add_test(tc, binary_broadcast_matches_ref);
    tcase_add_test(tc, constant_operand);
    tcase_add_test(tc, same_input_twice);
    tcase_add_test(tc, batchnorm_matches_ref);
    suite_add_tcase(s, tc);

    tc = tcase_create("conv");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, conv_random_matches_ref, SP_DENSE, SP_UNSTRUCTURED + 1);
    tcase_add_test(tc, conv_vgg_like_pattern_layer);
    tcase_add_test(tc, tiled_conv_matches_ref);
    tcase_add_test(tc, demo_model_matches_ref);
    tcase_add_test(tc, onnx_test_models_match_ref);
    suite_add_tcase(s, tc);

    tc = tcase_create("gemm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, fc_random_matches_ref, 0, 3);
    tcase_add_test(tc, gemm_random_matches_ref);
    tcase_add_test(tc, matmul_broadcast_matches_ref);
    tcase_add_test(tc, tiled_gemm_matches_ref);
    tcase_add_test(tc, rnn_random_matches_ref);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pool_random_matches_ref);
    suite_add_tcase(s, tc);

    tc = tcase_create("ptx");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, ptx_of_every_op_passes_ptxas);
    tcase_add_test(tc, ptx_of_onnx_models_passes_ptxas);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, layer_kernel_api);
    tcase_add_test(tc, every_op_has_a_gpu_kernel);
    tcase_add_test(tc, missing_driver_library_is_no_device);
    tcase_add_test(tc, stub_driver_is_no_device);
    tcase_add_test(tc, ptx_isa_and_minimum_driver);
    tcase_add_test(tc, gpu_arch_option);
    tcase_add_test(tc, nvptx_emit_files);
    tcase_add_test(tc, failed_run_leaves_outputs);
    tcase_add_test(tc, run_from_other_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    snprintf(cache_dir, sizeof cache_dir, "%s/pdc-test-gpu-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    /* (a) runs on the emulated device unless make test-gpu asks for the real one */
    real_gpu = getenv("PDC_TEST_GPU") && strcmp(getenv("PDC_TEST_GPU"), "0");
    if (real_gpu) unsetenv("PDC_GPU_EMULATE");
    else {
        unsetenv("PDC_TEST_GPU");
        setenv("PDC_GPU_EMULATE", "1", 1);
    }
    int rc = test_run_suite(gpu_suite());
    nftw(cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
