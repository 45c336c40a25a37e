/* coll.h over NCCL (MCCL on MUSA through gpu_compat.h).
 *
 * Communicators are non-blocking (config.blocking = 0), so a stuck init or collective can be
 * abandoned: every wait polls ncclCommGetAsyncError (and the stream) against a deadline of
 * TWINRUN_COLL_TIMEOUT_S seconds (default 600); past it the communicator is aborted
 * (ncclCommAbort) and the call returns COLL_TIMEOUT; an asynchronous NCCL error aborts it and
 * returns COLL_ERROR. After coll_abort, every call returns COLL_ABORTED.
 *
 * Bootstrap: a group of one makes its own unique id. A larger group needs the id of its rank 0
 * passed out of band: a file rendezvous in TWINRUN_RENDEZVOUS_DIR (same host, or a shared file
 * system) under the key <run id>.<group name>.<hash of the rank list>.<generation>, where the run
 * id is TWINRUN_RUN_ID, else TORCHELASTIC_RUN_ID, else MASTER_PORT, else "default".
 *
 * Completion: by default (TWINRUN_COLL_SYNC unset or 1) each collective waits on the host until
 * its stream has finished it, which is what makes the timeout, the twin's blocking semantics and
 * a real barrier possible; TWINRUN_COLL_SYNC=0 only enqueues (faster, no timeout detection).
 * Inside coll_group_start/end the wait happens at coll_group_end, for every stream used in the
 * group; a timeout there aborts the communicators involved and their next call returns COLL_TIMEOUT.
 *
 * Group ranks: peer (send/recv) and root (broadcast) are positions in the group (0..size-1).
 *
 * UNTESTED so far: everything with more than one rank (rendezvous, send/recv, reduce-scatter
 * with real data movement), timeouts and aborts on a stuck peer, and the whole MCCL build. The
 * single-rank path is exercised by the GPU unit tests where they create communicators. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU_COMPAT_CCL
#include "coll_rendezvous.h"
#include "cuda_dev.h"
#include "gpu_compat.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

struct coll_comm {
    dev_device *dev;
    ncclComm_t comm; /* NULL once aborted */
    int size, rank;
    coll_status dead; /* COLL_OK while usable; else what every later call returns */
    unsigned long long seq; /* collectives issued, for messages */
    double timeout_s;
    bool sync;
    char name[32];
    coll_observer observer; /* fault injection (fault/); not called while it runs */
    void *observer_arg;
    bool in_observer;
};

/* Streams (with their communicator) used between coll_group_start and coll_group_end, waited on at
 * the end. Per thread, like NCCL's own group state. */
#define COLL_GROUP_MAX 256
static _Thread_local struct {
    int depth, n;
    coll_comm *comm[COLL_GROUP_MAX];
    dev_stream *stream[COLL_GROUP_MAX];
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

static const char *run_id(void) {
    static const char *const names[] = {"TWINRUN_RUN_ID", "TORCHELASTIC_RUN_ID", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return v;
    }
    return "default";
}

/* FNV-1a over the group's name and rank list. */
static unsigned long long group_key(const char *name, const int *ranks, int nranks) {
    unsigned long long h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    for (int i = 0; i < nranks; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((unsigned)ranks[i] >> (8 * b)) & 0xffu)) * 1099511628211ULL;
    return h;
}

static unsigned next_generation(dev_device *d, unsigned long long key) {
    for (int i = 0; i < d->coll_ngen; i++)
        if (d->coll_gen[i].key == key) return ++d->coll_gen[i].gen;
    if (d->coll_ngen < (int)(sizeof d->coll_gen / sizeof d->coll_gen[0])) {
        d->coll_gen[d->coll_ngen].key = key;
        d->coll_gen[d->coll_ngen].gen = 0;
        d->coll_ngen++;
    }
    return 0;
}

/* Keeps [A-Za-z0-9_-] of s (for a file name). */
static void sanitize(char *dst, size_t n, const char *s) {
    size_t j = 0;
    for (; *s && j + 1 < n; s++) {
        const char c = *s;
        dst[j++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') ? c : '_';
    }
    dst[j] = '\0';
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
    if (!c) {
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
    char key[256] = "";
    const char *dir = getenv("TWINRUN_RENDEZVOUS_DIR");
    if (nranks > 1) {
        if (!dir || !*dir) {
            tr_errf(err, errlen,
                    "communicator '%s' over %d ranks needs TWINRUN_RENDEZVOUS_DIR: a directory all its processes "
                    "share (e.g. mkdir /tmp/twinrun-rdv; export TWINRUN_RENDEZVOUS_DIR=/tmp/twinrun-rdv)",
                    name, nranks);
            free(c);
            return NULL;
        }
        const unsigned long long gk = group_key(name, ranks, nranks);
        char rid[64], nm[32];
        sanitize(rid, sizeof rid, run_id());
        sanitize(nm, sizeof nm, name);
        snprintf(key, sizeof key, "twinrun-nccl.%s.%s.r%d.%016llx.g%u", rid, nm, ranks[0], gk,
                 next_generation(d, gk));
    }
    ncclResult_t r = ncclSuccess;
    if (pos == 0) {
        r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            tr_errf(err, errlen, "communicator '%s': ncclGetUniqueId: %s", name, ncclGetErrorString(r));
            free(c);
            return NULL;
        }
        if (nranks > 1 && tr_rdv_publish(dir, key, &id, sizeof id, err, errlen) != 0) {
            free(c);
            return NULL;
        }
    } else if (tr_rdv_fetch(d, dir, key, &id, sizeof id, c->timeout_s, err, errlen) != 0) {
        free(c);
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
                    "(TWINRUN_COLL_TIMEOUT_S); did every rank of the group start?",
                    name, pos, nranks, c->timeout_s);
        else
            tr_errf(err, errlen, "communicator '%s' (rank %d of %d): NCCL init failed: %s (%s)", name, pos, nranks,
                    ncclGetErrorString(r), ncclGetLastError(c->comm));
        if (c->comm) ncclCommAbort(c->comm);
        free(c);
        return NULL;
    }
    if (nranks > 1 && pos == 0) tr_rdv_remove(dir, key); /* every member has joined */
    return c;
}

void coll_comm_destroy(coll_comm *c) {
    if (!c) return;
    if (c->comm) {
        bool timed_out = false;
        ncclResult_t r = ncclCommFinalize(c->comm);
        if (r == ncclSuccess || r == ncclInProgress) r = wait_ready(c->dev, c->comm, c->timeout_s, &timed_out);
        if (r == ncclSuccess)
            ncclCommDestroy(c->comm);
        else
            ncclCommAbort(c->comm); /* a peer is gone: do not wait for it */
    }
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

/* Waits for the stream's work (this collective and everything before it) while watching the
 * communicator's async error, until the deadline. */
static coll_status wait_stream(coll_comm *c, dev_stream *s, const char *op) {
    cudaStream_t st = tr_cu_stream(s);
    const double deadline = dev_clock_now(c->dev) + c->timeout_s;
    for (;;) {
        const cudaError_t q = cudaStreamQuery(st);
        if (q == cudaSuccess) return COLL_OK;
        if (q != cudaErrorNotReady) CU_CHECK(q);
        ncclResult_t ae = ncclSuccess;
        ncclCommGetAsyncError(c->comm, &ae);
        if (ae != ncclSuccess && ae != ncclInProgress) {
            fprintf(stderr, "twinrun: coll: %s #%llu on '%s' (rank %d of %d) failed: %s; aborting the communicator\n",
                    op, c->seq, c->name, c->rank, c->size, ncclGetErrorString(ae));
            kill_comm(c, COLL_ERROR);
            return COLL_ERROR;
        }
        if (dev_clock_now(c->dev) > deadline) {
            fprintf(stderr,
                    "twinrun: coll: %s #%llu on '%s' (rank %d of %d) did not complete within %.0f s "
                    "(TWINRUN_COLL_TIMEOUT_S); aborting the communicator\n",
                    op, c->seq, c->name, c->rank, c->size, c->timeout_s);
            kill_comm(c, COLL_TIMEOUT);
            return COLL_TIMEOUT;
        }
        dev_sleep(c->dev, 1e-5);
    }
}

/* After an NCCL call was issued: its result, the wait for a non-blocking enqueue, and (sync mode,
 * outside a group) the wait for completion. */
static coll_status finish(coll_comm *c, dev_stream *s, ncclResult_t r, const char *op) {
    c->seq++;
    bool timed_out = false;
    if (r == ncclInProgress) r = wait_ready(c->dev, c->comm, c->timeout_s, &timed_out);
    if (r != ncclSuccess) {
        fprintf(stderr, "twinrun: coll: %s #%llu on '%s' (rank %d of %d): %s (%s); aborting the communicator\n", op,
                c->seq, c->name, c->rank, c->size, timed_out ? "enqueue timed out" : ncclGetErrorString(r),
                timed_out ? "TWINRUN_COLL_TIMEOUT_S" : ncclGetLastError(c->comm));
        kill_comm(c, timed_out ? COLL_TIMEOUT : COLL_ERROR);
        return c->dead;
    }
    if (coll_group.depth > 0) {
        if (coll_group.n >= COLL_GROUP_MAX) tr_fatal("coll: more than %d calls in one coll_group", COLL_GROUP_MAX);
        coll_group.comm[coll_group.n] = c;
        coll_group.stream[coll_group.n] = s;
        coll_group.n++;
        return COLL_OK;
    }
    return c->sync ? wait_stream(c, s, op) : COLL_OK;
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

#define COLL_ENTER(c, op)                                                                                     \
    do {                                                                                                      \
        observe((c), (op));                                                                                   \
        if ((c)->dead != COLL_OK) return (c)->dead;                                                           \
    } while (0)

void coll_comm_set_observer(coll_comm *c, coll_observer fn, void *arg) {
    TR_CHECK(c != NULL, "coll_comm_set_observer on a NULL communicator");
    c->observer = fn;
    c->observer_arg = arg;
}

coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op) {
    COLL_ENTER(c, "all_reduce");
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), c->comm, tr_cu_stream(s)),
                  "all_reduce");
}

coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    COLL_ENTER(c, "all_gather");
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclAllGather(send, recv, count, nccl_type(dt), c->comm, tr_cu_stream(s)), "all_gather");
}

coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count,
                                tr_dtype dt, coll_op op) {
    COLL_ENTER(c, "reduce_scatter");
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op), c->comm, tr_cu_stream(s)),
                  "reduce_scatter");
}

coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root) {
    COLL_ENTER(c, "broadcast");
    TR_CHECK(root >= 0 && root < c->size, "broadcast root is not a rank of the group (roots are group positions)");
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclBroadcast(buf, buf, count, nccl_type(dt), root, c->comm, tr_cu_stream(s)), "broadcast");
}

coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "send");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_send on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a send to oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclSend(buf, count, nccl_type(dt), peer, c->comm, tr_cu_stream(s)), "send");
}

coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer) {
    COLL_ENTER(c, "recv");
    if (peer < 0 || peer >= c->size || (peer == c->rank && coll_group.depth == 0))
        tr_fatal("coll_recv on '%s': peer %d is not another rank of the group of %d (peers are group positions; "
                 "a receive from oneself needs coll_group_start/end around the send and the recv)",
                 c->name, peer, c->size);
    if (count == 0) return COLL_OK;
    return finish(c, s, ncclRecv(buf, count, nccl_type(dt), peer, c->comm, tr_cu_stream(s)), "recv");
}

coll_status coll_barrier(coll_comm *c, dev_stream *s) {
    COLL_ENTER(c, "barrier");
    int32_t *one = tr_cu_scratch(s, sizeof *one, "barrier");
    CU_CHECK(cudaMemsetAsync(one, 0, sizeof *one, tr_cu_stream(s)));
    coll_status st = finish(c, s, ncclAllReduce(one, one, 1, ncclInt32, ncclSum, c->comm, tr_cu_stream(s)), "barrier");
    if (st == COLL_OK && coll_group.depth == 0 && !c->sync) st = wait_stream(c, s, "barrier"); /* always blocks */
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
        if (r != ncclSuccess && r != ncclInProgress) tr_fatal("coll_group_end: ncclGroupEnd: %s", ncclGetErrorString(r));
        return;
    }
    /* Outermost end: let every communicator finish the launch, then (sync mode) wait for the work. */
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (c->dead != COLL_OK) continue;
        bool timed_out = false;
        ncclResult_t cr = r;
        if (cr == ncclInProgress || cr == ncclSuccess) cr = wait_ready(c->dev, c->comm, c->timeout_s, &timed_out);
        if (cr != ncclSuccess) {
            fprintf(stderr, "twinrun: coll: group on '%s' (rank %d of %d) failed: %s; aborting the communicator\n",
                    c->name, c->rank, c->size, timed_out ? "launch timed out" : ncclGetErrorString(cr));
            kill_comm(c, timed_out ? COLL_TIMEOUT : COLL_ERROR);
        }
    }
    for (int i = 0; i < coll_group.n; i++) {
        coll_comm *c = coll_group.comm[i];
        if (c->dead == COLL_OK && c->sync) (void)wait_stream(c, coll_group.stream[i], "group");
    }
    coll_group.n = 0;
}

void coll_abort(coll_comm *c) {
    if (!c) return;
    if (c->comm) ncclCommAbort(c->comm);
    c->comm = NULL;
    c->dead = COLL_ABORTED;
}
