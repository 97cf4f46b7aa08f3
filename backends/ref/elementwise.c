/*
 * elementwise.c - reference activations (relu, clip, leaky_relu, sigmoid, tanh, hardswish,
 * hardsigmoid) and binary add/mul/sub/div with numpy broadcasting up to PDC_MAX_RANK.
 */
#include <math.h>

#include "backends/ref/ref.h"
#include "ir/index.h"

static float sigmoid_f(float x)
{
    /* stable for large |x|: never exp of a large positive number */
    if (x >= 0.0f) return (float)(1.0 / (1.0 + exp(-(double)x)));
    double e = exp((double)x);
    return (float)(e / (1.0 + e));
}

pdc_status ref_unary(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->inputs[0] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const size_t n = ir_tensor_numel(&m->tensors[l->inputs[0]]);
    const float *x = buf[l->inputs[0]];
    float *y = buf[l->outputs[0]];
    switch (l->op) {
    case IR_OP_RELU:
        for (size_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i]; /* NaN stays NaN */
        break;
    case IR_OP_CLIP: {
        const float lo = ir_attr_float(&l->attrs, "min", -INFINITY);
        const float hi = ir_attr_float(&l->attrs, "max", INFINITY);
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            if (v < lo) v = lo;
            if (v > hi) v = hi;
            y[i] = v;
        }
        break;
    }
    case IR_OP_LEAKY_RELU: {
        const float alpha = ir_attr_float(&l->attrs, "alpha", 0.01f);
        for (size_t i = 0; i < n; i++) y[i] = x[i] >= 0.0f ? x[i] : alpha * x[i];
        break;
    }
    case IR_OP_SIGMOID:
        for (size_t i = 0; i < n; i++) y[i] = sigmoid_f(x[i]);
        break;
    case IR_OP_TANH:
        for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case IR_OP_HARDSWISH:
        for (size_t i = 0; i < n; i++) {
            float t = x[i] + 3.0f;
            t = t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
            y[i] = x[i] * t / 6.0f;
        }
        break;
    case IR_OP_HARDSIGMOID: {
        const float alpha = ir_attr_float(&l->attrs, "alpha", 0.2f);
        const float beta = ir_attr_float(&l->attrs, "beta", 0.5f);
        for (size_t i = 0; i < n; i++) {
            float v = alpha * x[i] + beta;
            y[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v); /* NaN stays NaN */
        }
        break;
    }
    default:
        return REF_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "op %s is not an activation", ir_op_get_info(l->op)->name);
    }
    return PDC_OK;
}

pdc_status ref_binary(const ir_model *m, const ir_layer *l, float *const *buf)
{
    const char *opname = ir_op_get_info(l->op)->name;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    if (l->op != IR_OP_ADD && l->op != IR_OP_MUL && l->op != IR_OP_SUB && l->op != IR_OP_DIV)
        return REF_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "op %s is not add/mul/sub/div", opname);
    const ir_tensor *ta = &m->tensors[l->inputs[0]];
    const ir_tensor *tb = &m->tensors[l->inputs[1]];
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    const int r = ty->rank;
    if (r < 1 || r > PDC_MAX_RANK || ta->rank > r || tb->rank > r)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bad ranks");
    int64_t s[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    if (ir_broadcast_strides(ta->rank, ta->dims, r, ty->dims, 1, s[0]) ||
        ir_broadcast_strides(tb->rank, tb->dims, r, ty->dims, 1, s[1]))
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inputs do not broadcast to the output");

    const float *a = buf[l->inputs[0]];
    const float *b = buf[l->inputs[1]];
    float *y = buf[l->outputs[0]];
    const size_t n = ir_tensor_numel(ty);
    const ir_op op = l->op;
    for (size_t i = 0; i < n; i++) {
        switch (op) {
        case IR_OP_ADD: y[i] = a[off[0]] + b[off[1]]; break;
        case IR_OP_SUB: y[i] = a[off[0]] - b[off[1]]; break;
        case IR_OP_MUL: y[i] = a[off[0]] * b[off[1]]; break;
        default: y[i] = a[off[0]] / b[off[1]]; break;
        }
        ir_index_next(r, ty->dims, idx, 2, s, off);
    }
    return PDC_OK;
}
