/*
 * test_ir_text.c - the IR text form (.pdcir): print -> parse -> print is byte-identical for every
 * op and every sparsity kind, weights and attributes survive exactly, hand-written text parses to
 * the expected model, and malformed text fails with the right status, line, column and message.
 */
#include <float.h>
#include <stdint.h>

#include "ir/ir.h"
#include "test/common/testutil.h"

static pdc_context *ctx;

static void setup(void) { ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK); }
static void teardown(void) { pdc_context_destroy(ctx); }

/* ---------------------------------------------------------------- builders */

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
#define NAMES(...) (sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), (const char *[]){__VA_ARGS__}

static size_t numel(int rank, const int64_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

static void add_input(ir_model *m, const char *name, int rank, const int64_t *dims)
{
    ck_assert_ok(ctx, ir_model_add_input(m, name, rank, dims));
}

/* A constant of pseudo-random weights (seed 0: all ones). */
static void add_const(ir_model *m, const char *name, uint32_t seed, int rank, const int64_t *dims)
{
    size_t n = numel(rank, dims);
    float *data = pdc_alloc(ctx, n * sizeof *data);
    ck_assert_ptr_nonnull(data);
    if (seed)
        test_fill_random(data, n, seed);
    else
        for (size_t i = 0; i < n; i++) data[i] = 1.0f;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, name, rank, dims, data));
}

static void add_layer(ir_model *m, const char *name, ir_op op, size_t n_in, const char *const *in, size_t n_out,
                      const char *const *out, const ir_attrs *attrs)
{
    ck_assert_ok(ctx, ir_model_add_layer(m, name, op, n_in, in, n_out, out, attrs));
}

static ir_tensor *tensor(ir_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    ck_assert_msg(t >= 0, "tensor '%s' not found", name);
    return &m->tensors[t];
}

/* Zeroes the weights a sparsity description prunes (so that it validates) and attaches it. */
static void attach_sparsity(ir_model *m, const char *name, ir_sparsity *s)
{
    ir_tensor *t = tensor(m, name);
    ir_tensor probe = *t;
    probe.sparsity = *s;
    size_t n = ir_tensor_numel(t);
    for (size_t i = 0; i < n; i++)
        if (!ir_sparsity_keeps(&probe, i)) t->data[i] = 0.0f;
    ck_assert_ok(ctx, ir_model_set_sparsity(m, (int)(t - m->tensors), s));
}

static void set_pattern(ir_model *m, const char *name, int64_t kh, int64_t kw, size_t n_pat, const uint64_t *pat,
                        uint32_t seed)
{
    ir_tensor *t = tensor(m, name);
    ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kh = kh, .kw = kw, .n_patterns = n_pat};
    s.n_kernels = (size_t)(t->dims[0] * t->dims[1]);
    s.patterns = pdc_alloc(ctx, n_pat * sizeof *s.patterns);
    s.kernel_pattern = pdc_alloc(ctx, s.n_kernels * sizeof *s.kernel_pattern);
    memcpy(s.patterns, pat, n_pat * sizeof *pat);
    for (size_t k = 0; k < s.n_kernels; k++) s.kernel_pattern[k] = (int32_t)((k * 7 + seed) % (n_pat + 1)) - 1;
    attach_sparsity(m, name, &s);
}

static uint8_t *random_mask(size_t n, uint32_t seed)
{
    uint8_t *mask = pdc_alloc(ctx, n ? n : 1);
    uint32_t x = seed * 2654435761u + 7u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        mask[i] = (x >> 8) % 3 != 0;
    }
    return mask;
}

static void set_block(ir_model *m, const char *name, int64_t bh, int64_t bw, uint32_t seed)
{
    int64_t rows, cols;
    ir_weight_matrix_view(tensor(m, name), &rows, &cols);
    ir_sparsity s = {.kind = IR_SPARSITY_BLOCK, .bh = bh, .bw = bw};
    s.n_blocks = (size_t)(((rows + bh - 1) / bh) * ((cols + bw - 1) / bw));
    s.block_mask = random_mask(s.n_blocks, seed);
    attach_sparsity(m, name, &s);
}

static void set_unstructured(ir_model *m, const char *name, uint32_t seed)
{
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED};
    s.n_mask = ir_tensor_numel(tensor(m, name));
    s.mask = random_mask(s.n_mask, seed);
    attach_sparsity(m, name, &s);
}

/*
 * One model with every op in ops.def, every sparsity kind, absent optional inputs and outputs,
 * names that need quoting, and attributes of every type (including escapes, inf, -0.0, denormals).
 */
static ir_model *all_ops_model(void)
{
    ir_model *m;
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_model_create(ctx, "all \"ops\"\\model", &m));
    add_input(m, "x", DIMS(1, 2, 6, 6));
    add_input(m, "seq", DIMS(5, 1, 3));
    add_const(m, "onnx::Conv_12", 1, DIMS(4, 2, 3, 3));
    add_const(m, "cb", 2, DIMS(4));
    add_const(m, "bn.scale", 3, DIMS(4));
    add_const(m, "bn.bias", 4, DIMS(4));
    add_const(m, "bn.mean", 5, DIMS(4));
    add_const(m, "bn.var", 0, DIMS(4));
    add_const(m, "fcw", 6, DIMS(10, 72));
    add_const(m, "fcb", 7, DIMS(10));
    add_const(m, "gb", 8, DIMS(10, 5));
    add_const(m, "gc", 9, DIMS(5));
    add_const(m, "mmw", 10, DIMS(8, 3));
    add_const(m, "lw", 11, DIMS(1, 16, 3));
    add_const(m, "lr", 12, DIMS(1, 16, 4));
    add_const(m, "lb", 13, DIMS(1, 32));
    add_const(m, "h0", 14, DIMS(1, 1, 4));
    add_const(m, "c\xc3\xa7" "0", 15, DIMS(1, 1, 4)); /* UTF-8 in a name: printed quoted, raw */
    add_const(m, "gw", 16, DIMS(2, 12, 3));
    add_const(m, "gr", 17, DIMS(2, 12, 4));
    add_const(m, "gbias", 18, DIMS(2, 24));
    float *one = pdc_alloc(ctx, sizeof *one);
    *one = -2.5f;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "scalar", 0, NULL, one));
    add_const(m, "specials", 0, DIMS(9));
    float *sp = tensor(m, "specials")->data;
    sp[0] = 0.1f;
    sp[1] = -0.0f;
    sp[2] = 1e-45f; /* smallest denormal */
    sp[3] = FLT_MAX;
    sp[4] = -FLT_MAX;
    sp[5] = 1.0f / 3.0f;
    sp[6] = 16777216.0f;
    sp[7] = 1.17549435e-38f;
    sp[8] = 123456789.0f;

    const uint64_t pats[] = {0x1d, 0xba, 0x1ff};
    set_pattern(m, "onnx::Conv_12", 3, 3, 3, pats, 1);
    set_block(m, "fcw", 2, 4, 3);
    set_unstructured(m, "gb", 4);

    int64_t ones[] = {1, 1}, pads[] = {1, 1, 1, 1};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, ones));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "pads", 4, pads));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "dilations", 2, ones));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "group", 1));
    add_layer(m, "/layer1/Conv", IR_OP_CONV, NAMES("x", "onnx::Conv_12", "cb"), NAMES("/layer1/Conv_output_0"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "epsilon", 1e-5f));
    add_layer(m, "bn", IR_OP_BATCHNORM, NAMES("/layer1/Conv_output_0", "bn.scale", "bn.bias", "bn.mean", "bn.var"),
              NAMES("bn"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "note", "q\"b\\n\nt\tc\x01 d\x7f utf8 \xc3\xa7 # not a comment"));
    add_layer(m, "relu", IR_OP_RELU, NAMES("bn"), NAMES("r"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", 6.0f));
    add_layer(m, "clip6", IR_OP_CLIP, NAMES("r"), NAMES("c6"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", -INFINITY));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", INFINITY));
    add_layer(m, "clip_inf", IR_OP_CLIP, NAMES("bn"), NAMES("ci"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 0.01f));
    add_layer(m, "leaky", IR_OP_LEAKY_RELU, NAMES("ci"), NAMES("lk"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "empty", 0, NULL));
    add_layer(m, "sig", IR_OP_SIGMOID, NAMES("lk"), NAMES("sg"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "big", INT64_MIN));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "big2", INT64_MAX));
    add_layer(m, "tanh", IR_OP_TANH, NAMES("sg"), NAMES("tn"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_big", 1e10f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_int", 100000000.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_negzero", -0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_tiny", 1e-45f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "f_third", 1.0f / 3.0f));
    add_layer(m, "hswish", IR_OP_HARDSWISH, NAMES("tn"), NAMES("hw"), &a);
    ir_attrs_free(&a);

    add_layer(m, "add", IR_OP_ADD, NAMES("c6", "hw"), NAMES("ad"), NULL);
    add_layer(m, "mul", IR_OP_MUL, NAMES("ad", "sg"), NAMES("mu"), NULL);
    add_layer(m, "sub", IR_OP_SUB, NAMES("mu", "ad"), NAMES("sb"), NULL);
    add_layer(m, "div", IR_OP_DIV, NAMES("sb", "scalar"), NAMES("dv"), NULL);
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 1.0f / 6.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "beta", 0.5f));
    add_layer(m, "hsigmoid", IR_OP_HARDSIGMOID, NAMES("dv"), NAMES("hsg"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    add_layer(m, "cat", IR_OP_CONCAT, NAMES("ad", "mu"), NAMES("ct"), &a);
    ir_attrs_free(&a);

    int64_t k2[] = {2, 2}, k3[] = {3, 3};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "kernel_shape", 2, k2));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "strides", 2, k2));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "ceil_mode", 0));
    add_layer(m, "maxpool", IR_OP_MAXPOOL, NAMES("ct"), NAMES("mp"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "kernel_shape", 2, k3));
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "pads", 4, pads));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "count_include_pad", 1));
    add_layer(m, "avgpool", IR_OP_AVGPOOL, NAMES("mp"), NAMES("ap"), &a);
    ir_attrs_free(&a);

    add_layer(m, "gap", IR_OP_GLOBAL_AVGPOOL, NAMES("ap"), NAMES("gp"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", 1));
    add_layer(m, "flatten", IR_OP_FLATTEN, NAMES("ap"), NAMES("fl"), &a);
    ir_attrs_free(&a);

    add_layer(m, "fc", IR_OP_FC, NAMES("fl", "fcw", "fcb"), NAMES("fo"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "alpha", 0.5f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "beta", 2.0f));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transA", 0));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "transB", 0));
    add_layer(m, "gemm", IR_OP_GEMM, NAMES("fo", "gb", "gc"), NAMES("go"), &a);
    ir_attrs_free(&a);

    int64_t shape[] = {1, 8, 9}, perm[] = {0, 2, 1};
    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "shape", 3, shape));
    add_layer(m, "reshape", IR_OP_RESHAPE, NAMES("ap"), NAMES("rs"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_ints(ctx, &a, "perm", 3, perm));
    add_layer(m, "transpose", IR_OP_TRANSPOSE, NAMES("rs"), NAMES("tr"), &a);
    ir_attrs_free(&a);

    add_layer(m, "matmul", IR_OP_MATMUL, NAMES("tr", "mmw"), NAMES("mm"), NULL);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "axis", -1));
    add_layer(m, "softmax", IR_OP_SOFTMAX, NAMES("mm"), NAMES("sm"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "forward"));
    add_layer(m, "lstm", IR_OP_LSTM, NAMES("seq", "lw", "lr", "lb", NULL, "h0", "c\xc3\xa7" "0"),
              NAMES("-", NULL, "lyc"), &a);
    ir_attrs_free(&a);

    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "hidden_size", 4));
    ck_assert_ok(ctx, ir_attrs_set_string(ctx, &a, "direction", "bidirectional"));
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &a, "linear_before_reset", 1));
    add_layer(m, "gru", IR_OP_GRU, NAMES("seq", "gw", "gr", "gbias"), NAMES("gy", "gyh"), &a);
    ir_attrs_free(&a);

    add_layer(m, "with space", IR_OP_RELU, NAMES("sm"), NAMES("sp ace"), NULL);

    const char *outs[] = {"sp ace", "go", "gp", "-", "lyc", "gy", "gyh"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) ck_assert_ok(ctx, ir_model_mark_output(m, outs[i]));
    return m;
}

/* ---------------------------------------------------------------- helpers */

static char *print_ok(const ir_model *m, uint32_t flags)
{
    char *text = NULL;
    ck_assert_ok(ctx, ir_print(m, flags, &text));
    ck_assert_ptr_nonnull(text);
    return text;
}

static ir_model *parse_ok(const char *text)
{
    ir_model *m = NULL;
    ck_assert_ok(ctx, ir_parse(ctx, text, strlen(text), &m));
    ck_assert_ptr_nonnull(m);
    return m;
}

static int floats_identical(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0; /* distinguishes -0.0 from 0.0 */
}

static void assert_attrs_equal(const ir_attrs *a, const ir_attrs *b, const char *layer)
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
            ck_assert_msg(floats_identical(x->f, y->f), "layer %s attr %s: %.9g vs %.9g", layer, x->name,
                          (double)x->f, (double)y->f);
            break;
        case IR_ATTR_STRING: ck_assert_str_eq(x->s, y->s); break;
        }
    }
}

static void assert_sparsity_equal(const ir_sparsity *a, const ir_sparsity *b, const char *name)
{
    ck_assert_msg(a->kind == b->kind, "tensor %s: sparsity kind %d vs %d", name, a->kind, b->kind);
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
        for (size_t i = 0; i < a->n_blocks; i++) ck_assert_int_eq(!a->block_mask[i], !b->block_mask[i]);
        break;
    case IR_SPARSITY_UNSTRUCTURED:
        ck_assert_uint_eq(a->n_mask, b->n_mask);
        for (size_t i = 0; i < a->n_mask; i++) ck_assert_int_eq(!a->mask[i], !b->mask[i]);
        break;
    }
}

/* Same graph, matched by name: tensors (kind, shape, weights unless elided, sparsity), layers, inputs, outputs. */
static void assert_models_equal(const ir_model *a, const ir_model *b, int weights)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->n_tensors, b->n_tensors);
    ck_assert_uint_eq(a->n_layers, b->n_layers);
    ck_assert_uint_eq(a->n_inputs, b->n_inputs);
    ck_assert_uint_eq(a->n_outputs, b->n_outputs);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const ir_tensor *x = &a->tensors[i];
        int j = ir_model_find_tensor(b, x->name);
        ck_assert_msg(j >= 0, "tensor '%s' lost", x->name);
        const ir_tensor *y = &b->tensors[j];
        ck_assert_int_eq(x->kind, y->kind);
        ck_assert_int_eq(x->rank, y->rank);
        for (int d = 0; d < x->rank; d++) ck_assert_int_eq(x->dims[d], y->dims[d]);
        if (x->kind != IR_TENSOR_CONST) continue;
        size_t n = ir_tensor_numel(x);
        for (size_t k = 0; k < n; k++) {
            float want = weights ? x->data[k] : 0.0f;
            ck_assert_msg(floats_identical(want, y->data[k]), "tensor %s[%zu]: %.9g vs %.9g", x->name, k,
                          (double)want, (double)y->data[k]);
        }
        assert_sparsity_equal(&x->sparsity, &y->sparsity, x->name);
    }
    for (size_t i = 0; i < a->n_layers; i++) {
        const ir_layer *x = &a->layers[i], *y = &b->layers[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->op, y->op);
        ck_assert_uint_eq(x->n_inputs, y->n_inputs);
        ck_assert_uint_eq(x->n_outputs, y->n_outputs);
        for (size_t k = 0; k < x->n_inputs; k++) {
            ck_assert_int_eq(x->inputs[k] < 0, y->inputs[k] < 0);
            if (x->inputs[k] >= 0)
                ck_assert_str_eq(a->tensors[x->inputs[k]].name, b->tensors[y->inputs[k]].name);
        }
        for (size_t k = 0; k < x->n_outputs; k++) {
            ck_assert_int_eq(x->outputs[k] < 0, y->outputs[k] < 0);
            if (x->outputs[k] >= 0)
                ck_assert_str_eq(a->tensors[x->outputs[k]].name, b->tensors[y->outputs[k]].name);
        }
        assert_attrs_equal(&x->attrs, &y->attrs, x->name);
    }
    for (size_t i = 0; i < a->n_inputs; i++)
        ck_assert_str_eq(a->tensors[a->inputs[i]].name, b->tensors[b->inputs[i]].name);
    for (size_t i = 0; i < a->n_outputs; i++)
        ck_assert_str_eq(a->tensors[a->outputs[i]].name, b->tensors[b->outputs[i]].name);
}

/* print -> parse -> print is byte-identical and the parsed model equals the original. */
static void assert_fixed_point(const ir_model *m, uint32_t flags)
{
    char *t1 = print_ok(m, flags);
    ir_model *m2 = parse_ok(t1);
    char *t2 = print_ok(m2, flags);
    ck_assert_str_eq(t1, t2);
    assert_models_equal(m, m2, !(flags & PDC_PRINT_ELIDE_WEIGHTS));
    ir_model_destroy(m2);
    pdc_free(t1);
    pdc_free(t2);
}

static void assert_contains(const char *text, const char *needle)
{
    if (!strstr(text, needle)) fprintf(stderr, "--- text:\n%s---\n", text);
    ck_assert_msg(strstr(text, needle) != NULL, "text lacks \"%.300s\" (printed on stderr)", needle);
}

/* ---------------------------------------------------------------- round trips */

START_TEST(all_ops_model_covers_every_op_and_sparsity_kind)
{
    ir_model *m = all_ops_model();
    int seen_op[IR_OP_COUNT] = {0}, seen_sp[4] = {0};
    for (size_t i = 0; i < m->n_layers; i++) seen_op[m->layers[i].op] = 1;
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == IR_TENSOR_CONST) seen_sp[m->tensors[i].sparsity.kind] = 1;
    for (int op = 0; op < IR_OP_COUNT; op++)
        ck_assert_msg(seen_op[op], "op %s is not in the round-trip model", ir_op_get_info((ir_op)op)->name);
    for (int k = 0; k < 4; k++) ck_assert_msg(seen_sp[k], "sparsity kind %d is not in the round-trip model", k);
    ir_model_destroy(m);
}
END_TEST

START_TEST(all_ops_fixed_point)
{
    ir_model *m = all_ops_model();
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

START_TEST(all_ops_fixed_point_elided)
{
    ir_model *m = all_ops_model();
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    ir_model_destroy(m);
}
END_TEST

/* Each op alone, in a model of its own (a failure names the op). */
START_TEST(single_op_fixed_point)
{
    ir_model *big = all_ops_model();
    const ir_layer *src = NULL;
    for (size_t i = 0; i < big->n_layers && !src; i++)
        if ((int)big->layers[i].op == _i) src = &big->layers[i];
    ck_assert_ptr_nonnull(src);
    /* Rebuild just this layer: its inputs become graph inputs / constants of the same shape. */
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, ir_op_get_info(src->op)->name, &m));
    const char *in[16], *out[16];
    for (size_t k = 0; k < src->n_inputs; k++) {
        in[k] = NULL;
        if (src->inputs[k] < 0) continue;
        const ir_tensor *t = &big->tensors[src->inputs[k]];
        in[k] = t->name;
        if (t->kind == IR_TENSOR_CONST) {
            size_t n = ir_tensor_numel(t);
            float *d = pdc_alloc(ctx, n * sizeof *d);
            memcpy(d, t->data, n * sizeof *d);
            ck_assert_ok(ctx, ir_model_add_constant_owned(m, t->name, t->rank, t->dims, d));
            ir_sparsity s;
            ck_assert_ok(ctx, ir_sparsity_copy(ctx, &s, &t->sparsity));
            ck_assert_ok(ctx, ir_model_set_sparsity(m, ir_model_find_tensor(m, t->name), &s));
        } else if (ir_model_find_tensor(m, t->name) < 0) {
            add_input(m, t->name, t->rank, t->dims);
        }
    }
    for (size_t k = 0; k < src->n_outputs; k++)
        out[k] = src->outputs[k] < 0 ? NULL : big->tensors[src->outputs[k]].name;
    add_layer(m, src->name, src->op, src->n_inputs, in, src->n_outputs, out, &src->attrs);
    ck_assert_ok(ctx, ir_model_mark_output(m, out[0]));
    assert_fixed_point(m, 0);
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    ir_model_destroy(m);
    ir_model_destroy(big);
}
END_TEST

/* Each sparsity kind alone, on a weight of the shape it applies to. */
START_TEST(each_sparsity_kind_fixed_point)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "sparse", &m));
    add_input(m, "x", DIMS(1, 3, 5, 5));
    add_const(m, "w", 21, DIMS(6, 3, 3, 3));
    const uint64_t pats[] = {0x1ff, 0x010, 0x145, 0x0aa};
    switch (_i) {
    case IR_SPARSITY_NONE: break;
    case IR_SPARSITY_PATTERN: set_pattern(m, "w", 3, 3, 4, pats, 5); break;
    case IR_SPARSITY_BLOCK: set_block(m, "w", 4, 5, 6); break; /* 6x27 matrix: partial edge blocks */
    case IR_SPARSITY_UNSTRUCTURED: set_unstructured(m, "w", 7); break;
    }
    ck_assert_int_eq(tensor(m, "w")->sparsity.kind, _i);
    add_layer(m, "conv", IR_OP_CONV, NAMES("x", "w", NULL), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "y"));
    assert_fixed_point(m, 0);
    assert_fixed_point(m, PDC_PRINT_ELIDE_WEIGHTS);
    char *text = print_ok(m, 0);
    static const char *const expect[] = {"= [", "  sparsity pattern 3x3 patterns=[0x1ff, 0x10, 0x145, 0xaa] kernels=[",
                                         "  sparsity block 4x5 mask=\"", "  sparsity unstructured mask=\""};
    assert_contains(text, expect[_i]);
    if (_i == IR_SPARSITY_NONE) ck_assert_ptr_null(strstr(text, "sparsity"));
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* Layers fed by a symbolic input have unknown shapes: printed without a type, and still a fixed point. */
START_TEST(symbolic_input_fixed_point)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "sym", &m));
    add_input(m, "x", DIMS(-1, 3, 8, 8));
    add_const(m, "w", 1, DIMS(4, 3, 1, 1));
    add_layer(m, "conv", IR_OP_CONV, NAMES("x", "w"), NAMES("y"), NULL);
    add_layer(m, "relu", IR_OP_RELU, NAMES("y"), NAMES("z"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));
    char *text = print_ok(m, 0);
    assert_contains(text, "input x : f32[?,3,8,8]\n");
    assert_contains(text, "layer conv = conv(x, w) -> (y)\n");
    assert_contains(text, "layer relu = relu(y) -> (z)\n");
    pdc_free(text);
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

/* The exact canonical text of a small model (the format documented in docs/ir.md). */
START_TEST(canonical_text_of_small_model)
{
    ir_model *m;
    ir_attrs a = {0};
    ck_assert_ok(ctx, ir_model_create(ctx, "tiny", &m));
    add_input(m, "x", DIMS(1, 4));
    float *w = pdc_alloc(ctx, 8 * sizeof *w);
    const float wv[8] = {0.5f, -1.0f, 0.0f, 2.25f, 1e-5f, 3.0f, -0.0f, 100.0f};
    memcpy(w, wv, sizeof wv);
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "w", DIMS(2, 4), w));
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = 8};
    s.mask = pdc_alloc(ctx, 8);
    memcpy(s.mask, (const uint8_t[]){1, 1, 0, 1, 1, 1, 1, 1}, 8);
    ck_assert_ok(ctx, ir_model_set_sparsity(m, ir_model_find_tensor(m, "w"), &s));
    add_layer(m, "fc", IR_OP_FC, NAMES("x", "w", NULL), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "min", 0.0f));
    ck_assert_ok(ctx, ir_attrs_set_float(ctx, &a, "max", INFINITY));
    add_layer(m, "onnx::Clip_3", IR_OP_CLIP, NAMES("y"), NAMES("z"), &a);
    ir_attrs_free(&a);
    ck_assert_ok(ctx, ir_model_mark_output(m, "z"));

    char *text = print_ok(m, 0);
    ck_assert_str_eq(text, "pdcir 1\n"
                           "model \"tiny\"\n"
                           "input x : f32[1,4]\n"
                           "const w : f32[2,4] = [0.5, -1, 0, 2.25, 1e-05, 3, -0, 100]\n"
                           "  sparsity unstructured mask=\"11011111\"\n"
                           "layer fc = fc(x, w, -) -> (y : f32[1,2])\n"
                           "layer \"onnx::Clip_3\" = clip(y) -> (z : f32[1,2]) {min=0.0, max=inf}\n"
                           "output z\n");
    pdc_free(text);
    text = print_ok(m, PDC_PRINT_ELIDE_WEIGHTS);
    assert_contains(text, "const w : f32[2,4] = dense<elided>\n  sparsity unstructured mask=\"11011111\"\n");
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

START_TEST(attribute_and_name_spelling)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    assert_contains(text, "model \"all \\\"ops\\\"\\\\model\"\n");
    assert_contains(text, "{epsilon=1e-05}");
    assert_contains(text, "{min=-inf, max=inf}");
    assert_contains(text, "{min=0.0, max=6.0}");
    assert_contains(text, "{alpha=0.01}");
    assert_contains(text, "{alpha=0.5, beta=2.0, transA=0, transB=0}");
    assert_contains(text, "f_big=1e+10, f_int=1e+08, f_negzero=-0.0, f_tiny=1.4013e-45, f_third=0.33333334}");
    assert_contains(text, "{big=-9223372036854775808, big2=9223372036854775807}");
    assert_contains(text, "{empty=[]}");
    assert_contains(text, "{note=\"q\\\"b\\\\n\\nt\\tc\\x01 d\\x7f utf8 \xc3\xa7 # not a comment\"}");
    assert_contains(text, "{strides=[1,1], pads=[1,1,1,1], dilations=[1,1], group=1}");
    assert_contains(text,
                    "layer /layer1/Conv = conv(x, \"onnx::Conv_12\", cb) -> (/layer1/Conv_output_0 : f32[1,4,6,6])");
    assert_contains(text, "layer lstm = lstm(seq, lw, lr, lb, -, h0, \"c\xc3\xa7" "0\") -> "
                          "(\"-\" : f32[5,1,1,4], -, lyc : f32[1,1,4])"
                          " {hidden_size=4, direction=\"forward\"}\n");
    assert_contains(text, "layer gru = gru(seq, gw, gr, gbias) -> (gy : f32[5,2,1,4], gyh : f32[2,1,4])");
    assert_contains(text, "layer \"with space\" = relu(sm) -> (\"sp ace\" : f32[1,9,3])\n");
    assert_contains(text, "const scalar : f32[] = [");
    assert_contains(text, "const specials : f32[9] = [0.1, -0, 1.4013e-45, 3.4028235e+38, -3.4028235e+38, 0.33333334, "
                          "16777216, 1.1754944e-38, 1.2345679e+08]\n");
    assert_contains(text, "output \"sp ace\"\noutput go\noutput gp\noutput \"-\"\noutput lyc\n");
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* inf, -inf and nan weights survive (NaN prints as "nan"). */
START_TEST(nonfinite_weights_round_trip)
{
    ir_model *m;
    ck_assert_ok(ctx, ir_model_create(ctx, "nf", &m));
    add_input(m, "x", DIMS(1, 3));
    float *d = pdc_alloc(ctx, 3 * sizeof *d);
    d[0] = INFINITY;
    d[1] = -INFINITY;
    d[2] = -NAN;
    ck_assert_ok(ctx, ir_model_add_constant_owned(m, "c", DIMS(1, 3), d));
    add_layer(m, "add", IR_OP_ADD, NAMES("x", "c"), NAMES("y"), NULL);
    ck_assert_ok(ctx, ir_model_mark_output(m, "y"));
    char *text = print_ok(m, 0);
    assert_contains(text, "const c : f32[1,3] = [inf, -inf, nan]\n");
    ir_model *m2 = parse_ok(text);
    const float *p = tensor(m2, "c")->data;
    ck_assert(isinf(p[0]) && p[0] > 0);
    ck_assert(isinf(p[1]) && p[1] < 0);
    ck_assert(isnan(p[2]));
    assert_fixed_point(m, 0);
    ir_model_destroy(m2);
    pdc_free(text);
    ir_model_destroy(m);
}
END_TEST

/* ---------------------------------------------------------------- hand-written text */

static const char hand_text[] =
    "# a hand-written model\n"
    "\n"
    "pdcir 1   # version\n"
    "model \"hand made\"\n"
    "input \"in put\" : f32[ 1 , 1, 4,4 ]\r\n"
    "const w : f32[2,1,3,3] = [1,0,0, 0,1,0, 0,0,1,   0,0,0, 0,2.5e0,0, 0,0,0]\n"
    "   # comment lines may sit between a const and its sparsity\n"
    "\tsparsity pattern 3x3 patterns=[0x111, 16] kernels=[0, 1]\n"
    "const b : f32[2] = dense < elided >\n"
    "const fcw : f32[3,8] = [1,1,1,1, 0,0,0,0, 1,1,1,1, 1,1,1,1, 0,0,0,0, 0,0,0,0]\n"
    "  sparsity block 1x4 mask=\"101100\"\n"
    "layer c = conv(\"in put\", w, b) -> (y) {pads=[1, 1, 1, 1], group=1, note=\"a\\x41\\tb\"}\n"
    "layer r = relu(y) -> (z : f32[1,2,4,4])   \n"
    "layer f = flatten(z) -> (fl) {axis=1}\n"
    "layer g = gemm(fl, fl, -) -> (gg) {transB=1, alpha=2, beta=-.5, gamma=+1.5E+2}\n"
    "output z\n"
    "output gg";

START_TEST(hand_written_text_parses)
{
    ir_model *m = parse_ok(hand_text);
    ck_assert_str_eq(m->name, "hand made");
    ck_assert_uint_eq(m->n_inputs, 1);
    const ir_tensor *x = &m->tensors[m->inputs[0]];
    ck_assert_str_eq(x->name, "in put");
    ck_assert_int_eq(x->rank, 4);
    ck_assert_int_eq(x->dims[2], 4);

    const ir_tensor *w = tensor(m, "w");
    ck_assert_int_eq(w->kind, IR_TENSOR_CONST);
    const float want_w[18] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2.5f, 0, 0, 0, 0};
    ck_assert_mem_eq(w->data, want_w, sizeof want_w);
    ck_assert_int_eq(w->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_int_eq(w->sparsity.kh, 3);
    ck_assert_int_eq(w->sparsity.kw, 3);
    ck_assert_uint_eq(w->sparsity.n_patterns, 2);
    ck_assert_uint_eq(w->sparsity.patterns[0], 0x111);
    ck_assert_uint_eq(w->sparsity.patterns[1], 16);
    ck_assert_uint_eq(w->sparsity.n_kernels, 2);
    ck_assert_int_eq(w->sparsity.kernel_pattern[0], 0);
    ck_assert_int_eq(w->sparsity.kernel_pattern[1], 1);

    const ir_tensor *b = tensor(m, "b");
    ck_assert(b->data[0] == 0.0f && b->data[1] == 0.0f);
    ck_assert_int_eq(b->sparsity.kind, IR_SPARSITY_NONE);

    const ir_tensor *fcw = tensor(m, "fcw");
    ck_assert_int_eq(fcw->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(fcw->sparsity.bh, 1);
    ck_assert_int_eq(fcw->sparsity.bw, 4);
    ck_assert_mem_eq(fcw->sparsity.block_mask, ((const uint8_t[]){1, 0, 1, 1, 0, 0}), 6);

    ck_assert_uint_eq(m->n_layers, 4);
    const ir_layer *c = &m->layers[0];
    ck_assert_str_eq(c->name, "c");
    ck_assert_int_eq(c->op, IR_OP_CONV);
    size_t n;
    const int64_t *pads = ir_attr_ints(&c->attrs, "pads", &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(pads[0] + pads[1] + pads[2] + pads[3], 4);
    ck_assert_int_eq(ir_attrs_find(&c->attrs, "group")->type, IR_ATTR_INT);
    ck_assert_str_eq(ir_attr_string(&c->attrs, "note", ""), "aA\tb");
    ck_assert_str_eq(c->attrs.items[0].name, "pads"); /* order kept */
    ck_assert_str_eq(c->attrs.items[2].name, "note");

    const ir_tensor *y = tensor(m, "y");
    ck_assert_int_eq(y->rank, 4);
    ck_assert_int_eq(y->dims[1], 2);
    ck_assert_int_eq(y->dims[3], 4);
    ck_assert_int_eq(tensor(m, "fl")->dims[1], 32);
    ck_assert_int_eq(tensor(m, "gg")->dims[0], 1);
    ck_assert_int_eq(tensor(m, "gg")->dims[1], 1);

    const ir_layer *g = &m->layers[3];
    ck_assert_int_eq(ir_attrs_find(&g->attrs, "alpha")->type, IR_ATTR_INT); /* "2" is an int */
    ck_assert_int_eq(ir_attrs_find(&g->attrs, "beta")->type, IR_ATTR_FLOAT);
    ck_assert(ir_attrs_find(&g->attrs, "beta")->f == -0.5f);
    ck_assert(ir_attrs_find(&g->attrs, "gamma")->f == 150.0f);
    ck_assert_int_eq(g->inputs[2], -1);

    ck_assert_uint_eq(m->n_outputs, 2);
    ck_assert_str_eq(m->tensors[m->outputs[0]].name, "z");
    ck_assert_str_eq(m->tensors[m->outputs[1]].name, "gg");

    /* The canonical print of it is a fixed point too. */
    assert_fixed_point(m, 0);
    ir_model_destroy(m);
}
END_TEST

START_TEST(model_line_is_optional_and_len_is_respected)
{
    const char text[] = "pdcir 1\ninput x : f32[2]\nlayer r = relu(x) -> (y)\noutput y\nGARBAGE THAT IS NOT PARSED";
    size_t len = strlen(text) - strlen("GARBAGE THAT IS NOT PARSED");
    ir_model *m = NULL;
    ck_assert_ok(ctx, ir_parse(ctx, text, len, &m));
    ck_assert_str_eq(m->name, "model");
    ck_assert_uint_eq(m->n_layers, 1);
    ir_model_destroy(m);
    /* The whole buffer is rejected at the garbage line. */
    ck_assert_status(ctx, ir_parse(ctx, text, strlen(text), &m), PDC_ERR_PARSE);
    ck_assert_error_has(ctx, "line 5, column 1:");
    /* A header alone is an empty model. */
    m = parse_ok("pdcir 1");
    ck_assert_uint_eq(m->n_tensors, 0);
    ir_model_destroy(m);
}
END_TEST

START_TEST(elided_weights_parse_as_zeros)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, PDC_PRINT_ELIDE_WEIGHTS);
    ck_assert_ptr_null(strstr(text, "= [")); /* no weight leaked into the text */
    ir_model *m2 = parse_ok(text);
    size_t consts = 0;
    for (size_t i = 0; i < m2->n_tensors; i++) {
        const ir_tensor *t = &m2->tensors[i];
        if (t->kind != IR_TENSOR_CONST) continue;
        consts++;
        size_t n = ir_tensor_numel(t);
        ck_assert_uint_gt(n, 0);
        for (size_t k = 0; k < n; k++)
            ck_assert_msg(t->data[k] == 0.0f, "%s[%zu] = %g", t->name, k, (double)t->data[k]);
    }
    ck_assert_uint_eq(consts, 21);
    /* Printed in full, the zeros show. */
    char *full = print_ok(m2, 0);
    assert_contains(full, "const cb : f32[4] = [0, 0, 0, 0]\n");
    pdc_free(full);
    pdc_free(text);
    ir_model_destroy(m2);
    ir_model_destroy(m);
}
END_TEST

/* Through the public API: pdc_model_print / pdc_model_parse (which also runs the verifier). */
START_TEST(public_api_round_trip)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "pub", &m));
    int64_t xd[] = {1, 2, 4, 4}, wd[] = {3, 2, 3, 3};
    float w[54];
    test_fill_random(w, 54, 3);
    ck_assert_ok(ctx, pdc_model_add_input(m, "x", 4, xd));
    ck_assert_ok(ctx, pdc_model_add_constant(m, "w", 4, wd, w));
    const char *in[] = {"x", "w"}, *out[] = {"y"};
    ck_assert_ok(ctx, pdc_model_add_layer(m, "conv", "conv", 2, in, 1, out, NULL));
    ck_assert_ok(ctx, pdc_model_mark_output(m, "y"));
    char *text;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &text));
    pdc_model *m2;
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m2));
    char *text2;
    ck_assert_ok(ctx, pdc_model_print(m2, 0, &text2));
    ck_assert_str_eq(text, text2);
    pdc_string_free(text);
    pdc_string_free(text2);
    pdc_model_destroy(m2);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(null_arguments)
{
    ir_model *m = NULL;
    char *text = NULL;
    ck_assert_int_eq(ir_parse(NULL, "pdcir 1", 7, &m), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_parse(ctx, "pdcir 1", 7, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_parse(ctx, NULL, 7, &m), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(ir_print(NULL, 0, &text), PDC_ERR_INVALID_ARG);
    m = parse_ok("pdcir 1\n");
    ck_assert_status(ctx, ir_print(m, 0, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, ir_print(m, 0x80, &text), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(text);
    ir_model_destroy(m);
}
END_TEST

/* ---------------------------------------------------------------- malformed text */

typedef struct bad_case {
    const char *text;
    pdc_status status;
    const char *where;   /* message prefix, e.g. "line 2, column 5:" or "line 3:" */
    const char *keyword; /* must appear in the message */
} bad_case;

#define H "pdcir 1\n"
#define X4 H "input x : f32[1,4]\n"

static const bad_case bad_cases[] = {
    /* header */
    {"", PDC_ERR_PARSE, "line 1, column 1:", "expected the header 'pdcir 1', found end of input"},
    {"input x : f32[1]\n", PDC_ERR_PARSE, "line 1, column 1:", "found 'input'"},
    {"pdcirx 1\n", PDC_ERR_PARSE, "line 1, column 1:", "'pdcir 1'"},
    {"pdcir 2\n", PDC_ERR_PARSE, "line 1, column 7:", "unsupported pdcir version 2"},
    {"pdcir\n", PDC_ERR_PARSE, "line 1, column 6:", "found end of line"},
    {"pdcir 1 trailing\n", PDC_ERR_PARSE, "line 1, column 9:", "expected end of line, found 'trailing'"},
    {"# only a comment\n\npdcir 1.0\n", PDC_ERR_PARSE, "line 3, column 7:", "found '1.0'"},
    {H "pdcir 1\n", PDC_ERR_PARSE, "line 2, column 1:", "duplicate 'pdcir'"},
    {H "input x : f32[1]\nmodel \"late\"\n", PDC_ERR_PARSE, "line 3, column 1:", "right after the header"},
    {H "model \"\"\n", PDC_ERR_PARSE, "line 2, column 7:", "expected the model name, found an empty name"},
    {H "model \"a\\x01\"\n", PDC_ERR_INVALID_ARG, "line 2:", "invalid model name"},
    {H "input \"a\\tb\" : f32[1]\n", PDC_ERR_INVALID_ARG, "line 2:", "invalid tensor name"},
    /* statements and garbage */
    {H "bogus stuff\n", PDC_ERR_PARSE, "line 2, column 1:", "unknown statement 'bogus'"},
    {H "$\n", PDC_ERR_PARSE, "line 2, column 1:", "found '$'"},
    {H "input x : f32[1] extra\n", PDC_ERR_PARSE, "line 2, column 18:", "expected end of line, found 'extra'"},
    {H "input x : f32[1]\n\x01\n", PDC_ERR_PARSE, "line 3, column 1:", "byte 0x01"},
    /* strings and names */
    {H "model \"abc\n", PDC_ERR_PARSE, "line 2, column 7:", "unterminated string"},
    {H "model \"abc", PDC_ERR_PARSE, "line 2, column 7:", "unterminated string"},
    {H "model \"a\\qb\"\n", PDC_ERR_PARSE, "line 2, column 9:", "unknown escape"},
    {H "model \"a\\x0\"\n", PDC_ERR_PARSE, "line 2, column 9:", "two hex digits"},
    {H "model \"a\\x00\"\n", PDC_ERR_PARSE, "line 2, column 9:", "\\x00"},
    {H "input - : f32[1]\n", PDC_ERR_PARSE, "line 2, column 7:", "expected an input name, found '-'"},
    {H "input x f32[1]\n", PDC_ERR_PARSE, "line 2, column 9:", "expected ':'"},
    {H "input onnx::x : f32[1]\n", PDC_ERR_PARSE, "line 2, column 12:",
     "expected a type such as f32[1,3,224,224], found ':'"},
    /* types and dims */
    {H "input x : f16[1]\n", PDC_ERR_PARSE, "line 2, column 11:", "unsupported dtype 'f16'"},
    {H "input x : [1]\n", PDC_ERR_PARSE, "line 2, column 11:", "expected a type"},
    {H "input x : f32[1,0]\n", PDC_ERR_PARSE, "line 2, column 17:", "bad dimension 0"},
    {H "input x : f32[-3]\n", PDC_ERR_PARSE, "line 2, column 15:", "bad dimension -3"},
    {H "input x : f32[1,2.5]\n", PDC_ERR_PARSE, "line 2, column 17:", "found '2.5'"},
    {H "input x : f32[1,,2]\n", PDC_ERR_PARSE, "line 2, column 17:", "expected a dimension"},
    {H "input x : f32[1 2]\n", PDC_ERR_PARSE, "line 2, column 17:", "expected ',' or ']', found '2'"},
    {H "input x : f32[1,2\n", PDC_ERR_PARSE, "line 2, column 18:", "found end of line"},
    {H "input x : f32[99999999999999999999]\n", PDC_ERR_PARSE, "line 2, column 15:", "out of range"},
    {H "input x : f32[1,2,3,4,5,6,7,8,9]\n", PDC_ERR_PARSE, "line 2, column 31:", "too many dimensions"},
    {H "input x : f32[]\n", PDC_ERR_PARSE, "line 2, column 7:", "at least one dimension"},
    {H "input x : f32[12abc]\n", PDC_ERR_PARSE, "line 2, column 15:", "malformed number '12abc'"},
    {H "const c : f32[?] = [1]\n", PDC_ERR_PARSE, "line 2, column 15:", "symbolic"},
    {H "const c : f32[4294967296,4294967296,4294967296] = dense<elided>\n", PDC_ERR_PARSE, "line 2, column 11:",
     "overflows"},
    /* duplicates and unknown names */
    {H "input x : f32[1]\ninput x : f32[2]\n", PDC_ERR_PARSE, "line 3, column 7:", "tensor 'x' is already defined"},
    {H "input x : f32[1]\nconst x : f32[1] = [1]\n", PDC_ERR_PARSE, "line 3, column 7:", "already defined"},
    {X4 "layer l = relu(x) -> (y)\nlayer l = relu(y) -> (z)\n", PDC_ERR_PARSE, "line 4, column 7:",
     "layer 'l' is already defined"},
    {X4 "layer l = relu(x) -> (x)\n", PDC_ERR_PARSE, "line 3, column 23:", "tensor 'x' is already defined"},
    {X4 "layer l = lstm(x, x, x) -> (y, y)\n", PDC_ERR_PARSE, "line 3, column 32:", "tensor 'y' is already defined"},
    {X4 "layer l = relu(\"\") -> (y)\n", PDC_ERR_PARSE, "line 3, column 16:", "found an empty name"},
    {X4 "layer l = relu(x) -> (y, \"\")\n", PDC_ERR_PARSE, "line 3, column 26:", "found an empty name"},
    {X4 "layer l = relu(z) -> (y)\n", PDC_ERR_PARSE, "line 3, column 16:", "unknown tensor 'z'"},
    {X4 "layer l = add(x, \"onnx::a\") -> (y)\n", PDC_ERR_PARSE, "line 3, column 18:", "unknown tensor 'onnx::a'"},
    {H "output nope\n", PDC_ERR_PARSE, "line 2, column 8:", "unknown tensor 'nope'"},
    /* layers */
    {X4 "layer l = frob(x) -> (y)\n", PDC_ERR_PARSE, "line 3, column 11:", "unknown op 'frob'"},
    {X4 "layer l = relu(x) (y)\n", PDC_ERR_PARSE, "line 3, column 19:", "expected '->'"},
    {X4 "layer l = relu(x) -> y\n", PDC_ERR_PARSE, "line 3, column 22:", "expected '(' and the outputs, found 'y'"},
    {X4 "layer l = relu(x -> (y)\n", PDC_ERR_PARSE, "line 3, column 18:", "expected ',' or ')'"},
    {X4 "layer l = relu(x) -> (y) {a=1\n", PDC_ERR_PARSE, "line 3, column 30:", "expected ',' or '}'"},
    {X4 "layer l = relu(x) -> (y) {a=1, a=2}\n", PDC_ERR_PARSE, "line 3, column 32:", "attribute 'a' is given twice"},
    {X4 "layer l = relu(x) -> (y) {1a=1}\n", PDC_ERR_PARSE, "line 3, column 27:", "expected an attribute name"},
    {X4 "layer l = relu(x) -> (y) {a=1.5.2}\n", PDC_ERR_PARSE, "line 3, column 29:", "malformed number '1.5.2'"},
    {X4 "layer l = relu(x) -> (y) {a=[1.5]}\n", PDC_ERR_PARSE, "line 3, column 30:",
     "expected an integer, found '1.5'"},
    {X4 "layer l = relu(x) -> (y) {a=bare}\n", PDC_ERR_PARSE, "line 3, column 29:", "expected an attribute value"},
    {X4 "layer l = relu(x) -> (y) {a=1e}\n", PDC_ERR_PARSE, "line 3, column 29:", "no digits in the exponent"},
    {X4 "layer l = relu(x) -> (y) {a=0x}\n", PDC_ERR_PARSE, "line 3, column 29:", "no hex digits"},
    {X4 "layer l = relu(x) -> (y) {a=9223372036854775808}\n", PDC_ERR_PARSE, "line 3, column 29:", "out of range"},
    {X4 "layer l = relu(x) -> (y) {a=1e39}\n", PDC_ERR_PARSE, "line 3, column 29:", "out of range for f32"},
    {X4 "layer l = relu(x) -> (y) {a=nan}\n", PDC_ERR_INVALID_ARG, "line 3, column 29:", "NaN"},
    {X4 "layer l = relu(x) -> (y : f32[1,5])\n", PDC_ERR_SHAPE, "line 3, column 23:",
     "declared f32[1,5] but its inferred shape is f32[1,4]"},
    {X4 "layer l = relu(x) -> (y : f32[1,4,1])\n", PDC_ERR_SHAPE, "line 3, column 23:", "inferred"},
    {H "input x : f32[?,4]\nlayer l = relu(x) -> (y : f32[?,4])\n", PDC_ERR_SHAPE, "line 3, column 23:",
     "declared f32[?,4] but its inferred shape is unknown"},
    {X4 "layer l = relu(x) -> (-)\n", PDC_ERR_INVALID_ARG, "line 3:", "output 0 is required"},
    {X4 "layer l = relu(x) -> (-, y)\n", PDC_ERR_INVALID_ARG, "line 3:", "2 outputs, expected 1..1"},
    {X4 "layer l = relu(x) -> (- : f32[1])\n", PDC_ERR_PARSE, "line 3, column 25:", "expected ',' or ')', found ':'"},
    {X4 "layer l = relu(x, x) -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "2 inputs, expected 1..1"},
    {X4 "layer l = relu() -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "0 inputs"},
    {X4 "layer l = relu(-) -> (y)\n", PDC_ERR_INVALID_ARG, "line 3:", "input 0 is required"},
    {X4 "const w : f32[3,5] = dense<elided>\nlayer l = fc(x, w) -> (y)\n", PDC_ERR_SHAPE, "line 4: layer 'l' (fc)",
     "weight 'w'"},
    {X4 "layer l = concat(x, x) -> (y)\n", PDC_ERR_INVALID_MODEL, "line 3: layer 'l' (concat)", "axis"},
    {X4 "output x\n", PDC_ERR_INVALID_ARG, "line 3:", "must be produced by a layer"},
    {X4 "layer l = relu(x) -> (y)\noutput y\noutput y\n", PDC_ERR_INVALID_ARG, "line 5:", "already an output"},
    /* constants */
    {H "const w : f32[2,2] = [1, 2, 3]\n", PDC_ERR_PARSE, "line 2, column 22:",
     "expected 4 values for its shape, got 3"},
    {H "const w : f32[2,2] = [1, 2, 3, 4, 5]\n", PDC_ERR_PARSE, "line 2, column 22:", "expected 4 values"},
    {H "const w : f32[2] = []\n", PDC_ERR_PARSE, "line 2, column 20:", "got 0"},
    {H "const w : f32[2] = [1, x]\n", PDC_ERR_PARSE, "line 2, column 24:", "expected a number, found 'x'"},
    {H "const w : f32[2] = [1 2]\n", PDC_ERR_PARSE, "line 2, column 23:", "expected ',' or ']'"},
    {H "const w : f32[2] = [1,", PDC_ERR_PARSE, "line 2, column 23:", "expected a number, found end of input"},
    {H "const w : f32[1] = [1e999]\n", PDC_ERR_PARSE, "line 2, column 21:", "out of range for f32"},
    {H "const w : f32[1] = [infinity]\n", PDC_ERR_PARSE, "line 2, column 21:", "expected a number"},
    {H "const w : f32[1] = zeros\n", PDC_ERR_PARSE, "line 2, column 20:", "dense<elided>"},
    {H "const w : f32[1] = dense<hidden>\n", PDC_ERR_PARSE, "line 2, column 26:", "'elided'"},
    {H "const w : f32[1] = [1]]\n", PDC_ERR_PARSE, "line 2, column 23:", "expected end of line, found ']'"},
    {H "const w : f32[1] [1]\n", PDC_ERR_PARSE, "line 2, column 18:", "expected '='"},
    {H "const w : f32[2] = [1,\n2]\n", PDC_ERR_PARSE, "line 2, column 23:", "found end of line"},
    /* sparsity */
    {X4 "sparsity unstructured mask=\"1\"\n", PDC_ERR_PARSE, "line 3, column 1:", "must directly follow"},
    {H "sparsity unstructured mask=\"1\"\n", PDC_ERR_PARSE, "line 2, column 1:", "must directly follow"},
    {H "const w : f32[4] = [1,0,0,1]\ninput x : f32[1]\nsparsity unstructured mask=\"1001\"\n", PDC_ERR_PARSE,
     "line 4, column 1:", "must directly follow"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\"\n sparsity unstructured mask=\"1111\"\n",
     PDC_ERR_PARSE, "line 4, column 2:", "already has a sparsity line"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"10x1\"\n", PDC_ERR_PARSE, "line 3, column 32:",
     "expected '0', '1' or '\"' in mask, found 'x1'"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\n", PDC_ERR_PARSE, "line 3, column 29:",
     "unterminated mask"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=1001\n", PDC_ERR_PARSE, "line 3, column 29:",
     "quoted mask"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"1001\" x\n", PDC_ERR_PARSE, "line 3, column 36:",
     "expected end of line"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"101\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "mask has 3 entries, expected 4"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity unstructured mask=\"0111\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "element 0 is 1 but its sparsity prunes it"},
    {H "const w : f32[4] = [1,0,0,1]\n sparsity random mask=\"1011\"\n", PDC_ERR_PARSE, "line 3, column 11:",
     "expected a sparsity kind (pattern, block or unstructured), found 'random'"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 1y4 mask=\"11\"\n", PDC_ERR_PARSE, "line 3, column 18:",
     "expected 'x' (as in 3x3)"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 1x mask=\"11\"\n", PDC_ERR_PARSE, "line 3, column 19:",
     "expected the block shape"},
    {H "const w : f32[2,4] = dense<elided>\n sparsity block 2x4 mask=\"11\"\n", PDC_ERR_INVALID_MODEL, "line 3:",
     "block mask has 2 entries, expected 1"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x1ff] kernels=[2]\n",
     PDC_ERR_INVALID_MODEL, "line 3:", "kernel 0 has pattern id 2"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[-1] kernels=[0]\n", PDC_ERR_PARSE,
     "line 3, column 33:", "non-negative"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x1ff] kernels=[4294967296]\n",
     PDC_ERR_PARSE, "line 3, column 49:", "kernel pattern id 4294967296 is out of range"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 kernels=[0]\n", PDC_ERR_PARSE,
     "line 3, column 23:", "patterns=[...]"},
    {H "const w : f32[1,1,3,3] = dense<elided>\n sparsity pattern 3x3 patterns=[0x10000000000000000] kernels=[0]\n",
     PDC_ERR_PARSE, "line 3, column 33:", "out of range (uint64)"},
    /* an embedded NUL is garbage, not the end of the text */
    {H "input x : f32[1]\n\0\n", PDC_ERR_PARSE, "line 3, column 1:", "byte 0x00"},
};

static size_t bad_len(const bad_case *c)
{
    /* The NUL case: its length runs to the final newline. */
    size_t n = strlen(c->text);
    if (strstr(c->keyword, "byte 0x00")) n += 2;
    return n;
}

START_TEST(malformed_text_is_rejected)
{
    const bad_case *c = &bad_cases[_i];
    ir_model *m = (ir_model *)(uintptr_t)0x1;
    pdc_status st = ir_parse(ctx, c->text, bad_len(c), &m);
    const char *msg = pdc_context_last_error(ctx);
    ck_assert_msg(st == c->status, "case %d (%s): got %s, expected %s: %s", _i, c->text, pdc_status_string(st),
                  pdc_status_string(c->status), msg);
    ck_assert_msg(m == (ir_model *)(uintptr_t)0x1, "case %d: *out changed on failure", _i);
    ck_assert_msg(strncmp(msg, c->where, strlen(c->where)) == 0,
                  "case %d (%s): message \"%s\" does not start with \"%s\"", _i, c->text, msg, c->where);
    ck_assert_msg(strstr(msg, c->keyword) != NULL, "case %d (%s): message \"%s\" lacks \"%s\"", _i, c->text, msg,
                  c->keyword);
}
END_TEST

/* Every prefix of a valid text and many corrupted copies: never a crash or leak, and a model is
 * returned only on success. */
START_TEST(truncated_and_corrupted_text_never_crashes)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    ir_model_destroy(m);
    size_t len = strlen(text);
    size_t ok = 0, failed = 0;
    for (size_t n = 0; n < len; n += (n < 2000 ? 1 : 37)) {
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, text, n, &out);
        if (st == PDC_OK) {
            ok++;
            ck_assert_ptr_nonnull(out);
            ir_model_destroy(out);
        } else {
            failed++;
            ck_assert_ptr_null(out);
            ck_assert_msg(!strncmp(pdc_context_last_error(ctx), "line ", 5), "prefix %zu: message \"%s\"", n,
                          pdc_context_last_error(ctx));
        }
    }
    ck_assert_uint_gt(ok, 0);   /* e.g. cut right after a complete line */
    ck_assert_uint_gt(failed, 0);
    char *copy = pdc_alloc(ctx, len + 1);
    uint32_t x = 12345;
    static const char junk[] = "\"\\#-?,:=[](){}<>0x9e.\n \t\0abc";
    for (int iter = 0; iter < 400; iter++) {
        memcpy(copy, text, len + 1);
        for (int k = 0; k < 3; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            copy[x % len] = junk[(x >> 16) % (sizeof junk - 1)];
        }
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, copy, len, &out);
        if (st == PDC_OK) {
            char *again = print_ok(out, 0);
            pdc_free(again);
            ir_model_destroy(out);
        } else {
            ck_assert_ptr_null(out);
        }
    }
    pdc_free(copy);
    pdc_free(text);
}
END_TEST

/* Allocation failures at every size limit: the status is OUT_OF_MEMORY and nothing leaks. */
START_TEST(allocation_failures_are_clean)
{
    ir_model *m = all_ops_model();
    char *text = print_ok(m, 0);
    ir_model_destroy(m);
    int saw_oom = 0, saw_ok = 0;
    for (size_t limit = 1; limit <= (1u << 16); limit *= 2) {
        char opt[32];
        snprintf(opt, sizeof opt, "%zu", limit);
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", opt));
        ir_model *out = NULL;
        pdc_status st = ir_parse(ctx, text, strlen(text), &out);
        ck_assert_msg(st == PDC_OK || st == PDC_ERR_OUT_OF_MEMORY, "limit %zu: %s: %s", limit, pdc_status_string(st),
                      pdc_context_last_error(ctx));
        if (st == PDC_OK) {
            saw_ok = 1;
            char *again = NULL;
            st = ir_print(out, 0, &again);
            ck_assert(st == PDC_OK || st == PDC_ERR_OUT_OF_MEMORY);
            pdc_free(again);
            ir_model_destroy(out);
        } else {
            saw_oom = 1;
            ck_assert_ptr_null(out);
        }
    }
    ck_assert(saw_oom && saw_ok);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    pdc_free(text);
}
END_TEST

static Suite *ir_text_suite(void)
{
    Suite *s = suite_create("ir_text");
    TCase *tc = tcase_create("round_trip");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, all_ops_model_covers_every_op_and_sparsity_kind);
    tcase_add_test(tc, all_ops_fixed_point);
    tcase_add_test(tc, all_ops_fixed_point_elided);
    tcase_add_loop_test(tc, single_op_fixed_point, 0, IR_OP_COUNT);
    tcase_add_loop_test(tc, each_sparsity_kind_fixed_point, 0, 4);
    tcase_add_test(tc, symbolic_input_fixed_point);
    tcase_add_test(tc, canonical_text_of_small_model);
    tcase_add_test(tc, attribute_and_name_spelling);
    tcase_add_test(tc, nonfinite_weights_round_trip);
    suite_add_tcase(s, tc);

    tc = tcase_create("parse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, hand_written_text_parses);
    tcase_add_test(tc, model_line_is_optional_and_len_is_respected);
    tcase_add_test(tc, elided_weights_parse_as_zeros);
    tcase_add_test(tc, public_api_round_trip);
    tcase_add_test(tc, null_arguments);
    tcase_add_loop_test(tc, malformed_text_is_rejected, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, truncated_and_corrupted_text_never_crashes);
    tcase_add_test(tc, allocation_failures_are_clean);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(ir_text_suite()); }
