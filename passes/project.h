/*
 * project.h - internal to passes/: the projection cores behind pdc_prune_project_* (project.c).
 * `who` prefixes error messages ("pdc_prune_project_pattern", "layer 'conv1'"). Arguments and
 * results as documented for the public functions in include/pdc.h; a failure changes nothing.
 */
#ifndef PDC_PASSES_PROJECT_H
#define PDC_PASSES_PROJECT_H

#include "passes/passes.h"

pdc_status project_pattern(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c, int64_t kh,
                           int64_t kw, size_t n_patterns, size_t pattern_size, uint32_t flags, uint64_t *patterns,
                           int32_t *kernel_pattern);
pdc_status project_connectivity(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c,
                                int64_t kernel_size, double rate, uint8_t *keep);
pdc_status project_kgs(const pdc_context *ctx, const char *who, float *w, int64_t o, int64_t c, int64_t kernel_size,
                       int64_t go, int64_t gc, size_t keep, size_t n_masks, const uint8_t *kernel_keep,
                       uint64_t *group_masks);
pdc_status project_block(const pdc_context *ctx, const char *who, float *a, int64_t rows, int64_t cols, int64_t bh,
                         int64_t bw, double rate, uint8_t *keep);
pdc_status project_unstructured(const pdc_context *ctx, const char *who, float *w, size_t n, double rate,
                                uint8_t *keep);
/* The checks project_pattern makes when it chooses a set (odd window, pattern size in 1..kh*kw, at
 * most C(kh*kw-1, n-1) patterns), for callers that allocate n_patterns entries first. kh*kw <= 64. */
pdc_status project_pattern_check(const pdc_context *ctx, const char *who, int64_t kh, int64_t kw, size_t n_patterns,
                                 size_t pattern_size);
/* C(n, k), saturating at UINT64_MAX. */
uint64_t project_binomial(unsigned n, unsigned k);

#endif
