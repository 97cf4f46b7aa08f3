/*
 * api_group.c - groups of models: pdc_model_group (ir/group.c joins them), pdc_compile_group (the
 * share and plan passes, then pdc_compile), and finding a program's inputs and outputs by name.
 */
#include <string.h>

#include "backends/backend.h"
#include "lib/api_internal.h"

PDC_API pdc_status pdc_model_group(pdc_context *ctx, const pdc_model *const *models, size_t n,
                                   const pdc_attrs *options, pdc_model **group_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, models, "models");
    PDC_CHECK_ARG(ctx, group_out, "group_out");
    if (n == 0) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: a group needs at least one model", __func__);
    for (size_t k = 0; k < n; k++)
        if (!models[k]) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: model %zu is NULL", __func__, k);
    int share_inputs = 1;
    for (size_t i = 0; options && i < options->list.n; i++) {
        const ir_attr *a = &options->list.items[i];
        if (strcmp(a->name, "share_inputs"))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: unknown option '%s' (known: share_inputs)", __func__, a->name);
        if (a->type != IR_ATTR_INT || (a->i != 0 && a->i != 1))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "%s: option share_inputs must be the int 0 or 1", __func__);
        share_inputs = (int)a->i;
    }
    pdc_status st = ir_model_group(ctx, models, n, share_inputs, group_out);
    if (!st) pdc_object_created(ctx); /* a new handle, as pdc_model_create makes */
    return st;
}

PDC_API pdc_status pdc_compile_group(pdc_context *ctx, const pdc_model *const *models, size_t n, const char *target,
                                     pdc_program **program_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, target, "target");
    PDC_CHECK_ARG(ctx, program_out, "program_out");
    pdc_model *group = NULL;
    pdc_status st = pdc_model_group(ctx, models, n, NULL, &group);
    if (!st) st = pdc_check_compilable(group);
    /* option schedule: "sequential" keeps the layers in the models' order */
    if (!st) st = pdc_model_transform(group, ctx->sequential ? "share,plan" : "share,schedule,plan", NULL);
    if (!st) st = pdc_compile(ctx, group, target, program_out);
    pdc_model_destroy(group);
    return st;
}

static pdc_status find_by_name(const pdc_program *p, const char *fn, const int *list, size_t n, const char *what,
                               const char *name, size_t *index_out)
{
    if (!p) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: program is NULL", fn);
    if (!name || !index_out) return pdc_error(p->ctx, PDC_ERR_INVALID_ARG, "%s: name or index_out is NULL", fn);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(p->model->tensors[list[i]].name, name)) {
            *index_out = i;
            return PDC_OK;
        }
    }
    return pdc_error(p->ctx, PDC_ERR_NOT_FOUND, "%s: the program has no %s named '%s' (it has %zu; a group's outputs are "
                     "named \"k/NAME\")", fn, what, name, n);
}

PDC_API pdc_status pdc_program_find_input(const pdc_program *program, const char *name, size_t *index_out)
{
    return find_by_name(program, __func__, program ? program->model->inputs : NULL, program ? program->model->n_inputs : 0,
                        "input", name, index_out);
}

PDC_API pdc_status pdc_program_find_output(const pdc_program *program, const char *name, size_t *index_out)
{
    return find_by_name(program, __func__, program ? program->model->outputs : NULL,
                        program ? program->model->n_outputs : 0, "output", name, index_out);
}
