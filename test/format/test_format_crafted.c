/*
 * test_format_crafted.c - .pdc payloads written by hand, field by field: a tiny model with one field
 * broken per variant (huge counts refused before anything is allocated, references out of range,
 * unknown ops, kinds and attribute types, duplicates, NaN attributes, sparsity that disagrees with
 * the weights, trailing bytes, ...), each with its status and message - and, unbroken, exactly the
 * bytes the writer produces; a valid file whose tensors are out of order loads into a canonical model.
 */
#include "ir/ir.h"
#include "lib/format/format_pdc.h"
#include "test/common/internals.h"

/* Each variant of the tiny file: what breaks, the status loading it gives and what its message says. */
#define CRAFTS(X)                                                                \
    X(OK, PDC_OK, "")                                                            \
    X(HUGE_TENSOR_COUNT, PDC_ERR_CORRUPT, "count 2147483648")                    \
    X(HUGE_ELEMENT_COUNT, PDC_ERR_CORRUPT, "data of tensor 'w'")                 \
    X(HUGE_STRING, PDC_ERR_CORRUPT, "name of tensor 1")                          \
    X(HUGE_INTS, PDC_ERR_CORRUPT, "attribute 'a'")                               \
    X(HUGE_LAYER_COUNT, PDC_ERR_CORRUPT, "layer count")                          \
    X(HUGE_MASK, PDC_ERR_CORRUPT, "sparsity of tensor 'w'")                      \
    X(REF_OUT_OF_RANGE, PDC_ERR_CORRUPT, "tensor reference 7 is outside -1..2")  \
    X(UNKNOWN_OP, PDC_ERR_UNSUPPORTED, "op 'fancy_op'")                          \
    X(DOUBLE_PRODUCER, PDC_ERR_CORRUPT, "already produced by layer 'fc'")        \
    X(NOT_PRODUCED, PDC_ERR_CORRUPT, "'y2' is not produced by any layer")        \
    X(OUTPUT_NOT_ACT, PDC_ERR_CORRUPT, "not an activation")                      \
    X(USE_BEFORE_PRODUCE, PDC_ERR_CORRUPT, "before it is produced")              \
    X(SHAPE_MISMATCH, PDC_ERR_CORRUPT, "stored as 1x3")                          \
    X(DUP_ATTR, PDC_ERR_CORRUPT, "duplicate attribute")                          \
    X(NAN_ATTR, PDC_ERR_CORRUPT, "NaN")                                          \
    X(BAD_ATTR_NAME, PDC_ERR_CORRUPT, "attribute name")                          \
    X(BAD_ATTR_TYPE, PDC_ERR_CORRUPT, "unknown attribute type 9")                \
    X(PRUNED_NONZERO, PDC_ERR_INVALID_MODEL, "pruned weights must be 0")         \
    X(SPARSITY_SHAPE, PDC_ERR_INVALID_MODEL, "mask has 3 entries")               \
    X(BAD_SPARSITY_KIND, PDC_ERR_CORRUPT, "unknown sparsity kind 5")             \
    X(BLOCK_TOO_BIG, PDC_ERR_CORRUPT, "block shape")                             \
    X(TRAILING, PDC_ERR_CORRUPT, "3 unexpected bytes")                           \
    X(BAD_KIND, PDC_ERR_CORRUPT, "unknown tensor kind 7")                        \
    X(BAD_RANK, PDC_ERR_CORRUPT, "rank 9")                                       \
    X(NUL_IN_NAME, PDC_ERR_CORRUPT, "NUL")                                       \
    X(DUP_TENSOR, PDC_ERR_CORRUPT, "already defined")                            \
    X(GRAPH_INPUTS, PDC_ERR_CORRUPT, "graph inputs")                             \
    X(GRAPH_OUTPUT_ABSENT, PDC_ERR_CORRUPT, "graph output 0 is absent")          \
    X(GRAPH_OUTPUT_CONST, PDC_ERR_CORRUPT, "must be produced by a layer")        \
    X(ARITY, PDC_ERR_CORRUPT, "4 inputs")                                        \
    X(ELEMENTS_MISMATCH, PDC_ERR_CORRUPT, "7 elements stored for a shape of 8")  \
    X(BAD_DIM, PDC_ERR_CORRUPT, "invalid shape")

enum craft {
#define X(id, status, needle) CRAFT_##id,
    CRAFTS(X)
#undef X
    CRAFT_COUNT
};

static const struct {
    pdc_status status;
    const char *needle;
} craft_expect[CRAFT_COUNT] = {
#define X(id, status, needle) {status, needle},
    CRAFTS(X)
#undef X
};

static void put_str(pdc_buf *b, const char *s) { pdc_buf_put_string(b, s); }

/* A tensor record's name, kind (0 input, 1 constant, 2 activation), rank and two dims (the rank
 * field may lie: the two dims follow regardless). */
static void put_tensor(pdc_buf *b, const char *name, uint8_t kind, uint8_t rank, int64_t d0, int64_t d1)
{
    put_str(b, name);
    pdc_buf_put_u8(b, kind);
    pdc_buf_put_u8(b, rank);
    pdc_buf_put_i64(b, d0);
    pdc_buf_put_i64(b, d1);
}

/* An unstructured sparsity record: kind 3, the mask's length and the mask. */
static void put_mask(pdc_buf *b, uint64_t n, const uint8_t *mask)
{
    pdc_buf_put_u8(b, 3);
    pdc_buf_put_u64(b, n);
    pdc_buf_put_bytes(b, mask, n);
}

/* A count and that many tensor references. */
static void put_refs(pdc_buf *b, uint32_t n, const int32_t *refs)
{
    pdc_buf_put_u32(b, n);
    for (uint32_t i = 0; i < n; i++) pdc_buf_put_i32(b, refs[i]);
}

/* A layer record of op `op` reading tensor `in` into tensor `out`, without attributes. */
static void put_layer1(pdc_buf *b, const char *name, const char *op, int32_t in, int32_t out)
{
    put_str(b, name);
    put_str(b, op);
    put_refs(b, 1, &in);
    put_refs(b, 1, &out);
    pdc_buf_put_u32(b, 0);
}

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
    put_tensor(&b, "x", v == CRAFT_BAD_KIND ? 7 : 0, v == CRAFT_BAD_RANK ? 9 : 2, 1, 4);
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
    case CRAFT_PRUNED_NONZERO: put_mask(&b, 8, (const uint8_t[]){1, 0, 1, 0, 0, 0, 1, 0}); break; /* prunes w[4] = 5 */
    case CRAFT_SPARSITY_SHAPE: put_mask(&b, 3, (const uint8_t[]){1, 1, 1}); break;
    case CRAFT_HUGE_MASK:
        pdc_buf_put_u8(&b, 3);
        pdc_buf_put_u64(&b, (uint64_t)1 << 62);
        break;
    case CRAFT_BAD_SPARSITY_KIND: pdc_buf_put_u8(&b, 5); break;
    case CRAFT_BLOCK_TOO_BIG:
        pdc_buf_put_u8(&b, 2);
        pdc_buf_put_i64(&b, INT64_MAX);
        pdc_buf_put_i64(&b, 1);
        pdc_buf_put_u64(&b, 4);
        for (int i = 0; i < 4; i++) pdc_buf_put_u8(&b, 1);
        break;
    case CRAFT_OK: put_mask(&b, 8, (const uint8_t[]){1, 0, 1, 0, 1, 0, 1, 0}); break; /* keeps exactly the nonzeros */
    default: pdc_buf_put_u8(&b, 0); break;
    }
    /* tensor 2: activation y [1, 2] */
    put_tensor(&b, dup_tensor ? "x" : "y", 2, 2, 1, v == CRAFT_SHAPE_MISMATCH ? 3 : 2);
    if (extra_act) put_tensor(&b, "y2", 2, 2, 1, 2);
    /* layers */
    int two_layers = v == CRAFT_DOUBLE_PRODUCER || v == CRAFT_USE_BEFORE_PRODUCE;
    pdc_buf_put_u32(&b, v == CRAFT_HUGE_LAYER_COUNT ? 0x10000000u : (uint32_t)(1 + two_layers));
    if (v == CRAFT_USE_BEFORE_PRODUCE) put_layer1(&b, "early", "relu", 2, 3); /* reads y, made by the next layer */
    put_str(&b, "fc");
    put_str(&b, v == CRAFT_UNKNOWN_OP ? "fancy_op" : "fc");
    pdc_buf_put_u32(&b, v == CRAFT_ARITY ? 4 : 3);
    pdc_buf_put_i32(&b, 0);
    pdc_buf_put_i32(&b, v == CRAFT_REF_OUT_OF_RANGE ? 7 : 1);
    pdc_buf_put_i32(&b, -1);
    if (v == CRAFT_ARITY) pdc_buf_put_i32(&b, -1);
    put_refs(&b, 1, (const int32_t[]){v == CRAFT_OUTPUT_NOT_ACT ? 1 : 2});
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
    if (v == CRAFT_DOUBLE_PRODUCER) put_layer1(&b, "fc_again", "relu", 0, 2);
    /* graph inputs and outputs */
    put_refs(&b, v == CRAFT_GRAPH_INPUTS ? 0 : 1, (const int32_t[]){0});
    put_refs(&b, 1, (const int32_t[]){v == CRAFT_GRAPH_OUTPUT_ABSENT ? -1 : v == CRAFT_GRAPH_OUTPUT_CONST ? 1 : 2});
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
        assert_saves_as(m, f, n); /* the hand-written bytes are exactly what the writer produces */
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
    put_tensor(&b, "y", 2, 2, 1, 2);
    put_tensor(&b, "x", 0, 2, 1, 4);
    put_tensor(&b, "w", 1, 2, 2, 4);
    pdc_buf_put_u64(&b, 8);
    for (int i = 0; i < 8; i++) pdc_buf_put_f32(&b, (float)i);
    pdc_buf_put_u8(&b, 0);
    pdc_buf_put_u32(&b, 1);
    put_str(&b, "fc");
    put_str(&b, "fc");
    put_refs(&b, 2, (const int32_t[]){1, 2});
    put_refs(&b, 1, (const int32_t[]){0});
    pdc_buf_put_u32(&b, 0);
    put_refs(&b, 1, (const int32_t[]){1});
    put_refs(&b, 1, (const int32_t[]){0});
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
    size_t n2;
    uint8_t *f2 = save_bytes(m, &n2);
    ir_model *m2 = save_load(m);
    assert_saves_as(m2, f2, n2);
    pdc_free(f);
    pdc_free(f2);
    ir_model_destroy(m);
    ir_model_destroy(m2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("format_crafted");
    test_add_tcase(s, "roundtrip", ctx_setup, ctx_teardown, 120, TEST_LIST(test_out_of_order_file));
    tcase_add_loop_test(test_add_tcase(s, "corrupt", ctx_setup, ctx_teardown, 600, NULL), test_crafted, 0, CRAFT_COUNT);
    return test_run_suite(s);
}
