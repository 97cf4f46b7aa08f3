/*
 * test_onnx_models.c - the ONNX importer on the committed PyTorch exports in test/data/onnx (made by
 * test/data/make_onnx_models.py), and its sparsity detectors:
 *
 *  - each model loads, compiles for "ref" and matches PyTorch's stored outputs within 1e-4 x max|ref|;
 *  - loading by extension and by content, from a file and from memory; the ONNX names survive;
 *  - pruned weights are recognised (pattern counts, removed kernels, block shapes), also with stray
 *    zeros inside what pruning kept, through an export and a re-import;
 *  - the pattern, block and unstructured detectors' rules on hand-made weights.
 *
 * Bad input (every prefix, mutants, memory limits) is in test_onnx_bad_input.c, single ops and
 * folding on hand-built graphs in test_onnx_ops.c.
 */
#include <stdint.h>

#include "ir/ir.h"
#include "lib/onnx/onnx.h"
#include "test/common/internals.h"

/* Max |got - want| <= 1e-4 x max|want|, reported on stderr so the figures can be quoted. */
static void check_close(const char *name, const float *got, const float *want, size_t n)
{
    double scale = 0, err = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= err)) err = d, at = i;
    }
    fprintf(stderr, "onnx model %-18s %4zu outputs, max|err| %.3g, max|ref| %.3g (ratio %.2g)\n", name, n, err, scale,
            scale > 0 ? err / scale : err);
    ck_assert_msg(err <= 1e-4 * scale, "%s: element %zu: got %.9g, want %.9g (|err| %.3g > 1e-4 x %.3g)", name, at,
                  (double)got[at], (double)want[at], err, scale);
}

/* ------------------------------------------------------------------ the committed models */

static const char *const models[] = {"resnet_small", "mobilenetv2_small", "vgg_small", "lstm", "gru",
                                     "pattern_cnn", "block_fc", "softmax_v11", "autopad"};

START_TEST(model_matches_pytorch)
{
    const char *name = models[_i];
    size_t nin, nout;
    float *in = (float *)test_read_file(onnx_path(name, ".in.bin"), &nin);
    float *want = (float *)test_read_file(onnx_path(name, ".out.bin"), &nout);
    nin /= sizeof(float);
    nout /= sizeof(float);
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, onnx_path(name, ".onnx"), &m));
    ck_assert_ok(ctx, pdc_model_verify(m));
    size_t ngot;
    float *got = test_run_ref(m, in, nin, 0, &ngot);
    ck_assert_uint_eq(ngot, nout);
    check_close(name, got, want, nout);
    free(got);
    free(in);
    free(want);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(load_by_extension_and_by_content)
{
    pdc_model *m = NULL;
    /* .onnx extension */
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("gru", ".onnx"), &m));
    pdc_model_destroy(m);
    /* by content, from memory and from a file with another name */
    size_t len;
    uint8_t *data = (uint8_t *)test_read_file(onnx_path("gru", ".onnx"), &len);
    ck_assert_ok(ctx, pdc_model_load_memory(ctx, data, len, &m));
    pdc_model_destroy(m);
    const char *path = tmp_path("pdc_onnx_test");
    write_file(path, data, len);
    ck_assert_ok(ctx, pdc_model_load(ctx, path, &m));
    pdc_model_destroy(m);
    /* a truncated .onnx file: the ONNX reader answers, with the path and an offset */
    write_file(path, data, len / 2);
    ck_assert_status(ctx, pdc_model_load(ctx, path, &m), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, "offset");
    free(data);
    ck_assert_status(ctx, pdc_model_load_onnx(ctx, "/nonexistent/model.onnx", &m), PDC_ERR_IO);
    ck_assert_status(ctx, pdc_model_load_onnx(ctx, NULL, &m), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_model_load_onnx_memory(ctx, NULL, 0, &m), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_model_load_onnx_memory(NULL, "x", 1, &m), PDC_ERR_INVALID_ARG);
}
END_TEST

START_TEST(names_are_the_onnx_names)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("resnet_small", ".onnx"), &m));
    size_t n;
    const char *s;
    ck_assert_ok(ctx, pdc_model_num_layers(m, &n));
    ck_assert_uint_eq(n, 33);
    ck_assert_ok(ctx, pdc_model_layer_string(m, 0, PDC_FIELD_NAME, &s));
    ck_assert_str_eq(s, "/stem/stem.0/Conv");
    ck_assert_ok(ctx, pdc_model_layer_string(m, 1, PDC_FIELD_NAME, &s));
    ck_assert_str_eq(s, "/stem/stem.1/BatchNormalization");
    ck_assert_ok(ctx, pdc_model_layer_string(m, n - 1, PDC_FIELD_NAME, &s));
    ck_assert_str_eq(s, "/Softmax");
    ck_assert_ok(ctx, pdc_model_layer_string(m, n - 2, PDC_FIELD_OP, &s));
    ck_assert_str_eq(s, "fc");
    ck_assert_ok(ctx, pdc_model_input_info(m, 0, &s, NULL, NULL));
    ck_assert_str_eq(s, "x");
    ck_assert_ok(ctx, pdc_model_output_info(m, 0, &s, NULL, NULL));
    ck_assert_str_eq(s, "y");
    /* initializers keep their names as IR constants */
    ck_assert_int_ge(ir_model_find_tensor(m, "fc.weight"), 0);
    ck_assert_int_ge(ir_model_find_tensor(m, "/layers/layers.1/down/down.0/Conv_output_0"), 0);
    pdc_model_destroy(m);

    /* LSTM: the folded initial state is an IR constant under its ONNX name; two outputs */
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("lstm", ".onnx"), &m));
    int h0 = ir_model_find_tensor(m, "/rnn/Expand_output_0");
    ck_assert_int_ge(h0, 0);
    ck_assert_int_eq(m->tensors[h0].kind, IR_TENSOR_CONST);
    ck_assert_ok(ctx, pdc_model_num_outputs(m, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_ok(ctx, pdc_model_output_info(m, 1, &s, NULL, NULL));
    ck_assert_str_eq(s, "h_n");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(pattern_pruned_weights_are_recognised)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("pattern_cnn", ".onnx"), &m));
    /* make_onnx_models.py: 4, 6 and 5 four-entry patterns; 0, 124 and 398 kernels removed */
    static const struct {
        const char *w;
        size_t patterns, removed;
    } want[] = {{"conv1.weight", 4, 0}, {"conv2.weight", 6, 124}, {"conv3.weight", 5, 398}};
    size_t fewer = 0;
    for (size_t i = 0; i < 3; i++) {
        const ir_tensor *w = tensor(m, want[i].w);
        const ir_sparsity *s = &w->sparsity;
        ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
        ck_assert_int_eq(s->kh, 3);
        ck_assert_uint_eq(s->n_patterns, want[i].patterns);
        for (size_t p = 0; p < s->n_patterns; p++) ck_assert_int_eq(__builtin_popcountll(s->patterns[p]), 4);
        size_t removed = 0;
        for (size_t k = 0; k < s->n_kernels; k++) {
            uint64_t nz = 0;
            for (int p = 0; p < 9; p++)
                if (w->data[k * 9 + (size_t)p] != 0.0f) nz |= 1ull << p;
            if (s->kernel_pattern[k] < 0) {
                ck_assert_uint_eq(nz, 0);
                removed++;
                continue;
            }
            uint64_t pat = s->patterns[s->kernel_pattern[k]];
            ck_assert_msg(!(nz & ~pat), "kernel %zu has weights outside its pattern", k);
            fewer += __builtin_popcountll(nz) < 4; /* still assigned a 4-entry pattern */
        }
        ck_assert_uint_eq(removed, want[i].removed);
    }
    ck_assert_uint_gt(fewer, 10);
    /* inspection sees the compression */
    int64_t all = 0, kept = 0;
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 2, PDC_STAT_WEIGHTS, &all));
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 2, PDC_STAT_KEPT_WEIGHTS, &kept));
    ck_assert_int_eq(all, 32 * 16 * 9 + 32);
    ck_assert_int_eq(kept, (512 - 124) * 4 + 32);
    const char *text;
    ck_assert_ok(ctx, pdc_model_layer_string(m, 2, PDC_FIELD_SPARSITY, &text));
    ck_assert_msg(strstr(text, "6 patterns") != NULL, "%s", text);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(block_pruned_weights_are_recognised)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("block_fc", ".onnx"), &m));
    const ir_sparsity *s = &tensor(m, "fc1.weight")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s->bh, 1);
    ck_assert_int_eq(s->bw, 4);
    size_t zero = 0;
    for (size_t b = 0; b < s->n_blocks; b++) zero += !s->block_mask[b];
    ck_assert_uint_eq(s->n_blocks, 2048);
    ck_assert_uint_eq(zero, 1457); /* printed by make_onnx_models.py */
    s = &tensor(m, "fc2.weight")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s->bh, 4);
    ck_assert_int_eq(s->bw, 4);
    zero = 0;
    for (size_t b = 0; b < s->n_blocks; b++) zero += !s->block_mask[b];
    ck_assert_uint_eq(zero, 259);
    ck_assert_int_eq(tensor(m, "fc3.weight")->sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
    ck_assert_uint_eq(ir_sparsity_kept(tensor(m, "fc3.weight")), 2048 - 1213);
    ck_assert_int_eq(tensor(m, "fc4.weight")->sparsity.kind, IR_SPARSITY_NONE);
    ck_assert_int_eq(tensor(m, "fc1.bias")->sparsity.kind, IR_SPARSITY_NONE);
    /* dense models stay dense */
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("resnet_small", ".onnx"), &m));
    for (size_t i = 0; i < m->n_tensors; i++) ck_assert_int_eq(m->tensors[i].sparsity.kind, IR_SPARSITY_NONE);
    pdc_model_destroy(m);
}
END_TEST

/* Exported weights hold stray exact zeros inside what pruning kept (weight decay, fp16 round trips,
 * dead units): block_fc's fc1 and pattern_cnn's conv2 get a few, go out as ONNX and come back with
 * the same structure - the zeros stay stored zeros of kept blocks and patterns. */
static pdc_model *onnx_round_trip(pdc_model *m)
{
    const char *path = tmp_path("stray.onnx");
    ck_assert_ok(ctx, pdc_model_save_onnx(m, path));
    pdc_model *back = NULL;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, path, &back));
    pdc_model_destroy(m);
    return back;
}

START_TEST(stray_zeros_keep_the_structure)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("block_fc", ".onnx"), &m));
    ir_tensor *w = &m->tensors[ir_model_find_tensor(m, "fc1.weight")];
    const ir_sparsity *s = &w->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_BLOCK);
    size_t stray = 0; /* the first entry of every 40th kept 1x4 block: 15 of 591, 0.6% of the kept weights */
    for (size_t b = 0, k = 0; b < s->n_blocks; b++)
        if (s->block_mask[b] && k++ % 40 == 0) w->data[b * 4] = 0.0f, stray++;
    ck_assert_uint_ge(stray, 2);
    m = onnx_round_trip(m);
    s = &tensor(m, "fc1.weight")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s->bh, 1);
    ck_assert_int_eq(s->bw, 4);
    size_t zero = 0;
    for (size_t b = 0; b < s->n_blocks; b++) zero += !s->block_mask[b];
    ck_assert_uint_eq(zero, 1457);
    /* inspect says how full the kept blocks are: 591 blocks of 4, 15 stray zeros */
    int fc1 = ir_model_find_tensor(m, "fc1.weight"), found = 0;
    for (size_t li = 0; li < m->n_layers; li++) {
        if (m->layers[li].n_inputs < 2 || m->layers[li].inputs[1] != fc1) continue;
        found++;
        char text[256], want[64];
        ir_layer_sparsity_text(m, li, text, sizeof text);
        snprintf(want, sizeof want, "fill %.1f%%", 100.0 * (double)(591 * 4 - stray) / (591 * 4));
        ck_assert_msg(strstr(text, want) != NULL, "'%s' lacks '%s'", text, want);
    }
    ck_assert_int_eq(found, 1);
    /* the fill threshold: zeros in 3 of every 4 kept blocks' first entries (fill 81%) are not blocks */
    w = &m->tensors[ir_model_find_tensor(m, "fc1.weight")];
    for (size_t b = 0, k = 0; b < s->n_blocks; b++)
        if (s->block_mask[b] && k++ % 4 != 0) w->data[b * 4] = 0.0f;
    ir_sparsity none;
    ck_assert_ok(ctx, onnx_detect_block(ctx, w, &none));
    ck_assert_int_eq(none.kind, IR_SPARSITY_NONE);
    /* ... which a lower context option sparsity_min_fill accepts */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "sparsity_min_fill", "0.8"));
    ck_assert_ok(ctx, onnx_detect_block(ctx, w, &none));
    ck_assert_int_eq(none.kind, IR_SPARSITY_BLOCK);
    ir_sparsity_free(&none);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "sparsity_min_fill", "0.95"));
    pdc_model_destroy(m);

    ck_assert_ok(ctx, pdc_model_load(ctx, onnx_path("pattern_cnn", ".onnx"), &m));
    w = &m->tensors[ir_model_find_tensor(m, "conv2.weight")];
    s = &w->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    size_t nk = s->n_kernels, n_patterns = s->n_patterns;
    uint64_t *kernel_mask = malloc(nk * sizeof *kernel_mask); /* 0: removed */
    stray = 0; /* one kept entry of every 50th kept kernel */
    for (size_t k = 0, i = 0; k < nk; k++) {
        kernel_mask[k] = s->kernel_pattern[k] < 0 ? 0 : s->patterns[s->kernel_pattern[k]];
        if (!kernel_mask[k] || i++ % 50) continue;
        w->data[k * 9 + (size_t)__builtin_ctzll(kernel_mask[k])] = 0.0f;
        stray++;
    }
    ck_assert_uint_ge(stray, 5);
    m = onnx_round_trip(m);
    s = &tensor(m, "conv2.weight")->sparsity;
    ck_assert_int_eq(s->kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(s->n_patterns, n_patterns);
    /* The same pattern per kernel, except that a kernel with a stray zero may take another pattern of
     * the same size that also covers what it keeps (a tie the set's order decides); none is removed. */
    w = &m->tensors[ir_model_find_tensor(m, "conv2.weight")];
    for (size_t k = 0, i = 0; k < nk; k++) {
        uint64_t got = s->kernel_pattern[k] < 0 ? 0 : s->patterns[s->kernel_pattern[k]];
        int touched = kernel_mask[k] && i++ % 50 == 0;
        uint64_t nz = 0;
        for (int p = 0; p < 9; p++)
            if (w->data[k * 9 + (size_t)p] != 0.0f) nz |= 1ull << p;
        if (touched) {
            ck_assert_msg(got && !(nz & ~got) && __builtin_popcountll(got) == __builtin_popcountll(kernel_mask[k]),
                          "kernel %zu: pattern %llx does not cover %llx", k, (unsigned long long)got,
                          (unsigned long long)nz);
        } else {
            ck_assert_msg(got == kernel_mask[k], "kernel %zu: pattern %llx, was %llx", k, (unsigned long long)got,
                          (unsigned long long)kernel_mask[k]);
        }
    }
    free(kernel_mask);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ sparsity detectors */

/* A constant tensor over caller data, for the detectors. */
static ir_tensor weight(int rank, const int64_t *dims, float *data)
{
    ir_tensor t;
    memset(&t, 0, sizeof t);
    t.name = "w";
    t.kind = IR_TENSOR_CONST;
    t.rank = rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    t.data = data;
    return t;
}

/* Fills kernel k (3x3) with non-zeros exactly at the bits of mask. */
static void set_kernel(float *w, size_t k, uint32_t mask)
{
    for (int p = 0; p < 9; p++) w[k * 9 + (size_t)p] = (mask >> p & 1) ? 0.5f + (float)p : 0.0f;
}

START_TEST(pattern_detector_rules)
{
    /* 2x4 kernels: A = 0x1b (4 bits), B = 0x36 (4 bits), A-minus-one (3 bits, only in A),
     * 0x12 (2 bits: in both A and B -> the lower index, A), an all-zero kernel, B again, ... */
    const uint32_t A = 0x1b, B = 0x36;
    const uint32_t masks[8] = {0x12, A, B, 0x0b, 0, B, 0x10, A};
    float w[40 * 9];
    for (size_t k = 0; k < 8; k++) set_kernel(w, k, masks[k]);
    /* alone, those 8 fill their patterns to 22 of 28 entries: below the default sparsity_min_fill (0.95), not a pattern */
    ir_tensor t = weight(4, I64(2, 4, 3, 3), w);
    ir_sparsity s;
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    /* with 24 more exact A and B kernels: 118 of 124 (95.2%) */
    for (size_t k = 8; k < 32; k++) set_kernel(w, k, k % 2 ? A : B);
    t = weight(4, I64(4, 8, 3, 3), w);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(s.n_patterns, 2);
    ck_assert_uint_eq(s.patterns[0], A); /* first kernel with a maximal mask is kernel 1 */
    ck_assert_uint_eq(s.patterns[1], B);
    const int32_t want[8] = {0, 0, 1, 0, -1, 1, 0, 0};
    for (size_t k = 0; k < 8; k++) ck_assert_msg(s.kernel_pattern[k] == want[k], "kernel %zu: %d", k, s.kernel_pattern[k]);
    ck_assert_ok(ctx, ir_sparsity_validate(ctx, &t, &s));
    ir_sparsity_free(&s);

    /* connectivity pruning alone: the full window is the one pattern (A lies inside it; 13 more full
     * kernels bring the fill to 130 of 135) */
    const uint32_t m2[3] = {0x1ff, A, 0};
    for (size_t k = 0; k < 16; k++) set_kernel(w, k, k < 3 ? m2[k] : 0x1ff);
    t = weight(4, I64(16, 1, 3, 3), w);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(s.n_patterns, 1);
    ck_assert_uint_eq(s.patterns[0], 0x1ff);
    ck_assert_int_eq(s.kernel_pattern[1], 0);
    ck_assert_int_eq(s.kernel_pattern[2], -1);
    ir_sparsity_free(&s);

    /* no zeros at all: dense; zeros only inside dense-covered kernels: not a pattern */
    t = weight(4, I64(3, 1, 3, 3), w);
    for (size_t k = 0; k < 3; k++) set_kernel(w, k, 0x1ff);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    set_kernel(w, 1, 0x1fe);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);

    /* 33 distinct 4-entry masks (none inside another): too many patterns */
    float big[40 * 9];
    size_t k = 0;
    for (uint32_t m = 0; m < 512 && k < 33; m++)
        if (__builtin_popcount(m) == 4) set_kernel(big, k++, m);
    t = weight(4, I64(33, 1, 3, 3), big);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    t = weight(4, I64(32, 1, 3, 3), big);
    ck_assert_ok(ctx, onnx_detect_pattern(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(s.n_patterns, 32);
    ir_sparsity_free(&s);
}
END_TEST

START_TEST(block_detector_rules)
{
    /* an 8x8 matrix with zero blocks placed on a 4x4 grid: 4x4 wins over 2x2, 1x4 and 4x1 */
    float w[64];
    for (int i = 0; i < 64; i++) w[i] = 1.0f + (float)i;
    for (int r = 0; r < 4; r++)
        for (int c = 4; c < 8; c++) w[r * 8 + c] = 0;
    ir_tensor t = weight(2, I64(8, 8), w);
    ir_sparsity s;
    ck_assert_ok(ctx, onnx_detect_block(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s.bh, 4);
    ck_assert_int_eq(s.bw, 4);
    ck_assert_uint_eq(s.n_blocks, 4);
    ck_assert_int_eq(s.block_mask[1], 0);
    ck_assert_int_eq(s.block_mask[0] + s.block_mask[2] + s.block_mask[3], 3);
    ir_sparsity_free(&s);

    /* one 2x2 zero block: only 2x2 covers it exactly (1/16 blocks = 6% < 10%: refused; two: 12%) */
    for (int i = 0; i < 64; i++) w[i] = 1.0f + (float)i;
    w[0] = w[1] = w[8] = w[9] = 0;
    ck_assert_ok(ctx, onnx_detect_block(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    w[18] = w[19] = w[26] = w[27] = 0;
    ck_assert_ok(ctx, onnx_detect_block(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s.bh, 2);
    ck_assert_int_eq(s.bw, 2);
    ir_sparsity_free(&s);

    /* whole 8x1 columns: 8x1 (area 8) beats 4x1 */
    for (int i = 0; i < 64; i++) w[i] = 1.0f + (float)i;
    for (int r = 0; r < 8; r++) w[r * 8 + 3] = w[r * 8 + 6] = 0;
    ck_assert_ok(ctx, onnx_detect_block(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(s.bh, 8);
    ck_assert_int_eq(s.bw, 1);
    ir_sparsity_free(&s);

    /* scattered zeros: no block; unstructured only from 50% zeros */
    for (int i = 0; i < 64; i++) w[i] = (i % 3 == 0) ? 0.0f : 1.0f;
    ck_assert_ok(ctx, onnx_detect_block(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    ck_assert_ok(ctx, onnx_detect_unstructured(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_NONE);
    for (int i = 0; i < 64; i++) w[i] = (i % 2 == 0) ? 0.0f : 1.0f;
    ck_assert_ok(ctx, onnx_detect_unstructured(ctx, &t, &s));
    ck_assert_int_eq(s.kind, IR_SPARSITY_UNSTRUCTURED);
    ck_assert_uint_eq(s.n_mask, 64);
    ir_sparsity_free(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onnx_models");
    TCase *tc = test_add_tcase(s, "models", tmpdir_setup, tmpdir_teardown, 300, NULL);
    tcase_add_loop_test(tc, model_matches_pytorch, 0, (int)(sizeof models / sizeof models[0]));
    test_add_tests(tc, TEST_LIST(load_by_extension_and_by_content, names_are_the_onnx_names,
                                 pattern_pruned_weights_are_recognised, block_pruned_weights_are_recognised,
                                 stray_zeros_keep_the_structure));
    test_add_tcase(s, "sparsity", ctx_setup, ctx_teardown, 0, TEST_LIST(pattern_detector_rules, block_detector_rules));
    return test_run_suite(s);
}
