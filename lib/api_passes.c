/*
 * api_passes.c - the public pass API: pdc_model_transform (options -> pass_options, then the pass
 * manager on a clone of the model), pdc_pass_info and pdc_model_memory_plan.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "ir/arena.h"
#include "passes/pass_manager.h"

PDC_API pdc_status pdc_model_transform(pdc_model *model, const char *pipeline, const pdc_attrs *options)
{
    if (!model) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: model is NULL", __func__);
    pdc_context *ctx = model->ctx;
    PDC_CHECK_ARG(ctx, pipeline, "pipeline");
    pass_options opt;
    pass_options_init(&opt, ctx);
    opt.eval_layer = ref_run_layer; /* constant folding runs the reference kernels */
    /* the options given, and those written in the pipeline text after its passes */
    ir_attrs merged = {0, 0, NULL};
    char *passes = NULL;
    pdc_status st = options ? ir_attrs_copy(ctx, &merged, &options->list) : PDC_OK;
    if (!st) st = pass_pipeline_check(ctx, pipeline);
    if (!st) st = pass_pipeline_split(ctx, pipeline, &passes, &merged);
    if (!st) st = pass_options_set_all(ctx, &opt, &merged);
    const ir_attr *pf = ir_attrs_find(&merged, "print_file");
    FILE *f = NULL;
    if (!st && pf && opt.print_after) {
        if (!(f = fopen(pf->s, "a")))
            st = pdc_error(ctx, PDC_ERR_IO, "option print_file: cannot open '%s': %s", pf->s, strerror(errno));
        opt.print_to = f;
    }
    if (!st) st = pass_pipeline_run(model, passes, &opt);
    if (f && fclose(f) && !st) st = pdc_error(ctx, PDC_ERR_IO, "option print_file: writing '%s' failed", pf->s);
    pass_options_free(&opt);
    ir_attrs_free(&merged);
    pdc_free(passes);
    return st;
}

PDC_API pdc_status pdc_pass_info(size_t i, const char **name_out, const char **requires_out,
                                 const char **guarantees_out)
{
    size_t n;
    const pass_info *t = pass_table(&n);
    if (i >= n) return pdc_error(NULL, PDC_ERR_NOT_FOUND, "%s: pass %zu does not exist (there are %zu)", __func__, i, n);
    if (name_out) *name_out = t[i].name;
    if (requires_out) *requires_out = t[i].requires;
    if (guarantees_out) *guarantees_out = t[i].guarantees;
    return PDC_OK;
}

PDC_API pdc_status pdc_model_memory_plan(const pdc_model *model, size_t *arena_bytes_out,
                                         size_t *activation_bytes_out)
{
    if (!model) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: model is NULL", __func__);
    int present;
    size_t arena, total;
    pdc_status st = ir_arena_get(model, &present, NULL, &arena, &total);
    if (st) return st;
    if (!present)
        return pdc_error(model->ctx, PDC_ERR_INVALID_STATE, "model '%s' has no memory plan (run the plan pass)",
                         model->name);
    if (arena_bytes_out) *arena_bytes_out = arena;
    if (activation_bytes_out) *activation_bytes_out = total;
    return PDC_OK;
}
