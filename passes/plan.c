/*
 * plan.c - the plan pass: liveness-based activation memory planning into one arena. Every
 * activation gets a byte offset (attribute arena_offsets on its producing layer, see ir/arena.h);
 * tensors whose live ranges overlap get disjoint bytes. Placement is greedy by size: tensors in
 * order of decreasing size (then earlier definition, then tensor index), each at the lowest
 * 64-byte-aligned offset where it overlaps no placed tensor that is live at the same time.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/ops/epilogue.h"
#include "passes/passes.h"

typedef struct item {
    size_t tensor, size, def, last, off;
} item;

static int by_size(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->def != y->def) return x->def < y->def ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

typedef struct span {
    size_t off, end;
} span;

static int by_off(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static size_t align_up(size_t v) { return (v + IR_ARENA_ALIGN - 1) / IR_ARENA_ALIGN * IR_ARENA_ALIGN; }

/* The layers a conv's, fc's or matmul's epilogue may compute (ir/ops/epilogue.h: a batchnorm, a
 * residual or bias add, an activation; the cpu target fuses them, backends/cpu/cpu_fuse.c) write
 * their result while the layer still reads its input: their outputs are planned as live from the
 * layer on, so they never get the memory of its input (nor of the add's other operand). Any plan
 * made so is valid for the plain live ranges too (they only start earlier). */
static void epilogue_liveness(const ir_model *m, size_t *def)
{
    int scheduled = ir_model_scheduled(m);
    for (size_t li = 0; li < m->n_layers; li++) {
        ir_epilogue e;
        if (!ir_layer_epilogue(m, li, &e)) continue;
        for (int k = 1; k <= e.n_layers; k++) {
            int t = m->layers[li + k].outputs[0];
            if (def[t] != SIZE_MAX) def[t] = ir_layer_time(m, li, scheduled);
        }
    }
}

pdc_status pass_plan(ir_model *m, const pass_options *opt)
{
    pass_options *out = (pass_options *)opt; /* the plan results are reported through opt */
    const pdc_context *ctx = m->ctx;
    size_t nt = m->n_tensors ? m->n_tensors : 1;
    size_t *def = pdc_calloc(ctx, nt, sizeof *def), *last = pdc_calloc(ctx, nt, sizeof *last);
    size_t *offset = pdc_calloc(ctx, nt, sizeof *offset);
    item *items = pdc_calloc(ctx, nt, sizeof *items);
    span *busy = pdc_calloc(ctx, nt, sizeof *busy);
    pdc_status st = def && last && offset && items && busy ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    size_t n = 0, arena = 0, total = 0; /* arena: largest end of a placed tensor */
    if (!st) {
        ir_liveness(m, def, last);
        epilogue_liveness(m, def);
    }
    for (size_t t = 0; t < m->n_tensors && !st; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (def[t] == SIZE_MAX) continue;
        size_t count, bytes;
        if (!ir_numel(tt->rank, tt->dims, &count) || pdc_mul_overflow(count, sizeof(float), &bytes) ||
            bytes > SIZE_MAX / 2) {
            char shape[128];
            ir_format_shape(tt->rank, tt->dims, shape, sizeof shape);
            st = pdc_error(ctx, PDC_ERR_SHAPE, "activation '%s' has shape %s: the plan needs concrete shapes (fix "
                           "symbolic inputs with pdc_model_set_input_shape)", tt->name, shape);
            break;
        }
        if (pdc_add_overflow(total, bytes, &total)) st = pdc_error(ctx, PDC_ERR_OVERFLOW, "activation sizes overflow");
        items[n++] = (item){t, align_up(bytes), def[t], last[t], 0};
    }
    if (!st) qsort(items, n, sizeof *items, by_size);
    for (size_t i = 0; i < n && !st; i++) {
        /* byte ranges of placed tensors live at the same time, in offset order */
        size_t nb = 0;
        for (size_t j = 0; j < i; j++)
            if (items[j].def <= items[i].last && items[i].def <= items[j].last)
                busy[nb++] = (span){items[j].off, items[j].off + items[j].size};
        qsort(busy, nb, sizeof *busy, by_off);
        size_t off = 0;
        for (size_t j = 0; j < nb; j++) {
            if (busy[j].off >= off + items[i].size) break; /* the gap before this range fits */
            if (busy[j].end > off) off = busy[j].end;
        }
        size_t end;
        if (pdc_add_overflow(off, items[i].size, &end) || end > (size_t)INT64_MAX) {
            st = pdc_error(ctx, PDC_ERR_OVERFLOW, "plan: the arena overflows at '%s'", m->tensors[items[i].tensor].name);
            break;
        }
        items[i].off = off;
        offset[items[i].tensor] = off;
    }
    for (size_t i = 0; i < n && !st; i++) {
        size_t end = items[i].off + ir_tensor_numel(&m->tensors[items[i].tensor]) * sizeof(float);
        if (end > arena) arena = end;
    }
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        ir_layer *l = &m->layers[li];
        int64_t *offs = pdc_calloc(ctx, l->n_outputs ? l->n_outputs : 1, sizeof *offs);
        if (!offs) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        for (size_t i = 0; i < l->n_outputs; i++) offs[i] = l->outputs[i] < 0 ? -1 : (int64_t)offset[l->outputs[i]];
        st = ir_attrs_set_ints(ctx, &l->attrs, IR_ARENA_ATTR, l->n_outputs, offs);
        pdc_free(offs);
    }
    if (!st) {
        out->plan_arena_bytes = arena;
        out->plan_activation_bytes = total;
        pdc_log(ctx, PDC_LOG_INFO, "plan: arena of %zu bytes for %zu activations of %zu bytes in all (%.1f%%)", arena, n,
                total, total ? 100.0 * (double)arena / (double)total : 0.0);
    }
    pdc_free(def);
    pdc_free(last);
    pdc_free(offset);
    pdc_free(items);
    pdc_free(busy);
    return st;
}
