/*
 * tune.h - internal: kernel auto-tuning for the cpu target (docs/tuning.md).
 *
 * A conv or fc layer's signature (op, shapes, attributes, a SHA-256 of which weights are kept, the host
 * with its ISA and LLVM, the thread count, pdc's version and the kernel generators' hash) names an
 * entry of the tuning database:
 * cache_dir/tune/<first 32 hex digits of the signature's SHA-256>.txt, a small text file
 *
 *     pdc-tune 2
 *     key <signature>
 *     knobs <family> <tile_y> <tile_x> <chunk> <whole> <threads>
 *     ms <tuned> <default>
 *     sha256 <64 hex digits of every byte above>
 *
 * written whole to a temporary file and renamed over the entry (pdc_file_write_atomic), so
 * concurrent writers leave one complete entry, the last. An entry that is damaged (checksum, syntax,
 * values out of range), of another format version, or for another signature (a file copied or
 * planted under the name) is ignored with a note (PDC_NOTE_TUNE_IGNORED) and the heuristics run.
 */
#ifndef PDC_LIB_TUNE_H
#define PDC_LIB_TUNE_H

#include "backends/backend.h"

/* Context option "tune". */
typedef enum tune_mode { TUNE_OFF = 0, TUNE_CACHED = 1, TUNE_ON = 2 } tune_mode;

#define TUNE_KEY_MAX 1024
#define TUNE_DEFAULT_BUDGET_S 120 /* a whole model's tuning (pdc_model_tune, option tune=on) */
#define TUNE_DB_VERSION 2 /* 2: knobs gained threads (entries of 1 are ignored with a note) */
#define TUNE_THREADS_MAX 4096 /* the largest thread count an entry may hold */

typedef struct tune_entry {
    pdc_layer_knobs knobs;
    double tuned_ms, default_ms; /* the winner's and the heuristics' time when tuned (informative) */
} tune_entry;

/* ---- the database (tune_db.c) */

/* The signature of layer li of m for the cpu target at `threads` threads on host (pdc_cpu_host_key),
 * "" and PDC_ERR_UNSUPPORTED for a layer that is not a conv or fc with constant weights. */
pdc_status tune_layer_key(pdc_context *ctx, const ir_model *m, size_t li, int threads, const char *host, char *key,
                          size_t cap);
/* The entry's text and its parser: PDC_ERR_CORRUPT with the reason in why (bad syntax, value or
 * checksum), PDC_ERR_UNSUPPORTED (another format version), PDC_ERR_NOT_FOUND (another key). */
pdc_status tune_entry_format(const pdc_context *ctx, const char *key, const tune_entry *e, char **text_out,
                             size_t *len_out);
pdc_status tune_entry_parse(const char *text, size_t len, const char *key, tune_entry *e, char *why, size_t cap);
/* The entry's path under ctx's cache_dir ("" if it does not fit). */
void tune_db_path(const pdc_context *ctx, const char *key, char *path, size_t cap);
/* 1 when cache_dir holds no tuning entries (no tune folder, or nothing in it): nothing to look up. */
int tune_db_empty(const pdc_context *ctx);
/* 1 and *e for a valid entry; 0 when there is none, or (with a note saying why) when it is refused. */
int tune_db_get(pdc_context *ctx, const char *key, tune_entry *e);
/* Writes the entry (creating cache_dir/tune, 0700). PDC_ERR_IO with the path on failure. */
pdc_status tune_db_put(pdc_context *ctx, const char *key, const tune_entry *e);

/* ---- tuning (tune_kernel.c) */

/* Threads a cpu program compiled now would use (option threads; 0: the cores). */
int tune_threads(const pdc_context *ctx);
/* Tunes layer li of m (a conv or fc) alone (a one-layer model of it, input of random values):
 * successive halving over pdc_cpu_knob_space within about budget_s seconds. The heuristics'
 * configuration wins unless another beats it by more than noise in a final side-by-side measurement.
 * *n_configs: the size of the space (1: nothing to choose, nothing measured). */
pdc_status tune_layer(pdc_context *ctx, const ir_model *m, size_t li, double budget_s, tune_entry *e,
                      size_t *n_configs);
/* The knobs of every layer of m from the database (mode TUNE_ON: tuning the conv and fc layers it
 * lacks that have more than one configuration, storing them, within budget_s seconds in all), or
 * *out NULL when no layer has an entry. Each distinct signature is looked up and tuned once.
 * *n_tuned counts the layers tuned now (may be NULL). */
pdc_status tune_model_knobs(pdc_context *ctx, const ir_model *m, tune_mode mode, double budget_s,
                            pdc_layer_knobs **out, size_t *n_tuned);

#endif
