/* The ranks' side of the worker pool (pool.h): how many threads a run gets, and each rank's queue of
 * deferred device work. Without a pool (one thread, or outside twin_run) work runs at submission,
 * exactly as the twin always ran it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sched_internal.h"
#include "twinrun/err.h"

enum { TWIN_MAX_THREADS = 256 };

int twin_threads_resolve(const twin_options *o, int nranks, char *err, size_t errlen) {
    int n = o->threads;
    if (n < -1 || n > TWIN_MAX_THREADS)
        return tr_errf(err, errlen, "twin_run: threads %d; use 1 to %d, 0 (automatic) or -1 (lazy)", n,
                       TWIN_MAX_THREADS);
    if (n == 0) {
        const char *env = getenv("TWINRUN_TWIN_THREADS");
        if (env && *env) {
            char *end;
            const long v = strtol(env, &end, 10);
            if (!strcmp(env, "lazy")) n = -1;
            else if (*end || v < 1 || v > TWIN_MAX_THREADS)
                return tr_errf(err, errlen, "TWINRUN_TWIN_THREADS='%s': use 1 to %d threads, or 'lazy'", env,
                               TWIN_MAX_THREADS);
            else n = (int)v;
        } else {
            const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            n = cpus < 1 ? 1 : cpus > TWIN_MAX_THREADS ? TWIN_MAX_THREADS : (int)cpus;
        }
    }
    if (n == -1) return 0;
    return n > nranks ? nranks : n; /* a rank's work never runs on two threads: more would idle */
}

void twin_rank_submit(twin_rank *r, twin_job_fn *fn, void *args, size_t size) {
    twin_sched *s = twin_sched_get();
    if (s && s->pool) twin_pool_submit(s->pool, &r->queue, fn, args, size, NULL, 0);
    else fn(args);
}

void twin_rank_submit_with(twin_rank *r, twin_job_fn *fn, const void *args, size_t size, const void *tail,
                           size_t tail_size) {
    twin_sched *s = twin_sched_get();
    TR_CHECK(s && s->pool, "twin_rank_submit_with without a worker pool");
    twin_pool_submit(s->pool, &r->queue, fn, args, size, tail, tail_size);
}

void twin_rank_drain(twin_rank *r) {
    twin_sched *s = twin_sched_get();
    twin_queue *q = &r->queue;
    if (s && s->pool) twin_pool_drain(s->pool, &q, 1);
}

void twin_ranks_drain(twin_rank *const *rs, int n) {
    twin_sched *s = twin_sched_get();
    if (!s || !s->pool || n < 1) return;
    twin_queue *few[16], **qs = n <= 16 ? few : malloc(sizeof *qs * (size_t)n);
    TR_CHECK(qs != NULL, "out of host memory draining the ranks of a collective");
    for (int i = 0; i < n; i++) qs[i] = &rs[i]->queue;
    twin_pool_drain(s->pool, qs, n);
    if (qs != few) free(qs);
}
