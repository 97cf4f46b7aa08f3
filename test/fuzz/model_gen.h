/*
 * model_gen.h - the model generator of the differential fuzz targets (fuzz_cpu_gen, fuzz_gpu_gen):
 * the input bytes are the choices of a generator - an op family (conv 2-D or 1-D with groups,
 * depthwise, strides, pads, dilations; fc; gemm; matmul, maybe by a pruned constant, maybe then a
 * bias add; max/avg pooling; global average pooling; batchnorm; broadcasting add/sub/mul/div; the
 * activations; softmax; concat, maybe then a transpose),
 * its sizes and attributes, a sparsity (pattern, connectivity, block or unstructured, made with the
 * pdc_prune_project_* projections so it is valid), a fused activation, maybe a batchnorm after a
 * conv and maybe an activation layer last.
 * Every input is thus a valid model, and mutations explore shapes and attributes rather than syntax.
 * Also the helpers both targets use to compile, run and compare against ref. FUZZ_PRINT_MODEL=1
 * prints each generated model as IR text (to debug a finding).
 * Included by exactly one .c file per target.
 */
#ifndef PDC_TEST_FUZZ_MODEL_GEN_H
#define PDC_TEST_FUZZ_MODEL_GEN_H

#include <math.h>

#include "test/fuzz/fuzz.h"

#define REL_TOL 1e-4f

/* ------------------------------------------------------------------ choices */

typedef struct bytes {
    const uint8_t *p;
    size_t n, at;
} bytes;

/* A choice in lo..hi from the next byte (lo when the input is used up). */
static int64_t pick(bytes *b, int64_t lo, int64_t hi)
{
    uint8_t v = b->at < b->n ? b->p[b->at++] : 0;
    return lo + (int64_t)(v % (uint64_t)(hi - lo + 1));
}

typedef struct gen {
    pdc_context *ctx;
    pdc_model *m;
    bytes *b;
    uint32_t seed;
    int n_const;
} gen;

static void ok(gen *g, pdc_status st, const char *what)
{
    fuzz_check(st == PDC_OK, "generated model: %s: %s: %s", what, pdc_status_string(st), pdc_context_last_error(g->ctx));
}

static float *weights(gen *g, size_t n, double scale)
{
    float *w = malloc(n ? n * sizeof *w : 1);
    fuzz_check(w != NULL, "malloc");
    uint32_t s = ++g->seed * 2654435761u + 7u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        w[i] = (float)(((double)s / 2147483648.0 - 1.0) * scale);
    }
    return w;
}

/* Adds constant NAME (returned, static buffer) of the given shape with scaled random values. */
static const char *constant(gen *g, size_t rank, const int64_t *dims, double scale, float *data_out_or_null)
{
    static char names[16][16];
    char *name = names[g->n_const % 16];
    snprintf(name, 16, "k%d", g->n_const++);
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *w = data_out_or_null ? data_out_or_null : weights(g, n, scale);
    ok(g, pdc_model_add_constant(g->m, name, rank, dims, w), "constant");
    if (!data_out_or_null) free(w);
    return name;
}

static pdc_attrs *attrs(gen *g)
{
    pdc_attrs *a = NULL;
    ok(g, pdc_attrs_create(g->ctx, &a), "attrs");
    return a;
}

/* A fused activation on conv/fc/gemm, or none. */
static void maybe_activation(gen *g, pdc_attrs *a)
{
    static const char *const acts[] = {"relu", "clip", "leaky_relu", "sigmoid", "tanh", "hardswish"};
    int64_t k = pick(g->b, 0, 9);
    if (k >= 6) return;
    ok(g, pdc_attrs_set_string(a, "activation", acts[k]), "activation");
    if (k == 1) {
        ok(g, pdc_attrs_set_float(a, "act_min", (float)pick(g->b, -3, 0) / 2), "act_min");
        ok(g, pdc_attrs_set_float(a, "act_max", (float)pick(g->b, 1, 6) / 2), "act_max");
    } else if (k == 2) {
        ok(g, pdc_attrs_set_float(a, "act_alpha", (float)pick(g->b, 1, 30) / 100), "act_alpha");
    }
}

/* Sparsity for a weight [O, C/g, k...] or [O, K]: none, pattern (odd square 2-D kernel, group 1),
 * connectivity, block or unstructured, projected so that it is exactly valid. */
static void sparsify(gen *g, const char *name, float *w, size_t rank, const int64_t *dims, int conv_group)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    int64_t kind = pick(g->b, 0, 4);
    int64_t o = dims[0];
    if (kind == 1 && rank == 4 && conv_group == 1 && dims[2] == dims[3] && dims[2] % 2 == 1 && dims[2] >= 3) {
        int64_t kk = dims[2] * dims[3];
        size_t np = (size_t)pick(g->b, 1, 4), size = (size_t)pick(g->b, 2, kk < 5 ? kk : 5);
        uint64_t pat[4];
        int32_t *kp = malloc((size_t)(o * dims[1]) * sizeof *kp);
        fuzz_check(kp != NULL, "malloc");
        pdc_status st = pdc_prune_project_pattern(g->ctx, w, o, dims[1], dims[2], dims[3], np, size, 0, pat, kp);
        if (st == PDC_OK) {
            if (pick(g->b, 0, 1)) {
                uint8_t *keep = malloc((size_t)(o * dims[1]));
                fuzz_check(keep != NULL, "malloc");
                ok(g, pdc_prune_project_connectivity(g->ctx, w, o, dims[1], kk, (double)pick(g->b, 0, 8) / 10, keep),
                   "connectivity");
                for (int64_t i = 0; i < o * dims[1]; i++)
                    if (!keep[i]) kp[i] = -1;
                free(keep);
            }
            ok(g, pdc_model_add_constant(g->m, name, rank, dims, w), "weight");
            ok(g, pdc_model_set_sparsity_pattern(g->m, name, dims[2], dims[3], np, pat, (size_t)(o * dims[1]), kp),
               "pattern sparsity");
            free(kp);
            return;
        }
        free(kp); /* too many patterns for this size: fall through to dense */
        kind = 0;
    }
    if (kind == 3) {
        /* the matrix view of pdc_model_set_sparsity_block: [O, rest] for rank >= 4, else
         * [prod(leading dims), last dim] */
        int64_t rows = rank >= 4 ? o : (int64_t)(n / (size_t)dims[rank - 1]), cols = (int64_t)n / rows;
        static const int64_t shapes[][2] = {{1, 4}, {4, 1}, {2, 2}, {1, 8}, {4, 4}, {1, 1}};
        const int64_t *bs = shapes[pick(g->b, 0, 5)];
        int64_t nb = ((rows + bs[0] - 1) / bs[0]) * ((cols + bs[1] - 1) / bs[1]);
        uint8_t *keep = malloc((size_t)nb);
        fuzz_check(keep != NULL, "malloc");
        ok(g, pdc_prune_project_block(g->ctx, w, rows, cols, bs[0], bs[1], (double)pick(g->b, 0, 9) / 10, keep),
           "block");
        ok(g, pdc_model_add_constant(g->m, name, rank, dims, w), "weight");
        ok(g, pdc_model_set_sparsity_block(g->m, name, bs[0], bs[1], (size_t)nb, keep), "block sparsity");
        free(keep);
        return;
    }
    if (kind == 4 || kind == 2) {
        uint8_t *keep = malloc(n);
        fuzz_check(keep != NULL, "malloc");
        ok(g, pdc_prune_project_unstructured(g->ctx, w, n, (double)pick(g->b, 0, 9) / 10, keep), "unstructured");
        ok(g, pdc_model_add_constant(g->m, name, rank, dims, w), "weight");
        ok(g, pdc_model_set_sparsity_unstructured(g->m, name, n, keep), "unstructured sparsity");
        free(keep);
        return;
    }
    ok(g, pdc_model_add_constant(g->m, name, rank, dims, w), "weight");
}

static void layer(gen *g, const char *name, const char *op, size_t ni, const char *const *in, const char *out,
                  pdc_attrs *a)
{
    ok(g, pdc_model_add_layer(g->m, name, op, ni, in, 1, &out, a), op);
    pdc_attrs_destroy(a);
}

/* ------------------------------------------------------------------ the model */

/* Layer `name` := batchnorm of x over c channels (random statistics, variances 0.1 to 1.1) -> out. */
static void batchnorm(gen *g, const char *name, const char *x, int64_t c, const char *out)
{
    float *var = weights(g, (size_t)c, 1.0);
    for (int64_t i = 0; i < c; i++) var[i] = fabsf(var[i]) + 0.1f;
    char names[3][32];
    for (int i = 0; i < 3; i++) snprintf(names[i], sizeof names[i], "%s", constant(g, 1, &c, 1.0, NULL));
    const char *in[5] = {x, names[0], names[1], names[2], constant(g, 1, &c, 1.0, var)};
    free(var);
    layer(g, name, "batchnorm", 5, in, out, NULL);
}

/* Builds input "x" and layer "l1" -> "y1" of one op family, then maybe an activation "y2". */
static void build(gen *g)
{
    int64_t fam = pick(g->b, 0, 11);
    int64_t n = pick(g->b, 1, 2), c = pick(g->b, 1, 8), h = pick(g->b, 1, 12), w = pick(g->b, 1, 12);
    const char *y = "y1";
    if (fam <= 1) { /* conv: 2-D (fam 0) or 1-D */
        int nsp = fam == 0 ? 2 : 1;
        /* group 1, depthwise (group = channels) or a proper divisor of the channels */
        int64_t groups[3] = {1, c, 1}, ng = 2;
        for (int64_t dv = 2; dv < c && ng == 2; dv++)
            if (c % dv == 0) groups[ng++] = dv;
        int64_t grp = groups[pick(g->b, 0, ng - 1)];
        int64_t o = grp == 1 ? pick(g->b, 1, 8) : grp * pick(g->b, 1, 3);
        int64_t k[2], s[2], d[2], pads[4];
        for (int i = 0; i < nsp; i++) {
            k[i] = pick(g->b, 1, 5), s[i] = pick(g->b, 1, 3), d[i] = pick(g->b, 1, 2);
            pads[i] = pick(g->b, 0, 2), pads[i + nsp] = pick(g->b, 0, 2);
        }
        int64_t xd[4] = {n, c, h, w}, sp[2] = {h, w};
        if (nsp == 1) xd[2] = h * w / 2 + 1, sp[0] = xd[2];
        /* keep the output non-empty: padded extent >= dilated kernel */
        for (int i = 0; i < nsp; i++)
            while (sp[i] + pads[i] + pads[i + nsp] < (k[i] - 1) * d[i] + 1) k[i]--, d[i] = 1;
        ok(g, pdc_model_add_input(g->m, "x", (size_t)(2 + nsp), xd), "input");
        int64_t wd[4] = {o, c / grp, k[0], nsp == 2 ? k[1] : 0};
        size_t wn = (size_t)(o * (c / grp) * k[0] * (nsp == 2 ? k[1] : 1));
        float *wv = weights(g, wn, 1.0 / sqrt((double)(wn / (size_t)o)));
        sparsify(g, "w", wv, (size_t)(2 + nsp), wd, (int)grp);
        free(wv);
        const char *in[3] = {"x", "w", NULL};
        size_t ni = 2;
        if (pick(g->b, 0, 1)) in[2] = constant(g, 1, &o, 0.5, NULL), ni = 3;
        pdc_attrs *a = attrs(g);
        ok(g, pdc_attrs_set_ints(a, "strides", (size_t)nsp, s), "strides");
        ok(g, pdc_attrs_set_ints(a, "dilations", (size_t)nsp, d), "dilations");
        ok(g, pdc_attrs_set_ints(a, "pads", (size_t)(2 * nsp), pads), "pads");
        ok(g, pdc_attrs_set_int(a, "group", grp), "group");
        maybe_activation(g, a);
        layer(g, "l1", "conv", ni, in, "y1", a);
        if (pick(g->b, 0, 1)) { /* the cpu target folds it into the conv */
            batchnorm(g, "l1b", "y1", o, "y1b");
            y = "y1b";
        }
    } else if (fam == 2) { /* fc */
        /* batch n * h (1..24): the sparse and packed-dense kernels' several-samples forms too */
        int64_t k = c * h, o = pick(g->b, 1, 16), xd[2] = {n * h, k}, wd[2] = {o, k};
        ok(g, pdc_model_add_input(g->m, "x", 2, xd), "input");
        float *wv = weights(g, (size_t)(o * k), 1.0 / sqrt((double)k));
        sparsify(g, "w", wv, 2, wd, 1);
        free(wv);
        const char *in[3] = {"x", "w", NULL};
        size_t ni = 2;
        if (pick(g->b, 0, 1)) in[2] = constant(g, 1, &o, 0.5, NULL), ni = 3;
        pdc_attrs *a = attrs(g);
        maybe_activation(g, a);
        layer(g, "l1", "fc", ni, in, "y1", a);
    } else if (fam == 3) { /* gemm with a constant B */
        int64_t mm = n * h, k = c * 2, nn = pick(g->b, 1, 12), tb = pick(g->b, 0, 1);
        int64_t xd[2] = {mm, k}, bd[2] = {tb ? nn : k, tb ? k : nn};
        ok(g, pdc_model_add_input(g->m, "x", 2, xd), "input");
        const char *in[3] = {"x", constant(g, 2, bd, 1.0 / sqrt((double)k), NULL), NULL};
        size_t ni = 2;
        if (pick(g->b, 0, 1)) in[2] = constant(g, 1, &nn, 0.5, NULL), ni = 3;
        pdc_attrs *a = attrs(g);
        ok(g, pdc_attrs_set_int(a, "transB", tb), "transB");
        ok(g, pdc_attrs_set_float(a, "alpha", (float)pick(g->b, 1, 4) / 2), "alpha");
        ok(g, pdc_attrs_set_float(a, "beta", (float)pick(g->b, 0, 4) / 2), "beta");
        maybe_activation(g, a);
        layer(g, "l1", "gemm", ni, in, "y1", a);
    } else if (fam == 4) { /* matmul: batched input by a constant or by a second input */
        int64_t k = c, nn = pick(g->b, 1, 10), xd[3] = {n, h, k}, bd[2] = {k, nn};
        ok(g, pdc_model_add_input(g->m, "x", 3, xd), "input");
        const char *in[2] = {"x", NULL};
        if (pick(g->b, 0, 1)) {
            ok(g, pdc_model_add_input(g->m, "x2", 2, bd), "input");
            in[1] = "x2";
        } else { /* maybe pruned: the cpu target runs it on the fc's kernels, transposed */
            float *wv = weights(g, (size_t)(k * nn), 1.0 / sqrt((double)k));
            sparsify(g, "w", wv, 2, bd, 1);
            free(wv);
            in[1] = "w";
        }
        layer(g, "l1", "matmul", 2, in, "y1", NULL);
        if (pick(g->b, 0, 1)) { /* a bias along the last axis: the cpu target adds it in the epilogue */
            int64_t cd[3] = {1, 1, nn};
            size_t crank = (size_t)pick(g->b, 1, 3);
            const char *bin[2] = {"y1", constant(g, crank, cd + 3 - crank, 0.5, NULL)};
            layer(g, "l1b", "add", 2, bin, "y1b", NULL);
            y = "y1b";
        }
    } else if (fam == 5 || fam == 6) { /* pooling */
        int64_t xd[4] = {n, c, h, w}, k[2] = {pick(g->b, 1, 4), pick(g->b, 1, 4)},
                s[2] = {pick(g->b, 1, 3), pick(g->b, 1, 3)}, pads[4];
        for (int i = 0; i < 2; i++) {
            if (k[i] > (i ? w : h)) k[i] = i ? w : h;
            pads[i] = pick(g->b, 0, k[i] - 1), pads[i + 2] = pick(g->b, 0, k[i] - 1);
        }
        ok(g, pdc_model_add_input(g->m, "x", 4, xd), "input");
        pdc_attrs *a = attrs(g);
        ok(g, pdc_attrs_set_ints(a, "kernel_shape", 2, k), "kernel_shape");
        ok(g, pdc_attrs_set_ints(a, "strides", 2, s), "strides");
        ok(g, pdc_attrs_set_ints(a, "pads", 4, pads), "pads");
        ok(g, pdc_attrs_set_int(a, "ceil_mode", pick(g->b, 0, 1)), "ceil_mode");
        if (fam == 6) ok(g, pdc_attrs_set_int(a, "count_include_pad", pick(g->b, 0, 1)), "count_include_pad");
        const char *in[1] = {"x"};
        layer(g, "l1", fam == 5 ? "maxpool" : "avgpool", 1, in, "y1", a);
    } else if (fam == 7) { /* global average pool or batchnorm */
        int64_t xd[4] = {n, c, h, w};
        ok(g, pdc_model_add_input(g->m, "x", 4, xd), "input");
        const char *in[5] = {"x", NULL, NULL, NULL, NULL};
        if (pick(g->b, 0, 1)) {
            layer(g, "l1", "global_avgpool", 1, in, "y1", NULL);
        } else {
            batchnorm(g, "l1", "x", c, "y1");
        }
    } else if (fam == 8) { /* broadcasting binary op with a constant */
        static const char *const ops[] = {"add", "sub", "mul", "div"};
        int64_t xd[4] = {n, c, h, w}, cd[4];
        for (int i = 0; i < 4; i++) cd[i] = pick(g->b, 0, 1) ? xd[i] : 1;
        size_t crank = (size_t)pick(g->b, 1, 4); /* right-aligned */
        ok(g, pdc_model_add_input(g->m, "x", 4, xd), "input");
        const char *op = ops[pick(g->b, 0, 3)];
        float *cv = NULL;
        size_t cn = 1;
        for (size_t i = 4 - crank; i < 4; i++) cn *= (size_t)cd[i];
        cv = weights(g, cn, 1.0);
        if (!strcmp(op, "div"))
            for (size_t i = 0; i < cn; i++) cv[i] = cv[i] < 0 ? cv[i] - 0.5f : cv[i] + 0.5f;
        const char *k = constant(g, crank, cd + 4 - crank, 1.0, cv);
        free(cv);
        const char *in[2] = {"x", k};
        if (pick(g->b, 0, 1)) in[0] = k, in[1] = "x";
        layer(g, "l1", op, 2, in, "y1", NULL);
    } else if (fam == 9) { /* activation */
        static const char *const ops[] = {"relu", "clip", "leaky_relu", "sigmoid", "tanh", "hardswish", "hardsigmoid"};
        int64_t xd[3] = {n, c, h * w};
        ok(g, pdc_model_add_input(g->m, "x", 3, xd), "input");
        const char *op = ops[pick(g->b, 0, 6)];
        pdc_attrs *a = attrs(g);
        if (!strcmp(op, "clip")) {
            ok(g, pdc_attrs_set_float(a, "min", (float)pick(g->b, -4, 0) / 4), "min");
            ok(g, pdc_attrs_set_float(a, "max", (float)pick(g->b, 1, 8) / 4), "max");
        } else if (!strcmp(op, "leaky_relu")) {
            ok(g, pdc_attrs_set_float(a, "alpha", (float)pick(g->b, 1, 50) / 100), "alpha");
        }
        const char *in[1] = {"x"};
        layer(g, "l1", op, 1, in, "y1", a);
    } else if (fam == 10) { /* softmax */
        int64_t xd[3] = {n, c, h};
        ok(g, pdc_model_add_input(g->m, "x", 3, xd), "input");
        pdc_attrs *a = attrs(g);
        ok(g, pdc_attrs_set_int(a, "axis", pick(g->b, -3, 2)), "axis");
        const char *in[1] = {"x"};
        layer(g, "l1", "softmax", 1, in, "y1", a);
    } else { /* concat with a constant along an axis */
        int64_t xd[4] = {n, c, h, w}, axis = pick(g->b, 0, 3), cd[4];
        memcpy(cd, xd, sizeof cd);
        cd[axis] = pick(g->b, 1, 4);
        ok(g, pdc_model_add_input(g->m, "x", 4, xd), "input");
        const char *in[2] = {"x", constant(g, 4, cd, 1.0, NULL)};
        pdc_attrs *a = attrs(g);
        ok(g, pdc_attrs_set_int(a, "axis", axis), "axis");
        layer(g, "l1", "concat", 2, in, "y1", a);
        if (pick(g->b, 0, 1)) { /* then a transpose, by a permutation the input picks */
            int64_t perm[4] = {0, 1, 2, 3};
            for (int i = 3; i > 0; i--) {
                int j = (int)pick(g->b, 0, i);
                int64_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            pdc_attrs *pa = attrs(g);
            ok(g, pdc_attrs_set_ints(pa, "perm", 4, perm), "perm");
            const char *tin[1] = {"y1"};
            layer(g, "l1t", "transpose", 1, tin, "y1t", pa);
            y = "y1t";
        }
    }
    if (pick(g->b, 0, 2) == 0) {
        static const char *const ops[] = {"relu", "sigmoid", "tanh", "hardswish"};
        const char *in[1] = {y};
        layer(g, "l2", ops[pick(g->b, 0, 3)], 1, in, "y2", NULL);
        y = "y2";
    }
    ok(g, pdc_model_mark_output(g->m, y), "output");
}

/* ------------------------------------------------------------------ runs */

static pdc_tensor **run(pdc_context *ctx, const pdc_program *p, pdc_tensor **in, size_t *n_out)
{
    size_t n_in = 0;
    fuzz_check(pdc_program_num_inputs(p, &n_in) == PDC_OK && pdc_program_num_outputs(p, n_out) == PDC_OK, "io");
    pdc_tensor **out = calloc(*n_out + 1, sizeof *out);
    fuzz_check(out != NULL, "calloc");
    for (size_t i = 0; i < *n_out; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        fuzz_check(pdc_program_output_info(p, i, NULL, &rank, dims) == PDC_OK, "output info");
        fuzz_check(pdc_tensor_create(ctx, rank, dims, &out[i]) == PDC_OK, "tensor: %s", pdc_context_last_error(ctx));
    }
    pdc_status st = pdc_program_run(p, n_in, in, *n_out, out);
    fuzz_check(st == PDC_OK, "run (%s): %s: %s", pdc_program_target(p), pdc_status_string(st),
               pdc_context_last_error(ctx));
    return out;
}

static void free_outputs(pdc_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++) pdc_tensor_destroy(t[i]);
    free(t);
}

static pdc_program *compile(pdc_context *ctx, const pdc_model *m, const char *target)
{
    pdc_program *p = NULL;
    pdc_status st = pdc_compile(ctx, m, target, &p);
    if (st == PDC_ERR_UNSUPPORTED || st == PDC_ERR_UNKNOWN_TARGET) return NULL;
    fuzz_check(st == PDC_OK, "compile for %s: %s: %s", target, pdc_status_string(st), pdc_context_last_error(ctx));
    return p;
}

static pdc_context *cpu_context(const char *threads)
{
    pdc_context *ctx = fuzz_context();
    if (pdc_context_set_option(ctx, "cache_dir", "/dev/null/pdc-fuzz-no-kernel-cache") != PDC_OK ||
        pdc_context_set_option(ctx, "log_level", "error") != PDC_OK ||
        pdc_context_set_option(ctx, "threads", threads) != PDC_OK)
        fuzz_fail("context options: %s", pdc_context_last_error(ctx));
    return ctx;
}

/* Outputs of `target` within REL_TOL x max(1, max |ref|) of ref's. */
static void check_close(const char *target, pdc_tensor **y, pdc_tensor **yr, size_t n_out)
{
    for (size_t o = 0; o < n_out; o++) {
        const float *r = pdc_tensor_data(yr[o]), *c = pdc_tensor_data(y[o]);
        size_t ne = pdc_tensor_size(yr[o]);
        float scale = 1.0f;
        for (size_t i = 0; i < ne; i++) scale = fmaxf(scale, fabsf(r[i]));
        for (size_t i = 0; i < ne; i++)
            fuzz_check(fabsf(c[i] - r[i]) <= REL_TOL * scale, "element %zu of %zu: %s %.9g, ref %.9g (scale %.3g)", i,
                       ne, target, (double)c[i], (double)r[i], (double)scale);
    }
}

/* A generated model from the input bytes (FUZZ_PRINT_MODEL=1: printed to stderr). */
static pdc_model *generate(pdc_context *ctx, const uint8_t *data, size_t size, gen *g, bytes *b)
{
    *b = (bytes){data, size, 0};
    *g = (gen){.ctx = ctx, .b = b, .seed = size ? data[size - 1] : 0};
    ok(g, pdc_model_create(ctx, "gen", &g->m), "model");
    build(g);
    if (getenv("FUZZ_PRINT_MODEL")) {
        char *text = NULL;
        if (pdc_model_print(g->m, PDC_PRINT_ELIDE_WEIGHTS, &text) == PDC_OK) fputs(text, stderr);
        pdc_string_free(text);
    }
    return g->m;
}

/* Inputs for p's model from the generator's stream (free with free_inputs). */
static size_t make_inputs(gen *g, const pdc_program *p, pdc_tensor **in, size_t cap)
{
    size_t n_in = 0;
    fuzz_check(pdc_program_num_inputs(p, &n_in) == PDC_OK && n_in <= cap, "inputs");
    for (size_t i = 0; i < n_in; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        fuzz_check(pdc_program_input_info(p, i, NULL, &rank, dims) == PDC_OK, "input info");
        fuzz_check(pdc_tensor_create(g->ctx, rank, dims, &in[i]) == PDC_OK, "tensor");
        float *x = weights(g, pdc_tensor_size(in[i]), 1.0);
        memcpy(pdc_tensor_data(in[i]), x, 4 * pdc_tensor_size(in[i]));
        free(x);
    }
    return n_in;
}

static void free_inputs(pdc_tensor **in, size_t n)
{
    for (size_t i = 0; i < n; i++) pdc_tensor_destroy(in[i]);
}

#endif
