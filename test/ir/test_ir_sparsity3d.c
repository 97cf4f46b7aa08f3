/*
 * test_ir_sparsity3d.c - sparsity of 3-D conv weights: 3-D pattern windows and kernel groups (KGS),
 * set through pdc_model_set_sparsity_kgs, checked by the validator (each broken fact refused with a
 * message naming it), described, written and read back in the text form and the .pdc format (version 2
 * only when needed), and recognised again from the exact zeros of an ONNX export.
 */
#include <math.h>

#include "ir/ir.h"
#include "lib/format/format_pdc.h"
#include "test/common/internals.h"

#define O 8
#define C 8
#define WIN 27

/* Group (o/4, c/4)'s mask: four different masks over the 3x3x3 window, centre (13) always kept. */
static uint64_t group_mask(int64_t o, int64_t c)
{
    static const uint64_t masks[4] = {(1u << 13) | (1u << 4) | (1u << 22), (1u << 13) | (1u << 0) | (1u << 26),
                                      (1u << 13) | (1u << 12) | (1u << 14) | (1u << 10),
                                      (1u << 13) | (1u << 16)};
    return masks[(o / 4) * 2 + c / 4];
}

/* x[1,C,5,6,7] -> conv3d(w[O,C,3,3,3], pads 1, strides 1x2x1) -> y. w holds the 4x4 KGS masks (kernel
 * (1,1) removed) with non-zero kept weights; *kp and *pat get the matching description. */
static pdc_model *kgs_model(int32_t kp[O * C], uint64_t pat[4])
{
    pdc_model *m = new_model("kgs");
    add_input(m, "x", 5, I64(1, C, 5, 6, 7));
    float w[O * C * WIN];
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            const int64_t k = o * C + c;
            const uint64_t gm = group_mask(o, c);
            pat[(o / 4) * 2 + c / 4] = gm;
            kp[k] = k == 1 * C + 1 ? -1 : (int32_t)((o / 4) * 2 + c / 4);
            for (int p = 0; p < WIN; p++)
                w[k * WIN + p] = kp[k] >= 0 && (gm >> p & 1) ? 0.25f + 0.01f * (float)((k * 7 + p) % 13) : 0.0f;
        }
    add_values(m, "w", 5, I64(O, C, 3, 3, 3), w);
    pdc_attrs *a = opt_ints("pads", 6, I64(1, 1, 1, 1, 1, 1));
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 3, I64(1, 2, 1)));
    add_layer(m, "conv3", "conv", "x,w", "y", a);
    add_output(m, "y");
    return m;
}

static pdc_model *kgs_model_set(void)
{
    int32_t kp[O * C];
    uint64_t pat[4];
    pdc_model *m = kgs_model(kp, pat);
    ck_assert_ok(ctx, pdc_model_set_sparsity_kgs(m, "w", 3, 3, 3, 4, 4, 4, pat, O * C, kp));
    return m;
}

START_TEST(kgs_is_set_counted_and_described)
{
    pdc_model *m = kgs_model_set();
    const ir_tensor *w = tensor(m, "w");
    ck_assert_int_eq(w->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(w->sparsity.kd, 3);
    ck_assert_int_eq(w->sparsity.go, 4);
    ck_assert_int_eq(w->sparsity.gc, 4);
    ck_assert_uint_eq(ir_sparsity_window(&w->sparsity), 27);
    /* kept: each group's mask size times its live kernels (16 each, one removed from group 0) */
    ck_assert_uint_eq(ir_sparsity_kept(w), 15 * 3 + 16 * 3 + 16 * 4 + 16 * 2);
    /* element (o=0, c=0, d=0, h=1, w=1) is position 4: kept by group 0's mask; position 5 is not */
    ck_assert_int_eq(ir_sparsity_keeps(w, 4), 1);
    ck_assert_int_eq(ir_sparsity_keeps(w, 5), 0);
    ck_assert_int_eq(ir_sparsity_keeps(w, (1 * C + 1) * WIN + 13), 0); /* the removed kernel */
    const char *text;
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_SPARSITY, &text));
    assert_contains(text, "pattern 3x3x3: 4 patterns, kernel groups 4x4, 98% kernels kept");
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_PATTERNS, &text));
    ck_assert_str_eq(text, "3x3x3 0x402010 0x4002001 0x7400 0x12000");
    pdc_model_destroy(m);
}
END_TEST

/* pdc_model_set_sparsity_kgs fails with status and a message containing needle; the model stays dense. */
static void kgs_refused(int64_t kd, int64_t kh, int64_t kw, int64_t go, int64_t gc, int mix, pdc_status status,
                        const char *needle)
{
    int32_t kp[O * C];
    uint64_t pat[4];
    pdc_model *m = kgs_model(kp, pat);
    if (mix) kp[5 * C + 2] = 3; /* group (1, 0) is pattern 2 */
    ck_assert_status(ctx, pdc_model_set_sparsity_kgs(m, "w", kd, kh, kw, go, gc, 4, pat, O * C, kp), status);
    ck_assert_error_has(ctx, needle);
    ck_assert_int_eq(tensor(m, "w")->sparsity.kind, IR_SPARSITY_NONE);
    pdc_model_destroy(m);
}

START_TEST(bad_kgs_is_refused_with_messages)
{
    kgs_refused(0, 3, 3, 4, 4, 0, PDC_ERR_INVALID_ARG, "window depth kd is 0, expected >= 1");
    kgs_refused(3, 3, 2, 4, 4, 0, PDC_ERR_INVALID_MODEL, "tensor 'w': pattern window 3x3x2 does not match kernel 3x3x3");
    kgs_refused(3, 3, 3, 4, 4, 1, PDC_ERR_INVALID_MODEL, "tensor 'w': kernel group at (4, 0) mixes patterns 2 and 3");
    kgs_refused(3, 3, 3, 16, 4, 0, PDC_ERR_INVALID_MODEL, "kernel group 16x4 is not within the 8x8 kernel grid");
    kgs_refused(3, 3, 3, 4, 0, 0, PDC_ERR_INVALID_MODEL, "kernel group 4x0 is not within");
    /* a 2-D window on a 3-D weight, and a 3-D window on a 2-D weight */
    int32_t kp[O * C];
    uint64_t pat[4];
    pdc_model *m = kgs_model(kp, pat);
    ck_assert_status(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 4, pat, O * C, kp), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "tensor 'w': a 3x3 pattern window needs a 2-D conv weight [O,C,kh,kw], got rank 5");
    /* kept positions must hold the non-zeros: a mask without position 4 prunes group 0's weights there */
    uint64_t narrow[4] = {pat[0] & ~(1ull << 4), pat[1], pat[2], pat[3]};
    ck_assert_status(ctx, pdc_model_set_sparsity_kgs(m, "w", 3, 3, 3, 4, 4, 4, narrow, O * C, kp),
                     PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "tensor 'w': element 4 is");
    ck_assert_error_has(ctx, "but its sparsity prunes it");
    pdc_model_destroy(m);
    pdc_model *m2 = new_model("two_d");
    add_random(m2, "w2", 4, I64(2, 2, 3, 3), 1, -1, 1);
    ck_assert_status(ctx, pdc_model_set_sparsity_kgs(m2, "w2", 1, 3, 3, 0, 0, 1, (uint64_t[]){0x1ff}, 4,
                                                     (int32_t[]){0, 0, 0, 0}),
                     PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "tensor 'w2': a 1x3x3 pattern window needs a 3-D conv weight [O,C,kd,kh,kw], got rank 4");
    pdc_model_destroy(m2);
}
END_TEST

START_TEST(text_form_round_trips)
{
    pdc_model *m = kgs_model_set();
    char *text = print_ok(m, PDC_PRINT_ELIDE_WEIGHTS);
    assert_contains(text, "  sparsity pattern 3x3x3 groups=4x4 patterns=[0x402010, 0x4002001, 0x7400, 0x12000] "
                          "kernels=[0, 0, 0, 0, 1, 1, 1, 1, 0, -1, 0, 0, 1,");
    pdc_free(text);
    assert_fixed_point(m, 0);
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    pdc_model_destroy(m);
    /* without groups: plain 3-D patterns */
    const char *plain = "pdcir 1\nmodel \"p\"\nconst w : f32[1,2,1,1,3] = [0, 1, 2, 0, 3, 0]\n"
                        "  sparsity pattern 1x1x3 patterns=[0x6, 0x3] kernels=[0, 1]\n";
    ir_model *p = parse_ok(plain);
    const ir_tensor *w = &p->tensors[0];
    ck_assert_int_eq(w->sparsity.kd, 1);
    ck_assert_int_eq(w->sparsity.go, 0);
    assert_fixed_point(p, 0);
    ir_model_destroy(p);
    /* parse errors */
    static const struct {
        const char *line, *needle;
    } bad[] = {
        {"  sparsity pattern 0x1x3 patterns=[0x6] kernels=[0, 0]", "pattern window depth KD must be at least 1"},
        {"  sparsity pattern 1x1x3 groups=0x1 patterns=[0x6] kernels=[0, 0]", "kernel group GOxGC must be at least 1x1"},
        {"  sparsity pattern 1x1x3 groups=1 patterns=[0x6] kernels=[0, 0]", "'x' (as in 3x3)"},
        {"  sparsity pattern 1x3 patterns=[0x6] kernels=[0, 0]",
         "a 1x3 pattern window needs a 2-D conv weight [O,C,kh,kw], got rank 5"},
        {"  sparsity pattern 1x1x3 groups=1x2 patterns=[0x6, 0x3] kernels=[0, 1]",
         "kernel group at (0, 0) mixes patterns 0 and 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc, "pdcir 1\nconst w : f32[1,2,1,1,3] = [0, 1, 2, 0, 3, 0]\n%s\n", bad[i].line);
        ir_model *q = NULL;
        ck_assert_int_ne(ir_parse(ctx, doc, strlen(doc), &q), PDC_OK);
        ck_assert_ptr_null(q);
        ck_assert_error_has(ctx, "line 3");
        ck_assert_error_has(ctx, bad[i].needle);
    }
}
END_TEST

START_TEST(pdc_format_round_trips_as_version_2)
{
    pdc_model *m = kgs_model_set();
    ir_model *back = save_load(m);
    test_assert_models_equal(m, back, 0);
    ir_model_destroy(back);
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    ck_assert_uint_eq(pdc_load_u32le(f + 8), 2);
    /* the same payload under version 1 has a record that version does not have */
    size_t n1;
    uint8_t *f1 = make_file(f + PDC_FORMAT_HEADER_SIZE, n - PDC_FORMAT_HEADER_SIZE - PDC_FORMAT_TRAILER_SIZE, 1, 0, &n1);
    ir_model *none = NULL;
    ck_assert_status(ctx, pdc_format_load(ctx, f1, n1, &none), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "unknown sparsity kind 5");
    ck_assert_ptr_null(none);
    pdc_free(f1);
    pdc_free(f);
    pdc_model_destroy(m);
    /* without 3-D windows or groups the file stays version 1, readable by older pdc */
    pdc_model *d = new_model("two_d");
    add_random(d, "w2", 4, I64(2, 2, 3, 3), 1, 0.5f, 1);
    ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(d, "w2", 3, 3, 1, (uint64_t[]){0x1ff}, 4, (int32_t[]){0, 0, 0, 0}));
    f = save_bytes(d, &n);
    ck_assert_uint_eq(pdc_load_u32le(f + 8), 1);
    pdc_free(f);
    pdc_model_destroy(d);
}
END_TEST

/* Saved as ONNX (dense, pruned weights as zeros) and loaded back: the kernel groups are found again. */
START_TEST(onnx_import_recognises_kgs)
{
    pdc_model *m = kgs_model_set(), *back;
    ck_assert_ok(ctx, pdc_model_save_onnx(m, tmp_path("kgs.onnx")));
    ck_assert_ok(ctx, pdc_model_load(ctx, tmp_path("kgs.onnx"), &back));
    test_assert_sparsity_equal(&tensor(back, "w")->sparsity, &tensor(m, "w")->sparsity, "w", 1);
    assert_same_outputs(m, back, 0.0f);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

/* Kernels on 3 masks in no group order: plain 3-D patterns, no groups. */
START_TEST(onnx_import_recognises_3d_patterns)
{
    static const uint64_t masks[3] = {0x402010, 0x4002001, 0x7400};
    pdc_model *m = new_model("p3"), *back;
    add_input(m, "x", 5, I64(1, C, 4, 4, 4));
    float w[O * C * WIN];
    for (int k = 0; k < O * C; k++)
        for (int p = 0; p < WIN; p++) w[k * WIN + p] = masks[(k * 5 + k / 7) % 3] >> p & 1 ? 0.5f - 0.03f * (float)p : 0;
    add_values(m, "w", 5, I64(O, C, 3, 3, 3), w);
    add_layer(m, "conv3", "conv", "x,w", "y", opt_ints("pads", 6, I64(1, 1, 1, 1, 1, 1)));
    add_output(m, "y");
    ck_assert_ok(ctx, pdc_model_save_onnx(m, tmp_path("p3.onnx")));
    ck_assert_ok(ctx, pdc_model_load(ctx, tmp_path("p3.onnx"), &back));
    const ir_sparsity *s = &tensor(back, "w")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(s->kd, 3);
    ck_assert_int_eq(s->go, 0);
    ck_assert_uint_eq(s->n_patterns, 3);
    for (int k = 0; k < O * C; k++) ck_assert_uint_eq(s->patterns[s->kernel_pattern[k]], masks[(k * 5 + k / 7) % 3]);
    assert_same_outputs(m, back, 0.0f);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("ir_sparsity3d", tmpdir_setup, tmpdir_teardown, 0,
                     TEST_LIST(kgs_is_set_counted_and_described, bad_kgs_is_refused_with_messages,
                               text_form_round_trips, pdc_format_round_trips_as_version_2, onnx_import_recognises_kgs,
                               onnx_import_recognises_3d_patterns));
}
