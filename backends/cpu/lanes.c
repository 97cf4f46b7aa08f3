/*
 * lanes.c - how the threads of a run divide one step of a scheduled model (ir/arena.h) among its
 * chains, decided by their predicted cost.
 *
 * A chain's predicted time on t threads is serial + parallel / t (the latency model's Amdahl form,
 * lib/cost: each layer's time on one thread split by its family's parallel share, summed over the
 * chain's layers). Three ways to run a step of k chains on T threads are weighed:
 *   - layer after layer, each on every thread (what an unscheduled model does): the sum over the
 *     chains of serial + parallel / T;
 *   - side by side: as many chains as threads or fewer, every chain a lane of its own, the threads
 *     dealt one at a time to the lane that would take longest with what it has (the best split for
 *     times that fall as threads are added): the slowest lane's time; more chains than threads, T
 *     lanes of one thread, the chains dealt longest first to the least loaded lane (LPT): the most
 *     loaded lane's time;
 *   - mixed: the chains that threads speed up most (largest parallel part) layer after layer on every
 *     thread first, then the others side by side: big layers on every core, small ones side by side.
 *     Every split point is weighed (k is at most the schedule pass's option lanes).
 * Side by side is taken only when predicted faster by at least 1% (ties and near-ties keep the order of
 * an unscheduled model). No larger margin: the two measurements there are (a quiet host, 2 threads)
 * both agree with the plain prediction. GoogLeNet's pairs of 1x1 convs (FLOPs within 1.5x, run side by
 * side unconditionally before) made a run 9% slower than the unscheduled model; the model, with this
 * host's conv families 92-99% parallel, predicts 7 of the 9 pairs 7-29% slower side by side. Two pruned
 * ResNet-18 with different weights, whose equal convs are paired, ran 1.03x the two in turn; the
 * model predicts such a pair 2.6% faster side by side. */
#include <math.h>

#include "backends/cpu/cpu.h"

#define CPU_LANES_GAIN 0.99 /* side by side only at or below this share of the layer-after-layer time */

static double chain_ms(const pdc_layer_cost *c, int threads) { return c->serial_ms + c->parallel_ms / (double)threads; }

/* Chains sub[0..n) (n >= 2) side by side on `threads` threads: fills lane_of for them and lane_threads,
 * returns the number of lanes; *makespan: the slowest lane's predicted time. */
static int side_by_side(const pdc_layer_cost *chains, const size_t *sub, size_t n, int threads, int most,
                        size_t *lane_of, int *lane_threads, double *makespan)
{
    *makespan = 0;
    if (n <= (size_t)threads) { /* a lane each; the next thread to the lane slowest with what it has */
        for (size_t i = 0; i < n; i++) lane_of[sub[i]] = i, lane_threads[i] = 1;
        for (int left = threads - (int)n; left > 0; left--) {
            size_t worst = n;
            for (size_t i = 0; i < n; i++)
                if (lane_threads[i] < most && (worst == n || chain_ms(&chains[sub[i]], lane_threads[i]) >
                                                                 chain_ms(&chains[sub[worst]], lane_threads[worst])))
                    worst = i;
            if (worst == n) break; /* every lane at its most: the other threads stay idle */
            lane_threads[worst]++;
        }
        for (size_t i = 0; i < n; i++) {
            double t = chain_ms(&chains[sub[i]], lane_threads[i]);
            if (t > *makespan) *makespan = t;
        }
        return (int)n;
    }
    double load[CPU_LANES_MAX] = {0}; /* one thread a lane; the longest chain left onto the least loaded */
    uint8_t placed[CPU_LANES_MAX] = {0};
    for (int j = 0; j < threads; j++) lane_threads[j] = 1;
    for (size_t done = 0; done < n; done++) {
        size_t c = n;
        for (size_t i = 0; i < n; i++)
            if (!placed[i] && (c == n || chain_ms(&chains[sub[i]], 1) > chain_ms(&chains[sub[c]], 1))) c = i;
        int j = 0;
        for (int i = 1; i < threads; i++)
            if (load[i] < load[j]) j = i;
        placed[c] = 1;
        lane_of[sub[c]] = (size_t)j;
        load[j] += chain_ms(&chains[sub[c]], 1);
    }
    for (int j = 0; j < threads; j++)
        if (load[j] > *makespan) *makespan = load[j];
    return threads;
}

int cpu_lanes_plan(const pdc_layer_cost *chains, size_t k, int threads, int lane_threads_max, int force,
                   size_t *lane_of, int *lane_threads, double *predicted)
{
    double apart = 0; /* layer after layer, every thread */
    for (size_t c = 0; c < k; c++) apart += chain_ms(&chains[c], threads);
    if (predicted) predicted[0] = apart, predicted[1] = apart;
    if (k < 2 || threads < 2 || k > CPU_LANES_MAX) return 0;
    /* the chains by how much threads speed them up, most first: the first `whole` of them run layer
     * after layer on every thread, the others side by side; forced: all side by side */
    size_t order[CPU_LANES_MAX], lane_try[CPU_LANES_MAX];
    int threads_try[CPU_LANES_MAX];
    for (size_t c = 0; c < k; c++) {
        size_t i = c;
        for (; i > 0 && chains[order[i - 1]].parallel_ms < chains[c].parallel_ms; i--) order[i] = order[i - 1];
        order[i] = c;
    }
    double best = INFINITY;
    int lanes = 0;
    for (size_t whole = 0; whole + 2 <= k && (whole == 0 || !force); whole++) {
        double first = 0, span;
        for (size_t i = 0; i < whole; i++) first += chain_ms(&chains[order[i]], threads);
        int n = side_by_side(chains, order + whole, k - whole, threads, lane_threads_max, lane_try, threads_try, &span);
        if (first + span >= best) continue;
        best = first + span;
        lanes = n;
        for (size_t i = 0; i < k; i++) lane_of[order[i]] = i < whole ? CPU_LANE_WHOLE : lane_try[order[i]];
        for (int j = 0; j < n; j++) lane_threads[j] = threads_try[j];
    }
    if (predicted) predicted[1] = best;
    return force || best <= CPU_LANES_GAIN * apart ? lanes : 0;
}
