/*
 * context.c - the base layer's context: error messages, logging, notes and progress, checked
 * allocation, creation and destruction. Its options are set by the API above (lib/api_context.c),
 * which may check values against the layers between.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "lib/core/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>


/* Buffers of a huge page or more (activation arenas, large tensors and weights) are aligned to
 * one and offered to transparent huge pages: a 2-thread run of a pruned layer reads and writes
 * every 4 KiB page of its input and output planes from both threads, and with the page tables cold
 * (another engine ran in between) the walks cost 0.2 ms of a 2.6 ms run (VGG-16 conv2_2 at 4.5x;
 * 2.4 ms with huge pages). Where THP is off, the advice is ignored. */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

#define PDC_ERROR_MAX 1024

/* The calling thread's most recent failure: which context it belongs to and its text.
 * Thread-local so that concurrent runs of one program report errors without racing. */
static _Thread_local const pdc_context *tls_error_owner;
static _Thread_local char tls_error[PDC_ERROR_MAX];

pdc_status pdc_verror(const pdc_context *ctx, pdc_status status, const char *fmt, va_list ap)
{
    tls_error_owner = ctx;
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    if (ctx && ctx->log_level >= PDC_LOG_DEBUG) fprintf(stderr, "pdc: debug: error: %s\n", tls_error);
    return status;
}

pdc_status pdc_error(const pdc_context *ctx, pdc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pdc_verror(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

void pdc_error_prefix(const pdc_context *ctx, const char *fmt, ...)
{
    char prefix[PDC_ERROR_MAX], old[PDC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tls_error, sizeof old);
    tls_error_owner = ctx;
    /* Truncation is fine: the message just gets shorter. */
    size_t n = strlen(prefix);
    if (n > sizeof tls_error - 3) n = sizeof tls_error - 3;
    memcpy(tls_error, prefix, n);
    memcpy(tls_error + n, ": ", 2);
    size_t room = sizeof tls_error - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(tls_error + n + 2, old, m);
    tls_error[n + 2 + m] = '\0';
}

PDC_API const char *pdc_context_last_error(const pdc_context *ctx)
{
    if (ctx && tls_error_owner == ctx) return tls_error;
    if (!ctx && !tls_error_owner && tls_error[0]) return tls_error;
    return "";
}

void pdc_log(const pdc_context *ctx, int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (!ctx || level > ctx->log_level) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pdc: %s: ", names[level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------- progress and notes */

void pdc_progress(const pdc_context *ctx, const char *stage, size_t done, size_t total)
{
    if (ctx && ctx->progress) ctx->progress(ctx->progress_user, stage, done, total);
}

void pdc_note(const pdc_context *ctx, pdc_note_kind kind, const char *pass, const char *layer, const char *fmt, ...)
{
    if (!ctx || !ctx->note) return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ctx->note(ctx->note_user, kind, pass, layer, text);
}

PDC_API pdc_status pdc_context_set_progress_handler(pdc_context *ctx, pdc_progress_handler handler, void *user)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    ctx->progress = handler;
    ctx->progress_user = handler ? user : NULL;
    return PDC_OK;
}

PDC_API pdc_status pdc_context_set_note_handler(pdc_context *ctx, pdc_note_handler handler, void *user)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    ctx->note = handler;
    ctx->note_user = handler ? user : NULL;
    return PDC_OK;
}

/* ---------------------------------------------------------------- allocation */

static int over_limit(const pdc_context *ctx, size_t size)
{
    return ctx && ctx->max_memory && size > ctx->max_memory;
}

/*
 * Failure injection (option fail_alloc_after): 1 if this allocation is the one to fail. The
 * countdown is decremented atomically, so with several threads exactly one allocation fails.
 * The context is heap-allocated and never const itself, so writing through the cast is defined.
 */
static int injected_failure(const pdc_context *ctx, size_t size)
{
    if (!ctx) return 0;
    size_t *left = &((pdc_context *)ctx)->fail_alloc_countdown;
    size_t n = __atomic_load_n(left, __ATOMIC_RELAXED);
    while (n) {
        if (__atomic_compare_exchange_n(left, &n, n - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            if (n != 1) return 0;
            pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes (injected failure: fail_alloc_after)",
                      size);
            return 1;
        }
    }
    return 0;
}

/* 1 if an allocation of size bytes may be tried: within max_memory and not the injected failure (else
 * 0, the error set). */
static int may_allocate(const pdc_context *ctx, size_t size)
{
    if (over_limit(ctx, size)) {
        pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "allocation of %zu bytes exceeds max_memory (%zu bytes)", size,
                  ctx->max_memory);
        return 0;
    }
    return !injected_failure(ctx, size);
}

/* n x size in *bytes; 0 (the error set) if it overflows. */
static int array_bytes(const pdc_context *ctx, size_t n, size_t size, size_t *bytes)
{
    if (!pdc_mul_overflow(n, size, bytes)) return 1;
    pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", n, size);
    return 0;
}

void *pdc_alloc(const pdc_context *ctx, size_t size)
{
    if (!may_allocate(ctx, size)) return NULL;
    void *p = malloc(size ? size : 1);
    if (!p) pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", size);
    return p;
}

void *pdc_calloc(const pdc_context *ctx, size_t n, size_t size)
{
    size_t bytes;
    if (!array_bytes(ctx, n, size, &bytes)) return NULL;
    void *p = pdc_alloc(ctx, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void *pdc_alloc_aligned(const pdc_context *ctx, size_t n, size_t size)
{
    size_t bytes;
    if (!array_bytes(ctx, n, size, &bytes) || !may_allocate(ctx, bytes)) return NULL;
    void *p = NULL;
    size_t align = bytes >= HUGE_PAGE_BYTES ? HUGE_PAGE_BYTES : 64;
    if (posix_memalign(&p, align, bytes ? bytes : 64) != 0) {
        pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    if (align == HUGE_PAGE_BYTES) (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: failure changes nothing */
    memset(p, 0, bytes);
    return p;
}

pdc_status pdc_grow(const pdc_context *ctx, void **items, size_t *cap, size_t need, size_t elem_size)
{
    if (need <= *cap) return PDC_OK;
    size_t ncap = *cap ? *cap : 4;
    while (ncap < need) {
        if (pdc_mul_overflow(ncap, 2, &ncap)) return pdc_error(ctx, PDC_ERR_OVERFLOW, "array of %zu items overflows", need);
    }
    size_t bytes;
    if (pdc_mul_overflow(ncap, elem_size, &bytes))
        return pdc_error(ctx, PDC_ERR_OVERFLOW, "array of %zu items overflows", need);
    if (!may_allocate(ctx, bytes)) return PDC_ERR_OUT_OF_MEMORY;
    void *p = realloc(*items, bytes);
    if (!p) return pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    *items = p;
    *cap = ncap;
    return PDC_OK;
}

char *pdc_strdup(const pdc_context *ctx, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pdc_alloc(ctx, n);
    if (d) memcpy(d, s, n);
    return d;
}

void pdc_free(void *p) { free(p); }

/* ---------------------------------------------------------------- version, status */

PDC_API uint32_t pdc_version_number(void) { return PDC_VERSION_NUMBER; }

#define PDC_STR2(x) #x
#define PDC_STR(x) PDC_STR2(x)
PDC_API const char *pdc_version_string(void)
{
    return PDC_STR(PDC_VERSION_MAJOR) "." PDC_STR(PDC_VERSION_MINOR) "." PDC_STR(PDC_VERSION_PATCH);
}

PDC_API const char *pdc_status_string(pdc_status status)
{
    switch (status) {
    case PDC_OK: return "PDC_OK";
    case PDC_ERR_INVALID_ARG: return "PDC_ERR_INVALID_ARG";
    case PDC_ERR_OUT_OF_MEMORY: return "PDC_ERR_OUT_OF_MEMORY";
    case PDC_ERR_IO: return "PDC_ERR_IO";
    case PDC_ERR_PARSE: return "PDC_ERR_PARSE";
    case PDC_ERR_CORRUPT: return "PDC_ERR_CORRUPT";
    case PDC_ERR_INVALID_MODEL: return "PDC_ERR_INVALID_MODEL";
    case PDC_ERR_SHAPE: return "PDC_ERR_SHAPE";
    case PDC_ERR_UNSUPPORTED: return "PDC_ERR_UNSUPPORTED";
    case PDC_ERR_UNKNOWN_TARGET: return "PDC_ERR_UNKNOWN_TARGET";
    case PDC_ERR_NO_DEVICE: return "PDC_ERR_NO_DEVICE";
    case PDC_ERR_INVALID_STATE: return "PDC_ERR_INVALID_STATE";
    case PDC_ERR_OVERFLOW: return "PDC_ERR_OVERFLOW";
    case PDC_ERR_NOT_FOUND: return "PDC_ERR_NOT_FOUND";
    case PDC_ERR_INTERNAL: return "PDC_ERR_INTERNAL";
    case PDC_ERR_NUMERIC: return "PDC_ERR_NUMERIC";
    }
    return "unknown status";
}

PDC_API void pdc_string_free(char *s) { free(s); }

/* ---------------------------------------------------------------- context and options */

static void default_cache_dir(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(buf, cap, "%s/pdc", xdg);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/pdc", home);
    else snprintf(buf, cap, "/tmp/pdc-cache");
}

PDC_API pdc_status pdc_context_create(pdc_context **ctx_out)
{
    PDC_CHECK_ARG(NULL, ctx_out, "ctx_out");
    pdc_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return pdc_error(NULL, PDC_ERR_OUT_OF_MEMORY, "out of memory creating a context");
    ctx->log_level = PDC_LOG_WARN;
    ctx->verify = 1;
    ctx->sparsity_min_fill = 0.95;
    ctx->tune = 1; /* "cached" */
    default_cache_dir(ctx->cache_dir, sizeof ctx->cache_dir);
    *ctx_out = ctx;
    return PDC_OK;
}

void pdc_object_created(const pdc_context *owner)
{
    if (owner) __atomic_add_fetch(&((pdc_context *)owner)->live_objects, 1, __ATOMIC_RELAXED);
}

void pdc_object_destroyed(const pdc_context *owner)
{
    if (owner) __atomic_sub_fetch(&((pdc_context *)owner)->live_objects, 1, __ATOMIC_RELAXED);
}

PDC_API pdc_status pdc_context_num_objects(const pdc_context *ctx, size_t *n_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, n_out, "n_out");
    *n_out = __atomic_load_n(&ctx->live_objects, __ATOMIC_RELAXED);
    return PDC_OK;
}

PDC_API void pdc_context_destroy(pdc_context *ctx)
{
    if (ctx && ctx->jit_destroy) ctx->jit_destroy(ctx->jit);
    free(ctx);
}
