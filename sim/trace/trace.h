/* A Chrome/Perfetto trace of the twin's simulated timeline (twin_options.trace_path).
 *
 * The scheduler, the collectives and the device call the twin_trace_* hooks below; each hook
 * is reached only through a rank's `trace` pointer, which is NULL unless that rank is traced, so
 * a run without a trace pays one untaken branch per hook. Recording only reads clocks that the
 * simulation has already computed: it never advances a clock, draws a random number or yields,
 * so a traced run has the same event order, times and bits as an untraced one.
 *
 * Memory is bounded: each traced rank keeps its newest TWIN_TRACE_MAX_EVENTS / ntraced spans
 * in a ring (the end of a run is what explains a hang), and instants (exit, failure, hang,
 * watchdog) are never dropped. The file says how many spans were dropped. */
#ifndef TWINRUN_SIM_TRACE_TRACE_H
#define TWINRUN_SIM_TRACE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flight/flight.h"

/* Spans kept across all traced ranks. */
#define TWIN_TRACE_MAX_EVENTS 200000

typedef struct twin_trace twin_trace;
typedef struct twin_trace_rank twin_trace_rank;

/* Which ranks to trace: `ranks` is a rank list ("0-7,1016-1023", flight_ranks_parse) or NULL
 * for ranks 0 .. min(world, 64) - 1. Returns 0 with *out, or -1 with a message in err. */
int twin_trace_create(const char *ranks, int world, int gpus_per_node, const char *device, twin_trace **out, char *err,
                      size_t errlen);
void twin_trace_free(twin_trace *t);
/* The recorder of global rank r, or NULL when r is not traced. */
twin_trace_rank *twin_trace_rank_of(twin_trace *t, int r);

/* ---- hooks (tr is never NULL: callers test their rank's pointer) ---------------------------- */
/* A kernel ran from t0 to t1. Back-to-back kernels coalesce into one "compute" span. */
void twin_trace_compute(twin_trace_rank *tr, double t0, double t1);
/* dev_sleep from t0 to t1. */
void twin_trace_sleep(twin_trace_rank *tr, double t0, double t1);

typedef struct twin_trace_coll {
    const char *group; /* communicator name */
    flight_op op;
    uint64_t seq;
    size_t count;
    int dtype;         /* tr_dtype */
    int redop;         /* coll_op, or -1 */
    int peer;          /* group rank of root or peer, or -1 */
    double arrival;    /* the rank launched it */
    double xfer_start; /* the last member arrived and data started to move; < 0 when it never did */
    double end;
    int status; /* coll_status */
} twin_trace_coll;
/* One of the rank's collectives finished (completed, timed out or aborted). */
void twin_trace_coll_done(twin_trace_rank *tr, const twin_trace_coll *c);

typedef enum twin_trace_mark {
    TWIN_MARK_EXIT = 0, /* the entry returned `code` */
    TWIN_MARK_FAIL,     /* dev_rank_abort / tr_fatal with `code` */
    TWIN_MARK_HANG,     /* twin_hang_forever */
    TWIN_MARK_KILLED,   /* still stopped when the run ended */
    TWIN_MARK_WATCHDOG, /* this rank's watchdog fired: shown across the whole timeline */
    TWIN_MARK_DEADLOCK, /* nobody could run and no watchdog was armed (rank = the first waiting) */
    TWIN_MARK_COUNT
} twin_trace_mark;
/* An instant on rank `rank` at time t. Watchdog and deadlock marks are kept even when the rank is
 * not traced (they are about the whole run); the others only for traced ranks. */
void twin_trace_mark_at(twin_trace *t, int rank, twin_trace_mark m, double time, int code, const char *what);

/* Writes the Trace Event Format JSON; end_time is the run's last simulated time. 0, or -1 with
 * a message in err. */
int twin_trace_write(twin_trace *t, FILE *f, double end_time, char *err, size_t errlen);

#endif
