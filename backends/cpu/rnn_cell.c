/*
 * rnn_cell.c - the element-wise part of one LSTM or GRU step as one JIT'd loop (rnn.c runs the products
 * around it): per vector of hidden units the gate sums (input projection + recurrent product), their
 * sigmoids and tanhs (pdc_irb_act, irb_math.c), the cell and hidden update and the store of h into y,
 * so each gate pre-activation is read once and no intermediate goes back to memory. Separate passes
 * (sum, sigmoid over 3H, tanh over H, cell, tanh(c), h, copy to y) cost 7 trips over the step's
 * vectors. The last H % vec units run the same code under a lane mask. One kernel per (cell kind, vector
 * width); GRU without linear_before_reset has a second function, the reset gate times h that its h-gate
 * product needs before the cell loop can run.
 */
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct cell_key {
    char tag[8];   /* "rcell1": bump when the generated code changes (cached objects) */
    int32_t kind;  /* cpu_rnn_cell_kind */
    int32_t vec;
} cell_key;

typedef struct cell_gen {
    pdc_irb *irb;
    LLVMValueRef nh;   /* hidden size (i64) */
    LLVMValueRef mask; /* NULL: whole vectors; else the tail's lanes */
} cell_gen;

/* The vector at base[q * nh + at] (gate q of a row), under the tail's mask if any. */
static LLVMValueRef ld(cell_gen *g, LLVMValueRef base, int q, LLVMValueRef at)
{
    pdc_irb *irb = g->irb;
    LLVMValueRef off = q ? LLVMBuildAdd(irb->b, LLVMBuildMul(irb->b, g->nh, pdc_irb_i64(irb, q), ""), at, "") : at;
    LLVMValueRef p = pdc_irb_gep(irb, irb->f32, base, off);
    return g->mask ? pdc_irb_load_masked(irb, p, g->mask) : pdc_irb_load_vec(irb, p);
}

static void st(cell_gen *g, LLVMValueRef v, LLVMValueRef base, LLVMValueRef at)
{
    LLVMValueRef p = pdc_irb_gep(g->irb, g->irb->f32, base, at);
    if (g->mask) pdc_irb_store_masked(g->irb, v, p, g->mask);
    else pdc_irb_store_vec(g->irb, v, p, g->irb->vec);
}

static LLVMValueRef act(cell_gen *g, ir_act_kind kind, LLVMValueRef v)
{
    const ir_fused_params p = {.act = kind};
    return pdc_irb_act(g->irb, &p, v);
}

/* Gate q's pre-activation: its input projection (biases folded in) plus its recurrent product. */
static LLVMValueRef gate(cell_gen *g, LLVMValueRef xw, LLVMValueRef hr, int q, LLVMValueRef at)
{
    return LLVMBuildFAdd(g->irb->b, ld(g, xw, q, at), ld(g, hr, q, at), "");
}

/* One vector of units at `at` of a row; p: the row's xw, hr, rbh, c, h, y (as cpu_rnn_cell_fn's). */
static void cell_units(cell_gen *g, int kind, LLVMValueRef *p, LLVMValueRef at)
{
    LLVMBuilderRef B = g->irb->b;
    LLVMValueRef xw = p[0], hr = p[1], rbh = p[2], c = p[3], h = p[4], y = p[5], hn;
    if (kind == CPU_RNN_CELL_LSTM) {
        /* gates i, o, f, c~ (ONNX order); c = f c + i c~, h = o tanh(c) */
        LLVMValueRef ig = act(g, IR_ACT_SIGMOID, gate(g, xw, hr, 0, at)), og = act(g, IR_ACT_SIGMOID, gate(g, xw, hr, 1, at));
        LLVMValueRef fg = act(g, IR_ACT_SIGMOID, gate(g, xw, hr, 2, at)), cg = act(g, IR_ACT_TANH, gate(g, xw, hr, 3, at));
        LLVMValueRef cn = pdc_irb_fma(g->irb, fg, ld(g, c, 0, at), LLVMBuildFMul(B, ig, cg, ""));
        st(g, cn, c, at);
        hn = LLVMBuildFMul(B, og, act(g, IR_ACT_TANH, cn), "");
    } else {
        /* gates z, r, h~; hr's h~ block is the h-gate product of r*h (or of h: linear_before_reset, then
         * its sum with Rbh is scaled by r); h = (1 - z) h~ + z h */
        LLVMValueRef zg = act(g, IR_ACT_SIGMOID, gate(g, xw, hr, 0, at));
        LLVMValueRef rec = LLVMBuildFAdd(B, ld(g, hr, 2, at), ld(g, rbh, 0, at), "");
        if (kind == CPU_RNN_CELL_GRU_LBR) rec = LLVMBuildFMul(B, act(g, IR_ACT_SIGMOID, gate(g, xw, hr, 1, at)), rec, "");
        LLVMValueRef hc = act(g, IR_ACT_TANH, LLVMBuildFAdd(B, ld(g, xw, 2, at), rec, ""));
        LLVMValueRef one_z = LLVMBuildFSub(B, pdc_irb_f32_like(g->irb, zg, 1.0f), zg, "");
        hn = pdc_irb_fma(g->irb, one_z, hc, LLVMBuildFMul(B, zg, ld(g, h, 0, at), ""));
    }
    st(g, hn, h, at);
    st(g, hn, y, at);
}

/* GRU's reset product input at `at`: rh = sigmoid(r gate) * h; p: xw, hr, h, rh (cpu_rnn_reset_fn's). */
static void reset_units(cell_gen *g, LLVMValueRef *p, LLVMValueRef at)
{
    LLVMValueRef rg = act(g, IR_ACT_SIGMOID, gate(g, p[0], p[1], 1, at));
    st(g, LLVMBuildFMul(g->irb->b, rg, ld(g, p[2], 0, at), ""), p[3], at);
}

/*
 * Function "cell" (cpu_rnn_cell_fn) or, if reset, "reset" (cpu_rnn_reset_fn) over nb rows: n_ptr
 * pointer parameters, then nh and nb; pointer j advances by rows[j] * nh floats per row. Each row:
 * whole vectors of units, then the rest under a mask.
 */
static void emit_rows(pdc_irb *irb, const char *prefix, int kind, int reset, int n_ptr, const int *rows)
{
    LLVMBuilderRef B = irb->b;
    LLVMTypeRef params[8];
    for (int j = 0; j < n_ptr; j++) params[j] = irb->ptr;
    params[n_ptr] = params[n_ptr + 1] = irb->i64;
    LLVMValueRef fn = pdc_irb_function(irb, prefix, reset ? "reset" : "cell", (unsigned)n_ptr + 2, params);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(irb->c, fn, "entry"));
    LLVMValueRef bv = LLVMBuildAlloca(B, irb->i64, "b"), kv = LLVMBuildAlloca(B, irb->i64, "k");
    cell_gen g = {irb, LLVMGetParam(fn, (unsigned)n_ptr), NULL};
    LLVMValueRef nb = LLVMGetParam(fn, (unsigned)n_ptr + 1);
    LLVMValueRef whole = LLVMBuildAnd(B, g.nh, pdc_irb_i64(irb, -(int64_t)irb->vec), "");
    pdc_irb_loop lb, lk;
    LLVMValueRef b = pdc_irb_loop_begin(irb, fn, &lb, bv, pdc_irb_i64(irb, 0), nb, 1, "rows");
    LLVMValueRef p[6], row = LLVMBuildMul(B, b, g.nh, "");
    for (int j = 0; j < n_ptr; j++)
        p[j] = rows[j] ? pdc_irb_gep(irb, irb->f32, LLVMGetParam(fn, (unsigned)j), LLVMBuildMul(B, row, pdc_irb_i64(irb, rows[j]), ""))
                       : LLVMGetParam(fn, (unsigned)j);
    for (int tail = 0; tail < 2; tail++) {
        LLVMValueRef at = whole;
        if (!tail) at = pdc_irb_loop_begin(irb, fn, &lk, kv, pdc_irb_i64(irb, 0), whole, irb->vec, "units");
        g.mask = tail ? pdc_irb_lanes_below(irb, LLVMBuildSub(B, g.nh, whole, "")) : NULL;
        if (reset) reset_units(&g, p, at);
        else cell_units(&g, kind, p, at);
        if (!tail) pdc_irb_loop_end(irb, &lk, at);
    }
    pdc_irb_loop_end(irb, &lb, b);
    LLVMBuildRetVoid(B);
}

static pdc_status cell_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                            LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const cell_key *k = arg;
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    /* floats per row of xw, hr, rbh (shared by the rows), c (LSTM's only), h, y, in units of nh */
    const int lstm = k->kind == CPU_RNN_CELL_LSTM, ng = lstm ? 4 : 3;
    const int cell_rows[6] = {ng, ng, 0, lstm, 1, 1}, reset_rows[4] = {ng, ng, 1, 1};
    emit_rows(&irb, prefix, k->kind, 0, 6, cell_rows);
    if (k->kind == CPU_RNN_CELL_GRU) emit_rows(&irb, prefix, k->kind, 1, 4, reset_rows);
    pdc_irb_dispose(&irb);
    return PDC_OK;
}

pdc_status cpu_rnn_cell_kernels(const cpu_compile *cc, cpu_rnn_cell_kind kind, cpu_rnn_cell_fn *cell,
                                cpu_rnn_reset_fn *reset)
{
    static const char *const syms[] = {"cell", "reset"};
    cell_key k;
    memset(&k, 0, sizeof k); /* padding bytes too: the key is hashed */
    memcpy(k.tag, "rcell1", 7);
    k.kind = (int32_t)kind;
    k.vec = cc->target->vec;
    pdc_kernel_desc d = {&k, sizeof k, cell_emit, &k, kind == CPU_RNN_CELL_GRU ? 2 : 1, syms};
    void *addr[2] = {NULL, NULL};
    pdc_status st = pdc_jit_kernel(cc->jit, cc->ctx, &d, addr, NULL);
    *cell = st ? NULL : (cpu_rnn_cell_fn)addr[0];
    *reset = st ? NULL : (cpu_rnn_reset_fn)addr[1];
    return st;
}
