/* The recorder's storage, shared by the hooks (trace.c) and the writer (trace_write.c). */
#ifndef TWINRUN_SIM_TRACE_TRACE_INTERNAL_H
#define TWINRUN_SIM_TRACE_TRACE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

typedef enum trace_span_kind { SPAN_COMPUTE = 0, SPAN_SLEEP, SPAN_COLL, SPAN_HUNG } trace_span_kind;

/* One span of one rank; a collective becomes its span and, when it waited, a nested "wait". */
typedef struct trace_span {
    double t0, t1;     /* simulated seconds; a hung span's t1 is INFINITY until written */
    double xfer_start; /* SPAN_COLL: when the data started to move; < 0 when it never did */
    uint64_t seq;      /* SPAN_COLL */
    uint64_t count;    /* SPAN_COLL: elements; SPAN_COMPUTE: kernels coalesced */
    uint32_t group;    /* SPAN_COLL: index into the trace's interned names */
    int32_t peer;      /* SPAN_COLL: group rank of root/peer, or -1 */
    uint8_t kind, op, dtype, status;
    int8_t redop;
} trace_span;

/* What the ring dropped, kept coarse: [t0, t1] and how much of it the rank was busy (kernels, data
 * moving, sleeping) and waiting for the peers of a collective, in simulated seconds. */
typedef struct trace_sum {
    double t0, t1, busy, wait;
} trace_sum;

/* Summaries a rank keeps of its dropped spans: the heat map of a 1024-rank page draws the whole
 * attempt from them, where the ring alone holds the last few milliseconds. */
#define TRACE_SUMS 128

typedef struct trace_mark {
    double t;
    int rank, code;
    twin_trace_mark kind;
    char what[96];
} trace_mark;

struct twin_trace_rank {
    twin_trace *trace;
    int rank;
    /* a ring of the newest spans: [cap] allocated, grown up to `limit`, then overwritten */
    trace_span *spans;
    size_t cap, limit, len, head; /* head: next slot to write once len == limit */
    uint64_t dropped;
    /* the dropped spans, summarized (trace.c: sum_add): at most TRACE_SUMS intervals in the order the
     * ring dropped them (time order, but where a collective on another stream overlapped); a
     * dropped span joins the last one while the gap before it is at most `gap` and the interval stays
     * within `span`, and when they are full, neighbours merge and both bounds grow */
    trace_sum *sums;
    int nsums;
    double gap, span;
    /* the compute span being coalesced: kernels since the last blocking point */
    bool open;
    double c0, c1;
    uint64_t kernels;
    uint32_t last_group; /* interning cache: most ranks use a handful of communicators in turn */
};

struct twin_trace {
    int world, gpus_per_node;
    char device[32];
    int ntraced;
    int *traced;            /* [ntraced] global ranks, ascending */
    twin_trace_rank *ranks; /* [ntraced] */
    int nnames, names_cap;
    char (*names)[FLIGHT_NAME_MAX];
    int nmarks, marks_cap;
    trace_mark *marks;
    uint64_t dropped_marks;
};

/* Closes r's open compute span into the ring. */
void trace_flush_compute(twin_trace_rank *r);

#endif
