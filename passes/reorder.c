/*
 * reorder.c - the reorder pass (filter-kernel reorder): in each pattern-pruned conv, sort the
 * filters so that filters with the same number of kept kernels and the same mix of patterns are
 * adjacent - the code generators then emit one loop per group and kernels sharing a pattern share
 * their loads. Sort key: kept kernels (more first), then the per-pattern kernel counts compared
 * pattern by pattern (more of the earlier pattern first), then the original index, so the order is
 * deterministic. Weights, bias and the per-kernel pattern ids move with their filter; attribute
 * out_perm records where each stored filter's output goes, so outputs keep their original order.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct filter_key {
    size_t index;        /* stored filter index before this pass */
    size_t kept;         /* kernels with a pattern */
    const size_t *hist;  /* kernels per pattern id */
    size_t n_patterns;
} filter_key;

static int filter_cmp(const void *a, const void *b)
{
    const filter_key *x = a, *y = b;
    if (x->kept != y->kept) return x->kept > y->kept ? -1 : 1;
    for (size_t i = 0; i < x->n_patterns; i++)
        if (x->hist[i] != y->hist[i]) return x->hist[i] > y->hist[i] ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int reorderable(const ir_model *m, const ir_layer *l)
{
    const ir_tensor *w = pass_const_input(m, l, 1);
    if (l->op != IR_OP_CONV || !w || w->rank != 4 || w->sparsity.kind != IR_SPARSITY_PATTERN) return 0;
    if (ir_attr_int(&l->attrs, "group", 1) != 1) return 0;
    if (l->n_inputs < 3 || l->inputs[2] < 0) return 1;
    const ir_tensor *b = pass_const_input(m, l, 2);
    return b && b->sparsity.kind == IR_SPARSITY_NONE;
}

/* Permutes rows of `rows` x `row_bytes` in place: new row j = old row sigma[j]. */
static pdc_status permute_rows(const pdc_context *ctx, void *data, size_t rows, size_t row_bytes, const size_t *sigma)
{
    unsigned char *copy = pdc_alloc(ctx, rows * row_bytes), *d = data;
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(copy, d, rows * row_bytes);
    for (size_t j = 0; j < rows; j++) memcpy(d + j * row_bytes, copy + sigma[j] * row_bytes, row_bytes);
    pdc_free(copy);
    return PDC_OK;
}

static pdc_status reorder_layer(ir_model *m, size_t li)
{
    const pdc_context *ctx = m->ctx;
    int wt, bt = -1;
    pdc_status st = pass_private_constant(m, li, 1, &wt);
    if (!st && m->layers[li].n_inputs > 2 && m->layers[li].inputs[2] >= 0) st = pass_private_constant(m, li, 2, &bt);
    if (st) return st;
    ir_layer *l = &m->layers[li];
    ir_tensor *w = &m->tensors[wt];
    size_t o = (size_t)w->dims[0], c = (size_t)w->dims[1], win = (size_t)(w->dims[2] * w->dims[3]);
    size_t np = w->sparsity.n_patterns;
    size_t *hist = pdc_calloc(ctx, o * (np ? np : 1), sizeof *hist);
    filter_key *keys = pdc_calloc(ctx, o, sizeof *keys);
    size_t *sigma = pdc_calloc(ctx, o, sizeof *sigma);
    int64_t *perm = pdc_calloc(ctx, o, sizeof *perm);
    if (!hist || !keys || !sigma || !perm) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t f = 0; f < o && !st; f++) {
        keys[f] = (filter_key){f, 0, hist + f * np, np};
        for (size_t k = 0; k < c; k++) {
            int32_t p = w->sparsity.kernel_pattern[f * c + k];
            if (p < 0) continue;
            keys[f].kept++;
            hist[f * np + (size_t)p]++;
        }
    }
    int identity = 1;
    if (!st) {
        qsort(keys, o, sizeof *keys, filter_cmp);
        for (size_t j = 0; j < o; j++) {
            sigma[j] = keys[j].index;
            identity &= sigma[j] == j;
        }
    }
    if (!st && !identity) {
        size_t n_old;
        const int64_t *old = ir_attr_ints(&l->attrs, "out_perm", &n_old);
        for (size_t j = 0; j < o; j++) perm[j] = old && n_old == o ? old[sigma[j]] : (int64_t)sigma[j];
        st = permute_rows(ctx, w->data, o, c * win * sizeof *w->data, sigma);
        if (!st) st = permute_rows(ctx, w->sparsity.kernel_pattern, o, c * sizeof(int32_t), sigma);
        if (!st && bt >= 0) st = permute_rows(ctx, m->tensors[bt].data, o, sizeof(float), sigma);
        if (!st) st = ir_attrs_set_ints(ctx, &l->attrs, "out_perm", o, perm);
    }
    pdc_free(hist);
    pdc_free(keys);
    pdc_free(sigma);
    pdc_free(perm);
    return st;
}

pdc_status pass_reorder(ir_model *m, const pass_options *opt)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if (!pass_layer_selected(opt, l->name) || !reorderable(m, l)) continue;
        pass_layer_hit(opt, l->name);
        pdc_status st = reorder_layer(m, li);
        if (st) return st;
    }
    return PDC_OK;
}
