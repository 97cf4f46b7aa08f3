/*
 * gpu_cost.c - the gpu target's roofline latency model (gpu_cost.h).
 */
#include <string.h>

#include "ir/ops/params.h"
#include "lib/cost/cost.h"
#include "lib/cost/gpu_cost.h"

/* Stated, not measured (no GPU was at hand): pdc's kernels are plain CUDA-core code without tensor
 * cores; the tiled ones reuse operands through shared memory, the thread-per-output ones re-read
 * them from L1/L2, and the sparse ones add index loads and divergence. A memory-bound kernel
 * reaches about 60% of the bus's peak, an uncoalesced row-per-thread one less. */
const cost_gpu_coef cost_gpu_coefs[COST_GPU_N_KINDS] = {
    [COST_GPU_CONV_TILED] = {0.35, 0.6}, [COST_GPU_CONV_DIRECT] = {0.12, 0.6}, [COST_GPU_GEMM_TILED] = {0.35, 0.6},
    [COST_GPU_GEMV] = {0.12, 0.3},       [COST_GPU_GEMM_SPARSE] = {0.06, 0.3}, [COST_GPU_RNN] = {0.12, 0.3},
    [COST_GPU_MEMORY] = {0.25, 0.6},
};

static const char *const kind_names[COST_GPU_N_KINDS] = {"conv_tiled", "conv_direct", "gemm_tiled", "gemv",
                                                         "gemm_sparse", "rnn", "memory"};

const char *cost_gpu_kind_name(cost_gpu_kind k) { return (unsigned)k < COST_GPU_N_KINDS ? kind_names[k] : "?"; }

cost_gpu_kind cost_gpu_kind_of(const ir_model *m, size_t li, double *launches)
{
    const ir_layer *l = &m->layers[li];
    *launches = 1;
    const cost_family f = cost_family_of(m, li);
    switch (l->op) {
    case IR_OP_CONV: {
        ir_window_params p;
        if (ir_window_params_get(m, l, &p) || (f != COST_CONV_DENSE && f != COST_CONV_1X1)) return COST_GPU_CONV_DIRECT;
        int64_t pixels = 1;
        for (int i = 0; i < p.nsp; i++) pixels *= p.out[i];
        return p.nsp <= 2 && pixels >= 256 ? COST_GPU_CONV_TILED : COST_GPU_CONV_DIRECT;
    }
    case IR_OP_FC:
    case IR_OP_GEMM:
    case IR_OP_MATMUL: {
        if (f == COST_FC_SPARSE) return COST_GPU_GEMM_SPARSE;
        const ir_tensor *y = l->n_outputs && l->outputs[0] >= 0 ? &m->tensors[l->outputs[0]] : NULL;
        if (!y || y->rank < 1) return COST_GPU_GEMV;
        int64_t n = y->dims[y->rank - 1], rows = n > 0 ? (int64_t)ir_tensor_numel(y) / n : 0;
        return rows >= 16 && n >= 16 ? COST_GPU_GEMM_TILED : COST_GPU_GEMV;
    }
    case IR_OP_LSTM:
    case IR_OP_GRU: {
        ir_rnn_params r;
        if (!ir_rnn_params_get(m, l, &r))
            *launches = 1.0 + (double)r.seq * (double)r.dirs * (l->op == IR_OP_LSTM ? 2.0 : 3.0);
        return COST_GPU_RNN;
    }
    default: return COST_GPU_MEMORY;
    }
}

pdc_status cost_gpu_predict_model(const ir_model *m, const gpu_props *g, double *total, double *per_layer,
                                  double *copies_ms)
{
    cost_layer *f = pdc_calloc(m->ctx, m->n_layers ? m->n_layers : 1, sizeof *f);
    if (!f) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = cost_model_facts(m, f);
    const double peak = gpu_props_peak_flops(g), bw = gpu_props_bandwidth(g);
    double sum = 0;
    for (size_t i = 0; !st && i < m->n_layers; i++) {
        double launches = 1;
        const cost_gpu_coef *c = &cost_gpu_coefs[cost_gpu_kind_of(m, i, &launches)];
        const double compute = f[i].flops / (peak * c->flop_eff), memory = (f[i].wbytes + f[i].abytes) / (bw * c->byte_eff);
        const double t = launches * COST_GPU_LAUNCH_US * 1e-3 + 1e3 * (compute > memory ? compute : memory);
        if (per_layer) per_layer[i] = t;
        sum += t;
    }
    pdc_free(f);
    if (st) return st;
    double io = 0;
    for (size_t i = 0; i < m->n_inputs; i++) io += (double)ir_tensor_numel(&m->tensors[m->inputs[i]]) * 4.0;
    for (size_t i = 0; i < m->n_outputs; i++) io += (double)ir_tensor_numel(&m->tensors[m->outputs[i]]) * 4.0;
    const double copies = COST_GPU_RUN_US * 1e-3 + 1e3 * io / (COST_GPU_PCIE_GBS * 1e9);
    if (copies_ms) *copies_ms = copies;
    *total = sum + copies;
    return PDC_OK;
}
