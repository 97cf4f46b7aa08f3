/*
 * params.c - decoding op attributes into checked parameter structs (see params.h). Every error
 * names the layer, the op and the offending attribute or tensor with expected and actual values.
 */
#include <inttypes.h>
#include <string.h>

#include "ir/ops/params.h"

static const ir_tensor *input_tensor(const ir_model *m, const ir_layer *l, size_t i)
{
    return i < l->n_inputs && l->inputs[i] >= 0 ? &m->tensors[l->inputs[i]] : NULL;
}

/* Reads an ints attribute of exactly n values, each >= min, into out; absent -> dflt for all. */
static pdc_status ints_attr(const ir_model *m, const ir_layer *l, const char *name, size_t n, int64_t min, int64_t dflt,
                            int64_t *out)
{
    const ir_attr *at = ir_attrs_find(&l->attrs, name);
    if (!at) {
        for (size_t i = 0; i < n; i++) out[i] = dflt;
        return PDC_OK;
    }
    if (at->type != IR_ATTR_INTS)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s must be a list of ints", name);
    if (at->n != n)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s has %zu values, expected %zu", name, at->n, n);
    for (size_t i = 0; i < n; i++) {
        if (at->ints[i] < min || at->ints[i] > IR_DIM_MAX)
            return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s[%zu] is %" PRId64 ", expected %" PRId64 "..%" PRId64,
                             name, i, at->ints[i], min, (int64_t)IR_DIM_MAX);
        out[i] = at->ints[i];
    }
    return PDC_OK;
}

/* Reads an int attribute (absent -> dflt) and checks its type and range. */
static pdc_status int_attr(const ir_model *m, const ir_layer *l, const char *name, int64_t lo, int64_t hi, int64_t dflt,
                           int64_t *out)
{
    const ir_attr *at = ir_attrs_find(&l->attrs, name);
    if (!at) {
        *out = dflt;
        return PDC_OK;
    }
    if (at->type != IR_ATTR_INT) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s must be an int", name);
    if (at->i < lo || at->i > hi)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s is %" PRId64 ", expected %" PRId64 "..%" PRId64, name,
                         at->i, lo, hi);
    *out = at->i;
    return PDC_OK;
}

pdc_status ir_axis_get(const ir_model *m, const ir_layer *l, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "axis %" PRId64 " is out of range for rank %d", axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PDC_OK;
}

pdc_status ir_window_params_get(const ir_model *m, const ir_layer *l, ir_window_params *p)
{
    memset(p, 0, sizeof *p);
    const ir_tensor *x = input_tensor(m, l, 0);
    int is_conv = l->op == IR_OP_CONV;
    int nsp = x->rank - 2;
    if (nsp < 1 || nsp > IR_MAX_SPATIAL)
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' has rank %d, expected 3..5 (N, C, spatial...)", x->name,
                         x->rank);
    p->nsp = nsp;
    p->n = x->dims[0];
    p->c = x->dims[1];
    pdc_status st;
    if (is_conv) {
        const ir_tensor *w = input_tensor(m, l, 1), *b = input_tensor(m, l, 2);
        if (w->rank != x->rank)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "weight '%s' has rank %d, expected %d like input '%s'", w->name,
                             w->rank, x->rank, x->name);
        if ((st = int_attr(m, l, "group", 1, INT32_MAX, 1, &p->group))) return st;
        p->o = w->dims[0];
        if (p->c % p->group || p->o % p->group)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "group %" PRId64 " does not divide input channels %" PRId64
                             " and output channels %" PRId64, p->group, p->c, p->o);
        if (w->dims[1] != p->c / p->group)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "weight '%s' has %" PRId64 " input channels per group, expected %" PRId64
                             " (input '%s' has %" PRId64 " channels, group %" PRId64 ")",
                             w->name, w->dims[1], p->c / p->group, x->name, p->c, p->group);
        for (int i = 0; i < nsp; i++) p->k[i] = w->dims[2 + i];
        size_t nk;
        const int64_t *ks = ir_attr_ints(&l->attrs, "kernel_shape", &nk);
        if (ks && (nk != (size_t)nsp || memcmp(ks, p->k, nk * sizeof *ks)))
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "attribute kernel_shape disagrees with weight '%s'", w->name);
        if (b) {
            if (b->rank != 1 || b->dims[0] != p->o)
                return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias '%s' must have shape [%" PRId64 "]", b->name, p->o);
            p->has_bias = 1;
        }
    } else {
        p->o = p->group = p->c;
        size_t nk;
        const ir_attr *at = ir_attrs_find(&l->attrs, "kernel_shape");
        if (!at) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s is required", "kernel_shape");
        ir_attr_ints(&l->attrs, "kernel_shape", &nk);
        if (nk != (size_t)nsp)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "kernel_shape has %zu dims but input '%s' has %d spatial dims", nk,
                             x->name, nsp);
        if ((st = ints_attr(m, l, "kernel_shape", nk, 1, 1, p->k))) return st;
        int64_t v;
        if ((st = int_attr(m, l, "ceil_mode", 0, 1, 0, &v))) return st;
        p->ceil_mode = (int)v;
        if ((st = int_attr(m, l, "count_include_pad", 0, 1, 0, &v))) return st;
        p->count_include_pad = (int)v;
    }
    int64_t pads[2 * IR_MAX_SPATIAL];
    if ((st = ints_attr(m, l, "strides", (size_t)nsp, 1, 1, p->stride))) return st;
    if ((st = ints_attr(m, l, "dilations", (size_t)nsp, 1, 1, p->dil))) return st;
    if ((st = ints_attr(m, l, "pads", 2 * (size_t)nsp, 0, 0, pads))) return st;
    for (int i = 0; i < nsp; i++) {
        p->pad_begin[i] = pads[i];
        p->pad_end[i] = pads[nsp + i];
        p->in[i] = x->dims[2 + i];
        if (p->in[i] < 0) continue; /* symbolic: caller propagates */
        int64_t span = p->dil[i] * (p->k[i] - 1) + 1;
        int64_t avail = p->in[i] + p->pad_begin[i] + p->pad_end[i] - span;
        if (avail < 0)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "window %" PRId64 " (dilated) is larger than padded input %" PRId64
                             " in spatial dim %d", span, p->in[i] + p->pad_begin[i] + p->pad_end[i], i);
        int64_t out = avail / p->stride[i] + 1;
        if (p->ceil_mode && avail % p->stride[i]) {
            out++;
            /* The last window must start inside the input or the begin padding (as PyTorch and ONNX do). */
            if ((out - 1) * p->stride[i] >= p->in[i] + p->pad_begin[i]) out--;
        }
        p->out[i] = out;
    }
    return PDC_OK;
}

/* The window as the window of nsp spatial dims it equals, its own last (leading dims of size, kernel,
 * stride and dilation 1, no padding); nothing if it has nsp dims or more. */
static void window_lift(ir_window_params *p, int nsp)
{
    const int lead = nsp - p->nsp;
    if (lead <= 0) return;
    for (int i = nsp - 1; i >= 0; i--) {
        const int j = i - lead;
        p->in[i] = j < 0 ? 1 : p->in[j];
        p->out[i] = j < 0 ? 1 : p->out[j];
        p->k[i] = j < 0 ? 1 : p->k[j];
        p->stride[i] = j < 0 ? 1 : p->stride[j];
        p->pad_begin[i] = j < 0 ? 0 : p->pad_begin[j];
        p->pad_end[i] = j < 0 ? 0 : p->pad_end[j];
        p->dil[i] = j < 0 ? 1 : p->dil[j];
    }
    p->nsp = nsp;
}

void ir_window_params_as_2d(ir_window_params *p)
{
    if (p->nsp == 1) window_lift(p, 2);
}

void ir_window_params_as_3d(ir_window_params *p) { window_lift(p, IR_MAX_SPATIAL); }

pdc_status ir_gemm_params_get(const ir_model *m, const ir_layer *l, ir_gemm_params *p)
{
    memset(p, 0, sizeof *p);
    const ir_tensor *a = input_tensor(m, l, 0), *b = input_tensor(m, l, 1), *c = input_tensor(m, l, 2);
    pdc_status st;
    p->alpha = p->beta = 1.0f;
    if (l->op == IR_OP_FC) {
        if (a->rank < 2)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' has rank %d, expected >= 2", a->name, a->rank);
        if (b->rank != 2) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "weight '%s' must be [out, in]", b->name);
        p->m = a->dims[0];
        p->k = 1;
        for (int i = 1; i < a->rank; i++) p->k = a->dims[i] < 0 || p->k < 0 ? -1 : p->k * a->dims[i];
        p->n = b->dims[0];
        p->trans_b = 1;
        if (p->k >= 0 && b->dims[1] != p->k)
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "weight '%s' has %" PRId64 " inputs, expected %" PRId64
                             " (input '%s' flattened)", b->name, b->dims[1], p->k, a->name);
        if (c && (c->rank != 1 || c->dims[0] != p->n))
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias '%s' must have shape [%" PRId64 "]", c->name, p->n);
        return PDC_OK;
    }
    int64_t ta, tb;
    if ((st = int_attr(m, l, "transA", 0, 1, 0, &ta)) || (st = int_attr(m, l, "transB", 0, 1, 0, &tb))) return st;
    p->trans_a = (int)ta;
    p->trans_b = (int)tb;
    p->alpha = ir_attr_float(&l->attrs, "alpha", 1.0f);
    p->beta = ir_attr_float(&l->attrs, "beta", 1.0f);
    if (a->rank != 2 || b->rank != 2)
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inputs '%s' and '%s' must be matrices (rank 2)", a->name, b->name);
    p->m = ta ? a->dims[1] : a->dims[0];
    p->k = ta ? a->dims[0] : a->dims[1];
    int64_t kb = tb ? b->dims[1] : b->dims[0];
    p->n = tb ? b->dims[0] : b->dims[1];
    if (p->k >= 0 && kb >= 0 && p->k != kb)
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inner dimensions differ: '%s' gives K=%" PRId64 ", '%s' gives K=%" PRId64,
                         a->name, p->k, b->name, kb);
    if (c) {
        /* c broadcasts one way to [M, N]. */
        int64_t cm = c->rank == 2 ? c->dims[0] : 1, cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
        if (c->rank > 2 || (cm != 1 && cm != p->m) || (cn != 1 && cn != p->n))
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "c '%s' does not broadcast to [%" PRId64 ", %" PRId64 "]", c->name, p->m,
                             p->n);
    }
    return PDC_OK;
}

pdc_status ir_rnn_params_get(const ir_model *m, const ir_layer *l, ir_rnn_params *p)
{
    memset(p, 0, sizeof *p);
    int lstm = l->op == IR_OP_LSTM;
    p->gates = lstm ? 4 : 3;
    const ir_tensor *x = input_tensor(m, l, 0), *w = input_tensor(m, l, 1), *r = input_tensor(m, l, 2);
    const ir_tensor *b = input_tensor(m, l, 3);
    pdc_status st;
    int64_t h;
    const ir_attr *hs = ir_attrs_find(&l->attrs, "hidden_size");
    if (!hs) return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s is required", "hidden_size");
    if ((st = int_attr(m, l, "hidden_size", 1, INT32_MAX, 1, &h))) return st;
    p->hidden = h;
    const char *dir = ir_attr_string(&l->attrs, "direction", "forward");
    const ir_attr *dat = ir_attrs_find(&l->attrs, "direction");
    if (dat && dat->type != IR_ATTR_STRING)
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s must be a string", "direction");
    if (!strcmp(dir, "forward")) p->dirs = 1;
    else if (!strcmp(dir, "reverse")) p->dirs = 1, p->reverse_only = 1;
    else if (!strcmp(dir, "bidirectional")) p->dirs = 2;
    else
        return IR_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL,
                         "direction is \"%s\", expected \"forward\", \"reverse\" or \"bidirectional\"", dir);
    int64_t v;
    if ((st = int_attr(m, l, "linear_before_reset", 0, 1, 0, &v))) return st;
    p->linear_before_reset = (int)v;
    if ((st = int_attr(m, l, "layout", 0, 0, 0, &v))) return st;
    if (lstm && (st = int_attr(m, l, "input_forget", 0, 0, 0, &v))) return st;
    if (ir_attrs_find(&l->attrs, "clip") || ir_attrs_find(&l->attrs, "activations"))
        return IR_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "attributes %s are not supported (default activations only)",
                         "clip/activations");
    if (x->rank != 3) return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "input '%s' must be [seq, batch, input]", x->name);
    p->seq = x->dims[0];
    p->batch = x->dims[1];
    p->input = x->dims[2];
    int64_t g = p->gates;
    if (w->rank != 3 || w->dims[0] != p->dirs || w->dims[1] != g * h || (p->input >= 0 && w->dims[2] != p->input))
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "weight '%s' must be [%" PRId64 ", %" PRId64 ", %" PRId64 "]", w->name,
                         p->dirs, g * h, p->input);
    if (r->rank != 3 || r->dims[0] != p->dirs || r->dims[1] != g * h || r->dims[2] != h)
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "recurrence weight '%s' must be [%" PRId64 ", %" PRId64 ", %" PRId64 "]",
                         r->name, p->dirs, g * h, h);
    if (b && (b->rank != 2 || b->dims[0] != p->dirs || b->dims[1] != 2 * g * h))
        return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias '%s' must be [%" PRId64 ", %" PRId64 "]", b->name, p->dirs, 2 * g * h);
    if (input_tensor(m, l, 4))
        return IR_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "input %d (sequence_lens) is not supported; leave it absent", 4);
    for (size_t i = 5; i < l->n_inputs; i++) {
        const ir_tensor *s = input_tensor(m, l, i);
        if (s && (s->rank != 3 || s->dims[0] != p->dirs || (p->batch >= 0 && s->dims[1] != p->batch) || s->dims[2] != h))
            return IR_LAYER_ERR(m, l, PDC_ERR_SHAPE, "initial state '%s' must be [%" PRId64 ", %" PRId64 ", %" PRId64 "]",
                             s->name, p->dirs, p->batch, h);
    }
    return PDC_OK;
}
