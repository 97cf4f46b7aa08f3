/*
 * prune_pattern.c - the prune-pattern pass: for each eligible conv, choose the layer's pattern set
 * from its weights and project every kernel onto it (project_pattern, the code behind
 * pdc_prune_project_pattern). Kernels that an earlier connectivity pass removed stay removed. By
 * default the stem and kernel sizes other than 3x3 are left alone (pass_default_skip).
 */
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

pdc_status pass_prune_pattern(ir_model *m, const pass_options *opt)
{
    uint8_t *done = pdc_calloc(m->ctx, m->n_tensors ? m->n_tensors : 1, 1); /* weights shared by layers */
    uint8_t *stems = NULL;
    pdc_status st = done ? pass_find_stems(m, &stems) : PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        const char *why;
        pass_progress_layer(m, "prune-pattern", li);
        if (!pass_layer_selected(opt, l->name)) continue;
        if (!pass_pattern_eligible(m, l, &why)) {
            if (l->op == IR_OP_CONV) pdc_log(m->ctx, PDC_LOG_DEBUG, "prune-pattern: layer '%s' skipped: %s", l->name, why);
            continue;
        }
        if (pass_default_skip(m, opt, stems, li, "prune-pattern", PASS_FAMILY_PATTERN)) continue;
        int t = l->inputs[1];
        pass_layer_hit(opt, l->name);
        if (done[t]) {
            pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-pattern", l->name, "pattern %zux%zu", opt->patterns,
                     opt->pattern_size);
            continue;
        }
        done[t] = 1;
        ir_tensor *w = &m->tensors[t];
        size_t kernels = (size_t)(w->dims[0] * w->dims[1]);
        char who[300];
        snprintf(who, sizeof who, "layer '%.256s'", l->name);
        if ((st = project_pattern_check(m->ctx, who, w->dims[2], w->dims[3], opt->patterns, opt->pattern_size))) break;
        uint64_t *patterns = pdc_calloc(m->ctx, opt->patterns, sizeof *patterns);
        int32_t *kp = pdc_calloc(m->ctx, kernels, sizeof *kp);
        if (!patterns || !kp) st = PDC_ERR_OUT_OF_MEMORY;
        uint32_t flags = 0;
        if (!st && w->sparsity.kind == IR_SPARSITY_PATTERN) {
            memcpy(kp, w->sparsity.kernel_pattern, kernels * sizeof *kp);
            flags |= PDC_PROJECT_KEEP_PRUNED;
        }
        if (!st)
            st = project_pattern(m->ctx, who, w->data, w->dims[0], w->dims[1], w->dims[2], w->dims[3], opt->patterns,
                                 opt->pattern_size, flags, patterns, kp);
        if (st) {
            pdc_free(patterns);
            pdc_free(kp);
            break;
        }
        ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kh = w->dims[2], .kw = w->dims[3], .n_patterns = opt->patterns,
                         .patterns = patterns, .n_kernels = kernels, .kernel_pattern = kp};
        if (!(st = ir_model_set_sparsity(m, t, &s)))
            pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-pattern", l->name, "pattern %zux%zu", opt->patterns,
                     opt->pattern_size);
    }
    pdc_free(stems);
    pdc_free(done);
    return st;
}
