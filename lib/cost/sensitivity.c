/*
 * sensitivity.c - the planner's calibration-set losses (pdc_trainer_plan, `pdc plan --calib`): how
 * much each pruning choice of each layer raises the loss on a calibration set, measured one layer at
 * a time through the trainer's evaluation, as Distiller's sensitivity analysis does. The sum over the
 * layers of these increases is what the plan then minimises (the layers are taken as independent).
 */
#include <math.h>
#include <string.h>

#include "lib/cost/plan.h"

/* Loss of trainer on the calibration set; a non-finite loss counts as very large. */
static pdc_status eval_loss(pdc_trainer *trainer, const pdc_tensor *inputs, const pdc_tensor *labels, double *loss)
{
    float l = 0;
    pdc_status st = pdc_trainer_evaluate(trainer, inputs, labels, &l, NULL);
    *loss = isfinite(l) ? (double)l : 1e30;
    return st;
}

pdc_status cost_plan_sensitivity(pdc_trainer *trainer, const ir_model *m, cost_plan *p, const pdc_tensor *inputs,
                                 const pdc_tensor *labels)
{
    pdc_context *ctx = m->ctx;
    double base;
    pdc_status st = eval_loss(trainer, inputs, labels, &base);
    for (size_t i = 0; i < p->n && !st; i++) {
        cost_plan_layer *pl = &p->layers[i];
        pdc_progress(ctx, "plan", i, p->n);
        int t[2];
        size_t nt = cost_plan_weights(m, pl, t);
        size_t numel[2] = {ir_tensor_numel(&m->tensors[t[0]]), nt > 1 ? ir_tensor_numel(&m->tensors[t[1]]) : 0};
        float *w = pdc_alloc(ctx, (numel[0] > numel[1] ? numel[0] : numel[1]) * sizeof *w);
        if (!w) return PDC_ERR_OUT_OF_MEMORY;
        for (size_t c = 1; c < pl->n_choices && !st; c++) {
            for (size_t k = 0; k < nt && !st; k++) {
                const ir_tensor *x = &m->tensors[t[k]];
                memcpy(w, x->data, numel[k] * sizeof *w);
                st = cost_plan_project(m, pl, c, t[k], w);
                if (!st) st = pdc_trainer_set_weights(trainer, x->name, w, numel[k]);
            }
            double loss = 0;
            if (!st) st = eval_loss(trainer, inputs, labels, &loss);
            if (!st) pl->loss[c] = (loss > base ? loss - base : 0) + 1e-6 * pl->loss[c];
            /* the trainer's weights back as they were (m holds them), whatever happened */
            for (size_t k = 0; k < nt; k++) {
                pdc_status rs = pdc_trainer_set_weights(trainer, m->tensors[t[k]].name, m->tensors[t[k]].data, numel[k]);
                if (!st) st = rs;
            }
        }
        pdc_free(w);
    }
    if (!st) pdc_progress(ctx, "plan", p->n, p->n);
    return st;
}
