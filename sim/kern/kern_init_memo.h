/* A process-wide memo of kern_init_param's results.
 *
 * Why: the values of an initialisation call are a pure function of its descriptor and length (the
 * generator of twinrun/init_normal.h reads nothing else), and every data-parallel replica of a
 * (tensor, pipeline) shard asks for the same calls: at TP8 PP8 DP16 each set of values was computed 16
 * times per run (Box-Muller's log and cos per element), and again by the next run in the process (the
 * scenario runner's fault-free yardstick and its attempt 0). A hit copies the bytes the first call
 * computed, so the results are the same bits whether or not a call hits, at any thread count.
 *
 * Bounded: at most KERN_INIT_MEMO_BUDGET bytes of values are held; an insertion that would pass the
 * budget drops every entry first (simple, and any policy gives the same bits). Thread-safe: kernel
 * bodies run on the worker pool's threads (twin_defer.h); one read-write lock guards the table. Only
 * generated (normal) calls are kept: a constant fill is cheaper than a copy. */
#ifndef TWINRUN_SIM_KERN_KERN_INIT_MEMO_H
#define TWINRUN_SIM_KERN_KERN_INIT_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/kern.h"

#define KERN_INIT_MEMO_BUDGET ((size_t)128 << 20) /* bytes of values; the flagship needs ~30 MiB */

/* Copies the values remembered for (d, n) into out[n] and returns true, or returns false. */
bool kern_init_memo_get(const kern_init_desc *d, size_t n, float *out);
/* Remembers a copy of out[n] as the values of (d, n) (does nothing for a constant fill, or for one
 * larger than half the budget). */
void kern_init_memo_put(const kern_init_desc *d, size_t n, const float *out);

typedef struct kern_init_memo_stats {
    uint64_t hits, misses; /* kern_init_memo_get's answers since the last reset */
    uint64_t entries;      /* held now */
    size_t bytes;          /* of values held now */
} kern_init_memo_stats;

kern_init_memo_stats kern_init_memo_stats_now(void);
/* Drops every entry and zeroes the counters (tests; frees the memory). */
void kern_init_memo_reset(void);

#endif
