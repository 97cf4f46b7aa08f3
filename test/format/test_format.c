/*
 * test_format.c - the .pdc binary format, CRC-32, the byte buffer / bounded reader, and the
 * whole-file and atomic-write helpers.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "lib/core/crc32.h"
#include "lib/core/fileio.h"
#include "lib/format/format_pdc.h"
#include "test/common/testutil.h"

static pdc_context *ctx;
static char tmpdir[256];

static void setup(void)
{
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pdc_test_format_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void teardown(void)
{
    remove_tree(tmpdir);
    pdc_context_destroy(ctx);
    ctx = NULL;
}

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* ================================================================== model builders */

static float *weights(size_t n, uint32_t seed)
{
    float *w = pdc_alloc(ctx, n * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, n, seed);
    return w;
}

static int tensor_index(const ir_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    ck_assert_msg(t >= 0, "no tensor %s", name);
    return t;
}

/* conv (pattern-sparse weight, bias, every window attribute) -> relu -> conv (block-sparse, no bias)
 * -> clip (float attrs) -> flatten -> fc (unstructured-sparse, absent bias) -> softmax, with
 * constants interleaved between layers and an unused rank-0 constant. */
static ir_model *build_cnn(void)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "cnn \xc3\xa9 test", &m));
    int64_t xd[4] = {1, 4, 8, 8};
    ck_assert_ok(ctx, ir_model_add_input(m, "x", 4, xd));

    /* conv1: [8,4,3,3], pattern sparsity */
    int64_t w1d[4] = {8, 4, 3, 3};
    float *w1 = weights(8 * 4 * 9, 1);
    ir_sparsity s1 = {0};
    s1.kind = IR_SPARSITY_PATTERN;
    s1.kh = s1.kw = 3;
    s1.n_patterns = 3;
    s1.patterns = pdc_calloc(ctx, 3, sizeof *s1.patterns);
    s1.patterns[0] = 0x1BA;
    s1.patterns[1] = 0x0F0;
    s1.patterns[2] = 0x16A;
    s1.n_kernels = 32;
    s1.kernel_pattern = pdc_calloc(ctx, 32, sizeof *s1.kernel_pattern);
    for (int k = 0; k < 32; k++) {
        int32_t p = (int32_t)(k % 4) - 1;
        s1.kernel_pattern[k] = p;
        for (int q = 0; q < 9; q++)
            if (p < 0 || !(s1.patterns[p] >> q & 1)) w1[k * 9 + q] = 0.0f;
    }
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w1", 4, w1d, w1));
    ck_assert_ok(ctx, ir_model_set_sparsity(m, tensor_index(m, "w1"), &s1));
    int64_t b1d[1] = {8};
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "b1", 1, b1d, weights(8, 2)));

    ir_attrs a = {0};
    int64_t ones[2] = {1, 1}, pads[4] = {1, 1, 1, 1};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, ones));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "pads", 4, pads));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "dilations", 2, ones));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "group", 1));
    const char *c1_in[3] = {"x", "w1", "b1"}, *c1_out[1] = {"c1"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "conv1", IR_OP_CONV, 3, c1_in, 1, c1_out, &a));
    ir_attrs_free(&a);

    const char *r_in[1] = {"c1"}, *r_out[1] = {"r1"};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "empty_list", 0, NULL));
    ck_assert_ok(ctx, ir_model_add_layer(m, "relu1", IR_OP_RELU, 1, r_in, 1, r_out, &a));
    ir_attrs_free(&a);

    /* conv2: [8,8,1,1], block sparsity 2x4 over the [8, 8] matrix view */
    int64_t w2d[4] = {8, 8, 1, 1};
    float *w2 = weights(64, 3);
    ir_sparsity s2 = {0};
    s2.kind = IR_SPARSITY_BLOCK;
    s2.bh = 2;
    s2.bw = 4;
    s2.n_blocks = 8;
    s2.block_mask = pdc_calloc(ctx, 8, 1);
    for (int b = 0; b < 8; b++) s2.block_mask[b] = (uint8_t)(b % 3 ? 1 : 0);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            if (!s2.block_mask[(r / 2) * 2 + c / 4]) w2[r * 8 + c] = 0.0f;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w2", 4, w2d, w2));
    ck_assert_ok(ctx, ir_model_set_sparsity(m, tensor_index(m, "w2"), &s2));
    const char *c2_in[2] = {"r1", "w2"}, *c2_out[1] = {"c2"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "conv2", IR_OP_CONV, 2, c2_in, 1, c2_out, NULL));

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", 6.0f));
    const char *k_in[1] = {"c2"}, *k_out[1] = {"k2"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "clip2", IR_OP_CLIP, 1, k_in, 1, k_out, &a));
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    const char *f_in[1] = {"k2"}, *f_out[1] = {"flat"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "flatten", IR_OP_FLATTEN, 1, f_in, 1, f_out, &a));
    ir_attrs_free(&a);

    /* fc: [10, 512], unstructured sparsity, bias absent */
    int64_t fwd[2] = {10, 512};
    float *fw = weights(5120, 4);
    ir_sparsity s3 = {0};
    s3.kind = IR_SPARSITY_UNSTRUCTURED;
    s3.n_mask = 5120;
    s3.mask = pdc_calloc(ctx, 5120, 1);
    for (int i = 0; i < 5120; i++) {
        s3.mask[i] = (uint8_t)((i * 7 % 5) < 2 ? (i % 3 ? 1 : 0xFF) : 0);
        if (!s3.mask[i]) fw[i] = 0.0f;
    }
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "fc_w", 2, fwd, fw));
    ck_assert_ok(ctx, ir_model_set_sparsity(m, tensor_index(m, "fc_w"), &s3));
    const char *fc_in[3] = {"flat", "fc_w", NULL}, *fc_out[1] = {"logits"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "fc", IR_OP_FC, 3, fc_in, 1, fc_out, NULL));

    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "unused_scalar", 0, NULL, weights(1, 5)));

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", -1));
    const char *s_in[1] = {"logits"}, *s_out[1] = {"prob"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "softmax", IR_OP_SOFTMAX, 1, s_in, 1, s_out, &a));
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_model_mark_output(m, "prob"));
    ck_assert_ok(ctx, ir_model_mark_output(m, "r1"));
    return m;
}

/* lstm with absent bias, sequence_lens and c0, absent y_h output, a string attribute; the
 * recurrence weight is block-sparse over its [16, 4] matrix view. */
static ir_model *build_lstm(void)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "rnn", &m));
    int64_t xd[3] = {5, 2, 3}, hd[3] = {1, 2, 4}, wd[3] = {1, 16, 3}, rd[3] = {1, 16, 4};
    ck_assert_ok(ctx, ir_model_add_input(m, "seq", 3, xd));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "W", 3, wd, weights(48, 6)));
    float *r = weights(64, 7);
    ir_sparsity s = {0};
    s.kind = IR_SPARSITY_BLOCK;
    s.bh = 4;
    s.bw = 3; /* partial edge blocks: [16, 4] in 4x3 blocks -> 4 x 2 */
    s.n_blocks = 8;
    s.block_mask = pdc_calloc(ctx, 8, 1);
    for (int b = 0; b < 8; b++) s.block_mask[b] = (uint8_t)(b & 1);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 4; j++)
            if (!s.block_mask[(i / 4) * 2 + j / 3]) r[i * 4 + j] = 0.0f;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "R", 3, rd, r));
    ck_assert_ok(ctx, ir_model_set_sparsity(m, tensor_index(m, "R"), &s));
    ck_assert_ok(ctx, ir_model_add_input(m, "h0", 3, hd));
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "forward"));
    const char *in[7] = {"seq", "W", "R", NULL, "", "h0", NULL}, *out[3] = {"y", NULL, "y_c"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "lstm", IR_OP_LSTM, 7, in, 3, out, &a));
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_model_mark_output(m, "y"));
    ck_assert_ok(ctx, ir_model_mark_output(m, "y_c"));
    return m;
}

/* A symbolic batch: the fc output's shape is unknown (rank -1) until the input is fixed. */
static ir_model *build_symbolic(void)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "sym", &m));
    int64_t xd[2] = {-1, 16}, wd[2] = {4, 16}, bd[1] = {4};
    ck_assert_ok(ctx, ir_model_add_input(m, "x", 2, xd));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", 2, wd, weights(64, 8)));
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "b", 1, bd, NULL));
    const char *in[3] = {"x", "w", "b"}, *out[1] = {"y"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "fc", IR_OP_FC, 3, in, 1, out, NULL));
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", -INFINITY)); /* odd but legal: not NaN */
    const char *l_in[1] = {"y"}, *l_out[1] = {"z"};
    ck_assert_ok(ctx, ir_model_add_layer(m, "leaky", IR_OP_LEAKY_RELU, 1, l_in, 1, l_out, &a));
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));
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

static uint8_t *save_bytes(const ir_model *m, size_t *size)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    ck_assert_ok(ctx, pdc_format_save(m, &b));
    *size = b.len;
    return b.data;
}

static void assert_sparsity_equal(const ir_sparsity *a, const ir_sparsity *b)
{
    ck_assert_int_eq(a->kind, b->kind);
    switch (a->kind) {
    case IR_SPARSITY_NONE: break;
    case IR_SPARSITY_PATTERN:
        ck_assert_int_eq(a->kh, b->kh);
        ck_assert_int_eq(a->kw, b->kw);
        ck_assert_uint_eq(a->n_patterns, b->n_patterns);
        ck_assert_uint_eq(a->n_kernels, b->n_kernels);
        ck_assert_mem_eq(a->patterns, b->patterns, a->n_patterns * sizeof *a->patterns);
        ck_assert_mem_eq(a->kernel_pattern, b->kernel_pattern, a->n_kernels * sizeof *a->kernel_pattern);
        break;
    case IR_SPARSITY_BLOCK:
        ck_assert_int_eq(a->bh, b->bh);
        ck_assert_int_eq(a->bw, b->bw);
        ck_assert_uint_eq(a->n_blocks, b->n_blocks);
        ck_assert_mem_eq(a->block_mask, b->block_mask, a->n_blocks);
        break;
    case IR_SPARSITY_UNSTRUCTURED:
        ck_assert_uint_eq(a->n_mask, b->n_mask);
        ck_assert_mem_eq(a->mask, b->mask, a->n_mask);
        break;
    }
}

static void assert_models_equal(const ir_model *a, const ir_model *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->n_tensors, b->n_tensors);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const ir_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->kind, y->kind);
        ck_assert_int_eq(x->rank, y->rank);
        ck_assert_int_eq(x->producer, y->producer);
        for (int d = 0; d < x->rank; d++) ck_assert_int_eq(x->dims[d], y->dims[d]);
        if (x->kind == IR_TENSOR_CONST) {
            size_t n = ir_tensor_numel(x);
            ck_assert_mem_eq(x->data, y->data, n * sizeof(float)); /* bit-exact */
            assert_sparsity_equal(&x->sparsity, &y->sparsity);
        } else {
            ck_assert_ptr_null(y->data);
            ck_assert_int_eq(y->sparsity.kind, IR_SPARSITY_NONE);
        }
    }
    ck_assert_uint_eq(a->n_layers, b->n_layers);
    for (size_t i = 0; i < a->n_layers; i++) {
        const ir_layer *x = &a->layers[i], *y = &b->layers[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->op, y->op);
        ck_assert_uint_eq(x->n_inputs, y->n_inputs);
        ck_assert_uint_eq(x->n_outputs, y->n_outputs);
        ck_assert_mem_eq(x->inputs, y->inputs, x->n_inputs * sizeof(int));
        ck_assert_mem_eq(x->outputs, y->outputs, x->n_outputs * sizeof(int));
        ck_assert_uint_eq(x->attrs.n, y->attrs.n);
        for (size_t k = 0; k < x->attrs.n; k++) {
            const ir_attr *p = &x->attrs.items[k], *q = &y->attrs.items[k];
            ck_assert_str_eq(p->name, q->name);
            ck_assert_int_eq(p->type, q->type);
            switch (p->type) {
            case IR_ATTR_INT: ck_assert_int_eq(p->i, q->i); break;
            case IR_ATTR_INTS:
                ck_assert_uint_eq(p->n, q->n);
                if (p->n) ck_assert_mem_eq(p->ints, q->ints, p->n * sizeof(int64_t));
                break;
            case IR_ATTR_FLOAT: ck_assert_mem_eq(&p->f, &q->f, sizeof(float)); break;
            case IR_ATTR_STRING: ck_assert_str_eq(p->s, q->s); break;
            }
        }
    }
    ck_assert_uint_eq(a->n_inputs, b->n_inputs);
    ck_assert_mem_eq(a->inputs, b->inputs, a->n_inputs * sizeof(int));
    ck_assert_uint_eq(a->n_outputs, b->n_outputs);
    ck_assert_mem_eq(a->outputs, b->outputs, a->n_outputs * sizeof(int));
}

/* Wraps a payload in a header and checksum. */
static uint8_t *make_file(const uint8_t *payload, size_t plen, uint32_t version, uint32_t flags, size_t *size)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_buf_put_bytes(&b, "PDCMODEL", 8);
    pdc_buf_put_u32(&b, version);
    pdc_buf_put_u32(&b, flags);
    pdc_buf_put_u64(&b, plen);
    pdc_buf_put_bytes(&b, payload, plen);
    pdc_buf_put_u32(&b, pdc_crc32(0, b.data, b.len));
    ck_assert_int_eq(pdc_buf_status(&b), PDC_OK);
    *size = b.len;
    return b.data;
}

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

/* ================================================================== CRC-32 */

static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

START_TEST(test_crc32_known)
{
    ck_assert_uint_eq(pdc_crc32(0, "123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(pdc_crc32(0, NULL, 0), 0);
    ck_assert_uint_eq(pdc_crc32(0, "a", 1), 0xE8B7BE43u);
    ck_assert_uint_eq(pdc_crc32(0, "The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
    /* pieces: any split gives the same CRC; every length and alignment matches the bitwise form */
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131u + 7u);
    for (size_t off = 0; off < 9; off++) {
        for (size_t n = 0; off + n <= sizeof buf; n += 1 + n / 8) {
            uint32_t want = crc_bitwise(buf + off, n);
            ck_assert_uint_eq(pdc_crc32(0, buf + off, n), want);
            size_t cut = n / 3;
            ck_assert_uint_eq(pdc_crc32(pdc_crc32(0, buf + off, cut), buf + off + cut, n - cut), want);
        }
    }
}
END_TEST

/* ================================================================== buffer and reader */

START_TEST(test_buf_little_endian)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_buf_put_u8(&b, 0xAB);
    pdc_buf_put_u32(&b, 0x01020304u);
    pdc_buf_put_u64(&b, 0x1122334455667788ull);
    pdc_buf_put_i64(&b, -2);
    pdc_buf_put_f32(&b, 1.0f);
    pdc_buf_put_string(&b, "hi");
    pdc_buf_put_i32(&b, -1);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_OK);
    static const uint8_t want[] = {0xAB, 4, 3, 2, 1, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
                                   0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x80, 0x3F,
                                   2, 0, 0, 0, 'h', 'i', 0xFF, 0xFF, 0xFF, 0xFF};
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_mem_eq(b.data, want, sizeof want);
    pdc_buf_patch_u32(&b, 1, 0xDEADBEEFu);
    ck_assert_uint_eq(pdc_load_u32le(b.data + 1), 0xDEADBEEFu);

    pdc_reader r;
    pdc_reader_init(&r, ctx, b.data, b.len, 100, "test record");
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    int32_t i32;
    float f;
    char *s;
    ck_assert_ok(ctx, pdc_reader_get_u8(&r, &u8));
    ck_assert_ok(ctx, pdc_reader_get_u32(&r, &u32));
    ck_assert_ok(ctx, pdc_reader_get_u64(&r, &u64));
    ck_assert_ok(ctx, pdc_reader_get_i64(&r, &i64));
    ck_assert_ok(ctx, pdc_reader_get_f32(&r, &f));
    ck_assert_ok(ctx, pdc_reader_get_string(&r, &s));
    ck_assert_ok(ctx, pdc_reader_get_i32(&r, &i32));
    ck_assert_uint_eq(u8, 0xAB);
    ck_assert_uint_eq(u32, 0xDEADBEEFu);
    ck_assert_uint_eq(u64, 0x1122334455667788ull);
    ck_assert_int_eq(i64, -2);
    ck_assert(f == 1.0f);
    ck_assert_str_eq(s, "hi");
    ck_assert_int_eq(i32, -1);
    pdc_free(s);
    ck_assert_uint_eq(pdc_reader_remaining(&r), 0);

    /* reading past the end fails, names the file offset and what, and moves nothing */
    ck_assert_status(ctx, pdc_reader_get_u8(&r, &u8), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "truncated at offset 135 while reading test record");
    r.pos = b.len - 3;
    u32 = 7;
    ck_assert_status(ctx, pdc_reader_get_u32(&r, &u32), PDC_ERR_CORRUPT);
    ck_assert_uint_eq(u32, 7);
    ck_assert_uint_eq(r.pos, b.len - 3);
    pdc_buf_free(&b);
}
END_TEST

START_TEST(test_reader_counts_and_strings)
{
    /* a count that cannot fit in the remaining bytes fails before any allocation */
    uint8_t d[16] = {0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3, 4};
    pdc_reader r;
    size_t n = 123;
    pdc_reader_init(&r, ctx, d, sizeof d, 0, "a list");
    ck_assert_status(ctx, pdc_reader_get_count(&r, 0, 4, &n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "a list");
    ck_assert_uint_eq(n, 123);
    ck_assert_uint_eq(r.pos, 0);
    /* u64 count near 2^64 with a large item size: no overflow in the check */
    uint8_t d2[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    pdc_reader_init(&r, ctx, d2, sizeof d2, 0, "big");
    ck_assert_status(ctx, pdc_reader_get_count(&r, 1, 1u << 20, &n), PDC_ERR_CORRUPT);
    /* exact fit is fine */
    uint8_t d3[12] = {2, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    pdc_reader_init(&r, ctx, d3, sizeof d3, 0, "fit");
    ck_assert_ok(ctx, pdc_reader_get_count(&r, 0, 4, &n));
    ck_assert_uint_eq(n, 2);
    /* strings: huge length, embedded NUL */
    char *s = NULL;
    uint8_t s1[8] = {0xFF, 0xFF, 0xFF, 0xFF, 'a', 'b', 'c', 'd'};
    pdc_reader_init(&r, ctx, s1, sizeof s1, 0, "name");
    ck_assert_status(ctx, pdc_reader_get_string(&r, &s), PDC_ERR_CORRUPT);
    ck_assert_ptr_null(s);
    uint8_t s2[7] = {3, 0, 0, 0, 'a', 0, 'c'};
    pdc_reader_init(&r, ctx, s2, sizeof s2, 0, "name");
    ck_assert_status(ctx, pdc_reader_get_string(&r, &s), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "NUL");
    ck_assert_ptr_null(s);
    uint8_t s3[4] = {0, 0, 0, 0};
    pdc_reader_init(&r, ctx, s3, sizeof s3, 0, "name");
    ck_assert_ok(ctx, pdc_reader_get_string(&r, &s));
    ck_assert_str_eq(s, "");
    pdc_free(s);
}
END_TEST

START_TEST(test_buf_failure_is_sticky)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "1000"));
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_buf_put_u32(&b, 1);
    uint8_t big[2000] = {0};
    pdc_buf_put_bytes(&b, big, sizeof big);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_ERR_OUT_OF_MEMORY);
    size_t len = b.len;
    pdc_buf_put_u64(&b, 5); /* no-op after failure */
    ck_assert_uint_eq(b.len, len);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_ERR_OUT_OF_MEMORY);
    pdc_buf_free(&b);
}
END_TEST

/* ================================================================== round trips */

START_TEST(test_roundtrip_identical)
{
    ir_model *m = build_model(_i);
    size_t n1, n2;
    uint8_t *f1 = save_bytes(m, &n1);
    ck_assert(pdc_format_is_pdc(f1, n1));
    ir_model *back = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f1, n1, &back));
    ck_assert_ptr_nonnull(back);
    assert_models_equal(m, back);
    uint8_t *f2 = save_bytes(back, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(f1, f2, n1);
    /* saving is deterministic */
    pdc_free(f2);
    f2 = save_bytes(m, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(f1, f2, n1);
    pdc_free(f1);
    pdc_free(f2);
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
    ir_model *m = build_symbolic();
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    ir_model *back = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f, n, &back));
    int y = tensor_index(back, "y");
    ck_assert_int_eq(back->tensors[y].rank, -1);
    int64_t xd[2] = {3, 16};
    ck_assert_ok(ctx, ir_model_set_input_shape(back, "x", 2, xd));
    ck_assert_int_eq(back->tensors[y].rank, 2);
    ck_assert_int_eq(back->tensors[y].dims[0], 3);
    ck_assert_int_eq(back->tensors[y].dims[1], 4);
    /* and a model with concrete shapes round-trips with them */
    size_t n2;
    uint8_t *f2 = save_bytes(back, &n2);
    ir_model *again = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f2, n2, &again));
    assert_models_equal(back, again);
    ir_model_destroy(again);
    ir_model_destroy(back);
    ir_model_destroy(m);
    pdc_free(f);
    pdc_free(f2);
}
END_TEST

START_TEST(test_public_api_save_load)
{
    ir_model *m = build_lstm();
    const char *path = tmp_path("rnn.pdc");
    ck_assert_ok(ctx, pdc_model_save(m, path));
    pdc_model *back = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, path, &back));
    assert_models_equal(m, back);
    void *data;
    size_t size, n;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &data, &size));
    uint8_t *f = save_bytes(m, &n);
    ck_assert_uint_eq(size, n);
    ck_assert_mem_eq(data, f, n);
    pdc_model *back2 = NULL;
    ck_assert_ok(ctx, pdc_model_load_memory(ctx, data, size, &back2));
    assert_models_equal(m, back2);
    pdc_free(data);
    pdc_free(f);
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
    pdc_store_u32le(f + 8, 2);
    fix_crc(f, n);
    ck_assert_status(ctx, try_load(f, n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "format version 2 is newer than this pdc supports (1)");
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

/* ------------------------------------------------------------------ hand-made payloads */

enum craft {
    CRAFT_OK,
    CRAFT_HUGE_TENSOR_COUNT,
    CRAFT_HUGE_ELEMENT_COUNT,
    CRAFT_HUGE_STRING,
    CRAFT_HUGE_INTS,
    CRAFT_HUGE_LAYER_COUNT,
    CRAFT_HUGE_MASK,
    CRAFT_REF_OUT_OF_RANGE,
    CRAFT_UNKNOWN_OP,
    CRAFT_DOUBLE_PRODUCER,
    CRAFT_NOT_PRODUCED,
    CRAFT_OUTPUT_NOT_ACT,
    CRAFT_USE_BEFORE_PRODUCE,
    CRAFT_SHAPE_MISMATCH,
    CRAFT_DUP_ATTR,
    CRAFT_NAN_ATTR,
    CRAFT_BAD_ATTR_NAME,
    CRAFT_BAD_ATTR_TYPE,
    CRAFT_PRUNED_NONZERO,
    CRAFT_SPARSITY_SHAPE,
    CRAFT_BAD_SPARSITY_KIND,
    CRAFT_BLOCK_TOO_BIG,
    CRAFT_TRAILING,
    CRAFT_BAD_KIND,
    CRAFT_BAD_RANK,
    CRAFT_NUL_IN_NAME,
    CRAFT_DUP_TENSOR,
    CRAFT_GRAPH_INPUTS,
    CRAFT_GRAPH_OUTPUT_ABSENT,
    CRAFT_GRAPH_OUTPUT_CONST,
    CRAFT_ARITY,
    CRAFT_ELEMENTS_MISMATCH,
    CRAFT_BAD_DIM,
    CRAFT_COUNT
};

static const struct {
    pdc_status status;
    const char *needle;
} craft_expect[CRAFT_COUNT] = {
    [CRAFT_OK] = {PDC_OK, ""},
    [CRAFT_HUGE_TENSOR_COUNT] = {PDC_ERR_CORRUPT, "count 2147483648"},
    [CRAFT_HUGE_ELEMENT_COUNT] = {PDC_ERR_CORRUPT, "data of tensor 'w'"},
    [CRAFT_HUGE_STRING] = {PDC_ERR_CORRUPT, "name of tensor 1"},
    [CRAFT_HUGE_INTS] = {PDC_ERR_CORRUPT, "attribute 'a'"},
    [CRAFT_HUGE_LAYER_COUNT] = {PDC_ERR_CORRUPT, "layer count"},
    [CRAFT_HUGE_MASK] = {PDC_ERR_CORRUPT, "sparsity of tensor 'w'"},
    [CRAFT_REF_OUT_OF_RANGE] = {PDC_ERR_CORRUPT, "tensor reference 7 is outside -1..2"},
    [CRAFT_UNKNOWN_OP] = {PDC_ERR_UNSUPPORTED, "op 'fancy_op'"},
    [CRAFT_DOUBLE_PRODUCER] = {PDC_ERR_CORRUPT, "already produced by layer 'fc'"},
    [CRAFT_NOT_PRODUCED] = {PDC_ERR_CORRUPT, "'y2' is not produced by any layer"},
    [CRAFT_OUTPUT_NOT_ACT] = {PDC_ERR_CORRUPT, "not an activation"},
    [CRAFT_USE_BEFORE_PRODUCE] = {PDC_ERR_CORRUPT, "before it is produced"},
    [CRAFT_SHAPE_MISMATCH] = {PDC_ERR_CORRUPT, "stored as 1x3"},
    [CRAFT_DUP_ATTR] = {PDC_ERR_CORRUPT, "duplicate attribute"},
    [CRAFT_NAN_ATTR] = {PDC_ERR_CORRUPT, "NaN"},
    [CRAFT_BAD_ATTR_NAME] = {PDC_ERR_CORRUPT, "attribute name"},
    [CRAFT_BAD_ATTR_TYPE] = {PDC_ERR_CORRUPT, "unknown attribute type 9"},
    [CRAFT_PRUNED_NONZERO] = {PDC_ERR_INVALID_MODEL, "pruned weights must be 0"},
    [CRAFT_SPARSITY_SHAPE] = {PDC_ERR_INVALID_MODEL, "mask has 3 entries"},
    [CRAFT_BAD_SPARSITY_KIND] = {PDC_ERR_CORRUPT, "unknown sparsity kind 4"},
    [CRAFT_BLOCK_TOO_BIG] = {PDC_ERR_CORRUPT, "block shape"},
    [CRAFT_TRAILING] = {PDC_ERR_CORRUPT, "3 unexpected bytes"},
    [CRAFT_BAD_KIND] = {PDC_ERR_CORRUPT, "unknown tensor kind 7"},
    [CRAFT_BAD_RANK] = {PDC_ERR_CORRUPT, "rank 9"},
    [CRAFT_NUL_IN_NAME] = {PDC_ERR_CORRUPT, "NUL"},
    [CRAFT_DUP_TENSOR] = {PDC_ERR_CORRUPT, "already defined"},
    [CRAFT_GRAPH_INPUTS] = {PDC_ERR_CORRUPT, "graph inputs"},
    [CRAFT_GRAPH_OUTPUT_ABSENT] = {PDC_ERR_CORRUPT, "graph output 0 is absent"},
    [CRAFT_GRAPH_OUTPUT_CONST] = {PDC_ERR_CORRUPT, "must be produced by a layer"},
    [CRAFT_ARITY] = {PDC_ERR_CORRUPT, "4 inputs"},
    [CRAFT_ELEMENTS_MISMATCH] = {PDC_ERR_CORRUPT, "7 elements stored for a shape of 8"},
    [CRAFT_BAD_DIM] = {PDC_ERR_CORRUPT, "invalid shape"},
};

static void put_str(pdc_buf *b, const char *s) { pdc_buf_put_string(b, s); }

/* The tiny model x[1,4] -> fc(w[2,4], no bias) -> y[1,2], written by hand field by field, with
 * one field broken per variant. */
static uint8_t *craft_file(int v, size_t *size)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    put_str(&b, "tiny");
    int dup_tensor = v == CRAFT_DUP_TENSOR;
    int extra_act = v == CRAFT_NOT_PRODUCED || v == CRAFT_DOUBLE_PRODUCER || v == CRAFT_USE_BEFORE_PRODUCE;
    pdc_buf_put_u32(&b, v == CRAFT_HUGE_TENSOR_COUNT ? 0x80000000u : (uint32_t)(3 + extra_act));
    /* tensor 0: input x [1, 4] */
    put_str(&b, "x");
    pdc_buf_put_u8(&b, v == CRAFT_BAD_KIND ? 7 : 0);
    pdc_buf_put_u8(&b, v == CRAFT_BAD_RANK ? 9 : 2);
    pdc_buf_put_i64(&b, 1);
    pdc_buf_put_i64(&b, 4);
    /* tensor 1: constant w [2, 4] */
    if (v == CRAFT_HUGE_STRING) {
        pdc_buf_put_u32(&b, 0xFFFFFFF0u);
        pdc_buf_put_bytes(&b, "w", 1);
    } else if (v == CRAFT_NUL_IN_NAME) {
        pdc_buf_put_u32(&b, 3);
        pdc_buf_put_bytes(&b, "w\0z", 3);
    } else {
        put_str(&b, "w");
    }
    pdc_buf_put_u8(&b, 1);
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_i64(&b, v == CRAFT_HUGE_ELEMENT_COUNT ? (int64_t)1 << 30 : 2);
    pdc_buf_put_i64(&b, v == CRAFT_HUGE_ELEMENT_COUNT ? (int64_t)1 << 30 : v == CRAFT_BAD_DIM ? 0 : 4);
    pdc_buf_put_u64(&b, v == CRAFT_HUGE_ELEMENT_COUNT ? (uint64_t)1 << 60 : v == CRAFT_ELEMENTS_MISMATCH ? 7 : 8);
    for (int i = 0; i < 8; i++) pdc_buf_put_f32(&b, i % 2 ? 0.0f : (float)(i + 1));
    switch (v) {
    case CRAFT_PRUNED_NONZERO:
        pdc_buf_put_u8(&b, 3);
        pdc_buf_put_u64(&b, 8);
        for (int i = 0; i < 8; i++) pdc_buf_put_u8(&b, (uint8_t)(i % 2 == 0 && i != 4));
        break;
    case CRAFT_SPARSITY_SHAPE:
        pdc_buf_put_u8(&b, 3);
        pdc_buf_put_u64(&b, 3);
        for (int i = 0; i < 3; i++) pdc_buf_put_u8(&b, 1);
        break;
    case CRAFT_HUGE_MASK:
        pdc_buf_put_u8(&b, 3);
        pdc_buf_put_u64(&b, (uint64_t)1 << 62);
        break;
    case CRAFT_BAD_SPARSITY_KIND: pdc_buf_put_u8(&b, 4); break;
    case CRAFT_BLOCK_TOO_BIG:
        pdc_buf_put_u8(&b, 2);
        pdc_buf_put_i64(&b, INT64_MAX);
        pdc_buf_put_i64(&b, 1);
        pdc_buf_put_u64(&b, 4);
        for (int i = 0; i < 4; i++) pdc_buf_put_u8(&b, 1);
        break;
    case CRAFT_OK:
        /* unstructured mask keeping exactly the nonzeros */
        pdc_buf_put_u8(&b, 3);
        pdc_buf_put_u64(&b, 8);
        for (int i = 0; i < 8; i++) pdc_buf_put_u8(&b, (uint8_t)(i % 2 == 0));
        break;
    default: pdc_buf_put_u8(&b, 0); break;
    }
    /* tensor 2: activation y [1, 2] */
    put_str(&b, dup_tensor ? "x" : "y");
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_i64(&b, 1);
    pdc_buf_put_i64(&b, v == CRAFT_SHAPE_MISMATCH ? 3 : 2);
    if (extra_act) {
        put_str(&b, "y2");
        pdc_buf_put_u8(&b, 2);
        pdc_buf_put_u8(&b, 2);
        pdc_buf_put_i64(&b, 1);
        pdc_buf_put_i64(&b, 2);
    }
    /* layers */
    int two_layers = v == CRAFT_DOUBLE_PRODUCER || v == CRAFT_USE_BEFORE_PRODUCE;
    pdc_buf_put_u32(&b, v == CRAFT_HUGE_LAYER_COUNT ? 0x10000000u : (uint32_t)(1 + two_layers));
    if (v == CRAFT_USE_BEFORE_PRODUCE) {
        /* relu reading y, which the next layer produces */
        put_str(&b, "early");
        put_str(&b, "relu");
        pdc_buf_put_u32(&b, 1);
        pdc_buf_put_i32(&b, 2);
        pdc_buf_put_u32(&b, 1);
        pdc_buf_put_i32(&b, 3);
        pdc_buf_put_u32(&b, 0);
    }
    put_str(&b, "fc");
    put_str(&b, v == CRAFT_UNKNOWN_OP ? "fancy_op" : "fc");
    pdc_buf_put_u32(&b, v == CRAFT_ARITY ? 4 : 3);
    pdc_buf_put_i32(&b, 0);
    pdc_buf_put_i32(&b, v == CRAFT_REF_OUT_OF_RANGE ? 7 : 1);
    pdc_buf_put_i32(&b, -1);
    if (v == CRAFT_ARITY) pdc_buf_put_i32(&b, -1);
    pdc_buf_put_u32(&b, 1);
    pdc_buf_put_i32(&b, v == CRAFT_OUTPUT_NOT_ACT ? 1 : 2);
    int attrs = v == CRAFT_DUP_ATTR ? 2
                : (v == CRAFT_HUGE_INTS || v == CRAFT_NAN_ATTR || v == CRAFT_BAD_ATTR_NAME || v == CRAFT_BAD_ATTR_TYPE ||
                   v == CRAFT_OK)
                    ? 1
                    : 0;
    pdc_buf_put_u32(&b, (uint32_t)attrs);
    for (int k = 0; k < attrs; k++) {
        put_str(&b, v == CRAFT_BAD_ATTR_NAME ? "9bad name" : "a");
        if (v == CRAFT_HUGE_INTS) {
            pdc_buf_put_u8(&b, 1);
            pdc_buf_put_u32(&b, 0x80000000u);
        } else if (v == CRAFT_NAN_ATTR) {
            pdc_buf_put_u8(&b, 2);
            pdc_buf_put_f32(&b, NAN);
        } else if (v == CRAFT_BAD_ATTR_TYPE) {
            pdc_buf_put_u8(&b, 9);
        } else {
            pdc_buf_put_u8(&b, 0);
            pdc_buf_put_i64(&b, 42);
        }
    }
    if (v == CRAFT_DOUBLE_PRODUCER) {
        put_str(&b, "fc_again");
        put_str(&b, "relu");
        pdc_buf_put_u32(&b, 1);
        pdc_buf_put_i32(&b, 0);
        pdc_buf_put_u32(&b, 1);
        pdc_buf_put_i32(&b, 2);
        pdc_buf_put_u32(&b, 0);
    }
    /* graph inputs and outputs */
    if (v == CRAFT_GRAPH_INPUTS) {
        pdc_buf_put_u32(&b, 0);
    } else {
        pdc_buf_put_u32(&b, 1);
        pdc_buf_put_i32(&b, 0);
    }
    pdc_buf_put_u32(&b, 1);
    pdc_buf_put_i32(&b, v == CRAFT_GRAPH_OUTPUT_ABSENT ? -1 : v == CRAFT_GRAPH_OUTPUT_CONST ? 1 : 2);
    if (v == CRAFT_TRAILING) pdc_buf_put_bytes(&b, "abc", 3);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_OK);
    uint8_t *f = make_file(b.data, b.len, 1, 0, size);
    pdc_buf_free(&b);
    return f;
}

START_TEST(test_crafted)
{
    /* No allocation above 1 MiB is allowed: a huge count must be refused, not attempted. */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "1048576"));
    size_t n;
    uint8_t *f = craft_file(_i, &n);
    ir_model *m = NULL;
    pdc_status st = pdc_format_load(ctx, f, n, &m);
    ck_assert_msg(st == craft_expect[_i].status, "variant %d: got %s, expected %s: %s", _i, pdc_status_string(st),
                  pdc_status_string(craft_expect[_i].status), pdc_context_last_error(ctx));
    if (st) {
        ck_assert_ptr_null(m);
        ck_assert_error_has(ctx, craft_expect[_i].needle);
    } else {
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq(m->n_tensors, 3);
        ck_assert_int_eq(m->tensors[1].sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
        ck_assert_int_eq(ir_attr_int(&m->layers[0].attrs, "a", 0), 42);
        ck_assert_int_eq(m->tensors[2].dims[1], 2);
        /* the hand-written bytes are exactly what the writer produces */
        size_t n2;
        uint8_t *f2 = save_bytes(m, &n2);
        ck_assert_uint_eq(n, n2);
        ck_assert_mem_eq(f, f2, n);
        pdc_free(f2);
    }
    ir_model_destroy(m);
    pdc_free(f);
}
END_TEST

START_TEST(test_out_of_order_file)
{
    /* A valid file whose tensor table is not in creation order (constant after the activation
     * that needs it) still loads; the model is rebuilt in a consistent order. */
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    put_str(&b, "ooo");
    pdc_buf_put_u32(&b, 3);
    put_str(&b, "y");
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_i64(&b, 1);
    pdc_buf_put_i64(&b, 2);
    put_str(&b, "x");
    pdc_buf_put_u8(&b, 0);
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_i64(&b, 1);
    pdc_buf_put_i64(&b, 4);
    put_str(&b, "w");
    pdc_buf_put_u8(&b, 1);
    pdc_buf_put_u8(&b, 2);
    pdc_buf_put_i64(&b, 2);
    pdc_buf_put_i64(&b, 4);
    pdc_buf_put_u64(&b, 8);
    for (int i = 0; i < 8; i++) pdc_buf_put_f32(&b, (float)i);
    pdc_buf_put_u8(&b, 0);
    pdc_buf_put_u32(&b, 1);
    put_str(&b, "fc");
    put_str(&b, "fc");
    pdc_buf_put_u32(&b, 2);
    pdc_buf_put_i32(&b, 1);
    pdc_buf_put_i32(&b, 2);
    pdc_buf_put_u32(&b, 1);
    pdc_buf_put_i32(&b, 0);
    pdc_buf_put_u32(&b, 0);
    pdc_buf_put_u32(&b, 1);
    pdc_buf_put_i32(&b, 1);
    pdc_buf_put_u32(&b, 1);
    pdc_buf_put_i32(&b, 0);
    size_t n;
    uint8_t *f = make_file(b.data, b.len, 1, 0, &n);
    pdc_buf_free(&b);
    ir_model *m = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f, n, &m));
    ck_assert_str_eq(m->tensors[0].name, "x");
    ck_assert_str_eq(m->tensors[1].name, "w");
    ck_assert_str_eq(m->tensors[2].name, "y");
    ck_assert_int_eq(m->outputs[0], 2);
    /* and it is now canonical: save -> load -> save is stable */
    size_t n2, n3;
    uint8_t *f2 = save_bytes(m, &n2);
    ir_model *m2 = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f2, n2, &m2));
    uint8_t *f3 = save_bytes(m2, &n3);
    ck_assert_uint_eq(n2, n3);
    ck_assert_mem_eq(f2, f3, n2);
    pdc_free(f);
    pdc_free(f2);
    pdc_free(f3);
    ir_model_destroy(m);
    ir_model_destroy(m2);
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

/* ================================================================== file helpers */

static int count_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

START_TEST(test_file_roundtrip)
{
    const char *path = tmp_path("a.bin");
    uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 31u);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, data, sizeof data));
    void *got = NULL;
    size_t size = 0;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, sizeof data);
    ck_assert_mem_eq(got, data, size);
    ck_assert_uint_eq(((uint8_t *)got)[size], 0); /* terminator */
    pdc_free(got);
    /* replace with shorter content; empty file */
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "xyz", 3));
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 3);
    ck_assert_str_eq(got, "xyz");
    pdc_free(got);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, NULL, 0));
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 0);
    pdc_free(got);
    ck_assert_int_eq(count_temp_files(), 0);
    /* a relative path (directory ".") */
    char cwd[512];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmpdir), 0);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, "rel.bin", "r", 1));
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_ok(ctx, pdc_file_read(ctx, tmp_path("rel.bin"), &got, &size));
    ck_assert_uint_eq(size, 1);
    pdc_free(got);
}
END_TEST

START_TEST(test_file_permissions)
{
    mode_t old = umask(027);
    const char *path = tmp_path("perm.bin");
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "a", 1));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0640);
    /* a replaced file keeps its mode */
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "bb", 2));
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0604);
    ck_assert_int_eq(st.st_size, 2);
    umask(old);
}
END_TEST

START_TEST(test_file_errors)
{
    void *got = (void *)1;
    size_t size = 99;
    char path[600];
    snprintf(path, sizeof path, "%s/no/such/dir/model.pdc", tmpdir);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, path, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(ENOENT));
    ck_assert_status(ctx, pdc_file_read(ctx, path, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(ENOENT));
    ck_assert_ptr_eq(got, (void *)1);
    ck_assert_uint_eq(size, 99);
    /* directories are refused both ways */
    ck_assert_status(ctx, pdc_file_read(ctx, tmpdir, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, tmpdir);
    ck_assert_error_has(ctx, strerror(EISDIR));
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, tmpdir, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, tmpdir);
    ck_assert_status(ctx, pdc_file_read(ctx, NULL, &got, &size), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, NULL, "abc", 3), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, tmp_path("x"), NULL, 3), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_read(ctx, "", &got, &size), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(count_temp_files(), 0);
    /* a file larger than max_memory is refused with the path in the message */
    const char *big = tmp_path("big.bin");
    uint8_t data[4096] = {0};
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, big, data, sizeof data));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "1000"));
    ck_assert_status(ctx, pdc_file_read(ctx, big, &got, &size), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, big);
}
END_TEST

START_TEST(test_failed_write_keeps_old_file)
{
    const char *path = tmp_path("keep.pdc");
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "original", 8));
    /* Make the write itself fail: a file size limit below the new content (works as root too). */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static uint8_t data[8192];
    memset(data, 'n', sizeof data);
    pdc_status st = pdc_file_write_atomic(ctx, path, data, sizeof data);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    ck_assert_msg(st == PDC_ERR_IO, "got %s", pdc_status_string(st));
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(EFBIG));
    void *got;
    size_t size;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 8);
    ck_assert_mem_eq(got, "original", 8);
    pdc_free(got);
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

START_TEST(test_read_pipe)
{
    /* non-regular files are read to end of file (size unknown up front, buffer grows) */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    static uint8_t data[200000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i % 251u);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        size_t off = 0;
        while (off < sizeof data) {
            ssize_t w = write(fds[1], data + off, sizeof data - off);
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    void *got;
    size_t size;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    close(fds[0]);
    ck_assert_uint_eq(size, sizeof data);
    ck_assert_mem_eq(got, data, size);
    pdc_free(got);
}
END_TEST

static Suite *format_suite(void)
{
    Suite *s = suite_create("format");
    TCase *tc = tcase_create("crc_buf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_crc32_known);
    tcase_add_test(tc, test_buf_little_endian);
    tcase_add_test(tc, test_reader_counts_and_strings);
    tcase_add_test(tc, test_buf_failure_is_sticky);
    suite_add_tcase(s, tc);

    tc = tcase_create("roundtrip");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_roundtrip_identical, 0, 3);
    tcase_add_test(tc, test_roundtrip_header_layout);
    tcase_add_test(tc, test_loaded_model_is_usable);
    tcase_add_test(tc, test_public_api_save_load);
    tcase_add_test(tc, test_out_of_order_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("corrupt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_bad_magic);
    tcase_add_test(tc, test_newer_version);
    tcase_add_test(tc, test_checksum);
    tcase_add_loop_test(tc, test_truncated_file_every_length, 0, 3);
    tcase_add_loop_test(tc, test_truncated_payload_every_length, 0, 3);
    tcase_add_loop_test(tc, test_crafted, 0, CRAFT_COUNT);
    tcase_add_loop_test(tc, test_mutations_with_valid_checksum, 0, 3);
    tcase_add_test(tc, test_load_args);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_file_roundtrip);
    tcase_add_test(tc, test_file_permissions);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_failed_write_keeps_old_file);
    tcase_add_test(tc, test_read_pipe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(format_suite()); }
