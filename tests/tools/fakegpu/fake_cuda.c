/* fakegpu's CUDA runtime (cuda_runtime.h): one thread per stream drains its queue in order. One mutex and
 * one condition variable for the whole fake device keep it simple: every completion broadcasts. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_runtime.h"

enum { OP_FN, OP_RECORD, OP_WAIT };

typedef struct op {
    int kind;
    void (*fn)(void *);
    void *arg;
    struct fake_event *ev;
    uint64_t gen; /* RECORD: the generation this record completes; WAIT: the one it waits for */
    struct op *next;
} op;

struct fake_stream {
    op *head, *tail;
    uint64_t enq, done;
    bool stop;
    pthread_t th;
};

struct fake_event {
    uint64_t gen, done_gen; /* records made, records passed */
    double t;               /* when the last record passed */
    bool timing;
    uint32_t magic;
};

#define EV_MAGIC 0xe7e7e7e7u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fail(const char *what) {
    fprintf(stderr, "fakegpu: misuse: %s\n", what);
    abort();
}

static void *worker(void *arg) {
    struct fake_stream *s = arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&cv, &mu);
        if (!s->head) break;
        op *o = s->head;
        if (o->kind == OP_WAIT) {
            while (o->ev->done_gen < o->gen) pthread_cond_wait(&cv, &mu);
        } else if (o->kind == OP_RECORD) {
            if (o->ev->done_gen < o->gen) o->ev->done_gen = o->gen;
            o->ev->t = now();
        } else {
            pthread_mutex_unlock(&mu);
            o->fn(o->arg);
            pthread_mutex_lock(&mu);
        }
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        s->done++;
        free(o);
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void push(struct fake_stream *s, op *o) { /* under mu */
    if (!s) fail("NULL stream (the legacy default stream is not used by cuda)");
    o->next = NULL;
    if (s->tail) s->tail->next = o;
    else s->head = o;
    s->tail = o;
    s->enq++;
    pthread_cond_broadcast(&cv);
}

static op *new_op(int kind) {
    op *o = calloc(1, sizeof *o);
    if (!o) fail("out of memory");
    o->kind = kind;
    return o;
}

void fake_enqueue(cudaStream_t s, void (*fn)(void *), void *arg) {
    op *o = new_op(OP_FN);
    o->fn = fn;
    o->arg = arg;
    pthread_mutex_lock(&mu);
    push(s, o);
    pthread_mutex_unlock(&mu);
}

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fakegpu error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags) {
    (void)flags;
    struct fake_stream *s = calloc(1, sizeof *s);
    if (!s) return cudaErrorMemoryAllocation;
    if (pthread_create(&s->th, NULL, worker, s) != 0) fail("pthread_create");
    *out = s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    pthread_mutex_lock(&mu);
    while (s->done < s->enq) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    pthread_mutex_lock(&mu);
    const bool idle = s->done == s->enq;
    pthread_mutex_unlock(&mu);
    return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) { /* CUDA: returns at once, the work still runs; here: drain */
    cudaStreamSynchronize(s);
    pthread_mutex_lock(&mu);
    s->stop = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(s->th, NULL);
    free(s);
    return cudaSuccess;
}

static cudaError_t event_new(cudaEvent_t *out, bool timing) {
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e) return cudaErrorMemoryAllocation;
    e->timing = timing;
    e->magic = EV_MAGIC;
    *out = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return event_new(e, true); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    return event_new(e, !(flags & cudaEventDisableTiming));
}

/* Destroying an event a stream still has to pass or wait for is legal in CUDA: it is released when done.
 * The fake keeps it (a small leak) and only marks it, so a later use of the handle is caught. */
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    pthread_mutex_lock(&mu);
    if (e->magic != EV_MAGIC) fail("cudaEventDestroy of a destroyed event");
    e->magic = 0;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    op *o = new_op(OP_RECORD);
    pthread_mutex_lock(&mu);
    if (e->magic != EV_MAGIC) fail("cudaEventRecord of a destroyed event");
    o->ev = e;
    o->gen = ++e->gen;
    push(s, o);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    op *o = new_op(OP_WAIT);
    pthread_mutex_lock(&mu);
    if (e->magic != EV_MAGIC) fail("cudaStreamWaitEvent on a destroyed event");
    o->ev = e;
    o->gen = e->gen; /* the most recent record at the time of the call, as CUDA */
    push(s, o);
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    pthread_mutex_lock(&mu);
    if (e->magic != EV_MAGIC) fail("cudaEventQuery of a destroyed event");
    const bool done = e->done_gen >= e->gen;
    pthread_mutex_unlock(&mu);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    pthread_mutex_lock(&mu);
    cudaError_t r = cudaSuccess;
    if (a->magic != EV_MAGIC || b->magic != EV_MAGIC) fail("cudaEventElapsedTime of a destroyed event");
    if (!a->timing || !b->timing || !a->gen || !b->gen) r = cudaErrorInvalidResourceHandle;
    else if (a->done_gen < a->gen || b->done_gen < b->gen) r = cudaErrorNotReady;
    else *ms = (float)((b->t - a->t) * 1e3);
    pthread_mutex_unlock(&mu);
    return r;
}

typedef struct {
    void *p;
    int v;
    size_t n;
} memset_arg;

static void do_memset(void *arg) {
    memset_arg *m = arg;
    memset(m->p, m->v, m->n);
    free(m);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    memset_arg *m = malloc(sizeof *m);
    if (!m) return cudaErrorMemoryAllocation;
    *m = (memset_arg){p, v, n};
    fake_enqueue(s, do_memset, m);
    return cudaSuccess;
}

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} memcpy_arg;

static void do_memcpy(void *arg) {
    memcpy_arg *m = arg;
    memmove(m->dst, m->src, m->n);
    free(m);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (kind != cudaMemcpyDeviceToDevice) return cudaErrorInvalidValue;
    if (n && (!dst || !src)) return cudaErrorInvalidValue;
    memcpy_arg *m = malloc(sizeof *m);
    if (!m) return cudaErrorMemoryAllocation;
    *m = (memcpy_arg){dst, src, n};
    fake_enqueue(s, do_memcpy, m);
    return cudaSuccess;
}
