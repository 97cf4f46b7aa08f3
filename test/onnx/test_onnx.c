/*
 * test_onnx.c - the ONNX importer.
 *
 *  - models: the committed PyTorch exports in test/data/onnx (made by test/data/make_onnx_models.py)
 *    load, compile for "ref" and match PyTorch's stored outputs within 1e-4 x max|ref|;
 *  - names, pruned-weight recognition (pattern counts, removed kernels, block shapes), loading by
 *    extension and by content;
 *  - ops and folding: small graphs built here with the generated protobuf-c structs, checked
 *    against hand-computed values; symbolic input dims;
 *  - bad input: every prefix of a model, a mutated corpus, protobufs that are not models, unsupported
 *    ops / attribute values / opsets, size mismatches, cycles, missing inputs, external data, deep
 *    nesting, memory limits - always a status and a message, never a crash;
 *  - the sparsity detectors on hand-made weights.
 */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "ir/ir.h"
#include "lib/onnx/onnx.h"
#include "test/common/testutil.h"

static pdc_context *ctx;

static void setup(void) { ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK); }
static void teardown(void)
{
    pdc_context_destroy(ctx);
    ctx = NULL;
}

/* ------------------------------------------------------------------ files */

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

static const char *onnx_path(const char *name, const char *ext)
{
    static char buf[1100];
    char rel[256];
    snprintf(rel, sizeof rel, "onnx/%s%s", name, ext);
    snprintf(buf, sizeof buf, "%s", test_data_path(rel));
    return buf;
}

/* ------------------------------------------------------------------ running */

/* Compiles for ref and runs with inputs concatenated in `in` (sizes from the program); writes the
 * outputs concatenated into out (n_out floats in all). */
static void run_all(const pdc_model *m, const float *in, size_t n_in, float *out, size_t n_out)
{
    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    size_t ni, no, used = 0;
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    ck_assert_uint_le(ni, 8);
    ck_assert_uint_le(no, 8);
    pdc_tensor *ti[8] = {0}, *to[8] = {0};
    for (size_t i = 0; i < ni; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_input_info(p, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &ti[i]));
        size_t k = pdc_tensor_size(ti[i]);
        ck_assert_uint_le(used + k, n_in);
        memcpy(pdc_tensor_data(ti[i]), in + used, k * sizeof(float));
        used += k;
    }
    ck_assert_uint_eq(used, n_in);
    used = 0;
    for (size_t i = 0; i < no; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        ck_assert_ok(ctx, pdc_program_output_info(p, i, NULL, &rank, dims));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, rank, dims, &to[i]));
        used += pdc_tensor_size(to[i]);
    }
    ck_assert_uint_eq(used, n_out);
    ck_assert_ok(ctx, pdc_program_run(p, ni, ti, no, to));
    used = 0;
    for (size_t i = 0; i < no; i++) {
        memcpy(out + used, pdc_tensor_data(to[i]), pdc_tensor_size(to[i]) * sizeof(float));
        used += pdc_tensor_size(to[i]);
        pdc_tensor_destroy(to[i]);
    }
    for (size_t i = 0; i < ni; i++) pdc_tensor_destroy(ti[i]);
    pdc_program_destroy(p);
}

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
    float *in = (float *)read_file(onnx_path(name, ".in.bin"), &nin);
    float *want = (float *)read_file(onnx_path(name, ".out.bin"), &nout);
    nin /= sizeof(float);
    nout /= sizeof(float);
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, onnx_path(name, ".onnx"), &m));
    ck_assert_ok(ctx, pdc_model_verify(m));
    float *got = calloc(nout, sizeof *got);
    run_all(m, in, nin, got, nout);
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
    uint8_t *data = read_file(onnx_path("gru", ".onnx"), &len);
    ck_assert_ok(ctx, pdc_model_load_memory(ctx, data, len, &m));
    pdc_model_destroy(m);
    char path[] = "/tmp/pdc_onnx_test_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    ck_assert_ok(ctx, pdc_model_load(ctx, path, &m));
    pdc_model_destroy(m);
    /* a truncated .onnx file: the ONNX reader answers, with the path and an offset */
    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len / 2), (ssize_t)(len / 2));
    close(fd);
    ck_assert_status(ctx, pdc_model_load(ctx, path, &m), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, "offset");
    unlink(path);
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

static const ir_tensor *tensor(const pdc_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    ck_assert_msg(t >= 0, "no tensor '%s'", name);
    return &m->tensors[t];
}

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
    char path[] = "/tmp/pdc_onnx_stray_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ok(ctx, pdc_model_save_onnx(m, path));
    pdc_model *back = NULL;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, path, &back));
    unlink(path);
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

/* ------------------------------------------------------------------ building models here */

#define PUSH(arr, n, item)                                              \
    do {                                                                \
        (arr) = realloc((arr), ((n) + 1) * sizeof *(arr));              \
        ck_assert_ptr_nonnull(arr);                                     \
        (arr)[(n)++] = (item);                                          \
    } while (0)

static Onnx__ModelProto *mp_new(int64_t opset)
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
static void split(const char *s, char ***out, size_t *n)
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

static Onnx__NodeProto *mp_node(Onnx__ModelProto *m, const char *op, const char *name, const char *ins,
                                const char *outs)
{
    Onnx__NodeProto *n = calloc(1, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = strdup(op);
    if (name) n->name = strdup(name);
    split(ins, &n->input, &n->n_input);
    split(outs, &n->output, &n->n_output);
    PUSH(m->graph->node, m->graph->n_node, n);
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = calloc(1, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = strdup(name);
    a->has_type = 1;
    a->type = type;
    PUSH(n->attribute, n->n_attribute, a);
    return a;
}

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_float(Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, size_t cnt, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = malloc((cnt ? cnt : 1) * sizeof *a->ints);
    memcpy(a->ints, v, cnt * sizeof *v);
    a->n_ints = cnt;
}

static void attr_string(Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)strdup(v);
}

static void attr_strings(Onnx__NodeProto *n, const char *name, size_t cnt, const char *const *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->strings = calloc(cnt, sizeof *a->strings);
    a->n_strings = cnt;
    for (size_t i = 0; i < cnt; i++) {
        a->strings[i].len = strlen(v[i]);
        a->strings[i].data = (uint8_t *)strdup(v[i]);
    }
}

static Onnx__TensorProto *t_new(const char *name, int32_t dtype, size_t rank, const int64_t *dims)
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

static size_t numel(size_t rank, const int64_t *dims)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    return n;
}

/* FLOAT tensor in float_data (raw = 0) or raw_data (raw = 1). */
static Onnx__TensorProto *t_float(const char *name, size_t rank, const int64_t *dims, const float *v, int raw)
{
    Onnx__TensorProto *t = t_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
    size_t n = numel(rank, dims);
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

static Onnx__TensorProto *t_int64(const char *name, size_t rank, const int64_t *dims, const int64_t *v)
{
    Onnx__TensorProto *t = t_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, rank, dims);
    size_t n = numel(rank, dims);
    t->int64_data = malloc((n ? n : 1) * sizeof *t->int64_data);
    memcpy(t->int64_data, v, n * sizeof *v);
    t->n_int64_data = n;
    return t;
}

static void mp_init(Onnx__ModelProto *m, Onnx__TensorProto *t) { PUSH(m->graph->initializer, m->graph->n_initializer, t); }

/* A Constant node holding t. */
static void mp_const(Onnx__ModelProto *m, const char *out, Onnx__TensorProto *t)
{
    Onnx__NodeProto *n = mp_node(m, "Constant", NULL, "", out);
    Onnx__AttributeProto *a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

static Onnx__ValueInfoProto *value_info(const char *name, int32_t elem, size_t rank, const int64_t *dims)
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
static void mp_input(Onnx__ModelProto *m, const char *name, size_t rank, const int64_t *dims)
{
    PUSH(m->graph->input, m->graph->n_input, value_info(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims));
}

static void mp_output(Onnx__ModelProto *m, const char *name)
{
    PUSH(m->graph->output, m->graph->n_output, value_info(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL));
}

static uint8_t *mp_pack(Onnx__ModelProto *m, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(m);
    uint8_t *b = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(onnx__model_proto__pack(m, b), *len);
    onnx__model_proto__free_unpacked(m, NULL);
    return b;
}

/* Packs (and frees) m, then imports it. */
static pdc_status mp_load(Onnx__ModelProto *m, pdc_model **out)
{
    size_t len;
    uint8_t *b = mp_pack(m, &len);
    *out = NULL;
    pdc_status st = pdc_model_load_onnx_memory(ctx, b, len, out);
    free(b);
    return st;
}

#define DIMS(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})
#define F(...) ((const float[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})

/* Loads m (must succeed), runs it on x and checks the outputs (concatenated) against want. */
static pdc_model *load_run_expect(Onnx__ModelProto *mp, const float *x, size_t nx, const float *want, size_t nw)
{
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    float *got = calloc(nw, sizeof *got);
    run_all(m, x, nx, got, nw);
    ck_assert_floats_near(got, want, nw, 1e-5f);
    free(got);
    return m;
}

/* The op of the layer named `name`, or NULL. */
static const char *layer_op(const pdc_model *m, const char *name)
{
    int l = ir_model_find_layer(m, name);
    return l < 0 ? NULL : ir_op_get_info(m->layers[l].op)->name;
}

/* ------------------------------------------------------------------ ops */

START_TEST(gemm_becomes_fc_or_gemm)
{
    /* x [2,3]; B [3,2] (transB = 0: transposed at import); C [2] */
    const float x[] = {1, 2, 3, -1, 0, 2};
    const float b[] = {1, 0, 0, 1, 1, 1}; /* rows k: [1 0], [0 1], [1 1] */
    /* x B = [1+3, 2+3] = [4, 5]; [-1+2, 0+2] = [1, 2]; + C [10, 20] */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3));
    mp_init(mp, t_float("B", DIMS(3, 2), b, 1));
    mp_init(mp, t_float("C", DIMS(2), F(10, 20), 0));
    mp_init(mp, t_float("C2", DIMS(1, 2), F(10, 20), 0));
    mp_node(mp, "Gemm", "fc_plain", "x,B,C", "y1");
    Onnx__NodeProto *n = mp_node(mp, "Gemm", "gemm_alpha", "x,B,C", "y2");
    attr_float(n, "alpha", 2.0f);
    mp_node(mp, "Gemm", "fc_row_bias", "x,B,C2", "y3");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    mp_output(mp, "y3");
    pdc_model *m = load_run_expect(mp, x, 6, F(14, 25, 11, 22, 18, 30, 12, 24, 14, 25, 11, 22), 12);
    ck_assert_str_eq(layer_op(m, "fc_plain"), "fc");
    ck_assert_str_eq(layer_op(m, "gemm_alpha"), "gemm");
    ck_assert_str_eq(layer_op(m, "fc_row_bias"), "fc");
    /* B is read twice as fc weight and once as gemm's b: the transposed copy gets a new name */
    ck_assert_int_ge(ir_model_find_tensor(m, "B_T"), 0);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(matmul_becomes_fc_or_matmul)
{
    /* y1 = x2 [2,2] W [2,3] (an fc); y2 = x3 [2,1,2] W (a batched matmul) */
    const float w[] = {1, 2, 3, 4, 5, 6};
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x2", DIMS(2, 2));
    mp_input(mp, "x3", DIMS(2, 1, 2));
    mp_init(mp, t_float("W", DIMS(2, 3), w, 0));
    mp_node(mp, "MatMul", "mm2", "x2,W", "y1");
    mp_node(mp, "MatMul", "mm3", "x3,W", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    /* [1 0] W = [1 2 3]; [1 1] W = [5 7 9] */
    pdc_model *m = load_run_expect(mp, F(1, 0, 1, 1, 1, 0, 1, 1), 8, F(1, 2, 3, 5, 7, 9, 1, 2, 3, 5, 7, 9), 12);
    ck_assert_str_eq(layer_op(m, "mm2"), "fc");
    ck_assert_str_eq(layer_op(m, "mm3"), "matmul");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(clip_attributes_and_inputs)
{
    /* opset 9: min/max attributes; opset 11: constant inputs (max absent) */
    Onnx__ModelProto *mp = mp_new(9);
    mp_input(mp, "x", DIMS(4));
    Onnx__NodeProto *n = mp_node(mp, "Clip", "clip9", "x", "y");
    attr_float(n, "min", -1.0f);
    attr_float(n, "max", 2.0f);
    mp_output(mp, "y");
    pdc_model *m = load_run_expect(mp, F(-5, 0.5f, 3, 1), 4, F(-1, 0.5f, 2, 1), 4);
    pdc_model_destroy(m);

    mp = mp_new(11);
    mp_input(mp, "x", DIMS(4));
    mp_init(mp, t_float("lo", 0, NULL, F(0.25f), 1));
    mp_node(mp, "Clip", "clip11", "x,lo,", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(-5, 0.5f, 3, 1), 4, F(0.25f, 0.5f, 3, 1), 4);
    pdc_model_destroy(m);

    /* a bound computed at run time cannot become an attribute */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(4));
    mp_input(mp, "lo", DIMS(1));
    mp_node(mp, "Clip", "clip_rt", "x,lo", "y");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "clip_rt");
    ck_assert_error_has(ctx, "min");
}
END_TEST

START_TEST(folded_shape_arithmetic)
{
    /* torch's LSTM initial state: Shape -> Gather -> Unsqueeze -> Concat -> ConstantOfShape, and an
     * Expand; y1 = x + c (c = 0.5 everywhere, shape [1,3,4]); y2 = x * e (e = 2, expanded) */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3, 4));
    mp_node(mp, "Shape", "shape", "x", "s");
    mp_const(mp, "one", t_int64(NULL, 0, NULL, I64(1)));
    mp_node(mp, "Gather", "gather", "s,one", "g");
    mp_const(mp, "axes0", t_int64(NULL, DIMS(1), I64(0)));
    mp_node(mp, "Unsqueeze", "unsqueeze", "g,axes0", "u");
    mp_init(mp, t_int64("c1", DIMS(1), I64(1)));
    mp_init(mp, t_int64("c4", DIMS(1), I64(4)));
    Onnx__NodeProto *n = mp_node(mp, "Concat", "concat", "c1,u,c4", "shape3");
    attr_int(n, "axis", 0);
    n = mp_node(mp, "ConstantOfShape", "cos", "shape3", "half");
    Onnx__AttributeProto *a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t_float(NULL, DIMS(1), F(0.5f), 0);
    mp_node(mp, "Add", "add", "x,half", "y1");
    mp_init(mp, t_float("two", DIMS(1), F(2.0f), 0));
    mp_node(mp, "Expand", "expand", "two,shape3", "e");
    mp_node(mp, "Mul", "mul", "x,e", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    float x[24], want[48];
    test_fill_random(x, 24, 5);
    for (int i = 0; i < 24; i++) want[i] = x[i] + 0.5f, want[24 + i] = 2 * x[i];
    pdc_model *m = load_run_expect(mp, x, 24, want, 48);
    /* only the two real layers remain */
    ck_assert_uint_eq(m->n_layers, 2);
    ck_assert_int_eq(m->tensors[ir_model_find_tensor(m, "half")].kind, IR_TENSOR_CONST);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(folded_slice_range_cast_equal_where)
{
    /* r = Range(0, 6, 1) = [0..5]; e = (r == 3); w = Where(e, 10, [1..6]) = [1 2 3 10 5 6]
     * s = Slice(r, [1], [-1], [0], [2]) = [1, 3]; y1 = x6 + w; y2 = x2 * Cast(s) */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x6", DIMS(6));
    mp_input(mp, "x2", DIMS(2));
    mp_init(mp, t_int64("r0", 0, NULL, I64(0)));
    mp_init(mp, t_int64("r6", 0, NULL, I64(6)));
    mp_init(mp, t_int64("r1", 0, NULL, I64(1)));
    mp_node(mp, "Range", "range", "r0,r6,r1", "r");
    mp_init(mp, t_int64("three", DIMS(1), I64(3)));
    mp_node(mp, "Equal", "equal", "r,three", "e");
    mp_init(mp, t_float("ten", DIMS(1), F(10), 0));
    mp_init(mp, t_float("seq", DIMS(6), F(1, 2, 3, 4, 5, 6), 1));
    mp_node(mp, "Where", "where", "e,ten,seq", "w");
    mp_node(mp, "Add", "add", "x6,w", "y1");
    mp_init(mp, t_int64("st", DIMS(1), I64(1)));
    mp_init(mp, t_int64("en", DIMS(1), I64(-1)));
    mp_init(mp, t_int64("ax", DIMS(1), I64(0)));
    mp_init(mp, t_int64("sp", DIMS(1), I64(2)));
    mp_node(mp, "Slice", "slice", "r,st,en,ax,sp", "s");
    Onnx__NodeProto *n = mp_node(mp, "Cast", "cast", "s", "sf");
    attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mp_node(mp, "Mul", "mul", "x2,sf", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    pdc_model *m = load_run_expect(mp, F(1, 1, 1, 1, 1, 1, 2, 5), 8, F(2, 3, 4, 11, 6, 7, 2, 15), 8);
    pdc_model_destroy(m);

    /* negative steps on W = [0 1 2 3 4 5]: W[-1 :: -2] up to before the start (ends = INT64_MIN) is
     * [5 3 1]; a start far below the range clamps to 0 for a negative step: W[-100 : -200 : -1] = [0] */
    static const int64_t starts[2] = {-1, -100}, ends[2] = {INT64_MIN, -200}, steps[2] = {-2, -1};
    static const float want_rev[2][3] = {{6, 4, 2}, {1, 0, 0}};
    for (int k = 0; k < 2; k++) {
        mp = mp_new(13);
        mp_input(mp, "x", DIMS(k ? 1 : 3));
        mp_init(mp, t_float("W", DIMS(6), F(0, 1, 2, 3, 4, 5), 0));
        mp_init(mp, t_int64("st", DIMS(1), &starts[k]));
        mp_init(mp, t_int64("en", DIMS(1), &ends[k]));
        mp_init(mp, t_int64("sp", DIMS(1), &steps[k]));
        mp_node(mp, "Slice", "slice_rev", "W,st,en,,sp", "s");
        mp_node(mp, "Add", "add", "x,s", "y");
        mp_output(mp, "y");
        m = load_run_expect(mp, F(1, 1, 1), k ? 1 : 3, want_rev[k], k ? 1 : 3);
        pdc_model_destroy(m);
    }

    /* a negative step on an empty axis gives an empty slice (it read one row past the constant),
     * which the Add then refuses by name */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(1, 1000));
    mp_init(mp, t_float("E", DIMS(0, 1000), F(0), 0)); /* no elements */
    mp_init(mp, t_int64("st", DIMS(1), I64(-1)));
    mp_init(mp, t_int64("en", DIMS(1), I64(-10)));
    mp_init(mp, t_int64("ax", DIMS(1), I64(0)));
    mp_init(mp, t_int64("sp", DIMS(1), I64(-1)));
    mp_node(mp, "Slice", "slice_empty", "E,st,en,ax,sp", "s");
    mp_node(mp, "Add", "add", "x,s", "y");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "input 's' is an empty constant");
}
END_TEST

START_TEST(folded_constant_reshapes_and_integer_math)
{
    /* W [2,3] -> Transpose -> Reshape [6] -> Unsqueeze [1,6] -> Squeeze [6]: [1 4 2 5 3 6];
     * Shape(x) = [6]; (6 * 3 - 2) / 4 = 4 -> Cast -> Sub from x; opset 9 Slice with attributes */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(6));
    mp_init(mp, t_float("W", DIMS(2, 3), F(1, 2, 3, 4, 5, 6), 0));
    mp_node(mp, "Transpose", "transpose", "W", "wt");
    mp_init(mp, t_int64("flat", DIMS(1), I64(-1)));
    mp_node(mp, "Reshape", "reshape", "wt,flat", "wf");
    mp_init(mp, t_int64("a0", DIMS(1), I64(0)));
    mp_node(mp, "Unsqueeze", "unsqueeze", "wf,a0", "wu");
    mp_node(mp, "Squeeze", "squeeze", "wu", "ws");
    mp_node(mp, "Add", "add", "x,ws", "y1");
    mp_node(mp, "Shape", "shape", "x", "s");
    mp_init(mp, t_int64("k3", 0, NULL, I64(3)));
    mp_init(mp, t_int64("k2", 0, NULL, I64(2)));
    mp_init(mp, t_int64("k4", 0, NULL, I64(4)));
    mp_node(mp, "Mul", "imul", "s,k3", "s3");
    mp_node(mp, "Sub", "isub", "s3,k2", "s16");
    mp_node(mp, "Div", "idiv", "s16,k4", "s4");
    Onnx__NodeProto *n = mp_node(mp, "Cast", "cast", "s4", "f4");
    attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mp_node(mp, "Sub", "sub", "x,f4", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    pdc_model *m = load_run_expect(mp, F(0, 0, 0, 1, 1, 1), 6, F(1, 4, 2, 6, 4, 7, -4, -4, -4, -3, -3, -3), 12);
    pdc_model_destroy(m);

    /* opset 9 Slice (attributes), Unsqueeze (attribute axes) and Flatten on a constant */
    mp = mp_new(9);
    mp_input(mp, "x", DIMS(1, 2));
    mp_init(mp, t_float("W", DIMS(2, 3), F(1, 2, 3, 4, 5, 6), 0));
    n = mp_node(mp, "Slice", "slice9", "W", "ws");
    attr_ints(n, "starts", 2, I64(0, 1));
    attr_ints(n, "ends", 2, I64(2, 3));
    n = mp_node(mp, "Unsqueeze", "unsq9", "ws", "wu");
    attr_ints(n, "axes", 1, I64(0));
    n = mp_node(mp, "Flatten", "flat9", "wu", "wf");
    attr_int(n, "axis", 2);
    /* wf = [[2 3], [5 6]] as [2, 2]; y = x + wf */
    mp_node(mp, "Add", "add", "x,wf", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(10, 20), 2, F(12, 23, 15, 26), 4);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(runtime_shape_ops_and_aliases)
{
    /* Unsqueeze / Squeeze / Reshape / Transpose / Flatten on activations; Dropout and Identity vanish;
     * the graph output is an alias (Identity) and keeps its ONNX name */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3));
    mp_init(mp, t_int64("ax", DIMS(1), I64(1)));
    mp_node(mp, "Unsqueeze", "unsq", "x,ax", "u");       /* [2,1,3] */
    mp_node(mp, "Dropout", "drop", "u", "d");
    Onnx__NodeProto *n = mp_node(mp, "Transpose", "tr", "d", "t"); /* [3,1,2] */
    attr_ints(n, "perm", 3, I64(2, 1, 0));
    mp_node(mp, "Squeeze", "sq", "t,ax", "s");          /* [3,2] */
    mp_init(mp, t_int64("shp", DIMS(2), I64(0, -1)));
    mp_node(mp, "Reshape", "rs", "s,shp", "r");         /* [3,2] */
    mp_node(mp, "Relu", "relu", "r", "rl");
    mp_node(mp, "Identity", "id", "rl", "out");
    mp_output(mp, "out");
    pdc_model *m = load_run_expect(mp, F(1, -2, 3, 4, 5, -6), 6, F(1, 4, 0, 5, 3, 0), 6);
    const char *s;
    ck_assert_ok(ctx, pdc_model_output_info(m, 0, &s, NULL, NULL));
    ck_assert_str_eq(s, "out");
    ck_assert_int_lt(ir_model_find_layer(m, "drop"), 0);
    ck_assert_int_lt(ir_model_find_layer(m, "id"), 0);
    ck_assert_str_eq(layer_op(m, "unsq"), "reshape");
    pdc_model_destroy(m);

    /* a graph input that is also the graph output (and an unnamed node, and a dead unsupported node) */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", NULL, "x", "r");
    mp_node(mp, "Resize", "dead", "x", "unused");
    mp_output(mp, "r");
    mp_output(mp, "x_out");
    mp_node(mp, "Identity", NULL, "x", "x_out");
    m = load_run_expect(mp, F(-1, 2), 2, F(0, 2, -1, 2), 4);
    ck_assert_str_eq(layer_op(m, "Relu_0"), "relu"); /* op_type + "_" + node index */
    pdc_model_destroy(m);

    /* a node named like its output (common outside PyTorch) keeps its name: separate name spaces;
     * two nodes with one name are told apart */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "act", "x", "act");
    mp_node(mp, "Sigmoid", "act", "act", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(0, -1), 2, F(0.5f, 0.5f), 2);
    ck_assert_str_eq(layer_op(m, "act"), "relu");
    ck_assert_str_eq(layer_op(m, "act_1"), "sigmoid");
    pdc_model_destroy(m);

    /* Dropout of a constant with a ratio computed at run time is that constant (it was a run-time
     * value without a tensor: a crash as a graph output, an internal error as an operand) */
    for (int k = 0; k < 3; k++) {
        mp = mp_new(13);
        mp_input(mp, "x", DIMS(1, 4));
        mp_input(mp, "r", DIMS(1));
        mp_init(mp, t_float("c", DIMS(1, 4), F(1, 2, 3, 4), 0));
        mp_node(mp, "Dropout", "drop", "c,r", "d");
        if (k == 1) mp_node(mp, "Add", "add", "x,d", "y");
        if (k == 2) {
            mp_node(mp, "Shape", "shape", "d", "sh");
            mp_node(mp, "Reshape", "rs", "x,sh", "y");
        }
        mp_output(mp, k ? "y" : "d");
        if (k == 0) {
            ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
            ck_assert_error_has(ctx, "graph output 'd' is a constant");
            continue;
        }
        ck_assert_ok(ctx, mp_load(mp, &m));
        ck_assert_str_eq(layer_op(m, k == 1 ? "add" : "rs"), k == 1 ? "add" : "reshape");
        if (k == 1) ck_assert_float_eq(tensor(m, "d")->data[3], 4.0f);
        pdc_model_destroy(m);
    }

    /* a graph output that is a graph input of the same name: refused by name (it was "output 'x'
     * must be produced by a layer" with PDC_ERR_INVALID_ARG) */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "relu", "x", "y");
    mp_output(mp, "y");
    mp_output(mp, "x");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "graph output 'x' is the graph input of that name");
}
END_TEST

START_TEST(initializer_encodings)
{
    /* the same values through raw_data, float_data, double_data, FLOAT16 raw, BFLOAT16 int32_data */
    const double dv[] = {0.5, -2, 3};
    const uint16_t half[] = {0x3800, 0xc000, 0x4200};   /* 0.5, -2, 3 */
    const int32_t bf[] = {0x3f00, 0xc000, 0x4040};      /* 0.5, -2, 3 */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(3));
    mp_init(mp, t_float("raw", DIMS(3), F(0.5f, -2, 3), 1));
    mp_init(mp, t_float("typed", DIMS(3), F(0.5f, -2, 3), 0));
    Onnx__TensorProto *t = t_new("dbl", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, DIMS(3));
    t->double_data = malloc(sizeof dv);
    memcpy(t->double_data, dv, sizeof dv);
    t->n_double_data = 3;
    mp_init(mp, t);
    t = t_new("half", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, DIMS(3));
    t->has_raw_data = 1;
    t->raw_data.len = sizeof half;
    t->raw_data.data = malloc(sizeof half);
    memcpy(t->raw_data.data, half, sizeof half);
    mp_init(mp, t);
    t = t_new("bf", ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, DIMS(3));
    t->int32_data = malloc(sizeof bf);
    memcpy(t->int32_data, bf, sizeof bf);
    t->n_int32_data = 3;
    mp_init(mp, t);
    const char *names[] = {"raw", "typed", "dbl", "half", "bf"};
    char prev[16] = "x", out[16];
    for (int i = 0; i < 5; i++) {
        char ins[64];
        snprintf(out, sizeof out, "s%d", i);
        snprintf(ins, sizeof ins, "%s,%s", prev, names[i]);
        mp_node(mp, "Add", NULL, ins, i == 4 ? "y" : out);
        snprintf(prev, sizeof prev, "%s", out);
    }
    mp_output(mp, "y");
    pdc_model *m = load_run_expect(mp, F(0, 0, 0), 3, F(2.5f, -10, 15), 3);
    pdc_model_destroy(m);
}
END_TEST

/* x [N, 4] -> Reshape(x, Shape(x)): folding needs N */
static Onnx__ModelProto *shape_of_symbolic(void)
{
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(-1, 4));
    mp_node(mp, "Shape", "shape_of_x", "x", "s");
    mp_node(mp, "Reshape", "reshape", "x,s", "y");
    mp_output(mp, "y");
    return mp;
}

START_TEST(symbolic_input_dims)
{
    /* x [N, 4] -> Gemm: imports with a -1 dim; compile names the input; then the shape is fixed */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(-1, 4));
    mp_init(mp, t_float("W", DIMS(2, 4), F(1, 1, 1, 1, 1, 0, 0, 0), 0));
    Onnx__NodeProto *n = mp_node(mp, "Gemm", "fc", "x,W", "y");
    attr_int(n, "transB", 1);
    mp_output(mp, "y");
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    ck_assert_ok(ctx, pdc_model_input_info(m, 0, NULL, &rank, dims));
    ck_assert_uint_eq(rank, 2);
    ck_assert_int_eq(dims[0], -1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, m, "ref", &p), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "x");
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 2, I64(3, 4)));
    float got[6];
    run_all(m, F(1, 2, 3, 4, 1, 1, 1, 1, 0, 0, 0, -1), 12, got, 6);
    ck_assert_floats_near(got, F(10, 1, 4, 1, -1, 0), 6, 1e-6f);
    pdc_model_destroy(m);

    /* shape arithmetic on a symbolic dim cannot be folded: the message names node and input */
    ck_assert_status(ctx, mp_load(shape_of_symbolic(), &m), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "shape_of_x");
    ck_assert_error_has(ctx, "'x'");
    ck_assert_error_has(ctx, "symbolic");
    ck_assert_error_has(ctx, "onnx_input_shapes");
    /* ... unless the shapes are given before the import */
    char buf[64];
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", "other=5;x=2x4"));
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "onnx_input_shapes", buf, sizeof buf));
    ck_assert_str_eq(buf, "other=5;x=2x4");
    ck_assert_ok(ctx, mp_load(shape_of_symbolic(), &m));
    float y[8];
    run_all(m, F(1, 2, 3, 4, 5, 6, 7, 8), 8, y, 8);
    ck_assert_floats_near(y, F(1, 2, 3, 4, 5, 6, 7, 8), 8, 0);
    pdc_model_destroy(m);
    /* a shape that contradicts the declared dims, and malformed option values */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", "x=2x5"));
    ck_assert_status(ctx, mp_load(shape_of_symbolic(), &m), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "onnx_input_shapes");
    static const char *const bad[] = {"x", "x=", "=2", "x=2x", "x=0", "x=1x2x3x4x5x6x7x8x9", "x=2y3", "x=3000000000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_status(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", bad[i]), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "onnx_input_shapes");
    }
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "onnx_input_shapes", buf, sizeof buf));
    ck_assert_str_eq(buf, "x=2x5"); /* a refused value changes nothing */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", ""));
}
END_TEST

START_TEST(rnn_attributes)
{
    /* GRU with sequence_lens equal to the full length and default activations spelled out */
    const int64_t T = 2, B = 1, I = 1, H = 1;
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(T, B, I));
    mp_init(mp, t_float("W", DIMS(1, 3 * H, I), F(0.5f, -0.5f, 1), 0));
    mp_init(mp, t_float("R", DIMS(1, 3 * H, H), F(0.1f, 0.2f, 0.3f), 0));
    Onnx__TensorProto *sl = t_new("len", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, DIMS(1));
    sl->int32_data = malloc(sizeof(int32_t));
    sl->int32_data[0] = 2;
    sl->n_int32_data = 1;
    mp_init(mp, sl);
    Onnx__NodeProto *n = mp_node(mp, "GRU", "gru", "x,W,R,,len", "Y,Y_h");
    attr_int(n, "hidden_size", H);
    const char *acts[] = {"Sigmoid", "Tanh"};
    attr_strings(n, "activations", 2, acts);
    mp_output(mp, "Y_h");
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    pdc_model_destroy(m);

    /* other activations, clip, layout = 1 and peepholes are refused by name */
    static const char *const refused[] = {"activation 1 is 'Relu'", "clip", "layout", "peephole"};
    for (int k = 0; k < 4; k++) {
        mp = mp_new(14);
        mp_input(mp, "x", DIMS(T, B, I));
        mp_init(mp, t_float("W", DIMS(1, 4 * H, I), F(1, 1, 1, 1), 0));
        mp_init(mp, t_float("R", DIMS(1, 4 * H, H), F(1, 1, 1, 1), 0));
        mp_init(mp, t_float("P", DIMS(1, 3 * H), F(1, 1, 1), 0));
        n = mp_node(mp, "LSTM", "lstm", k == 3 ? "x,W,R,,,,,P" : "x,W,R", "Y");
        attr_int(n, "hidden_size", H);
        const char *bad[] = {"Sigmoid", "Relu", "Tanh"};
        if (k == 0) attr_strings(n, "activations", 3, bad);
        if (k == 1) attr_float(n, "clip", 3.0f);
        if (k == 2) attr_int(n, "layout", 1);
        mp_output(mp, "Y");
        ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
        ck_assert_error_has(ctx, "node 'lstm' (LSTM, opset 14)");
        ck_assert_error_has(ctx, refused[k]);
    }
}
END_TEST

/* ------------------------------------------------------------------ bad input */

/* A small valid model (Conv with padding + Relu + Softmax), packed. */
static uint8_t *small_model(size_t *len)
{
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(1, 1, 3, 3));
    float w[9];
    test_fill_random(w, 9, 3);
    mp_init(mp, t_float("w", DIMS(1, 1, 3, 3), w, 1));
    Onnx__NodeProto *n = mp_node(mp, "Conv", "conv", "x,w", "c");
    attr_ints(n, "pads", 4, I64(1, 1, 1, 1));
    mp_node(mp, "Relu", "relu", "c", "r");
    mp_node(mp, "Softmax", "softmax", "r", "y");
    mp_output(mp, "y");
    return mp_pack(mp, len);
}

START_TEST(every_prefix_fails_cleanly)
{
    size_t len;
    uint8_t *full = small_model(&len);
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_load_onnx_memory(ctx, full, len, &m));
    pdc_model_destroy(m);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1); /* exact size: ASan/valgrind catch any over-read */
        memcpy(p, full, cut);
        m = NULL;
        pdc_status st = pdc_model_load_onnx_memory(ctx, p, cut, &m);
        ck_assert_msg(st != PDC_OK, "prefix of %zu / %zu bytes loaded", cut, len);
        ck_assert_msg(m == NULL, "prefix %zu: out-parameter written on failure", cut);
        ck_assert_msg(*pdc_context_last_error(ctx), "prefix %zu: no message", cut);
        free(p);
    }
    free(full);
}
END_TEST

static uint32_t rng_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* 500 mutants (1-4 random byte changes, sometimes a cut) of a model: each gives a status; those that
 * load also compile and run. */
static void mutate_corpus(const uint8_t *orig, size_t len, uint32_t seed, int *loaded)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "67108864"));
    uint32_t s = seed;
    for (int i = 0; i < 500; i++) {
        size_t n = len;
        uint8_t *p = malloc(len);
        memcpy(p, orig, len);
        int edits = 1 + (int)(rng_next(&s) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = rng_next(&s) % len;
            switch (rng_next(&s) % 4) {
            case 0: p[at] ^= (uint8_t)(1u << (rng_next(&s) % 8)); break;
            case 1: p[at] = (uint8_t)rng_next(&s); break;
            case 2: p[at] = (uint8_t)(rng_next(&s) % 2 ? 0xff : 0x00); break;
            default: n = at > 0 ? at : n; break; /* cut */
            }
        }
        pdc_model *m = NULL;
        pdc_status st = pdc_model_load_onnx_memory(ctx, p, n, &m);
        if (st == PDC_OK) {
            (*loaded)++;
            pdc_program *prog = NULL;
            if (pdc_compile(ctx, m, "ref", &prog) == PDC_OK) {
                size_t ni, no;
                pdc_program_num_inputs(prog, &ni);
                pdc_program_num_outputs(prog, &no);
                pdc_tensor *ti[8] = {0}, *to[8] = {0};
                int ok = ni <= 8 && no <= 8;
                for (size_t k = 0; ok && k < ni; k++) {
                    size_t rank;
                    int64_t dims[PDC_MAX_RANK];
                    ok = !pdc_program_input_info(prog, k, NULL, &rank, dims) &&
                         !pdc_tensor_create(ctx, rank, dims, &ti[k]);
                }
                for (size_t k = 0; ok && k < no; k++) {
                    size_t rank;
                    int64_t dims[PDC_MAX_RANK];
                    ok = !pdc_program_output_info(prog, k, NULL, &rank, dims) &&
                         !pdc_tensor_create(ctx, rank, dims, &to[k]);
                }
                if (ok) pdc_program_run(prog, ni, ti, no, to);
                for (size_t k = 0; k < 8; k++) {
                    pdc_tensor_destroy(ti[k]);
                    pdc_tensor_destroy(to[k]);
                }
                pdc_program_destroy(prog);
            }
            pdc_model_destroy(m);
        } else {
            ck_assert_msg(m == NULL, "mutant %d: out-parameter written on failure", i);
            ck_assert_msg(*pdc_context_last_error(ctx), "mutant %d: status %s without a message", i,
                          pdc_status_string(st));
        }
        free(p);
    }
}

START_TEST(mutated_corpus_never_crashes)
{
    static const char *const corpus[] = {"autopad", "gru", "softmax_v11"};
    size_t len;
    uint8_t *orig = read_file(onnx_path(corpus[_i], ".onnx"), &len);
    int loaded = 0;
    mutate_corpus(orig, len, 1234u + (uint32_t)_i, &loaded);
    fprintf(stderr, "onnx mutants of %-12s: 500 tried, %d still loaded\n", corpus[_i], loaded);
    free(orig);
}
END_TEST

START_TEST(protobuf_that_is_not_a_model)
{
    pdc_model *m = NULL;
    /* a TensorProto */
    Onnx__TensorProto *t = t_float("w", DIMS(2), F(1, 2), 1);
    size_t len = onnx__tensor_proto__get_packed_size(t);
    uint8_t *b = malloc(len);
    onnx__tensor_proto__pack(t, b);
    onnx__tensor_proto__free_unpacked(t, NULL);
    pdc_status st = pdc_model_load_onnx_memory(ctx, b, len, &m);
    ck_assert_msg(st == PDC_ERR_CORRUPT || st == PDC_ERR_INVALID_MODEL, "%s", pdc_status_string(st));
    ck_assert_error_has(ctx, "ONNX");
    free(b);
    /* a ModelProto without a graph */
    Onnx__ModelProto *mp = mp_new(13);
    onnx__graph_proto__free_unpacked(mp->graph, NULL);
    mp->graph = NULL;
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "not an ONNX model");
    /* text, and nothing */
    ck_assert_status(ctx, pdc_model_load_onnx_memory(ctx, "hello, world", 12, &m), PDC_ERR_CORRUPT);
    ck_assert_status(ctx, pdc_model_load_onnx_memory(ctx, "", 0, &m), PDC_ERR_CORRUPT);
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(unsupported_op_names_type_node_and_opset)
{
    Onnx__ModelProto *mp = mp_new(12);
    mp_input(mp, "x", DIMS(1, 1, 4, 4));
    mp_node(mp, "Resize", "my_resize", "x", "y");
    mp_output(mp, "y");
    pdc_model *m;
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "Resize");
    ck_assert_error_has(ctx, "my_resize");
    ck_assert_error_has(ctx, "opset 12");
    /* another domain */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    Onnx__NodeProto *n = mp_node(mp, "Relu", "fused", "x", "y");
    n->domain = strdup("com.microsoft");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "com.microsoft");
    /* opsets out of range */
    for (int k = 0; k < 2; k++) {
        mp = mp_new(k ? 18 : 8);
        mp_input(mp, "x", DIMS(2));
        mp_node(mp, "Relu", "r", "x", "y");
        mp_output(mp, "y");
        ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
        ck_assert_error_has(ctx, k ? "opset 18" : "opset 8");
    }
}
END_TEST

START_TEST(unsupported_attribute_values)
{
    pdc_model *m;
    for (int k = 0; k < 5; k++) {
        Onnx__ModelProto *mp = mp_new(14);
        mp_input(mp, "x", DIMS(1, 2, 4, 4));
        float w[18];
        test_fill_random(w, 18, 1);
        mp_init(mp, t_float("w", DIMS(1, 2, 3, 3), w, 1));
        mp_init(mp, t_float("p", DIMS(2), F(1, 1), 0));
        Onnx__NodeProto *n;
        const char *want = NULL;
        switch (k) {
        case 0:
            n = mp_node(mp, "Conv", "conv", "x,w", "y");
            attr_string(n, "auto_pad", "SAME_MIDDLE");
            want = "SAME_MIDDLE";
            break;
        case 1:
            n = mp_node(mp, "BatchNormalization", "bn", "x,p,p,p,p", "y");
            attr_int(n, "training_mode", 1);
            want = "training_mode";
            break;
        case 2:
            n = mp_node(mp, "Conv", "conv", "x,w", "y");
            attr_float(n, "group", 1.0f); /* wrong type */
            want = "'group' must be an int";
            break;
        case 3:
            mp_init(mp, t_int64("pads", DIMS(8), I64(0, 0, 1, 1, 0, 0, 1, 1)));
            mp_node(mp, "Pad", "pad", "x,pads", "y");
            want = "padding";
            break;
        default:
            n = mp_node(mp, "Gemm", "gemm", "x,w", "y");
            attr_int(n, "transA", 2);
            want = "transA";
            break;
        }
        mp_output(mp, "y");
        pdc_status st = mp_load(mp, &m);
        ck_assert_msg(st == PDC_ERR_UNSUPPORTED || st == PDC_ERR_INVALID_MODEL, "case %d: %s", k,
                      pdc_status_string(st));
        ck_assert_error_has(ctx, want);
        ck_assert_error_has(ctx, "opset 14");
    }
}
END_TEST

START_TEST(initializer_size_mismatch)
{
    pdc_model *m;
    for (int k = 0; k < 3; k++) {
        Onnx__ModelProto *mp = mp_new(13);
        mp_input(mp, "x", DIMS(4));
        Onnx__TensorProto *t = t_float("bias", DIMS(4), F(1, 2, 3, 4), k != 1);
        if (k == 0) t->raw_data.len = 12;      /* 3 floats for a shape of 4 */
        if (k == 1) t->n_float_data = 5;       /* 5 values */
        if (k == 2) t->dims[0] = 1000000000;  /* a lying shape: must not allocate 4 GB */
        if (k == 1) t->float_data = realloc(t->float_data, 5 * sizeof(float));
        mp_init(mp, t);
        mp_node(mp, "Add", "add", "x,bias", "y");
        mp_output(mp, "y");
        ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
        ck_assert_error_has(ctx, "initializer 'bias'");
        ck_assert_error_has(ctx, k == 1 ? "float_data" : "raw_data");
    }
}
END_TEST

START_TEST(cycles_missing_inputs_and_duplicates)
{
    pdc_model *m;
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Add", "a", "x,b_out", "a_out");
    mp_node(mp, "Relu", "b", "a_out", "b_out");
    mp_output(mp, "b_out");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "cycle");
    ck_assert_error_has(ctx, "'a'");

    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Add", "add", "x,ghost", "y");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "'ghost' is not defined");
    ck_assert_error_has(ctx, "node 'add' (Add, opset 13)");

    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "r1", "x", "y");
    mp_node(mp, "Relu", "r2", "x", "y");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "already defined");

    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "r1", "x", "y");
    mp_output(mp, "nowhere");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "graph output 'nowhere'");

    /* an int64 graph input */
    mp = mp_new(13);
    PUSH(mp->graph->input, mp->graph->n_input, value_info("ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, DIMS(2)));
    mp_node(mp, "Relu", "r", "ids", "y");
    mp_output(mp, "y");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "'ids' has element type INT64");

    /* a graph output that is a constant */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_init(mp, t_float("c", DIMS(2), F(1, 2), 0));
    mp_node(mp, "Relu", "r", "x", "y");
    mp_output(mp, "y");
    mp_output(mp, "c");
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "constant");
}
END_TEST

START_TEST(external_data_is_refused)
{
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    Onnx__TensorProto *t = t_new("big_weight", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, DIMS(2));
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto *e = calloc(1, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = strdup("location");
    e->value = strdup("weights.bin");
    PUSH(t->external_data, t->n_external_data, e);
    mp_init(mp, t);
    mp_node(mp, "Add", "add", "x,big_weight", "y");
    mp_output(mp, "y");
    pdc_model *m;
    ck_assert_status(ctx, mp_load(mp, &m), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "big_weight");
    ck_assert_error_has(ctx, "weights.bin");
    ck_assert_error_has(ctx, "external");
}
END_TEST

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) p[n++] = (uint8_t)(v | 0x80), v >>= 7;
    p[n++] = (uint8_t)v;
    return n;
}

START_TEST(deep_nesting_is_refused)
{
    /* ModelProto.graph.input[0].type = TypeProto -> sequence_type -> elem_type -> ... 3000 deep
     * (protobuf-c alone overflows the stack on 10000) */
    const int depth = 3000;
    size_t cap = (size_t)depth * 8 + 64, len = 0;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap), hdr[16];
    for (int i = 0; i < depth; i++) {
        size_t h = 0;
        hdr[h++] = 0x0a; /* Sequence.elem_type */
        h += put_varint(hdr + h, len);
        memcpy(tmp, hdr, h);
        memcpy(tmp + h, buf, len);
        size_t l2 = h + len;
        h = 0;
        hdr[h++] = 0x22; /* TypeProto.sequence_type */
        h += put_varint(hdr + h, l2);
        memcpy(buf, hdr, h);
        memcpy(buf + h, tmp, l2);
        len = h + l2;
    }
    /* ValueInfoProto{type = buf} inside GraphProto.input inside ModelProto.graph */
    uint8_t *model = malloc(len + 64);
    size_t at = 0, g_len;
    uint8_t tag_len[16];
    model[at++] = 0x08, model[at++] = 0x08;     /* ir_version 8 */
    model[at++] = 0x3a;                           /* graph */
    size_t h = 0;
    tag_len[h++] = 0x5a;                          /* GraphProto.input */
    h += put_varint(tag_len + h, 1 + put_varint(hdr, len) + len);
    g_len = h + 1 + put_varint(hdr, len) + len;
    at += put_varint(model + at, g_len);
    memcpy(model + at, tag_len, h);
    at += h;
    model[at++] = 0x12;                           /* ValueInfoProto.type */
    at += put_varint(model + at, len);
    memcpy(model + at, buf, len);
    at += len;
    pdc_model *m = NULL;
    ck_assert_status(ctx, pdc_model_load_onnx_memory(ctx, model, at, &m), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "nest deeper");
    free(buf);
    free(tmp);
    free(model);
}
END_TEST

START_TEST(memory_limit_is_a_status)
{
    size_t len;
    uint8_t *data = read_file(onnx_path("resnet_small", ".onnx"), &len);
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "4096"));
    ck_assert_status(ctx, pdc_model_load_onnx_memory(ctx, data, len, &m), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(m);
    ck_assert_error_has(ctx, "max_memory");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    ck_assert_ok(ctx, pdc_model_load_onnx_memory(ctx, data, len, &m));
    pdc_model_destroy(m);
    free(data);
}
END_TEST

/* Failure injection (context option fail_alloc_after): the N-th allocation of an import fails, for
 * every N until the import completes. Each failure must be PDC_ERR_OUT_OF_MEMORY with the injected
 * message and no model; leaks show under ASan/LSan and valgrind. */
START_TEST(every_allocation_failure_is_clean)
{
    static const char *const names[] = {"softmax_v11", "autopad", "gru", "block_fc"};
    size_t len;
    uint8_t *data = read_file(onnx_path(names[_i], ".onnx"), &len);
    size_t n;
    for (n = 1;; n++) {
        char v[32];
        snprintf(v, sizeof v, "%zu", n);
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", v));
        pdc_model *m = NULL;
        pdc_status st = pdc_model_load_onnx_memory(ctx, data, len, &m);
        ck_assert_ok(ctx, pdc_context_get_option(ctx, "fail_alloc_after", v, sizeof v));
        int fired = !strcmp(v, "0");
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "0"));
        if (!fired) {
            ck_assert_msg(st == PDC_OK, "%s: no failure injected but %s: %s", names[_i], pdc_status_string(st),
                          pdc_context_last_error(ctx));
            pdc_model_destroy(m);
            break;
        }
        ck_assert_msg(st == PDC_ERR_OUT_OF_MEMORY, "%s: allocation %zu failed but the import returned %s: %s",
                      names[_i], n, pdc_status_string(st), pdc_context_last_error(ctx));
        ck_assert_error_has(ctx, "injected failure");
        ck_assert_ptr_null(m);
    }
    fprintf(stderr, "onnx oom: %s: %zu injected failures survived\n", names[_i], n - 1);
    free(data);
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
    /* alone, those 8 fill their patterns to 22 of 28 entries: below ONNX_MIN_FILL_PCT, not a pattern */
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

static Suite *onnx_suite(void)
{
    Suite *s = suite_create("onnx");
    TCase *tc = tcase_create("models");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, model_matches_pytorch, 0, (int)(sizeof models / sizeof models[0]));
    tcase_add_test(tc, load_by_extension_and_by_content);
    tcase_add_test(tc, names_are_the_onnx_names);
    tcase_add_test(tc, pattern_pruned_weights_are_recognised);
    tcase_add_test(tc, block_pruned_weights_are_recognised);
    tcase_add_test(tc, stray_zeros_keep_the_structure);
    suite_add_tcase(s, tc);

    tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gemm_becomes_fc_or_gemm);
    tcase_add_test(tc, matmul_becomes_fc_or_matmul);
    tcase_add_test(tc, clip_attributes_and_inputs);
    tcase_add_test(tc, folded_shape_arithmetic);
    tcase_add_test(tc, folded_slice_range_cast_equal_where);
    tcase_add_test(tc, folded_constant_reshapes_and_integer_math);
    tcase_add_test(tc, runtime_shape_ops_and_aliases);
    tcase_add_test(tc, initializer_encodings);
    tcase_add_test(tc, symbolic_input_dims);
    tcase_add_test(tc, rnn_attributes);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_prefix_fails_cleanly);
    tcase_add_loop_test(tc, mutated_corpus_never_crashes, 0, 3);
    tcase_add_test(tc, protobuf_that_is_not_a_model);
    tcase_add_test(tc, unsupported_op_names_type_node_and_opset);
    tcase_add_test(tc, unsupported_attribute_values);
    tcase_add_test(tc, initializer_size_mismatch);
    tcase_add_test(tc, cycles_missing_inputs_and_duplicates);
    tcase_add_test(tc, external_data_is_refused);
    tcase_add_test(tc, deep_nesting_is_refused);
    tcase_add_test(tc, memory_limit_is_a_status);
    tcase_add_loop_test(tc, every_allocation_failure_is_clean, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("sparsity");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, pattern_detector_rules);
    tcase_add_test(tc, block_detector_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(onnx_suite()); }
