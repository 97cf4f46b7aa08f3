/*
 * pdc.h - the one public header of pdc, a compiler for pruned deep neural networks.
 *
 * Conventions (see docs/api.md):
 *  - Handles are opaque: pdc_context, pdc_model, pdc_attrs, pdc_program, pdc_tensor.
 *  - Every call that can fail returns pdc_status; results come through trailing *_out parameters.
 *    A failed call leaves its out-parameters and the caller's data unchanged.
 *  - pdc_context_last_error(ctx) describes the calling thread's most recent failure on ctx.
 *  - Objects come in create/destroy pairs; destroy accepts NULL.
 *  - Pointer parameters are not kept after return unless the doc says "borrowed".
 *  - Thread-safety (each function's doc states its own; test/reliability/test_threads.c checks the promises):
 *    - a context, a model, an attrs object, a tensor and a trainer are used by one thread at a
 *      time: two calls that take the same one, as any argument, must not overlap;
 *    - except that a compiled pdc_program may be run from many threads at once (pdc_program_run),
 *      each run with its own output tensors; concurrent runs may share input tensors (they are
 *      only read). While runs are in flight, the program's info calls may be made from any thread,
 *      and one other thread may use the program's context for any call except
 *      pdc_context_set_option and pdc_context_destroy;
 *    - pdc_version_*, pdc_status_string, pdc_string_free and pdc_pass_info: any thread;
 *    - different contexts, and everything created from them, are fully independent.
 */
#ifndef PDC_H
#define PDC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(PDC_BUILDING)
#  define PDC_API __declspec(dllexport)
#elif defined(_WIN32)
#  define PDC_API __declspec(dllimport)
#elif defined(__GNUC__)
#  define PDC_API __attribute__((visibility("default")))
#else
#  define PDC_API
#endif

#define PDC_VERSION_MAJOR 0
#define PDC_VERSION_MINOR 4
#define PDC_VERSION_PATCH 0
/** MAJOR*1000000 + MINOR*1000 + PATCH, as pdc_version_number() returns at run time. */
#define PDC_VERSION_NUMBER (PDC_VERSION_MAJOR * 1000000 + PDC_VERSION_MINOR * 1000 + PDC_VERSION_PATCH)

/** Largest tensor rank pdc handles. */
#define PDC_MAX_RANK 8

/** Status codes. Values are part of the ABI: only ever appended, never renumbered. */
typedef enum pdc_status {
    PDC_OK = 0,
    PDC_ERR_INVALID_ARG = 1,     /**< NULL pointer, bad option name/value, out-of-range index */
    PDC_ERR_OUT_OF_MEMORY = 2,   /**< an allocation failed or would exceed a limit */
    PDC_ERR_IO = 3,              /**< a file could not be opened, read or written */
    PDC_ERR_PARSE = 4,           /**< malformed IR text or model file (message has line:column or offset) */
    PDC_ERR_CORRUPT = 5,         /**< wrong magic, version or checksum, truncated file */
    PDC_ERR_INVALID_MODEL = 6,   /**< the verifier rejected the model (message names layer and fact) */
    PDC_ERR_SHAPE = 7,           /**< shapes do not agree, or a symbolic shape is unresolved */
    PDC_ERR_UNSUPPORTED = 8,     /**< known but unsupported op, dtype or target feature */
    PDC_ERR_UNKNOWN_TARGET = 9,  /**< target name not known */
    PDC_ERR_NO_DEVICE = 10,      /**< target known but its device or driver is absent */
    PDC_ERR_INVALID_STATE = 11,  /**< call made out of order */
    PDC_ERR_OVERFLOW = 12,       /**< sizes or counts overflow */
    PDC_ERR_NOT_FOUND = 13,      /**< no tensor/layer/input of that name */
    PDC_ERR_INTERNAL = 14,       /**< a bug in pdc: please report it */
    PDC_ERR_NUMERIC = 15         /**< a NaN or infinity appeared (e.g. a training loss; message names the step) */
} pdc_status;

typedef struct pdc_context pdc_context;
typedef struct pdc_model pdc_model;
typedef struct pdc_attrs pdc_attrs;
typedef struct pdc_program pdc_program;
typedef struct pdc_tensor pdc_tensor;

/* ------------------------------------------------------------------ version, status */

/** Run-time twin of PDC_VERSION_NUMBER. Thread-safety: any thread. */
PDC_API uint32_t pdc_version_number(void);
/** "MAJOR.MINOR.PATCH", static storage. Thread-safety: any thread. */
PDC_API const char *pdc_version_string(void);
/** Short constant name of a status, e.g. "PDC_ERR_PARSE"; "unknown status" for other values.
 * Thread-safety: any thread. */
PDC_API const char *pdc_status_string(pdc_status status);
/** Frees a string that pdc returned through a char ** out-parameter. Accepts NULL. Thread-safety: any thread. */
PDC_API void pdc_string_free(char *s);

/* ------------------------------------------------------------------ context */

/**
 * Creates a context: the owner of options, error messages and (later) JIT state.
 * @param[out] ctx_out  the new context
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (ctx_out NULL), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: any thread.
 */
PDC_API pdc_status pdc_context_create(pdc_context **ctx_out);
/** Destroys a context. Models, programs and tensors created from it must be destroyed first. NULL is a no-op.
 * Thread-safety: not while any other call uses ctx. */
PDC_API void pdc_context_destroy(pdc_context *ctx);
/**
 * The message of the calling thread's most recent failed call on ctx ("" if none); names the
 * file, layer, tensor or option and what was expected. Borrowed: valid until the next failing call
 * on ctx from this thread. Never NULL (also for ctx == NULL).
 * Thread-safety: any thread; each thread reads its own message (so concurrent runs do not mix them).
 */
PDC_API const char *pdc_context_last_error(const pdc_context *ctx);
/**
 * Counts the objects created from ctx and not yet destroyed: models (created, loaded, parsed or exported
 * from a trainer), attribute sets, programs, tensors and trainers - the handles that must be destroyed
 * before ctx. Objects pdc makes for itself are not counted. For leak checks in tests and in bindings.
 * @param[out] n_out  the count
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (ctx or n_out NULL)
 * Thread-safety: any thread; while other threads create or destroy objects of ctx, a count of some moment.
 */
PDC_API pdc_status pdc_context_num_objects(const pdc_context *ctx, size_t *n_out);
/**
 * Sets an option by name. Known options:
 *  - "threads"    worker threads, integer >= 0 (0 = all cores; default 0)
 *  - "cache_dir"  directory for compiled-kernel caches (default $XDG_CACHE_HOME/pdc or ~/.cache/pdc);
 *                 created 0700; entries are checked by SHA-256 before use; a directory not owned by
 *                 the user or writable by group or others is not used (a warning; no cache)
 *  - "log_level"  one of "error", "warn", "info", "debug" (default "warn"; messages go to stderr)
 *  - "verify"     "1" to run the IR verifier after every pass and before compile, "0" to skip it (default "1")
 *  - "max_memory" bytes one allocation may take, 0 = unlimited (default 0); also bounds the files
 *                 read and the activation arena of the "ref" and "cpu" targets, checked by pdc_compile
 *  - "allow_nonfinite"  "1" accepts NaN and infinite constants when a model or checkpoint is loaded;
 *                 "0" (default) refuses them with PDC_ERR_NUMERIC naming the tensor and element
 *  - "check_finite"  "1" makes runs on "ref" and "cpu" check every layer's outputs and fail with
 *                 PDC_ERR_NUMERIC naming the first layer that produced a NaN or an infinity (the
 *                 outputs untouched); "0" (default) does not check
 *  - "schedule"  "dag" (default): pdc_compile_group schedules the group's layers (the schedule pass)
 *                 and the "cpu" target runs a scheduled model's independent chains side by side
 *                 where the latency model predicts it faster, the threads divided by predicted cost;
 *                 "sequential": the layers one after the other, every thread on each. Read at
 *                 compile; outputs are bit for bit the same either way
 *  - "fail_alloc_after"  for testing error paths: N > 0 makes the N-th allocation pdc makes for ctx
 *                 from now on (from any thread) fail as if memory had run out: that call returns
 *                 PDC_ERR_OUT_OF_MEMORY with "injected failure" in the message. Only that one
 *                 allocation fails; 0 turns it off (default). Reading it gives the allocations left
 *                 before the failure (0 once it has happened).
 *  - "onnx_input_shapes"  shapes for symbolic ONNX graph inputs, "NAME=D1xD2x...[;NAME=...]" (e.g.
 *                 "x=1x3x224x224"), applied by pdc_model_load_onnx before it evaluates the model's
 *                 shape arithmetic; needed only when that arithmetic depends on a symbolic dim.
 *                 Inputs the model does not have are ignored. Default "" (none).
 *  - "sparsity_min_fill"  ONNX import's least fill, in (0, 1], of what a recognised sparsity keeps: blocks
 *                 and patterns are recognised from a pruned model's exact zeros even when stray zeros lie
 *                 inside kept blocks/patterns, as long as this share of the kept entries is non-zero
 *                 (default "0.95"; docs/onnx.md).
 *  - "gpu_arch"   the SM the "gpu" target generates PTX for: "auto" (default: the device's compute
 *                 capability, capped to the highest listed SM not above it) or one of "sm_75",
 *                 "sm_80", "sm_86", "sm_89", "sm_90" (others: PDC_ERR_INVALID_ARG listing these).
 *  - "tune"       the cpu target's tuned kernel choices (pdc_model_tune): "cached" (default) uses what the
 *                 tuning database in cache_dir/tune holds for each conv and fc layer, "on" also tunes
 *                 the layers it lacks during pdc_compile (and stores them), "off" uses the heuristics only
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, unknown name or bad value; the message says which)
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_context_set_option(pdc_context *ctx, const char *name, const char *value);
/**
 * Reads an option's current value as text into buf (NUL-terminated).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, unknown name, or cap too small: nothing written)
 * Thread-safety: not while pdc_context_set_option runs on ctx.
 */
PDC_API pdc_status pdc_context_get_option(const pdc_context *ctx, const char *name, char *buf, size_t cap);

/**
 * A progress handler: called while a long call works through a model's layers, so that a tool can show
 * a counter. `stage` is "compile" (pdc_compile) or the name of the pass that runs (pdc_model_transform,
 * and the trainer's pruning calls, which run the passes); it is borrowed, valid during the call only.
 * Tuning reports "tune LAYER" (pdc_model_tune, and pdc_compile with option tune=on) and pdc_search
 * "search", counting measurements instead of layers.
 * Within a stage `done` (layers finished) starts at 0 and never decreases, `total` is the model's layer
 * count at that call (a pass that removes layers, as canonicalize does, ends with the smaller count), and
 * the last call of a stage that succeeds has done == total (a failing stage may end without
 * it). Called on the thread that made the call, from inside pdc; it must not call pdc functions on the
 * same context.
 */
typedef void (*pdc_progress_handler)(void *user, const char *stage, size_t done, size_t total);
/**
 * Sets the progress handler of ctx (replacing the previous one), or removes it when handler is NULL
 * (the default: no progress is reported).
 * @param[in] handler  called as described for pdc_progress_handler; may be NULL
 * @param[in] user     passed to every call of handler; not dereferenced by pdc (borrowed: must stay valid
 *                     while the handler is set)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (ctx NULL)
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_context_set_progress_handler(pdc_context *ctx, pdc_progress_handler handler, void *user);

/** Kinds of pdc_note_handler notes. Values are part of the ABI: only ever appended. */
typedef enum pdc_note_kind {
    PDC_NOTE_PRUNED = 1,             /**< a pruning pass pruned the layer; text: "pattern 8x4" (patterns x
                                          entries), "connectivity 50%", "block 1x4 80%" or "unstructured 50%" */
    PDC_NOTE_SKIPPED_STEM = 2,       /**< a pruning pass left the stem alone (a conv that reads a graph input,
                                          directly or through layers without weights); option include_stem */
    PDC_NOTE_SKIPPED_KERNEL = 3,     /**< prune-pattern / prune-connectivity left a conv alone because its
                                          kernel size is not in option pattern_kernels; the text starts with
                                          the size, "KHxKW kernels: " ("KDxKHxKW kernels: " for 3-D) */
    PDC_NOTE_SKIPPED_BLOCK_CONV = 4, /**< prune-block left a 1x1 conv alone; option block_convs */
    PDC_NOTE_PREDICT_DEFAULTS = 5,   /**< pdc_model_predict / pdc_model_plan found no usable latency profile
                                          (none for this host, made on another host, other version, damaged)
                                          and used the built-in constants; pass "predict", layer "", the text
                                          says why */
    PDC_NOTE_TARGET_CHOSEN = 6,      /**< pdc_compile with target "auto" chose a target; pass "compile", layer
                                          "", the text names it and says why */
    PDC_NOTE_TUNE_IGNORED = 7,       /**< a tuning database entry was damaged, of another format version or for
                                          another layer, and the heuristics were used; pass "tune", layer "",
                                          the text names the file and says why */
    PDC_NOTE_TUNED = 8               /**< a layer was tuned (pdc_model_tune, option tune=on); pass "tune", the
                                          text gives the configuration chosen and its time vs the heuristics' */
} pdc_note_kind;
/**
 * A note handler: told, layer by layer, what the pruning passes did (PDC_NOTE_PRUNED) and which layers
 * they left alone because of a default that an option changes (PDC_NOTE_SKIPPED_*; layers a pass cannot
 * prune at all, e.g. a depthwise conv for prune-pattern, and layers excluded with option "skip" or left
 * out of option "layers" get no note). `pass` is the pass name, `layer` the layer's name, `text` one line
 * in English naming the pdc_model_transform option concerned (e.g. "stem: reads a graph input (option
 * include_stem=1 prunes it)"); all three are borrowed, valid during the call only. Notes come as the
 * passes run, on the thread that made the call; a call that then fails may have given notes about work
 * it dropped. The handler must not call pdc functions on the same context.
 */
typedef void (*pdc_note_handler)(void *user, pdc_note_kind kind, const char *pass, const char *layer,
                                 const char *text);
/**
 * Sets the note handler of ctx (replacing the previous one), or removes it when handler is NULL (the
 * default). Notes are given by the pruning passes of pdc_model_transform, pdc_trainer_prune and the
 * trainer's ADMM calls.
 * @param[in] handler  may be NULL
 * @param[in] user     passed to every call of handler; borrowed (must stay valid while the handler is set)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (ctx NULL)
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_context_set_note_handler(pdc_context *ctx, pdc_note_handler handler, void *user);

/* ------------------------------------------------------------------ attributes (for the builder) */

/** Creates an empty attribute set. @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_OUT_OF_MEMORY */
PDC_API pdc_status pdc_attrs_create(pdc_context *ctx, pdc_attrs **attrs_out);
/** Destroys an attribute set. NULL is a no-op. */
PDC_API void pdc_attrs_destroy(pdc_attrs *attrs);
/** Sets (or replaces) an integer attribute. Names are [A-Za-z_][A-Za-z0-9_]*. */
PDC_API pdc_status pdc_attrs_set_int(pdc_attrs *attrs, const char *name, int64_t value);
/** Sets (or replaces) an integer-list attribute; values copied. n may be 0. */
PDC_API pdc_status pdc_attrs_set_ints(pdc_attrs *attrs, const char *name, size_t n, const int64_t *values);
/** Sets (or replaces) a float attribute (not NaN; infinities allowed, e.g. clip bounds). */
PDC_API pdc_status pdc_attrs_set_float(pdc_attrs *attrs, const char *name, float value);
/** Sets (or replaces) a string attribute; copied. */
PDC_API pdc_status pdc_attrs_set_string(pdc_attrs *attrs, const char *name, const char *value);

/* ------------------------------------------------------------------ model: builder */

/**
 * Creates an empty model. The model refers to ctx, which must outlive it.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_create(pdc_context *ctx, const char *name, pdc_model **model_out);
/** Destroys a model and the weights it owns. NULL is a no-op. */
PDC_API void pdc_model_destroy(pdc_model *model);

/**
 * Adds a graph input of dtype f32. A dim of -1 is symbolic and must be fixed with
 * pdc_model_set_input_shape before compile.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (bad name, duplicate name, rank 0 or > PDC_MAX_RANK, dim < -1 or 0)
 */
PDC_API pdc_status pdc_model_add_input(pdc_model *model, const char *name, size_t rank, const int64_t *dims);
/** Fixes the shape of input `name` (must agree with its non-symbolic dims). */
PDC_API pdc_status pdc_model_set_input_shape(pdc_model *model, const char *name, size_t rank, const int64_t *dims);
/**
 * Adds a constant f32 tensor (weights, bias, BN statistics). data (prod(dims) floats) is copied.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_add_constant(pdc_model *model, const char *name, size_t rank, const int64_t *dims,
                                          const float *data);
/**
 * Adds a layer. op is an op name ("conv", "fc", "relu", ...; see docs/ir.md, "Ops"); inputs name tensors
 * defined earlier; outputs are new tensor names whose shapes are inferred now. attrs may be NULL and
 * is not kept. The layer is checked at once: shape errors name the layer.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_NOT_FOUND (an input), PDC_ERR_UNSUPPORTED (op),
 *         PDC_ERR_SHAPE, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_add_layer(pdc_model *model, const char *name, const char *op, size_t n_inputs,
                                       const char *const *inputs, size_t n_outputs, const char *const *outputs,
                                       const pdc_attrs *attrs);
/** Marks a tensor as a graph output (in call order). @retval PDC_OK, PDC_ERR_NOT_FOUND, PDC_ERR_INVALID_ARG */
PDC_API pdc_status pdc_model_mark_output(pdc_model *model, const char *tensor);

/**
 * Describes constant `weight` (a conv weight [O, C/groups, kh, kw]) as pattern-sparse: patterns[i]
 * is a bitmask over the kh*kw window (bit p = kh-row*kw + col is kept), kernel_pattern[o*(C/groups)+c]
 * is a pattern index or -1 (kernel removed by connectivity pruning). Weights outside the mask must be 0.
 * @retval PDC_OK, PDC_ERR_NOT_FOUND, PDC_ERR_INVALID_ARG, PDC_ERR_INVALID_MODEL (nonzero outside mask)
 */
PDC_API pdc_status pdc_model_set_sparsity_pattern(pdc_model *model, const char *weight, int64_t kh, int64_t kw,
                                                  size_t n_patterns, const uint64_t *patterns, size_t n_kernels,
                                                  const int32_t *kernel_pattern);
/**
 * Describes constant `weight` (a 3-D conv weight [O, C/groups, kd, kh, kw]) as pattern-sparse with kernel
 * groups (RT3D's kernel-group sparsity, KGS): patterns[i] is a bitmask over the kd*kh*kw window (bit
 * p = (depth*kh + row)*kw + col is kept), kernel_pattern[o*(C/groups)+c] a pattern index or -1 (kernel
 * removed). The [O, C/groups] kernel grid is cut into group_out x group_in tiles (edge tiles may be partial)
 * whose kernels all have the same pattern index or -1; 0x0 means no groups (plain 3-D patterns). Weights
 * outside the mask must be 0. Since 0.4.
 * @retval PDC_OK, PDC_ERR_NOT_FOUND (no constant `weight`), PDC_ERR_INVALID_ARG (NULL arrays, kd < 1),
 *         PDC_ERR_INVALID_MODEL (window not the weight's kernel, a group outside the grid or mixing two
 *         patterns, a nonzero outside the mask; the message names the tensor), PDC_ERR_UNSUPPORTED (window
 *         over 64 positions), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on model: one thread at a time.
 */
PDC_API pdc_status pdc_model_set_sparsity_kgs(pdc_model *model, const char *weight, int64_t kd, int64_t kh, int64_t kw,
                                              int64_t group_out, int64_t group_in, size_t n_patterns,
                                              const uint64_t *patterns, size_t n_kernels, const int32_t *kernel_pattern);
/**
 * Describes constant `weight` as block-sparse. The weight is viewed as a matrix: rank >= 4 (conv)
 * weights as [O, C/groups*kernel], lower ranks as [prod(leading dims), last dim]. Blocks of bh x bw are numbered
 * row-major (edge blocks may be partial); mask[i] != 0 keeps block i.
 */
PDC_API pdc_status pdc_model_set_sparsity_block(pdc_model *model, const char *weight, int64_t bh, int64_t bw,
                                                size_t n_blocks, const uint8_t *mask);
/** Describes constant `weight` as unstructured-sparse: mask[i] != 0 keeps element i. */
PDC_API pdc_status pdc_model_set_sparsity_unstructured(pdc_model *model, const char *weight, size_t n,
                                                       const uint8_t *mask);

/* ------------------------------------------------------------------ model: files */

/** Flags for printing the IR text form. */
#define PDC_PRINT_ELIDE_WEIGHTS 0x1u /**< write constants as dense<elided>; they parse back as zeros */

/**
 * Loads a model; the format is chosen by content: the .pdc binary magic, an ONNX protobuf (see
 * pdc_model_load_onnx), else IR text (.pdcir). A path ending in ".onnx" is always read as ONNX.
 * The path must name a regular file (a FIFO, pipe or device is refused without blocking: PDC_ERR_IO).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_IO, PDC_ERR_PARSE, PDC_ERR_CORRUPT, PDC_ERR_INVALID_MODEL,
 *         PDC_ERR_NUMERIC (a NaN or infinite constant, unless the option "allow_nonfinite" is set; the
 *         message names it), PDC_ERR_OUT_OF_MEMORY; for ONNX also those of pdc_model_load_onnx
 */
PDC_API pdc_status pdc_model_load(pdc_context *ctx, const char *path, pdc_model **model_out);
/** Loads a model from memory (any of the three formats, chosen by content); data is not kept. */
PDC_API pdc_status pdc_model_load_memory(pdc_context *ctx, const void *data, size_t size, pdc_model **model_out);
/**
 * Imports an ONNX model: a serialised ModelProto as torch.onnx.export and other converters write it,
 * opsets 9..17 of the default domain (docs/onnx.md lists the ops and attributes).
 *  - Constant shape arithmetic (Shape, Gather, Concat, Unsqueeze, Expand, ...) is evaluated at
 *    import; Dropout and Identity disappear. Initializers must be stored in the file itself.
 *  - Tensors keep their ONNX names; layers take the node names (op type + "_" + node index for
 *    unnamed nodes), so inspection shows the exporter's names.
 *  - Weights that are already pruned (exact zeros) get a sparsity description that covers exactly
 *    their non-zeros: conv kernels as patterns (an all-zero kernel is connectivity-pruned), FC /
 *    MatMul / Gemm / 1x1-conv / LSTM / GRU matrices as blocks (1x4, 4x1, 4x4, 2x2, 1x8 or 8x1),
 *    else an unstructured mask when at least half the weights are zero.
 *  - Symbolic input dims (dim_param or unknown) become -1: fix them with pdc_model_set_input_shape
 *    before compiling (pdc_compile names the input otherwise). If the model's own shape arithmetic
 *    needs such a dim at import, the import fails with PDC_ERR_SHAPE naming the node and the input:
 *    give the shapes beforehand with the context option "onnx_input_shapes".
 * The imported model is verified when the context's "verify" option is on. Messages name the node
 * (name, op type, opset), initializer or graph input at fault; undecodable bytes give the offset.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_IO, PDC_ERR_CORRUPT (truncated or not protobuf),
 *         PDC_ERR_INVALID_MODEL (breaks ONNX rules: undefined input, cycle, duplicate name, initializer
 *         size mismatch, ...), PDC_ERR_UNSUPPORTED (op, attribute value, opset, element type, external
 *         data), PDC_ERR_SHAPE, PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_load_onnx(pdc_context *ctx, const char *path, pdc_model **model_out);
/** pdc_model_load_onnx from memory: size bytes at data (not kept). */
PDC_API pdc_status pdc_model_load_onnx_memory(pdc_context *ctx, const void *data, size_t size,
                                              pdc_model **model_out);
/**
 * Saves the native binary format (.pdc: versioned, CRC-32 checksummed, keeps weights and sparsity).
 * The file is written to a temporary name and renamed, so a failure leaves no partial file.
 */
PDC_API pdc_status pdc_model_save(const pdc_model *model, const char *path);
/** Saves the IR text form (.pdcir); flags: PDC_PRINT_*. Same atomic write as pdc_model_save. */
PDC_API pdc_status pdc_model_save_text(const pdc_model *model, const char *path, uint32_t flags);
/**
 * Saves the model as ONNX (a ModelProto, opset 14, IR version 7), e.g. to fine-tune or evaluate a pruned
 * model in its original framework. Each layer becomes the ONNX node of the same op, named after the layer
 * (fc: Gemm with transB = 1, after a Flatten when its input has rank > 2); each constant a layer reads
 * becomes a float initializer under its own name - for a model imported from ONNX, the original
 * initializer names - holding the weights as they are, pruned weights as exact zeros (ONNX has no
 * sparsity; pdc_model_load_onnx recognises it again). Pass results are written in plain ONNX: a fused
 * activation as its own node after the layer, a reordered conv's weights and bias in the original filter
 * order; a memory plan is left out. Same atomic write as pdc_model_save.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_UNSUPPORTED (a layer ONNX opset 14 cannot express, e.g.
 *         avgpool with dilations; the message names it), PDC_ERR_IO, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_save_onnx(const pdc_model *model, const char *path);
/** Prints the IR text form into a new string (free with pdc_string_free). */
PDC_API pdc_status pdc_model_print(const pdc_model *model, uint32_t flags, char **text_out);
/** Parses the IR text form. Errors give "line L, column C: ...". */
PDC_API pdc_status pdc_model_parse(pdc_context *ctx, const char *text, size_t len, pdc_model **model_out);
/** Runs the verifier. @retval PDC_OK or PDC_ERR_INVALID_MODEL / PDC_ERR_SHAPE with a message naming layer and fact. */
PDC_API pdc_status pdc_model_verify(const pdc_model *model);

/* ------------------------------------------------------------------ model: inspection */

/** Per-layer statistics for pdc_model_layer_stat. */
typedef enum pdc_layer_stat {
    PDC_STAT_WEIGHTS = 1,         /**< elements of the layer's constant inputs */
    PDC_STAT_KEPT_WEIGHTS = 2,    /**< those its sparsity keeps (all, if dense) */
    PDC_STAT_DENSE_FLOPS = 3,     /**< floating-point ops for one run, multiply-add = 2 */
    PDC_STAT_EFFECTIVE_FLOPS = 4, /**< the same, skipping pruned weights */
    PDC_STAT_BYTES = 5            /**< bytes of kept weights (f32) */
} pdc_layer_stat;

/** Per-layer text fields for pdc_model_layer_string. */
typedef enum pdc_layer_field {
    PDC_FIELD_NAME = 1,
    PDC_FIELD_OP = 2,
    PDC_FIELD_INPUT_SHAPE = 3,  /**< shape of the first input, e.g. "1x16x8x8" */
    PDC_FIELD_OUTPUT_SHAPE = 4, /**< shape of the first output */
    PDC_FIELD_SPARSITY = 5,     /**< "dense", "pattern 3x3: 8 patterns, 50% kernels kept, ...", "block 1x4: ..." */
    PDC_FIELD_PATTERNS = 6      /**< pattern sets of pattern-sparse weights: "3x3 0x1b 0x36 ..." ("" if none) */
} pdc_layer_field;

/** Number of layers. */
PDC_API pdc_status pdc_model_num_layers(const pdc_model *model, size_t *n_out);
/** A statistic of layer i. FLOP statistics need concrete shapes: PDC_ERR_SHAPE while a symbolic
 * input the layer depends on is unresolved (weight counts are always available); PDC_ERR_OVERFLOW
 * when the count does not fit in an int64 (huge shapes). */
PDC_API pdc_status pdc_model_layer_stat(const pdc_model *model, size_t i, pdc_layer_stat stat, int64_t *value_out);
/** A text field of layer i. Borrowed: valid until the next pdc_model_layer_string call on this model
 * (copy it to keep it), or until the model changes or is destroyed. */
PDC_API pdc_status pdc_model_layer_string(const pdc_model *model, size_t i, pdc_layer_field field,
                                          const char **text_out);
/** Number of graph inputs / outputs. */
PDC_API pdc_status pdc_model_num_inputs(const pdc_model *model, size_t *n_out);
PDC_API pdc_status pdc_model_num_outputs(const pdc_model *model, size_t *n_out);
/**
 * Name and shape of graph input i. name_out is borrowed (valid while the model lives); dims_out
 * has room for PDC_MAX_RANK values; symbolic dims read -1. An output whose shape is not known yet
 * (it depends on a symbolic input) reads rank 0. Any out-parameter may be NULL.
 */
PDC_API pdc_status pdc_model_input_info(const pdc_model *model, size_t i, const char **name_out, size_t *rank_out,
                                        int64_t *dims_out);
PDC_API pdc_status pdc_model_output_info(const pdc_model *model, size_t i, const char **name_out, size_t *rank_out,
                                         int64_t *dims_out);

/* ------------------------------------------------------------------ model: passes and pruning */

/**
 * Runs a pipeline of passes over the model, e.g. "canonicalize,prune-pattern,prune-connectivity,reorder,plan"
 * (docs/passes.md; pdc_pass_info lists each pass with what it requires and guarantees):
 *  - canonicalize        folds batchnorm into the preceding conv/fc, folds a constant bias add and the
 *                        following activation into conv/fc/gemm, removes identity layers, evaluates layers
 *                        whose inputs are all constants, removes dead layers and unused constants. Outputs
 *                        are unchanged up to float rounding.
 *  - prune-pattern       each eligible conv (2-D or 3-D, group 1, odd kernel of at least 3x3 whose size
 *                        "pattern_kernels" lists: by default 3x3 only) gets a set of "patterns" patterns of
 *                        "pattern_size" entries and every kernel is projected onto one of them
 *                        (pdc_prune_project_pattern, which documents the tie-breaks).
 *  - prune-connectivity  removes the floor(rate x kernels) kernels of smallest norm of each conv prune-pattern
 *                        would take (pdc_prune_project_connectivity).
 *  - prune-kgs           kernel-group sparsity of each 3-D conv (window of 2..64 entries): its kernel grid in
 *                        "kgs_group" tiles, each keeping the same window positions, those of largest group
 *                        norm (pdc_prune_project_kgs, which documents the tie-breaks); the patterns are the
 *                        distinct group masks in the order of their first group (groups row-major).
 *  - prune-block         block sparsity of fc weights, of constant right operands of gemm and matmul, of
 *                        lstm/gru gate matrices and, with "block_convs", of 1x1 conv weights, in the [out, in]
 *                        layout (pdc_prune_project_block).
 *  - prune-unstructured  magnitude pruning of the weights still dense (pdc_prune_project_unstructured).
 *  - reorder             groups the filters of each pattern-pruned conv by kernel count and pattern mix; the
 *                        permutation is kept in the layer and undone on output, so outputs are unchanged.
 *  - plan                places every activation in one arena by liveness (pdc_model_memory_plan).
 *  - share               stores constants with identical contents once and computes once a layer with the
 *                        same op, attributes and inputs as an earlier one (groups: pdc_compile_group).
 *  - schedule            marks which layers may run side by side (independent chains of similar cost, at
 *                        most "lanes" a step) and orders the layers so; run plan after it. The "cpu" target
 *                        runs such chains one thread each when a step has as many chains as the run threads.
 * Safe defaults: no pruning pass touches the stem - a conv that reads a graph input, directly or through
 * layers without weights (a normalising sub/mul/div, batchnorm, pooling, reshape, concat, ...) - unless
 * "include_stem" is 1: its few weights see the raw input and cost accuracy out of proportion. prune-pattern
 * and prune-connectivity take only the kernel sizes "pattern_kernels" lists (a 5x5 or 7x7 kernel keeps too
 * little of its window with 4 entries); prune-block takes 1x1 convs only with "block_convs" 1. A layer named
 * in "layers" is an explicit choice: each pass that can prune it does, whatever these three options say.
 * The layers left alone by a default are reported to the context's note handler
 * (pdc_context_set_note_handler), and so is what each pass pruned.
 * Options (attribute: type = default); numbers may also be given as strings ("0.5"):
 *  - "patterns": int = 8                 patterns per layer (K)
 *  - "pattern_size": int = 4             entries per pattern, centre included (n, 1..kh*kw)
 *  - "connectivity": float = 0.5         share of kernels removed. Every rate option also takes a
 *                                        string of comma-separated entries RATE (global) and LAYER=RATE
 *                                        (that layer), e.g. "0.5,conv2=0.7"
 *  - "kgs_group": string = "4x4"         prune-kgs kernel group OUTxIN (output x input channels); a group
 *                                        larger than a layer's kernel grid is cut to it
 *  - "kgs_keep": int = 0                 window positions each group keeps (1..window); 0: from kgs_rate
 *  - "kgs_rate": float = 0.5             share of window positions each group removes, floor(rate x window)
 *  - "kgs_masks": int = 0                prune-kgs: 0 every group its own mask; K > 0 at most K distinct masks
 *                                        per layer (the K most frequent; see pdc_prune_project_kgs)
 *  - "block": string = "1x4"             block shape ROWSxCOLS in the [out, in] layout; "1x4:0.8" also sets
 *                                        block_rate
 *  - "block_rate": float = 0.5           share of blocks removed
 *  - "unstructured_rate": float = 0.5    share of weights removed
 *  - "lanes": int = 2                    schedule: most layers side by side in one step (1..64)
 *  - "layers": string                    comma-separated layer names: the pruning passes and reorder change
 *                                        only these (each must exist and be changed by some pass), and
 *                                        every pass that can prune a named layer does, whatever
 *                                        include_stem, pattern_kernels and block_convs say
 *  - "skip": string                      comma-separated layer names they leave alone (not with "layers")
 *  - "include_stem": int = 0             1: the pruning passes prune the stem too
 *  - "pattern_kernels": string = "3x3"   kernel sizes prune-pattern and prune-connectivity take, KHxKW
 *                                        or KDxKHxKW separated by commas (each odd, at least 3x3, at most 64
 *                                        entries), e.g. "3x3,5x5,7x7,3x3x3"; or "all"
 *  - "block_convs": int = 0              1: prune-block takes 1x1 convs too
 *  - "print_after": string               a pass name of the pipeline or "all": the IR text form is written
 *                                        after that pass (weights elided), headed "# IR after pass 'NAME'"
 *  - "print_file": string                the file print_after appends to (default: stderr)
 *  - "print_weights": int = 0            1: print_after writes the weights in full
 * Rates are in [0, 1). The verifier runs after every pass unless the context option "verify" is "0".
 * The passes run on a copy that replaces the model only when all of them succeeded. Each pass reports its
 * progress through layers to the context's progress handler (pdc_context_set_progress_handler).
 * @param[in,out] model  changed only on success
 * @param[in] pipeline   comma-separated pass names (spaces around names are ignored), optionally followed by
 *                       options as whitespace-separated NAME=VALUE words (what pdc_model_plan writes: "prune-block
 *                       layers=fc1 block=1x4 block_rate=0.75"), taken as string options; not kept
 * @param[in] options    may be NULL (all defaults); an option both here and in the pipeline is an error; not kept
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL model or pipeline; an empty or unknown pass name (the message lists the known
 *         passes); a word after the pipeline's first option that is not NAME=VALUE; an option given twice; an unknown option (the message lists the known ones) or a bad value: a rate outside [0, 1),
 *         a pattern size outside 1..kh*kw of a pruned layer, more patterns than there are patterns of that size
 *         containing the centre (C(kh*kw-1, n-1)); "layers" with "skip"; a layer in "layers" that no pass of the
 *         pipeline changes; "include_stem" or "block_convs" other than 0 or 1; a "pattern_kernels" entry that is
 *         not KHxKW / KDxKHxKW or is a size pattern pruning cannot take; "kgs_group" not OUTxIN; "kgs_keep"
 *         above a pruned layer's window (the message names the option and the value)
 * @retval PDC_ERR_NOT_FOUND    a layer named in layers, skip or a per-layer rate is not in the model
 * @retval PDC_ERR_INVALID_MODEL, PDC_ERR_SHAPE  a pass needs what the model lacks, or the verifier rejected a
 *         pass's result (the message names the pass)
 * @retval PDC_ERR_IO (print_file), PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on model: one thread at a time.
 */
PDC_API pdc_status pdc_model_transform(pdc_model *model, const char *pipeline, const pdc_attrs *options);
/**
 * Describes pass i of the pass table (0-based, in the usual pipeline order).
 * @param[out] name_out, requires_out, guarantees_out  static strings; any may be NULL
 * @retval PDC_OK, PDC_ERR_NOT_FOUND (i is not below the number of passes; nothing written)
 * Thread-safety: any thread.
 */
PDC_API pdc_status pdc_pass_info(size_t i, const char **name_out, const char **requires_out,
                                 const char **guarantees_out);
/**
 * The activation memory plan that the plan pass stored in the model.
 * @param[out] arena_bytes_out       bytes of the one arena that holds every activation (may be NULL)
 * @param[out] activation_bytes_out  sum of all activation sizes: the memory without planning (may be NULL)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (model NULL), PDC_ERR_INVALID_STATE (no plan: run the plan pass),
 *         PDC_ERR_INVALID_MODEL (the plan does not fit the model any more), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_memory_plan(const pdc_model *model, size_t *arena_bytes_out,
                                         size_t *activation_bytes_out);

/** Flags of pdc_prune_project_pattern. */
#define PDC_PROJECT_GIVEN_PATTERNS 0x1u /**< patterns[] is the set to use; it is not chosen from the weights */
#define PDC_PROJECT_KEEP_PRUNED 0x2u    /**< kernel_pattern is read too: kernels at -1 stay removed (zeroed)
                                             and are not counted when the set is chosen */

/**
 * Pattern projection of a conv weight [out_channels, in_channels, kh, kw] (row-major, in place): the
 * projection of the prune-pattern pass, for a training loop's own buffers (e.g. ADMM's Z-step).
 * Window positions are numbered p = kw*row + col; a pattern is the bitmask of the positions it keeps.
 * 1. Unless PDC_PROJECT_GIVEN_PATTERNS, the set is chosen: a kernel's natural pattern is the centre
 *    (p = (kh/2)*kw + kw/2) plus its pattern_size-1 other positions of largest |w| (on equal magnitudes
 *    the lower position wins); the set is the n_patterns most frequent natural patterns, higher count first,
 *    then the smaller bitmask; with fewer distinct ones it is padded with the smallest unused bitmasks of
 *    pattern_size positions that contain the centre. It is written to patterns.
 * 2. Every kernel k = o*in_channels + c is projected onto the pattern of the set that keeps the largest L2
 *    norm (sums of squares in double precision; on equal norms the earlier pattern of the set wins): its
 *    weights outside that pattern become 0 and kernel_pattern[k] is the pattern's index.
 * @param[in] ctx               for messages and allocation
 * @param[in,out] weights       out_channels*in_channels*kh*kw floats; not kept
 * @param[in] n_patterns        K >= 1; when choosing, at most C(kh*kw-1, pattern_size-1)
 * @param[in] pattern_size      n in 1..kh*kw, centre included; kh and kw odd (ignored with GIVEN_PATTERNS)
 * @param[in] flags             PDC_PROJECT_* bits
 * @param[in,out] patterns      n_patterns bitmasks: written, or read with GIVEN_PATTERNS (non-zero, inside the window)
 * @param[in,out] kernel_pattern  out_channels*in_channels pattern indices (-1: removed), or NULL; read too
 *                              with PDC_PROJECT_KEEP_PRUNED
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL pointer, a dim < 1, a window of more than 64 entries, even kh or kw when
 *         choosing, pattern size or number of patterns out of range, unknown flags
 * @retval PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY   On failure nothing is written.
 * Thread-safety: as any call on ctx.
 */
PDC_API pdc_status pdc_prune_project_pattern(pdc_context *ctx, float *weights, int64_t out_channels,
                                             int64_t in_channels, int64_t kh, int64_t kw, size_t n_patterns,
                                             size_t pattern_size, uint32_t flags, uint64_t *patterns,
                                             int32_t *kernel_pattern);
/**
 * Connectivity projection of a conv weight [out_channels, in_channels, kernel_size] (kernel_size = kh*kw,
 * in place): zeroes the floor(rate x out_channels x in_channels) kernels of smallest L2 norm; on equal norms
 * the lower kernel index o*in_channels + c goes first. floor(rate x n) is taken in double precision, as
 * Python's math.floor(rate * n). Kernels that are already zero count, so projecting twice changes nothing.
 * @param[in,out] weights      not kept
 * @param[in] rate             in [0, 1)
 * @param[out] kernel_keep     out_channels*in_channels entries (1 kept, 0 removed), or NULL
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, a dim < 1, rate outside [0, 1)), PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on ctx.
 */
PDC_API pdc_status pdc_prune_project_connectivity(pdc_context *ctx, float *weights, int64_t out_channels,
                                                  int64_t in_channels, int64_t kernel_size, double rate,
                                                  uint8_t *kernel_keep);
/**
 * Kernel-group projection (RT3D's KGS) of a conv weight [out_channels, in_channels, kernel_size] (a 3-D
 * conv's kernel_size = kd*kh*kw, in place): the projection of the prune-kgs pass. The kernel grid is cut
 * into group_out x group_in groups, numbered row-major (groups at the bottom and right edges may be
 * partial). In each group, position p of the window has the norm sum of w[k][p]^2 over the group's kept
 * kernels k in increasing index k = o*in_channels + c (double precision); the `keep` positions of largest
 * norm are kept (on equal norms the lower position), every other position of every kernel of the group
 * becomes 0. Kernels with kernel_keep[k] == 0 become 0 entirely and take no part in the norms.
 * With n_masks > 0 the layer's masks are limited (so that code generated per mask stays small): those
 * natural masks are the candidates, the n_masks most frequent (higher count first, then the smaller
 * bitmask; at most 64) form the set, and each group keeps the set's mask with the largest sum of its
 * position norms (the earlier mask on equal sums).
 * @param[in,out] weights     not kept
 * @param[in] keep            kept positions per group, 1..kernel_size
 * @param[in] n_masks         0: every group its own mask; else the most distinct masks of the layer
 * @param[in] kernel_keep     out_channels*in_channels entries (0: kernel removed), or NULL (all kept); not kept
 * @param[out] group_masks    one bitmask of kept positions per group (0 for a group whose kernels are all
 *                            removed), or NULL
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL ctx or weights, a channel count < 1, kernel_size outside 1..64, a group
 *         outside 1..the grid, keep outside 1..kernel_size (the message names the value)
 * @retval PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY  On failure nothing is written.
 * Since 0.4. Thread-safety: as any call on ctx.
 */
PDC_API pdc_status pdc_prune_project_kgs(pdc_context *ctx, float *weights, int64_t out_channels, int64_t in_channels,
                                         int64_t kernel_size, int64_t group_out, int64_t group_in, size_t keep,
                                         size_t n_masks, const uint8_t *kernel_keep, uint64_t *group_masks);
/**
 * Block projection of a row-major matrix [rows, cols] in the ONNX/PyTorch [out, in] layout (an fc weight, a
 * gemm operand with transB = 1; transpose an [in, out] operand first), in place: the matrix is cut into
 * block_rows x block_cols blocks numbered row-major (blocks at the right and bottom edges may be partial and
 * count as blocks), and the floor(rate x blocks) blocks of smallest L2 norm are zeroed, the lower block index
 * first on equal norms.
 * @param[out] block_keep  ceil(rows/block_rows)*ceil(cols/block_cols) entries (1 kept), or NULL
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, a dim < 1, rate outside [0, 1)), PDC_ERR_OVERFLOW, PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on ctx.
 */
PDC_API pdc_status pdc_prune_project_block(pdc_context *ctx, float *matrix, int64_t rows, int64_t cols,
                                           int64_t block_rows, int64_t block_cols, double rate, uint8_t *block_keep);
/**
 * Magnitude projection of n weights in place: zeroes the floor(rate x n) weights of smallest |w|, the lower
 * index first on equal magnitudes.
 * @param[out] keep  n entries (1 kept), or NULL
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, n = 0, rate outside [0, 1)), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on ctx.
 */
PDC_API pdc_status pdc_prune_project_unstructured(pdc_context *ctx, float *weights, size_t n, double rate,
                                                  uint8_t *keep);

/* ------------------------------------------------------------------ program */

/**
 * Compiles a verified model for a target. Targets: "ref" (the plain-C reference interpreter) and "cpu"
 * (kernels JIT-compiled with LLVM for this CPU, AVX-512 or AVX2 as the host has it: pattern-sparse and
 * dense convolutions, BLAS or block-sparse GEMMs, elementwise ops; layers it has no kernel for run the
 * reference kernel, see pdc_program_layer_kernel). "cpu" reads the context options "threads" (worker
 * threads of every run, fixed at compile) and "cache_dir" (compiled kernels are cached there, keyed by
 * a hash of the layer's specialisation, so compiling the same model again is near-instant). It sets
 * OpenBLAS to one thread for the process (pdc parallelises around BLAS calls). JIT code is owned by
 * the context and freed with it.
 * "auto" picks a target: "cpu" (the one target with a latency model, pdc_model_predict), else "gpu" where
 * "cpu" does not compile (e.g. an allocation above "max_memory"), else "ref"; a PDC_NOTE_TARGET_CHOSEN note
 * says which and why, pdc_program_target names it. "gpu" is not weighed against "cpu" yet (no model).
 * "gpu" (NVIDIA GPU: PTX kernels generated per layer, loaded through the CUDA driver, which is
 * dlopen'd at run time: libcuda.so.1 or $PDC_CUDA_LIBRARY) reads "gpu_arch"; without a driver, with a
 * failing cuInit or with no device it returns PDC_ERR_NO_DEVICE with the reason; a driver too old for
 * the PTX also gives PDC_ERR_NO_DEVICE; device memory exhaustion PDC_ERR_OUT_OF_MEMORY. Runs of one
 * "gpu" program from several threads take turns (one device arena per program, guarded by a mutex).
 * $PDC_GPU_EMULATE=1 (testing aid) runs the same kernels on an emulated device in host memory.
 * The program is independent of the model afterwards (the model may be destroyed). Progress through the
 * layers goes to the context's progress handler, stage "compile" (pdc_context_set_progress_handler; the
 * "cpu" target reports each layer, the others the start and the end).
 * @retval PDC_OK, PDC_ERR_UNKNOWN_TARGET (message lists known targets), PDC_ERR_UNSUPPORTED (target known
 *         but not available in this build), PDC_ERR_NO_DEVICE, PDC_ERR_SHAPE (unresolved symbolic input),
 *         PDC_ERR_INVALID_MODEL, PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_compile(pdc_context *ctx, const pdc_model *model, const char *target,
                               pdc_program **program_out);
/**
 * Ahead-of-time code for another machine: compiles the model for `target` and writes the result into
 * directory `dir` (created if missing; its parent must exist). Targets:
 *  - "aarch64-linux-gnu": NAME.h (declares NAME_run and the input/output sizes and shapes) and
 *    libNAME.a (AArch64 object code with NEON pattern-specialised kernels, the packed weights and the
 *    small runtime it needs; it depends on libc only). See docs/backends.md, "ARM backend".
 *  - "nvptx": NAME.ptx (PTX text, one .entry per kernel, each taking (act, wts, arg)),
 *    NAME.launch.txt (the arenas, where each graph input/output lives, and the kernel launch
 *    sequence with grid and block sizes) and NAME.weights.bin (the weights arena to upload).
 *    See docs/backends.md, "GPU backend".
 * The model must verify and have concrete input shapes, as for pdc_compile.
 * @param options may be NULL. Strings: "name" (a C identifier, default "model"), "cpu" (aarch64:
 *        generic, cortex-a53, cortex-a55, cortex-a72, cortex-a76, neoverse-n1; default generic),
 *        "arch" (nvptx: sm_75, sm_80, sm_86, sm_89, sm_90; default sm_80).
 * Files are complete or absent: each is generated in memory, written under a temporary name and
 * renamed only after every file of the set is written; on failure nothing new is left in dir.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, bad option value: the message lists valid ones),
 *         PDC_ERR_UNKNOWN_TARGET, PDC_ERR_UNSUPPORTED (an op the target cannot emit: the message names
 *         the layer and op), PDC_ERR_SHAPE, PDC_ERR_INVALID_MODEL, PDC_ERR_IO (dir not writable: the
 *         message names the path), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_emit(pdc_context *ctx, const pdc_model *model, const char *target,
                                  const pdc_attrs *options, const char *dir);
/** Destroys a program. NULL is a no-op. Thread-safety: not while a run or another call uses the program. */
PDC_API void pdc_program_destroy(pdc_program *program);
/** The target the program was compiled for (borrowed, static). Thread-safety (also of the four
 * calls below): any thread, also while runs are in flight (the program is not changed). */
PDC_API const char *pdc_program_target(const pdc_program *program);
PDC_API pdc_status pdc_program_num_inputs(const pdc_program *program, size_t *n_out);
PDC_API pdc_status pdc_program_num_outputs(const pdc_program *program, size_t *n_out);
/** Name (borrowed, valid while the program lives) and shape of input / output i; any out may be NULL. */
PDC_API pdc_status pdc_program_input_info(const pdc_program *program, size_t i, const char **name_out,
                                          size_t *rank_out, int64_t *dims_out);
PDC_API pdc_status pdc_program_output_info(const pdc_program *program, size_t i, const char **name_out,
                                           size_t *rank_out, int64_t *dims_out);
/**
 * Runs the program: inputs and outputs in the order of the *_info calls, each of exactly that shape.
 * An output may be NULL: it is not wanted, and only the layers the wanted outputs depend on run (one
 * model of a group, pdc_compile_group, runs alone at its own cost); an input may then be NULL where no
 * layer that runs reads it (on "gpu" the layers run are the same; not every output is copied back).
 * Outputs are written only when the run succeeds. An output may be an input's tensor (or share
 * memory with one): the run then computes it aside and copies it at the end; otherwise the "cpu"
 * target writes it in place (not with the option "check_finite"). NaN and infinities propagate as
 * IEEE arithmetic says, except through pruned weights, which are never multiplied (docs/reliability.md).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL arrays, wrong count, every output NULL, a NULL input a wanted
 *         output needs: the message names it), PDC_ERR_SHAPE (message names the tensor,
 *         expected and got), PDC_ERR_OUT_OF_MEMORY, PDC_ERR_NUMERIC (option "check_finite": the message
 *         names the first layer whose output is not finite)
 * Thread-safety: one program may be run from many threads at once with distinct output tensors;
 * errors are reported on the calling thread's last error of the program's context.
 */
PDC_API pdc_status pdc_program_run(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                                   size_t n_outputs, pdc_tensor *const *outputs);
/**
 * The worker threads each run of the program may use: on target "cpu" the context option "threads" as it
 * was at compile, 0 (all cores) resolved to the number of processors available - a run on a loaded machine
 * may use fewer; 1 on "ref" and "gpu" (one host thread; the device runs the kernels).
 * @param[out] n_out  at least 1
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL program or n_out)
 * Thread-safety: any thread (the program is not changed).
 */
PDC_API pdc_status pdc_program_num_threads(const pdc_program *program, size_t *n_out);
/** Number of layers of the program (those of the model it was compiled from). @retval PDC_OK, PDC_ERR_INVALID_ARG */
PDC_API pdc_status pdc_program_num_layers(const pdc_program *program, size_t *n_out);
/**
 * The kernel the target chose for layer i, and why: e.g. "jit pattern-sparse conv 3x3, 8 patterns, 4.50x
 * fewer FLOPs, ..., avx512" or "ref fallback: 3-D conv" (the reference kernel runs that layer). On
 * target "ref" every layer reads "reference interpreter".
 * @param[out] name_out    the layer's name; borrowed, valid while the program lives; may be NULL
 * @param[out] kernel_out  the description; borrowed, valid while the program lives; may be NULL
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL program, i out of range)
 * Thread-safety: any thread (the program is not changed).
 */
PDC_API pdc_status pdc_program_layer_kernel(const pdc_program *program, size_t i, const char **name_out,
                                            const char **kernel_out);

/* ------------------------------------------------------------------ groups */

/**
 * Several models as one, for a program that runs them together (pdc_compile_group): a new model holding
 * copies of models[0..n-1] (which stay the caller's). Model k's layers, constants, activations and
 * outputs are named "k/NAME" (k counts from 0 in the order given); outputs come in model order. Graph
 * inputs keep their names, and models with an input of the same name read one input (the same frame
 * for a detector and a classifier), whose shapes must then agree; with option share_inputs 0 every
 * model keeps its own inputs, named "k/NAME" too. Memory plans are dropped.
 * @param options may be NULL; "share_inputs": int = 1
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, n = 0, bad option), PDC_ERR_SHAPE (a shared input's shapes
 *         differ: the message names the input and both shapes), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_model_group(pdc_context *ctx, const pdc_model *const *models, size_t n,
                                   const pdc_attrs *options, pdc_model **group_out);
/**
 * Compiles a group: pdc_model_group (inputs shared by name), the passes "share" (constants with identical
 * contents stored and packed once; a layer with the same op, attributes and inputs as another - the
 * common prefix of two fine-tuned variants of one backbone - computed once), "schedule" (independent
 * chains of similar cost side by side) and "plan" (one activation arena for the whole group), then
 * pdc_compile. Outputs are bit for bit those of each model compiled
 * alone. Find inputs and outputs with pdc_program_find_input/_output ("k/NAME" for model k's outputs).
 * @retval as pdc_model_group and pdc_compile (PDC_ERR_SHAPE also for a symbolic input)
 */
PDC_API pdc_status pdc_compile_group(pdc_context *ctx, const pdc_model *const *models, size_t n, const char *target,
                                     pdc_program **program_out);
/**
 * The index of the program's input / output named `name`, for pdc_program_run's arrays.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_NOT_FOUND (no such name: the message says so)
 * Thread-safety: any thread (the program is not changed).
 */
PDC_API pdc_status pdc_program_find_input(const pdc_program *program, const char *name, size_t *index_out);
PDC_API pdc_status pdc_program_find_output(const pdc_program *program, const char *name, size_t *index_out);
/* ------------------------------------------------------------------ latency model (docs/predict.md) */

/**
 * Predicts the run time of `model` on `target` ("cpu", or "auto" / NULL meaning "cpu") without compiling
 * it: per layer, from its kernel family (the one the cpu target takes it with), its effective FLOPs and
 * its bytes of kept weights and of activations, with constants from this host's latency profile
 * (pdc_calibrate) or, without a usable one, built-in defaults - then a PDC_NOTE_PREDICT_DEFAULTS note
 * says why (no profile, another host, another version, damaged). Layers the cpu target computes in a
 * conv's or fc's epilogue are predicted 0. Batch: the model's input shapes as they are.
 * @param[in] options  may be NULL; "threads" (0 = all cores; default: the context option "threads"),
 *                     "profile" (a profile file to use instead of this host's in cache_dir)
 * @param[out] total_ms_out  the sum over the layers, in milliseconds
 * @param[out] per_layer_ms  NULL, or one slot per layer (pdc_model_num_layers), written only on success
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL model or total_ms_out, unknown option, bad threads),
 *         PDC_ERR_UNSUPPORTED (target ref or gpu: no model), PDC_ERR_UNKNOWN_TARGET, PDC_ERR_SHAPE
 *         (a symbolic input dim), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_model_predict(pdc_context *ctx, const pdc_model *model, const char *target,
                                     const pdc_attrs *options, double *total_ms_out, double *per_layer_ms);
/**
 * Measures this host for the latency model: short micro-benchmarks of every cpu kernel family (one-layer
 * models at the sizes ResNet, VGG, MobileNetV2 and LSTMs give them) on 1 thread and on `threads`
 * threads, then fits each family's constants (deterministic given the measurements) and writes the
 * profile: a versioned text file keyed by CPU model, ISA and LLVM version, with a CRC-32, at
 * cache_dir/profiles/latency-XXXXXXXX.txt (atomically). Takes about options "budget_s" seconds.
 * @param[in] target   "cpu" (or NULL)
 * @param[in] options  may be NULL; "threads" (0 = all cores; default: the context option), "budget_s"
 *                     (1..3600, default 40), "profile" (write this file instead)
 * @param[out] path_out  NULL, or the profile's path (free with pdc_string_free)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_UNSUPPORTED (target ref or gpu), PDC_ERR_UNKNOWN_TARGET,
 *         PDC_ERR_IO (cache_dir not writable: the message names the path), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_calibrate(pdc_context *ctx, const char *target, const pdc_attrs *options, char **path_out);
/**
 * Tunes the cpu target's kernels for model's conv and fc layers at the context's thread count: each
 * distinct layer signature (op, shapes, attributes, which weights are kept, this host's CPU, ISA and LLVM, the
 * threads, pdc's version) that the tuning database in cache_dir/tune lacks is compiled alone with every
 * configuration the backend can honour (kernel family, tile, filters a work item, packing, threads the
 * layer runs on) and timed (a layer with nothing to choose, e.g. an fc on one thread, is not tuned),
 * dropping the slower half at each round (successive halving), within about options "budget_s" seconds
 * for the model; a configuration replaces the heuristics only if it beats them by more than 3% side by
 * side. Results go to the database (one file per signature, written atomically), where every later
 * pdc_compile for "cpu" of any model with that layer finds them (context option "tune"). Progress goes
 * to the progress handler (stage "tune LAYER": measurements done of planned), and a PDC_NOTE_TUNED
 * note per layer tuned to the note handler.
 * @param[in] target   "cpu" (or NULL)
 * @param[in] options  may be NULL; "budget_s" (1..3600, default 120)
 * @param[out] n_tuned_out  NULL, or the layers tuned now (0 when the database had them all)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, unknown option, bad budget_s), PDC_ERR_UNSUPPORTED (target ref
 *         or gpu), PDC_ERR_UNKNOWN_TARGET, PDC_ERR_SHAPE (a symbolic input dim), PDC_ERR_INVALID_MODEL,
 *         PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_model_tune(pdc_context *ctx, const pdc_model *model, const char *target,
                                  const pdc_attrs *options, size_t *n_tuned_out);
/**
 * Measures configuration `config` (0 <= config < n) of a pdc_search with `effort` units of whatever the
 * caller spends (timed runs, training epochs; >= 1); *cost_out: lower is better (INFINITY: failed; NaN
 * counts as that). Any status other than PDC_OK ends the search with that status.
 */
typedef pdc_status (*pdc_search_fn)(void *user, size_t config, int effort, double *cost_out);
/**
 * Successive halving over configurations 0..n-1, the engine of pdc_model_tune (docs/tuning.md): the
 * budget is split evenly over the rungs; each rung measures its survivors with budget / (rungs x
 * survivors) units each (calls measure once per survivor), keeps the best 1/eta and goes on until one is
 * left, so the units asked for never exceed the budget. A survivor is measured again with more effort
 * in the next rung: a caller may continue its work (e.g. from a checkpoint) rather than start again.
 * When the budget cannot give every configuration min_effort units, a sample drawn with the seed starts.
 * Deterministic given the seed and the costs. Progress goes to the progress handler (stage "search":
 * measurements done of planned).
 * @param[in] options  "budget" (units in all, required), "seed" (default 1), "min_effort" (default 1),
 *                     "eta" (>= 2, default 2)
 * @param[in] measure  called on the calling thread; user is passed to it (borrowed)
 * @param[out] best_out       the configuration left
 * @param[out] best_cost_out  NULL, or its cost at the last measurement
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, n 0, unknown option, bad value, budget < min_effort), or what
 *         measure returned
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_search(pdc_context *ctx, size_t n, const pdc_attrs *options, pdc_search_fn measure,
                              void *user, size_t *best_out, double *best_cost_out);
/**
 * Plans pruning to a latency budget: chooses for each prunable layer (a 3x3 conv that prune-pattern takes,
 * not the stem: dense, or 8 patterns of 4 with connectivity 0, 25, 50, 62.5, 75 or 87.5%; an fc or matmul
 * by a constant matrix, an lstm or a gru: dense, or 1x4 blocks with 50, 62.5, 75, 87.5 or 93.75% removed)
 * so that the predicted time (pdc_model_predict) is at most latency_ms while the sum over the layers of
 * the share of each layer's squared weight magnitude removed is least: exact by dynamic programming
 * over the time axis in steps of latency_ms/4000 (each choice's time rounded up to a step). The model is
 * not changed. The plan is "PIPELINE OPTION=VALUE ...": pdc_model_transform's pipeline and options
 * (e.g. "prune-pattern,prune-connectivity layers=conv2,conv3 patterns=8 pattern_size=4
 * connectivity=0,conv3=0.5"), which pdc_model_transform and pdc_trainer_prune take as their pipeline with
 * options NULL; "" when the model meets the budget dense.
 * @param[in] latency_ms  the budget, > 0
 * @param[in] options     may be NULL; "threads", "profile" as for pdc_model_predict
 * @param[out] plan_out   the plan (free with pdc_string_free). When no plan meets the budget: the fastest
 *                        plan the choices allow, and *predicted_ms_out > latency_ms says so
 * @param[out] predicted_ms_out  the plan's predicted time (may be NULL)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, latency_ms <= 0 or not finite: the message gives it, unknown
 *         option), PDC_ERR_UNSUPPORTED / PDC_ERR_UNKNOWN_TARGET (as pdc_model_predict), PDC_ERR_SHAPE,
 *         PDC_ERR_INVALID_MODEL, PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: not while other calls use ctx.
 */
PDC_API pdc_status pdc_model_plan(pdc_context *ctx, const pdc_model *model, const char *target, double latency_ms,
                                  const pdc_attrs *options, char **plan_out, double *predicted_ms_out);
/**
 * pdc_program_run that also writes each layer's wall time in milliseconds to layer_ms[i] (one slot per
 * layer; a layer computed in another's epilogue reads about 0). "cpu" programs only.
 * @retval as pdc_program_run, and PDC_ERR_INVALID_ARG (layer_ms NULL), PDC_ERR_UNSUPPORTED (not "cpu")
 * Thread-safety: as pdc_program_run.
 */
PDC_API pdc_status pdc_program_run_timed(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                                         size_t n_outputs, pdc_tensor *const *outputs, double *layer_ms);

/* ------------------------------------------------------------------ tensor */

/** Creates a tensor owning zero-filled f32 memory (64-byte aligned). Thread-safety: as any call on ctx;
 * a tensor is then used by one thread at a time, except that concurrent runs may read one input tensor. */
PDC_API pdc_status pdc_tensor_create(pdc_context *ctx, size_t rank, const int64_t *dims, pdc_tensor **tensor_out);
/** Creates a tensor over caller memory (borrowed: must hold prod(dims) floats and outlive the tensor). */
PDC_API pdc_status pdc_tensor_wrap(pdc_context *ctx, size_t rank, const int64_t *dims, float *data,
                                   pdc_tensor **tensor_out);
/** Destroys a tensor (frees its memory only if owned). NULL is a no-op. */
PDC_API void pdc_tensor_destroy(pdc_tensor *tensor);
/** The tensor's data (borrowed). NULL for a NULL tensor. */
PDC_API float *pdc_tensor_data(pdc_tensor *tensor);
/** Rank and dims (dims_out has room for PDC_MAX_RANK); either out may be NULL. */
PDC_API pdc_status pdc_tensor_shape(const pdc_tensor *tensor, size_t *rank_out, int64_t *dims_out);
/** Number of elements (0 for NULL). */
PDC_API size_t pdc_tensor_size(const pdc_tensor *tensor);

/* ------------------------------------------------------------------ training */

/**
 * A trainer: trains the constants (weights) of a model from batches of samples, in a loop the host
 * program drives - including pruning-retraining (pdc_trainer_prune), ADMM (pdc_trainer_admm_*) and
 * crash-safe checkpoints (pdc_trainer_save / _load). docs/training.md has a walk-through.
 *
 * The model has one graph input [N, ...] (the batch dim N is set by the trainer; [T, N, F] when an lstm/gru
 * reads it, as ONNX lays out sequences) and the loss reads
 * graph output 0: cross-entropy over its dim 1 (shape [N, classes]; a final softmax layer is folded into
 * the loss, so the loss is taken on its input, the logits), or mean squared error against targets of the
 * output's shape. Every constant read by a layer is trained (weights, biases, batchnorm scale and bias)
 * except batchnorm mean and var, which hold running statistics updated in training mode (batch statistics
 * are used while training, the running ones by pdc_trainer_evaluate and compiled programs). Ops with a
 * backward pass: conv (1-D, 2-D and 3-D; strides, pads, dilations, groups), fc, gemm, matmul, batchnorm,
 * relu, clip, leaky_relu, sigmoid, tanh, hardswish, hardsigmoid, add, sub, mul, div, concat, maxpool, avgpool
 * (2-D and 3-D), global_avgpool, flatten, reshape, transpose, softmax, the fused activations of conv/fc/gemm,
 * lstm and gru (every direction; initial states; outputs y, y_h, y_c).
 *
 * Pruned weights (a constant with a sparsity description, from pdc_model_set_sparsity_* or a pruning pass)
 * stay exactly zero, and so does their optimizer state, after every step; layers whose weights are sparse
 * enough use sparse kernels that compute gradients only for kept weights (option "sparse").
 *
 * Results depend only on the model, the options (seed included) and the batches: the same calls give
 * bit-identical weights, whatever the number of threads.
 */
typedef struct pdc_trainer pdc_trainer;

/**
 * Creates a trainer for a copy of model (the model itself is not changed or kept; read the trained model
 * with pdc_trainer_export). The weights start as the model's; pdc_trainer_init_weights draws new ones.
 * @param[in] ctx    must outlive the trainer
 * @param[in] model  verified here; not kept
 * @param[out] trainer_out  the new trainer
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL argument; the model has no input, more than one input, or no output
 * @retval PDC_ERR_UNSUPPORTED  a layer whose op has no backward pass (the message names the layer and op)
 * @retval PDC_ERR_INVALID_MODEL, PDC_ERR_SHAPE  the model does not verify, or not with the default batch of 32
 * @retval PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: as any call on ctx. A trainer is used by one thread at a time (it uses its own worker
 * threads inside calls, option "threads").
 */
PDC_API pdc_status pdc_trainer_create(pdc_context *ctx, const pdc_model *model, pdc_trainer **trainer_out);
/** Destroys a trainer. NULL is a no-op. Thread-safety: not while another call uses the trainer. */
PDC_API void pdc_trainer_destroy(pdc_trainer *trainer);

/**
 * Sets a training option by name (values are text, as pdc_context_set_option):
 *  - "loss"            "cross_entropy" (default) or "mse"
 *  - "optimizer"       "adam" (default), "adamw" (decoupled weight decay) or "sgd"
 *  - "lr"              learning rate > 0 (default 0.001)
 *  - "momentum"        sgd momentum in [0, 1) (default 0); "nesterov" 0 or 1 (default 0)
 *  - "weight_decay"    >= 0 (default 0): L2 term added to the gradient (sgd, adam), decoupled (adamw)
 *  - "beta1", "beta2"  Adam's moment decays in [0, 1) (defaults 0.9, 0.999); "eps" > 0 (default 1e-8)
 *  - "lr_schedule"     "constant" (default); "step": lr x lr_gamma^floor(step / lr_step); "cosine": from lr
 *                      down to lr_min over lr_total_steps steps, then lr_min
 *  - "lr_step" (integer >= 1, default 1000), "lr_gamma" (in (0, 1], default 0.1), "lr_total_steps"
 *                      (integer >= 1, default 10000), "lr_min" (>= 0, default 0)
 *  - "batch"           largest batch pdc_trainer_step accepts and the chunk size of pdc_trainer_evaluate,
 *                      1..65536 (default 32)
 *  - "seed"            64-bit unsigned integer seeding the trainer's random numbers (pdc_trainer_init_weights,
 *                      pdc_trainer_shuffle); setting it re-seeds (default 0)
 *  - "bn_momentum"     running-statistics update of batchnorm in [0, 1] (default 0.1, as PyTorch)
 *  - "threads"         worker threads, 0..4096 (0 = the context's "threads" option; default 0)
 *  - "kernels"         forward kernels. "native" (default): for conv and fc the cpu target's dense GEMM (OpenBLAS
 *                      sgemm over the whole batch) or the trainer's sparse kernels, the trainer's own for batchnorm,
 *                      relu and max pooling, the reference backend's for the other ops; "ref": the reference backend's for every layer (batchnorm in
 *                      training mode excepted: it needs batch statistics); "cpu": as native, but activations and
 *                      add/sub/mul/div run the cpu target's JIT-compiled kernels (bit-identical to the reference
 *                      ones; the cpu target's conv kernels pack the weights when compiled, so conv and fc keep
 *                      the trainer's). The backward pass is the same for all
 *  - "sparse"          "auto" (default): pruned conv weights whose kept share is at most sparse_threshold use
 *                      the sparse kernels, and so do fc weights of at least 65536 elements (a smaller fc is
 *                      faster on the dense kernels); "on": every pruned conv/fc weight does; "off": none (dense
 *                      kernels, the pruned weights still kept at zero)
 *  - "sparse_threshold"  in [0, 1] (default 0.6)
 *  - "recompute"       0 (default) or 1: conv layers do not keep their unrolled input (im2col: 9x a 3x3 conv's
 *                      input) from the forward pass but rebuild it in the backward pass, in one buffer shared by
 *                      all of them (less memory, one more unrolling per conv; the same results bit for bit)
 *  - "micro_batch"     0 (default) or 1..65536: pdc_trainer_step runs the forward and backward passes over
 *                      micro-batches of this many samples and adds their gradients in a fixed pairwise order
 *                      (see pdc_trainer_set_reducer), so that the gradient of a batch does not depend on how
 *                      its micro-batches are spread over processes; batchnorm uses each micro-batch's statistics
 * "loss" and "optimizer" cannot change after the first step (PDC_ERR_INVALID_STATE). Read-only values for
 * pdc_trainer_get_option: "step" (steps taken), "current_lr" (the rate of the next step), "isa" (the
 * kernels' instruction set).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, unknown name, bad value or read-only name: the message says
 *         which and what is accepted; nothing changed), PDC_ERR_INVALID_STATE
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_set_option(pdc_trainer *trainer, const char *name, const char *value);
/**
 * Reads an option (or a read-only value, see pdc_trainer_set_option) as text into buf, NUL-terminated.
 * Numbers are written so that setting them back gives the same value.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, unknown name, or cap too small: nothing written)
 */
PDC_API pdc_status pdc_trainer_get_option(const pdc_trainer *trainer, const char *name, char *buf, size_t cap);

/**
 * Draws new weights from the trainer's random numbers, as PyTorch initialises its layers: conv, fc and
 * gemm weights and biases uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (fan_in = inputs per output:
 * C/group x kernel size, or K), batchnorm scale 1, bias 0, mean 0, var 1. Pruned weights stay zero.
 * Other constants are left as they are. The optimizer state is reset to zero.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL)
 */
PDC_API pdc_status pdc_trainer_init_weights(pdc_trainer *trainer);
/**
 * A random permutation of 0..n-1 from the trainer's random numbers (Fisher-Yates), for shuffling the
 * samples of an epoch. The random state is saved in checkpoints, so a resumed run shuffles the same way.
 * @param[out] perm_out  n entries
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL perm_out with n > 0)
 */
PDC_API pdc_status pdc_trainer_shuffle(pdc_trainer *trainer, size_t n, size_t *perm_out);

/**
 * One training step: forward pass on the batch, loss, backward pass, one optimizer update of every
 * trained weight (and the ADMM proximal term while ADMM is on).
 * @param[in] inputs  [N, d1, ...]: N samples (1 <= N <= option "batch") of the model input's shape after
 *                    its batch dim; not kept
 * @param[in] labels  cross-entropy: [N], class indices stored as floats (exact integers in 0..classes-1);
 *                    mse: the output's shape with batch N. Not kept
 * @param[out] loss_out  mean loss over the batch, before the update (may be NULL)
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL trainer/inputs/labels; a label that is not an integer class index in range
 *         (the message names the sample, the value and the range)
 * @retval PDC_ERR_SHAPE  inputs or labels of the wrong shape, or N above the batch option (message: expected and got)
 * @retval PDC_ERR_NUMERIC  the loss or a gradient is NaN or infinite (the message names the step, and the weight
 *         for a gradient); the weights, optimizer state and step count are unchanged
 * @retval PDC_ERR_OUT_OF_MEMORY
 * On failure nothing changes (batchnorm running statistics included).
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_step(pdc_trainer *trainer, const pdc_tensor *inputs, const pdc_tensor *labels,
                                    float *loss_out);
/**
 * Loss and accuracy over a dataset of any size, in chunks of the batch option, in inference mode
 * (batchnorm uses running statistics; nothing is updated). Accuracy: the share of samples whose
 * highest output is the label (cross-entropy) or is where the target is highest (mse with more than one
 * output per sample; NaN otherwise).
 * @param[in] inputs, labels  as for pdc_trainer_step, with any N >= 1
 * @param[out] loss_out, accuracy_out  either may be NULL
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_SHAPE (as pdc_trainer_step), PDC_ERR_OUT_OF_MEMORY.
 *         Non-finite losses are returned as they are (no error).
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_evaluate(pdc_trainer *trainer, const pdc_tensor *inputs, const pdc_tensor *labels,
                                        float *loss_out, float *accuracy_out);

/** Number of constants the trainer holds (trained weights and batchnorm statistics). */
PDC_API pdc_status pdc_trainer_num_weights(const pdc_trainer *trainer, size_t *n_out);
/**
 * Describes constant i (model order): name (borrowed, valid until the trainer's next pdc_trainer_prune,
 * pdc_trainer_load or destroy), shape (dims_out has room for PDC_MAX_RANK), elements kept by its sparsity
 * (all when dense) and whether gradients train it (0 for batchnorm statistics). Any out may be NULL.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL trainer), PDC_ERR_NOT_FOUND (i too large)
 */
PDC_API pdc_status pdc_trainer_weight_info(const pdc_trainer *trainer, size_t i, const char **name_out,
                                           size_t *rank_out, int64_t *dims_out, size_t *kept_out,
                                           int *trainable_out);
/**
 * Copies the current values of a constant into data. name is a constant tensor's name, or a layer's name
 * for that layer's weight (its second input: conv, fc, gemm).
 * @param[out] data  n floats; n must be the constant's element count
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, or n wrong: the message gives the count), PDC_ERR_NOT_FOUND
 */
PDC_API pdc_status pdc_trainer_get_weights(const pdc_trainer *trainer, const char *name, float *data, size_t n);
/**
 * Replaces the values of a constant (named as for pdc_trainer_get_weights). The optimizer state is kept.
 * A pruned weight must get 0 wherever its sparsity removes it.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL, n wrong, NaN/Inf, or nonzero at a pruned position: the message
 *         gives the index; nothing changed), PDC_ERR_NOT_FOUND
 */
PDC_API pdc_status pdc_trainer_set_weights(pdc_trainer *trainer, const char *name, const float *data, size_t n);

/**
 * Prunes the trained weights with pruning passes and switches to masked retraining: runs the pipeline
 * (pruning passes only: prune-pattern, prune-connectivity, prune-block, prune-unstructured; options as
 * pdc_model_transform) on the trainer's model, so the weights are projected exactly as the passes project
 * them; from then on the pruned weights and their optimizer state stay exactly zero. Weights pruned before
 * stay pruned. pdc_model_transform's safe defaults apply: the stem, conv kernel sizes other than 3x3 (for
 * pattern and connectivity pruning) and 1x1 convs (for block pruning) stay dense unless options
 * "include_stem", "pattern_kernels", "block_convs" or "layers" say otherwise. The step count, options and
 * the optimizer state of kept weights are unchanged.
 * @param[in] options  may be NULL; not kept
 * @retval PDC_OK
 * @retval PDC_ERR_INVALID_ARG  NULL, or a pass that is not a pruning pass; and every error of
 *         pdc_model_transform. On failure nothing changes.
 * @retval PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_prune(pdc_trainer *trainer, const char *pipeline, const pdc_attrs *options);
/**
 * pdc_model_plan for the trainer's model (its current weights), with each choice's loss measured on a
 * calibration set instead of the weight magnitude it removes: for each prunable layer and choice, the
 * layer alone is projected as the choice prunes it, and the increase of pdc_trainer_evaluate's loss on
 * inputs / labels is that choice's loss (a sensitivity scan, as Distiller's; the layers are taken as
 * independent; ties are broken by magnitude). The trainer's weights are unchanged afterwards. Costs one
 * evaluation of the set per choice (6 per conv, 5 per fc). Apply the plan with pdc_trainer_prune(trainer,
 * plan, NULL), then retrain.
 * @param[in] inputs, labels  the calibration set, as for pdc_trainer_evaluate (a held-out part of the
 *                            training data)
 * @retval as pdc_model_plan, and as pdc_trainer_evaluate for inputs and labels
 * Thread-safety: one thread at a time per trainer; not while other calls use its context.
 */
PDC_API pdc_status pdc_trainer_plan(pdc_trainer *trainer, const char *target, double latency_ms,
                                    const pdc_attrs *options, const pdc_tensor *inputs, const pdc_tensor *labels,
                                    char **plan_out, double *predicted_ms_out);

/**
 * Starts ADMM pruning (Zhang et al. 2018) towards the sparsity the pruning pipeline gives (arguments as
 * pdc_trainer_prune). For every weight the pipeline prunes, Z = projection of W and U = 0; from now on every
 * pdc_trainer_step adds the gradient of the proximal term rho/2 ||W - Z + U||^2 (the W-step).
 * Call pdc_trainer_admm_update on your schedule (e.g. once per epoch) and pdc_trainer_admm_end at the end.
 * The projection is the pruning passes' own (the pipeline runs on a copy of the model holding W + U).
 * @param[in] rho  > 0
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (as pdc_trainer_prune; rho <= 0 or not finite), PDC_ERR_INVALID_STATE
 *         (ADMM already on), PDC_ERR_OUT_OF_MEMORY. On failure nothing changes.
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_admm_begin(pdc_trainer *trainer, const char *pipeline, const pdc_attrs *options,
                                          float rho);
/**
 * The ADMM Z- and U-steps: Z = projection of (W + U), then U = U + W - Z.
 * @param[out] residual_out  the primal residual ||W - Z|| / max(||W||, 1e-12) over all ADMM weights (may be NULL)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL trainer), PDC_ERR_INVALID_STATE (ADMM not on), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_trainer_admm_update(pdc_trainer *trainer, double *residual_out);
/**
 * Ends ADMM: hard-prunes W with the ADMM pipeline (as pdc_trainer_prune) and switches to masked retraining.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG, PDC_ERR_INVALID_STATE (ADMM not on), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_trainer_admm_end(pdc_trainer *trainer);

/**
 * Saves a checkpoint: weights, sparsity descriptions (masks), optimizer state, step count, options
 * (learning rate and schedule included), random state and ADMM state, in a versioned, CRC-32 checksummed
 * file (docs/training.md, "Checkpoints"). The file is written to a temporary name, fsync'd and renamed over path,
 * so a crash or kill at any moment leaves either the previous file or the new one, never a mix.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_IO (the message names the path and the reason; an
 *         existing file at path is untouched), PDC_ERR_OUT_OF_MEMORY
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_save(const pdc_trainer *trainer, const char *path);
/**
 * Restores a checkpoint saved from a trainer of the same model (same layers, and constants of the same
 * names and shapes): afterwards training continues exactly as the saved trainer would have (N steps, save,
 * load, N steps gives the same bits as 2N steps). Options are restored from the file.
 * @retval PDC_OK
 * @retval PDC_ERR_IO        cannot read path
 * @retval PDC_ERR_CORRUPT   not a checkpoint, newer version, truncated or checksum mismatch (the message says
 *                           which, with the offset)
 * @retval PDC_ERR_INVALID_ARG  NULL; a checkpoint of another model (the message names the first difference)
 * @retval PDC_ERR_OUT_OF_MEMORY
 * On failure the trainer is unchanged.
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_load(pdc_trainer *trainer, const char *path);
/**
 * A new model with the trained weights and their sparsity descriptions, shaped as the model the trainer
 * was created from: compile it with pdc_compile, save it with pdc_model_save. Destroy it with
 * pdc_model_destroy; it is independent of the trainer.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_OUT_OF_MEMORY
 */
PDC_API pdc_status pdc_trainer_export(const pdc_trainer *trainer, pdc_model **model_out);

/**
 * Gradient reducer for data-parallel training (docs/training.md, "Data-parallel training"; libpdc_mpi,
 * include/pdc_mpi.h, is one over MPI). pdc_trainer_step calls it on every process after the backward passes
 * with `parts` vectors of `n` floats one after the other in grads: part i is the gradient of the SUM of the
 * losses of this process's micro-batch i (option micro_batch; one part for the whole batch when it is 0),
 * packed: for every trainable constant in model order (pdc_trainer_weight_info), its kept entries only (pruned
 * weights never travel; n = the sum of their kept counts). *samples holds this process's samples.
 * The reducer leaves in grads[0..n) the sum of the parts of every process and in *samples the sum of the
 * samples of every process; the trainer divides the sum by it (the gradient of the mean loss) and updates.
 * A single process sums its parts with the pairwise tree: the sum of parts [a, a + c) is, for c > 1, the sum
 * of [a, a + h) plus the sum of [a + h, a + c), h the largest power of two below c. A reducer that sums the
 * parts of all processes in their global order (process 0's first) with the same tree gives the same bits as
 * one process running the whole batch with the same micro_batch.
 * Return PDC_OK, or a status with a NUL-terminated message in msg (msg_cap bytes): the step then fails with
 * that status, "trainer: step N: gradient reduction: MESSAGE", and changes nothing.
 */
typedef pdc_status (*pdc_gradient_reducer)(void *user, float *grads, size_t n, size_t parts, double *samples,
                                           char *msg, size_t msg_cap);
/**
 * Optional companion of a reducer, to overlap communication with the backward pass. When the step has one
 * part (option micro_batch 0), the trainer hands over every trainable weight's range [offset, offset + n) of
 * the packed gradient (the grads the reducer then receives) as soon as the backward pass has completed it:
 * the weights of the last layers first, in the same order on every process and at every step (a process
 * without samples hands over zeros in that order too); every range once per step, all before the reducer
 * is called. The trainer writes no handed-over range again in the step: the bucket function may start
 * summing it in place (MPI_Iallreduce) and the reducer finishes. Errors as for the reducer (the step fails).
 */
typedef pdc_status (*pdc_gradient_bucket)(void *user, float *grads, size_t offset, size_t n, char *msg,
                                          size_t msg_cap);
/**
 * Sets (reducer non-NULL) or removes (NULL) the trainer's gradient reducer, with an optional bucket function
 * (may be NULL). While a reducer is set, pdc_trainer_step also accepts inputs and labels both NULL: this
 * process has no samples in that step (parts = 0) but takes part in the reduction, as every process must in
 * every step; its loss_out is the mean over this process's samples (0 without any).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (trainer NULL)
 * Thread-safety: one thread at a time per trainer.
 */
PDC_API pdc_status pdc_trainer_set_reducer(pdc_trainer *trainer, pdc_gradient_reducer reducer,
                                           pdc_gradient_bucket bucket, void *user);
/**
 * Synchronised batchnorm for data-parallel training: sums[0..n) summed over every process, in place (the
 * same n, in the same order, on every process). With one set, batchnorm in training normalises with the
 * statistics of the global batch (every process's samples) instead of this process's: in the forward pass
 * of each batchnorm layer the trainer syncs the per-channel sums and the value count (C + 1), then the
 * squared deviations (C); in its backward pass the two per-channel gradient sums (2C). Needs one forward pass
 * per step (option micro_batch 0, or not below the batch); a process without samples takes part with zeros.
 * Errors as for the reducer (the step fails naming the layer).
 */
typedef pdc_status (*pdc_batchnorm_sync)(void *user, double *sums, size_t n, char *msg, size_t msg_cap);
/** Sets (sync non-NULL) or removes (NULL) the batchnorm sync. @retval PDC_OK, PDC_ERR_INVALID_ARG (trainer NULL) */
PDC_API pdc_status pdc_trainer_set_batchnorm_sync(pdc_trainer *trainer, pdc_batchnorm_sync sync, void *user);

#ifdef __cplusplus
}
#endif
#endif /* PDC_H */
