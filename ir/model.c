/*
 * model.c - building and copying the layer-wise IR. Layers are appended in topological order
 * (every input must already exist), so the graph is acyclic and each tensor has one definition by
 * construction; every append infers the new layer's output shapes at once. A failed call leaves
 * the model exactly as it was.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define IR_NAME_MAX 4096

int ir_name_valid(const char *name)
{
    if (!name || !*name) return 0;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++, n++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return n <= IR_NAME_MAX;
}

pdc_status ir_model_create(pdc_context *ctx, const char *name, ir_model **out)
{
    if (!name) name = "model";
    if (!ir_name_valid(name))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "invalid model name (empty, too long or control characters)");
    ir_model *m = pdc_calloc(ctx, 1, sizeof *m);
    if (!m) return PDC_ERR_OUT_OF_MEMORY;
    m->ctx = ctx;
    m->name = pdc_strdup(ctx, name);
    if (!m->name) {
        pdc_free(m);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    *out = m;
    return PDC_OK;
}

static void tensor_free(ir_tensor *t)
{
    pdc_free(t->name);
    pdc_free(t->data);
    ir_sparsity_free(&t->sparsity);
}

static void layer_free(ir_layer *l)
{
    pdc_free(l->name);
    pdc_free(l->inputs);
    pdc_free(l->outputs);
    ir_attrs_free(&l->attrs);
}

static void index_free(ir_name_index *ix);
static void index_update(ir_model *m);

void ir_model_destroy(ir_model *m)
{
    if (!m) return;
    index_free(&m->tensor_names);
    index_free(&m->layer_names);
    for (size_t i = 0; i < m->n_tensors; i++) tensor_free(&m->tensors[i]);
    for (size_t i = 0; i < m->n_layers; i++) layer_free(&m->layers[i]);
    pdc_free(m->tensors);
    pdc_free(m->layers);
    pdc_free(m->inputs);
    pdc_free(m->outputs);
    pdc_free(m->name);
    pdc_free(m->info_text);
    pdc_free(m);
}

size_t ir_first_nonfinite(const float *v, size_t n)
{
    /* x - x is 0 for a finite x and NaN for NaN and +-inf: one branch-free test per element, and
     * the loop below vectorises; the index is looked up only when one is found */
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        float acc = 0.0f;
        for (size_t k = 0; k < 64; k++) acc += v[i + k] - v[i + k];
        if (acc != 0.0f) break;
    }
    for (; i < n; i++)
        if (!isfinite(v[i])) return i;
    return n;
}

const char *ir_nonfinite_name(float x) { return isnan(x) ? "NaN" : x > 0 ? "inf" : "-inf"; }

pdc_status ir_model_check_finite(const ir_model *m)
{
    if (m->ctx->allow_nonfinite) return PDC_OK;
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (tt->kind != IR_TENSOR_CONST || !tt->data) continue;
        size_t n = ir_tensor_numel(tt), i = ir_first_nonfinite(tt->data, n);
        if (i < n)
            return pdc_error(m->ctx, PDC_ERR_NUMERIC,
                             "constant '%s' holds %s at element %zu of %zu (non-finite weights are refused; context "
                             "option allow_nonfinite=1 accepts them)",
                             tt->name, ir_nonfinite_name(tt->data[i]), i, n);
    }
    return PDC_OK;
}

pdc_status ir_check_layer_output(const ir_model *m, const ir_layer *l, int t, const float *v, size_t n)
{
    size_t i = ir_first_nonfinite(v, n);
    if (i == n) return PDC_OK;
    const ir_tensor *tt = &m->tensors[t];
    char shape[128];
    ir_format_shape(tt->rank, tt->dims, shape, sizeof shape);
    return pdc_error(m->ctx, PDC_ERR_NUMERIC, "check_finite: layer '%s' (%s) produced %s at element %zu of its output '%s' (%s)",
                     l->name, ir_op_get_info(l->op)->name, ir_nonfinite_name(v[i]), i, tt->name, shape);
}

/* ---------------------------------------------------------------- name indexes */

/* The names live in the tensors' or layers' structs: entry i's name is at base + i * stride + off. */
typedef struct name_array {
    const char *base;
    size_t stride, off, n;
} name_array;

static name_array tensor_names(const ir_model *m)
{
    return (name_array){(const char *)m->tensors, sizeof(ir_tensor), offsetof(ir_tensor, name), m->n_tensors};
}
static name_array layer_names(const ir_model *m)
{
    return (name_array){(const char *)m->layers, sizeof(ir_layer), offsetof(ir_layer, name), m->n_layers};
}
static const char *name_at(const name_array *a, size_t i)
{
    const char *p;
    memcpy(&p, a->base + i * a->stride + a->off, sizeof p);
    return p;
}

static size_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, then a final mix for the low bits */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    h ^= h >> 29;
    return (size_t)h;
}

static void index_free(ir_name_index *ix)
{
    free(ix->slots);
    memset(ix, 0, sizeof *ix);
}

static void index_put(ir_name_index *ix, const char *name, size_t i)
{
    size_t mask = ix->cap - 1, s = hash_name(name) & mask;
    while (ix->slots[s]) s = (s + 1) & mask;
    ix->slots[s] = (uint32_t)(i + 1);
}

/* Brings ix up to the names of a: appends new entries (rebuilding, at twice the size, when more than
 * half full), or rebuilds from scratch when `rebuild` or entries were removed. The index uses plain
 * malloc, outside max_memory and failure injection (4 bytes a name at most twice over): when it
 * cannot grow it is dropped and lookups scan. */
static void index_sync(ir_name_index *ix, const name_array *a, int rebuild)
{
    if (rebuild || a->n < ix->count || a->n >= UINT32_MAX) index_free(ix);
    if (a->n >= UINT32_MAX) return;
    if (2 * a->n + 2 > ix->cap) {
        size_t cap = 64;
        while (cap < 4 * a->n + 4) cap *= 2;
        uint32_t *slots = calloc(cap, sizeof *slots);
        index_free(ix);
        if (!slots) return;
        ix->slots = slots;
        ix->cap = cap;
    }
    for (; ix->count < a->n; ix->count++) index_put(ix, name_at(a, ix->count), ix->count);
}

static int index_find(const ir_name_index *ix, const name_array *a, const char *name)
{
    if (ix->count == a->n && ix->cap) {
        size_t mask = ix->cap - 1;
        for (size_t s = hash_name(name) & mask;; s = (s + 1) & mask) {
            uint32_t v = ix->slots[s];
            if (!v) return -1;
            if (v - 1 < a->n && !strcmp(name_at(a, v - 1), name)) return (int)(v - 1);
        }
    }
    for (size_t i = 0; i < a->n; i++) /* the index is not in step (it could not grow): scan */
        if (!strcmp(name_at(a, i), name)) return (int)i;
    return -1;
}

void ir_model_reindex(ir_model *m)
{
    name_array t = tensor_names(m), l = layer_names(m);
    index_sync(&m->tensor_names, &t, 1);
    index_sync(&m->layer_names, &l, 1);
}

/* After tensors or layers were appended or dropped from the end. */
static void index_update(ir_model *m)
{
    name_array t = tensor_names(m), l = layer_names(m);
    index_sync(&m->tensor_names, &t, 0);
    index_sync(&m->layer_names, &l, 0);
}

int ir_model_find_tensor(const ir_model *m, const char *name)
{
    name_array a = tensor_names(m);
    return index_find(&m->tensor_names, &a, name);
}

int ir_model_find_layer(const ir_model *m, const char *name)
{
    name_array a = layer_names(m);
    return index_find(&m->layer_names, &a, name);
}

/* Appends a tensor slot (name copied); the caller fills the rest. */
static pdc_status push_tensor(ir_model *m, const char *name, ir_tensor_kind kind, int rank, const int64_t *dims,
                              int *index)
{
    if (!ir_name_valid(name))
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "invalid tensor name \"%s\" (empty, too long or control characters)",
                         name ? name : "(null)");
    if (ir_model_find_tensor(m, name) >= 0)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "tensor '%s' is already defined", name);
    if (m->n_tensors >= INT32_MAX) return pdc_error(m->ctx, PDC_ERR_OVERFLOW, "too many tensors");
    pdc_status st = pdc_grow(m->ctx, (void **)&m->tensors, &m->cap_tensors, m->n_tensors + 1, sizeof *m->tensors);
    if (st) return st;
    char *copy = pdc_strdup(m->ctx, name);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    ir_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = copy;
    t->kind = kind;
    t->rank = rank;
    t->producer = -1;
    for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
    *index = (int)m->n_tensors++;
    index_update(m);
    return PDC_OK;
}

static pdc_status push_index(const pdc_context *ctx, int **items, size_t *n, size_t *cap, int v)
{
    pdc_status st = pdc_grow(ctx, (void **)items, cap, *n + 1, sizeof **items);
    if (st) return st;
    (*items)[(*n)++] = v;
    return PDC_OK;
}

/* Checks rank and dims; symbolic (-1) allowed only if allow_symbolic. */
static pdc_status check_dims(const ir_model *m, const char *what, const char *name, int rank, const int64_t *dims,
                             int min_rank, int allow_symbolic)
{
    if (rank < min_rank || rank > PDC_MAX_RANK)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s '%s': rank %d is outside %d..%d", what, name, rank, min_rank,
                         PDC_MAX_RANK);
    if (rank && !dims) return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s '%s': dims is NULL", what, name);
    size_t n = sizeof(float);
    for (int i = 0; i < rank; i++) {
        if (dims[i] > IR_DIM_MAX)
            return pdc_error(m->ctx, PDC_ERR_OVERFLOW, "%s '%s': dim %d is %" PRId64 " (at most %" PRId64 ")", what, name,
                             i, dims[i], (int64_t)IR_DIM_MAX);
        if (dims[i] >= 1) {
            if (pdc_mul_overflow(n, (size_t)dims[i], &n))
                return pdc_error(m->ctx, PDC_ERR_OVERFLOW, "%s '%s': element count overflows", what, name);
            continue;
        }
        if (allow_symbolic && dims[i] == -1) continue;
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "%s '%s': dim %d is %" PRId64 " (expected >= 1%s)", what, name, i,
                         dims[i], allow_symbolic ? " or -1 for symbolic" : "");
    }
    return PDC_OK;
}

pdc_status ir_model_add_input(ir_model *m, const char *name, int rank, const int64_t *dims)
{
    pdc_status st = check_dims(m, "input", name ? name : "(null)", rank, dims, 1, 1);
    if (st) return st;
    st = pdc_grow(m->ctx, (void **)&m->inputs, &m->cap_inputs, m->n_inputs + 1, sizeof *m->inputs);
    if (st) return st;
    int t;
    st = push_tensor(m, name, IR_TENSOR_INPUT, rank, dims, &t);
    if (st) return st;
    m->inputs[m->n_inputs++] = t;
    return PDC_OK;
}

pdc_status ir_model_add_constant_owned(ir_model *m, const char *name, int rank, const int64_t *dims, float *data)
{
    pdc_status st = check_dims(m, "constant", name ? name : "(null)", rank, dims, 0, 0);
    size_t n = 0;
    if (!st) ir_numel(rank, dims, &n);
    if (!st && !data) {
        data = pdc_calloc(m->ctx, n, sizeof *data);
        if (!data) st = PDC_ERR_OUT_OF_MEMORY;
    }
    int t;
    if (!st) st = push_tensor(m, name, IR_TENSOR_CONST, rank, dims, &t);
    if (st) {
        pdc_free(data);
        return st;
    }
    m->tensors[t].data = data;
    return PDC_OK;
}

pdc_status ir_model_add_layer(ir_model *m, const char *name, ir_op op, size_t n_in, const char *const *inputs,
                              size_t n_out, const char *const *outputs, const ir_attrs *attrs)
{
    const pdc_context *ctx = m->ctx;
    const ir_op_info *info = ir_op_get_info(op);
    if (!info) return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "unknown op id %d", (int)op);
    if (!ir_name_valid(name))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "invalid layer name \"%s\"", name ? name : "(null)");
    if (ir_model_find_layer(m, name) >= 0)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s' is already defined", name);
    if (n_in < (size_t)info->min_inputs || n_in > (size_t)info->max_inputs)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s' (%s): %zu inputs, expected %d..%d", name, info->name,
                         n_in, info->min_inputs, info->max_inputs);
    if (n_out < (size_t)info->min_outputs || n_out > (size_t)info->max_outputs)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s' (%s): %zu outputs, expected %d..%d", name, info->name,
                         n_out, info->min_outputs, info->max_outputs);
    if ((n_in && !inputs) || !outputs)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s': inputs or outputs array is NULL", name);

    ir_layer l = {0};
    pdc_status st = PDC_OK;
    size_t tensors_before = m->n_tensors;
    l.inputs = pdc_calloc(ctx, n_in ? n_in : 1, sizeof *l.inputs);
    l.outputs = pdc_calloc(ctx, n_out, sizeof *l.outputs);
    l.name = pdc_strdup(ctx, name);
    if (!l.inputs || !l.outputs || !l.name) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = ir_attrs_copy(ctx, &l.attrs, attrs);
    if (!st) st = pdc_grow(ctx, (void **)&m->layers, &m->cap_layers, m->n_layers + 1, sizeof *m->layers);
    l.op = op;
    l.n_inputs = n_in;
    l.n_outputs = n_out;
    for (size_t i = 0; i < n_in && !st; i++) {
        const char *in = inputs[i];
        if (!in || !*in) {
            if (i < (size_t)info->min_inputs)
                st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s' (%s): input %zu is required", name, info->name, i);
            l.inputs[i] = -1;
            continue;
        }
        l.inputs[i] = ir_model_find_tensor(m, in);
        if (l.inputs[i] < 0)
            st = pdc_error(ctx, PDC_ERR_NOT_FOUND, "layer '%s' (%s): input '%s' is not defined", name, info->name, in);
    }
    for (size_t i = 0; i < n_out && !st; i++) {
        const char *out = outputs[i];
        if (!out || !*out) {
            if (i == 0) st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "layer '%s' (%s): output 0 is required", name, info->name);
            l.outputs[i] = -1;
            continue;
        }
        st = push_tensor(m, out, IR_TENSOR_ACT, 0, NULL, &l.outputs[i]);
        if (!st) m->tensors[l.outputs[i]].producer = (int)m->n_layers;
    }
    if (!st) {
        m->layers[m->n_layers++] = l;
        index_update(m);
        st = ir_infer_layer(m, m->n_layers - 1);
        if (!st) return PDC_OK;
        m->n_layers--;
    }
    while (m->n_tensors > tensors_before) tensor_free(&m->tensors[--m->n_tensors]);
    index_update(m); /* names dropped from the end: rebuilt */
    layer_free(&l);
    return st;
}

int ir_model_is_output(const ir_model *m, int t)
{
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == t) return 1;
    return 0;
}

size_t ir_model_tensor_uses(const ir_model *m, int t)
{
    size_t n = 0;
    for (size_t li = 0; li < m->n_layers; li++)
        for (size_t i = 0; i < m->layers[li].n_inputs; i++) n += m->layers[li].inputs[i] == t;
    for (size_t i = 0; i < m->n_outputs; i++) n += m->outputs[i] == t;
    return n;
}

pdc_status ir_model_mark_output(ir_model *m, const char *name)
{
    int t = ir_model_find_tensor(m, name);
    if (t < 0) return pdc_error(m->ctx, PDC_ERR_NOT_FOUND, "output '%s' is not a tensor of the model", name);
    if (m->tensors[t].kind != IR_TENSOR_ACT)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "output '%s' must be produced by a layer", name);
    if (ir_model_is_output(m, t)) return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "'%s' is already an output", name);
    return push_index(m->ctx, &m->outputs, &m->n_outputs, &m->cap_outputs, t);
}

pdc_status ir_model_set_sparsity(ir_model *m, int tensor, ir_sparsity *s)
{
    pdc_status st = PDC_OK;
    if (tensor < 0 || (size_t)tensor >= m->n_tensors)
        st = pdc_error(m->ctx, PDC_ERR_NOT_FOUND, "sparsity: tensor index %d out of range", tensor);
    if (!st) st = ir_sparsity_validate(m->ctx, &m->tensors[tensor], s);
    if (st) {
        ir_sparsity_free(s);
        return st;
    }
    ir_sparsity_free(&m->tensors[tensor].sparsity);
    m->tensors[tensor].sparsity = *s;
    memset(s, 0, sizeof *s);
    return PDC_OK;
}

pdc_status ir_model_infer_shapes(ir_model *m)
{
    for (size_t i = 0; i < m->n_layers; i++) {
        pdc_status st = ir_infer_layer(m, i);
        if (st) return st;
    }
    return PDC_OK;
}

pdc_status ir_model_set_input_shape(ir_model *m, const char *name, int rank, const int64_t *dims)
{
    int t = ir_model_find_tensor(m, name);
    if (t < 0 || m->tensors[t].kind != IR_TENSOR_INPUT)
        return pdc_error(m->ctx, PDC_ERR_NOT_FOUND, "'%s' is not an input of the model", name);
    pdc_status st = check_dims(m, "input", name, rank, dims, 1, 0);
    if (st) return st;
    ir_tensor *in = &m->tensors[t];
    char want[128], got[128];
    ir_format_shape(in->rank, in->dims, want, sizeof want);
    ir_format_shape(rank, dims, got, sizeof got);
    if (rank != in->rank)
        return pdc_error(m->ctx, PDC_ERR_SHAPE, "input '%s': shape %s does not match declared %s", name, got, want);
    for (int i = 0; i < rank; i++)
        if (in->dims[i] != -1 && in->dims[i] != dims[i])
            return pdc_error(m->ctx, PDC_ERR_SHAPE, "input '%s': shape %s does not match declared %s", name, got, want);
    int64_t saved[PDC_MAX_RANK];
    memcpy(saved, in->dims, sizeof saved);
    memcpy(in->dims, dims, (size_t)rank * sizeof *dims);
    st = ir_model_infer_shapes(m);
    if (st) {
        memcpy(m->tensors[t].dims, saved, sizeof saved);
        ir_model_infer_shapes(m); /* restore the previous (valid) shapes */
    }
    return st;
}

/* ---------------------------------------------------------------- deep copy */

pdc_status ir_model_clone(const ir_model *src, ir_model **out)
{
    ir_model *m;
    pdc_status st = ir_model_create(src->ctx, src->name, &m);
    if (st) return st;
    const pdc_context *ctx = src->ctx;
    m->tensors = pdc_calloc(ctx, src->n_tensors ? src->n_tensors : 1, sizeof *m->tensors);
    m->layers = pdc_calloc(ctx, src->n_layers ? src->n_layers : 1, sizeof *m->layers);
    m->inputs = pdc_calloc(ctx, src->n_inputs ? src->n_inputs : 1, sizeof *m->inputs);
    m->outputs = pdc_calloc(ctx, src->n_outputs ? src->n_outputs : 1, sizeof *m->outputs);
    if (!m->tensors || !m->layers || !m->inputs || !m->outputs) goto oom;
    m->cap_tensors = src->n_tensors ? src->n_tensors : 1;
    m->cap_layers = src->n_layers ? src->n_layers : 1;
    m->cap_inputs = src->n_inputs ? src->n_inputs : 1;
    m->cap_outputs = src->n_outputs ? src->n_outputs : 1;
    for (size_t i = 0; i < src->n_tensors; i++) {
        const ir_tensor *s = &src->tensors[i];
        ir_tensor *d = &m->tensors[i];
        *d = *s;
        d->name = NULL;
        d->data = NULL;
        memset(&d->sparsity, 0, sizeof d->sparsity);
        m->n_tensors = i + 1;
        if (!(d->name = pdc_strdup(ctx, s->name))) goto oom;
        if (s->data) {
            size_t n = ir_tensor_numel(s);
            if (!(d->data = pdc_alloc(ctx, n * sizeof *d->data))) goto oom;
            memcpy(d->data, s->data, n * sizeof *d->data);
        }
        if ((st = ir_sparsity_copy(ctx, &d->sparsity, &s->sparsity))) goto fail;
    }
    for (size_t i = 0; i < src->n_layers; i++) {
        const ir_layer *s = &src->layers[i];
        ir_layer *d = &m->layers[i];
        memset(d, 0, sizeof *d);
        m->n_layers = i + 1;
        d->op = s->op;
        d->n_inputs = s->n_inputs;
        d->n_outputs = s->n_outputs;
        d->name = pdc_strdup(ctx, s->name);
        d->inputs = pdc_calloc(ctx, s->n_inputs ? s->n_inputs : 1, sizeof *d->inputs);
        d->outputs = pdc_calloc(ctx, s->n_outputs ? s->n_outputs : 1, sizeof *d->outputs);
        if (!d->name || !d->inputs || !d->outputs) goto oom;
        memcpy(d->inputs, s->inputs, s->n_inputs * sizeof *d->inputs);
        memcpy(d->outputs, s->outputs, s->n_outputs * sizeof *d->outputs);
        if ((st = ir_attrs_copy(ctx, &d->attrs, &s->attrs))) goto fail;
    }
    /* A model without inputs (all constants) has NULL arrays: memcpy's source must not be NULL. */
    if (src->n_inputs) memcpy(m->inputs, src->inputs, src->n_inputs * sizeof *m->inputs);
    if (src->n_outputs) memcpy(m->outputs, src->outputs, src->n_outputs * sizeof *m->outputs);
    m->n_inputs = src->n_inputs;
    m->n_outputs = src->n_outputs;
    ir_model_reindex(m);
    *out = m;
    return PDC_OK;
oom:
    st = PDC_ERR_OUT_OF_MEMORY;
fail:
    ir_model_destroy(m);
    return st;
}

/* ---------------------------------------------------------------- rewriting (passes) */

void ir_model_replace_uses(ir_model *m, int from, int to)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        ir_layer *l = &m->layers[li];
        for (size_t i = 0; i < l->n_inputs; i++)
            if (l->inputs[i] == from) l->inputs[i] = to;
    }
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == from) m->outputs[i] = to;
}

pdc_status ir_layer_set_input(ir_model *m, size_t li, size_t i, int t)
{
    ir_layer *l = &m->layers[li];
    if (i >= l->n_inputs) {
        int *in = pdc_calloc(m->ctx, i + 1, sizeof *in);
        if (!in) return PDC_ERR_OUT_OF_MEMORY;
        memcpy(in, l->inputs, l->n_inputs * sizeof *in);
        for (size_t k = l->n_inputs; k <= i; k++) in[k] = -1;
        pdc_free(l->inputs);
        l->inputs = in;
        l->n_inputs = i + 1;
    }
    l->inputs[i] = t;
    return PDC_OK;
}

static int remap(const int *map, int v) { return v < 0 ? v : map[v]; }

pdc_status ir_model_compact(ir_model *m, const uint8_t *drop_layer, const uint8_t *drop_tensor)
{
    const pdc_context *ctx = m->ctx;
    int *tmap = pdc_calloc(ctx, m->n_tensors ? m->n_tensors : 1, sizeof *tmap);
    int *lmap = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *lmap);
    pdc_status st = tmap && lmap ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    size_t nt = 0, nl = 0;
    for (size_t t = 0; t < m->n_tensors && !st; t++) tmap[t] = drop_tensor && drop_tensor[t] ? -1 : (int)nt++;
    for (size_t li = 0; li < m->n_layers && !st; li++) lmap[li] = drop_layer && drop_layer[li] ? -1 : (int)nl++;
    /* Check first, so that a failure changes nothing: nothing kept may refer to something dropped. */
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        if (lmap[li] < 0) continue;
        for (size_t i = 0; i < l->n_inputs && !st; i++)
            if (l->inputs[i] >= 0 && tmap[l->inputs[i]] < 0)
                st = pdc_error(ctx, PDC_ERR_INTERNAL, "compact: layer '%s' still reads removed tensor '%s'", l->name,
                               m->tensors[l->inputs[i]].name);
        for (size_t i = 0; i < l->n_outputs && !st; i++)
            if (l->outputs[i] >= 0 && tmap[l->outputs[i]] < 0)
                st = pdc_error(ctx, PDC_ERR_INTERNAL, "compact: layer '%s' still writes removed tensor '%s'", l->name,
                               m->tensors[l->outputs[i]].name);
    }
    for (size_t t = 0; t < m->n_tensors && !st; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (tmap[t] >= 0 && tt->producer >= 0 && lmap[tt->producer] < 0)
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "compact: tensor '%s' is kept but its layer '%s' is removed", tt->name,
                           m->layers[tt->producer].name);
    }
    for (size_t i = 0; i < m->n_inputs && !st; i++)
        if (tmap[m->inputs[i]] < 0)
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "compact: graph input '%s' is removed", m->tensors[m->inputs[i]].name);
    for (size_t i = 0; i < m->n_outputs && !st; i++)
        if (tmap[m->outputs[i]] < 0)
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "compact: graph output '%s' is removed",
                           m->tensors[m->outputs[i]].name);
    if (st) {
        pdc_free(tmap);
        pdc_free(lmap);
        return st;
    }
    for (size_t t = 0; t < m->n_tensors; t++) {
        if (tmap[t] < 0) {
            tensor_free(&m->tensors[t]);
            continue;
        }
        ir_tensor *d = &m->tensors[tmap[t]];
        if ((size_t)tmap[t] != t) *d = m->tensors[t];
        d->producer = remap(lmap, d->producer);
    }
    for (size_t li = 0; li < m->n_layers; li++) {
        if (lmap[li] < 0) {
            layer_free(&m->layers[li]);
            continue;
        }
        ir_layer *d = &m->layers[lmap[li]];
        if ((size_t)lmap[li] != li) *d = m->layers[li];
        for (size_t i = 0; i < d->n_inputs; i++) d->inputs[i] = remap(tmap, d->inputs[i]);
        for (size_t i = 0; i < d->n_outputs; i++) d->outputs[i] = remap(tmap, d->outputs[i]);
    }
    for (size_t i = 0; i < m->n_inputs; i++) m->inputs[i] = tmap[m->inputs[i]];
    for (size_t i = 0; i < m->n_outputs; i++) m->outputs[i] = tmap[m->outputs[i]];
    m->n_tensors = nt;
    m->n_layers = nl;
    ir_model_reindex(m);
    pdc_free(tmap);
    pdc_free(lmap);
    return PDC_OK;
}

pdc_status ir_model_reorder_layers(ir_model *m, const size_t *order)
{
    ir_layer *layers = pdc_alloc(m->ctx, (m->n_layers ? m->n_layers : 1) * sizeof *layers);
    if (!layers) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->n_layers; i++) layers[i] = m->layers[order[i]];
    memcpy(m->layers, layers, m->n_layers * sizeof *layers);
    pdc_free(layers);
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t k = 0; k < m->layers[i].n_outputs; k++)
            if (m->layers[i].outputs[k] >= 0) m->tensors[m->layers[i].outputs[k]].producer = (int)i;
    ir_model_reindex(m); /* layer names now point at other indices */
    return PDC_OK;
}

pdc_status ir_model_live_layers(const ir_model *m, const uint8_t *want, uint8_t *live, uint8_t *input_needed)
{
    uint8_t *needed = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1);
    if (!needed) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->n_outputs; i++)
        if (want[i]) needed[m->outputs[i]] = 1;
    /* layers are topologically sorted: walking back, a layer's readers have all been seen */
    for (size_t li = m->n_layers; li-- > 0;) {
        const ir_layer *l = &m->layers[li];
        live[li] = 0;
        for (size_t k = 0; k < l->n_outputs && !live[li]; k++)
            if (l->outputs[k] >= 0 && needed[l->outputs[k]]) live[li] = 1;
        for (size_t k = 0; k < l->n_inputs && live[li]; k++)
            if (l->inputs[k] >= 0) needed[l->inputs[k]] = 1;
    }
    for (size_t i = 0; i < m->n_inputs; i++) input_needed[i] = needed[m->inputs[i]];
    pdc_free(needed);
    return PDC_OK;
}
