/*
 * host.h - what the benchmarks record about the host besides their timings.
 */
#ifndef PDC_TEST_BENCH_HOST_H
#define PDC_TEST_BENCH_HOST_H

/* Median round trip, in ns, of a cache line handed back and forth between the first two CPUs this
 * process may run on (two threads pinned, each waiting for the other's store); NAN with fewer than
 * two CPUs or when it takes over 2 s (the two threads on one CPU after all). On the project's
 * 2-vCPU VM it reads 43-130 ns in some stretches and 349-418 ns in others (the vCPUs then sit far
 * apart), and every 2-thread figure whose threads read what the other core wrote drops with it, so
 * the benchmarks print it with their results. */
double bench_core_round_trip_ns(void);

#endif
