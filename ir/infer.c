/*
 * infer.c - shape inference: each layer's output shapes from its input shapes and attributes.
 * When an input shape is still symbolic (a -1 dim), the outputs get rank -1 ("unknown") until
 * pdc_model_set_input_shape fixes it; compile refuses unknown shapes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/index.h"
#include "ir/ops/params.h"

int ir_numel(int rank, const int64_t *dims, size_t *n)
{
    size_t v = 1;
    *n = 0;
    if (rank < 0) return 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || pdc_mul_overflow(v, (size_t)dims[i], &v)) return 0;
    }
    *n = v;
    return 1;
}

size_t ir_tensor_numel(const ir_tensor *t)
{
    size_t n;
    ir_numel(t->rank, t->dims, &n);
    return n;
}

int ir_broadcast_strides(int rank, const int64_t *dims, int r, const int64_t *od, int64_t inner, int64_t *strides)
{
    int bad = 0;
    int64_t stride = inner;
    for (int i = r - 1; i >= 0; i--) {
        const int ti = i - (r - rank);
        if (ti < 0) {
            strides[i] = 0;
            continue;
        }
        const int64_t dim = dims[ti];
        if (dim != od[i] && dim != 1) bad = 1;
        strides[i] = dim == 1 ? 0 : stride;
        stride *= dim;
    }
    return bad ? -1 : 0;
}

void ir_transpose_strides(int r, const int64_t *xd, const int64_t *perm, int64_t *s)
{
    int64_t xstride[PDC_MAX_RANK], stride = 1;
    for (int i = r - 1; i >= 0; i--) {
        xstride[i] = stride;
        stride *= xd[i];
    }
    for (int i = 0; i < r; i++) s[i] = xstride[perm[i]];
}

void ir_format_shape(int rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t pos = 0;
    if (!cap) return;
    buf[0] = '\0';
    if (rank < 0) {
        snprintf(buf, cap, "unknown");
        return;
    }
    if (rank == 0) {
        snprintf(buf, cap, "scalar");
        return;
    }
    for (int i = 0; i < rank && pos < cap; i++) {
        int w = dims[i] < 0 ? snprintf(buf + pos, cap - pos, "%s?", i ? "x" : "")
                            : snprintf(buf + pos, cap - pos, "%s%" PRId64, i ? "x" : "", dims[i]);
        if (w < 0) break;
        pos += (size_t)w;
    }
}

static const ir_tensor *in_t(const ir_model *m, const ir_layer *l, size_t i)
{
    return i < l->n_inputs && l->inputs[i] >= 0 ? &m->tensors[l->inputs[i]] : NULL;
}

static void set_out(ir_model *m, const ir_layer *l, size_t i, int rank, const int64_t *dims)
{
    if (i >= l->n_outputs || l->outputs[i] < 0) return;
    ir_tensor *t = &m->tensors[l->outputs[i]];
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    if (rank > 0) memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
}

/* Numpy broadcasting of a and b into out; 0 if incompatible. */
static int broadcast(const ir_tensor *a, const ir_tensor *b, int *rank, int64_t *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return 0;
        out[i] = da == 1 ? db : da;
    }
    *rank = r;
    return 1;
}

static pdc_status infer_window(ir_model *m, const ir_layer *l)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    int64_t d[PDC_MAX_RANK] = {p.n, p.o};
    for (int i = 0; i < p.nsp; i++) d[2 + i] = p.out[i];
    set_out(m, l, 0, p.nsp + 2, d);
    return PDC_OK;
}

static pdc_status infer_gemm(ir_model *m, const ir_layer *l)
{
    ir_gemm_params p;
    pdc_status st = ir_gemm_params_get(m, l, &p);
    if (st) return st;
    int64_t d[2] = {p.m, p.n};
    set_out(m, l, 0, 2, d);
    return PDC_OK;
}

static pdc_status infer_matmul(ir_model *m, const ir_layer *l)
{
    const ir_tensor *a = in_t(m, l, 0), *b = in_t(m, l, 1);
    if (a->rank < 2 || b->rank < 2)
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inputs '%s' (rank %d) and '%s' (rank %d) must have rank >= 2", a->name,
                         a->rank, b->name, b->rank);
    if (a->dims[a->rank - 1] != b->dims[b->rank - 2])
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inner dimensions differ: '%s' has K=%" PRId64 ", '%s' has K=%" PRId64,
                         a->name, a->dims[a->rank - 1], b->name, b->dims[b->rank - 2]);
    ir_tensor ba = *a, bb = *b; /* batch parts */
    ba.rank -= 2;
    bb.rank -= 2;
    int64_t d[PDC_MAX_RANK];
    int r;
    if (!broadcast(&ba, &bb, &r, d))
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "batch dimensions of '%s' and '%s' do not broadcast", a->name, b->name);
    if (r + 2 > PDC_MAX_RANK) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "result rank exceeds %d", PDC_MAX_RANK);
    d[r] = a->dims[a->rank - 2];
    d[r + 1] = b->dims[b->rank - 1];
    set_out(m, l, 0, r + 2, d);
    return PDC_OK;
}

static pdc_status infer_batchnorm(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    if (x->rank < 2) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' must be [N, C, ...]", x->name);
    for (size_t i = 1; i < 5; i++) {
        const ir_tensor *p = in_t(m, l, i);
        if (p->rank != 1 || p->dims[0] != x->dims[1])
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "parameter '%s' must have shape [%" PRId64 "]", p->name, x->dims[1]);
    }
    set_out(m, l, 0, x->rank, x->dims);
    return PDC_OK;
}

static pdc_status infer_same(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    if (l->op == IR_OP_CLIP && ir_attr_float(&l->attrs, "min", -INFINITY) > ir_attr_float(&l->attrs, "max", INFINITY))
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "min %g is greater than max %g",
                         (double)ir_attr_float(&l->attrs, "min", 0), (double)ir_attr_float(&l->attrs, "max", 0));
    if (l->op == IR_OP_SOFTMAX) {
        int axis;
        pdc_status st = ir_axis_get(m, l, ir_attr_int(&l->attrs, "axis", -1), x->rank, &axis);
        if (st) return st;
    }
    set_out(m, l, 0, x->rank, x->dims);
    return PDC_OK;
}

static pdc_status infer_binary(ir_model *m, const ir_layer *l)
{
    const ir_tensor *a = in_t(m, l, 0), *b = in_t(m, l, 1);
    int64_t d[PDC_MAX_RANK];
    int r;
    if (!broadcast(a, b, &r, d)) {
        char sa[128], sb[128];
        ir_format_shape(a->rank, a->dims, sa, sizeof sa);
        ir_format_shape(b->rank, b->dims, sb, sizeof sb);
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "shapes %s ('%s') and %s ('%s') do not broadcast", sa, a->name, sb,
                         b->name);
    }
    set_out(m, l, 0, r, d);
    return PDC_OK;
}

static pdc_status infer_concat(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x0 = in_t(m, l, 0);
    const ir_attr *at = ir_attrs_find(&l->attrs, "axis");
    if (!at || at->type != IR_ATTR_INT)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s (int) is required", "axis");
    int axis;
    pdc_status st = ir_axis_get(m, l, at->i, x0->rank, &axis);
    if (st) return st;
    int64_t d[PDC_MAX_RANK];
    memcpy(d, x0->dims, sizeof d);
    for (size_t i = 1; i < l->n_inputs; i++) {
        const ir_tensor *x = in_t(m, l, i);
        if (!x) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "input %zu is absent", i);
        int same = x->rank == x0->rank;
        for (int k = 0; same && k < x0->rank; k++) same = k == axis || x->dims[k] == x0->dims[k];
        if (!same) {
            char s0[128], s1[128];
            ir_format_shape(x0->rank, x0->dims, s0, sizeof s0);
            ir_format_shape(x->rank, x->dims, s1, sizeof s1);
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' is %s but '%s' is %s (only axis %d may differ)", x->name,
                             s1, x0->name, s0, axis);
        }
        d[axis] += x->dims[axis];
    }
    set_out(m, l, 0, x0->rank, d);
    return PDC_OK;
}

static pdc_status infer_global_pool(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    if (x->rank < 3) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' must be [N, C, spatial...]", x->name);
    int64_t d[PDC_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = i < 2 ? x->dims[i] : 1;
    set_out(m, l, 0, x->rank, d);
    return PDC_OK;
}

static pdc_status infer_flatten(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    int64_t axis = ir_attr_int(&l->attrs, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "axis %" PRId64 " is out of range for rank %d", axis, x->rank);
    if (axis < 0) axis += x->rank;
    int64_t d[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) d[i >= axis] *= x->dims[i];
    set_out(m, l, 0, 2, d);
    return PDC_OK;
}

static pdc_status infer_reshape(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    size_t n;
    const int64_t *shape = ir_attr_ints(&l->attrs, "shape", &n);
    if (!shape) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s (ints) is required", "shape");
    if (n < 1 || n > PDC_MAX_RANK)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "shape has %zu dims, expected 1..%d", n, PDC_MAX_RANK);
    int64_t d[PDC_MAX_RANK];
    int infer_at = -1;
    size_t total = ir_tensor_numel(x), known = 1;
    for (size_t i = 0; i < n; i++) {
        d[i] = shape[i];
        if (shape[i] == 0) {
            if ((int)i >= x->rank) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "shape[%zu] = 0 copies a dim the input lacks", i);
            d[i] = x->dims[i];
        } else if (shape[i] == -1) {
            if (infer_at >= 0) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "shape has more than one -1 (%s)", "");
            infer_at = (int)i;
            continue;
        } else if (shape[i] < -1) {
            return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "shape[%zu] is %" PRId64, i, shape[i]);
        }
        if (pdc_mul_overflow(known, (size_t)d[i], &known))
            return IR_LAYER_ERR(m, l, PDC_ERR_OVERFLOW, "shape overflows (%s)", "");
    }
    if (infer_at >= 0) {
        if (known == 0 || total % known)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "cannot reshape %zu elements with %zu per -1 slot", total, known);
        d[infer_at] = (int64_t)(total / known);
        known = total;
    }
    if (known != total) {
        char s[128];
        ir_format_shape(x->rank, x->dims, s, sizeof s);
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "cannot reshape '%s' (%s, %zu elements) to %zu elements", x->name, s,
                         total, known);
    }
    set_out(m, l, 0, (int)n, d);
    return PDC_OK;
}

static pdc_status infer_transpose(ir_model *m, const ir_layer *l)
{
    const ir_tensor *x = in_t(m, l, 0);
    size_t n;
    const int64_t *perm = ir_attr_ints(&l->attrs, "perm", &n);
    int64_t d[PDC_MAX_RANK];
    int seen[PDC_MAX_RANK] = {0};
    if (perm && n != (size_t)x->rank)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "perm has %zu entries, input '%s' has rank %d", n, x->name, x->rank);
    for (int i = 0; i < x->rank; i++) {
        int64_t p = perm ? perm[i] : x->rank - 1 - i;
        if (p < 0 || p >= x->rank || seen[p]++)
            return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d", x->rank - 1);
        d[i] = x->dims[p];
    }
    set_out(m, l, 0, x->rank, d);
    return PDC_OK;
}

static pdc_status infer_rnn(ir_model *m, const ir_layer *l)
{
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(m, l, &p);
    if (st) return st;
    int64_t y[4] = {p.seq, p.dirs, p.batch, p.hidden}, h[3] = {p.dirs, p.batch, p.hidden};
    set_out(m, l, 0, 4, y);
    set_out(m, l, 1, 3, h);
    set_out(m, l, 2, 3, h);
    return PDC_OK;
}

static pdc_status infer_op(ir_model *m, size_t li);

pdc_status ir_infer_layer(ir_model *m, size_t li)
{
    ir_fused_params fused; /* pass attributes (activation, out_perm) are checked with the shapes */
    pdc_status st = infer_op(m, li);
    if (!st) st = ir_fused_params_get(m, &m->layers[li], &fused);
    if (st) return st;
    /* Inferred shapes must stay addressable: every output's byte size fits in size_t. */
    const ir_layer *l = &m->layers[li];
    for (size_t i = 0; i < l->n_outputs; i++) {
        const ir_tensor *t = l->outputs[i] >= 0 ? &m->tensors[l->outputs[i]] : NULL;
        size_t n = sizeof(float);
        for (int k = 0; t && k < t->rank; k++) {
            if (t->dims[k] > IR_DIM_MAX || pdc_mul_overflow(n, (size_t)(t->dims[k] < 0 ? 1 : t->dims[k]), &n))
                return IR_LAYER_ERR(m, l, PDC_ERR_OVERFLOW, "output '%s' would be too large", t->name);
        }
    }
    return PDC_OK;
}

static pdc_status infer_op(ir_model *m, size_t li)
{
    ir_layer *l = &m->layers[li];
    /* Unknown until symbolic inputs are fixed. */
    for (size_t i = 0; i < l->n_inputs; i++) {
        const ir_tensor *t = in_t(m, l, i);
        int symbolic = t && t->rank < 0;
        for (int k = 0; t && k < t->rank; k++) symbolic |= t->dims[k] < 0;
        if (symbolic) {
            for (size_t o = 0; o < l->n_outputs; o++) set_out(m, l, o, -1, NULL);
            return PDC_OK;
        }
    }
    switch (l->op) {
    case IR_OP_CONV:
    case IR_OP_MAXPOOL:
    case IR_OP_AVGPOOL: return infer_window(m, l);
    case IR_OP_FC:
    case IR_OP_GEMM: return infer_gemm(m, l);
    case IR_OP_MATMUL: return infer_matmul(m, l);
    case IR_OP_BATCHNORM: return infer_batchnorm(m, l);
    IR_CASE_ACTIVATION:
    case IR_OP_SOFTMAX: return infer_same(m, l);
    case IR_OP_ADD:
    case IR_OP_MUL:
    case IR_OP_SUB:
    case IR_OP_DIV: return infer_binary(m, l);
    case IR_OP_CONCAT: return infer_concat(m, l);
    case IR_OP_GLOBAL_AVGPOOL: return infer_global_pool(m, l);
    case IR_OP_FLATTEN: return infer_flatten(m, l);
    case IR_OP_RESHAPE: return infer_reshape(m, l);
    case IR_OP_TRANSPOSE: return infer_transpose(m, l);
    case IR_OP_LSTM:
    case IR_OP_GRU: return infer_rnn(m, l);
    case IR_OP_COUNT: break;
    }
    return IR_LAYER_ERR(m, l, PDC_ERR_INTERNAL, "no shape inference for op id %d", (int)l->op);
}
