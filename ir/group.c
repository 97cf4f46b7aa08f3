/*
 * group.c - several models as one: copies each model's inputs, constants, layers and outputs into a
 * new model under names that say which model they came from ("k/NAME"), so that one program can
 * compile and run them together and the share pass can find what they have in common.
 */
#include <stdio.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/ir.h"

/* "k/name" into a fresh string (pdc_free), or NULL when out of memory. */
static char *prefixed(const pdc_context *ctx, size_t k, const char *name)
{
    size_t len = strlen(name) + 24;
    char *s = pdc_alloc(ctx, len);
    if (s) snprintf(s, len, "%zu/%s", k, name);
    return s;
}

/* The group's name for tensor t of model k (fresh string). */
static char *group_name(const pdc_context *ctx, const ir_model *src, size_t k, int t, int share_inputs)
{
    const ir_tensor *x = &src->tensors[t];
    return x->kind == IR_TENSOR_INPUT && share_inputs ? pdc_strdup(ctx, x->name) : prefixed(ctx, k, x->name);
}

static int same_dims(const ir_tensor *a, const ir_tensor *b)
{
    return a->rank == b->rank && !memcmp(a->dims, b->dims, (size_t)a->rank * sizeof *a->dims);
}

static pdc_status add_inputs(ir_model *g, const ir_model *src, size_t k, int share_inputs)
{
    for (size_t i = 0; i < src->n_inputs; i++) {
        const ir_tensor *x = &src->tensors[src->inputs[i]];
        char *name = group_name(g->ctx, src, k, src->inputs[i], share_inputs);
        if (!name) return PDC_ERR_OUT_OF_MEMORY;
        int have = ir_model_find_tensor(g, name);
        pdc_status st = PDC_OK;
        if (have < 0) st = ir_model_add_input(g, name, x->rank, x->dims);
        else if (g->tensors[have].kind != IR_TENSOR_INPUT || !same_dims(&g->tensors[have], x)) {
            char a[128], b[128];
            ir_format_shape(g->tensors[have].rank, g->tensors[have].dims, a, sizeof a);
            ir_format_shape(x->rank, x->dims, b, sizeof b);
            st = pdc_error(g->ctx, PDC_ERR_SHAPE,
                           "group: input '%s' of model %zu has shape %s, but an earlier model's tensor of that name "
                           "is %s: inputs of the same name are shared (group them with share_inputs=0 or rename one)",
                           x->name, k, b, g->tensors[have].kind == IR_TENSOR_INPUT ? a : "not an input");
        }
        pdc_free(name);
        if (st) return st;
    }
    return PDC_OK;
}

static pdc_status add_constants(ir_model *g, const ir_model *src, size_t k)
{
    for (size_t t = 0; t < src->n_tensors; t++) {
        const ir_tensor *x = &src->tensors[t];
        if (x->kind != IR_TENSOR_CONST) continue;
        size_t n = ir_tensor_numel(x);
        float *data = pdc_alloc(g->ctx, (n ? n : 1) * sizeof *data);
        char *name = prefixed(g->ctx, k, x->name);
        pdc_status st = data && name ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
        if (!st) {
            memcpy(data, x->data, n * sizeof *data);
            st = ir_model_add_constant_owned(g, name, x->rank, x->dims, data);
            data = NULL; /* taken over */
        }
        if (!st && x->sparsity.kind != IR_SPARSITY_NONE) {
            ir_sparsity s;
            if (!(st = ir_sparsity_copy(g->ctx, &s, &x->sparsity))) st = ir_model_set_sparsity(g, (int)g->n_tensors - 1, &s);
        }
        pdc_free(data);
        pdc_free(name);
        if (st) return st;
    }
    return PDC_OK;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) pdc_free(names[i]);
}

static pdc_status add_layer(ir_model *g, const ir_model *src, size_t k, const ir_layer *l, int share_inputs)
{
    const pdc_context *ctx = g->ctx;
    size_t n = l->n_inputs + l->n_outputs;
    char **names = pdc_calloc(ctx, n, sizeof *names);
    char *name = prefixed(ctx, k, l->name);
    ir_attrs attrs = {0};
    pdc_status st = names && name ? ir_attrs_copy(ctx, &attrs, &l->attrs) : PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && !st; i++) {
        int t = i < l->n_inputs ? l->inputs[i] : l->outputs[i - l->n_inputs];
        if (t >= 0 && !(names[i] = group_name(ctx, src, k, t, share_inputs))) st = PDC_ERR_OUT_OF_MEMORY;
    }
    if (!st) {
        ir_attrs_remove(&attrs, IR_ARENA_ATTR);
        st = ir_model_add_layer(g, name, l->op, l->n_inputs, (const char *const *)names, l->n_outputs,
                                (const char *const *)names + l->n_inputs, &attrs);
    }
    ir_attrs_free(&attrs);
    if (names) free_names(names, n);
    pdc_free(names);
    pdc_free(name);
    return st;
}

static pdc_status add_model(ir_model *g, const ir_model *src, size_t k, int share_inputs)
{
    pdc_status st = add_inputs(g, src, k, share_inputs);
    if (!st) st = add_constants(g, src, k);
    for (size_t li = 0; li < src->n_layers && !st; li++) st = add_layer(g, src, k, &src->layers[li], share_inputs);
    for (size_t i = 0; i < src->n_outputs && !st; i++) {
        char *name = group_name(g->ctx, src, k, src->outputs[i], share_inputs);
        st = name ? ir_model_mark_output(g, name) : PDC_ERR_OUT_OF_MEMORY;
        pdc_free(name);
    }
    return st;
}

pdc_status ir_model_group(pdc_context *ctx, const ir_model *const *models, size_t n, int share_inputs, ir_model **out)
{
    char name[256] = "group";
    size_t pos = strlen(name);
    for (size_t k = 0; k < n && pos < sizeof name - 1; k++) {
        int w = snprintf(name + pos, sizeof name - pos, "%s%.64s", k ? "+" : ":", models[k]->name);
        if (w > 0) pos += (size_t)w;
    }
    ir_model *g = NULL;
    pdc_status st = ir_model_create(ctx, name, &g);
    for (size_t k = 0; k < n && !st; k++) {
        if ((st = add_model(g, models[k], k, share_inputs)))
            pdc_error_prefix(ctx, "group: model %zu ('%s')", k, models[k]->name);
    }
    if (st) {
        if (g) ir_model_destroy(g);
        return st;
    }
    *out = g;
    return PDC_OK;
}
