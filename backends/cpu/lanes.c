/*
 * lanes.c - how the threads of a run divide one step of a scheduled model (ir/arena.h) among its
 * chains, decided by their predicted cost.
 *
 * A chain's predicted time on t threads is serial + parallel / t (the latency model's Amdahl form,
 * lib/cost: each layer's time on one thread split by its family's parallel share, summed over the
 * chain's layers). Three ways to run a step of k chains on T threads are weighed:
 *   - layer after layer, each on every thread (what an unscheduled model does): the sum over the
 *     chains of serial + parallel / T;
 *   - k <= T: every chain a lane of its own, the threads dealt one at a time to the lane that would
 *     take longest with what it has (the best split for times that fall as threads are added): the
 *     slowest lane's time;
 *   - k > T: T lanes of one thread, the chains dealt longest first to the least loaded lane (LPT):
 *     the most loaded lane's time.
 * Side by side is taken only when predicted faster by at least 1% (ties and near-ties keep the order of
 * an unscheduled model). No larger margin: the two measurements there are (a quiet host, 2 threads)
 * both agree with the plain prediction. GoogLeNet's pairs of 1x1 convs (FLOPs within 1.5x, run side by
 * side unconditionally before) made a run 9% slower than the unscheduled model; the model, with this
 * host's conv families 92-99% parallel, predicts 7 of the 9 pairs 7-29% slower side by side. Two pruned
 * ResNet-18 with different weights, whose equal convs are paired, ran 1.03x the two in turn; the
 * model predicts such a pair 2.6% faster side by side. */
#include "backends/cpu/cpu.h"

#define CPU_LANES_GAIN 0.99 /* side by side only at or below this share of the layer-after-layer time */

static double chain_ms(const pdc_layer_cost *c, int threads) { return c->serial_ms + c->parallel_ms / (double)threads; }

int cpu_lanes_plan(const pdc_layer_cost *chains, size_t k, int threads, int lane_threads_max, int force,
                   size_t *lane_of, int *lane_threads, double *predicted)
{
    double apart = 0; /* layer after layer, every thread */
    for (size_t c = 0; c < k; c++) apart += chain_ms(&chains[c], threads);
    if (predicted) predicted[0] = apart, predicted[1] = apart;
    if (k < 2 || threads < 2 || k > CPU_LANES_MAX) return 0;
    double makespan = 0;
    int lanes;
    if (k <= (size_t)threads) {
        lanes = (int)k;
        int left = threads - lanes;
        for (size_t c = 0; c < k; c++) lane_of[c] = c, lane_threads[c] = 1;
        for (; left > 0; left--) { /* the next thread to the lane that is slowest with what it has */
            size_t worst = k;
            for (size_t c = 0; c < k; c++)
                if (lane_threads[c] < lane_threads_max &&
                    (worst == k || chain_ms(&chains[c], lane_threads[c]) > chain_ms(&chains[worst], lane_threads[worst])))
                    worst = c;
            if (worst == k) break; /* every lane at its most: the other threads stay idle */
            lane_threads[worst]++;
        }
        for (size_t c = 0; c < k; c++) {
            double t = chain_ms(&chains[c], lane_threads[c]);
            if (t > makespan) makespan = t;
        }
    } else {
        lanes = threads;
        double load[CPU_LANES_MAX] = {0};
        uint8_t placed[CPU_LANES_MAX] = {0};
        for (int j = 0; j < lanes; j++) lane_threads[j] = 1;
        for (size_t n = 0; n < k; n++) { /* the longest chain not yet placed, onto the least loaded lane */
            size_t c = k;
            for (size_t i = 0; i < k; i++)
                if (!placed[i] && (c == k || chain_ms(&chains[i], 1) > chain_ms(&chains[c], 1))) c = i;
            int j = 0;
            for (int i = 1; i < lanes; i++)
                if (load[i] < load[j]) j = i;
            placed[c] = 1;
            lane_of[c] = (size_t)j;
            load[j] += chain_ms(&chains[c], 1);
        }
        for (int j = 0; j < lanes; j++)
            if (load[j] > makespan) makespan = load[j];
    }
    if (predicted) predicted[1] = makespan;
    return force || makespan <= CPU_LANES_GAIN * apart ? lanes : 0;
}
