/*
 * train_bridge.c - the cpu backend's elementwise kernels for a model whose constants change between
 * runs (the trainer's forward pass, option kernels=cpu; declared in backends/backend.h). Planned per
 * layer for the model's current shapes; the caller plans again when they change. The JIT'd code
 * itself is cached by the context. The backend knows nothing of the trainer: it sees an IR model and
 * the value of every tensor.
 */
#include <cblas.h>
#include <string.h>

#include "backends/cpu/cpu.h"

struct cpu_eltwise_set {
    size_t n_layers;
    int threads;
    cpu_layer *layers;
    float *scratch;
};

void cpu_eltwise_free(cpu_eltwise_set *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_layers; i++)
        if (c->layers[i].free_state) c->layers[i].free_state(c->layers[i].state);
    pdc_free(c->layers);
    pdc_free(c->scratch);
    pdc_free(c);
}

/* Ops whose forward pass may come from the elementwise family. */
static int elementwise(ir_op op)
{
    switch (op) {
    IR_CASE_ACTIVATION:
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV:
        return 1;
    default: return 0;
    }
}

pdc_status cpu_eltwise_plan(pdc_context *ctx, const ir_model *m, int threads, cpu_eltwise_set **out)
{
    cpu_eltwise_set *c = pdc_calloc(ctx, 1, sizeof *c);
    if (!c) return PDC_ERR_OUT_OF_MEMORY;
    c->threads = threads;
    c->layers = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *c->layers);
    if (!c->layers) {
        cpu_eltwise_free(c);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    cpu_compile cc = {ctx, NULL, NULL, threads, NULL, NULL, NULL, NULL};
    pdc_status st = pdc_jit_get(ctx, &cc.jit);
    if (!st) cc.target = pdc_jit_target(cc.jit);
    size_t scratch = 0;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        c->n_layers = li + 1;
        if (!elementwise(l->op)) continue;
        char why[160];
        st = cpu_plan_eltwise(&cc, m, l, &c->layers[li], why, sizeof why);
        if (st == PDC_ERR_UNSUPPORTED) {
            memset(&c->layers[li], 0, sizeof c->layers[li]);
            st = PDC_OK;
        } else if (!st && c->layers[li].scratch_floats > scratch) {
            scratch = c->layers[li].scratch_floats;
        }
    }
    if (!st && !(c->scratch = pdc_alloc_aligned(ctx, scratch ? scratch : 1, sizeof(float))))
        st = PDC_ERR_OUT_OF_MEMORY;
    if (st) {
        cpu_eltwise_free(c);
        return st;
    }
    *out = c;
    return PDC_OK;
}

int cpu_eltwise_has(const cpu_eltwise_set *c, size_t li)
{
    return c && li < c->n_layers && c->layers[li].run;
}

pdc_status cpu_eltwise_run(const cpu_eltwise_set *c, const ir_model *m, size_t li, float *const *val)
{
    const cpu_layer *L = &c->layers[li];
    /* elementwise kernels: no private scratch, no work shares */
    const cpu_exec x = {c->threads, c->scratch, NULL, NULL};
    return L->run(L, m, &m->layers[li], val, &x);
}

/* Block of the output one call computes: the split dimension cut into 1 to 8 equal parts of at least 256 rows or
 * columns (whole multiples of 16), and into one when the product is too small to be split between threads; a
 * function of the shape alone (see backend.h). Every call packs the whole other operand again: blocks of 64 (an
 * eighth, at least 64, before) packed the weights 8 times over in ResNet-18's 4x4 and 2x2 layers. */
static size_t sgemm_block(size_t len, double flops)
{
    size_t parts = len / 256;
    if (parts < 1 || flops < 1e6) parts = 1;
    if (parts > 8) parts = 8;
    return ((len + parts - 1) / parts + 15) / 16 * 16;
}

void cpu_train_sgemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                     const float *b, size_t ldb, float beta, float *c, size_t ldc, int threads)
{
    if (m == 0 || n == 0) return;
    cpu_blas_single_thread();
    const enum CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
    const int by_cols = n >= m; /* split the longer side of C */
    const double flops = (double)m * (double)n * (double)k;
    const size_t len = by_cols ? n : m, blk = sgemm_block(len, flops), blocks = (len + blk - 1) / blk;
    /* small products: one call (splitting costs more than it saves) */
    const int nt = flops < 1e6 || threads < 1 ? 1 : threads;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1 && blocks > 1)
    for (size_t q = 0; q < blocks; q++) {
        const size_t i0 = q * blk, i1 = len - i0 < blk ? len : i0 + blk;
        if (by_cols) {
            /* columns [i0, i1) of C: the same columns of op(B) */
            const float *bq = tb ? b + i0 * ldb : b + i0;
            cblas_sgemm(CblasRowMajor, oa, ob, (int)m, (int)(i1 - i0), (int)k, alpha, a, (int)lda, bq, (int)ldb, beta,
                        c + i0, (int)ldc);
        } else {
            /* rows [i0, i1) of C: the same rows of op(A) */
            const float *aq = ta ? a + i0 : a + i0 * lda;
            cblas_sgemm(CblasRowMajor, oa, ob, (int)(i1 - i0), (int)n, (int)k, alpha, aq, (int)lda, b, (int)ldb, beta,
                        c + i0 * ldc, (int)ldc);
        }
    }
}
