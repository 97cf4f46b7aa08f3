/*
 * rnn.c - LSTM and GRU for the cpu target (ONNX semantics, as backends/ref/rnn.c documents them):
 * the input projections of all time steps in one GEMM per direction (x[T*B, I] w^T, biases
 * folded in), then per step one GEMM for the recurrent part (h[B, H] r^T) and one JIT'd loop over the
 * hidden units for the gates' sums, sigmoids and tanhs, the cell and hidden update and the store into y
 * (rnn_cell.c; GRU's h-gate product sits between its reset gate and that loop).
 * Dense weights go through OpenBLAS, or, for products of 2-32 rows whose slices fall on 8x8
 * blocks, through gemm.c's kernels on a packed copy (cpu_bsr_plan: sgemm repacks w on every
 * call). A block- or unstructured-pruned w or r (sparse enough, blocks
 * not straddling a direction or GRU's h gate) goes through gemm.c's JIT'd block-sparse product
 * instead, over the kept blocks only (cpu_bsr_product: each weight loaded once for every sample of
 * the batch, or of all time steps for the input projection). Every product of RNN_PAR_MIN
 * multiply-adds or more is split over the threads (dense ones by cpu_sgemm_nt_threads; block-sparse
 * ones from the same size on, by cpu_bsr_product). Each of
 * the matrices chooses on its own; pdc inspect says which did. A BCR-pruned w or r (prune-bcr; slices on
 * block-rows) goes through bcr.c's product: each block-row a GEMV over its kept columns only, gathered
 * from the input, with its rows as vector lanes; over the threads from 64K multiply-adds on. Arithmetic is float (the reference
 * uses double): results agree to rounding.
 */
#include <cblas.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

#define RNN_PAR_MIN (1 << 16) /* weights of a product below which one thread does it */

typedef struct rnn_state {
    ir_rnn_params p;
    int lstm;
    int64_t g;              /* gates: 4 (lstm) or 3 (gru) */
    /* per direction, JIT'd forms (block-sparse or packed dense; not cpu_bsr_ready: OpenBLAS): w's
     * gates; r's gates (lstm) or r's z and r gates (gru); gru's h gate of r */
    cpu_bsr w[2], r[2], rh[2];
    cpu_bcr bw[2], br[2], brh[2]; /* the same matrices where BCR-pruned (then the cpu_bsr ones stay empty) */
    int64_t pad;            /* floats of the block-sparse products' scratch (cpu_bsr_scratch_floats) */
    cpu_rnn_cell_fn cell;   /* the gates and the state update, one loop (rnn_cell.c) */
    cpu_rnn_reset_fn reset; /* GRU without linear_before_reset: r*h before the h-gate product */
} rnn_state;

static void rnn_free(void *p)
{
    rnn_state *s = p;
    if (!s) return;
    for (int d = 0; d < 2; d++) {
        cpu_bsr_release(&s->w[d]);
        cpu_bsr_release(&s->r[d]);
        cpu_bsr_release(&s->rh[d]);
        cpu_bcr_release(&s->bw[d]);
        cpu_bcr_release(&s->br[d]);
        cpu_bcr_release(&s->brh[d]);
    }
    pdc_free(s);
}

/* y[b][0, o) = x[b] w^T for nb rows x[b] of k floats (w: o x k, row-major; y rows ldy apart), over
 * the threads from RNN_PAR_MIN multiply-adds on. */
static void rows_times_wt(int nb, int o, int k, const float *x, const float *w, float *y, int ldy, int threads)
{
    cpu_sgemm_nt_threads(nb, o, k, x, w, 0.0f, y, ldy, (int64_t)nb * o * k >= RNN_PAR_MIN ? threads : 1);
}

static int in_at(const ir_layer *l, size_t i) { return i < l->n_inputs ? l->inputs[i] : -1; }
static int out_at(const ir_layer *l, size_t i) { return i < l->n_outputs ? l->outputs[i] : -1; }

static pdc_status rnn_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf, const cpu_exec *x)
{
    (void)m;
    const rnn_state *s = L->state;
    const ir_rnn_params *p = &s->p;
    const int64_t ns = p->seq, nb = p->batch, ni = p->input, nh = p->hidden, nd = p->dirs, ng = s->g, ngh = ng * nh;
    const float *xin = buf[in_at(l, 0)], *w = buf[in_at(l, 1)], *r = buf[in_at(l, 2)];
    const float *bias = in_at(l, 3) >= 0 ? buf[in_at(l, 3)] : NULL;
    const float *h0 = in_at(l, 5) >= 0 ? buf[in_at(l, 5)] : NULL;
    const float *c0 = s->lstm && in_at(l, 6) >= 0 ? buf[in_at(l, 6)] : NULL;
    float *y = buf[out_at(l, 0)];
    float *yh = out_at(l, 1) >= 0 ? buf[out_at(l, 1)] : NULL;
    float *yc = s->lstm && out_at(l, 2) >= 0 ? buf[out_at(l, 2)] : NULL;
    /* scratch: xw[ns*nb*ngh], h[nb*nh], c[nb*nh], hr[nb*ngh], rh[nb*nh] (GRU's r*h), rbh[nh] (GRU's
     * h-gate Rb or zeros), bsum[ngh], then the block-sparse products' scratch[s->pad] */
    float *xw = x->scratch, *h = xw + ns * nb * ngh, *c = h + nb * nh, *hr = c + nb * nh, *rh = hr + nb * ngh;
    float *rbh = rh + nb * nh, *bsum = rbh + nh, *pad = bsum + ngh;
    for (int64_t d = 0; d < nd; d++) {
        const int rev = p->reverse_only || d == 1;
        const float *wd = w + d * ngh * ni, *rd = r + d * ngh * nh;
        const float *wb = bias ? bias + d * 2 * ngh : NULL, *rb = bias ? wb + ngh : NULL;
        /* xw = x w^ns + Wb (+ Rb except GRU's h gate, whose Rb sits inside the reset product) */
        for (int64_t j = 0; j < ngh; j++) bsum[j] = (wb ? wb[j] : 0.0f) + (rb && (s->lstm || j < 2 * nh) ? rb[j] : 0.0f);
        for (int64_t k = 0; k < nh; k++) rbh[k] = rb ? rb[2 * nh + k] : 0.0f;
        if (cpu_bcr_ready(&s->bw[d])) {
            for (int64_t q = 0; q < ns * nb; q++) memcpy(xw + q * ngh, bsum, (size_t)ngh * sizeof *xw);
            cpu_bcr_product(&s->bw[d], ns * nb, xin, ni, xw, ngh, 1, x->threads);
        } else if (cpu_bsr_ready(&s->w[d])) {
            cpu_bsr_product(&s->w[d], ns * nb, xin, ni, bsum, xw, ngh, pad, x->own, x->threads, NULL);
        } else {
            for (int64_t q = 0; q < ns * nb; q++) memcpy(xw + q * ngh, bsum, (size_t)ngh * sizeof *xw);
            cpu_sgemm_nt_threads((int)(ns * nb), (int)ngh, (int)ni, xin, wd, 1.0f, xw, (int)ngh,
                                 ns * nb * ngh * ni >= RNN_PAR_MIN ? x->threads : 1);
        }
        for (int64_t i = 0; i < nb * nh; i++) {
            h[i] = h0 ? h0[d * nb * nh + i] : 0.0f;
            c[i] = c0 ? c0[d * nb * nh + i] : 0.0f;
        }
        for (int64_t step = 0; step < ns; step++) {
            const int64_t t = rev ? ns - 1 - step : step;
            /* recurrent products h r^ns for every gate (GRU: z and r only) */
            int64_t nrec = s->lstm ? ngh : 2 * nh;
            if (cpu_bcr_ready(&s->br[d]))
                cpu_bcr_product(&s->br[d], nb, h, nh, hr, ngh, 0, x->threads);
            else if (cpu_bsr_ready(&s->r[d]))
                cpu_bsr_product(&s->r[d], nb, h, nh, NULL, hr, ngh, pad, x->own, x->threads, NULL);
            else
                rows_times_wt((int)nb, (int)nrec, (int)nh, h, rd, hr, (int)ngh, x->threads);
            /* the gates and the state update in one loop over the units (rnn_cell.c), h into y too */
            const float *xt = xw + t * nb * ngh;
            float *yt = y + (t * nd + d) * nb * nh;
            if (s->lstm) {
                s->cell(xt, hr, NULL, c, h, yt, nh, nb);
            } else {
                /* linear_before_reset: the h-gate product of h itself, r applied in the cell loop */
                const float *hin = h;
                if (s->reset) {
                    s->reset(xt, hr, h, rh, nh, nb);
                    hin = rh;
                }
                if (cpu_bcr_ready(&s->brh[d]))
                    cpu_bcr_product(&s->brh[d], nb, hin, nh, hr + 2 * nh, ngh, 0, x->threads);
                else if (cpu_bsr_ready(&s->rh[d]))
                    cpu_bsr_product(&s->rh[d], nb, hin, nh, NULL, hr + 2 * nh, ngh, pad, x->own, x->threads, NULL);
                else
                    rows_times_wt((int)nb, (int)nh, (int)nh, hin, rd + 2 * nh * nh, hr + 2 * nh, (int)ngh, x->threads);
                s->cell(xt, hr, rbh, NULL, h, yt, nh, nb);
            }
        }
        if (yh) memcpy(yh + d * nb * nh, h, (size_t)(nb * nh) * sizeof *yh);
        if (yc) memcpy(yc + d * nb * nh, c, (size_t)(nb * nh) * sizeof *yc);
    }
    return PDC_OK;
}

/* Rows [row0, row0 + rows) of wt for products of nx rows: bcr.c's product where BCR-pruned (bc), else
 * gemm.c's kernels (cpu_bsr_plan, b); both left zeroed (OpenBLAS) where neither takes it. */
static pdc_status plan_matrix(const cpu_compile *cc, const ir_tensor *wt, int64_t row0, int64_t rows, int64_t nx,
                              cpu_bsr *b, cpu_bcr *bc)
{
    pdc_status st = cpu_bcr_plan(cc->ctx, wt, row0, rows, bc);
    if (st != PDC_ERR_UNSUPPORTED) return st;
    st = cpu_bsr_plan(cc, wt, row0, rows, nx, b);
    return st == PDC_ERR_UNSUPPORTED ? PDC_OK : st;
}

pdc_status cpu_plan_rnn(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                        size_t why_cap)
{
    if (l->op != IR_OP_LSTM && l->op != IR_OP_GRU) return PDC_ERR_UNSUPPORTED;
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(m, l, &p);
    if (st) return st;
    if (in_at(l, 0) < 0 || in_at(l, 1) < 0 || in_at(l, 2) < 0 || out_at(l, 0) < 0 || in_at(l, 4) >= 0 ||
        ir_attrs_find(&l->attrs, "clip") || ir_attr_int(&l->attrs, "input_forget", 0) != 0 || p.dirs < 1 ||
        p.dirs > 2 || p.hidden < 1) {
        snprintf(why, why_cap, "%s with sequence_lens, clip or input_forget", ir_op_get_info(l->op)->name);
        return PDC_ERR_UNSUPPORTED;
    }
    if (p.seq * p.batch > INT32_MAX || p.input > INT32_MAX || 4 * p.hidden > INT32_MAX) {
        snprintf(why, why_cap, "dims beyond BLAS's int range");
        return PDC_ERR_UNSUPPORTED;
    }
    rnn_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->p = p;
    s->lstm = l->op == IR_OP_LSTM;
    s->g = s->lstm ? 4 : 3;
    cpu_blas_single_thread();
    const int64_t gh = s->g * p.hidden, nh = p.hidden;
    const ir_tensor *wt = &m->tensors[l->inputs[1]], *rt = &m->tensors[l->inputs[2]];
    /* JIT'd forms where the weights allow (PDC_ERR_UNSUPPORTED: that matrix stays on OpenBLAS) */
    for (int64_t d = 0; d < p.dirs && st == PDC_OK; d++) {
        st = plan_matrix(cc, wt, d * gh, gh, p.seq * p.batch, &s->w[d], &s->bw[d]);
        if (!st && s->lstm) {
            st = plan_matrix(cc, rt, d * gh, gh, p.batch, &s->r[d], &s->br[d]);
        } else if (!st) {
            st = plan_matrix(cc, rt, d * gh, 2 * nh, p.batch, &s->r[d], &s->br[d]);
            if (!st) st = plan_matrix(cc, rt, d * gh + 2 * nh, nh, p.batch, &s->rh[d], &s->brh[d]);
        }
    }
    const cpu_rnn_cell_kind kind = s->lstm ? CPU_RNN_CELL_LSTM : p.linear_before_reset ? CPU_RNN_CELL_GRU_LBR : CPU_RNN_CELL_GRU;
    if (!st) st = cpu_rnn_cell_kernels(cc, kind, &s->cell, &s->reset);
    if (st) {
        rnn_free(s);
        return st;
    }
    /* per group (0: w, 1: r), matrices block-sparse and their weights, matrices JIT'd dense */
    int sparse[2] = {0, 0}, dense[2] = {0, 0}, bcr[2] = {0, 0};
    size_t kept[2] = {0, 0}, total[2] = {0, 0};
    for (int64_t d = 0; d < p.dirs; d++) {
        const cpu_bcr *bs[3] = {&s->bw[d], &s->br[d], &s->brh[d]};
        for (int j = 0; j < 3; j++) {
            if (!cpu_bcr_ready(bs[j])) continue;
            kept[j > 0] += bs[j]->kept;
            total[j > 0] += bs[j]->total;
            bcr[j > 0]++;
        }
        const cpu_bsr *ms[3] = {&s->w[d], &s->r[d], &s->rh[d]};
        for (int j = 0; j < 3; j++) {
            if (!cpu_bsr_ready(ms[j])) continue;
            if ((int64_t)cpu_bsr_scratch_floats(ms[j]) > s->pad) s->pad = (int64_t)cpu_bsr_scratch_floats(ms[j]);
            if (cpu_bsr_thread_floats(ms[j]) > L->thread_floats) L->thread_floats = cpu_bsr_thread_floats(ms[j]);
            if (ms[j]->dense) {
                dense[j > 0]++;
                continue;
            }
            kept[j > 0] += ms[j]->kept;
            total[j > 0] += ms[j]->total;
            sparse[j > 0]++;
        }
    }
    L->run = rnn_run;
    L->state = s;
    L->free_state = rnn_free;
    L->scratch_floats = (size_t)(p.seq * p.batch * gh + 2 * p.batch * p.hidden + p.batch * gh + p.batch * p.hidden) +
                        (size_t)(p.hidden + gh + s->pad);
    const char *name = ir_op_get_info(l->op)->name;
    const int sparse_w = wt->sparsity.kind != IR_SPARSITY_NONE, sparse_r = rt->sparsity.kind != IR_SPARSITY_NONE;
    static const char unused[] = " (sparsity not used: too dense or blocks misaligned)";
    char part[2][96];
    for (int q = 0; q < 2; q++) {
        const char *nm = q ? "r" : "w", *note = (q ? sparse_r : sparse_w) ? unused : "";
        const int slices = (q && !s->lstm ? 2 : 1) * (int)p.dirs; /* GRU's r: the z/r gates and the h gate */
        const int64_t rows = q ? p.batch : p.seq * p.batch;
        if (bcr[q])
            snprintf(part[q], sizeof part[q], "%s bcr (%.0f%% kept)", nm, 100.0 * (double)kept[q] / (double)total[q]);
        else if (sparse[q])
            snprintf(part[q], sizeof part[q], "%s jit block-sparse (%.0f%% kept)", nm, 100.0 * (double)kept[q] / (double)total[q]);
        else if (dense[q] == slices)
            snprintf(part[q], sizeof part[q], "%s jit dense for %" PRId64 " rows%s", nm, rows, note);
        else if (dense[q])
            snprintf(part[q], sizeof part[q], "%s jit dense for %" PRId64 " rows (%d of %d slices; the rest OpenBLAS)", nm,
                     rows, dense[q], slices);
        else
            snprintf(part[q], sizeof part[q], "%s OpenBLAS%s", nm, note);
    }
    if (!sparse[0] && !sparse[1] && !dense[0] && !dense[1] && !bcr[0] && !bcr[1])
        snprintf(L->info, sizeof L->info, "%s: OpenBLAS GEMMs for input (all steps at once) and recurrent projections%s",
                 name, sparse_w || sparse_r ? " (weight sparsity not used: too dense or blocks misaligned)" : "");
    else
        snprintf(L->info, sizeof L->info, "%s: gate products %s, %s, %s", name, part[0], part[1], pdc_isa_name(cc->target->isa));
    return PDC_OK;
}
