/* pass_util.c - helpers shared by the passes (see passes.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ops/params.h"
#include "passes/passes.h"

int pass_layer_selected(const pass_options *opt, const char *name)
{
    if (opt->layers) {
        for (size_t i = 0; i < opt->n_layers; i++)
            if (!strcmp(opt->layers[i], name)) return 1;
        return 0;
    }
    for (size_t i = 0; i < opt->n_skip; i++)
        if (!strcmp(opt->skip[i], name)) return 0;
    return 1;
}

int pass_layer_listed(const pass_options *opt, const char *name)
{
    for (size_t i = 0; opt->layers && i < opt->n_layers; i++)
        if (!strcmp(opt->layers[i], name)) return 1;
    return 0;
}

/* A layer with prunable weights: conv, fc, gemm, matmul, lstm or gru with a constant input. */
static int has_weights(const ir_model *m, const ir_layer *l)
{
    switch (l->op) {
    case IR_OP_CONV:
    case IR_OP_FC:
    case IR_OP_GEMM:
    case IR_OP_MATMUL:
    case IR_OP_LSTM:
    case IR_OP_GRU: break;
    default: return 0;
    }
    for (size_t i = 0; i < l->n_inputs; i++)
        if (pass_const_input(m, l, i)) return 1;
    return 0;
}

pdc_status pass_find_stems(const ir_model *m, uint8_t **stems_out)
{
    /* raw[t]: tensor t is a graph input or computed from one by layers without weights. Layers are
     * usually in topological order, so one sweep suffices; sweeping until nothing changes does not
     * depend on it. */
    uint8_t *raw = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1);
    uint8_t *stems = pdc_calloc(m->ctx, m->n_layers ? m->n_layers : 1, 1);
    if (!raw || !stems) {
        pdc_free(raw);
        pdc_free(stems);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    for (size_t t = 0; t < m->n_tensors; t++) raw[t] = m->tensors[t].kind == IR_TENSOR_INPUT;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t li = 0; li < m->n_layers; li++) {
            const ir_layer *l = &m->layers[li];
            if (has_weights(m, l)) continue;
            int any = 0;
            for (size_t i = 0; i < l->n_inputs && !any; i++) any = l->inputs[i] >= 0 && raw[l->inputs[i]];
            for (size_t o = 0; any && o < l->n_outputs; o++)
                if (l->outputs[o] >= 0 && !raw[l->outputs[o]]) raw[l->outputs[o]] = 1, changed = 1;
        }
    }
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        stems[li] = l->op == IR_OP_CONV && l->n_inputs > 0 && l->inputs[0] >= 0 && raw[l->inputs[0]];
    }
    pdc_free(raw);
    *stems_out = stems;
    return PDC_OK;
}

int pass_default_skip(const ir_model *m, const pass_options *opt, const uint8_t *stems, size_t li, const char *pass,
                      pass_family family)
{
    const ir_layer *l = &m->layers[li];
    if (pass_layer_listed(opt, l->name)) return 0;
    if (stems[li] && !opt->include_stem) {
        pdc_note(m->ctx, PDC_NOTE_SKIPPED_STEM, pass, l->name,
                 "stem: reads a graph input (option include_stem=1 prunes it)");
        return 1;
    }
    const ir_tensor *w = l->op == IR_OP_CONV ? pass_const_input(m, l, 1) : NULL;
    if (family == PASS_FAMILY_PATTERN && w && (w->rank == 4 || w->rank == 5) && !opt->pattern_kernels_all) {
        const int64_t kd = w->rank == 5 ? w->dims[2] : 0, kh = w->dims[w->rank - 2], kw = w->dims[w->rank - 1];
        int listed = 0;
        for (size_t i = 0; i < opt->n_pattern_kernels; i++)
            listed |= opt->pattern_kernels[i][0] == kd && opt->pattern_kernels[i][1] == kh &&
                      opt->pattern_kernels[i][2] == kw;
        if (!listed) {
            char size[64] = "";
            if (kd) snprintf(size, sizeof size, "%" PRId64 "x", kd);
            pdc_note(m->ctx, PDC_NOTE_SKIPPED_KERNEL, pass, l->name,
                     "%s%" PRId64 "x%" PRId64 " kernels: not in option pattern_kernels \"%s\"", size, kh, kw,
                     opt->pattern_kernels_text);
            return 1;
        }
    }
    if (family == PASS_FAMILY_BLOCK && w && !opt->block_convs) {
        pdc_note(m->ctx, PDC_NOTE_SKIPPED_BLOCK_CONV, pass, l->name, "1x1 conv: option block_convs=1 prunes it");
        return 1;
    }
    return 0;
}

void pass_progress_layer(const ir_model *m, const char *pass, size_t li)
{
    if (li) pdc_progress(m->ctx, pass, li, m->n_layers);
}

void pass_layer_hit(const pass_options *opt, const char *name)
{
    for (size_t i = 0; opt->layer_hits && i < opt->n_layers; i++)
        if (!strcmp(opt->layers[i], name)) opt->layer_hits[i]++;
}

pdc_status pass_prune_layers(ir_model *m, const pass_options *opt, const pass_pruner *p)
{
    uint8_t *done = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1); /* weights already pruned */
    uint8_t *stems = NULL;
    pdc_status st = done ? pass_find_stems(m, &stems) : PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        size_t slots[2];
        int flags[2] = {0, 0};
        pass_progress_layer(m, p->pass, li);
        if (!pass_layer_selected(opt, l->name)) continue;
        const size_t n = p->weights(m, l, slots, flags);
        if (!n || pass_default_skip(m, opt, stems, li, p->pass, p->family)) continue;
        pass_layer_hit(opt, l->name);
        for (size_t i = 0; i < n && !st; i++) {
            const int t = l->inputs[slots[i]];
            if (done[t]) continue;
            done[t] = 1;
            st = p->prune(m, l, t, flags[i], opt);
        }
        if (!st) p->note(m, l, opt);
    }
    pdc_free(stems);
    pdc_free(done);
    return st;
}

double pass_rate_for(const pass_rates *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->items[i].layer, name)) return r->items[i].rate;
    return r->global;
}

ir_tensor *pass_const_input(const ir_model *m, const ir_layer *l, size_t i)
{
    if (i >= l->n_inputs || l->inputs[i] < 0) return NULL;
    ir_tensor *t = &m->tensors[l->inputs[i]];
    return t->kind == IR_TENSOR_CONST ? t : NULL;
}

pdc_status pass_add_constant(ir_model *m, const char *base, const char *suffix, int rank, const int64_t *dims,
                             float *data, int *t_out)
{
    size_t cap = strlen(base) + strlen(suffix) + 24;
    char *name = pdc_alloc(m->ctx, cap);
    if (!name) {
        pdc_free(data);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    snprintf(name, cap, "%s%s", base, suffix);
    for (unsigned k = 2; ir_model_find_tensor(m, name) >= 0; k++) snprintf(name, cap, "%s%s_%u", base, suffix, k);
    pdc_status st = ir_model_add_constant_owned(m, name, rank, dims, data);
    if (!st) *t_out = ir_model_find_tensor(m, name);
    pdc_free(name);
    return st;
}

pdc_status pass_private_constant(ir_model *m, size_t li, size_t slot, int *t_out)
{
    int t = m->layers[li].inputs[slot];
    if (ir_model_tensor_uses(m, t) <= 1) {
        *t_out = t;
        return PDC_OK;
    }
    const ir_tensor *src = &m->tensors[t];
    size_t n = ir_tensor_numel(src);
    float *copy = pdc_alloc(m->ctx, n * sizeof *copy);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(copy, src->data, n * sizeof *copy);
    int64_t dims[PDC_MAX_RANK];
    memcpy(dims, src->dims, sizeof dims);
    int rank = src->rank;
    /* the name is built before add_constant may move the tensor array */
    size_t cap = strlen(src->name) + 2;
    char *base = pdc_alloc(m->ctx, cap);
    if (!base) {
        pdc_free(copy);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    snprintf(base, cap, "%s.", src->name);
    int nt;
    pdc_status st = pass_add_constant(m, base, m->layers[li].name, rank, dims, copy, &nt);
    pdc_free(base);
    if (st) return st;
    ir_sparsity sp;
    if ((st = ir_sparsity_copy(m->ctx, &sp, &m->tensors[t].sparsity))) return st;
    if (sp.kind != IR_SPARSITY_NONE && (st = ir_model_set_sparsity(m, nt, &sp))) return st;
    m->layers[li].inputs[slot] = nt;
    *t_out = nt;
    return PDC_OK;
}

int pass_pattern_eligible(const ir_model *m, const ir_layer *l, const char **why)
{
    *why = NULL;
    if (l->op != IR_OP_CONV) *why = "not a conv";
    const ir_tensor *w = *why ? NULL : pass_const_input(m, l, 1);
    if (!*why && !w) *why = "its weight is not a constant";
    if (!*why && w->rank != 4 && w->rank != 5) *why = "not a 2-D or 3-D conv";
    if (!*why && ir_attr_int(&l->attrs, "group", 1) != 1) *why = "group is not 1";
    int64_t win = 1;
    for (int i = 2; !*why && i < w->rank; i++) {
        if (w->dims[i] < 3 || w->dims[i] % 2 == 0) *why = "its kernel is not odd and at least 3x3 (3x3x3)";
        win *= w->dims[i];
    }
    if (!*why && win > IR_MAX_PATTERN_WINDOW) *why = "its kernel window exceeds 64 entries";
    if (!*why && w->sparsity.kind != IR_SPARSITY_NONE && w->sparsity.kind != IR_SPARSITY_PATTERN)
        *why = "its weight already has block or unstructured sparsity";
    return *why == NULL;
}

static int ranked_cmp(const void *a, const void *b)
{
    const pass_ranked *x = a, *y = b;
    if (x->key < y->key) return -1;
    if (x->key > y->key) return 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

void pass_rank(pass_ranked *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(items[i].key)) items[i].key = INFINITY; /* a NaN weight never looks small */
    if (n > 1) qsort(items, n, sizeof *items, ranked_cmp);
}

size_t pass_rate_count(double rate, size_t n)
{
    double k = floor(rate * (double)n);
    if (!(k > 0)) return 0;
    return k >= (double)n ? n : (size_t)k;
}
