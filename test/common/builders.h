/*
 * builders.h - what the suites share (test/passes, test/train, test/api, test/reliability; and, through
 * internals.h, test/ir, test/format, test/onnx):
 *  - a suite's main in one call: one tcase, its fixture and timeout, its tests as a TEST_LIST,
 *  - fixtures: one context, ctx, per test (ctx_setup); with a fresh folder, tmpdir, for suites that
 *    write files (tmpdir_setup; tmp_path names a file in it),
 *  - whole files written and compared (test_read_file, in testutil.h, reads them),
 *  - models built through the public builder, tensors named in comma-separated lists ("x,w,b"),
 *  - runs on the reference target with pseudo-random inputs, and two models' outputs compared.
 * All of that uses the public API only: test_api (linked against libpdc.so alone) includes it too.
 * A suite that includes ir/ir.h before this header also gets the IR accessors (clone, tensor,
 * layer_named, weight_of); one that includes passes/passes.h, the models the pass suites start from
 * (conv_model, canon_model) and the pattern-sparsity check; one that includes lib/train/train.h,
 * the trainer suites' helpers (their toy problem, all_weights, assert_pruned_zero, ...).
 * Everything is static inline: an includer uses what it needs.
 */
#ifndef PDC_TEST_BUILDERS_H
#define PDC_TEST_BUILDERS_H

#include <stdint.h>

#include "test/common/testutil.h"

/* ------------------------------------------------------------------ suites */

/* A suite's main: suite `name` of one tcase "core" with the fixture, a timeout in seconds (0: Check's
 * default) and the tests of a TEST_LIST; the exit status says whether all passed. */
static inline int run_tests(const char *name, SFun setup, SFun teardown, double timeout, const TTest *const *tests)
{
    Suite *s = suite_create(name);
    test_add_tcase(s, "core", setup, teardown, timeout, tests);
    return test_run_suite(s);
}

/* ------------------------------------------------------------------ fixtures and files */

static pdc_context *ctx;
static char tmpdir[256];

static inline void ctx_setup(void) { ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK); }

static inline void ctx_teardown(void)
{
    pdc_context_destroy(ctx);
    ctx = NULL;
}

/* A context and a fresh folder, tmpdir, removed with everything in it afterwards. */
static inline void tmpdir_setup(void)
{
    ctx_setup();
    ck_assert_ptr_nonnull(test_make_temp_dir(tmpdir, sizeof tmpdir, "suite"));
}

static inline void tmpdir_teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    ctx_teardown();
}

/* Context option `name` reads `want`. */
static inline void assert_context_option(const char *name, const char *want)
{
    char buf[64];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, name, buf, sizeof buf));
    ck_assert_str_eq(buf, want);
}

/* tmpdir/name; the last four names stay valid. */
static inline const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int at;
    at = (at + 1) % 4;
    snprintf(buf[at], sizeof buf[at], "%s/%s", tmpdir, name);
    return buf[at];
}

static inline void write_file(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* 1 if both files exist and hold the same bytes. */
static inline int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* What a failed call must leave in an out-parameter: this, untouched. */
#define SENTINEL_PTR ((void *)(uintptr_t)0x5a5a5a5a)

/* ------------------------------------------------------------------ building models */

static inline pdc_model *new_model(const char *name)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, name, &m));
    return m;
}

static inline pdc_model *parse_model(const char *text)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m));
    return m;
}

static inline void add_input(pdc_model *m, const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(m, name, rank, dims));
}

static inline void add_values(pdc_model *m, const char *name, size_t rank, const int64_t *dims, const float *v)
{
    ck_assert_ok(ctx, pdc_model_add_constant(m, name, rank, dims, v));
}

/* A constant of random values in [lo, hi). */
static inline void add_random(pdc_model *m, const char *name, size_t rank, const int64_t *dims, uint32_t seed,
                              float lo, float hi)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    test_fill_random(v, n, seed);
    for (size_t i = 0; i < n; i++) v[i] = lo + (v[i] + 1.0f) * 0.5f * (hi - lo);
    add_values(m, name, rank, dims, v);
    free(v);
}

/* Adds a layer; ins and outs are comma-separated tensor names ("-" = absent). attrs may be NULL and
 * is destroyed. */
static inline void add_layer(pdc_model *m, const char *name, const char *op, const char *ins, const char *outs,
                             pdc_attrs *attrs)
{
    char buf[2][512];
    const char *in[16], *out[4];
    size_t n_in = 0, n_out = 0;
    snprintf(buf[0], sizeof buf[0], "%s", ins);
    snprintf(buf[1], sizeof buf[1], "%s", outs);
    for (char *s = strtok(buf[0], ","); s; s = strtok(NULL, ",")) in[n_in++] = strcmp(s, "-") ? s : NULL;
    for (char *s = strtok(buf[1], ","); s; s = strtok(NULL, ",")) out[n_out++] = strcmp(s, "-") ? s : NULL;
    ck_assert_ok(ctx, pdc_model_add_layer(m, name, op, n_in, in, n_out, out, attrs));
    pdc_attrs_destroy(attrs);
}

static inline void add_output(pdc_model *m, const char *name) { ck_assert_ok(ctx, pdc_model_mark_output(m, name)); }

static inline pdc_attrs *attrs_new(void)
{
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

/* Attribute sets of one attribute. */
static inline pdc_attrs *opt_s(const char *name, const char *value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, name, value));
    return a;
}

static inline pdc_attrs *opt_i(const char *name, int64_t value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, name, value));
    return a;
}

static inline pdc_attrs *opt_f(const char *name, float value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, name, value));
    return a;
}

static inline pdc_attrs *opt_ints(const char *name, size_t n, const int64_t *v)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, name, n, v));
    return a;
}

/* pads = [p, p, p, p] */
static inline pdc_attrs *pads(int64_t p) { return opt_ints("pads", 4, (const int64_t[]){p, p, p, p}); }

/* x [1,16,16,16] -> c1 (3x3, pads 1; the stem) -> r1 (relu: c1's epilogue) -> c2 (3x3 stride 2, relu)
 * -> flatten -> fc [10, 2048]: the latency model's small case (test_cost checks its facts by hand). */
static inline pdc_model *small_conv_fc_model(void)
{
    pdc_model *m = new_model("small");
    add_input(m, "x", 4, (const int64_t[]){1, 16, 16, 16});
    add_random(m, "w1", 4, (const int64_t[]){16, 16, 3, 3}, 1, -0.5f, 0.5f);
    add_random(m, "b1", 1, (const int64_t[]){16}, 2, -0.1f, 0.1f);
    add_random(m, "w2", 4, (const int64_t[]){32, 16, 3, 3}, 3, -0.5f, 0.5f);
    add_random(m, "b2", 1, (const int64_t[]){32}, 4, -0.1f, 0.1f);
    add_random(m, "w3", 2, (const int64_t[]){10, 2048}, 5, -0.1f, 0.1f);
    add_random(m, "b3", 1, (const int64_t[]){10}, 6, -0.1f, 0.1f);
    add_layer(m, "c1", "conv", "x,w1,b1", "y1", pads(1));
    add_layer(m, "r1", "relu", "y1", "y2", NULL);
    pdc_attrs *a = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){2, 2}));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    add_layer(m, "c2", "conv", "y2,w2,b2", "y3", a);
    add_layer(m, "flat", "flatten", "y3", "f", NULL);
    add_layer(m, "fc", "fc", "f,w3,b3", "out", NULL);
    add_output(m, "out");
    return m;
}

/* The full IR text (weights included); pdc_string_free it. */
static inline char *model_text(const pdc_model *m)
{
    char *t;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &t));
    return t;
}

/* m prints as `before` did: a failed call changed nothing. */
static inline void assert_unchanged(const pdc_model *m, const char *before)
{
    char *now = model_text(m);
    ck_assert_msg(!strcmp(now, before), "the model changed after a failed call");
    pdc_string_free(now);
}

/* pdc_model_transform, destroying opt. */
static inline pdc_status transform(pdc_model *m, const char *pipeline, pdc_attrs *opt)
{
    pdc_status st = pdc_model_transform(m, pipeline, opt);
    pdc_attrs_destroy(opt);
    return st;
}

/* ------------------------------------------------------------------ running */

/* A tensor shaped as input (output = 0) or output (1) i of p, made in context c. */
static inline pdc_tensor *io_tensor(pdc_context *c, const pdc_program *p, int output, size_t i)
{
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_tensor *t;
    ck_assert_ok(c, (output ? pdc_program_output_info : pdc_program_input_info)(p, i, NULL, &rank, dims));
    ck_assert_ok(c, pdc_tensor_create(c, rank, dims, &t));
    return t;
}

/* m's first output, run once on target from its first input filled from seed (malloc'd, *n values). */
static inline float *run_first_output(const pdc_model *m, const char *target, uint32_t seed, size_t *n)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, target, &p));
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out = io_tensor(ctx, p, 1, 0);
    test_fill_random(pdc_tensor_data(in), pdc_tensor_size(in), seed);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &in, 1, &out));
    *n = pdc_tensor_size(out);
    float *y = malloc(*n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    memcpy(y, pdc_tensor_data(out), *n * sizeof *y);
    pdc_tensor_destroy(in);
    pdc_tensor_destroy(out);
    pdc_program_destroy(p);
    return y;
}

/* Runs m's first input to its first output on the cpu target at `threads` threads, three times, each run
 * bit for bit the first (the later ones on the cached workspace); returns the output (malloc'd, *n
 * values). chains > 0: layer `layer`'s kernel must say it is one of that many chains of its step. */
static inline float *run_cpu_thrice(const pdc_model *m, const char *threads, const char *layer, int chains, size_t *n)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", threads));
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
    if (chains) { /* the layer found by name through the public ABI (test_api includes this too) */
        const char *name, *kernel = NULL;
        char want[32];
        snprintf(want, sizeof want, "of %d in its step", chains);
        size_t nl;
        ck_assert_ok(ctx, pdc_model_num_layers(m, &nl));
        for (size_t i = 0; i < nl && !kernel; i++) {
            const char *k;
            ck_assert_ok(ctx, pdc_program_layer_kernel(p, i, &name, &k));
            if (!strcmp(name, layer)) kernel = k;
        }
        ck_assert_msg(kernel && strstr(kernel, want), "%s runs as %s", layer, kernel ? kernel : "(no such layer)");
    }
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out = io_tensor(ctx, p, 1, 0);
    test_fill_random(pdc_tensor_data(in), pdc_tensor_size(in), 9);
    float *y = NULL;
    for (int rep = 0; rep < 3; rep++) {
        ck_assert_ok(ctx, pdc_program_run(p, 1, &in, 1, &out));
        *n = pdc_tensor_size(out);
        if (!y) {
            y = malloc(*n * sizeof *y);
            ck_assert_ptr_nonnull(y);
            memcpy(y, pdc_tensor_data(out), *n * sizeof *y);
        } else {
            ck_assert(!memcmp(y, pdc_tensor_data(out), *n * sizeof *y));
        }
    }
    pdc_tensor_destroy(in);
    pdc_tensor_destroy(out);
    pdc_program_destroy(p);
    return y;
}

/* Runs m on the reference target with random inputs (input i from seed * 31 + i); returns all outputs
 * concatenated (malloc'd), their count in *n_total. */
static inline float *run_ref(const pdc_model *m, uint32_t seed, size_t *n_total)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    size_t ni, no;
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    pdc_tensor *in[8], *out[8];
    ck_assert_uint_le(ni, 8);
    ck_assert_uint_le(no, 8);
    size_t total = 0;
    for (size_t i = 0; i < ni; i++) {
        in[i] = io_tensor(ctx, p, 0, i);
        test_fill_random(pdc_tensor_data(in[i]), pdc_tensor_size(in[i]), seed * 31u + (uint32_t)i);
    }
    for (size_t i = 0; i < no; i++) total += pdc_tensor_size(out[i] = io_tensor(ctx, p, 1, i));
    ck_assert_ok(ctx, pdc_program_run(p, ni, in, no, out));
    float *y = malloc(total * sizeof *y), *at = y;
    for (size_t i = 0; i < no; i++) {
        memcpy(at, pdc_tensor_data(out[i]), pdc_tensor_size(out[i]) * sizeof *y);
        at += pdc_tensor_size(out[i]);
        pdc_tensor_destroy(out[i]);
    }
    for (size_t i = 0; i < ni; i++) pdc_tensor_destroy(in[i]);
    pdc_program_destroy(p);
    *n_total = total;
    return y;
}

/* Reference outputs of a and b agree on three random inputs (relative tolerance tol). */
static inline void assert_same_outputs(const pdc_model *a, const pdc_model *b, float tol)
{
    for (uint32_t seed = 1; seed <= 3; seed++) {
        size_t na, nb;
        float *ya = run_ref(a, seed, &na), *yb = run_ref(b, seed, &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert_floats_near(yb, ya, na, tol);
        free(ya);
        free(yb);
    }
}

/* ------------------------------------------------------------------ the IR (after ir/ir.h) */

#ifdef PDC_IR_H

static inline pdc_model *clone(const pdc_model *m)
{
    ir_model *c;
    ck_assert_ok(ctx, ir_model_clone(m, &c));
    return c;
}

static inline const ir_tensor *tensor(const pdc_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    ck_assert_msg(t >= 0, "no tensor '%s'", name);
    return &m->tensors[t];
}

static inline const ir_layer *layer_named(const pdc_model *m, const char *name)
{
    int l = ir_model_find_layer(m, name);
    ck_assert_msg(l >= 0, "no layer '%s'", name);
    return &m->layers[l];
}

/* The weight (input 1) of layer `name`. */
static inline const ir_tensor *weight_of(const pdc_model *m, const char *name)
{
    const ir_layer *l = layer_named(m, name);
    return &m->tensors[l->inputs[1]];
}

#endif /* PDC_IR_H */

/* ------------------------------------------------------------------ pass suites (after passes/passes.h) */

#ifdef PDC_PASSES_PASSES_H

static inline int popcount64(uint64_t v) { return __builtin_popcountll(v); }

/* Every kernel of w is on a pattern of its set (zero outside it) or removed (all zero); the set has
 * exactly k distinct patterns of n entries, each containing the centre. */
static inline void check_pattern_weight(const ir_tensor *w, size_t k, size_t n)
{
    const ir_sparsity *s = &w->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(s->n_patterns, k);
    unsigned centre = (unsigned)((w->dims[2] / 2) * w->dims[3] + w->dims[3] / 2);
    size_t win = (size_t)(w->dims[2] * w->dims[3]);
    for (size_t i = 0; i < k; i++) {
        ck_assert_int_eq(popcount64(s->patterns[i]), (int)n);
        ck_assert_msg(s->patterns[i] >> centre & 1u, "pattern %zu lacks the centre", i);
        for (size_t j = 0; j < i; j++) ck_assert_msg(s->patterns[i] != s->patterns[j], "pattern %zu repeats", i);
    }
    ck_assert_uint_eq(s->n_kernels, (size_t)(w->dims[0] * w->dims[1]));
    for (size_t kk = 0; kk < s->n_kernels; kk++) {
        int32_t p = s->kernel_pattern[kk];
        uint64_t keep = p >= 0 ? s->patterns[p] : 0;
        for (size_t q = 0; q < win; q++)
            if (!(keep >> q & 1u))
                ck_assert_msg(w->data[kk * win + q] == 0.0f, "kernel %zu: weight at %zu not pruned", kk, q);
    }
}

/* x[1,4,6,6] -> conv3x3 a (4->6, bias) -> relu -> conv3x3 b (6->8) -> conv5x5 c (8->5, pad 2)
 *  -> conv1x1 d (5->4) -> flatten -> fc (144->10) -> y. Convs a, b, c are pattern-eligible. */
static inline pdc_model *conv_model(void)
{
    pdc_model *m = new_model("convs");
    add_input(m, "x", 4, (int64_t[]){1, 4, 6, 6});
    add_random(m, "wa", 4, (int64_t[]){6, 4, 3, 3}, 11, -1, 1);
    add_random(m, "ba", 1, (int64_t[]){6}, 12, -0.1f, 0.1f);
    add_random(m, "wb", 4, (int64_t[]){8, 6, 3, 3}, 13, -1, 1);
    add_random(m, "wc", 4, (int64_t[]){5, 8, 5, 5}, 14, -1, 1);
    add_random(m, "wd", 4, (int64_t[]){4, 5, 1, 1}, 15, -1, 1);
    add_random(m, "fw", 2, (int64_t[]){10, 144}, 16, -0.2f, 0.2f);
    add_random(m, "fb", 1, (int64_t[]){10}, 17, -0.1f, 0.1f);
    add_layer(m, "a", "conv", "x,wa,ba", "ya", pads(1));
    add_layer(m, "ra", "relu", "ya", "za", NULL);
    add_layer(m, "b", "conv", "za,wb", "yb", pads(1));
    add_layer(m, "c", "conv", "yb,wc", "yc", pads(2));
    add_layer(m, "d", "conv", "yc,wd", "yd", NULL);
    add_layer(m, "flat", "flatten", "yd", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw,fb", "y", NULL);
    add_output(m, "y");
    return m;
}

/* x[2,3,8,8] through conv/bn/relu, conv/add/clip, an identity reshape, conv/leaky_relu, conv/tanh,
 * flatten, fc/bn/hardswish, an identity transpose, gemm + (const * const) / sigmoid; plus a dead
 * maxpool and an unused constant. */
static inline pdc_model *canon_model(void)
{
    pdc_model *m = new_model("canon");
    add_input(m, "x", 4, (int64_t[]){2, 3, 8, 8});
    add_random(m, "w1", 4, (int64_t[]){8, 3, 3, 3}, 31, -0.5f, 0.5f);
    add_random(m, "b1", 1, (int64_t[]){8}, 32, -0.1f, 0.1f);
    add_random(m, "s1", 1, (int64_t[]){8}, 33, 0.5f, 1.5f);
    add_random(m, "t1", 1, (int64_t[]){8}, 34, -0.2f, 0.2f);
    add_random(m, "m1", 1, (int64_t[]){8}, 35, -0.2f, 0.2f);
    add_random(m, "v1", 1, (int64_t[]){8}, 36, 0.5f, 1.5f);
    add_random(m, "w2", 4, (int64_t[]){16, 8, 3, 3}, 37, -0.3f, 0.3f);
    add_random(m, "cb2", 4, (int64_t[]){1, 16, 1, 1}, 38, -0.2f, 0.2f);
    add_random(m, "w3", 4, (int64_t[]){8, 16, 1, 1}, 39, -0.3f, 0.3f);
    add_random(m, "b3", 1, (int64_t[]){8}, 40, -0.1f, 0.1f);
    add_random(m, "w4", 4, (int64_t[]){4, 8, 5, 5}, 41, -0.2f, 0.2f);
    add_random(m, "fw", 2, (int64_t[]){10, 256}, 42, -0.1f, 0.1f);
    add_random(m, "fb", 1, (int64_t[]){10}, 43, -0.1f, 0.1f);
    add_random(m, "s5", 1, (int64_t[]){10}, 44, 0.5f, 1.5f);
    add_random(m, "t5", 1, (int64_t[]){10}, 45, -0.2f, 0.2f);
    add_random(m, "m5", 1, (int64_t[]){10}, 46, -0.2f, 0.2f);
    add_random(m, "v5", 1, (int64_t[]){10}, 47, 0.5f, 1.5f);
    add_random(m, "gw", 2, (int64_t[]){10, 6}, 48, -0.5f, 0.5f);
    add_random(m, "k1", 1, (int64_t[]){6}, 49, -1, 1);
    add_random(m, "k2", 1, (int64_t[]){6}, 50, -1, 1);
    add_random(m, "junk", 1, (int64_t[]){5}, 51, -1, 1);
    add_layer(m, "conv1", "conv", "x,w1,b1", "c1", pads(1));
    add_layer(m, "bn1", "batchnorm", "c1,s1,t1,m1,v1", "n1", NULL);
    add_layer(m, "relu1", "relu", "n1", "r1", NULL);
    add_layer(m, "dead_pool", "maxpool", "r1", "dp", opt_ints("kernel_shape", 2, (int64_t[]){2, 2}));
    add_layer(m, "conv2", "conv", "r1,w2", "c2", pads(1));
    add_layer(m, "add2", "add", "cb2,c2", "a2", NULL);
    pdc_attrs *cl = opt_f("min", 0.0f);
    ck_assert_ok(ctx, pdc_attrs_set_float(cl, "max", 0.5f));
    add_layer(m, "clip2", "clip", "a2", "k2o", cl);
    add_layer(m, "same_shape", "reshape", "k2o", "id2", opt_ints("shape", 4, (int64_t[]){2, 16, 8, 8}));
    add_layer(m, "conv3", "conv", "id2,w3,b3", "c3", NULL);
    add_layer(m, "leaky3", "leaky_relu", "c3", "l3", opt_f("alpha", 0.2f));
    add_layer(m, "conv4", "conv", "l3,w4", "c4", pads(2));
    add_layer(m, "tanh4", "tanh", "c4", "t4", NULL);
    add_layer(m, "flat", "flatten", "t4", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw,fb", "g", NULL);
    add_layer(m, "bn5", "batchnorm", "g,s5,t5,m5,v5", "n5", NULL);
    add_layer(m, "hs5", "hardswish", "n5", "h5", NULL);
    add_layer(m, "same_order", "transpose", "h5", "th", opt_ints("perm", 2, (int64_t[]){0, 1}));
    pdc_attrs *ga = opt_f("alpha", 0.5f);
    ck_assert_ok(ctx, pdc_attrs_set_float(ga, "beta", 3.0f));
    add_layer(m, "gemm", "gemm", "th,gw", "gm", ga);
    add_layer(m, "kmul", "mul", "k1,k2", "kc", NULL);
    add_layer(m, "gadd", "add", "gm,kc", "ga", NULL);
    add_layer(m, "sig", "sigmoid", "ga", "y", NULL);
    add_output(m, "y");
    return m;
}

/* Options that let the pruning passes take every layer they can: the stem, every kernel size, 1x1 convs. */
static inline pdc_attrs *opt_everything(void)
{
    pdc_attrs *a = opt_i("include_stem", 1);
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "pattern_kernels", "all"));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "block_convs", 1));
    return a;
}

#endif /* PDC_PASSES_PASSES_H */

/* ------------------------------------------------------------------ training (after lib/train/train.h) */

#ifdef PDC_LIB_TRAIN_H

#define HDR "pdcir 1\nmodel \"g\"\n"

/* x[2,3,5,5] -> conv 3x3 pad 1 + bias -> y: the first per-op gradient case, and a model of another
 * structure than the toy CNN's. */
#define CONV3X3_IR                                                                                            \
    HDR "input x : f32[2,3,5,5]\nconst w : f32[4,3,3,3] = dense<elided>\n"                                    \
        "const b : f32[4] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1,1,1]}\noutput y\n"

/* Fills every constant of m with deterministic values in [-scale, scale) (batchnorm var: positive). */
static inline void fill_constants(pdc_model *m, uint32_t seed, float scale)
{
    for (size_t t = 0; t < m->n_tensors; t++) {
        ir_tensor *tt = &m->tensors[t];
        if (tt->kind != IR_TENSOR_CONST) continue;
        const size_t n = ir_tensor_numel(tt);
        test_fill_random(tt->data, n, seed + (uint32_t)t);
        for (size_t i = 0; i < n; i++) tt->data[i] *= scale;
        if (strstr(tt->name, "var"))
            for (size_t i = 0; i < n; i++) tt->data[i] = 1.0f + fabsf(tt->data[i]);
    }
}

static inline pdc_trainer *trainer_for(pdc_model *m, const char *loss)
{
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "loss", loss));
    return t;
}

/* Trainer option `name` reads `want`. */
static inline void assert_trainer_option(const pdc_trainer *t, const char *name, const char *want)
{
    char buf[64];
    ck_assert_ok(ctx, pdc_trainer_get_option(t, name, buf, sizeof buf));
    ck_assert_str_eq(buf, want);
}

/* A tiny separable problem: 4 classes of 2x4x4 images, class c brightest in quadrant c. */
typedef struct toy {
    size_t n;
    float *x, *y;
} toy;

static inline toy make_toy(size_t n, uint32_t seed)
{
    toy d = {n, malloc(n * 32 * sizeof(float)), malloc(n * sizeof(float))};
    ck_assert_ptr_nonnull(d.x);
    ck_assert_ptr_nonnull(d.y);
    test_fill_random(d.x, n * 32, seed);
    for (size_t i = 0; i < n; i++) {
        const size_t c = (i * 5 + seed) % 4;
        d.y[i] = (float)c;
        for (size_t ch = 0; ch < 2; ch++)
            for (size_t r = 0; r < 2; r++)
                for (size_t q = 0; q < 2; q++)
                    d.x[i * 32 + ch * 16 + ((c / 2) * 2 + r) * 4 + (c % 2) * 2 + q] += 1.5f;
    }
    return d;
}

static inline void free_toy(toy *d)
{
    free(d->x);
    free(d->y);
}

static const char toy_cnn[] =
    HDR "input x : f32[1,2,4,4]\n"
    "const c1w : f32[8,2,3,3] = dense<elided>\nconst c1b : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst c2b : f32[8] = dense<elided>\n"
    "const fw : f32[4,128] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1]}\nlayer r1 = relu(a) -> (b)\n"
    "layer conv2 = conv(b, c2w, c2b) -> (c) {pads=[1,1,1,1]}\nlayer r2 = relu(c) -> (d)\n"
    "layer flat = flatten(d) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

/* Sets options given as name, value, ..., NULL (opts may be NULL). */
static inline void set_trainer_options(pdc_trainer *t, const char *const *opts)
{
    for (size_t i = 0; opts && opts[i]; i += 2) ck_assert_ok(ctx, pdc_trainer_set_option(t, opts[i], opts[i + 1]));
}

/* A trainer of toy_cnn: batch 8, seed 42, lr 0.01, then opts; weights initialised. */
static inline pdc_trainer *toy_trainer(const char *const *opts)
{
    pdc_model *m = parse_model(toy_cnn);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    set_trainer_options(t, (const char *const[]){"batch", "8", "seed", "42", "lr", "0.01", NULL});
    set_trainer_options(t, opts);
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    return t;
}

/* Runs `epochs` epochs of shuffled batches of 8 (the last one partial). */
static inline void train_toy(pdc_trainer *t, const toy *d, int epochs, float *last_loss)
{
    size_t *perm = malloc(d->n * sizeof *perm);
    float bx[8 * 32], by[8];
    ck_assert_ptr_nonnull(perm);
    for (int e = 0; e < epochs; e++) {
        ck_assert_ok(ctx, pdc_trainer_shuffle(t, d->n, perm));
        for (size_t at = 0; at < d->n; at += 8) {
            const size_t nb = d->n - at < 8 ? d->n - at : 8;
            for (size_t i = 0; i < nb; i++) {
                memcpy(bx + i * 32, d->x + perm[at + i] * 32, 32 * sizeof(float));
                by[i] = d->y[perm[at + i]];
            }
            const int64_t xd[4] = {(int64_t)nb, 2, 4, 4}, yd[1] = {(int64_t)nb};
            pdc_tensor *x, *y;
            ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, bx, &x));
            ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, by, &y));
            ck_assert_ok(ctx, pdc_trainer_step(t, x, y, last_loss));
            pdc_tensor_destroy(x);
            pdc_tensor_destroy(y);
        }
    }
    free(perm);
}

static inline float toy_accuracy(pdc_trainer *t, const toy *d)
{
    const int64_t xd[4] = {(int64_t)d->n, 2, 4, 4}, yd[1] = {(int64_t)d->n};
    pdc_tensor *x, *y;
    float loss, acc;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, d->x, &x));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, d->y, &y));
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, x, y, &loss, &acc));
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    return acc;
}

/* Every weight of a trainer, in order, into one array (caller frees). */
static inline float *all_weights(const pdc_trainer *t, size_t *n_out)
{
    size_t nw, total = 0;
    ck_assert_ok(ctx, pdc_trainer_num_weights(t, &nw));
    for (size_t i = 0; i < nw; i++) total += t->net->params[i].n;
    float *w = malloc(total * sizeof *w), *at = w;
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < nw; i++) {
        const char *name;
        ck_assert_ok(ctx, pdc_trainer_weight_info(t, i, &name, NULL, NULL, NULL, NULL));
        ck_assert_ok(ctx, pdc_trainer_get_weights(t, name, at, t->net->params[i].n));
        at += t->net->params[i].n;
    }
    *n_out = total;
    return w;
}

/* a and b hold as many weights, bit for bit the same. */
static inline int same_weights(const pdc_trainer *a, const pdc_trainer *b)
{
    size_t na, nb;
    float *wa = all_weights(a, &na), *wb = all_weights(b, &nb);
    const int same = na == nb && memcmp(wa, wb, na * sizeof *wa) == 0;
    free(wa);
    free(wb);
    return same;
}

/* got holds as many weights as want, within tol of them (ck_assert_floats_near). */
static inline void assert_weights_near(const pdc_trainer *got, const pdc_trainer *want, float tol)
{
    size_t ng, nw;
    float *wg = all_weights(got, &ng), *ww = all_weights(want, &nw);
    ck_assert_uint_eq(ng, nw);
    ck_assert_floats_near(wg, ww, ng, tol);
    free(wg);
    free(ww);
}

/* Every pruned weight is 0, and so is its optimizer state. */
static inline void assert_pruned_zero(const pdc_trainer *t)
{
    const tr_net *net = t->net;
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->mask) continue;
        const float *w = net->model->tensors[p->tensor].data;
        for (size_t k = 0; k < p->n; k++) {
            if (p->mask[k]) continue;
            ck_assert_msg(w[k] == 0.0f && (!p->m || p->m[k] == 0.0f) && (!p->v || p->v[k] == 0.0f),
                          "%s[%zu] is pruned but weight %g, state %g %g", net->model->tensors[p->tensor].name, k,
                          (double)w[k], p->m ? (double)p->m[k] : 0.0, p->v ? (double)p->v[k] : 0.0);
        }
    }
}

/* Patterns 4x4 and connectivity 0.5 on conv1 and conv2, blocks 1x4 at 0.75 on the fc if with_fc. */
static inline pdc_attrs *prune_options(int with_fc)
{
    pdc_attrs *a = opt_i("patterns", 4);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "pattern_size", 4));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "connectivity", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "block", "1x4:0.75"));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "layers", with_fc ? "conv1,conv2,fc" : "conv1,conv2"));
    return a;
}

#endif /* PDC_LIB_TRAIN_H */

#endif
