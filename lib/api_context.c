/*
 * api_context.c - pdc_context_set_option / pdc_context_get_option: the context's options, checked
 * against the layers that use them (shape lists for the ONNX front end, SM names for the gpu target).
 * It sits at the top because those checks live in layers above the context's core (lib/core).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "lib/core/context.h"
#include "lib/shape_list.h"

#define KNOWN_OPTIONS \
    "threads, cache_dir, log_level, verify, max_memory, fail_alloc_after, onnx_input_shapes, gpu_arch, " \
    "sparsity_min_fill, allow_nonfinite, check_finite, tune, schedule"

static const char *const log_level_names[] = {"error", "warn", "info", "debug"};
static const char *const tune_names[] = {"off", "cached", "on"}; /* by tune_mode */

/* Parses a non-negative decimal integer that fits in max; 1 on success. */
static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    if (!*s || *s == '-' || *s == '+') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return 0;
    *out = v;
    return 1;
}

PDC_API pdc_status pdc_context_set_option(pdc_context *ctx, const char *name, const char *value)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, name, "name");
    PDC_CHECK_ARG(ctx, value, "value");
    unsigned long long v;
    if (!strcmp(name, "threads")) {
        if (!parse_uint(value, 4096, &v))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option threads: expected an integer 0..4096, got \"%s\"", value);
        ctx->threads = (int)v;
    } else if (!strcmp(name, "cache_dir")) {
        size_t n = strlen(value);
        if (n == 0 || n >= sizeof ctx->cache_dir)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option cache_dir: path must be 1..%zu bytes, got %zu",
                             sizeof ctx->cache_dir - 1, n);
        memcpy(ctx->cache_dir, value, n + 1);
    } else if (!strcmp(name, "log_level")) {
        for (int i = 0; i < 4; i++) {
            if (!strcmp(value, log_level_names[i])) {
                ctx->log_level = i;
                return PDC_OK;
            }
        }
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "option log_level: expected error, warn, info or debug, got \"%s\"", value);
    } else if (!strcmp(name, "verify")) {
        if (strcmp(value, "0") && strcmp(value, "1"))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option verify: expected 0 or 1, got \"%s\"", value);
        ctx->verify = value[0] == '1';
    } else if (!strcmp(name, "allow_nonfinite") || !strcmp(name, "check_finite")) {
        if (strcmp(value, "0") && strcmp(value, "1"))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected 0 or 1, got \"%s\"", name, value);
        if (name[0] == 'a') ctx->allow_nonfinite = value[0] == '1';
        else ctx->check_finite = value[0] == '1';
    } else if (!strcmp(name, "schedule")) {
        if (strcmp(value, "dag") && strcmp(value, "sequential"))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option schedule: expected dag or sequential, got \"%s\"", value);
        ctx->sequential = value[0] == 's';
    } else if (!strcmp(name, "max_memory")) {
        if (!parse_uint(value, SIZE_MAX, &v))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option max_memory: expected a byte count, got \"%s\"", value);
        ctx->max_memory = (size_t)v;
    } else if (!strcmp(name, "fail_alloc_after")) {
        if (!parse_uint(value, SIZE_MAX, &v))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "option fail_alloc_after: expected an allocation count (0 = off), got \"%s\"", value);
        __atomic_store_n(&ctx->fail_alloc_countdown, (size_t)v, __ATOMIC_RELAXED);
    } else if (!strcmp(name, "gpu_arch")) {
        char list[128];
        if (strlen(value) >= sizeof ctx->gpu_arch || !pdc_gpu_arch_valid(value, list, sizeof list))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option gpu_arch: expected auto or one of %s, got \"%s\"",
                             list, value);
        snprintf(ctx->gpu_arch, sizeof ctx->gpu_arch, "%s", value);
    } else if (!strcmp(name, "sparsity_min_fill")) {
        char *end;
        errno = 0;
        double f = strtod(value, &end);
        if (!*value || *end || errno || !(f > 0.0 && f <= 1.0))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option sparsity_min_fill: expected a share in (0, 1], got \"%s\"",
                             value);
        ctx->sparsity_min_fill = f;
    } else if (!strcmp(name, "tune")) {
        int k = 0;
        while (k < 3 && strcmp(value, tune_names[k])) k++;
        if (k == 3)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option tune: expected off, cached or on, got \"%s\"", value);
        ctx->tune = k;
    } else if (!strcmp(name, "onnx_input_shapes")) {
        char err[256];
        size_t n = strlen(value);
        if (n >= sizeof ctx->onnx_input_shapes)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option onnx_input_shapes: %zu bytes (at most %zu)", n,
                             sizeof ctx->onnx_input_shapes - 1);
        if (!pdc_shape_list_valid(value, err, sizeof err))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option onnx_input_shapes: %s", err);
        memcpy(ctx->onnx_input_shapes, value, n + 1);
    } else {
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "unknown option \"%s\" (known: " KNOWN_OPTIONS ")", name);
    }
    return PDC_OK;
}

PDC_API pdc_status pdc_context_get_option(const pdc_context *ctx, const char *name, char *buf, size_t cap)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, name, "name");
    PDC_CHECK_ARG(ctx, buf, "buf");
    char tmp[PDC_PATH_MAX];
    if (!strcmp(name, "threads")) snprintf(tmp, sizeof tmp, "%d", ctx->threads);
    else if (!strcmp(name, "cache_dir")) snprintf(tmp, sizeof tmp, "%s", ctx->cache_dir);
    else if (!strcmp(name, "log_level")) snprintf(tmp, sizeof tmp, "%s", log_level_names[ctx->log_level]);
    else if (!strcmp(name, "verify")) snprintf(tmp, sizeof tmp, "%d", ctx->verify);
    else if (!strcmp(name, "max_memory")) snprintf(tmp, sizeof tmp, "%zu", ctx->max_memory);
    else if (!strcmp(name, "fail_alloc_after"))
        snprintf(tmp, sizeof tmp, "%zu", __atomic_load_n(&ctx->fail_alloc_countdown, __ATOMIC_RELAXED));
    else if (!strcmp(name, "onnx_input_shapes")) snprintf(tmp, sizeof tmp, "%s", ctx->onnx_input_shapes);
    else if (!strcmp(name, "gpu_arch")) snprintf(tmp, sizeof tmp, "%s", ctx->gpu_arch[0] ? ctx->gpu_arch : "auto");
    else if (!strcmp(name, "sparsity_min_fill")) snprintf(tmp, sizeof tmp, "%g", ctx->sparsity_min_fill);
    else if (!strcmp(name, "allow_nonfinite")) snprintf(tmp, sizeof tmp, "%d", ctx->allow_nonfinite);
    else if (!strcmp(name, "check_finite")) snprintf(tmp, sizeof tmp, "%d", ctx->check_finite);
    else if (!strcmp(name, "tune")) snprintf(tmp, sizeof tmp, "%s", tune_names[ctx->tune]);
    else if (!strcmp(name, "schedule")) snprintf(tmp, sizeof tmp, "%s", ctx->sequential ? "sequential" : "dag");
    else
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "unknown option \"%s\" (known: " KNOWN_OPTIONS ")", name);
    size_t n = strlen(tmp);
    if (n + 1 > cap)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: buffer of %zu bytes too small for %zu", name, cap, n + 1);
    memcpy(buf, tmp, n + 1);
    return PDC_OK;
}
