/*
 * backend.h - the interface every backend implements: compile a program's private model copy,
 * run it, free its state. lib/program.c owns the target registry and does all argument and shape
 * checking, so backends see only validated calls.
 */
#ifndef PDC_BACKENDS_BACKEND_H
#define PDC_BACKENDS_BACKEND_H

#include "ir/ir.h"

/* Kernel choices for one layer that a tuner made (lib/tune) and the cpu target follows instead of
 * its heuristics; 0 in a field keeps the heuristic's choice. Where a choice cannot be honoured (a
 * family that does not take the layer) the heuristic's stands. Zero it before filling. */
typedef enum pdc_knob_family {
    PDC_KNOB_AUTO = 0,    /* the planners' own order */
    PDC_KNOB_ROWS = 1,    /* conv: the pattern kernel along rows (conv.c; dense layers as one full pattern) */
    PDC_KNOB_CMAJOR = 2,  /* conv: the channel-major pattern kernel (conv_cmajor.c) */
    PDC_KNOB_OCVEC = 3,   /* conv: dense, output channels vectorised (conv_ocvec.c) */
    PDC_KNOB_DENSE = 4    /* conv: dense, several filters a tile (conv_dense.c) */
} pdc_knob_family;
#define PDC_KNOB_FAMILIES 5
typedef struct pdc_layer_knobs {
    int32_t family;       /* a pdc_knob_family */
    int32_t tile_y, tile_x; /* PDC_KNOB_ROWS: tile rows x vectors (within the accumulator budget) */
    int32_t chunk;        /* PDC_KNOB_ROWS: filters a work item */
    int32_t whole;        /* PDC_KNOB_ROWS: 1 = pack the whole input, never in row bands */
    int32_t threads;      /* any family: at most this many of the program's threads run the layer (0: all) */
} pdc_layer_knobs;

/* A layer's predicted time on t threads: serial_ms + parallel_ms / t (lib/cost's latency model). */
typedef struct pdc_layer_cost {
    double serial_ms, parallel_ms;
} pdc_layer_cost;

struct pdc_program {
    pdc_context *ctx;
    const struct pdc_backend *backend;
    ir_model *model;      /* owned deep copy, shapes concrete, verified */
    void *state;          /* backend-private */
    pdc_layer_knobs *knobs; /* NULL, or one per layer of model (owned, pdc_free): set before compile */
    pdc_layer_cost *cost;   /* NULL, or one per layer of model (owned, pdc_free): set before compile */
};

typedef struct pdc_backend {
    const char *name;
    const char *description;
    /* Builds prog->state from prog->model. On failure leaves prog->state NULL (or freeable by destroy). */
    pdc_status (*compile)(pdc_program *prog);
    /* inputs[i]/outputs[i] follow prog->model->inputs/outputs and have exactly their shapes. live: NULL,
     * or one flag per layer: only the layers flagged run (ir_model_live_layers), outputs[i] is NULL for
     * the outputs not wanted and inputs[i] NULL for inputs no flagged layer reads.
     * Must be safe to call from several threads at once; must write outputs only on success. */
    pdc_status (*run)(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                      const uint8_t *live);
    /* Frees prog->state (may be NULL). */
    void (*destroy)(pdc_program *prog);
    /* Optional: what runs layer i (never NULL; "" if unknown). NULL: pdc_program_layer_kernel says
     * "reference interpreter". */
    const char *(*layer_info)(const pdc_program *prog, size_t i);
} pdc_backend;

/* The kernel configurations the cpu target can honour for layer li of m (backends/cpu/conv/
 * conv_knobs.c) at the context's thread count: *out_n entries (owned, pdc_free), the first all zeros
 * (its heuristics); a layer with nothing to choose (neither a conv nor an fc, a conv the reference
 * kernel runs, an fc on one thread) gets just that one. */
pdc_status pdc_cpu_knob_space(pdc_context *ctx, const ir_model *m, size_t li, pdc_layer_knobs **out, size_t *n_out);

/* ------------------------------------------------------------------ ahead-of-time emitters */

/* One generated file: name (no directory part) and bytes, both owned (pdc_free). */
typedef struct pdc_emit_file {
    char *name;
    void *data;
    size_t size;
} pdc_emit_file;

/* What an emitter produces; lib/emit.c writes the set into the directory all-or-nothing. */
typedef struct pdc_emit_out {
    pdc_emit_file *files;
    size_t n_files, cap;
} pdc_emit_out;

/* Appends a file (name copied, data taken over: on failure data is freed). PDC_ERR_OUT_OF_MEMORY. */
pdc_status pdc_emit_add(const pdc_context *ctx, pdc_emit_out *out, const char *name, void *data, size_t size);

/* Options every emitter reads, validated by lib/emit.c before the call. */
typedef struct pdc_emit_options {
    const char *name;     /* C identifier, files NAME.* */
    const char *cpu;      /* aarch64 CPU, from the emitter's list (NULL: its default) */
    const char *arch;     /* nvptx SM, from the emitter's list (NULL: its default) */
} pdc_emit_options;

typedef struct pdc_emitter {
    const char *target;
    const char *description;
    const char *const *cpus;    /* accepted "cpu" values (NULL-terminated; NULL: option not accepted) */
    const char *const *archs;   /* accepted "arch" values (likewise) */
    /* m: a private verified copy with concrete shapes. Files go to out (freed by the caller). */
    pdc_status (*emit)(pdc_context *ctx, const ir_model *m, const pdc_emit_options *opt, pdc_emit_out *out);
} pdc_emitter;

extern const pdc_backend pdc_backend_ref;
extern const pdc_backend pdc_backend_cpu;
extern const pdc_backend pdc_backend_gpu;

/* The worker threads each run of a "cpu" program uses (>= 1; backends/cpu, for pdc_program_num_threads). */
size_t pdc_cpu_program_threads(const pdc_program *prog);

/* One run of a "cpu" program (as its backend's run) that also writes each layer's wall time in ms to
 * layer_ms[i] (one slot per layer of prog->model; a layer fused into another's epilogue reads ~0, one not in live 0). */
pdc_status pdc_cpu_run_timed(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                             const uint8_t *live, double *layer_ms);
/* The threads a "cpu" run asked for `threads` would use right now (fewer while other processes keep
 * cores busy: backends/cpu/team.c). */
int pdc_cpu_team_size(int threads);
/* What kernel timings on this host depend on, one line: "CPU model; LLVM CPU name; ISA; LLVM x.y.z"
 * (creates ctx's JIT session if needed). */
pdc_status pdc_cpu_host_key(pdc_context *ctx, char *buf, size_t cap);

/* The "cpu" target's elementwise kernels for a model whose constants change between runs (the trainer's
 * forward pass, lib/train): planned per layer for m's current shapes - plan again when they change; the
 * JIT'd code stays in ctx's cache. Only kernels that take every operand at run time are used, so they
 * compute bit for bit what the reference kernels compute (backends/cpu/train_bridge.c). */
typedef struct cpu_eltwise_set cpu_eltwise_set;
pdc_status cpu_eltwise_plan(pdc_context *ctx, const ir_model *m, int threads, cpu_eltwise_set **out);
/* 1 if layer li has a kernel (set may be NULL). */
int cpu_eltwise_has(const cpu_eltwise_set *set, size_t li);
/* Runs layer li's kernel: reads and writes the tensors' values val[tensor index]. */
pdc_status cpu_eltwise_run(const cpu_eltwise_set *set, const ir_model *m, size_t li, float *const *val);
void cpu_eltwise_free(cpu_eltwise_set *set);

/* C = alpha op(A) op(B) + beta C, row-major (op: the transpose where ta / tb), m x n x k: the cpu target's
 * dense GEMM (OpenBLAS sgemm, single-threaded calls) for the trainer's conv and fc (lib/train). The output
 * is cut into blocks of rows or columns whose bounds depend on m, n and k alone; `threads` (>= 1) only says how
 * many run at once, so every element comes from a call of the same shape and the results are bit-identical
 * for any thread count. */
void cpu_train_sgemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                     const float *b, size_t ldb, float beta, float *c, size_t ldc, int threads);

/* 1 if value is "auto" or an SM the gpu backend generates for; list gets "sm_75, sm_80, ..." either way
 * (backends/gpu, for the context option gpu_arch). */
int pdc_gpu_arch_valid(const char *value, char *list, size_t cap);

#endif
