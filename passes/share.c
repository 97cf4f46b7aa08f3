/*
 * share.c - the share pass: what a model (usually a group of models, ir/group.c) computes twice, it
 * computes once.
 *  1. Constants with identical contents - shape, every float bit for bit, sparsity - become one
 *     tensor (a weight differing by one ulp stays apart).
 *  2. Then, in topological order, a layer with the same op, attributes and input tensors as an
 *     earlier one is dropped and its readers read the earlier layer's outputs. Since step 1 made equal
 *     weights one tensor and each merge makes later layers' inputs equal, two fine-tuned variants of
 *     one backbone fed the same input share their common prefix in one sweep.
 * A layer whose output is a graph output is kept (outputs keep their names); a constant that is a
 * graph output is kept too. Hash tables keep both steps linear in the model's size.
 */
#include <string.h>

#include "ir/arena.h"
#include "passes/passes.h"

#define FNV_OFFSET 1469598103934665603ull
#define FNV_PRIME 1099511628211ull

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* An open-addressing table of item indices keyed by a 64-bit hash; equal hashes are compared by the
 * caller. */
typedef struct share_table {
    size_t cap; /* power of two */
    uint64_t *hash;
    int *item;  /* -1 = empty */
} share_table;

static pdc_status table_init(const pdc_context *ctx, share_table *t, size_t n)
{
    t->cap = 16;
    while (t->cap < 2 * n) t->cap *= 2;
    t->hash = pdc_calloc(ctx, t->cap, sizeof *t->hash);
    t->item = pdc_alloc(ctx, t->cap * sizeof *t->item);
    if (!t->hash || !t->item) return PDC_ERR_OUT_OF_MEMORY;
    memset(t->item, 0xff, t->cap * sizeof *t->item);
    return PDC_OK;
}

static void table_free(share_table *t)
{
    pdc_free(t->hash);
    pdc_free(t->item);
}

/* The first earlier item with hash h for which same(item) holds, else -1 after inserting `item`. */
static int table_find_or_add(share_table *t, uint64_t h, int item, int (*same)(const ir_model *, int, int),
                             const ir_model *m)
{
    size_t i = (size_t)h & (t->cap - 1);
    for (; t->item[i] >= 0; i = (i + 1) & (t->cap - 1))
        if (t->hash[i] == h && same(m, t->item[i], item)) return t->item[i];
    t->hash[i] = h;
    t->item[i] = item;
    return -1;
}

/* ---- constants */

static uint64_t constant_hash(const ir_tensor *x)
{
    uint64_t h = fnv(FNV_OFFSET, &x->rank, sizeof x->rank);
    h = fnv(h, x->dims, (size_t)x->rank * sizeof *x->dims);
    h = fnv(h, &x->sparsity.kind, sizeof x->sparsity.kind);
    return fnv(h, x->data, ir_tensor_numel(x) * sizeof *x->data);
}

static int same_constant(const ir_model *m, int a, int b)
{
    const ir_tensor *x = &m->tensors[a], *y = &m->tensors[b];
    return x->rank == y->rank && !memcmp(x->dims, y->dims, (size_t)x->rank * sizeof *x->dims) &&
           !memcmp(x->data, y->data, ir_tensor_numel(x) * sizeof *x->data) &&
           ir_sparsity_equal(&x->sparsity, &y->sparsity);
}

static pdc_status share_constants(ir_model *m, uint8_t *drop_tensor, int *changed)
{
    share_table t;
    pdc_status st = table_init(m->ctx, &t, m->n_tensors);
    for (size_t i = 0; i < m->n_tensors && !st; i++) {
        const ir_tensor *x = &m->tensors[i];
        if (x->kind != IR_TENSOR_CONST || ir_model_is_output(m, (int)i)) continue;
        int first = table_find_or_add(&t, constant_hash(x), (int)i, same_constant, m);
        if (first < 0) continue;
        ir_model_replace_uses(m, (int)i, first);
        drop_tensor[i] = 1;
        *changed = 1;
    }
    table_free(&t);
    return st;
}

/* ---- layers */

static uint64_t layer_hash(const ir_layer *l)
{
    uint64_t h = fnv(FNV_OFFSET, &l->op, sizeof l->op);
    h = fnv(h, &l->n_outputs, sizeof l->n_outputs);
    return fnv(h, l->inputs, l->n_inputs * sizeof *l->inputs); /* attributes: compared, not hashed (any order) */
}

static int same_layer(const ir_model *m, int a, int b)
{
    const ir_layer *x = &m->layers[a], *y = &m->layers[b];
    if (x->op != y->op || x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs) return 0;
    if (memcmp(x->inputs, y->inputs, x->n_inputs * sizeof *x->inputs)) return 0;
    for (size_t i = 0; i < x->n_outputs; i++)
        if ((x->outputs[i] < 0) != (y->outputs[i] < 0)) return 0;
    return ir_attrs_equal(&x->attrs, &y->attrs);
}

static int writes_graph_output(const ir_model *m, const ir_layer *l)
{
    for (size_t i = 0; i < l->n_outputs; i++)
        if (l->outputs[i] >= 0 && ir_model_is_output(m, l->outputs[i])) return 1;
    return 0;
}

static pdc_status share_layers(ir_model *m, uint8_t *drop_layer, uint8_t *drop_tensor, int *changed)
{
    share_table t;
    pdc_status st = table_init(m->ctx, &t, m->n_layers);
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        if (writes_graph_output(m, l)) continue;
        int first = table_find_or_add(&t, layer_hash(l), (int)li, same_layer, m);
        if (first < 0) continue;
        for (size_t i = 0; i < l->n_outputs; i++) {
            if (l->outputs[i] < 0) continue;
            ir_model_replace_uses(m, l->outputs[i], m->layers[first].outputs[i]);
            drop_tensor[l->outputs[i]] = 1;
        }
        drop_layer[li] = 1;
        *changed = 1;
    }
    table_free(&t);
    return st;
}

pdc_status pass_share(ir_model *m, const pass_options *opt)
{
    (void)opt;
    uint8_t *dl = pdc_calloc(m->ctx, m->n_layers + 1, 1);
    uint8_t *dt = pdc_calloc(m->ctx, m->n_tensors + 1, 1);
    int changed = 0;
    pdc_status st = dl && dt ? share_constants(m, dt, &changed) : PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = share_layers(m, dl, dt, &changed);
    if (!st && changed) {
        ir_arena_drop(m);
        st = ir_model_compact(m, dl, dt);
    }
    pdc_free(dl);
    pdc_free(dt);
    return st;
}
