/*
 * cpu_util.c - helpers the cpu kernel families share: thread counts, OpenBLAS threading.
 */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

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

void cpu_copy_floats(float *dst, const float *src, size_t n, int nt)
{
    if (dst == src || n == 0) return;
    const size_t piece = 16384, np = (n + piece - 1) / piece;
    /* pieces in parallel only between disjoint spans (a caller's buffers may overlap) */
    int apart = (uintptr_t)(src + n) <= (uintptr_t)dst || (uintptr_t)(dst + n) <= (uintptr_t)src;
#pragma omp parallel for num_threads(nt) if (nt > 1 && np > 1 && apart) schedule(static)
    for (size_t k = 0; k < np; k++)
        memmove(dst + k * piece, src + k * piece, (k + 1 < np ? piece : n - k * piece) * sizeof(float));
}
