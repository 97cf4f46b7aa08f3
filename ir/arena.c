/*
 * arena.c - liveness of activations and the check of an activation memory plan (see arena.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"

int ir_model_scheduled(const ir_model *m)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_attr *a = ir_attrs_find(&m->layers[li].attrs, IR_STEP_ATTR);
        if (!a || a->type != IR_ATTR_INT) return 0;
    }
    return m->n_layers > 0;
}

size_t ir_layer_time(const ir_model *m, size_t li, int scheduled)
{
    return scheduled ? (size_t)ir_attr_int(&m->layers[li].attrs, IR_STEP_ATTR, 0) : li;
}

pdc_status ir_schedule_chains(const ir_model *m, size_t *chain)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        int64_t step = ir_attr_int(&l->attrs, IR_STEP_ATTR, -1);
        if (step < 0 || step >= (int64_t)m->n_layers || (li && step < ir_attr_int(&m->layers[li - 1].attrs, IR_STEP_ATTR, 0)))
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': step %" PRId64 " is out of order (steps "
                             "count from 0 and never decrease along the layers; run the schedule pass again)",
                             l->name, step);
        chain[li] = li;
        int joined = 0;
        for (size_t i = 0; i < l->n_inputs; i++) {
            int t = l->inputs[i];
            int p = t >= 0 ? m->tensors[t].producer : -1;
            if (p < 0) continue;
            int64_t ps = ir_attr_int(&m->layers[p].attrs, IR_STEP_ATTR, -1);
            if (ps > step)
                return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' (step %" PRId64 ") reads '%s' of step %" PRId64,
                                 l->name, step, m->tensors[t].name, ps);
            if (ps < step) continue;
            if (joined && chain[li] != chain[p])
                return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s' reads two chains of its step %" PRId64
                                 " (run the schedule pass again)", l->name, step);
            chain[li] = chain[p];
            joined = 1;
        }
    }
    return PDC_OK;
}

void ir_schedule_drop(ir_model *m)
{
    for (size_t li = 0; li < m->n_layers; li++) ir_attrs_remove(&m->layers[li].attrs, IR_STEP_ATTR);
}

void ir_liveness(const ir_model *m, size_t *def, size_t *last)
{
    int scheduled = ir_model_scheduled(m);
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        int act = tt->kind == IR_TENSOR_ACT && tt->producer >= 0;
        def[t] = last[t] = act ? ir_layer_time(m, (size_t)tt->producer, scheduled) : SIZE_MAX;
    }
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        size_t time = ir_layer_time(m, li, scheduled);
        for (size_t i = 0; i < l->n_inputs; i++) {
            int t = l->inputs[i];
            if (t >= 0 && def[t] != SIZE_MAX && last[t] < time) last[t] = time;
        }
    }
    for (size_t i = 0; i < m->n_outputs; i++) {
        int t = m->outputs[i];
        if (t >= 0 && def[t] != SIZE_MAX) last[t] = m->n_layers;
    }
}

typedef struct placed {
    size_t tensor, off, size, def, last;
} placed;

static int by_offset(const void *a, const void *b)
{
    const placed *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* Reads layer li's arena_offsets into the placements of its outputs. */
static pdc_status read_layer(const ir_model *m, size_t li, const size_t *def, const size_t *last, placed *p,
                             size_t *np, size_t *arena, size_t *total)
{
    const ir_layer *l = &m->layers[li];
    const ir_attr *at = ir_attrs_find(&l->attrs, IR_ARENA_ATTR);
    if (!at)
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL,
                         "layer '%s' has no %s while other layers do (a memory plan covers every layer; run the "
                         "plan pass again)", l->name, IR_ARENA_ATTR);
    if (at->type != IR_ATTR_INTS || at->n != l->n_outputs)
        return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': %s must be a list of %zu ints (one per output)",
                         l->name, IR_ARENA_ATTR, l->n_outputs);
    for (size_t i = 0; i < l->n_outputs; i++) {
        int t = l->outputs[i];
        int64_t off = at->ints[i];
        if (t < 0) {
            if (off != -1)
                return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': %s[%zu] is %" PRId64
                                 " for an absent output (expected -1)", l->name, IR_ARENA_ATTR, i, off);
            continue;
        }
        const ir_tensor *tt = &m->tensors[t];
        size_t n, bytes, end;
        if (!ir_numel(tt->rank, tt->dims, &n) || pdc_mul_overflow(n, sizeof(float), &bytes))
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': output '%s' has no concrete shape, so it "
                             "cannot be planned", l->name, tt->name);
        if (off < 0 || off % IR_ARENA_ALIGN || pdc_add_overflow((size_t)off, bytes, &end))
            return pdc_error(m->ctx, PDC_ERR_INVALID_MODEL, "layer '%s': %s[%zu] is %" PRId64
                             " (expected a multiple of %d, >= 0)", l->name, IR_ARENA_ATTR, i, off, IR_ARENA_ALIGN);
        p[*np] = (placed){(size_t)t, (size_t)off, bytes, def[t], last[t]};
        (*np)++;
        if (end > *arena) *arena = end;
        if (pdc_add_overflow(*total, bytes, total))
            return pdc_error(m->ctx, PDC_ERR_OVERFLOW, "activation sizes overflow at '%s'", tt->name);
    }
    return PDC_OK;
}

pdc_status ir_arena_get(const ir_model *m, int *present, size_t *offsets, size_t *arena_bytes,
                        size_t *activation_bytes)
{
    *present = 0;
    int any = 0;
    for (size_t li = 0; li < m->n_layers && !any; li++) any = ir_attrs_find(&m->layers[li].attrs, IR_ARENA_ATTR) != NULL;
    if (!any) return PDC_OK;

    size_t nt = m->n_tensors ? m->n_tensors : 1;
    size_t *def = pdc_calloc(m->ctx, nt, sizeof *def);
    size_t *last = pdc_calloc(m->ctx, nt, sizeof *last);
    placed *p = pdc_calloc(m->ctx, nt, sizeof *p);
    pdc_status st = def && last && p ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    size_t np = 0, arena = 0, total = 0;
    if (!st) ir_liveness(m, def, last);
    for (size_t li = 0; li < m->n_layers && !st; li++) st = read_layer(m, li, def, last, p, &np, &arena, &total);
    if (!st) {
        /* Sweep in offset order: only tensors whose byte ranges overlap are compared. */
        qsort(p, np, sizeof *p, by_offset);
        for (size_t i = 0; i < np && !st; i++) {
            for (size_t j = i + 1; j < np && p[j].off < p[i].off + p[i].size; j++) {
                if (p[i].def <= p[j].last && p[j].def <= p[i].last) {
                    const placed *a = &p[i], *b = &p[j];
                    st = pdc_error(m->ctx, PDC_ERR_INVALID_MODEL,
                                   "memory plan: '%s' (bytes %zu..%zu, live in layers %zu..%zu) overlaps '%s' (bytes "
                                   "%zu..%zu, live in layers %zu..%zu)",
                                   m->tensors[a->tensor].name, a->off, a->off + a->size, a->def, a->last,
                                   m->tensors[b->tensor].name, b->off, b->off + b->size, b->def, b->last);
                    break;
                }
            }
        }
    }
    if (!st) {
        *present = 1;
        if (offsets) {
            for (size_t t = 0; t < m->n_tensors; t++) offsets[t] = SIZE_MAX;
            for (size_t i = 0; i < np; i++) offsets[p[i].tensor] = p[i].off;
        }
        if (arena_bytes) *arena_bytes = arena;
        if (activation_bytes) *activation_bytes = total;
    }
    pdc_free(def);
    pdc_free(last);
    pdc_free(p);
    return st;
}

pdc_status ir_arena_layout(const pdc_context *ctx, const ir_model *m, const char *who, size_t align_floats,
                           size_t *numel, size_t *offset, size_t *input_slot, size_t *arena_floats, int *planned)
{
    size_t total = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        size_t ne;
        if (!ir_numel(tt->rank, tt->dims, &ne)) {
            char shape[128];
            ir_format_shape(tt->rank, tt->dims, shape, sizeof shape);
            return pdc_error(ctx, PDC_ERR_SHAPE, "%s: tensor '%s' has shape %s (symbolic or too large)", who, tt->name,
                             shape);
        }
        numel[t] = ne;
        offset[t] = SIZE_MAX;
        input_slot[t] = SIZE_MAX;
        if (tt->kind == IR_TENSOR_ACT) {
            size_t padded;
            if (pdc_add_overflow(ne, align_floats - 1, &padded) ||
                pdc_add_overflow(total, padded / align_floats * align_floats, &padded))
                return pdc_error(ctx, PDC_ERR_OVERFLOW, "%s: activation memory overflows at tensor '%s'", who, tt->name);
            offset[t] = total;
            total = padded;
        } else if (tt->kind == IR_TENSOR_CONST && !tt->data) {
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "%s: constant '%s' has no data", who, tt->name);
        }
    }
    size_t bytes;
    if (pdc_mul_overflow(total, sizeof(float), &bytes))
        return pdc_error(ctx, PDC_ERR_OVERFLOW, "%s: activation memory overflows", who);
    /* A memory plan (the plan pass) shares arena bytes between activations that are never live at
     * the same time; the verifier has checked it, ir_arena_get checks it again. */
    size_t planned_bytes = 0;
    pdc_status st = ir_arena_get(m, planned, offset, &planned_bytes, NULL);
    if (st) return st;
    if (*planned) {
        for (size_t t = 0; t < m->n_tensors; t++)
            if (offset[t] != SIZE_MAX) offset[t] /= sizeof(float);
        total = planned_bytes / sizeof(float);
    }
    /* The arena is one allocation: refused here, at compile time, before any kernel is built or
     * memory touched, if it cannot be made under max_memory. */
    if (ctx->max_memory && total > ctx->max_memory / sizeof(float))
        return pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "%s: activation memory of %zu bytes exceeds max_memory (%zu bytes)",
                         who, total * sizeof(float), ctx->max_memory);
    *arena_floats = total;
    for (size_t i = 0; i < m->n_inputs; i++) {
        const int t = m->inputs[i];
        if (t < 0 || (size_t)t >= m->n_tensors)
            return pdc_error(ctx, PDC_ERR_INTERNAL, "%s: graph input %zu has bad tensor index %d", who, i, t);
        input_slot[t] = i;
    }
    return PDC_OK;
}

void ir_arena_drop(ir_model *m)
{
    for (size_t li = 0; li < m->n_layers; li++) ir_attrs_remove(&m->layers[li].attrs, IR_ARENA_ATTR);
}
