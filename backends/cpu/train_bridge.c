/*
 * train_bridge.c - the cpu backend's kernels for the trainer's forward pass (lib/train_cpu.h): the
 * elementwise family planned per layer of the trainer's execution model, again whenever the batch
 * size (and with it the shapes) changes; the JIT'd code itself is cached by the context.
 */
#include <string.h>

#include "backends/cpu/cpu.h"
#include "lib/train_cpu.h"

typedef struct tr_cpu {
    size_t n_layers, planned_n;
    cpu_layer *layers;
    float *scratch;
} tr_cpu;

void tr_cpu_free(tr_net *net)
{
    tr_cpu *c = net->cpu;
    if (!c) return;
    for (size_t i = 0; i < c->n_layers; i++)
        if (c->layers[i].free_state) c->layers[i].free_state(c->layers[i].state);
    pdc_free(c->layers);
    pdc_free(c->scratch);
    pdc_free(c);
    net->cpu = NULL;
}

/* Ops whose forward pass may come from the elementwise family. */
static int elementwise(ir_op op)
{
    switch (op) {
    case IR_OP_RELU: case IR_OP_CLIP: case IR_OP_LEAKY_RELU: case IR_OP_SIGMOID: case IR_OP_TANH:
    case IR_OP_HARDSWISH: case IR_OP_HARDSIGMOID: case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV:
        return 1;
    default: return 0;
    }
}

pdc_status tr_cpu_prepare(tr_net *net)
{
    const tr_cpu *old = net->cpu;
    if (old && old->planned_n == net->exec_n) return PDC_OK;
    tr_cpu_free(net);
    const ir_model *m = net->exec;
    tr_cpu *c = pdc_calloc(net->ctx, 1, sizeof *c);
    if (!c) return PDC_ERR_OUT_OF_MEMORY;
    net->cpu = c;
    c->layers = pdc_calloc(net->ctx, m->n_layers ? m->n_layers : 1, sizeof *c->layers);
    if (!c->layers) {
        tr_cpu_free(net);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    cpu_compile cc = {net->ctx, NULL, NULL, net->threads, NULL, NULL, NULL};
    pdc_status st = pdc_jit_get(net->ctx, &cc.jit);
    if (!st) cc.target = pdc_jit_target(cc.jit);
    size_t scratch = 0;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        c->n_layers = li + 1;
        if (!elementwise(l->op)) continue;
        char why[160];
        st = cpu_plan_eltwise(&cc, m, l, &c->layers[li], why, sizeof why);
        if (st == PDC_ERR_UNSUPPORTED) {
            memset(&c->layers[li], 0, sizeof c->layers[li]);
            st = PDC_OK;
        } else if (!st && c->layers[li].scratch_floats > scratch) {
            scratch = c->layers[li].scratch_floats;
        }
    }
    if (!st && !(c->scratch = pdc_alloc_aligned(net->ctx, scratch ? scratch : 1, sizeof(float))))
        st = PDC_ERR_OUT_OF_MEMORY;
    if (st) {
        pdc_error_prefix(net->ctx, "trainer: cpu kernels");
        tr_cpu_free(net);
        return st;
    }
    c->planned_n = net->exec_n;
    return PDC_OK;
}

int tr_cpu_has(const tr_net *net, size_t li)
{
    const tr_cpu *c = net->cpu;
    return c && li < c->n_layers && c->layers[li].run;
}

pdc_status tr_cpu_forward(tr_net *net, size_t li)
{
    const tr_cpu *c = net->cpu;
    const cpu_layer *L = &c->layers[li];
    /* elementwise kernels: no private scratch, no work shares */
    const cpu_exec x = {net->threads, c->scratch, NULL, NULL};
    return L->run(L, net->exec, &net->exec->layers[li], net->val, &x);
}
