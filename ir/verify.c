/*
 * verify.c - the IR verifier: every fact a pass or backend relies on, checked with a message that
 * names the layer or tensor and the broken fact. Run before compile and between passes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/ir.h"

/* The index of the first of the n names (names(i)) equal to an earlier one, or SIZE_MAX: with a
 * hash table of its own (the model's name index is what the verifier checks, not what it trusts),
 * so verifying is linear in the model's size; a scan if the table cannot be had. */
static size_t first_repeat(const ir_model *m, int layers, size_t n)
{
#define NAME(i) (layers ? m->layers[i].name : m->tensors[i].name)
    size_t cap = 64;
    while (cap < 2 * n + 2) cap *= 2;
    size_t *slots = n > 8 ? calloc(cap, sizeof *slots) : NULL;
    for (size_t i = 0; i < n; i++) {
        const char *s = NAME(i);
        if (!slots) {
            for (size_t j = 0; j < i; j++)
                if (!strcmp(NAME(j), s)) return i;
            continue;
        }
        uint64_t h = 1469598103934665603ull;
        for (const char *c = s; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        size_t k = (size_t)(h ^ h >> 29) & (cap - 1);
        for (; slots[k]; k = (k + 1) & (cap - 1))
            if (!strcmp(NAME(slots[k] - 1), s)) {
                free(slots);
                return i;
            }
        slots[k] = i + 1;
    }
    free(slots);
    return SIZE_MAX;
#undef NAME
}

static pdc_status verify_tensor(const ir_model *m, size_t ti, size_t repeat)
{
    const ir_tensor *t = &m->tensors[ti];
    if (!ir_name_valid(t->name)) return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor %zu has an invalid name", ti);
    if (ti == repeat) return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor '%s' is defined twice", t->name);
    if (t->rank > PDC_MAX_RANK)
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor '%s' has rank %d > %d", t->name, t->rank, PDC_MAX_RANK);
    switch (t->kind) {
    case IR_TENSOR_CONST:
        if (!t->data) return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "constant '%s' has no data", t->name);
        return ir_sparsity_validate(m->ctx, t, &t->sparsity);
    case IR_TENSOR_ACT: {
        if (t->producer < 0 || (size_t)t->producer >= m->n_layers)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor '%s' has no producing layer", t->name);
        const ir_layer *l = &m->layers[t->producer];
        for (size_t i = 0; i < l->n_outputs; i++)
            if (l->outputs[i] == (int)ti) return PDC_OK;
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor '%s' claims layer '%s' as producer, which does not output it",
                         t->name, l->name);
    }
    case IR_TENSOR_INPUT:
        if (t->sparsity.kind != IR_SPARSITY_NONE)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "input '%s' carries sparsity", t->name);
        return PDC_OK;
    }
    return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "tensor '%s' has unknown kind %d", t->name, (int)t->kind);
}

static pdc_status verify_layer(const ir_model *m, size_t li, size_t repeat)
{
    const ir_layer *l = &m->layers[li];
    const ir_op_info *info = ir_op_get_info(l->op);
    if (!info) return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer %zu has unknown op id %d", li, (int)l->op);
    if (li == repeat) return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' is defined twice", l->name);
    if (l->n_inputs < (size_t)info->min_inputs || l->n_inputs > (size_t)info->max_inputs ||
        l->n_outputs < (size_t)info->min_outputs || l->n_outputs > (size_t)info->max_outputs)
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' (%s) has %zu inputs and %zu outputs", l->name,
                         info->name, l->n_inputs, l->n_outputs);
    for (size_t i = 0; i < l->n_inputs; i++) {
        int t = l->inputs[i];
        if (t < 0) {
            if (i < (size_t)info->min_inputs)
                return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' (%s): required input %zu is absent", l->name,
                                 info->name, i);
            continue;
        }
        if ((size_t)t >= m->n_tensors)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': input %zu refers to tensor %d of %zu", l->name, i,
                             t, m->n_tensors);
        const ir_tensor *in = &m->tensors[t];
        /* Layers are in topological order: an activation must come from an earlier layer. */
        if (in->kind == IR_TENSOR_ACT && in->producer >= (int)li)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL,
                             "layer '%s' uses '%s' before layer '%s' produces it (cycle or wrong order)", l->name,
                             in->name, m->layers[in->producer].name);
    }
    for (size_t i = 0; i < l->n_outputs; i++) {
        int t = l->outputs[i];
        if (t < 0 && i == 0)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' has no first output", l->name);
        if (t >= 0 && ((size_t)t >= m->n_tensors || m->tensors[t].producer != (int)li))
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': output %zu is not owned by it", l->name, i);
    }
    /* Re-infer and compare: stored shapes must be what the op implies. The model is restored
     * unchanged (inference writes only the output shapes, which we put back). */
    ir_model *mm = (ir_model *)m;
    int saved_rank[8];
    int64_t saved[8][PDC_MAX_RANK];
    size_t n_out = l->n_outputs < 8 ? l->n_outputs : 8;
    for (size_t i = 0; i < n_out; i++) {
        if (l->outputs[i] < 0) continue;
        saved_rank[i] = m->tensors[l->outputs[i]].rank;
        memcpy(saved[i], m->tensors[l->outputs[i]].dims, sizeof saved[i]);
    }
    pdc_status st = ir_infer_layer(mm, li);
    for (size_t i = 0; i < n_out; i++) {
        if (l->outputs[i] < 0) continue;
        ir_tensor *t = &mm->tensors[l->outputs[i]];
        int same = t->rank == saved_rank[i] && !memcmp(t->dims, saved[i], sizeof saved[i]);
        if (!st && !same) {
            char want[128], got[128];
            ir_format_shape(t->rank, t->dims, want, sizeof want);
            ir_format_shape(saved_rank[i], saved[i], got, sizeof got);
            st = pdc_error(m->ctx, PDC_ERR_SHAPE, "layer '%s': output '%s' has shape %s but the op gives %s", l->name,
                           t->name, got, want);
        }
        t->rank = saved_rank[i];
        memcpy(t->dims, saved[i], sizeof saved[i]);
    }
    return st;
}

pdc_status ir_verify(const ir_model *m)
{
    pdc_status st;
    /* names are checked valid (not NULL) before they are compared: tensor by tensor, a repeat is
     * reported where the scan used to find it */
    for (size_t i = 0; i < m->n_tensors; i++)
        if (!ir_name_valid(m->tensors[i].name)) return verify_tensor(m, i, SIZE_MAX);
    const size_t tr = first_repeat(m, 0, m->n_tensors);
    for (size_t i = 0; i < m->n_tensors; i++)
        if ((st = verify_tensor(m, i, tr))) return st;
    const size_t lr = first_repeat(m, 1, m->n_layers);
    for (size_t i = 0; i < m->n_layers; i++)
        if ((st = verify_layer(m, i, lr))) return st;
    for (size_t i = 0; i < m->n_inputs; i++) {
        int t = m->inputs[i];
        if (t < 0 || (size_t)t >= m->n_tensors || m->tensors[t].kind != IR_TENSOR_INPUT)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "graph input %zu is not an input tensor", i);
    }
    if (!m->n_outputs)
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "model '%s' has no outputs (mark one with pdc_model_mark_output)",
                         m->name);
    for (size_t i = 0; i < m->n_outputs; i++) {
        int t = m->outputs[i];
        if (t < 0 || (size_t)t >= m->n_tensors || m->tensors[t].kind != IR_TENSOR_ACT)
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "graph output %zu is not produced by a layer", i);
    }
    for (size_t li = 0; li < m->n_layers; li++) {
        if (!ir_attrs_find(&m->layers[li].attrs, IR_STEP_ATTR)) continue;
        /* a schedule (schedule pass), if any, covers every layer and respects the data flow */
        if (!ir_model_scheduled(m))
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' has an int %s while other layers have none "
                             "(a schedule covers every layer; run the schedule pass again)", m->layers[li].name,
                             IR_STEP_ATTR);
        size_t *chain = pdc_calloc(m->ctx, m->n_layers, sizeof *chain);
        if (!chain) return PDC_ERR_OUT_OF_MEMORY;
        st = ir_schedule_chains(m, chain);
        pdc_free(chain);
        if (st) return st;
        break;
    }
    int planned; /* a memory plan (plan pass), if any, must place every activation without overlaps */
    return ir_arena_get(m, &planned, NULL, NULL, NULL);
}
