/*
 * test_prune_kgs.c - pruning of 3-D convs: the kernel-group projection (pdc_prune_project_kgs) on
 * hand-computed cases and its documented tie-breaks, the prune-kgs pass (group masks, kept counts, the
 * same bits as the public projection, per-layer rates, the stem default), prune-pattern and
 * prune-connectivity on 3x3x3 kernels, and a status and message for each bad option or argument.
 */
#include "ir/ir.h"
#include "passes/project.h"

#include "test/common/builders.h"

/* ------------------------------------------------------------------ the projection */

START_TEST(projection_keeps_largest_group_norms)
{
    /* 3 output x 2 input channels, window 4, groups 2x2: group 0 = kernels o 0..1, group 1 = o 2 (partial) */
    float w[3 * 2 * 4] = {
        1, 0, 3, 0,  /* o0 c0 */
        0, 2, 0, 0,  /* o0 c1 */
        1, 0, 0, 1,  /* o1 c0 */
        0, 0, 1, 1,  /* o1 c1: group 0 norms p0 2, p1 4, p2 10, p3 2 */
        5, 5, 1, 1,  /* o2 c0 */
        -1, 1, 1, 1, /* o2 c1: group 1 norms 26, 26, 2, 2 */
    };
    uint64_t masks[2] = {7, 7};
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, w, 3, 2, 4, 2, 2, 2, 0, NULL, masks));
    /* group 0: p2 (10) then p1 (4); group 1: p0 and p1 (equal norms, lower positions first) */
    ck_assert_uint_eq(masks[0], 0x6);
    ck_assert_uint_eq(masks[1], 0x3);
    static const float want[3 * 2 * 4] = {0, 0, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 5, 5, 0, 0, -1, 1, 0, 0};
    ck_assert_mem_eq(w, want, sizeof w);
    /* equal norms everywhere: the lowest positions are kept */
    float flat[2 * 4] = {1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, flat, 1, 2, 4, 1, 2, 3, 0, NULL, masks));
    ck_assert_uint_eq(masks[0], 0x7);
    /* removed kernels are zeroed and do not vote: o0 c0's big p3 is ignored */
    float v[2 * 4] = {0, 0, 0, 9, 1, 2, 0, 0};
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, v, 1, 2, 4, 1, 2, 1, 0, (const uint8_t[]){0, 1}, masks));
    ck_assert_uint_eq(masks[0], 0x2);
    static const float vwant[2 * 4] = {0, 0, 0, 0, 0, 2, 0, 0};
    ck_assert_mem_eq(v, vwant, sizeof v);
    /* a set of one mask: the most frequent natural mask, 0x6 (groups 0 and 1 both choose p1, p2) */
    float m3[3 * 1 * 4] = {0, 2, 3, 0, 0, 3, 2, 0, 5, 0, 0, 4};
    uint64_t gm[3];
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, m3, 3, 1, 4, 1, 1, 2, 1, NULL, gm));
    ck_assert_uint_eq(gm[0], 0x6);
    ck_assert_uint_eq(gm[1], 0x6);
    ck_assert_uint_eq(gm[2], 0x6); /* its own would be 0x9: projected onto the set */
    static const float m3want[3 * 4] = {0, 2, 3, 0, 0, 3, 2, 0, 0, 0, 0, 0};
    ck_assert_mem_eq(m3, m3want, sizeof m3);
    /* a group whose kernels are all removed has mask 0 */
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, v, 2, 1, 4, 1, 1, 1, 0, (const uint8_t[]){0, 1}, masks));
    ck_assert_uint_eq(masks[0], 0);
    ck_assert_uint_eq(masks[1], 0x2);
}
END_TEST

START_TEST(projection_bad_arguments)
{
    float w[2 * 2 * 27] = {0}, before[2 * 2 * 27];
    for (int i = 0; i < 108; i++) w[i] = before[i] = (float)(i % 7) - 3.0f;
    static const struct {
        int64_t o, c, win, go, gc;
        size_t keep;
        const char *needle;
    } bad[] = {
        {2, 2, 27, 2, 2, 0, "pdc_prune_project_kgs: 0 kept positions per group, expected 1..27"},
        {2, 2, 27, 2, 2, 28, "pdc_prune_project_kgs: 28 kept positions per group, expected 1..27"},
        {2, 2, 27, 3, 1, 4, "pdc_prune_project_kgs: kernel group 3x1 is not within the 2x2 kernel grid"},
        {2, 2, 27, 1, 0, 4, "kernel group 1x0 is not within"},
        {2, 2, 65, 1, 1, 4, "pdc_prune_project_kgs: kernel_size 65 is outside 1..64"},
        {0, 2, 27, 1, 1, 4, "pdc_prune_project_kgs: channels 0x2 outside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_status(ctx, pdc_prune_project_kgs(ctx, w, bad[i].o, bad[i].c, bad[i].win, bad[i].go, bad[i].gc,
                                                    bad[i].keep, 0, NULL, NULL),
                         PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, bad[i].needle);
        ck_assert_mem_eq(w, before, sizeof w); /* nothing written */
    }
    ck_assert_status(ctx, pdc_prune_project_kgs(ctx, NULL, 2, 2, 27, 1, 1, 4, 0, NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pdc_prune_project_kgs: weights is NULL");
    ck_assert_int_eq(pdc_prune_project_kgs(NULL, w, 2, 2, 27, 1, 1, 4, 0, NULL, NULL), PDC_ERR_INVALID_ARG);
}
END_TEST

/* ------------------------------------------------------------------ the passes */

#define O2 12
#define C2 8

/* x[1,3,6,7,5] -> stem conv3d (w1[C2,3,3,3,3]) -> relu -> conv3d "c3" (w2[O2,C2,3,3,3]) -> y */
static pdc_model *video_model(void)
{
    pdc_model *m = new_model("video");
    add_input(m, "x", 5, (int64_t[]){1, 3, 6, 7, 5});
    add_random(m, "w1", 5, (int64_t[]){C2, 3, 3, 3, 3}, 11, -1, 1);
    add_random(m, "w2", 5, (int64_t[]){O2, C2, 3, 3, 3}, 12, -1, 1);
    add_random(m, "b2", 1, (int64_t[]){O2}, 13, -1, 1);
    add_layer(m, "stem", "conv", "x,w1", "h", opt_ints("pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}));
    add_layer(m, "act", "relu", "h", "r", NULL);
    pdc_attrs *a = opt_ints("pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1});
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 3, (int64_t[]){1, 2, 2}));
    add_layer(m, "c3", "conv", "r,w2,b2", "y", a);
    add_output(m, "y");
    return m;
}

/* w's KGS description matches masks[] of go x gc groups, and its data is exactly want's projection. */
static void check_kgs(const ir_tensor *w, int64_t go, int64_t gc, size_t keep)
{
    const ir_sparsity *s = &w->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(s->kd, 3);
    ck_assert_int_eq(s->go, go);
    ck_assert_int_eq(s->gc, gc);
    const int64_t o = w->dims[0], c = w->dims[1];
    for (size_t q = 0; q < s->n_patterns; q++) ck_assert_int_eq(__builtin_popcountll(s->patterns[q]), (int)keep);
    for (int64_t i = 0; i < o; i++)
        for (int64_t j = 0; j < c; j++) {
            const int32_t id = s->kernel_pattern[i * c + j], first = s->kernel_pattern[(i - i % go) * c + j - j % gc];
            ck_assert_int_eq(id, first); /* one pattern per group */
            ck_assert_int_ge(id, 0);
        }
}

START_TEST(prune_kgs_matches_the_projection)
{
    pdc_model *m = video_model(), *before = clone(m);
    pdc_attrs *o = opt_s("kgs_group", "4x4");
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "kgs_keep", 9));
    ck_assert_ok(ctx, transform(m, "prune-kgs", o));
    check_kgs(weight_of(m, "c3"), 4, 4, 9);
    ck_assert_int_eq(weight_of(m, "stem")->sparsity.kind, IR_SPARSITY_NONE); /* the stem, by default */
    /* the same bits as the public projection on the original weights */
    const ir_tensor *w0 = weight_of(before, "c3");
    float *w = malloc(ir_tensor_numel(w0) * sizeof *w);
    memcpy(w, w0->data, ir_tensor_numel(w0) * sizeof *w);
    uint64_t masks[3 * 2];
    ck_assert_ok(ctx, pdc_prune_project_kgs(ctx, w, O2, C2, 27, 4, 4, 9, 0, NULL, masks));
    ck_assert_mem_eq(weight_of(m, "c3")->data, w, ir_tensor_numel(w0) * sizeof *w);
    const ir_sparsity *s = &weight_of(m, "c3")->sparsity;
    for (int g = 0; g < 6; g++) ck_assert_uint_eq(s->patterns[s->kernel_pattern[(g / 2) * 4 * C2 + (g % 2) * 4]], masks[g]);
    ck_assert_uint_eq(ir_sparsity_kept(weight_of(m, "c3")), (size_t)O2 * C2 * 9);
    free(w);
    /* the pruned model still runs and its text form round-trips with the groups */
    size_t n;
    free(run_ref(m, 1, &n));
    char *text = model_text(m);
    ck_assert_ptr_nonnull(strstr(text, "sparsity pattern 3x3x3 groups=4x4 patterns=["));
    pdc_string_free(text);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(prune_kgs_rates_groups_and_stem)
{
    /* default rate 0.5: 27 - floor(13.5) = 14 kept; a group larger than the grid is cut to it */
    pdc_model *m = video_model();
    pdc_attrs *o = opt_s("kgs_group", "16x3");
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, transform(m, "prune-kgs", o));
    check_kgs(weight_of(m, "c3"), 12, 3, 14);
    check_kgs(weight_of(m, "stem"), 8, 3, 14);
    pdc_model_destroy(m);
    /* per-layer rate: 27 - floor(0.75 * 27) = 7 */
    m = video_model();
    ck_assert_ok(ctx, transform(m, "prune-kgs", opt_s("kgs_rate", "0.2,c3=0.75")));
    check_kgs(weight_of(m, "c3"), 4, 4, 7);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(prune_kgs_limited_masks)
{
    pdc_model *m = video_model();
    pdc_attrs *o = opt_i("kgs_masks", 2);
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "kgs_group", "2x2"));
    ck_assert_ok(ctx, transform(m, "prune-kgs", o));
    check_kgs(weight_of(m, "c3"), 2, 2, 14);
    ck_assert_uint_le(weight_of(m, "c3")->sparsity.n_patterns, 2);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(prune_kgs_then_connectivity)
{
    pdc_model *m = video_model();
    pdc_attrs *o = opt_s("pattern_kernels", "3x3x3");
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "connectivity", "0.25"));
    ck_assert_ok(ctx, transform(m, "prune-kgs,prune-connectivity", o));
    const ir_sparsity *s = &weight_of(m, "c3")->sparsity;
    ck_assert_int_eq(s->go, 4);
    size_t removed = 0;
    for (size_t k = 0; k < s->n_kernels; k++) removed += s->kernel_pattern[k] < 0;
    ck_assert_uint_eq(removed, O2 * C2 / 4); /* floor(0.25 x 96) */
    pdc_model_destroy(m);
}
END_TEST

START_TEST(prune_pattern_takes_3d_kernels_when_listed)
{
    /* default pattern_kernels "3x3": a 3x3x3 conv is left alone, and the note says so */
    pdc_model *m = video_model();
    ck_assert_ok(ctx, transform(m, "prune-pattern", NULL));
    ck_assert_int_eq(weight_of(m, "c3")->sparsity.kind, IR_SPARSITY_NONE);
    pdc_model_destroy(m);
    m = video_model();
    pdc_attrs *o = opt_s("pattern_kernels", "3x3,3x3x3");
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "pattern_size", 6));
    ck_assert_ok(ctx, transform(m, "prune-pattern", o));
    const ir_sparsity *s = &weight_of(m, "c3")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(s->kd, 3);
    ck_assert_int_eq(s->go, 0);
    ck_assert_uint_eq(s->n_patterns, 8);
    for (size_t q = 0; q < s->n_patterns; q++) {
        ck_assert_int_eq(__builtin_popcountll(s->patterns[q]), 6);
        ck_assert_uint_eq(s->patterns[q] >> 13 & 1, 1); /* the 3-D centre */
    }
    pdc_model_destroy(m);
}
END_TEST

static void expect_error(const char *pipeline, pdc_attrs *o, pdc_status status, const char *needle)
{
    pdc_model *m = video_model();
    char *before = model_text(m);
    ck_assert_status(ctx, transform(m, pipeline, o), status);
    ck_assert_error_has(ctx, needle);
    assert_unchanged(m, before);
    pdc_string_free(before);
    pdc_model_destroy(m);
}

START_TEST(bad_options_have_status_and_message)
{
    expect_error("prune-kgs", opt_s("kgs_group", "4"), PDC_ERR_INVALID_ARG,
                 "option kgs_group: \"4\" is not a kernel group OUTxIN with sides in 1..");
    expect_error("prune-kgs", opt_s("kgs_group", "0x4"), PDC_ERR_INVALID_ARG, "option kgs_group: \"0x4\"");
    expect_error("prune-kgs", opt_i("kgs_group", 4), PDC_ERR_INVALID_ARG, "option kgs_group: a number is not");
    expect_error("prune-kgs", opt_i("kgs_keep", 28), PDC_ERR_INVALID_ARG,
                 "layer 'c3': option kgs_keep 28 exceeds its 27-entry window");
    expect_error("prune-kgs", opt_i("kgs_keep", 65), PDC_ERR_INVALID_ARG, "kgs_keep");
    expect_error("prune-kgs", opt_s("kgs_rate", "1.5"), PDC_ERR_INVALID_ARG, "kgs_rate");
    expect_error("prune-kgs", opt_s("kgs_rate", "0.5,nosuch=0.1"), PDC_ERR_NOT_FOUND, "nosuch");
    expect_error("prune-pattern", opt_s("pattern_kernels", "3x3x4"), PDC_ERR_INVALID_ARG,
                 "option pattern_kernels: 3x3x4 in \"3x3x4\" cannot be pattern-pruned");
    expect_error("prune-pattern", opt_s("pattern_kernels", "3x3x3x3"), PDC_ERR_INVALID_ARG,
                 "option pattern_kernels: \"3x3x3x3\" in \"3x3x3x3\" is not a kernel size");
    expect_error("prune-pattern", opt_s("pattern_kernels", "5x5x5"), PDC_ERR_INVALID_ARG,
                 "5x5x5 in \"5x5x5\" cannot be pattern-pruned (kernel sizes must be odd, at least 3x3 and at most 64");
}
END_TEST

int main(void)
{
    return run_tests("prune_kgs", ctx_setup, ctx_teardown, 0,
                     TEST_LIST(projection_keeps_largest_group_norms, projection_bad_arguments,
                               prune_kgs_matches_the_projection, prune_kgs_rates_groups_and_stem,
                               prune_kgs_limited_masks, prune_kgs_then_connectivity, prune_pattern_takes_3d_kernels_when_listed,
                               bad_options_have_status_and_message));
}
