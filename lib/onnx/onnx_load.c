/*
 * onnx_load.c - the public ONNX entry points: bytes are checked (onnx_wire.c), decoded by the
 * protobuf-c code generated from onnx.proto, with an allocator that goes through pdc_alloc (so the
 * context's max_memory applies and out-of-memory is a status), then imported (onnx_import.c).
 */
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/onnx/onnx.h"

typedef struct pb_alloc_state {
    const pdc_context *ctx;
    int failed;               /* an allocation failed: the decoder's NULL means out of memory */
} pb_alloc_state;

static void *pb_alloc(void *data, size_t size)
{
    pb_alloc_state *s = data;
    void *p = pdc_alloc(s->ctx, size);
    if (!p) s->failed = 1;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    pdc_free(p);
}

static pdc_status decode(const pdc_context *ctx, const void *data, size_t size, ProtobufCAllocator *a,
                         Onnx__ModelProto **out)
{
    pdc_status st = onnx_wire_check(ctx, data, size);
    if (st) return st;
    pb_alloc_state *s = a->allocator_data;
    *out = onnx__model_proto__unpack(a, size, data);
    if (*out) return PDC_OK;
    if (s->failed) {
        pdc_error_prefix(ctx, "ONNX: decoding the model");
        return PDC_ERR_OUT_OF_MEMORY;
    }
    return pdc_error(ctx, PDC_ERR_CORRUPT, "ONNX: the data is not a valid ModelProto (protobuf-c cannot decode it)");
}

/* Decodes and imports; the caller verifies. */
static pdc_status load(pdc_context *ctx, const void *data, size_t size, void *to_free, ir_model **out)
{
    pb_alloc_state s = {ctx, 0};
    ProtobufCAllocator a = {pb_alloc, pb_free, &s};
    Onnx__ModelProto *mp = NULL;
    pdc_status st = decode(ctx, data, size, &a, &mp);
    pdc_free(to_free); /* the file's bytes are not needed once decoded */
    if (st) return st;
    st = onnx_import(ctx, mp, &a, out);
    onnx__model_proto__free_unpacked(mp, &a);
    return st;
}

pdc_status onnx_load_memory(pdc_context *ctx, const void *data, size_t size, ir_model **out)
{
    return load(ctx, data, size, NULL, out);
}

static pdc_status finish(pdc_context *ctx, pdc_status st, ir_model *m, pdc_model **model_out)
{
    if (!st && ctx->verify) {
        st = ir_verify(m);
        if (st) pdc_error_prefix(ctx, "ONNX: the imported model fails verification");
    }
    /* values after structure, as for every other format (lib/api_model.c) */
    if (!st && (st = ir_model_check_finite(m))) pdc_error_prefix(ctx, "ONNX");
    if (st) {
        ir_model_destroy(m);
        return st;
    }
    pdc_object_created(ctx);
    *model_out = m;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_load_onnx_memory(pdc_context *ctx, const void *data, size_t size, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, data, "data");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    ir_model *m = NULL;
    pdc_status st = onnx_load_memory(ctx, data, size, &m);
    return finish(ctx, st, m, model_out);
}

PDC_API pdc_status pdc_model_load_onnx(pdc_context *ctx, const char *path, pdc_model **model_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, path, "path");
    PDC_CHECK_ARG(ctx, model_out, "model_out");
    void *data;
    size_t size;
    pdc_status st = pdc_file_read(ctx, path, &data, &size);
    if (st) return st;
    ir_model *m = NULL;
    st = load(ctx, data, size, data, &m);
    st = finish(ctx, st, m, model_out);
    if (st) pdc_error_prefix(ctx, "%s", path);
    return st;
}
