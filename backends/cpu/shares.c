/*
 * shares.c - how the threads of a parallel region divide n work items: one contiguous share each,
 * taken front to back by its owner, and a thread whose share is done takes items one at a time from
 * the back of the others'.
 *
 * Contiguous, because a conv packed whole numbers its items filter chunk by filter chunk (each over
 * every tile), and consecutive chunks' packed weights follow each other: the owner's weight stream
 * (and its prefetch 8 KiB ahead) runs on from one chunk to the next, a thread reads about its share
 * of the weights, and from run to run it takes the same items, whose weights its cache may still
 * hold.
 * Items dealt out one at a time from a shared counter, as before, break the stream at every chunk
 * and bounce the counter's line between the cores: ResNet-50 512@7 at 9x, 2 threads, run after
 * oneDNN, 0.107-0.110 ms against 0.093-0.097 for fixed halves. Taking from the back keeps what a
 * fixed split loses: a thread that loses its core delays only the item it is running, and uneven
 * shares (filters run heaviest first) even out. (Items taken from the back run backwards, so a
 * thief's stream restarts at each one: the price of evening out, paid at the end. Shares balanced
 * by cost instead of count made no difference.)
 *
 * The shares are set before the region, so a thread that starts late (or never: a team smaller than
 * asked for) has its share taken by the others. Each share's front and back sit in one 64-bit word
 * in a 128-byte slot of its own: the owner's claims stay in its core's cache until a thief arrives.
 * A claim is a compare-and-swap; the items are independent, and the region's start and end order
 * everything else, so the word needs no ordering of its own. The owner claims a run of items at a
 * time (a sixteenth of its share, and an eighth of what is left of it once that is less): a locked
 * instruction waits until the stores before it have left the store buffer, and after a conv piece
 * those are output lines still on their way from memory - a claim per piece cost VGG-16 conv1_2
 * (896 pieces of about 4 us) 3-6% at one thread. A thief takes one item at a time, and the owner's
 * last claims shrink to one item, so the threads still finish about a piece apart.
 */
#include <stdatomic.h>

#include "backends/cpu/cpu.h"

static uint64_t span_of(uint64_t front, uint64_t back) { return back << 32 | front; }

/* Units [first, past) of thread t's share: the one place the split is defined. */
static int64_t share_first(int t, int nt, int64_t n) { return n * t / nt; }

int cpu_share_owns(int t, int nt, int64_t n, int64_t u)
{
    return u >= share_first(t, nt, n) && u < share_first(t + 1, nt, n);
}

void cpu_share_split(cpu_share *s, int nt, int64_t n, int64_t unit)
{
    for (int t = 0; t < nt; t++) {
        int64_t front = share_first(t, nt, n) * unit, back = share_first(t + 1, nt, n) * unit,
                run = (back - front) / 16;
        atomic_store_explicit(&s[t].span, span_of((uint64_t)front, (uint64_t)back), memory_order_relaxed);
        s[t].run = run > 1 ? run : 1;
    }
}

/* Up to `most` items from the front (own share) or one from the back (another's): the first item,
 * or -1 if the share is empty; *count: how many. */
static int64_t take(cpu_share *s, int from_back, int64_t most, int64_t *count)
{
    uint64_t v = atomic_load_explicit(&s->span, memory_order_relaxed), next;
    int64_t item;
    do {
        uint64_t front = v & 0xffffffffu, back = v >> 32;
        if (front >= back) return -1;
        /* an owner's claim: at most an eighth of what is left, so a thief can still take the rest */
        int64_t left = (int64_t)(back - front), claim = left / 8 < most ? left / 8 : most;
        *count = from_back || claim < 1 ? 1 : claim;
        item = (int64_t)(from_back ? back - 1 : front);
        next = from_back ? span_of(front, back - 1) : span_of(front + (uint64_t)*count, back);
    } while (!atomic_compare_exchange_weak_explicit(&s->span, &v, next, memory_order_relaxed, memory_order_relaxed));
    return item;
}

int64_t cpu_share_next(cpu_share *s, int t, int nt, int64_t *count)
{
    int64_t item = take(&s[t], 0, s[t].run, count);
    for (int k = 1; item < 0 && k < nt; k++) item = take(&s[(t + k) % nt], 1, 1, count);
    return item;
}
