/*
 * gemm.c - fc, gemm and matmul: dense through OpenBLAS (single-threaded BLAS calls on blocks that
 * pdc spreads over its threads), and a JIT'd block-sparse fc for block- or unstructured-pruned
 * weights - and for a matmul by a constant matrix, through the transpose of its weights - which
 * also runs dense weights at small batches, packed in 8x8 blocks. An epilogue offered (ir/ops/epilogue.h:
 * a bias add, an activation) is taken by every path.
 *
 * Block-sparse fc, y[n, o] = sum over kept blocks of w[o, k] x[n, k] + b[o]: the weight matrix is
 * kept as a list of blocks per block-row (column offsets, weights packed block after block in
 * execution order). The generated code is specialised on the block shape bh x bw: for every
 * block-row it keeps bh accumulators of bw lanes, loads each block's slice of x once and uses it
 * for all bh rows, and reduces the lanes at the end of the row. Unstructured sparsity is the
 * bh = bw = 1 case. A block-row's whole list runs in one loop, so there is one data-dependent loop
 * exit per bh outputs. The planner (cpu_bsr_plan_pack: block rows, packed kept blocks) and the code
 * generator (cpu_bsr_emit) are separate so the AArch64 emitter (backends/arm) retargets them;
 * cpu_bsr_plan adds the JIT.
 *
 * Determinism: BLAS blocks split the output only, never the K reduction, so every output element
 * is computed by the same sequence of operations whatever the thread count.
 */
#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/index.h"

#define SPFC_MAX_BH 16
#define SPFC_MAX_BW 64
#define SPFC_DENSITY_MAX 0.5  /* kept fraction above which dense BLAS is faster */
#define BSR_LANES_MIN 2       /* rows of x from which the lanes kernel runs a product, */
#define BSR_LANES_MIN_WIDE 3  /* and where the one-sample kernel's blocks fill a vector */
#define BSR_LANES_CHAINS 8    /* independent FMA chains the lanes kernel keeps per block-row */
#define BSR_CHUNK 64          /* block-rows per work item at most: fixed by the matrix, not the threads */
#define BSR_CHUNK_FLOATS 32768 /* weights per work item of the lanes kernel (128 KiB: L2) */
#define BSR_DENSE_BLOCK 8     /* dense weights for the lanes kernel: 8x8 blocks (8 FMA chains, 10 registers) */
#define BSR_PAR_MIN (1 << 16) /* multiply-adds of a product below which one thread does it */

/* ------------------------------------------------------------------ dense: fc and gemm */

typedef struct gemm_state {
    ir_gemm_params p;
    int op;                  /* IR_OP_FC, IR_OP_GEMM, IR_OP_MATMUL */
    int64_t cm, cn;          /* gemm: dims of C as broadcast to [M, N] (1 = broadcast) */
    cpu_unary_fn act;        /* the fused activation, in place after the product (NULL: none) */
    const float *ebias;      /* fc, matmul: an epilogue's bias add (the model's constant [n]), or NULL */
    /* matmul batches: per batch the offsets into a and b */
    int64_t batches, *offs;
} gemm_state;

static void gemm_free(void *p)
{
    gemm_state *s = p;
    if (!s) return;
    pdc_free(s->offs);
    pdc_free(s);
}

/* y[M,N] += alpha A' B' over rows [i0, i1) or columns [j0, j1) - whichever the plan split - with one
 * BLAS thread, then the fused activation over that block while it is in cache. (y starts as zeros,
 * the bias or beta C: OpenBLAS's beta = 0 path ran 10% slower on attention's products.) */
static void gemm_block(const gemm_state *s, const float *a, const float *b, float *y, int64_t i0, int64_t i1,
                       int64_t j0, int64_t j1)
{
    const ir_gemm_params *p = &s->p;
    int64_t mm = i1 - i0, nn = j1 - j0;
    if (mm <= 0 || nn <= 0) return;
    const float *ab = p->trans_a ? a + i0 : a + i0 * p->k;
    const float *bb = p->trans_b ? b + j0 * p->k : b + j0;
    float *yb = y + i0 * p->n + j0;
    int lda = (int)(p->trans_a ? p->m : p->k), ldb = (int)(p->trans_b ? p->k : p->n);
    if (mm == 1 && !p->trans_a) {
        /* one row: y = alpha * op(B)^T a + beta y */
        cblas_sgemv(CblasRowMajor, p->trans_b ? CblasNoTrans : CblasTrans, (int)(p->trans_b ? nn : p->k),
                    (int)(p->trans_b ? p->k : nn), p->alpha, bb, ldb, ab, 1, 1.0f, yb, 1);
    } else {
        cblas_sgemm(CblasRowMajor, p->trans_a ? CblasTrans : CblasNoTrans, p->trans_b ? CblasTrans : CblasNoTrans,
                    (int)mm, (int)nn, (int)p->k, p->alpha, ab, lda, bb, ldb, 1.0f, yb, (int)p->n);
    }
    if (!s->act) return;
    if (nn == p->n) s->act(yb, NULL, yb, mm * nn); /* whole rows: one run */
    else
        for (int64_t i = 0; i < mm; i++) s->act(yb + i * p->n, NULL, yb + i * p->n, nn);
}

/* One GEMM y += alpha A' B' per batch (a matmul's, else one), split over the threads in
 * (batch, chunk) items, chunks along the larger free dim: one parallel region however many batches
 * (attention's q k^T is 12+ small products). */
static void gemm_parallel(const gemm_state *s, const float *a, const float *b, float *y, int nt)
{
    const ir_gemm_params *p = &s->p;
    const int64_t batches = s->offs ? s->batches : 1;
    if (p->m * p->n * p->k * batches < 262144) nt = 1;
    /* Split the dim whose chunks re-pack the smaller operand (row chunks each pack all of B,
     * column chunks all of A), unless that dim is too short to give every thread a chunk. */
    int by_rows = p->m * p->k > p->k * p->n;
    if (by_rows && p->m < 128) by_rows = 0;
    else if (!by_rows && p->n < 128 && p->m >= 128) by_rows = 1;
    /* Chunks depend on the problem only, never on nt: BLAS kernels round edge rows differently
     * from interior ones, so the same chunks are what keeps results independent of threads. */
    int64_t len = by_rows ? p->m : p->n;
    int64_t chunk = (len / 16 + 15) / 16 * 16;
    if (chunk < 64) chunk = 64;
    const int64_t chunks = (len + chunk - 1) / chunk;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t it = 0; it < batches * chunks; it++) {
        const int64_t bi = it / chunks, c0 = it % chunks * chunk, c1 = c0 + chunk < len ? c0 + chunk : len;
        const float *ab = s->offs ? a + s->offs[2 * bi] : a, *bb = s->offs ? b + s->offs[2 * bi + 1] : b;
        float *yb = y + bi * p->m * p->n;
        if (by_rows) gemm_block(s, ab, bb, yb, c0, c1, 0, p->n);
        else gemm_block(s, ab, bb, yb, 0, p->m, c0, c1);
    }
}

/* rows x n of y set to b0 + b1 in every row (either NULL: none of it). */
static void start_rows(float *y, int64_t rows, int64_t n, const float *b0, const float *b1)
{
    for (int64_t i = 0; i < rows; i++) {
        float *yr = y + i * n;
        if (!b0 && !b1) memset(yr, 0, (size_t)n * sizeof *yr);
        else if (!b1 || !b0) memcpy(yr, b0 ? b0 : b1, (size_t)n * sizeof *yr);
        else
            for (int64_t j = 0; j < n; j++) yr[j] = b0[j] + b1[j];
    }
}

static pdc_status gemm_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const gemm_state *s = L->state;
    const ir_gemm_params *p = &s->p;
    const float *a = buf[l->inputs[0]], *b = buf[l->inputs[1]];
    const float *c = l->n_inputs > 2 && l->inputs[2] >= 0 ? buf[l->inputs[2]] : NULL;
    float *y = cpu_layer_out(L, l, buf);
    if (s->op == IR_OP_MATMUL) {
        start_rows(y, s->batches * p->m, p->n, s->ebias, NULL);
        gemm_parallel(s, a, b, y, x->threads);
        return PDC_OK;
    }
    /* initial y: beta * C broadcast (gemm), the bias (fc) and an epilogue's, or zero */
    if (s->op == IR_OP_FC || !c)
        start_rows(y, p->m, p->n, c, s->ebias);
    else
        for (int64_t i = 0; i < p->m; i++)
            for (int64_t j = 0; j < p->n; j++)
                y[i * p->n + j] = p->beta * c[(s->cm == 1 ? 0 : i) * s->cn + (s->cn == 1 ? 0 : j)];
    gemm_parallel(s, a, b, y, x->threads);
    return PDC_OK;
}

/* matmul's batch offsets, broadcasting as numpy (and the reference kernel) do. */
static pdc_status matmul_plan(const cpu_compile *cc, const ir_model *m, const ir_layer *l, gemm_state *s)
{
    const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]], *ty = &m->tensors[l->outputs[0]];
    if (ta->rank < 2 || tb->rank < 2 || ty->rank < 2) return PDC_ERR_UNSUPPORTED;
    ir_gemm_params *p = &s->p;
    p->m = ta->dims[ta->rank - 2];
    p->k = ta->dims[ta->rank - 1];
    p->n = tb->dims[tb->rank - 1];
    p->alpha = 1.0f;
    p->beta = 0.0f;
    int nb = ty->rank - 2;
    if (ta->rank - 2 > nb || tb->rank - 2 > nb) return PDC_ERR_UNSUPPORTED;
    if (tb->rank == 2) {
        /* one matrix for every batch: x's batches are rows of one product */
        for (int i = 0; i < ta->rank - 2; i++) p->m *= ta->dims[i];
        nb = 0;
    }
    int64_t bs[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    ir_broadcast_strides(ta->rank - 2, ta->dims, nb, ty->dims, p->m * p->k, bs[0]);
    ir_broadcast_strides(tb->rank - 2, tb->dims, nb, ty->dims, p->k * p->n, bs[1]);
    s->batches = 1;
    for (int i = 0; i < nb; i++) s->batches *= ty->dims[i];
    s->offs = pdc_calloc(cc->ctx, (size_t)(2 * s->batches), sizeof *s->offs);
    if (!s->offs) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t bi = 0; bi < s->batches; bi++) {
        s->offs[2 * bi] = off[0];
        s->offs[2 * bi + 1] = off[1];
        ir_index_next(nb, ty->dims, idx, 2, bs, off);
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ block-sparse fc and matmul (JIT) */

typedef struct spfc_state {
    cpu_bsr w;
    int64_t n;
    float *bias;            /* o entries, or NULL */
    cpu_unary_fn act;       /* as gemm_state's */
} spfc_state;

void cpu_bsr_release(cpu_bsr *b)
{
    pdc_free(b->rowptr);
    pdc_free(b->col);
    pdc_free(b->wpk);
    memset(b, 0, sizeof *b);
}

static void spfc_free(void *p)
{
    spfc_state *s = p;
    if (!s) return;
    cpu_bsr_release(&s->w);
    pdc_free(s->bias);
    pdc_free(s);
}

/* The one-sample kernel (cpu_bsr_fn). */
static void bsr_emit_one(const cpu_bsr_key *k, const pdc_llvm_target *t, LLVMContextRef c, LLVMModuleRef m,
                         const char *prefix)
{
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, t->vec);
    LLVMBuilderRef B = irb.b;
    LLVMTypeRef vt = k->bw == 1 ? irb.f32 : LLVMVectorType(irb.f32, (unsigned)k->bw);
    LLVMTypeRef params[9] = {irb.ptr, irb.ptr, irb.ptr, irb.ptr, irb.ptr, irb.ptr, irb.i64, irb.i64, irb.i64};
    LLVMValueRef fn = pdc_irb_function(&irb, prefix, "run", 9, params);
    LLVMValueRef x = LLVMGetParam(fn, 0), rowptr = LLVMGetParam(fn, 1), col = LLVMGetParam(fn, 2),
                 wpk = LLVMGetParam(fn, 3), bias = LLVMGetParam(fn, 4), y = LLVMGetParam(fn, 5),
                 r0 = LLVMGetParam(fn, 6), r1 = LLVMGetParam(fn, 7), o = LLVMGetParam(fn, 8);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(c, fn, "entry"));
    LLVMValueRef acc[SPFC_MAX_BH];
    for (int r = 0; r < k->bh; r++) acc[r] = LLVMBuildAlloca(B, vt, "acc");
    LLVMValueRef rv = LLVMBuildAlloca(B, irb.i64, "r"), iv = LLVMBuildAlloca(B, irb.i64, "i");
    LLVMBuildStore(B, r0, rv);
    LLVMBasicBlockRef rhead = LLVMAppendBasicBlockInContext(c, fn, "row"), rbody = LLVMAppendBasicBlockInContext(c, fn, "row_body"),
                      bloop = LLVMAppendBasicBlockInContext(c, fn, "blocks"), rend = LLVMAppendBasicBlockInContext(c, fn, "row_end"),
                      done = LLVMAppendBasicBlockInContext(c, fn, "done");
    LLVMBuildBr(B, rhead);
    LLVMPositionBuilderAtEnd(B, rhead);
    LLVMValueRef r = LLVMBuildLoad2(B, irb.i64, rv, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, r, r1, ""), rbody, done);
    LLVMPositionBuilderAtEnd(B, rbody);
    for (int q = 0; q < k->bh; q++) LLVMBuildStore(B, LLVMConstNull(vt), acc[q]);
    LLVMValueRef lo = pdc_irb_load_i64(&irb, pdc_irb_gep(&irb, irb.i64, rowptr, r));
    LLVMValueRef hi = pdc_irb_load_i64(&irb, pdc_irb_gep(&irb, irb.i64, rowptr, LLVMBuildAdd(B, r, pdc_irb_i64(&irb, 1), "")));
    LLVMBuildStore(B, lo, iv);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, lo, hi, ""), bloop, rend);
    /* one block: x slice loaded once, bh rows of weights */
    LLVMPositionBuilderAtEnd(B, bloop);
    LLVMValueRef i = LLVMBuildLoad2(B, irb.i64, iv, "");
    LLVMValueRef cc0 = pdc_irb_load_i32_as_i64(&irb, pdc_irb_gep(&irb, irb.i32, col, i));
    LLVMValueRef xs = LLVMBuildLoad2(B, vt, pdc_irb_gep(&irb, irb.f32, x, cc0), "");
    LLVMSetAlignment(xs, 4);
    LLVMValueRef wb = pdc_irb_gep(&irb, irb.f32, wpk, LLVMBuildMul(B, i, pdc_irb_i64(&irb, (int64_t)k->bh * k->bw), ""));
    for (int q = 0; q < k->bh; q++) {
        LLVMValueRef wv = LLVMBuildLoad2(B, vt, pdc_irb_gepc(&irb, irb.f32, wb, (int64_t)q * k->bw), "");
        LLVMSetAlignment(wv, 4);
        LLVMValueRef a = LLVMBuildLoad2(B, vt, acc[q], "");
        LLVMBuildStore(B, pdc_irb_fma(&irb, wv, xs, a), acc[q]);
    }
    LLVMValueRef i1 = LLVMBuildAdd(B, i, pdc_irb_i64(&irb, 1), "");
    LLVMBuildStore(B, i1, iv);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, i1, hi, ""), bloop, rend);
    /* row end: lanes summed, bias added, stored for rows < o */
    LLVMPositionBuilderAtEnd(B, rend);
    LLVMValueRef obase = LLVMBuildMul(B, r, pdc_irb_i64(&irb, k->bh), "");
    for (int q = 0; q < k->bh; q++) {
        LLVMValueRef a = LLVMBuildLoad2(B, vt, acc[q], "");
        LLVMValueRef sum = a;
        if (k->bw > 1) {
            sum = LLVMBuildExtractElement(B, a, pdc_irb_i32(&irb, 0), "");
            for (int j = 1; j < k->bw; j++) sum = LLVMBuildFAdd(B, sum, LLVMBuildExtractElement(B, a, pdc_irb_i32(&irb, j), ""), "");
        }
        LLVMValueRef oi = LLVMBuildAdd(B, obase, pdc_irb_i64(&irb, q), "");
        LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(c, fn, "store"), nx = LLVMAppendBasicBlockInContext(c, fn, "next");
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, oi, o, ""), st, nx);
        LLVMPositionBuilderAtEnd(B, st);
        LLVMValueRef bv = LLVMBuildLoad2(B, irb.f32, pdc_irb_gep(&irb, irb.f32, bias, oi), "");
        LLVMBuildStore(B, LLVMBuildFAdd(B, sum, bv, ""), pdc_irb_gep(&irb, irb.f32, y, oi));
        LLVMBuildBr(B, nx);
        LLVMPositionBuilderAtEnd(B, nx);
    }
    LLVMBuildStore(B, LLVMBuildAdd(B, r, pdc_irb_i64(&irb, 1), ""), rv);
    LLVMBuildBr(B, rhead);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMBuildRetVoid(B);
    pdc_irb_dispose(&irb);
}

/* The lanes kernel (cpu_bsr_lanes_fn): vectors of nl lanes, a sample each. Per kept block and
 * column, one load of xt's row serves the bh rows, each weight is broadcast once for nl samples.
 * A row's sum runs in k->acc accumulators (column c of a block into c % acc) so that about
 * BSR_LANES_CHAINS independent FMA chains hide the FMA latency; they are added in a fixed order. */
static void bsr_emit_lanes(const cpu_bsr_key *k, LLVMContextRef c, LLVMModuleRef m, const char *prefix)
{
    pdc_irb irb;
    pdc_irb_init(&irb, c, m, k->nl);
    LLVMBuilderRef B = irb.b;
    LLVMTypeRef params[7] = {irb.ptr, irb.ptr, irb.ptr, irb.ptr, irb.ptr, irb.i64, irb.i64};
    LLVMValueRef fn = pdc_irb_function(&irb, prefix, "run", 7, params);
    LLVMValueRef xt = LLVMGetParam(fn, 0), rowptr = LLVMGetParam(fn, 1), col = LLVMGetParam(fn, 2),
                 wpk = LLVMGetParam(fn, 3), yt = LLVMGetParam(fn, 4), r0 = LLVMGetParam(fn, 5), r1 = LLVMGetParam(fn, 6);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(c, fn, "entry"));
    const int bh = k->bh, bw = k->bw, na = k->acc, nl = k->nl;
    LLVMValueRef acc[SPFC_MAX_BH * BSR_LANES_CHAINS];
    for (int q = 0; q < bh * na; q++) acc[q] = LLVMBuildAlloca(B, irb.vf, "acc");
    LLVMValueRef rv = LLVMBuildAlloca(B, irb.i64, "r"), iv = LLVMBuildAlloca(B, irb.i64, "i");
    pdc_irb_loop rows, blocks;
    LLVMValueRef r = pdc_irb_loop_begin(&irb, fn, &rows, rv, r0, r1, 1, "row");
    for (int q = 0; q < bh * na; q++) LLVMBuildStore(B, LLVMConstNull(irb.vf), acc[q]);
    LLVMValueRef lo = pdc_irb_load_i64(&irb, pdc_irb_gep(&irb, irb.i64, rowptr, r));
    LLVMValueRef hi = pdc_irb_load_i64(&irb, pdc_irb_gep(&irb, irb.i64, rowptr, LLVMBuildAdd(B, r, pdc_irb_i64(&irb, 1), "")));
    LLVMValueRef i = pdc_irb_loop_begin(&irb, fn, &blocks, iv, lo, hi, 1, "block");
    LLVMValueRef xr = pdc_irb_gep(&irb, irb.f32, xt,
                                  LLVMBuildMul(B, pdc_irb_load_i32_as_i64(&irb, pdc_irb_gep(&irb, irb.i32, col, i)),
                                               pdc_irb_i64(&irb, nl), ""));
    LLVMValueRef wb = pdc_irb_gep(&irb, irb.f32, wpk, LLVMBuildMul(B, i, pdc_irb_i64(&irb, (int64_t)bh * bw), ""));
    for (int cc = 0; cc < bw; cc++) {
        LLVMValueRef xv = pdc_irb_load_vec(&irb, pdc_irb_gepc(&irb, irb.f32, xr, (int64_t)cc * nl));
        for (int q = 0; q < bh; q++) {
            LLVMValueRef a = acc[q * na + cc % na];
            LLVMValueRef wv = pdc_irb_load_splat(&irb, pdc_irb_gepc(&irb, irb.f32, wb, (int64_t)q * bw + cc));
            LLVMBuildStore(B, pdc_irb_fma(&irb, wv, xv, LLVMBuildLoad2(B, irb.vf, a, "")), a);
        }
    }
    pdc_irb_loop_end(&irb, &blocks, i);
    LLVMValueRef yr = pdc_irb_gep(&irb, irb.f32, yt, LLVMBuildMul(B, LLVMBuildSub(B, r, r0, ""), pdc_irb_i64(&irb, (int64_t)bh * nl), ""));
    for (int q = 0; q < bh; q++) {
        LLVMValueRef sum = LLVMBuildLoad2(B, irb.vf, acc[q * na], "");
        for (int u = 1; u < na; u++) sum = LLVMBuildFAdd(B, sum, LLVMBuildLoad2(B, irb.vf, acc[q * na + u], ""), "");
        pdc_irb_store_vec(&irb, sum, pdc_irb_gepc(&irb, irb.f32, yr, (int64_t)q * nl), nl);
    }
    pdc_irb_loop_end(&irb, &rows, r);
    LLVMBuildRetVoid(B);
    pdc_irb_dispose(&irb);
}

pdc_status cpu_bsr_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                        LLVMModuleRef m, const char *prefix)
{
    (void)ctx;
    const cpu_bsr_key *k = arg;
    if (k->nl > 0) bsr_emit_lanes(k, c, m, prefix);
    else bsr_emit_one(k, t, c, m, prefix);
    return PDC_OK;
}

int64_t cpu_bsr_kpad(const cpu_bsr *b) { return (b->k + b->bw - 1) / b->bw * b->bw; }

void cpu_bsr_gemv(const cpu_bsr *b, const float *x, const float *bias, float *y, int64_t r0, int64_t r1)
{
    if (r1 > b->nbr) r1 = b->nbr;
    if (r0 < r1) b->fn(x, b->rowptr, b->col, b->wpk, bias, y, r0, r1, b->o);
}

size_t cpu_bsr_scratch_floats(const cpu_bsr *b)
{
    if (b->lanes_fn) /* xt: every group of nl samples transposed, kpad rows of nl */
        return (size_t)((b->nx + b->key.nl - 1) / b->key.nl * cpu_bsr_kpad(b) * b->key.nl);
    return (size_t)(cpu_bsr_kpad(b) + b->o); /* a zero-padded x, a zero bias */
}

size_t cpu_bsr_thread_floats(const cpu_bsr *b)
{
    return b->lanes_fn ? (size_t)(b->chunk * b->bh * b->key.nl) : 0; /* a chunk's yt */
}

/* The block-rows [r0, *r1) of the chunk starting at block-row r0, and the outputs [*o0, *o1) they hold. */
static void bsr_chunk_bounds(const cpu_bsr *b, int64_t r0, int64_t *r1, int64_t *o0, int64_t *o1)
{
    *r1 = r0 + b->chunk < b->nbr ? r0 + b->chunk : b->nbr;
    *o0 = r0 * b->bh;
    *o1 = *r1 * b->bh < b->o ? *r1 * b->bh : b->o;
}

/* One chunk of block-rows [r0, r0 + b->chunk) for every group of nl samples: the kernel into yt,
 * then each sample's outputs out of yt with the bias, and the activation over them. */
static void bsr_lanes_chunk(const cpu_bsr *b, int64_t r0, int64_t nx, const float *xt, const float *bias, float *y,
                            int64_t ldy, float *yt, cpu_unary_fn act)
{
    const int64_t nl = b->key.nl, kp = cpu_bsr_kpad(b);
    int64_t r1, o0, o1;
    bsr_chunk_bounds(b, r0, &r1, &o0, &o1);
    for (int64_t s0 = 0; s0 < nx; s0 += nl) {
        b->lanes_fn(xt + s0 * kp, b->rowptr, b->col, b->wpk, yt, r0, r1);
        for (int64_t sm = s0; sm < nx && sm < s0 + nl; sm++) {
            float *yr = y + sm * ldy;
            const float *src = yt + (sm - s0);
            for (int64_t oi = o0; oi < o1; oi++) yr[oi] = src[(oi - o0) * nl] + (bias ? bias[oi] : 0.0f);
            if (act) act(yr + o0, NULL, yr + o0, o1 - o0);
        }
    }
}

void cpu_bsr_product(const cpu_bsr *b, int64_t nx, const float *x, int64_t ldx, const float *bias, float *y,
                     int64_t ldy, float *scratch, float *const *own, int nt, cpu_unary_fn act)
{
    if ((double)b->rowptr[b->nbr] * (double)(b->bh * b->bw) * (double)nx < BSR_PAR_MIN) nt = 1;
    const int64_t kp = cpu_bsr_kpad(b);
    if (b->lanes_fn) {
        /* x transposed group by group: xt[(group * kp + c) * nl + lane], zeros past k and past nx */
        const int64_t nl = b->key.nl, groups = (nx + nl - 1) / nl;
        for (int64_t g = 0; g < groups; g++) {
            float *xg = scratch + g * kp * nl;
            for (int64_t c = 0; c < kp; c++)
                for (int64_t l = 0; l < nl; l++) {
                    int64_t sm = g * nl + l;
                    xg[c * nl + l] = sm < nx && c < b->k ? x[sm * ldx + c] : 0.0f;
                }
        }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int64_t r0 = 0; r0 < b->nbr; r0 += b->chunk)
            bsr_lanes_chunk(b, r0, nx, scratch, bias, y, ldy, own[omp_get_thread_num()], act);
        return;
    }
    float *pad = scratch, *zeros = scratch + kp;
    if (!bias) {
        memset(zeros, 0, (size_t)b->o * sizeof *zeros);
        bias = zeros;
    }
    for (int64_t sm = 0; sm < nx; sm++) {
        const float *xs = x + sm * ldx;
        float *ys = y + sm * ldy;
        if (kp != b->k) { /* the kernel reads bw floats past the last column of an edge block */
            memcpy(pad, xs, (size_t)b->k * sizeof *pad);
            memset(pad + b->k, 0, (size_t)(kp - b->k) * sizeof *pad);
            xs = pad;
        }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int64_t r0 = 0; r0 < b->nbr; r0 += b->chunk) {
            int64_t r1, o0, o1;
            bsr_chunk_bounds(b, r0, &r1, &o0, &o1);
            cpu_bsr_gemv(b, xs, bias, ys, r0, r1);
            if (act) act(ys + o0, NULL, ys + o0, o1 - o0); /* the rows just written, while in cache */
        }
    }
}

void cpu_sgemm_nt_threads(int m, int n, int k, const float *x, const float *w, float beta, float *y, int ldy, int nt)
{
    /* up to 8 chunks of whole 16-column groups (at least 64 columns), a function of n alone: each
     * output comes from a call of the same shape whatever nt (sgemm's results depend on it) */
    int chunk = ((n + 7) / 8 + 15) / 16 * 16;
    if (chunk < 64) chunk = 64;
    const int chunks = (n + chunk - 1) / chunk;
    if (nt > chunks) nt = chunks;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int q = 0; q < chunks; q++) {
        const int c0 = q * chunk, c1 = n - c0 < chunk ? n : c0 + chunk;
        if (m == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, c1 - c0, k, 1.0f, w + (int64_t)c0 * k, k, x, 1, beta, y + c0, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, c1 - c0, k, 1.0f, x, k, w + (int64_t)c0 * k, k, beta,
                        y + c0, ldy);
    }
}

/* Whether block (br, bc) of a slice whose first block-row is br0 is kept (dense: every block). */
static int bsr_block_kept(const ir_tensor *wt, int dense, int64_t k, int64_t nbc, int64_t row0, int64_t br0, int64_t br,
                          int64_t bc)
{
    const ir_sparsity *sp = &wt->sparsity;
    if (dense) return 1;
    if (sp->kind == IR_SPARSITY_BLOCK) return sp->block_mask[(br0 + br) * nbc + bc] != 0;
    return sp->mask[(row0 + br) * k + bc] != 0; /* unstructured: 1x1 blocks of the k-column view */
}

/* Packs rows [row0, row0 + rows) of wt's matrix view in bh x bw blocks: the kept ones (every one if
 * dense), in execution order, and the one-sample code key. Unless dense, PDC_ERR_UNSUPPORTED where
 * more than SPFC_DENSITY_MAX of the slice is kept (edge blocks counted whole). */
static pdc_status bsr_pack(pdc_context *ctx, const pdc_llvm_target *t, const ir_tensor *wt, int64_t row0, int64_t rows,
                           int64_t bh, int64_t bw, int dense, cpu_bsr *b)
{
    int64_t vr, k;
    ir_weight_matrix_view(wt, &vr, &k);
    /* the slice must start on a block-row and end on one (or at the matrix's end) */
    if (bh < 1 || bw < 1 || bh > SPFC_MAX_BH || bw > SPFC_MAX_BW || rows < 1 || k < 1 || row0 < 0 ||
        row0 + rows > vr || row0 % bh || (rows % bh && row0 + rows != vr) || k > INT32_MAX)
        return PDC_ERR_UNSUPPORTED;
    const int64_t nbr = (rows + bh - 1) / bh, nbc = (k + bw - 1) / bw, br0 = row0 / bh;
    /* kept blocks and elements of the slice (a block is kept if any of its elements is) */
    size_t nblk = 0, kept = 0;
    for (int64_t br = 0; br < nbr; br++)
        for (int64_t bc = 0; bc < nbc; bc++) {
            if (!bsr_block_kept(wt, dense, k, nbc, row0, br0, br, bc)) continue;
            nblk++;
            int64_t h = rows - br * bh < bh ? rows - br * bh : bh, w = k - bc * bw < bw ? k - bc * bw : bw;
            kept += (size_t)(h * w);
        }
    const size_t total = (size_t)(rows * k);
    if (!dense && (double)nblk * (double)(bh * bw) > SPFC_DENSITY_MAX * (double)total) return PDC_ERR_UNSUPPORTED;
    b->k = k;
    b->o = rows;
    b->bh = bh;
    b->bw = bw;
    b->nbr = nbr;
    b->kept = kept;
    b->total = total;
    b->rowptr = pdc_calloc(ctx, (size_t)nbr + 1, sizeof *b->rowptr);
    b->col = pdc_alloc(ctx, (nblk + 1) * sizeof *b->col);
    b->wpk = pdc_calloc(ctx, (nblk + 1) * (size_t)(bh * bw), sizeof *b->wpk);
    if (!b->rowptr || !b->col || !b->wpk) {
        cpu_bsr_release(b);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t bi = 0;
    for (int64_t br = 0; br < nbr; br++) {
        b->rowptr[br] = (int64_t)bi;
        for (int64_t bc = 0; bc < nbc; bc++) {
            if (!bsr_block_kept(wt, dense, k, nbc, row0, br0, br, bc)) continue;
            b->col[bi] = (int32_t)(bc * bw);
            float *dst = b->wpk + bi * (size_t)(bh * bw);
            for (int64_t r = 0; r < bh && br * bh + r < rows; r++)
                for (int64_t c = 0; c < bw && bc * bw + c < k; c++)
                    dst[r * bw + c] = wt->data[(row0 + br * bh + r) * k + bc * bw + c];
            bi++;
        }
    }
    b->rowptr[nbr] = (int64_t)bi;
    memcpy(b->key.tag, "spfc1", 6);
    b->key.vec = t->vec;
    b->key.bh = (int32_t)bh;
    b->key.bw = (int32_t)bw;
    return PDC_OK;
}

pdc_status cpu_bsr_plan_pack(pdc_context *ctx, const pdc_llvm_target *t, const ir_tensor *wt, int64_t row0,
                             int64_t rows, cpu_bsr *b)
{
    memset(b, 0, sizeof *b);
    const ir_sparsity *sp = &wt->sparsity;
    if (wt->kind != IR_TENSOR_CONST || !wt->data) return PDC_ERR_UNSUPPORTED;
    if (sp->kind == IR_SPARSITY_BLOCK) return bsr_pack(ctx, t, wt, row0, rows, sp->bh, sp->bw, 0, b);
    if (sp->kind == IR_SPARSITY_UNSTRUCTURED) return bsr_pack(ctx, t, wt, row0, rows, 1, 1, 0, b);
    return PDC_ERR_UNSUPPORTED;
}

/* Whether the lanes kernel is worth it for nx samples: from 2 on, 3 where b's blocks fill a vector
 * (the one-sample kernel's vectors are full then). 1x2048 by 2048x512 at 75% of 4x16 blocks pruned
 * (AVX2): 0.048 ms sample by sample against 0.060 at two samples, 0.067 against 0.062 at three,
 * 0.087 against 0.063 at four; 90% unstructured pruned 0.131 against 0.082 at two. */
static int bsr_lanes_pay(const cpu_compile *cc, const cpu_bsr *b, int64_t nx)
{
    return nx >= (b->bw >= cc->target->vec ? BSR_LANES_MIN_WIDE : BSR_LANES_MIN);
}

/* b's kernel through the JIT: the lanes kernel if asked for and its accumulators and two operands
 * fit the registers, else the one-sample one; and the chunk of block-rows a thread takes. */
static pdc_status bsr_compile(const cpu_compile *cc, int64_t nx, int lanes, cpu_bsr *b)
{
    b->nx = nx;
    /* vectors of the fewest lanes (4, 8 or the target's width) that hold every sample, or groups of
     * the target's width */
    const int vec = cc->target->vec;
    int nl = 4;
    while (nl < vec && nl < nx) nl *= 2;
    int acc = (BSR_LANES_CHAINS + (int)b->bh - 1) / (int)b->bh;
    if (acc > b->bw) acc = (int)b->bw;
    if (lanes && b->bh * acc + 2 <= cc->target->n_vregs) {
        b->key.nl = nl;
        b->key.acc = acc;
    }
    /* the lanes kernel reads a chunk's weights once per group of samples: about BSR_CHUNK_FLOATS of
     * them, so that they are read again from L2 */
    b->chunk = BSR_CHUNK;
    if (b->key.nl && b->rowptr[b->nbr] > 0) {
        int64_t per_row = b->rowptr[b->nbr] * b->bh * b->bw / b->nbr + 1;
        b->chunk = BSR_CHUNK_FLOATS / per_row;
        if (b->chunk < 1) b->chunk = 1;
        if (b->chunk > BSR_CHUNK) b->chunk = BSR_CHUNK;
    }
    static const char *const syms[] = {"run"};
    pdc_kernel_desc d = {&b->key, sizeof b->key, cpu_bsr_emit, &b->key, 1, syms};
    void *addr = NULL;
    pdc_status st = pdc_jit_kernel(cc->jit, cc->ctx, &d, &addr, NULL);
    if (st) {
        cpu_bsr_release(b);
        return st;
    }
    if (b->key.nl) b->lanes_fn = (cpu_bsr_lanes_fn)addr;
    else b->fn = (cpu_bsr_fn)addr;
    return PDC_OK;
}

/* Whether the packed dense kernel takes nx rows of x by a dense [rows, k] matrix: a second copy of
 * the weights, so not for matrices that dwarf the gain (a copy of VGG's 102M-weight fc6 would take
 * 400 MB), nor for fewer rows or columns than a block (the padding is work). */
static int bsr_dense_fits(int64_t nx, int64_t rows, int64_t k)
{
    return nx >= 2 && nx <= CPU_BSR_DENSE_MAX_ROWS && rows >= BSR_DENSE_BLOCK && k >= BSR_DENSE_BLOCK &&
           (double)rows * (double)k <= CPU_BSR_DENSE_MAX_WEIGHTS;
}

/* wt's rows [row0, row0 + rows) packed whole in 8x8 blocks (a copy of the weights) where
 * bsr_dense_fits; PDC_ERR_UNSUPPORTED (b zeroed) where not, or off block-row bounds. */
static pdc_status bsr_plan_dense(const cpu_compile *cc, const ir_tensor *wt, int64_t row0, int64_t rows, int64_t nx,
                                 cpu_bsr *b)
{
    memset(b, 0, sizeof *b);
    int64_t vr, k;
    ir_weight_matrix_view(wt, &vr, &k);
    (void)vr;
    if (wt->kind != IR_TENSOR_CONST || !wt->data || !bsr_dense_fits(nx, rows, k)) return PDC_ERR_UNSUPPORTED;
    pdc_status st = bsr_pack(cc->ctx, cc->target, wt, row0, rows, BSR_DENSE_BLOCK, BSR_DENSE_BLOCK, 1, b);
    if (st) return st;
    b->dense = 1;
    return bsr_compile(cc, nx, bsr_lanes_pay(cc, b, nx), b);
}

pdc_status cpu_bsr_plan(const cpu_compile *cc, const ir_tensor *wt, int64_t row0, int64_t rows, int64_t nx,
                        cpu_bsr *b)
{
    pdc_status st = cpu_bsr_plan_pack(cc->ctx, cc->target, wt, row0, rows, b);
    if (st == PDC_ERR_UNSUPPORTED) return bsr_plan_dense(cc, wt, row0, rows, nx, b); /* a small batch */
    if (st) return st;
    return bsr_compile(cc, nx, bsr_lanes_pay(cc, b, nx), b);
}

static pdc_status spfc_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const spfc_state *s = L->state;
    const cpu_bsr *w = &s->w;
    cpu_bsr_product(w, s->n, buf[l->inputs[0]], w->k, s->bias, cpu_layer_out(L, l, buf), w->o, x->scratch, x->own,
                    x->threads, s->act);
    return PDC_OK;
}

/* Plans y = x wt^T (+ bt) (+ ebias) for p->m rows of x on the block-sparse kernels - wt [p->n, p->k]
 * block- or unstructured-sparse, or dense at a small batch - named an fc (else a matmul) in its
 * kernel text; PDC_ERR_UNSUPPORTED (no message) where the dense path is the better one. */
static pdc_status spfc_plan(const cpu_compile *cc, const ir_tensor *wt, const ir_tensor *bt, const float *ebias,
                            int fc, const ir_gemm_params *p, const ir_fused_params *fp, cpu_layer *L)
{
    const ir_sparsity *sp = &wt->sparsity;
    if (wt->rank != 2 || (bt && bt->kind != IR_TENSOR_CONST) || wt->dims[0] != p->n || wt->dims[1] != p->k)
        return PDC_ERR_UNSUPPORTED;
    if (sp->kind == IR_SPARSITY_BCR)
        return cpu_plan_bcr_fc(cc, wt, 1.0f, bt ? bt->data : NULL, ebias, p->m, fp, fc ? "fc" : "matmul", L);
    pdc_context *ctx = cc->ctx;
    spfc_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cpu_bsr_plan(cc, wt, 0, p->n, p->m, &s->w);
    if (!st && (bt || ebias)) { /* the kernels add one bias */
        if (!(s->bias = pdc_alloc(ctx, (size_t)p->n * sizeof *s->bias))) st = PDC_ERR_OUT_OF_MEMORY;
        else start_rows(s->bias, 1, p->n, bt ? bt->data : NULL, ebias);
    }
    if (st) {
        spfc_free(s);
        return st;
    }
    s->n = p->m;
    if ((st = cpu_act_kernel(cc, fp, &s->act))) {
        spfc_free(s);
        return st;
    }
    const cpu_bsr *w = &s->w;
    L->run = spfc_run;
    L->state = s;
    L->free_state = spfc_free;
    L->scratch_floats = cpu_bsr_scratch_floats(w);
    L->thread_floats = cpu_bsr_thread_floats(w);
    char lanes[48] = "";
    if (w->lanes_fn) snprintf(lanes, sizeof lanes, ", %d samples per weight load", w->key.nl);
    /* an fc's rows are its batch; a matmul's are x's rows, and its weights are [in, out] */
    const char *what = fc ? "fc" : "matmul";
    char rows[40];
    snprintf(rows, sizeof rows, fc ? "batch %" PRId64 : "%" PRId64 " rows", s->n);
    if (w->dense)
        snprintf(L->info, sizeof L->info, "jit dense %s for %s, weights packed in %" PRId64 "x%" PRId64
                 " blocks%s%s, %s", what, rows, w->bh, w->bw, lanes,
                 sp->kind != IR_SPARSITY_NONE ? " (weights too dense or not blocked for the sparse kernel)" : "",
                 pdc_isa_name(cc->target->isa));
    else
        snprintf(L->info, sizeof L->info, "jit block-sparse %s, %s %" PRId64 "x%" PRId64 "%s, %.0f%% kept (%.2fx fewer FLOPs)%s, %s",
                 what, sp->kind == IR_SPARSITY_BLOCK ? "blocks" : "unstructured as blocks", w->bh, w->bw,
                 fc ? "" : " of the transposed weights",
                 100.0 * (double)w->kept / (double)w->total, w->kept ? (double)w->total / (double)w->kept : 0.0, lanes,
                 pdc_isa_name(cc->target->isa));
    return PDC_OK;
}

/* A matmul by a constant matrix [K, N] (a transformer's linear layer: x [..., M, K]), flattened to
 * rows by matmul_plan, on the block-sparse kernels through the transpose [N, K] of its weights and
 * their sparsity; PDC_ERR_UNSUPPORTED where BLAS keeps it (the weights' transpose only made where a
 * kernel may take it). */
static pdc_status matmul_sparse_plan(const cpu_compile *cc, const ir_model *m, const ir_layer *l,
                                     const gemm_state *s, const ir_fused_params *fp, cpu_layer *L)
{
    const ir_tensor *b = &m->tensors[l->inputs[1]];
    if (s->batches != 1 || b->rank != 2 ||
        (b->sparsity.kind == IR_SPARSITY_NONE && !bsr_dense_fits(s->p.m, s->p.n, s->p.k)))
        return PDC_ERR_UNSUPPORTED;
    ir_tensor wt;
    pdc_status st = ir_matrix_transpose(cc->ctx, b, &wt);
    if (st) return st;
    ir_gemm_params p = s->p;
    p.trans_b = 1;
    st = spfc_plan(cc, &wt, NULL, s->ebias, 0, &p, fp, L);
    ir_matrix_transpose_free(&wt);
    return st;
}

/* A gemm by a BCR-pruned constant B (transA = 0; C absent or a constant broadcast along the rows) on
 * bcr_fc.c's product, B transposed to [N, K] first where stored [K, N]; PDC_ERR_UNSUPPORTED elsewhere. */
static pdc_status gemm_bcr_plan(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const ir_gemm_params *p,
                                const ir_fused_params *fp, cpu_layer *L)
{
    const ir_tensor *b = &m->tensors[l->inputs[1]];
    const ir_tensor *ct = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
    if (b->sparsity.kind != IR_SPARSITY_BCR || b->rank != 2 || p->trans_a) return PDC_ERR_UNSUPPORTED;
    const int64_t cn = ct && ct->rank >= 1 ? ct->dims[ct->rank - 1] : 1;
    if (ct && (ct->kind != IR_TENSOR_CONST || ct->rank > 2 || (ct->rank == 2 && ct->dims[0] != 1) ||
               (cn != 1 && cn != p->n)))
        return PDC_ERR_UNSUPPORTED;
    float *bias = ct ? pdc_alloc(cc->ctx, (size_t)p->n * sizeof *bias) : NULL;
    if (ct && !bias) return PDC_ERR_OUT_OF_MEMORY;
    for (int64_t j = 0; ct && j < p->n; j++) bias[j] = p->beta * ct->data[cn == 1 ? 0 : j];
    ir_tensor tr;
    pdc_status st = p->trans_b ? PDC_OK : ir_matrix_transpose(cc->ctx, b, &tr);
    if (!st) st = cpu_plan_bcr_fc(cc, p->trans_b ? b : &tr, p->alpha, bias, NULL, p->m, fp, "gemm", L);
    if (!p->trans_b) ir_matrix_transpose_free(&tr);
    pdc_free(bias);
    return st;
}

pdc_status cpu_plan_gemm(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap)
{
    if (l->op != IR_OP_FC && l->op != IR_OP_GEMM && l->op != IR_OP_MATMUL) return PDC_ERR_UNSUPPORTED;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(m, l, &fp);
    if (st) return st;
    gemm_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->op = (int)l->op;
    s->cm = s->cn = 1;
    /* an epilogue offered (fc, matmul): its bias add and activation become ours */
    cpu_plan_epilogue(cc, &fp);
    if (cc->fuse && cc->fuse->bias >= 0) s->ebias = m->tensors[cc->fuse->bias].data;
    /* fc and matmul by a constant: the block-sparse / packed-dense kernels where they take it */
    pdc_status sst = PDC_ERR_UNSUPPORTED;
    if (l->op == IR_OP_MATMUL) {
        st = matmul_plan(cc, m, l, s);
        if (!st) sst = matmul_sparse_plan(cc, m, l, s, &fp, L);
    } else {
        st = ir_gemm_params_get(m, l, &s->p);
        if (!st && l->op == IR_OP_FC) {
            const ir_tensor *bt = l->n_inputs > 2 && l->inputs[2] >= 0 ? &m->tensors[l->inputs[2]] : NULL;
            sst = spfc_plan(cc, &m->tensors[l->inputs[1]], bt, s->ebias, 1, &s->p, &fp, L);
        }
        if (!st && l->op == IR_OP_GEMM) sst = gemm_bcr_plan(cc, m, l, &s->p, &fp, L);
    }
    if (!st && sst != PDC_ERR_UNSUPPORTED) {
        gemm_free(s);
        if (!sst) cpu_take_epilogue(cc, L);
        return sst;
    }
    if (!st && l->op == IR_OP_GEMM && l->n_inputs > 2 && l->inputs[2] >= 0) {
        const ir_tensor *ct = &m->tensors[l->inputs[2]];
        if (ct->rank > 2) {
            snprintf(why, why_cap, "gemm bias of rank %d", ct->rank);
            st = PDC_ERR_UNSUPPORTED;
        } else {
            if (ct->rank >= 1) s->cn = ct->dims[ct->rank - 1];
            if (ct->rank == 2) s->cm = ct->dims[0];
        }
    }
    if (!st && (s->p.m > INT32_MAX || s->p.n > INT32_MAX || s->p.k > INT32_MAX)) {
        snprintf(why, why_cap, "dims beyond BLAS's int range");
        st = PDC_ERR_UNSUPPORTED;
    }
    if (!st) st = cpu_act_kernel(cc, &fp, &s->act);
    if (st) {
        gemm_free(s);
        return st;
    }
    cpu_blas_single_thread();
    L->run = gemm_run;
    L->state = s;
    L->free_state = gemm_free;
    snprintf(L->info, sizeof L->info, "blas sgemm%s %" PRId64 "x%" PRId64 "x%" PRId64 "%s%s",
             s->p.m == 1 ? "/sgemv" : "", s->p.m, s->p.n, s->p.k,
             l->op == IR_OP_MATMUL && s->batches > 1 ? ", batched" : "",
             l->op != IR_OP_GEMM && m->tensors[l->inputs[1]].sparsity.kind != IR_SPARSITY_NONE
                 ? " (weights too dense or not blocked for the sparse kernel)" : "");
    cpu_take_epilogue(cc, L);
    return PDC_OK;
}
