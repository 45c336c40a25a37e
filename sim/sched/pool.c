/* The worker pool (pool.h): queues of deferred work, worker threads that take a whole queue at a
 * time, and the drain that the scheduler thread calls before the host touches a rank's memory.
 *
 * One lock guards every queue and the ready list. The scheduler thread is the only producer, so a
 * queue it has drained stays empty until it submits again; workers only ever shorten queues. */
#include "pool.h"

#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Jobs whose arguments fit in JOB_SMALL bytes (every kernel's; attention's too while its positions,
 * which travel with it, number under ~85) live in nodes of that size, which the pool recycles (up to SPARE_MAX of them)
 * instead of handing them back to malloc: the scheduler's thread allocates every job and the workers
 * would free most, so each job cost a malloc from an arena whose caches never refill, and the frees
 * from the other thread filled its fastbins, which the kernels' large scratch allocations then
 * consolidated. Larger jobs (queued host-to-device copies) are malloc'd and freed as they come. */
enum { JOB_SMALL = 512, SPARE_MAX = 4096 };

struct twin_job {
    twin_job *next;
    twin_job_fn *fn;
    bool small;                                /* a JOB_SMALL node: recycled through the pool's spares */
    alignas(max_align_t) unsigned char args[]; /* the submitter's arguments, copied */
};

struct twin_pool {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a queue was listed, or stop */
    pthread_cond_t idle; /* a thread let go of a queue */
    twin_queue *ready_first, *ready_last;
    twin_job *spare; /* JOB_SMALL nodes that ran, for the next submissions */
    int nspare;
    int waiting; /* scheduler waits on idle */
    bool stop;
    int workers, started;
    pthread_t *threads;
    /* TWINRUN_TWIN_POOL_STATS=1: where the work ran and how long the scheduler thread waited */
    bool stats;
    unsigned long long jobs_worker, jobs_helped, waits;
    double wait_s, main_cpu_s, worker_cpu_s;
};

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static _Thread_local bool t_in_job;

bool twin_pool_in_job(void) { return t_in_job; }

/* Out of host memory for the pool's own bookkeeping: no rank can be blamed, so the process ends. */
_Noreturn static void pool_oom(const char *what) {
    fprintf(stderr, "twinrun: fatal: out of host memory for %s (twin worker pool)\n", what);
    fflush(stderr);
    abort();
}

/* Takes back a job that ran, with the lock held: true when it went to the spares, false when the caller
 * must free it (after letting go of the lock). */
static bool recycle(twin_pool *p, twin_job *j) {
    if (!j->small || p->nspare >= SPARE_MAX) return false;
    j->next = p->spare;
    p->spare = j;
    p->nspare++;
    return true;
}

static void list_ready(twin_pool *p, twin_queue *q) {
    q->listed = true;
    q->next_ready = NULL;
    q->prev_ready = p->ready_last;
    if (p->ready_last) p->ready_last->next_ready = q;
    else p->ready_first = q;
    p->ready_last = q;
}

static void unlist(twin_pool *p, twin_queue *q) {
    if (q->prev_ready) q->prev_ready->next_ready = q->next_ready;
    else p->ready_first = q->next_ready;
    if (q->next_ready) q->next_ready->prev_ready = q->prev_ready;
    else p->ready_last = q->prev_ready;
    q->listed = false;
    q->prev_ready = q->next_ready = NULL;
}

/* The scheduler thread helping: runs q's jobs, batch by batch, until q is empty, then lets go of it.
 * Called with the lock held and q->running set by the caller; returns with the lock held. */
static void run_queue(twin_pool *p, twin_queue *q) {
    while (q->head) {
        twin_job *j = q->head;
        q->head = q->tail = NULL;
        pthread_mutex_unlock(&p->lock);
        const bool outer = t_in_job;
        t_in_job = true;
        unsigned long long n = 0;
        twin_job *done = NULL; /* the small ones, to recycle under the lock below */
        while (j) {
            twin_job *next = j->next;
            j->fn(j->args);
            if (j->small) {
                j->next = done;
                done = j;
            } else free(j);
            j = next;
            n++;
        }
        t_in_job = outer;
        pthread_mutex_lock(&p->lock);
        p->jobs_helped += n;
        while (done) {
            twin_job *next = done->next;
            if (!recycle(p, done)) free(done); /* past SPARE_MAX: rare, a short free under the lock */
            done = next;
        }
    }
    q->running = false;
    if (p->waiting) pthread_cond_broadcast(&p->idle);
}

/* A worker runs a queue one job at a time and lets go of it as soon as the scheduler thread waits,
 * so that a drain waits for at most the job in hand (the worker may be descheduled on a busy
 * machine), then runs the rest itself. */
static void *worker(void *arg) {
    twin_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && !p->ready_first) pthread_cond_wait(&p->work, &p->lock);
        if (!p->ready_first) break; /* stopping, nothing left */
        twin_queue *q = p->ready_first;
        unlist(p, q);
        q->running = true;
        do { /* at least one job a claim: with other workers, the scheduler may wait for theirs */
            twin_job *j = q->head;
            q->head = j->next;
            if (!q->head) q->tail = NULL;
            pthread_mutex_unlock(&p->lock);
            t_in_job = true;
            j->fn(j->args);
            t_in_job = false;
            pthread_mutex_lock(&p->lock);
            p->jobs_worker++;
            if (!recycle(p, j)) {
                pthread_mutex_unlock(&p->lock);
                free(j);
                pthread_mutex_lock(&p->lock);
            }
        } while (q->head && !p->waiting);
        q->running = false;
        if (q->head) list_ready(p, q); /* left for the scheduler thread, or for the next round */
        if (p->waiting) pthread_cond_broadcast(&p->idle);
    }
    p->worker_cpu_s += thread_cpu_s();
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

twin_pool *twin_pool_create(int workers) {
    twin_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->workers = workers > 0 ? workers : 0;
    p->threads = calloc((size_t)p->workers + 1, sizeof *p->threads);
    if (!p->threads || pthread_mutex_init(&p->lock, NULL)) {
        free(p->threads);
        free(p);
        return NULL;
    }
    const char *stats = getenv("TWINRUN_TWIN_POOL_STATS");
    p->stats = stats && *stats && *stats != '0';
    p->main_cpu_s = -thread_cpu_s();
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    for (; p->started < p->workers; p->started++)
        if (pthread_create(&p->threads[p->started], NULL, worker, p)) {
            twin_pool_destroy(p);
            return NULL;
        }
    return p;
}

void twin_pool_destroy(twin_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    p->main_cpu_s += thread_cpu_s();
    if (p->stats) /* wall-clock figures: stderr only, never in a report */
        fprintf(stderr,
                "twin pool: %d workers; jobs %llu on workers, %llu on the scheduler thread; %llu waits, %.3f s; CPU "
                "%.3f s scheduler thread, %.3f s workers\n",
                p->workers, p->jobs_worker, p->jobs_helped, p->waits, p->wait_s, p->main_cpu_s, p->worker_cpu_s);
    while (p->spare) {
        twin_job *next = p->spare->next;
        free(p->spare);
        p->spare = next;
    }
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p);
}

static void fill(twin_job *j, twin_job_fn *fn, const void *args, size_t size, const void *tail, size_t tail_size) {
    j->next = NULL;
    j->fn = fn;
    if (size) memcpy(j->args, args, size);
    if (tail_size) memcpy(j->args + size, tail, tail_size);
}

void twin_pool_submit(twin_pool *p, twin_queue *q, twin_job_fn *fn, const void *args, size_t size, const void *tail,
                      size_t tail_size) {
    const size_t need = size + tail_size;
    const bool small = need <= JOB_SMALL;
    pthread_mutex_lock(&p->lock);
    twin_job *j = small ? p->spare : NULL;
    if (j) { /* the common case: a recycled node, filled under the lock (at most JOB_SMALL bytes) */
        p->spare = j->next;
        p->nspare--;
        fill(j, fn, args, size, tail, tail_size);
    } else {
        pthread_mutex_unlock(&p->lock);
        j = malloc(sizeof *j + (small ? JOB_SMALL : need));
        if (!j) pool_oom("a deferred kernel's arguments");
        j->small = small;
        fill(j, fn, args, size, tail, tail_size);
        pthread_mutex_lock(&p->lock);
    }
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
    /* a running queue picks the job up in its next batch; with no workers it waits for a drain */
    if (!q->running && !q->listed && p->workers > 0) {
        list_ready(p, q);
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
}

void twin_pool_drain(twin_pool *p, twin_queue *const *qs, int n) {
    pthread_mutex_lock(&p->lock);
    for (;;) {
        twin_queue *take = NULL;
        bool busy = false;
        for (int i = 0; i < n && !take; i++) {
            if (qs[i]->running) busy = true;
            else if (qs[i]->head) take = qs[i];
        }
        if (take) { /* help rather than wait: no worker holds it, so run it here */
            if (take->listed) unlist(p, take);
            take->running = true;
            run_queue(p, take);
            continue;
        }
        if (!busy) break;
        struct timespec t0, t1;
        if (p->stats) clock_gettime(CLOCK_MONOTONIC, &t0);
        p->waiting++;
        pthread_cond_wait(&p->idle, &p->lock);
        p->waiting--;
        if (p->stats) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            p->waits++;
            p->wait_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        }
    }
    pthread_mutex_unlock(&p->lock);
}
