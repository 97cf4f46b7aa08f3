/*
 * test_passes.c - the pass manager and the passes (passes/), checked by their properties: pattern
 * sets and projections against brute force, exact connectivity/block/unstructured counts, the
 * documented tie-breaks on constructed ties, unchanged outputs after canonicalize and reorder (the
 * reference backend before and after, random inputs), a verified IR after every pass, memory plans,
 * byte-identical results, and a status and message for every kind of bad input.
 */
#include <unistd.h>

#include "test/common/testutil.h"

#include "ir/arena.h"
#include "ir/ir.h"
#include "ir/ops/params.h"
#include "passes/pass_manager.h"
#include "passes/project.h"

static pdc_context *ctx;

static void setup(void) { ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK); }
static void teardown(void) { pdc_context_destroy(ctx); }

/* ------------------------------------------------------------------ building models */

static void add_input(pdc_model *m, const char *name, size_t rank, const int64_t *dims)
{
    ck_assert_ok(ctx, pdc_model_add_input(m, name, rank, dims));
}

static size_t numel(size_t rank, const int64_t *dims)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

/* A constant of random values in [lo, hi). */
static void add_random(pdc_model *m, const char *name, size_t rank, const int64_t *dims, uint32_t seed, float lo,
                       float hi)
{
    size_t n = numel(rank, dims);
    float *v = malloc(n * sizeof *v);
    test_fill_random(v, n, seed);
    for (size_t i = 0; i < n; i++) v[i] = lo + (v[i] + 1.0f) * 0.5f * (hi - lo);
    ck_assert_ok(ctx, pdc_model_add_constant(m, name, rank, dims, v));
    free(v);
}

static void add_values(pdc_model *m, const char *name, size_t rank, const int64_t *dims, const float *v)
{
    ck_assert_ok(ctx, pdc_model_add_constant(m, name, rank, dims, v));
}

/* Adds a layer; ins and outs are comma-separated tensor names ("-" = absent). attrs may be NULL and
 * is destroyed. */
static void add_layer(pdc_model *m, const char *name, const char *op, const char *ins, const char *outs,
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

static pdc_attrs *attrs_new(void)
{
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    return a;
}

static pdc_attrs *opt_s(const char *name, const char *value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, name, value));
    return a;
}

static pdc_attrs *opt_i(const char *name, int64_t value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, name, value));
    return a;
}

static pdc_attrs *opt_f(const char *name, float value)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, name, value));
    return a;
}

static pdc_attrs *pads(int64_t p)
{
    pdc_attrs *a = attrs_new();
    int64_t v[4] = {p, p, p, p};
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 4, v));
    return a;
}

static pdc_model *new_model(const char *name)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, name, &m));
    return m;
}

/* x[1,4,6,6] -> conv3x3 a (4->6, bias) -> relu -> conv3x3 b (6->8) -> conv5x5 c (8->5, pad 2)
 *  -> conv1x1 d (5->4) -> flatten -> fc (144->10) -> y. Convs a, b, c are pattern-eligible. */
static pdc_model *conv_model(void)
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
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    return m;
}

/* ------------------------------------------------------------------ running */

/* Runs m on the reference target with random inputs (seed); returns all outputs concatenated. */
static float *run_ref(const pdc_model *m, uint32_t seed, size_t *n_total)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    size_t ni, no;
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    pdc_tensor *in[8], *out[8];
    ck_assert_uint_le(ni, 8);
    ck_assert_uint_le(no, 8);
    for (size_t i = 0; i < ni; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_input_info(p, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &in[i]));
        test_fill_random(pdc_tensor_data(in[i]), pdc_tensor_size(in[i]), seed * 31u + (uint32_t)i);
    }
    size_t total = 0;
    for (size_t i = 0; i < no; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_output_info(p, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &out[i]));
        total += pdc_tensor_size(out[i]);
    }
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
static void assert_same_outputs(const pdc_model *a, const pdc_model *b, float tol)
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

static pdc_model *clone(const pdc_model *m)
{
    ir_model *c;
    ck_assert_ok(ctx, ir_model_clone(m, &c));
    return c;
}

/* The full IR text (weights included), to check that a model did not change. */
static char *text_of(const pdc_model *m)
{
    char *t;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &t));
    return t;
}

static void assert_unchanged(const pdc_model *m, const char *before)
{
    char *now = text_of(m);
    ck_assert_msg(!strcmp(now, before), "the model changed after a failed call");
    pdc_string_free(now);
}

static pdc_status transform(pdc_model *m, const char *pipeline, pdc_attrs *opt)
{
    pdc_status st = pdc_model_transform(m, pipeline, opt);
    pdc_attrs_destroy(opt);
    return st;
}

static const ir_tensor *tensor(const pdc_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    ck_assert_msg(t >= 0, "no tensor '%s'", name);
    return &m->tensors[t];
}

static const ir_layer *layer_named(const pdc_model *m, const char *name)
{
    int l = ir_model_find_layer(m, name);
    ck_assert_msg(l >= 0, "no layer '%s'", name);
    return &m->layers[l];
}

/* The weight (input 1) of layer `name`. */
static const ir_tensor *weight_of(const pdc_model *m, const char *name)
{
    const ir_layer *l = layer_named(m, name);
    return &m->tensors[l->inputs[1]];
}

static int popcount64(uint64_t v) { return __builtin_popcountll(v); }

/* ------------------------------------------------------------------ pattern properties */

/* Every kernel of w is on a pattern of its set (zero outside it) or removed (all zero); the set has
 * exactly k distinct patterns of n entries, each containing the centre. */
static void check_pattern_weight(const ir_tensor *w, size_t k, size_t n)
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
            if (!(keep >> q & 1u)) ck_assert_msg(w->data[kk * win + q] == 0.0f, "kernel %zu: weight at %zu not pruned", kk, q);
    }
}

/* Options that let the pruning passes take every layer they can: the stem, every kernel size, 1x1 convs. */
static pdc_attrs *opt_everything(void)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "include_stem", 1));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "pattern_kernels", "all"));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "block_convs", 1));
    return a;
}

START_TEST(prune_pattern_properties)
{
    pdc_model *m = conv_model(), *before = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-pattern", opt_everything()));
    check_pattern_weight(weight_of(m, "a"), 8, 4);
    check_pattern_weight(weight_of(m, "b"), 8, 4);
    check_pattern_weight(weight_of(m, "c"), 8, 4);
    /* 1x1 conv and fc are not pattern-eligible: untouched */
    ck_assert_int_eq(weight_of(m, "d")->sparsity.kind, IR_SPARSITY_NONE);
    ck_assert_int_eq(weight_of(m, "fc")->sparsity.kind, IR_SPARSITY_NONE);
    for (size_t k = 0; k < weight_of(m, "b")->sparsity.n_kernels; k++)
        ck_assert_int_ge(weight_of(m, "b")->sparsity.kernel_pattern[k], 0);
    /* other options */
    pdc_model *m2 = clone(before);
    pdc_attrs *o = opt_everything();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "patterns", 3));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "pattern_size", "6")); /* numbers may come as strings */
    ck_assert_ok(ctx, transform(m2, "prune-pattern", o));
    check_pattern_weight(weight_of(m2, "a"), 3, 6);
    check_pattern_weight(weight_of(m2, "c"), 3, 6);
    pdc_model_destroy(m2);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

/* Independent natural pattern: positions other than the centre by |w| descending, ties by position. */
static uint64_t brute_natural(const float *k, unsigned win, unsigned centre, unsigned n)
{
    unsigned order[64], cnt = 0;
    for (unsigned p = 0; p < win; p++)
        if (p != centre) order[cnt++] = p;
    for (unsigned i = 1; i < cnt; i++) /* insertion sort: stable */
        for (unsigned j = i; j > 0 && fabsf(k[order[j]]) > fabsf(k[order[j - 1]]); j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    uint64_t mask = UINT64_C(1) << centre;
    for (unsigned i = 0; i + 1 < n; i++) mask |= UINT64_C(1) << order[i];
    return mask;
}

static double norm_on(const float *k, unsigned win, uint64_t mask)
{
    double s = 0;
    for (unsigned p = 0; p < win; p++)
        if (mask >> p & 1u) s += (double)k[p] * k[p];
    return s;
}

/* Brute force over a 3x3 layer: the set and every kernel's projection. */
static void brute_force_check(int64_t o, int64_t c, size_t k, unsigned n, uint32_t seed)
{
    const unsigned win = 9, centre = 4;
    size_t kernels = (size_t)(o * c), total = kernels * win;
    float *w = malloc(total * sizeof *w), *orig = malloc(total * sizeof *w);
    test_fill_random(orig, total, seed);
    /* quantise so that equal magnitudes and equal counts actually happen */
    for (size_t i = 0; i < total; i++) orig[i] = (float)((int)(orig[i] * 4.0f)) / 4.0f;
    memcpy(w, orig, total * sizeof *w);
    uint64_t *pat = calloc(k, sizeof *pat);
    int32_t *kp = calloc(kernels, sizeof *kp);
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, w, o, c, 3, 3, k, n, 0, pat, kp));

    /* expected set: by count (desc), then mask (asc), then padding with the smallest unused masks */
    size_t count[512] = {0};
    for (size_t kk = 0; kk < kernels; kk++) count[brute_natural(orig + kk * win, win, centre, n)]++;
    uint64_t want[64];
    size_t have = 0;
    int used[512] = {0};
    while (have < k) {
        int best = -1;
        for (int mask = 0; mask < 512; mask++)
            if (!used[mask] && count[mask] && (best < 0 || count[mask] > count[best])) best = mask;
        if (best < 0) break;
        used[best] = 1;
        want[have++] = (uint64_t)best;
    }
    for (int mask = 0; mask < 512 && have < k; mask++)
        if (!used[mask] && popcount64((uint64_t)mask) == (int)n && (mask >> centre & 1)) want[have++] = (uint64_t)mask;
    for (size_t i = 0; i < k; i++) ck_assert_msg(pat[i] == want[i], "pattern %zu: got 0x%llx, want 0x%llx", i,
                                                 (unsigned long long)pat[i], (unsigned long long)want[i]);
    /* every kernel: the first pattern of the set with the largest kept norm, weights masked */
    for (size_t kk = 0; kk < kernels; kk++) {
        const float *ko = orig + kk * win;
        size_t best = 0;
        for (size_t i = 1; i < k; i++)
            if (norm_on(ko, win, pat[i]) > norm_on(ko, win, pat[best])) best = i;
        ck_assert_int_eq(kp[kk], (int32_t)best);
        for (unsigned q = 0; q < win; q++)
            ck_assert(w[kk * win + q] == ((pat[best] >> q & 1u) ? ko[q] : 0.0f));
    }

    /* With the set = all C(8, n-1) patterns, the projection is the global optimum (brute force). */
    uint64_t all[128];
    size_t n_all = 0;
    for (int mask = 0; mask < 512; mask++)
        if (popcount64((uint64_t)mask) == (int)n && (mask >> centre & 1)) all[n_all++] = (uint64_t)mask;
    ck_assert_uint_eq(n_all, (size_t)project_binomial(8, n - 1));
    memcpy(w, orig, total * sizeof *w);
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, w, o, c, 3, 3, n_all, 0, PDC_PROJECT_GIVEN_PATTERNS, all, kp));
    for (size_t kk = 0; kk < kernels; kk++) {
        double got = norm_on(orig + kk * win, win, all[kp[kk]]), best = 0;
        for (size_t i = 0; i < n_all; i++) {
            double v = norm_on(orig + kk * win, win, all[i]);
            if (v > best) best = v;
        }
        ck_assert(got == best);
    }
    free(w);
    free(orig);
    free(pat);
    free(kp);
}

START_TEST(pattern_projection_matches_brute_force)
{
    brute_force_check(6, 5, 8, 4, 1);
    brute_force_check(4, 3, 4, 3, 2);
    brute_force_check(3, 2, 8, 2, 3);   /* 8 = C(8,1): every pattern of 2 entries */
    brute_force_check(2, 2, 20, 5, 4);  /* more patterns than kernels: padding */
    brute_force_check(5, 5, 1, 9, 5);   /* the full window */
    brute_force_check(5, 5, 1, 1, 6);   /* the centre alone */
}
END_TEST

START_TEST(pattern_tie_breaks)
{
    uint64_t pat[4];
    int32_t kp[4];
    /* natural pattern: equal magnitudes -> lower positions: centre 4 + 0, 1, 2 */
    float k1[9] = {1, -1, 1, 1, 1, -1, 1, 1, 1};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, k1, 1, 1, 3, 3, 1, 4, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x17);
    ck_assert_int_eq(kp[0], 0);
    float k1b[9] = {2, 0, 0, 0, 0, 0, 0, 0, -2};   /* |w[0]| == |w[8]|: position 0 wins */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, k1b, 1, 1, 3, 3, 1, 2, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x11);
    ck_assert(k1b[8] == 0.0f && k1b[0] == 2.0f);

    /* pattern set: equal counts -> smaller bitmask first; higher count first */
    float two[2 * 9] = {5, 5, 0, 0, 0, 0, 0, 0, 0, /* natural {0,1,4} = 0x13 */
                        0, 0, 0, 0, 0, 0, 0, 5, 5}; /* natural {4,7,8} = 0x190 */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, two, 2, 1, 3, 3, 2, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x13);
    ck_assert_uint_eq(pat[1], 0x190);
    float three[3 * 9] = {5, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 0, 0, 0, 0, 0, 0, 0, 6, 6};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, three, 3, 1, 3, 3, 2, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_uint_eq(pat[1], 0x13);
    ck_assert_int_eq(kp[0], 1);
    ck_assert_int_eq(kp[1], 0);

    /* padding: the smallest unused masks of 3 entries containing the centre: 0x13, 0x15 */
    float one[9] = {0, 0, 0, 0, 1, 0, 0, 7, 7};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, one, 1, 1, 3, 3, 3, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_uint_eq(pat[1], 0x13);
    ck_assert_uint_eq(pat[2], 0x15);
    float one_b[9] = {9, 9, 0, 0, 1, 0, 0, 0, 0}; /* natural 0x13 first, then padding skips it */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, one_b, 1, 1, 3, 3, 3, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x13);
    ck_assert_uint_eq(pat[1], 0x15);
    ck_assert_uint_eq(pat[2], 0x16);

    /* projection: equal kept norms -> the earlier pattern of the set */
    float tie[9] = {0, 1, 1, 0, 1, 0, 0, 0, 0};
    uint64_t given[2] = {0x13, 0x15}; /* {0,1,4} and {0,2,4} both keep 2 */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, tie, 1, 1, 3, 3, 2, 0, PDC_PROJECT_GIVEN_PATTERNS, given, kp));
    ck_assert_int_eq(kp[0], 0);
    ck_assert(tie[1] == 1.0f && tie[2] == 0.0f);
    float tie2[9] = {0, 1, 1, 0, 1, 0, 0, 0, 0};
    uint64_t given2[2] = {0x15, 0x13};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, tie2, 1, 1, 3, 3, 2, 0, PDC_PROJECT_GIVEN_PATTERNS, given2, kp));
    ck_assert_int_eq(kp[0], 0);
    ck_assert(tie2[1] == 0.0f && tie2[2] == 1.0f);

    /* KEEP_PRUNED: a kernel at -1 stays removed and does not vote */
    float kept[2 * 9] = {0, 0, 0, 0, 1, 0, 0, 7, 7, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    int32_t kin[2] = {0, -1};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, kept, 2, 1, 3, 3, 1, 3, PDC_PROJECT_KEEP_PRUNED, pat, kin));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_int_eq(kin[1], -1);
    for (int i = 9; i < 18; i++) ck_assert(kept[i] == 0.0f);
}
END_TEST

/* ------------------------------------------------------------------ connectivity, block, unstructured */

static double kernel_norm(const float *w, size_t win) { return norm_on(w, (unsigned)win, ~UINT64_C(0)); }

START_TEST(connectivity_rate_is_exact)
{
    pdc_model *m = conv_model();
    pdc_attrs *o = opt_everything();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "connectivity", "0.5, b = 0.7,c=0.3"));
    ck_assert_ok(ctx, transform(m, "prune-pattern,prune-connectivity", o));
    struct { const char *layer; size_t removed; } want[] = {{"a", 12}, {"b", 33}, {"c", 12}}; /* floor(.5*24), floor(.7*48), floor(.3*40) */
    for (size_t i = 0; i < 3; i++) {
        const ir_tensor *w = weight_of(m, want[i].layer);
        check_pattern_weight(w, 8, 4);
        size_t removed = 0, win = (size_t)(w->dims[2] * w->dims[3]);
        double max_removed = 0, min_kept = INFINITY;
        for (size_t k = 0; k < w->sparsity.n_kernels; k++) {
            if (w->sparsity.kernel_pattern[k] < 0) removed++;
            double nk = kernel_norm(w->data + k * win, win);
            if (w->sparsity.kernel_pattern[k] >= 0 && nk < min_kept) min_kept = nk;
        }
        ck_assert_uint_eq(removed, want[i].removed);
        (void)max_removed;
        ck_assert(min_kept > 0);
    }
    pdc_model_destroy(m);

    /* the smallest norms (after pattern projection) go, lower index first on equal norms */
    float w[6] = {3, 1, -1, 2, 1, 5};
    uint8_t keep[6];
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, w, 2, 3, 1, 0.5, keep));
    uint8_t want_keep[6] = {1, 0, 0, 1, 0, 1};
    ck_assert_mem_eq(keep, want_keep, 6);
    ck_assert(w[1] == 0 && w[2] == 0 && w[4] == 0 && w[0] == 3 && w[3] == 2 && w[5] == 5);
    float eq[6] = {1, -1, 1, 1, -1, 1};
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, eq, 3, 2, 1, 0.7, keep)); /* floor(4.2) = 4 */
    uint8_t want_eq[6] = {0, 0, 0, 0, 1, 1};
    ck_assert_mem_eq(keep, want_eq, 6);
    /* projecting again changes nothing (removed kernels are the zero ones) */
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, eq, 3, 2, 1, 0.7, keep));
    ck_assert_mem_eq(keep, want_eq, 6);
    /* rate 0 keeps all */
    float z[4] = {1, 2, 3, 4};
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, z, 1, 4, 1, 0.0, keep));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(keep[i], 1);
}
END_TEST

START_TEST(connectivity_on_dense_conv_and_removed_norms_are_smallest)
{
    pdc_model *m = conv_model();
    pdc_model *ref = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-connectivity", NULL));
    const ir_tensor *w = weight_of(m, "b"), *w0 = weight_of(ref, "b");
    ck_assert_int_eq(w->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(w->sparsity.n_patterns, 1);
    ck_assert_uint_eq(w->sparsity.patterns[0], 0x1ff);
    size_t win = 9, removed = 0;
    double max_removed = -1, min_kept = INFINITY;
    for (size_t k = 0; k < w->sparsity.n_kernels; k++) {
        double nk = kernel_norm(w0->data + k * win, win);
        if (w->sparsity.kernel_pattern[k] < 0) {
            removed++;
            if (nk > max_removed) max_removed = nk;
        } else {
            if (nk < min_kept) min_kept = nk;
            ck_assert_mem_eq(w->data + k * win, w0->data + k * win, win * sizeof(float));
        }
    }
    ck_assert_uint_eq(removed, 24);
    ck_assert(max_removed <= min_kept);
    pdc_model_destroy(ref);
    pdc_model_destroy(m);
}
END_TEST

/* A model for block pruning: fc, matmul with a constant [K,N], gemm transB=1, 1x1 conv, lstm. */
static pdc_model *block_model(void)
{
    pdc_model *m = new_model("blocks");
    add_input(m, "x", 2, (int64_t[]){2, 18});
    add_random(m, "fw", 2, (int64_t[]){10, 18}, 21, -1, 1);
    add_random(m, "mb", 2, (int64_t[]){10, 7}, 22, -1, 1);   /* matmul [in 10, out 7] */
    add_random(m, "gb", 2, (int64_t[]){9, 7}, 23, -1, 1);    /* gemm transB=1 [out 9, in 7] */
    add_random(m, "cw", 4, (int64_t[]){6, 9, 1, 1}, 24, -1, 1);
    add_random(m, "lw", 3, (int64_t[]){1, 16, 6}, 25, -1, 1);
    add_random(m, "lr", 3, (int64_t[]){1, 16, 4}, 26, -1, 1);
    add_layer(m, "fc", "fc", "x,fw", "h1", NULL);
    add_layer(m, "mm", "matmul", "h1,mb", "h2", NULL);
    pdc_attrs *ga = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(ga, "transB", 1));
    add_layer(m, "gemm", "gemm", "h2,gb", "h3", ga);
    pdc_attrs *rs = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(rs, "shape", 4, (int64_t[]){2, 9, 1, 1}));
    add_layer(m, "r", "reshape", "h3", "h4", rs);
    add_layer(m, "pw", "conv", "h4,cw", "h5", NULL);
    pdc_attrs *rs2 = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(rs2, "shape", 3, (int64_t[]){2, 1, 6}));
    add_layer(m, "r2", "reshape", "h5", "h6", rs2);
    pdc_attrs *la = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(la, "hidden_size", 4));
    add_layer(m, "lstm", "lstm", "h6,lw,lr", "y", la);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    return m;
}

/* Whole blocks: every element of a removed block is zero; floor(rate x blocks) removed; the removed
 * blocks have the smallest norms of the [out, in] matrix `orig` (rows x cols). */
static void check_blocks(const float *now, const float *orig, int64_t rows, int64_t cols, int64_t bh, int64_t bw,
                         const uint8_t *keep, size_t want_removed)
{
    size_t nbc = (size_t)((cols + bw - 1) / bw), nb = (size_t)((rows + bh - 1) / bh) * nbc, removed = 0;
    double max_removed = -1, min_kept = INFINITY;
    for (size_t b = 0; b < nb; b++) {
        double s = 0;
        int64_t r0 = (int64_t)(b / nbc) * bh, c0 = (int64_t)(b % nbc) * bw;
        for (int64_t r = r0; r < r0 + bh && r < rows; r++)
            for (int64_t c = c0; c < c0 + bw && c < cols; c++) {
                s += (double)orig[r * cols + c] * orig[r * cols + c];
                ck_assert(now[r * cols + c] == (keep[b] ? orig[r * cols + c] : 0.0f));
            }
        if (!keep[b]) {
            removed++;
            if (s > max_removed) max_removed = s;
        } else if (s < min_kept) {
            min_kept = s;
        }
    }
    ck_assert_uint_eq(removed, want_removed);
    ck_assert(max_removed <= min_kept);
}

START_TEST(block_masks_are_whole_blocks)
{
    pdc_model *m = block_model(), *orig = clone(m);
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.8"));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "block_convs", 1)); /* the 1x1 conv too */
    ck_assert_ok(ctx, transform(m, "prune-block", o));
    /* fc [10, 18] in 1x4 blocks: 10 x 5 = 50 blocks, 40 removed */
    const ir_tensor *fw = tensor(m, "fw");
    ck_assert_int_eq(fw->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(fw->sparsity.bh, 1);
    ck_assert_int_eq(fw->sparsity.bw, 4);
    check_blocks(fw->data, tensor(orig, "fw")->data, 10, 18, 1, 4, fw->sparsity.block_mask, 40);
    /* gemm transB=1 [9, 7]: 9 x 2 = 18 blocks, floor(14.4) = 14 removed */
    const ir_tensor *gb = tensor(m, "gb");
    check_blocks(gb->data, tensor(orig, "gb")->data, 9, 7, 1, 4, gb->sparsity.block_mask, 14);
    /* 1x1 conv [6, 9]: 6 x 3 = 18 blocks */
    const ir_tensor *cw = tensor(m, "cw");
    check_blocks(cw->data, tensor(orig, "cw")->data, 6, 9, 1, 4, cw->sparsity.block_mask, 14);
    /* lstm gates: w [16, 6] -> 16 x 2 blocks, r [16, 4] -> 16 x 1 */
    check_blocks(tensor(m, "lw")->data, tensor(orig, "lw")->data, 16, 6, 1, 4, tensor(m, "lw")->sparsity.block_mask, 25);
    check_blocks(tensor(m, "lr")->data, tensor(orig, "lr")->data, 16, 4, 1, 4, tensor(m, "lr")->sparsity.block_mask, 12);
    /* matmul b [10 in, 7 out]: chosen on the [7, 10] transpose in 1x4 blocks (7 x 3 = 21, 16 removed);
     * the IR describes the stored [10, 7] layout in 4x1 blocks */
    const ir_tensor *mb = tensor(m, "mb"), *mb0 = tensor(orig, "mb");
    ck_assert_int_eq(mb->sparsity.bh, 4);
    ck_assert_int_eq(mb->sparsity.bw, 1);
    float tn[70], to[70];
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 7; j++) tn[j * 10 + i] = mb->data[i * 7 + j], to[j * 10 + i] = mb0->data[i * 7 + j];
    uint8_t keep_t[21];
    for (int bj = 0; bj < 7; bj++)   /* [out,in] block (bj, bi) = stored block (bi, bj) */
        for (int bi = 0; bi < 3; bi++) keep_t[bj * 3 + bi] = mb->sparsity.block_mask[bi * 7 + bj];
    check_blocks(tn, to, 7, 10, 1, 4, keep_t, 16);
    /* the public projection on the transpose gives the same */
    uint8_t keep_p[21];
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, to, 7, 10, 1, 4, 0.8, keep_p));
    ck_assert_mem_eq(keep_p, keep_t, 21);
    ck_assert_mem_eq(to, tn, sizeof tn);
    pdc_model_destroy(orig);
    pdc_model_destroy(m);

    /* ties: equal block norms -> the lower block index goes first */
    float a[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.5f, 0, 0, 0, 0, -1};
    uint8_t keep[4];
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, a, 2, 8, 1, 4, 0.5, keep));
    uint8_t want[4] = {0, 1, 0, 1};
    ck_assert_mem_eq(keep, want, 4);
    /* 2x2 blocks over a 3x3 matrix: partial edge blocks count */
    float b[9] = {1, 1, 9, 1, 1, 9, 9, 9, 9};
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, b, 3, 3, 2, 2, 0.25, keep));
    uint8_t want_b[4] = {0, 1, 1, 1};
    ck_assert_mem_eq(keep, want_b, 4);
}
END_TEST

START_TEST(unstructured_removes_the_smallest)
{
    pdc_model *m = block_model(), *orig = clone(m);
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "unstructured_rate", 0.75f));
    ck_assert_ok(ctx, transform(m, "prune-unstructured", o));
    const char *names[] = {"fw", "mb", "gb", "cw", "lw", "lr"};
    for (size_t i = 0; i < 6; i++) {
        const ir_tensor *t = tensor(m, names[i]), *t0 = tensor(orig, names[i]);
        size_t n = ir_tensor_numel(t), removed = 0;
        ck_assert_int_eq(t->sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
        float max_removed = -1, min_kept = INFINITY;
        for (size_t k = 0; k < n; k++) {
            if (!t->sparsity.mask[k]) {
                removed++;
                ck_assert(t->data[k] == 0.0f);
                max_removed = fmaxf(max_removed, fabsf(t0->data[k]));
            } else {
                min_kept = fminf(min_kept, fabsf(t0->data[k]));
            }
        }
        ck_assert_uint_eq(removed, (size_t)floor(0.75f * (double)n));
        ck_assert(max_removed <= min_kept);
    }
    pdc_model_destroy(orig);
    pdc_model_destroy(m);
    float w[5] = {-2, 1, -1, 3, 1};
    uint8_t keep[5];
    ck_assert_ok(ctx, pdc_prune_project_unstructured(ctx, w, 5, 0.5, keep)); /* floor(2.5) = 2: indices 1, 2 */
    uint8_t want[5] = {1, 0, 0, 1, 1};
    ck_assert_mem_eq(keep, want, 5);
}
END_TEST

/* ------------------------------------------------------------------ safe defaults */

/* x[1,3,12,12] -> sub (mean) -> mul (scale) -> conv7x7 stem (3->8, pad 3) -> relu r0 -> conv3x3 b (pad 1)
 *   and r0 -> conv1x1 down; b + down -> conv5x5 c (8->4, pad 2) -> flatten -> fc (576->10) -> y.
 * Also x -> conv3x3 side (3->4, pad 1) -> ys: a second stem, reading the graph input directly. */
static pdc_model *stem_model(void)
{
    pdc_model *m = new_model("stems");
    add_input(m, "x", 4, (int64_t[]){1, 3, 12, 12});
    add_values(m, "mean", 4, (int64_t[]){1, 3, 1, 1}, (float[]){0.485f, 0.456f, 0.406f});
    add_values(m, "scale", 4, (int64_t[]){1, 3, 1, 1}, (float[]){4.37f, 4.46f, 4.44f});
    add_random(m, "ws", 4, (int64_t[]){8, 3, 7, 7}, 81, -1, 1);
    add_random(m, "wb", 4, (int64_t[]){8, 8, 3, 3}, 82, -1, 1);
    add_random(m, "wd", 4, (int64_t[]){8, 8, 1, 1}, 83, -1, 1);
    add_random(m, "wc", 4, (int64_t[]){4, 8, 5, 5}, 84, -1, 1);
    add_random(m, "fw", 2, (int64_t[]){10, 576}, 85, -0.1f, 0.1f);
    add_random(m, "wside", 4, (int64_t[]){4, 3, 3, 3}, 86, -1, 1);
    add_layer(m, "norm_sub", "sub", "x,mean", "xs", NULL);
    add_layer(m, "norm_mul", "mul", "xs,scale", "xn", NULL);
    add_layer(m, "stem", "conv", "xn,ws", "s", pads(3));
    add_layer(m, "r0", "relu", "s", "r", NULL);
    add_layer(m, "b", "conv", "r,wb", "yb", pads(1));
    add_layer(m, "down", "conv", "r,wd", "yd", NULL);
    add_layer(m, "sum", "add", "yb,yd", "z", NULL);
    add_layer(m, "c", "conv", "z,wc", "yc", pads(2));
    add_layer(m, "flat", "flatten", "yc", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw", "y", NULL);
    add_layer(m, "side", "conv", "x,wside", "ys", pads(1));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "ys"));
    return m;
}

/* The notes the passes give, one line each: "pass|kind|layer|text". */
typedef struct note_log {
    char text[8192];
    size_t n;
} note_log;

static void log_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    note_log *l = user;
    size_t len = strlen(l->text);
    snprintf(l->text + len, sizeof l->text - len, "%s|%d|%s|%s\n", pass, (int)kind, layer, text);
    l->n++;
}

/* A progress handler appending "stage done/total, " to the string user points to (4096 bytes). */
static void progress_log(void *user, const char *stage, size_t done, size_t total)
{
    char *log = user;
    size_t len = strlen(log);
    snprintf(log + len, 4096 - len, "%s %zu/%zu, ", stage, done, total);
}

/* Runs pipeline on a new stem_model with options o (destroyed); the notes go to *log. */
static pdc_model *stem_model_pruned(const char *pipeline, pdc_attrs *o, note_log *log)
{
    pdc_model *m = stem_model();
    memset(log, 0, sizeof *log);
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, log_note, log));
    ck_assert_ok(ctx, transform(m, pipeline, o));
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, NULL, NULL));
    return m;
}

/* The sparsity kinds of the weights of stem, side, b, down, c, fc, as one string ("N" none, "P"
 * pattern, "B" block, "U" unstructured). */
static const char *kinds(const pdc_model *m)
{
    static char buf[8];
    const char *layers[] = {"stem", "side", "b", "down", "c", "fc"};
    for (size_t i = 0; i < 6; i++) buf[i] = "NPBU"[weight_of(m, layers[i])->sparsity.kind];
    buf[6] = '\0';
    return buf;
}

START_TEST(defaults_leave_the_stem_big_kernels_and_1x1_convs_dense)
{
    note_log log;
    static const char pipeline[] = "prune-pattern,prune-connectivity,prune-block";
    /* the defaults: only the 3x3 conv b (patterns) and the fc (blocks) */
    pdc_model *m = stem_model_pruned(pipeline, NULL, &log);
    ck_assert_str_eq(kinds(m), "NNPNNB");
    check_pattern_weight(weight_of(m, "b"), 8, 4);
    /* every layer a default left alone is named, with the reason and the option; then what was pruned */
    ck_assert_str_eq(log.text,
                     "prune-pattern|2|stem|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-pattern|1|b|pattern 8x4\n"
                     "prune-pattern|3|c|5x5 kernels: not in option pattern_kernels \"3x3\"\n"
                     "prune-pattern|2|side|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-connectivity|2|stem|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-connectivity|1|b|connectivity 50%\n"
                     "prune-connectivity|3|c|5x5 kernels: not in option pattern_kernels \"3x3\"\n"
                     "prune-connectivity|2|side|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-block|4|down|1x1 conv: option block_convs=1 prunes it\n"
                     "prune-block|1|fc|block 1x4 50%\n");
    pdc_model_destroy(m);

    /* every opt-in: every conv pruned, no note about a default */
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "pattern_kernels", " 3x3, 5x5,7x7 "));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block_convs", "1"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.75"));
    m = stem_model_pruned(pipeline, o, &log);
    ck_assert_str_eq(kinds(m), "PPPBPB");
    check_pattern_weight(weight_of(m, "stem"), 8, 4);
    check_pattern_weight(weight_of(m, "c"), 8, 4);
    ck_assert_ptr_null(strstr(log.text, "|2|"));
    ck_assert_ptr_null(strstr(log.text, "|3|"));
    ck_assert_ptr_null(strstr(log.text, "|4|"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|1|stem|pattern 8x4\n"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-block|1|down|block 1x4 75%\n"));
    ck_assert_uint_eq(log.n, 4 + 4 + 2); /* stem, side, b, c twice; down and fc */
    pdc_model_destroy(m);

    /* one opt-in at a time */
    m = stem_model_pruned(pipeline, opt_i("include_stem", 1), &log);
    ck_assert_str_eq(kinds(m), "NPPNNB"); /* side (3x3) now; the 7x7 stem still not: its kernel size */
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|3|stem|7x7 kernels: not in option pattern_kernels \"3x3\"\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_s("pattern_kernels", "5x5"), &log);
    ck_assert_str_eq(kinds(m), "NNNNPB"); /* only c: 3x3 is no longer listed, the stems stay dense */
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|3|b|3x3 kernels: not in option pattern_kernels \"5x5\"\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_s("pattern_kernels", "all"), &log);
    ck_assert_str_eq(kinds(m), "NNPNPB");
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_i("block_convs", 1), &log);
    ck_assert_str_eq(kinds(m), "NNPBNB");
    pdc_model_destroy(m);

    /* unstructured: the stems are left alone, everything else taken */
    m = stem_model_pruned("prune-unstructured", NULL, &log);
    ck_assert_str_eq(kinds(m), "NNUUUU");
    ck_assert_ptr_nonnull(strstr(log.text, "prune-unstructured|2|side|stem: reads a graph input"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-unstructured|1|down|unstructured 50%\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned("prune-unstructured", opt_i("include_stem", 1), &log);
    ck_assert_str_eq(kinds(m), "UUUUUU");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(listed_layers_override_the_defaults)
{
    /* a layer named in layers is pruned by each pass that can prune it, whatever the defaults say */
    note_log log;
    pdc_model *m = stem_model_pruned("prune-pattern,prune-connectivity,prune-block", opt_s("layers", "stem,down"), &log);
    ck_assert_str_eq(kinds(m), "PNNBNN");
    ck_assert_str_eq(log.text, "prune-pattern|1|stem|pattern 8x4\n"
                               "prune-connectivity|1|stem|connectivity 50%\n"
                               "prune-block|1|down|block 1x4 50%\n");
    pdc_model_destroy(m);
    m = stem_model_pruned("prune-unstructured", opt_s("layers", "side"), &log);
    ck_assert_str_eq(kinds(m), "NUNNNN");
    pdc_model_destroy(m);
    /* skip still excludes; the defaults apply to the rest */
    m = stem_model_pruned("prune-pattern", opt_s("skip", "b"), &log);
    ck_assert_str_eq(kinds(m), "NNNNNN");
    ck_assert_ptr_null(strstr(log.text, "|b|"));
    pdc_model_destroy(m);
}
END_TEST

START_TEST(stems_are_found_through_layers_without_weights)
{
    pdc_model *m = stem_model();
    uint8_t *stems;
    ck_assert_ok(ctx, pass_find_stems(m, &stems));
    for (size_t li = 0; li < m->n_layers; li++) {
        const char *name = m->layers[li].name;
        int want = !strcmp(name, "stem") || !strcmp(name, "side");
        ck_assert_msg(stems[li] == want, "layer '%s': stem %d, expected %d", name, stems[li], want);
    }
    pdc_free(stems);
    pdc_model_destroy(m);
    /* a conv after a pooling, a reshape and a concat with a conv's output still sees the raw input;
     * one after a matmul by a constant does not */
    m = new_model("paths");
    add_input(m, "x", 4, (int64_t[]){1, 2, 8, 8});
    add_random(m, "w1", 4, (int64_t[]){2, 2, 3, 3}, 91, -1, 1);
    add_random(m, "w2", 4, (int64_t[]){2, 4, 3, 3}, 92, -1, 1);
    add_random(m, "mw", 2, (int64_t[]){8, 8}, 93, -1, 1);
    add_random(m, "w3", 4, (int64_t[]){2, 2, 3, 3}, 94, -1, 1);
    pdc_attrs *mp = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(mp, "kernel_shape", 2, (int64_t[]){1, 1}));
    add_layer(m, "pool", "maxpool", "x", "p", mp);
    add_layer(m, "c1", "conv", "p,w1", "y1", pads(1));
    pdc_attrs *ca = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(ca, "axis", 1));
    add_layer(m, "cat", "concat", "p,y1", "q", ca);
    add_layer(m, "c2", "conv", "q,w2", "y2", pads(1));
    add_layer(m, "mm", "matmul", "x,mw", "u", NULL);
    add_layer(m, "c3", "conv", "u,w3", "y3", pads(1));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y2"));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y3"));
    ck_assert_ok(ctx, pass_find_stems(m, &stems));
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c1")], 1);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c2")], 1);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c3")], 0);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "pool")], 0); /* only convs are stems */
    pdc_free(stems);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(passes_report_progress_through_the_layers)
{
    typedef struct { char log[4096]; } plog;
    plog *pl = calloc(1, sizeof *pl);
    pdc_model *m = stem_model();
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, progress_log, pl->log));
    ck_assert_ok(ctx, transform(m, "prune-pattern,plan", NULL));
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, NULL, NULL));
    /* 11 layers: each pruning pass counts through them, the manager gives the start and the end */
    ck_assert_str_eq(pl->log, "prune-pattern 0/11, prune-pattern 1/11, prune-pattern 2/11, prune-pattern 3/11, "
                              "prune-pattern 4/11, prune-pattern 5/11, prune-pattern 6/11, prune-pattern 7/11, "
                              "prune-pattern 8/11, prune-pattern 9/11, prune-pattern 10/11, prune-pattern 11/11, "
                              "plan 0/11, plan 11/11, ");
    /* removed: nothing more is reported */
    pl->log[0] = '\0';
    ck_assert_ok(ctx, transform(m, "plan", NULL));
    ck_assert_str_eq(pl->log, "");
    pdc_model_destroy(m);
    free(pl);
}
END_TEST

/* ------------------------------------------------------------------ canonicalize */

/* x[2,3,8,8] through conv/bn/relu, conv/add/clip, an identity reshape, conv/leaky_relu, conv/tanh,
 * flatten, fc/bn/hardswish, an identity transpose, gemm + (const * const) / sigmoid; plus a dead
 * maxpool and an unused constant. */
static pdc_model *canon_model(void)
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
    pdc_attrs *mp = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(mp, "kernel_shape", 2, (int64_t[]){2, 2}));
    add_layer(m, "dead_pool", "maxpool", "r1", "dp", mp);
    add_layer(m, "conv2", "conv", "r1,w2", "c2", pads(1));
    add_layer(m, "add2", "add", "cb2,c2", "a2", NULL);
    pdc_attrs *cl = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(cl, "min", 0.0f));
    ck_assert_ok(ctx, pdc_attrs_set_float(cl, "max", 0.5f));
    add_layer(m, "clip2", "clip", "a2", "k2o", cl);
    pdc_attrs *rs = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(rs, "shape", 4, (int64_t[]){2, 16, 8, 8}));
    add_layer(m, "same_shape", "reshape", "k2o", "id2", rs);
    add_layer(m, "conv3", "conv", "id2,w3,b3", "c3", NULL);
    pdc_attrs *lr = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(lr, "alpha", 0.2f));
    add_layer(m, "leaky3", "leaky_relu", "c3", "l3", lr);
    add_layer(m, "conv4", "conv", "l3,w4", "c4", pads(2));
    add_layer(m, "tanh4", "tanh", "c4", "t4", NULL);
    add_layer(m, "flat", "flatten", "t4", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw,fb", "g", NULL);
    add_layer(m, "bn5", "batchnorm", "g,s5,t5,m5,v5", "n5", NULL);
    add_layer(m, "hs5", "hardswish", "n5", "h5", NULL);
    pdc_attrs *tp = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(tp, "perm", 2, (int64_t[]){0, 1}));
    add_layer(m, "same_order", "transpose", "h5", "th", tp);
    pdc_attrs *ga = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(ga, "alpha", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_float(ga, "beta", 3.0f));
    add_layer(m, "gemm", "gemm", "th,gw", "gm", ga);
    add_layer(m, "kmul", "mul", "k1,k2", "kc", NULL);
    add_layer(m, "gadd", "add", "gm,kc", "ga", NULL);
    add_layer(m, "sig", "sigmoid", "ga", "y", NULL);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    return m;
}

START_TEST(canonicalize_keeps_outputs)
{
    pdc_model *m = canon_model(), *before = clone(m);
    ck_assert_ok(ctx, transform(m, "canonicalize", NULL));
    assert_same_outputs(before, m, 1e-5f);
    /* what is left: seven fused layers and flatten */
    const char *want[] = {"conv1", "conv2", "conv3", "conv4", "flat", "fc", "gemm"};
    const char *act[] = {"relu", "clip", "leaky_relu", "tanh", NULL, "hardswish", "sigmoid"};
    ck_assert_uint_eq(m->n_layers, 7);
    for (size_t i = 0; i < 7; i++) {
        ck_assert_str_eq(m->layers[i].name, want[i]);
        const char *a = ir_attr_string(&m->layers[i].attrs, "activation", NULL);
        if (act[i]) ck_assert_str_eq(a, act[i]);
        else ck_assert_ptr_null(a);
    }
    ck_assert_float_eq(ir_attr_float(&layer_named(m, "conv2")->attrs, "act_max", 0), 0.5f);
    ck_assert_float_eq(ir_attr_float(&layer_named(m, "conv3")->attrs, "act_alpha", 0), 0.2f);
    ck_assert_float_eq(ir_attr_float(&layer_named(m, "gemm")->attrs, "beta", 0), 1.0f);
    ck_assert_int_ge(layer_named(m, "conv2")->inputs[2], 0); /* the add became conv2's bias */
    ck_assert_int_eq(ir_model_find_tensor(m, "junk"), -1);
    ck_assert_int_eq(ir_model_find_tensor(m, "dp"), -1);
    ck_assert_int_eq(ir_model_find_tensor(m, "s1"), -1);  /* batchnorm parameters are gone */
    /* every constant left is read */
    for (size_t t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].kind == IR_TENSOR_CONST) ck_assert_uint_ge(ir_model_tensor_uses(m, (int)t), 1);
    ck_assert_ok(ctx, pdc_model_verify(m));
    /* folding never adds work: fused activations are counted as their layers were (one op per
     * element), batchnorm and the bias add are gone */
    int64_t before_flops = 0, after_flops = 0, v;
    for (size_t i = 0; i < before->n_layers; i++) {
        ck_assert_ok(ctx, pdc_model_layer_stat(before, i, PDC_STAT_DENSE_FLOPS, &v));
        before_flops += v;
    }
    for (size_t i = 0; i < m->n_layers; i++) {
        ck_assert_ok(ctx, pdc_model_layer_stat(m, i, PDC_STAT_DENSE_FLOPS, &v));
        after_flops += v;
    }
    ck_assert_int_lt(after_flops, before_flops);
    int64_t relu_flops;
    ck_assert_ok(ctx, pdc_model_layer_stat(before, (size_t)ir_model_find_layer(before, "relu1"), PDC_STAT_DENSE_FLOPS,
                                           &relu_flops));
    int64_t conv_before, conv_after;
    ck_assert_ok(ctx, pdc_model_layer_stat(before, (size_t)ir_model_find_layer(before, "conv1"), PDC_STAT_DENSE_FLOPS,
                                           &conv_before));
    ck_assert_ok(ctx, pdc_model_layer_stat(m, (size_t)ir_model_find_layer(m, "conv1"), PDC_STAT_DENSE_FLOPS,
                                           &conv_after));
    ck_assert_int_eq(conv_after, conv_before + relu_flops);
    /* idempotent */
    pdc_model *again = clone(m);
    ck_assert_ok(ctx, transform(again, "canonicalize", NULL));
    char *t1 = text_of(m), *t2 = text_of(again);
    ck_assert_str_eq(t1, t2);
    pdc_string_free(t1);
    pdc_string_free(t2);
    pdc_model_destroy(again);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(canonicalize_respects_sharing_and_readers)
{
    /* w shared by two convs; c1 is also a graph output, so bn stays; c2's bn folds into a copy of w */
    pdc_model *m = new_model("shared");
    add_input(m, "x", 4, (int64_t[]){1, 2, 5, 5});
    add_random(m, "w", 4, (int64_t[]){3, 2, 3, 3}, 61, -1, 1);
    const char *bnp[] = {"s", "t", "mu", "v"};
    float lo[] = {0.5f, -0.2f, -0.2f, 0.5f}, hi[] = {1.5f, 0.2f, 0.2f, 1.5f};
    for (int i = 0; i < 4; i++) add_random(m, bnp[i], 1, (int64_t[]){3}, 62 + (uint32_t)i, lo[i], hi[i]);
    add_layer(m, "conv1", "conv", "x,w", "c1", pads(1));
    add_layer(m, "bn1", "batchnorm", "c1,s,t,mu,v", "n1", NULL);
    add_layer(m, "conv2", "conv", "x,w", "c2", pads(1));
    add_layer(m, "bn2", "batchnorm", "c2,s,t,mu,v", "n2", NULL);
    add_layer(m, "sum", "add", "n1,n2", "y", NULL);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "c1"));
    pdc_model *before = clone(m);
    ck_assert_ok(ctx, transform(m, "canonicalize", NULL));
    assert_same_outputs(before, m, 1e-5f);
    ck_assert_int_ge(ir_model_find_layer(m, "bn1"), 0);
    ck_assert_int_eq(ir_model_find_layer(m, "bn2"), -1);
    ck_assert_int_ne(layer_named(m, "conv1")->inputs[1], layer_named(m, "conv2")->inputs[1]);
    /* the shared original is untouched and still read by conv1 */
    ck_assert_mem_eq(weight_of(m, "conv1")->data, tensor(before, "w")->data, 54 * sizeof(float));
    pdc_model_destroy(before);
    pdc_model_destroy(m);

    /* an identity whose output is a graph output: its producer writes the output directly */
    m = new_model("id_out");
    add_input(m, "x", 2, (int64_t[]){2, 3});
    add_layer(m, "r", "relu", "x", "h", NULL);
    pdc_attrs *rs = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(rs, "shape", 2, (int64_t[]){2, 3}));
    add_layer(m, "same", "reshape", "h", "y", rs);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    before = clone(m);
    ck_assert_ok(ctx, transform(m, "canonicalize", NULL));
    ck_assert_uint_eq(m->n_layers, 1);
    ck_assert_str_eq(m->tensors[m->outputs[0]].name, "y");
    assert_same_outputs(before, m, 0);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ fused activations, out_perm */

/* conv 1x1 (w = 1, b = 0.25) on x = [-2, -0.5, 0.5, 3] with the given activation attributes. */
static void check_fused(const char *act, const char *fname, float fval, const float *want)
{
    pdc_model *m = new_model("fused");
    add_input(m, "x", 4, (int64_t[]){1, 1, 1, 4});
    add_values(m, "w", 4, (int64_t[]){1, 1, 1, 1}, (float[]){1});
    add_values(m, "b", 1, (int64_t[]){1}, (float[]){0.25f});
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", act));
    if (fname) ck_assert_ok(ctx, pdc_attrs_set_float(a, fname, fval));
    if (!strcmp(act, "clip")) ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", -1.0f));
    add_layer(m, "conv", "conv", "x,w,b", "y", a);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    float x[4] = {-2, -0.5f, 0.5f, 3}, y[4];
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 1, 1, 4}, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 1, 1, 4}, y, &ty));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
    ck_assert_floats_near(y, want, 4, 1e-6f);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}

START_TEST(fused_activation_hand_computed)
{
    /* before the activation: [-1.75, -0.25, 0.75, 3.25] */
    check_fused("relu", NULL, 0, (float[]){0, 0, 0.75f, 3.25f});
    check_fused("clip", "act_max", 1.0f, (float[]){-1, -0.25f, 0.75f, 1});
    check_fused("leaky_relu", "act_alpha", 0.1f, (float[]){-0.175f, -0.025f, 0.75f, 3.25f});
    check_fused("leaky_relu", NULL, 0, (float[]){-0.0175f, -0.0025f, 0.75f, 3.25f});
    check_fused("hardswish", NULL, 0, (float[]){-1.75f * 1.25f / 6, -0.25f * 2.75f / 6, 0.75f * 3.75f / 6, 3.25f});
    check_fused("sigmoid", NULL, 0,
                (float[]){(float)(1 / (1 + exp(1.75))), (float)(1 / (1 + exp(0.25))), (float)(1 / (1 + exp(-0.75))),
                          (float)(1 / (1 + exp(-3.25)))});
    check_fused("tanh", NULL, 0, (float[]){(float)tanh(-1.75), (float)tanh(-0.25), (float)tanh(0.75), (float)tanh(3.25)});

    /* fc and gemm: y = relu(x w^T + b) and clip(alpha x w, 0, 1) */
    pdc_model *m = new_model("fc_act");
    add_input(m, "x", 2, (int64_t[]){1, 2});
    add_values(m, "w", 2, (int64_t[]){2, 2}, (float[]){1, 2, -3, 1});
    add_values(m, "b", 1, (int64_t[]){2}, (float[]){0.5f, 0});
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    add_layer(m, "fc", "fc", "x,w,b", "h", a);
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "clip"));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", 0));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_max", 1));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.25f));
    add_values(m, "g", 2, (int64_t[]){2, 2}, (float[]){1, 0, 0, 1});
    add_layer(m, "gemm", "gemm", "h,g", "y", a);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    float x[2] = {1, 2}, y[2]; /* fc: [1*1+2*2+0.5, -3+2] = [5.5, -1] -> relu [5.5, 0]; gemm 0.25x -> [1.375, 0] -> [1, 0] */
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){1, 2}, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){1, 2}, y, &ty));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
    ck_assert_floats_near(y, (float[]){1, 0}, 2, 0);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* Adding layer `op` with attrs a on x fails with `status` and a message containing `needle`. */
static void expect_layer_error(const char *op, const char *ins, pdc_attrs *a, pdc_status status, const char *needle)
{
    pdc_model *m = new_model("bad");
    add_input(m, "x", 4, (int64_t[]){1, 2, 3, 3});
    add_random(m, "w", 4, (int64_t[]){3, 2, 1, 1}, 71, -1, 1);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", ins);
    const char *in[3];
    size_t n = 0;
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) in[n++] = s;
    const char *out[] = {"y"};
    ck_assert_status(ctx, pdc_model_add_layer(m, "L", op, n, in, 1, out, a), status);
    ck_assert_error_has(ctx, needle);
    ck_assert_uint_eq(m->n_layers, 0);
    pdc_attrs_destroy(a);
    pdc_model_destroy(m);
}

START_TEST(pass_attributes_are_validated)
{
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    expect_layer_error("relu", "x", a, PDC_ERR_INVALID_MODEL, "only allowed on conv, fc and gemm");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "gelu"));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "activation \"gelu\" is unknown");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "activation", 1));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "must be a string");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", 0));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "act_min needs attribute activation");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "clip"));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_min", 2));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_max", 1));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "act_min 2 is greater than act_max 1");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "act_alpha", 0.1f));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "act_alpha belongs to activation leaky_relu");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "sigmoid"));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "act_max", "1"));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "act_max must be a float");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", 3, (int64_t[]){0, 2, 2}));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "not a permutation of 0..2 (entry 2 is 2)");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", 2, (int64_t[]){0, 1}));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "out_perm has 2 entries, expected 3");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", 3, (int64_t[]){0, 1, 3}));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "entry 2 is 3");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "out_perm", 0));
    expect_layer_error("conv", "x,w", a, PDC_ERR_INVALID_MODEL, "out_perm must be a list of ints");
    a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", 2, (int64_t[]){0, 1}));
    expect_layer_error("relu", "x", a, PDC_ERR_INVALID_MODEL, "out_perm is only allowed on conv");
}
END_TEST

START_TEST(out_perm_hand_computed)
{
    /* stored filter j writes output channel out_perm[j]: [10,20,30] + [1,2,3] -> channels 2, 0, 1 */
    pdc_model *m = new_model("perm");
    add_input(m, "x", 4, (int64_t[]){1, 1, 1, 1});
    add_values(m, "w", 4, (int64_t[]){3, 1, 1, 1}, (float[]){10, 20, 30});
    add_values(m, "b", 1, (int64_t[]){3}, (float[]){1, 2, 3});
    pdc_attrs *a = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", 3, (int64_t[]){2, 0, 1}));
    add_layer(m, "conv", "conv", "x,w,b", "y", a);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    size_t n;
    float *y = run_ref(m, 1, &n); /* input is random: use x = 1 via a second run below */
    free(y);
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    float x = 1, out[3];
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 1, 1, 1}, &x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 3, 1, 1}, out, &ty));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
    ck_assert_floats_near(out, (float[]){22, 33, 11}, 3, 0);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(p);
    /* the text form and .pdc keep it */
    char *t = text_of(m);
    ck_assert_ptr_nonnull(strstr(t, "out_perm=[2,0,1]"));
    pdc_model *back;
    ck_assert_ok(ctx, pdc_model_parse(ctx, t, strlen(t), &back));
    assert_same_outputs(m, back, 0);
    pdc_model_destroy(back);
    pdc_string_free(t);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ reorder */

START_TEST(reorder_keeps_outputs_and_groups_filters)
{
    pdc_model *m = conv_model();
    pdc_attrs *o = opt_everything();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "patterns", 4));
    ck_assert_ok(ctx, transform(m, "prune-pattern,prune-connectivity", o));
    pdc_model *pruned = clone(m);
    ck_assert_ok(ctx, transform(m, "reorder", NULL));
    assert_same_outputs(pruned, m, 1e-6f);
    const char *convs[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        const ir_layer *l = layer_named(m, convs[i]);
        const ir_tensor *w = &m->tensors[l->inputs[1]], *w0 = weight_of(pruned, convs[i]);
        size_t np;
        const int64_t *perm = ir_attr_ints(&l->attrs, "out_perm", &np);
        ck_assert_ptr_nonnull(perm);
        size_t o_ch = (size_t)w->dims[0], c = (size_t)w->dims[1], win = (size_t)(w->dims[2] * w->dims[3]);
        ck_assert_uint_eq(np, o_ch);
        size_t prev_kept = SIZE_MAX;
        for (size_t j = 0; j < o_ch; j++) {
            /* stored filter j is the original filter perm[j], with its pattern ids */
            ck_assert_mem_eq(w->data + j * c * win, w0->data + (size_t)perm[j] * c * win, c * win * sizeof(float));
            ck_assert_mem_eq(w->sparsity.kernel_pattern + j * c, w0->sparsity.kernel_pattern + (size_t)perm[j] * c,
                             c * sizeof(int32_t));
            size_t kept = 0;
            for (size_t k = 0; k < c; k++) kept += w->sparsity.kernel_pattern[j * c + k] >= 0;
            ck_assert_uint_le(kept, prev_kept); /* most kept kernels first */
            prev_kept = kept;
        }
    }
    /* reordering again composes the permutations; outputs still the same */
    ck_assert_ok(ctx, transform(m, "prune-connectivity,reorder", opt_everything()));
    assert_same_outputs(pruned, m, 1e-6f);
    pdc_model_destroy(pruned);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ plan */

START_TEST(plan_places_activations_without_overlap)
{
    pdc_model *m = canon_model(), *before = clone(m);
    size_t arena, total;
    ck_assert_status(ctx, pdc_model_memory_plan(m, &arena, &total), PDC_ERR_INVALID_STATE);
    ck_assert_error_has(ctx, "no memory plan");
    ck_assert_ok(ctx, transform(m, "plan", NULL));
    ck_assert_ok(ctx, pdc_model_memory_plan(m, &arena, &total));
    ck_assert_uint_lt(arena, total);
    ck_assert_uint_gt(arena, 0);
    /* independent check: activations live at the same time never share bytes */
    size_t nt = m->n_tensors, *def = calloc(nt, sizeof *def), *last = calloc(nt, sizeof *last),
           *off = calloc(nt, sizeof *off);
    int present;
    ir_liveness(m, def, last);
    ck_assert_ok(ctx, ir_arena_get(m, &present, off, NULL, NULL));
    ck_assert_int_eq(present, 1);
    size_t max_end = 0;
    for (size_t a = 0; a < nt; a++) {
        if (def[a] == SIZE_MAX) continue;
        ck_assert_uint_eq(off[a] % IR_ARENA_ALIGN, 0);
        size_t ea = off[a] + ir_tensor_numel(&m->tensors[a]) * 4;
        if (ea > max_end) max_end = ea;
        for (size_t b = a + 1; b < nt; b++) {
            if (def[b] == SIZE_MAX) continue;
            size_t eb = off[b] + ir_tensor_numel(&m->tensors[b]) * 4;
            int live_together = def[a] <= last[b] && def[b] <= last[a];
            int share = off[a] < eb && off[b] < ea;
            ck_assert_msg(!(live_together && share), "'%s' and '%s' overlap", m->tensors[a].name, m->tensors[b].name);
        }
    }
    ck_assert_uint_eq(max_end, arena);
    free(def);
    free(last);
    free(off);
    /* the reference backend runs in the planned arena: same outputs */
    assert_same_outputs(before, m, 0);
    /* the plan survives text and .pdc */
    char *t = text_of(m);
    pdc_model *back;
    ck_assert_ok(ctx, pdc_model_parse(ctx, t, strlen(t), &back));
    size_t arena2;
    ck_assert_ok(ctx, pdc_model_memory_plan(back, &arena2, NULL));
    ck_assert_uint_eq(arena2, arena);
    pdc_model_destroy(back);
    pdc_string_free(t);

    /* a broken plan is rejected by the verifier, with the tensors named */
    ir_layer *l = &m->layers[ir_model_find_layer(m, "relu1")];
    size_t n;
    const int64_t *c1 = ir_attr_ints(&m->layers[ir_model_find_layer(m, "conv1")].attrs, IR_ARENA_ATTR, &n);
    int64_t same = c1[0];
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &l->attrs, IR_ARENA_ATTR, 1, &same));
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "overlaps");
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &l->attrs, IR_ARENA_ATTR, 1, (int64_t[]){3}));
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "multiple of 64");
    pass_attr_remove(&l->attrs, IR_ARENA_ATTR);
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "layer 'relu1' has no arena_offsets");
    /* canonicalize drops a plan */
    ck_assert_ok(ctx, transform(m, "canonicalize", NULL));
    ck_assert_status(ctx, pdc_model_memory_plan(m, NULL, NULL), PDC_ERR_INVALID_STATE);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(plan_needs_concrete_shapes)
{
    pdc_model *m = new_model("sym");
    add_input(m, "x", 2, (int64_t[]){-1, 3});
    add_layer(m, "r", "relu", "x", "y", NULL);
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    char *before = text_of(m);
    ck_assert_status(ctx, transform(m, "canonicalize,plan", NULL), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "pass 'plan'");
    ck_assert_error_has(ctx, "concrete shapes");
    assert_unchanged(m, before);
    pdc_string_free(before);
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 2, (int64_t[]){4, 3}));
    ck_assert_ok(ctx, transform(m, "plan", NULL));
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ the pass manager */

START_TEST(full_pipeline_verifies_and_prints_after_every_pass)
{
    char path[] = "/tmp/pdc_test_passes_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    pdc_model *m = canon_model();
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "print_after", "all"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "print_file", path));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "2x2"));
    static const char pipeline[] =
        "canonicalize, prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    ck_assert_ok(ctx, transform(m, pipeline, o));
    ck_assert_ok(ctx, pdc_model_verify(m));
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    text[size] = '\0';
    fclose(f);
    unlink(path);
    /* one IR per pass, in order; each parses and verifies */
    const char *names[] = {"canonicalize", "prune-pattern", "prune-connectivity", "prune-block",
                           "prune-unstructured", "reorder", "plan"};
    const char *at = text;
    for (size_t i = 0; i < 7; i++) {
        char head[64];
        snprintf(head, sizeof head, "# IR after pass '%s'\n", names[i]);
        const char *h = strstr(at, head);
        ck_assert_msg(h != NULL, "no IR after %s", names[i]);
        const char *body = h + strlen(head), *next = strstr(body, "# IR after pass");
        size_t len = next ? (size_t)(next - body) : strlen(body);
        pdc_model *p;
        ck_assert_ok(ctx, pdc_model_parse(ctx, body, len, &p));
        ck_assert_ok(ctx, pdc_model_verify(p));
        pdc_model_destroy(p);
        at = body;
    }
    ck_assert_ptr_nonnull(strstr(text, "dense<elided>"));
    free(text);
    /* what each pruning pass did, with the defaults: the stem conv1 stays dense (every pass leaves it
     * alone), conv2 (3x3) gets patterns, the 1x1 conv3 and the 5x5 conv4 only the unstructured pass */
    ck_assert_int_eq(weight_of(m, "conv1")->sparsity.kind, IR_SPARSITY_NONE);
    ck_assert_int_eq(weight_of(m, "conv2")->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(weight_of(m, "conv3")->sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
    ck_assert_int_eq(weight_of(m, "conv4")->sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
    ck_assert_int_eq(weight_of(m, "fc")->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(weight_of(m, "gemm")->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_ok(ctx, pdc_model_memory_plan(m, NULL, NULL));
    pdc_model_destroy(m);
}
END_TEST

START_TEST(pass_table_and_info)
{
    size_t n;
    const pass_info *t = pass_table(&n);
    ck_assert_uint_eq(n, 7);
    for (size_t i = 0; i < n; i++) {
        const char *name, *req, *gua;
        ck_assert_ok(ctx, pdc_pass_info(i, &name, &req, &gua));
        ck_assert_str_eq(name, t[i].name);
        ck_assert_ptr_eq(pass_find(name), &t[i]);
        ck_assert(strlen(req) > 0 && strlen(gua) > 0);
    }
    const char *name = "unchanged";
    ck_assert_int_eq(pdc_pass_info(n, &name, NULL, NULL), PDC_ERR_NOT_FOUND);
    ck_assert_str_eq(name, "unchanged");
    ck_assert_ptr_null(pass_find("nope"));
}
END_TEST

/* transform fails with status and a message containing needle, and leaves the model unchanged */
static void expect_transform_error(pdc_model *m, const char *pipeline, pdc_attrs *o, pdc_status status,
                                   const char *needle)
{
    char *before = text_of(m);
    ck_assert_status(ctx, transform(m, pipeline, o), status);
    ck_assert_error_has(ctx, needle);
    assert_unchanged(m, before);
    pdc_string_free(before);
}

START_TEST(bad_input_has_status_and_message)
{
    pdc_model *m = conv_model();
    /* pipelines */
    expect_transform_error(m, "canonicalize,prune-patern", NULL, PDC_ERR_INVALID_ARG,
                           "unknown pass 'prune-patern' in pipeline \"canonicalize,prune-patern\" (known passes: "
                           "canonicalize, prune-pattern, prune-connectivity, prune-block, prune-unstructured, reorder, plan)");
    expect_transform_error(m, "", NULL, PDC_ERR_INVALID_ARG, "pass 1 is empty");
    expect_transform_error(m, "prune-pattern,,plan", NULL, PDC_ERR_INVALID_ARG, "pass 2 is empty");
    ck_assert_status(ctx, pdc_model_transform(m, NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pipeline is NULL");
    ck_assert_int_eq(pdc_model_transform(NULL, "plan", NULL), PDC_ERR_INVALID_ARG);
    /* rates */
    expect_transform_error(m, "prune-connectivity", opt_f("connectivity", 1.0f), PDC_ERR_INVALID_ARG,
                           "option connectivity: rate 1 is outside [0, 1)");
    expect_transform_error(m, "prune-connectivity", opt_f("connectivity", -0.25f), PDC_ERR_INVALID_ARG,
                           "rate -0.25 is outside [0, 1)");
    expect_transform_error(m, "prune-connectivity", opt_s("connectivity", "0.5,b=1.5"), PDC_ERR_INVALID_ARG,
                           "option connectivity: rate 1.5 is outside [0, 1)");
    expect_transform_error(m, "prune-connectivity", opt_s("connectivity", "half"), PDC_ERR_INVALID_ARG,
                           "expected a rate in [0, 1), got \"half\"");
    expect_transform_error(m, "prune-connectivity", opt_s("connectivity", "0.5,0.6"), PDC_ERR_INVALID_ARG,
                           "more than one global rate");
    expect_transform_error(m, "prune-connectivity", opt_s("connectivity", "0.5,nolayer=0.6"), PDC_ERR_NOT_FOUND,
                           "option connectivity: model 'convs' has no layer 'nolayer'");
    expect_transform_error(m, "prune-block", opt_f("block_rate", 2), PDC_ERR_INVALID_ARG, "option block_rate: rate 2");
    expect_transform_error(m, "prune-unstructured", opt_s("unstructured_rate", "1"), PDC_ERR_INVALID_ARG,
                           "option unstructured_rate: rate 1 is outside [0, 1)");
    expect_transform_error(m, "prune-block", opt_s("block", "1x4:1"), PDC_ERR_INVALID_ARG, "option block: rate 1");
    expect_transform_error(m, "prune-block", opt_s("block", "0x4"), PDC_ERR_INVALID_ARG,
                           "option block: \"0x4\" is not a block shape");
    expect_transform_error(m, "prune-block", opt_s("block", "4"), PDC_ERR_INVALID_ARG, "not a block shape");
    /* pattern sizes and counts */
    expect_transform_error(m, "prune-pattern", opt_i("pattern_size", 0), PDC_ERR_INVALID_ARG,
                           "option pattern_size: expected an integer in 1..64, got \"0\"");
    /* the first layer prune-pattern takes is b: a is the stem, c a 5x5 conv */
    expect_transform_error(m, "prune-pattern", opt_i("pattern_size", 10), PDC_ERR_INVALID_ARG,
                           "layer 'b': pattern size 10 is outside 1..9 (the 3x3 window)");
    expect_transform_error(m, "prune-pattern", opt_i("patterns", 57), PDC_ERR_INVALID_ARG,
                           "layer 'b': 57 patterns requested, but only 56 patterns of 4 entries contain the centre "
                           "of a 3x3 window (C(8,3))");
    /* the defaults' options: bad values name the option and the value */
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3x4"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: 3x4 in \"3x4\" cannot be pattern-pruned (kernel sizes must be odd, "
                           "at least 3x3 and at most 64 entries)");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3x3,1x1"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: 1x1 in \"3x3,1x1\" cannot be pattern-pruned");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "9x9"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: 9x9 in \"9x9\" cannot be pattern-pruned");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3x3,,5x5"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: \"\" in \"3x3,,5x5\" is not a kernel size (expected \"all\" or "
                           "kernel sizes KHxKW separated by commas, e.g. \"3x3,5x5,7x7\")");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: \"3\" in \"3\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3x3x3"), PDC_ERR_INVALID_ARG,
                           "\"3x3x3\" in \"3x3x3\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "All"), PDC_ERR_INVALID_ARG,
                           "\"All\" in \"All\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "all,3x3"), PDC_ERR_INVALID_ARG,
                           "\"all\" in \"all,3x3\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", ""), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: \"\" in \"\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "12345x3"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: 12345x3 in \"12345x3\" cannot be pattern-pruned");
    expect_transform_error(m, "prune-pattern", opt_i("pattern_kernels", 3), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: expected \"all\" or kernel sizes KHxKW");
    expect_transform_error(m, "prune-pattern", opt_i("include_stem", 2), PDC_ERR_INVALID_ARG,
                           "option include_stem: expected an integer in 0..1, got \"2\"");
    expect_transform_error(m, "prune-block", opt_s("block_convs", "yes"), PDC_ERR_INVALID_ARG,
                           "option block_convs: expected an integer in 0..1, got \"yes\"");
    /* refused before anything is allocated for them */
    expect_transform_error(m, "prune-pattern", opt_i("patterns", 2000000000), PDC_ERR_INVALID_ARG,
                           "2000000000 patterns requested, but only 56");
    pdc_attrs *o = opt_i("pattern_size", 1);
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "patterns", 2));
    expect_transform_error(m, "prune-pattern", o, PDC_ERR_INVALID_ARG, "2 patterns requested, but only 1 patterns");
    expect_transform_error(m, "prune-pattern", opt_i("patterns", 0), PDC_ERR_INVALID_ARG, "option patterns");
    expect_transform_error(m, "prune-pattern", opt_f("patterns", 8.5f), PDC_ERR_INVALID_ARG, "expected an integer");
    /* layers */
    expect_transform_error(m, "prune-pattern", opt_s("layers", "a,zz"), PDC_ERR_NOT_FOUND,
                           "option layers: model 'convs' has no layer 'zz'");
    expect_transform_error(m, "prune-pattern", opt_s("skip", "zz"), PDC_ERR_NOT_FOUND, "option skip: model 'convs' has "
                           "no layer 'zz'");
    o = opt_s("layers", "a");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "skip", "b"));
    expect_transform_error(m, "prune-pattern", o, PDC_ERR_INVALID_ARG, "layers and skip exclude each other");
    expect_transform_error(m, "prune-pattern,prune-connectivity", opt_s("layers", "a,fc"), PDC_ERR_INVALID_ARG,
                           "option layers: layer 'fc' is not changed by any pass of pipeline "
                           "\"prune-pattern,prune-connectivity\"; prune-pattern takes 2-D convs");
    expect_transform_error(m, "canonicalize", opt_s("layers", "a"), PDC_ERR_INVALID_ARG,
                           "only the prune-* passes and reorder take a layer list");
    expect_transform_error(m, "prune-pattern", opt_s("layers", "a,,b"), PDC_ERR_INVALID_ARG, "empty layer name");
    /* options */
    expect_transform_error(m, "plan", opt_i("bogus", 1), PDC_ERR_INVALID_ARG,
                           "unknown option 'bogus' (known options: patterns, pattern_size, connectivity");
    expect_transform_error(m, "plan", opt_s("print_after", "pln"), PDC_ERR_INVALID_ARG,
                           "option print_after: expected \"all\" or a pass name");
    o = opt_s("print_after", "plan");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "print_file", "/nonexistent-dir/x.pdcir"));
    expect_transform_error(m, "plan", o, PDC_ERR_IO, "option print_file: cannot open '/nonexistent-dir/x.pdcir'");
    /* a later pass failing leaves everything as it was (the earlier passes' work is dropped too) */
    o = opt_s("connectivity", "b=0.5");
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "pattern_size", 9));
    expect_transform_error(m, "prune-pattern,prune-connectivity", o, PDC_ERR_INVALID_ARG, "9 entries");
    /* with layers that exclude the 5x5 conv, pattern_size 10 fits no layer: the first error is for layer a */
    pdc_model_destroy(m);
}
END_TEST

START_TEST(projection_bad_input)
{
    float w[18] = {0}, keep_before[18];
    for (int i = 0; i < 18; i++) w[i] = (float)i;
    memcpy(keep_before, w, sizeof w);
    uint64_t pat[4] = {0};
    int32_t kp[2];
    uint8_t keep[8];
    ck_assert_int_eq(pdc_prune_project_pattern(NULL, w, 2, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_str_eq(pdc_context_last_error(NULL), "pdc_prune_project_pattern: ctx is NULL");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, NULL, 2, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pdc_prune_project_pattern: weights is NULL");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 0, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "out_channels is 0");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 1, 1, 2, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "the 2x3 window has no centre");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 1, 1, 9, 9, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "81 entries (at most 64)");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 0, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "at least 1");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 4, 0x8, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown flag bits 0x8");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 4, PDC_PROJECT_KEEP_PRUNED, pat, NULL),
                     PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "needs kernel_pattern");
    uint64_t bad[1] = {0x200};
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 0, PDC_PROJECT_GIVEN_PATTERNS, bad, kp),
                     PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pattern 0 (0x200) is empty or outside the 3x3 window");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 2, 1, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "2 patterns requested, but only 1 patterns of 1 entries");
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, 1, 9, 1.0, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pdc_prune_project_connectivity: connectivity rate 1 is outside [0, 1)");
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, 1, 9, NAN, keep), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, -1, 9, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "in_channels is -1");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, w, 2, 9, 0, 4, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "block rows is 0");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, w, 2, 9, 1, 4, -0.1, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "block rate -0.1 is outside [0, 1)");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, NULL, 2, 9, 1, 4, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_prune_project_unstructured(ctx, w, 0, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "n must be at least 1");
    ck_assert_status(ctx, pdc_prune_project_unstructured(ctx, w, 18, 1.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unstructured rate 1.5 is outside [0, 1)");
    /* a failed call changed nothing */
    ck_assert_mem_eq(w, keep_before, sizeof w);
}
END_TEST

/* ------------------------------------------------------------------ determinism */

static void slurp(const char *path, char **data, long *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)*size + 1);
    ck_assert_uint_eq(fread(*data, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
}

START_TEST(pruning_is_deterministic)
{
    char p1[] = "/tmp/pdc_det1_XXXXXX", p2[] = "/tmp/pdc_det2_XXXXXX";
    int f1 = mkstemp(p1), f2 = mkstemp(p2);
    ck_assert(f1 >= 0 && f2 >= 0);
    close(f1);
    close(f2);
    static const char pipeline[] = "canonicalize,prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    for (int run = 0; run < 2; run++) {
        pdc_model *m = canon_model();
        ck_assert_ok(ctx, transform(m, pipeline, opt_s("connectivity", "0.6,conv4=0.3")));
        ck_assert_ok(ctx, pdc_model_save(m, run ? p2 : p1));
        pdc_model_destroy(m);
    }
    char *a, *b;
    long na, nb;
    slurp(p1, &a, &na);
    slurp(p2, &b, &nb);
    ck_assert_int_eq(na, nb);
    ck_assert_msg(!memcmp(a, b, (size_t)na), "two runs gave different .pdc files");
    free(a);
    free(b);
    /* and loading the result and running the pipeline's pruning again changes nothing */
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_load(ctx, p1, &m));
    pdc_model *before = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-connectivity", opt_s("connectivity", "0.6,conv4=0.3")));
    for (size_t t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].kind == IR_TENSOR_CONST)
            ck_assert_mem_eq(m->tensors[t].data, before->tensors[t].data, ir_tensor_numel(&m->tensors[t]) * 4);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
    unlink(p1);
    unlink(p2);
}
END_TEST

/* ------------------------------------------------------------------ out of memory */

START_TEST(out_of_memory_anywhere_leaves_the_model_unchanged)
{
    /* The N-th allocation fails, for every N until the pipeline gets through: each failure is
     * reported as out-of-memory and leaves the model as it was (the sanitizer and valgrind runs check
     * that nothing leaks on any of these paths). */
    if (pdc_context_set_option(ctx, "fail_alloc_after", "0") != PDC_OK) return; /* not in this build */
    static const char pipeline[] = "canonicalize,prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    pdc_model *m = canon_model(), *want = clone(m);
    pdc_attrs *o = opt_s("connectivity", "0.5,conv2=0.7");
    ck_assert_ok(ctx, pdc_model_transform(want, pipeline, o));
    char *before = text_of(m);
    int done = 0, failures = 0;
    for (int n = 1; n < 1000000 && !done; n++) {
        char v[32], left[32];
        snprintf(v, sizeof v, "%d", n);
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", v));
        pdc_status st = pdc_model_transform(m, pipeline, o);
        ck_assert_ok(ctx, pdc_context_get_option(ctx, "fail_alloc_after", left, sizeof left));
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "0"));
        if (st == PDC_OK) {
            ck_assert_msg(strcmp(left, "0") != 0, "allocation %d failed but the pipeline reported success", n);
            done = 1;
        } else {
            ck_assert_msg(st == PDC_ERR_OUT_OF_MEMORY, "allocation %d: %s: %s", n, pdc_status_string(st),
                          pdc_context_last_error(ctx));
            assert_unchanged(m, before);
            failures++;
        }
    }
    ck_assert(done && failures > 100);
    char *got = text_of(m), *expect = text_of(want);
    ck_assert_str_eq(got, expect);
    pdc_string_free(got);
    pdc_string_free(expect);
    pdc_string_free(before);
    pdc_attrs_destroy(o);
    pdc_model_destroy(want);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ IR helpers */

START_TEST(compact_refuses_dangling_references)
{
    pdc_model *m = conv_model();
    char *before = text_of(m);
    uint8_t *dt = calloc(m->n_tensors, 1);
    dt[ir_model_find_tensor(m, "wb")] = 1;
    ck_assert_status(ctx, ir_model_compact(m, NULL, dt), PDC_ERR_INTERNAL);
    ck_assert_error_has(ctx, "layer 'b' still reads removed tensor 'wb'");
    assert_unchanged(m, before);
    uint8_t *dl = calloc(m->n_layers, 1);
    dl[ir_model_find_layer(m, "fc")] = 1;
    ck_assert_status(ctx, ir_model_compact(m, dl, NULL), PDC_ERR_INTERNAL);
    ck_assert_error_has(ctx, "tensor 'y' is kept but its layer 'fc' is removed");
    assert_unchanged(m, before);
    free(dt);
    free(dl);
    pdc_string_free(before);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("passes");
    TCase *tc = tcase_create("passes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, prune_pattern_properties);
    tcase_add_test(tc, pattern_projection_matches_brute_force);
    tcase_add_test(tc, pattern_tie_breaks);
    tcase_add_test(tc, connectivity_rate_is_exact);
    tcase_add_test(tc, connectivity_on_dense_conv_and_removed_norms_are_smallest);
    tcase_add_test(tc, block_masks_are_whole_blocks);
    tcase_add_test(tc, unstructured_removes_the_smallest);
    tcase_add_test(tc, defaults_leave_the_stem_big_kernels_and_1x1_convs_dense);
    tcase_add_test(tc, listed_layers_override_the_defaults);
    tcase_add_test(tc, stems_are_found_through_layers_without_weights);
    tcase_add_test(tc, passes_report_progress_through_the_layers);
    tcase_add_test(tc, canonicalize_keeps_outputs);
    tcase_add_test(tc, canonicalize_respects_sharing_and_readers);
    tcase_add_test(tc, fused_activation_hand_computed);
    tcase_add_test(tc, pass_attributes_are_validated);
    tcase_add_test(tc, out_perm_hand_computed);
    tcase_add_test(tc, reorder_keeps_outputs_and_groups_filters);
    tcase_add_test(tc, plan_places_activations_without_overlap);
    tcase_add_test(tc, plan_needs_concrete_shapes);
    tcase_add_test(tc, full_pipeline_verifies_and_prints_after_every_pass);
    tcase_add_test(tc, pass_table_and_info);
    tcase_add_test(tc, bad_input_has_status_and_message);
    tcase_add_test(tc, projection_bad_input);
    tcase_add_test(tc, pruning_is_deterministic);
    tcase_add_test(tc, compact_refuses_dangling_references);
    tcase_add_test(tc, out_of_memory_anywhere_leaves_the_model_unchanged);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
