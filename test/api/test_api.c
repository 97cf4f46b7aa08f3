/*
 * test_api.c - the public C ABI, used exactly as a client would (linked only against libpdc.so):
 * version, context options, the builder's error reporting, inspection figures, compile/run checks,
 * symbolic shapes and NULL handling. Op numerics are in test/ref/test_ref_*.c.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <unistd.h>

#include "test/common/builders.h"

/* x[1,2,4,4] -> conv 3x3 (2->3, pad 1) -> relu -> flatten -> fc (48->4) -> y */
static pdc_model *small_cnn(void)
{
    pdc_model *m = new_model("small");
    float w[54], b[3] = {0.1f, -0.2f, 0.3f}, fw[192], fb[4] = {0};
    test_fill_random(w, 54, 1);
    test_fill_random(fw, 192, 2);
    add_input(m, "x", 4, (int64_t[]){1, 2, 4, 4});
    add_values(m, "w", 4, (int64_t[]){3, 2, 3, 3}, w);
    add_values(m, "b", 1, (int64_t[]){3}, b);
    add_values(m, "fw", 2, (int64_t[]){4, 48}, fw);
    add_values(m, "fb", 1, (int64_t[]){4}, fb);
    add_layer(m, "conv", "conv", "x,w,b", "c", pads(1));
    add_layer(m, "relu", "relu", "c", "r", NULL);
    add_layer(m, "flat", "flatten", "r", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw,fb", "y", NULL);
    add_output(m, "y");
    return m;
}

START_TEST(version_matches_header)
{
    ck_assert_uint_eq(pdc_version_number(), PDC_VERSION_NUMBER);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", PDC_VERSION_MAJOR, PDC_VERSION_MINOR, PDC_VERSION_PATCH);
    ck_assert_str_eq(pdc_version_string(), want);
    ck_assert_str_eq(pdc_status_string(PDC_ERR_PARSE), "PDC_ERR_PARSE");
    ck_assert_str_eq(pdc_status_string((pdc_status)999), "unknown status");
}
END_TEST

START_TEST(options_set_get_and_reject)
{
    char buf[64];
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "3"));
    assert_context_option("threads", "3");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "log_level", "debug"));
    assert_context_option("log_level", "debug");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "log_level", "warn"));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", "/tmp/pdc-test-cache"));
    assert_context_option("cache_dir", "/tmp/pdc-test-cache");

    ck_assert_status(ctx, pdc_context_set_option(ctx, "threads", "-1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "threads");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "threads", "2x"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_context_set_option(ctx, "log_level", "loud"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "loud");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "sparsity_min_fill", "0.9"));
    assert_context_option("sparsity_min_fill", "0.9");
    static const char *const bad_fill[] = {"0", "1.5", "-0.5", "x", "0.9x", ""};
    for (size_t i = 0; i < sizeof bad_fill / sizeof bad_fill[0]; i++) {
        ck_assert_status(ctx, pdc_context_set_option(ctx, "sparsity_min_fill", bad_fill[i]), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "option sparsity_min_fill: expected a share in (0, 1]");
    }
    assert_context_option("sparsity_min_fill", "0.9");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "no_such_option", "1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "no_such_option");
    ck_assert_error_has(ctx, "allow_nonfinite, check_finite, tune, schedule)");
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "check_finite" : "allow_nonfinite";
        assert_context_option(name, "0");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, name, "1"));
        assert_context_option(name, "1");
        ck_assert_status(ctx, pdc_context_set_option(ctx, name, "yes"), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "expected 0 or 1, got \"yes\"");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, name, "0"));
    }
    ck_assert_status(ctx, pdc_context_set_option(ctx, NULL, "1"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_context_get_option(ctx, "threads", buf, 1), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "too small");
    /* A failed set changed nothing. */
    assert_context_option("threads", "3");
}
END_TEST

START_TEST(null_arguments_are_refused)
{
    ck_assert_int_eq(pdc_context_create(NULL), PDC_ERR_INVALID_ARG);
    ck_assert_str_ne(pdc_context_last_error(NULL), "");
    pdc_context_destroy(NULL);
    pdc_model_destroy(NULL);
    pdc_program_destroy(NULL);
    pdc_tensor_destroy(NULL);
    pdc_attrs_destroy(NULL);
    pdc_string_free(NULL);
    pdc_model *m = NULL;
    ck_assert_status(ctx, pdc_model_create(ctx, "m", NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_model_load(ctx, NULL, &m), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(pdc_model_add_input(NULL, "x", 1, (int64_t[]){1}), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(pdc_model_num_layers(NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(pdc_program_run(NULL, 0, NULL, 0, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_compile(ctx, NULL, "ref", NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_tensor_wrap(ctx, 1, (int64_t[]){4}, NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(pdc_tensor_data(NULL));
    ck_assert_uint_eq(pdc_tensor_size(NULL), 0);
}
END_TEST

START_TEST(builder_errors_name_the_problem)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "bad", &m));
    int64_t xd[] = {1, 3, 8, 8}, wd[] = {4, 2, 3, 3};
    float w[72] = {0};
    ck_assert_ok(ctx, pdc_model_add_input(m, "x", 4, xd));
    ck_assert_status(ctx, pdc_model_add_input(m, "x", 4, xd), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "'x' is already defined");
    ck_assert_status(ctx, pdc_model_add_input(m, "z", 2, (int64_t[]){1, 0}), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "dim 1 is 0");
    ck_assert_status(ctx, pdc_model_add_input(m, "z", 9, xd), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "rank 9");
    ck_assert_status(ctx, pdc_model_add_input(m, "huge", 4, (int64_t[]){1, 1LL << 40, 1LL << 40, 1LL << 40}),
                     PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "input 'huge'");
    ck_assert_status(ctx, pdc_model_add_input(m, "big", 4, (int64_t[]){-1, 1 << 30, 1 << 30, 1 << 30}),
                     PDC_ERR_OVERFLOW);
    ck_assert_ok(ctx, pdc_model_add_constant(m, "w", 4, wd, w));

    const char *in[] = {"x", "w"}, *out[] = {"y"};
    /* 3 input channels, weight says 2 per group */
    ck_assert_status(ctx, pdc_model_add_layer(m, "conv", "conv", 2, in, 1, out, NULL), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "layer 'conv' (conv)");
    ck_assert_error_has(ctx, "weight 'w' has 2 input channels per group, expected 3");
    /* The failed layer left nothing behind: its output name is free. */
    size_t n;
    ck_assert_ok(ctx, pdc_model_num_layers(m, &n));
    ck_assert_uint_eq(n, 0);
    const char *rin[] = {"x"};
    ck_assert_ok(ctx, pdc_model_add_layer(m, "r", "relu", 1, rin, 1, out, NULL));

    const char *bad_in[] = {"nope"}, *out2[] = {"y2"};
    ck_assert_status(ctx, pdc_model_add_layer(m, "r2", "relu", 1, bad_in, 1, out2, NULL), PDC_ERR_NOT_FOUND);
    ck_assert_error_has(ctx, "input 'nope' is not defined");
    ck_assert_status(ctx, pdc_model_add_layer(m, "q", "frobnicate", 1, rin, 1, out2, NULL), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "unknown op \"frobnicate\"");
    ck_assert_status(ctx, pdc_model_add_layer(m, "r3", "relu", 2, in, 1, out2, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "2 inputs, expected 1..1");
    ck_assert_status(ctx, pdc_model_add_layer(m, "r", "relu", 1, rin, 1, out2, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "layer 'r' is already defined");

    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_status(ctx, pdc_attrs_set_int(a, "bad name", 1), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "invalid attribute name");
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "kernel_shape", 2, (int64_t[]){3, 3}));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", 2, (int64_t[]){INT64_MAX / 2, 1}));
    ck_assert_status(ctx, pdc_model_add_layer(m, "mp", "maxpool", 1, rin, 1, out2, a), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "attribute dilations[0]");
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "axis", 7));
    ck_assert_status(ctx, pdc_model_add_layer(m, "sm", "softmax", 1, rin, 1, out2, a), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "axis 7 is out of range for rank 4");
    pdc_attrs_destroy(a);

    ck_assert_status(ctx, pdc_model_mark_output(m, "w"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_model_mark_output(m, "missing"), PDC_ERR_NOT_FOUND);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(sparsity_must_agree_with_weights)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "sp", &m));
    int64_t wd[] = {2, 1, 3, 3};
    float w[18];
    for (int i = 0; i < 18; i++) w[i] = 0.0f;
    w[4] = 1.0f;       /* kernel 0 centre */
    w[9 + 0] = 2.0f;   /* kernel 1 top-left */
    ck_assert_ok(ctx, pdc_model_add_constant(m, "w", 4, wd, w));
    uint64_t pats[] = {0x010 /* centre */, 0x001 /* top-left */};
    int32_t ok_ids[] = {0, 1}, bad_ids[] = {0, 0}, range_ids[] = {0, 5}, three_ids[] = {0, 1, 1};
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 2, pats, 2, bad_ids), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "element 9 is 2 but its sparsity prunes it");
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 2, pats, 2, range_ids), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "pattern id 5");
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 2, pats, 3, three_ids), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "3 kernel ids, expected 2");
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "w", 2, 2, 2, pats, 2, ok_ids), PDC_ERR_INVALID_MODEL);
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "nope", 3, 3, 2, pats, 2, ok_ids), PDC_ERR_NOT_FOUND);
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 2, pats, 2, ok_ids));

    int64_t fd[] = {2, 8};
    float fw[16] = {0};
    fw[0] = 1.0f;                               /* row 0, block 0 */
    ck_assert_ok(ctx, pdc_model_add_constant(m, "fw", 2, fd, fw));
    uint8_t blocks_bad[] = {0, 1, 1, 1}, blocks_ok[] = {1, 0, 0, 0};
    ck_assert_status(ctx, pdc_model_set_sparsity_block(m, "fw", 1, 4, 4, blocks_bad), PDC_ERR_INVALID_MODEL);
    ck_assert_status(ctx, pdc_model_set_sparsity_block(m, "fw", 1, 4, 3, blocks_ok), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "expected 4");
    ck_assert_ok(ctx, pdc_model_set_sparsity_block(m, "fw", 1, 4, 4, blocks_ok));
    uint8_t mask[16] = {1};
    ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(m, "fw", 16, mask));
    mask[0] = 0;
    ck_assert_status(ctx, pdc_model_set_sparsity_unstructured(m, "fw", 16, mask), PDC_ERR_INVALID_MODEL);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(inspection_reports_shapes_and_flops)
{
    pdc_model *m = small_cnn();
    size_t n;
    ck_assert_ok(ctx, pdc_model_num_layers(m, &n));
    ck_assert_uint_eq(n, 4);
    const char *s;
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_OP, &s));
    ck_assert_str_eq(s, "conv");
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_OUTPUT_SHAPE, &s));
    ck_assert_str_eq(s, "1x3x4x4");
    ck_assert_ok(ctx, pdc_model_layer_string(m, 2, PDC_FIELD_OUTPUT_SHAPE, &s));
    ck_assert_str_eq(s, "1x48");
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_SPARSITY, &s));
    ck_assert_str_eq(s, "dense");
    int64_t v;
    /* conv: 54 weights + 3 bias; 2 * 16 pixels * 54 = 1728 FLOPs */
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_WEIGHTS, &v));
    ck_assert_int_eq(v, 57);
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v));
    ck_assert_int_eq(v, 1728);
    /* fc: 2 * 1 * 192 */
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 3, PDC_STAT_DENSE_FLOPS, &v));
    ck_assert_int_eq(v, 384);
    ck_assert_status(ctx, pdc_model_layer_stat(m, 4, PDC_STAT_WEIGHTS, &v), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "layer 4 out of range");

    /* Unstructured sparsity keeping half of the fc weights halves its effective FLOPs. */
    float fw[192];
    uint8_t mask[192];
    test_fill_random(fw, 192, 2);
    for (int i = 0; i < 192; i++) mask[i] = i % 2 == 0;
    ck_assert_status(ctx, pdc_model_set_sparsity_unstructured(m, "fw", 192, mask), PDC_ERR_INVALID_MODEL);
    pdc_model_destroy(m);

    /* Rebuild with the odd weights zeroed. */
    ck_assert_ok(ctx, pdc_model_create(ctx, "half", &m));
    for (int i = 0; i < 192; i++)
        if (!mask[i]) fw[i] = 0;
    ck_assert_ok(ctx, pdc_model_add_input(m, "x", 2, (int64_t[]){1, 48}));
    ck_assert_ok(ctx, pdc_model_add_constant(m, "fw", 2, (int64_t[]){4, 48}, fw));
    const char *in[] = {"x", "fw"}, *out[] = {"y"};
    ck_assert_ok(ctx, pdc_model_add_layer(m, "fc", "fc", 2, in, 1, out, NULL));
    ck_assert_ok(ctx, pdc_model_set_sparsity_unstructured(m, "fw", 192, mask));
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_KEPT_WEIGHTS, &v));
    ck_assert_int_eq(v, 96);
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_EFFECTIVE_FLOPS, &v));
    ck_assert_int_eq(v, 192);
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_SPARSITY, &s));
    ck_assert_str_eq(s, "unstructured: 50.0% kept");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(compile_targets)
{
    pdc_model *m = small_cnn();
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, m, "tpu9000", &p), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_error_has(ctx, "unknown target 'tpu9000'");
    ck_assert_error_has(ctx, "ref");
    /* the gpu target exists; with no driver library it answers PDC_ERR_NO_DEVICE naming the library */
    setenv("PDC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    ck_assert_status(ctx, pdc_compile(ctx, m, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "/nonexistent/libcuda.so.1");
    unsetenv("PDC_CUDA_LIBRARY");
    ck_assert_ptr_null(p);
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    ck_assert_str_eq(pdc_program_target(p), "ref");
    pdc_model_destroy(m); /* the program is independent of the model */
    size_t ni, no, rank;
    const char *name;
    int64_t dims[PDC_MAX_RANK];
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    ck_assert_uint_eq(ni, 1);
    ck_assert_uint_eq(no, 1);
    ck_assert_ok(ctx, pdc_program_output_info(p, 0, &name, &rank, dims));
    ck_assert_str_eq(name, "y");
    ck_assert_uint_eq(rank, 2);
    ck_assert_int_eq(dims[1], 4);
    ck_assert_status(ctx, pdc_program_input_info(p, 1, &name, &rank, dims), PDC_ERR_INVALID_ARG);
    pdc_program_destroy(p);
}
END_TEST

START_TEST(emit_checks_target_options_and_directory)
{
    pdc_model *m = small_cnn();
    pdc_attrs *o = NULL;
    char dir[256];
    ck_assert_ptr_nonnull(test_make_temp_dir(dir, sizeof dir, "emit"));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "tpu9000", NULL, dir), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_error_has(ctx, "unknown target 'tpu9000' (known: aarch64-linux-gnu, nvptx)");
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "dir is NULL");
    /* emit-only targets cannot be compiled to run here */
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, m, "aarch64-linux-gnu", &p), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "pdc compile --target aarch64-linux-gnu");
    ck_assert_ptr_null(p);
    /* options: names, types and values checked against the target's lists */
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &o));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "cpu", "cortex-a99"));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "aarch64-linux-gnu", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown cpu 'cortex-a99' for target 'aarch64-linux-gnu' (known: generic, cortex-a53");
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "target 'nvptx' takes no 'cpu' option");
    pdc_attrs_destroy(o);
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &o));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "arch", 80));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option 'arch' must be a string (one of: sm_75, sm_80");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "arch", "sm_95"));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown arch 'sm_95'");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "arch", "sm_90"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "name", "9lives"));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "name '9lives' is not a C identifier");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "name", "net"));
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "speed", 2.0f));
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", o, dir), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown option 'speed' (known: name, cpu, arch)");
    pdc_attrs_destroy(o);
    /* directories: checked before any code is generated; nothing is created on failure */
    char sub[300], file[300];
    snprintf(sub, sizeof sub, "%s/no/such", dir);
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", NULL, sub), PDC_ERR_IO);
    ck_assert_error_has(ctx, "its parent");
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "nvptx", NULL, file), PDC_ERR_IO);
    ck_assert_error_has(ctx, "is not a directory");
    snprintf(sub, sizeof sub, "%s/file/x", dir);
    ck_assert_status(ctx, pdc_model_emit(ctx, m, "aarch64-linux-gnu", NULL, sub), PDC_ERR_IO);
    ck_assert_int_eq(unlink(file), 0);
    ck_assert_int_eq(rmdir(dir), 0); /* empty again: no stray temporaries */
    pdc_model_destroy(m);
}
END_TEST

START_TEST(run_checks_shapes_and_keeps_outputs_on_failure)
{
    pdc_model *m = small_cnn();
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    float x[32], y[4] = {7, 7, 7, 7}, wrong[16];
    test_fill_random(x, 32, 3);
    pdc_tensor *tx, *ty, *tw;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 2, 4, 4}, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){1, 4}, y, &ty));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 1, 4, 4}, wrong, &tw));
    ck_assert_status(ctx, pdc_program_run(p, 1, &tw, 1, &ty), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "input 'x' expects shape 1x2x4x4, got 1x1x4x4");
    ck_assert_status(ctx, pdc_program_run(p, 1, &tx, 0, NULL), PDC_ERR_INVALID_ARG);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(y[i], 7.0f);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
    /* Same program, owned tensors: same answer. */
    pdc_tensor *ox, *oy;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 4, (int64_t[]){1, 2, 4, 4}, &ox));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, (int64_t[]){1, 4}, &oy));
    ck_assert_uint_eq(pdc_tensor_size(ox), 32);
    ck_assert_uint_eq((uintptr_t)pdc_tensor_data(ox) % 64, 0);
    memcpy(pdc_tensor_data(ox), x, sizeof x);
    ck_assert_ok(ctx, pdc_program_run(p, 1, &ox, 1, &oy));
    ck_assert_floats_near(pdc_tensor_data(oy), y, 4, 0.0f);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_tensor_destroy(tw);
    pdc_tensor_destroy(ox);
    pdc_tensor_destroy(oy);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(symbolic_input_shapes)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "sym", &m));
    ck_assert_ok(ctx, pdc_model_add_input(m, "x", 2, (int64_t[]){-1, 3}));
    const char *in[] = {"x"}, *out[] = {"y"};
    ck_assert_ok(ctx, pdc_model_add_layer(m, "r", "relu", 1, in, 1, out, NULL));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    size_t rank = 9;
    ck_assert_ok(ctx, pdc_model_output_info(m, 0, NULL, &rank, NULL));
    ck_assert_uint_eq(rank, 0); /* not known yet */
    int64_t v;
    ck_assert_status(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "FLOPs are unknown until symbolic input shapes are fixed");
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, m, "ref", &p), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "input 'x' has symbolic shape ?x3");
    ck_assert_status(ctx, pdc_model_set_input_shape(m, "x", 2, (int64_t[]){2, 4}), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "does not match declared ?x3");
    ck_assert_status(ctx, pdc_model_set_input_shape(m, "y", 2, (int64_t[]){2, 3}), PDC_ERR_NOT_FOUND);
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 2, (int64_t[]){2, 3}));
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v));
    ck_assert_int_eq(v, 6);
    int64_t dims[PDC_MAX_RANK];
    ck_assert_ok(ctx, pdc_model_output_info(m, 0, NULL, &rank, dims));
    ck_assert_uint_eq(rank, 2);
    ck_assert_int_eq(dims[0], 2);
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    float x[6] = {-1, 2, -3, 4, -5, 6}, y[6];
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){2, 3}, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){2, 3}, y, &ty));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
    float want[6] = {0, 2, 0, 4, 0, 6};
    ck_assert_floats_near(y, want, 6, 0.0f);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(save_load_roundtrip_runs_identically)
{
    pdc_model *m = small_cnn();
    const char *bin = tmp_path("small.pdc"), *txt = tmp_path("small.pdcir");
    ck_assert_ok(ctx, pdc_model_save(m, bin));
    ck_assert_ok(ctx, pdc_model_save_text(m, txt, 0));
    pdc_model *mb, *mt;
    ck_assert_ok(ctx, pdc_model_load(ctx, bin, &mb));
    ck_assert_ok(ctx, pdc_model_load(ctx, txt, &mt));
    pdc_model *models[] = {m, mb, mt};
    float x[32], y[3][4];
    test_fill_random(x, 32, 5);
    for (int k = 0; k < 3; k++) {
        pdc_program *p;
        pdc_tensor *tx, *ty;
        ck_assert_ok(ctx, pdc_compile(ctx, models[k], "ref", &p));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 2, 4, 4}, x, &tx));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (int64_t[]){1, 4}, y[k], &ty));
        ck_assert_ok(ctx, pdc_program_run(p, 1, &tx, 1, &ty));
        pdc_tensor_destroy(tx);
        pdc_tensor_destroy(ty);
        pdc_program_destroy(p);
    }
    ck_assert_mem_eq(y[0], y[1], sizeof y[0]);
    ck_assert_mem_eq(y[0], y[2], sizeof y[0]);
    char *text;
    ck_assert_ok(ctx, pdc_model_print(m, PDC_PRINT_ELIDE_WEIGHTS, &text));
    ck_assert_ptr_nonnull(strstr(text, "dense<elided>"));
    pdc_string_free(text);
    ck_assert_status(ctx, pdc_model_print(m, 0x80, &text), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_model_load(ctx, "/nonexistent/dir/model.pdc", &mb), PDC_ERR_IO);
    ck_assert_error_has(ctx, "/nonexistent/dir/model.pdc");
    ck_assert_status(ctx, pdc_model_save(m, "/nonexistent/dir/model.pdc"), PDC_ERR_IO);
    ck_assert_error_has(ctx, "/nonexistent/dir/model.pdc");
    for (int k = 0; k < 3; k++) pdc_model_destroy(models[k]);
}
END_TEST

START_TEST(nonfinite_constants_are_refused_at_load)
{
    /* text, .pdc and the text file: a NaN or infinite constant is refused by name and position
     * (PDC_ERR_NUMERIC) unless allow_nonfinite is set; builders keep what they are given */
    static const char text[] = "pdcir 1\ninput x : f32[1,4]\nconst w : f32[4] = [1.0, 2.0, nan, -inf]\n"
                               "layer a = add(x, w) -> (y)\noutput y\n";
    pdc_model *m = SENTINEL_PTR;
    ck_assert_status(ctx, pdc_model_parse(ctx, text, strlen(text), &m), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "constant 'w' holds NaN at element 2 of 4");
    ck_assert_error_has(ctx, "allow_nonfinite=1");
    ck_assert_ptr_eq(m, SENTINEL_PTR);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", "1"));
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m));
    const char *bin = tmp_path("nan.pdc"), *txt = tmp_path("nan.pdcir");
    ck_assert_ok(ctx, pdc_model_save(m, bin));
    ck_assert_ok(ctx, pdc_model_save_text(m, txt, 0));
    pdc_model_destroy(m);
    pdc_model *l;
    ck_assert_ok(ctx, pdc_model_load(ctx, bin, &l));
    pdc_model_destroy(l);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", "0"));
    const char *paths[] = {bin, txt};
    for (int k = 0; k < 2; k++) {
        l = SENTINEL_PTR;
        ck_assert_status(ctx, pdc_model_load(ctx, paths[k], &l), PDC_ERR_NUMERIC);
        ck_assert_error_has(ctx, paths[k]);
        ck_assert_error_has(ctx, "constant 'w' holds NaN at element 2 of 4");
        ck_assert_ptr_eq(l, SENTINEL_PTR);
    }
    /* an infinity alone is named as such */
    static const char inf_text[] = "pdcir 1\ninput x : f32[1,2]\nconst b : f32[2] = [inf, 0.0]\n"
                                   "layer a = add(x, b) -> (y)\noutput y\n";
    ck_assert_status(ctx, pdc_model_parse(ctx, inf_text, strlen(inf_text), &m), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "constant 'b' holds inf at element 0 of 2");
    /* a model malformed as well is refused for its structure first, with or without allow_nonfinite
     * (the fuzzer's property: allow_nonfinite never turns a NUMERIC refusal into another one) */
    static const char no_output[] = "pdcir 1\ninput x : f32[1,2]\nconst b : f32[2] = [nan, 0.0]\n"
                                    "layer a = add(x, b) -> (y)\n";
    for (int allow = 0; allow < 2; allow++) {
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", allow ? "1" : "0"));
        m = SENTINEL_PTR;
        ck_assert_status(ctx, pdc_model_parse(ctx, no_output, strlen(no_output), &m), PDC_ERR_INVALID_MODEL);
        ck_assert_error_has(ctx, "has no outputs");
        ck_assert_ptr_eq(m, SENTINEL_PTR);
    }
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "allow_nonfinite", "0"));
}
END_TEST

/* A progress handler appending "stage done/total, " to a 4096-byte string. */
static void log_progress(void *user, const char *stage, size_t done, size_t total)
{
    char *log = user;
    size_t len = strlen(log);
    snprintf(log + len, 4096 - len, "%s %zu/%zu, ", stage, done, total);
}

/* A note handler appending "kind pass layer: text; " to a 4096-byte string. */
static void log_notes(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    char *log = user;
    size_t len = strlen(log);
    snprintf(log + len, 4096 - len, "%d %s %s: %s; ", (int)kind, pass, layer, text);
}

START_TEST(progress_and_note_handlers)
{
    static char log[4096];
    /* NULL context: refused with a message */
    ck_assert_int_eq(pdc_context_set_progress_handler(NULL, log_progress, log), PDC_ERR_INVALID_ARG);
    ck_assert_str_eq(pdc_context_last_error(NULL), "pdc_context_set_progress_handler: ctx is NULL");
    ck_assert_int_eq(pdc_context_set_note_handler(NULL, log_notes, log), PDC_ERR_INVALID_ARG);
    ck_assert_str_eq(pdc_context_last_error(NULL), "pdc_context_set_note_handler: ctx is NULL");

    /* compile: the start and the end (ref); every layer in between (cpu) */
    pdc_model *m = small_cnn();
    pdc_program *p = NULL;
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, log_progress, log));
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    ck_assert_str_eq(log, "compile 0/4, compile 4/4, ");
    pdc_program_destroy(p);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", tmpdir));
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
    ck_assert_str_eq(log, "compile 0/4, compile 1/4, compile 2/4, compile 3/4, compile 4/4, ");
    pdc_program_destroy(p);
    /* a failing compile ends without the done == total call */
    log[0] = '\0';
    ck_assert_status(ctx, pdc_compile(ctx, m, "tpu9000", &p), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_str_eq(log, "");
    /* transform: each pass from 0 to the end */
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-block", NULL));
    ck_assert_str_eq(log, "prune-block 0/4, prune-block 1/4, prune-block 2/4, prune-block 3/4, prune-block 4/4, ");
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, NULL, log)); /* removed */
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    pdc_program_destroy(p);
    ck_assert_str_eq(log, "");
    pdc_model_destroy(m);

    /* notes: the conv reads the graph input, so it is the stem and stays dense by default */
    m = small_cnn();
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, log_notes, log));
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-pattern,prune-block", NULL));
    ck_assert_str_eq(log, "2 prune-pattern conv: stem: reads a graph input (option include_stem=1 prunes it); "
                          "1 prune-block fc: block 1x4 50%; ");
    int64_t w, kept;
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_WEIGHTS, &w));
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_KEPT_WEIGHTS, &kept));
    ck_assert_int_eq(kept, w);
    pdc_model_destroy(m);
    m = small_cnn();
    pdc_attrs *o;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &o));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "connectivity", 0.25f));
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-pattern,prune-connectivity", o));
    ck_assert_str_eq(log, "1 prune-pattern conv: pattern 8x4; 1 prune-connectivity conv: connectivity 25%; ");
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_KEPT_WEIGHTS, &kept));
    ck_assert_int_eq(kept, 5 * 4 + 3); /* floor(0.25 x 6) = 1 of 6 kernels removed, 4 entries each, 3 biases */
    pdc_attrs_destroy(o);
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, NULL, log));
    log[0] = '\0';
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-unstructured", NULL));
    ck_assert_str_eq(log, "");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(program_threads_are_resolved)
{
    pdc_model *m = small_cnn();
    pdc_program *p = NULL;
    size_t n = 99;
    ck_assert_int_eq(pdc_program_num_threads(NULL, &n), PDC_ERR_INVALID_ARG);
    ck_assert_str_eq(pdc_context_last_error(NULL), "pdc_program_num_threads: program is NULL");
    ck_assert_uint_eq(n, 99);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "3"));
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    ck_assert_status(ctx, pdc_program_num_threads(p, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "n_out is NULL");
    ck_assert_ok(ctx, pdc_program_num_threads(p, &n));
    ck_assert_uint_eq(n, 1); /* the reference interpreter runs on the calling thread */
    pdc_program_destroy(p);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", tmpdir));
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "0")); /* fixed at compile */
    ck_assert_ok(ctx, pdc_program_num_threads(p, &n));
    ck_assert_uint_eq(n, 3);
    pdc_program_destroy(p);
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
    ck_assert_ok(ctx, pdc_program_num_threads(p, &n));
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    ck_assert_uint_eq(n, (size_t)CPU_COUNT(&set)); /* 0: all the processors this process may use */
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* pdc_context_num_objects counts exactly the handles handed out and not yet destroyed, whatever made them. */
START_TEST(live_objects_are_counted)
{
    size_t n = 99, base;
    ck_assert_int_eq(pdc_context_num_objects(NULL, &n), PDC_ERR_INVALID_ARG);
    ck_assert_uint_eq(n, 99);
    ck_assert_status(ctx, pdc_context_num_objects(ctx, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "n_out is NULL");
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &base));
    ck_assert_uint_eq(base, 0); /* a fresh context */
    pdc_model *m = small_cnn(); /* its builder's temporary attrs are destroyed again */
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &n));
    ck_assert_uint_eq(n, 1);
    const char *bin = tmp_path("count.pdc");
    ck_assert_ok(ctx, pdc_model_save(m, bin));
    pdc_model *loaded, *parsed, *exported, *bad = NULL;
    pdc_attrs *a;
    pdc_program *p, *nop = NULL;
    pdc_tensor *t, *w;
    pdc_trainer *tr;
    float x[32] = {0};
    char *text;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &text)); /* strings are not objects */
    ck_assert_ok(ctx, pdc_model_load(ctx, bin, &loaded));
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &parsed));
    pdc_string_free(text);
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, (int64_t[]){4}, &t));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (int64_t[]){1, 2, 4, 4}, x, &w));
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &tr));
    ck_assert_ok(ctx, pdc_trainer_export(tr, &exported));
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &n));
    ck_assert_uint_eq(n, 9);
    /* failed calls hand out nothing and count nothing */
    ck_assert_status(ctx, pdc_compile(ctx, m, "nosuch", &nop), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_status(ctx, pdc_model_load_memory(ctx, "garbage(", 8, &bad), PDC_ERR_PARSE);
    ck_assert_status(ctx, pdc_model_load(ctx, "/nonexistent/m.onnx", &bad), PDC_ERR_IO);
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &n));
    ck_assert_uint_eq(n, 9);
    pdc_trainer_destroy(tr);
    pdc_model_destroy(exported);
    pdc_tensor_destroy(w);
    pdc_tensor_destroy(t);
    pdc_program_destroy(p);
    pdc_attrs_destroy(a);
    pdc_model_destroy(parsed);
    pdc_model_destroy(loaded);
    pdc_model_destroy(NULL); /* NULL destroys count nothing */
    pdc_program_destroy(NULL);
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &n));
    ck_assert_uint_eq(n, 1);
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_context_num_objects(ctx, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

int main(void)
{
    return run_tests("api", tmpdir_setup, tmpdir_teardown, 0,
                     TEST_LIST(version_matches_header, options_set_get_and_reject, null_arguments_are_refused,
                               builder_errors_name_the_problem, sparsity_must_agree_with_weights,
                               inspection_reports_shapes_and_flops, compile_targets,
                               emit_checks_target_options_and_directory, run_checks_shapes_and_keeps_outputs_on_failure,
                               symbolic_input_shapes, save_load_roundtrip_runs_identically,
                               nonfinite_constants_are_refused_at_load, progress_and_note_handlers,
                               program_threads_are_resolved, live_objects_are_counted));
}
