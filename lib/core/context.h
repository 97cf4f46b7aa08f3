/*
 * context.h - internal: the context's state, error reporting and checked allocation.
 * Every allocation in pdc goes through pdc_alloc, pdc_calloc, pdc_strdup (and friends) so that out-of-memory is one status
 * with one message, and so limits and failure injection have a single choke point.
 */
#ifndef PDC_LIB_CONTEXT_H
#define PDC_LIB_CONTEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pdc.h"

#define PDC_PATH_MAX 4096

enum pdc_log_level { PDC_LOG_ERROR = 0, PDC_LOG_WARN = 1, PDC_LOG_INFO = 2, PDC_LOG_DEBUG = 3 };

struct pdc_context {
    int threads;                  /* 0 = all cores */
    int log_level;                /* enum pdc_log_level */
    int verify;                   /* run the verifier between passes and before compile */
    size_t max_memory;            /* largest single allocation in bytes, 0 = unlimited */
    size_t fail_alloc_countdown;  /* option fail_alloc_after: allocations left until the injected failure,
                                   * 0 = off; only touched with __atomic builtins (runs share ctx) */
    char cache_dir[PDC_PATH_MAX];
    char onnx_input_shapes[PDC_PATH_MAX]; /* option onnx_input_shapes (lib/shape_list.h); "" = none */
    char gpu_arch[16];            /* option gpu_arch: "auto" or sm_XY from backends/gpu's list */
    double sparsity_min_fill;     /* option sparsity_min_fill: ONNX import's least fill of kept blocks/patterns */
    int allow_nonfinite;          /* option allow_nonfinite: accept NaN/Inf constants at load and in checkpoints */
    int check_finite;             /* option check_finite: runs check each layer's outputs for NaN/Inf */
    int sequential;               /* option schedule: 1 "sequential", 0 "dag" (default) */
    int tune;                     /* option tune: 0 off, 1 cached (default), 2 on (lib/tune/tune.h's tune_mode) */
    void *jit;                    /* backends/llvm JIT session, created on first use by a JIT backend */
    void (*jit_destroy)(void *);  /* set with jit; called by pdc_context_destroy */
    pdc_progress_handler progress; /* pdc_context_set_progress_handler; NULL = none */
    void *progress_user;
    pdc_note_handler note;        /* pdc_context_set_note_handler; NULL = none */
    void *note_user;
    size_t live_objects;          /* handles made from ctx and not yet destroyed (pdc_context_num_objects);
                                   * only touched with __atomic builtins (objects die on many threads) */
};

/* Counts a handle handed out to the caller (+1, on success only) or destroyed by it (-1), for
 * pdc_context_num_objects. Internal copies are not counted: only the public create/destroy pairs call these.
 * NULL is ignored. */
void pdc_object_created(const pdc_context *owner);
void pdc_object_destroyed(const pdc_context *owner);

/*
 * Records a message for the calling thread (thread-local, so concurrent program runs do not race)
 * and returns `status`, so callers write `return pdc_error(ctx, PDC_ERR_SHAPE, "...", ...)`.
 * Formatting into a fixed buffer allocates nothing, so it is safe to report out-of-memory.
 */
pdc_status pdc_error(const pdc_context *ctx, pdc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pdc_status pdc_verror(const pdc_context *ctx, pdc_status status, const char *fmt, va_list ap);
/* Prepends "prefix: " to the calling thread's current message for ctx (adds file or layer context). */
void pdc_error_prefix(const pdc_context *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs to stderr when level <= ctx->log_level. */
void pdc_log(const pdc_context *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reports progress to the context's progress handler, if any (pdc_context_set_progress_handler):
 * `stage` ("compile" or a pass name) has done of total layers finished. Allocates nothing. */
void pdc_progress(const pdc_context *ctx, const char *stage, size_t done, size_t total);
/* Gives a note to the context's note handler, if any (pdc_context_set_note_handler): the text is
 * formatted into a fixed buffer (truncated at 512 bytes), nothing is allocated. */
void pdc_note(const pdc_context *ctx, pdc_note_kind kind, const char *pass, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Checked allocation: on failure they record PDC_ERR_OUT_OF_MEMORY (or PDC_ERR_OVERFLOW for n*size)
 * on ctx and return NULL. Zero-size requests return a valid unique pointer. Free with pdc_free. */
void *pdc_alloc(const pdc_context *ctx, size_t size);
void *pdc_calloc(const pdc_context *ctx, size_t n, size_t size);
/* Grows an array to hold at least `need` elements (capacity doubling); *items and *cap updated only on success. */
pdc_status pdc_grow(const pdc_context *ctx, void **items, size_t *cap, size_t need, size_t elem_size);
/* 64-byte aligned, zero-filled; free with pdc_free. */
void *pdc_alloc_aligned(const pdc_context *ctx, size_t n, size_t size);
char *pdc_strdup(const pdc_context *ctx, const char *s);
void pdc_free(void *p);

/* Overflow-checked arithmetic: return 0 and set *out, or return 1 on overflow. */
static inline int pdc_mul_overflow(size_t a, size_t b, size_t *out) { return __builtin_mul_overflow(a, b, out); }
static inline int pdc_add_overflow(size_t a, size_t b, size_t *out) { return __builtin_add_overflow(a, b, out); }

/* Fails with PDC_ERR_INVALID_ARG naming `what` if p is NULL. */
#define PDC_CHECK_ARG(ctx, p, what)                                                        \
    do {                                                                                   \
        if (!(p)) return pdc_error((ctx), PDC_ERR_INVALID_ARG, "%s: %s is NULL", __func__, (what)); \
    } while (0)

#endif
