/*
 * gpu_cost.h - internal: the analytic latency model of the "gpu" target (docs/predict.md, "The gpu
 * target"). No calibration: a roofline per layer from the device's attributes (gpu_props: SMs,
 * clocks, memory bus), with an efficiency per kernel kind of the gpu backend that is stated, not
 * measured (no GPU was at hand: the constants are unvalidated on real hardware).
 *
 *     t_layer = launches * launch_us + max(FLOPs / (peak FLOP/s * flop_eff), bytes / (bandwidth * byte_eff))
 *     t_model = sum of t_layer + (graph input and output bytes) / pcie + a fixed cost per run
 *
 * bytes = kept weights + activations read and written, FLOPs = effective FLOPs (cost_model_facts);
 * launches: 1 per layer (the gpu target fuses no epilogues), an lstm/gru 1 + steps x directions x
 * (2 lstm, 3 gru), as gpu_rnn.c launches them.
 */
#ifndef PDC_LIB_GPU_COST_H
#define PDC_LIB_GPU_COST_H

#include "backends/gpu/gpu_props.h"
#include "ir/ir.h"

/* The gpu backend's kernel kinds as the model tells them apart. */
typedef enum cost_gpu_kind {
    COST_GPU_CONV_TILED = 0, /* gpu_conv.c: dense conv, groups 1, >= 256 output pixels (shared-memory tiles) */
    COST_GPU_CONV_DIRECT,    /* gpu_conv.c: a thread per output (pattern-sparse, grouped, small) */
    COST_GPU_GEMM_TILED,     /* gpu_gemm.c: dense, M and N >= 16 */
    COST_GPU_GEMV,           /* gpu_gemm.c: dense, a thread per output (batch-1 fc) */
    COST_GPU_GEMM_SPARSE,    /* gpu_gemm.c: block-sparse CSR, a thread per output */
    COST_GPU_RNN,            /* gpu_rnn.c: gate GEMVs and cell update per step */
    COST_GPU_MEMORY,         /* every other op: a thread per element */
    COST_GPU_N_KINDS
} cost_gpu_kind;

typedef struct cost_gpu_coef {
    double flop_eff, byte_eff; /* shares of the peak FLOP/s and of the memory bandwidth reached */
} cost_gpu_coef;

/* The stated constants (gpu_cost.c). */
#define COST_GPU_LAUNCH_US 5.0   /* per kernel launch, queued back to back */
#define COST_GPU_RUN_US 20.0     /* per run: the copies' and the final synchronisation's fixed costs */
#define COST_GPU_PCIE_GBS 12.0   /* host <-> device copies of the graph's inputs and outputs */
extern const cost_gpu_coef cost_gpu_coefs[COST_GPU_N_KINDS];
const char *cost_gpu_kind_name(cost_gpu_kind k);

/* The kind and number of launches of layer li. */
cost_gpu_kind cost_gpu_kind_of(const ir_model *m, size_t li, double *launches);

/* Predicted ms of the whole model on device g: *total (layers + copies), per_layer[i] (if not NULL),
 * *copies_ms (if not NULL: the per-run copies and fixed cost). Shapes must be concrete. */
pdc_status cost_gpu_predict_model(const ir_model *m, const gpu_props *g, double *total, double *per_layer,
                                  double *copies_ms);

#endif
