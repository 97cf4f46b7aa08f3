/*
 * cpu_fuse.c - residual adds (and a relu after them) fused into the epilogue of the conv that
 * produces one of their operands. A ResNet block ends in conv -> add(shortcut) -> relu: fused, the
 * conv's epilogue adds the shortcut and applies the relu while its result is in registers, where
 * the add and the relu were two more passes over memory each.
 */
#include "backends/cpu/cpu.h"

/* Tensor t occupies [offset, offset + numel) of the arena; tensors outside it (inputs, constants)
 * share memory with no arena tensor. */
static int shares_memory(const size_t *offset, const size_t *numel, int a, int b)
{
    if (offset[a] == CPU_NO_SLOT || offset[b] == CPU_NO_SLOT) return 0;
    return offset[a] < offset[b] + numel[b] && offset[b] < offset[a] + numel[a];
}

static int is_graph_output(const ir_model *m, int t)
{
    for (size_t i = 0; i < m->n_outputs; i++)
        if (m->outputs[i] == t) return 1;
    return 0;
}

/* Layers reading tensor t. */
static size_t consumers(const ir_model *m, int t)
{
    size_t n = 0;
    for (size_t li = 0; li < m->n_layers; li++)
        for (size_t i = 0; i < m->layers[li].n_inputs; i++) n += m->layers[li].inputs[i] == t;
    return n;
}

/* Index of the layer producing t, or -1 (a graph input or a constant). */
static long producer(const ir_model *m, int t)
{
    for (size_t li = 0; li < m->n_layers; li++)
        for (size_t i = 0; i < m->layers[li].n_outputs; i++)
            if (m->layers[li].outputs[i] == t) return (long)li;
    return -1;
}

static int same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

int cpu_fuse_residual(const ir_model *m, size_t li, const size_t *offset, const size_t *numel, cpu_residual *r)
{
    const ir_layer *c = &m->layers[li];
    if (c->op != IR_OP_CONV || c->n_outputs != 1 || li + 1 >= m->n_layers) return 0;
    int t = c->outputs[0];
    const ir_layer *a = &m->layers[li + 1];
    /* the conv's output feeds only the add right after it, of two operands of its shape */
    if (t < 0 || is_graph_output(m, t) || consumers(m, t) != 1) return 0;
    if (a->op != IR_OP_ADD || a->n_inputs != 2 || a->n_outputs != 1 || a->outputs[0] < 0) return 0;
    if ((a->inputs[0] == t) == (a->inputs[1] == t)) return 0; /* t on exactly one side */
    int res = a->inputs[0] == t ? a->inputs[1] : a->inputs[0];
    if (res < 0 || !same_shape(&m->tensors[res], &m->tensors[t]) || !same_shape(&m->tensors[a->outputs[0]], &m->tensors[t]))
        return 0;
    /* the other operand exists when the conv runs (with the add right after the conv, only a
     * malformed order could break this: checked all the same) */
    if (producer(m, res) >= (long)li) return 0;
    r->residual = res;
    r->out = a->outputs[0];
    r->relu = 0;
    /* a relu right after, on the add's output alone */
    if (li + 2 < m->n_layers) {
        const ir_layer *u = &m->layers[li + 2];
        int s = a->outputs[0];
        if (u->op == IR_OP_RELU && u->n_inputs == 1 && u->inputs[0] == s && u->n_outputs == 1 && u->outputs[0] >= 0 &&
            !is_graph_output(m, s) && consumers(m, s) == 1) {
            r->out = u->outputs[0];
            r->relu = 1;
        }
    }
    /* the memory plan may have given the tensor written the memory of one that dies at the conv
     * or the add: not the conv's input (read until the conv ends); the residual's only if exactly
     * (each output element is written right after its residual element is read) */
    if (shares_memory(offset, numel, r->out, c->inputs[0])) return 0;
    if (shares_memory(offset, numel, r->out, res) && (offset[r->out] != offset[res] || numel[r->out] != numel[res]))
        return 0;
    return 1;
}
