/*
 * cpu_fuse.c - the layers after a conv that its epilogue computes (ir/epilogue.h): a residual add
 * and an activation after it, or an activation alone. A ResNet block ends in conv -> add(shortcut)
 * -> relu, and a model imported without canonicalize has conv -> relu wherever no batchnorm sits
 * between them: fused, the conv's epilogue adds the shortcut and applies the activation while its
 * result is in registers, where each of those layers was one more pass over memory.
 */
#include "backends/cpu/cpu.h"

/* Tensor t occupies [offset, offset + numel) of the arena; tensors outside it (inputs, constants)
 * share memory with no arena tensor. */
static int shares_memory(const size_t *offset, const size_t *numel, int a, int b)
{
    if (offset[a] == CPU_NO_SLOT || offset[b] == CPU_NO_SLOT) return 0;
    return offset[a] < offset[b] + numel[b] && offset[b] < offset[a] + numel[a];
}

int cpu_fuse_epilogue(const ir_model *m, size_t li, const size_t *offset, const size_t *numel, ir_epilogue *e)
{
    if (!ir_conv_epilogue(m, li, e)) return 0;
    /* the memory plan may have given the tensor written the memory of one that dies at the conv
     * or in the epilogue: not the conv's input (read until the conv ends); the residual's only if
     * exactly (each output element is written right after its residual element is read) */
    if (shares_memory(offset, numel, e->out, m->layers[li].inputs[0])) return 0;
    if (e->residual >= 0 && shares_memory(offset, numel, e->out, e->residual) &&
        (offset[e->out] != offset[e->residual] || numel[e->out] != numel[e->residual]))
        return 0;
    return 1;
}
