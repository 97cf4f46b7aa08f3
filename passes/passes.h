/*
 * passes.h - internal to passes/: the pass functions registered in pass_manager.c and the helpers
 * they share (layer selection, rates, constants private to one layer, unique names).
 */
#ifndef PDC_PASSES_PASSES_H
#define PDC_PASSES_PASSES_H

#include "passes/pass_manager.h"

/* ---- the passes (one file each) */
pdc_status pass_canonicalize(ir_model *m, const pass_options *opt);
pdc_status pass_share(ir_model *m, const pass_options *opt);
pdc_status pass_prune_pattern(ir_model *m, const pass_options *opt);
pdc_status pass_prune_connectivity(ir_model *m, const pass_options *opt);
pdc_status pass_prune_kgs(ir_model *m, const pass_options *opt);
pdc_status pass_prune_block(ir_model *m, const pass_options *opt);
pdc_status pass_prune_bcr(ir_model *m, const pass_options *opt);
/* The weight matrices (at most 2) prune-block and prune-bcr take from layer l whose sparsity is none or
 * `kind`: input slots[i], transposed[i] = 1 where the matrix is stored [in, out] (matmul, gemm transB = 0). */
size_t pass_matrix_slots(const ir_model *m, const ir_layer *l, ir_sparsity_kind kind, size_t *slots, int *transposed);
pdc_status pass_prune_unstructured(ir_model *m, const pass_options *opt);
pdc_status pass_reorder(ir_model *m, const pass_options *opt);
pdc_status pass_schedule(ir_model *m, const pass_options *opt);
pdc_status pass_plan(ir_model *m, const pass_options *opt);

/* ---- helpers (pass_util.c) */
/* 1 if the layer-selecting passes may change layer `name` (options layers / skip). */
int pass_layer_selected(const pass_options *opt, const char *name);
/* 1 if `name` is in option layers: an explicit choice, which the defaults below do not override. */
int pass_layer_listed(const pass_options *opt, const char *name);
/* The stems of m: stems[li] = 1 for a conv whose data input (input 0) is a graph input or carries its
 * values through layers without weights (normalising sub/mul/div, reshape, batchnorm, pooling, ...); a
 * concat or add of such values with a conv's output counts too: the conv still sees raw input. A layer
 * "with weights" is a conv, fc, gemm, matmul, lstm or gru reading a constant.
 * *stems_out: n_layers bytes (at least 1), pdc_free. */
pdc_status pass_find_stems(const ir_model *m, uint8_t **stems_out);
/* The pruning families, for pass_default_skip. */
typedef enum pass_family { PASS_FAMILY_PATTERN, PASS_FAMILY_BLOCK, PASS_FAMILY_UNSTRUCTURED, PASS_FAMILY_KGS } pass_family;
/* The safe defaults: 1 if pass `pass` (of `family`) must leave layer li alone although it could prune it
 * - the stem (unless include_stem), for every family; a conv kernel size not in pattern_kernels, for
 * PASS_FAMILY_PATTERN; a conv (1x1) for PASS_FAMILY_BLOCK unless block_convs - and then gives the
 * context's note handler a PDC_NOTE_SKIPPED_* note saying why. 0 (and no note) when the pass may prune
 * the layer, always so for a layer named in option layers. stems from pass_find_stems. */
int pass_default_skip(const ir_model *m, const pass_options *opt, const uint8_t *stems, size_t li, const char *pass,
                      pass_family family);
/* What a pruning pass does with the layers it may prune (pass_prune_layers). */
typedef struct pass_pruner {
    const char *pass;     /* "prune-block": for progress, notes and pass_default_skip */
    pass_family family;
    /* The input slots (at most 2) of layer l whose weights the pass prunes, with a value for `prune`
     * each; 0 if it prunes none of them. */
    size_t (*weights)(const ir_model *m, const ir_layer *l, size_t *slots, int *flags);
    /* Prunes weight tensor t of layer l. */
    pdc_status (*prune)(ir_model *m, const ir_layer *l, int t, int flag, const pass_options *opt);
    /* The PDC_NOTE_PRUNED note for layer l. */
    void (*note)(const ir_model *m, const ir_layer *l, const pass_options *opt);
} pass_pruner;
/* The walk of every pruning pass: for each layer (progress reported) that opt selects, whose weights
 * p takes and that pass_default_skip does not leave alone, prunes those weights that no layer before
 * pruned (a weight shared by layers is pruned once), then notes the layer as pruned. Stops at the
 * first error. */
pdc_status pass_prune_layers(ir_model *m, const pass_options *opt, const pass_pruner *p);
/* Progress of pass `pass`: li of the model's layers done (nothing for li = 0, which the manager reports). */
void pass_progress_layer(const ir_model *m, const char *pass, size_t li);
/* Records that a pass changed layer `name` (for the check that every layer in `layers` was used). */
void pass_layer_hit(const pass_options *opt, const char *name);
/* The rate for layer `name`: its override, else the global rate. */
double pass_rate_for(const pass_rates *r, const char *name);
/* Adds constant base+suffix (made unique with "_2", "_3", ... if taken); takes ownership of data
 * (pdc_alloc'd, prod(dims) floats) on success and failure. */
pdc_status pass_add_constant(ir_model *m, const char *base, const char *suffix, int rank, const int64_t *dims,
                             float *data, int *t_out);
/* Makes input slot `slot` of layer li a constant that no other reader shares, copying it (with its
 * sparsity) under a new name if it is shared. *t_out: the (possibly new) tensor index. */
pdc_status pass_private_constant(ir_model *m, size_t li, size_t slot, int *t_out);
/* The constant tensor in input slot i of l, or NULL (absent or not a constant). */
ir_tensor *pass_const_input(const ir_model *m, const ir_layer *l, size_t i);

/* Pattern/connectivity eligibility: a 2-D or 3-D conv (weight [O,C,kh,kw] or [O,C,kd,kh,kw] constant),
 * group 1, every kernel side odd and >= 3, window <= 64 entries, weight dense or already pattern-sparse.
 * Returns 1, or 0 and a reason. */
int pass_pattern_eligible(const ir_model *m, const ir_layer *l, const char **why);

/* The same squared-L2-norm ranking every projection uses: sorts n keys ascending, ties by index. */
typedef struct pass_ranked {
    double key;
    size_t index;
} pass_ranked;
void pass_rank(pass_ranked *items, size_t n);
/* floor(rate * n) computed in double precision, as Python's math.floor(rate * n). */
size_t pass_rate_count(double rate, size_t n);

#endif
