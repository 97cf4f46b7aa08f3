/*
 * stats.c - per-layer statistics for inspection: weights, kept weights, dense and effective
 * FLOPs (multiply-add = 2). Weighted ops share one rule: each weight is used `reuse` times per run
 * (conv: N x output pixels; fc/gemm/matmul: rows of the other operand; rnn: steps x batch), so
 * dense FLOPs = 2 x reuse x weights and effective FLOPs = 2 x reuse x kept weights.
 */
#include <stdio.h>
#include <string.h>

#include "ir/ops/params.h"

static const ir_tensor *in_t(const ir_model *m, const ir_layer *l, size_t i)
{
    return i < l->n_inputs && l->inputs[i] >= 0 ? &m->tensors[l->inputs[i]] : NULL;
}

static int64_t numel(const ir_tensor *t) { return t ? (int64_t)ir_tensor_numel(t) : 0; }

/* Saturating arithmetic: FLOP counts of valid but huge models (each dim up to 2^31 - 1) exceed
 * int64. Such a result is INT64_MAX and sets *overflow, instead of signed overflow (undefined). */
static int64_t mul_sat(int64_t a, int64_t b, int *overflow)
{
    int64_t r;
    if (!__builtin_mul_overflow(a, b, &r)) return r;
    *overflow = 1;
    return INT64_MAX;
}

static int64_t add_sat(int64_t a, int64_t b, int *overflow)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    *overflow = 1;
    return INT64_MAX;
}

/* How many times each element of the layer's weight input is used in one run; 0 if not weighted. */
static int64_t weight_reuse(const ir_model *m, const ir_layer *l, int *overflow)
{
    const ir_tensor *a = in_t(m, l, 0);
    switch (l->op) {
    case IR_OP_CONV: {
        ir_window_params p;
        if (ir_window_params_get(m, l, &p)) return 0;
        int64_t r = p.n;
        for (int i = 0; i < p.nsp; i++) r = mul_sat(r, p.out[i], overflow);
        return r;
    }
    case IR_OP_FC:
    case IR_OP_GEMM: {
        ir_gemm_params p;
        return ir_gemm_params_get(m, l, &p) ? 0 : p.m;
    }
    case IR_OP_MATMUL: {
        /* y [.., M, N] = a [.., M, K] b [.., K, N]: each element of b is used numel(y) * K / numel(b) times */
        const ir_tensor *b = in_t(m, l, 1);
        int64_t nb = numel(b);
        return nb ? mul_sat(numel(&m->tensors[l->outputs[0]]), b->dims[b->rank - 2], overflow) / nb : 0;
    }
    case IR_OP_LSTM:
    case IR_OP_GRU: return mul_sat(a->dims[0], a->dims[1], overflow);
    default: return 0;
    }
}

void ir_layer_stats_compute(const ir_model *m, size_t li, ir_layer_stats *st)
{
    const ir_layer *l = &m->layers[li];
    memset(st, 0, sizeof *st);
    const ir_tensor *y = &m->tensors[l->outputs[0]];
    int known = y->rank >= 0; /* FLOPs need shapes, unknown until symbolic inputs are fixed */
    int weighted = l->op == IR_OP_CONV || l->op == IR_OP_FC || l->op == IR_OP_GEMM || l->op == IR_OP_MATMUL ||
                   l->op == IR_OP_LSTM || l->op == IR_OP_GRU;
    int *ovf = &st->overflow;
    int64_t reuse = weighted && known ? weight_reuse(m, l, ovf) : 0;
    for (size_t i = 0; i < l->n_inputs; i++) {
        const ir_tensor *t = in_t(m, l, i);
        if (!t || t->kind != IR_TENSOR_CONST) continue;
        int64_t n = numel(t), kept = (int64_t)ir_sparsity_kept(t);
        st->weights += n;
        st->kept_weights += kept;
        /* Matrix operands of weighted ops (not biases or initial states) carry the FLOPs. */
        int is_matrix = weighted && (i == 1 || ((l->op == IR_OP_LSTM || l->op == IR_OP_GRU) && i == 2));
        if (is_matrix) {
            st->dense_flops = add_sat(st->dense_flops, mul_sat(mul_sat(reuse, 2, ovf), n, ovf), ovf);
            st->effective_flops = add_sat(st->effective_flops, mul_sat(mul_sat(reuse, 2, ovf), kept, ovf), ovf);
        }
    }
    st->bytes = st->kept_weights * (int64_t)sizeof(float);
    if (!known) return;
    if (l->op == IR_OP_MATMUL && in_t(m, l, 1)->kind != IR_TENSOR_CONST) {
        /* activation x activation: 2*M*N*K per output batch element */
        const ir_tensor *a = in_t(m, l, 0);
        int64_t f = mul_sat(mul_sat(numel(y), 2, ovf), a->dims[a->rank - 1], ovf);
        st->dense_flops = add_sat(st->dense_flops, f, ovf);
        st->effective_flops = add_sat(st->effective_flops, f, ovf);
    }
    if (!weighted) {
        /* Elementwise-like ops: one op per output element (pools: one per window element). */
        int64_t f = numel(y);
        if (l->op == IR_OP_MAXPOOL || l->op == IR_OP_AVGPOOL) {
            ir_window_params p;
            if (!ir_window_params_get(m, l, &p))
                for (int i = 0; i < p.nsp; i++) f = mul_sat(f, p.k[i], ovf);
        } else if (l->op == IR_OP_GLOBAL_AVGPOOL) {
            f = numel(in_t(m, l, 0));
        } else if (l->op == IR_OP_FLATTEN || l->op == IR_OP_RESHAPE || l->op == IR_OP_TRANSPOSE ||
                   l->op == IR_OP_CONCAT) {
            f = 0;
        }
        st->dense_flops = add_sat(st->dense_flops, f, ovf);
        st->effective_flops = add_sat(st->effective_flops, f, ovf);
    }
    if (ir_attrs_find(&l->attrs, "activation")) {
        /* a fused activation (canonicalize) costs what its own layer did: one op per output element */
        st->dense_flops = add_sat(st->dense_flops, numel(y), ovf);
        st->effective_flops = add_sat(st->effective_flops, numel(y), ovf);
    }
}

static void describe(const ir_tensor *t, char *buf, size_t cap)
{
    const ir_sparsity *s = &t->sparsity;
    size_t n = ir_tensor_numel(t), kept = ir_sparsity_kept(t);
    double pct = n ? 100.0 * (double)kept / (double)n : 0.0;
    switch (s->kind) {
    case IR_SPARSITY_NONE: snprintf(buf, cap, "dense"); break;
    case IR_SPARSITY_PATTERN: {
        size_t live = 0;
        for (size_t k = 0; k < s->n_kernels; k++) live += s->kernel_pattern[k] >= 0;
        char win[64], groups[64] = "";
        ir_sparsity_window_text(s, win, sizeof win);
        if (s->go || s->gc) snprintf(groups, sizeof groups, ", kernel groups %lldx%lld", (long long)s->go, (long long)s->gc);
        snprintf(buf, cap, "pattern %s: %zu patterns%s, %.0f%% kernels kept, %.1f%% weights kept", win, s->n_patterns,
                 groups, s->n_kernels ? 100.0 * (double)live / (double)s->n_kernels : 0.0, pct);
        break;
    }
    case IR_SPARSITY_BLOCK: {
        size_t live = 0;
        for (size_t b = 0; b < s->n_blocks; b++) live += s->block_mask[b] != 0;
        snprintf(buf, cap, "block %lldx%lld: %.0f%% blocks kept", (long long)s->bh, (long long)s->bw,
                 s->n_blocks ? 100.0 * (double)live / (double)s->n_blocks : 0.0);
        break;
    }
    case IR_SPARSITY_UNSTRUCTURED: snprintf(buf, cap, "unstructured: %.1f%% kept", pct); break;
    case IR_SPARSITY_BCR: {
        /* rows and columns kept per block, from the first block (the pass keeps the same counts in every block) */
        size_t rows = 0, cols = 0;
        for (int64_t i = 0; s->n_blocks && i < s->bh + s->bw; i++) *(i < s->bh ? &rows : &cols) += s->bcr_keep[i] != 0;
        snprintf(buf, cap, "bcr %lldx%lld: %zu rows x %zu columns per block, %.1f%% kept", (long long)s->bh,
                 (long long)s->bw, rows, cols, pct);
        break;
    }
    }
    /* Stored zeros inside what the sparsity keeps (stray zeros of an imported model): say how full the
     * kept entries are, since the kernels compute them all. */
    size_t nonzero = 0;
    for (size_t i = 0; t->data && s->kind != IR_SPARSITY_NONE && i < n; i++) nonzero += t->data[i] != 0.0f;
    if (t->data && s->kind != IR_SPARSITY_NONE && nonzero < kept) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, ", fill %.1f%%", 100.0 * (double)nonzero / (double)kept);
    }
}

void ir_layer_sparsity_text(const ir_model *m, size_t li, char *buf, size_t cap)
{
    const ir_layer *l = &m->layers[li];
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l->n_inputs; i++) {
        const ir_tensor *t = in_t(m, l, i);
        if (!t || t->kind != IR_TENSOR_CONST || t->sparsity.kind == IR_SPARSITY_NONE) continue;
        char one[160];
        describe(t, one, sizeof one);
        int w = snprintf(buf + pos, cap - pos, "%s%s", pos ? "; " : "", one);
        if (w < 0 || (size_t)w >= cap - pos) break;
        pos += (size_t)w;
    }
    if (!pos) snprintf(buf, cap, "dense");
}

void ir_layer_patterns_text(const ir_model *m, size_t li, char *buf, size_t cap)
{
    const ir_layer *l = &m->layers[li];
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l->n_inputs; i++) {
        const ir_tensor *t = in_t(m, l, i);
        if (!t || t->kind != IR_TENSOR_CONST || t->sparsity.kind != IR_SPARSITY_PATTERN) continue;
        const ir_sparsity *s = &t->sparsity;
        char win[64];
        ir_sparsity_window_text(s, win, sizeof win);
        int w = snprintf(buf + pos, cap - pos, "%s%s", pos ? "; " : "", win);
        for (size_t p = 0; w >= 0 && (size_t)w < cap - pos && p < s->n_patterns; p++) {
            pos += (size_t)w;
            w = snprintf(buf + pos, cap - pos, " 0x%llx", (unsigned long long)s->patterns[p]);
        }
        if (w < 0 || (size_t)w >= cap - pos) break;
        pos += (size_t)w;
    }
}
