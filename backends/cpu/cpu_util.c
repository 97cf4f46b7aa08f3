/*
 * cpu_util.c - helpers the cpu kernel families share: thread counts, OpenBLAS threading.
 */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>

#include "backends/cpu/cpu.h"

int cpu_threads_for(int v)
{
    if (v > 0) return v;
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_one(void) { openblas_set_num_threads(1); }

/* OpenBLAS's pthread build keeps its own pool; calling it from our OpenMP threads with more than one
 * BLAS thread oversubscribes the cores (runs 5-10x slower). pdc splits GEMMs itself instead. */
void cpu_blas_single_thread(void) { pthread_once(&blas_once, blas_one); }
