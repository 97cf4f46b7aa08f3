/*
 * prune_block.c - the prune-block pass: block sparsity for the weight matrices of fc, gemm and
 * matmul (a constant right operand), 1x1 conv and lstm/gru gates (project_block, the code behind
 * pdc_prune_project_block). Blocks are chosen in the ONNX/PyTorch [out, in] layout: fc weights,
 * gemm with transB = 1, 1x1 conv weights [O, C/group] and lstm/gru gate stacks [D*gates*H, in] are
 * stored that way; matmul and gemm (transB = 0) operands [in, out] are transposed for the choice, and
 * their IR block mask describes the stored layout (blocks bw x bh). By default 1x1 convs and the
 * stem are left alone (pass_default_skip).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "passes/project.h"

size_t pass_matrix_slots(const ir_model *m, const ir_layer *l, ir_sparsity_kind kind, size_t *slots, int *transposed)
{
    const ir_tensor *w = pass_const_input(m, l, 1);
    size_t n = 0;
    switch (l->op) {
    case IR_OP_FC:
        if (w && w->rank == 2) slots[n] = 1, transposed[n++] = 0;
        break;
    case IR_OP_CONV:
        if (w && w->rank >= 4) {
            int one = 1;
            for (int i = 2; i < w->rank; i++) one &= w->dims[i] == 1;
            if (one) slots[n] = 1, transposed[n++] = 0;
        }
        break;
    case IR_OP_GEMM:
        if (w && w->rank == 2 && !pass_const_input(m, l, 0))
            slots[n] = 1, transposed[n++] = ir_attr_int(&l->attrs, "transB", 0) == 0;
        break;
    case IR_OP_MATMUL:
        if (w && w->rank == 2 && !pass_const_input(m, l, 0)) slots[n] = 1, transposed[n++] = 1;
        break;
    case IR_OP_LSTM:
    case IR_OP_GRU:
        if (w) slots[n] = 1, transposed[n++] = 0;
        if (pass_const_input(m, l, 2)) slots[n] = 2, transposed[n++] = 0;
        break;
    default: break;
    }
    /* only dense weights or those of the kind asked for */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ir_tensor *t = &m->tensors[l->inputs[slots[i]]];
        if (t->sparsity.kind != IR_SPARSITY_NONE && t->sparsity.kind != kind) continue;
        slots[k] = slots[i];
        transposed[k++] = transposed[i];
    }
    return k;
}

static size_t block_slots(const ir_model *m, const ir_layer *l, size_t *slots, int *transposed)
{
    return pass_matrix_slots(m, l, IR_SPARSITY_BLOCK, slots, transposed);
}

static pdc_status prune_matrix(ir_model *m, const ir_layer *l, int t, int transposed, const pass_options *opt)
{
    const pdc_context *ctx = m->ctx;
    ir_tensor *w = &m->tensors[t];
    int64_t bh = opt->block_h, bw = opt->block_w, rows, cols; /* [out, in] view */
    size_t n = ir_tensor_numel(w);
    float *a = w->data, *tmp = NULL;
    if (transposed) { /* stored [in, out] = [K, N] */
        int64_t k = w->dims[0], nn = w->dims[1];
        rows = nn;
        cols = k;
        if (!(tmp = pdc_alloc(ctx, n * sizeof *tmp))) return PDC_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < nn; j++) tmp[j * k + i] = w->data[i * nn + j];
        a = tmp;
    } else {
        ir_weight_matrix_view(w, &rows, &cols);
    }
    size_t nbr = (size_t)((rows + bh - 1) / bh), nbc = (size_t)((cols + bw - 1) / bw), nb = nbr * nbc;
    uint8_t *keep = pdc_alloc(ctx, nb);
    ir_sparsity s = {.kind = IR_SPARSITY_BLOCK, .bh = transposed ? bw : bh, .bw = transposed ? bh : bw, .n_blocks = nb};
    s.block_mask = pdc_alloc(ctx, nb);
    pdc_status st = keep && s.block_mask ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    char who[300];
    snprintf(who, sizeof who, "layer '%.256s'", l->name);
    if (!st) st = project_block(ctx, who, a, rows, cols, bh, bw, pass_rate_for(&opt->block_rate, l->name), keep);
    if (!st && transposed) {
        int64_t k = w->dims[0], nn = w->dims[1];
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < nn; j++) w->data[i * nn + j] = tmp[j * k + i];
        /* stored view [K, N] in bw x bh blocks: nbc block rows, nbr block columns */
        for (size_t i = 0; i < nbc; i++)
            for (size_t j = 0; j < nbr; j++) s.block_mask[i * nbr + j] = keep[j * nbc + i];
    } else if (!st) {
        memcpy(s.block_mask, keep, nb);
    }
    pdc_free(tmp);
    pdc_free(keep);
    if (st) {
        ir_sparsity_free(&s);
        return st;
    }
    return ir_model_set_sparsity(m, t, &s);
}

static void note_block(const ir_model *m, const ir_layer *l, const pass_options *opt)
{
    pdc_note(m->ctx, PDC_NOTE_PRUNED, "prune-block", l->name, "block %" PRId64 "x%" PRId64 " %.3g%%", opt->block_h,
             opt->block_w, pass_rate_for(&opt->block_rate, l->name) * 100.0);
}

pdc_status pass_prune_block(ir_model *m, const pass_options *opt)
{
    static const pass_pruner p = {"prune-block", PASS_FAMILY_BLOCK, block_slots, prune_matrix, note_block};
    return pass_prune_layers(m, opt, &p);
}
