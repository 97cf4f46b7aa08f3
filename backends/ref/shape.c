/*
 * shape.c - reference data movement: concat (any axis, negative counts from the end), copy for
 * flatten/reshape (row-major data is unchanged), transpose with perm (default: reversed dims).
 */
#include <string.h>

#include "backends/ref/ref.h"
#include "ir/index.h"

pdc_status ref_concat(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing output");
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    int axis;
    pdc_status st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", 0), ty->rank, &axis);
    if (st != PDC_OK) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= ty->dims[i];
    for (int i = axis + 1; i < ty->rank; i++) inner *= ty->dims[i];

    int64_t total = 0;
    for (size_t j = 0; j < l->n_inputs; j++) {
        if (l->inputs[j] < 0)
            return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "input %zu is absent", j);
        const ir_tensor *t = &m->tensors[l->inputs[j]];
        if (t->rank != ty->rank)
            return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input %zu has rank %d, expected %d", j,
                                 t->rank, ty->rank);
        total += t->dims[axis];
    }
    if (total != ty->dims[axis])
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inputs sum to %lld along axis %d, output has %lld", (long long)total,
                             axis, (long long)ty->dims[axis]);

    float *y = buf[l->outputs[0]];
    const int64_t row = ty->dims[axis] * inner;
    int64_t at = 0;
    for (size_t j = 0; j < l->n_inputs; j++) {
        const float *x = buf[l->inputs[j]];
        const int64_t chunk = m->tensors[l->inputs[j]].dims[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + o * row + at, x + o * chunk, (size_t)chunk * sizeof(float));
        at += chunk;
    }
    return PDC_OK;
}

pdc_status ref_copy(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    size_t n = ir_tensor_numel(&m->tensors[l->inputs[0]]);
    if (n != ir_tensor_numel(&m->tensors[l->outputs[0]]))
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input and output sizes differ");
    if (buf[l->outputs[0]] != buf[l->inputs[0]]) memmove(buf[l->outputs[0]], buf[l->inputs[0]], n * sizeof(float));
    return PDC_OK;
}

pdc_status ref_transpose(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const ir_tensor *tx = &m->tensors[l->inputs[0]];
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    const int r = tx->rank;
    if (r < 1 || r > PDC_MAX_RANK || ty->rank != r)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bad ranks");
    size_t np = 0;
    const int64_t *perm_attr = ir_attr_ints(&l->attrs, "perm", &np);
    int64_t perm[PDC_MAX_RANK], s[1][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off = 0;
    if (perm_attr && np != (size_t)r)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "perm has %zu entries for rank %d", np, r);
    int seen = 0;
    for (int i = 0; i < r; i++) {
        perm[i] = perm_attr ? perm_attr[i] : r - 1 - i;
        if (perm[i] < 0 || perm[i] >= r || (seen & (1 << perm[i])))
            return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "perm is not a permutation");
        seen |= 1 << perm[i];
        if (ty->dims[i] != tx->dims[perm[i]])
            return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "output dim %d disagrees with perm", i);
    }
    ir_transpose_strides(r, tx->dims, perm, s[0]);
    const float *x = buf[l->inputs[0]];
    float *y = buf[l->outputs[0]];
    const size_t n = ir_tensor_numel(ty);
    for (size_t i = 0; i < n; i++) {
        y[i] = x[off];
        ir_index_next(r, ty->dims, idx, 1, s, &off);
    }
    return PDC_OK;
}
