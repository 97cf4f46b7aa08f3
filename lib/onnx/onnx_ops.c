/*
 * onnx_ops.c - the op table: how each supported ONNX op (opsets 9..17) becomes IR layers.
 *
 * Choices worth knowing:
 *  - Gemm with a constant B, transA = 0, alpha = 1 and a bias that is a row (or absent) becomes an
 *    fc layer (weight [N, K], transposed at import when transB = 0); MatMul of a rank-2 activation
 *    by a constant matrix becomes an fc layer too. Everything else keeps gemm / matmul. fc is what
 *    the passes fold BatchNorm into and block-prune.
 *  - auto_pad SAME_UPPER / SAME_LOWER is resolved to explicit pads from the input shape.
 *  - Squeeze / Unsqueeze on activations become reshapes with explicit dims.
 *  - Softmax before opset 13 means "flatten to 2-D at axis, softmax each row": it is one softmax when
 *    axis is the last dim, else reshape -> softmax(axis 1) -> reshape.
 *  - Dropout, Identity and Cast to float alias their input; no layer is emitted.
 *  - Attribute values pdc cannot honour are refused with a message, never ignored: LSTM/GRU other
 *    activations, clip, peepholes, layout = 1, BatchNormalization training_mode = 1, ...
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ops/params.h"
#include "lib/onnx/onnx.h"

/* ------------------------------------------------------------------ helpers */

/* IR tensor of input i, or -1 when absent. */
static pdc_status in_tensor(onnx_importer *imp, const onnx_node *n, size_t i, int *t)
{
    *t = -1;
    if (i >= n->n_in || !n->in[i]) return PDC_OK;
    return onnx_value_tensor(imp, n, n->in[i], t);
}

/* Name of output k; an absent output 0 gets a synthesised name (the IR needs it). */
static const char *out_name(onnx_importer *imp, const onnx_node *n, size_t k, char **owned)
{
    *owned = NULL;
    if (k < n->n_out && n->out[k]) return n->out[k]->name;
    if (k != 0) return NULL;
    char base[4200];
    snprintf(base, sizeof base, "%.4000s/out", n->layer);
    *owned = onnx_unique_name(imp, base, 0);
    return *owned;
}

/* One layer: inputs in[0..n_in), output 0 of the node. */
static pdc_status emit1(onnx_importer *imp, const onnx_node *n, ir_op op, size_t n_in, const int *in,
                        const ir_attrs *a)
{
    char *owned;
    const char *o = out_name(imp, n, 0, &owned);
    if (!o) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = onnx_emit(imp, n, NULL, op, n_in, in, 1, &o, a);
    pdc_free(owned);
    return st;
}

/* A node input that must be a constant (axes, shape, clip bounds, ...). */
static pdc_status const_input(const onnx_importer *imp, const onnx_node *n, size_t i, const char *what,
                              const onnx_const **c)
{
    *c = NULL;
    if (i >= n->n_in || !n->in[i]) return PDC_OK;
    if (n->in[i]->kind != ONNX_VALUE_CONST) {
        char q[160];
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "%s ('%s') must be a constant, not computed at run time",
                               what, onnx_quote(n->in[i]->name, q, sizeof q));
    }
    *c = &n->in[i]->c;
    return PDC_OK;
}

static pdc_status set_int(onnx_importer *imp, ir_attrs *a, const char *name, int64_t v)
{
    return ir_attrs_set_int(imp->ctx, a, name, v);
}

static pdc_status set_float(onnx_importer *imp, const onnx_node *n, ir_attrs *a, const char *name, float v)
{
    if (isnan(v)) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s is NaN", name);
    return ir_attrs_set_float(imp->ctx, a, name, v);
}

/* Copies an ints attribute of the node (when present) into the IR attributes. */
static pdc_status pass_ints(onnx_importer *imp, const onnx_node *n, ir_attrs *a, const char *name)
{
    size_t cnt;
    const int64_t *v;
    int present;
    pdc_status st = onnx_attr_ints(imp, n, name, &cnt, &v, &present);
    if (!st && present) st = ir_attrs_set_ints(imp->ctx, a, name, cnt, v);
    return st;
}

static pdc_status pass_int(onnx_importer *imp, const onnx_node *n, ir_attrs *a, const char *name)
{
    int64_t v;
    pdc_status st = onnx_attr_int(imp, n, name, 0, &v);
    if (!st && onnx_attr_find(n, name)) st = set_int(imp, a, name, v);
    return st;
}

/* ------------------------------------------------------------------ aliases */

/* Output 0 is input 0. Also reached with a constant input 0 (Dropout with a ratio computed at run
 * time, any all-zero Pad): the output is that constant then, never a run-time value without a
 * tensor. */
static pdc_status emit_identity(onnx_importer *imp, onnx_node *n)
{
    if (n->in[0]->kind == ONNX_VALUE_CONST) return onnx_fold_identity(imp, n);
    onnx_define_runtime(n, 0, n->in[0]->tensor);
    return PDC_OK;
}

static pdc_status dropout_check(onnx_importer *imp, const onnx_node *n)
{
    const onnx_const *tm;
    pdc_status st = const_input(imp, n, 2, "training_mode", &tm);
    if (!st && tm && tm->n && onnx_const_get_f(tm, 0) != 0)
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "training_mode = true is not supported (inference only)");
    return st;
}

static pdc_status emit_dropout(onnx_importer *imp, onnx_node *n)
{
    pdc_status st = dropout_check(imp, n);
    return st ? st : emit_identity(imp, n);
}

static pdc_status fold_dropout(onnx_importer *imp, onnx_node *n)
{
    pdc_status st = dropout_check(imp, n);
    return st ? st : onnx_fold_identity(imp, n);
}

static pdc_status emit_cast(onnx_importer *imp, onnx_node *n)
{
    int64_t to;
    pdc_status st = onnx_attr_int(imp, n, "to", 0, &to);
    if (st) return st;
    if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                               "a run-time cast to %s is not supported (activations are float)",
                               onnx_dtype_name((int32_t)to));
    return emit_identity(imp, n);
}

/* Pad with all-zero pads (torch writes one before AveragePool at opset 9) is an alias; real padding
 * of an activation has no IR op and is refused. */
static pdc_status emit_pad(onnx_importer *imp, onnx_node *n)
{
    char mode[32];
    int64_t pads[4 * PDC_MAX_RANK];
    size_t np = 0;
    pdc_status st = onnx_attr_string(imp, n, "mode", "constant", mode, sizeof mode);
    if (st) return st;
    if (imp->opset < 11) {
        const int64_t *v;
        int present;
        if ((st = onnx_attr_ints(imp, n, "pads", &np, &v, &present))) return st;
        if (!present || np > 4 * PDC_MAX_RANK)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'pads' is missing or too long");
        if (np) memcpy(pads, v, np * sizeof *v);
    } else {
        const onnx_const *c;
        if ((st = const_input(imp, n, 1, "pads", &c))) return st;
        if (!c || !onnx_dtype_is_int(c->dtype) || c->n > 4 * PDC_MAX_RANK)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "pads must be an integer tensor");
        np = c->n;
        if (np) memcpy(pads, c->i, np * sizeof *pads);
    }
    for (size_t i = 0; i < np; i++)
        if (pads[i] != 0)
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                                   "%s padding of a tensor is not supported (only all-zero pads; put the padding in "
                                   "the pads of the following Conv or pool)", mode);
    return emit_identity(imp, n);
}

/* ------------------------------------------------------------------ conv and pools */

/* Explicit pads for auto_pad, from the input shape (x) and the kernel k. */
static pdc_status auto_pads(onnx_importer *imp, const onnx_node *n, const char *mode, int nsp, const int64_t *k,
                            ir_attrs *a)
{
    int upper = !strcmp(mode, "SAME_UPPER"), lower = !strcmp(mode, "SAME_LOWER");
    if (!strcmp(mode, "NOTSET")) return pass_ints(imp, n, a, "pads");
    if (!strcmp(mode, "VALID")) return PDC_OK; /* no padding */
    if (!upper && !lower)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                               "auto_pad '%s' is not supported (NOTSET, SAME_UPPER, SAME_LOWER or VALID)", mode);
    int rank;
    int64_t xd[PDC_MAX_RANK], s[IR_MAX_SPATIAL], d[IR_MAX_SPATIAL], pads[2 * IR_MAX_SPATIAL];
    pdc_status st = onnx_value_shape(imp, n, n->in[0], "auto_pad SAME", &rank, xd);
    if (st) return st;
    if (rank != nsp + 2)
        return onnx_node_error(imp, n, PDC_ERR_SHAPE, "input has rank %d, expected %d", rank, nsp + 2);
    static const char *const names[2] = {"strides", "dilations"};
    int64_t *dst[2] = {s, d};
    for (int j = 0; j < 2; j++) {
        size_t cnt;
        const int64_t *v;
        if ((st = onnx_attr_ints(imp, n, names[j], &cnt, &v, NULL))) return st;
        if (cnt && cnt != (size_t)nsp)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s has %zu values, expected %d", names[j], cnt, nsp);
        for (int i = 0; i < nsp; i++) {
            dst[j][i] = cnt ? v[i] : 1;
            if (dst[j][i] < 1 || dst[j][i] > IR_DIM_MAX)
                return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s[%d] is %" PRId64, names[j], i, dst[j][i]);
        }
    }
    for (int i = 0; i < nsp; i++) {
        if (k[i] < 1 || k[i] > IR_DIM_MAX)
            return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "kernel dim %d is %" PRId64, i, k[i]);
        /* every term below 2^62: dims, strides, dilations and kernels are at most 2^31 - 1 */
        int64_t in = xd[2 + i], out = (in + s[i] - 1) / s[i];
        int64_t total = (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in;
        if (total < 0) total = 0;
        pads[i] = upper ? total / 2 : total - total / 2;
        pads[nsp + i] = total - pads[i];
    }
    return ir_attrs_set_ints(imp->ctx, a, "pads", 2 * (size_t)nsp, pads);
}

static pdc_status emit_conv(onnx_importer *imp, onnx_node *n)
{
    char mode[32];
    int wr;
    int64_t wd[PDC_MAX_RANK], k[IR_MAX_SPATIAL];
    ir_attrs a = {0};
    int in[3];
    pdc_status st = onnx_attr_string(imp, n, "auto_pad", "NOTSET", mode, sizeof mode);
    if (!st) st = onnx_value_shape(imp, n, n->in[1], "Conv", &wr, wd);
    if (!st && (wr < 3 || wr > 2 + IR_MAX_SPATIAL))
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "weight has rank %d (1-D, 2-D and 3-D convolutions only)",
                             wr);
    for (int i = 0; !st && i < wr - 2; i++) k[i] = wd[2 + i];
    if (!st) st = pass_ints(imp, n, &a, "strides");
    if (!st) st = pass_ints(imp, n, &a, "dilations");
    if (!st) st = pass_ints(imp, n, &a, "kernel_shape");
    if (!st) st = pass_int(imp, n, &a, "group");
    if (!st) st = auto_pads(imp, n, mode, wr - 2, k, &a);
    for (size_t i = 0; !st && i < 3; i++) st = in_tensor(imp, n, i, &in[i]);
    if (!st) st = emit1(imp, n, IR_OP_CONV, in[2] >= 0 ? 3 : 2, in, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_pool(onnx_importer *imp, onnx_node *n, ir_op op)
{
    char mode[32];
    size_t nk;
    const int64_t *k;
    int present;
    ir_attrs a = {0};
    int in;
    pdc_status st = onnx_attr_string(imp, n, "auto_pad", "NOTSET", mode, sizeof mode);
    if (!st) st = onnx_attr_ints(imp, n, "kernel_shape", &nk, &k, &present);
    if (!st && (!present || nk < 1 || nk > IR_MAX_SPATIAL))
        st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute kernel_shape is required (1..%d values)",
                             IR_MAX_SPATIAL);
    if (!st) st = ir_attrs_set_ints(imp->ctx, &a, "kernel_shape", nk, k);
    if (!st) st = pass_ints(imp, n, &a, "strides");
    if (!st && op == IR_OP_MAXPOOL) st = pass_ints(imp, n, &a, "dilations");
    if (!st) st = pass_int(imp, n, &a, "ceil_mode");
    if (!st && op == IR_OP_AVGPOOL) st = pass_int(imp, n, &a, "count_include_pad");
    if (!st) st = auto_pads(imp, n, mode, (int)nk, k, &a);
    if (!st) st = in_tensor(imp, n, 0, &in);
    if (!st) st = emit1(imp, n, op, 1, &in, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_maxpool(onnx_importer *imp, onnx_node *n) { return emit_pool(imp, n, IR_OP_MAXPOOL); }
static pdc_status emit_avgpool(onnx_importer *imp, onnx_node *n) { return emit_pool(imp, n, IR_OP_AVGPOOL); }

/* ------------------------------------------------------------------ gemm, matmul */

/* IR constant for weight value w as [rows, cols] = w^T (transpose) or w (as stored). The ONNX name is
 * kept when this is the only reader. */
static pdc_status weight_tensor(onnx_importer *imp, const onnx_node *n, onnx_value *w, int transpose, int *t)
{
    if (!transpose) return onnx_value_tensor(imp, n, w, t);
    const onnx_const *c = &w->c;
    int64_t r = c->dims[0], k = c->dims[1], d[2] = {k, r};
    float *data = pdc_alloc(imp->ctx, c->n * sizeof *data);
    if (!data) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < k; j++) data[j * r + i] = c->f[i * k + j];
    char base[4200];
    int own_name = w->uses == 1 && w->tensor < 0;
    snprintf(base, sizeof base, own_name ? "%.4000s" : "%.4000s_T", w->name);
    return onnx_add_constant(imp, base, 2, d, data, t);
}

static int const_float(const onnx_value *v, int rank)
{
    return v && v->kind == ONNX_VALUE_CONST && onnx_dtype_is_float(v->c.dtype) && v->c.rank == rank && v->c.n > 0;
}

static pdc_status emit_gemm(onnx_importer *imp, onnx_node *n)
{
    float alpha, beta;
    int64_t ta, tb;
    pdc_status st;
    if ((st = onnx_attr_float(imp, n, "alpha", 1.0f, &alpha)) || (st = onnx_attr_float(imp, n, "beta", 1.0f, &beta)) ||
        (st = onnx_attr_int(imp, n, "transA", 0, &ta)) || (st = onnx_attr_int(imp, n, "transB", 0, &tb)))
        return st;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "transA/transB must be 0 or 1 (got %" PRId64 ", %" PRId64
                               ")", ta, tb);
    onnx_value *b = n->in[1], *c = n->n_in > 2 ? n->in[2] : NULL;
    int in[3] = {-1, -1, -1};
    if (const_float(b, 2) && ta == 0 && alpha == 1.0f) {
        int64_t nout = tb ? b->c.dims[0] : b->c.dims[1];
        int row_bias = !c || (beta == 1.0f && c->kind == ONNX_VALUE_CONST && onnx_dtype_is_float(c->c.dtype) &&
                              (c->c.n == 1 || (c->c.n == (size_t)nout && c->c.rank >= 1 && c->c.rank <= 2 &&
                                               c->c.dims[c->c.rank - 1] == nout)));
        if (row_bias) {
            /* fc: y = x w^T + bias, w = [N, K] */
            if ((st = in_tensor(imp, n, 0, &in[0])) || (st = weight_tensor(imp, n, b, !tb, &in[1]))) return st;
            if (c && c->c.rank == 1 && c->c.n == (size_t)nout) {
                st = onnx_value_tensor(imp, n, c, &in[2]);
            } else if (c) {
                float *bias = pdc_alloc(imp->ctx, (size_t)nout * sizeof *bias);
                if (!bias) return PDC_ERR_OUT_OF_MEMORY;
                for (int64_t j = 0; j < nout; j++) bias[j] = c->c.f[c->c.n == 1 ? 0 : j];
                char base[4200];
                snprintf(base, sizeof base, c->uses == 1 && c->tensor < 0 ? "%.4000s" : "%.4000s_row", c->name);
                st = onnx_add_constant(imp, base, 1, &nout, bias, &in[2]);
            }
            if (st) return st;
            return emit1(imp, n, IR_OP_FC, c ? 3 : 2, in, NULL);
        }
    }
    ir_attrs a = {0};
    if (alpha != 1.0f) st = set_float(imp, n, &a, "alpha", alpha);
    if (!st && beta != 1.0f) st = set_float(imp, n, &a, "beta", beta);
    if (!st && ta) st = set_int(imp, &a, "transA", 1);
    if (!st && tb) st = set_int(imp, &a, "transB", 1);
    for (size_t i = 0; !st && i < 3; i++) st = in_tensor(imp, n, i, &in[i]);
    if (!st) st = emit1(imp, n, IR_OP_GEMM, in[2] >= 0 ? 3 : 2, in, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_matmul(onnx_importer *imp, onnx_node *n)
{
    int in[2];
    pdc_status st = in_tensor(imp, n, 0, &in[0]);
    if (st) return st;
    const ir_tensor *a = &imp->m->tensors[in[0]];
    if (const_float(n->in[1], 2) && a->rank == 2) {
        /* x [M, K] times constant [K, N]: an fc layer with weight [N, K] */
        if ((st = weight_tensor(imp, n, n->in[1], 1, &in[1]))) return st;
        return emit1(imp, n, IR_OP_FC, 2, in, NULL);
    }
    if ((st = in_tensor(imp, n, 1, &in[1]))) return st;
    return emit1(imp, n, IR_OP_MATMUL, 2, in, NULL);
}

/* ------------------------------------------------------------------ normalisation, activations */

static pdc_status emit_batchnorm(onnx_importer *imp, onnx_node *n)
{
    float eps;
    int64_t training = 0, spatial = 1;
    int in[5];
    ir_attrs a = {0};
    pdc_status st = onnx_attr_float(imp, n, "epsilon", 1e-5f, &eps);
    if (!st && imp->opset >= 14) st = onnx_attr_int(imp, n, "training_mode", 0, &training);
    if (!st) st = onnx_attr_int(imp, n, "spatial", 1, &spatial);
    if (!st && training != 0)
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                             "training_mode = %" PRId64 " is not supported (inference statistics only)", training);
    if (!st && spatial != 1)
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "spatial = %" PRId64 " is not supported", spatial);
    if (!st) st = set_float(imp, n, &a, "epsilon", eps);
    for (size_t i = 0; !st && i < 5; i++) st = in_tensor(imp, n, i, &in[i]);
    if (!st) st = emit1(imp, n, IR_OP_BATCHNORM, 5, in, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_unary_op(onnx_importer *imp, onnx_node *n, ir_op op, const ir_attrs *a)
{
    int in;
    pdc_status st = in_tensor(imp, n, 0, &in);
    return st ? st : emit1(imp, n, op, 1, &in, a);
}

static pdc_status emit_relu(onnx_importer *imp, onnx_node *n) { return emit_unary_op(imp, n, IR_OP_RELU, NULL); }
static pdc_status emit_sigmoid(onnx_importer *imp, onnx_node *n) { return emit_unary_op(imp, n, IR_OP_SIGMOID, NULL); }
static pdc_status emit_tanh(onnx_importer *imp, onnx_node *n) { return emit_unary_op(imp, n, IR_OP_TANH, NULL); }
static pdc_status emit_hardswish(onnx_importer *imp, onnx_node *n)
{
    return emit_unary_op(imp, n, IR_OP_HARDSWISH, NULL);
}

static pdc_status emit_leaky_relu(onnx_importer *imp, onnx_node *n)
{
    float alpha;
    ir_attrs a = {0};
    pdc_status st = onnx_attr_float(imp, n, "alpha", 0.01f, &alpha);
    if (!st) st = set_float(imp, n, &a, "alpha", alpha);
    if (!st) st = emit_unary_op(imp, n, IR_OP_LEAKY_RELU, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_hardsigmoid(onnx_importer *imp, onnx_node *n)
{
    float alpha, beta;
    ir_attrs a = {0};
    pdc_status st = onnx_attr_float(imp, n, "alpha", 0.2f, &alpha);
    if (!st) st = onnx_attr_float(imp, n, "beta", 0.5f, &beta);
    if (!st) st = set_float(imp, n, &a, "alpha", alpha);
    if (!st) st = set_float(imp, n, &a, "beta", beta);
    if (!st) st = emit_unary_op(imp, n, IR_OP_HARDSIGMOID, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_clip(onnx_importer *imp, onnx_node *n)
{
    ir_attrs a = {0};
    pdc_status st = PDC_OK;
    static const char *const names[2] = {"min", "max"};
    for (int j = 0; j < 2 && !st; j++) {
        if (imp->opset < 11) {
            /* Clip-6: bounds are attributes */
            float v;
            if (n->n_in > 1) st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "Clip before opset 11 takes one input");
            if (!st) st = onnx_attr_float(imp, n, names[j], 0, &v);
            if (!st && onnx_attr_find(n, names[j])) st = set_float(imp, n, &a, names[j], v);
            continue;
        }
        /* Clip-11 and later: bounds are optional inputs 1 and 2, constants here */
        const onnx_const *c;
        st = const_input(imp, n, 1 + (size_t)j, names[j], &c);
        if (!st && c && (c->n != 1 || !onnx_dtype_is_float(c->dtype)))
            st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "%s must be a float scalar", names[j]);
        if (!st && c) st = set_float(imp, n, &a, names[j], (float)onnx_const_get_f(c, 0));
    }
    if (!st) st = emit_unary_op(imp, n, IR_OP_CLIP, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_binary(onnx_importer *imp, onnx_node *n)
{
    ir_op op = !strcmp(n->op, "Add") ? IR_OP_ADD : !strcmp(n->op, "Sub") ? IR_OP_SUB
             : !strcmp(n->op, "Mul") ? IR_OP_MUL : IR_OP_DIV;
    int in[2];
    pdc_status st = in_tensor(imp, n, 0, &in[0]);
    if (!st) st = in_tensor(imp, n, 1, &in[1]);
    return st ? st : emit1(imp, n, op, 2, in, NULL);
}

/* ------------------------------------------------------------------ shape ops on activations */

static pdc_status emit_concat(onnx_importer *imp, onnx_node *n)
{
    int64_t axis;
    int in[ONNX_MAX_NODE_IO];
    ir_attrs a = {0};
    pdc_status st = onnx_attr_find(n, "axis") ? onnx_attr_int(imp, n, "axis", 0, &axis)
                                              : onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'axis' is required");
    if (!st) st = set_int(imp, &a, "axis", axis);
    for (size_t i = 0; !st && i < n->n_in; i++) {
        st = in_tensor(imp, n, i, &in[i]);
        if (!st && in[i] < 0) st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "input %zu is empty", i);
    }
    if (!st) st = emit1(imp, n, IR_OP_CONCAT, n->n_in, in, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_flatten(onnx_importer *imp, onnx_node *n)
{
    int64_t axis;
    ir_attrs a = {0};
    pdc_status st = onnx_attr_int(imp, n, "axis", 1, &axis);
    if (!st) st = set_int(imp, &a, "axis", axis);
    if (!st) st = emit_unary_op(imp, n, IR_OP_FLATTEN, &a);
    ir_attrs_free(&a);
    return st;
}

/* A reshape layer to explicit dims. */
static pdc_status emit_reshape_to(onnx_importer *imp, onnx_node *n, int rank, const int64_t *dims)
{
    if (rank < 1)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "the result is a scalar (rank 0); pdc tensors have rank >= 1");
    ir_attrs a = {0};
    pdc_status st = ir_attrs_set_ints(imp->ctx, &a, "shape", (size_t)rank, dims);
    if (!st) st = emit_unary_op(imp, n, IR_OP_RESHAPE, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_reshape(onnx_importer *imp, onnx_node *n)
{
    const onnx_const *s;
    int64_t allowzero = 0;
    pdc_status st = const_input(imp, n, 1, "the shape", &s);
    if (!st && imp->opset >= 14) st = onnx_attr_int(imp, n, "allowzero", 0, &allowzero);
    if (st) return st;
    if (!onnx_dtype_is_int(s->dtype) || s->rank != 1 || s->n < 1 || s->n > PDC_MAX_RANK)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "the shape must be a 1-D integer tensor of 1..%d values",
                               PDC_MAX_RANK);
    for (size_t i = 0; i < s->n; i++)
        if (s->i[i] == 0 && allowzero)
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "allowzero = 1 with a 0 in the shape (an empty tensor)");
    /* The IR's reshape has ONNX's meaning (0 copies the input dim, one -1 is inferred), so the shape
     * passes through unchanged and symbolic input dims keep working. */
    return emit_reshape_to(imp, n, (int)s->n, s->i);
}

static pdc_status emit_squeeze_op(onnx_importer *imp, onnx_node *n, int unsqueeze)
{
    int rank, r;
    int64_t dims[PDC_MAX_RANK], d[PDC_MAX_RANK];
    pdc_status st = onnx_value_shape(imp, n, n->in[0], unsqueeze ? "Unsqueeze" : "Squeeze", &rank, dims);
    if (!st) st = onnx_squeeze_shape(imp, n, unsqueeze, rank, dims, &r, d);
    return st ? st : emit_reshape_to(imp, n, r, d);
}

static pdc_status emit_squeeze(onnx_importer *imp, onnx_node *n) { return emit_squeeze_op(imp, n, 0); }
static pdc_status emit_unsqueeze(onnx_importer *imp, onnx_node *n) { return emit_squeeze_op(imp, n, 1); }

static pdc_status emit_transpose(onnx_importer *imp, onnx_node *n)
{
    ir_attrs a = {0};
    pdc_status st = pass_ints(imp, n, &a, "perm");
    if (!st) st = emit_unary_op(imp, n, IR_OP_TRANSPOSE, &a);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_global_avgpool(onnx_importer *imp, onnx_node *n)
{
    return emit_unary_op(imp, n, IR_OP_GLOBAL_AVGPOOL, NULL);
}

static pdc_status emit_softmax(onnx_importer *imp, onnx_node *n)
{
    int64_t axis;
    ir_attrs a = {0};
    pdc_status st = onnx_attr_int(imp, n, "axis", imp->opset >= 13 ? -1 : 1, &axis);
    int in;
    if (!st) st = in_tensor(imp, n, 0, &in);
    if (st) return st;
    const ir_tensor *x = &imp->m->tensors[in];
    int rank = x->rank;
    int last = imp->opset >= 13 || axis == -1 || (rank > 0 && axis == rank - 1);
    if (!last && rank < 0)
        return onnx_node_error(imp, n, PDC_ERR_SHAPE, "Softmax before opset 13 on axis %" PRId64 " needs the input's "
                               "rank, which depends on a symbolic input dim; give the input shapes before import "
                               "(context option \"onnx_input_shapes\", or --shape for pdc)", axis);
    if (last) {
        st = set_int(imp, &a, "axis", imp->opset >= 13 ? axis : -1);
        if (!st) st = emit1(imp, n, IR_OP_SOFTMAX, 1, &in, &a);
        ir_attrs_free(&a);
        return st;
    }
    /* opset < 13, axis not last: softmax over the flattened trailing dims [prod(< axis), prod(>= axis)] */
    int r;
    int64_t dims[PDC_MAX_RANK];
    if ((st = onnx_value_shape(imp, n, n->in[0], "Softmax with a non-last axis", &r, dims))) return st;
    if (axis < -r || axis >= r)
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "axis %" PRId64 " is out of range for rank %d", axis, r);
    if (axis < 0) axis += r;
    int64_t flat[2] = {1, 1};
    for (int i = 0; i < r; i++) flat[i >= axis] *= dims[i];
    char base[4200], *t1 = NULL, *t2 = NULL, *owned = NULL;
    snprintf(base, sizeof base, "%.4000s/flat", n->layer);
    t1 = onnx_unique_name(imp, base, 0);
    snprintf(base, sizeof base, "%.4000s/softmax", n->layer);
    t2 = onnx_unique_name(imp, base, 0);
    const char *o = out_name(imp, n, 0, &owned);
    if (!t1 || !t2 || !o) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = ir_attrs_set_ints(imp->ctx, &a, "shape", 2, flat);
    const char *const *p1 = (const char *const *)&t1;
    if (!st) st = onnx_emit(imp, n, "flatten", IR_OP_RESHAPE, 1, &in, 1, p1, &a);
    ir_attrs_free(&a);
    int mid = st ? -1 : (int)imp->m->n_tensors - 1;
    if (!st) st = set_int(imp, &a, "axis", 1);
    const char *const *p2 = (const char *const *)&t2;
    if (!st) st = onnx_emit(imp, n, NULL, IR_OP_SOFTMAX, 1, &mid, 1, p2, &a);
    ir_attrs_free(&a);
    int sm = st ? -1 : (int)imp->m->n_tensors - 1;
    if (!st) st = ir_attrs_set_ints(imp->ctx, &a, "shape", (size_t)r, dims);
    if (!st) st = onnx_emit(imp, n, "unflatten", IR_OP_RESHAPE, 1, &sm, 1, &o, &a);
    ir_attrs_free(&a);
    pdc_free(t1);
    pdc_free(t2);
    pdc_free(owned);
    return st;
}

/* ------------------------------------------------------------------ recurrent */

/* The activations attribute, if present, must be the defaults (f, g[, h] per direction). */
static pdc_status check_activations(onnx_importer *imp, const onnx_node *n, int lstm)
{
    const Onnx__AttributeProto *a = onnx_attr_find(n, "activations");
    static const char *const want[3] = {"Sigmoid", "Tanh", "Tanh"};
    size_t per = lstm ? 3 : 2;
    if (a) {
        if (a->n_strings == 0 || a->n_strings % per)
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "activations has %zu entries", a->n_strings);
        for (size_t i = 0; i < a->n_strings; i++) {
            const ProtobufCBinaryData *s = &a->strings[i];
            const char *w = want[i % per];
            if (s->len != strlen(w) || memcmp(s->data, w, s->len)) {
                char got[40];
                size_t len = s->len < 32 ? s->len : 32;
                memcpy(got, s->data, len);
                got[len] = '\0';
                char q[160];
                return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                                       "activation %zu is '%s'; pdc supports the defaults only (%s)", i,
                                       onnx_quote(got, q, sizeof q), lstm ? "Sigmoid, Tanh, Tanh" : "Sigmoid, Tanh");
            }
        }
    }
    static const char *const refused[] = {"activation_alpha", "activation_beta"};
    for (size_t i = 0; i < 2; i++) {
        const Onnx__AttributeProto *r = onnx_attr_find(n, refused[i]);
        if (r && r->n_floats)
            return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "attribute '%s' is not supported", refused[i]);
    }
    if (onnx_attr_find(n, "clip"))
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "attribute 'clip' (cell clipping) is not supported");
    return PDC_OK;
}

static pdc_status emit_rnn(onnx_importer *imp, onnx_node *n, int lstm)
{
    int64_t hidden, v;
    char dir[32];
    ir_attrs a = {0};
    pdc_status st = check_activations(imp, n, lstm);
    if (!st && !onnx_attr_find(n, "hidden_size"))
        st = onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute 'hidden_size' is required");
    if (!st) st = onnx_attr_int(imp, n, "hidden_size", 0, &hidden);
    if (!st) st = set_int(imp, &a, "hidden_size", hidden);
    if (!st) st = onnx_attr_string(imp, n, "direction", "forward", dir, sizeof dir);
    if (!st) st = ir_attrs_set_string(imp->ctx, &a, "direction", dir);
    if (!st && lstm && !(st = onnx_attr_int(imp, n, "input_forget", 0, &v)) && v != 0)
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "input_forget = %" PRId64 " is not supported", v);
    if (!st && imp->opset >= 14 && !(st = onnx_attr_int(imp, n, "layout", 0, &v)) && v != 0)
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "layout = %" PRId64 " (batch-major) is not supported", v);
    if (!st && !lstm) st = pass_int(imp, n, &a, "linear_before_reset");
    if (!st && lstm && n->n_in > 7 && n->in[7])
        st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "peephole weights (input P) are not supported");
    if (!st && n->n_in > 4 && n->in[4]) {
        /* sequence_lens: fine when every sequence has the full length */
        const onnx_const *sl;
        int xr;
        int64_t xd[PDC_MAX_RANK];
        st = const_input(imp, n, 4, "sequence_lens", &sl);
        if (!st) st = onnx_value_shape(imp, n, n->in[0], "sequence_lens", &xr, xd);
        for (size_t i = 0; !st && i < sl->n; i++)
            if (xr < 1 || onnx_const_get_i(sl, i) != xd[0])
                st = onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                                     "sequence_lens other than the full length %" PRId64 " are not supported", xd[0]);
    }
    int in[7] = {-1, -1, -1, -1, -1, -1, -1};
    size_t n_in = 3;
    for (size_t i = 0; !st && i < (lstm ? 7u : 6u); i++) {
        if (i == 4) continue; /* sequence_lens, checked above */
        st = in_tensor(imp, n, i, &in[i]);
        if (in[i] >= 0 && i + 1 > n_in) n_in = i + 1;
    }
    const char *outs[3] = {NULL, NULL, NULL};
    char *owned = NULL;
    size_t n_out = 1;
    if (!st) {
        outs[0] = out_name(imp, n, 0, &owned);
        if (!outs[0]) st = PDC_ERR_OUT_OF_MEMORY;
        for (size_t k = 1; k < n->n_out && k < (lstm ? 3u : 2u); k++) {
            outs[k] = n->out[k] ? n->out[k]->name : NULL;
            if (outs[k]) n_out = k + 1;
        }
    }
    if (!st) st = onnx_emit(imp, n, NULL, lstm ? IR_OP_LSTM : IR_OP_GRU, n_in, in, n_out, outs, &a);
    pdc_free(owned);
    ir_attrs_free(&a);
    return st;
}

static pdc_status emit_lstm(onnx_importer *imp, onnx_node *n) { return emit_rnn(imp, n, 1); }
static pdc_status emit_gru(onnx_importer *imp, onnx_node *n) { return emit_rnn(imp, n, 0); }

/* ------------------------------------------------------------------ the table */

#define MAXIO ONNX_MAX_NODE_IO
static const onnx_op_def ops[] = {
    {"Add", 2, 2, 1, 1, onnx_fold_binary, emit_binary},
    {"AveragePool", 1, 1, 1, 1, NULL, emit_avgpool},
    {"BatchNormalization", 5, 5, 1, 5, NULL, emit_batchnorm},
    {"Cast", 1, 1, 1, 1, onnx_fold_cast, emit_cast},
    {"Clip", 1, 3, 1, 1, NULL, emit_clip},
    {"Concat", 1, MAXIO, 1, 1, onnx_fold_concat, emit_concat},
    {"Constant", 0, 0, 1, 1, onnx_fold_constant, NULL},
    {"ConstantOfShape", 1, 1, 1, 1, onnx_fold_constant_of_shape, NULL},
    {"Conv", 2, 3, 1, 1, NULL, emit_conv},
    {"Div", 2, 2, 1, 1, onnx_fold_binary, emit_binary},
    {"Dropout", 1, 3, 1, 2, fold_dropout, emit_dropout},
    {"Equal", 2, 2, 1, 1, onnx_fold_equal, NULL},
    {"Expand", 2, 2, 1, 1, onnx_fold_expand, NULL},
    {"Flatten", 1, 1, 1, 1, onnx_fold_flatten, emit_flatten},
    {"GRU", 3, 6, 1, 2, NULL, emit_gru},
    {"Gather", 2, 2, 1, 1, onnx_fold_gather, NULL},
    {"Gemm", 2, 3, 1, 1, NULL, emit_gemm},
    {"GlobalAveragePool", 1, 1, 1, 1, NULL, emit_global_avgpool},
    {"HardSigmoid", 1, 1, 1, 1, NULL, emit_hardsigmoid},
    {"HardSwish", 1, 1, 1, 1, NULL, emit_hardswish},
    {"Identity", 1, 1, 1, 1, onnx_fold_identity, emit_identity},
    {"LSTM", 3, 8, 1, 3, NULL, emit_lstm},
    {"LeakyRelu", 1, 1, 1, 1, NULL, emit_leaky_relu},
    {"MatMul", 2, 2, 1, 1, NULL, emit_matmul},
    {"MaxPool", 1, 1, 1, 2, NULL, emit_maxpool},
    {"Mul", 2, 2, 1, 1, onnx_fold_binary, emit_binary},
    {"Pad", 1, 3, 1, 1, NULL, emit_pad},
    {"Range", 3, 3, 1, 1, onnx_fold_range, NULL},
    {"Relu", 1, 1, 1, 1, NULL, emit_relu},
    {"Reshape", 2, 2, 1, 1, onnx_fold_reshape, emit_reshape},
    {"Shape", 1, 1, 1, 1, onnx_fold_shape, onnx_fold_shape},
    {"Sigmoid", 1, 1, 1, 1, NULL, emit_sigmoid},
    {"Slice", 1, 5, 1, 1, onnx_fold_slice, NULL},
    {"Softmax", 1, 1, 1, 1, NULL, emit_softmax},
    {"Squeeze", 1, 2, 1, 1, onnx_fold_squeeze, emit_squeeze},
    {"Sub", 2, 2, 1, 1, onnx_fold_binary, emit_binary},
    {"Tanh", 1, 1, 1, 1, NULL, emit_tanh},
    {"Transpose", 1, 1, 1, 1, onnx_fold_transpose, emit_transpose},
    {"Unsqueeze", 1, 2, 1, 1, onnx_fold_unsqueeze, emit_unsqueeze},
    {"Where", 3, 3, 1, 1, onnx_fold_where, NULL},
};

const onnx_op_def *onnx_op_find(const char *type)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].type, type)) return &ops[i];
    return NULL;
}
