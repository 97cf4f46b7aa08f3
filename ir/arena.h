/*
 * arena.h - the activation memory plan kept in the IR (written by the plan pass, read by the
 * reference backend, checked by the verifier).
 *
 * A planned model carries on every layer the attribute `arena_offsets: ints`, one entry per output:
 * the byte offset of that output in one shared arena (a multiple of IR_ARENA_ALIGN), or -1 for an
 * absent optional output. Graph inputs and constants are not in the arena. Two activations may
 * share bytes only if their live ranges are disjoint: a tensor is live from the layer that produces
 * it to the last layer that reads it (graph outputs: to the end of the run).
 */
#ifndef PDC_IR_ARENA_H
#define PDC_IR_ARENA_H

#include "ir/ir.h"

#define IR_ARENA_ALIGN 64
#define IR_ARENA_ATTR "arena_offsets"

/*
 * A schedule (the schedule pass) gives every layer the attribute `step: int`. Steps never decrease
 * along the layer list. The layers of one step form chains: a layer reading the output of a layer of
 * its own step belongs to that layer's chain (all such producers must be of one chain), any other
 * starts a chain. A backend may run a step's chains side by side, each chain's layers in order, and
 * the steps one after the other; running the layers in list order is always right too. Liveness is
 * then measured in steps, so a memory plan made after the schedule holds for both.
 */
#define IR_STEP_ATTR "step"

/* 1 if every layer has a step (the model is scheduled). */
int ir_model_scheduled(const ir_model *m);
/* The time of layer li in liveness terms: its step if the model is scheduled, else li. */
size_t ir_layer_time(const ir_model *m, size_t li, int scheduled);
/* chain[li] = the chain of layer li within its step (the index of the chain's first layer); for a
 * scheduled model. PDC_ERR_INVALID_MODEL (naming the layer) if a step decreases, a layer reads a later
 * step, or a layer reads two chains of its own step. */
pdc_status ir_schedule_chains(const ir_model *m, size_t *chain);
/* Removes the schedule (attribute step) from every layer. */
void ir_schedule_drop(ir_model *m);

/* Live range of every tensor in layer times (ir_layer_time): def[t] = its producer's, last[t] = its
 * last reader's (n_layers for graph outputs, def[t] for outputs never read). Non-activations get
 * def = last = SIZE_MAX. def and last have m->n_tensors entries. */
void ir_liveness(const ir_model *m, size_t *def, size_t *last);

/* Removes the plan (attribute arena_offsets) from every layer: for rewrites that invalidate it. */
void ir_arena_drop(ir_model *m);

/* Reads and checks the plan. *present = 0 (and nothing else written) if no layer carries
 * arena_offsets; otherwise every layer must, with valid, aligned, in-range offsets that never
 * overlap for tensors live at the same time. offsets (n_tensors entries, may be NULL) receives each
 * activation's byte offset (SIZE_MAX for other tensors), *arena_bytes the arena size and
 * *activation_bytes the sum of all activation sizes (either may be NULL).
 * Errors (PDC_ERR_INVALID_MODEL) name the layer and the tensors. */
pdc_status ir_arena_get(const ir_model *m, int *present, size_t *offsets, size_t *arena_bytes,
                        size_t *activation_bytes);

/* Where a backend that runs in host memory keeps each tensor. numel[t]: its elements; offset[t]: its
 * float offset in one activation arena (SIZE_MAX for non-activations), from the memory plan if the
 * model has one (*planned = 1), else one slot per activation in order, each starting on a multiple of
 * align_floats; input_slot[t]: its index among the graph inputs (SIZE_MAX if none); *arena_floats:
 * the arena's size (a planned one: its bytes / 4). Each array has m->n_tensors entries. Errors go to
 * ctx and start with `who` ("ref: tensor 'x' has shape ?x4 (symbolic or too large)"), except those
 * of ir_arena_get. */
pdc_status ir_arena_layout(const pdc_context *ctx, const ir_model *m, const char *who, size_t align_floats,
                           size_t *numel, size_t *offset, size_t *input_slot, size_t *arena_floats, int *planned);

#endif
