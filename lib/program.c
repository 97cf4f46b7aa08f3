/*
 * program.c - compile and run: the target registry, the checks every backend relies on (model
 * verified, shapes concrete, inputs/outputs of the right count and shape), and the program's
 * private copy of the model.
 */
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "ir/arena.h"
#include "lib/api_internal.h"
#include "lib/cost/cost.h"
#include "lib/tune/tune.h"

/* Built-in backends, in the order `pdc --help` lists them. */
static const pdc_backend *const backends[] = {&pdc_backend_ref, &pdc_backend_cpu, &pdc_backend_gpu};

/* Targets the design names that this build does not provide yet (NULL-terminated; none today). */
static const char *const planned_targets[] = {NULL};

/* Targets that only pdc_model_emit serves (their code runs on another machine). */
static const char *const emit_only_targets[] = {"aarch64-linux-gnu", "nvptx"};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const pdc_backend *find_backend(const pdc_context *ctx, const char *target, pdc_status *st)
{
    for (size_t i = 0; i < N_OF(backends); i++)
        if (!strcmp(backends[i]->name, target)) return backends[i];
    char known[256] = "";
    for (size_t i = 0; i < N_OF(backends); i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, backends[i]->name, sizeof known - strlen(known) - 1);
    }
    for (size_t i = 0; i < N_OF(planned_targets); i++) {
        if (planned_targets[i] && !strcmp(planned_targets[i], target)) {
            *st = pdc_error(ctx, PDC_ERR_UNSUPPORTED, "target '%s' is not available in this build of pdc (available: %s)",
                            target, known);
            return NULL;
        }
    }
    for (size_t i = 0; i < N_OF(emit_only_targets); i++) {
        if (!strcmp(emit_only_targets[i], target)) {
            *st = pdc_error(ctx, PDC_ERR_UNSUPPORTED,
                            "target '%s' generates code for another machine and cannot run here: use "
                            "pdc_model_emit (pdc compile --target %s -o DIR)",
                            target, target);
            return NULL;
        }
    }
    *st = pdc_error(ctx, PDC_ERR_UNKNOWN_TARGET, "unknown target '%s' (available: %s)", target, known);
    return NULL;
}

/* Compile needs every shape concrete; name the symbolic input so the user knows what to fix. */
static pdc_status check_concrete(const ir_model *m)
{
    for (size_t i = 0; i < m->n_inputs; i++) {
        const ir_tensor *t = &m->tensors[m->inputs[i]];
        for (int k = 0; k < t->rank; k++) {
            if (t->dims[k] < 0) {
                char s[128];
                ir_format_shape(t->rank, t->dims, s, sizeof s);
                return pdc_error(m->ctx, PDC_ERR_SHAPE,
                                 "input '%s' has symbolic shape %s: fix it with pdc_model_set_input_shape "
                                 "(pdc: --shape %s=...)",
                                 t->name, s, t->name);
            }
        }
    }
    return PDC_OK;
}

pdc_status pdc_check_compilable(const pdc_model *model)
{
    pdc_status st = check_concrete(model);
    return st ? st : ir_verify(model);
}

static void program_free(pdc_program *p)
{
    if (p->backend && p->state) p->backend->destroy(p);
    ir_model_destroy(p->model);
    pdc_free(p->knobs);
    pdc_free(p->cost);
    pdc_free(p);
}

PDC_API pdc_status pdc_compile(pdc_context *ctx, const pdc_model *model, const char *target,
                               pdc_program **program_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, model, "model");
    PDC_CHECK_ARG(ctx, target, "target");
    PDC_CHECK_ARG(ctx, program_out, "program_out");
    pdc_status st = PDC_OK;
    if (!strcmp(target, "auto")) return pdc_compile_auto(ctx, model, program_out);
    const pdc_backend *be = find_backend(ctx, target, &st);
    if (!be) return st;
    if ((st = pdc_check_compilable(model))) return st;
    pdc_program *p = pdc_calloc(ctx, 1, sizeof *p);
    if (!p) return PDC_ERR_OUT_OF_MEMORY;
    p->ctx = ctx;
    p->backend = be;
    pdc_progress(ctx, "compile", 0, model->n_layers);
    /* the tuning database's choices for the cpu target's kernels (option tune) */
    if ((st = ir_model_clone(model, &p->model)) ||
        (be == &pdc_backend_cpu && (st = tune_model_knobs(ctx, p->model, ctx->tune, TUNE_DEFAULT_BUDGET_S, &p->knobs, NULL))) ||
        /* a scheduled model's steps divide the threads by predicted cost (backends/cpu/lanes.c) */
        (be == &pdc_backend_cpu && !ctx->sequential && ir_model_scheduled(p->model) &&
         (st = cost_layer_costs(ctx, p->model, &p->cost))) ||
        (st = be->compile(p))) {
        program_free(p);
        return st;
    }
    pdc_progress(ctx, "compile", model->n_layers, model->n_layers);
    pdc_object_created(ctx);
    *program_out = p;
    return PDC_OK;
}

PDC_API void pdc_program_destroy(pdc_program *program)
{
    if (!program) return;
    pdc_object_destroyed(program->ctx);
    program_free(program);
}

#define PROGRAM_CHECK(p)                                                                          \
    do {                                                                                          \
        if (!(p)) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: program is NULL", __func__); \
    } while (0)

PDC_API const char *pdc_program_target(const pdc_program *program)
{
    return program ? program->backend->name : "";
}

PDC_API pdc_status pdc_program_num_inputs(const pdc_program *program, size_t *n_out)
{
    PROGRAM_CHECK(program);
    PDC_CHECK_ARG(program->ctx, n_out, "n_out");
    *n_out = program->model->n_inputs;
    return PDC_OK;
}

PDC_API pdc_status pdc_program_num_outputs(const pdc_program *program, size_t *n_out)
{
    PROGRAM_CHECK(program);
    PDC_CHECK_ARG(program->ctx, n_out, "n_out");
    *n_out = program->model->n_outputs;
    return PDC_OK;
}

PDC_API pdc_status pdc_program_input_info(const pdc_program *program, size_t i, const char **name_out,
                                          size_t *rank_out, int64_t *dims_out)
{
    PROGRAM_CHECK(program);
    const ir_model *m = program->model;
    return pdc_tensor_info(m, __func__, m->inputs, m->n_inputs, "input", i, name_out, rank_out, dims_out);
}

PDC_API pdc_status pdc_program_output_info(const pdc_program *program, size_t i, const char **name_out,
                                           size_t *rank_out, int64_t *dims_out)
{
    PROGRAM_CHECK(program);
    const ir_model *m = program->model;
    return pdc_tensor_info(m, __func__, m->outputs, m->n_outputs, "output", i, name_out, rank_out, dims_out);
}

PDC_API pdc_status pdc_program_num_layers(const pdc_program *program, size_t *n_out)
{
    PROGRAM_CHECK(program);
    PDC_CHECK_ARG(program->ctx, n_out, "n_out");
    *n_out = program->model->n_layers;
    return PDC_OK;
}

PDC_API pdc_status pdc_program_num_threads(const pdc_program *program, size_t *n_out)
{
    PROGRAM_CHECK(program);
    PDC_CHECK_ARG(program->ctx, n_out, "n_out");
    *n_out = program->backend == &pdc_backend_cpu ? pdc_cpu_program_threads(program) : 1;
    return PDC_OK;
}

PDC_API pdc_status pdc_program_layer_kernel(const pdc_program *program, size_t i, const char **name_out,
                                            const char **kernel_out)
{
    PROGRAM_CHECK(program);
    const ir_model *m = program->model;
    if (i >= m->n_layers)
        return pdc_error(program->ctx, PDC_ERR_INVALID_ARG, "%s: layer %zu is out of range (the program has %zu)",
                         __func__, i, m->n_layers);
    if (name_out) *name_out = m->layers[i].name;
    if (kernel_out)
        *kernel_out = program->backend->layer_info ? program->backend->layer_info(program, i) : "reference interpreter";
    return PDC_OK;
}

/* The tensor must have exactly the shape of model tensor t. */
static pdc_status check_shape(const pdc_program *p, const char *what, const pdc_tensor *x, const ir_tensor *t)
{
    int same = x->rank == t->rank && !memcmp(x->dims, t->dims, (size_t)t->rank * sizeof *t->dims);
    if (same) return PDC_OK;
    char want[128], got[128];
    ir_format_shape(t->rank, t->dims, want, sizeof want);
    ir_format_shape(x->rank, x->dims, got, sizeof got);
    return pdc_error(p->ctx, PDC_ERR_SHAPE, "pdc_program_run: %s '%s' expects shape %s, got %s", what, t->name, want,
                     got);
}

/* A run that wants only some outputs (the others NULL) executes only the layers they depend on
 * (ir_model_live_layers), and needs only the inputs those read. */
static pdc_status plan_partial_run(const pdc_program *program, pdc_tensor *const *inputs,
                                   pdc_tensor *const *outputs, pdc_program_io *io)
{
    const ir_model *m = program->model;
    pdc_context *ctx = program->ctx;
    uint8_t *want = pdc_calloc(ctx, m->n_outputs + m->n_inputs + 1, 1);
    io->live = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, 1);
    pdc_status st = want && io->live ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    uint8_t *input_needed = want ? want + m->n_outputs : NULL;
    for (size_t i = 0; i < m->n_outputs && !st; i++) want[i] = outputs[i] != NULL;
    if (!st) st = ir_model_live_layers(m, want, io->live, input_needed);
    for (size_t i = 0; i < m->n_inputs && !st; i++)
        if (input_needed[i] && !inputs[i])
            st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_program_run: input '%s' is NULL, but an output asked for reads it",
                           m->tensors[m->inputs[i]].name);
    pdc_free(want);
    return st;
}

pdc_status pdc_program_io_get(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                              size_t n_outputs, pdc_tensor *const *outputs, pdc_program_io *io)
{
    const ir_model *m = program->model;
    pdc_context *ctx = program->ctx;
    memset(io, 0, sizeof *io);
    if (n_inputs != m->n_inputs || n_outputs != m->n_outputs)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_program_run: got %zu inputs and %zu outputs, the model has %zu and %zu",
                         n_inputs, n_outputs, m->n_inputs, m->n_outputs);
    if ((n_inputs && !inputs) || (n_outputs && !outputs))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_program_run: inputs or outputs array is NULL");
    pdc_status st;
    size_t wanted = 0;
    for (size_t i = 0; i < n_outputs; i++) wanted += outputs[i] != NULL;
    if (n_outputs && !wanted)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_program_run: every output is NULL: nothing to compute");
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i] && (st = check_shape(program, "input", inputs[i], &m->tensors[m->inputs[i]]))) return st;
    for (size_t i = 0; i < n_outputs; i++)
        if (outputs[i] && (st = check_shape(program, "output", outputs[i], &m->tensors[m->outputs[i]]))) return st;
    io->in = pdc_calloc(ctx, n_inputs ? n_inputs : 1, sizeof *io->in);
    io->out = pdc_calloc(ctx, n_outputs ? n_outputs : 1, sizeof *io->out);
    st = io->in && io->out ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    int partial = wanted < n_outputs;
    for (size_t i = 0; i < n_inputs && !st; i++)
        if (!inputs[i] && !partial) st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_program_run: input '%s' is NULL",
                                                   m->tensors[m->inputs[i]].name);
    if (!st && partial) st = plan_partial_run(program, inputs, outputs, io);
    if (st) {
        pdc_program_io_free(io);
        return st;
    }
    for (size_t i = 0; i < n_inputs; i++) io->in[i] = inputs[i] ? inputs[i]->data : NULL;
    for (size_t i = 0; i < n_outputs; i++) io->out[i] = outputs[i] ? outputs[i]->data : NULL;
    return PDC_OK;
}

void pdc_program_io_free(pdc_program_io *io)
{
    pdc_free(io->in);
    pdc_free(io->out);
    pdc_free(io->live);
    memset(io, 0, sizeof *io);
}

PDC_API pdc_status pdc_program_run(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                                   size_t n_outputs, pdc_tensor *const *outputs)
{
    PROGRAM_CHECK(program);
    pdc_program_io io;
    pdc_status st = pdc_program_io_get(program, n_inputs, inputs, n_outputs, outputs, &io);
    if (st) return st;
    st = program->backend->run(program, io.in, io.out, io.live);
    pdc_program_io_free(&io);
    return st;
}
