/*
 * gpu_gemm.c - gpu kernels for fc, gemm and matmul.
 *
 *  - dense: one thread per output element (batch, i, j), a dot product over K with the operands'
 *    strides as constants (transA/transB, fc's w[O,K], matmul's broadcast batch strides), then
 *    alpha, beta * C (broadcast), the fused activation.
 *  - block-sparse (fc, or gemm with a constant transposed B, whose weight is block- or
 *    unstructured-pruned): the kept blocks of each block-row in CSR form (rowptr, first column,
 *    bh x bw weights packed block by block; unstructured = 1x1 blocks); one thread per output
 *    (row i, output o) walks only the kept blocks of o's block-row, bw taps unrolled.
 *  - dense and large enough (M, N >= GEMM_TILE_MIN): shared-memory tiling, a block of 16 x 16
 *    threads per 16 x 16 output tile; per K step of 16 each thread stages one element of the A tile
 *    and one of the B tile into shared memory (loaded along the operand's contiguous axis, so a
 *    warp's loads are coalesced whichever operand is transposed; rows padded to 17 floats against
 *    bank conflicts), barrier, 16 fma from shared memory, barrier.
 */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"

typedef struct gemm_p {
    gpu_ref a, b, c, y;
    int64_t M, N, K;
    int64_t a_si, a_sk, b_sk, b_sj, c_si, c_sj;
    float alpha, beta;
    gpu_act act;
    int nb;                                                   /* matmul batch dims */
    int64_t bd[PDC_MAX_RANK], sa[PDC_MAX_RANK], sb[PDC_MAX_RANK];
    /* block-sparse: B is [N, K] in kept blocks of bh x bw */
    int bsr, tiled;
    int64_t bh, bw;
    gpu_ref rowptr, col, wpk;
} gemm_p;

static LLVMValueRef finish(gpu_kb *kb, const gemm_p *p, LLVMValueRef acc, LLVMValueRef i, LLVMValueRef j)
{
    if (p->alpha != 1.0f) acc = kb_fmul(kb, acc, kb_f32(kb, p->alpha));
    if (p->c.off >= 0) {
        LLVMValueRef cv = kb_ld(kb, p->c, kb_add(kb, kb_mulc(kb, i, p->c_si), kb_mulc(kb, j, p->c_sj)));
        acc = p->beta == 1.0f ? kb_fadd(kb, acc, cv) : kb_fma(kb, cv, kb_f32(kb, p->beta), acc);
    }
    return kb_act(kb, &p->act, acc);
}

static void gen_gemm(gpu_kb *kb, const void *vp)
{
    const gemm_p *p = vp;
    LLVMValueRef j = kb_remc(kb, kb->idx, p->N);
    LLVMValueRef i = kb_remc(kb, kb_divc(kb, kb->idx, p->N), p->M);
    LLVMValueRef abase = kb_mulc(kb, i, p->a_si), bbase = kb_mulc(kb, j, p->b_sj);
    if (p->nb) {
        /* batch multi-index of idx / (M N) against the output's batch dims */
        LLVMValueRef bi = kb_divc(kb, kb->idx, p->M * p->N), oa = kb_i64(kb, 0), ob = kb_i64(kb, 0);
        for (int d = p->nb - 1; d >= 0; d--) {
            LLVMValueRef id = d ? kb_remc(kb, bi, p->bd[d]) : bi;
            oa = kb_add(kb, oa, kb_mulc(kb, id, p->sa[d]));
            ob = kb_add(kb, ob, kb_mulc(kb, id, p->sb[d]));
            if (d) bi = kb_divc(kb, bi, p->bd[d]);
        }
        abase = kb_add(kb, abase, oa);
        bbase = kb_add(kb, bbase, ob);
    }
    LLVMValueRef acc = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    kb_loop L;
    LLVMValueRef k = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, p->K));
    LLVMValueRef av = kb_ld(kb, p->a, kb_add(kb, abase, kb_mulc(kb, k, p->a_sk)));
    LLVMValueRef bv = kb_ld(kb, p->b, kb_add(kb, bbase, kb_mulc(kb, k, p->b_sk)));
    kb_set(kb, acc, kb_fma(kb, av, bv, kb_get(kb, kb->f32, acc)));
    kb_endfor(kb, &L);
    kb_st(kb, p->y, kb->idx, finish(kb, p, kb_get(kb, kb->f32, acc), i, j));
}

#define TILE 16                  /* GPU_BLOCK = TILE * TILE */
#define TILE_LD (TILE + 1)       /* shared row stride: padded */
#define GEMM_TILE_MIN 16         /* M and N from which the tiled kernel is used */
_Static_assert(TILE * TILE == GPU_BLOCK, "one thread per tile element");

/* Batch offsets of operand A and B for batch index bt (matmul's broadcast batch dims). */
static void batch_offsets(gpu_kb *kb, const gemm_p *p, LLVMValueRef bt, LLVMValueRef *oa, LLVMValueRef *ob)
{
    *oa = kb_i64(kb, 0);
    *ob = kb_i64(kb, 0);
    for (int d = p->nb - 1; d >= 0; d--) {
        LLVMValueRef id = d ? kb_remc(kb, bt, p->bd[d]) : bt;
        *oa = kb_add(kb, *oa, kb_mulc(kb, id, p->sa[d]));
        *ob = kb_add(kb, *ob, kb_mulc(kb, id, p->sb[d]));
        if (d) bt = kb_divc(kb, bt, p->bd[d]);
    }
}

/* Stages element (r, c) of a tile of `src` (rows from r0 with stride rs, columns from c0 with stride
 * cs, limits rn x cn; outside: 0) into sh[r * TILE_LD + c]. The thread's (u, v) = (tid / TILE,
 * tid % TILE) become (r, c) or (c, r) so that v, the fastest thread index, walks the contiguous axis. */
static void stage(gpu_kb *kb, gpu_ref src, LLVMValueRef base, LLVMValueRef r0, LLVMValueRef c0, int64_t rs, int64_t cs,
                  int64_t rn, int64_t cn, LLVMValueRef sh)
{
    LLVMValueRef u = kb_divc(kb, kb->tid, TILE), v = kb_remc(kb, kb->tid, TILE);
    int swap = cs != 1 && rs == 1;
    LLVMValueRef r = swap ? v : u, c = swap ? u : v;
    LLVMValueRef gr = kb_add(kb, r0, r), gc = kb_add(kb, c0, c);
    LLVMValueRef ok = kb_and(kb, kb_icmp(kb, LLVMIntSLT, gr, kb_i64(kb, rn)), kb_icmp(kb, LLVMIntSLT, gc, kb_i64(kb, cn)));
    LLVMValueRef val = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    kb_if I = {0};
    kb_if_begin(kb, &I, ok);
    kb_set(kb, val, kb_ld(kb, src, kb_add(kb, base, kb_add(kb, kb_mulc(kb, gr, rs), kb_mulc(kb, gc, cs)))));
    kb_if_end(kb, &I);
    kb_sst(kb, sh, kb_add(kb, kb_mulc(kb, r, TILE_LD), c), kb_get(kb, kb->f32, val));
}

static void gen_gemm_tiled(gpu_kb *kb, const void *vp)
{
    const gemm_p *p = vp;
    const int64_t tm = (p->M + TILE - 1) / TILE, tn = (p->N + TILE - 1) / TILE;
    /* block-uniform: which tile of which batch */
    LLVMValueRef bj = kb_remc(kb, kb->block, tn), bi = kb_remc(kb, kb_divc(kb, kb->block, tn), tm);
    LLVMValueRef bt = kb_divc(kb, kb->block, tm * tn);
    LLVMValueRef oa, ob;
    batch_offsets(kb, p, bt, &oa, &ob);
    LLVMValueRef i0 = kb_mulc(kb, bi, TILE), j0 = kb_mulc(kb, bj, TILE);
    LLVMValueRef As = kb_shared(kb, TILE * TILE_LD), Bs = kb_shared(kb, TILE * TILE_LD);
    LLVMValueRef acc = kb_tvar(kb);
    kb_phase_begin(kb);
    kb_tset(kb, acc, kb_f32(kb, 0.0f));
    kb_phase_end(kb, 0);
    kb_loop L;
    LLVMValueRef kt = kb_for(kb, &L, kb_i64(kb, 0), kb_i64(kb, (p->K + TILE - 1) / TILE));
    LLVMValueRef k0 = kb_mulc(kb, kt, TILE);
    kb_phase_begin(kb);
    /* As[r][c] = A(i0 + r, k0 + c), Bs[r][c] = B(k0 + r, j0 + c) */
    stage(kb, p->a, oa, i0, k0, p->a_si, p->a_sk, p->M, p->K, As);
    stage(kb, p->b, ob, k0, j0, p->b_sk, p->b_sj, p->K, p->N, Bs);
    kb_phase_end(kb, 1);
    kb_phase_begin(kb);
    {
        LLVMValueRef u = kb_divc(kb, kb->tid, TILE), v = kb_remc(kb, kb->tid, TILE);
        LLVMValueRef arow = kb_mulc(kb, u, TILE_LD), a = kb_tget(kb, acc);
        for (int64_t k = 0; k < TILE; k++)
            a = kb_fma(kb, kb_sld(kb, As, kb_addc(kb, arow, k)), kb_sld(kb, Bs, kb_addc(kb, v, k * TILE_LD)), a);
        kb_tset(kb, acc, a);
    }
    kb_phase_end(kb, 1);
    kb_endfor(kb, &L);
    kb_phase_begin(kb);
    {
        LLVMValueRef i = kb_add(kb, i0, kb_divc(kb, kb->tid, TILE)), j = kb_add(kb, j0, kb_remc(kb, kb->tid, TILE));
        kb_if I = {0};
        kb_if_begin(kb, &I, kb_and(kb, kb_icmp(kb, LLVMIntSLT, i, kb_i64(kb, p->M)), kb_icmp(kb, LLVMIntSLT, j, kb_i64(kb, p->N))));
        LLVMValueRef at = kb_add(kb, kb_mulc(kb, kb_add(kb, kb_mulc(kb, bt, p->M), i), p->N), j);
        kb_st(kb, p->y, at, finish(kb, p, kb_tget(kb, acc), i, j));
        kb_if_end(kb, &I);
    }
    kb_phase_end(kb, 0);
}

static void gen_bsr(gpu_kb *kb, const void *vp)
{
    const gemm_p *p = vp;
    LLVMValueRef o = kb_remc(kb, kb->idx, p->N), i = kb_divc(kb, kb->idx, p->N);
    LLVMValueRef br = kb_divc(kb, o, p->bh), q = kb_remc(kb, o, p->bh);
    LLVMValueRef abase = kb_mulc(kb, i, p->a_si);
    LLVMValueRef acc = kb_var(kb, kb->f32, kb_f32(kb, 0.0f));
    kb_loop L;
    LLVMValueRef blk = kb_for(kb, &L, kb_ldi(kb, p->rowptr, br), kb_ldi(kb, p->rowptr, kb_addc(kb, br, 1)));
    LLVMValueRef col = kb_ldi(kb, p->col, blk);
    LLVMValueRef wrow = kb_add(kb, kb_mulc(kb, blk, p->bh * p->bw), kb_mulc(kb, q, p->bw));
    for (int64_t t = 0; t < p->bw; t++) {
        LLVMValueRef kk = kb_addc(kb, col, t);
        kb_if I = {0};
        /* only edge blocks can reach past K; their padded weights are zero but x is not there */
        if (p->K % p->bw) kb_if_begin(kb, &I, kb_icmp(kb, LLVMIntSLT, kk, kb_i64(kb, p->K)));
        LLVMValueRef av = kb_ld(kb, p->a, kb_add(kb, abase, kb_mulc(kb, kk, p->a_sk)));
        LLVMValueRef wv = kb_ld(kb, p->wpk, kb_addc(kb, wrow, t));
        kb_set(kb, acc, kb_fma(kb, av, wv, kb_get(kb, kb->f32, acc)));
        if (p->K % p->bw) kb_if_end(kb, &I);
    }
    kb_endfor(kb, &L);
    kb_st(kb, p->y, kb->idx, finish(kb, p, kb_get(kb, kb->f32, acc), i, o));
}

/* Packs constant B[N, K] (block or unstructured sparse) into CSR over kept blocks. */
static pdc_status pack_bsr(gpu_plan *pl, const ir_tensor *w, gemm_p *p, size_t *kept_out)
{
    const ir_sparsity *s = &w->sparsity;
    const int64_t N = p->N, K = p->K;
    p->bh = s->kind == IR_SPARSITY_BLOCK ? s->bh : 1;
    p->bw = s->kind == IR_SPARSITY_BLOCK ? s->bw : 1;
    const int64_t nbr = (N + p->bh - 1) / p->bh, nbc = (K + p->bw - 1) / p->bw;
    size_t kept = 0;
    for (int64_t br = 0; br < nbr; br++)
        for (int64_t bc = 0; bc < nbc; bc++)
            kept += s->kind == IR_SPARSITY_BLOCK ? s->block_mask[br * nbc + bc] != 0 : s->mask[br * K + bc] != 0;
    int64_t rp = gpu_plan_wts(pl, (size_t)nbr + 1), col = rp < 0 ? -1 : gpu_plan_wts(pl, kept);
    int64_t wp = col < 0 ? -1 : gpu_plan_wts(pl, kept * (size_t)(p->bh * p->bw));
    if (wp < 0) return PDC_ERR_OUT_OF_MEMORY;
    int32_t *rowptr = (int32_t *)(pl->wts + rp), *cols = (int32_t *)(pl->wts + col);
    float *wpk = pl->wts + wp;
    size_t b = 0;
    for (int64_t br = 0; br < nbr; br++) {
        rowptr[br] = (int32_t)b;
        for (int64_t bc = 0; bc < nbc; bc++) {
            int keep = s->kind == IR_SPARSITY_BLOCK ? s->block_mask[br * nbc + bc] != 0 : s->mask[br * K + bc] != 0;
            if (!keep) continue;
            cols[b] = (int32_t)(bc * p->bw);
            for (int64_t q = 0; q < p->bh; q++)
                for (int64_t t = 0; t < p->bw; t++) {
                    int64_t r = br * p->bh + q, c = bc * p->bw + t;
                    wpk[b * (size_t)(p->bh * p->bw) + (size_t)(q * p->bw + t)] = r < N && c < K ? w->data[r * K + c] : 0.0f;
                }
            b++;
        }
    }
    rowptr[nbr] = (int32_t)b;
    p->rowptr = (gpu_ref){1, rp};
    p->col = (gpu_ref){1, col};
    p->wpk = (gpu_ref){1, wp};
    *kept_out = kept;
    return PDC_OK;
}

pdc_status gpu_plan_gemm(gpu_plan *pl, const ir_model *m, size_t li)
{
    const ir_layer *l = &m->layers[li];
    const char *op = ir_op_get_info(l->op)->name;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return GPU_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    gemm_p *p = pdc_calloc(pl->ctx, 1, sizeof *p);
    if (!p) return PDC_ERR_OUT_OF_MEMORY;
    p->a = gpu_in(pl, l, 0);
    p->b = gpu_in(pl, l, 1);
    p->c = gpu_in(pl, l, 2);
    p->y = gpu_out(pl, l, 0);
    ir_fused_params fp;
    pdc_status st = ir_fused_params_get(m, l, &fp);
    if (st) {
        pdc_free(p);
        return st;
    }
    p->act = gpu_act_from_fused(&fp);
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    int64_t total = (int64_t)ir_tensor_numel(ty);
    char *info = pl->info[li];
    if (l->op == IR_OP_MATMUL) {
        const ir_tensor *ta = &m->tensors[l->inputs[0]], *tb = &m->tensors[l->inputs[1]];
        p->M = ta->dims[ta->rank - 2];
        p->K = ta->dims[ta->rank - 1];
        p->N = tb->dims[tb->rank - 1];
        p->a_si = p->K, p->a_sk = 1, p->b_sk = p->N, p->b_sj = 1;
        p->alpha = 1.0f;
        p->nb = ty->rank - 2;
        /* batch strides, right-aligned, broadcast dims 0 (as the reference) */
        const ir_tensor *ops[2] = {ta, tb};
        int64_t *strides[2] = {p->sa, p->sb};
        int64_t mats[2] = {p->M * p->K, p->K * p->N};
        for (int o = 0; o < 2; o++) {
            int tbr = ops[o]->rank - 2;
            int64_t stride = mats[o];
            for (int i = p->nb - 1; i >= 0; i--) {
                int ti = i - (p->nb - tbr);
                if (ti < 0) {
                    strides[o][i] = 0;
                    continue;
                }
                int64_t dim = ops[o]->dims[ti];
                strides[o][i] = (dim == 1 && ty->dims[i] != 1) ? 0 : stride;
                stride *= dim;
            }
        }
        for (int i = 0; i < p->nb; i++) p->bd[i] = ty->dims[i];
        snprintf(info, sizeof pl->info[0], "ptx dense matmul, thread per output element");
        p->tiled = p->M >= GEMM_TILE_MIN && p->N >= GEMM_TILE_MIN;
    } else {
        ir_gemm_params g;
        if ((st = ir_gemm_params_get(m, l, &g))) {
            pdc_free(p);
            return st;
        }
        p->M = g.m, p->N = g.n, p->K = g.k;
        p->alpha = g.alpha, p->beta = g.beta;
        p->a_si = g.trans_a ? 1 : g.k, p->a_sk = g.trans_a ? g.m : 1;
        p->b_sk = g.trans_b ? 1 : g.n, p->b_sj = g.trans_b ? g.k : 1;
        if (p->c.off >= 0) {
            const ir_tensor *ct = &m->tensors[l->inputs[2]];
            int64_t cm = 1, cn = 1;
            if (ct->rank > 2) {
                pdc_free(p);
                return GPU_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias rank %d > 2", ct->rank);
            }
            if (ct->rank >= 1) cn = ct->dims[ct->rank - 1];
            if (ct->rank == 2) cm = ct->dims[0];
            p->c_si = cm == 1 ? 0 : cn;
            p->c_sj = cn == 1 ? 0 : 1;
        }
        const ir_tensor *tw = &m->tensors[l->inputs[1]];
        int64_t rows = 0, cols = 0;
        ir_weight_matrix_view(tw, &rows, &cols);
        int sparse = tw->kind == IR_TENSOR_CONST && g.trans_b && rows == g.n && cols == g.k &&
                     (tw->sparsity.kind == IR_SPARSITY_BLOCK || tw->sparsity.kind == IR_SPARSITY_UNSTRUCTURED);
        if (sparse) {
            size_t kept = 0;
            if ((st = pack_bsr(pl, tw, p, &kept))) {
                pdc_free(p);
                return st;
            }
            p->bsr = 1;
            size_t nblocks = (size_t)(((p->N + p->bh - 1) / p->bh) * ((p->K + p->bw - 1) / p->bw));
            snprintf(info, sizeof pl->info[0],
                     "ptx block-sparse %s %lldx%lld blocks (%zu of %zu kept), thread per output over its block-row's "
                     "CSR",
                     op, (long long)p->bh, (long long)p->bw, kept, nblocks);
        } else {
            snprintf(info, sizeof pl->info[0], "ptx dense %s, thread per output element", op);
            p->tiled = p->M >= GEMM_TILE_MIN && p->N >= GEMM_TILE_MIN;
        }
    }
    if (p->tiled) {
        int64_t blocks = total / (p->M * p->N) * ((p->M + TILE - 1) / TILE) * ((p->N + TILE - 1) / TILE);
        snprintf(info, sizeof pl->info[0], "ptx dense %s, shared-memory tiles %dx%d (block per output tile)", op, TILE,
                 TILE);
        return gpu_plan_tiled1(pl, (int)li, op, gen_gemm_tiled, p, NULL, blocks) < 0 ? PDC_ERR_OUT_OF_MEMORY : PDC_OK;
    }
    return gpu_plan_kernel1(pl, (int)li, p->bsr ? "bsr" : op, p->bsr ? gen_bsr : gen_gemm, p, NULL, total) < 0
               ? PDC_ERR_OUT_OF_MEMORY
               : PDC_OK;
}
