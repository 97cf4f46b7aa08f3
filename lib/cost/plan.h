/*
 * plan.h - internal: pruning planned to a latency budget (plan.c, docs/predict.md).
 */
#ifndef PDC_LIB_COST_PLAN_H
#define PDC_LIB_COST_PLAN_H

#include "lib/cost/cost.h"

/* One prunable layer's choices: 0 is dense; kind 1 = pattern 8x4 + connectivity rate[c], kind 2 = 1x4
 * blocks at rate[c]. time in ms (predicted), loss = share of the layer's squared weight magnitude removed. */
typedef struct cost_plan_layer {
    size_t layer;
    int kind;
    size_t n_choices;
    double *time, *loss, *rate;
} cost_plan_layer;

typedef struct cost_plan {
    cost_plan_layer *layers;  /* the prunable layers, in model order */
    size_t n;
    double fixed_ms;          /* predicted time of every other layer */
} cost_plan;

/* The choices of every prunable layer of m, with times from prof on `threads` threads. */
pdc_status cost_plan_build(pdc_context *ctx, const ir_model *m, const cost_profile *prof, int threads, cost_plan *p);
void cost_plan_free(cost_plan *p);

/* The weight tensors plan layer pl prunes (1, or 2 for an lstm / gru) into tensors; returns the count. */
size_t cost_plan_weights(const ir_model *m, const cost_plan_layer *pl, int *tensors);
/* Projects w, a copy of weight tensor t of plan layer pl, as choice c prunes it: the projections the
 * prune passes run for the plan's pipeline (8 patterns of 4 then connectivity, or 1x4 blocks). */
pdc_status cost_plan_project(const ir_model *m, const cost_plan_layer *pl, size_t c, int t, float *w);

/* Replaces each choice's loss (c >= 1) by what it costs on a calibration set: the increase of trainer's
 * evaluation loss on inputs / labels when that layer alone is pruned so (clamped at 0), plus 1e-6 x its
 * magnitude loss to break ties; m is the trainer's model (pdc_trainer_export), whose weights are put
 * back after each trial. Progress "plan" per layer. */
pdc_status cost_plan_sensitivity(pdc_trainer *trainer, const ir_model *m, cost_plan *p, const pdc_tensor *inputs,
                                 const pdc_tensor *labels);

/* The multiple-choice knapsack: choice[l] for each of n layers minimising the sum of loss[l][choice]
 * with the sum of time[l][choice] <= budget (times rounded up to budget/4000 steps; exact when the
 * times are whole steps). *feasible 0 (and choice = each layer's fastest) when no choice fits. */
pdc_status cost_plan_solve(const pdc_context *ctx, size_t n, const size_t *n_choices, const double *const *time,
                           const double *const *loss, double budget, size_t *choice, int *feasible);

/* The plan as "PIPELINE OPTION=VALUE ..." (pdc_model_transform's pipeline and options; "" when every
 * layer stays dense), owned by the caller (pdc_free). */
pdc_status cost_plan_text(const pdc_context *ctx, const ir_model *m, const cost_plan *p, const size_t *choice,
                          char **text_out);

#endif
