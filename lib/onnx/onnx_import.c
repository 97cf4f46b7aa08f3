/*
 * onnx_import.c - the graph walk of the ONNX importer.
 *
 *  1. Names: every initializer, graph input and node output is one value, found by name through a
 *     hash table; a name defined twice is an error.
 *  2. Liveness: only nodes that (transitively) feed a graph output are imported, so dead branches
 *     cannot fail the import; every input of a live node must be defined somewhere.
 *  3. Order: live nodes are visited in topological order (Kahn's algorithm, lowest file index first,
 *     so a sorted file keeps its order); nodes left over form a cycle, which is reported.
 *  4. Each node is folded (all inputs constant and the op can be evaluated here) or translated
 *     into IR layers by onnx_ops.c. Initializers are decoded when first read.
 *  5. Graph outputs are marked under their ONNX names, then pruned weights are recognised.
 * IR tensors keep the ONNX value names and IR layers the node names (or op_type + "_" + index for
 * unnamed nodes), so `pdc inspect` shows the names the exporter wrote.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/onnx/onnx.h"
#include "lib/shape_list.h"

static const char *nz(const char *s) { return s ? s : ""; }

/* ------------------------------------------------------------------ errors */

pdc_status onnx_node_error(const onnx_importer *imp, const onnx_node *n, pdc_status status, const char *fmt, ...)
{
    char msg[768], qn[160], qo[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pdc_error(imp->ctx, status, "ONNX: node '%s' (%s, opset %" PRId64 "): %s", onnx_quote(n->layer, qn, sizeof qn),
                     onnx_quote(n->op, qo, sizeof qo), imp->opset, msg);
}

/* ------------------------------------------------------------------ the value table */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

onnx_value *onnx_value_find(const onnx_importer *imp, const char *name)
{
    if (!imp->n_slots || !name) return NULL;
    size_t mask = imp->n_slots - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t s = imp->slots[i];
        if (!s) return NULL;
        if (!strcmp(imp->values[s - 1].name, name)) return &imp->values[s - 1];
    }
}

/* Adds a value (the array was sized up front, so pointers to values stay valid). */
static onnx_value *value_add(onnx_importer *imp, const char *name)
{
    size_t mask = imp->n_slots - 1, i = (size_t)hash_name(name) & mask;
    while (imp->slots[i]) i = (i + 1) & mask;
    onnx_value *v = &imp->values[imp->n_values];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->tensor = -1;
    v->producer = -1;
    imp->slots[i] = ++imp->n_values;
    return v;
}

char *onnx_unique_name(const onnx_importer *imp, const char *base, int layer)
{
    char buf[4200];
    for (unsigned k = 0;; k++) {
        if (k == 0) snprintf(buf, sizeof buf, "%s", base);
        else snprintf(buf, sizeof buf, "%.4000s_%u", base, k);
        /* layers and tensors are separate name spaces: a layer may share its output's name */
        int taken = layer ? ir_model_find_layer(imp->m, buf) >= 0
                          : ir_model_find_tensor(imp->m, buf) >= 0 || onnx_value_find(imp, buf);
        if (!taken) return pdc_strdup(imp->ctx, buf);
    }
}

/* ------------------------------------------------------------------ values -> IR */

pdc_status onnx_add_constant(onnx_importer *imp, const char *base, int rank, const int64_t *dims, float *data,
                             int *tensor)
{
    char *name = onnx_unique_name(imp, base, 0);
    if (!name) {
        pdc_free(data);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    pdc_status st = ir_model_add_constant_owned(imp->m, name, rank, dims, data);
    pdc_free(name);
    if (st) return st;
    *tensor = (int)imp->m->n_tensors - 1;
    return PDC_OK;
}

pdc_status onnx_value_tensor(onnx_importer *imp, const onnx_node *n, onnx_value *v, int *tensor)
{
    char q[160];
    if (v->tensor >= 0) {
        *tensor = v->tensor;
        return PDC_OK;
    }
    if (v->kind != ONNX_VALUE_CONST)
        return onnx_node_error(imp, n, PDC_ERR_INTERNAL, "input '%s' has no tensor", onnx_quote(v->name, q, sizeof q));
    onnx_const *c = &v->c;
    if (!onnx_dtype_is_float(c->dtype))
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED,
                               "input '%s' is a constant of element type %s; pdc layers compute on float tensors only",
                               onnx_quote(v->name, q, sizeof q), onnx_dtype_name(c->dtype));
    if (c->n == 0)
        return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "input '%s' is an empty constant",
                               onnx_quote(v->name, q, sizeof q));
    if (!ir_name_valid(v->name))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "constant name '%s' is not a valid tensor name",
                               onnx_quote(v->name, q, sizeof q));
    float *data = c->f;
    if (c->borrowed) {
        /* already handed to the IR under another shape: copy */
        data = pdc_alloc(imp->ctx, c->n * sizeof *data);
        if (!data) return PDC_ERR_OUT_OF_MEMORY;
        memcpy(data, c->f, c->n * sizeof *data);
    }
    pdc_status st = ir_model_add_constant_owned(imp->m, v->name, c->rank, c->dims, data);
    if (!c->borrowed) {
        if (st) c->f = NULL; /* freed by the failed call */
        c->borrowed = !st;
    }
    if (st) {
        pdc_error_prefix(imp->ctx, "ONNX: constant '%s'", onnx_quote(v->name, q, sizeof q));
        return st;
    }
    v->tensor = (int)imp->m->n_tensors - 1;
    *tensor = v->tensor;
    return PDC_OK;
}

pdc_status onnx_value_shape(const onnx_importer *imp, const onnx_node *n, const onnx_value *v, const char *why,
                            int *rank, int64_t *dims)
{
    if (v->kind == ONNX_VALUE_CONST) {
        *rank = v->c.rank;
        memcpy(dims, v->c.dims, sizeof v->c.dims);
        return PDC_OK;
    }
    const ir_tensor *t = &imp->m->tensors[v->tensor];
    int known = t->rank >= 0;
    for (int i = 0; known && i < t->rank; i++) known = t->dims[i] >= 0;
    if (!known) {
        char q[160];
        return onnx_node_error(imp, n, PDC_ERR_SHAPE,
                               "%s needs the shape of '%s', which depends on a symbolic input dim; give the input "
                               "shapes before import (context option \"onnx_input_shapes\", or --shape for pdc)",
                               why, onnx_quote(v->name, q, sizeof q));
    }
    *rank = t->rank;
    memset(dims, 0, PDC_MAX_RANK * sizeof *dims);
    memcpy(dims, t->dims, (size_t)t->rank * sizeof *dims);
    return PDC_OK;
}

void onnx_define_runtime(onnx_node *n, size_t k, int tensor)
{
    onnx_value *v = k < n->n_out ? n->out[k] : NULL;
    if (!v) return;
    v->kind = ONNX_VALUE_RUNTIME;
    v->tensor = tensor;
}

void onnx_define_const(onnx_node *n, size_t k, onnx_const *c)
{
    onnx_value *v = k < n->n_out ? n->out[k] : NULL;
    if (!v) {
        onnx_const_free(c);
        return;
    }
    onnx_const_free(&v->c);
    v->c = *c;
    memset(c, 0, sizeof *c);
    v->kind = ONNX_VALUE_CONST;
    v->tensor = -1;
}

pdc_status onnx_emit(onnx_importer *imp, const onnx_node *n, const char *suffix, ir_op op, size_t n_in, const int *in,
                     size_t n_out, const char *const *out, const ir_attrs *attrs)
{
    const char *in_names[ONNX_MAX_NODE_IO];
    if (n_in > ONNX_MAX_NODE_IO) return onnx_node_error(imp, n, PDC_ERR_UNSUPPORTED, "too many inputs (%zu)", n_in);
    for (size_t i = 0; i < n_in; i++) in_names[i] = in[i] >= 0 ? imp->m->tensors[in[i]].name : NULL;
    char *name = NULL;
    if (suffix) {
        char base[4200];
        snprintf(base, sizeof base, "%.4000s/%s", n->layer, suffix);
        if (!(name = onnx_unique_name(imp, base, 1))) return PDC_ERR_OUT_OF_MEMORY;
    }
    pdc_status st = ir_model_add_layer(imp->m, name ? name : n->layer, op, n_in, in_names, n_out, out, attrs);
    pdc_free(name);
    if (st) {
        char qn[160], qo[160];
        pdc_error_prefix(imp->ctx, "ONNX: node '%s' (%s, opset %" PRId64 ")", onnx_quote(n->layer, qn, sizeof qn),
                         onnx_quote(n->op, qo, sizeof qo), imp->opset);
        return st;
    }
    for (size_t k = 0; k < n->n_out; k++) {
        if (!n->out[k]) continue;
        for (size_t j = 0; j < n_out; j++)
            if (out[j] && !strcmp(out[j], n->out[k]->name))
                onnx_define_runtime((onnx_node *)n, k, ir_model_find_tensor(imp->m, out[j]));
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ graph inputs */

static pdc_status add_graph_input(onnx_importer *imp, const Onnx__ValueInfoProto *vi, onnx_value *v)
{
    char q[160];
    const char *name = v->name;
    onnx_quote(name, q, sizeof q);
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED, "ONNX: graph input '%s' is not a tensor", q);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int32_t et = tt->has_elem_type ? tt->elem_type : 0;
    if (et != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED,
                         "ONNX: graph input '%s' has element type %s; pdc models take FLOAT inputs only", q,
                         onnx_dtype_name(et));
    if (!tt->shape)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED, "ONNX: graph input '%s' has no shape (not even its rank)", q);
    size_t rank = tt->shape->n_dim;
    if (rank < 1 || rank > PDC_MAX_RANK)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED, "ONNX: graph input '%s' has rank %zu (pdc takes 1..%d)", q, rank,
                         PDC_MAX_RANK);
    int64_t dims[PDC_MAX_RANK];
    for (size_t i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        if (!d || d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            dims[i] = -1; /* dim_param or unknown: symbolic, fixed later with pdc_model_set_input_shape */
            continue;
        }
        if (d->dim_value < 1 || d->dim_value > IR_DIM_MAX)
            return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED, "ONNX: graph input '%s': dim %zu is %" PRId64
                             " (pdc takes 1..%d)", q, i, d->dim_value, IR_DIM_MAX);
        dims[i] = d->dim_value;
    }
    /* The caller may give shapes up front (option onnx_input_shapes), for models whose shape
     * arithmetic depends on a symbolic dim. */
    int sr;
    int64_t sd[PDC_MAX_RANK];
    if (pdc_shape_list_find(imp->ctx->onnx_input_shapes, name, &sr, sd)) {
        for (size_t i = 0; i < rank && (size_t)sr == rank; i++)
            if (dims[i] != -1 && dims[i] != sd[i]) sr = -1;
        if ((size_t)sr != rank)
            return pdc_error(imp->ctx, PDC_ERR_SHAPE, "ONNX: graph input '%s': option onnx_input_shapes gives a "
                             "shape that does not match the declared one (rank %zu)", q, rank);
        memcpy(dims, sd, rank * sizeof *dims);
    }
    pdc_status st = ir_model_add_input(imp->m, name, (int)rank, dims);
    if (st) {
        pdc_error_prefix(imp->ctx, "ONNX: graph input '%s'", q);
        return st;
    }
    v->kind = ONNX_VALUE_RUNTIME;
    v->tensor = (int)imp->m->n_tensors - 1;
    return PDC_OK;
}

/* ------------------------------------------------------------------ initializers */

static pdc_status decode_initializer(onnx_importer *imp, onnx_value *v)
{
    char what[256], q[160];
    snprintf(what, sizeof what, "ONNX: initializer '%s'", onnx_quote(v->name, q, sizeof q));
    pdc_status st = onnx_tensor_decode(imp->ctx, v->init, what, &v->c);
    if (st) return st;
    v->kind = ONNX_VALUE_CONST;
    /* The decoded copy is all we need: release the protobuf bytes now (peak memory). */
    Onnx__TensorProto *t = v->init;
    if (t->raw_data.data && imp->alloc) {
        imp->alloc->free(imp->alloc->allocator_data, t->raw_data.data);
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
        t->has_raw_data = 0;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ nodes */

static pdc_status translate_node(onnx_importer *imp, const Onnx__NodeProto *np, size_t index)
{
    onnx_node n;
    memset(&n, 0, sizeof n);
    n.proto = np;
    n.index = index;
    n.op = nz(np->op_type);
    char base[4200], q[160];
    if (np->name && *np->name && ir_name_valid(np->name)) snprintf(base, sizeof base, "%s", np->name);
    else snprintf(base, sizeof base, "%.100s_%zu", *n.op ? n.op : "node", index);
    if (!ir_name_valid(base)) snprintf(base, sizeof base, "node_%zu", index);
    n.layer = onnx_unique_name(imp, base, 1);
    if (!n.layer) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = PDC_OK;
    const char *domain = nz(np->domain);
    const onnx_op_def *def = NULL;
    if (!*n.op) {
        st = onnx_node_error(imp, &n, PDC_ERR_INVALID_MODEL, "the node has no op_type");
    } else if (*domain && strcmp(domain, "ai.onnx")) {
        st = onnx_node_error(imp, &n, PDC_ERR_UNSUPPORTED, "op %s of domain '%s' is not supported (only the default "
                             "domain ai.onnx is)", onnx_quote(n.op, q, sizeof q), domain);
    } else if (!(def = onnx_op_find(n.op))) {
        st = onnx_node_error(imp, &n, PDC_ERR_UNSUPPORTED,
                             "op %s is not supported by pdc's ONNX importer (docs/onnx.md, section \"Supported ops\", "
                             "lists the supported ops)", onnx_quote(n.op, q, sizeof q));
    } else if (np->n_input > ONNX_MAX_NODE_IO || np->n_output > ONNX_MAX_NODE_IO) {
        st = onnx_node_error(imp, &n, PDC_ERR_UNSUPPORTED, "%zu inputs and %zu outputs (at most %d each)", np->n_input,
                             np->n_output, ONNX_MAX_NODE_IO);
    }
    if (!st) {
        n.n_in = np->n_input;
        n.n_out = np->n_output;
        while (n.n_in && !*nz(np->input[n.n_in - 1])) n.n_in--; /* trailing "" = absent optional inputs */
        if (n.n_in < (size_t)def->min_in || n.n_in > (size_t)def->max_in)
            st = onnx_node_error(imp, &n, PDC_ERR_INVALID_MODEL, "has %zu inputs, %s takes %d..%d", n.n_in, def->type,
                                 def->min_in, def->max_in);
        else if (n.n_out < (size_t)def->min_out || n.n_out > (size_t)def->max_out)
            st = onnx_node_error(imp, &n, PDC_ERR_INVALID_MODEL, "has %zu outputs, %s gives %d..%d", n.n_out,
                                 def->type, def->min_out, def->max_out);
    }
    int all_const = 1;
    for (size_t i = 0; !st && i < n.n_in; i++) {
        const char *in = nz(np->input[i]);
        if (!*in) {
            if (i < (size_t)def->min_in)
                st = onnx_node_error(imp, &n, PDC_ERR_INVALID_MODEL, "required input %zu is empty", i);
            continue;
        }
        onnx_value *v = onnx_value_find(imp, in);
        if (v && v->kind == ONNX_VALUE_UNDEFINED && v->init) st = decode_initializer(imp, v);
        if (!st && (!v || v->kind == ONNX_VALUE_UNDEFINED))
            st = onnx_node_error(imp, &n, PDC_ERR_INTERNAL, "input '%s' is not defined yet", onnx_quote(in, q, sizeof q));
        n.in[i] = v;
        if (!st) all_const &= v->kind == ONNX_VALUE_CONST;
    }
    for (size_t k = 0; !st && k < n.n_out; k++) {
        const char *o = nz(np->output[k]);
        n.out[k] = *o ? onnx_value_find(imp, o) : NULL;
    }
    if (!st) {
        if (def->fold && all_const) st = def->fold(imp, &n);
        else if (def->emit) st = def->emit(imp, &n);
        else {
            const onnx_value *rt = NULL;
            for (size_t i = 0; i < n.n_in && !rt; i++)
                if (n.in[i] && n.in[i]->kind != ONNX_VALUE_CONST) rt = n.in[i];
            st = onnx_node_error(imp, &n, PDC_ERR_UNSUPPORTED,
                                 "pdc evaluates %s only on constants at import, but input '%s' is computed at run time",
                                 n.op, onnx_quote(rt ? rt->name : "?", q, sizeof q));
        }
    }
    for (size_t k = 0; !st && k < n.n_out; k++) {
        const onnx_value *v = n.out[k];
        if (v && v->uses && v->kind == ONNX_VALUE_UNDEFINED)
            st = onnx_node_error(imp, &n, PDC_ERR_UNSUPPORTED, "output %zu ('%s') is used, but pdc does not compute it",
                                 k, onnx_quote(v->name, q, sizeof q));
    }
    pdc_free(n.layer);
    return st;
}

/* ------------------------------------------------------------------ order */

typedef struct heap {
    size_t *a, n;
} heap;

static void heap_push(heap *h, size_t v)
{
    size_t i = h->n++;
    h->a[i] = v;
    while (i && h->a[(i - 1) / 2] > h->a[i]) {
        size_t p = (i - 1) / 2, t = h->a[p];
        h->a[p] = h->a[i];
        h->a[i] = t;
        i = p;
    }
}

static size_t heap_pop(heap *h)
{
    size_t top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->a[l] < h->a[m]) m = l;
        if (r < h->n && h->a[r] < h->a[m]) m = r;
        if (m == i) break;
        size_t t = h->a[m];
        h->a[m] = h->a[i];
        h->a[i] = t;
        i = m;
    }
    return top;
}

typedef struct graph_walk {
    size_t n_nodes;
    unsigned char *live;       /* per node */
    size_t *indeg;             /* per node: inputs produced by live nodes not yet visited */
    size_t *cons_start;        /* per value + 1: CSR of the live nodes reading each value */
    size_t *cons;
    size_t *order;
    size_t n_order;
} graph_walk;

static void walk_free(graph_walk *w)
{
    pdc_free(w->live);
    pdc_free(w->indeg);
    pdc_free(w->cons_start);
    pdc_free(w->cons);
    pdc_free(w->order);
}

/* Marks live nodes (those feeding a graph output) and checks every input they read is defined. */
static pdc_status mark_live(onnx_importer *imp, graph_walk *w)
{
    const Onnx__GraphProto *g = imp->graph;
    size_t *stack = pdc_calloc(imp->ctx, w->n_nodes ? w->n_nodes : 1, sizeof *stack), sp = 0;
    if (!stack) return PDC_ERR_OUT_OF_MEMORY;
    char q[160], q2[160];
    pdc_status st = PDC_OK;
    for (size_t i = 0; i < g->n_output && !st; i++) {
        const char *name = g->output[i] ? nz(g->output[i]->name) : "";
        onnx_value *v = onnx_value_find(imp, name);
        if (!v) {
            st = pdc_error(imp->ctx, PDC_ERR_INVALID_MODEL,
                           "ONNX: graph output '%s' is not produced by any node, graph input or initializer",
                           onnx_quote(name, q, sizeof q));
            break;
        }
        v->uses++;
        if (v->producer >= 0 && !w->live[v->producer]) {
            w->live[v->producer] = 1;
            stack[sp++] = (size_t)v->producer;
        }
    }
    while (sp && !st) {
        size_t ni = stack[--sp];
        const Onnx__NodeProto *np = g->node[ni];
        for (size_t k = 0; k < np->n_input; k++) {
            const char *in = nz(np->input[k]);
            if (!*in) continue;
            onnx_value *v = onnx_value_find(imp, in);
            if (!v) {
                char q3[160];
                st = pdc_error(imp->ctx, PDC_ERR_INVALID_MODEL,
                               "ONNX: node '%s' (%s, opset %" PRId64 "): input '%s' is not defined (not a graph "
                               "input, initializer or node output)",
                               onnx_quote(np->name && *np->name ? np->name : "(unnamed)", q2, sizeof q2),
                               onnx_quote(nz(np->op_type), q3, sizeof q3), imp->opset, onnx_quote(in, q, sizeof q));
                break;
            }
            v->uses++;
            if (v->producer >= 0 && !w->live[v->producer]) {
                w->live[v->producer] = 1;
                stack[sp++] = (size_t)v->producer;
            }
        }
    }
    pdc_free(stack);
    return st;
}

static pdc_status topo_order(onnx_importer *imp, graph_walk *w)
{
    const Onnx__GraphProto *g = imp->graph;
    const pdc_context *ctx = imp->ctx;
    size_t nv = imp->n_values, nn = w->n_nodes;
    w->cons_start = pdc_calloc(ctx, nv + 1, sizeof *w->cons_start);
    w->indeg = pdc_calloc(ctx, nn ? nn : 1, sizeof *w->indeg);
    w->order = pdc_calloc(ctx, nn ? nn : 1, sizeof *w->order);
    if (!w->cons_start || !w->indeg || !w->order) return PDC_ERR_OUT_OF_MEMORY;
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t *fill = NULL;
        if (pass == 1) {
            for (size_t v = 0; v < nv; v++) w->cons_start[v + 1] += w->cons_start[v];
            total = w->cons_start[nv];
            w->cons = pdc_calloc(ctx, total ? total : 1, sizeof *w->cons);
            fill = pdc_calloc(ctx, nv ? nv : 1, sizeof *fill);
            if (!w->cons || !fill) {
                pdc_free(fill);
                return PDC_ERR_OUT_OF_MEMORY;
            }
        }
        for (size_t ni = 0; ni < nn; ni++) {
            if (!w->live[ni]) continue;
            const Onnx__NodeProto *np = g->node[ni];
            for (size_t k = 0; k < np->n_input; k++) {
                const onnx_value *v = *nz(np->input[k]) ? onnx_value_find(imp, np->input[k]) : NULL;
                if (!v || v->producer < 0) continue;
                size_t vi = (size_t)(v - imp->values);
                if (pass == 0) {
                    w->cons_start[vi + 1]++;
                    w->indeg[ni]++;
                } else {
                    w->cons[w->cons_start[vi] + fill[vi]++] = ni;
                }
            }
        }
        pdc_free(fill);
    }
    heap h = {pdc_calloc(ctx, nn ? nn : 1, sizeof(size_t)), 0};
    if (!h.a) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t ni = 0; ni < nn; ni++)
        if (w->live[ni] && !w->indeg[ni]) heap_push(&h, ni);
    while (h.n) {
        size_t ni = heap_pop(&h);
        w->order[w->n_order++] = ni;
        const Onnx__NodeProto *np = g->node[ni];
        for (size_t k = 0; k < np->n_output; k++) {
            const onnx_value *v = *nz(np->output[k]) ? onnx_value_find(imp, np->output[k]) : NULL;
            if (!v || v->producer != (long)ni) continue;
            size_t vi = (size_t)(v - imp->values);
            for (size_t c = w->cons_start[vi]; c < w->cons_start[vi + 1]; c++)
                if (--w->indeg[w->cons[c]] == 0) heap_push(&h, w->cons[c]);
        }
    }
    pdc_free(h.a);
    size_t live = 0;
    for (size_t ni = 0; ni < nn; ni++) live += w->live[ni];
    if (w->n_order == live) return PDC_OK;
    /* A cycle: name the first node left and an input whose producer is also left. */
    for (size_t ni = 0; ni < nn; ni++) {
        if (!w->live[ni] || !w->indeg[ni]) continue;
        const Onnx__NodeProto *np = g->node[ni];
        for (size_t k = 0; k < np->n_input; k++) {
            const onnx_value *v = *nz(np->input[k]) ? onnx_value_find(imp, np->input[k]) : NULL;
            if (!v || v->producer < 0 || !w->indeg[v->producer]) continue;
            const Onnx__NodeProto *pp = g->node[v->producer];
            char a[160], b[160], c[160], d[160], e[160];
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                             "ONNX: the graph has a cycle: node '%s' (%s) reads '%s', which node '%s' (%s) produces "
                             "from values that depend on it",
                             onnx_quote(np->name && *np->name ? np->name : "(unnamed)", a, sizeof a),
                             onnx_quote(nz(np->op_type), b, sizeof b), onnx_quote(v->name, c, sizeof c),
                             onnx_quote(pp->name && *pp->name ? pp->name : "(unnamed)", d, sizeof d),
                             onnx_quote(nz(pp->op_type), e, sizeof e));
        }
    }
    return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: the graph has a cycle");
}

/* ------------------------------------------------------------------ graph outputs */

static pdc_status mark_graph_output(onnx_importer *imp, const char *name)
{
    char q[160];
    onnx_quote(name, q, sizeof q);
    onnx_value *v = onnx_value_find(imp, name);
    if (v && v->kind == ONNX_VALUE_UNDEFINED && v->init) {
        pdc_status st = decode_initializer(imp, v);
        if (st) return st;
    }
    if (!v || v->kind == ONNX_VALUE_UNDEFINED)
        return pdc_error(imp->ctx, PDC_ERR_INVALID_MODEL, "ONNX: graph output '%s' is not defined", q);
    if (v->kind == ONNX_VALUE_CONST)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED,
                         "ONNX: graph output '%s' is a constant (it does not depend on any graph input)", q);
    ir_model *m = imp->m;
    ir_tensor *t = &m->tensors[v->tensor];
    int already = 0;
    for (size_t i = 0; i < m->n_outputs; i++) already |= m->outputs[i] == v->tensor;
    if (!strcmp(t->name, name)) {
        if (t->kind == IR_TENSOR_ACT) return ir_model_mark_output(m, name);
        /* a copy would need the input's name */
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED,
                         "ONNX: graph output '%s' is the graph input of that name (outputs are computed by "
                         "layers; an Identity to an output of another name is supported)", q);
    }
    if (t->kind == IR_TENSOR_ACT && !already) {
        /* An alias (Identity, Dropout, ...) of a layer output: the tensor takes the output's name. */
        char *copy = pdc_strdup(imp->ctx, name);
        if (!copy) return PDC_ERR_OUT_OF_MEMORY;
        if (!ir_name_valid(copy)) {
            pdc_free(copy);
            return pdc_error(imp->ctx, PDC_ERR_INVALID_MODEL, "ONNX: graph output name '%s' is not valid", q);
        }
        pdc_free(t->name);
        t->name = copy;
        ir_model_reindex(m); /* renamed in place */
        return ir_model_mark_output(m, name);
    }
    /* A graph input, or a tensor that is already another output: copy it with a reshape. */
    int known = t->rank > 0;
    for (int i = 0; known && i < t->rank; i++) known = t->dims[i] > 0;
    if (!known)
        return pdc_error(imp->ctx, PDC_ERR_UNSUPPORTED,
                         "ONNX: graph output '%s' repeats tensor '%s', whose shape is not known at import", q, t->name);
    ir_attrs a = {0};
    pdc_status st = ir_attrs_set_ints(imp->ctx, &a, "shape", (size_t)t->rank, t->dims);
    char *layer = st ? NULL : onnx_unique_name(imp, name, 1);
    const char *src = t->name;
    if (!st && !layer) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = ir_model_add_layer(m, layer, IR_OP_RESHAPE, 1, &src, 1, &name, &a);
    pdc_free(layer);
    ir_attrs_free(&a);
    if (!st) st = ir_model_mark_output(m, name);
    if (st) pdc_error_prefix(imp->ctx, "ONNX: graph output '%s'", q);
    return st;
}

/* ------------------------------------------------------------------ the import */

static pdc_status find_opset(const pdc_context *ctx, const Onnx__ModelProto *mp, int64_t *opset)
{
    int found = 0;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!o) continue;
        const char *d = nz(o->domain);
        if (*d && strcmp(d, "ai.onnx")) continue;
        if (!o->has_version)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: the opset import of domain ai.onnx has no version");
        if (!found || o->version > *opset) *opset = o->version;
        found = 1;
    }
    if (!found)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "ONNX: the model imports no opset of the default domain (ai.onnx)");
    if (*opset < ONNX_OPSET_MIN || *opset > ONNX_OPSET_MAX)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED,
                         "ONNX: opset %" PRId64 " of domain ai.onnx is not supported (pdc imports opsets %d..%d; "
                         "re-export with e.g. torch.onnx.export(..., opset_version=13))",
                         *opset, ONNX_OPSET_MIN, ONNX_OPSET_MAX);
    return PDC_OK;
}

/* Registers every initializer, graph input and node output under its name. */
static pdc_status register_values(onnx_importer *imp)
{
    const Onnx__GraphProto *g = imp->graph;
    const pdc_context *ctx = imp->ctx;
    char q[160], q2[160];
    size_t count = g->n_initializer + g->n_input, slots = 16;
    for (size_t i = 0; i < g->n_node; i++) {
        if (!g->node[i]) return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: node %zu is empty", i);
        count += g->node[i]->n_output;
    }
    while (slots < 2 * count) slots *= 2;
    imp->values = pdc_calloc(ctx, count ? count : 1, sizeof *imp->values);
    imp->slots = pdc_calloc(ctx, slots, sizeof *imp->slots);
    if (!imp->values || !imp->slots) return PDC_ERR_OUT_OF_MEMORY;
    imp->cap_values = count;
    imp->n_slots = slots;
    if (g->n_sparse_initializer)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "ONNX: sparse initializers are not supported (%zu in the graph)",
                         g->n_sparse_initializer);
    for (size_t i = 0; i < g->n_initializer; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        const char *name = t ? nz(t->name) : "";
        if (!*name) return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: initializer %zu has no name", i);
        if (onnx_value_find(imp, name))
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: initializer '%s' is defined twice",
                             onnx_quote(name, q, sizeof q));
        value_add(imp, name)->init = t;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = g->input[i] ? nz(g->input[i]->name) : "";
        if (!*name) return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: graph input %zu has no name", i);
        onnx_value *v = onnx_value_find(imp, name);
        if (v && v->init) continue; /* an initializer listed as input (IR version < 4 style): a constant */
        if (v)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: graph input '%s' is listed twice",
                             onnx_quote(name, q, sizeof q));
        value_add(imp, name);
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = nz(np->output[k]);
            if (!*name) continue;
            onnx_value *v = onnx_value_find(imp, name);
            if (v) {
                const char *by = v->init ? "an initializer" : v->producer >= 0 ? "another node" : "a graph input";
                return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                                 "ONNX: node '%s' (%s): output '%s' is already defined by %s",
                                 onnx_quote(np->name && *np->name ? np->name : "(unnamed)", q2, sizeof q2),
                                 nz(np->op_type), onnx_quote(name, q, sizeof q), by);
            }
            value_add(imp, name)->producer = (long)i;
        }
    }
    return PDC_OK;
}

static void importer_free(onnx_importer *imp)
{
    for (size_t i = 0; i < imp->n_values; i++) onnx_const_free(&imp->values[i].c);
    pdc_free(imp->values);
    pdc_free(imp->slots);
}

pdc_status onnx_import(pdc_context *ctx, Onnx__ModelProto *mp, ProtobufCAllocator *alloc, ir_model **out)
{
    onnx_importer imp;
    memset(&imp, 0, sizeof imp);
    imp.ctx = ctx;
    imp.alloc = alloc;
    const Onnx__GraphProto *g = mp->graph;
    if (!g || !mp->has_ir_version)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL,
                         "ONNX: the data decodes as protobuf but is not an ONNX model (no %s)",
                         !g ? "graph" : "ir_version");
    pdc_status st = find_opset(ctx, mp, &imp.opset);
    if (st) return st;
    imp.graph = g;
    const char *gname = g->name && ir_name_valid(g->name) ? g->name : "onnx";
    if ((st = ir_model_create(ctx, gname, &imp.m))) return st;
    graph_walk w;
    memset(&w, 0, sizeof w);
    w.n_nodes = g->n_node;
    w.live = pdc_calloc(ctx, g->n_node ? g->n_node : 1, 1);
    if (!w.live) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = register_values(&imp);
    if (!st && !g->n_output) st = pdc_error(ctx, PDC_ERR_INVALID_MODEL, "ONNX: the graph has no outputs");
    if (!st) st = mark_live(&imp, &w);
    if (!st) st = topo_order(&imp, &w);
    /* Graph inputs become IR inputs in their declared order (also unused ones: the program's
     * interface is the model's). */
    for (size_t i = 0; !st && i < g->n_input; i++) {
        onnx_value *v = onnx_value_find(&imp, nz(g->input[i]->name));
        if (v && !v->init) st = add_graph_input(&imp, g->input[i], v);
    }
    for (size_t i = 0; !st && i < w.n_order; i++) st = translate_node(&imp, g->node[w.order[i]], w.order[i]);
    for (size_t i = 0; !st && i < g->n_output; i++) st = mark_graph_output(&imp, nz(g->output[i]->name));
    if (!st) st = onnx_recognise_sparsity(imp.m);
    walk_free(&w);
    importer_free(&imp);
    if (st) {
        ir_model_destroy(imp.m);
        return st;
    }
    *out = imp.m;
    return PDC_OK;
}
