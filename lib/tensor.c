/* tensor.c - pdc_tensor: a shape over owned (aligned, zeroed) or borrowed f32 memory. */
#include <string.h>

#include "lib/api_internal.h"

static pdc_status tensor_new(pdc_context *ctx, size_t rank, const int64_t *dims, float *data, pdc_tensor **out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, out, "tensor_out");
    if (rank < 1 || rank > PDC_MAX_RANK)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tensor: rank %zu is outside 1..%d", rank, PDC_MAX_RANK);
    PDC_CHECK_ARG(ctx, dims, "dims");
    for (size_t i = 0; i < rank; i++)
        if (dims[i] < 1)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "tensor: dim %zu is %lld (expected >= 1)", i, (long long)dims[i]);
    size_t n, bytes;
    if (!ir_numel((int)rank, dims, &n) || pdc_mul_overflow(n, sizeof(float), &bytes))
        return pdc_error(ctx, PDC_ERR_OVERFLOW, "tensor: element count overflows");
    pdc_tensor *t = pdc_calloc(ctx, 1, sizeof *t);
    if (!t) return PDC_ERR_OUT_OF_MEMORY;
    if (!data) {
        data = pdc_alloc_aligned(ctx, n, sizeof(float));
        if (!data) {
            pdc_free(t);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        t->owned = 1;
    }
    t->ctx = ctx;
    t->rank = (int)rank;
    memcpy(t->dims, dims, rank * sizeof *dims);
    t->numel = n;
    t->data = data;
    pdc_object_created(ctx);
    *out = t;
    return PDC_OK;
}

PDC_API pdc_status pdc_tensor_create(pdc_context *ctx, size_t rank, const int64_t *dims, pdc_tensor **tensor_out)
{
    return tensor_new(ctx, rank, dims, NULL, tensor_out);
}

PDC_API pdc_status pdc_tensor_wrap(pdc_context *ctx, size_t rank, const int64_t *dims, float *data,
                                   pdc_tensor **tensor_out)
{
    PDC_CHECK_ARG(ctx, data, "data");
    return tensor_new(ctx, rank, dims, data, tensor_out);
}

PDC_API void pdc_tensor_destroy(pdc_tensor *tensor)
{
    if (!tensor) return;
    pdc_object_destroyed(tensor->ctx);
    if (tensor->owned) pdc_free(tensor->data);
    pdc_free(tensor);
}

PDC_API float *pdc_tensor_data(pdc_tensor *tensor) { return tensor ? tensor->data : NULL; }

PDC_API pdc_status pdc_tensor_shape(const pdc_tensor *tensor, size_t *rank_out, int64_t *dims_out)
{
    if (!tensor) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: tensor is NULL", __func__);
    if (rank_out) *rank_out = (size_t)tensor->rank;
    if (dims_out) memcpy(dims_out, tensor->dims, (size_t)tensor->rank * sizeof *dims_out);
    return PDC_OK;
}

PDC_API size_t pdc_tensor_size(const pdc_tensor *tensor) { return tensor ? tensor->numel : 0; }
