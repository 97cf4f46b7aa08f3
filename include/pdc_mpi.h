/*
 * pdc_mpi.h - libpdc_mpi: data-parallel training of a pdc_trainer over MPI (docs/training.md, "Data-parallel
 * training"). A companion library, built when mpicc is installed (Debian: libopenmpi-dev), so that libpdc
 * itself keeps no MPI dependency; it uses the public API only (pdc_trainer_set_reducer).
 *
 * Every process of the communicator creates the same trainer (same model, options and seed), attaches it,
 * and calls pdc_trainer_step once per global step with its share of the global batch (possibly none:
 * inputs and labels NULL). The step then uses the gradient of the whole global batch: only the kept
 * entries of pruned weights travel. Functions marked "collective" must be called by every process, in the
 * same order. Errors return a status; pdc_mpi_last_error says what happened.
 *
 * Link: -lpdc_mpi -lpdc and MPI (mpicc). Thread-safety: one thread at a time per pdc_mpi.
 */
#ifndef PDC_MPI_H
#define PDC_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "pdc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pdc_mpi pdc_mpi;

/**
 * Collective. Makes trainer's steps reduce their gradients over comm (MPI must be initialized; comm is
 * duplicated). The first step afterwards checks that every process has the same weights (names, shapes,
 * kept counts, values) and options (all but "threads") and refuses the step otherwise, naming what differs.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_OUT_OF_MEMORY, PDC_ERR_IO (MPI failed)
 */
pdc_status pdc_mpi_attach(pdc_context *ctx, pdc_trainer *trainer, MPI_Comm comm, pdc_mpi **out);
/** Removes the reducer from the trainer and frees m (not collective). NULL is a no-op. */
void pdc_mpi_detach(pdc_mpi *m);
/** The message of the last failure of a pdc_mpi function or of a step's reduction ("" if none). */
const char *pdc_mpi_last_error(const pdc_mpi *m);
int pdc_mpi_rank(const pdc_mpi *m);
int pdc_mpi_size(const pdc_mpi *m);

/**
 * Options (set the same on every process):
 *  - "reduction"  "sum" (default): each process sums its micro-batches, then MPI_Iallreduce; the result
 *                 depends on MPI's summation order. "deterministic": every micro-batch's gradient is
 *                 gathered (MPI_Iallgatherv, the number of processes times the traffic of "sum") and summed
 *                 by the trainer's pairwise tree in global order: with option micro_batch set and the
 *                 global batch split at micro-batch boundaries in order, the weights are bit-identical
 *                 whatever the number of processes (one process included)
 *  - "overlap"    "1" (default) or "0": with reduction sum and option micro_batch 0, each weight's gradient
 *                 starts its MPI_Iallreduce as soon as the backward pass completed it (the last layers'
 *                 first), overlapping the rest of the backward pass; "0": one MPI_Iallreduce after it
 *  - "sync_batchnorm"  "0" (default): batchnorm normalises with each process's batch statistics; "1": with
 *                 the global batch's (pdc_trainer_set_batchnorm_sync: 2 MPI_Iallreduce per layer forward, 1
 *                 backward); needs trainer option micro_batch 0
 *  - "timeout"    seconds > 0 that a collective may wait for the other processes (default 60): past it
 *                 the call fails with PDC_ERR_IO naming the operation (a process died or stopped stepping);
 *                 the communicator is then unusable: end the job (MPI_Abort)
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (unknown name or bad value; nothing changed)
 */
pdc_status pdc_mpi_set_option(pdc_mpi *m, const char *name, const char *value);

/** Communication since attach. */
typedef struct pdc_mpi_stats {
    uint64_t steps;          /* reductions */
    uint64_t floats;         /* floats each process contributed to them: kept gradient entries only */
    uint64_t dense_floats;   /* what the same steps would have sent without pruning (every trainable entry) */
    uint64_t bucket_floats;  /* of floats, those whose reduction started during the backward pass (overlap) */
    double wait_s;           /* seconds the steps waited for their reductions after the backward pass (the
                                communication overlap did not hide, and waiting on slower processes) */
} pdc_mpi_stats;
pdc_status pdc_mpi_get_stats(const pdc_mpi *m, pdc_mpi_stats *out);

/**
 * Collective. Process 0 saves a checkpoint (pdc_trainer_save: atomic); every process returns its status.
 * The checkpoint loads on any number of processes.
 */
pdc_status pdc_mpi_save(pdc_mpi *m, const char *path);
/**
 * Collective. Every process loads path (pdc_trainer_load; a file system they share) and the next step
 * checks again that they agree. Fails on every process if it failed on one (the message names it).
 */
pdc_status pdc_mpi_load(pdc_mpi *m, const char *path);
/** Collective. Every process takes process 0's weights (pdc_trainer_set_weights). */
pdc_status pdc_mpi_sync_weights(pdc_mpi *m);
/**
 * Collective. Pruning decided once for all: process 0's weights are broadcast, then every process runs
 * pdc_trainer_prune on them (the passes are deterministic) and the resulting masks are compared.
 */
pdc_status pdc_mpi_prune(pdc_mpi *m, const char *pipeline, const pdc_attrs *options);
/** Collective. pdc_trainer_admm_begin / _update / _end on process 0's weights (as pdc_mpi_prune). */
pdc_status pdc_mpi_admm_begin(pdc_mpi *m, const char *pipeline, const pdc_attrs *options, float rho);
pdc_status pdc_mpi_admm_update(pdc_mpi *m, double *residual_out);
pdc_status pdc_mpi_admm_end(pdc_mpi *m);

#ifdef __cplusplus
}
#endif

#endif
