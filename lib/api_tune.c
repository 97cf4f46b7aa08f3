/*
 * api_tune.c - pdc_model_tune: the cpu target's kernel auto-tuning from the public API (lib/tune).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/api_internal.h"
#include "lib/core/context.h"
#include "lib/tune/tune.h"

PDC_API pdc_status pdc_model_tune(pdc_context *ctx, const pdc_model *model, const char *target,
                                  const pdc_attrs *options, size_t *n_tuned_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, model, "model");
    if (target && strcmp(target, "cpu"))
        return pdc_error(ctx, strcmp(target, "ref") && strcmp(target, "gpu") ? PDC_ERR_UNKNOWN_TARGET : PDC_ERR_UNSUPPORTED,
                         "pdc_model_tune: target '%s': only \"cpu\" has kernels to tune", target);
    int64_t budget = TUNE_DEFAULT_BUDGET_S;
    for (size_t i = 0; options && i < options->list.n; i++) {
        const ir_attr *a = &options->list.items[i];
        if (strcmp(a->name, "budget_s"))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_model_tune: unknown option '%s' (known: budget_s)", a->name);
        char *end = NULL;
        if (a->type == IR_ATTR_INT) budget = a->i;
        else if (a->type == IR_ATTR_STRING) budget = strtoll(a->s, &end, 10);
        if ((a->type == IR_ATTR_STRING && (!*a->s || *end)) || (a->type != IR_ATTR_INT && a->type != IR_ATTR_STRING) ||
            budget < 1 || budget > 3600)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_model_tune: option budget_s: expected seconds in 1..3600");
    }
    pdc_status st = pdc_check_compilable(model);
    if (st) return st;
    pdc_layer_knobs *knobs = NULL;
    size_t n = 0;
    if ((st = tune_model_knobs(ctx, model, TUNE_ON, (double)budget, &knobs, &n))) return st;
    pdc_free(knobs);
    if (n_tuned_out) *n_tuned_out = n;
    return PDC_OK;
}
