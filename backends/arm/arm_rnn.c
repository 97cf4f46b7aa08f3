/*
 * arm_rnn.c - LSTM and GRU cells as LLVM IR loops for the AArch64 module, with the semantics of
 * backends/ref/rnn.c (ONNX opset 13, sigmoid/tanh, gates i,o,f,c and z,r,h).
 *
 * Dense weight matrices are transposed at emit time ([I, G*H] and [H, G*H]) so every gate product
 * is y[:] += x[k] * W^T[k, :] along unit-stride rows (vectorised without reassociation); the two
 * biases are added together at emit time. A block- or unstructured-pruned w or r (sparse enough,
 * blocks not straddling a direction or GRU's h gate: the cpu target's conditions) goes through the
 * block-sparse kernel instead (arm_sparse.c), one matrix-vector product per step and sample, each
 * matrix choosing on its own. A BCR-pruned one (prune-bcr, slices on block-rows) goes through arm_bcr.c's
 * gathered GEMV per block-row, accumulated onto the biases. Hidden and cell state and the gate pre-activations live
 * in the module's scratch area. Sequence steps run in a loop; directions are unrolled. Per step and
 * sample, the gates' sigmoids and tanhs and the cell and hidden update are one loop over the units
 * (GRU: after a loop for the reset gate and the h-gate product that needs it). h is copied into y by a
 * loop of its own: storing it from the cell loop too was tried, and cost 7% more instructions per
 * inference on make arm-report's small LSTM (101626 -> 109031) and none on its lstm_big.
 */
#include <string.h>

#include "backends/arm/arm.h"

static int in_at(const ir_layer *l, size_t i) { return i < l->n_inputs ? l->inputs[i] : -1; }
static int out_at(const ir_layer *l, size_t i) { return i < l->n_outputs ? l->outputs[i] : -1; }

/* dst[j] += x[xoff + k] * wt[k*cols + j] for k < K, j < cols (wt: constant, row-major). */
static void gate_product(arm_gen *G, LLVMValueRef x, LLVMValueRef xoff, int64_t K, LLVMValueRef wt, int64_t cols,
                         LLVMValueRef dst)
{
    arm_loop Lk, Lj;
    LLVMValueRef k = arm_loop_begin(G, K, &Lk);
    LLVMValueRef xv = arm_ldf(G, x, arm_add(G, xoff, k));
    LLVMValueRef row = arm_mulc(G, k, cols);
    LLVMValueRef j = arm_loop_begin(G, cols, &Lj);
    LLVMValueRef w = arm_ldf(G, wt, arm_add(G, row, j));
    arm_stf(G, dst, j, pdc_irb_fma(&G->irb, xv, w, arm_ldf(G, dst, j)));
    arm_loop_end(G, &Lj);
    arm_loop_end(G, &Lk);
}

/* Transposed copy of rows [r0, r0 + rows) of a [R, C] matrix: out[c*rows + r] = w[(r0 + r)*C + c]. */
static float *transpose_rows(arm_gen *G, const float *w, int64_t C, int64_t r0, int64_t rows)
{
    float *t = pdc_alloc(G->ctx, (size_t)(rows * C) * sizeof *t);
    if (!t) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < C; c++) t[c * rows + r] = w[(r0 + r) * C + c];
    return t;
}

/* Embeds data (n floats) and frees it. */
static pdc_status const_of(arm_gen *G, float *data, size_t n, const char *what, LLVMValueRef *out)
{
    if (!data) return PDC_ERR_OUT_OF_MEMORY;
    *out = arm_const_bytes(G, data, n * sizeof(float), what);
    pdc_free(data);
    return PDC_OK;
}

static LLVMValueRef sig(arm_gen *G, LLVMValueRef v)
{
    ir_fused_params p = {.act = IR_ACT_SIGMOID};
    return arm_act(G, &p, v);
}
static LLVMValueRef tnh(arm_gen *G, LLVMValueRef v)
{
    ir_fused_params p = {.act = IR_ACT_TANH};
    return arm_act(G, &p, v);
}

pdc_status arm_emit_rnn(arm_gen *G, const ir_layer *l)
{
    const ir_model *m = G->m;
    const int lstm = l->op == IR_OP_LSTM;
    ir_rnn_params p;
    pdc_status st = ir_rnn_params_get(m, l, &p);
    if (st) return st;
    if (in_at(l, 4) >= 0) return arm_unsupported(G, l, "sequence_lens is not supported");
    if (ir_attrs_find(&l->attrs, "clip") || ir_attr_int(&l->attrs, "input_forget", 0) != 0)
        return arm_unsupported(G, l, "clip and input_forget are not supported");
    for (int i = 1; i <= 3; i++)
        if (in_at(l, (size_t)i) >= 0 && m->tensors[in_at(l, (size_t)i)].kind != IR_TENSOR_CONST)
            return arm_unsupported(G, l, "weights or biases are not constants");
    const int64_t T = p.seq, B = p.batch, I = p.input, H = p.hidden, D = p.dirs, Gn = lstm ? 4 : 3;
    const float *w = m->tensors[in_at(l, 1)].data, *r = m->tensors[in_at(l, 2)].data;
    const float *bias = in_at(l, 3) >= 0 ? m->tensors[in_at(l, 3)].data : NULL;
    LLVMValueRef x, y, h0 = NULL, c0 = NULL, yh = NULL, yc = NULL;
    if ((st = arm_tensor_ptr(G, in_at(l, 0), &x)) || (st = arm_tensor_ptr(G, out_at(l, 0), &y))) return st;
    if (in_at(l, 5) >= 0 && (st = arm_tensor_ptr(G, in_at(l, 5), &h0))) return st;
    if (lstm && in_at(l, 6) >= 0 && (st = arm_tensor_ptr(G, in_at(l, 6), &c0))) return st;
    if (out_at(l, 1) >= 0 && (st = arm_tensor_ptr(G, out_at(l, 1), &yh))) return st;
    if (lstm && out_at(l, 2) >= 0 && (st = arm_tensor_ptr(G, out_at(l, 2), &yc))) return st;
    const int64_t GH = Gn * H, RC = lstm ? GH : 2 * H; /* recurrent columns in the joint product */
    /* block-sparse forms where the weights allow, per direction and matrix (cpu target's choice):
     * w's gates, r's gates (GRU: z and r), GRU's h gate of r */
    const ir_tensor *wten = &m->tensors[in_at(l, 1)], *rten = &m->tensors[in_at(l, 2)];
    arm_bsr sw[2], sr[2], srh[2];
    arm_bcr cw[2], cr[2], crh[2];
    /* per matrix: 0 dense, 1 block-sparse, 2 BCR */
    int use_w[2] = {0, 0}, use_r[2] = {0, 0}, use_rh[2] = {0, 0};
    int64_t pad = 0;
    for (int64_t d = 0; d < D; d++) {
        struct {
            arm_bsr *S;
            arm_bcr *C;
            int *use;
            const ir_tensor *t;
            int64_t row0, rows;
        } q[3] = {{&sw[d], &cw[d], &use_w[d], wten, d * GH, GH}, {&sr[d], &cr[d], &use_r[d], rten, d * GH, RC},
                  {&srh[d], &crh[d], &use_rh[d], rten, d * GH + 2 * H, H}};
        for (int j = 0; j < (lstm ? 2 : 3); j++) {
            st = arm_bcr_plan(G, q[j].t, q[j].row0, q[j].rows, q[j].C);
            if (!st) {
                *q[j].use = 2;
                if (j == 2 && pad < H) pad = H; /* hv: GRU's r*h */
            }
            if (st != PDC_ERR_UNSUPPORTED) {
                if (st) return st;
                continue;
            }
            st = arm_bsr_plan(G, q[j].t, q[j].row0, q[j].rows, q[j].S);
            if (st == PDC_ERR_UNSUPPORTED) continue;
            if (st) return st;
            *q[j].use = 1;
            if (q[j].S->kpad > pad) pad = q[j].S->kpad;
        }
    }
    /* scratch: h[B*H], c[B*H], a[G*H], rh[H], then for the sparse products tmp[G*H] (the kernel's
     * output may not overlap its bias), xp[pad] (zero-padded input), hv[pad] (GRU's r*h) */
    LLVMValueRef scr = arm_scratch(G, (size_t)(2 * B * H + 2 * GH + H + 2 * pad));
    LLVMValueRef h = scr, c = pdc_irb_gepc(&G->irb, G->irb.f32, scr, B * H);
    LLVMValueRef a = pdc_irb_gepc(&G->irb, G->irb.f32, scr, 2 * B * H);
    LLVMValueRef rh = pdc_irb_gepc(&G->irb, G->irb.f32, scr, 2 * B * H + GH);
    LLVMValueRef tmp = pdc_irb_gepc(&G->irb, G->irb.f32, scr, 2 * B * H + GH + H);
    LLVMValueRef xp = pdc_irb_gepc(&G->irb, G->irb.f32, scr, 2 * B * H + 2 * GH + H);
    LLVMValueRef hv = pdc_irb_gepc(&G->irb, G->irb.f32, scr, 2 * B * H + 2 * GH + H + pad);
    for (int64_t d = 0; d < D; d++) {
        const int rev = p.reverse_only || d == 1;
        LLVMValueRef wt = NULL, rt = NULL, rht = NULL, bsum, rbh = NULL;
        if (!use_w[d] &&
            (st = const_of(G, transpose_rows(G, w + d * GH * I, I, 0, GH), (size_t)(GH * I), "w", &wt)))
            return st;
        if (!use_r[d] &&
            (st = const_of(G, transpose_rows(G, r + d * GH * H, H, 0, RC), (size_t)(RC * H), "r", &rt)))
            return st;
        if (!lstm && !use_rh[d] &&
            (st = const_of(G, transpose_rows(G, r + d * GH * H, H, 2 * H, H), (size_t)(H * H), "rh", &rht)))
            return st;
        /* gate biases: Wb + Rb (GRU's h gate: Wb only; its Rb goes with the recurrent part) */
        float *bs = pdc_calloc(G->ctx, (size_t)(GH + H), sizeof *bs);
        if (!bs) return PDC_ERR_OUT_OF_MEMORY;
        for (int64_t j = 0; bias && j < GH; j++) {
            const float *wb = bias + d * 2 * GH, *rb = wb + GH;
            bs[j] = wb[j] + (!lstm && j >= 2 * H ? 0.0f : rb[j]);
            if (!lstm && j >= 2 * H) bs[GH + j - 2 * H] = rb[j];
        }
        bsum = arm_const_bytes(G, bs, (size_t)(GH + H) * sizeof *bs, "b");
        pdc_free(bs);
        if (!lstm) rbh = pdc_irb_gepc(&G->irb, G->irb.f32, bsum, GH);
        /* initial state */
        arm_loop Li;
        LLVMValueRef i = arm_loop_begin(G, B * H, &Li);
        arm_stf(G, h, i, h0 ? arm_ldf(G, h0, arm_addc(G, i, d * B * H)) : arm_f32(G, 0.0f));
        arm_stf(G, c, i, c0 ? arm_ldf(G, c0, arm_addc(G, i, d * B * H)) : arm_f32(G, 0.0f));
        arm_loop_end(G, &Li);
        arm_loop Ls, Lb;
        LLVMValueRef step = arm_loop_begin(G, T, &Ls);
        LLVMValueRef t = rev ? LLVMBuildNSWSub(G->irb.b, arm_i64(G, T - 1), step, "") : step;
        LLVMValueRef bb = arm_loop_begin(G, B, &Lb);
        LLVMValueRef hb = pdc_irb_gep(&G->irb, G->irb.f32, h, arm_mulc(G, bb, H));
        LLVMValueRef cb = pdc_irb_gep(&G->irb, G->irb.f32, c, arm_mulc(G, bb, H));
        /* a = biases + x_t W^T + h R^T (GRU: z and r gates only) */
        LLVMValueRef xoff = arm_affine(G, t, B * I, bb, I, 0);
        if (use_w[d] == 1) {
            LLVMValueRef xt = pdc_irb_gep(&G->irb, G->irb.f32, x, xoff);
            arm_bsr_call(G, &sw[d], arm_bsr_input(G, &sw[d], xt, xp), bsum, a);
        } else {
            arm_loop Lj;
            LLVMValueRef j = arm_loop_begin(G, GH, &Lj);
            arm_stf(G, a, j, arm_ldf(G, bsum, j));
            arm_loop_end(G, &Lj);
            if (use_w[d] == 2) arm_bcr_product(G, &cw[d], pdc_irb_gep(&G->irb, G->irb.f32, x, xoff), a);
            else gate_product(G, x, xoff, I, wt, GH, a);
        }
        if (use_r[d] == 2) {
            arm_bcr_product(G, &cr[d], hb, a);
        } else if (use_r[d]) {
            /* tmp = a + R h, then back into a */
            arm_bsr_call(G, &sr[d], arm_bsr_input(G, &sr[d], hb, xp), a, tmp);
            arm_move(G, a, tmp, RC);
        } else {
            gate_product(G, hb, arm_i64(G, 0), H, rt, RC, a);
        }
        arm_loop Lk;
        LLVMValueRef k = arm_loop_begin(G, H, &Lk);
        if (lstm) {
            LLVMValueRef ig = sig(G, arm_ldf(G, a, k)), og = sig(G, arm_ldf(G, a, arm_addc(G, k, H)));
            LLVMValueRef fg = sig(G, arm_ldf(G, a, arm_addc(G, k, 2 * H)));
            LLVMValueRef cg = tnh(G, arm_ldf(G, a, arm_addc(G, k, 3 * H)));
            LLVMValueRef cn = pdc_irb_fma(&G->irb, fg, arm_ldf(G, cb, k), LLVMBuildFMul(G->irb.b, ig, cg, ""));
            arm_stf(G, cb, k, cn);
            arm_stf(G, hb, k, LLVMBuildFMul(G->irb.b, og, tnh(G, cn), ""));
        } else {
            arm_stf(G, a, arm_addc(G, k, H), sig(G, arm_ldf(G, a, arm_addc(G, k, H))));
            arm_stf(G, rh, k, arm_ldf(G, rbh, k));
        }
        arm_loop_end(G, &Lk);
        if (!lstm && use_rh[d]) {
            /* rh = Rbh + Rh hv with hv = h (linear_before_reset) or r*h, zero-padded to kpad (block-sparse) */
            LLVMValueRef xin = hb;
            const int64_t kpad = use_rh[d] == 1 ? srh[d].kpad : H;
            if (!p.linear_before_reset || kpad != H) {
                arm_loop Lq;
                LLVMValueRef q = arm_loop_begin(G, H, &Lq);
                LLVMValueRef v = arm_ldf(G, hb, q);
                if (!p.linear_before_reset) v = LLVMBuildFMul(G->irb.b, arm_ldf(G, a, arm_addc(G, q, H)), v, "");
                arm_stf(G, hv, q, v);
                arm_loop_end(G, &Lq);
                arm_zero(G, pdc_irb_gepc(&G->irb, G->irb.f32, hv, H), kpad - H);
                xin = hv;
            }
            if (use_rh[d] == 2) arm_bcr_product(G, &crh[d], xin, rh); /* rh holds Rbh */
            else arm_bsr_call(G, &srh[d], xin, rbh, rh);
        } else if (!lstm) {
            /* rh = Rbh + (linear_before_reset ? H Rh^T (then times r) : (r*H) Rh^T) */
            arm_loop Lq, Lk2;
            LLVMValueRef q = arm_loop_begin(G, H, &Lq);
            LLVMValueRef hq = arm_ldf(G, hb, q);
            if (!p.linear_before_reset) hq = LLVMBuildFMul(G->irb.b, arm_ldf(G, a, arm_addc(G, q, H)), hq, "");
            LLVMValueRef row = arm_mulc(G, q, H);
            LLVMValueRef k2 = arm_loop_begin(G, H, &Lk2);
            arm_stf(G, rh, k2, pdc_irb_fma(&G->irb, hq, arm_ldf(G, rht, arm_add(G, row, k2)), arm_ldf(G, rh, k2)));
            arm_loop_end(G, &Lk2);
            arm_loop_end(G, &Lq);
        }
        if (!lstm) {
            arm_loop Lk3;
            LLVMValueRef k3 = arm_loop_begin(G, H, &Lk3);
            LLVMValueRef rv = arm_ldf(G, rh, k3);
            if (p.linear_before_reset) rv = LLVMBuildFMul(G->irb.b, arm_ldf(G, a, arm_addc(G, k3, H)), rv, "");
            LLVMValueRef zg = sig(G, arm_ldf(G, a, k3));
            LLVMValueRef hc = tnh(G, LLVMBuildFAdd(G->irb.b, arm_ldf(G, a, arm_addc(G, k3, 2 * H)), rv, ""));
            /* (1-z)*hc + z*h */
            LLVMValueRef one_z = LLVMBuildFSub(G->irb.b, arm_f32(G, 1.0f), zg, "");
            arm_stf(G, hb, k3, pdc_irb_fma(&G->irb, one_z, hc, LLVMBuildFMul(G->irb.b, zg, arm_ldf(G, hb, k3), "")));
            arm_loop_end(G, &Lk3);
        }
        /* y[t, d, bb, :] = h */
        arm_loop Ly;
        LLVMValueRef yoff = arm_add(G, arm_mulc(G, t, D * B * H), arm_affine(G, bb, H, NULL, 0, d * B * H));
        LLVMValueRef k4 = arm_loop_begin(G, H, &Ly);
        arm_stf(G, y, arm_add(G, yoff, k4), arm_ldf(G, hb, k4));
        arm_loop_end(G, &Ly);
        arm_loop_end(G, &Lb);
        arm_loop_end(G, &Ls);
        if (yh) arm_move(G, pdc_irb_gepc(&G->irb, G->irb.f32, yh, d * B * H), h, B * H);
        if (yc) arm_move(G, pdc_irb_gepc(&G->irb, G->irb.f32, yc, d * B * H), c, B * H);
    }
    return PDC_OK;
}
