/*
 * prune_pattern.c - the prune-pattern pass: for each eligible conv, choose the layer's pattern set
 * from its weights and project every kernel onto it (project_pattern, the code behind
 * pdc_prune_project_pattern; 3-D windows too). Kernels that an earlier connectivity pass removed stay
 * removed. By default the stem and kernel sizes other than 3x3 are left alone (pass_default_skip).
 */
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

/* The weight of an eligible conv (pass_pattern_eligible; why not, in the debug log). */
static size_t conv_weight(const ir_model *m, const ir_layer *l, size_t *slots, int *flags)
{
    (void)flags;
    const char *why;
    if (!pass_pattern_eligible(m, l, &why)) {
        if (l->op == IR_OP_CONV) pdc_log(m->ctx, PDC_LOG_DEBUG, "prune-pattern: layer '%s' skipped: %s", l->name, why);
        return 0;
    }
    slots[0] = 1;
    return 1;
}

static pdc_status prune_kernels(ir_model *m, const ir_layer *l, int t, int flag, const pass_options *opt)
{
    (void)flag;
    ir_tensor *w = &m->tensors[t];
    size_t kernels = (size_t)(w->dims[0] * w->dims[1]);
    /* a 3-D window kd x kh x kw is projected as the (kd*kh) x kw window of the same positions: with kd
     * and kh odd, its centre (kd*kh/2)*kw + kw/2 is the 3-D centre */
    const int64_t kd = w->rank == 5 ? w->dims[2] : 0, kh = w->dims[w->rank - 2], kw = w->dims[w->rank - 1];
    const int64_t rows = (kd ? kd : 1) * kh;
    char who[300];
    snprintf(who, sizeof who, "layer '%.256s'", l->name);
    pdc_status st = project_pattern_check(m->ctx, who, rows, kw, opt->patterns, opt->pattern_size);
    if (st) return st;
    uint64_t *patterns = pdc_calloc(m->ctx, opt->patterns, sizeof *patterns);
    int32_t *kp = pdc_calloc(m->ctx, kernels, sizeof *kp);
    if (!patterns || !kp) st = PDC_ERR_OUT_OF_MEMORY;
    uint32_t flags = 0;
    if (!st && w->sparsity.kind == IR_SPARSITY_PATTERN) {
        memcpy(kp, w->sparsity.kernel_pattern, kernels * sizeof *kp);
        flags |= PDC_PROJECT_KEEP_PRUNED;
    }
    if (!st)
        st = project_pattern(m->ctx, who, w->data, w->dims[0], w->dims[1], rows, kw, opt->patterns, opt->pattern_size,
                             flags, patterns, kp);
    if (st) {
        pdc_free(patterns);
        pdc_free(kp);
        return st;
    }
    ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kd = kd, .kh = kh, .kw = kw, .n_patterns = opt->patterns,
                     .patterns = patterns, .n_kernels = kernels, .kernel_pattern = kp};
    return ir_model_set_sparsity(m, t, &s);
}

static void note_pattern(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-pattern", l->name, "pattern %zux%zu", opt->patterns, opt->pattern_size);
}

pdc_status pass_prune_pattern(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-pattern", PASS_FAMILY_PATTERN, conv_weight, prune_kernels, note_pattern};
    return pass_prune_layers(m, opt, &p);
}
