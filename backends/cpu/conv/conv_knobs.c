/*
 * conv_knobs.c - the choices of the cpu target's conv planners that a tuner may make instead of
 * their heuristics (pdc_layer_knobs, backends/backend.h): which family takes the layer, and for the
 * pattern kernel along rows its tile, filters a work item and whether the input is packed whole;
 * and for conv and fc layers how many of the program's threads run it (a small layer can finish
 * sooner on fewer threads than the team: less to split, one barrier fewer to wait at).
 * Only configurations the planners honour as given are listed (tiles within the accumulator budget,
 * no wider than the row, no taller than the image), so no two measure the same code. A 3-D conv runs
 * as 2-D convs of its depth planes (conv3d.c), each planned with the layer's knobs: its space is that
 * of its middle plane's 2-D conv.
 */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv/conv.h"
#include "backends/cpu/conv3d_taps.h"

#define KNOBS_MAX 128

static void add(pdc_layer_knobs *k, size_t *n, int32_t family, int32_t ty, int32_t tx, int32_t chunk, int32_t whole)
{
    if (*n >= KNOBS_MAX) return;
    pdc_layer_knobs *e = &k[(*n)++];
    memset(e, 0, sizeof *e);
    e->family = family;
    e->tile_y = ty;
    e->tile_x = tx;
    e->chunk = chunk;
    e->whole = whole;
}

/* Entries [first, last) again on each thread count 1, 2, 4, ... below the team's (tiles are searched
 * on the whole team only: the space stays linear in the thread counts). */
static void add_threads(pdc_layer_knobs *k, size_t *n, size_t first, size_t last, int team)
{
    for (int t = 1; t < team; t *= 2)
        for (size_t i = first; i < last && *n < KNOBS_MAX; i++) {
            k[*n] = k[i];
            k[(*n)++].threads = t;
        }
}

/* 1 (and its window in p) if l is a 3-D conv with constant weight and bias: the cpu target compiles it. */
static int const_conv3d(const ir_model *m, const ir_layer *l, ir_window_params *p)
{
    if (l->op != IR_OP_CONV || l->n_inputs < 2 || l->inputs[1] < 0) return 0;
    if (m->tensors[l->inputs[1]].kind != IR_TENSOR_CONST) return 0;
    if (l->n_inputs > 2 && l->inputs[2] >= 0 && m->tensors[l->inputs[2]].kind != IR_TENSOR_CONST) return 0;
    return ir_window_params_get(m, l, p) == PDC_OK && p->nsp == 3;
}

/* The knob space of 3-D conv l: that of the 2-D conv its middle output depth plane runs. */
static pdc_status space_3d(pdc_context *ctx, const ir_model *m, const ir_layer *l, const ir_window_params *p,
                           pdc_layer_knobs **out, size_t *n_out)
{
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
    int64_t k0, k1;
    cpu_conv3d_plane_taps(p, cpu_conv3d_split(p), p->out[0] / 2, &k0, &k1);
    ir_model *m2 = NULL;
    pdc_status st = cpu_conv3d_as_2d(ctx, m, l, wt->data, bt ? bt->data : NULL, 0, k0, k1, &m2);
    if (!st) st = pdc_cpu_knob_space(ctx, m2, 0, out, n_out);
    ir_model_destroy(m2);
    return st;
}

pdc_status pdc_cpu_knob_space(pdc_context *ctx, const ir_model *m, size_t li, pdc_layer_knobs **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    ir_window_params p3;
    if (const_conv3d(m, &m->layers[li], &p3)) return space_3d(ctx, m, &m->layers[li], &p3, out, n_out);
    pdc_layer_knobs *k = pdc_calloc(ctx, KNOBS_MAX, sizeof *k);
    if (!k) return PDC_ERR_OUT_OF_MEMORY;
    size_t n = 0;
    add(k, &n, PDC_KNOB_AUTO, 0, 0, 0, 0); /* the heuristics: always first */
    const ir_layer *l = &m->layers[li];
    const int team = cpu_threads_for(ctx->threads);
    /* an fc: the thread count is its one knob */
    if (l->op == IR_OP_FC) add_threads(k, &n, 0, 1, team);
    pdc_jit *jit = NULL;
    pdc_status st = l->op == IR_OP_CONV ? pdc_jit_get(ctx, &jit) : PDC_OK;
    cpu_conv_plan P;
    char why[160];
    memset(&P, 0, sizeof P);
    if (!st && jit) {
        st = cpu_conv_plan_init(ctx, m, l, &P, why, sizeof why);
        if (st == PDC_ERR_UNSUPPORTED) st = PDC_OK; /* the reference kernel runs it: nothing to choose */
        else if (!st) {
            const pdc_llvm_target *t = pdc_jit_target(jit);
            if (P.all_dense) {
                /* output-channel vectors take whole vectors of a group's filters (conv_ocvec.c), the
                 * multi-filter family at least 2 of them (conv_dense.c): else another family runs the
                 * layer, a second measurement of the same code */
                const int64_t og = P.g.o / P.g.group;
                if (og % t->vec == 0) add(k, &n, PDC_KNOB_OCVEC, 0, 0, 0, 0);
                if (og >= 2) add(k, &n, PDC_KNOB_DENSE, 0, 0, 0, 0);
            } else {
                add(k, &n, PDC_KNOB_CMAJOR, 0, 0, 0, 0);
            }
            add(k, &n, PDC_KNOB_ROWS, 0, 0, 0, 0);
            add_threads(k, &n, 0, n, team); /* each family as the heuristics set it, on fewer threads */
            add(k, &n, PDC_KNOB_ROWS, 0, 0, 8, 0);
            add(k, &n, PDC_KNOB_ROWS, 0, 0, 32, 0);
            add(k, &n, PDC_KNOB_ROWS, 0, 0, 0, 1);
            add(k, &n, PDC_KNOB_ROWS, 0, 0, 8, 1);
            /* tiles, where the rows kernel tiles rows (small planes are laid flat, one tile) */
            conv_geom g = P.g;
            if (!cpu_conv_layout_flat(&g, t->vec, t->n_vregs >= 32 ? 7 : 4)) {
                const int budget = cpu_conv_row_budget(t, cpu_conv_max_taps(&P), t->vec == 16);
                const int64_t nvx = (P.g.ow + t->vec - 1) / t->vec;
                static const int32_t tys[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 28};
                for (int32_t tx = 1; tx <= 7 && tx <= nvx; tx++)
                    for (size_t i = 0; i < sizeof tys / sizeof tys[0]; i++) {
                        /* cpu_conv_layout balances the row tiles: only heights it keeps */
                        int64_t ty = tys[i], nty = (P.g.oh + ty - 1) / ty;
                        if (ty * tx <= budget && ty <= P.g.oh && (P.g.oh + nty - 1) / nty == ty)
                            add(k, &n, PDC_KNOB_ROWS, (int32_t)ty, tx, 0, 0);
                    }
            }
        }
    }
    cpu_conv_plan_release(&P);
    if (st) {
        pdc_free(k);
        return st;
    }
    *out = k;
    *n_out = n;
    return PDC_OK;
}
