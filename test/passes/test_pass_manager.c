/*
 * test_pass_manager.c - the pass manager and the memory plan: a verified IR after every pass of the
 * full pipeline (printed after each), the pass table, activations placed without overlap and the
 * plan checked by the verifier, byte-identical results run after run, a status and message for every
 * bad pipeline and option (the model left unchanged), an out-of-memory sweep over the whole pipeline,
 * and the IR's compaction refusing dangling references.
 */
#include "ir/arena.h"
#include "ir/ir.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"

#include "test/common/builders.h"

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
    char *t = model_text(m);
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
    ir_attrs_remove(&l->attrs, IR_ARENA_ATTR);
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
    add_output(m, "y");
    char *before = model_text(m);
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
    const char *path = tmp_path("print.pdcir");
    pdc_model *m = canon_model();
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "print_after", "all"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "print_file", path));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "2x2"));
    static const char pipeline[] =
        "canonicalize, prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    ck_assert_ok(ctx, transform(m, pipeline, o));
    ck_assert_ok(ctx, pdc_model_verify(m));
    char *text = test_read_file(path, NULL);
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
    ck_assert_uint_eq(n, 11);
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
    char *before = model_text(m);
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
                           "canonicalize, prune-pattern, prune-connectivity, prune-kgs, prune-block, prune-bcr, prune-unstructured, reorder, share, schedule, plan)");
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
                           "kernel sizes KHxKW or KDxKHxKW separated by commas, e.g. \"3x3,5x5,3x3x3\")");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3"), PDC_ERR_INVALID_ARG,
                           "option pattern_kernels: \"3\" in \"3\" is not a kernel size");
    expect_transform_error(m, "prune-pattern", opt_s("pattern_kernels", "3x3x3x3"), PDC_ERR_INVALID_ARG,
                           "\"3x3x3x3\" in \"3x3x3x3\" is not a kernel size");
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

/* ------------------------------------------------------------------ determinism */

START_TEST(pruning_is_deterministic)
{
    const char *p1 = tmp_path("det1.pdc"), *p2 = tmp_path("det2.pdc");
    static const char pipeline[] = "canonicalize,prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    for (int run = 0; run < 2; run++) {
        pdc_model *m = canon_model();
        ck_assert_ok(ctx, transform(m, pipeline, opt_s("connectivity", "0.6,conv4=0.3")));
        ck_assert_ok(ctx, pdc_model_save(m, run ? p2 : p1));
        pdc_model_destroy(m);
    }
    ck_assert_msg(files_equal(p1, p2), "two runs gave different .pdc files");
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
}
END_TEST

/* Options written in the pipeline text after its passes (what pdc_model_plan writes) act as the same
 * options given apart; their errors name them. */
START_TEST(options_in_the_pipeline_text)
{
    pdc_model *a = canon_model(), *b = canon_model();
    ck_assert_ok(ctx, transform(a, " prune-pattern , prune-connectivity  connectivity=0.6,conv4=0.3   patterns=4 ", NULL));
    pdc_attrs *o = opt_s("connectivity", "0.6,conv4=0.3");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "patterns", "4"));
    ck_assert_ok(ctx, transform(b, "prune-pattern,prune-connectivity", o));
    char *ta = model_text(a), *tb = model_text(b);
    ck_assert_str_eq(ta, tb);
    pdc_string_free(ta);
    pdc_string_free(tb);
    pdc_model_destroy(b);
    expect_transform_error(a, "prune-connectivity connectivity=0.5 stray", NULL, PDC_ERR_INVALID_ARG,
                           "'stray' is not an option NAME=VALUE");
    expect_transform_error(a, "prune-connectivity connectivity=0.5 =1", NULL, PDC_ERR_INVALID_ARG,
                           "'=1' is not an option NAME=VALUE");
    expect_transform_error(a, "prune-connectivity connectivity=0.5", opt_s("connectivity", "0.25"), PDC_ERR_INVALID_ARG,
                           "option connectivity is given twice");
    expect_transform_error(a, "prune-connectivity connectivity=1.5", NULL, PDC_ERR_INVALID_ARG,
                           "option connectivity: rate 1.5 is outside [0, 1)");
    expect_transform_error(a, "prune-connectivity colour=red", NULL, PDC_ERR_INVALID_ARG, "colour");
    pdc_model_destroy(a);
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
    char *before = model_text(m);
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
    char *got = model_text(m), *expect = model_text(want);
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
    char *before = model_text(m);
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
    return run_tests("pass_manager", tmpdir_setup, tmpdir_teardown, 60,
                     TEST_LIST(plan_places_activations_without_overlap, plan_needs_concrete_shapes, options_in_the_pipeline_text,
                               full_pipeline_verifies_and_prints_after_every_pass, pass_table_and_info,
                               bad_input_has_status_and_message, pruning_is_deterministic,
                               compact_refuses_dangling_references, out_of_memory_anywhere_leaves_the_model_unchanged));
}
