/*
 * host.c - the core-to-core round trip the benchmarks print beside their results (host.h).
 */
#define _GNU_SOURCE
#include "host.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 20000, SAMPLES = 9 };
#define GIVE_UP_NS 2e9 /* both threads on one CPU after all, or a CPU taken away: NAN, not minutes */

typedef struct pong_arg {
    _Alignas(64) atomic_long turn; /* odd: the second thread's move; even: the first's; -1: stop */
} pong_arg;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *pong(void *p)
{
    pong_arg *a = p;
    for (long i = 0;; i++) {
        long v;
        while ((v = atomic_load_explicit(&a->turn, memory_order_acquire)) != 2 * i + 1 && v != -1) _mm_pause();
        if (v == -1) return NULL;
        atomic_store_explicit(&a->turn, 2 * i + 2, memory_order_release);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_core_round_trip_ns(void)
{
    /* the process's CPUs as at the first call (the main thread may be bound to one later) */
    static cpu_set_t mine;
    static int have;
    if (!have && sched_getaffinity(0, sizeof mine, &mine) == 0) have = 1;
    if (!have || CPU_COUNT(&mine) < 2) return NAN;
    cpu_set_t one[2], saved;
    for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mine)) {
            CPU_ZERO(&one[n]);
            CPU_SET(c, &one[n++]);
        }
    if (pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) != 0) return NAN;
    static pong_arg a;
    atomic_store(&a.turn, 0);
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0) return NAN;
    int ok = pthread_attr_setaffinity_np(&attr, sizeof one[1], &one[1]) == 0 && pthread_create(&t, &attr, pong, &a) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) return NAN;
    double s[SAMPLES], start = now_ns();
    int done = pthread_setaffinity_np(pthread_self(), sizeof one[0], &one[0]) == 0;
    for (long k = 0, i = 0; done && k < SAMPLES; k++) {
        double t0 = now_ns();
        for (long r = 0; r < ROUNDS && done; r++, i++) {
            atomic_store_explicit(&a.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&a.turn, memory_order_acquire) != 2 * i + 2) _mm_pause();
            if ((r & 63) == 0 && now_ns() - start > GIVE_UP_NS) done = 0; /* a clock read per 64 rounds */
        }
        s[k] = (now_ns() - t0) / ROUNDS;
    }
    atomic_store_explicit(&a.turn, -1, memory_order_release);
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved); /* the benchmark's threads as before */
    if (!done) return NAN;
    qsort(s, SAMPLES, sizeof s[0], cmp_double);
    return s[SAMPLES / 2];
}
