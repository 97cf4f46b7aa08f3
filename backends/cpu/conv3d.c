/*
 * conv3d.c - 3-D convolution on the cpu target, through the 2-D conv generators (conv/).
 *
 * The weight [O, C/g, KD, KH, KW] is, in memory, the 2-D weight [O, (C/g)*KD, KH, KW]: input channel
 * (c, kd) of the 2-D view is channel c at depth od*sd + kd*dd - pd. So output depth plane od of a 3-D
 * conv is a 2-D conv (same H/W strides, pads, dilations, groups) over the C*KD planes that plane
 * reads, stacked channel-major (a depth outside the input is a zero plane; a group's stacked channels
 * stay contiguous). The layer is planned once as that 2-D conv in a small model of its own, with the
 * 3-D sparsity carried over element for element as a mask: the 2-D planner turns it into per-kernel
 * masks - a 3-D pattern or kernel group becomes its depth slices, each a 2-D pattern with constant
 * offsets, kernels grouped by mask; a dense weight goes to the dense families. A run gathers each
 * output plane's input planes (and residual plane) into scratch, runs the 2-D kernel with all the
 * run's threads (over output channels and tiles), and scatters the result into the depth plane. The
 * fused epilogue (batchnorm folded into the weights, residual add, activation) is the 2-D kernel's.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

#define C3_ALIGN 16      /* floats: the 64-byte alignment of cpu_exec scratch */
#define C3_MAX_TENSORS 5 /* of the 2-D model: x2, w2, b2, r2, y2 */

typedef struct conv3d_state {
    ir_model *m2;           /* the 2-D conv model: x2 [1, C*KD, H, W] (, r2) -> y2 [1, O, OH, OW] */
    cpu_layer L2;           /* its planned layer */
    int x2, y2, r2;         /* tensor indices in m2 (r2 -1: no residual) */
    ir_window_params p;     /* the 3-D layer's window */
    size_t in_off, out_off, res_off; /* scratch offsets (floats) of the gathered planes */
} conv3d_state;

static void conv3d_free(void *p)
{
    conv3d_state *s = p;
    if (!s) return;
    if (s->L2.free_state) s->L2.free_state(s->L2.state);
    ir_model_destroy(s->m2);
    pdc_free(s);
}

static size_t align_up(size_t n) { return (n + C3_ALIGN - 1) / C3_ALIGN * C3_ALIGN; }

static pdc_status conv3d_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                             const cpu_exec *x)
{
    (void)m;
    const conv3d_state *s = L->state;
    const ir_window_params *p = &s->p;
    const int64_t kd = p->k[0], plane = p->in[1] * p->in[2], oplane = p->out[1] * p->out[2];
    const int64_t od_n = p->out[0];
    const float *in = buf[l->inputs[0]];
    const float *res = L->fused && L->epi.residual >= 0 ? buf[L->epi.residual] : NULL;
    float *out = cpu_layer_out(L, l, buf);
    float *xin = x->scratch + s->in_off, *yout = x->scratch + s->out_off, *rin = x->scratch + s->res_off;
    float *buf2[C3_MAX_TENSORS] = {0};
    for (size_t t = 0; t < s->m2->n_tensors; t++) buf2[t] = s->m2->tensors[t].data;
    buf2[s->x2] = xin;
    buf2[s->y2] = yout;
    if (s->r2 >= 0) buf2[s->r2] = rin;
    const cpu_layer *L2 = &s->L2;
    cpu_exec x2 = *x; /* the 2-D kernel's scratch is the start of ours */
    for (int64_t n = 0; n < p->n; n++) {
        const float *xn = in + n * p->c * p->in[0] * plane;
        for (int64_t od = 0; od < od_n; od++) {
            for (int64_t c = 0; c < p->c; c++)
                for (int64_t k = 0; k < kd; k++) {
                    const int64_t id = od * p->stride[0] + k * p->dil[0] - p->pad_begin[0];
                    float *dst = xin + (c * kd + k) * plane;
                    if (id < 0 || id >= p->in[0]) memset(dst, 0, (size_t)plane * sizeof *dst);
                    else memcpy(dst, xn + (c * p->in[0] + id) * plane, (size_t)plane * sizeof *dst);
                }
            const size_t at = (size_t)(n * p->o * od_n) * (size_t)oplane;
            if (res)
                for (int64_t o = 0; o < p->o; o++)
                    memcpy(rin + o * oplane, res + at + (size_t)(o * od_n + od) * (size_t)oplane,
                           (size_t)oplane * sizeof *rin);
            pdc_status st = L2->run(L2, s->m2, &s->m2->layers[0], buf2, &x2);
            if (st) return st;
            for (int64_t o = 0; o < p->o; o++)
                memcpy(out + at + (size_t)(o * od_n + od) * (size_t)oplane, yout + o * oplane,
                       (size_t)oplane * sizeof *out);
        }
    }
    return PDC_OK;
}

pdc_status cpu_conv3d_as_2d(pdc_context *ctx, const ir_model *m, const ir_layer *l, const float *w3, const float *b3,
                           int residual, ir_model **out)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const int64_t cg = p.c / p.group, kd = p.k[0];
    const size_t nw = (size_t)(p.o * cg * kd * p.k[1] * p.k[2]);
    ir_model *m2;
    if ((st = ir_model_create(ctx, "conv3d_as_2d", &m2))) return st;
    float *w = pdc_alloc(ctx, nw * sizeof *w), *b = NULL;
    if (!w) st = PDC_ERR_OUT_OF_MEMORY;
    else memcpy(w, w3, nw * sizeof *w);
    if (!st && (st = ir_model_add_input(m2, "x2", 4, (int64_t[]){1, p.c * kd, p.in[1], p.in[2]}))) pdc_free(w);
    if (!st) st = ir_model_add_constant_owned(m2, "w2", 4, (int64_t[]){p.o, cg * kd, p.k[1], p.k[2]}, w);
    if (!st && b3) {
        if (!(b = pdc_alloc(ctx, (size_t)p.o * sizeof *b))) st = PDC_ERR_OUT_OF_MEMORY;
        else memcpy(b, b3, (size_t)p.o * sizeof *b);
        if (!st) st = ir_model_add_constant_owned(m2, "b2", 1, (int64_t[]){p.o}, b);
    }
    if (!st && residual) st = ir_model_add_input(m2, "r2", 4, (int64_t[]){1, p.o, p.out[1], p.out[2]});
    /* the 3-D sparsity, element for element (the order is the same), as a mask; not for a 1x1 plane
     * window (r2plus1d's 3x1x1 convs): the masks would only remove whole 1x1 kernels, and the dense
     * GEMM over the zeros beats the pattern generator there (cpu, r2plus1d_18 layer1 at 2 of 3 kept:
     * 19 ms dense against 23-32 ms masked, docs/onnx.md); the ARM emitter shares this description */
    if (!st && wt->sparsity.kind != IR_SPARSITY_NONE && p.k[1] * p.k[2] > 1) {
        ir_sparsity sp = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = nw};
        if (!(sp.mask = pdc_alloc(ctx, nw))) st = PDC_ERR_OUT_OF_MEMORY;
        if (!st) ir_sparsity_mask_range(wt, &wt->sparsity, 0, nw, sp.mask);
        if (!st) st = ir_model_set_sparsity(m2, ir_model_find_tensor(m2, "w2"), &sp);
    }
    ir_attrs a = {0};
    if (!st) st = ir_attrs_copy(ctx, &a, &l->attrs);
    if (!st) st = ir_attrs_set_ints(ctx, &a, "strides", 2, (int64_t[]){p.stride[1], p.stride[2]});
    if (!st) st = ir_attrs_set_ints(ctx, &a, "dilations", 2, (int64_t[]){p.dil[1], p.dil[2]});
    if (!st)
        st = ir_attrs_set_ints(ctx, &a, "pads", 4, (int64_t[]){p.pad_begin[1], p.pad_begin[2], p.pad_end[1], p.pad_end[2]});
    if (!st) ir_attrs_remove(&a, "kernel_shape");
    if (!st) ir_attrs_remove(&a, "auto_pad");
    const char *ins[] = {"x2", "w2", "b2"}, *outs[] = {"y2"};
    if (!st) st = ir_model_add_layer(m2, l->name, IR_OP_CONV, b3 ? 3 : 2, ins, 1, outs, &a);
    ir_attrs_free(&a);
    if (!st) st = ir_model_mark_output(m2, "y2");
    if (st) {
        ir_model_destroy(m2);
        return st;
    }
    *out = m2;
    return PDC_OK;
}

pdc_status cpu_plan_conv3d(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                           size_t why_cap)
{
    if (l->op != IR_OP_CONV) return PDC_ERR_UNSUPPORTED;
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    if (p.nsp != 3) return PDC_ERR_UNSUPPORTED;
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
    if (wt->kind != IR_TENSOR_CONST || (bt && bt->kind != IR_TENSOR_CONST)) {
        snprintf(why, why_cap, "3-D conv with a weight or bias computed at run time");
        return PDC_ERR_UNSUPPORTED;
    }
    pdc_context *ctx = cc->ctx;
    conv3d_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->p = p;
    const ir_epilogue *e = cc->fuse;
    const int folded = e && e->bn >= 0 && cc->fold_w;
    st = cpu_conv3d_as_2d(ctx, m, l, folded ? cc->fold_w : wt->data, folded ? cc->fold_b : bt ? bt->data : NULL,
                          e && e->residual >= 0, &s->m2);
    if (!st) {
        s->x2 = ir_model_find_tensor(s->m2, "x2");
        s->y2 = ir_model_find_tensor(s->m2, "y2");
        s->r2 = ir_model_find_tensor(s->m2, "r2"); /* -1 without a residual */
    }
    /* the 2-D layer takes the epilogue with its own tensors: the batchnorm is in its weights already */
    ir_epilogue e2;
    cpu_compile cc2 = *cc;
    cc2.fold_w = cc2.fold_b = NULL;
    cc2.fuse = NULL;
    if (e) {
        e2 = *e;
        e2.bn = -1;
        e2.residual = s->r2;
        e2.out = s->y2;
        cc2.fuse = &e2;
    }
    char why2[160] = "";
    if (!st) st = cpu_plan_conv(&cc2, s->m2, &s->m2->layers[0], &s->L2, why2, sizeof why2);
    if (st == PDC_ERR_UNSUPPORTED) snprintf(why, why_cap, "3-D conv as 2-D: %s", why2);
    if (st) {
        conv3d_free(s);
        return st;
    }
    const int fused = e && s->L2.fused; /* offered but not taken: the epilogue's layers run themselves */
    if (!fused) s->r2 = -1;
    const size_t plane = (size_t)(p.in[1] * p.in[2]), oplane = (size_t)(p.out[1] * p.out[2]);
    s->in_off = align_up(s->L2.scratch_floats);
    s->out_off = s->in_off + align_up((size_t)(p.c * p.k[0]) * plane);
    s->res_off = s->out_off + align_up((size_t)p.o * oplane);
    L->run = conv3d_run;
    L->state = s;
    L->free_state = conv3d_free;
    L->scratch_floats = s->res_off + (s->r2 >= 0 ? (size_t)p.o * oplane : 0);
    L->thread_floats = s->L2.thread_floats;
    if (fused) cpu_take_epilogue(cc, L);
    snprintf(L->info, sizeof L->info, "3-D conv: %lld depth planes of %.280s", (long long)p.out[0], s->L2.info);
    return PDC_OK;
}
