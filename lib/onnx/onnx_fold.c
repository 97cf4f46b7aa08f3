/*
 * onnx_fold.c - constant folding at import: the shape arithmetic that exporters emit (an exported
 * nn.LSTM builds its zero initial state as Shape -> Gather -> Unsqueeze -> Concat -> Expand, a
 * flatten written as x.view(x.size(0), -1) becomes Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape) is evaluated here on int64/float host constants, so the IR only ever sees the results.
 * Every function gets a node whose present inputs are all constants (Shape also takes a run-time
 * input whose shape is known) and defines the node's outputs as constants. Semantics are those of
 * the ONNX operator documentation for opsets 9..17; integer arithmetic wraps instead of overflowing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/index.h"
#include "lib/onnx/onnx.h"

#define F_INT ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define F_FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define F_BOOL ONNX__TENSOR_PROTO__DATA_TYPE__BOOL

/* ------------------------------------------------------------------ helpers */

static const onnx_const *cin(const onnx_node *n, size_t i)
{
    return i < n->n_in && n->in[i] && n->in[i]->kind == ONNX_VALUE_CONST ? &n->in[i]->c : NULL;
}

static size_t biggest_input(const onnx_node *n)
{
    size_t big = 0;
    for (size_t i = 0; i < n->n_in; i++)
        if (cin(n, i) && cin(n, i)->n > big) big = cin(n, i)->n;
    return big;
}

/* Allocates a result; bounded so that folding never creates far more data than it was given. */
static pdc_status result(const onnx_importer *imp, const onnx_node *n, onnx_const *c, int32_t dtype, int rank,
                         const int64_t *dims)
{
    size_t big = biggest_input(n), limit = big > ONNX_FOLD_MAX_NEW ? big : ONNX_FOLD_MAX_NEW;
    if (rank > PDC_MAX_RANK)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "the result has rank %d (at most %d)", rank, PDC_MAX_RANK);
    pdc_status st = onnx_const_init(imp->ctx, c, dtype, rank, dims, limit);
    if (st) {
        char qn[160], qo[160];
        pdc_error_prefix(imp->ctx, "ONNX: node '%s' (%s, opset %" PRId64 ")", onnx_quote(n->layer, qn, sizeof qn),
                         onnx_quote(n->op, qo, sizeof qo), imp->opset);
    }
    return st;
}

static pdc_status need(const onnx_importer *imp, const onnx_node *n, size_t i, const onnx_const **c)
{
    *c = cin(n, i);
    if (!*c) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "input %zu is missing", i);
    return PDC_OK;
}

/* Copies element k of src into element j of dst (same storage class). */
static void copy_elem(onnx_const *dst, size_t j, const onnx_const *src, size_t k)
{
    if (dst->f) dst->f[j] = src->f ? src->f[k] : (float)src->i[k];
    else dst->i[j] = src->i ? src->i[k] : onnx_const_get_i(src, k);
}

static pdc_status norm_axis(const onnx_importer *imp, const onnx_node *n, int64_t axis, int rank, int *out)
{
    *out = 0;
    if (axis < -rank || axis >= rank)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axis %" PRId64 " is out of range for rank %d", axis,
                               rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return PDC_OK;
}

/* An integer constant of at most cap elements (a shape, axes, indices) into v. */
static pdc_status int_list(const onnx_importer *imp, const onnx_node *n, const onnx_const *c, const char *what,
                           int64_t *v, size_t cap, size_t *count)
{
    if (!onnx_dtype_is_int(c->dtype))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s must be integers, not %s", what,
                               onnx_dtype_name(c->dtype));
    if (c->rank > 1)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s must be a 1-D tensor (rank %d)", what, c->rank);
    if (c->n > cap)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "%s has %zu entries (at most %zu)", what, c->n, cap);
    for (size_t k = 0; k < c->n; k++) v[k] = c->i[k];
    *count = c->n;
    return PDC_OK;
}

/* Numpy broadcast of the shapes of k constants. */
static pdc_status bshape(const onnx_importer *imp, const onnx_node *n, size_t k, const onnx_const *const *c, int *rank,
                         int64_t *dims)
{
    int r = 0;
    for (size_t j = 0; j < k; j++) r = c[j]->rank > r ? c[j]->rank : r;
    for (int i = 0; i < r; i++) {
        int64_t d = 1;
        for (size_t j = 0; j < k; j++) {
            int ci = i - (r - c[j]->rank);
            int64_t e = ci >= 0 ? c[j]->dims[ci] : 1;
            if (e == d || e == 1) continue;
            if (d != 1)
                return onnx_node_error(imp, n, PDC_ERR_SHAPE, "input shapes do not broadcast (dim %d: %" PRId64
                                       " vs %" PRId64 ")", i, d, e);
            d = e;
        }
        dims[i] = d;
    }
    *rank = r;
    return PDC_OK;
}

/* ------------------------------------------------------------------ simple ones */

pdc_status onnx_fold_identity(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    pdc_status st = need(imp, n, 0, &x);
    onnx_const c;
    if (!st) st = onnx_const_copy(imp->ctx, &c, x);
    if (st) return st;
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_constant(onnx_importer *imp, onnx_node *n)
{
    static const char *const refused[] = {"sparse_value", "value_string", "value_strings"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (onnx_attr_find(n, refused[i]))
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "attribute '%s' is not supported", refused[i]);
    onnx_const c;
    pdc_status st;
    const Onnx__AttributeProto *a;
    if ((a = onnx_attr_find(n, "value"))) {
        if (!a->t) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'value' must be a tensor");
        char what[256], q[160];
        snprintf(what, sizeof what, "ONNX: node '%s' (Constant): attribute 'value'", onnx_quote(n->layer, q, sizeof q));
        st = onnx_tensor_decode(imp->ctx, a->t, what, &c);
        if (st) return st;
    } else if ((a = onnx_attr_find(n, "value_float"))) {
        float v;
        if ((st = onnx_attr_float(imp, n, "value_float", 0, &v))) return st;
        if ((st = result(imp, n, &c, F_FLOAT, 0, NULL))) return st;
        c.f[0] = v;
    } else if ((a = onnx_attr_find(n, "value_floats"))) {
        if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'value_floats' must be a list of floats");
        int64_t d = (int64_t)a->n_floats;
        if ((st = result(imp, n, &c, F_FLOAT, 1, &d))) return st;
        for (size_t k = 0; k < a->n_floats; k++) c.f[k] = a->floats[k];
    } else if ((a = onnx_attr_find(n, "value_int"))) {
        int64_t v;
        if ((st = onnx_attr_int(imp, n, "value_int", 0, &v))) return st;
        if ((st = result(imp, n, &c, F_INT, 0, NULL))) return st;
        c.i[0] = v;
    } else if ((a = onnx_attr_find(n, "value_ints"))) {
        size_t cnt;
        const int64_t *v;
        if ((st = onnx_attr_ints(imp, n, "value_ints", &cnt, &v, NULL))) return st;
        int64_t d = (int64_t)cnt;
        if ((st = result(imp, n, &c, F_INT, 1, &d))) return st;
        if (cnt) memcpy(c.i, v, cnt * sizeof *v);
    } else {
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "has no value attribute");
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_shape(onnx_importer *imp, onnx_node *n)
{
    int rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_status st = onnx_value_shape(imp, n, n->in[0], "Shape", &rank, dims);
    int64_t start = 0, end = rank;
    if (!st && imp->opset >= 15) {
        if (!(st = onnx_attr_int(imp, n, "start", 0, &start))) st = onnx_attr_int(imp, n, "end", rank, &end);
    }
    if (st) return st;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    int64_t len = end > start ? end - start : 0;
    onnx_const c;
    if ((st = result(imp, n, &c, F_INT, 1, &len))) return st;
    for (int64_t k = 0; k < len; k++) c.i[k] = dims[start + k];
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

/* ------------------------------------------------------------------ indexing */

pdc_status onnx_fold_gather(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x, *ix;
    pdc_status st;
    int64_t axis;
    int ax;
    if ((st = need(imp, n, 0, &x)) || (st = need(imp, n, 1, &ix))) return st;
    if ((st = onnx_attr_int(imp, n, "axis", 0, &axis))) return st;
    if (x->rank < 1) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "data must have rank >= 1");
    if ((st = norm_axis(imp, n, axis, x->rank, &ax))) return st;
    if (!onnx_dtype_is_int(ix->dtype))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "indices must be integers, not %s",
                               onnx_dtype_name(ix->dtype));
    int rank = x->rank - 1 + ix->rank;
    int64_t dims[2 * PDC_MAX_RANK];
    int r = 0;
    for (int i = 0; i < ax; i++) dims[r++] = x->dims[i];
    for (int i = 0; i < ix->rank; i++) dims[r++] = ix->dims[i];
    for (int i = ax + 1; i < x->rank; i++) dims[r++] = x->dims[i];
    onnx_const c;
    if ((st = result(imp, n, &c, x->dtype, rank, dims))) return st;
    int64_t d = x->dims[ax];
    size_t outer = 1, inner = 1;
    for (int i = 0; i < ax; i++) outer *= (size_t)x->dims[i];
    for (int i = ax + 1; i < x->rank; i++) inner *= (size_t)x->dims[i];
    size_t j = 0;
    for (size_t o = 0; o < outer; o++) {
        for (size_t k = 0; k < ix->n; k++) {
            int64_t at = ix->i[k];
            if (at < -d || at >= d) {
                onnx_const_free(&c);
                return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "index %" PRId64 " is out of range for dim %"
                                       PRId64, at, d);
            }
            if (at < 0) at += d;
            for (size_t e = 0; e < inner; e++) copy_elem(&c, j++, x, (o * (size_t)d + (size_t)at) * inner + e);
        }
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_slice(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    pdc_status st = need(imp, n, 0, &x);
    if (st) return st;
    int64_t starts[PDC_MAX_RANK], ends[PDC_MAX_RANK], axes[PDC_MAX_RANK], steps[PDC_MAX_RANK];
    size_t ns = 0, ne = 0, na = 0, nst = 0;
    if (imp->opset < 10) {
        const int64_t *v;
        size_t cnt;
        int present;
        if ((st = onnx_attr_ints(imp, n, "starts", &cnt, &v, NULL))) return st;
        if (cnt > PDC_MAX_RANK) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "too many starts (%zu)", cnt);
        if (cnt) memcpy(starts, v, cnt * sizeof *v);
        ns = cnt;
        if ((st = onnx_attr_ints(imp, n, "ends", &cnt, &v, NULL))) return st;
        if (cnt > PDC_MAX_RANK) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "too many ends (%zu)", cnt);
        if (cnt) memcpy(ends, v, cnt * sizeof *v);
        ne = cnt;
        if ((st = onnx_attr_ints(imp, n, "axes", &cnt, &v, &present))) return st;
        if (cnt > PDC_MAX_RANK) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "too many axes (%zu)", cnt);
        if (cnt) memcpy(axes, v, cnt * sizeof *v);
        na = present ? cnt : (size_t)-1;
        nst = (size_t)-1;
    } else {
        const onnx_const *c;
        if ((st = need(imp, n, 1, &c)) || (st = int_list(imp, n, c, "starts", starts, PDC_MAX_RANK, &ns))) return st;
        if ((st = need(imp, n, 2, &c)) || (st = int_list(imp, n, c, "ends", ends, PDC_MAX_RANK, &ne))) return st;
        na = nst = (size_t)-1;
        if ((c = cin(n, 3)) && (st = int_list(imp, n, c, "axes", axes, PDC_MAX_RANK, &na))) return st;
        if ((c = cin(n, 4)) && (st = int_list(imp, n, c, "steps", steps, PDC_MAX_RANK, &nst))) return st;
    }
    if (ns != ne || (na != (size_t)-1 && na != ns) || (nst != (size_t)-1 && nst != ns))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "starts, ends, axes and steps differ in length");
    int64_t first[PDC_MAX_RANK], step[PDC_MAX_RANK], dims[PDC_MAX_RANK];
    int seen = 0;
    for (int i = 0; i < x->rank; i++) first[i] = 0, step[i] = 1, dims[i] = x->dims[i];
    for (size_t k = 0; k < ns; k++) {
        int ax;
        if ((st = norm_axis(imp, n, na == (size_t)-1 ? (int64_t)k : axes[k], x->rank, &ax))) return st;
        if (seen & (1 << ax)) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axis %d is sliced twice", ax);
        seen |= 1 << ax;
        int64_t d = x->dims[ax], s = nst == (size_t)-1 ? 1 : steps[k], b = starts[k], e = ends[k];
        if (s == 0) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "step is 0 on axis %d", ax);
        if (b < 0) b = b < -d ? -1 : b + d;
        if (e < 0) e = e < -d ? -1 : e + d;
        int64_t cnt;
        if (s > 0) {
            b = b < 0 ? 0 : b > d ? d : b;
            e = e < 0 ? 0 : e > d ? d : e;
            cnt = e > b ? (e - b - 1) / s + 1 : 0; /* no overflow for any step */
        } else {
            int64_t ms = s == INT64_MIN ? INT64_MAX : -s;
            b = b < 0 ? 0 : b > d - 1 ? d - 1 : b; /* ONNX: starts in [0, d-1], ends in [-1, d-1] */
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            cnt = b > e ? (b - e - 1) / ms + 1 : 0;
        }
        if (d == 0) cnt = 0; /* an empty axis stays empty whatever the clamped bounds say */
        first[ax] = b;
        step[ax] = s;
        dims[ax] = cnt;
    }
    onnx_const c;
    if ((st = result(imp, n, &c, x->dtype, x->rank, dims))) return st;
    int64_t idx[PDC_MAX_RANK] = {0}, xs[PDC_MAX_RANK], stride = 1;
    for (int i = x->rank - 1; i >= 0; i--) xs[i] = stride, stride *= x->dims[i];
    for (size_t j = 0; j < c.n; j++) {
        int64_t off = 0;
        for (int i = 0; i < x->rank; i++) off += (first[i] + idx[i] * step[i]) * xs[i];
        copy_elem(&c, j, x, (size_t)off);
        for (int i = x->rank - 1; i >= 0; i--) {
            if (++idx[i] < dims[i]) break;
            idx[i] = 0;
        }
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

/* ------------------------------------------------------------------ shape changes */

pdc_status onnx_axes(const onnx_importer *imp, const onnx_node *n, size_t input, int64_t *axes, size_t *count,
                     int *present)
{
    *count = 0;
    *present = 0;
    if (imp->opset >= 13) {
        if (input >= n->n_in || !n->in[input]) return PDC_OK;
        if (n->in[input]->kind != ONNX_VALUE_CONST) {
            char q[160];
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "axes '%s' must be a constant",
                                   onnx_quote(n->in[input]->name, q, sizeof q));
        }
        *present = 1;
        return int_list(imp, n, &n->in[input]->c, "axes", axes, 2 * PDC_MAX_RANK, count);
    }
    const int64_t *v;
    size_t cnt;
    pdc_status st = onnx_attr_ints(imp, n, "axes", &cnt, &v, present);
    if (st) return st;
    if (cnt > 2 * PDC_MAX_RANK) return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "too many axes (%zu)", cnt);
    if (cnt) memcpy(axes, v, cnt * sizeof *v);
    *count = cnt;
    return PDC_OK;
}

pdc_status onnx_squeeze_shape(const onnx_importer *imp, const onnx_node *n, int unsqueeze, int rank,
                              const int64_t *dims, int *out_rank, int64_t *out_dims)
{
    int64_t axes[2 * PDC_MAX_RANK];
    size_t na;
    int present;
    pdc_status st = onnx_axes(imp, n, 1, axes, &na, &present);
    if (st) return st;
    int mark[2 * PDC_MAX_RANK + 1] = {0};
    if (unsqueeze) {
        if (!present) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axes are required");
        int r = rank + (int)na;
        if (r > PDC_MAX_RANK)
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "the result has rank %d (at most %d)", r, PDC_MAX_RANK);
        for (size_t k = 0; k < na; k++) {
            int ax;
            if ((st = norm_axis(imp, n, axes[k], r, &ax))) return st;
            if (mark[ax]++) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axis %d is repeated", ax);
        }
        for (int i = 0, j = 0; i < r; i++) out_dims[i] = mark[i] ? 1 : dims[j++];
        *out_rank = r;
        return PDC_OK;
    }
    for (size_t k = 0; k < na; k++) {
        int ax;
        if ((st = norm_axis(imp, n, axes[k], rank, &ax))) return st;
        if (dims[ax] != 1)
            return onnx_node_error(imp, n, PDC_ERR_SHAPE, "cannot squeeze axis %d of size %" PRId64, ax, dims[ax]);
        mark[ax] = 1;
    }
    int r = 0;
    for (int i = 0; i < rank; i++)
        if (!(present ? mark[i] : dims[i] == 1)) out_dims[r++] = dims[i];
    *out_rank = r;
    return PDC_OK;
}

/* Same data, new shape. */
static pdc_status reshaped(onnx_importer *imp, onnx_node *n, const onnx_const *x, int rank, const int64_t *dims)
{
    onnx_const c;
    pdc_status st = result(imp, n, &c, x->dtype, rank, dims);
    if (st) return st;
    if (c.n != x->n) {
        onnx_const_free(&c);
        return onnx_node_error(imp, n, PDC_ERR_SHAPE, "%zu elements cannot take a shape of %zu", x->n, c.n);
    }
    for (size_t k = 0; k < c.n; k++) copy_elem(&c, k, x, k);
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_unsqueeze(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    int r;
    int64_t d[PDC_MAX_RANK];
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = onnx_squeeze_shape(imp, n, 1, x->rank, x->dims, &r, d);
    return st ? st : reshaped(imp, n, x, r, d);
}

pdc_status onnx_fold_squeeze(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    int r;
    int64_t d[PDC_MAX_RANK];
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = onnx_squeeze_shape(imp, n, 0, x->rank, x->dims, &r, d);
    return st ? st : reshaped(imp, n, x, r, d);
}

pdc_status onnx_reshape_dims(const onnx_importer *imp, const onnx_node *n, const onnx_const *shape, int rank,
                             const int64_t *dims, int allowzero, int *out_rank, int64_t *out_dims)
{
    int64_t s[PDC_MAX_RANK];
    size_t ns;
    pdc_status st = int_list(imp, n, shape, "the shape", s, PDC_MAX_RANK, &ns);
    if (st) return st;
    size_t total = 1, known = 1;
    for (int i = 0; i < rank; i++) total *= (size_t)dims[i];
    int infer = -1;
    for (size_t i = 0; i < ns; i++) {
        int64_t v = s[i];
        if (v == 0 && !allowzero) {
            if ((int)i >= rank)
                return onnx_node_error(imp, n, PDC_ERR_SHAPE, "shape[%zu] = 0 copies a dim the input (rank %d) lacks",
                                       i, rank);
            v = dims[i];
        } else if (v == -1) {
            if (infer >= 0) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "the shape has more than one -1");
            infer = (int)i;
            out_dims[i] = -1;
            continue;
        } else if (v < -1 || v > IR_DIM_MAX) {
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "shape[%zu] is %" PRId64, i, v);
        }
        out_dims[i] = v;
        if (pdc_mul_overflow(known, (size_t)v, &known))
            return onnx_node_error(imp, n, PDC_ERR_OVERFLOW, "the shape overflows");
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return onnx_node_error(imp, n, PDC_ERR_SHAPE, "cannot infer the -1 dim: %zu elements, %zu per slot", total,
                                   known);
        out_dims[infer] = (int64_t)(total / known);
        known = total;
    }
    if (known != total)
        return onnx_node_error(imp, n, PDC_ERR_SHAPE, "cannot reshape %zu elements into %zu", total, known);
    *out_rank = (int)ns;
    return PDC_OK;
}

pdc_status onnx_fold_reshape(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x, *s;
    int64_t allowzero = 0, d[PDC_MAX_RANK];
    int r;
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = need(imp, n, 1, &s);
    if (!st && imp->opset >= 14) st = onnx_attr_int(imp, n, "allowzero", 0, &allowzero);
    if (!st) st = onnx_reshape_dims(imp, n, s, x->rank, x->dims, allowzero != 0, &r, d);
    return st ? st : reshaped(imp, n, x, r, d);
}

pdc_status onnx_fold_flatten(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    int64_t axis;
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = onnx_attr_int(imp, n, "axis", 1, &axis);
    if (st) return st;
    if (axis < -x->rank || axis > x->rank)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axis %" PRId64 " is out of range for rank %d", axis,
                               x->rank);
    if (axis < 0) axis += x->rank;
    int64_t d[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) d[i >= axis] *= x->dims[i];
    return reshaped(imp, n, x, 2, d);
}

pdc_status onnx_fold_transpose(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    pdc_status st = need(imp, n, 0, &x);
    size_t np;
    const int64_t *pa;
    int present;
    if (!st) st = onnx_attr_ints(imp, n, "perm", &np, &pa, &present);
    if (st) return st;
    int r = x->rank, seen = 0;
    int64_t perm[PDC_MAX_RANK], d[PDC_MAX_RANK], ts[1][PDC_MAX_RANK];
    if (present && np != (size_t)r)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "perm has %zu entries for rank %d", np, r);
    for (int i = 0; i < r; i++) {
        perm[i] = present ? pa[i] : r - 1 - i;
        if (perm[i] < 0 || perm[i] >= r || (seen & (1 << perm[i])))
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d", r - 1);
        seen |= 1 << perm[i];
        d[i] = x->dims[perm[i]];
    }
    ir_transpose_strides(r, x->dims, perm, ts[0]);
    onnx_const c;
    if ((st = result(imp, n, &c, x->dtype, r, d))) return st;
    int64_t idx[PDC_MAX_RANK] = {0}, off = 0;
    for (size_t j = 0; j < c.n; j++) {
        copy_elem(&c, j, x, (size_t)off);
        ir_index_next(r, d, idx, 1, ts, &off);
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_concat(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x0;
    int64_t axis;
    pdc_status st = need(imp, n, 0, &x0);
    const Onnx__AttributeProto *at = onnx_attr_find(n, "axis");
    if (!st && !at) st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'axis' is required");
    if (!st) st = onnx_attr_int(imp, n, "axis", 0, &axis);
    if (st) return st;
    if (x0->rank < 1) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "inputs must have rank >= 1");
    int ax;
    if ((st = norm_axis(imp, n, axis, x0->rank, &ax))) return st;
    int64_t d[PDC_MAX_RANK];
    memcpy(d, x0->dims, sizeof d);
    d[ax] = 0;
    for (size_t j = 0; j < n->n_in; j++) {
        const onnx_const *x = cin(n, j);
        if (!x) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "input %zu is missing", j);
        int same = x->rank == x0->rank && onnx_dtype_is_float(x->dtype) == onnx_dtype_is_float(x0->dtype);
        for (int i = 0; same && i < x->rank; i++) same = i == ax || x->dims[i] == x0->dims[i];
        if (!same)
            return onnx_node_error(imp, n, PDC_ERR_SHAPE, "input %zu does not match input 0 (type, rank or dims "
                                   "other than axis %d)", j, ax);
        d[ax] += x->dims[ax];
    }
    onnx_const c;
    if ((st = result(imp, n, &c, x0->dtype, x0->rank, d))) return st;
    size_t outer = 1, inner = 1, at_out = 0;
    for (int i = 0; i < ax; i++) outer *= (size_t)d[i];
    for (int i = ax + 1; i < x0->rank; i++) inner *= (size_t)d[i];
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < n->n_in; j++) {
            const onnx_const *x = cin(n, j);
            size_t chunk = (size_t)x->dims[ax] * inner;
            for (size_t e = 0; e < chunk; e++) copy_elem(&c, at_out++, x, o * chunk + e);
        }
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

/* ------------------------------------------------------------------ creating data */

pdc_status onnx_fold_expand(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x, *s;
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = need(imp, n, 1, &s);
    int64_t sd[PDC_MAX_RANK];
    size_t ns;
    if (!st) st = int_list(imp, n, s, "the shape", sd, PDC_MAX_RANK, &ns);
    if (st) return st;
    for (size_t i = 0; i < ns; i++)
        if (sd[i] < 0 || sd[i] > IR_DIM_MAX)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "shape[%zu] is %" PRId64, i, sd[i]);
    onnx_const target = {.dtype = F_INT, .rank = (int)ns};
    memcpy(target.dims, sd, ns * sizeof *sd);
    const onnx_const *both[2] = {x, &target};
    int r;
    int64_t d[PDC_MAX_RANK];
    if ((st = bshape(imp, n, 2, both, &r, d))) return st;
    onnx_const c;
    if ((st = result(imp, n, &c, x->dtype, r, d))) return st;
    int64_t s1[1][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[1] = {0};
    ir_broadcast_strides(x->rank, x->dims, r, d, 1, s1[0]);
    for (size_t j = 0; j < c.n; j++) {
        copy_elem(&c, j, x, (size_t)off[0]);
        ir_index_next(r, d, idx, 1, s1, off);
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_constant_of_shape(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *s;
    pdc_status st = need(imp, n, 0, &s);
    int64_t sd[PDC_MAX_RANK];
    size_t ns;
    if (!st) st = int_list(imp, n, s, "the shape", sd, PDC_MAX_RANK, &ns);
    if (st) return st;
    onnx_const v = {0};
    const Onnx__AttributeProto *a = onnx_attr_find(n, "value");
    if (a) {
        if (!a->t) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'value' must be a tensor");
        char what[256], q[160];
        snprintf(what, sizeof what, "ONNX: node '%s' (ConstantOfShape): attribute 'value'",
                 onnx_quote(n->layer, q, sizeof q));
        if ((st = onnx_tensor_decode(imp->ctx, a->t, what, &v))) return st;
        if (v.n != 1) {
            onnx_const_free(&v);
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'value' must hold one element");
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (sd[i] < 0) {
            onnx_const_free(&v);
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "shape[%zu] is %" PRId64, i, sd[i]);
        }
    onnx_const c;
    st = result(imp, n, &c, a ? v.dtype : F_FLOAT, (int)ns, sd);
    if (!st)
        for (size_t j = 0; j < c.n; j++) {
            if (a) copy_elem(&c, j, &v, 0);
            else c.f[j] = 0.0f;
        }
    onnx_const_free(&v);
    if (st) return st;
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_range(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *a, *b, *dl;
    pdc_status st;
    if ((st = need(imp, n, 0, &a)) || (st = need(imp, n, 1, &b)) || (st = need(imp, n, 2, &dl))) return st;
    if (a->n != 1 || b->n != 1 || dl->n != 1)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "start, limit and delta must be scalars");
    int is_f = onnx_dtype_is_float(a->dtype);
    double start = onnx_const_get_f(a, 0), limit = onnx_const_get_f(b, 0), delta = onnx_const_get_f(dl, 0);
    if (delta == 0 || !isfinite(start) || !isfinite(limit) || !isfinite(delta))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "delta is 0 or a bound is not finite");
    double cnt = ceil((limit - start) / delta);
    if (cnt < 0) cnt = 0;
    if (cnt > (double)ONNX_FOLD_MAX_NEW)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "the range has %.0f elements (more than %zu)", cnt,
                               ONNX_FOLD_MAX_NEW);
    int64_t len = (int64_t)cnt;
    onnx_const c;
    if ((st = result(imp, n, &c, a->dtype, 1, &len))) return st;
    for (int64_t k = 0; k < len; k++) {
        if (is_f) c.f[k] = (float)(start + (double)k * delta);
        else c.i[k] = (int64_t)((uint64_t)onnx_const_get_i(a, 0) + (uint64_t)k * (uint64_t)onnx_const_get_i(dl, 0));
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_cast(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *x;
    int64_t to;
    pdc_status st = need(imp, n, 0, &x);
    if (!st) st = onnx_attr_int(imp, n, "to", 0, &to);
    if (st) return st;
    if (to < INT32_MIN || to > INT32_MAX || (!onnx_dtype_is_float((int32_t)to) && !onnx_dtype_is_int((int32_t)to)))
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "cast to %s (%" PRId64 ") is not supported",
                               onnx_dtype_name((int32_t)to), to);
    onnx_const c;
    if ((st = result(imp, n, &c, (int32_t)to, x->rank, x->dims))) return st;
    for (size_t k = 0; k < c.n; k++) {
        if (c.f) {
            c.f[k] = (float)onnx_const_get_f(x, k);
            continue;
        }
        int64_t v = onnx_const_get_i(x, k); /* floats truncate toward zero, saturating */
        switch (to) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: v = x->f ? x->f[k] != 0.0f : v != 0; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: v = (int8_t)(uint8_t)(uint64_t)v; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: v = (uint8_t)(uint64_t)v; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: v = (int16_t)(uint16_t)(uint64_t)v; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: v = (uint16_t)(uint64_t)v; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: v = (int32_t)(uint32_t)(uint64_t)v; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: v = (uint32_t)(uint64_t)v; break;
        default: break;
        }
        c.i[k] = v;
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

/* ------------------------------------------------------------------ elementwise with broadcasting */

/* Result of k broadcast inputs (at most 3) with storage of dtype; s gets the input strides. */
static pdc_status bresult(onnx_importer *imp, onnx_node *n, size_t k, const onnx_const *const *in, int32_t dtype,
                          onnx_const *c, int64_t (*s)[PDC_MAX_RANK])
{
    int r;
    int64_t d[PDC_MAX_RANK];
    pdc_status st = bshape(imp, n, k, in, &r, d);
    if (!st) st = result(imp, n, c, dtype, r, d);
    if (st) return st;
    for (size_t j = 0; j < k; j++) ir_broadcast_strides(in[j]->rank, in[j]->dims, r, d, 1, s[j]);
    return PDC_OK;
}

static int64_t wrap_op(int op, int64_t a, int64_t b)
{
    switch (op) {
    case 0: return (int64_t)((uint64_t)a + (uint64_t)b);
    case 1: return (int64_t)((uint64_t)a - (uint64_t)b);
    case 2: return (int64_t)((uint64_t)a * (uint64_t)b);
    default: return (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
    }
}

pdc_status onnx_fold_binary(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *a, *b;
    pdc_status st;
    if ((st = need(imp, n, 0, &a)) || (st = need(imp, n, 1, &b))) return st;
    int op = !strcmp(n->op, "Add") ? 0 : !strcmp(n->op, "Sub") ? 1 : !strcmp(n->op, "Mul") ? 2 : 3;
    int fa = onnx_dtype_is_float(a->dtype);
    if (fa != onnx_dtype_is_float(b->dtype))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "operands have types %s and %s",
                               onnx_dtype_name(a->dtype), onnx_dtype_name(b->dtype));
    const onnx_const *in[2] = {a, b};
    int64_t s[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    onnx_const c;
    if ((st = bresult(imp, n, 2, in, a->dtype, &c, s))) return st;
    for (size_t j = 0; j < c.n; j++) {
        if (fa) {
            float x = a->f[off[0]], y = b->f[off[1]];
            c.f[j] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
        } else {
            int64_t x = a->i[off[0]], y = b->i[off[1]];
            if (op == 3 && y == 0) {
                onnx_const_free(&c);
                return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "integer division by zero");
            }
            c.i[j] = wrap_op(op, x, y);
        }
        ir_index_next(c.rank, c.dims, idx, 2, s, off);
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_equal(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *a, *b;
    pdc_status st;
    if ((st = need(imp, n, 0, &a)) || (st = need(imp, n, 1, &b))) return st;
    const onnx_const *in[2] = {a, b};
    int64_t s[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    onnx_const c;
    if ((st = bresult(imp, n, 2, in, F_BOOL, &c, s))) return st;
    int ints = onnx_dtype_is_int(a->dtype) && onnx_dtype_is_int(b->dtype);
    for (size_t j = 0; j < c.n; j++) {
        c.i[j] = ints ? a->i[off[0]] == b->i[off[1]]
                      : onnx_const_get_f(a, (size_t)off[0]) == onnx_const_get_f(b, (size_t)off[1]);
        ir_index_next(c.rank, c.dims, idx, 2, s, off);
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}

pdc_status onnx_fold_where(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *cond, *x, *y;
    pdc_status st;
    if ((st = need(imp, n, 0, &cond)) || (st = need(imp, n, 1, &x)) || (st = need(imp, n, 2, &y))) return st;
    if (onnx_dtype_is_float(x->dtype) != onnx_dtype_is_float(y->dtype))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "X and Y have types %s and %s",
                               onnx_dtype_name(x->dtype), onnx_dtype_name(y->dtype));
    const onnx_const *in[3] = {cond, x, y};
    int64_t s[3][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[3] = {0, 0, 0};
    onnx_const c;
    if ((st = bresult(imp, n, 3, in, x->dtype, &c, s))) return st;
    for (size_t j = 0; j < c.n; j++) {
        int take_x = onnx_const_get_f(cond, (size_t)off[0]) != 0;
        copy_elem(&c, j, take_x ? x : y, (size_t)(take_x ? off[1] : off[2]));
        ir_index_next(c.rank, c.dims, idx, 3, s, off);
    }
    onnx_define_const(n, 0, &c);
    return PDC_OK;
}
