/*
 * arm.h - internal to the "aarch64-linux-gnu" emitter: the state of one whole-model module while it
 * is built, and the helpers the per-op generators share.
 *
 * The emitted module holds every activation in one zero-initialised internal arena (the model's
 * memory plan if it has one, then the graph inputs, then a scratch area every layer may reuse), the
 * constants as internal read-only globals, one internal function per layer, and the public
 * NAME_run / NAME_version. Every tensor address is therefore a link-time constant: the loops below
 * have constant bounds and constant base addresses, which is what LLVM's loop vectoriser needs to
 * produce NEON code without run-time alias checks.
 */
#ifndef PDC_BACKENDS_ARM_H
#define PDC_BACKENDS_ARM_H

#include "backends/backend.h"
#include "backends/llvm/llvm.h"
#include "ir/ops/params.h"

#define ARM_NO_SLOT SIZE_MAX

typedef struct arm_gen {
    pdc_context *ctx;
    const ir_model *m;
    pdc_llvm_target t;           /* vec 4 (q registers), 32 vector registers, PDC_ISA_NEON */
    pdc_irb irb;                 /* vec = 4 */
    LLVMTypeRef void_t;
    LLVMValueRef arena;          /* placeholder until the arena size is known (replaced at the end) */
    size_t *off;                 /* per tensor: float offset in the arena, ARM_NO_SLOT if not there */
    LLVMValueRef *cglob;         /* per tensor: its constant's global (made on first use) */
    size_t scratch_off;          /* floats: start of the shared scratch area */
    size_t scratch_floats;       /* largest scratch any layer asked for */
    size_t n_globals;            /* for unique global names */
    size_t const_bytes;          /* bytes of constants embedded (statistics) */
    LLVMValueRef fn;             /* function being built */
    size_t li;                   /* layer being emitted */
} arm_gen;

/* A counted loop 0..n-1 (n >= 1, a constant) around the code built between begin and end. */
typedef struct arm_loop {
    LLVMBasicBlockRef body;
    LLVMValueRef phi;
    int64_t n;
} arm_loop;
LLVMValueRef arm_loop_begin(arm_gen *G, int64_t n, arm_loop *L);
void arm_loop_end(arm_gen *G, arm_loop *L);

/* i64 arithmetic (nsw) with constants folded. */
LLVMValueRef arm_i64(arm_gen *G, int64_t v);
LLVMValueRef arm_add(arm_gen *G, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef arm_addc(arm_gen *G, LLVMValueRef a, int64_t c);
LLVMValueRef arm_mulc(arm_gen *G, LLVMValueRef a, int64_t c);
/* a*ca + b*cb + c (b may be NULL). */
LLVMValueRef arm_affine(arm_gen *G, LLVMValueRef a, int64_t ca, LLVMValueRef b, int64_t cb, int64_t c);

/* Float access: base[idx]. */
LLVMValueRef arm_ldf(arm_gen *G, LLVMValueRef base, LLVMValueRef idx);
void arm_stf(arm_gen *G, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v);
LLVMValueRef arm_f32(arm_gen *G, float v);
/* Pointer to float element off of the arena (a constant expression). */
LLVMValueRef arm_arena_at(arm_gen *G, size_t off);
/* Pointer to tensor t's data: its arena slot, or its constant (embedded on first use). */
pdc_status arm_tensor_ptr(arm_gen *G, int t, LLVMValueRef *out);
/* An internal read-only global holding n bytes (16-byte aligned). */
LLVMValueRef arm_const_bytes(arm_gen *G, const void *data, size_t n, const char *what);
/* The shared scratch area, asking for at least n floats. */
LLVMValueRef arm_scratch(arm_gen *G, size_t n);
/* Element-wise helpers: memset to zero / memmove of n floats. */
void arm_zero(arm_gen *G, LLVMValueRef dst, int64_t n);
void arm_move(arm_gen *G, LLVMValueRef dst, LLVMValueRef src, int64_t n);

/* Activation of kind act (params from p) applied to scalar v. */
LLVMValueRef arm_act(arm_gen *G, const ir_fused_params *p, LLVMValueRef v);
/* y[i] = act(y[i]) for n floats (no-op for IR_ACT_NONE). */
void arm_act_inplace(arm_gen *G, const ir_fused_params *p, LLVMValueRef y, int64_t n);

/* Error naming the layer: "emit: layer 'X' (op Y): why". */
pdc_status arm_unsupported(arm_gen *G, const ir_layer *l, const char *why);

/* A block-sparse product y[0, o) = bias + W x over rows of a block- or unstructured-pruned constant
 * (arm_sparse.c, the cpu target's generator retargeted): kernel and packed arrays in the module. */
typedef struct arm_bsr {
    LLVMValueRef fn, rowptr, col, wpk;
    LLVMTypeRef fty;
    int64_t k, kpad, o, nbr, bh, bw;  /* columns, columns x must hold (zeros past k), rows, block-rows, block */
    size_t kept, total;               /* weights kept, weights in the rows */
} arm_bsr;
/* Plans rows [row0, row0 + rows) of wt's matrix view; PDC_ERR_UNSUPPORTED (nothing on ctx) where the
 * cpu target would run them dense too (not pruned by blocks or elements, too dense, misaligned). */
pdc_status arm_bsr_plan(arm_gen *G, const ir_tensor *wt, int64_t row0, int64_t rows, arm_bsr *S);
/* x itself if it may be read kpad floats far, else its k floats copied into buf (kpad floats) with
 * zeros after them. */
LLVMValueRef arm_bsr_input(arm_gen *G, const arm_bsr *S, LLVMValueRef x, LLVMValueRef buf);
/* y[0, o) = bias[0, o) + W x (x: kpad floats; y must not overlap x or bias). */
void arm_bsr_call(arm_gen *G, const arm_bsr *S, LLVMValueRef x, LLVMValueRef bias, LLVMValueRef y);

/* A product by rows of a BCR-pruned constant (prune-bcr; arm_bcr.c, cpu_bcr_plan's packing): per block-row
 * the kept columns' inputs gathered and their weights as one vector of bh rows. */
typedef struct arm_bcr {
    LLVMValueRef rowptr, col, wpk;
    int64_t rows, bh;         /* rows of the slice, block height */
    size_t kept, total;       /* weights kept, weights in the rows */
} arm_bcr;
/* Plans rows [row0, row0 + rows) of wt's matrix view; PDC_ERR_UNSUPPORTED (nothing on ctx) unless wt is
 * BCR-sparse and the slice starts on a block-row and ends on one or at the matrix's end. */
pdc_status arm_bcr_plan(arm_gen *G, const ir_tensor *wt, int64_t row0, int64_t rows, arm_bcr *S);
/* y[0, rows) += W x (emitted inline; x: the matrix's columns). */
void arm_bcr_product(arm_gen *G, const arm_bcr *S, LLVMValueRef x, LLVMValueRef y);
/* y[r][0, np) += sum over kept columns c of W[r][c] x[c][0, np): planes of np pixels (a 1x1 conv's image). */
void arm_bcr_product_planes(arm_gen *G, const arm_bcr *S, LLVMValueRef x, int64_t np, LLVMValueRef y);

/* Per-op generators: build the body of the current function for layer l. */
pdc_status arm_emit_conv(arm_gen *G, const ir_layer *l);
pdc_status arm_emit_op(arm_gen *G, const ir_layer *l);          /* everything but conv (arm_ops.c) */
pdc_status arm_emit_rnn(arm_gen *G, const ir_layer *l);         /* lstm, gru (arm_rnn.c) */

/* The whole module (arm_graph.c): target machine in, object file out. */
pdc_status arm_build_object(pdc_context *ctx, const ir_model *m, const char *name, const char *cpu, void **obj,
                            size_t *obj_size, size_t *const_bytes);
/* NAME.h (arm_header.c). */
pdc_status arm_header(pdc_context *ctx, const ir_model *m, const char *name, const char *cpu, char **text,
                      size_t *size);
/* A GNU ar archive with one object member and a symbol index of `syms` (archive.c). */
pdc_status arm_archive(pdc_context *ctx, const char *member, const void *obj, size_t obj_size,
                       const char *const *syms, size_t n_syms, void **out, size_t *out_size);

#endif
