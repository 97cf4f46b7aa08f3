/*
 * test_group.c - groups of models (pdc_model_group, pdc_compile_group, the share pass): what is shared
 * and what is not, outputs bit for bit those of each model compiled alone, names, and errors.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "test/common/model_builder.h"

static void setup(void) { mb_open("m"); }
static void teardown(void) { mb_close(); }

/* mdl, handed over; mdl becomes a fresh empty model. */
static pdc_model *take_model(void)
{
    pdc_model *m = mdl;
    ck_assert_ok(ctx, pdc_model_create(ctx, "m", &mdl));
    return m;
}

#define BACKBONE_LAYERS 8

/* A small classifier on input `in` ([1,4,8,8] unless side says otherwise): two 3x3 convs with relus
 * (weights from seeds 1 and 2: the backbone every variant shares), then a head conv, pooling and an fc
 * whose weights come from `head_seed` (the fine-tuned part). ulp: the first backbone weight moved by
 * one ulp. */
static pdc_model *classifier(const char *in, int64_t side, uint32_t head_seed, int ulp)
{
    pdc_attrs *pads = set_ints(attrs(), "pads", DIMS(1, 1, 1, 1));
    input(in, DIMS(1, 4, side, side));
    size_t n = 8 * 4 * 9;
    float *w1 = malloc(n * sizeof *w1);
    ck_assert_ptr_nonnull(w1);
    test_fill_random(w1, n, 1);
    if (ulp) w1[0] = nextafterf(w1[0], 2.0f);
    constant("w1", DIMS(8, 4, 3, 3), w1);
    free(w1);
    constant_rand("w2", DIMS(8, 8, 3, 3), 0.5f, 2);
    constant_rand("w3", DIMS(6, 8, 3, 3), 0.5f, head_seed);
    constant_rand("w4", DIMS(3, 6), 0.5f, head_seed + 1);
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, "c1", "conv", NAMES(in, "w1"), NAMES("y1"), pads));
    layer("relu", NULL, "r1", NAMES("y1"));
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, "c2", "conv", NAMES("r1", "w2"), NAMES("y2"), pads));
    layer("relu", NULL, "r2", NAMES("y2"));
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, "head", "conv", NAMES("r2", "w3"), NAMES("y3"), pads));
    pdc_attrs_destroy(pads);
    layer("global_avgpool", NULL, "pool", NAMES("y3"));
    layer("flatten", NULL, "flat", NAMES("pool"));
    layer("fc", NULL, "logits", NAMES("flat", "w4"));
    output("logits");
    return take_model();
}

static size_t program_layers(const pdc_program *p)
{
    size_t n;
    ck_assert_ok(ctx, pdc_program_num_layers(p, &n));
    return n;
}

/* Runs p on inputs filled from seed (input i: seed + i... as program_tensors) and returns output `out`'s
 * values (malloc'd, *n elements). */
static float *run_output(const pdc_program *p, uint32_t seed, const char *out, size_t *n)
{
    size_t n_in, n_out, k;
    pdc_tensor **tin, **tout;
    program_tensors(p, seed, &n_in, &tin, &n_out, &tout);
    ck_assert_ok(ctx, pdc_program_run(p, n_in, tin, n_out, tout));
    ck_assert_ok(ctx, pdc_program_find_output(p, out, &k));
    *n = pdc_tensor_size(tout[k]);
    float *v = malloc(*n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    memcpy(v, pdc_tensor_data(tout[k]), *n * sizeof *v);
    free_tensors(tin, n_in);
    free_tensors(tout, n_out);
    return v;
}

/* Each model's output in the group equals, bit for bit, the model compiled alone (one shared input "x"
 * filled from the same seed). */
static void expect_same_as_alone(pdc_model *const *models, size_t n, const pdc_program *group, const char *target)
{
    for (size_t k = 0; k < n; k++) {
        pdc_program *alone;
        ck_assert_ok(ctx, pdc_compile(ctx, models[k], target, &alone));
        char name[32];
        snprintf(name, sizeof name, "%zu/logits", k);
        size_t na, ng;
        float *a = run_output(alone, 7, "logits", &na);
        float *g = run_output(group, 7, name, &ng);
        ck_assert_uint_eq(na, ng);
        ck_assert_msg(!memcmp(a, g, na * sizeof *a), "%s: model %zu's output differs in the group", target, k);
        free(a);
        free(g);
        pdc_program_destroy(alone);
    }
}

static const char *const targets[] = {"ref", "cpu"};

START_TEST(variants_share_their_backbone)
{
    pdc_model *m[2] = {classifier("x", 8, 10, 0), classifier("x", 8, 20, 0)};
    for (size_t t = 0; t < 2; t++) {
        pdc_program *g;
        ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, targets[t], &g));
        /* c1, r1, c2, r2 once; each head (conv, pool, flatten, fc) its own */
        ck_assert_uint_eq(program_layers(g), 2 * BACKBONE_LAYERS - 4);
        size_t n;
        ck_assert_ok(ctx, pdc_program_num_inputs(g, &n));
        ck_assert_uint_eq(n, 1);
        expect_same_as_alone(m, 2, g, targets[t]);
        pdc_program_destroy(g);
    }
    pdc_model_destroy(m[0]);
    pdc_model_destroy(m[1]);
}
END_TEST

START_TEST(a_model_twice_shares_all_but_its_output)
{
    pdc_model *a = classifier("x", 8, 10, 0);
    pdc_model *m[2] = {a, a};
    pdc_program *g;
    ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &g));
    ck_assert_uint_eq(program_layers(g), BACKBONE_LAYERS + 1); /* the fc writes each model's output */
    expect_same_as_alone(m, 2, g, "cpu");
    pdc_program_destroy(g);
    pdc_model_destroy(a);
}
END_TEST

START_TEST(one_ulp_apart_is_not_shared)
{
    pdc_model *m[2] = {classifier("x", 8, 10, 0), classifier("x", 8, 10, 1)};
    pdc_program *g;
    ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &g));
    /* w1 differs in one weight: c1 is not shared, so nothing after it is; w2..w4 are stored once */
    ck_assert_uint_eq(program_layers(g), 2 * BACKBONE_LAYERS);
    expect_same_as_alone(m, 2, g, "cpu");
    pdc_program_destroy(g);
    pdc_model_destroy(m[0]);
    pdc_model_destroy(m[1]);
}
END_TEST

START_TEST(inputs_are_shared_by_name_and_shape)
{
    pdc_model *m[2] = {classifier("x", 8, 10, 0), classifier("x", 16, 20, 0)};
    pdc_model *g = NULL;
    ck_assert_status(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 2, NULL, &g), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "input 'x' of model 1 has shape 1x4x16x16");
    ck_assert_error_has(ctx, "1x4x8x8");
    ck_assert_ptr_null(g);
    pdc_attrs *o = set_int(attrs(), "share_inputs", 0);
    ck_assert_ok(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 2, o, &g));
    pdc_attrs_destroy(o);
    size_t n;
    const char *name;
    ck_assert_ok(ctx, pdc_model_num_inputs(g, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(ctx, pdc_model_input_info(g, 1, &name, NULL, NULL));
    ck_assert_str_eq(name, "1/x");
    ck_assert_ok(ctx, pdc_model_output_info(g, 1, &name, NULL, NULL));
    ck_assert_str_eq(name, "1/logits");
    pdc_model_destroy(g);
    pdc_model_destroy(m[1]);

    /* different input names, different shapes: two inputs, nothing computed twice is shared */
    m[1] = classifier("y", 16, 10, 0);
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &p));
    ck_assert_uint_eq(program_layers(p), 2 * BACKBONE_LAYERS);
    size_t ix, iy;
    ck_assert_ok(ctx, pdc_program_find_input(p, "x", &ix));
    ck_assert_ok(ctx, pdc_program_find_input(p, "y", &iy));
    ck_assert_uint_ne(ix, iy);
    pdc_program_destroy(p);
    pdc_model_destroy(m[0]);
    pdc_model_destroy(m[1]);
}
END_TEST

START_TEST(names_and_errors)
{
    size_t live0, live1;
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &live0));
    pdc_model *a = classifier("x", 8, 10, 0);
    pdc_model *m[2] = {a, NULL};
    pdc_model *g = NULL;
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 0, NULL, &g), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "at least one model");
    ck_assert_status(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 2, NULL, &g), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "model 1 is NULL");
    ck_assert_status(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &p), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    pdc_attrs *o = set_int(attrs(), "share_input", 1);
    ck_assert_status(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 1, o, &g), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown option 'share_input'");
    pdc_attrs_destroy(o);
    o = set_int(attrs(), "share_inputs", 2);
    ck_assert_status(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 1, o, &g), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "share_inputs must be the int 0 or 1");
    pdc_attrs_destroy(o);
    ck_assert_status(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 1, "tpu", &p), PDC_ERR_UNKNOWN_TARGET);

    ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 1, "ref", &p));
    size_t i = 99;
    ck_assert_ok(ctx, pdc_program_find_output(p, "0/logits", &i));
    ck_assert_uint_eq(i, 0);
    ck_assert_status(ctx, pdc_program_find_output(p, "logits", &i), PDC_ERR_NOT_FOUND);
    ck_assert_error_has(ctx, "no output named 'logits'");
    ck_assert_status(ctx, pdc_program_find_input(p, "0/x", &i), PDC_ERR_NOT_FOUND);
    ck_assert_status(ctx, pdc_program_find_input(p, NULL, &i), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(pdc_program_find_input(NULL, "x", &i), PDC_ERR_INVALID_ARG);
    pdc_program_destroy(p);
    /* the handles the group calls made are gone again (a group counts as pdc_model_create's model) */
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &live1));
    ck_assert_uint_eq(live1, live0 + 1); /* a */
    ck_assert_ok(ctx, pdc_model_group(ctx, (const pdc_model *const *)m, 1, NULL, &g));
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &live1));
    ck_assert_uint_eq(live1, live0 + 2);
    pdc_model_destroy(g);
    pdc_model_destroy(a);
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &live1));
    ck_assert_uint_eq(live1, live0);
}
END_TEST

/* The share pass on one model: two copies of a constant and two identical branches. */
/* One model of a group runs alone: its output NULL, the other model's layers are skipped (they read
 * an input left NULL) and the wanted output is bit for bit the full run's. */
START_TEST(one_model_runs_alone)
{
    pdc_model *m[2] = {classifier("x", 8, 10, 0), classifier("z", 8, 20, 0)};
    for (size_t t = 0; t < 2; t++) {
        pdc_program *g;
        ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, targets[t], &g));
        size_t n_in, n_out, ix, iz, o0, o1;
        pdc_tensor **tin, **tout;
        program_tensors(g, 7, &n_in, &tin, &n_out, &tout);
        ck_assert_uint_eq(n_in, 2);
        ck_assert_ok(ctx, pdc_program_find_input(g, "x", &ix));
        ck_assert_ok(ctx, pdc_program_find_input(g, "z", &iz));
        ck_assert_ok(ctx, pdc_program_find_output(g, "0/logits", &o0));
        ck_assert_ok(ctx, pdc_program_find_output(g, "1/logits", &o1));
        ck_assert_ok(ctx, pdc_program_run(g, n_in, tin, n_out, tout));
        float full[3];
        memcpy(full, pdc_tensor_data(tout[o0]), sizeof full);
        memset(pdc_tensor_data(tout[o0]), 0, sizeof full);

        pdc_tensor *z = tin[iz], *y1 = tout[o1];
        tin[iz] = NULL;
        tout[o1] = NULL;
        ck_assert_ok(ctx, pdc_program_run(g, n_in, tin, n_out, tout));
        ck_assert_msg(!memcmp(full, pdc_tensor_data(tout[o0]), sizeof full), "%s: model 0 alone differs", targets[t]);
        if (!strcmp(targets[t], "cpu")) { /* model 1's layers do not run at all */
            size_t nl = program_layers(g);
            double *ms = calloc(nl, sizeof *ms);
            ck_assert_ptr_nonnull(ms);
            for (int partial = 0; partial < 2; partial++) {
                tin[iz] = partial ? NULL : z;
                tout[o1] = partial ? NULL : y1;
                ck_assert_ok(ctx, pdc_program_run_timed(g, n_in, tin, n_out, tout, ms));
                size_t ran = 0;
                for (size_t li = 0; li < nl; li++) {
                    const char *name;
                    ck_assert_ok(ctx, pdc_program_layer_kernel(g, li, &name, NULL));
                    if (!strncmp(name, "1/", 2)) ran += ms[li] > 0;
                }
                ck_assert_msg(partial ? ran == 0 : ran > 0, "partial %d: %zu of model 1's layers ran", partial, ran);
            }
            free(ms);
            tin[iz] = NULL;
            tout[o1] = NULL;
        }
        /* model 0's input is needed; nothing wanted is refused */
        pdc_tensor *x = tin[ix];
        tin[ix] = NULL;
        ck_assert_status(ctx, pdc_program_run(g, n_in, tin, n_out, tout), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "input 'x' is NULL");
        tin[ix] = x;
        pdc_tensor *y0 = tout[o0];
        tout[o0] = NULL;
        ck_assert_status(ctx, pdc_program_run(g, n_in, tin, n_out, tout), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "every output is NULL");
        tout[o0] = y0;
        /* every output wanted: every input must be given */
        tout[o1] = y1;
        ck_assert_status(ctx, pdc_program_run(g, n_in, tin, n_out, tout), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "input 'z' is NULL");
        tin[iz] = z;
        free_tensors(tin, n_in);
        free_tensors(tout, n_out);
        pdc_program_destroy(g);
    }
    pdc_model_destroy(m[0]);
    pdc_model_destroy(m[1]);
}
END_TEST

START_TEST(share_pass_on_one_model)
{
    input("x", DIMS(2, 6));
    float w[12];
    test_fill_random(w, 12, 3);
    constant("wa", DIMS(2, 6), w);
    constant("wb", DIMS(2, 6), w);
    layer("fc", NULL, "a", NAMES("x", "wa"));
    layer("fc", NULL, "b", NAMES("x", "wb"));
    layer("relu", NULL, "ra", NAMES("a"));
    layer("relu", NULL, "rb", NAMES("b"));
    layer("add", NULL, "y", NAMES("ra", "rb"));
    output("y");
    pdc_program *before;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &before));
    ck_assert_ok(ctx, pdc_model_transform(mdl, "share", NULL));
    size_t n;
    ck_assert_ok(ctx, pdc_model_num_layers(mdl, &n));
    ck_assert_uint_eq(n, 3); /* fc, relu, add */
    pdc_program *after;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &after));
    size_t n1, n2;
    float *y1 = run_output(before, 5, "y", &n1), *y2 = run_output(after, 5, "y", &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert(!memcmp(y1, y2, n1 * sizeof *y1));
    free(y1);
    free(y2);
    pdc_program_destroy(before);
    pdc_program_destroy(after);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("group");
    test_add_tcase(s, "group", setup, teardown, 60,
                   TEST_LIST(variants_share_their_backbone, a_model_twice_shares_all_but_its_output,
                             one_ulp_apart_is_not_shared, inputs_are_shared_by_name_and_shape, names_and_errors,
                             one_model_runs_alone, share_pass_on_one_model));
    return test_run_suite(s);
}
