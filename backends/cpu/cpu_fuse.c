/*
 * cpu_fuse.c - the layers after a conv, fc or matmul that its epilogue computes (ir/ops/epilogue.h): a
 * batchnorm, a residual or bias add, an activation. A ResNet block ends in conv -> add(shortcut) ->
 * relu, a model imported without canonicalize has conv -> batchnorm -> relu and fc -> relu, and a
 * transformer's linear layer arrives as matmul -> add(bias): fused, the batchnorm is folded into the
 * weights the conv packs, and the epilogue adds the shortcut or bias and applies the activation
 * while the result is in registers or cache, where each of those layers was one more pass over memory.
 */
#include <math.h>

#include "backends/cpu/cpu.h"
#include "ir/ops/batchnorm.h"

/* Tensor t occupies [offset, offset + numel) of the arena; tensors outside it (inputs, constants)
 * share memory with no arena tensor. */
static int shares_memory(const size_t *offset, const size_t *numel, int a, int b)
{
    if (offset[a] == CPU_NO_SLOT || offset[b] == CPU_NO_SLOT) return 0;
    return offset[a] < offset[b] + numel[b] && offset[b] < offset[a] + numel[a];
}

int cpu_fuse_epilogue(const ir_model *m, size_t li, const size_t *offset, const size_t *numel, ir_epilogue *e)
{
    if (!ir_layer_epilogue(m, li, e)) return 0;
    /* the memory plan may have given the tensor written the memory of one that dies at the layer
     * or in the epilogue: not any of the layer's inputs (read until it ends: a matmul's second
     * operand and an fc's bias may be activations too); the residual's only if exactly (each output
     * element is written right after its residual element is read) */
    const ir_layer *l = &m->layers[li];
    for (size_t i = 0; i < l->n_inputs; i++)
        if (l->inputs[i] >= 0 && shares_memory(offset, numel, e->out, l->inputs[i])) return 0;
    if (e->residual >= 0 && shares_memory(offset, numel, e->out, e->residual) &&
        (offset[e->out] != offset[e->residual] || numel[e->out] != numel[e->residual]))
        return 0;
    return 1;
}

pdc_status cpu_fuse_fold_batchnorm(pdc_context *ctx, const ir_model *m, size_t li, const ir_epilogue *e, float **w,
                                   float **b)
{
    const ir_layer *c = &m->layers[li], *bn = &m->layers[e->bn];
    const ir_tensor *wt = &m->tensors[c->inputs[1]];
    const ir_tensor *bt = c->n_inputs > 2 && c->inputs[2] >= 0 ? &m->tensors[c->inputs[2]] : NULL;
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(m, c, &fp);
    if (st) return st;
    const int64_t o = wt->dims[0];
    const size_t per = ir_tensor_numel(wt) / (size_t)o;
    *w = pdc_alloc(ctx, ir_tensor_numel(wt) * sizeof **w);
    *b = pdc_alloc(ctx, (size_t)o * sizeof **b);
    if (!*w || !*b) {
        pdc_free(*w);
        pdc_free(*b);
        *w = *b = NULL;
        return PDC_ERR_OUT_OF_MEMORY;
    }
    int finite = 1;
    for (int64_t f = 0; f < o; f++) {
        double g, shift; /* of the output channel stored filter f computes */
        ir_batchnorm_channel(m, bn, fp.out_perm ? fp.out_perm[f] : f, &g, &shift);
        for (size_t k = 0; k < per; k++) {
            float v = (float)((double)wt->data[(size_t)f * per + k] * g);
            (*w)[(size_t)f * per + k] = v;
            finite &= isfinite(v) != 0;
        }
        (*b)[f] = (float)((bt ? (double)bt->data[f] : 0.0) * g + shift);
        finite &= isfinite((*b)[f]) != 0;
    }
    if (finite) return PDC_OK;
    pdc_free(*w);
    pdc_free(*b);
    *w = *b = NULL;
    return PDC_ERR_UNSUPPORTED;
}
