/*
 * api_model.c - the public pdc_model_* functions: argument checks, then the IR (ir/), the text
 * form and the .pdc format. A model handle is an ir_model.
 */
#include <inttypes.h>
#include <string.h>

#include "ir/ir.h"
#include "lib/api_internal.h"
#include "lib/core/fileio.h"
#include "lib/format/format_pdc.h"
#include "lib/onnx/onnx.h"

#define MODEL_CHECK(m)                                                                         \
    do {                                                                                       \
        if (!(m)) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: model is NULL", __func__); \
    } while (0)

static pdc_status check_rank(const pdc_context *ctx, const char *fn, size_t rank, const int64_t *dims, size_t min)
{
    if (rank < min || rank > PDC_MAX_RANK)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: rank %zu is outside %zu..%d", fn, rank, min, PDC_MAX_RANK);
    if (rank && !dims) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: dims is NULL", fn);
    return PDC_OK;
}

PDC_API pdc_status pdc_model_create(pdc_context *ctx, const char *name, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    pdc_status st = ir_model_create(ctx, name, model_out);
    if (!st) pdc_object_created(ctx);
    return st;
}

PDC_API void pdc_model_destroy(pdc_model *model)
{
    if (model) pdc_object_destroyed(model->ctx);
    ir_model_destroy(model);
}

PDC_API pdc_status pdc_model_add_input(pdc_model *model, const char *name, size_t rank, const int64_t *dims)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, name, "name");
    pdc_status st = check_rank(model->ctx, __func__, rank, dims, 1);
    return st ? st : ir_model_add_input(model, name, (int)rank, dims);
}

PDC_API pdc_status pdc_model_set_input_shape(pdc_model *model, const char *name, size_t rank, const int64_t *dims)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, name, "name");
    pdc_status st = check_rank(model->ctx, __func__, rank, dims, 1);
    return st ? st : ir_model_set_input_shape(model, name, (int)rank, dims);
}

PDC_API pdc_status pdc_model_add_constant(pdc_model *model, const char *name, size_t rank, const int64_t *dims,
                                          const float *data)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, name, "name");
    PDC_CHECK_ARG(model->ctx, data, "data");
    pdc_status st = check_rank(model->ctx, __func__, rank, dims, 0);
    if (st) return st;
    size_t n, bytes;
    for (size_t i = 0; i < rank; i++)
        if (dims[i] < 1)
            return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "constant '%s': dim %zu is %lld (expected >= 1)", name, i,
                             (long long)dims[i]);
    if (!ir_numel((int)rank, dims, &n) || pdc_mul_overflow(n, sizeof(float), &bytes))
        return pdc_error(model->ctx, PDC_ERR_OVERFLOW, "constant '%s': element count overflows", name);
    float *copy = pdc_alloc(model->ctx, bytes);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(copy, data, bytes);
    return ir_model_add_constant_owned(model, name, (int)rank, dims, copy);
}

PDC_API pdc_status pdc_model_add_layer(pdc_model *model, const char *name, const char *op, size_t n_inputs,
                                       const char *const *inputs, size_t n_outputs, const char *const *outputs,
                                       const pdc_attrs *attrs)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, name, "name");
    PDC_CHECK_ARG(model->ctx, op, "op");
    ir_op id;
    if (!ir_op_from_name(op, &id))
        return pdc_error(model->ctx, PDC_ERR_UNSUPPORTED, "layer '%s': unknown op \"%s\" (see docs/ir.md, section Ops)", name,
                         op);
    return ir_model_add_layer(model, name, id, n_inputs, inputs, n_outputs, outputs, attrs ? &attrs->list : NULL);
}

PDC_API pdc_status pdc_model_mark_output(pdc_model *model, const char *tensor)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, tensor, "tensor");
    return ir_model_mark_output(model, tensor);
}

/* Finds constant `weight` for the sparsity setters. */
static pdc_status find_weight(const pdc_model *m, const char *fn, const char *weight, int *t)
{
    PDC_CHECK_ARG(m->ctx, weight, "weight");
    *t = ir_model_find_tensor(m, weight);
    if (*t < 0) return pdc_error(m->ctx, PDC_ERR_NOT_FOUND, "%s: no tensor named '%s'", fn, weight);
    if (m->tensors[*t].kind != IR_TENSOR_CONST)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s: '%s' is not a constant", fn, weight);
    return PDC_OK;
}

static void *dup_or_null(const pdc_context *ctx, const void *src, size_t n, size_t size, pdc_status *st)
{
    void *d = pdc_calloc(ctx, n ? n : 1, size);
    if (!d) *st = PDC_ERR_OUT_OF_MEMORY;
    else if (n) memcpy(d, src, n * size);
    return d;
}

static pdc_status set_pattern(pdc_model *model, const char *fn, const char *weight, const ir_sparsity *shape,
                              size_t n_patterns, const uint64_t *patterns, size_t n_kernels,
                              const int32_t *kernel_pattern)
{
    int t;
    pdc_status st = find_weight(model, fn, weight, &t);
    if (st) return st;
    if ((n_patterns && !patterns) || !kernel_pattern)
        return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "%s: patterns or kernel_pattern is NULL", fn);
    ir_sparsity s = *shape;
    s.kind = IR_SPARSITY_PATTERN;
    s.n_patterns = n_patterns;
    s.n_kernels = n_kernels;
    s.patterns = dup_or_null(model->ctx, patterns, n_patterns, sizeof *patterns, &st);
    s.kernel_pattern = dup_or_null(model->ctx, kernel_pattern, n_kernels, sizeof *kernel_pattern, &st);
    if (st) {
        ir_sparsity_free(&s);
        return st;
    }
    return ir_model_set_sparsity(model, t, &s);
}

PDC_API pdc_status pdc_model_set_sparsity_pattern(pdc_model *model, const char *weight, int64_t kh, int64_t kw,
                                                  size_t n_patterns, const uint64_t *patterns, size_t n_kernels,
                                                  const int32_t *kernel_pattern)
{
    MODEL_CHECK(model);
    const ir_sparsity shape = {.kh = kh, .kw = kw};
    return set_pattern(model, __func__, weight, &shape, n_patterns, patterns, n_kernels, kernel_pattern);
}

PDC_API pdc_status pdc_model_set_sparsity_kgs(pdc_model *model, const char *weight, int64_t kd, int64_t kh, int64_t kw,
                                              int64_t group_out, int64_t group_in, size_t n_patterns,
                                              const uint64_t *patterns, size_t n_kernels, const int32_t *kernel_pattern)
{
    MODEL_CHECK(model);
    if (kd < 1)
        return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "%s: window depth kd is %" PRId64 ", expected >= 1",
                         __func__, kd);
    const ir_sparsity shape = {.kd = kd, .kh = kh, .kw = kw, .go = group_out, .gc = group_in};
    return set_pattern(model, __func__, weight, &shape, n_patterns, patterns, n_kernels, kernel_pattern);
}

PDC_API pdc_status pdc_model_set_sparsity_block(pdc_model *model, const char *weight, int64_t bh, int64_t bw,
                                                size_t n_blocks, const uint8_t *mask)
{
    MODEL_CHECK(model);
    int t;
    pdc_status st = find_weight(model, __func__, weight, &t);
    if (st) return st;
    PDC_CHECK_ARG(model->ctx, mask, "mask");
    ir_sparsity s = {.kind = IR_SPARSITY_BLOCK, .bh = bh, .bw = bw, .n_blocks = n_blocks};
    s.block_mask = dup_or_null(model->ctx, mask, n_blocks, 1, &st);
    if (st) return st;
    for (size_t i = 0; i < n_blocks; i++) s.block_mask[i] = s.block_mask[i] != 0;
    return ir_model_set_sparsity(model, t, &s);
}

PDC_API pdc_status pdc_model_set_sparsity_unstructured(pdc_model *model, const char *weight, size_t n,
                                                       const uint8_t *mask)
{
    MODEL_CHECK(model);
    int t;
    pdc_status st = find_weight(model, __func__, weight, &t);
    if (st) return st;
    PDC_CHECK_ARG(model->ctx, mask, "mask");
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = n};
    s.mask = dup_or_null(model->ctx, mask, n, 1, &st);
    if (st) return st;
    for (size_t i = 0; i < n; i++) s.mask[i] = s.mask[i] != 0;
    return ir_model_set_sparsity(model, t, &s);
}

/* ---------------------------------------------------------------- files */

PDC_API pdc_status pdc_model_load_memory(pdc_context *ctx, const void *data, size_t size, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, data, "data");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    ir_model *m = NULL;
    pdc_status st = pdc_format_is_pdc(data, size) ? pdc_format_load(ctx, data, size, &m)
                    : onnx_sniff(data, size)     ? onnx_load_memory(ctx, data, size, &m)
                                                  : ir_parse(ctx, (const char *)data, size, &m);
    /* structure before values: a malformed model is refused for what is malformed, whatever its weights hold */
    if (!st && ctx->verify) st = ir_verify(m);
    if (!st) st = ir_model_check_finite(m);
    if (st) {
        ir_model_destroy(m);
        return st;
    }
    pdc_object_created(ctx);
    *model_out = m;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_load(pdc_context *ctx, const char *path, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, path, "path");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    size_t len = strlen(path);
    if (len > 5 && !strcmp(path + len - 5, ".onnx")) return pdc_model_load_onnx(ctx, path, model_out);
    void *data;
    size_t size;
    pdc_status st = pdc_file_read(ctx, path, &data, &size);
    if (st) return st;
    st = pdc_model_load_memory(ctx, data, size, model_out);
    pdc_free(data);
    if (st) pdc_error_prefix(ctx, "%s", path);
    return st;
}

PDC_API pdc_status pdc_model_save(const pdc_model *model, const char *path)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, path, "path");
    pdc_buf buf;
    pdc_buf_init(&buf, model->ctx);
    pdc_status st = pdc_format_save(model, &buf);
    if (!st) st = pdc_file_write_atomic(model->ctx, path, buf.data, buf.len);
    pdc_buf_free(&buf);
    return st;
}

PDC_API pdc_status pdc_model_print(const pdc_model *model, uint32_t flags, char **text_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, text_out, "text_out");
    if (flags & ~PDC_PRINT_ELIDE_WEIGHTS)
        return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "%s: unknown flag bits 0x%x", __func__,
                         flags & ~PDC_PRINT_ELIDE_WEIGHTS);
    return ir_print(model, flags, text_out);
}

PDC_API pdc_status pdc_model_save_text(const pdc_model *model, const char *path, uint32_t flags)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, path, "path");
    char *text;
    pdc_status st = pdc_model_print(model, flags, &text);
    if (st) return st;
    st = pdc_file_write_atomic(model->ctx, path, text, strlen(text));
    pdc_free(text);
    return st;
}

PDC_API pdc_status pdc_model_parse(pdc_context *ctx, const char *text, size_t len, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, text, "text");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    ir_model *m = NULL;
    pdc_status st = ir_parse(ctx, text, len, &m);
    /* structure before values: a malformed model is refused for what is malformed, whatever its weights hold */
    if (!st && ctx->verify) st = ir_verify(m);
    if (!st) st = ir_model_check_finite(m);
    if (st) {
        ir_model_destroy(m);
        return st;
    }
    pdc_object_created(ctx);
    *model_out = m;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_verify(const pdc_model *model)
{
    MODEL_CHECK(model);
    return ir_verify(model);
}

/* ---------------------------------------------------------------- inspection */

static pdc_status check_layer(const pdc_model *m, const char *fn, size_t i)
{
    if (i >= m->n_layers)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s: layer %zu out of range (model has %zu)", fn, i, m->n_layers);
    return PDC_OK;
}

PDC_API pdc_status pdc_model_num_layers(const pdc_model *model, size_t *n_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, n_out, "n_out");
    *n_out = model->n_layers;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_layer_stat(const pdc_model *model, size_t i, pdc_layer_stat stat, int64_t *value_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, value_out, "value_out");
    pdc_status st = check_layer(model, __func__, i);
    if (st) return st;
    ir_layer_stats s;
    ir_layer_stats_compute(model, i, &s);
    if ((stat == PDC_STAT_DENSE_FLOPS || stat == PDC_STAT_EFFECTIVE_FLOPS) &&
        model->tensors[model->layers[i].outputs[0]].rank < 0)
        return pdc_error(model->ctx, PDC_ERR_SHAPE,
                         "layer '%s': FLOPs are unknown until symbolic input shapes are fixed (pdc_model_set_input_shape)",
                         model->layers[i].name);
    if ((stat == PDC_STAT_DENSE_FLOPS || stat == PDC_STAT_EFFECTIVE_FLOPS) && s.overflow)
        return pdc_error(model->ctx, PDC_ERR_OVERFLOW, "layer '%s': its FLOP count does not fit in 64 bits",
                         model->layers[i].name);
    switch (stat) {
    case PDC_STAT_WEIGHTS: *value_out = s.weights; return PDC_OK;
    case PDC_STAT_KEPT_WEIGHTS: *value_out = s.kept_weights; return PDC_OK;
    case PDC_STAT_DENSE_FLOPS: *value_out = s.dense_flops; return PDC_OK;
    case PDC_STAT_EFFECTIVE_FLOPS: *value_out = s.effective_flops; return PDC_OK;
    case PDC_STAT_BYTES: *value_out = s.bytes; return PDC_OK;
    }
    return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "%s: unknown statistic %d", __func__, (int)stat);
}

PDC_API pdc_status pdc_model_layer_string(const pdc_model *model, size_t i, pdc_layer_field field,
                                          const char **text_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, text_out, "text_out");
    pdc_status st = check_layer(model, __func__, i);
    if (st) return st;
    const ir_layer *l = &model->layers[i];
    char buf[512];
    const ir_tensor *t;
    switch (field) {
    case PDC_FIELD_NAME: *text_out = l->name; return PDC_OK;
    case PDC_FIELD_OP: *text_out = ir_op_get_info(l->op)->name; return PDC_OK;
    case PDC_FIELD_INPUT_SHAPE:
        t = &model->tensors[l->inputs[0]];
        ir_format_shape(t->rank, t->dims, buf, sizeof buf);
        break;
    case PDC_FIELD_OUTPUT_SHAPE:
        t = &model->tensors[l->outputs[0]];
        ir_format_shape(t->rank, t->dims, buf, sizeof buf);
        break;
    case PDC_FIELD_SPARSITY: ir_layer_sparsity_text(model, i, buf, sizeof buf); break;
    case PDC_FIELD_PATTERNS: ir_layer_patterns_text(model, i, buf, sizeof buf); break;
    default: return pdc_error(model->ctx, PDC_ERR_INVALID_ARG, "%s: unknown field %d", __func__, (int)field);
    }
    /* The model owns the returned text: one scratch string, replaced by the next such call. */
    char *copy = pdc_strdup(model->ctx, buf);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    pdc_model *mm = (pdc_model *)model;
    pdc_free(mm->info_text);
    mm->info_text = copy;
    *text_out = copy;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_num_inputs(const pdc_model *model, size_t *n_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, n_out, "n_out");
    *n_out = model->n_inputs;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_num_outputs(const pdc_model *model, size_t *n_out)
{
    MODEL_CHECK(model);
    PDC_CHECK_ARG(model->ctx, n_out, "n_out");
    *n_out = model->n_outputs;
    return PDC_OK;
}

pdc_status pdc_tensor_info(const ir_model *m, const char *fn, const int *list, size_t n, const char *what, size_t i,
                           const char **name_out, size_t *rank_out, int64_t *dims_out)
{
    if (i >= n) return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s: %s %zu out of range (%zu)", fn, what, i, n);
    const ir_tensor *t = &m->tensors[list[i]];
    if (name_out) *name_out = t->name;
    if (rank_out) *rank_out = t->rank < 0 ? 0 : (size_t)t->rank;
    if (dims_out && t->rank > 0) memcpy(dims_out, t->dims, (size_t)t->rank * sizeof *dims_out);
    return PDC_OK;
}

PDC_API pdc_status pdc_model_input_info(const pdc_model *model, size_t i, const char **name_out, size_t *rank_out,
                                        int64_t *dims_out)
{
    MODEL_CHECK(model);
    return pdc_tensor_info(model, __func__, model->inputs, model->n_inputs, "input", i, name_out, rank_out, dims_out);
}

PDC_API pdc_status pdc_model_output_info(const pdc_model *model, size_t i, const char **name_out, size_t *rank_out,
                                         int64_t *dims_out)
{
    MODEL_CHECK(model);
    return pdc_tensor_info(model, __func__, model->outputs, model->n_outputs, "output", i, name_out, rank_out,
                           dims_out);
}
