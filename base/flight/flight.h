/* The flight recorder: what every rank's collectives did, in a form that outlives a hang.
 *
 * A rank keeps the last N records in a ring (flight_ring). A dump (flight_dump) is one rank's
 * communicators and records; the text format (flight_dump_write / flight_dump_parse) is meant to
 * be written by the real backend too, so the blame analysis (flight_blame) reads dumps from
 * either. Format, version 1 (docs/twin.md has the full grammar):
 *
 *   twinrun-flight 1
 *   rank 17 world 1024 backend twin time 600.000000000 status running 0
 *   comm 0 uid 9e3779b97f4a7c15 name world size 1024 ranks 0-1023
 *   rec 5 comm 0 seq 5 op all_reduce count 1024 dtype fp32 redop sum peer -1 state started
 *       t_sched 12.000000000 t_start 12.000000000 t_end -          (one line)
 *   dropped 0
 *   end
 */
#ifndef TWINRUN_BASE_FLIGHT_FLIGHT_H
#define TWINRUN_BASE_FLIGHT_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum flight_op {
    FLIGHT_ALL_REDUCE = 0,
    FLIGHT_ALL_GATHER,
    FLIGHT_REDUCE_SCATTER,
    FLIGHT_BROADCAST,
    FLIGHT_SEND,
    FLIGHT_RECV,
    FLIGHT_BARRIER,
    FLIGHT_OP_COUNT
} flight_op;

typedef enum flight_state {
    FLIGHT_SCHEDULED = 0, /* enqueued (inside a group, not yet launched) */
    FLIGHT_STARTED,       /* launched: waiting for or exchanging with peers */
    FLIGHT_COMPLETED,
    FLIGHT_ABORTED, /* the communicator was aborted (watchdog or coll_abort) before completion */
    FLIGHT_STATE_COUNT
} flight_state;

#define FLIGHT_NAME_MAX 32 /* communicator names, including the terminating NUL */
#define FLIGHT_MAX_WORLD (1 << 20)

typedef struct flight_record {
    uint64_t id;  /* per-rank record number, increasing */
    int comm;     /* index into the dump's comms */
    uint64_t seq; /* per-communicator sequence number; point-to-point ops count separately */
    flight_op op;
    int redop;      /* coll_op for reductions, -1 otherwise */
    int dtype;      /* tr_dtype */
    uint64_t count; /* elements */
    int peer;       /* group rank of the root (broadcast) or peer (send/recv); -1 otherwise */
    flight_state state;
    double t_sched, t_start, t_end; /* seconds; negative = not reached */
} flight_record;

typedef struct flight_comm {
    uint64_t uid; /* the same on every member: identifies the communicator across dumps */
    char name[FLIGHT_NAME_MAX];
    int size;
    int *ranks; /* [size] global ranks, ascending */
} flight_comm;

typedef struct flight_dump {
    int rank, world;
    char backend[16];
    double time;     /* the rank's clock when dumped */
    char status[16]; /* running, blocked, exited, failed, hung */
    int exit_code;
    int ncomms;
    flight_comm *comms;
    size_t nrecords;
    flight_record *records; /* oldest first */
    uint64_t dropped;       /* records the ring overwrote */
    bool owns_ranks;        /* comms[i].ranks were allocated by the parser */
} flight_dump;

const char *flight_op_name(flight_op op);
const char *flight_state_name(flight_state s);
const char *flight_redop_name(int redop);

/* ---- the ring a rank records into --------------------------------------------------------- */
typedef struct flight_ring {
    size_t cap, count; /* count <= cap live records; the newest is next_id - 1 */
    uint64_t next_id;
    flight_record *rec; /* [cap], allocated on the first record */
    int ncomms, comm_cap;
    flight_comm *comms; /* ranks borrowed from the communicator (outlive the ring) */
} flight_ring;

void flight_ring_init(flight_ring *r, size_t cap);
void flight_ring_free(flight_ring *r);
/* Registers a communicator; returns its index for records. */
int flight_ring_add_comm(flight_ring *r, uint64_t uid, const char *name, int size, int *ranks);
/* Appends a record (overwriting the oldest when full); returns its id. */
uint64_t flight_ring_add(flight_ring *r, const flight_record *rec);
/* The record with this id, or NULL if the ring has overwritten it. */
flight_record *flight_ring_get(flight_ring *r, uint64_t id);
/* A dump view of the ring: records copied oldest first, comms borrowed. Free with flight_dump_free. */
int flight_ring_to_dump(const flight_ring *r, int rank, int world, double time, const char *status, int exit_code,
                        flight_dump *out);

void flight_dump_free(flight_dump *d);

/* ---- text format ------------------------------------------------------------------------- */
int flight_dump_write(FILE *f, const flight_dump *d);
/* Parses one dump starting at text[*pos]; advances *pos past its `end` line. Returns 1 with a
 * dump, 0 at end of input (only whitespace/comments left), -1 with a message naming the line. */
int flight_dump_parse(const char *text, size_t len, size_t *pos, size_t *line, flight_dump *out, char *err,
                      size_t errlen);
/* Writes a rank list as ranges: "0-7", "0-1023:8", "3,5,9-12". */
void flight_ranks_format(FILE *f, const int *ranks, int n);
/* Parses a rank list into ranks[n] (allocated); checks ascending, unique, within [0, world). */
int flight_ranks_parse(const char *s, int world, int **ranks, int *n, char *err, size_t errlen);

/* ---- blame --------------------------------------------------------------------------------- */
typedef struct flight_stuck {
    uint64_t uid;
    char name[FLIGHT_NAME_MAX];
    int size;
    uint64_t seq;
    flight_op op;
    uint64_t count;
    int dtype, redop, peer;
    int njoined;
    int nmissing;
    int *missing; /* global ranks that never joined, ascending */
    double since; /* earliest start among those that joined */
} flight_stuck;

typedef struct flight_blame_result {
    int nstuck;
    flight_stuck *stuck;
    int first_stopped; /* the missing rank whose last progress is earliest; -1 if none */
    double first_stopped_time;
    int nmissing_dumps;
    int *missing_dumps; /* ranks of the world without a dump */
} flight_blame_result;

/* Analyses all ranks' dumps (any order). Returns 0, or -1 when the dumps contradict each other
 * (a uid with different names or members, two dumps of one rank, different world sizes). */
int flight_blame(const flight_dump *dumps, size_t n, flight_blame_result *out, char *err, size_t errlen);
void flight_blame_print(FILE *f, const flight_blame_result *b, const flight_dump *dumps, size_t n);
void flight_blame_free(flight_blame_result *b);

#endif
