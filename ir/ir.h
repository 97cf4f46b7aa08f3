/*
 * ir.h - the layer-wise IR: a model is a list of layers (kept in topological order) over named
 * tensors. Each tensor is a graph input, a constant (weights, owned by the model, with its sparsity
 * description) or an activation produced by exactly one layer. This struct *is* the public
 * pdc_model handle; only ir/ and lib/ see its layout.
 */
#ifndef PDC_IR_H
#define PDC_IR_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/context.h"
#include "pdc.h"

struct ir_tensor;

typedef enum ir_op {
#define X(id, name, min_in, max_in, min_out, max_out) IR_OP_##id,
#include "ir/ops/ops.def"
#undef X
    IR_OP_COUNT
} ir_op;

typedef struct ir_op_info {
    const char *name;
    int min_inputs, max_inputs, min_outputs, max_outputs;
} ir_op_info;

/* The case labels of the activation ops (elementwise, one input and one output), for switches over
 * an ir_op: `IR_CASE_ACTIVATION: ...`. */
#define IR_CASE_ACTIVATION                                                                                  \
    case IR_OP_RELU:                                                                                        \
    case IR_OP_CLIP:                                                                                        \
    case IR_OP_LEAKY_RELU:                                                                                  \
    case IR_OP_SIGMOID:                                                                                     \
    case IR_OP_TANH:                                                                                        \
    case IR_OP_HARDSWISH:                                                                                   \
    case IR_OP_HARDSIGMOID

const ir_op_info *ir_op_get_info(ir_op op);
/* Returns 1 and sets *op if name is a known op. */
int ir_op_from_name(const char *name, ir_op *op);

/* ---- attributes: a small ordered name -> value list, as in ONNX */
typedef enum ir_attr_type { IR_ATTR_INT = 0, IR_ATTR_INTS = 1, IR_ATTR_FLOAT = 2, IR_ATTR_STRING = 3 } ir_attr_type;

typedef struct ir_attr {
    char *name;
    ir_attr_type type;
    int64_t i;       /* INT */
    float f;         /* FLOAT */
    char *s;         /* STRING */
    size_t n;        /* INTS: count */
    int64_t *ints;   /* INTS */
} ir_attr;

typedef struct ir_attrs {
    size_t n, cap;
    ir_attr *items;
} ir_attrs;

/* The public attribute-set handle wraps a list. */
struct pdc_attrs {
    pdc_context *ctx;
    ir_attrs list;
};

/* Setters copy their arguments and replace an attribute of the same name. */
pdc_status ir_attrs_set_int(const pdc_context *ctx, ir_attrs *a, const char *name, int64_t v);
pdc_status ir_attrs_set_ints(const pdc_context *ctx, ir_attrs *a, const char *name, size_t n, const int64_t *v);
pdc_status ir_attrs_set_float(const pdc_context *ctx, ir_attrs *a, const char *name, float v);
pdc_status ir_attrs_set_string(const pdc_context *ctx, ir_attrs *a, const char *name, const char *v);
pdc_status ir_attrs_copy(const pdc_context *ctx, ir_attrs *dst, const ir_attrs *src);
void ir_attrs_free(ir_attrs *a);
/* Removes attribute `name` if present. */
void ir_attrs_remove(ir_attrs *a, const char *name);
/* 1 if a and b hold the same names with the same types and values (in any order; floats bit for bit). */
int ir_attrs_equal(const ir_attrs *a, const ir_attrs *b);
const ir_attr *ir_attrs_find(const ir_attrs *a, const char *name);
/* Typed getters with defaults; a present attribute of the wrong type counts as absent
 * (the verifier reports wrong types, see ir_attr_expect). */
int64_t ir_attr_int(const ir_attrs *a, const char *name, int64_t dflt);
float ir_attr_float(const ir_attrs *a, const char *name, float dflt);
const char *ir_attr_string(const ir_attrs *a, const char *name, const char *dflt);
/* Returns the list (and *n) or NULL (and *n = 0) if absent. */
const int64_t *ir_attr_ints(const ir_attrs *a, const char *name, size_t *n);
/* 1 if names are [A-Za-z_][A-Za-z0-9_]*. */
int ir_attr_name_valid(const char *name);

/* ---- sparsity of a constant tensor: a tagged description, never just zeros */
typedef enum ir_sparsity_kind {
    IR_SPARSITY_NONE = 0,
    IR_SPARSITY_PATTERN = 1,      /* 2-D/3-D conv weights: pattern set + per-kernel pattern id (-1 = pruned
                                     kernel), optionally kernel groups that share one pattern (3-D KGS) */
    IR_SPARSITY_BLOCK = 2,        /* matrix view in blocks of bh x bw, row-major block mask */
    IR_SPARSITY_UNSTRUCTURED = 3, /* per-element mask */
    IR_SPARSITY_BCR = 4           /* block column-row: matrix view in blocks of bh x bw, per block kept rows and columns */
} ir_sparsity_kind;

#define IR_MAX_PATTERN_WINDOW 64  /* kd*kh*kw must fit in a uint64 bitmask */

typedef struct ir_sparsity {
    ir_sparsity_kind kind;
    /* PATTERN: kh x kw window (2-D conv, kd = 0) or kd x kh x kw (3-D conv, kd >= 1); bit
     * p = (depth*kh + row)*kw + col of patterns[i] is kept */
    int64_t kd, kh, kw;
    /* Kernel groups (0x0: none): the [O, C/group] kernel grid is cut into go x gc tiles (edge tiles may
     * be partial) whose kernels all have the same pattern id or -1 - RT3D's kernel-group sparsity. */
    int64_t go, gc;
    size_t n_patterns;
    uint64_t *patterns;
    size_t n_kernels;          /* O * (C/group) */
    int32_t *kernel_pattern;   /* per kernel o*(C/group)+c: pattern index or -1 (pruned) */
    /* BLOCK */
    int64_t bh, bw;
    size_t n_blocks;
    uint8_t *block_mask;       /* 1 = kept */
    /* BCR (bh, bw, n_blocks as BLOCK, blocks row-major): block b keeps element (i, j) of its bh x bw window when
     * bcr_keep[b*(bh+bw) + i] (row i) and bcr_keep[b*(bh+bw) + bh + j] (column j) are both 1; flags of rows or
     * columns past the matrix edge are 0 */
    uint8_t *bcr_keep;
    /* UNSTRUCTURED */
    size_t n_mask;
    uint8_t *mask;             /* 1 = kept, one per element */
} ir_sparsity;

void ir_sparsity_free(ir_sparsity *s);
pdc_status ir_sparsity_copy(const pdc_context *ctx, ir_sparsity *dst, const ir_sparsity *src);
/* 1 if a and b describe the same sparsity (kind, shapes, patterns, masks). */
int ir_sparsity_equal(const ir_sparsity *a, const ir_sparsity *b);
/* Entries of a BCR description's bcr_keep (n_blocks * (bh + bw)); 0 for other kinds. */
size_t ir_sparsity_bcr_len(const ir_sparsity *s);
/* The matrix view used by block sparsity (see pdc_model_set_sparsity_block). */
void ir_weight_matrix_view(const struct ir_tensor *w, int64_t *rows, int64_t *cols);
/* The transpose [cols, rows] of constant matrix t with its block or unstructured sparsity (blocks
 * bh x bw become bw x bh), into *dst, which borrows t's name and owns its data and masks (free with
 * ir_matrix_transpose_free). PDC_ERR_UNSUPPORTED unless t is a constant of rank 2 without patterns. */
pdc_status ir_matrix_transpose(const pdc_context *ctx, const struct ir_tensor *t, struct ir_tensor *dst);
void ir_matrix_transpose_free(struct ir_tensor *t);
/* Positions of a pattern window: kh*kw, times kd for a 3-D window. */
size_t ir_sparsity_window(const ir_sparsity *s);
/* "3x3" or "3x3x3": the pattern window as text, into buf. */
void ir_sparsity_window_text(const ir_sparsity *s, char *buf, size_t cap);
/* 1 if element `index` of tensor t is kept by its sparsity (always 1 when dense). */
int ir_sparsity_keeps(const struct ir_tensor *t, size_t index);
/* keep[i] = 1 if element first + i (i < n) of constant t is kept by sparsity s (t's own or one about to be
 * attached), else 0: ir_sparsity_keeps for a run of elements, without its per-element arithmetic. */
void ir_sparsity_mask_range(const struct ir_tensor *t, const ir_sparsity *s, size_t first, size_t n, uint8_t *keep);
/* Number of elements kept. */
size_t ir_sparsity_kept(const struct ir_tensor *t);
/* Checks s against constant t's shape and weights (pruned weights must be exactly 0). */
pdc_status ir_sparsity_validate(const pdc_context *ctx, const struct ir_tensor *t, const ir_sparsity *s);

/* ---- tensors and layers */
/* Largest dim and attribute value (strides, pads, ...): keeps every shape formula in int64. */
#define IR_DIM_MAX INT32_MAX
typedef enum ir_tensor_kind { IR_TENSOR_INPUT = 0, IR_TENSOR_CONST = 1, IR_TENSOR_ACT = 2 } ir_tensor_kind;

typedef struct ir_tensor {
    char *name;
    ir_tensor_kind kind;
    int rank;
    int64_t dims[PDC_MAX_RANK];   /* -1 = symbolic (inputs, and activations depending on them) */
    float *data;                  /* CONST only: prod(dims) floats, owned */
    ir_sparsity sparsity;         /* CONST only */
    int producer;                 /* producing layer, -1 for inputs and constants */
} ir_tensor;

typedef struct ir_layer {
    char *name;
    ir_op op;
    size_t n_inputs, n_outputs;
    int *inputs;                  /* tensor indices; -1 = absent optional input */
    int *outputs;                 /* tensor indices; -1 = absent optional output (not the first) */
    ir_attrs attrs;
} ir_layer;

/* A hash index of tensor or layer names (ir/model.c): open addressing, slots hold index + 1. It is
 * kept in step by the functions that add, remove, rename or reorder tensors and layers; lookups
 * trust it only while it covers exactly the current count, else they scan (never a wrong answer). */
typedef struct ir_name_index {
    uint32_t *slots;
    size_t cap;                   /* a power of two, or 0 */
    size_t count;                 /* names indexed: entries [0, count) */
} ir_name_index;

struct pdc_model {
    pdc_context *ctx;
    char *name;
    size_t n_tensors, cap_tensors;
    ir_tensor *tensors;
    size_t n_layers, cap_layers;
    ir_layer *layers;
    size_t n_inputs, cap_inputs;
    int *inputs;
    size_t n_outputs, cap_outputs;
    int *outputs;
    char *info_text;              /* scratch for pdc_model_layer_string */
    ir_name_index tensor_names, layer_names;
};

typedef struct pdc_model ir_model;

/* ---- model construction (ir/model.c). All return a status with the message set on ctx. */
pdc_status ir_model_create(pdc_context *ctx, const char *name, ir_model **out);
void ir_model_destroy(ir_model *m);
/* Deep copy (programs keep their own copy, independent of the user's model). */
pdc_status ir_model_clone(const ir_model *m, ir_model **out);
/* Index of the tensor / layer of that name, or -1: a hash lookup, so building a model is linear in
 * its size (it was a scan, and import quadratic). */
int ir_model_find_tensor(const ir_model *m, const char *name);
/* Rebuilds both name indexes: call after renaming, removing or reordering tensors or layers in place. */
void ir_model_reindex(ir_model *m);
/* Index of the first NaN or infinity in v[0..n), or n if all are finite. */
size_t ir_first_nonfinite(const float *v, size_t n);
/* "NaN", "inf" or "-inf" for a non-finite x. */
const char *ir_nonfinite_name(float x);
/* PDC_OK if every constant of m is finite, or if the context option allow_nonfinite is set; else
 * PDC_ERR_NUMERIC "constant 'w' holds NaN at element 5 of 100 (...allow_nonfinite...)". */
pdc_status ir_model_check_finite(const ir_model *m);
/* For the context option check_finite: PDC_OK if the n floats v of tensor t, written by layer l, are
 * all finite; else PDC_ERR_NUMERIC "check_finite: layer 'c1' (conv) produced NaN at element 5 of
 * its output 'y' (1x8x4x4)", prefixed by the caller with its target. */
pdc_status ir_check_layer_output(const ir_model *m, const ir_layer *l, int t, const float *v, size_t n);
/* 1 if tensor t is a graph output. */
int ir_model_is_output(const ir_model *m, int t);
/* Number of places that read tensor t: layer input slots plus graph outputs. */
size_t ir_model_tensor_uses(const ir_model *m, int t);
int ir_model_find_layer(const ir_model *m, const char *name);
/* Tensor/layer/model names: 1..4096 bytes, no control characters (any other UTF-8 is fine). */
int ir_name_valid(const char *name);
pdc_status ir_model_add_input(ir_model *m, const char *name, int rank, const int64_t *dims);
/* Takes ownership of data (allocated with pdc_alloc*) on success *and* on failure. data may be NULL:
 * zero-filled. */
pdc_status ir_model_add_constant_owned(ir_model *m, const char *name, int rank, const int64_t *dims, float *data);
/* inputs: tensor names, NULL or "" for absent optional inputs; outputs: NULL or "" for absent optional
 * outputs. Checks arity, infers output shapes. attrs copied (may be NULL). */
pdc_status ir_model_add_layer(ir_model *m, const char *name, ir_op op, size_t n_in, const char *const *inputs,
                              size_t n_out, const char *const *outputs, const ir_attrs *attrs);
pdc_status ir_model_mark_output(ir_model *m, const char *name);
/* Sets a tensor's sparsity (validated against the tensor's shape and data); takes ownership of
 * s's arrays on success and on failure. */
pdc_status ir_model_set_sparsity(ir_model *m, int tensor, ir_sparsity *s);
/* Fixes a symbolic input's shape and re-infers every activation shape. */
pdc_status ir_model_set_input_shape(ir_model *m, const char *name, int rank, const int64_t *dims);
/* Re-runs shape inference over all layers in order. */
pdc_status ir_model_infer_shapes(ir_model *m);

/* ---- rewriting, for passes (ir/model.c) */
/* Makes every layer input and graph output that refers to tensor `from` refer to `to`. */
void ir_model_replace_uses(ir_model *m, int from, int to);
/* Sets input slot i of layer li to tensor t (-1 = absent), adding absent slots up to i if needed. */
pdc_status ir_layer_set_input(ir_model *m, size_t li, size_t i, int t);
/* Removes the layers with drop_layer[i] != 0 and the tensors with drop_tensor[t] != 0 (either may be
 * NULL), keeping the order of the rest (so layers stay topologically sorted) and renumbering every
 * tensor and layer index. If a kept layer, graph input or output would refer to something removed,
 * fails with PDC_ERR_INTERNAL and changes nothing. */
pdc_status ir_model_compact(ir_model *m, const uint8_t *drop_layer, const uint8_t *drop_tensor);
/* Puts the layers in a new order: new layer i is old layer order[i] (a permutation, which must keep
 * every layer after the producers of its inputs). */
pdc_status ir_model_reorder_layers(ir_model *m, const size_t *order);
/* What a run that wants only some graph outputs (want[i] != 0 for output i) must execute: live[li] = 1
 * for the layers those outputs depend on, 0 for the rest (one flag per layer); input_needed[i] = 1 for
 * the graph inputs they read. PDC_ERR_OUT_OF_MEMORY. */
pdc_status ir_model_live_layers(const ir_model *m, const uint8_t *want, uint8_t *live, uint8_t *input_needed);

/* ---- groups (ir/group.c) */
/* One model holding models[0..n-1] side by side (see pdc_model_group): the layers and tensors of model k
 * are named "k/NAME"; graph inputs keep their names and are one input for every model that has an
 * input of that name (which must then have the same shape) when share_inputs, else they are "k/NAME"
 * too. Outputs follow the models' order. Memory plans are dropped. */
pdc_status ir_model_group(pdc_context *ctx, const ir_model *const *models, size_t n, int share_inputs,
                          ir_model **out);

/* ---- shapes (ir/infer.c) */
/* Infers the output shapes of layer li from its input shapes; message names the layer. */
pdc_status ir_infer_layer(ir_model *m, size_t li);
/* Elements of a shape; returns 0 on overflow or symbolic dims (and sets *n = 0). */
int ir_numel(int rank, const int64_t *dims, size_t *n);
size_t ir_tensor_numel(const ir_tensor *t); /* 0 if symbolic */
/* "1x3x224x224" ("?" for symbolic dims) into buf. */
void ir_format_shape(int rank, const int64_t *dims, char *buf, size_t cap);

/* ---- verifier (ir/verify.c) */
pdc_status ir_verify(const ir_model *m);

/* ---- statistics (ir/stats.c) */
typedef struct ir_layer_stats {
    int64_t weights, kept_weights, dense_flops, effective_flops, bytes;
    int overflow; /* a FLOP count exceeded int64: dense/effective_flops are INT64_MAX, not the count */
} ir_layer_stats;
void ir_layer_stats_compute(const ir_model *m, size_t li, ir_layer_stats *st);
/* "dense", "pattern 3x3 (8 patterns, 50% kernels kept)", ... into buf. */
void ir_layer_sparsity_text(const ir_model *m, size_t li, char *buf, size_t cap);
/* "3x3 0x1b 0x36 ..." for each pattern-sparse weight of layer li ("; " between weights), "" if none. */
void ir_layer_patterns_text(const ir_model *m, size_t li, char *buf, size_t cap);

/* ---- text form (ir/text/text_print.c, ir/text/text_parse.c) */
pdc_status ir_print(const ir_model *m, uint32_t flags, char **text_out);
pdc_status ir_parse(pdc_context *ctx, const char *text, size_t len, ir_model **out);

#endif
