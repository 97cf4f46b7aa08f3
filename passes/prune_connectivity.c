/*
 * prune_connectivity.c - the prune-connectivity pass: for each eligible conv, remove the
 * floor(rate x kernels) kernels of smallest norm (project_connectivity, the code behind
 * pdc_prune_project_connectivity). A pattern-sparse weight gets those kernels' ids set to -1; a dense
 * weight becomes pattern-sparse with one pattern, the full window, and -1 for the removed kernels
 * (2-D and 3-D convs alike; kernel groups stay valid, a group may hold pruned kernels). By default
 * the stem and kernel sizes other than 3x3 are left alone (pass_default_skip).
 */
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

/* The weight of an eligible conv (pass_pattern_eligible). */
static size_t conv_weight(const ir_model *m, const ir_layer *l, size_t *slots, int *flags)
{
    (void)flags;
    const char *why;
    if (!pass_pattern_eligible(m, l, &why)) return 0;
    slots[0] = 1;
    return 1;
}

static pdc_status prune_kernels(ir_model *m, const ir_layer *l, int t, int flag, const pass_options *opt)
{
    (void)flag;
    const double rate = pass_rate_for(&opt->connectivity, l->name);
    ir_tensor *w = &m->tensors[t];
    size_t kernels = (size_t)(w->dims[0] * w->dims[1]), win = 1;
    for (int i = 2; i < w->rank; i++) win *= (size_t)w->dims[i];
    uint8_t *keep = pdc_alloc(m->ctx, kernels);
    if (!keep) return PDC_ERR_OUT_OF_MEMORY;
    char who[300];
    snprintf(who, sizeof who, "layer '%.256s'", l->name);
    pdc_status st = project_connectivity(m->ctx, who, w->data, w->dims[0], w->dims[1], (int64_t)win, rate, keep);
    size_t removed = 0;
    for (size_t k = 0; k < kernels && !st; k++) removed += !keep[k];
    if (!st && w->sparsity.kind == IR_SPARSITY_PATTERN) {
        for (size_t k = 0; k < kernels; k++)
            if (!keep[k]) w->sparsity.kernel_pattern[k] = -1;
    } else if (!st && removed) {
        ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kd = w->rank == 5 ? w->dims[2] : 0, .kh = w->dims[w->rank - 2],
                         .kw = w->dims[w->rank - 1], .n_patterns = 1, .n_kernels = kernels};
        s.patterns = pdc_alloc(m->ctx, sizeof *s.patterns);
        s.kernel_pattern = pdc_alloc(m->ctx, kernels * sizeof *s.kernel_pattern);
        if (!s.patterns || !s.kernel_pattern) {
            ir_sparsity_free(&s);
            st = PDC_ERR_OUT_OF_MEMORY;
        } else {
            s.patterns[0] = win == 64 ? UINT64_MAX : (UINT64_C(1) << win) - 1;
            for (size_t k = 0; k < kernels; k++) s.kernel_pattern[k] = keep[k] ? 0 : -1;
            st = ir_model_set_sparsity(m, t, &s);
        }
    }
    pdc_free(keep);
    return st;
}

static void note_connectivity(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-connectivity", l->name, "connectivity %.3g%%",
             pass_rate_for(&opt->connectivity, l->name) * 100.0);
}

pdc_status pass_prune_connectivity(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-connectivity", PASS_FAMILY_PATTERN, conv_weight, prune_kernels,
                                  note_connectivity};
    return pass_prune_layers(m, opt, &p);
}
