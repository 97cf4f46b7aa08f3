/*
 * team.c - how many threads a run uses. The option `threads` is an upper bound; each run takes the
 * cores nobody else is using right now, because a team larger than the free cores waits whole
 * scheduler time slices at every barrier (a pruned ResNet-18 ran 2-12x slower at 2 threads than at
 * 1 on a shared 2-core machine). Other work is sampled: the kernel's count of runnable tasks
 * (/proc/loadavg) less this process's own runnable threads, the least of the last few samples.
 * libgomp's dynamic mode, used before, looks at the 15-minute load average, which counts pdc's own
 * past runs: after a few minutes of steady 2-thread inference it ran everything on one thread.
 * The count is machine-wide, so it is used only when this process may run on every online CPU
 * (under taskset or a cpuset the option is trusted). Runs of this process count as its own: two
 * concurrent runs do not shrink each other's teams.
 */
#include <dirent.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

#define TEAM_RESAMPLE_S 0.02 /* a new sample at most every 20 ms (reading one costs ~20 us) */

int cpu_team_for(int threads, int cpus, int others)
{
    int free_cpus = cpus - (others > 0 ? others : 0);
    int n = threads < free_cpus ? threads : free_cpus;
    return n > 0 ? n : 1;
}

int cpu_loadavg_running(const char *text)
{
    int running, total;
    /* the averages are skipped as words: their decimal point does not depend on the locale then */
    if (!text || sscanf(text, "%*s %*s %*s %d/%d", &running, &total) != 2 || running < 0) return -1;
    return running;
}

/* The state letter of a /proc/<pid>/stat line (after the parenthesised name, which may hold spaces). */
static char stat_state(const char *text)
{
    const char *p = strrchr(text, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static int read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}

/* Runnable tasks of other processes now, or -1 if /proc cannot tell. */
static int others_running(void)
{
    char buf[256];
    if (read_small("/proc/loadavg", buf, sizeof buf) <= 0) return -1;
    int running = cpu_loadavg_running(buf);
    if (running < 0) return -1;
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int own = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        if (read_small(path, buf, sizeof buf) > 0 && stat_state(buf) == 'R') own++;
    }
    closedir(d);
    return running - own;
}

/* The last TEAM_WINDOW samples; the team follows their minimum, so a task that happened to be
 * runnable at one sampling instant (a kernel worker, a short command) does not cost a thread, while a
 * process that keeps a core busy is seen in every sample. The CPU counts are sampled with them:
 * sysconf(_SC_NPROCESSORS_ONLN) reads a file in /sys, and read on every run it cost 7 us of a 0.13 ms
 * 2-thread run (ResNet-50 128@28 at 4.5x). */
#define TEAM_WINDOW 4
static _Atomic double sampled_at = -1.0;
static atomic_int samples[TEAM_WINDOW];
static atomic_uint next_sample;
static atomic_int sampled_cpus;  /* CPUs this process may run on; 0: fewer than online (trust the option) */

int cpu_team_size(int threads)
{
    if (threads <= 1 || getenv("PDC_OMP_STATIC")) return threads < 1 ? 1 : threads;
    /* the samples are published by the release store of sampled_at, read after its acquire load */
    double now = omp_get_wtime(), at = atomic_load_explicit(&sampled_at, memory_order_acquire);
    if (at < 0 || now - at > TEAM_RESAMPLE_S || now < at) {
        int cpus = omp_get_num_procs();
        /* under taskset or a cpuset the machine-wide count says nothing: no /proc sample then */
        if (cpus < sysconf(_SC_NPROCESSORS_ONLN)) cpus = 0;
        atomic_store_explicit(&sampled_cpus, cpus, memory_order_relaxed);
        int others = cpus ? others_running() : 0;
        if (others < 0) others = 0; /* no /proc: trust the option */
        unsigned i = atomic_fetch_add_explicit(&next_sample, 1, memory_order_relaxed);
        if (at < 0) /* the first sample fills the window: a fresh process must not start from "all free" */
            for (int k = 0; k < TEAM_WINDOW; k++) atomic_store_explicit(&samples[k], others, memory_order_relaxed);
        else
            atomic_store_explicit(&samples[i % TEAM_WINDOW], others, memory_order_relaxed);
        atomic_store_explicit(&sampled_at, now, memory_order_release);
    }
    int cpus = atomic_load_explicit(&sampled_cpus, memory_order_relaxed);
    if (cpus == 0) return threads;
    int others = atomic_load_explicit(&samples[0], memory_order_relaxed);
    for (int i = 1; i < TEAM_WINDOW; i++) {
        int v = atomic_load_explicit(&samples[i], memory_order_relaxed);
        if (v < others) others = v;
    }
    return cpu_team_for(threads, cpus, others);
}
