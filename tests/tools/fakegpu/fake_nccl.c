/* fakegpu's NCCL (nccl.h). A communicator of one rank copies (every reduction of one operand is a copy);
 * one of more ranks has no peers here, so its calls spin on the stream until ncclCommAbort (a peer that
 * never arrives, and what abort does to NCCL's kernels). Like non-blocking communicators, every third
 * call outside a group and every group end return ncclInProgress with the work NOT yet on the stream:
 * it is enqueued at the communicator's next ncclCommGetAsyncError, so a caller that records its end event
 * before waiting for the enqueue is caught (its event passes before the copy). A call on an aborted or
 * destroyed communicator is a misuse: the fake aborts the process with a message. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

#define COMM_MAGIC 0xc0331u

typedef struct call {
    cudaStream_t st;
    int kind; /* 0 copy, 1 send (its recv copies), 2 recv, 3 spin until aborted */
    const void *src;
    void *dst;
    size_t bytes;
    struct fake_comm *c;
    struct call *next;
} call;

struct fake_comm {
    _Atomic uint32_t magic;
    int n, rank;
    atomic_bool aborted;
    call *pending; /* enqueued at the next ncclCommGetAsyncError */
    int init_polls;
    unsigned ncalls;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* pending lists */
static _Thread_local int group_depth;
static _Thread_local call *group_head, *group_tail;

static void fail(const char *what) {
    fprintf(stderr, "fakegpu: NCCL misuse: %s\n", what);
    abort();
}

static void live(ncclComm_t c, const char *fn) {
    if (!c || atomic_load(&c->magic) != COMM_MAGIC) {
        fprintf(stderr, "fakegpu: NCCL misuse: %s on an aborted or destroyed communicator\n", fn);
        abort();
    }
}

static size_t esize(ncclDataType_t t) { return t == ncclUint8 ? 1 : t == ncclBfloat16 ? 2 : 4; }

static void run_call(void *arg) {
    call *k = arg;
    if (k->kind == 3) {
        while (!atomic_load(&k->c->aborted)) usleep(200);
    } else {
        usleep(20); /* some duration, for the flight record's times */
        if (k->kind != 1 && k->bytes) memmove(k->dst, k->src, k->bytes);
    }
    free(k);
}

static void enqueue(call *k) { fake_enqueue(k->st, run_call, k); }

/* Enqueues a group's calls: each recv takes the data of the first unmatched send on its communicator. */
static void flush_list(call *head) {
    for (call *k = head; k; k = k->next)
        if (k->kind == 2 && k->c->n == 1) {
            for (call *s = head; s; s = s->next)
                if (s->kind == 1 && s->c == k->c && s->bytes == k->bytes && s->dst == NULL) {
                    k->src = s->src;
                    s->dst = (void *)1; /* matched */
                    break;
                }
        }
    for (call *k = head, *next; k; k = next) {
        next = k->next;
        if (k->kind == 2 && k->c->n == 1 && !k->src) fail("a recv from oneself without its send in the group");
        enqueue(k);
    }
}

static ncclResult_t submit(ncclComm_t c, call *k, const char *fn) {
    live(c, fn);
    k->c = c;
    if (c->n > 1) k->kind = 3;
    if (group_depth > 0) {
        k->next = NULL;
        if (group_tail) group_tail->next = k;
        else group_head = k;
        group_tail = k;
        return ncclSuccess;
    }
    if (++c->ncalls % 3 == 0) { /* not enqueued yet: the caller must wait for ncclCommGetAsyncError */
        pthread_mutex_lock(&mu);
        k->next = c->pending;
        c->pending = k;
        pthread_mutex_unlock(&mu);
        return ncclInProgress;
    }
    k->next = NULL;
    enqueue(k);
    return ncclSuccess;
}

static call *new_call(cudaStream_t st, int kind, const void *src, void *dst, size_t bytes) {
    call *k = calloc(1, sizeof *k);
    if (!k) fail("out of memory");
    *k = (call){.st = st, .kind = kind, .src = src, .dst = dst, .bytes = bytes};
    return k;
}

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "fake NCCL error"; }
const char *ncclGetLastError(ncclComm_t c) {
    (void)c;
    return "";
}

/* the doctor's versions line: a fake says so with a version no NCCL has */
ncclResult_t ncclGetVersion(int *version) {
    *version = 0;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static atomic_uint next;
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-%d-%u", (int)getpid(), atomic_fetch_add(&next, 1));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int n, ncclUniqueId id, int rank, ncclConfig_t *cfg) {
    (void)id;
    struct fake_comm *c = calloc(1, sizeof *c);
    if (!c) return ncclUnhandledCudaError;
    atomic_store(&c->magic, COMM_MAGIC);
    c->n = n;
    c->rank = rank;
    c->init_polls = cfg && cfg->blocking == 0 ? 2 : 0;
    *out = c;
    return c->init_polls ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) {
    live(c, "ncclCommGetAsyncError");
    pthread_mutex_lock(&mu);
    if (c->init_polls > 0) {
        c->init_polls--;
        pthread_mutex_unlock(&mu);
        *r = ncclInProgress;
        return ncclSuccess;
    }
    call *p = c->pending;
    c->pending = NULL;
    pthread_mutex_unlock(&mu);
    /* oldest first */
    call *rev = NULL;
    while (p) {
        call *next = p->next;
        p->next = rev;
        rev = p;
        p = next;
    }
    if (rev) flush_list(rev);
    *r = ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
    live(c, "ncclCommFinalize");
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    live(c, "ncclCommDestroy");
    atomic_store(&c->magic, 0); /* kept, not freed: a later use is reported, spinning calls still read it */
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
    live(c, "ncclCommAbort");
    atomic_store(&c->aborted, true);
    atomic_store(&c->magic, 0);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st) {
    (void)op;
    return submit(c, new_call(st, 0, s, r, n * esize(t)), "ncclAllReduce");
}

ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st) {
    return submit(c, new_call(st, 0, s, r, n * esize(t)), "ncclAllGather");
}

ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st) {
    (void)op;
    return submit(c, new_call(st, 0, s, r, n * esize(t)), "ncclReduceScatter");
}

ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st) {
    (void)root;
    return submit(c, new_call(st, 0, s, r, n * esize(t)), "ncclBroadcast");
}

ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    (void)peer;
    if (group_depth == 0 && c->n == 1) fail("ncclSend to oneself outside a group");
    return submit(c, new_call(st, 1, s, NULL, n * esize(t)), "ncclSend");
}

ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
    (void)peer;
    return submit(c, new_call(st, 2, NULL, r, n * esize(t)), "ncclRecv");
}

ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}

/* The outermost end hands each call to its communicator's pending list: launched at the next poll. */
ncclResult_t ncclGroupEnd(void) {
    if (group_depth <= 0) fail("ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0) return ncclSuccess;
    call *head = group_head;
    group_head = group_tail = NULL;
    if (!head) return ncclSuccess;
    for (call *k = head; k; k = k->next) live(k->c, "ncclGroupEnd");
    /* the whole group goes to the first call's communicator: one flush keeps send/recv pairs together */
    ncclComm_t c0 = head->c;
    pthread_mutex_lock(&mu);
    /* pending is newest first; put the group reversed in front so the flush's reversal restores it */
    call *rev = NULL;
    for (call *k = head, *next; k; k = next) next = k->next, k->next = rev, rev = k;
    call *tail = rev;
    while (tail->next) tail = tail->next;
    tail->next = c0->pending;
    c0->pending = rev;
    pthread_mutex_unlock(&mu);
    return ncclInProgress;
}
