/* coll_watchdog.h: the asynchronous collectives' in-flight table, their events, and the watchdog thread.
 *
 * Why a thread: with no host wait per collective, nothing on the main thread is left to notice that a
 * collective never finishes — the main thread may sit in a copy's cudaStreamSynchronize behind it, for
 * ever. The thread only queries events and NCCL's error state and never enqueues on a stream the main
 * thread uses (its own anchor events go on a stream of its own), so it never serialises the GPU work.
 *
 * Times from events: an event's GPU time is only known relative to another event (cudaEventElapsedTime).
 * An "anchor" is an event recorded on the watchdog's empty stream and seen complete by the host within a
 * short host-time window (its middle is the anchor's host time, to a few microseconds); then an event's
 * host time is anchor.t + elapsed(anchor, event). A work takes the anchor current when it is enqueued
 * (that anchor already passed on the GPU, so the elapsed time is never negative); a new anchor every
 * ANCHOR_EVERY_S keeps the float milliseconds short. Without an anchor (the GPU never passed one
 * quickly) the time is the host time when the event was seen done, as PyTorch's flight recorder stamps
 * "discovered" times.
 *
 * Process-wide state: only what a process's end needs (process_ending for dev_rank_abort; the running
 * watchdog for the atexit stop) — one process drives one device. */
#include "coll_watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_flight.h"
#include "coll_hang.h"
#include "cuda_dev.h"
#include "twinrun/err.h"

#define ANCHOR_EVERY_S 30.0
#define ANCHOR_WINDOW_S 2e-3 /* an anchor whose host window is wider is not taken */
#define ABORT_GRACE_S 3.0    /* the watchdog's end exits this long after it began to abort, done or not */

typedef struct anchor {
    cudaEvent_t ev;
    double t; /* host time (dev_clock_now) the event passed */
    int refs; /* works enqueued while it was current and not yet retired */
    struct anchor *next;
} anchor;

struct tr_cu_work {
    coll_comm *c;
    uint64_t rec; /* flight record */
    const char *op;
    unsigned long long seq; /* the flight record's sequence number, for messages */
    cudaEvent_t start, end;
    anchor *a;
    double t_enq, deadline;
    bool armed;   /* the end event is recorded (tr_cu_wd_end) */
    bool started; /* the start event was seen */
    bool aborted; /* its communicator was aborted first: its record says so; retired when armed */
    tr_cu_work *next_free;
};

struct tr_cu_watchdog {
    /* The one field another thread writes without the lock, alone in its eight bytes: gcc may merge the
     * watchdog thread's reads of neighbouring plain flags (fired || broken) into one wider load, which
     * ThreadSanitizer reports as a race with stop_thread's store where the two share a word. */
    atomic_bool stop;
    dev_device *dev;
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* the thread's poll sleep (stop wakes it early) */
    pthread_cond_t resume; /* main-thread callers waiting while the watchdog ends the process */
    pthread_t thread;
    bool thread_up;
    bool ending;    /* tr_cu_wd_fire under way: callers wait in tr_cu_wd_lock */
    bool fired;     /* tr_cu_wd_fire happens once */
    bool broken;    /* a CUDA error while polling: the main thread's next call reports it; stop watching */
    int group_open; /* main thread between ncclGroupStart and ncclGroupEnd */
    double poll_s;
    coll_comm **comms;
    int ncomms, capcomms;
    tr_cu_work **works; /* in flight, in enqueue order */
    size_t nworks, capworks;
    tr_cu_work *free_works;
    cudaEvent_t *pool; /* timing events for works' start and end */
    size_t npool, cappool;
    anchor *anchors; /* all live anchors, newest first; cur is the newest that passed */
    anchor *cur;
    double anchor_due;
    cudaStream_t st; /* the watchdog's own stream: anchors only */
};

static atomic_bool process_ending;
static _Atomic(tr_cu_watchdog *) running;
static atomic_flag atexit_set = ATOMIC_FLAG_INIT;

bool tr_cu_process_ending(void) { return atomic_load(&process_ending); }

static double now(const tr_cu_watchdog *w) { return dev_clock_now(w->dev); }

static bool on_timeout_return(void) {
    const char *m = getenv("TWINRUN_COLL_ON_TIMEOUT");
    return m && strcmp(m, "return") == 0;
}

/* ---- anchors ------------------------------------------------------------------------------------ */

/* Records an anchor on the watchdog's stream and waits (spinning, at most 0.1 s) for it to pass; NULL if
 * it did not pass within `window` seconds (a busy front end: try again later) or on an error. No lock. */
static anchor *anchor_take(tr_cu_watchdog *w, double window) {
    anchor *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    if (cudaEventCreate(&a->ev) != cudaSuccess) {
        free(a);
        return NULL;
    }
    const double t0 = now(w);
    cudaError_t q = cudaEventRecord(a->ev, w->st);
    double t1 = t0;
    while (q == cudaSuccess && (q = cudaEventQuery(a->ev)) == cudaErrorNotReady && (t1 = now(w)) - t0 < 0.1) {}
    t1 = now(w);
    if (q != cudaSuccess || t1 - t0 > window) {
        (void)cudaEventDestroy(a->ev); /* a pending record is fine to destroy: CUDA frees it when done */
        free(a);
        return NULL;
    }
    a->t = 0.5 * (t0 + t1);
    return a;
}

/* Under the lock: makes a current and frees the old anchors no work uses. */
static void anchor_install(tr_cu_watchdog *w, anchor *a) {
    a->next = w->anchors;
    w->anchors = a;
    w->cur = a;
    for (anchor **p = &a->next; *p;) {
        anchor *o = *p;
        if (o->refs == 0) {
            *p = o->next;
            (void)cudaEventDestroy(o->ev);
            free(o);
        } else {
            p = &o->next;
        }
    }
}

/* The host time of a passed event. */
static double event_time(const tr_cu_watchdog *w, const anchor *a, cudaEvent_t e) {
    float ms = 0;
    if (a && cudaEventElapsedTime(&ms, a->ev, e) == cudaSuccess) return a->t + 1e-3 * (double)ms;
    return now(w);
}

/* ---- events and works (under the lock) -------------------------------------------------------- */

static cudaEvent_t event_get(tr_cu_watchdog *w) {
    if (w->npool) return w->pool[--w->npool];
    cudaEvent_t e;
    CU_CHECK(cudaEventCreate(&e)); /* timing: the flight record's start and end times come from it */
    return e;
}

static void event_put(tr_cu_watchdog *w, cudaEvent_t e) {
    if (w->npool == w->cappool) {
        const size_t cap = w->cappool ? 2 * w->cappool : 64;
        cudaEvent_t *p = realloc(w->pool, sizeof *p * cap);
        if (!p) {
            (void)cudaEventDestroy(e);
            return;
        }
        w->pool = p;
        w->cappool = cap;
    }
    w->pool[w->npool++] = e;
}

/* Seen done? 1: finished (its record completed, with the end event's time); 0: not yet; -1: a CUDA
 * error (*err). Moves the record to started when the start event has passed. */
static int work_poll(tr_cu_watchdog *w, tr_cu_work *k, cudaError_t *err) {
    if (k->aborted) return 0;
    if (!k->started) {
        const cudaError_t q = cudaEventQuery(k->start);
        if (q == cudaErrorNotReady) return 0;
        if (q != cudaSuccess) return *err = q, -1;
        k->started = true;
        tr_cu_flight_set_at(w->dev, k->rec, FLIGHT_STARTED, event_time(w, k->a, k->start));
    }
    if (!k->armed) return 0;
    const cudaError_t q = cudaEventQuery(k->end);
    if (q == cudaErrorNotReady) return 0;
    if (q != cudaSuccess) return *err = q, -1;
    tr_cu_flight_set_at(w->dev, k->rec, FLIGHT_COMPLETED, event_time(w, k->a, k->end));
    return 1;
}

/* Takes works[i] out of the table and recycles it. Only armed works leave (tr_cu_wd_end still holds the
 * others). */
static void work_drop(tr_cu_watchdog *w, size_t i) {
    tr_cu_work *k = w->works[i];
    memmove(&w->works[i], &w->works[i + 1], sizeof *w->works * (w->nworks - i - 1));
    w->nworks--;
    event_put(w, k->start);
    event_put(w, k->end);
    if (k->a) k->a->refs--;
    k->next_free = w->free_works;
    w->free_works = k;
}

/* Polls every work of c (every work when c is NULL) and drops the finished ones. Returns the first CUDA
 * error, cudaSuccess if none. */
static cudaError_t poll_all(tr_cu_watchdog *w, const coll_comm *c) {
    cudaError_t first = cudaSuccess;
    for (size_t i = 0; i < w->nworks;) {
        tr_cu_work *k = w->works[i];
        cudaError_t e = cudaSuccess;
        const int r = c && k->c != c ? 0 : work_poll(w, k, &e);
        if (r < 0 && first == cudaSuccess) first = e;
        if (r == 1 || (k->aborted && k->armed)) work_drop(w, i);
        else i++;
    }
    return first;
}

/* ---- the lock ----------------------------------------------------------------------------------- */

void tr_cu_wd_lock_any(tr_cu_watchdog *w) {
    pthread_mutex_lock(&w->mu);
    while (w->ending) pthread_cond_wait(&w->resume, &w->mu);
}

void tr_cu_wd_unlock_any(tr_cu_watchdog *w) { pthread_mutex_unlock(&w->mu); }

bool tr_cu_wd_lock(coll_comm *c) {
    tr_cu_wd_lock_any(c->wd);
    if (c->dead == COLL_OK && c->comm) return true;
    pthread_mutex_unlock(&c->wd->mu);
    return false;
}

void tr_cu_wd_unlock(coll_comm *c) { pthread_mutex_unlock(&c->wd->mu); }

void tr_cu_wd_group_open(tr_cu_watchdog *w, bool open) { w->group_open += open ? 1 : -1; }

/* ---- one collective ----------------------------------------------------------------------------- */

tr_cu_work *tr_cu_wd_begin(coll_comm *c, dev_stream *s, uint64_t rec, uint64_t seq, const char *op, bool hang) {
    tr_cu_watchdog *w = c->wd;
    /* retire what already finished, oldest first, so the table and the event pool stay small between
     * the watchdog's polls (one cudaEventQuery when the GPU is behind, the usual case) */
    while (w->nworks && w->works[0]->armed) {
        cudaError_t e;
        if (work_poll(w, w->works[0], &e) != 1) break;
        work_drop(w, 0);
    }
    tr_cu_work *k = w->free_works;
    if (k) w->free_works = k->next_free;
    else k = malloc(sizeof *k);
    TR_CHECK(k != NULL, "out of host memory for an in-flight collective");
    if (w->nworks == w->capworks) {
        const size_t cap = w->capworks ? 2 * w->capworks : 256;
        tr_cu_work **p = realloc(w->works, sizeof *p * cap);
        TR_CHECK(p != NULL, "out of host memory for the in-flight collectives");
        w->works = p;
        w->capworks = cap;
    }
    memset(k, 0, sizeof *k);
    k->c = c;
    k->rec = rec;
    k->op = op;
    k->seq = seq;
    k->start = event_get(w);
    k->end = event_get(w);
    k->a = w->cur;
    if (k->a) k->a->refs++;
    k->t_enq = now(w);
    k->deadline = k->t_enq + c->timeout_s;
    /* after the caller's work so far (the producer of the input), then the start mark */
    CU_CHECK(cudaEventRecord(c->ready, tr_cu_stream(s)));
    CU_CHECK(cudaStreamWaitEvent(c->cs, c->ready, 0));
    CU_CHECK(cudaEventRecord(k->start, c->cs));
    if (hang) tr_cu_hang_enqueue(c->cs);
    w->works[w->nworks++] = k;
    return k;
}

void tr_cu_wd_end(tr_cu_work *k, dev_stream *s) {
    tr_cu_watchdog *w = k->c->wd;
    CU_CHECK(cudaEventRecord(k->end, k->c->cs));
    CU_CHECK(cudaStreamWaitEvent(tr_cu_stream(s), k->end, 0)); /* what s runs next sees the result */
    k->armed = true;
    if (k->aborted)
        for (size_t i = 0; i < w->nworks; i++)
            if (w->works[i] == k) {
                work_drop(w, i);
                break;
            }
}

void tr_cu_wd_abort_comm(coll_comm *c, coll_status why) {
    tr_cu_watchdog *w = c->wd;
    (void)poll_all(w, c); /* what finished before the abort completed */
    if (c->comm) {
        ncclCommAbort(c->comm);
        c->comm = NULL;
    }
    coll_status ok = COLL_OK;
    atomic_compare_exchange_strong(&c->dead, &ok, why);
    for (size_t i = 0; i < w->nworks;) {
        tr_cu_work *k = w->works[i];
        if (k->c != c || k->aborted) {
            i++;
            continue;
        }
        k->aborted = true;
        tr_cu_flight_set_at(w->dev, k->rec, FLIGHT_ABORTED, now(w));
        if (k->armed) work_drop(w, i);
        else i++;
    }
}

/* ---- the end of the process --------------------------------------------------------------------- */

static void *reaper(void *arg) {
    const int rank = *(const int *)arg;
    struct timespec ts = {(time_t)ABORT_GRACE_S, (long)((ABORT_GRACE_S - (double)(time_t)ABORT_GRACE_S) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
    fprintf(stderr, "twinrun: rank %d: watchdog: aborting the communicators took more than %.0f s; exiting anyway\n",
            rank, ABORT_GRACE_S);
    fflush(stderr);
    _exit(TR_EXIT_FATAL);
}

void tr_cu_wd_fire(tr_cu_watchdog *w, const char *what, coll_comm *c, coll_status why) {
    pthread_mutex_lock(&w->mu);
    if (w->fired) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    w->fired = true;
    w->ending = true;
    atomic_store(&process_ending, true);
    (void)poll_all(w, NULL); /* the dump shows what had finished, started or not started by now */
    pthread_mutex_unlock(&w->mu);

    static int rank; /* the reaper's argument: this function runs once per process */
    rank = tr_cu_flight_rank(w->dev);
    const bool ret = on_timeout_return();
    fprintf(stderr, "twinrun: rank %d: watchdog: %s; dumping the flight recorder and aborting every communicator\n",
            rank, what);
    tr_cu_flight_dump(w->dev, "blocked");
    tr_cu_hang_release(); /* an injected GPU hang must not hold the abort up */
    pthread_t t;
    if (!ret && pthread_create(&t, NULL, reaper, &rank) == 0) pthread_detach(t);

    pthread_mutex_lock(&w->mu); /* the main thread waits in tr_cu_wd_lock meanwhile: no call races an abort */
    if (c) tr_cu_wd_abort_comm(c, why);
    for (int i = 0; i < w->ncomms; i++) tr_cu_wd_abort_comm(w->comms[i], COLL_ABORTED);
    if (ret) { /* TWINRUN_COLL_ON_TIMEOUT=return: the process goes on; its calls return the status */
        w->ending = false;
        atomic_store(&process_ending, false);
        pthread_cond_broadcast(&w->resume);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    pthread_mutex_unlock(&w->mu);
    fprintf(stderr, "twinrun: rank %d: exiting after %s\n", rank,
            why == COLL_ERROR     ? "an NCCL error"
            : why == COLL_ABORTED ? "a peer's process was lost (the heartbeat)"
                                  : "a collective timeout (--distributed-timeout-minutes)");
    fflush(stdout);
    fflush(stderr);
    _exit(TR_EXIT_FATAL); /* not exit(): the main thread may be inside CUDA; atexit teardown would race it */
}

void tr_cu_peer_lost(const char *what) {
    tr_cu_watchdog *w = atomic_load(&running);
    if (w) tr_cu_wd_fire(w, what, NULL, COLL_ABORTED); /* returns only with TWINRUN_COLL_ON_TIMEOUT=return */
    fprintf(stderr, "twinrun: %s; exiting (no flight recorder to dump: no asynchronous communicator yet)\n", what);
    fflush(stdout);
    fflush(stderr);
    _exit(TR_EXIT_FATAL);
}

/* ---- the thread --------------------------------------------------------------------------------- */

static void describe_timeout(const tr_cu_work *k, double t, char *out, size_t n) {
    const coll_comm *c = k->c;
    snprintf(out, n, "%s seq %llu on '%s' (rank %d of %d) did not complete within %.0f s (enqueued %.1f s ago, %s)",
             k->op, k->seq, c->name, c->rank, c->size, c->timeout_s, t - k->t_enq,
             k->started ? "started on the GPU: waiting for its peers"
                        : "not started: the GPU work before it on its stream has not finished");
}

static void *watchdog_main(void *arg) {
    tr_cu_watchdog *w = arg;
    if (cudaSetDevice(w->dev->ordinal) != cudaSuccess) { /* events and anchors live on the rank's device */
        fprintf(stderr, "twinrun: watchdog: cannot select device %d; collectives are not watched\n", w->dev->ordinal);
        return NULL;
    }
    pthread_mutex_lock(&w->mu);
    while (!atomic_load(&w->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        const double at = (double)ts.tv_nsec * 1e-9 + w->poll_s;
        ts.tv_sec += (time_t)at;
        ts.tv_nsec = (long)((at - (double)(time_t)at) * 1e9);
        pthread_cond_timedwait(&w->wake, &w->mu, &ts);
        if (atomic_load(&w->stop)) break;
        if (w->fired || w->broken) continue; /* nothing more to do until stopped */
        double t = now(w);
        if (t >= w->anchor_due) { /* without an anchor yet, a wider window is better than none */
            w->anchor_due = t + ANCHOR_EVERY_S;
            const double window = w->cur ? ANCHOR_WINDOW_S : 10 * ANCHOR_WINDOW_S;
            pthread_mutex_unlock(&w->mu);
            anchor *a = anchor_take(w, window);
            pthread_mutex_lock(&w->mu);
            if (a) anchor_install(w, a);
            else w->anchor_due = t + (w->cur ? 1.0 : 0.0); /* busy: again soon, or at the next poll */
            if (atomic_load(&w->stop)) break;
        }
        const cudaError_t e = poll_all(w, NULL);
        if (e != cudaSuccess) {
            fprintf(stderr,
                    "twinrun: rank %d: watchdog: %s (%s) while polling the collectives' events; the next CUDA "
                    "call of the rank reports it\n",
                    tr_cu_flight_rank(w->dev), cudaGetErrorName(e), cudaGetErrorString(e));
            w->broken = true;
            continue;
        }
        char what[512] = "";
        coll_comm *culprit = NULL;
        coll_status why = COLL_TIMEOUT;
        t = now(w);
        for (size_t i = 0; i < w->nworks && !culprit; i++) {
            const tr_cu_work *k = w->works[i];
            if (!k->aborted && t > k->deadline) {
                describe_timeout(k, t, what, sizeof what);
                culprit = k->c;
            }
        }
        for (int i = 0; i < w->ncomms && !culprit; i++) {
            coll_comm *c = w->comms[i];
            ncclResult_t ae = ncclSuccess;
            if (!c->comm || ncclCommGetAsyncError(c->comm, &ae) != ncclSuccess) continue;
            if (ae != ncclSuccess && ae != ncclInProgress) {
                snprintf(what, sizeof what, "communicator '%s' (rank %d of %d) failed: %s", c->name, c->rank, c->size,
                         ncclGetErrorString(ae));
                culprit = c;
                why = COLL_ERROR;
            }
        }
        if (!culprit) continue;
        if (w->group_open && on_timeout_return()) continue; /* abort after the main thread's group ends */
        pthread_mutex_unlock(&w->mu);
        tr_cu_wd_fire(w, what, culprit, why); /* returns only with TWINRUN_COLL_ON_TIMEOUT=return */
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Stops the thread (stop, wake, join). The lock may be held by the exiting thread itself (an exit from
 * inside a call): then the thread, blocked on the lock, touches nothing more, and is not joined. */
static void stop_thread(tr_cu_watchdog *w, bool at_exit) {
    if (!w->thread_up) return;
    atomic_store(&w->stop, true);
    bool locked = false;
    for (int i = 0; i < 200 && !(locked = pthread_mutex_trylock(&w->mu) == 0); i++) usleep(1000);
    if (!locked && at_exit) return;
    if (!locked) pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->thread_up = false;
}

/* exit() with a watchdog running: stop it before the CUDA runtime's own atexit teardown (registered
 * earlier, so run later) pulls the context from under its queries. */
static void stop_at_exit(void) {
    tr_cu_watchdog *w = atomic_exchange(&running, NULL);
    if (w && !pthread_equal(pthread_self(), w->thread)) stop_thread(w, true);
}

/* ---- device hooks: dev_free and dev_close ------------------------------------------------------- */

/* Before a dev_free: every collective in flight is finished (a buffer is never freed under one). The
 * communicator list changes only on the main thread (attach, detach), which is this one: it is read
 * without the lock. The waits are without the lock too; a hang here is the watchdog's to end. */
static void wd_quiesce(dev_device *d) {
    tr_cu_watchdog *w = d->wd;
    pthread_mutex_lock(&w->mu);
    const size_t n = w->nworks;
    pthread_mutex_unlock(&w->mu);
    if (n == 0) return;
    for (int i = 0; i < w->ncomms; i++) (void)cudaStreamSynchronize(w->comms[i]->cs); /* idle: returns at once */
    pthread_mutex_lock(&w->mu);
    (void)poll_all(w, NULL);
    pthread_mutex_unlock(&w->mu);
}

static void wd_close(dev_device *d) {
    tr_cu_watchdog *w = d->wd;
    tr_cu_watchdog *self = w;
    atomic_compare_exchange_strong(&running, &self, NULL);
    stop_thread(w, false);
    for (int i = 0; i < w->ncomms; i++) (void)cudaStreamSynchronize(w->comms[i]->cs);
    (void)poll_all(w, NULL);                 /* final states for an exit dump (TWINRUN_FLIGHT_AT_EXIT) */
    for (size_t i = 0; i < w->nworks; i++) { /* never armed: a call cut short */
        event_put(w, w->works[i]->start);
        event_put(w, w->works[i]->end);
        free(w->works[i]);
    }
    for (tr_cu_work *k = w->free_works, *next; k; k = next) next = k->next_free, free(k);
    for (size_t i = 0; i < w->npool; i++) (void)cudaEventDestroy(w->pool[i]);
    for (anchor *a = w->anchors, *next; a; a = next) next = a->next, (void)cudaEventDestroy(a->ev), free(a);
    for (int i = 0; i < w->ncomms; i++) w->comms[i]->wd = NULL; /* never destroyed: not ours to free */
    (void)cudaStreamDestroy(w->st);
    free(w->works);
    free(w->pool);
    free(w->comms);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->resume);
    pthread_mutex_destroy(&w->mu);
    d->wd = NULL;
    d->wd_quiesce = NULL;
    d->wd_close = NULL;
    free(w);
}

/* ---- attach and detach -------------------------------------------------------------------------- */

static double poll_seconds(void) {
    const char *v = getenv("TWINRUN_COLL_WATCHDOG_POLL_MS");
    if (!v || !*v) return 0.1;
    char *end = NULL;
    const double ms = strtod(v, &end);
    if (end == v || *end || !(ms >= 1 && ms <= 60000))
        tr_fatal("TWINRUN_COLL_WATCHDOG_POLL_MS=%s: expected milliseconds between 1 and 60000", v);
    return ms * 1e-3;
}

static tr_cu_watchdog *watchdog_start(dev_device *d) {
    tr_cu_watchdog *w = calloc(1, sizeof *w);
    TR_CHECK(w != NULL, "out of host memory for the collectives' watchdog");
    w->dev = d;
    w->poll_s = poll_seconds();
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&w->resume, NULL);
    CU_CHECK(cudaStreamCreateWithFlags(&w->st, cudaStreamNonBlocking));
    /* the first works' anchor (else: discovery times until the thread takes one) */
    anchor *a = NULL;
    for (int i = 0; i < 20 && !a; i++) a = anchor_take(w, ANCHOR_WINDOW_S);
    if (!a) a = anchor_take(w, 0.1);
    if (a) anchor_install(w, a);
    w->anchor_due = now(w) + (a ? ANCHOR_EVERY_S : 0.0);
    d->wd = w;
    d->wd_quiesce = wd_quiesce;
    d->wd_close = wd_close;
    w->thread_up = true; /* before the thread runs: it reads the fields around it */
    const int e = pthread_create(&w->thread, NULL, watchdog_main, w);
    if (e != 0) tr_fatal("cannot start the collectives' watchdog thread: %s", strerror(e));
    atomic_store(&running, w);
    if (!atomic_flag_test_and_set(&atexit_set)) atexit(stop_at_exit);
    return w;
}

void tr_cu_wd_attach(dev_device *d, coll_comm *c) {
    tr_cu_watchdog *w = d->wd ? d->wd : watchdog_start(d);
    CU_CHECK(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
    CU_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    tr_cu_wd_lock_any(w);
    if (w->ncomms == w->capcomms) {
        const int cap = w->capcomms ? 2 * w->capcomms : 8;
        coll_comm **p = realloc(w->comms, sizeof *p * (size_t)cap);
        TR_CHECK(p != NULL, "out of host memory for the collectives' watchdog");
        w->comms = p;
        w->capcomms = cap;
    }
    w->comms[w->ncomms++] = c;
    c->wd = w;
    tr_cu_wd_unlock_any(w);
}

void tr_cu_wd_detach(coll_comm *c) {
    tr_cu_watchdog *w = c->wd;
    if (!w) return;
    (void)cudaStreamSynchronize(c->cs); /* its collectives are done (a hang here is the watchdog's to end) */
    tr_cu_wd_lock_any(w);
    (void)poll_all(w, c);
    for (size_t i = 0; i < w->nworks;) { /* not finished (aborted, or a call cut short): gone with c */
        tr_cu_work *k = w->works[i];
        if (k->c != c) {
            i++;
            continue;
        }
        if (!k->aborted) tr_cu_flight_set_at(w->dev, k->rec, FLIGHT_ABORTED, now(w));
        k->armed = true; /* nobody will come back for it */
        work_drop(w, i);
    }
    for (int i = 0; i < w->ncomms; i++)
        if (w->comms[i] == c) {
            w->comms[i] = w->comms[--w->ncomms];
            break;
        }
    tr_cu_wd_unlock_any(w);
    (void)cudaEventDestroy(c->ready);
    (void)cudaStreamDestroy(c->cs);
    c->wd = NULL;
}
