/*
 * cost.h - internal: the latency model of the "cpu" target (docs/predict.md).
 *
 * Every layer gets a kernel family (the family the cpu backend's planners take it with, decided
 * from the same IR facts: op, sparsity kind, stride, window, groups) and three sizes the compiler
 * knows before compiling: effective FLOPs (kept weights only), bytes of kept weights, bytes of the
 * activations it reads and writes, and how many times its kernel is called (a 3-D conv: its 2-D
 * kernel once per output depth plane, with the FLOPs and bytes of the depth taps it runs). Its
 * predicted time on one thread is
 *
 *     t1 = c0 * runs + flop_ns * flops + wbyte_ns * weight bytes + abyte_ns * activation bytes   (ns -> ms)
 *
 * where fc and rnn layers (which stream their weights once per run) pay dram_ns instead of wbyte_ns
 * per weight byte when the weights come from memory: when the layer's weights do not fit in the
 * last-level cache, or (fc only: an rnn rereads its own each step) the model's take more than a
 * quarter of it (the rest of the model and the activations share the cache).
 *
 * with four constants per family, and on N threads tN = t1 * ((1 - p) + p / N) (Amdahl, p the
 * family's parallel share; a weight stream from memory scales with its own share, dram_parallel). Layers the cpu target computes in a conv's or fc's epilogue cost 0.
 * The constants come from a profile that `pdc calibrate` measures on this machine (calibrate.c),
 * or from built-in defaults (measured once on an AVX-512 AMD EPYC, LLVM 19).
 *
 * A profile is a small text file, versioned, keyed by the host (CPU model, LLVM's CPU name, ISA,
 * LLVM version) and protected by a CRC-32: cache_dir/profiles/latency-KKKKKKKK.txt (K = the CRC of
 * the key). A profile made on another host, of another version, or damaged, is refused with a
 * message; the caller then uses the defaults and says so.
 */
#ifndef PDC_LIB_COST_H
#define PDC_LIB_COST_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "ir/ir.h"

/* Kernel families, as the cpu target's planners split the work. Values index tables; names are the
 * profile's. Append only (a profile names its families, so order changes would still parse). */
typedef enum cost_family {
    COST_CONV_SPARSE = 0,  /* conv.c: pattern/block/unstructured conv at stride 1 */
    COST_CONV_SPARSE_S,    /* conv_cmajor.c / conv.c: the same, strided */
    COST_CONV_DENSE,       /* conv_ocvec.c / conv_dense.c: dense conv with a window of 2+ taps */
    COST_CONV_1X1,         /* conv_dense.c: dense 1x1 conv */
    COST_CONV_DW,          /* grouped / depthwise conv */
    COST_FC_SPARSE,        /* gemm.c: block-sparse fc / matmul (<= 50% kept) */
    COST_FC_DENSE,         /* gemm.c: dense fc / gemm / matmul (OpenBLAS or packed) */
    COST_RNN,              /* rnn.c: lstm, gru */
    COST_ELTWISE,          /* eltwise.c: activations, add/sub/mul/div, batchnorm not folded */
    COST_POOL,             /* pool.c */
    COST_SOFTMAX,          /* softmax.c */
    COST_SHAPE,            /* shape.c: concat, transpose, flatten, reshape */
    COST_REF,              /* the reference kernel (a layer no family takes) */
    COST_RNN_SPARSE,       /* rnn.c: lstm, gru with block-sparse gate matrices (<= 50% kept) */
    COST_CONV_BLOCK,       /* conv.c: conv with block or unstructured sparsity (1x1 with block_convs) */
    COST_FC_BCR,           /* bcr_fc.c: fc / matmul / gemm by a BCR-pruned constant */
    COST_CONV_BCR,         /* conv/conv_bcr.c: 1x1 conv, stride 1, no padding, one group, BCR-pruned */
    COST_RNN_BCR,          /* rnn.c through bcr.c: lstm, gru with BCR-pruned gate matrices */
    COST_CONV_DW3,         /* conv/conv_dw.c: dense 3x3 depthwise, stride 1 or 2, input read in place (AVX-512) */
    COST_CONV_WINO,        /* conv/conv_wino.c: dense 3x3 stride 1 by Winograd F(4x4, 3x3) (AVX-512); FLOPs counted direct */
    COST_N_FAMILIES
} cost_family;

const char *cost_family_name(cost_family f);
int cost_family_from_name(const char *name, cost_family *f);

typedef struct cost_coef {
    double c0_ms;     /* fixed cost per call */
    double flop_ns;   /* per effective FLOP */
    double wbyte_ns;  /* per byte of kept weights */
    double abyte_ns;  /* per byte of activations read and written */
    double parallel;  /* p in [0, 1]: share of the time that divides over the threads */
    double dram_ns;   /* per byte of kept weights streamed from memory (fc, rnn; see above) */
    double dram_parallel; /* the parallel share of the dram_ns term: N threads do not stream memory N
                           * times as fast (VGG-16's 411 MB fc on 2 threads) */
} cost_coef;

#define COST_PROFILE_VERSION 3 /* 2: dram_parallel, the BCR and 3x3 depthwise families; 3: conv_wino */
#define COST_KEY_MAX 256

typedef struct cost_profile {
    char key[COST_KEY_MAX];  /* the host it was measured on ("" for the defaults) */
    int threads;             /* threads of the multi-thread measurements */
    double llc_bytes;        /* the last-level cache of the host */
    int calibrated;          /* 0: the built-in defaults */
    cost_coef f[COST_N_FAMILIES];
} cost_profile;

/* What the model knows of one layer. */
typedef struct cost_layer {
    cost_family family;
    int fused;        /* computed in the epilogue of an earlier conv / fc / matmul: costs 0 */
    double flops;     /* effective FLOPs (ir_layer_stats) */
    double wbytes;    /* bytes of kept weights */
    double abytes;    /* bytes of the activations read and written */
    double model_wbytes; /* bytes of kept weights of the whole model (do they stay in cache?) */
    double runs;      /* calls of its kernel, each paying c0: a 3-D conv's 2-D kernel runs once per output
                       * depth plane and image; 1 otherwise (0 is taken as 1) */
} cost_layer;

/* The built-in defaults. */
void cost_profile_defaults(cost_profile *p);

/* The facts of every layer of m (shapes must be concrete): out[i] for layer i, n_layers slots. */
pdc_status cost_model_facts(const ir_model *m, cost_layer *out);
/* The family a layer's facts put it in (also used for hypothetical sparsity by the planner). */
cost_family cost_family_of(const ir_model *m, size_t li);

/* Predicted milliseconds of one layer on `threads` threads (>= 1). */
double cost_layer_ms(const cost_profile *p, const cost_layer *l, int threads);

/* The whole model: *total and (if not NULL) per_layer[i] in ms (lib/api_predict.c). */
pdc_status cost_predict_model(pdc_context *ctx, const ir_model *m, const cost_profile *p, int threads,
                              double *total, double *per_layer);

/* Each layer of m's predicted time on t threads as serial_ms + parallel_ms / t, from this host's
 * profile (or the defaults), for the cpu target's scheduler (layer_cost.c): *out has one entry per
 * layer (owned by the caller, pdc_free). */
pdc_status cost_layer_costs(pdc_context *ctx, const ir_model *m, pdc_layer_cost **out);

/* The last-level cache of this host in bytes (sysfs; 32 MiB when unknown). */
double cost_host_llc_bytes(void);
/* 1 if layer l streams its weights from memory with profile p (fc/rnn weights beyond the cache). */
int cost_layer_dram(const cost_profile *p, const cost_layer *l);

/* The host key of this machine (backends/cpu), "" with a status on failure. */
pdc_status cost_host_key(pdc_context *ctx, char *key, size_t cap);
/* The profile path for key under ctx's cache_dir. */
void cost_profile_path(const pdc_context *ctx, const char *key, char *path, size_t cap);

/* The profile's text form (owned by the caller, pdc_free) and its parser. Parsing checks the magic,
 * the version, the CRC and every value; expected_key (if not NULL) must equal the profile's key.
 * Errors: PDC_ERR_CORRUPT (bad file, message says what), PDC_ERR_UNSUPPORTED (other version or
 * other host, message names both). */
pdc_status cost_profile_format(const pdc_context *ctx, const cost_profile *p, char **text_out, size_t *len_out);
pdc_status cost_profile_parse(const pdc_context *ctx, const char *text, size_t len, const char *expected_key,
                              cost_profile *p);
/* Reads and parses path (PDC_ERR_NOT_FOUND / PDC_ERR_IO if unreadable). */
pdc_status cost_profile_load(const pdc_context *ctx, const char *path, const char *expected_key, cost_profile *p);
/* Writes p to path atomically, creating its folder. */
pdc_status cost_profile_save(const pdc_context *ctx, const cost_profile *p, const char *path);

/* The profile predictions use: the file `profile_path` if not NULL, else this host's profile in
 * cache_dir; where none is found or it is refused, the defaults, and *why says so ("" when a
 * profile was used). Fails only on errors that are not about the profile (out of memory). */
pdc_status cost_profile_for_host(pdc_context *ctx, const char *profile_path, cost_profile *p, char *why,
                                 size_t why_cap);

/* ---- fitting (deterministic: the same samples give the same constants) */
typedef struct cost_sample {
    cost_layer l;     /* facts (family, sizes) */
    double t1_ms;     /* measured on 1 thread */
    double tn_ms;     /* measured on `threads` threads (0: not measured) */
} cost_sample;
/* Fits the coefficients of family f from the samples of that family in s (n in all): weighted
 * (relative error) least squares of c0, flop_ns and wbyte_ns + dram_ns (fc and rnn families; a sample
 * whose weights exceed llc_bytes counts for dram_ns) or abyte_ns (the others), all >= 0 (a term that would go negative is dropped and the rest refitted; the other byte
 * term is 0), then p as the median of the samples'
 * (1 - tN/t1) / (1 - 1/threads), clamped to [0, 1], over the samples whose weights stay in cache
 * (all of them if none does), and dram_parallel the same over those that stream from memory (kept as
 * it is if none does). Families without samples keep *c as it is. */
void cost_fit_family(const cost_sample *s, size_t n, cost_family f, int threads, double llc_bytes, cost_coef *c);

/* ---- calibration (calibrate.c) */
/* Runs the micro-benchmarks on the cpu target with 1 and `threads` threads, fits every family and
 * fills *p (key, threads, calibrated = 1). At most about budget_s seconds. */
pdc_status cost_calibrate(pdc_context *ctx, int threads, double budget_s, cost_profile *p);

#endif
