/*
 * test_format_roundtrip.c - .pdc files of models built here: save -> load -> save is byte-identical
 * and the model comes back bit for bit (weights, every sparsity kind, attributes of every type,
 * absent inputs and outputs, symbolic shapes); the header's layout; the public save/load; and the
 * same files damaged: bad magic, newer versions, flipped bits, every truncation, random edits with
 * a valid checksum - always PDC_ERR_CORRUPT (or a clean status) and a message, never a model.
 * Hand-written payloads are in test_format_crafted.c, CRC-32, buffers and files in test_format_bytes.c.
 */
#include "ir/ir.h"
#include "lib/format/format_pdc.h"
#include "test/common/internals.h"

/* ================================================================== model builders */

static float *weights(size_t n, uint32_t seed)
{
    float *w = pdc_alloc(ctx, n * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, n, seed);
    return w;
}

/* conv (pattern-sparse weight, bias, every window attribute) -> relu -> conv (block-sparse, no bias)
 * -> clip (float attrs) -> flatten -> fc (unstructured-sparse, absent bias) -> softmax, with
 * constants interleaved between layers and an unused rank-0 constant. */
static ir_model *build_cnn(void)
{
    ir_model *m = new_model("cnn \xc3\xa9 test");
    add_input(m, "x", DIMS(1, 4, 8, 8));

    /* conv1: [8,4,3,3], pattern sparsity: kernel k on pattern k % 4 - 1 (-1: removed) */
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w1", DIMS(8, 4, 3, 3), weights(8 * 4 * 9, 1)));
    ir_sparsity s1 = {.kind = IR_SPARSITY_PATTERN, .kh = 3, .kw = 3, .n_patterns = 3, .n_kernels = 32};
    s1.patterns = pdc_calloc(ctx, 3, sizeof *s1.patterns);
    s1.patterns[0] = 0x1BA;
    s1.patterns[1] = 0x0F0;
    s1.patterns[2] = 0x16A;
    s1.kernel_pattern = pdc_calloc(ctx, 32, sizeof *s1.kernel_pattern);
    for (int k = 0; k < 32; k++) s1.kernel_pattern[k] = (int32_t)(k % 4) - 1;
    attach_sparsity(m, "w1", &s1);
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "b1", DIMS(8), weights(8, 2)));

    ir_attrs a = {0};
    set_conv_window(ctx, &a);
    add_op(m, "conv1", IR_OP_CONV, NAMES("x", "w1", "b1"), NAMES("c1"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "empty_list", 0, NULL));
    add_op(m, "relu1", IR_OP_RELU, NAMES("c1"), NAMES("r1"), &a);
    ir_attrs_free(&a);

    /* conv2: [8,8,1,1], block sparsity 2x4 over the [8, 8] matrix view */
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w2", DIMS(8, 8, 1, 1), weights(64, 3)));
    ir_sparsity s2 = {.kind = IR_SPARSITY_BLOCK, .bh = 2, .bw = 4, .n_blocks = 8};
    s2.block_mask = pdc_calloc(ctx, 8, 1);
    for (int b = 0; b < 8; b++) s2.block_mask[b] = (uint8_t)(b % 3 ? 1 : 0);
    attach_sparsity(m, "w2", &s2);
    add_op(m, "conv2", IR_OP_CONV, NAMES("r1", "w2"), NAMES("c2"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", 6.0f));
    add_op(m, "clip2", IR_OP_CLIP, NAMES("c2"), NAMES("k2"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    add_op(m, "flatten", IR_OP_FLATTEN, NAMES("k2"), NAMES("flat"), &a);
    ir_attrs_free(&a);

    /* fc: [10, 512], unstructured sparsity, bias absent */
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "fc_w", DIMS(10, 512), weights(5120, 4)));
    ir_sparsity s3 = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = 5120};
    s3.mask = pdc_calloc(ctx, 5120, 1);
    for (int i = 0; i < 5120; i++) s3.mask[i] = (uint8_t)((i * 7 % 5) < 2 ? (i % 3 ? 1 : 0xFF) : 0);
    attach_sparsity(m, "fc_w", &s3);
    add_op(m, "fc", IR_OP_FC, NAMES("flat", "fc_w", NULL), NAMES("logits"), NULL);

    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "unused_scalar", 0, NULL, weights(1, 5)));

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", -1));
    add_op(m, "softmax", IR_OP_SOFTMAX, NAMES("logits"), NAMES("prob"), &a);
    ir_attrs_free(&a);

    add_output(m, "prob");
    add_output(m, "r1");
    return m;
}

/* lstm with absent bias, sequence_lens and c0, absent y_h output, a string attribute; the
 * recurrence weight is block-sparse over its [16, 4] matrix view. */
static ir_model *build_lstm(void)
{
    ir_model *m = new_model("rnn");
    add_input(m, "seq", DIMS(5, 2, 3));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "W", DIMS(1, 16, 3), weights(48, 6)));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "R", DIMS(1, 16, 4), weights(64, 7)));
    /* partial edge blocks: [16, 4] in 4x3 blocks -> 4 x 2 */
    ir_sparsity s = {.kind = IR_SPARSITY_BLOCK, .bh = 4, .bw = 3, .n_blocks = 8};
    s.block_mask = pdc_calloc(ctx, 8, 1);
    for (int b = 0; b < 8; b++) s.block_mask[b] = (uint8_t)(b & 1);
    attach_sparsity(m, "R", &s);
    add_input(m, "h0", DIMS(1, 2, 4));
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "forward"));
    add_op(m, "lstm", IR_OP_LSTM, NAMES("seq", "W", "R", NULL, "", "h0", NULL), NAMES("y", NULL, "y_c"), &a);
    ir_attrs_free(&a);
    add_output(m, "y");
    add_output(m, "y_c");
    return m;
}

/* A symbolic batch: the fc output's shape is unknown (rank -1) until the input is fixed. */
static ir_model *build_symbolic(void)
{
    ir_model *m = new_model("sym");
    add_input(m, "x", DIMS(-1, 16));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", DIMS(4, 16), weights(64, 8)));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "b", DIMS(4), NULL));
    add_op(m, "fc", IR_OP_FC, NAMES("x", "w", "b"), NAMES("y"), NULL);
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", -INFINITY)); /* odd but legal: not NaN */
    add_op(m, "leaky", IR_OP_LEAKY_RELU, NAMES("y"), NAMES("z"), &a);
    ir_attrs_free(&a);
    add_output(m, "z");
    return m;
}

static ir_model *build_model(int which)
{
    switch (which) {
    case 0: return build_cnn();
    case 1: return build_lstm();
    default: return build_symbolic();
    }
}

/* ================================================================== helpers */

/* Recomputes the trailing checksum after the test edited the bytes. */
static void fix_crc(uint8_t *data, size_t size)
{
    pdc_store_u32le(data + size - 4, pdc_crc32(0, data, size - 4));
}

/* Loads; on success destroys the model. Returns the status. */
static pdc_status try_load(const void *data, size_t size)
{
    ir_model *m = NULL;
    pdc_status st = pdc_format_load(ctx, data, size, &m);
    if (st == PDC_OK) ck_assert_ptr_nonnull(m);
    else ck_assert_ptr_null(m);
    ir_model_destroy(m);
    return st;
}

/* ================================================================== round trips */

START_TEST(test_roundtrip_identical)
{
    ir_model *m = build_model(_i);
    size_t n1;
    uint8_t *f1 = save_bytes(m, &n1);
    ck_assert(pdc_format_is_pdc(f1, n1));
    ir_model *back = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f1, n1, &back));
    ck_assert_ptr_nonnull(back);
    test_assert_models_equal(m, back, TEST_EQ_EXACT);
    assert_saves_as(back, f1, n1);
    assert_saves_as(m, f1, n1); /* saving is deterministic */
    pdc_free(f1);
    ir_model_destroy(m);
    ir_model_destroy(back);
}
END_TEST

START_TEST(test_roundtrip_header_layout)
{
    ir_model *m = build_cnn();
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    ck_assert_mem_eq(f, "PDCMODEL", 8);
    ck_assert_uint_eq(pdc_load_u32le(f + 8), 1);
    ck_assert_uint_eq(pdc_load_u32le(f + 12), 0);
    ck_assert_uint_eq(pdc_load_u64le(f + 16), n - 28);
    ck_assert_uint_eq(pdc_load_u32le(f + n - 4), crc_bitwise(f, n - 4));
    /* payload starts with the model name as a u32-length string */
    ck_assert_uint_eq(pdc_load_u32le(f + 24), strlen(m->name));
    ck_assert_mem_eq(f + 28, m->name, strlen(m->name));
    /* appending to a non-empty buffer yields the same file image after the existing bytes */
    pdc_buf b;
    pdc_buf_init(&b, NULL);
    pdc_buf_put_u32(&b, 0x12345678u);
    ck_assert_ok(ctx, pdc_format_save(m, &b));
    ck_assert_uint_eq(b.len, n + 4);
    ck_assert_mem_eq(b.data + 4, f, n);
    pdc_buf_free(&b);
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_loaded_model_is_usable)
{
    /* the loaded symbolic model can have its input fixed; shapes are then inferred */
    ir_model *m = build_symbolic(), *back = save_load(m);
    int y = (int)(tensor(back, "y") - back->tensors);
    ck_assert_int_eq(back->tensors[y].rank, -1);
    int64_t xd[2] = {3, 16};
    ck_assert_ok(ctx, ir_model_set_input_shape(back, "x", 2, xd));
    ck_assert_int_eq(back->tensors[y].rank, 2);
    ck_assert_int_eq(back->tensors[y].dims[0], 3);
    ck_assert_int_eq(back->tensors[y].dims[1], 4);
    /* and a model with concrete shapes round-trips with them */
    ir_model *again = save_load(back);
    test_assert_models_equal(back, again, TEST_EQ_EXACT);
    ir_model_destroy(again);
    ir_model_destroy(back);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_public_api_save_load)
{
    ir_model *m = build_lstm();
    const char *path = tmp_path("rnn.pdc");
    ck_assert_ok(ctx, pdc_model_save(m, path));
    pdc_model *back = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, path, &back));
    test_assert_models_equal(m, back, TEST_EQ_EXACT);
    void *data;
    size_t size;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &data, &size));
    assert_saves_as(m, data, size);
    pdc_model *back2 = NULL;
    ck_assert_ok(ctx, pdc_model_load_memory(ctx, data, size, &back2));
    test_assert_models_equal(m, back2, TEST_EQ_EXACT);
    pdc_free(data);
    pdc_model_destroy(back);
    pdc_model_destroy(back2);
    ir_model_destroy(m);
}
END_TEST

/* ================================================================== corruption */

START_TEST(test_bad_magic)
{
    ir_model *m = build_lstm();
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    f[3] ^= 0x20;
    ck_assert(!pdc_format_is_pdc(f, n));
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "not a .pdc file (bad magic)");
    ck_assert_status(ctx, try_load("hello world, this is not a model", 32), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "bad magic");
    ck_assert(!pdc_format_is_pdc("PDCMODE", 7));
    ck_assert(pdc_format_is_pdc("PDCMODEL", 8));
    ck_assert(!pdc_format_is_pdc(NULL, 8));
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_newer_version)
{
    ir_model *m = build_lstm();
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    pdc_store_u32le(f + 8, 3);
    fix_crc(f, n);
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "format version 3 is newer than this pdc supports (2)");
    /* also when the rest of the header is foreign to this version */
    pdc_store_u32le(f + 8, 77);
    pdc_store_u64le(f + 16, 123456789);
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "format version 77 is newer");
    pdc_store_u32le(f + 8, 0);
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "version 0");
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_checksum)
{
    ir_model *m = build_cnn();
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    /* flipping any single bit of the header, payload or checksum is caught */
    size_t positions[] = {12, 16, 24, 30, 100, n / 2, n - 40, n - 5, n - 4, n - 1};
    for (size_t i = 0; i < sizeof positions / sizeof *positions; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            f[positions[i]] ^= (uint8_t)(1u << bit);
            pdc_status st = try_load(f, n);
            ck_assert_msg(st == PDC_ERR_CORRUPT, "flip at %zu: %s", positions[i], pdc_status_string(st));
            if (positions[i] >= 24 || positions[i] == 12)
                ck_assert_error_has(ctx, "checksum mismatch: file is corrupt");
            f[positions[i]] ^= (uint8_t)(1u << bit);
        }
    }
    ck_assert_ok(ctx, try_load(f, n));
    /* nonzero flags with a valid checksum */
    pdc_store_u32le(f + 12, 1);
    fix_crc(f, n);
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "flags");
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_truncated_file_every_length)
{
    ir_model *m = build_model(_i);
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    for (size_t len = 0; len < n; len++) {
        /* a fresh copy of exactly len bytes, so tools like valgrind see any over-read */
        uint8_t *cut = pdc_alloc(ctx, len);
        memcpy(cut, f, len);
        pdc_status st = try_load(cut, len);
        ck_assert_msg(st == PDC_ERR_CORRUPT, "length %zu of %zu: %s (%s)", len, n, pdc_status_string(st),
                      pdc_context_last_error(ctx));
        if (len < 8) ck_assert_error_has(ctx, "truncated at offset");
        else ck_assert_error_has(ctx, "truncated");
        pdc_free(cut);
    }
    /* a byte too many */
    uint8_t *more = pdc_alloc(ctx, n + 1);
    memcpy(more, f, n);
    more[n] = 0;
    ck_assert_status(ctx, try_load(more, n + 1), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "unexpected bytes");
    pdc_free(more);
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_truncated_payload_every_length)
{
    /* The payload cut short but wrapped in a consistent header and checksum: the payload reader
     * itself must catch every cut. */
    ir_model *m = build_model(_i);
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    const uint8_t *payload = f + 24;
    size_t plen = n - 28;
    for (size_t len = 0; len < plen; len++) {
        size_t fn;
        uint8_t *g = make_file(payload, len, 1, 0, &fn);
        pdc_status st = try_load(g, fn);
        ck_assert_msg(st == PDC_ERR_CORRUPT, "payload length %zu of %zu: %s (%s)", len, plen, pdc_status_string(st),
                      pdc_context_last_error(ctx));
        ck_assert_error_has(ctx, "offset");
        pdc_free(g);
    }
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_mutations_with_valid_checksum)
{
    /* Random byte edits with the checksum recomputed, so the payload parser and the rebuild see
     * them. Nothing may crash or leak (run under valgrind / ASan); any status is acceptable. */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "16777216"));
    ir_model *m = build_model(_i);
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    uint8_t *g = pdc_alloc(ctx, n);
    uint32_t s = 12345u + (uint32_t)_i;
    int ok = 0, failed = 0;
    for (int it = 0; it < 1500; it++) {
        memcpy(g, f, n);
        int edits = 1 + it % 4;
        for (int e = 0; e < edits; e++) {
            s = s * 1664525u + 1013904223u;
            size_t at = 24 + (s >> 8) % (n - 28);
            s = s * 1664525u + 1013904223u;
            uint32_t how = s >> 24;
            if (how < 64) g[at] ^= (uint8_t)(1u << (how & 7)); /* bit flip */
            else if (how < 128) g[at] = (uint8_t)how;           /* small value */
            else if (how < 192) g[at] = 0xFF;                   /* large count / -1 */
            else g[at] = 0;
        }
        fix_crc(g, n);
        if (try_load(g, n) == PDC_OK) ok++;
        else failed++;
    }
    ck_assert_int_eq(ok + failed, 1500);
    ck_assert_int_gt(failed, 0);
    pdc_free(g);
    pdc_free(f);
    ir_model_destroy(m);
}
END_TEST

START_TEST(test_load_args)
{
    ir_model *m = (ir_model *)1;
    ck_assert_status(ctx, pdc_format_load(ctx, NULL, 5, &m), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_eq(m, (ir_model *)1);
    ck_assert_status(ctx, pdc_format_load(ctx, "PDCMODEL", 8, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_format_load(ctx, NULL, 0, &m), PDC_ERR_CORRUPT);
    ck_assert_ptr_eq(m, (ir_model *)1);
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    ck_assert_status(ctx, pdc_format_save(NULL, &b), PDC_ERR_INVALID_ARG);
    pdc_buf_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("format_roundtrip");
    TCase *tc = test_add_tcase(s, "roundtrip", tmpdir_setup, tmpdir_teardown, 120, NULL);
    tcase_add_loop_test(tc, test_roundtrip_identical, 0, 3);
    test_add_tests(tc, TEST_LIST(test_roundtrip_header_layout, test_loaded_model_is_usable, test_public_api_save_load));
    tc = test_add_tcase(s, "corrupt", ctx_setup, ctx_teardown, 600,
                        TEST_LIST(test_bad_magic, test_newer_version, test_checksum));
    tcase_add_loop_test(tc, test_truncated_file_every_length, 0, 3);
    tcase_add_loop_test(tc, test_truncated_payload_every_length, 0, 3);
    tcase_add_loop_test(tc, test_mutations_with_valid_checksum, 0, 3);
    test_add_tests(tc, TEST_LIST(test_load_args));
    return test_run_suite(s);
}
