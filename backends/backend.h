/*
 * backend.h - the interface every backend implements: compile a program's private model copy,
 * run it, free its state. lib/program.c owns the target registry and does all argument and shape
 * checking, so backends see only validated calls.
 */
#ifndef PDC_BACKENDS_BACKEND_H
#define PDC_BACKENDS_BACKEND_H

#include "ir/ir.h"

struct pdc_program {
    pdc_context *ctx;
    const struct pdc_backend *backend;
    ir_model *model;      /* owned deep copy, shapes concrete, verified */
    void *state;          /* backend-private */
};

typedef struct pdc_backend {
    const char *name;
    const char *description;
    /* Builds prog->state from prog->model. On failure leaves prog->state NULL (or freeable by destroy). */
    pdc_status (*compile)(pdc_program *prog);
    /* inputs[i]/outputs[i] follow prog->model->inputs/outputs and have exactly their shapes.
     * Must be safe to call from several threads at once; must write outputs only on success. */
    pdc_status (*run)(const pdc_program *prog, const float *const *inputs, float *const *outputs);
    /* Frees prog->state (may be NULL). */
    void (*destroy)(pdc_program *prog);
    /* Optional: what runs layer i (never NULL; "" if unknown). NULL: pdc_program_layer_kernel says
     * "reference interpreter". */
    const char *(*layer_info)(const pdc_program *prog, size_t i);
} pdc_backend;

extern const pdc_backend pdc_backend_ref;
extern const pdc_backend pdc_backend_cpu;

#endif
