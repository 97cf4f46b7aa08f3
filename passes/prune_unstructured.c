/*
 * prune_unstructured.c - the prune-unstructured pass: magnitude pruning of the weights of conv, fc,
 * gemm, matmul, lstm and gru that are still dense (or unstructured-sparse), the general fallback
 * (project_unstructured, the code behind pdc_prune_project_unstructured). By default the stem is left
 * alone (pass_default_skip).
 */
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

static size_t weight_slots(const ir_model *m, const ir_layer *l, size_t *slots)
{
    size_t n = 0;
    switch (l->op) {
    case IR_OP_CONV:
    case IR_OP_FC:
    case IR_OP_GEMM:
    case IR_OP_MATMUL: slots[n++] = 1; break;
    case IR_OP_LSTM:
    case IR_OP_GRU:
        slots[n++] = 1;
        slots[n++] = 2;
        break;
    default: break;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ir_tensor *t = pass_const_input(m, l, slots[i]);
        if (t && (t->sparsity.kind == IR_SPARSITY_NONE || t->sparsity.kind == IR_SPARSITY_UNSTRUCTURED))
            slots[k++] = slots[i];
    }
    return k;
}

pdc_status pass_prune_unstructured(ir_model *m, const pass_options *opt)
{
    uint8_t *done = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1);
    uint8_t *stems = NULL;
    pdc_status st = done ? pass_find_stems(m, &stems) : PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        size_t slots[2];
        pass_progress_layer(m, "prune-unstructured", li);
        if (!pass_layer_selected(opt, l->name)) continue;
        size_t n = weight_slots(m, l, slots);
        if (!n || pass_default_skip(m, opt, stems, li, "prune-unstructured", PASS_FAMILY_UNSTRUCTURED)) continue;
        pass_layer_hit(opt, l->name);
        for (size_t i = 0; i < n && !st; i++) {
            int t = l->inputs[slots[i]];
            if (done[t]) continue;
            done[t] = 1;
            ir_tensor *w = &m->tensors[t];
            size_t count = ir_tensor_numel(w);
            ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = count};
            if (!(s.mask = pdc_alloc(m->ctx, count ? count : 1))) {
                st = PDC_ERR_OUT_OF_MEMORY;
                break;
            }
            char who[300];
            snprintf(who, sizeof who, "layer '%.256s'", l->name);
            st = project_unstructured(m->ctx, who, w->data, count, pass_rate_for(&opt->unstructured, l->name), s.mask);
            if (st) ir_sparsity_free(&s);
            else st = ir_model_set_sparsity(m, t, &s);
        }
        if (!st)
            pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-unstructured", l->name, "unstructured %.3g%%",
                     pass_rate_for(&opt->unstructured, l->name) * 100.0);
    }
    pdc_free(stems);
    pdc_free(done);
    return st;
}
