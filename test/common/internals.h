/*
 * internals.h - what the suites over pdc's internals (test/ir, test/format, test/onnx) share, on top
 * of builders.h (the context fixture ctx_setup / tmpdir_setup, files, public-API builders, tensor):
 *
 *  - IR models built by name (add_const, add_op, attach_sparsity, set_conv_window; NAMES and DIMS
 *    lists), compared exactly (test_assert_models_equal and its parts) and sent through their text
 *    form (print_ok, parse_ok, assert_fixed_point, assert_contains);
 *  - a model run once on "ref" with given or pseudo-random inputs (test_run_ref);
 *  - for suites that include lib/format/format_pdc.h first: .pdc images (save_bytes, save_load,
 *    assert_saves_as, make_file) and a bitwise CRC-32 to hold the table-driven one against;
 *  - for suites that include lib/onnx/onnx.h first: the committed ONNX test files (onnx_path) and
 *    ONNX protobufs built field by field with protobuf-c's structs (mp_new, mp_input, mp_node, ...)
 *    and imported (mp_load, mp_refused).
 *
 * Include ir/ir.h first (builders.h's IR section). Every includer is a single test program; all
 * functions are static inline, so a suite pays only for what it uses.
 */
#ifndef PDC_TEST_INTERNALS_H
#define PDC_TEST_INTERNALS_H

#include <stdint.h>

#include "ir/ir.h"
#include "test/common/builders.h"

/* Counted lists for the builders: NAMES("x", "w", NULL) and DIMS(1, 3, 8, 8) expand to n, array. */
#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), ((const char *const[]){__VA_ARGS__})
#define DIMS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F(...) ((const float[]){__VA_ARGS__})

/* ================================================================== IR models built by name */

static inline size_t test_numel(size_t rank, const int64_t *dims)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

/* A constant of pseudo-random weights in [-1, 1) (seed 0: all ones). */
static inline void add_const(ir_model *m, const char *name, uint32_t seed, int rank, const int64_t *dims)
{
    size_t n = test_numel((size_t)rank, dims);
    float *data = pdc_alloc(m->ctx, (n ? n : 1) * sizeof *data);
    ck_assert_ptr_nonnull(data);
    if (seed)
        test_fill_random(data, n, seed);
    else
        for (size_t i = 0; i < n; i++) data[i] = 1.0f;
    ck_assert_ok(m->ctx, ir_model_add_constant_owned(m, name, rank, dims, data));
}

/* A layer; inputs and outputs by name (NULL: absent), attrs copied (may be NULL). */
static inline void add_op(ir_model *m, const char *name, ir_op op, size_t n_in, const char *const *in, size_t n_out,
                          const char *const *out, const ir_attrs *attrs)
{
    ck_assert_ok(m->ctx, ir_model_add_layer(m, name, op, n_in, in, n_out, out, attrs));
}

/* Zeroes the weights of constant `name` that s prunes (so that it validates) and attaches s, whose
 * arrays the model takes. */
static inline void attach_sparsity(ir_model *m, const char *name, ir_sparsity *s)
{
    const ir_tensor *t = tensor(m, name);
    ir_tensor probe = *t;
    probe.sparsity = *s;
    size_t n = ir_tensor_numel(t);
    for (size_t i = 0; i < n; i++)
        if (!ir_sparsity_keeps(&probe, i)) t->data[i] = 0.0f;
    ck_assert_ok(m->ctx, ir_model_set_sparsity(m, (int)(t - m->tensors), s));
}

/* A conv's window attributes with every default spelled out, as exporters write them: strides
 * [1,1], pads [1,1,1,1], dilations [1,1], group 1, in that order. */
static inline void set_conv_window(const pdc_context *c, ir_attrs *a)
{
    const int64_t ones[2] = {1, 1}, pads[4] = {1, 1, 1, 1};
    ck_assert_ok(c, ir_attrs_set_ints(c, a, "strides", 2, ones));
    ck_assert_ok(c, ir_attrs_set_ints(c, a, "pads", 4, pads));
    ck_assert_ok(c, ir_attrs_set_ints(c, a, "dilations", 2, ones));
    ck_assert_ok(c, ir_attrs_set_int(c, a, "group", 1));
}

/* ================================================================== IR models compared */

/* Bit-identical (so -0.0 differs from 0.0); unless exact, any NaN equals any NaN. */
static inline int test_floats_identical(float a, float b, int exact)
{
    if (!exact && (isnan(a) || isnan(b))) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The same sparsity description of tensor `name`; masks byte for byte when exact, else as kept or
 * pruned. */
static inline void test_assert_sparsity_equal(const ir_sparsity *a, const ir_sparsity *b, const char *name, int exact)
{
    ck_assert_msg(a->kind == b->kind, "tensor %s: sparsity kind %d vs %d", name, a->kind, b->kind);
    switch (a->kind) {
    case IR_SPARSITY_NONE: break;
    case IR_SPARSITY_PATTERN:
        ck_assert_int_eq(a->kd, b->kd);
        ck_assert_int_eq(a->go, b->go);
        ck_assert_int_eq(a->gc, b->gc);
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
        if (exact) ck_assert_mem_eq(a->block_mask, b->block_mask, a->n_blocks);
        else
            for (size_t i = 0; i < a->n_blocks; i++) ck_assert_int_eq(!a->block_mask[i], !b->block_mask[i]);
        break;
    case IR_SPARSITY_UNSTRUCTURED:
        ck_assert_uint_eq(a->n_mask, b->n_mask);
        if (exact) ck_assert_mem_eq(a->mask, b->mask, a->n_mask);
        else
            for (size_t i = 0; i < a->n_mask; i++) ck_assert_int_eq(!a->mask[i], !b->mask[i]);
        break;
    case IR_SPARSITY_BCR:
        ck_assert_int_eq(a->bh, b->bh);
        ck_assert_int_eq(a->bw, b->bw);
        ck_assert_uint_eq(a->n_blocks, b->n_blocks);
        for (size_t i = 0; i < ir_sparsity_bcr_len(a); i++) ck_assert_int_eq(!a->bcr_keep[i], !b->bcr_keep[i]);
        break;
    }
}

/* The same attributes of layer `layer`, in the same order; floats as test_floats_identical. */
static inline void test_assert_attrs_equal(const ir_attrs *a, const ir_attrs *b, const char *layer, int exact)
{
    ck_assert_msg(a->n == b->n, "layer %s: %zu attrs vs %zu", layer, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const ir_attr *x = &a->items[i], *y = &b->items[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_msg(x->type == y->type, "layer %s attr %s: type %d vs %d", layer, x->name, x->type, y->type);
        switch (x->type) {
        case IR_ATTR_INT: ck_assert_int_eq(x->i, y->i); break;
        case IR_ATTR_INTS:
            ck_assert_uint_eq(x->n, y->n);
            for (size_t k = 0; k < x->n; k++) ck_assert_int_eq(x->ints[k], y->ints[k]);
            break;
        case IR_ATTR_FLOAT:
            ck_assert_msg(test_floats_identical(x->f, y->f, exact), "layer %s attr %s: %.9g vs %.9g", layer, x->name,
                          (double)x->f, (double)y->f);
            break;
        case IR_ATTR_STRING: ck_assert_str_eq(x->s, y->s); break;
        }
    }
}

/* Tensor lists ta (of a) and tb (of b) name the same tensors, absent (-1) in the same places. */
static inline void test_assert_same_names(const ir_model *a, const int *ta, const ir_model *b, const int *tb, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        ck_assert_int_eq(ta[k] < 0, tb[k] < 0);
        if (ta[k] >= 0) ck_assert_str_eq(a->tensors[ta[k]].name, b->tensors[tb[k]].name);
    }
}

enum {
    /* The same tensors and layers in the same order, the same producers, weights and masks bit for
     * bit, graph inputs and activations without data or sparsity (a binary round trip). */
    TEST_EQ_EXACT = 1,
    /* b's constants are all zeros (a printed without weights); not with TEST_EQ_EXACT. */
    TEST_EQ_ELIDED = 2
};

/* a and b are the same graph: name; tensors (kind, shape, weights, sparsity: matched by name unless
 * TEST_EQ_EXACT); layers in order (name, op, inputs, outputs, attributes); graph inputs and outputs. */
static inline void test_assert_models_equal(const ir_model *a, const ir_model *b, unsigned flags)
{
    int exact = (flags & TEST_EQ_EXACT) != 0;
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->n_tensors, b->n_tensors);
    ck_assert_uint_eq(a->n_layers, b->n_layers);
    ck_assert_uint_eq(a->n_inputs, b->n_inputs);
    ck_assert_uint_eq(a->n_outputs, b->n_outputs);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const ir_tensor *x = &a->tensors[i];
        int j = exact ? (int)i : ir_model_find_tensor(b, x->name);
        ck_assert_msg(j >= 0, "tensor '%s' lost", x->name);
        const ir_tensor *y = &b->tensors[j];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->kind, y->kind);
        ck_assert_int_eq(x->rank, y->rank);
        for (int d = 0; d < x->rank; d++) ck_assert_int_eq(x->dims[d], y->dims[d]);
        if (exact) ck_assert_int_eq(x->producer, y->producer);
        if (x->kind != IR_TENSOR_CONST) {
            if (exact) ck_assert_ptr_null(y->data);
            if (exact) ck_assert_int_eq(y->sparsity.kind, IR_SPARSITY_NONE);
            continue;
        }
        size_t n = ir_tensor_numel(x);
        if (exact) ck_assert_mem_eq(x->data, y->data, n * sizeof(float));
        for (size_t k = 0; !exact && k < n; k++) {
            float want = flags & TEST_EQ_ELIDED ? 0.0f : x->data[k];
            ck_assert_msg(test_floats_identical(want, y->data[k], 0), "tensor %s[%zu]: %.9g vs %.9g", x->name, k,
                          (double)want, (double)y->data[k]);
        }
        test_assert_sparsity_equal(&x->sparsity, &y->sparsity, x->name, exact);
    }
    for (size_t i = 0; i < a->n_layers; i++) {
        const ir_layer *x = &a->layers[i], *y = &b->layers[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->op, y->op);
        ck_assert_uint_eq(x->n_inputs, y->n_inputs);
        ck_assert_uint_eq(x->n_outputs, y->n_outputs);
        if (exact) ck_assert_mem_eq(x->inputs, y->inputs, x->n_inputs * sizeof(int));
        if (exact) ck_assert_mem_eq(x->outputs, y->outputs, x->n_outputs * sizeof(int));
        test_assert_same_names(a, x->inputs, b, y->inputs, x->n_inputs);
        test_assert_same_names(a, x->outputs, b, y->outputs, x->n_outputs);
        test_assert_attrs_equal(&x->attrs, &y->attrs, x->name, exact);
    }
    if (exact) ck_assert_mem_eq(a->inputs, b->inputs, a->n_inputs * sizeof(int));
    if (exact) ck_assert_mem_eq(a->outputs, b->outputs, a->n_outputs * sizeof(int));
    test_assert_same_names(a, a->inputs, b, b->inputs, a->n_inputs);
    test_assert_same_names(a, a->outputs, b, b->outputs, a->n_outputs);
}

/* ================================================================== IR text */

static inline char *print_ok(const ir_model *m, uint32_t flags)
{
    char *text = NULL;
    ck_assert_ok(m->ctx, ir_print(m, flags, &text));
    ck_assert_ptr_nonnull(text);
    return text;
}

static inline ir_model *parse_ok(const char *text)
{
    ir_model *m = NULL;
    ck_assert_ok(ctx, ir_parse(ctx, text, strlen(text), &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

/* print -> parse -> print is byte-identical and the parsed model equals m. */
static inline void assert_fixed_point(const ir_model *m, uint32_t flags)
{
    char *t1 = print_ok(m, flags);
    ir_model *m2 = parse_ok(t1);
    char *t2 = print_ok(m2, flags);
    ck_assert_str_eq(t1, t2);
    test_assert_models_equal(m, m2, flags & PDC_PRINT_ELIDE_WEIGHTS ? TEST_EQ_ELIDED : 0);
    ir_model_destroy(m2);
    pdc_free(t1);
    pdc_free(t2);
}

/* text contains needle; else the text goes to stderr. */
static inline void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle)) fprintf(stderr, "--- text:\n%s---\n", text);
    ck_assert_msg(strstr(text, needle) != NULL, "text lacks \"%.300s\" (printed on stderr)", needle);
}

/* ================================================================== running on ref */

/* Compiles m for "ref" and runs it once: builders.h's run_ref, but input i is read from `in` (all
 * inputs concatenated in order, n_in floats: exactly what they hold) or, when in is NULL, filled with
 * test_fill_random(seed + i). Returns the outputs concatenated (malloc'd), *n_out floats. */
static inline float *test_run_ref(const pdc_model *m, const float *in, size_t n_in, uint32_t seed, size_t *n_out)
{
    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    size_t ni, no, used = 0, total = 0;
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    ck_assert_uint_le(ni, 8);
    ck_assert_uint_le(no, 8);
    pdc_tensor *ti[8] = {0}, *to[8] = {0};
    for (size_t i = 0; i < ni; i++) {
        ti[i] = io_tensor(ctx, p, 0, i);
        float *x = pdc_tensor_data(ti[i]);
        size_t k = pdc_tensor_size(ti[i]);
        if (in) {
            ck_assert_uint_le(used + k, n_in);
            memcpy(x, in + used, k * sizeof *in);
            used += k;
        } else {
            test_fill_random(x, k, seed + (uint32_t)i);
        }
    }
    if (in) ck_assert_uint_eq(used, n_in);
    for (size_t i = 0; i < no; i++) total += pdc_tensor_size(to[i] = io_tensor(ctx, p, 1, i));
    ck_assert_ok(ctx, pdc_program_run(p, ni, ti, no, to));
    float *y = malloc((total ? total : 1) * sizeof *y), *at = y;
    ck_assert_ptr_nonnull(y);
    for (size_t i = 0; i < no; i++) {
        size_t k = pdc_tensor_size(to[i]);
        memcpy(at, pdc_tensor_data(to[i]), k * sizeof *y);
        at += k;
        pdc_tensor_destroy(to[i]);
    }
    for (size_t i = 0; i < ni; i++) pdc_tensor_destroy(ti[i]);
    pdc_program_destroy(p);
    *n_out = total;
    return y;
}

/* ================================================================== .pdc images (lib/format) */
#ifdef PDC_LIB_FORMAT_PDC_H
#include "lib/core/crc32.h"

/* m's .pdc file image (pdc_alloc'd, *size bytes). */
static inline uint8_t *save_bytes(const ir_model *m, size_t *size)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    ck_assert_ok(ctx, pdc_format_save(m, &b));
    *size = b.len;
    return b.data;
}

/* m saves to exactly the n bytes at f. */
static inline void assert_saves_as(const ir_model *m, const void *f, size_t n)
{
    size_t n2;
    uint8_t *f2 = save_bytes(m, &n2);
    ck_assert_uint_eq(n2, n);
    ck_assert_mem_eq(f2, f, n);
    pdc_free(f2);
}

/* m saved and loaded back (ir_model_destroy it). */
static inline ir_model *save_load(const ir_model *m)
{
    size_t n;
    uint8_t *f = save_bytes(m, &n);
    ir_model *back = NULL;
    ck_assert_ok(ctx, pdc_format_load(ctx, f, n, &back));
    ck_assert_ptr_nonnull(back);
    pdc_free(f);
    return back;
}

/* A file image around a payload: magic, version, flags, length, payload, checksum. */
static inline uint8_t *make_file(const uint8_t *payload, size_t plen, uint32_t version, uint32_t flags, size_t *size)
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

/* CRC-32 (IEEE, reflected) a bit at a time: what the table-driven pdc_crc32 must agree with. */
static inline uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}
#endif

/* ================================================================== ONNX protobufs (lib/onnx) */
#ifdef PROTOBUF_C_onnx_2eproto__INCLUDED

/* test/data/onnx/NAME.EXT (PDC_TEST_DATA overrides the folder), in a buffer the next call reuses. */
static inline const char *onnx_path(const char *name, const char *ext)
{
    static char buf[1100];
    char rel[256];
    snprintf(rel, sizeof rel, "onnx/%s%s", name, ext);
    snprintf(buf, sizeof buf, "%s", test_data_path(rel));
    return buf;
}

/* Appends item to the malloc'd array arr of n items. */
#define PUSH(arr, n, item)                                                                                  \
    do {                                                                                                    \
        (arr) = realloc((arr), ((n) + 1) * sizeof *(arr));                                                  \
        ck_assert_ptr_nonnull(arr);                                                                         \
        (arr)[(n)++] = (item);                                                                              \
    } while (0)

/* An empty graph "test" in a ModelProto of IR version 8 importing the default domain at `opset`. */
static inline Onnx__ModelProto *mp_new(int64_t opset)
{
    Onnx__ModelProto *m = calloc(1, sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->producer_name = strdup("test_onnx");
    Onnx__OperatorSetIdProto *o = calloc(1, sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = strdup("");
    o->has_version = 1;
    o->version = opset;
    PUSH(m->opset_import, m->n_opset_import, o);
    m->graph = calloc(1, sizeof *m->graph);
    onnx__graph_proto__init(m->graph);
    m->graph->name = strdup("test");
    return m;
}

/* Splits "a,,b" into {"a", "", "b"}. */
static inline void mp_split(const char *s, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s) return;
    for (const char *p = s;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *item = strndup(p, len);
        PUSH(*out, *n, item);
        if (!e) break;
        p = e + 1;
    }
}

/* A node (name may be NULL); ins and outs comma-separated, "" for an absent one. */
static inline Onnx__NodeProto *mp_node(Onnx__ModelProto *m, const char *op, const char *name, const char *ins,
                                       const char *outs)
{
    Onnx__NodeProto *n = calloc(1, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = strdup(op);
    if (name) n->name = strdup(name);
    mp_split(ins, &n->input, &n->n_input);
    mp_split(outs, &n->output, &n->n_output);
    PUSH(m->graph->node, m->graph->n_node, n);
    return n;
}

static inline Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = calloc(1, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = strdup(name);
    a->has_type = 1;
    a->type = type;
    PUSH(n->attribute, n->n_attribute, a);
    return a;
}

static inline void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void attr_float(Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void attr_ints(Onnx__NodeProto *n, const char *name, size_t cnt, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = malloc((cnt ? cnt : 1) * sizeof *a->ints);
    memcpy(a->ints, v, cnt * sizeof *v);
    a->n_ints = cnt;
}

static inline void attr_string(Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)strdup(v);
}

static inline void attr_strings(Onnx__NodeProto *n, const char *name, size_t cnt, const char *const *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->strings = calloc(cnt, sizeof *a->strings);
    a->n_strings = cnt;
    for (size_t i = 0; i < cnt; i++) {
        a->strings[i].len = strlen(v[i]);
        a->strings[i].data = (uint8_t *)strdup(v[i]);
    }
}

/* A tensor of element type dtype and shape dims, without values (name may be NULL). */
static inline Onnx__TensorProto *t_new(const char *name, int32_t dtype, size_t rank, const int64_t *dims)
{
    Onnx__TensorProto *t = calloc(1, sizeof *t);
    onnx__tensor_proto__init(t);
    if (name) t->name = strdup(name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->dims = malloc((rank ? rank : 1) * sizeof *t->dims);
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    t->n_dims = rank;
    return t;
}

/* FLOAT tensor in float_data (raw = 0) or raw_data (raw = 1). */
static inline Onnx__TensorProto *t_float(const char *name, size_t rank, const int64_t *dims, const float *v, int raw)
{
    Onnx__TensorProto *t = t_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
    size_t n = test_numel(rank, dims);
    if (raw) {
        t->has_raw_data = 1;
        t->raw_data.len = n * 4;
        t->raw_data.data = malloc(n * 4 + 1);
        memcpy(t->raw_data.data, v, n * 4); /* little-endian host */
    } else {
        t->float_data = malloc((n ? n : 1) * sizeof *t->float_data);
        memcpy(t->float_data, v, n * sizeof *v);
        t->n_float_data = n;
    }
    return t;
}

static inline Onnx__TensorProto *t_int64(const char *name, size_t rank, const int64_t *dims, const int64_t *v)
{
    Onnx__TensorProto *t = t_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, rank, dims);
    size_t n = test_numel(rank, dims);
    t->int64_data = malloc((n ? n : 1) * sizeof *t->int64_data);
    memcpy(t->int64_data, v, n * sizeof *v);
    t->n_int64_data = n;
    return t;
}

static inline void mp_init(Onnx__ModelProto *m, Onnx__TensorProto *t)
{
    PUSH(m->graph->initializer, m->graph->n_initializer, t);
}

/* A Constant node holding t. */
static inline void mp_const(Onnx__ModelProto *m, const char *out, Onnx__TensorProto *t)
{
    Onnx__NodeProto *n = mp_node(m, "Constant", NULL, "", out);
    Onnx__AttributeProto *a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

/* A tensor type; without dims no shape, and a dim < 0 is the dim_param "N". */
static inline Onnx__ValueInfoProto *value_info(const char *name, int32_t elem, size_t rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = calloc(1, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = strdup(name);
    vi->type = calloc(1, sizeof *vi->type);
    onnx__type_proto__init(vi->type);
    vi->type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    vi->type->tensor_type = calloc(1, sizeof *vi->type->tensor_type);
    onnx__type_proto__tensor__init(vi->type->tensor_type);
    vi->type->tensor_type->has_elem_type = 1;
    vi->type->tensor_type->elem_type = elem;
    if (!dims) return vi;
    Onnx__TensorShapeProto *sh = calloc(1, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    for (size_t i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = calloc(1, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = strdup("N");
        }
        PUSH(sh->dim, sh->n_dim, d);
    }
    vi->type->tensor_type->shape = sh;
    return vi;
}

/* Graph input (dims < 0: dim_param "N"). */
static inline void mp_input(Onnx__ModelProto *m, const char *name, size_t rank, const int64_t *dims)
{
    PUSH(m->graph->input, m->graph->n_input, value_info(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims));
}

static inline void mp_output(Onnx__ModelProto *m, const char *name)
{
    PUSH(m->graph->output, m->graph->n_output, value_info(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL));
}

/* Packs m (malloc'd, *len bytes) and frees it. */
static inline uint8_t *mp_pack(Onnx__ModelProto *m, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(m);
    uint8_t *b = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(onnx__model_proto__pack(m, b), *len);
    onnx__model_proto__free_unpacked(m, NULL);
    return b;
}

/* Packs (and frees) m, then imports it. */
static inline pdc_status mp_load(Onnx__ModelProto *m, pdc_model **out)
{
    size_t len;
    uint8_t *b = mp_pack(m, &len);
    *out = NULL;
    pdc_status st = pdc_model_load_onnx_memory(ctx, b, len, out);
    free(b);
    return st;
}

/* Packs (and frees) m; importing it fails with `status`, no model and a message that says `needle`. */
static inline void mp_refused(Onnx__ModelProto *m, pdc_status status, const char *needle)
{
    pdc_model *out;
    ck_assert_status(ctx, mp_load(m, &out), status);
    ck_assert_ptr_null(out);
    ck_assert_error_has(ctx, needle);
}
#endif

#endif
