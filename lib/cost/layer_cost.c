/*
 * layer_cost.c - each layer's predicted time for the cpu target's scheduler (backends/cpu/lanes.c):
 * the latency model's time on one thread, split by the family's parallel share into the part that
 * divides over threads and the part that does not.
 */
#include "lib/api_internal.h"
#include "lib/cost/cost.h"

pdc_status cost_layer_costs(pdc_context *ctx, const ir_model *m, pdc_layer_cost **out)
{
    *out = NULL;
    cost_profile prof;
    char why[512];
    pdc_status st = cost_profile_for_host(ctx, NULL, &prof, why, sizeof why);
    if (st) return st;
    size_t n = m->n_layers ? m->n_layers : 1;
    cost_layer *facts = pdc_calloc(ctx, n, sizeof *facts);
    pdc_layer_cost *c = pdc_calloc(ctx, n, sizeof *c);
    if (!facts || !c) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = cost_model_facts(m, facts);
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        double t1 = cost_layer_ms(&prof, &facts[li], 1), p = prof.f[facts[li].family].parallel;
        c[li] = (pdc_layer_cost){t1 * (1.0 - p), t1 * p};
    }
    pdc_free(facts);
    if (st) {
        pdc_free(c);
        return st;
    }
    *out = c;
    return PDC_OK;
}
