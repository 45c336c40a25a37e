/* The scheduler's structures, shared by the twin's device, collectives and flight recorder.
 * Engine code never sees these; it reaches a rank only through the seam. */
#ifndef TWINRUN_SIM_SCHED_SCHED_INTERNAL_H
#define TWINRUN_SIM_SCHED_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "flight/flight.h"
#include "pool.h"
#include "rank_heap.h"
#include "stack.h"
#include "trace/trace.h"
#include "twin.h"
#include "twin_cost.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"

typedef enum rank_state {
    RANK_RUNNABLE = 0,
    RANK_BLOCKED, /* waiting for collectives (deadline = watchdog) or hung (no deadline) */
    RANK_DONE,
    RANK_FAILED,
    RANK_KILLED,
} rank_state;

struct coll_pending;

typedef struct twin_rank {
    int id;
    rank_state state;
    double now;              /* this rank's simulated clock, seconds */
    double coll_seconds;     /* of which spent in collectives (waiting and transferring): not busy */
    double wait_seconds;     /* of coll_seconds, waiting for the last member (or the peer) to arrive */
    double deadline;         /* when blocked: the watchdog's time; INFINITY = none */
    double watchdog_s;       /* collective timeout; 0 = none */
    int waiting;             /* collectives this rank has launched and not seen complete */
    coll_status wake_status; /* worst status among them */
    const char *blocked_on;  /* for reports */
    char wait_desc[96];      /* what the collectives layer says the rank waits in */
    int exit_code;
    double link_slowdown; /* coll_set_link_slowdown: its transfers across nodes take this many times longer; 0 = 1 */
    char *fail_msg;       /* the rank's last fatal message (dev_rank_note); NULL = none */
    uint64_t rng;
    twin_ctx ctx;
    twin_stack stack;
    flight_ring flight;
    bool recording;
    twin_trace_rank *trace; /* NULL unless this rank is traced: every trace hook tests it first */
    /* what a crashed process's OS would reclaim: devices and communicators not yet closed */
    struct dev_device *devices;
    struct coll_comm *comms;
    /* coll_group_start/end nesting and the operations queued inside */
    int group_depth;
    struct coll_pending *group_first, *group_last;
    twin_queue queue; /* deferred device work (pool.h); empty and unused without a pool */
} twin_rank;

struct coll_registry;
struct twin_sched;

/* The other processes of a multi-process job (docs/multiprocess.md), as the scheduler and the
 * collectives reach them: hooks that sim/multiproc fills and the twin's launch passes in
 * twin_options.remote, so that neither the scheduler nor the collectives include the transport
 * (sim/multiproc sits above them both). `job` is the first argument of every hook. */
struct coll_group;
typedef struct twin_remote {
    void *job;
    /* ---- for the scheduler ---- */
    /* Handles what the network brought. With may_block, waits (wall clock) for the network while an
     * operation waits on another process. Returns false when nothing waits on another process. */
    bool (*progress)(void *job, bool may_block);
    /* A rank of this process failed: the job is torn down. */
    void (*rank_failed)(void *job, const struct twin_rank *r);
    /* The twin found a hang among this process's ranks (why: "deadlock", ...): abort the job with
     * the blame over every process's dumps. */
    void (*hang)(void *job, struct twin_sched *s, const char *why);
    /* Every rank of this process has ended: say goodbye and wait for the others, answering aborts. */
    void (*run_end)(void *job, struct twin_sched *s);
    /* ---- for the collectives (sim/coll: the meetings of members in other processes) ---- */
    /* Sets a new group's remote fields (coll_internal.h) when members live in other processes. */
    void (*group_init)(void *job, struct coll_group *g);
    /* Takes p when its meeting spans processes (false: both ends of a send/recv are here). */
    bool (*post)(void *job, struct coll_pending *p);
    /* Takes back a launched operation of a rank that ended, and aborts a group's meetings. */
    void (*withdraw)(void *job, struct coll_pending *p);
    void (*group_abort)(void *job, struct coll_group *g, struct twin_rank *timed_out, double t);
} twin_remote;

typedef struct twin_sched {
    int nranks;
    int world;                 /* the job's ranks; this run hosts nranks of them (twin_global_rank) */
    int proc, nprocs, chunk;   /* multi-process: chunks of `chunk` ranks dealt round-robin to nprocs processes */
    bool xproc;                /* other processes host the rest, reached through remote */
    const twin_remote *remote; /* NULL unless xproc */
    unsigned polls;
    twin_rank *ranks;
    rank_heap heap;
    twin_ctx main_ctx;
    twin_rank *current;
    double watchdog_time; /* when the first watchdog fired */
    twin_options opt;
    const twin_device_spec *spec;
    int (*entry)(int rank, void *arg);
    void *arg;
    double now; /* time of the last scheduling decision; never decreases */
    uint64_t switches;
    bool hang;
    int watchdog_rank, blamed_rank;
    char *report;
    size_t report_len;
    FILE *report_stream;
    struct coll_registry *groups;
    twin_trace *trace; /* NULL without opt.trace_path */
    FILE *trace_file;
    twin_pool *pool; /* NULL: one thread, device work runs at launch (opt.threads, sched_pool.c) */
} twin_sched;

/* ranks[i]'s global rank, and back (chunk k of this process is the job's chunk k x nprocs + proc). */
static inline int twin_global_rank(const struct twin_sched *s, int i) {
    return (i / s->chunk * s->nprocs + s->proc) * s->chunk + i % s->chunk;
}
static inline int twin_local_index(const struct twin_sched *s, int rank) {
    return rank / s->chunk / s->nprocs * s->chunk + rank % s->chunk;
}

/* The running twin, or NULL outside twin_run; twin_run sets it (s) and clears it (NULL). */
twin_sched *twin_sched_get(void);
void twin_sched_set(twin_sched *s);
/* The running twin's other processes, or NULL (one process, or outside twin_run). */
const twin_remote *twin_remote_get(void);
/* The calling rank: the running coroutine, or the implicit rank 0 outside twin_run. */
twin_rank *twin_self(void);
/* World size and the registry the calling context uses (implicit world outside twin_run). */
int twin_world(void);
struct coll_registry **twin_registry(void);
const twin_device_spec *twin_spec(void);
int twin_gpus_per_node(void);

/* Blocking points. twin_sync yields until r's clock is the smallest in the run (so deadlines
 * before it fire first); twin_wait blocks until r->waiting is 0 and returns the worst status. */
void twin_sync(twin_rank *r);
coll_status twin_wait(twin_rank *r, const char *what);
/* Ends the running rank r (returned from its entry, or failed); never returns. */
_Noreturn void twin_rank_finish(twin_rank *r, rank_state how, int code);
/* One of r's collectives finished at time t with status st. */
void twin_op_done(twin_rank *r, double t, coll_status st);

/* Deferred device work (pool.h, sched_pool.c). twin_rank_submit queues fn(args) on r's queue, or runs
 * it now without a pool (one thread, or outside twin_run). The drains return when every job queued
 * for the ranks has run: call them on the scheduler thread before the host reads or writes a rank's
 * memory. twin_threads_resolve: the pool's thread count for opt (1 = no pool; 0 = queue but run only
 * at drains, the "lazy" check); -1 with a message for a bad TWINRUN_TWIN_THREADS. */
void twin_rank_submit(twin_rank *r, twin_job_fn *fn, void *args, size_t size);
/* With a pool only: queues fn on a copy of args followed by one of tail[0..tail_size). */
void twin_rank_submit_with(twin_rank *r, twin_job_fn *fn, const void *args, size_t size, const void *tail,
                           size_t tail_size);
void twin_rank_drain(twin_rank *r);
void twin_ranks_drain(twin_rank *const *rs, int n);
int twin_threads_resolve(const twin_options *o, int nranks, char *err, size_t errlen);

/* Seeded jitter factor in [1, 1 + cost_jitter) for a cost identified by key. */
double twin_jitter(uint64_t key);
uint64_t twin_mix64(uint64_t x);

/* The event log (no-op without one) and the run's report. */
void twin_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void twin_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool twin_logging(void);

/* Implemented by the collectives: abort every communicator group, completing every launched
 * operation (COLL_TIMEOUT for timed_out's, COLL_ABORTED for the rest) at time t. */
void coll_twin_abort_all(twin_rank *timed_out, double t);
/* Reclaim what an ended rank left open (devices, communicators, queued operations). */
void coll_twin_reclaim(twin_rank *r);
void dev_twin_reclaim(twin_rank *r);
/* Frees the run's communicator groups (at the end of twin_run). */
void coll_twin_registry_free(struct coll_registry **reg);
/* Every rank of this run as a flight dump (world = the job's); free each and the array. */
flight_dump *twin_local_dumps(twin_sched *s);
/* The blame over every rank's dumps, into the report (sched_hang.c). */
void twin_hang_report(twin_sched *s, const char *why);
/* Every rank's flight dump into opt.dump_dir (sched_hang.c): after a hang, and at the end with dump_at_exit. */
void twin_dump_all(twin_sched *s);

#endif
