/*
 * test_nonfinite.c - non-finite values (docs/reliability.md, "Non-finite values"): NaN and Inf
 * inputs propagate as IEEE arithmetic says (relu, clip, max pool keep a NaN), pruned weights are
 * structural zeros that are never multiplied (a NaN or Inf at a pruned position does not reach the
 * output), and every target classifies each output element alike (NaN, +Inf, -Inf or finite):
 * ref, cpu and the gpu target's emulated device.
 */
#include <math.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "test/common/builders.h"
#include "test/common/internals.h"

/* test/data/onnx/NAME.onnx */
static const char *onnx_file(const char *name)
{
    static char rel[128];
    snprintf(rel, sizeof rel, "onnx/%s.onnx", name);
    return test_data_path(rel);
}

/* 'N', '+', '-' or 'f' for each element. */
static char *classify(const float *v, size_t n)
{
    char *c = malloc(n + 1);
    for (size_t i = 0; i < n; i++) c[i] = isnan(v[i]) ? 'N' : isinf(v[i]) ? (v[i] > 0 ? '+' : '-') : 'f';
    c[n] = 0;
    return c;
}

/* Runs m on target with input 0 = x (n floats); returns the classification of all its outputs,
 * one after another, or NULL if the target cannot compile here (gpu without its emulator). */
static char *run_classes(const pdc_model *m, const char *target, const float *x, size_t n)
{
    pdc_program *p;
    pdc_status st = pdc_compile(ctx, m, target, &p);
    if (st == PDC_ERR_NO_DEVICE) return NULL;
    ck_assert_ok(ctx, st);
    size_t no;
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    ck_assert_uint_le(no, 4);
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out[4];
    for (size_t i = 0; i < no; i++) out[i] = io_tensor(ctx, p, 1, i);
    ck_assert_uint_eq(pdc_tensor_size(in), n);
    memcpy(pdc_tensor_data(in), x, n * sizeof *x);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &in, no, out));
    char *c = calloc(1, 1);
    for (size_t i = 0; i < no; i++) {
        char *ci = classify(pdc_tensor_data(out[i]), pdc_tensor_size(out[i]));
        c = realloc(c, strlen(c) + strlen(ci) + 1);
        strcat(c, ci);
        free(ci);
        pdc_tensor_destroy(out[i]);
    }
    pdc_tensor_destroy(in);
    pdc_program_destroy(p);
    return c;
}

/* Every target gives ref's classification of output 0; returns ref's (free it). */
static char *same_on_every_target(const pdc_model *m, const float *x, size_t n, const char *what)
{
    char *ref = run_classes(m, "ref", x, n);
    static const char *const targets[] = {"cpu", "gpu"};
    for (size_t t = 0; t < 2; t++) {
        char *got = run_classes(m, targets[t], x, n);
        if (!got) continue;
        ck_assert_msg(!strcmp(got, ref), "%s: %s classifies\n%s\nref\n%s", what, targets[t], got, ref);
        free(got);
    }
    return ref;
}

/* x[1,4,8,8] -> conv a 3x3 (pad 1, pattern-pruned) -> relu -> maxpool 2x2 -> conv b 3x3 (pad 1,
 * pattern-pruned, clip) -> flatten -> fc (block-pruned 1x4) -> y[1,16] */
static pdc_model *pruned_model(void)
{
    pdc_model *m = new_model("nonfinite");
    add_input(m, "x", 4, (int64_t[]){1, 4, 8, 8});
    add_random(m, "wa", 4, (int64_t[]){8, 4, 3, 3}, 11, -1, 1);
    add_random(m, "wb", 4, (int64_t[]){8, 8, 3, 3}, 13, -1, 1);
    add_random(m, "fw", 2, (int64_t[]){16, 128}, 16, -0.2f, 0.2f);
    add_layer(m, "a", "conv", "x,wa", "ya", pads(1));
    add_layer(m, "ra", "relu", "ya", "za", NULL);
    pdc_attrs *pool = opt_ints("kernel_shape", 2, (const int64_t[]){2, 2});
    ck_assert_ok(ctx, pdc_attrs_set_ints(pool, "strides", 2, (const int64_t[]){2, 2}));
    add_layer(m, "p", "maxpool", "za", "pa", pool);
    add_layer(m, "b", "conv", "pa,wb", "yb", pads(1));
    pdc_attrs *clip = opt_f("min", -0.5f);
    ck_assert_ok(ctx, pdc_attrs_set_float(clip, "max", 0.5f));
    add_layer(m, "cb", "clip", "yb", "zb", clip);
    add_layer(m, "flat", "flatten", "zb", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw", "y", NULL);
    add_output(m, "y");
    pdc_attrs *o = opt_i("patterns", 4);
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "pattern_size", 4));
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "connectivity", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.75"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "layers", "a,b,fc"));
    ck_assert_ok(ctx, transform(m, "prune-pattern,prune-connectivity,prune-block", o));
    return m;
}

START_TEST(relu_clip_and_maxpool_keep_nan)
{
    /* relu of NaN is NaN (it was 0), of -Inf 0, of +Inf +Inf; clip and max pool keep a NaN */
    pdc_model *m = new_model("acts");
    add_input(m, "x", 4, (int64_t[]){1, 1, 2, 4});
    add_layer(m, "r", "relu", "x", "r", NULL);
    pdc_attrs *clip = opt_f("min", -1.0f);
    ck_assert_ok(ctx, pdc_attrs_set_float(clip, "max", 1.0f));
    add_layer(m, "c", "clip", "r", "c", clip);
    pdc_attrs *pool = opt_ints("kernel_shape", 2, (const int64_t[]){2, 2});
    ck_assert_ok(ctx, pdc_attrs_set_ints(pool, "strides", 2, (const int64_t[]){2, 2}));
    add_layer(m, "p", "maxpool", "r", "p", pool);
    add_layer(m, "s", "add", "p,p", "s", NULL);
    add_output(m, "c");
    add_output(m, "s");
    const float x[8] = {NAN, -INFINITY, INFINITY, -2.0f, 1.0f, 5.0f, -3.0f, 0.5f};
    char *c = same_on_every_target(m, x, 8, "relu, clip");
    /* c: relu then clip of NaN, -Inf, +Inf, ...; s: max pool windows (NaN, -Inf, 1, 5), (+Inf, ...) doubled */
    ck_assert_str_eq(c, "Nfffffff" "N+");
    free(c);
    /* output 1: max pool of relu: window 0 holds the NaN, window 1 the +Inf */
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out[2] = {io_tensor(ctx, p, 1, 0), io_tensor(ctx, p, 1, 1)};
    memcpy(pdc_tensor_data(in), x, sizeof x);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &in, 2, out));
    const float *r = pdc_tensor_data(out[1]);
    ck_assert(isnan(r[0]));
    ck_assert(isinf(r[1]) && r[1] > 0);
    const float *cl = pdc_tensor_data(out[0]);
    ck_assert(cl[1] == 0.0f && cl[2] == 1.0f);
    pdc_tensor_destroy(in);
    pdc_tensor_destroy(out[0]);
    pdc_tensor_destroy(out[1]);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(all_nan_input_gives_all_nan)
{
    pdc_model *m = pruned_model();
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = NAN;
    char *c = same_on_every_target(m, x, 256, "all-NaN input");
    /* every output has a kept weight that reads a NaN */
    ck_assert_str_eq(c, "NNNNNNNNNNNNNNNN");
    free(c);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(single_inf_or_nan_classified_alike_on_every_target)
{
    pdc_model *m = pruned_model();
    const float specials[] = {INFINITY, -INFINITY, NAN};
    int some_finite = 0, some_not = 0;
    for (size_t s = 0; s < 3; s++) {
        /* every 7th position; under valgrind (PDC_TEST_QUICK=1, each run compiles on three targets) every 64th */
        for (int at = 0, step = getenv("PDC_TEST_QUICK") ? 64 : 7; at < 256; at += step) {
            float x[256];
            test_fill_random(x, 256, 5u + (uint32_t)at);
            x[at] = specials[s];
            char what[64];
            snprintf(what, sizeof what, "x[%d] = %g", at, (double)specials[s]);
            char *c = same_on_every_target(m, x, 256, what);
            some_finite |= strchr(c, 'f') != NULL;
            some_not |= strpbrk(c, "N+-") != NULL;
            free(c);
        }
    }
    ck_assert(some_finite && some_not); /* the cases cover both */
    pdc_model_destroy(m);
}
END_TEST

START_TEST(nan_at_a_pruned_position_does_not_propagate)
{
    /* y = w x with w pruned to its first element (unstructured): a NaN in x[1] meets only a pruned
     * weight, so y is finite on every target; a NaN in x[0] gives NaN */
    pdc_model *m = new_model("pruned");
    add_input(m, "x", 2, (int64_t[]){1, 8});
    float w[8] = {2.0f, 0, 0, 0, 0, 0, 0, 0};
    add_values(m, "w", 2, (int64_t[]){1, 8}, w);
    uint8_t mask[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(m, "w", 8, mask));
    add_layer(m, "fc", "fc", "x,w", "y", NULL);
    add_output(m, "y");
    float x[8] = {1, NAN, INFINITY, 4, 5, 6, 7, 8};
    char *c = same_on_every_target(m, x, 8, "NaN at a pruned position");
    ck_assert_str_eq(c, "f");
    free(c);
    x[0] = NAN;
    c = same_on_every_target(m, x, 8, "NaN at a kept position");
    ck_assert_str_eq(c, "N");
    free(c);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(onnx_models_agree_on_nan_and_inf)
{
    static const char *const names[] = {"resnet_small", "pattern_cnn", "mobilenetv2_small"};
    for (size_t k = 0; k < 3; k++) {
        pdc_model *m;
        ck_assert_ok(ctx, pdc_model_load(ctx, onnx_file(names[k]), &m));
        ck_assert_ok(ctx, transform(m, "canonicalize,prune-pattern,prune-connectivity", NULL));
        pdc_program *p;
        ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
        pdc_tensor *in = io_tensor(ctx, p, 0, 0);
        size_t n = pdc_tensor_size(in);
        pdc_tensor_destroy(in);
        pdc_program_destroy(p);
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = NAN;
        char *c = same_on_every_target(m, x, n, names[k]);
        ck_assert_msg(!strpbrk(c, "f+-"), "%s: all-NaN input gave %s", names[k], c);
        free(c);
        test_fill_random(x, n, 9);
        x[n / 3] = INFINITY;
        c = same_on_every_target(m, x, n, names[k]);
        free(c);
        free(x);
        pdc_model_destroy(m);
    }
}
END_TEST

/* Runs m (one input x of n floats, one output of n_out) on target with check_finite set; returns the
 * status, the output untouched on failure (it starts as 7s). */
static pdc_status run_checked(const pdc_model *m, const char *target, const float *x, size_t n, size_t n_out)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, target, &p));
    pdc_tensor *in = io_tensor(ctx, p, 0, 0), *out = io_tensor(ctx, p, 1, 0);
    ck_assert_uint_eq(pdc_tensor_size(in), n);
    ck_assert_uint_eq(pdc_tensor_size(out), n_out);
    memcpy(pdc_tensor_data(in), x, n * sizeof *x);
    float *y = pdc_tensor_data(out);
    for (size_t i = 0; i < n_out; i++) y[i] = 7.0f;
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "check_finite", "1"));
    pdc_status st = pdc_program_run(p, 1, &in, 1, &out);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "check_finite", "0"));
    if (st != PDC_OK)
        for (size_t i = 0; i < n_out; i++) ck_assert_msg(y[i] == 7.0f, "%s: output %zu written by a failed run", target, i);
    pdc_tensor_destroy(in);
    pdc_tensor_destroy(out);
    pdc_program_destroy(p);
    return st;
}

START_TEST(check_finite_names_the_first_layer)
{
    /* x -> relu r -> mul m (by 1e30: 1e10 overflows) -> y */
    pdc_model *m = new_model("overflow");
    add_input(m, "x", 2, (int64_t[]){1, 4});
    add_values(m, "c", 1, (int64_t[]){4}, (const float[]){1e30f, 1e30f, 1e30f, 1e30f});
    add_layer(m, "r", "relu", "x", "h", NULL);
    add_layer(m, "m", "mul", "h,c", "y", NULL);
    add_output(m, "y");
    static const char *const targets[] = {"ref", "cpu"};
    for (int t = 0; t < 2; t++) {
        float x[4] = {1, 2, 1e10f, 3};
        ck_assert_status(ctx, run_checked(m, targets[t], x, 4, 4), PDC_ERR_NUMERIC);
        ck_assert_error_has(ctx, targets[t]);
        ck_assert_error_has(ctx, "check_finite: layer 'm' (mul) produced inf at element 2 of its output 'y' (1x4)");
        x[1] = NAN;
        ck_assert_status(ctx, run_checked(m, targets[t], x, 4, 4), PDC_ERR_NUMERIC);
        ck_assert_error_has(ctx, "check_finite: layer 'r' (relu) produced NaN at element 1 of its output 'h' (1x4)");
        x[1] = 2;
        x[2] = 1;
        ck_assert_ok(ctx, run_checked(m, targets[t], x, 4, 4));
    }
    pdc_model_destroy(m);

    /* conv + relu, fused into one kernel on the cpu: reported under the conv on both targets */
    m = new_model("fused");
    add_input(m, "x", 4, (int64_t[]){1, 2, 4, 4});
    add_random(m, "w", 4, (int64_t[]){4, 2, 3, 3}, 3, -1, 1);
    add_layer(m, "conv", "conv", "x,w", "c", pads(1));
    add_layer(m, "act", "relu", "c", "y", NULL);
    add_output(m, "y");
    float x[32];
    test_fill_random(x, 32, 4);
    x[9] = NAN;
    for (int t = 0; t < 2; t++) {
        ck_assert_status(ctx, run_checked(m, targets[t], x, 32, 64), PDC_ERR_NUMERIC);
        ck_assert_error_has(ctx, "check_finite: layer 'conv' (conv) produced NaN at element ");
    }
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    setenv("PDC_GPU_EMULATE", "1", 1);
    return run_tests("nonfinite", ctx_setup, ctx_teardown, 120,
                     (const TTest *const[]){relu_clip_and_maxpool_keep_nan, all_nan_input_gives_all_nan,
                                            single_inf_or_nan_classified_alike_on_every_target,
                                            nan_at_a_pruned_position_does_not_propagate,
                                            onnx_models_agree_on_nan_and_inf, check_finite_names_the_first_layer, NULL});
}
