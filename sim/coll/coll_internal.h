/* The twin's collectives, inside: shared communicator groups, the instances ranks meet at, and
 * the operations ranks have launched.
 *
 * Every rank's coll_comm_create with the same name and rank list joins one shared coll_group (the
 * k-th creation on each rank joins the k-th group, as NCCL's unique id would pair them). Ranks
 * meet collective number `seq` of a group at one coll_instance; the last to arrive does the data
 * movement for everyone, in group-rank order, and completes them all at the same simulated time.
 * Sends and receives pair in order per (sender, receiver). */
#ifndef TWINRUN_SIM_COLL_COLL_INTERNAL_H
#define TWINRUN_SIM_COLL_COLL_INTERNAL_H

#include "sched/sched_internal.h"

typedef struct coll_desc {
    flight_op op;
    size_t count;
    tr_dtype dt;
    int redop; /* coll_op, or -1 */
    int peer;  /* broadcast root / send-recv peer (group rank), or -1 */
} coll_desc;

typedef struct coll_pending coll_pending;
typedef struct coll_instance coll_instance;
typedef struct coll_group coll_group;

struct coll_pending {
    twin_rank *rank;
    struct coll_comm *comm;
    coll_desc desc;
    const void *send;
    void *recv;
    double arrival;
    double xfer_start; /* when the last peer arrived and data moved (for the trace); set at completion */
    /* On a side stream (twin_stream.h) `arrival` is the stream's start and the host's clock waits only
     * for the last member's host to launch (host_wake, the max of the members' host_arrival), not for
     * the transfer: that goes on the stream's clock. NULL side: the default stream, as always. */
    struct dev_stream *side;
    double host_arrival, host_wake;
    uint64_t seq;
    uint64_t flight_id;
    bool recorded;
    bool done;
    bool heap_owned;          /* queued inside a group: freed at coll_group_end */
    coll_instance *inst;      /* while waiting at a collective */
    struct mp_inst *remote;   /* while waiting at a meeting that spans processes (sim/multiproc/mp_coll.c) */
    coll_pending *next_group; /* the rank's group queue */
    coll_pending *next_p2p;   /* the group's unmatched sends and receives */
};

struct coll_instance {
    uint64_t seq;
    int arrived;
    coll_desc desc; /* the first arrival's call, which every later one must match */
    int first_rank;
    coll_pending **members; /* [size] by group rank */
    coll_instance *next;
};

struct coll_group {
    uint64_t uid, key;
    char name[FLIGHT_NAME_MAX];
    int size;
    int *ranks;
    unsigned char *joined; /* [size]: which members hold a handle */
    int refs;
    bool aborted;
    coll_instance *open; /* ascending seq */
    coll_pending *p2p_first, *p2p_last;
    coll_group *next_in_bucket;
    /* multi-process twin: members in other processes too (set by twin_remote's group_init) */
    bool remote;
    int nlocal; /* members in this process */
    int nprocs; /* other processes that host members */
    int *procs; /* [nprocs] ascending */
};

#define COLL_BUCKETS 1024
struct coll_registry {
    coll_group *buckets[COLL_BUCKETS];
    int ngroups;
};

struct coll_comm {
    coll_group *g;
    twin_rank *owner;
    dev_device *dev;
    int group_rank;
    uint64_t seq;                  /* next collective sequence number */
    uint64_t *p2p_send, *p2p_recv; /* [size] per-peer sequence numbers, allocated on first use */
    int inflight;                  /* launched operations not yet complete */
    int flight_comm;               /* index in the owner's flight ring, -1 when not recording */
    coll_observer observer;        /* fault injection; not called while it runs (in_observer) */
    void *observer_arg;
    bool in_observer;
    struct coll_comm *next_owned, *prev_owned;
};

/* Launch p (filled by the caller) on its communicator: records it, meets the peers, completes
 * the instance when p is the last arrival. Mismatches end the calling rank. */
void coll_post(coll_pending *p);
/* Completes p with status st at time t (flight record, owner's wait count). */
void coll_finish(coll_pending *p, double t, coll_status st);
/* Takes back a launched, unfinished operation of a rank that ended (no peer may use its buffers). */
void coll_withdraw(coll_pending *p);
/* Aborts g: every launched operation completes with COLL_ABORTED (COLL_TIMEOUT for timed_out's). */
void coll_group_abort(coll_group *g, twin_rank *timed_out, double t);

/* Data movement for a complete instance, in group-rank order (coll_reduce.c). */
void coll_exec(const coll_group *g, coll_instance *inst);
void coll_exec_p2p(const coll_pending *send, const coll_pending *recv);
/* FNV-1a of the bytes a completed operation produced (for the event log). */
uint64_t coll_result_hash(const coll_group *g, const coll_instance *inst);

/* For the meetings across processes (sim/multiproc/mp_coll.c, which sits above this folder and
 * is reached through twin_remote's hooks): the pieces of one-process meetings that they share. */
void coll_describe(char *buf, size_t n, const coll_desc *d);
twin_coll_kind coll_cost_kind(flight_op op);
void coll_record(coll_pending *p);
_Noreturn void coll_mismatch(coll_pending *p, const char *where, int other_rank, const coll_desc *other);
/* out[i] = reduction over members r of srcs[r][offset + i] (fp32/int32 accumulator), and its store. */
void coll_reduce_into(void *out, const void *const *srcs, int n, size_t offset, size_t count, tr_dtype dt, int op);
void coll_store_acc(void *dst, const void *acc, size_t count, tr_dtype dt);

#endif
