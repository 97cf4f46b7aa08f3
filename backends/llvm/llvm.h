/*
 * llvm.h - internal: the LLVM helpers every JIT backend shares (backends/cpu today).
 *
 *  - target:  the host CPU name and feature string, read at run time (never hard-coded: under
 *             valgrind the host has no AVX-512) and checked; the vector ISA kernels are built for.
 *  - jit:     one ORC LLJIT session per pdc_context, created on first use and destroyed with the
 *             context. Kernels are named by a hash of their specialisation, so a kernel that two
 *             layers (or two programs of one context) need is compiled and linked once.
 *  - kernels: pdc_jit_kernel() turns a kernel description into callable code: from this session if
 *             it is loaded already, else from the on-disk object cache, else by building the module
 *             (an emitter callback), verifying it, running the pass pipeline and emitting an object
 *             file, which is cached and then linked. Every step that can fail returns a status with a
 *             message; IR is always verified before codegen, so LLVM's abort-on-fatal-error path is
 *             never reached from our own modules.
 *
 * No LLVM type appears outside backends/: callers hand over plain bytes (the key) and a callback.
 */
#ifndef PDC_BACKENDS_LLVM_H
#define PDC_BACKENDS_LLVM_H

#include <stddef.h>
#include <stdint.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "lib/core/context.h"

/* ------------------------------------------------------------------ target */

/* Vector ISA the kernels use, chosen from the (effective) feature string. */
typedef enum pdc_isa { PDC_ISA_SSE = 0, PDC_ISA_AVX2 = 1, PDC_ISA_AVX512 = 2, PDC_ISA_NEON = 3 } pdc_isa;

typedef struct pdc_llvm_target {
    char triple[128];
    char cpu[64];
    char *features;   /* owned, "+a,-b,..." as LLVMGetHostCPUFeatures returns it, plus overrides */
    pdc_isa isa;
    int vec;          /* floats per vector register: 16, 8 or 4 */
    int n_vregs;      /* vector registers: 32 (AVX-512) or 16 */
} pdc_llvm_target;

/* Initialises LLVM's native target once per process (thread-safe). */
pdc_status pdc_llvm_init(const pdc_context *ctx);

/*
 * The host target. For tests, environment variables may narrow it:
 *   PDC_CPU           CPU name used for tuning (must be the host's own name or a name from a short
 *                     known list; the feature string, not the name, decides which instructions are used)
 *   PDC_CPU_FEATURES  comma-separated "-feature" (disable) or "+feature" (keep) entries; only names
 *                     the host's feature string lists are accepted, and "+" cannot enable a feature
 *                     the host lacks, so an override can never produce code the CPU cannot run.
 * Errors: PDC_ERR_INVALID_ARG naming the variable and the bad entry.
 */
pdc_status pdc_llvm_host_target(const pdc_context *ctx, pdc_llvm_target *t);
void pdc_llvm_target_free(pdc_llvm_target *t);
const char *pdc_isa_name(pdc_isa isa);

/* ------------------------------------------------------------------ JIT session and kernels */

typedef struct pdc_jit pdc_jit;

/* The context's JIT session, created on first use (destroyed by pdc_context_destroy). */
pdc_status pdc_jit_get(pdc_context *ctx, pdc_jit **jit_out);
const pdc_llvm_target *pdc_jit_target(const pdc_jit *jit);

/*
 * Builds the kernel's functions into module m (created in context c, target triple and data layout
 * already set). Every function the caller will look up must be named "<prefix>_<name>". The
 * emitter must produce IR that verifies; pdc_jit_kernel checks and reports it if it does not.
 * Returns PDC_OK or a status with the message set on ctx.
 */
typedef pdc_status (*pdc_kernel_emit_fn)(void *arg, const pdc_context *ctx, const pdc_llvm_target *t,
                                         LLVMContextRef c, LLVMModuleRef m, const char *prefix);

typedef struct pdc_kernel_desc {
    const void *key;            /* bytes that fully determine the generated code (not the weights) */
    size_t key_len;
    pdc_kernel_emit_fn emit;
    void *arg;
    size_t n_syms;              /* functions to look up */
    const char *const *syms;    /* their names, without the prefix */
} pdc_kernel_desc;

/* How a kernel was obtained (for inspection and tests). */
typedef enum pdc_kernel_origin { PDC_KERNEL_BUILT = 0, PDC_KERNEL_CACHED = 1, PDC_KERNEL_SHARED = 2 } pdc_kernel_origin;

/*
 * Returns the addresses of d->syms in addrs (n_syms entries). The code is owned by the session
 * and lives until the context is destroyed. The disk cache is the context's cache_dir option
 * ("" disables it); a cache entry that is unreadable, truncated, from another LLVM / CPU or with a
 * bad checksum is ignored and rewritten. origin_out may be NULL.
 * @retval PDC_OK, PDC_ERR_INTERNAL (LLVM failed: the message is LLVM's), PDC_ERR_OUT_OF_MEMORY
 */
pdc_status pdc_jit_kernel(pdc_jit *jit, const pdc_context *ctx, const pdc_kernel_desc *d, void **addrs,
                          pdc_kernel_origin *origin_out);

/* Session statistics (tests): kernels built, loaded from the disk cache, and shared in memory. */
void pdc_jit_stats(const pdc_jit *jit, size_t *built, size_t *cached, size_t *shared);

/* ------------------------------------------------------------------ hashing, cache files */

/* 128-bit non-cryptographic hash of bytes (two independent 64-bit lanes), for cache keys. */
typedef struct pdc_hash128 {
    uint64_t lo, hi;
} pdc_hash128;
void pdc_hash128_init(pdc_hash128 *h);
void pdc_hash128_update(pdc_hash128 *h, const void *data, size_t n);

/*
 * Object cache files: cache_dir/kernels/<32 hex digits>.o holding a header (magic, format version,
 * the full key, the object's length and the SHA-256 of key and object) and the object (format in
 * objcache.c). pdc_objcache_load returns PDC_ERR_NOT_FOUND for anything but a valid entry for
 * exactly this key - a regular file of this user's that others cannot write, whose SHA-256 matches
 * (it never fails harder: a broken entry is just a miss). pdc_objcache_store writes atomically and
 * ignores I/O errors (a cache that cannot be written only costs time), logging them at "info".
 * pdc_objcache_usable says whether dir may be used at all (0, with a warning logged, when it or its
 * kernels/ folder is not a directory owned by this user, or is writable by group or others);
 * pdc_objcache_remove deletes an entry whose object could not be linked, so the next compile
 * rebuilds it.
 */
int pdc_objcache_usable(const pdc_context *ctx, const char *dir);
pdc_status pdc_objcache_load(const pdc_context *ctx, const char *dir, pdc_hash128 h, const void *key, size_t key_len,
                             void **obj_out, size_t *obj_len_out);
void pdc_objcache_store(const pdc_context *ctx, const char *dir, pdc_hash128 h, const void *key, size_t key_len,
                        const void *obj, size_t obj_len);
void pdc_objcache_remove(const pdc_context *ctx, const char *dir, pdc_hash128 h);

/* ------------------------------------------------------------------ IR building helpers */

/* Small conveniences over the LLVM C builder used by the kernel generators. */
typedef struct pdc_irb {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMTypeRef f32, i32, i64, i1, ptr, vf;  /* vf: <vec x float> */
    int vec;
} pdc_irb;

void pdc_irb_init(pdc_irb *irb, LLVMContextRef c, LLVMModuleRef m, int vec);
void pdc_irb_dispose(pdc_irb *irb);
/* A function "<prefix>_<name>" returning void with the given parameters (all noalias where ptr),
 * attributes nounwind and "prefer-vector-width" matching the ISA. */
LLVMValueRef pdc_irb_function(pdc_irb *irb, const char *prefix, const char *name, unsigned n_params,
                              LLVMTypeRef *params);
LLVMValueRef pdc_irb_i64(pdc_irb *irb, int64_t v);
LLVMValueRef pdc_irb_i32(pdc_irb *irb, int32_t v);
LLVMValueRef pdc_irb_f32(pdc_irb *irb, float v);
/* v as a constant of like's type: a float, or a splat for a vector of irb->vec floats. */
LLVMValueRef pdc_irb_f32_like(pdc_irb *irb, LLVMValueRef like, float v);
/* &base[index] for float/i32/i64 element types (inbounds GEP). */
LLVMValueRef pdc_irb_gep(pdc_irb *irb, LLVMTypeRef elem, LLVMValueRef base, LLVMValueRef index);
LLVMValueRef pdc_irb_gepc(pdc_irb *irb, LLVMTypeRef elem, LLVMValueRef base, int64_t index);
/* Loads of one float broadcast to a vector, of an unaligned vector, of an i32 sign-extended to i64. */
LLVMValueRef pdc_irb_splat(pdc_irb *irb, LLVMValueRef scalar);
LLVMValueRef pdc_irb_load_splat(pdc_irb *irb, LLVMValueRef p);
LLVMValueRef pdc_irb_load_vec(pdc_irb *irb, LLVMValueRef p);
LLVMValueRef pdc_irb_load_i32_as_i64(pdc_irb *irb, LLVMValueRef p);
LLVMValueRef pdc_irb_load_i64(pdc_irb *irb, LLVMValueRef p);
/* Stores the lanes of v whose mask (a <vec x i1> constant) bit is set. */
void pdc_irb_store_masked(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask);
/* A vector load of the lanes whose mask (<vec x i1>) bit is set, the others 0 and not read; of the
 * first n_valid lanes (a plain load when n_valid >= vec). */
LLVMValueRef pdc_irb_load_masked(pdc_irb *irb, LLVMValueRef p, LLVMValueRef mask);
LLVMValueRef pdc_irb_load_vec_n(pdc_irb *irb, LLVMValueRef p, int n_valid);
/* Lane l from base[idx[l]] (idx: <vec x i32>, element offsets from base). */
LLVMValueRef pdc_irb_gather(pdc_irb *irb, LLVMValueRef base, LLVMValueRef idx);
/* Stores lane l of v at base[idx[l]] (idx: <vec x i32>, element offsets from base). */
void pdc_irb_scatter(pdc_irb *irb, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx);
/* Stores a vector; lanes < n_valid only (a masked store) when n_valid < vec. */
void pdc_irb_store_vec(pdc_irb *irb, LLVMValueRef v, LLVMValueRef p, int n_valid);
/* A read prefetch of the cache line at p (never faults). */
void pdc_irb_prefetch(pdc_irb *irb, LLVMValueRef p);
/* <vec x i1>: the lanes below n (an i64 computed at run time; none if n <= 0, all if n >= vec). */
LLVMValueRef pdc_irb_lanes_below(pdc_irb *irb, LLVMValueRef n);
/* The largest lane of a float vector (lanes that are NaN are passed over), the sum of its lanes (in
 * lane order). */
LLVMValueRef pdc_irb_reduce_max(pdc_irb *irb, LLVMValueRef v);
LLVMValueRef pdc_irb_reduce_add(pdc_irb *irb, LLVMValueRef v);
/* A counted loop `for (i = from; i < to; i += step)` (to > from not assumed) over var, an i64 alloca
 * of the entry block (mem2reg makes it a phi): returns i in the body, where the builder is left;
 * pdc_irb_loop_end closes it (after it, the builder is past the loop) and returns the latch branch,
 * for pdc_irb_loop_unroll. Values a loop carries live in allocas the same way. */
typedef struct pdc_irb_loop {
    LLVMValueRef var;
    int64_t step;
    LLVMBasicBlockRef head, body, after;
} pdc_irb_loop;
LLVMValueRef pdc_irb_loop_begin(pdc_irb *irb, LLVMValueRef fn, pdc_irb_loop *lp, LLVMValueRef var, LLVMValueRef from,
                                LLVMValueRef to, int64_t step, const char *name);
LLVMValueRef pdc_irb_loop_end(pdc_irb *irb, pdc_irb_loop *lp, LLVMValueRef i);
/* Asks LLVM to unroll the loop whose back edge is the branch `latch` count times (loop metadata). */
void pdc_irb_loop_unroll(pdc_irb *irb, LLVMValueRef latch, unsigned count);
/* Vector a*b + c through llvm.fmuladd (contracted to an FMA by the backend). */
LLVMValueRef pdc_irb_fma(pdc_irb *irb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
/* e^x of a float or a vector of irb->vec floats (irb_math.c): straight-line IR, no libm call; about
 * 2 ulp from the reference's double-precision exp, NaN in NaN out. x is clamped to [-87.3, 88.3]
 * (2^n stays a normal float): e^x below is about 5e-39 instead of smaller. */
LLVMValueRef pdc_irb_exp(pdc_irb *irb, LLVMValueRef x);
/* Activation p->act (relu, clip, leaky_relu, sigmoid, tanh, hardswish; none: v itself) of a float
 * or a vector of irb->vec floats, with p's clip bounds and slope: the one definition every JIT'd
 * kernel (cpu eltwise and conv epilogues, the ARM emitter) applies. sigmoid and tanh rest on
 * pdc_irb_exp and are as close to the reference. */
struct ir_fused_params;
LLVMValueRef pdc_irb_act(pdc_irb *irb, const struct ir_fused_params *p, LLVMValueRef v);

/* ------------------------------------------------------------------ ahead-of-time (aot.c) */

/*
 * A target machine for another machine's triple ("aarch64-unknown-linux-gnu", "nvptx64-nvidia-cuda"),
 * initialising that LLVM target once. cpu must already be validated against the caller's list (LLVM
 * accepts unknown names with only a warning). Dispose with LLVMDisposeTargetMachine.
 * @retval PDC_OK, PDC_ERR_UNSUPPORTED (this LLVM lacks the target), PDC_ERR_INTERNAL
 */
pdc_status pdc_llvm_aot_machine(const pdc_context *ctx, const char *triple, const char *cpu, const char *features,
                                LLVMRelocMode reloc, LLVMTargetMachineRef *tm_out);
/* Sets m's triple and data layout from tm (do it before building IR). */
void pdc_llvm_aot_prepare(LLVMTargetMachineRef tm, LLVMModuleRef m);
/*
 * Verifies m (a failure is PDC_ERR_INTERNAL naming `what`: a generator bug), runs default<O3> and emits
 * an object file or assembly (PTX for nvptx) into a new buffer (free with pdc_free; one NUL byte
 * follows the *size_out bytes). m is changed by the optimiser.
 */
pdc_status pdc_llvm_aot_emit(const pdc_context *ctx, LLVMTargetMachineRef tm, LLVMModuleRef m, const char *what,
                             LLVMCodeGenFileType kind, void **data_out, size_t *size_out);

#endif
