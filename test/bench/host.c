/*
 * host.c - the core-to-core round trip the benchmarks print beside their results (host.h).
 */
#define _GNU_SOURCE
#include "host.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 20000, SAMPLES = 9 };

typedef struct pong_arg {
    _Alignas(64) atomic_long turn; /* odd: the second thread's move; even: the first's */
    int cpu;
} pong_arg;

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *pong(void *p)
{
    pong_arg *a = p;
    pin(a->cpu);
    for (long i = 0; i < (long)ROUNDS * SAMPLES; i++) {
        while (atomic_load_explicit(&a->turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&a->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

double bench_core_round_trip_ns(void)
{
    cpu_set_t mine, saved;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2) return NAN;
    int cpus[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mine)) cpus[n++] = c;
    pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
    static pong_arg a;
    atomic_store(&a.turn, 0);
    a.cpu = cpus[1];
    pthread_t t;
    if (pin(cpus[0]) != 0 || pthread_create(&t, NULL, pong, &a) != 0) {
        pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
        return NAN;
    }
    double s[SAMPLES];
    for (long k = 0, i = 0; k < SAMPLES; k++) {
        double t0 = now_ns();
        for (long r = 0; r < ROUNDS; r++, i++) {
            atomic_store_explicit(&a.turn, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&a.turn, memory_order_acquire) != 2 * i + 2) {
            }
        }
        s[k] = (now_ns() - t0) / ROUNDS;
    }
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved); /* the benchmark's threads as before */
    qsort(s, SAMPLES, sizeof s[0], cmp_double);
    return s[SAMPLES / 2];
}
