/*
 * prune_unstructured.c - the prune-unstructured pass: magnitude pruning of the weights of conv, fc,
 * gemm, matmul, lstm and gru that are still dense (or unstructured-sparse), the general fallback
 * (project_unstructured, the code behind pdc_prune_project_unstructured). By default the stem is left
 * alone (pass_default_skip).
 */
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

static size_t weight_slots(const ir_model *m, const ir_layer *l, size_t *slots, int *flags)
{
    (void)flags;
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

static pdc_status prune_weight(ir_model *m, const ir_layer *l, int t, int flag, const pass_options *opt)
{
    (void)flag;
    ir_tensor *w = &m->tensors[t];
    size_t count = ir_tensor_numel(w);
    ir_sparsity s = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = count};
    if (!(s.mask = pdc_alloc(m->ctx, count ? count : 1))) return PDC_ERR_OUT_OF_MEMORY;
    char who[300];
    snprintf(who, sizeof who, "layer '%.256s'", l->name);
    pdc_status st =
        project_unstructured(m->ctx, who, w->data, count, pass_rate_for(&opt->unstructured, l->name), s.mask);
    if (st) ir_sparsity_free(&s);
    else st = ir_model_set_sparsity(m, t, &s);
    return st;
}

static void note_unstructured(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-unstructured", l->name, "unstructured %.3g%%",
             pass_rate_for(&opt->unstructured, l->name) * 100.0);
}

pdc_status pass_prune_unstructured(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-unstructured", PASS_FAMILY_UNSTRUCTURED, weight_slots, prune_weight,
                                  note_unstructured};
    return pass_prune_layers(m, opt, &p);
}
