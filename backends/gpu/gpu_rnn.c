/*
 * gpu_rnn.c - LSTM and GRU entirely on the gpu, one launch per kernel per time step (the time loop
 * is the launch list; each launch's arg is direction * T + step):
 *   init   thread per (direction, batch, unit): h, c from h0/c0 or zero (scratch in the arena)
 *   gates  thread per (batch, gate row): the gate GEMVs x_t W^T + h R^T + biases (GRU's h gate
 *          without its recurrent part), into scratch a[B, G*H]
 *   LSTM cell   thread per (batch, unit): i, o, f, c~ -> c, h; writes y[t], y_h, y_c
 *   GRU  rh     thread per (batch, unit): the h gate's recurrent part, (r*h) Rh^T or r*(h Rh^T + Rbh)
 *   GRU  cell   thread per (batch, unit): z, h~ -> h; writes y[t], y_h
 * Every kernel writes only its own thread's elements and reads what earlier launches wrote, so
 * launches in order are the only synchronisation needed.
 */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"

typedef struct rnn_p {
    int lstm, lbr, rev_only;
    int64_t T, B, I, H, D, G;
    gpu_ref x, w, r, bias, h0, c0, y, yh, yc;
    gpu_ref h, c, a, rh;      /* scratch */
} rnn_p;

static LLVMValueRef fld(gpu_kb *kb, gpu_ref r, LLVMValueRef i) { return kb_ld(kb, r, i); }

/* direction d and time index t of this launch */
static void step_of(gpu_kb *kb, const rnn_p *p, LLVMValueRef *d, LLVMValueRef *t)
{
    *d = kb_divc(kb, kb->arg, p->T);
    LLVMValueRef step = kb_remc(kb, kb->arg, p->T);
    LLVMValueRef rev = p->rev_only ? LLVMConstInt(kb->i1, 1, 0) : kb_icmp(kb, LLVMIntEQ, *d, kb_i64(kb, 1));
    *t = kb_sel(kb, rev, kb_sub(kb, kb_i64(kb, p->T - 1), step), step);
}

static void gen_init(gpu_kb *kb, const void *vp)
{
    const rnn_p *p = vp;
    kb_st(kb, p->h, kb->idx, p->h0.off >= 0 ? fld(kb, p->h0, kb->idx) : kb_f32(kb, 0.0f));
    if (p->lstm) kb_st(kb, p->c, kb->idx, p->c0.off >= 0 ? fld(kb, p->c0, kb->idx) : kb_f32(kb, 0.0f));
}

static LLVMValueRef dot(gpu_kb *kb, gpu_ref a, LLVMValueRef abase, gpu_ref b, LLVMValueRef bbase, LLVMValueRef n,
                        LLVMValueRef acc0)
{
    LLVMValueRef acc = kb_var(kb, kb->f32, acc0);
    kb_loop L;
    LLVMValueRef i = kb_for(kb, &L, kb_i64(kb, 0), n);
    kb_set(kb, acc, kb_fma(kb, fld(kb, a, kb_add(kb, abase, i)), fld(kb, b, kb_add(kb, bbase, i)),
                           kb_get(kb, kb->f32, acc)));
    kb_endfor(kb, &L);
    return kb_get(kb, kb->f32, acc);
}

static void gen_gates(gpu_kb *kb, const void *vp)
{
    const rnn_p *p = vp;
    const int64_t GH = p->G * p->H;
    LLVMValueRef d, t;
    step_of(kb, p, &d, &t);
    LLVMValueRef b = kb_divc(kb, kb->idx, GH), j = kb_remc(kb, kb->idx, GH);
    LLVMValueRef acc = kb_f32(kb, 0.0f);
    LLVMValueRef wb = kb_add(kb, kb_mulc(kb, d, 2 * GH), j);
    /* GRU's h gate (rows >= 2H) gets its recurrent part from the rh kernel */
    LLVMValueRef rec = p->lstm ? LLVMConstInt(kb->i1, 1, 0) : kb_icmp(kb, LLVMIntSLT, j, kb_i64(kb, 2 * p->H));
    if (p->bias.off >= 0) {
        acc = fld(kb, p->bias, wb);
        acc = kb_fadd(kb, acc, kb_sel(kb, rec, fld(kb, p->bias, kb_addc(kb, wb, GH)), kb_f32(kb, 0.0f)));
    }
    LLVMValueRef xb = kb_mulc(kb, kb_add(kb, kb_mulc(kb, t, p->B), b), p->I);
    LLVMValueRef wrow = kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, GH), j), p->I);
    acc = dot(kb, p->x, xb, p->w, wrow, kb_i64(kb, p->I), acc);
    LLVMValueRef hb = kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, p->B), b), p->H);
    LLVMValueRef rrow = kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, GH), j), p->H);
    acc = dot(kb, p->h, hb, p->r, rrow, kb_sel(kb, rec, kb_i64(kb, p->H), kb_i64(kb, 0)), acc);
    kb_st(kb, p->a, kb->idx, acc);
}

/* y[t, d, b, k], y_h[d, b, k] (and y_c) of this thread's unit */
static void store_h(gpu_kb *kb, const rnn_p *p, LLVMValueRef d, LLVMValueRef t, LLVMValueRef b, LLVMValueRef k,
                    LLVMValueRef hv, LLVMValueRef cv)
{
    LLVMValueRef hi = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, p->B), b), p->H), k);
    kb_st(kb, p->h, hi, hv);
    if (p->lstm) kb_st(kb, p->c, hi, cv);
    LLVMValueRef yi = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, t, p->D), d), p->B), b), p->H), k);
    kb_st(kb, p->y, yi, hv);
    if (p->yh.off >= 0) kb_st(kb, p->yh, hi, hv);
    if (p->lstm && p->yc.off >= 0) kb_st(kb, p->yc, hi, cv);
}

static void gen_lstm_cell(gpu_kb *kb, const void *vp)
{
    const rnn_p *p = vp;
    LLVMValueRef d, t;
    step_of(kb, p, &d, &t);
    LLVMValueRef b = kb_divc(kb, kb->idx, p->H), k = kb_remc(kb, kb->idx, p->H);
    LLVMValueRef ab = kb_add(kb, kb_mulc(kb, b, 4 * p->H), k);
    LLVMValueRef ig = kb_sigmoid(kb, fld(kb, p->a, ab));
    LLVMValueRef og = kb_sigmoid(kb, fld(kb, p->a, kb_addc(kb, ab, p->H)));
    LLVMValueRef fg = kb_sigmoid(kb, fld(kb, p->a, kb_addc(kb, ab, 2 * p->H)));
    LLVMValueRef cg = kb_tanh(kb, fld(kb, p->a, kb_addc(kb, ab, 3 * p->H)));
    LLVMValueRef hi = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, p->B), b), p->H), k);
    LLVMValueRef c = kb_fma(kb, fg, fld(kb, p->c, hi), kb_fmul(kb, ig, cg));
    store_h(kb, p, d, t, b, k, kb_fmul(kb, og, kb_tanh(kb, c)), c);
}

static void gen_gru_rh(gpu_kb *kb, const void *vp)
{
    const rnn_p *p = vp;
    const int64_t GH = 3 * p->H;
    LLVMValueRef d, t;
    step_of(kb, p, &d, &t);
    LLVMValueRef b = kb_divc(kb, kb->idx, p->H), k = kb_remc(kb, kb->idx, p->H);
    LLVMValueRef j = kb_addc(kb, k, 2 * p->H);
    LLVMValueRef acc0 = p->bias.off >= 0 ? fld(kb, p->bias, kb_add(kb, kb_addc(kb, kb_mulc(kb, d, 2 * GH), GH), j))
                                         : kb_f32(kb, 0.0f);
    LLVMValueRef hb = kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, p->B), b), p->H);
    LLVMValueRef rrow = kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, GH), j), p->H);
    LLVMValueRef ab = kb_mulc(kb, b, GH);
    LLVMValueRef res;
    if (p->lbr) {
        LLVMValueRef rg = kb_sigmoid(kb, fld(kb, p->a, kb_add(kb, ab, kb_addc(kb, k, p->H))));
        res = kb_fmul(kb, rg, dot(kb, p->h, hb, p->r, rrow, kb_i64(kb, p->H), acc0));
    } else {
        LLVMValueRef acc = kb_var(kb, kb->f32, acc0);
        kb_loop L;
        LLVMValueRef q = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, p->H));
        LLVMValueRef rq = kb_sigmoid(kb, fld(kb, p->a, kb_add(kb, kb_addc(kb, ab, p->H), q)));
        LLVMValueRef v = kb_fmul(kb, rq, fld(kb, p->h, kb_add(kb, hb, q)));
        kb_set(kb, acc, kb_fma(kb, v, fld(kb, p->r, kb_add(kb, rrow, q)), kb_get(kb, kb->f32, acc)));
        kb_endfor(kb, &L);
        res = kb_get(kb, kb->f32, acc);
    }
    kb_st(kb, p->rh, kb->idx, res);
}

static void gen_gru_cell(gpu_kb *kb, const void *vp)
{
    const rnn_p *p = vp;
    LLVMValueRef d, t;
    step_of(kb, p, &d, &t);
    LLVMValueRef b = kb_divc(kb, kb->idx, p->H), k = kb_remc(kb, kb->idx, p->H);
    LLVMValueRef ab = kb_add(kb, kb_mulc(kb, b, 3 * p->H), k);
    LLVMValueRef z = kb_sigmoid(kb, fld(kb, p->a, ab));
    LLVMValueRef hc = kb_tanh(kb, kb_fadd(kb, fld(kb, p->a, kb_addc(kb, ab, 2 * p->H)), fld(kb, p->rh, kb->idx)));
    LLVMValueRef hi = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, d, p->B), b), p->H), k);
    LLVMValueRef hold = fld(kb, p->h, hi);
    /* (1 - z) h~ + z h */
    LLVMValueRef hv = kb_fma(kb, kb_fsub(kb, kb_f32(kb, 1.0f), z), hc, kb_fmul(kb, z, hold));
    store_h(kb, p, d, t, b, k, hv, NULL);
}

pdc_status gpu_plan_rnn(gpu_plan *pl, const ir_model *m, size_t li)
{
    const ir_layer *l = &m->layers[li];
    ir_rnn_params rp;
    pdc_status st = ir_rnn_params_get(m, l, &rp);
    if (st) return st;
    const int lstm = l->op == IR_OP_LSTM;
    if (gpu_in(pl, l, 4).off >= 0) return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "sequence_lens is not supported");
    if (ir_attrs_find(&l->attrs, "clip") || ir_attr_int(&l->attrs, "input_forget", 0) != 0)
        return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "clip and input_forget are not supported");
    if (rp.dirs < 1 || rp.dirs > 2 || rp.hidden < 1 || gpu_in(pl, l, 0).off < 0 || gpu_in(pl, l, 1).off < 0 ||
        gpu_in(pl, l, 2).off < 0 || gpu_out(pl, l, 0).off < 0)
        return GPU_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing x, w, r or y, or bad directions");
    if (rp.seq * rp.dirs > INT32_MAX) return GPU_LAYER_ERR(m, l, PDC_ERR_UNSUPPORTED, "sequence too long");
    rnn_p base = {0};
    base.lstm = lstm;
    base.lbr = rp.linear_before_reset;
    base.rev_only = rp.reverse_only;
    base.T = rp.seq, base.B = rp.batch, base.I = rp.input, base.H = rp.hidden, base.D = rp.dirs;
    base.G = lstm ? 4 : 3;
    base.x = gpu_in(pl, l, 0), base.w = gpu_in(pl, l, 1), base.r = gpu_in(pl, l, 2), base.bias = gpu_in(pl, l, 3);
    base.h0 = gpu_in(pl, l, 5), base.c0 = lstm ? gpu_in(pl, l, 6) : (gpu_ref){0, -1};
    base.y = gpu_out(pl, l, 0), base.yh = gpu_out(pl, l, 1), base.yc = lstm ? gpu_out(pl, l, 2) : (gpu_ref){0, -1};
    const int64_t BH = base.B * base.H;
    base.h = (gpu_ref){0, gpu_plan_scratch(pl, (size_t)(base.D * BH))};
    base.c = (gpu_ref){0, gpu_plan_scratch(pl, (size_t)(base.D * BH))};
    base.a = (gpu_ref){0, gpu_plan_scratch(pl, (size_t)(base.B * base.G * base.H))};
    base.rh = (gpu_ref){0, gpu_plan_scratch(pl, (size_t)BH)};

    struct {
        const char *what;
        gpu_gen_fn gen;
        int64_t total;
    } ks[4] = {{"init", gen_init, base.D * BH},
               {"gates", gen_gates, base.B * base.G * base.H},
               {lstm ? "cell" : "rh", lstm ? gen_lstm_cell : gen_gru_rh, BH},
               {"cell", gen_gru_cell, BH}};
    int nk = lstm ? 3 : 4, idx[4];
    for (int i = 0; i < nk; i++) {
        rnn_p *p = pdc_alloc(pl->ctx, sizeof *p);
        if (p) *p = base;
        if ((idx[i] = gpu_plan_kernel(pl, (int)li, ks[i].what, ks[i].gen, p, NULL, ks[i].total)) < 0)
            return PDC_ERR_OUT_OF_MEMORY;
    }
    if ((st = gpu_plan_launch(pl, idx[0], 0))) return st;
    for (int64_t d = 0; d < base.D; d++)
        for (int64_t s = 0; s < base.T; s++)
            for (int i = 1; i < nk; i++)
                if ((st = gpu_plan_launch(pl, idx[i], (int32_t)(d * base.T + s)))) return st;
    snprintf(pl->info[li], sizeof pl->info[0],
             "ptx %s: %d launches per step (gate GEMVs thread per gate row, cell update thread per unit), %lld steps "
             "x %lld directions",
             lstm ? "lstm" : "gru", nk - 1, (long long)base.T, (long long)base.D);
    return PDC_OK;
}
