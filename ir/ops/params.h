/*
 * params.h - an op's attributes decoded into plain structs with defaults applied and checked.
 * Shape inference, the verifier, statistics and every backend read ops through these functions, so
 * an attribute means the same thing everywhere.
 */
#ifndef PDC_IR_PARAMS_H
#define PDC_IR_PARAMS_H

#include "ir/ir.h"

#define IR_MAX_SPATIAL 3

/* Error naming the layer and its op: "layer 'conv1' (conv): ..." (shared by inference and decoding). */
#define IR_LAYER_ERR(m, l, status, fmt, ...)                                                              \
    pdc_error((m)->ctx, (status), "layer '%s' (%s): " fmt, (l)->name, ir_op_get_info((l)->op)->name, \
              __VA_ARGS__)

/* conv, maxpool, avgpool. For pools: c == o, group == c, k from kernel_shape, no weights. */
typedef struct ir_window_params {
    int nsp;                           /* spatial dims: 1..3 */
    int64_t n, c, o, group;            /* batch, in channels, out channels, groups */
    int64_t in[IR_MAX_SPATIAL];        /* input spatial size */
    int64_t out[IR_MAX_SPATIAL];       /* output spatial size */
    int64_t k[IR_MAX_SPATIAL];         /* kernel */
    int64_t stride[IR_MAX_SPATIAL];
    int64_t pad_begin[IR_MAX_SPATIAL], pad_end[IR_MAX_SPATIAL];
    int64_t dil[IR_MAX_SPATIAL];
    int ceil_mode;                     /* pools */
    int count_include_pad;             /* avgpool */
    int has_bias;                      /* conv */
} ir_window_params;

/* Decodes conv/maxpool/avgpool attrs against the input (and weight) shapes. Input dims must be
 * concrete. Errors name the layer. */
pdc_status ir_window_params_get(const ir_model *m, const ir_layer *l, ir_window_params *p);
/* A 1-D window as the 2-D window of height 1 it equals (dim 0 of size, kernel, stride and dilation
 * 1, no padding; dim 1 the 1-D one), for kernels written for 2-D; other windows are left as they are. */
void ir_window_params_as_2d(ir_window_params *p);
/* Any window as the 3-D window it equals, in the same way (leading dims of size 1), for kernels
 * written for 3-D. */
void ir_window_params_as_3d(ir_window_params *p);

typedef struct ir_rnn_params {
    int64_t seq, batch, input, hidden, dirs;
    int reverse_only;                  /* direction == "reverse" */
    int gates;                         /* 4 (lstm) or 3 (gru) */
    int linear_before_reset;           /* gru */
} ir_rnn_params;
pdc_status ir_rnn_params_get(const ir_model *m, const ir_layer *l, ir_rnn_params *p);

typedef struct ir_gemm_params {
    int64_t m, k, n;
    int trans_a, trans_b;
    float alpha, beta;
} ir_gemm_params;
/* gemm and fc (fc: a = x flattened [N,K], b = w [O,K] with trans_b = 1, alpha = beta = 1). */
pdc_status ir_gemm_params_get(const ir_model *m, const ir_layer *l, ir_gemm_params *p);

/* Normalises a possibly negative axis against rank; error names the layer. */
pdc_status ir_axis_get(const ir_model *m, const ir_layer *l, int64_t axis, int rank, int *out);

/* Attributes passes attach to weighted layers (ir/ops/fused.c; ops.def "Pass attributes"). */
typedef enum ir_act_kind {
    IR_ACT_NONE = 0, IR_ACT_RELU, IR_ACT_CLIP, IR_ACT_LEAKY_RELU, IR_ACT_SIGMOID, IR_ACT_TANH, IR_ACT_HARDSWISH
} ir_act_kind;

typedef struct ir_fused_params {
    ir_act_kind act;           /* activation applied to output 0 after the op (conv, fc, gemm) */
    float act_min, act_max;    /* clip bounds (default -inf, +inf) */
    float act_alpha;           /* leaky_relu slope (default 0.01) */
    size_t n_perm;             /* conv: entries of out_perm, 0 = none */
    const int64_t *out_perm;   /* stored filter j computes output channel out_perm[j]; borrowed from the attrs */
} ir_fused_params;

/* Decodes and checks activation/act_min/act_max/act_alpha and out_perm of any layer (they are
 * refused where they do not belong). Called by shape inference, so the verifier checks them. */
pdc_status ir_fused_params_get(const ir_model *m, const ir_layer *l, ir_fused_params *p);
/* The activation of p applied to one value. */
float ir_act_apply(const ir_fused_params *p, float x);
/* "relu", "clip", ...; "none" for IR_ACT_NONE. */
const char *ir_act_name(ir_act_kind act);
/* 1 and *act if op is an activation that can be fused. */
int ir_act_from_op(ir_op op, ir_act_kind *act);
/* 1 and *p (no out_perm) if layer l is such an activation: its kind, and its clip bounds and
 * leaky_relu slope from its attributes, with the reference kernels' defaults. */
int ir_act_layer_params(const ir_layer *l, ir_fused_params *p);

#endif
