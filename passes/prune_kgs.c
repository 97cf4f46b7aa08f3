/*
 * prune_kgs.c - the prune-kgs pass: kernel-group sparsity (RT3D's KGS) for 3-D convs. Each eligible
 * weight's kernel grid is cut into kgs_group tiles (a tile larger than the grid is cut to it), each
 * tile keeps the same kgs_keep window positions - or all but floor(kgs_rate x window) - of largest
 * group norm, from at most kgs_masks masks per layer if set (project_kgs, the code behind
 * pdc_prune_project_kgs). The result is pattern sparsity with
 * a 3-D window and kernel groups: the patterns are the distinct group masks in the order their first
 * group appears (groups row-major), every kernel has its group's pattern. Kernels an earlier
 * connectivity pass removed stay removed and take no part in the norms. The stem is left alone by
 * default (pass_default_skip).
 */
#include <inttypes.h>
#include <stdio.h>

#include "passes/project.h"

/* Eligible: a conv with a constant 3-D weight, window of 2..64 entries, dense or pattern-sparse. */
static size_t conv_weight(const ir_model *m, const ir_layer *l, size_t *slots, int *flags)
{
    (void)flags;
    if (l->op != IR_OP_CONV) return 0;
    const ir_tensor *w = pass_const_input(m, l, 1);
    const char *why = NULL;
    if (!w || w->rank != 5) why = "not a 3-D conv with a constant weight";
    else if (w->dims[2] * w->dims[3] * w->dims[4] < 2 || w->dims[2] * w->dims[3] * w->dims[4] > IR_MAX_PATTERN_WINDOW)
        why = "its window is not 2..64 entries";
    else if (w->sparsity.kind != IR_SPARSITY_NONE && w->sparsity.kind != IR_SPARSITY_PATTERN)
        why = "its weight already has block or unstructured sparsity";
    if (why) {
        pdc_log(m->ctx, PDC_LOG_DEBUG, "prune-kgs: layer '%s' skipped: %s", l->name, why);
        return 0;
    }
    slots[0] = 1;
    return 1;
}

/* Positions kept per group in a window of win entries. */
static size_t kept_positions(const pass_options *opt, const ir_layer *l, size_t win)
{
    return opt->kgs_keep ? opt->kgs_keep : win - pass_rate_count(pass_rate_for(&opt->kgs_rate, l->name), win);
}

static pdc_status prune_groups(ir_model *m, const ir_layer *l, int t, int flag, const pass_options *opt)
{
    (void)flag;
    ir_tensor *w = &m->tensors[t];
    const int64_t o = w->dims[0], c = w->dims[1];
    const size_t kernels = (size_t)(o * c), win = (size_t)(w->dims[2] * w->dims[3] * w->dims[4]);
    const size_t keep = kept_positions(opt, l, win);
    if (keep > win)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "layer '%s': option kgs_keep %zu exceeds its %zu-entry window",
                         l->name, keep, win);
    const int64_t go = opt->kgs_go < o ? opt->kgs_go : o, gc = opt->kgs_gc < c ? opt->kgs_gc : c;
    const size_t ngroups = (size_t)(((o + go - 1) / go) * ((c + gc - 1) / gc));
    uint8_t *kernel_keep = NULL;
    uint64_t *masks = pdc_alloc(m->ctx, ngroups * sizeof *masks);
    ir_sparsity s = {.kind = IR_SPARSITY_PATTERN, .kd = w->dims[2], .kh = w->dims[3], .kw = w->dims[4], .go = go,
                     .gc = gc, .n_kernels = kernels};
    s.patterns = pdc_alloc(m->ctx, ngroups * sizeof *s.patterns);
    s.kernel_pattern = pdc_alloc(m->ctx, kernels * sizeof *s.kernel_pattern);
    pdc_status st = masks && s.patterns && s.kernel_pattern ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    if (!st && w->sparsity.kind == IR_SPARSITY_PATTERN) {
        if (!(kernel_keep = pdc_alloc(m->ctx, kernels))) st = PDC_ERR_OUT_OF_MEMORY;
        for (size_t k = 0; !st && k < kernels; k++) kernel_keep[k] = w->sparsity.kernel_pattern[k] >= 0;
    }
    char who[300];
    snprintf(who, sizeof who, "layer '%.256s'", l->name);
    if (!st)
        st = project_kgs(m->ctx, who, w->data, o, c, (int64_t)win, go, gc, keep, opt->kgs_masks, kernel_keep, masks);
    size_t g = 0;
    for (int64_t g0 = 0; !st && g0 < o; g0 += go)
        for (int64_t g1 = 0; g1 < c; g1 += gc, g++) {
            int32_t id = -1;
            for (size_t q = 0; masks[g] && q < s.n_patterns && id < 0; q++)
                if (s.patterns[q] == masks[g]) id = (int32_t)q;
            if (masks[g] && id < 0) s.patterns[id = (int32_t)s.n_patterns++] = masks[g];
            for (int64_t i = g0; i < o && i < g0 + go; i++)
                for (int64_t j = g1; j < c && j < g1 + gc; j++) {
                    const size_t k = (size_t)(i * c + j);
                    s.kernel_pattern[k] = kernel_keep && !kernel_keep[k] ? -1 : id;
                }
        }
    pdc_free(masks);
    pdc_free(kernel_keep);
    if (st) {
        ir_sparsity_free(&s);
        return st;
    }
    return ir_model_set_sparsity(m, t, &s);
}

static void note_kgs(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    const ir_tensor *w = pass_const_input(m, l, 1);
    const size_t win = (size_t)(w->dims[2] * w->dims[3] * w->dims[4]);
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-kgs", l->name, "kgs %" PRId64 "x%" PRId64 ": %zu of %zu positions",
             w->sparsity.go, w->sparsity.gc, kept_positions(opt, l, win), win);
}

pdc_status pass_prune_kgs(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-kgs", PASS_FAMILY_KGS, conv_weight, prune_groups, note_kgs};
    return pass_prune_layers(m, opt, &p);
}
