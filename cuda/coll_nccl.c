/* coll.h over NCCL (MCCL on MUSA through gpu_compat.h).
 *
 * Communicators are non-blocking (config.blocking = 0), so a stuck init or collective can be
 * abandoned: every wait polls ncclCommGetAsyncError against the rank's timeout (coll_set_timeout:
 * --distributed-timeout-minutes; TWINRUN_COLL_TIMEOUT_S overrides; default 600 s). Past it the rank
 * ends: flight dump, ncclCommAbort of every communicator, exit 1 (or, with
 * TWINRUN_COLL_ON_TIMEOUT=return, the communicators are aborted and calls return COLL_TIMEOUT).
 * After coll_abort, every call returns COLL_ABORTED.
 *
 * Bootstrap: a group of one makes its own unique id; a larger group gets its rank 0's id through
 * the TCP rendezvous store on MASTER_ADDR:MASTER_PORT, or files in TWINRUN_RENDEZVOUS_DIR
 * (coll_bootstrap.h).
 *
 * Completion, two modes (TWINRUN_COLL_SYNC, read when a communicator is created):
 *   asynchronous (unset or 0, the default): each communicator runs its calls on a stream of its own,
 *     ordered against the caller's stream by events, and the host never waits (coll_watchdog.h: the
 *     events, the in-flight table, the watchdog thread that detects timeouts and NCCL errors, and why
 *     every engine call site stays correct: what the caller's stream runs after the call waits for it).
 *     The flight records go scheduled (enqueued) -> started -> completed with the events' GPU times.
 *     coll_barrier alone waits on the host (it is a barrier).
 *   synchronous (1): each call runs on the caller's stream and, for a group of two or more, the host
 *     waits until the stream has finished it, polling the communicator's error and the deadline on
 *     the calling thread (no watchdog thread): the twin's blocking semantics and exact flight-recorder
 *     states (started when issued, completed when waited for).
 *     Inside coll_group_start/end the wait happens at coll_group_end, for every stream used.
 *
 * Fault injection: TWINRUN_COLL_HANG=NAME:SEQ makes collective SEQ (the flight record's seq) of the
 * communicator named NAME hang on the GPU (coll_hang.h), in either mode (in synchronous mode that call is
 * waited for on the host even in a group of one), so the watchdog is testable on one GPU.
 *
 * Records: every call is recorded (coll_flight.h) with the twin's numbering, zero-count calls
 * included, so the two backends' traces of the same job are identical.
 *
 * Group ranks: peer (send/recv) and root (broadcast) are positions in the group (0..size-1). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPU_COMPAT_CCL
#include "coll_bootstrap.h"
#include "coll_comm.h"
#include "coll_flight.h"
#include "coll_hang.h"
#include "coll_watchdog.h"
#include "cuda_dev.h"
#include "gpu_compat.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

/* Streams (with their communicator and record) used between coll_group_start and coll_group_end,
 * waited on (synchronous mode) or ordered by end events (asynchronous mode: work) at the end. Per
 * thread, like NCCL's own group state. */
#define COLL_GROUP_MAX 256
static _Thread_local struct {
    int depth, n;
    coll_comm *comm[COLL_GROUP_MAX];
    dev_stream *stream[COLL_GROUP_MAX];
    uint64_t rec[COLL_GROUP_MAX];
    tr_cu_work *work[COLL_GROUP_MAX];
    tr_cu_watchdog *wd; /* asynchronous mode: the watchdog told that a group is open */
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

void tr_cu_ccl_version(char *out, size_t outlen) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    /* NCCL >= 2.9 encodes MAJOR*10000 + MINOR*100 + PATCH */
    snprintf(out, outlen, "%s %d.%d.%d", strcmp(TWINRUN_GPU_BACKEND, "musa") ? "NCCL" : "MCCL", v / 10000,
             v / 100 % 100, v % 100);
}

/* A real network is as fast as it is: a rehearsed slow link exists only in the twin's cost model. */
void coll_set_link_slowdown(dev_device *d, double factor) {
    (void)d;
    (void)factor;
}

/* TWINRUN_COLL_SYNC: 1 synchronous, unset/empty/0 asynchronous (the default). */
static bool coll_sync(void) {
    const char *v = getenv("TWINRUN_COLL_SYNC");
    if (!v || !*v || strcmp(v, "0") == 0) return false;
    if (strcmp(v, "1") == 0) return true;
    tr_fatal("TWINRUN_COLL_SYNC=%s: expected 0 (asynchronous collectives, the default) or 1 (each waited for)", v);
}

/* TWINRUN_COLL_HANG=NAME:SEQ: the collective seq to hang for the communicator `name`, else UINT64_MAX. */
static uint64_t hang_seq_for(const char *name) {
    const char *v = getenv("TWINRUN_COLL_HANG");
    if (!v || !*v) return UINT64_MAX;
    const char *colon = strrchr(v, ':');
    char *end = NULL;
    const unsigned long long seq = colon ? strtoull(colon + 1, &end, 10) : 0;
    if (!colon || colon == v || end == colon + 1 || *end)
        tr_fatal("TWINRUN_COLL_HANG=%s: expected NAME:SEQ, a communicator's name and a collective's sequence number "
                 "as in the flight dump (e.g. dp_cp:5)",
                 v);
    return (size_t)(colon - v) == strlen(name) && strncmp(v, name, (size_t)(colon - v)) == 0 ? (uint64_t)seq
                                                                                             : UINT64_MAX;
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
    c->hang_seq = hang_seq_for(name);
    snprintf(c->name, sizeof c->name, "%s", name);
    CU_CHECK(cudaSetDevice(d->ordinal)); /* NCCL binds the communicator to the current device */

    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (pos == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess)
        tr_errf(err, errlen, "communicator '%s': ncclGetUniqueId: %s", name, ncclGetErrorString(r));
    if (r != ncclSuccess ||
        tr_cu_exchange_id(d, name, ranks, nranks, pos, &id, sizeof id, c->timeout_s, err, errlen) != 0) {
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
    tr_cu_exchange_done(d, name, ranks, nranks, pos); /* every member has joined */
    c->flight = tr_cu_flight_comm(d, my_rank, &id, sizeof id, name, ranks, nranks, c);
    if (!c->sync) tr_cu_wd_attach(d, c); /* its stream and events; the watchdog thread starts with the first */
    return c;
}

void coll_comm_destroy(coll_comm *c) {
    if (!c) return;
    tr_cu_flight_comm_gone(c->dev, c);
    tr_cu_wd_detach(c); /* asynchronous mode: its calls finished, the watchdog no longer sees it */
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
    if (c->wd) { /* asynchronous mode: one end for the process, whichever thread sees it first */
        tr_cu_wd_fire(c->wd, what, c, COLL_TIMEOUT);
        return COLL_TIMEOUT;
    }
    kill_comm(c, COLL_TIMEOUT);
    tr_cu_flight_watchdog(c->dev, what);
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

/* Synchronous mode. After an NCCL call was issued: its result, the wait for a non-blocking enqueue,
 * and (outside a group) the wait for completion — for a group of two or more, or an injected hang;
 * the record `rec` follows. */
static coll_status finish(coll_comm *c, dev_stream *s, ncclResult_t r, const char *op, uint64_t rec, bool hang) {
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
    const coll_status st = c->size > 1 || hang ? wait_stream(c, s, op) : COLL_OK;
    if (st == COLL_OK) tr_cu_flight_set(c->dev, rec, FLIGHT_COMPLETED);
    return st;
}

static ncclDataType_t nccl_type(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return ncclFloat32;
    case TR_BF16: return ncclBfloat16;
    case TR_I32: return ncclInt32;
    case TR_U8: return ncclUint8;
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

/* Records the call the twin way (sequence per communicator; send/recv per peer and direction). Started
 * when issued in synchronous mode outside a group; else scheduled until it launches (its start event). */
static uint64_t record(coll_comm *c, flight_op op, size_t count, tr_dtype dt, int redop, int peer) {
    uint64_t seq = op == FLIGHT_SEND ? c->p2p_send[peer]++ : op == FLIGHT_RECV ? c->p2p_recv[peer]++ : c->cseq++;
    return tr_cu_flight_rec(c->dev, c->flight, op, seq, count, (int)dt, redop, peer,
                            coll_group.depth > 0 || !c->sync ? FLIGHT_SCHEDULED : FLIGHT_STARTED);
}

/* Zero elements: nothing for NCCL to do, but recorded like any call. */
static coll_status empty(coll_comm *c, uint64_t rec) {
    tr_cu_flight_set(c->dev, rec, FLIGHT_COMPLETED);
    return COLL_OK;
}

/* One NCCL call, whichever stream it goes on. */
typedef struct nccl_call {
    flight_op op;
    const void *send;
    void *recv;
    size_t count;
    tr_dtype dt;
    coll_op redop;
    int peer; /* root for broadcast */
} nccl_call;

static ncclResult_t issue(const nccl_call *a, ncclComm_t comm, cudaStream_t st) {
    const ncclDataType_t t = nccl_type(a->dt);
    switch (a->op) {
    case FLIGHT_ALL_REDUCE:
    case FLIGHT_BARRIER: return ncclAllReduce(a->send, a->recv, a->count, t, nccl_op(a->redop), comm, st);
    case FLIGHT_ALL_GATHER: return ncclAllGather(a->send, a->recv, a->count, t, comm, st);
    case FLIGHT_REDUCE_SCATTER: return ncclReduceScatter(a->send, a->recv, a->count, t, nccl_op(a->redop), comm, st);
    case FLIGHT_BROADCAST: return ncclBroadcast(a->recv, a->recv, a->count, t, a->peer, comm, st);
    case FLIGHT_SEND: return ncclSend(a->send, a->count, t, a->peer, comm, st);
    case FLIGHT_RECV: return ncclRecv(a->recv, a->count, t, a->peer, comm, st);
    case FLIGHT_OP_COUNT: break;
    }
    tr_fatal("coll: unknown operation %d", (int)a->op);
}

/* TWINRUN_COLL_HANG names this call (a collective, by its record's sequence number)? Says so. */
static bool hang_here(coll_comm *c, const nccl_call *a, const char *op) {
    if (a->op == FLIGHT_SEND || a->op == FLIGHT_RECV || c->hang_seq == UINT64_MAX || c->cseq - 1 != c->hang_seq)
        return false;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr,
            "twinrun: coll: TWINRUN_COLL_HANG: %s seq %llu on '%s' (rank %d of %d) hangs on the GPU from now "
            "(unix time %.3f; timeout %.0f s)\n",
            op, (unsigned long long)c->hang_seq, c->name, c->rank, c->size,
            (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, c->timeout_s);
    return true;
}

/* Asynchronous mode: waits until the non-blocking communicator has enqueued (taking the lock per poll,
 * so the watchdog may abort it meanwhile: then *dead). */
static ncclResult_t wait_enqueued(coll_comm *c, bool *late, bool *dead) {
    const double deadline = dev_clock_now(c->dev) + c->timeout_s;
    for (;;) {
        if (!tr_cu_wd_lock(c)) {
            *dead = true;
            return ncclInProgress;
        }
        ncclResult_t r = ncclInProgress;
        const ncclResult_t q = ncclCommGetAsyncError(c->comm, &r);
        tr_cu_wd_unlock(c);
        if (q != ncclSuccess) return q;
        if (r != ncclInProgress) return r;
        if (dev_clock_now(c->dev) > deadline) {
            *late = true;
            return ncclInProgress;
        }
        dev_sleep(c->dev, 1e-4);
    }
}

/* Asynchronous mode: an NCCL call failed (or never got enqueued): message, abort the communicator. */
static coll_status async_failed(coll_comm *c, const char *op, ncclResult_t r, bool late, bool dead) {
    if (dead) return c->dead;
    if (late) return timed_out(c, op, "was not enqueued");
    tr_cu_wd_lock_any(c->wd);
    fprintf(stderr, "twinrun: coll: %s #%llu on '%s' (rank %d of %d): %s (%s); aborting the communicator\n", op, c->seq,
            c->name, c->rank, c->size, ncclGetErrorString(r), c->comm ? ncclGetLastError(c->comm) : "");
    tr_cu_wd_abort_comm(c, COLL_ERROR);
    tr_cu_wd_unlock_any(c->wd);
    return c->dead;
}

/* Asynchronous mode: the call on c's own stream between its events (coll_watchdog.h). */
static coll_status run_async(coll_comm *c, dev_stream *s, const nccl_call *a, const char *op, uint64_t rec) {
    const bool hang = hang_here(c, a, op);
    if (!tr_cu_wd_lock(c)) {
        tr_cu_flight_set(c->dev, rec, FLIGHT_ABORTED);
        return c->dead;
    }
    const uint64_t fseq = a->op == FLIGHT_SEND   ? c->p2p_send[a->peer] - 1
                          : a->op == FLIGHT_RECV ? c->p2p_recv[a->peer] - 1
                                                 : c->cseq - 1; /* the record's, as blame names it */
    tr_cu_work *k = tr_cu_wd_begin(c, s, rec, fseq, op, hang);
    ncclResult_t r = issue(a, c->comm, c->cs);
    const bool grouped = coll_group.depth > 0;
    if (grouped) {
        if (coll_group.n >= COLL_GROUP_MAX) tr_fatal("coll: more than %d calls in one coll_group", COLL_GROUP_MAX);
        if (!coll_group.wd) tr_cu_wd_group_open(coll_group.wd = c->wd, true);
        coll_group.comm[coll_group.n] = c;
        coll_group.stream[coll_group.n] = s;
        coll_group.rec[coll_group.n] = rec;
        coll_group.work[coll_group.n] = k;
        coll_group.n++;
    }
    tr_cu_wd_unlock(c);
    c->seq++;
    bool late = false, dead = false;
    if (r == ncclInProgress && !grouped) r = wait_enqueued(c, &late, &dead);
    coll_status st = COLL_OK;
    if (r != ncclSuccess && !(grouped && r == ncclInProgress)) st = async_failed(c, op, r, late, dead);
    if (!grouped) { /* the end mark and the caller's wait, failed or not (the work leaves the table) */
        tr_cu_wd_lock_any(c->wd);
        tr_cu_wd_end(k, s);
        tr_cu_wd_unlock_any(c->wd);
    }
    return st;
}

/* A communicator of one rank (every group of a one-GPU job): a collective's result is its input, so
 * it is a device copy on the caller's stream, or nothing when in place — no NCCL launch, no events
 * between the streams, nothing for the watchdog (on one GPU the tiny model's step was 45% slower with
 * them). Send and receive, and a call TWINRUN_COLL_HANG names, still go to NCCL. */
static bool solo(const coll_comm *c, const nccl_call *a) {
    return c->size == 1 && a->op != FLIGHT_SEND && a->op != FLIGHT_RECV &&
           !(c->hang_seq != UINT64_MAX && c->cseq - 1 == c->hang_seq);
}

static coll_status run_solo(coll_comm *c, dev_stream *s, const nccl_call *a, uint64_t rec) {
    /* a barrier's buffer carries nothing; a broadcast is in place */
    if (a->op != FLIGHT_BARRIER && a->op != FLIGHT_BROADCAST && a->send != a->recv)
        CU_CHECK(cudaMemcpyAsync(a->recv, a->send, a->count * tr_dtype_size(a->dt), cudaMemcpyDeviceToDevice,
                                 tr_cu_stream(s)));
    c->seq++;
    tr_cu_flight_set(c->dev, rec, FLIGHT_COMPLETED);
    return COLL_OK;
}

/* Issues the call in the communicator's mode. */
static coll_status run(coll_comm *c, dev_stream *s, const nccl_call *a, const char *op, uint64_t rec) {
    if (solo(c, a)) return run_solo(c, s, a, rec);
    if (!c->sync) return run_async(c, s, a, op, rec);
    const bool hang = hang_here(c, a, op);
    if (hang) tr_cu_hang_enqueue(tr_cu_stream(s));
    return finish(c, s, issue(a, c->comm, tr_cu_stream(s)), op, rec, hang);
}

coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op) {
    COLL_ENTER(c, "all_reduce");
    const uint64_t rec = record(c, FLIGHT_ALL_REDUCE, count, dt, (int)op, -1);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_ALL_REDUCE, send, recv, count, dt, op, -1};
    return run(c, s, &a, "all_reduce", rec);
}

coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    COLL_ENTER(c, "all_gather");
    const uint64_t rec = record(c, FLIGHT_ALL_GATHER, count, dt, -1, -1);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_ALL_GATHER, send, recv, count, dt, COLL_SUM, -1};
    return run(c, s, &a, "all_gather", rec);
}

coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                                coll_op op) {
    COLL_ENTER(c, "reduce_scatter");
    const uint64_t rec = record(c, FLIGHT_REDUCE_SCATTER, count, dt, (int)op, -1);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_REDUCE_SCATTER, send, recv, count, dt, op, -1};
    return run(c, s, &a, "reduce_scatter", rec);
}

coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root) {
    COLL_ENTER(c, "broadcast");
    TR_CHECK(root >= 0 && root < c->size, "broadcast root is not a rank of the group (roots are group positions)");
    const uint64_t rec = record(c, FLIGHT_BROADCAST, count, dt, -1, root);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_BROADCAST, buf, buf, count, dt, COLL_SUM, root};
    return run(c, s, &a, "broadcast", rec);
}

coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "send");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_send on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a send to oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    const uint64_t rec = record(c, FLIGHT_SEND, count, dt, -1, peer);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_SEND, buf, NULL, count, dt, COLL_SUM, peer};
    return run(c, s, &a, "send", rec);
}

coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "recv");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_recv on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a receive from oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    const uint64_t rec = record(c, FLIGHT_RECV, count, dt, -1, peer);
    if (count == 0) return empty(c, rec);
    const nccl_call a = {FLIGHT_RECV, NULL, buf, count, dt, COLL_SUM, peer};
    return run(c, s, &a, "recv", rec);
}

coll_status coll_barrier(coll_comm *c, dev_stream *s) {
    COLL_ENTER(c, "barrier");
    const uint64_t rec = record(c, FLIGHT_BARRIER, 0, TR_F32, -1, -1);
    /* NCCL has no barrier: a one-element all-reduce, waited for on the host in either mode */
    int *one = tr_cu_scratch(s, sizeof *one, "barrier");
    CU_CHECK(cudaMemsetAsync(one, 0, sizeof *one, tr_cu_stream(s)));
    const nccl_call a = {FLIGHT_BARRIER, one, one, 1, TR_I32, COLL_SUM, -1};
    coll_status st = run(c, s, &a, "barrier", rec);
    if (st == COLL_OK && coll_group.depth == 0 && !c->sync) {
        /* the caller's stream waits for the barrier's end: wait for the stream (a hang is the watchdog's) */
        const cudaError_t e = cudaStreamSynchronize(tr_cu_stream(s));
        if (c->dead != COLL_OK) st = c->dead; /* aborted by the watchdog (TWINRUN_COLL_ON_TIMEOUT=return) */
        else CU_CHECK(e);
    }
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
    /* asynchronous mode: the launch holds the lock, so the watchdog never aborts a communicator under it */
    tr_cu_watchdog *w = coll_group.wd;
    if (w) tr_cu_wd_lock_any(w);
    ncclResult_t r = ncclGroupEnd();
    if (w) tr_cu_wd_unlock_any(w);
    if (--coll_group.depth > 0) {
        if (r != ncclSuccess && r != ncclInProgress)
            tr_fatal("coll_group_end: ncclGroupEnd: %s", ncclGetErrorString(r));
        return;
    }
    /* Outermost end: let every communicator finish the launch, then (sync mode) wait for the work, or
     * (async mode) mark its end and order the caller's stream after it. */
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (!c->sync) {
            bool late = false, dead = c->dead != COLL_OK;
            ncclResult_t cr = r;
            if (!dead && (cr == ncclInProgress || cr == ncclSuccess)) cr = wait_enqueued(c, &late, &dead);
            if (cr != ncclSuccess || late || dead) (void)async_failed(c, "group", cr, late, dead);
            tr_cu_wd_lock_any(c->wd);
            tr_cu_wd_end(coll_group.work[i], coll_group.stream[i]);
            tr_cu_wd_unlock_any(c->wd);
            continue;
        }
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
            tr_cu_flight_set(c->dev, coll_group.rec[i], FLIGHT_STARTED);
        }
    }
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (c->sync && c->dead == COLL_OK && (c->size == 1 || wait_stream(c, coll_group.stream[i], "group") == COLL_OK))
            tr_cu_flight_set(c->dev, coll_group.rec[i], FLIGHT_COMPLETED);
    }
    if (w) {
        tr_cu_wd_lock_any(w);
        tr_cu_wd_group_open(w, false);
        tr_cu_wd_unlock_any(w);
        coll_group.wd = NULL;
    }
    coll_group.n = 0;
}

void coll_abort(coll_comm *c) {
    if (!c) return;
    if (c->wd) { /* asynchronous mode: under the lock, like the watchdog's aborts */
        tr_cu_wd_lock_any(c->wd);
        tr_cu_wd_abort_comm(c, COLL_ABORTED);
        c->dead = COLL_ABORTED;
        tr_cu_wd_unlock_any(c->wd);
        return;
    }
    if (c->comm) ncclCommAbort(c->comm);
    c->comm = NULL;
    c->dead = COLL_ABORTED;
}
