/*
 * onnx.h - internal: the ONNX importer. An ONNX ModelProto (decoded by protobuf-c with a decoder
 * generated at build time from Debian's onnx.proto) becomes a layer-wise IR model.
 *
 *   onnx_load.c      public entry points, format sniffing, protobuf-c allocator and decoding
 *   onnx_wire.c      structural check of the protobuf bytes before decoding (nesting depth, lengths)
 *   onnx_import.c    the graph walk: values and names, initializers, inputs, liveness, topological
 *                    order, node dispatch, graph outputs
 *   onnx_tensor.c    TensorProto -> host constants (every element type, raw and typed fields),
 *                    attribute access
 *   onnx_fold.c      constant folding: the shape arithmetic exporters emit, evaluated at import
 *   onnx_ops.c       the op table: each ONNX op translated into IR layers
 *   onnx_sparsity.c  recognising pruned weights (pattern, block, unstructured) from their zeros
 *
 * Every ONNX value (an initializer, a graph input or a node output) is either a host constant
 * (known at import: initializers and everything folded from them) or a run-time tensor of the IR
 * model. Constants become IR constants only when an IR layer reads them, under their ONNX names.
 */
#ifndef PDC_LIB_ONNX_H
#define PDC_LIB_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "onnx.pb-c.h"

#define ONNX_OPSET_MIN 9
#define ONNX_OPSET_MAX 17
#define ONNX_MAX_DEPTH 64          /* protobuf message nesting accepted (onnx_wire.c) */
#define ONNX_MAX_NODE_IO 64        /* inputs or outputs of one node */
/* Folding never creates a constant of more elements than this, unless an input was already that
 * large (a fuzzed Expand or ConstantOfShape must not allocate gigabytes out of a few bytes). */
#define ONNX_FOLD_MAX_NEW ((size_t)1 << 24)

/* ------------------------------------------------------------------ host constants (onnx_tensor.c) */

typedef struct onnx_const {
    int32_t dtype;                 /* ONNX element type (ONNX__TENSOR_PROTO__DATA_TYPE__*) */
    int rank;
    int64_t dims[PDC_MAX_RANK];
    size_t n;                      /* elements (may be 0) */
    float *f;                      /* float types (FLOAT, DOUBLE, FLOAT16, BFLOAT16): n values */
    int64_t *i;                    /* integer types and BOOL: n values */
    int borrowed;                  /* f is owned by the IR model (handed over when materialised) */
} onnx_const;

int onnx_dtype_is_float(int32_t dtype);
int onnx_dtype_is_int(int32_t dtype); /* integers and BOOL */
const char *onnx_dtype_name(int32_t dtype);
/* Allocates c's storage for dtype and shape (values zeroed); limit bounds the element count (0 = none). */
pdc_status onnx_const_init(const pdc_context *ctx, onnx_const *c, int32_t dtype, int rank, const int64_t *dims,
                           size_t limit);
void onnx_const_free(onnx_const *c);
pdc_status onnx_const_copy(const pdc_context *ctx, onnx_const *dst, const onnx_const *src);
/* Element k as double / int64 whatever the storage. */
double onnx_const_get_f(const onnx_const *c, size_t k);
int64_t onnx_const_get_i(const onnx_const *c, size_t k);
/* Decodes a TensorProto (initializer, Constant value, attribute tensor). `what` names it in messages,
 * e.g. "initializer 'conv1.weight'". External data is refused. */
pdc_status onnx_tensor_decode(const pdc_context *ctx, const Onnx__TensorProto *t, const char *what, onnx_const *out);
/* Copies a name into buf for messages: at most ~100 bytes, non-printable bytes as \xNN. */
const char *onnx_quote(const char *s, char *buf, size_t cap);

/* ------------------------------------------------------------------ values and the importer (onnx_import.c) */

typedef enum onnx_value_kind { ONNX_VALUE_UNDEFINED = 0, ONNX_VALUE_CONST = 1, ONNX_VALUE_RUNTIME = 2 } onnx_value_kind;

typedef struct onnx_value {
    const char *name;              /* borrowed from the proto */
    onnx_value_kind kind;
    onnx_const c;                  /* CONST */
    int tensor;                    /* IR tensor (RUNTIME; CONST once materialised as is); -1 if none */
    int uses;                      /* inputs of live nodes (and graph outputs) that read it */
    long producer;                 /* node index; -1 for initializers and graph inputs */
    Onnx__TensorProto *init;       /* initializer, decoded when first needed (then its bytes are released) */
} onnx_value;

typedef struct onnx_importer {
    pdc_context *ctx;
    ir_model *m;
    const Onnx__GraphProto *graph;
    ProtobufCAllocator *alloc;     /* the decoder's allocator, to release initializer bytes early */
    int64_t opset;
    onnx_value *values;
    size_t n_values, cap_values;
    size_t *slots;                 /* hash of value names: value index + 1, 0 = empty */
    size_t n_slots;
} onnx_importer;

/* One node being translated. */
typedef struct onnx_node {
    const Onnx__NodeProto *proto;
    size_t index;
    const char *op;                /* op_type */
    char *layer;                   /* unique IR layer name: the node name, or op_type + "_" + index */
    size_t n_in, n_out;
    onnx_value *in[ONNX_MAX_NODE_IO];   /* NULL = absent optional input */
    onnx_value *out[ONNX_MAX_NODE_IO];  /* NULL = absent output */
} onnx_node;

/* Records `status` with "node 'LAYER' (OP, opset N): <message>". */
pdc_status onnx_node_error(const onnx_importer *imp, const onnx_node *n, pdc_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
onnx_value *onnx_value_find(const onnx_importer *imp, const char *name);
/* A fresh name for a tensor or layer the importer synthesises: base, or base_1, base_2, ... (free
 * with pdc_free). Never clashes with an IR tensor/layer or an ONNX value name. */
char *onnx_unique_name(const onnx_importer *imp, const char *base, int layer);
/* The IR tensor that carries value v: run-time values have one; a float constant is added as an IR
 * constant under its ONNX name on first use. Integer constants cannot feed IR layers. */
pdc_status onnx_value_tensor(onnx_importer *imp, const onnx_node *n, onnx_value *v, int *tensor);
/* Adds IR constant data (owned, freed on failure too) under a unique name derived from base. */
pdc_status onnx_add_constant(onnx_importer *imp, const char *base, int rank, const int64_t *dims, float *data,
                             int *tensor);
/* Rank and dims of v if fully known (constants, or run-time tensors whose shape does not depend on a
 * symbolic input dim); otherwise PDC_ERR_SHAPE naming the node and the value. */
pdc_status onnx_value_shape(const onnx_importer *imp, const onnx_node *n, const onnx_value *v, const char *why,
                            int *rank, int64_t *dims);
/* Adds one IR layer for node n. in: IR tensor indices (-1 absent); out: names (NULL absent). suffix
 * NULL names the layer after the node, else "<layer>/<suffix>". Output values named in n's outputs
 * become run-time values. Errors are prefixed with the node. */
pdc_status onnx_emit(onnx_importer *imp, const onnx_node *n, const char *suffix, ir_op op, size_t n_in, const int *in,
                     size_t n_out, const char *const *out, const ir_attrs *attrs);
/* Output k of n becomes run-time tensor t (an alias, e.g. Identity) or constant c (moved). */
void onnx_define_runtime(onnx_node *n, size_t k, int tensor);
void onnx_define_const(onnx_node *n, size_t k, onnx_const *c);

/* ------------------------------------------------------------------ attributes (onnx_tensor.c) */

const Onnx__AttributeProto *onnx_attr_find(const onnx_node *n, const char *name);
/* Typed getters: absent -> dflt; present with the wrong type -> PDC_ERR_INVALID_MODEL naming it. */
pdc_status onnx_attr_int(const onnx_importer *imp, const onnx_node *n, const char *name, int64_t dflt, int64_t *out);
pdc_status onnx_attr_float(const onnx_importer *imp, const onnx_node *n, const char *name, float dflt, float *out);
/* ints: *count = 0 and *v = NULL when absent; *present tells them apart from an empty list. */
pdc_status onnx_attr_ints(const onnx_importer *imp, const onnx_node *n, const char *name, size_t *count,
                          const int64_t **v, int *present);
/* string into buf (NUL-terminated); too long or containing NUL -> PDC_ERR_INVALID_MODEL. */
pdc_status onnx_attr_string(const onnx_importer *imp, const onnx_node *n, const char *name, const char *dflt,
                            char *buf, size_t cap);

/* ------------------------------------------------------------------ ops (onnx_ops.c, onnx_fold.c) */

typedef pdc_status (*onnx_translate_fn)(onnx_importer *imp, onnx_node *n);

typedef struct onnx_op_def {
    const char *type;
    int min_in, max_in, min_out, max_out;
    onnx_translate_fn fold;        /* used when every present input is a constant; NULL: never */
    onnx_translate_fn emit;        /* otherwise; NULL: the op can only be folded */
} onnx_op_def;

const onnx_op_def *onnx_op_find(const char *type);

/* Folding functions (onnx_fold.c), one per op; inputs are constants. */
pdc_status onnx_fold_identity(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_constant(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_shape(onnx_importer *imp, onnx_node *n); /* input may be run-time with a known shape */
pdc_status onnx_fold_gather(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_concat(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_unsqueeze(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_squeeze(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_reshape(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_flatten(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_transpose(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_expand(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_constant_of_shape(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_slice(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_cast(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_range(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_equal(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_where(onnx_importer *imp, onnx_node *n);
pdc_status onnx_fold_binary(onnx_importer *imp, onnx_node *n); /* Add, Sub, Mul, Div */
/* Squeeze/Unsqueeze: the output shape for a known input shape (shared with the run-time translation). */
pdc_status onnx_squeeze_shape(const onnx_importer *imp, const onnx_node *n, int unsqueeze, int rank,
                              const int64_t *dims, int *out_rank, int64_t *out_dims);
/* Reshape: the output dims for a shape constant and an input shape (0 copies, -1 infers). */
pdc_status onnx_reshape_dims(const onnx_importer *imp, const onnx_node *n, const onnx_const *shape, int rank,
                             const int64_t *dims, int allowzero, int *out_rank, int64_t *out_dims);
/* Axes from the attribute (opset < 13 style) or from input `input` (a constant, opset >= 13 style). */
pdc_status onnx_axes(const onnx_importer *imp, const onnx_node *n, size_t input, int64_t *axes, size_t *count,
                     int *present);

/* ------------------------------------------------------------------ import (onnx_import.c) */

/* Builds an IR model from a decoded ModelProto (which may be modified: decoded initializer bytes are
 * released early through alloc to bound peak memory). */
pdc_status onnx_import(pdc_context *ctx, Onnx__ModelProto *model, ProtobufCAllocator *alloc, ir_model **out);

/* ------------------------------------------------------------------ bytes (onnx_wire.c, onnx_load.c) */

/* 1 if the bytes start like a serialised ModelProto (a binary tag no text form starts with). */
int onnx_sniff(const void *data, size_t size);
/* Walks the wire format of a ModelProto against the generated descriptors: every tag, length and
 * wire type valid and nesting at most ONNX_MAX_DEPTH (protobuf-c recurses without a limit).
 * PDC_ERR_CORRUPT names the offset, the message and the field. */
pdc_status onnx_wire_check(const pdc_context *ctx, const uint8_t *data, size_t size);
/* Decodes and imports (used by pdc_model_load_memory when onnx_sniff says so). */
pdc_status onnx_load_memory(pdc_context *ctx, const void *data, size_t size, ir_model **out);

/* ------------------------------------------------------------------ sparsity (onnx_sparsity.c) */

/* Describes the zeros of every layer weight that has no sparsity yet: 3-D conv kernels as kernel groups
 * or patterns, conv kernels (kh x kw > 1) as patterns, FC / MatMul / Gemm / 1x1-conv / LSTM / GRU matrices as blocks, else unstructured when at
 * least half the weights are zero. Weights with no zeros stay dense. */
pdc_status onnx_recognise_sparsity(ir_model *m);
/* The detectors, on a weight tensor; out->kind stays NONE when the structure is not found. */
#define ONNX_PATTERN_MAX 32
#define ONNX_BLOCK_MIN_ZERO_PCT 10
#define ONNX_UNSTRUCTURED_MIN_ZERO_PCT 50
pdc_status onnx_detect_pattern(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out);
pdc_status onnx_detect_block(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out);
pdc_status onnx_detect_bcr(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out);
/* Kernel groups of a 3-D conv weight (onnx_kgs.c): the largest power-of-two group shape whose groups'
 * masks describe the zeros (see there). */
pdc_status onnx_detect_kgs(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out);
pdc_status onnx_detect_unstructured(const pdc_context *ctx, const ir_tensor *w, ir_sparsity *out);

#endif
