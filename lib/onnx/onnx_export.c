/*
 * onnx_export.c - the ONNX writer: an IR model as an ONNX ModelProto (opset 14), so a pruned model
 * goes back to the user's framework for fine-tuning or evaluation.
 *
 * Every layer becomes the ONNX node of the same op (fc: Gemm with transB = 1, after a Flatten when its
 * input has rank > 2), named after the layer; every constant a layer reads becomes a float initializer
 * under its own name (for a model imported from ONNX: the original initializer names), with the pruned
 * weights as they are (ONNX has no sparsity: pruned weights are the exact zeros, which the importer
 * recognises again). What passes added is expressed in plain ONNX: a fused activation becomes its own
 * node after the layer, a reordered conv's weights and bias are written in the original filter order
 * (out_perm undone), and a memory plan is left out. Clip bounds and reshape targets become small extra
 * initializers named after the layer. The message tree is built with pdc allocations (one list,
 * freed at the end) and packed by the protobuf-c code generated from onnx.proto.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ops/params.h"
#include "lib/core/fileio.h"
#include "onnx.pb-c.h"

#define EXPORT_OPSET 14
#define EXPORT_IR_VERSION 7 /* the ONNX IR version that goes with opset 14 */

typedef struct exporter {
    const ir_model *m;
    const pdc_context *ctx;
    pdc_status st;                 /* the first failure sticks */
    void **blocks;                 /* every allocation, freed together */
    size_t n_blocks, cap_blocks;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    char **names;                  /* names made up here (checked for clashes) */
    size_t n_names, cap_names;
} exporter;

static void *ex_alloc(exporter *ex, size_t n, size_t size)
{
    if (ex->st) return NULL;
    void *p = pdc_calloc(ex->ctx, n ? n : 1, size);
    if (!p || (ex->st = pdc_grow(ex->ctx, (void **)&ex->blocks, &ex->cap_blocks, ex->n_blocks + 1, sizeof(void *)))) {
        pdc_free(p);
        if (!ex->st) ex->st = PDC_ERR_OUT_OF_MEMORY;
        return NULL;
    }
    ex->blocks[ex->n_blocks++] = p;
    return p;
}

static char *ex_strdup(exporter *ex, const char *s)
{
    char *d = ex_alloc(ex, strlen(s) + 1, 1);
    if (d) memcpy(d, s, strlen(s) + 1);
    return d;
}

static int name_taken(const exporter *ex, const char *s)
{
    if (ir_model_find_tensor(ex->m, s) >= 0) return 1;
    for (size_t i = 0; i < ex->n_names; i++)
        if (!strcmp(ex->names[i], s)) return 1;
    return 0;
}

/* A value name that is no IR tensor and not made up before: base + suffix (+ "_2", "_3", ...). */
static char *ex_new_name(exporter *ex, const char *base, const char *suffix)
{
    size_t cap = strlen(base) + strlen(suffix) + 24;
    char *s = ex_alloc(ex, cap, 1);
    if (!s) return NULL;
    snprintf(s, cap, "%s%s", base, suffix);
    for (unsigned k = 2; name_taken(ex, s); k++) snprintf(s, cap, "%s%s_%u", base, suffix, k);
    if ((ex->st = pdc_grow(ex->ctx, (void **)&ex->names, &ex->cap_names, ex->n_names + 1, sizeof(char *)))) return NULL;
    ex->names[ex->n_names++] = s;
    return s;
}

/* ------------------------------------------------------------------ messages */

static Onnx__NodeProto *ex_node(exporter *ex, const char *op, const char *name, size_t n_in, const char *const *in,
                                size_t n_out, const char *const *out)
{
    Onnx__NodeProto *n = ex_alloc(ex, 1, sizeof *n);
    char **ins = ex_alloc(ex, n_in, sizeof *ins), **outs = ex_alloc(ex, n_out, sizeof *outs);
    if (!n || !ins || !outs) return NULL;
    onnx__node_proto__init(n);
    for (size_t i = 0; i < n_in; i++) ins[i] = ex_strdup(ex, in[i] ? in[i] : "");
    for (size_t i = 0; i < n_out; i++) outs[i] = ex_strdup(ex, out[i] ? out[i] : "");
    n->n_input = n_in;
    n->input = ins;
    n->n_output = n_out;
    n->output = outs;
    n->op_type = ex_strdup(ex, op);
    n->name = ex_strdup(ex, name);
    /* room for every attribute an op here can have */
    n->attribute = ex_alloc(ex, 8, sizeof *n->attribute);
    if (ex->st || (ex->st = pdc_grow(ex->ctx, (void **)&ex->nodes, &ex->cap_nodes, ex->n_nodes + 1, sizeof(void *))))
        return NULL;
    ex->nodes[ex->n_nodes++] = n;
    return n;
}

static Onnx__AttributeProto *ex_attr(exporter *ex, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = n && n->n_attribute < 8 ? ex_alloc(ex, 1, sizeof *a) : NULL;
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = ex_strdup(ex, name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

static void attr_int(exporter *ex, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ex_attr(ex, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
}

static void attr_float(exporter *ex, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = ex_attr(ex, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = v;
}

static void attr_ints(exporter *ex, Onnx__NodeProto *n, const char *name, size_t count, const int64_t *v)
{
    Onnx__AttributeProto *a = ex_attr(ex, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = a ? ex_alloc(ex, count, sizeof *copy) : NULL;
    if (!copy) return;
    if (count) memcpy(copy, v, count * sizeof *copy);
    a->n_ints = count;
    a->ints = copy;
}

static void attr_string(exporter *ex, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = ex_attr(ex, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *copy = a ? ex_strdup(ex, v) : NULL;
    if (!copy) return;
    a->has_s = 1;
    a->s.data = (uint8_t *)copy;
    a->s.len = strlen(copy);
}

/* The IR attributes of l that ONNX spells the same way, in this op's types: "name" plus a type code
 * i (int), I (ints), f (float), s (string). Absent ones stay absent (ONNX has the same defaults). */
static void copy_attrs(exporter *ex, Onnx__NodeProto *n, const ir_layer *l, const char *const *spec)
{
    for (size_t k = 0; spec[k]; k += 2) {
        const char *name = spec[k];
        const ir_attr *a = ir_attrs_find(&l->attrs, name);
        if (!a) continue;
        size_t cnt;
        const int64_t *v;
        switch (spec[k + 1][0]) {
        case 'i': attr_int(ex, n, name, ir_attr_int(&l->attrs, name, 0)); break;
        case 'f': attr_float(ex, n, name, ir_attr_float(&l->attrs, name, 0)); break;
        case 's': attr_string(ex, n, name, ir_attr_string(&l->attrs, name, "")); break;
        case 'I':
            v = ir_attr_ints(&l->attrs, name, &cnt);
            attr_ints(ex, n, name, cnt, v);
            break;
        }
    }
}

/* Little-endian bytes of n floats or int64s, as raw_data. */
static void raw_f32(exporter *ex, Onnx__TensorProto *t, const float *v, size_t n)
{
    uint8_t *b = ex_alloc(ex, n * 4, 1);
    if (!b) return;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[i * 4 + (size_t)k] = (uint8_t)(u >> (8 * k));
    }
    t->has_raw_data = 1;
    t->raw_data.data = b;
    t->raw_data.len = n * 4;
}

static void raw_i64(exporter *ex, Onnx__TensorProto *t, const int64_t *v, size_t n)
{
    uint8_t *b = ex_alloc(ex, n * 8, 1);
    if (!b) return;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++) b[i * 8 + (size_t)k] = (uint8_t)((uint64_t)v[i] >> (8 * k));
    t->has_raw_data = 1;
    t->raw_data.data = b;
    t->raw_data.len = n * 8;
}

static Onnx__TensorProto *ex_init(exporter *ex, const char *name, int32_t dtype, int rank, const int64_t *dims)
{
    Onnx__TensorProto *t = ex_alloc(ex, 1, sizeof *t);
    int64_t *d = ex_alloc(ex, (size_t)rank, sizeof *d);
    if (!t || !d) return NULL;
    onnx__tensor_proto__init(t);
    t->name = ex_strdup(ex, name);
    t->has_data_type = 1;
    t->data_type = dtype;
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *d);
    t->n_dims = (size_t)rank;
    t->dims = d;
    if (ex->st || (ex->st = pdc_grow(ex->ctx, (void **)&ex->inits, &ex->cap_inits, ex->n_inits + 1, sizeof(void *))))
        return NULL;
    ex->inits[ex->n_inits++] = t;
    return t;
}

/* A scalar float initializer named after the layer (Clip bounds). */
static const char *scalar_init(exporter *ex, const ir_layer *l, const char *suffix, float v)
{
    char *name = ex_new_name(ex, l->name, suffix);
    Onnx__TensorProto *t = name ? ex_init(ex, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL) : NULL;
    if (t) raw_f32(ex, t, &v, 1);
    return name;
}

static Onnx__ValueInfoProto *value_info(exporter *ex, const ir_tensor *t)
{
    Onnx__ValueInfoProto *vi = ex_alloc(ex, 1, sizeof *vi);
    Onnx__TypeProto *tp = ex_alloc(ex, 1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ex_alloc(ex, 1, sizeof *tt);
    if (!vi || !tp || !tt) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = ex_strdup(ex, t->name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    if (t->rank < 0) return vi; /* shape not known yet */
    Onnx__TensorShapeProto *sh = ex_alloc(ex, 1, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims = ex_alloc(ex, (size_t)t->rank, sizeof *dims);
    if (!sh || !dims) return NULL;
    onnx__tensor_shape_proto__init(sh);
    for (int i = 0; i < t->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = ex_alloc(ex, 1, sizeof *d);
        if (!d) return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (t->dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = t->dims[i];
        } else {
            char buf[32];
            snprintf(buf, sizeof buf, "d%d", i);
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = ex_new_name(ex, t->name, buf);
        }
        dims[i] = d;
    }
    sh->n_dim = (size_t)t->rank;
    sh->dim = dims;
    tt->shape = sh;
    return vi;
}

/* ------------------------------------------------------------------ layers */

static const char *tname(const ir_model *m, int t) { return t >= 0 ? m->tensors[t].name : ""; }

static const char *const conv_attrs[] = {"strides", "I", "pads", "I", "dilations", "I", "group", "i", "kernel_shape", "I", NULL};
static const char *const gemm_attrs[] = {"alpha", "f", "beta", "f", "transA", "i", "transB", "i", NULL};
static const char *const pool_attrs[] = {"kernel_shape", "I", "strides", "I", "pads", "I", "dilations", "I",
                                         "ceil_mode", "i", "count_include_pad", "i", NULL};
static const char *const rnn_attrs[] = {"hidden_size", "i", "direction", "s", "linear_before_reset", "i", NULL};

typedef struct op_map {
    ir_op op;
    const char *onnx;
    const char *const *attrs;
} op_map;

static const char *const no_attrs[] = {NULL};
static const char *const axis_attr[] = {"axis", "i", NULL};
static const char *const alpha_attr[] = {"alpha", "f", NULL};
static const char *const hsig_attrs[] = {"alpha", "f", "beta", "f", NULL};
static const char *const eps_attr[] = {"epsilon", "f", NULL};
static const char *const perm_attr[] = {"perm", "I", NULL};

/* Ops that map one to one: same inputs, outputs and attribute names. */
static const op_map direct[] = {
    {IR_OP_CONV, "Conv", conv_attrs},          {IR_OP_GEMM, "Gemm", gemm_attrs},
    {IR_OP_MATMUL, "MatMul", no_attrs},        {IR_OP_BATCHNORM, "BatchNormalization", eps_attr},
    {IR_OP_RELU, "Relu", no_attrs},            {IR_OP_LEAKY_RELU, "LeakyRelu", alpha_attr},
    {IR_OP_SIGMOID, "Sigmoid", no_attrs},      {IR_OP_TANH, "Tanh", no_attrs},
    {IR_OP_HARDSWISH, "HardSwish", no_attrs},  {IR_OP_HARDSIGMOID, "HardSigmoid", hsig_attrs},
    {IR_OP_ADD, "Add", no_attrs},              {IR_OP_MUL, "Mul", no_attrs},
    {IR_OP_SUB, "Sub", no_attrs},              {IR_OP_DIV, "Div", no_attrs},
    {IR_OP_CONCAT, "Concat", axis_attr},       {IR_OP_MAXPOOL, "MaxPool", pool_attrs},
    {IR_OP_AVGPOOL, "AveragePool", pool_attrs}, {IR_OP_GLOBAL_AVGPOOL, "GlobalAveragePool", no_attrs},
    {IR_OP_FLATTEN, "Flatten", axis_attr},     {IR_OP_TRANSPOSE, "Transpose", perm_attr},
    {IR_OP_SOFTMAX, "Softmax", axis_attr},     {IR_OP_LSTM, "LSTM", rnn_attrs},
    {IR_OP_GRU, "GRU", rnn_attrs},
};

static const op_map *find_direct(ir_op op)
{
    for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++)
        if (direct[i].op == op) return &direct[i];
    return NULL;
}

/* The node for a fused activation after layer l: reads `pre`, writes `out`. */
static void emit_activation(exporter *ex, const ir_layer *l, const ir_fused_params *fp, const char *pre,
                            const char *out)
{
    static const char *const onnx_op[] = {[IR_ACT_RELU] = "Relu", [IR_ACT_CLIP] = "Clip",
                                          [IR_ACT_LEAKY_RELU] = "LeakyRelu", [IR_ACT_SIGMOID] = "Sigmoid",
                                          [IR_ACT_TANH] = "Tanh", [IR_ACT_HARDSWISH] = "HardSwish"};
    size_t cap = strlen(l->name) + 8;
    char *name = ex_alloc(ex, cap, 1);
    if (!name) return;
    snprintf(name, cap, "%s/act", l->name);
    const char *in[3] = {pre, "", ""};
    size_t n_in = 1;
    if (fp->act == IR_ACT_CLIP) {
        if (fp->act_min != -INFINITY) in[1] = scalar_init(ex, l, ".act_min", fp->act_min), n_in = 2;
        if (fp->act_max != INFINITY) in[2] = scalar_init(ex, l, ".act_max", fp->act_max), n_in = 3;
    }
    Onnx__NodeProto *n = ex_node(ex, onnx_op[fp->act], name, n_in, in, 1, &out);
    if (fp->act == IR_ACT_LEAKY_RELU) attr_float(ex, n, "alpha", fp->act_alpha);
}

static pdc_status emit_layer(exporter *ex, size_t li)
{
    const ir_model *m = ex->m;
    const ir_layer *l = &m->layers[li];
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(m, l, &fp);
    if (st) return st;
    size_t n_in = l->n_inputs, n_out = l->n_outputs;
    const char **in = ex_alloc(ex, n_in, sizeof *in), **out = ex_alloc(ex, n_out, sizeof *out);
    if (!in || !out) return ex->st;
    for (size_t i = 0; i < n_in; i++) in[i] = tname(m, l->inputs[i]);
    for (size_t i = 0; i < n_out; i++) out[i] = tname(m, l->outputs[i]);
    const char *final_out = out[0];
    if (fp.act != IR_ACT_NONE) out[0] = ex_new_name(ex, final_out, "_preact");
    Onnx__NodeProto *n = NULL;
    const op_map *d = find_direct(l->op);
    if (l->op == IR_OP_AVGPOOL) {
        size_t cnt;
        const int64_t *dil = ir_attr_ints(&l->attrs, "dilations", &cnt);
        for (size_t i = 0; dil && i < cnt; i++)
            if (dil[i] != 1)
                return pdc_error(ex->ctx, PDC_ERR_UNSUPPORTED, "ONNX export: layer '%s': avgpool with dilations needs "
                                 "opset 19 (pdc writes opset %d)", l->name, EXPORT_OPSET);
    }
    if (d) {
        n = ex_node(ex, d->onnx, l->name, n_in, in, n_out, out);
        copy_attrs(ex, n, l, d->attrs);
    } else if (l->op == IR_OP_FC) {
        /* y = flatten(x) w^T + b */
        const ir_tensor *x = &m->tensors[l->inputs[0]];
        const char *gin[3] = {in[0], in[1], n_in > 2 ? in[2] : ""};
        if (x->rank != 2) {
            size_t cap = strlen(l->name) + 10;
            char *fname = ex_alloc(ex, cap, 1);
            const char *flat = ex_new_name(ex, x->name, "_flat");
            if (fname) snprintf(fname, cap, "%s/flatten", l->name);
            Onnx__NodeProto *f = fname && flat ? ex_node(ex, "Flatten", fname, 1, &in[0], 1, &flat) : NULL;
            attr_int(ex, f, "axis", 1);
            gin[0] = flat;
        }
        n = ex_node(ex, "Gemm", l->name, n_in > 2 && l->inputs[2] >= 0 ? 3 : 2, gin, 1, out);
        attr_int(ex, n, "transB", 1);
    } else if (l->op == IR_OP_CLIP) {
        float lo = ir_attr_float(&l->attrs, "min", -INFINITY), hi = ir_attr_float(&l->attrs, "max", INFINITY);
        const char *cin[3] = {in[0], "", ""};
        size_t nc = 1;
        if (lo != -INFINITY) cin[1] = scalar_init(ex, l, ".min", lo), nc = 2;
        if (hi != INFINITY) cin[2] = scalar_init(ex, l, ".max", hi), nc = 3;
        n = ex_node(ex, "Clip", l->name, nc, cin, 1, out);
    } else if (l->op == IR_OP_RESHAPE) {
        size_t cnt;
        const int64_t *shape = ir_attr_ints(&l->attrs, "shape", &cnt);
        const char *sname = ex_new_name(ex, l->name, ".shape");
        int64_t dims[1] = {(int64_t)cnt};
        Onnx__TensorProto *t = sname ? ex_init(ex, sname, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, dims) : NULL;
        if (t) raw_i64(ex, t, shape, cnt);
        const char *rin[2] = {in[0], sname};
        n = ex_node(ex, "Reshape", l->name, 2, rin, 1, out);
    } else {
        return pdc_error(ex->ctx, PDC_ERR_UNSUPPORTED, "ONNX export: layer '%s': op %s has no ONNX mapping", l->name,
                         ir_op_get_info(l->op)->name);
    }
    (void)n;
    if (!ex->st && fp.act != IR_ACT_NONE) emit_activation(ex, l, &fp, out[0], final_out);
    return ex->st;
}

/* ------------------------------------------------------------------ constants */

/* The out_perm of the conv that reads constant t as weight (1) or bias (2), if any. */
static const int64_t *perm_of(const ir_model *m, int t, size_t *users)
{
    const int64_t *perm = NULL;
    *users = 0;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        for (size_t i = 0; i < l->n_inputs; i++) {
            if (l->inputs[i] != t) continue;
            (*users)++;
            size_t n;
            const int64_t *p = ir_attr_ints(&l->attrs, "out_perm", &n);
            if (p && (i == 1 || i == 2)) perm = p;
        }
    }
    return perm;
}

static pdc_status emit_constant(exporter *ex, int ti)
{
    const ir_tensor *t = &ex->m->tensors[ti];
    size_t users, n = ir_tensor_numel(t);
    const int64_t *perm = perm_of(ex->m, ti, &users);
    if (!users) return PDC_OK; /* not read by any layer */
    Onnx__TensorProto *init = ex_init(ex, t->name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, t->rank, t->dims);
    if (!init) return ex->st;
    if (!perm) {
        raw_f32(ex, init, t->data, n);
        return ex->st;
    }
    if (users > 1)
        return pdc_error(ex->ctx, PDC_ERR_UNSUPPORTED, "ONNX export: constant '%s' is stored in reordered filter order "
                         "(out_perm) but read by %zu layers", t->name, users);
    /* undo the reorder: stored filter j is original filter perm[j] */
    float *orig = pdc_alloc(ex->ctx, n * sizeof *orig);
    if (!orig) return ex->st = PDC_ERR_OUT_OF_MEMORY;
    size_t rows = (size_t)t->dims[0], row = n / rows;
    for (size_t j = 0; j < rows; j++) memcpy(orig + (size_t)perm[j] * row, t->data + j * row, row * sizeof *orig);
    raw_f32(ex, init, orig, n);
    pdc_free(orig);
    return ex->st;
}

/* ------------------------------------------------------------------ the model */

static pdc_status build(exporter *ex, Onnx__ModelProto *mp, Onnx__GraphProto *g, Onnx__OperatorSetIdProto *opset)
{
    const ir_model *m = ex->m;
    pdc_status st = PDC_OK;
    for (size_t li = 0; li < m->n_layers && !st; li++) st = emit_layer(ex, li);
    for (size_t t = 0; t < m->n_tensors && !st; t++)
        if (m->tensors[t].kind == IR_TENSOR_CONST) st = emit_constant(ex, (int)t);
    if (st) return st;
    Onnx__ValueInfoProto **ins = ex_alloc(ex, m->n_inputs, sizeof *ins), **outs = ex_alloc(ex, m->n_outputs, sizeof *outs);
    for (size_t i = 0; ins && i < m->n_inputs; i++) ins[i] = value_info(ex, &m->tensors[m->inputs[i]]);
    for (size_t i = 0; outs && i < m->n_outputs; i++) outs[i] = value_info(ex, &m->tensors[m->outputs[i]]);
    if (ex->st) return ex->st;
    onnx__graph_proto__init(g);
    g->name = ex_strdup(ex, m->name);
    g->n_node = ex->n_nodes;
    g->node = ex->nodes;
    g->n_initializer = ex->n_inits;
    g->initializer = ex->inits;
    g->n_input = m->n_inputs;
    g->input = ins;
    g->n_output = m->n_outputs;
    g->output = outs;
    onnx__operator_set_id_proto__init(opset);
    opset->domain = ex_strdup(ex, "");
    opset->has_version = 1;
    opset->version = EXPORT_OPSET;
    onnx__model_proto__init(mp);
    mp->has_ir_version = 1;
    mp->ir_version = EXPORT_IR_VERSION;
    mp->producer_name = ex_strdup(ex, "pdc");
    mp->producer_version = ex_strdup(ex, pdc_version_string());
    mp->graph = g;
    return ex->st;
}

static pdc_status onnx_export(const ir_model *m, void **data_out, size_t *size_out)
{
    exporter ex = {.m = m, .ctx = m->ctx};
    Onnx__ModelProto mp;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset, *opsets[1] = {&opset};
    pdc_status st = build(&ex, &mp, &g, &opset);
    if (!st) {
        mp.n_opset_import = 1;
        mp.opset_import = opsets;
        size_t size = onnx__model_proto__get_packed_size(&mp);
        uint8_t *buf = pdc_alloc(m->ctx, size ? size : 1);
        if (!buf) {
            st = PDC_ERR_OUT_OF_MEMORY;
        } else if (onnx__model_proto__pack(&mp, buf) != size) {
            pdc_free(buf);
            st = pdc_error(m->ctx, PDC_ERR_INTERNAL, "ONNX export: protobuf-c packed a different size than it announced");
        } else {
            *data_out = buf;
            *size_out = size;
        }
    }
    for (size_t i = 0; i < ex.n_blocks; i++) pdc_free(ex.blocks[i]);
    pdc_free(ex.blocks);
    pdc_free(ex.nodes);
    pdc_free(ex.inits);
    pdc_free(ex.names);
    return st;
}

PDC_API pdc_status pdc_model_save_onnx(const pdc_model *model, const char *path)
{
    if (!model) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: model is NULL", __func__);
    PDC_CHECK_ARG(model->ctx, path, "path");
    void *data;
    size_t size;
    pdc_status st = onnx_export(model, &data, &size);
    if (st) return st;
    st = pdc_file_write_atomic(model->ctx, path, data, size);
    pdc_free(data);
    return st;
}
