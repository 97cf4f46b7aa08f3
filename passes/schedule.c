/*
 * schedule.c - the schedule pass: which layers may run side by side (ir/arena.h, attribute step).
 *
 * Units: a layer with the layers its epilogue may take (ir/ops/epilogue.h: a conv's batchnorm, residual
 * add and activation; an fc's bias add and activation) is one unit, kept together so the cpu target can
 * still fuse them. A unit is ready once every unit producing its inputs is in an earlier step.
 * Steps are filled greedily: the ready unit that comes first in the layer list, then up to lanes - 1
 * more ready units whose cost (effective FLOPs, plus a little per output element for memory-bound
 * layers) is within pair_ratio (default 2x) of its cost, the closest first. Two units of unequal cost
 * side by side would leave a thread idle while the longer one finishes, where each could have used
 * every thread in turn. pair_ratio 0 pairs any costs: the cpu target weighs each step by the latency
 * model and runs it side by side only where that is predicted faster (backends/cpu/lanes.c).
 * A model without independent branches keeps its order, one unit a step.
 */
#include <math.h>

#include "ir/arena.h"
#include "ir/ops/epilogue.h"
#include "passes/passes.h"

#define WINDOW 256     /* units after the lead considered for its step: keeps the pass linear */

typedef struct unit {
    size_t first, n;   /* layers first .. first + n - 1 */
    double cost;
    size_t step;       /* SIZE_MAX: not scheduled yet */
} unit;

static double layer_cost(const ir_model *m, size_t li)
{
    ir_layer_stats st;
    ir_layer_stats_compute(m, li, &st);
    double out = 0;
    const ir_layer *l = &m->layers[li];
    for (size_t i = 0; i < l->n_outputs; i++)
        if (l->outputs[i] >= 0) out += (double)ir_tensor_numel(&m->tensors[l->outputs[i]]);
    return (double)st.effective_flops + 4.0 * out;
}

/* 1 if every unit producing an input of unit u is scheduled before step s. */
static int unit_ready(const ir_model *m, const unit *units, const size_t *unit_of, const unit *u, size_t s)
{
    for (size_t li = u->first; li < u->first + u->n; li++) {
        const ir_layer *l = &m->layers[li];
        for (size_t i = 0; i < l->n_inputs; i++) {
            int t = l->inputs[i];
            int p = t >= 0 ? m->tensors[t].producer : -1;
            if (p < 0 || unit_of[p] == (size_t)(u - units)) continue;
            if (units[unit_of[p]].step >= s) return 0; /* SIZE_MAX (unscheduled) too */
        }
    }
    return 1;
}

/* Costs within `ratio` of each other (option pair_ratio; 0: any). */
static int similar(double a, double b, int ratio)
{
    double lo = a < b ? a : b, hi = a < b ? b : a;
    return !ratio || hi <= (double)ratio * (lo > 1.0 ? lo : 1.0);
}

pdc_status pass_schedule(ir_model *m, const pass_options *opt)
{
    const pdc_context *ctx = m->ctx;
    size_t n = m->n_layers;
    unit *units = pdc_calloc(ctx, n ? n : 1, sizeof *units);
    size_t *unit_of = pdc_calloc(ctx, n ? n : 1, sizeof *unit_of);
    size_t *order = pdc_calloc(ctx, n ? n : 1, sizeof *order);
    size_t *pick = pdc_calloc(ctx, (size_t)opt->lanes, sizeof *pick);
    pdc_status st = units && unit_of && order && pick ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    size_t nu = 0;
    ir_schedule_drop(m); /* the order is this pass's to choose: an older schedule does not bind it */
    for (size_t li = 0; li < n && !st; nu++) {
        ir_epilogue e;
        size_t len = ir_layer_epilogue(m, li, &e) ? 1 + (size_t)e.n_layers : 1;
        units[nu] = (unit){li, len, 0, SIZE_MAX};
        for (size_t k = li; k < li + len; k++) {
            unit_of[k] = nu;
            units[nu].cost += layer_cost(m, k);
        }
        li += len;
    }
    size_t done = 0, steps = 0, lead = 0;
    for (size_t s = 0; done < nu && !st; s++, steps++) {
        /* the first unit not scheduled yet: every unit before it is, in an earlier step, so it is ready */
        while (units[lead].step != SIZE_MAX) lead++;
        size_t np = 0;
        pick[np++] = lead;
        units[lead].step = s;
        while (np < (size_t)opt->lanes) {
            size_t best = SIZE_MAX;
            double best_gap = INFINITY;
            for (size_t u = lead + 1; u < nu && u <= lead + WINDOW; u++) {
                if (units[u].step != SIZE_MAX || !similar(units[u].cost, units[lead].cost, opt->pair_ratio)) continue;
                if (!unit_ready(m, units, unit_of, &units[u], s)) continue;
                double gap = fabs(log((units[u].cost + 1.0) / (units[lead].cost + 1.0)));
                if (gap < best_gap) best = u, best_gap = gap;
            }
            if (best == SIZE_MAX) break;
            units[best].step = s;
            pick[np++] = best;
        }
        done += np;
    }
    /* the new layer order: by step, then by unit (original order), each unit's layers together */
    size_t k = 0;
    for (size_t s = 0; s < steps && !st; s++)
        for (size_t u = 0; u < nu; u++)
            if (units[u].step == s)
                for (size_t li = units[u].first; li < units[u].first + units[u].n; li++) order[k++] = li;
    if (!st) {
        size_t *step_of = unit_of; /* reused: the step of each old layer index */
        for (size_t u = 0; u < nu; u++)
            for (size_t li = units[u].first; li < units[u].first + units[u].n; li++) step_of[li] = units[u].step;
        ir_arena_drop(m);
        for (size_t i = 0; i < n && !st; i++) st = ir_attrs_set_int(ctx, &m->layers[i].attrs, IR_STEP_ATTR, (int64_t)step_of[i]);
        if (!st) st = ir_model_reorder_layers(m, order);
        if (!st)
            pdc_log(ctx, PDC_LOG_INFO, "schedule: %zu layers in %zu units and %zu steps", n, nu, steps);
    }
    pdc_free(units);
    pdc_free(unit_of);
    pdc_free(order);
    pdc_free(pick);
    return st;
}
