/*
 * gpu.h - internal to the gpu backend (target "gpu", emitter "nvptx").
 *
 * Three layers, one file each or a few:
 *  - plan (gpu_plan.c, gpu_conv.c, gpu_gemm.c, gpu_rnn.c, gpu_kernels.c): the model becomes a list of
 *    kernels, a launch list, a weights arena (constants, packed sparse weights, index arrays, all as
 *    4-byte words) and the size of one activation arena (graph inputs, activations, scratch). Every
 *    tensor lives at a constant offset of one of the two arenas, so every kernel has the same
 *    signature (act, wts, arg) and offsets, shapes and strides are compile-time constants.
 *  - kernel generation (gpu_kgen.c): one generator per kernel kind writes the work of ONE thread
 *    (global index idx, one output element or row) into an LLVM function. The index source is the
 *    only difference between the two flavours: PTX (NVPTX sregs ctaid/ntid/tid, a kernel entry) and
 *    host emulation (the same body inside a loop over every (block, thread) index, JIT-compiled
 *    for the host). Kernels use no barriers and no shared memory, so the host loop is exact.
 *  - device (gpu_device.c, cuda_loader.c): allocate, copy, load a module, launch, synchronise;
 *    either the CUDA driver (dlopen'd at run time) or the emulated device (host memory + host JIT),
 *    chosen with PDC_GPU_EMULATE=1.
 */
#ifndef PDC_BACKENDS_GPU_H
#define PDC_BACKENDS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/llvm/llvm.h"
#include "ir/ops/params.h"

/* Sets an error naming the layer and its op, "gpu: layer 'conv1' (conv): message"; the expression
 * gives status. */
#define GPU_LAYER_ERR(m, l, status, ...)                                                                \
    (pdc_error((m)->ctx, (status), __VA_ARGS__),                                                        \
     pdc_error_prefix((m)->ctx, "gpu: layer '%s' (%s)", (l)->name, ir_op_get_info((l)->op)->name), (status))

#define GPU_BLOCK 256          /* threads per block of every launch */
#define GPU_ALIGN_WORDS 16     /* arena slices start on 64-byte boundaries */
#define GPU_DEFAULT_ARCH "sm_80"

/* The SM versions accepted (option gpu_arch, pdc compile --arch), NULL-terminated, ascending. */
extern const char *const gpu_archs[];
/* 1 if arch is in gpu_archs. */
int gpu_arch_valid(const char *arch);
/* "sm_75, sm_80, ..." */
void gpu_arch_list(char *buf, size_t cap);

/* Where a tensor (or scratch) lives: word offset in the activation arena or the weights arena. */
typedef struct gpu_ref {
    int wts;          /* 0: activation arena, 1: weights arena */
    int64_t off;      /* in 4-byte words; -1: absent */
} gpu_ref;

/* An activation applied to a value (fused activations and the activation ops). */
typedef enum gpu_act_kind {
    GPU_ACT_NONE = 0, GPU_ACT_RELU, GPU_ACT_CLIP, GPU_ACT_LEAKY, GPU_ACT_SIGMOID, GPU_ACT_TANH, GPU_ACT_HARDSWISH,
    GPU_ACT_HARDSIGMOID
} gpu_act_kind;
typedef struct gpu_act {
    gpu_act_kind kind;
    float a, b;       /* clip: min, max; leaky: alpha; hardsigmoid: alpha, beta */
} gpu_act;
/* The fused activation of a layer (ir_fused_params) as a gpu_act. */
gpu_act gpu_act_from_fused(const ir_fused_params *fp);

typedef struct gpu_kb gpu_kb;
/* Writes one thread's work for global index kb->idx (already checked against the kernel's total). */
typedef void (*gpu_gen_fn)(gpu_kb *kb, const void *params);

typedef struct gpu_kernel {
    char name[40];        /* "L<layer>_<what>", a valid PTX identifier */
    int tiled;            /* 0: gen writes one thread's work for kb->idx (< total, checked);
                           * 1: gen writes a whole block's work for kb->block in phases separated by
                           *    barriers (kb_phase_begin/end), with shared memory; total is then
                           *    blocks * GPU_BLOCK and every thread runs every phase */
    gpu_gen_fn gen;
    void *params;         /* the generator's, owned (pdc_free; free_params first if set) */
    void (*free_params)(void *params);
    int64_t total;        /* threads with work */
    int layer;
} gpu_kernel;

typedef struct gpu_launch {
    uint32_t kernel;      /* index into plan->kernels */
    int32_t arg;          /* the kernel's third argument (RNN: direction * T + step) */
} gpu_launch;

typedef struct gpu_plan {
    pdc_context *ctx;
    gpu_kernel *kernels;
    size_t n_kernels, cap_kernels;
    gpu_launch *launches;
    size_t n_launches, cap_launches;
    float *wts;           /* host copy of the weights arena (int32 entries stored bit-exactly) */
    size_t wts_words, wts_cap;
    size_t act_words;     /* activation arena size */
    gpu_ref *tref;        /* per tensor */
    char (*info)[200];    /* per layer, for pdc_program_layer_kernel */
} gpu_plan;

/* Builds the plan of a verified model with concrete shapes. An op without a kernel:
 * PDC_ERR_UNSUPPORTED naming the layer and op. On failure *out is NULL. */
pdc_status gpu_plan_create(pdc_context *ctx, const ir_model *m, gpu_plan **out);
void gpu_plan_destroy(gpu_plan *p);
/* The launch list as text (NAME.launch.txt): one line per launch. Owned by the caller (pdc_free). */
pdc_status gpu_plan_launch_text(const gpu_plan *p, const ir_model *m, const char *arch, char **text_out,
                                size_t *len_out);

/* Plan building blocks (gpu_plan.c), for the per-op planners. */
/* Reserves n words of the weights arena (zeroed, aligned); returns the offset or -1 (error set). */
int64_t gpu_plan_wts(gpu_plan *p, size_t n);
/* Reserves n words of activation-arena scratch. */
int64_t gpu_plan_scratch(gpu_plan *p, size_t n);
/* Adds a kernel (params taken over, also on failure); returns its index or -1 (out of memory).
 * gpu_plan_kernel1 also adds one launch of it (arg 0). */
int gpu_plan_kernel(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                    void (*free_params)(void *), int64_t total);
int gpu_plan_kernel1(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                     void (*free_params)(void *), int64_t total);
/* A tiled kernel of `blocks` blocks (and one launch of it). */
int gpu_plan_tiled1(gpu_plan *p, int layer, const char *what, gpu_gen_fn gen, void *params,
                    void (*free_params)(void *), int64_t blocks);
pdc_status gpu_plan_launch(gpu_plan *p, int kernel, int32_t arg);
/* The tensor reference of layer input/output slot (absent: off = -1). */
gpu_ref gpu_in(const gpu_plan *p, const ir_layer *l, size_t i);
gpu_ref gpu_out(const gpu_plan *p, const ir_layer *l, size_t i);

/* Per-op planners: add kernels and launches for layer li and write plan->info[li]. */
pdc_status gpu_plan_conv(gpu_plan *p, const ir_model *m, size_t li);
pdc_status gpu_plan_gemm(gpu_plan *p, const ir_model *m, size_t li);      /* fc, gemm, matmul */
pdc_status gpu_plan_rnn(gpu_plan *p, const ir_model *m, size_t li);       /* lstm, gru */
pdc_status gpu_plan_simple(gpu_plan *p, const ir_model *m, size_t li);    /* everything else */

/* ------------------------------------------------------------------ kernel generation (gpu_kgen.c) */

struct gpu_kb {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMTypeRef f32, i32, i64, i1, ptr;
    int ptx;                    /* 1: NVPTX flavour, 0: host emulation */
    LLVMValueRef fn, act, wts;  /* current function and its arena pointers */
    LLVMValueRef arg;           /* i64 */
    LLVMValueRef idx;           /* i64 global thread index (per-thread kernels) */
    LLVMBasicBlockRef entry;    /* allocas go here */
    /* tiled kernels */
    LLVMValueRef block;         /* i64 block index */
    LLVMValueRef tid;           /* i64 thread index in the block: valid inside a phase only */
    LLVMValueRef ptx_tid;       /* PTX: tid.x, read once at entry */
    int in_phase;
    int n_shared;               /* shared arrays made so far (their names) */
    const char *kname;
    struct {
        LLVMValueRef var;
        LLVMBasicBlockRef head, exit;
    } tloop;                    /* host: the open phase's loop over the block's threads */
};

/* Builds every kernel of the plan into m: flavour ptx (entries "<name>(act, wts, arg)" marked as
 * kernels) or host ("<prefix>_<name>(act, wts, arg, grid, block)" looping over all thread indices). */
pdc_status gpu_kgen_module(const pdc_context *ctx, const gpu_plan *p, int ptx, LLVMContextRef c, LLVMModuleRef m,
                           const char *prefix);
/* The PTX of the whole plan for arch (validated). text_out: pdc_free, NUL-terminated. */
pdc_status gpu_kgen_ptx(const pdc_context *ctx, const gpu_plan *p, const char *arch, char **text_out, size_t *len_out);

LLVMValueRef kb_i64(gpu_kb *kb, int64_t v);
LLVMValueRef kb_i32(gpu_kb *kb, int32_t v);
LLVMValueRef kb_f32(gpu_kb *kb, float v);
/* r.base[r.off + i] as float / as int32 sign-extended to i64; store a float. */
LLVMValueRef kb_ld(gpu_kb *kb, gpu_ref r, LLVMValueRef i);
LLVMValueRef kb_ldi(gpu_kb *kb, gpu_ref r, LLVMValueRef i);
void kb_st(gpu_kb *kb, gpu_ref r, LLVMValueRef i, LLVMValueRef v);
/* Integer arithmetic on i64. */
LLVMValueRef kb_add(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_sub(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_mul(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_addc(gpu_kb *kb, LLVMValueRef a, int64_t c);
LLVMValueRef kb_mulc(gpu_kb *kb, LLVMValueRef a, int64_t c);
LLVMValueRef kb_divc(gpu_kb *kb, LLVMValueRef a, int64_t c);   /* a >= 0 */
LLVMValueRef kb_remc(gpu_kb *kb, LLVMValueRef a, int64_t c);   /* a >= 0 */
/* Float arithmetic. */
LLVMValueRef kb_fadd(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fsub(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fmul(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fdiv(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fma(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* exp (PTX: ex2.approx.ftz of x*log2(e); host: llvm.exp), sigmoid and tanh from it without overflow. */
LLVMValueRef kb_exp(gpu_kb *kb, LLVMValueRef x);
LLVMValueRef kb_sigmoid(gpu_kb *kb, LLVMValueRef x);
LLVMValueRef kb_tanh(gpu_kb *kb, LLVMValueRef x);
LLVMValueRef kb_act(gpu_kb *kb, const gpu_act *a, LLVMValueRef x);
/* Comparisons (i1) and select. */
LLVMValueRef kb_icmp(gpu_kb *kb, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_fcmp(gpu_kb *kb, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_and(gpu_kb *kb, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kb_sel(gpu_kb *kb, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b);
/* A mutable local (alloca in the entry block, promoted to a register by O3), initialised. */
LLVMValueRef kb_var(gpu_kb *kb, LLVMTypeRef t, LLVMValueRef init);
LLVMValueRef kb_get(gpu_kb *kb, LLVMTypeRef t, LLVMValueRef var);
void kb_set(gpu_kb *kb, LLVMValueRef var, LLVMValueRef v);
/*
 * Tiled kernels (gpu_kernel.tiled). The generator writes a block's work as a sequence of phases:
 *   kb_phase_begin(kb); ...one thread's code for thread kb->tid...; kb_phase_end(kb, barrier);
 * with block-uniform code (and block-uniform loops, e.g. over K tiles) around them. On PTX a phase is
 * just the thread's code followed by bar.sync 0 (llvm.nvvm.barrier0) when barrier is set; on the
 * emulated device it is a loop over all GPU_BLOCK threads of the block, so every thread finishes a
 * phase before any starts the next - exactly the barrier's semantics. Hence a value computed inside
 * a phase must not be used in a later one (the host IR would not even verify): keep it in a kb_tvar
 * or recompute it. Shared memory: kb_shared (PTX: an addrspace(3) array; host: a stack array of the
 * kernel call, one block at a time).
 */
void kb_phase_begin(gpu_kb *kb);
void kb_phase_end(gpu_kb *kb, int barrier);
/* A float array of n elements in shared memory; kb_sld / kb_sst access element i. */
LLVMValueRef kb_shared(gpu_kb *kb, int64_t n);
LLVMValueRef kb_sld(gpu_kb *kb, LLVMValueRef base, LLVMValueRef i);
void kb_sst(gpu_kb *kb, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v);
/* A per-thread float that lives across phases (PTX: a register; host: one slot per thread). */
LLVMValueRef kb_tvar(gpu_kb *kb);
LLVMValueRef kb_tget(gpu_kb *kb, LLVMValueRef var);
void kb_tset(gpu_kb *kb, LLVMValueRef var, LLVMValueRef v);

/* for (i = begin; i < end; i++) { ... }: kb_for returns i and leaves the builder in the body. */
typedef struct kb_loop {
    LLVMValueRef var;
    LLVMBasicBlockRef head, exit;
} kb_loop;
LLVMValueRef kb_for(gpu_kb *kb, kb_loop *L, LLVMValueRef begin, LLVMValueRef end);
void kb_endfor(gpu_kb *kb, kb_loop *L);
/* if (cond) { ... } [else { ... }] */
typedef struct kb_if {
    LLVMBasicBlockRef els, done;
} kb_if;
void kb_if_begin(gpu_kb *kb, kb_if *I, LLVMValueRef cond);
void kb_if_else(gpu_kb *kb, kb_if *I);
void kb_if_end(gpu_kb *kb, kb_if *I);

/* ------------------------------------------------------------------ device (gpu_device.c) */

typedef struct gpu_device gpu_device;
typedef struct gpu_module gpu_module;

/*
 * Opens the device: the emulated one when PDC_GPU_EMULATE=1, else the CUDA driver (library
 * PDC_CUDA_LIBRARY or libcuda.so.1), device 0, its primary context (retained, not made current:
 * see gpu_device_bind). PDC_ERR_NO_DEVICE with the reason (library missing, cuInit's error name,
 * no device) and what to do.
 */
pdc_status gpu_device_open(pdc_context *ctx, gpu_device **out);
void gpu_device_close(gpu_device *d);
int gpu_device_emulated(const gpu_device *d);
/* "sm_XY" of the device (emulated: ""). */
const char *gpu_device_arch(const gpu_device *d);
const char *gpu_device_name(const gpu_device *d);
/* Pushes the device's context onto the calling thread's context stack (CUDA's current context is
 * per thread: compile, run and destroy may come from different threads); every successful bind is
 * paired with an unbind on the same thread, which pops it, restoring what was current before. */
pdc_status gpu_device_bind(gpu_device *d);
void gpu_device_unbind(gpu_device *d);
/* Device memory (a plain cuMemAlloc); *addr is a device address. Out of memory: PDC_ERR_OUT_OF_MEMORY naming bytes. */
pdc_status gpu_mem_alloc(gpu_device *d, size_t bytes, uint64_t *addr);
void gpu_mem_free(gpu_device *d, uint64_t addr);
pdc_status gpu_mem_upload(gpu_device *d, uint64_t dst, const void *src, size_t bytes);
pdc_status gpu_mem_download(gpu_device *d, void *dst, uint64_t src, size_t bytes);
/* Loads the plan's kernels: PTX text on a real device, the host flavour JIT'd on the emulated one. */
pdc_status gpu_module_load(gpu_device *d, const gpu_plan *p, const char *ptx, gpu_module **out);
void gpu_module_unload(gpu_device *d, gpu_module *mod);
/* Launches kernel k of the plan (grid from its total) with arguments (act, wts, arg). */
pdc_status gpu_launch_kernel(gpu_device *d, gpu_module *mod, const gpu_plan *p, uint32_t k, uint64_t act, uint64_t wts,
                             int32_t arg);
pdc_status gpu_device_sync(gpu_device *d);

/* ------------------------------------------------------------------ benchmark hook (gpu_backend.c) */

/* Device execution only, for test/bench/gpu_bench.c (internal: not exported by libpdc.so, the
 * benchmark links libpdc.a): `reps` times, the program's whole launch list then cuCtxSynchronize,
 * no host<->device copies; secs[r] is each repetition's wall time (launch overhead included). The
 * arenas keep whatever the last pdc_program_run uploaded, so run once first. */
pdc_status gpu_program_time_launches(const pdc_program *prog, int reps, double *secs);

#endif
