/* coll.h over NCCL (MCCL on MUSA through gpu_compat.h).
 *
 * Communicators are non-blocking (config.blocking = 0), so a stuck init or collective can be
 * abandoned: every wait polls ncclCommGetAsyncError (and the stream) against the rank's timeout
 * (coll_set_timeout: --distributed-timeout-minutes; TWINRUN_COLL_TIMEOUT_S overrides; default
 * 600 s). Past it the watchdog ends the rank (coll_flight.h): flight dump, ncclCommAbort of every
 * communicator, exit 1 (or, with TWINRUN_COLL_ON_TIMEOUT=return, the call returns COLL_TIMEOUT).
 * An asynchronous NCCL error aborts the communicator and returns COLL_ERROR. After coll_abort,
 * every call returns COLL_ABORTED.
 *
 * Bootstrap: a group of one makes its own unique id; a larger group gets its rank 0's id through
 * the TCP rendezvous store on MASTER_ADDR:MASTER_PORT, or files in TWINRUN_RENDEZVOUS_DIR
 * (coll_bootstrap.h).
 *
 * Completion: by default (TWINRUN_COLL_SYNC unset or 1) each collective of a group of two or more
 * waits on the host until its stream has finished it (a group of one never waits), which is what makes the timeout, the twin's blocking semantics, a
 * real barrier and exact flight-recorder states possible; TWINRUN_COLL_SYNC=0 only enqueues
 * (faster; records are marked completed when enqueued and timeouts are not detected). Inside
 * coll_group_start/end the wait happens at coll_group_end, for every stream used in the group.
 *
 * Records: every call is recorded (coll_flight.h) with the twin's numbering, zero-count calls
 * included, so the two backends' traces of the same job are identical.
 *
 * Group ranks: peer (send/recv) and root (broadcast) are positions in the group (0..size-1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_COMPAT_CCL
#include "coll_bootstrap.h"
#include "coll_flight.h"
#include "cuda_dev.h"
#include "gpu_compat.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

struct coll_comm {
    dev_device *dev;
    ncclComm_t comm; /* NULL once aborted */
    int size, rank;
    coll_status dead;       /* COLL_OK while usable; else what every later call returns */
    unsigned long long seq; /* NCCL calls issued, for messages */
    double timeout_s;
    bool sync;
    char name[32];
    coll_observer observer; /* fault injection (fault/); not called while it runs */
    void *observer_arg;
    bool in_observer;
    int flight;                    /* this communicator's index in the rank's flight records */
    uint64_t cseq;                 /* collectives so far (the twin's seq) */
    uint64_t *p2p_send, *p2p_recv; /* [size] sends/receives so far per peer */
};

/* Streams (with their communicator and record) used between coll_group_start and coll_group_end,
 * waited on at the end. Per thread, like NCCL's own group state. */
#define COLL_GROUP_MAX 256
static _Thread_local struct {
    int depth, n;
    coll_comm *comm[COLL_GROUP_MAX];
    dev_stream *stream[COLL_GROUP_MAX];
    uint64_t rec[COLL_GROUP_MAX];
} coll_group;

static double env_double(const char *name, double dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end = NULL;
    const double x = strtod(v, &end);
    if (end == v || *end != '\0' || !(x > 0)) tr_fatal("%s=%s: expected a positive number of seconds", name, v);
    return x;
}

/* TWINRUN_COLL_TIMEOUT_S (tests, quick hang checks) overrides --distributed-timeout-minutes. */
static double coll_timeout(const dev_device *d) {
    return env_double("TWINRUN_COLL_TIMEOUT_S", d->coll_timeout_s > 0 ? d->coll_timeout_s : 600.0);
}

void coll_set_timeout(dev_device *d, double seconds) {
    TR_CHECK(d != NULL && seconds > 0, "coll_set_timeout needs a device and a positive number of seconds");
    d->coll_timeout_s = seconds;
}

static bool coll_sync(void) {
    const char *v = getenv("TWINRUN_COLL_SYNC");
    return !(v && strcmp(v, "0") == 0);
}

/* Waits until the non-blocking communicator is no longer ncclInProgress. */
static ncclResult_t wait_ready(dev_device *d, ncclComm_t comm, double timeout_s, bool *timed_out) {
    const double deadline = dev_clock_now(d) + timeout_s;
    *timed_out = false;
    for (;;) {
        ncclResult_t st = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm, &st);
        if (r != ncclSuccess) return r;
        if (st != ncclInProgress) return st;
        if (dev_clock_now(d) > deadline) {
            *timed_out = true;
            return ncclInProgress;
        }
        dev_sleep(d, 1e-4);
    }
}

coll_comm *coll_comm_create(dev_device *d, const int *ranks, int nranks, int my_rank, const char *name, char *err,
                            size_t errlen) {
    name = name ? name : "?";
    if (!d || !ranks || nranks < 1) {
        tr_errf(err, errlen, "communicator '%s': needs a device and at least one rank", name);
        return NULL;
    }
    int pos = -1;
    for (int i = 0; i < nranks; i++) {
        if (i > 0 && ranks[i] <= ranks[i - 1]) {
            tr_errf(err, errlen, "communicator '%s': ranks must be ascending and distinct (rank %d after %d)", name,
                    ranks[i], ranks[i - 1]);
            return NULL;
        }
        if (ranks[i] == my_rank) pos = i;
    }
    if (pos < 0) {
        tr_errf(err, errlen, "communicator '%s': rank %d is not one of its %d ranks", name, my_rank, nranks);
        return NULL;
    }
    coll_comm *c = calloc(1, sizeof *c);
    if (c) {
        c->p2p_send = calloc((size_t)nranks, sizeof *c->p2p_send);
        c->p2p_recv = calloc((size_t)nranks, sizeof *c->p2p_recv);
    }
    if (!c || !c->p2p_send || !c->p2p_recv) {
        if (c) free(c->p2p_send), free(c->p2p_recv);
        free(c);
        tr_errf(err, errlen, "out of host memory creating communicator '%s'", name);
        return NULL;
    }
    c->dev = d;
    c->size = nranks;
    c->rank = pos;
    c->timeout_s = coll_timeout(d);
    c->sync = coll_sync();
    snprintf(c->name, sizeof c->name, "%s", name);
    CU_CHECK(cudaSetDevice(d->ordinal)); /* NCCL binds the communicator to the current device */

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (pos == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess)
        tr_errf(err, errlen, "communicator '%s': ncclGetUniqueId: %s", name, ncclGetErrorString(r));
    if (r != ncclSuccess ||
        tr_coll_exchange_id(d, name, ranks, nranks, pos, &id, sizeof id, c->timeout_s, err, errlen) != 0) {
        free(c->p2p_send), free(c->p2p_recv), free(c);
        return NULL;
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    r = ncclCommInitRankConfig(&c->comm, nranks, id, pos, &config);
    bool timed_out = false;
    if (r == ncclSuccess || r == ncclInProgress) r = wait_ready(d, c->comm, c->timeout_s, &timed_out);
    if (r != ncclSuccess) {
        if (timed_out)
            tr_errf(err, errlen,
                    "communicator '%s' (rank %d of %d): NCCL init did not finish within %.0f s "
                    "(--distributed-timeout-minutes); did every rank of the group start?",
                    name, pos, nranks, c->timeout_s);
        else
            tr_errf(err, errlen, "communicator '%s' (rank %d of %d): NCCL init failed: %s (%s)", name, pos, nranks,
                    ncclGetErrorString(r), ncclGetLastError(c->comm));
        if (c->comm) ncclCommAbort(c->comm);
        free(c->p2p_send), free(c->p2p_recv), free(c);
        return NULL;
    }
    tr_coll_exchange_done(d, name, ranks, nranks, pos); /* every member has joined */
    c->flight = tr_flight_comm(d, my_rank, &id, sizeof id, name, ranks, nranks, c);
    return c;
}

void coll_comm_destroy(coll_comm *c) {
    if (!c) return;
    tr_flight_comm_gone(c->dev, c);
    if (c->comm) {
        bool timed_out = false;
        ncclResult_t r = ncclCommFinalize(c->comm);
        if (r == ncclSuccess || r == ncclInProgress) r = wait_ready(c->dev, c->comm, c->timeout_s, &timed_out);
        if (r == ncclSuccess) ncclCommDestroy(c->comm);
        else ncclCommAbort(c->comm); /* a peer is gone: do not wait for it */
    }
    free(c->p2p_send);
    free(c->p2p_recv);
    free(c);
}

int coll_comm_size(const coll_comm *c) { return c->size; }
int coll_comm_rank(const coll_comm *c) { return c->rank; }
const char *coll_comm_name(const coll_comm *c) { return c->name; }

static void kill_comm(coll_comm *c, coll_status why) {
    if (c->comm) ncclCommAbort(c->comm);
    c->comm = NULL;
    if (c->dead == COLL_OK) c->dead = why;
}

/* The deadline passed: the watchdog ends the rank, or (TWINRUN_COLL_ON_TIMEOUT=return) the call
 * returns COLL_TIMEOUT with every communicator aborted. */
static coll_status timed_out(coll_comm *c, const char *op, const char *stage) {
    char what[256];
    snprintf(what, sizeof what, "%s #%llu on '%s' (rank %d of %d) %s within %.0f s", op, c->seq, c->name, c->rank,
             c->size, stage, c->timeout_s);
    kill_comm(c, COLL_TIMEOUT);
    tr_flight_watchdog(c->dev, what);
    return COLL_TIMEOUT;
}

/* Waits for the stream's work (this collective and everything before it) while watching the
 * communicator's async error, until the deadline. */
static coll_status wait_stream(coll_comm *c, dev_stream *s, const char *op) {
    cudaStream_t st = tr_cu_stream(s);
    const double deadline = dev_clock_now(c->dev) + c->timeout_s;
    for (;;) {
        const cudaError_t q = cudaStreamQuery(st);
        if (q == cudaSuccess) return COLL_OK;
        if (q != cudaErrorNotReady) CU_CHECK(q);
        if (!c->comm) return c->dead; /* aborted meanwhile */
        ncclResult_t ae = ncclSuccess;
        ncclCommGetAsyncError(c->comm, &ae);
        if (ae != ncclSuccess && ae != ncclInProgress) {
            fprintf(stderr, "twinrun: coll: %s #%llu on '%s' (rank %d of %d) failed: %s; aborting the communicator\n",
                    op, c->seq, c->name, c->rank, c->size, ncclGetErrorString(ae));
            kill_comm(c, COLL_ERROR);
            return COLL_ERROR;
        }
        if (dev_clock_now(c->dev) > deadline) return timed_out(c, op, "did not complete");
        dev_sleep(c->dev, 1e-5);
    }
}

/* After an NCCL call was issued: its result, the wait for a non-blocking enqueue, and (sync mode,
 * outside a group) the wait for completion; the record `rec` follows. */
static coll_status finish(coll_comm *c, dev_stream *s, ncclResult_t r, const char *op, uint64_t rec) {
    c->seq++;
    bool late = false;
    if (r == ncclInProgress) r = wait_ready(c->dev, c->comm, c->timeout_s, &late);
    if (late) return timed_out(c, op, "was not enqueued");
    if (r != ncclSuccess) {
        fprintf(stderr, "twinrun: coll: %s #%llu on '%s' (rank %d of %d): %s (%s); aborting the communicator\n", op,
                c->seq, c->name, c->rank, c->size, ncclGetErrorString(r), ncclGetLastError(c->comm));
        kill_comm(c, COLL_ERROR);
        return c->dead;
    }
    if (coll_group.depth > 0) {
        if (coll_group.n >= COLL_GROUP_MAX) tr_fatal("coll: more than %d calls in one coll_group", COLL_GROUP_MAX);
        coll_group.comm[coll_group.n] = c;
        coll_group.stream[coll_group.n] = s;
        coll_group.rec[coll_group.n] = rec;
        coll_group.n++;
        return COLL_OK;
    }
    /* a group of one cannot wait on anybody: no host wait for it, so a one-GPU step keeps the device busy */
    const coll_status st = c->sync && c->size > 1 ? wait_stream(c, s, op) : COLL_OK;
    if (st == COLL_OK) tr_flight_set(c->dev, rec, FLIGHT_COMPLETED);
    return st;
}

static ncclDataType_t nccl_type(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return ncclFloat32;
    case TR_BF16: return ncclBfloat16;
    case TR_I32: return ncclInt32;
    }
    tr_fatal("coll: element type %d has no NCCL type", (int)dt);
}

static ncclRedOp_t nccl_op(coll_op op) {
    switch (op) {
    case COLL_SUM: return ncclSum;
    case COLL_AVG: return ncclAvg;
    case COLL_MAX: return ncclMax;
    case COLL_MIN: return ncclMin;
    }
    tr_fatal("coll: unknown reduction %d", (int)op);
}

static void observe(coll_comm *c, const char *op) {
    if (!c->observer || c->in_observer) return;
    c->in_observer = true;
    c->observer(c->observer_arg, c, op);
    c->in_observer = false;
}

#define COLL_ENTER(c, op)                                                                                              \
    do {                                                                                                               \
        observe((c), (op));                                                                                            \
        if ((c)->dead != COLL_OK) return (c)->dead;                                                                    \
    } while (0)

void coll_comm_set_observer(coll_comm *c, coll_observer fn, void *arg) {
    TR_CHECK(c != NULL, "coll_comm_set_observer on a NULL communicator");
    c->observer = fn;
    c->observer_arg = arg;
}

/* Records the call the twin way (sequence per communicator; send/recv per peer and direction). */
static uint64_t record(coll_comm *c, flight_op op, size_t count, tr_dtype dt, int redop, int peer) {
    uint64_t seq = op == FLIGHT_SEND ? c->p2p_send[peer]++ : op == FLIGHT_RECV ? c->p2p_recv[peer]++ : c->cseq++;
    return tr_flight_rec(c->dev, c->flight, op, seq, count, (int)dt, redop, peer,
                         coll_group.depth > 0 ? FLIGHT_SCHEDULED : FLIGHT_STARTED);
}

/* Zero elements: nothing for NCCL to do, but recorded like any call. */
static coll_status empty(coll_comm *c, uint64_t rec) {
    tr_flight_set(c->dev, rec, FLIGHT_COMPLETED);
    return COLL_OK;
}

coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op) {
    COLL_ENTER(c, "all_reduce");
    const uint64_t rec = record(c, FLIGHT_ALL_REDUCE, count, dt, (int)op, -1);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), c->comm, tr_cu_stream(s)),
                  "all_reduce", rec);
}

coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    COLL_ENTER(c, "all_gather");
    const uint64_t rec = record(c, FLIGHT_ALL_GATHER, count, dt, -1, -1);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclAllGather(send, recv, count, nccl_type(dt), c->comm, tr_cu_stream(s)), "all_gather", rec);
}

coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                                coll_op op) {
    COLL_ENTER(c, "reduce_scatter");
    const uint64_t rec = record(c, FLIGHT_REDUCE_SCATTER, count, dt, (int)op, -1);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op), c->comm, tr_cu_stream(s)),
                  "reduce_scatter", rec);
}

coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root) {
    COLL_ENTER(c, "broadcast");
    TR_CHECK(root >= 0 && root < c->size, "broadcast root is not a rank of the group (roots are group positions)");
    const uint64_t rec = record(c, FLIGHT_BROADCAST, count, dt, -1, root);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclBroadcast(buf, buf, count, nccl_type(dt), root, c->comm, tr_cu_stream(s)), "broadcast",
                  rec);
}

coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "send");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_send on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a send to oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    const uint64_t rec = record(c, FLIGHT_SEND, count, dt, -1, peer);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclSend(buf, count, nccl_type(dt), peer, c->comm, tr_cu_stream(s)), "send", rec);
}

coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "recv");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_recv on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a receive from oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    const uint64_t rec = record(c, FLIGHT_RECV, count, dt, -1, peer);
    if (count == 0) return empty(c, rec);
    return finish(c, s, ncclRecv(buf, count, nccl_type(dt), peer, c->comm, tr_cu_stream(s)), "recv", rec);
}

coll_status coll_barrier(coll_comm *c, dev_stream *s) {
    COLL_ENTER(c, "barrier");
    const uint64_t rec = record(c, FLIGHT_BARRIER, 0, TR_F32, -1, -1);
    /* NCCL has no barrier: a one-element all-reduce, waited for even in async mode */
    int *one = tr_cu_scratch(s, sizeof *one, "barrier");
    CU_CHECK(cudaMemsetAsync(one, 0, sizeof *one, tr_cu_stream(s)));
    coll_status st =
        finish(c, s, ncclAllReduce(one, one, 1, ncclInt32, ncclSum, c->comm, tr_cu_stream(s)), "barrier", rec);
    if (st == COLL_OK && coll_group.depth == 0 && !c->sync) st = wait_stream(c, s, "barrier");
    tr_cu_scratch_free(s, one);
    return st;
}

void coll_group_start(void) {
    if (coll_group.depth++ == 0) coll_group.n = 0;
    const ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) tr_fatal("coll_group_start: ncclGroupStart: %s", ncclGetErrorString(r));
}

void coll_group_end(void) {
    TR_CHECK(coll_group.depth > 0, "coll_group_end without coll_group_start");
    ncclResult_t r = ncclGroupEnd();
    if (--coll_group.depth > 0) {
        if (r != ncclSuccess && r != ncclInProgress)
            tr_fatal("coll_group_end: ncclGroupEnd: %s", ncclGetErrorString(r));
        return;
    }
    /* Outermost end: let every communicator finish the launch, then (sync mode) wait for the work. */
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (c->dead != COLL_OK) continue;
        bool late = false;
        ncclResult_t cr = r;
        if (cr == ncclInProgress || cr == ncclSuccess) cr = wait_ready(c->dev, c->comm, c->timeout_s, &late);
        if (late) {
            (void)timed_out(c, "group", "was not launched");
        } else if (cr != ncclSuccess) {
            fprintf(stderr, "twinrun: coll: group on '%s' (rank %d of %d) failed: %s; aborting the communicator\n",
                    c->name, c->rank, c->size, ncclGetErrorString(cr));
            kill_comm(c, COLL_ERROR);
        } else {
            tr_flight_set(c->dev, coll_group.rec[i], FLIGHT_STARTED);
        }
    }
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (c->dead == COLL_OK &&
            (!c->sync || c->size == 1 || wait_stream(c, coll_group.stream[i], "group") == COLL_OK))
            tr_flight_set(c->dev, coll_group.rec[i], FLIGHT_COMPLETED);
    }
    coll_group.n = 0;
}

void coll_abort(coll_comm *c) {
    if (!c) return;
    if (c->comm) ncclCommAbort(c->comm);
    c->comm = NULL;
    c->dead = COLL_ABORTED;
}
