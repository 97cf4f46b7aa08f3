/*
 * ref_backend.c - the "ref" target: interprets the program's model layer by layer with the kernels
 * of backends/ref/. compile() plans where every activation lives in a per-run arena; run() allocates
 * that arena, points each tensor's buffer at constant data, a caller input or its arena slice, runs
 * the layers in order and copies the graph outputs out only after every layer succeeded. The state
 * is read-only after compile, so one program can run from many threads at once.
 */
#include <stdint.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "ir/arena.h"

/* Kernel per op; NULL = not supported by this backend. */
static const ref_kernel kernels[IR_OP_COUNT] = {
    [IR_OP_CONV] = ref_conv,
    [IR_OP_FC] = ref_gemm,
    [IR_OP_GEMM] = ref_gemm,
    [IR_OP_MATMUL] = ref_matmul,
    [IR_OP_BATCHNORM] = ref_batchnorm,
    [IR_OP_RELU] = ref_unary,
    [IR_OP_CLIP] = ref_unary,
    [IR_OP_LEAKY_RELU] = ref_unary,
    [IR_OP_SIGMOID] = ref_unary,
    [IR_OP_TANH] = ref_unary,
    [IR_OP_HARDSWISH] = ref_unary,
    [IR_OP_ADD] = ref_binary,
    [IR_OP_MUL] = ref_binary,
    [IR_OP_CONCAT] = ref_concat,
    [IR_OP_MAXPOOL] = ref_pool,
    [IR_OP_AVGPOOL] = ref_pool,
    [IR_OP_GLOBAL_AVGPOOL] = ref_global_avgpool,
    [IR_OP_FLATTEN] = ref_copy,
    [IR_OP_RESHAPE] = ref_copy,
    [IR_OP_TRANSPOSE] = ref_transpose,
    [IR_OP_SOFTMAX] = ref_softmax,
    [IR_OP_LSTM] = ref_lstm,
    [IR_OP_GRU] = ref_gru,
    [IR_OP_SUB] = ref_binary,
    [IR_OP_DIV] = ref_binary,
    [IR_OP_HARDSIGMOID] = ref_unary,
};

pdc_status ref_run_layer(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if ((int)l->op < 0 || l->op >= IR_OP_COUNT || !kernels[l->op])
        return pdc_error(m->ctx, PDC_ERR_UNSUPPORTED, "ref: layer '%s': op has no reference kernel", l->name);
    pdc_status st = kernels[l->op](m, l, buf);
    if (st == PDC_OK) st = ref_fused_activation(m, l, buf);
    return st;
}

#define REF_ALIGN_FLOATS 16 /* arena slices start on 64-byte boundaries (relative to the arena) */
#define REF_NO_SLOT SIZE_MAX

typedef struct ref_state {
    size_t n_tensors;
    size_t *numel;        /* per tensor */
    size_t *offset;       /* per tensor: float offset in the arena, REF_NO_SLOT if not an activation */
    size_t *input_slot;   /* per tensor: index into model->inputs, REF_NO_SLOT if none */
    size_t arena_floats;
} ref_state;

static void ref_destroy(pdc_program *prog)
{
    ref_state *s = prog->state;
    if (!s) return;
    pdc_free(s->numel);
    pdc_free(s->offset);
    pdc_free(s->input_slot);
    pdc_free(s);
    prog->state = NULL;
}

static pdc_status ref_compile(pdc_program *prog)
{
    const ir_model *m = prog->model;
    pdc_context *ctx = prog->ctx;
    prog->state = NULL;

    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        if ((int)l->op < 0 || l->op >= IR_OP_COUNT || !kernels[l->op])
            return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "ref: layer '%s': op %s has no reference kernel", l->name,
                             ((int)l->op >= 0 && l->op < IR_OP_COUNT) ? ir_op_get_info(l->op)->name : "?");
    }

    ref_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    prog->state = s;
    s->n_tensors = m->n_tensors;
    size_t n = m->n_tensors ? m->n_tensors : 1;
    s->numel = pdc_calloc(ctx, n, sizeof *s->numel);
    s->offset = pdc_calloc(ctx, n, sizeof *s->offset);
    s->input_slot = pdc_calloc(ctx, n, sizeof *s->input_slot);
    if (!s->numel || !s->offset || !s->input_slot) {
        ref_destroy(prog);
        return PDC_ERR_OUT_OF_MEMORY;
    }

    int planned;
    pdc_status st = ir_arena_layout(ctx, m, "ref", REF_ALIGN_FLOATS, s->numel, s->offset, s->input_slot,
                                    &s->arena_floats, &planned);
    if (st) ref_destroy(prog);
    return st;
}

static pdc_status ref_run(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                          const uint8_t *live)
{
    const ir_model *m = prog->model;
    const ref_state *s = prog->state;
    pdc_context *ctx = prog->ctx;
    if (!s) return pdc_error(ctx, PDC_ERR_INVALID_STATE, "ref: program was not compiled");

    float **buf = pdc_calloc(ctx, s->n_tensors ? s->n_tensors : 1, sizeof *buf);
    float *arena = buf ? pdc_alloc(ctx, s->arena_floats * sizeof(float)) : NULL;
    if (!arena) {
        pdc_free(buf);
        pdc_error_prefix(ctx, "ref: activation memory (%zu bytes)", s->arena_floats * sizeof(float));
        return PDC_ERR_OUT_OF_MEMORY;
    }

    pdc_status st = PDC_OK;
    for (size_t t = 0; t < s->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (tt->kind == IR_TENSOR_CONST)
            buf[t] = tt->data;
        else if (tt->kind == IR_TENSOR_INPUT && s->input_slot[t] != REF_NO_SLOT)
            buf[t] = (float *)(uintptr_t)inputs[s->input_slot[t]]; /* kernels never write inputs */
        else if (s->offset[t] != REF_NO_SLOT)
            buf[t] = arena + s->offset[t];
        else
            buf[t] = NULL;
    }

    for (size_t li = 0; li < m->n_layers && st == PDC_OK; li++) {
        const ir_layer *l = &m->layers[li];
        if (live && !live[li]) continue;
        /* buf is indexed by tensor; the kernel checks absent (-1) operands itself */
        st = ref_run_layer(m, l, buf);
        /* option check_finite: the first layer whose output holds a NaN or an infinity fails the run
         * (the caller's outputs are written only at the end, so they stay untouched) */
        for (size_t k = 0; k < l->n_outputs && st == PDC_OK && ctx->check_finite; k++)
            if (l->outputs[k] >= 0 && buf[l->outputs[k]])
                st = ir_check_layer_output(m, l, l->outputs[k], buf[l->outputs[k]], s->numel[l->outputs[k]]);
        if (st != PDC_OK) pdc_error_prefix(ctx, "ref"); /* kernel messages name the layer */
    }

    if (st == PDC_OK) {
        for (size_t i = 0; i < m->n_outputs; i++) {
            int t = m->outputs[i];
            if (outputs[i] && !buf[t]) {
                st = pdc_error(ctx, PDC_ERR_INTERNAL, "ref: graph output '%s' has no buffer", m->tensors[t].name);
                break;
            }
        }
    }
    if (st == PDC_OK) {
        for (size_t i = 0; i < m->n_outputs; i++) {
            int t = m->outputs[i];
            if (outputs[i]) memmove(outputs[i], buf[t], s->numel[t] * sizeof(float));
        }
    }
    pdc_free(arena);
    pdc_free(buf);
    return st;
}

const pdc_backend pdc_backend_ref = {"ref", "plain-C reference interpreter", ref_compile, ref_run, ref_destroy, NULL};
