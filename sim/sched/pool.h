/* The worker pool: each rank's deferred device work (kernels' math, device-side copies, frees) runs
 * on worker threads while the scheduler thread goes on running ranks in (simulated time, rank)
 * order.
 *
 * Determinism rests on three rules, none of which depends on timing:
 * - one queue per rank, run in issue order, by one thread at a time (a thread takes the whole queue);
 * - only the scheduler thread adds to a queue, and it drains a rank's queue (waits for it, or runs
 *   it itself) before anything on the host reads or writes that rank's memory, so every host access
 *   sees the memory as if the work had run at launch;
 * - deferred work is a pure function of its arguments and the memory it reads: it never touches the
 *   scheduler, the clocks, the trace, the flight recorder or the report (all charged at launch).
 *
 * Without a pool (threads = 1) nothing is queued: work runs at launch, as it always did. */
#ifndef TWINRUN_SIM_SCHED_POOL_H
#define TWINRUN_SIM_SCHED_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "twin_defer.h" /* twin_job_fn: a unit of deferred work, fn(args) */

typedef struct twin_job twin_job;

/* One rank's queue. All fields belong to the pool's lock. */
typedef struct twin_queue {
    twin_job *head, *tail; /* pending, in issue order */
    bool running;          /* a thread has taken it and is running its jobs */
    bool listed;           /* on the pool's ready list */
    struct twin_queue *prev_ready, *next_ready;
} twin_queue;

typedef struct twin_pool twin_pool;

/* workers threads besides the scheduler thread (0: nothing runs until a drain: the "lazy" check
 * that every host access drains first). NULL when out of memory or threads cannot start. */
twin_pool *twin_pool_create(int workers);
/* Joins the workers; every queue must have been drained. */
void twin_pool_destroy(twin_pool *p);

/* Appends fn(a) to q, a = a copy of args[0..size) followed by one of tail[0..tail_size) (a queued
 * copy's source bytes; NULL, 0 for none). Scheduler thread only. */
void twin_pool_submit(twin_pool *p, twin_queue *q, twin_job_fn *fn, const void *args, size_t size, const void *tail,
                      size_t tail_size);
/* Returns when every job of the n queues has run: runs the ones no worker holds on this thread,
 * waits for the others. Scheduler thread only; afterwards no thread holds any of them. */
void twin_pool_drain(twin_pool *p, twin_queue *const *qs, int n);

/* True while this thread runs deferred work: a failure there cannot end a rank (the work belongs to
 * no running coroutine), so the rank-fail path ends the process instead. */
bool twin_pool_in_job(void);

#endif
