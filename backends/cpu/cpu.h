/*
 * cpu.h - internal to the "cpu" target: how a layer's compiled form looks, and the kernel families
 * (one file each) that produce it.
 *
 * compile() asks the families in turn to plan each layer; the first that accepts it fills a
 * cpu_layer (JIT'd code, packed weights, a run function and a line for `pdc inspect`). A layer no
 * family accepts runs the reference kernel, with the reason recorded ("ref fallback: ..."). Every
 * family is safe to run from many threads at once: after compile nothing it owns is written.
 */
#ifndef PDC_BACKENDS_CPU_H
#define PDC_BACKENDS_CPU_H

/* Function multiversioning for the few hot C loops: one clone per ISA, picked by an ifunc resolver
 * at load time. ThreadSanitizer instruments the resolver, which then runs before the TSan runtime
 * exists and crashes the process at start-up (seen with gcc 12 and clang 19), so sanitizer builds use one
 * clone. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define PDC_SANITIZED 1
#elif defined(__has_feature) /* clang says it so */
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define PDC_SANITIZED 1
#endif
#endif
#ifdef PDC_SANITIZED
#define PDC_ISA_CLONES
#define PDC_ISA_CLONES_NO_AVX512
#else
#define PDC_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
/* for code with an AVX-512 version of its own (pool.c) */
#define PDC_ISA_CLONES_NO_AVX512 __attribute__((target_clones("avx2", "default")))
#endif

#include <stdatomic.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/llvm/llvm.h"
#include "ir/ops/epilogue.h"

/* One thread's share of a parallel region's work items (shares.c); the array has a slot per thread.
 * 128 bytes: adjacent-line prefetchers fetch 64-byte lines in 128-byte pairs, so two owners' words
 * never share a pair (whatever the array's 64-byte alignment). */
typedef struct cpu_share {
    _Alignas(64) _Atomic uint64_t span; /* back << 32 | front: items [front, back) not yet taken */
    int64_t run;                        /* items the owner claims at a time (set by cpu_share_split) */
    char pad[128 - 2 * sizeof(uint64_t)];
} cpu_share;

/* What a layer's run function gets besides its tensors. */
typedef struct cpu_exec {
    int threads;          /* OpenMP threads to use (>= 1) */
    float *scratch;       /* this run's scratch, cpu_layer.scratch_floats floats, 64-byte aligned */
    float *const *own;    /* per thread t < threads: its private scratch, cpu_layer.thread_floats floats,
                           * 64-byte aligned, an allocation of its own (cpu_backend.c says why);
                           * NULL entries where no layer needs any */
    cpu_share *shares;    /* `threads` slots for cpu_share_split/next; required where a conv runs
                           * (NULL only where no layer uses them: train_bridge.c's elementwise ops) */
} cpu_exec;

typedef struct cpu_layer cpu_layer;
/* Runs the layer: inputs and outputs through buf[tensor index] as in the reference backend. */
typedef pdc_status (*cpu_run_fn)(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                                 const cpu_exec *x);

/*
 * Layers after a conv, fc or matmul that its epilogue computes (ir/ops/epilogue.h): a conv writes
 * act?(conv(x) + buf[residual]?) to buf[out] (the last taken layer's output), an fc or matmul
 * act?(x w + bias?), and the taken layers do nothing. cpu_backend.c finds where the graph and the
 * memory plan allow it (cpu_fuse.c); a family that can take it says so in cpu_layer.fused.
 */
struct cpu_layer {
    cpu_run_fn run;              /* NULL: the reference kernel runs this layer */
    void *state;                 /* the family's, freed with free_state */
    void (*free_state)(void *state);
    size_t scratch_floats;       /* scratch one run of this layer needs, shared by its threads */
    size_t thread_floats;        /* private scratch each of its threads needs (cpu_exec.own) */
    int fused;                   /* took cpu_compile.fuse: epi is in its epilogue */
    int threads;                 /* tuned (pdc_layer_knobs.threads): at most this many threads run it; 0: all */
    ir_epilogue epi;
    char info[320];              /* for pdc_program_layer_kernel: kernel chosen and why (and fused layers) */
};

#define CPU_NO_SLOT SIZE_MAX /* a tensor outside the activation arena */

/* The epilogue layer li (a conv, fc or matmul) may take, given each tensor's arena offset and size
 * (CPU_NO_SLOT: not in the arena): 1 and *e where the graph and the memory plan allow it
 * (cpu_fuse.c), else 0. */
int cpu_fuse_epilogue(const ir_model *m, size_t li, const size_t *offset, const size_t *numel, ir_epilogue *e);
/* The weights and bias of conv layer li with e's batchnorm folded in (w' = w * g, b' = b * g + shift
 * per output channel, in double), in new allocations (freed with pdc_free); PDC_ERR_UNSUPPORTED
 * (nothing allocated) if a folded value is not finite as a float: the layers then run unfused. */
pdc_status cpu_fuse_fold_batchnorm(pdc_context *ctx, const ir_model *m, size_t li, const ir_epilogue *e, float **w,
                                   float **b);

/* Compile-time facts every family may use. */
typedef struct cpu_compile {
    pdc_context *ctx;
    pdc_jit *jit;                /* the context's JIT session */
    const pdc_llvm_target *target;
    int threads;
    const ir_epilogue *fuse;     /* an epilogue the layer being planned may take, or NULL */
    const float *fold_w, *fold_b; /* with fuse->bn >= 0: the conv's weights and bias, batchnorm folded in */
    const pdc_layer_knobs *knobs; /* the layer's tuned choices (pdc_program.knobs), or NULL: heuristics */
} cpu_compile;

/* The epilogue offered (cc->fuse) to a layer with fused params fp (it has no activation of its own
 * then): the epilogue's activation becomes fp's. Returns 1 if it adds a residual. */
static inline int cpu_plan_epilogue(const cpu_compile *cc, ir_fused_params *fp)
{
    if (!cc->fuse) return 0;
    fp->act = cc->fuse->act.act;
    fp->act_min = cc->fuse->act.act_min;
    fp->act_max = cc->fuse->act.act_max;
    fp->act_alpha = cc->fuse->act.act_alpha;
    return cc->fuse->residual >= 0;
}
/* On success: the layer takes the epilogue offered, if any (its run writes epi.out, adding
 * epi.residual or epi.bias if any). */
static inline void cpu_take_epilogue(const cpu_compile *cc, cpu_layer *L)
{
    if (!cc->fuse) return;
    L->fused = 1;
    L->epi = *cc->fuse;
}
/* The buffer a layer's run writes: its epilogue's output if it took one. */
static inline float *cpu_layer_out(const cpu_layer *L, const ir_layer *l, float *const *buf)
{
    return buf[L->fused ? L->epi.out : l->outputs[0]];
}

/*
 * A family's planner: PDC_OK and L filled (run != NULL) if it takes the layer; PDC_ERR_UNSUPPORTED
 * with a short reason in why (no message on ctx needed) if it does not; any other status is a real
 * failure (out of memory, LLVM error) that fails the compile.
 */
typedef pdc_status (*cpu_plan_fn)(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L,
                                  char *why, size_t why_cap);

pdc_status cpu_plan_conv(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap);
/* 3-D convs through the 2-D conv planner, one output depth plane at a time (conv3d.c). */
pdc_status cpu_plan_conv3d(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                           size_t why_cap);
/* The 2-D conv an output depth plane of 3-D conv l is (conv3d.c) when it runs depth taps [k0, k1) (see
 * conv3d_taps.h), as a model of its own: input "x2" [1, C*NK, H, W] (NK = k1 - k0; input plane (c, j) =
 * channel c at depth od*sd + (k0 + j)*dd - pd), weight "w2" [O, C/g*NK, KH, KW] = the depth slices k0..k1-1
 * of w3 (l's weight, or one with a batchnorm folded in) with l's sparsity as a mask, bias "b2" = b3 (if not
 * NULL), with residual an input "r2" [1, O, OH, OW], output "y2" [1, O, OH, OW]; l's attributes in 2-D.
 * The ARM emitter uses it too. */
pdc_status cpu_conv3d_as_2d(pdc_context *ctx, const ir_model *m, const ir_layer *l, const float *w3, const float *b3,
                           int residual, int64_t k0, int64_t k1, ir_model **out);
pdc_status cpu_plan_gemm(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap);
pdc_status cpu_plan_eltwise(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                            size_t why_cap);
pdc_status cpu_plan_pool(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                         size_t why_cap);
/* A JIT'd y[i] = act(a[i]) over n floats (y may be a; b is not read): the kernel eltwise.c runs for
 * such an activation layer, for kernels written in C that apply one (fc/gemm after
 * the BLAS call). *fn NULL for IR_ACT_NONE. */
typedef void (*cpu_unary_fn)(const float *a, const float *b, float *y, int64_t n);
pdc_status cpu_act_kernel(const cpu_compile *cc, const ir_fused_params *act, cpu_unary_fn *fn);
pdc_status cpu_plan_shape(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                          size_t why_cap);
pdc_status cpu_plan_softmax(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                            size_t why_cap);
pdc_status cpu_plan_rnn(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                        size_t why_cap);
/* One LSTM/GRU step's element-wise part as one JIT'd loop over the hidden units (rnn_cell.c), for nb rows:
 * row b's gate inputs xw + b*G*nh (input projection, biases folded in) and hr + b*G*nh (recurrent
 * products), state c, h + b*nh updated in place, h stored to y + b*nh too; rbh: GRU's h-gate Rb, nh
 * floats shared by the rows (NULL for LSTM); c NULL for GRU. GRU without linear_before_reset first
 * needs the reset function: rh + b*nh = sigmoid(r gate) * h, the input of the h-gate product that goes
 * into hr's third block. */
typedef enum cpu_rnn_cell_kind { CPU_RNN_CELL_LSTM = 0, CPU_RNN_CELL_GRU = 1, CPU_RNN_CELL_GRU_LBR = 2 } cpu_rnn_cell_kind;
typedef void (*cpu_rnn_cell_fn)(const float *xw, const float *hr, const float *rbh, float *c, float *h, float *y,
                                int64_t nh, int64_t nb);
typedef void (*cpu_rnn_reset_fn)(const float *xw, const float *hr, const float *h, float *rh, int64_t nh, int64_t nb);
/* *reset is NULL except for CPU_RNN_CELL_GRU. */
pdc_status cpu_rnn_cell_kernels(const cpu_compile *cc, cpu_rnn_cell_kind kind, cpu_rnn_cell_fn *cell,
                                cpu_rnn_reset_fn *reset);

/* ------------------------------------------------------------------ block column-row products (bcr.c) */

/* Rows of a BCR-pruned constant weight's matrix view: per block-row, its kept columns (the blocks'), each
 * with its bh weights (zeros where its block pruned the row). */
typedef struct cpu_bcr {
    int64_t rows, cols, bh, nbr; /* rows and columns of the slice, block height, block-rows */
    int64_t *rowptr;             /* per block-row: its first kept column in col/wpk, nbr + 1 entries */
    int32_t *col;                /* per kept column: the input index */
    float *wpk;                  /* per kept column: bh weights */
    size_t kept, total;          /* weights kept, weights in the slice */
} cpu_bcr;

/* Packs rows [row0, row0 + rows) of wt: PDC_ERR_UNSUPPORTED (b zeroed, nothing on ctx) unless wt is
 * BCR-sparse and the slice starts on a block-row and ends on one or at the matrix's end. */
pdc_status cpu_bcr_plan(pdc_context *ctx, const ir_tensor *wt, int64_t row0, int64_t rows, cpu_bcr *b);
/* y[n][0, rows) (+)= w x[n] for nx rows of x (ldx, ldy apart); accumulate 0 overwrites. Over up to nt
 * threads (block-rows in chunks fixed by the shape; the same results for every nt). */
void cpu_bcr_product(const cpu_bcr *b, int64_t nx, const float *x, int64_t ldx, float *y, int64_t ldy,
                     int accumulate, int nt);
void cpu_bcr_release(cpu_bcr *b);
static inline int cpu_bcr_ready(const cpu_bcr *b) { return b->rowptr != NULL; }
/* y[r][0, np) += sum over the kept columns c of w[r][c] x[c][0, np): np pixels of channel-major planes (a
 * 1x1 conv; x rows ldx apart, y rows ldy apart), 16 pixels per vector; over the threads as cpu_bcr_product. */
void cpu_bcr_product_planes(const cpu_bcr *b, int64_t np, const float *x, int64_t ldx, float *y, int64_t ldy, int nt);
/* Samples that share each load of b's weights in cpu_bcr_product. */
int cpu_bcr_tile(const cpu_bcr *b);
/* fc / gemm / matmul by BCR-pruned wt (bcr_fc.c): y[rows, o] = act(bias + ebias + alpha x wt^T) for x
 * [rows, k], wt viewed [o, k] (bias, ebias: o floats or NULL; act from fp); `what` names the op in the
 * layer's info. PDC_ERR_UNSUPPORTED where wt is not BCR-sparse. */
pdc_status cpu_plan_bcr_fc(const cpu_compile *cc, const ir_tensor *wt, float alpha, const float *bias,
                           const float *ebias, int64_t rows, const ir_fused_params *fp, const char *what, cpu_layer *L);

/* ------------------------------------------------------------------ block-sparse products (gemm.c) */

/* JIT'd, one sample: y[r*bh + q] = bias[r*bh + q] + sum over row r*bh + q's kept blocks of w x,
 * block-rows [r0, r1), rows < o stored (x along the lanes of each block). The AArch64 emitter uses it. */
typedef void (*cpu_bsr_fn)(const float *x, const int64_t *rowptr, const int32_t *col, const float *wpk,
                           const float *bias, float *y, int64_t r0, int64_t r1, int64_t o);
/* JIT'd, nl samples at once, a sample per lane: yt[((r - r0) * bh + q) * nl + lane] = the sum over
 * row r*bh + q's kept blocks of w xt, block-rows [r0, r1); xt is kpad rows of nl floats (column c of
 * every sample's x in row c). Each weight is loaded once for nl samples. */
typedef void (*cpu_bsr_lanes_fn)(const float *xt, const int64_t *rowptr, const int32_t *col, const float *wpk,
                                 float *yt, int64_t r0, int64_t r1);

/* Everything the generated code depends on (hashed: the planner zeroes it before filling). */
typedef struct cpu_bsr_key {
    char tag[8];                 /* "spfcN": bump N when the generated code changes */
    int32_t vec, bh, bw;
    int32_t nl, acc;             /* the lanes kernel (nl > 0): samples per call, accumulators per row */
} cpu_bsr_key;

/* Rows of a block- or unstructured-pruned constant weight's matrix view (ir_weight_matrix_view),
 * kept blocks packed in execution order, multiplied by code specialised on the block shape - one
 * sample at a time (fn), or, for a product of several rows of x, nl samples at a time (lanes_fn). */
typedef struct cpu_bsr {
    cpu_bsr_fn fn;               /* JIT'd code (cpu_bsr_plan) for one sample, or NULL */
    cpu_bsr_lanes_fn lanes_fn;   /* JIT'd code for nl samples, or NULL */
    cpu_bsr_key key;             /* the code's key, cpu_bsr_emit's argument */
    int64_t k, o;                /* columns, rows of the slice */
    int64_t bh, bw, nbr;         /* block shape, block-rows */
    int64_t nx;                  /* rows of x a product takes at most (the plan's) */
    int64_t chunk;               /* block-rows a thread takes at a time (cpu_bsr_product) */
    int dense;                   /* packed whole in 8x8 blocks, every block kept (cpu_bsr_plan) */
    int64_t *rowptr;             /* per block-row: first block, nbr + 1 entries */
    int32_t *col;                /* per block: first column */
    float *wpk;                  /* per block: bh x bw weights, row-major; edge blocks zero-padded */
    size_t kept, total;          /* weights kept, weights in the slice */
} cpu_bsr;

/* Plans rows [row0, row0 + rows) of wt for target t (block rows, packed kept blocks, the one-sample
 * code key; no code): PDC_ERR_UNSUPPORTED (b zeroed, nothing on ctx) if wt is not block/unstructured
 * sparse, too dense to gain, or the slice does not fall on block-row bounds. The AArch64 emitter
 * calls it too. */
pdc_status cpu_bsr_plan_pack(pdc_context *ctx, const pdc_llvm_target *t, const ir_tensor *wt, int64_t row0,
                             int64_t rows, cpu_bsr *b);
/* Emits the kernel of key arg (a cpu_bsr_key *) as "<prefix>_run" (signature cpu_bsr_fn, or
 * cpu_bsr_lanes_fn if key->nl > 0) into m (a pdc_kernel_emit_fn). */
pdc_status cpu_bsr_emit(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                        LLVMModuleRef m, const char *prefix);
/* Rows [row0, row0 + rows) of constant wt for products of up to nx rows of x, through the JIT:
 * cpu_bsr_plan_pack where the sparsity gains; else, dense (or too dense), the rows packed whole in
 * 8x8 blocks, all kept (a copy of the weights), for products of 2 to CPU_BSR_DENSE_MAX_ROWS rows,
 * where OpenBLAS's sgemm, which packs w again on every call, is slower - not below 8 rows or
 * columns, nor above CPU_BSR_DENSE_MAX_WEIGHTS weights. Then the kernel: the lanes kernel from 2
 * rows on (3 where the blocks fill a vector; where its accumulators fit the registers), else the
 * one-sample one. PDC_ERR_UNSUPPORTED (b zeroed, nothing on ctx) where neither form applies. */
#define CPU_BSR_DENSE_MAX_ROWS 32
#define CPU_BSR_DENSE_MAX_WEIGHTS (16.0 * 1024 * 1024)
pdc_status cpu_bsr_plan(const cpu_compile *cc, const ir_tensor *wt, int64_t row0, int64_t rows, int64_t nx,
                        cpu_bsr *b);
void cpu_bsr_release(cpu_bsr *b);
static inline int cpu_bsr_ready(const cpu_bsr *b) { return b->fn || b->lanes_fn; }
/* Columns x must hold for the one-sample kernel: k rounded up to bw, zeros past k. */
int64_t cpu_bsr_kpad(const cpu_bsr *b);
/* y[0, o) = bias + w x for block-rows [r0, r1) (clamped to nbr); bias has o entries. */
void cpu_bsr_gemv(const cpu_bsr *b, const float *x, const float *bias, float *y, int64_t r0, int64_t r1);
/* Scratch cpu_bsr_product needs: shared by its threads, and each thread's own. */
size_t cpu_bsr_scratch_floats(const cpu_bsr *b);
size_t cpu_bsr_thread_floats(const cpu_bsr *b);
/* y[i][0, o) = act(bias + w x[i]) for nx <= b->nx rows x[i] (k floats, ldx apart) into rows ldy
 * apart (bias NULL: none; y must not overlap x). Chunks of b->chunk block-rows (64, or about 32K
 * weights for the lanes kernel), taken dynamically by nt threads (one thread below 64K
 * multiply-adds), each computed by one kernel call per group of samples, so results do not depend
 * on nt; act (unless NULL) runs over each chunk's outputs while they are in cache. scratch:
 * cpu_bsr_scratch_floats(b) floats, own[t]: cpu_bsr_thread_floats(b) floats for each thread t < nt
 * (no alignment needed). */
void cpu_bsr_product(const cpu_bsr *b, int64_t nx, const float *x, int64_t ldx, const float *bias, float *y,
                     int64_t ldy, float *scratch, float *const *own, int nt, cpu_unary_fn act);

/* ------------------------------------------------------------------ dense products (gemm.c) */

/* y[m x n] (rows ldy apart) = x[m x k] w[n x k]^T + beta y: up to 8 chunks of y's columns (w's
 * rows), one OpenBLAS call each (single-threaded), taken by nt threads; each thread reads only its
 * chunks of w. The chunks depend on n alone, so results do not depend on nt. One row (m = 1) goes
 * through sgemv (sgemm repacks all of w per call). */
void cpu_sgemm_nt_threads(int m, int n, int k, const float *x, const float *w, float beta, float *y, int ldy, int nt);

/* ------------------------------------------------------------------ shared helpers (cpu_util.c) */

/* Number of threads for `threads` option value v (0 = all cores). */
int cpu_threads_for(int v);
/* Threads for this run (team.c): at most `threads`, no more than the cores other processes leave
 * free right now, at least 1. PDC_OMP_STATIC set in the environment (any value): always `threads`. */
int cpu_team_size(int threads);
/* The decision, for tests: min(threads, cpus - others), at least 1. */
int cpu_team_for(int threads, int cpus, int others);
/* The runnable-task count of a /proc/loadavg line ("0.31 0.71 0.77 2/150 1234" -> 2), -1 if malformed. */
int cpu_loadavg_running(const char *text);
/* Work items [0, n * unit) among the threads of a parallel region asked for nt (shares.c): before
 * the region, cpu_share_split gives thread t < nt a contiguous share of whole units of `unit` items
 * (n units near-evenly); in it, each thread calls cpu_share_next until it returns -1. Every item is
 * returned once, to the thread that runs it, also when the team is smaller than nt. n * unit < 2^32. */
void cpu_share_split(cpu_share *s, int nt, int64_t n, int64_t unit);
/* Whether unit u of the n that cpu_share_split(s, nt, n, unit) dealt out is in thread t's own share. */
int cpu_share_owns(int t, int nt, int64_t n, int64_t u);
/* The next items for thread t: a run from its own share's front (a sixteenth of the share, at most an
 * eighth of what is left, at least 1), else one item from the back of another's. Returns the run's
 * first item (-1: none left), its length in *count. */
int64_t cpu_share_next(cpu_share *s, int t, int nt, int64_t *count);
/* ------------------------------------------------------------------ lanes of a scheduled step (lanes.c) */

#define CPU_LANES_MAX 64 /* chains of a step weighed at most (the schedule pass's option lanes is <= 64) */

/* How a step of k chains (each one's predicted time: the sum of its layers') runs on `threads` threads:
 * returns the number of lanes L (0: layer after layer, every thread on each), with lane_of[c] (k slots)
 * the lane of chain c: CPU_LANE_WHOLE for a chain run first, layer after layer on every thread, else
 * < L; lane_threads[j] the threads of lane j (L slots, each >= 1 and <= lane_threads_max, summing to
 * at most `threads`). predicted (NULL or 2 slots): the predicted ms layer after layer and of the plan.
 * The plan is taken when predicted at least 1% faster; force (tests, measuring): every chain side by
 * side, whenever k >= 2 and threads >= 2. */
#define CPU_LANE_WHOLE SIZE_MAX
int cpu_lanes_plan(const pdc_layer_cost *chains, size_t k, int threads, int lane_threads_max, int force,
                   size_t *lane_of, int *lane_threads, double *predicted);

/* dst[0, n) = src[0, n) on nt threads in pieces of 64 KiB (one thread if the spans overlap, as a
 * caller's input and output buffers may). */
void cpu_copy_floats(float *dst, const float *src, size_t n, int nt);
/* Makes OpenBLAS single-threaded (pdc parallelises around it); once per process. */
void cpu_blas_single_thread(void);

#endif
