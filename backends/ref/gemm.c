/*
 * gemm.c - reference fc, gemm and matmul.
 *  fc:     y[N,O] = x[N,K] w[O,K]^T + b[O]            (x flattened from axis 1)
 *  gemm:   y[M,N] = alpha * A' B' + beta * C          (A' = transA ? A^T : A, C broadcast to [M,N])
 *  matmul: y[..,M,N] = a[..,M,K] b[..,K,N]            (batch dims broadcast as in numpy)
 * Shapes come from ir_gemm_params_get (fc, gemm) and the tensors (matmul). Accumulates in double.
 */
#include "backends/ref/ref.h"
#include "ir/index.h"

pdc_status ref_gemm(const ir_model *m, const ir_layer *l, float *const *buf)
{
    ir_gemm_params p;
    pdc_status st = ir_gemm_params_get(m, l, &p);
    if (st != PDC_OK) return st;
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");

    const float *a = buf[l->inputs[0]];
    const float *b = buf[l->inputs[1]];
    const int has_c = l->n_inputs > 2 && l->inputs[2] >= 0;
    const float *c = has_c ? buf[l->inputs[2]] : NULL;
    float *y = buf[l->outputs[0]];
    const ir_tensor *ap = ref_pruned(m, l->inputs[0]), *bp = ref_pruned(m, l->inputs[1]);

    /* C broadcasts unidirectionally to [M,N]: right-align its dims. */
    int64_t cm = 1, cn = 1;
    if (has_c) {
        const ir_tensor *ct = &m->tensors[l->inputs[2]];
        if (ct->rank > 2)
            return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias rank %d > 2", ct->rank);
        if (ct->rank >= 1) cn = ct->dims[ct->rank - 1];
        if (ct->rank == 2) cm = ct->dims[0];
        if ((cm != 1 && cm != p.m) || (cn != 1 && cn != p.n))
            return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "bias does not broadcast to [%lld,%lld]", (long long)p.m,
                                 (long long)p.n);
    }

    for (int64_t i = 0; i < p.m; i++) {
        for (int64_t j = 0; j < p.n; j++) {
            double acc = 0.0;
            for (int64_t kk = 0; kk < p.k; kk++) {
                size_t ai = (size_t)(p.trans_a ? kk * p.m + i : i * p.k + kk);
                size_t bi = (size_t)(p.trans_b ? j * p.k + kk : kk * p.n + j);
                if ((ap && !ir_sparsity_keeps(ap, ai)) || (bp && !ir_sparsity_keeps(bp, bi))) continue;
                acc += (double)a[ai] * (double)b[bi];
            }
            acc *= (double)p.alpha;
            if (has_c) acc += (double)p.beta * (double)c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
            y[i * p.n + j] = (float)acc;
        }
    }
    return PDC_OK;
}

pdc_status ref_matmul(const ir_model *m, const ir_layer *l, float *const *buf)
{
    if (l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 || l->outputs[0] < 0)
        return REF_LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "missing input or output");
    const ir_tensor *ta = &m->tensors[l->inputs[0]];
    const ir_tensor *tb = &m->tensors[l->inputs[1]];
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    if (ta->rank < 2 || tb->rank < 2 || ty->rank < 2)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "operands must have rank >= 2");
    const int64_t M = ta->dims[ta->rank - 2], K = ta->dims[ta->rank - 1];
    const int64_t N = tb->dims[tb->rank - 1];
    if (tb->dims[tb->rank - 2] != K || ty->dims[ty->rank - 2] != M || ty->dims[ty->rank - 1] != N)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "inner or output dims disagree");
    const int nb = ty->rank - 2;
    if (ta->rank - 2 > nb || tb->rank - 2 > nb)
        return REF_LAYER_ERR(m, l, PDC_ERR_SHAPE, "output rank too small");

    /* the batch dims (all but the last two) broadcast */
    int64_t s[2][PDC_MAX_RANK], idx[PDC_MAX_RANK] = {0}, off[2] = {0, 0};
    ir_broadcast_strides(ta->rank - 2, ta->dims, nb, ty->dims, M * K, s[0]);
    ir_broadcast_strides(tb->rank - 2, tb->dims, nb, ty->dims, K * N, s[1]);
    int64_t batches = 1;
    for (int i = 0; i < nb; i++) batches *= ty->dims[i];

    const float *a = buf[l->inputs[0]];
    const float *b = buf[l->inputs[1]];
    float *y = buf[l->outputs[0]];
    const ir_tensor *ap = ref_pruned(m, l->inputs[0]), *bp = ref_pruned(m, l->inputs[1]);
    for (int64_t bi = 0; bi < batches; bi++) {
        const float *ab = a + off[0], *bb = b + off[1];
        float *yb = y + bi * M * N;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) {
                double acc = 0.0;
                for (int64_t kk = 0; kk < K; kk++) {
                    if ((ap && !ir_sparsity_keeps(ap, (size_t)(off[0] + i * K + kk))) ||
                        (bp && !ir_sparsity_keeps(bp, (size_t)(off[1] + kk * N + j))))
                        continue;
                    acc += (double)ab[i * K + kk] * (double)bb[kk * N + j];
                }
                yb[i * N + j] = (float)acc;
            }
        }
        ir_index_next(nb, ty->dims, idx, 2, s, off);
    }
    return PDC_OK;
}
