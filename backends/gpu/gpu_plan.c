/*
 * gpu_plan.c - a model becomes a gpu plan: where every tensor lives (activation arena: graph inputs,
 * then activations - the model's arena_offsets when it is planned, else one slot each - then
 * per-layer scratch; weights arena: every constant, then whatever the op planners pack), and the
 * per-op planners' kernels and launches in layer order. Also writes the launch list as text for
 * the nvptx emitter.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"
#include "ir/arena.h"

static size_t round_words(size_t n) { return (n + GPU_ALIGN_WORDS - 1) / GPU_ALIGN_WORDS * GPU_ALIGN_WORDS; }

int64_t gpu_plan_wts(gpu_plan *p, size_t n)
{
    size_t off = p->wts_words, need = off + round_words(n ? n : 1);
    if (need > p->wts_cap) {
        size_t cap = p->wts_cap ? p->wts_cap : 1024;
        while (cap < need) cap *= 2;
        float *w = pdc_alloc(p->ctx, cap * sizeof *w);
        if (!w) return -1;
        if (p->wts_words) memcpy(w, p->wts, p->wts_words * sizeof *w);
        pdc_free(p->wts);
        p->wts = w;
        p->wts_cap = cap;
    }
    memset(p->wts + off, 0, (need - off) * sizeof *p->wts);
    p->wts_words = need;
    return (int64_t)off;
}

int64_t gpu_plan_scratch(gpu_plan *p, size_t n)
{
    size_t off = p->act_words;
    p->act_words += round_words(n ? n : 1);
    return (int64_t)off;
}

int gpu_plan_kernel(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                    void (*free_params)(void *), int64_t total)
{
    if (!params || pdc_grow(p->ctx, (void **)&p->kernels, &p->cap_kernels, p->n_kernels + 1, sizeof *p->kernels)) {
        if (params && free_params) free_params(params);
        pdc_free(params);
        return -1;
    }
    gpu_kernel *k = &p->kernels[p->n_kernels];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "L%d_%s", layer, what);
    k->gen = gen;
    k->params = params;
    k->free_params = free_params;
    k->total = total > 0 ? total : 0;
    k->layer = layer;
    return (int)p->n_kernels++;
}

int gpu_plan_kernel1(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                     void (*free_params)(void *), int64_t total)
{
    int k = gpu_plan_kernel(p, layer, what, gen, params, free_params, total);
    return k < 0 || gpu_plan_launch(p, k, 0) ? -1 : k;
}

int gpu_plan_tiled1(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                    void (*free_params)(void *), int64_t blocks)
{
    int k = gpu_plan_kernel1(p, layer, what, gen, params, free_params, blocks * GPU_BLOCK);
    if (k >= 0) p->kernels[k].tiled = 1;
    return k;
}

pdc_status gpu_plan_launch(gpu_plan *p, int kernel, int32_t arg)
{
    pdc_status st = pdc_grow(p->ctx, (void **)&p->launches, &p->cap_launches, p->n_launches + 1, sizeof *p->launches);
    if (st) return st;
    p->launches[p->n_launches++] = (gpu_launch){(uint32_t)kernel, arg};
    return PDC_OK;
}

gpu_ref gpu_in(const gpu_plan *p, const ir_layer *l, size_t i)
{
    if (i >= l->n_inputs || l->inputs[i] < 0) return (gpu_ref){0, -1};
    return p->tref[l->inputs[i]];
}

gpu_ref gpu_out(const gpu_plan *p, const ir_layer *l, size_t i)
{
    if (i >= l->n_outputs || l->outputs[i] < 0) return (gpu_ref){0, -1};
    return p->tref[l->outputs[i]];
}

void gpu_plan_destroy(gpu_plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_kernels; i++) {
        if (p->kernels[i].free_params) p->kernels[i].free_params(p->kernels[i].params);
        pdc_free(p->kernels[i].params);
    }
    pdc_free(p->kernels);
    pdc_free(p->launches);
    pdc_free(p->wts);
    pdc_free(p->tref);
    pdc_free(p->info);
    pdc_free(p);
}

/* Inputs, activations (planned or one slot each) and constants get their places. */
static pdc_status place_tensors(gpu_plan *p, const ir_model *m)
{
    size_t *planned = pdc_calloc(p->ctx, m->n_tensors ? m->n_tensors : 1, sizeof *planned);
    if (!planned) return PDC_ERR_OUT_OF_MEMORY;
    int present = 0;
    size_t arena_bytes = 0;
    pdc_status st = ir_arena_get(m, &present, planned, &arena_bytes, NULL);
    if (st) {
        pdc_free(planned);
        return st;
    }
    if (present) p->act_words = round_words(arena_bytes / sizeof(float));
    for (size_t t = 0; t < m->n_tensors && !st; t++) {
        const ir_tensor *tt = &m->tensors[t];
        size_t ne = ir_tensor_numel(tt);
        p->tref[t] = (gpu_ref){0, -1};
        if (tt->kind == IR_TENSOR_ACT) {
            if (present && planned[t] != SIZE_MAX) p->tref[t].off = (int64_t)(planned[t] / sizeof(float));
            else p->tref[t].off = gpu_plan_scratch(p, ne);
        } else if (tt->kind == IR_TENSOR_INPUT) {
            p->tref[t].off = gpu_plan_scratch(p, ne);
        } else {
            if (!tt->data) st = pdc_error(p->ctx, PDC_ERR_INVALID_MODEL, "gpu: constant '%s' has no data", tt->name);
            int64_t off = st ? -1 : gpu_plan_wts(p, ne);
            if (off < 0 && !st) st = PDC_ERR_OUT_OF_MEMORY;
            if (!st) {
                memcpy(p->wts + off, tt->data, ne * sizeof(float));
                p->tref[t] = (gpu_ref){1, off};
            }
        }
    }
    pdc_free(planned);
    return st;
}

pdc_status gpu_plan_create(pdc_context *ctx, const ir_model *m, gpu_plan **out)
{
    *out = NULL;
    gpu_plan *p = pdc_calloc(ctx, 1, sizeof *p);
    if (!p) return PDC_ERR_OUT_OF_MEMORY;
    p->ctx = ctx;
    p->tref = pdc_calloc(ctx, m->n_tensors ? m->n_tensors : 1, sizeof *p->tref);
    p->info = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *p->info);
    pdc_status st = (!p->tref || !p->info) ? PDC_ERR_OUT_OF_MEMORY : place_tensors(p, m);
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        switch (l->op) {
        case IR_OP_CONV: st = gpu_plan_conv(p, m, li); break;
        case IR_OP_FC:
        case IR_OP_GEMM:
        case IR_OP_MATMUL: st = gpu_plan_gemm(p, m, li); break;
        case IR_OP_LSTM:
        case IR_OP_GRU: st = gpu_plan_rnn(p, m, li); break;
        default: st = gpu_plan_simple(p, m, li); break;
        }
    }
    if (st) {
        gpu_plan_destroy(p);
        return st;
    }
    *out = p;
    return PDC_OK;
}

/* Appends printf output to a growing buffer. */
typedef struct textbuf {
    const pdc_context *ctx;
    char *s;
    size_t n, cap;
    pdc_status st;
} textbuf;

__attribute__((format(printf, 2, 3))) static void tb_printf(textbuf *t, const char *fmt, ...)
{
    if (t->st) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        if ((t->st = pdc_grow(t->ctx, (void **)&t->s, &t->cap, t->n + (size_t)k + 256, 1))) return;
    }
}

pdc_status gpu_plan_launch_text(const gpu_plan *p, const ir_model *m, const char *arch, char **text_out,
                                size_t *len_out)
{
    textbuf t = {p->ctx, NULL, 0, 0, PDC_OK};
    tb_printf(&t, "# pdc gpu launch list for model '%s', %s\n", m->name ? m->name : "", arch);
    tb_printf(&t, "# every kernel takes (float *act, float *wts, int arg): act = activation arena of %zu bytes "
                  "(inputs, activations, scratch), wts = weights arena of %zu bytes (upload NAME.weights.bin)\n",
              p->act_words * sizeof(float), p->wts_words * sizeof(float));
    for (size_t i = 0; i < m->n_tensors; i++) {
        const ir_tensor *tt = &m->tensors[i];
        if (p->tref[i].off < 0 || tt->kind == IR_TENSOR_CONST) continue;
        char shape[128];
        ir_format_shape(tt->rank, tt->dims, shape, sizeof shape);
        tb_printf(&t, "tensor %s %s act+%lld bytes%s\n", tt->name, shape, (long long)p->tref[i].off * 4,
                  tt->kind == IR_TENSOR_INPUT ? " (input)" : "");
    }
    for (size_t i = 0; i < m->n_outputs; i++) tb_printf(&t, "output %s\n", m->tensors[m->outputs[i]].name);
    tb_printf(&t, "# launch kernel grid block arg layer: reads -> writes\n");
    for (size_t i = 0; i < p->n_launches; i++) {
        const gpu_launch *L = &p->launches[i];
        const gpu_kernel *k = &p->kernels[L->kernel];
        const ir_layer *l = &m->layers[k->layer];
        int64_t grid = (k->total + GPU_BLOCK - 1) / GPU_BLOCK;
        tb_printf(&t, "launch %s %lld %d %d %s:", k->name, (long long)(grid ? grid : 1), GPU_BLOCK, (int)L->arg,
                  l->name);
        for (size_t j = 0; j < l->n_inputs; j++)
            if (l->inputs[j] >= 0 && m->tensors[l->inputs[j]].kind != IR_TENSOR_CONST)
                tb_printf(&t, " %s", m->tensors[l->inputs[j]].name);
        tb_printf(&t, " ->");
        for (size_t j = 0; j < l->n_outputs; j++)
            if (l->outputs[j] >= 0) tb_printf(&t, " %s", m->tensors[l->outputs[j]].name);
        tb_printf(&t, "\n");
    }
    if (t.st) {
        pdc_free(t.s);
        return t.st;
    }
    *text_out = t.s;
    *len_out = t.n;
    return PDC_OK;
}
