/*
 * conv3d.c - 3-D convolution on the cpu target, through the 2-D conv generators (conv/).
 *
 * The weight [O, C/g, KD, KH, KW] is, in memory, the 2-D weight [O, (C/g)*KD, KH, KW]: input channel
 * (c, kd) of the 2-D view is channel c at depth od*sd + kd*dd - pd. So output depth plane od of a 3-D
 * conv is a 2-D conv (same H/W strides, pads, dilations, groups) over the C*KD planes that plane
 * reads. Only the depth taps inside the input count: a plane near the depth edges reads fewer (a
 * clip 1 deep, r3d_18's layer4, reads 1 of 3), so the planes are split by the range [k0, k1) of
 * their taps inside the input, and each range's 2-D conv (the weight's depth slices k0..k1-1) is
 * planned once in a small model of its own - where the edge planes waste at least 1/C3_SLICE_WASTE of
 * the layer's taps; else they run the full window over zero planes, one kernel for the layer (a deep
 * clip: fewer kernels to compile and weights to keep). The 3-D sparsity is carried over element for
 * element as a mask: the 2-D planner turns it into per-kernel masks - a 3-D pattern or kernel group
 * becomes its depth slices, each a 2-D pattern with constant offsets, kernels grouped by mask; a
 * dense weight goes to the dense families.
 * With one group the 2-D input channels are ordered depth-major ((kd, c): the weight's slices
 * reordered at compile time) and each image's input is transposed once to [D, C, H, W]: the planes
 * an output plane reads are then one contiguous run of it (depth dilation 1), read in place, not
 * gathered per output plane (each input plane was copied KD times). Otherwise a run gathers each
 * output plane's input planes into scratch (zero planes outside the input). The 2-D kernel runs with
 * all the run's threads (over output channels and tiles), or, where the planes are small and many,
 * each thread takes whole output planes with the 2-D kernel on one thread; a plane's result does not
 * depend on which (the 2-D kernels' results do not depend on their thread count). The result is
 * scattered into the depth plane. The fused epilogue (batchnorm folded into the weights, residual
 * add, activation) is the 2-D kernel's.
 */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/conv3d_taps.h"
#include "backends/cpu/cpu.h"

#define C3_ALIGN 16      /* floats: the 64-byte alignment of cpu_exec scratch */
#define C3_MAX_TENSORS 5 /* of the 2-D model: x2, w2, b2, r2, y2 */
#define C3_SLICE_WASTE 16 /* edge planes get kernels of their own where they waste >= 1/16 of the taps */
/* output planes go to the threads whole where a plane has at most this many outputs (a small plane
 * leaves the 2-D kernel's threads few pieces each, and a parallel region a plane) and there are at
 * least as many planes as threads; a heuristic, not yet timed on a quiet host */
#define C3_PLANE_THREADS_MAX_OUT 1024

/* The 2-D conv of the output planes whose depth taps inside the input are [k0, k1). */
typedef struct c3_plan {
    ir_model *m2;           /* x2 [1, C*(k1-k0), H, W] (, r2) -> y2 [1, O, OH, OW] */
    cpu_layer L2;           /* its planned layer */
    int x2, y2, r2;         /* tensor indices in m2 (r2 -1: no residual) */
    int64_t k0, k1;
} c3_plan;

typedef struct conv3d_state {
    ir_window_params p;     /* the 3-D layer's window */
    c3_plan *plans;         /* n_plans of them, in the order of the planes that first use them */
    int n_plans;
    int *plan_of;           /* per output depth plane: its plan */
    int kd_major;           /* 2-D input channel (kd, c), the input transposed to [D, C, H, W] */
    int by_plane;           /* threads take whole output planes */
    size_t lane_floats;     /* by_plane: scratch of one thread (2-D kernel, gathered planes, output, residual) */
    size_t t_off;           /* the transposed image (kd_major) */
    size_t in_off, out_off, res_off; /* in a lane: the gathered planes, the 2-D output, the residual plane */
} conv3d_state;

static void conv3d_free(void *p)
{
    conv3d_state *s = p;
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) {
        if (s->plans[i].L2.free_state) s->plans[i].L2.free_state(s->plans[i].L2.state);
        ir_model_destroy(s->plans[i].m2);
    }
    pdc_free(s->plans);
    pdc_free(s->plan_of);
    pdc_free(s);
}

static size_t align_up(size_t n) { return (n + C3_ALIGN - 1) / C3_ALIGN * C3_ALIGN; }

/* Depth taps [k0, k1) of output plane od that fall inside the input (empty: k0 == k1). */
static void taps_inside(const ir_window_params *p, int64_t od, int64_t *k0, int64_t *k1)
{
    *k0 = p->k[0];
    *k1 = 0;
    for (int64_t k = 0; k < p->k[0]; k++) {
        const int64_t id = od * p->stride[0] + k * p->dil[0] - p->pad_begin[0];
        if (id < 0 || id >= p->in[0]) continue;
        if (k < *k0) *k0 = k;
        *k1 = k + 1;
    }
    if (*k0 >= *k1) *k0 = *k1 = 0;
}

int cpu_conv3d_split(const ir_window_params *p)
{
    int64_t wasted = 0;
    for (int64_t od = 0; od < p->out[0]; od++) {
        int64_t k0, k1;
        taps_inside(p, od, &k0, &k1);
        if (k1 > k0) wasted += p->k[0] - (k1 - k0);
    }
    return wasted * C3_SLICE_WASTE >= p->out[0] * p->k[0];
}

void cpu_conv3d_plane_taps(const ir_window_params *p, int split, int64_t od, int64_t *k0, int64_t *k1)
{
    taps_inside(p, od, k0, k1);
    if (!split || *k0 == *k1) *k0 = 0, *k1 = p->k[0];
}

/* Output plane od of image xn (NCDHW, or [D, C, H, W] in t when kd_major) with plan P into out (and
 * buffers of a lane: xin, yout, rin). */
static pdc_status run_plane(const conv3d_state *s, const c3_plan *P, int64_t n, int64_t od, const float *xn,
                            const float *t, const float *res, float *out, float *xin, float *yout, float *rin,
                            const cpu_exec *x)
{
    const ir_window_params *p = &s->p;
    const int64_t plane = p->in[1] * p->in[2], oplane = p->out[1] * p->out[2], od_n = p->out[0];
    const int64_t nk = P->k1 - P->k0, id0 = od * p->stride[0] + P->k0 * p->dil[0] - p->pad_begin[0];
    const int inside = id0 >= 0 && id0 + (nk - 1) * p->dil[0] < p->in[0];
    const float *x2 = xin;
    if (s->kd_major && inside && (nk == 1 || p->dil[0] == 1)) {
        x2 = t + id0 * p->c * plane; /* the planes it reads, in place */
    } else {
        for (int64_t j = 0; j < nk; j++) {
            const int64_t id = id0 + j * p->dil[0];
            const int ok = id >= 0 && id < p->in[0];
            if (s->kd_major) {
                float *dst = xin + j * p->c * plane;
                if (ok) memcpy(dst, t + id * p->c * plane, (size_t)(p->c * plane) * sizeof *dst);
                else memset(dst, 0, (size_t)(p->c * plane) * sizeof *dst);
                continue;
            }
            for (int64_t c = 0; c < p->c; c++) {
                float *dst = xin + (c * nk + j) * plane;
                if (ok) memcpy(dst, xn + (c * p->in[0] + id) * plane, (size_t)plane * sizeof *dst);
                else memset(dst, 0, (size_t)plane * sizeof *dst);
            }
        }
    }
    const size_t at = (size_t)(n * p->o * od_n) * (size_t)oplane;
    if (res && P->r2 >= 0)
        for (int64_t o = 0; o < p->o; o++)
            memcpy(rin + o * oplane, res + at + (size_t)(o * od_n + od) * (size_t)oplane, (size_t)oplane * sizeof *rin);
    float *buf2[C3_MAX_TENSORS] = {0};
    for (size_t i = 0; i < P->m2->n_tensors; i++) buf2[i] = P->m2->tensors[i].data;
    buf2[P->x2] = (float *)x2; /* read only: the 2-D kernel never writes its input */
    buf2[P->y2] = yout;
    if (P->r2 >= 0) buf2[P->r2] = rin;
    pdc_status st = P->L2.run(&P->L2, P->m2, &P->m2->layers[0], buf2, x);
    if (st) return st;
    for (int64_t o = 0; o < p->o; o++)
        memcpy(out + at + (size_t)(o * od_n + od) * (size_t)oplane, yout + o * oplane, (size_t)oplane * sizeof *out);
    return PDC_OK;
}

static pdc_status conv3d_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                             const cpu_exec *x)
{
    (void)m;
    const conv3d_state *s = L->state;
    const ir_window_params *p = &s->p;
    const int64_t plane = p->in[1] * p->in[2], od_n = p->out[0];
    const float *in = buf[l->inputs[0]];
    const float *res = L->fused && L->epi.residual >= 0 ? buf[L->epi.residual] : NULL;
    float *out = cpu_layer_out(L, l, buf);
    float *t = s->kd_major ? x->scratch + s->t_off : NULL;
    for (int64_t n = 0; n < p->n; n++) {
        const float *xn = in + n * p->c * p->in[0] * plane;
        if (t) { /* [C, D, H, W] -> [D, C, H, W] */
            const int64_t np = p->c * p->in[0];
            const int nt = np * plane >= 65536 ? x->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
            for (int64_t q = 0; q < np; q++) {
                const int64_t c = q / p->in[0], d = q % p->in[0];
                memcpy(t + (d * p->c + c) * plane, xn + q * plane, (size_t)plane * sizeof *t);
            }
        }
        if (s->by_plane) {
            pdc_status st = PDC_OK;
            int failed = 0;
#pragma omp parallel num_threads(x->threads) reduction(| : failed)
            {
                const int th = omp_get_thread_num(), nth = omp_get_num_threads();
                float *lane = x->scratch + (size_t)th * s->lane_floats;
                const cpu_exec x1 = {1, lane, x->own + th, x->shares + th};
                for (int64_t od = th; od < od_n && !failed; od += nth) {
                    pdc_status st1 = run_plane(s, &s->plans[s->plan_of[od]], n, od, xn, t, res, out, lane + s->in_off,
                                               lane + s->out_off, lane + s->res_off, &x1);
                    if (st1) {
                        failed = 1;
#pragma omp critical(conv3d_status)
                        st = st1;
                    }
                }
            }
            if (failed) return st;
            continue;
        }
        float *lane = x->scratch;
        for (int64_t od = 0; od < od_n; od++) {
            pdc_status st = run_plane(s, &s->plans[s->plan_of[od]], n, od, xn, t, res, out, lane + s->in_off,
                                      lane + s->out_off, lane + s->res_off, x);
            if (st) return st;
        }
    }
    return PDC_OK;
}
/* The 2-D conv of the output planes whose depth taps inside the input are [k0, k1): cpu_conv3d_as_2d
 * with the weight's depth slices k0..k1-1, input channel (c, kd) or, kd_major (one group), (kd, c). */
static pdc_status slice_as_2d(pdc_context *ctx, const ir_model *m, const ir_layer *l, const float *w3, const float *b3,
                              int residual, int64_t k0, int64_t k1, int kd_major, ir_model **out)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const int64_t cg = p.c / p.group, kd = p.k[0], nk = k1 - k0, win = p.k[1] * p.k[2];
    const size_t nw3 = (size_t)(p.o * cg * kd * win), nw = (size_t)(p.o * cg * nk * win);
    /* the 3-D sparsity, element for element, as a mask; not for a 1x1 plane window (r2plus1d's 3x1x1
     * convs): the masks would only remove whole 1x1 kernels, and the dense GEMM over the zeros beats
     * the pattern generator there (cpu, r2plus1d_18 layer1 at 2 of 3 kept: 19 ms dense against 23-32
     * ms masked, docs/onnx.md); the ARM emitter shares this description */
    const int masked = wt->sparsity.kind != IR_SPARSITY_NONE && win > 1;
    ir_model *m2;
    if ((st = ir_model_create(ctx, "conv3d_as_2d", &m2))) return st;
    float *w = pdc_alloc(ctx, nw * sizeof *w), *b = NULL;
    uint8_t *mask3 = masked ? pdc_alloc(ctx, nw3) : NULL, *mask = masked ? pdc_alloc(ctx, nw) : NULL;
    if (!w || (masked && (!mask3 || !mask))) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st && masked) ir_sparsity_mask_range(wt, &wt->sparsity, 0, nw3, mask3);
    for (int64_t o = 0; !st && o < p.o; o++)
        for (int64_t c = 0; c < cg; c++)
            for (int64_t j = 0; j < nk; j++) {
                const size_t from = (size_t)(((o * cg + c) * kd + k0 + j) * win);
                const size_t to = (size_t)((o * cg * nk + (kd_major ? j * cg + c : c * nk + j)) * win);
                memcpy(w + to, w3 + from, (size_t)win * sizeof *w);
                if (masked) memcpy(mask + to, mask3 + from, (size_t)win);
            }
    pdc_free(mask3);
    if (!st) st = ir_model_add_input(m2, "x2", 4, (int64_t[]){1, p.c * nk, p.in[1], p.in[2]});
    if (!st) {
        st = ir_model_add_constant_owned(m2, "w2", 4, (int64_t[]){p.o, cg * nk, p.k[1], p.k[2]}, w);
        w = NULL; /* the model's now, whatever it returned */
    }
    pdc_free(w);
    if (!st && b3) {
        if (!(b = pdc_alloc(ctx, (size_t)p.o * sizeof *b))) st = PDC_ERR_OUT_OF_MEMORY;
        else memcpy(b, b3, (size_t)p.o * sizeof *b);
        if (!st) st = ir_model_add_constant_owned(m2, "b2", 1, (int64_t[]){p.o}, b);
    }
    if (!st && residual) st = ir_model_add_input(m2, "r2", 4, (int64_t[]){1, p.o, p.out[1], p.out[2]});
    if (!st && masked) {
        ir_sparsity sp = {.kind = IR_SPARSITY_UNSTRUCTURED, .n_mask = nw, .mask = mask};
        mask = NULL; /* set_sparsity owns it now, whatever it returns */
        st = ir_model_set_sparsity(m2, ir_model_find_tensor(m2, "w2"), &sp);
    }
    pdc_free(mask);
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

pdc_status cpu_conv3d_as_2d(pdc_context *ctx, const ir_model *m, const ir_layer *l, const float *w3, const float *b3,
                           int residual, int64_t k0, int64_t k1, ir_model **out)
{
    return slice_as_2d(ctx, m, l, w3, b3, residual, k0, k1, 0, out);
}

/* Plans the 2-D conv of depth taps [k0, k1) into P. */
static pdc_status plan_slice(const cpu_compile *cc, const ir_model *m, const ir_layer *l, int kd_major, int64_t k0,
                             int64_t k1, c3_plan *P, char *why, size_t why_cap)
{
    const ir_tensor *wt = &m->tensors[l->inputs[1]];
    const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
    const ir_epilogue *e = cc->fuse;
    const int folded = e && e->bn >= 0 && cc->fold_w;
    P->k0 = k0;
    P->k1 = k1;
    pdc_status st = slice_as_2d(cc->ctx, m, l, folded ? cc->fold_w : wt->data, folded ? cc->fold_b : bt ? bt->data : NULL,
                                e && e->residual >= 0, k0, k1, kd_major, &P->m2);
    if (st) return st;
    P->x2 = ir_model_find_tensor(P->m2, "x2");
    P->y2 = ir_model_find_tensor(P->m2, "y2");
    P->r2 = ir_model_find_tensor(P->m2, "r2"); /* -1 without a residual */
    /* the 2-D layer takes the epilogue with its own tensors: the batchnorm is in its weights already */
    ir_epilogue e2;
    cpu_compile cc2 = *cc;
    cc2.fold_w = cc2.fold_b = NULL;
    cc2.fuse = NULL;
    if (e) {
        e2 = *e;
        e2.bn = -1;
        e2.residual = P->r2;
        e2.out = P->y2;
        cc2.fuse = &e2;
    }
    char why2[160] = "";
    st = cpu_plan_conv(&cc2, P->m2, &P->m2->layers[0], &P->L2, why2, sizeof why2);
    if (st == PDC_ERR_UNSUPPORTED) snprintf(why, why_cap, "3-D conv as 2-D: %s", why2);
    return st;
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
    conv3d_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->p = p;
    s->kd_major = p.group == 1;
    const int64_t od_n = p.out[0], kd = p.k[0];
    s->plan_of = pdc_calloc(cc->ctx, (size_t)od_n, sizeof *s->plan_of);
    s->plans = pdc_calloc(cc->ctx, (size_t)od_n, sizeof *s->plans); /* at most one a plane */
    if (!s->plan_of || !s->plans) {
        conv3d_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    /* plans in order of first use; the full window for planes with no tap inside (their output is
     * the bias and epilogue of zero planes) and, unsplit, for every plane */
    const int split = cpu_conv3d_split(&p);
    for (int64_t od = 0; od < od_n && !st; od++) {
        int64_t k0, k1;
        cpu_conv3d_plane_taps(&p, split, od, &k0, &k1);
        int i = 0;
        while (i < s->n_plans && (s->plans[i].k0 != k0 || s->plans[i].k1 != k1)) i++;
        if (i == s->n_plans) {
            st = plan_slice(cc, m, l, s->kd_major, k0, k1, &s->plans[i], why, why_cap);
            s->n_plans++;
        }
        s->plan_of[od] = i;
    }
    if (st) {
        conv3d_free(s);
        return st;
    }
    /* every plan takes the epilogue or none does (the same 2-D families, the same epilogue) */
    int fused = cc->fuse != NULL;
    for (int i = 0; i < s->n_plans; i++) fused &= s->plans[i].L2.fused;
    if (!fused)
        for (int i = 0; i < s->n_plans; i++)
            if (s->plans[i].L2.fused) {
                snprintf(why, why_cap, "3-D conv: the epilogue fuses into some depth-tap kernels only");
                conv3d_free(s);
                return PDC_ERR_UNSUPPORTED;
            }
    if (!fused)
        for (int i = 0; i < s->n_plans; i++) s->plans[i].r2 = -1;
    const size_t plane = (size_t)(p.in[1] * p.in[2]), oplane = (size_t)(p.out[1] * p.out[2]);
    size_t l2_scratch = 0, l2_thread = 0;
    for (int i = 0; i < s->n_plans; i++) {
        if (s->plans[i].L2.scratch_floats > l2_scratch) l2_scratch = s->plans[i].L2.scratch_floats;
        if (s->plans[i].L2.thread_floats > l2_thread) l2_thread = s->plans[i].L2.thread_floats;
    }
    s->in_off = align_up(l2_scratch);
    s->out_off = s->in_off + align_up((size_t)(p.c * kd) * plane);
    s->res_off = s->out_off + align_up((size_t)p.o * oplane);
    s->lane_floats = align_up(s->res_off + (fused && cc->fuse->residual >= 0 ? (size_t)p.o * oplane : 0));
    s->by_plane = cc->threads > 1 && od_n >= cc->threads && (int64_t)oplane <= C3_PLANE_THREADS_MAX_OUT;
    const size_t lanes = s->by_plane ? (size_t)cc->threads : 1;
    s->t_off = lanes * s->lane_floats;
    L->run = conv3d_run;
    L->state = s;
    L->free_state = conv3d_free;
    L->scratch_floats = s->t_off + (s->kd_major ? (size_t)(p.c * p.in[0]) * plane : 0);
    L->thread_floats = l2_thread;
    if (fused) cpu_take_epilogue(cc, L);
    const c3_plan *P = &s->plans[s->plan_of[od_n / 2]]; /* the plan of the middle planes */
    snprintf(L->info, sizeof L->info, "3-D conv: %lld depth planes of %.170s; %d kernel%s by depth taps inside the input, %s%s",
             (long long)od_n, P->L2.info, s->n_plans, s->n_plans > 1 ? "s" : "",
             s->kd_major ? "input read in place" : "input planes gathered", s->by_plane ? ", threads over depth planes" : "");
    return PDC_OK;
}
