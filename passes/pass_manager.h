/*
 * pass_manager.h - passes over the layer-wise IR, registered by name in one table, and the
 * pipelines that run them ("canonicalize,prune-pattern,prune-connectivity,reorder,plan").
 *
 * A pass is `pdc_status fn(ir_model *, const pass_options *)`: it rewrites the model in place and
 * reports errors on m->ctx. The manager runs the verifier after every pass (when opt->verify), can
 * print the IR text after a named pass or after all of them, and runs the whole pipeline on a
 * clone of the model that replaces the caller's only on success, so a failing pass (or a failing
 * verifier) leaves the caller's model exactly as it was.
 */
#ifndef PDC_PASSES_PASS_MANAGER_H
#define PDC_PASSES_PASS_MANAGER_H

#include <stdio.h>

#include "ir/ir.h"

/* A rate for the whole model with per-layer overrides ("0.5,conv2=0.7"). */
typedef struct pass_rate {
    char *layer;
    double rate;
} pass_rate;

typedef struct pass_rates {
    double global;
    size_t n;
    pass_rate *items;
} pass_rates;

/* Most kernel sizes option pattern_kernels lists (odd 2-D and 3-D sizes of at most 64 entries). */
#define PASS_MAX_KERNEL_SIZES 32

typedef struct pass_options {
    int verify;                 /* run ir_verify after every pass (default: the context's "verify") */
    /* pattern pruning */
    size_t patterns;            /* K: patterns per layer (default 8) */
    size_t pattern_size;        /* n: kept entries per pattern, centre included (default 4) */
    pass_rates connectivity;    /* share of kernels removed (default 0.5) */
    /* kernel-group pruning of 3-D convs (prune-kgs) */
    int64_t kgs_go, kgs_gc;     /* kernel group: output x input channels (default 4x4) */
    size_t kgs_keep;            /* window positions kept per group; 0: from kgs_rate (default 0) */
    pass_rates kgs_rate;        /* share of window positions removed per group (default 0.5) */
    size_t kgs_masks;           /* at most this many distinct group masks per layer; 0: no limit (default) */
    /* block pruning */
    int64_t block_h, block_w;   /* block shape in the [out, in] matrix layout (default 1x4) */
    pass_rates block_rate;      /* share of blocks removed (default 0.5) */
    /* block column-row pruning (prune-bcr) */
    int64_t bcr_h, bcr_w;       /* block shape in the [out, in] matrix layout (default 8x8) */
    pass_rates bcr_col_rate;    /* share of each block's columns removed (default 0.5) */
    pass_rates bcr_row_rate;    /* share of each block's rows removed (default 0) */
    /* unstructured pruning */
    pass_rates unstructured;    /* share of weights removed (default 0.5) */
    /* safe defaults of the pruning passes (see pass_default_skip); a layer named in `layers` is exempt */
    int include_stem;           /* 1: the stem (a conv reading a graph input) is pruned too (default 0) */
    int pattern_kernels_all;    /* 1: pattern_kernels is "all" (default 0) */
    size_t n_pattern_kernels;   /* kernel sizes prune-pattern/-connectivity take (default one: 3x3) */
    int64_t pattern_kernels[PASS_MAX_KERNEL_SIZES][3]; /* kd (0 for a 2-D size), kh, kw */
    char pattern_kernels_text[PASS_MAX_KERNEL_SIZES * 12]; /* as given, normalised: "3x3,3x3x3" or "all" */
    int block_convs;            /* 1: prune-block takes 1x1 convs too (default 0) */
    int lanes;                  /* schedule: most layers side by side in one step (default 2) */
    int pair_ratio;             /* schedule: most cost ratio of the units of one step (default 2; 0: any) */
    /* which layers the pruning passes and reorder touch: only `layers` if set, else all but `skip` */
    char **layers;
    size_t n_layers;
    char **skip;
    size_t n_skip;
    size_t *layer_hits;         /* per entry of `layers`: how many passes changed it (filled by passes) */
    /* printing */
    char *print_after;          /* NULL, a pass name or "all" */
    FILE *print_to;             /* NULL = stderr */
    uint32_t print_flags;       /* PDC_PRINT_* (default PDC_PRINT_ELIDE_WEIGHTS) */
    /* plan results (filled by the plan pass) */
    size_t plan_arena_bytes, plan_activation_bytes;
    /* Evaluates one layer whose inputs are all constants into buf[output tensor] (canonicalize's
     * constant folding); PDC_ERR_UNSUPPORTED leaves the layer. Set by the caller above the passes
     * (the API wires the reference interpreter in): passes never include a backend. NULL: no folding. */
    pdc_status (*eval_layer)(const ir_model *m, const ir_layer *l, float *const *buf);
} pass_options;

typedef pdc_status (*pass_fn)(ir_model *m, const pass_options *opt);

typedef struct pass_info {
    const char *name;
    const char *requires;       /* what the pass needs of its input */
    const char *guarantees;     /* what holds after it */
    const char *applies_to;     /* selective passes: the layers it can change (NULL: the whole model) */
    pass_fn fn;
} pass_info;

/* The pass table, in the usual pipeline order. */
const pass_info *pass_table(size_t *n);
/* The pass called name, or NULL. */
const pass_info *pass_find(const char *name);

/* Defaults (verify from ctx). pass_options_free releases what pass_options_set* allocated. */
void pass_options_init(pass_options *opt, const pdc_context *ctx);
void pass_options_free(pass_options *opt);
/* Sets one option from an attribute (name as in pdc_model_transform's documentation). Errors name
 * the option and the expected value. */
pdc_status pass_options_set(const pdc_context *ctx, pass_options *opt, const ir_attr *a);
/* Sets every attribute of attrs (may be NULL). */
pdc_status pass_options_set_all(const pdc_context *ctx, pass_options *opt, const ir_attrs *attrs);

/* A pipeline text: comma-separated pass names (spaces around names are ignored), then optionally
 * options as whitespace-separated NAME=VALUE words ("prune-block layers=fc1 block_rate=0.75": what
 * pdc_model_plan writes). The options begin at the first word holding '='. */
/* Where pipeline's options begin (the end of the text when it has none). */
const char *pass_pipeline_options(const char *pipeline);
/* Splits pipeline into its passes (*passes_out, owned: pdc_free) and its options, added to options as
 * strings; an option already in options, or a word without '=' after the first option, is an error
 * naming it. */
pdc_status pass_pipeline_split(const pdc_context *ctx, const char *pipeline, char **passes_out, ir_attrs *options);
/* Checks a pipeline text: non-empty known pass names, options of the form NAME=VALUE. Unknown names
 * fail with PDC_ERR_INVALID_ARG naming the pass and listing the known ones. */
pdc_status pass_pipeline_check(const pdc_context *ctx, const char *pipeline);
/* Checks the options against the model: named layers (layers, skip, per-layer rates) must exist. */
pdc_status pass_options_check_model(const ir_model *m, const pass_options *opt);

/* Runs the pipeline's passes on m in place (no clone; its options, if any, are the caller's to merge
 * into opt first: pass_pipeline_split): each pass, then the verifier (opt->verify), then the
 * print-after hook. On failure the message is prefixed with the pass name and m is in an
 * unspecified but destroyable state. opt is not const only for layer_hits and the plan results. */
pdc_status pass_pipeline_run_inplace(ir_model *m, const char *pipeline, pass_options *opt);
/* The same on a clone of m, swapped into m on success: on failure m is unchanged. */
pdc_status pass_pipeline_run(ir_model *m, const char *pipeline, pass_options *opt);

#endif
