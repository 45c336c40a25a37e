#include "coll_flight.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_hang.h"
#include "cuda_dev.h"
#include "launch/flight_env.h"
#include "launch/launch_vars.h"
#include "twinrun/err.h"

struct tr_cu_flight {
    /* The ring is appended to by the main thread and moved on (started, completed, aborted) and dumped by
     * the watchdog thread too (asynchronous mode): every access holds mu. Never held across a wait. */
    pthread_mutex_t mu;
    flight_ring ring;
    tr_flight_env env;
    int rank, world;
    int ncomms, cap;
    coll_comm **live; /* [cap] by flight comm index; NULL once destroyed */
    int **ranks;      /* [cap] copies: the ring borrows them */
};

static void write_dump(dev_device *d, const char *status, int code) {
    struct tr_cu_flight *f = d->flight;
    const char *dir = f->env.dir ? f->env.dir : "/tmp";
    char path[4096];
    snprintf(path, sizeof path, "%s/flight_rank%05d.txt", dir, f->rank);
    flight_dump dump;
    FILE *out = NULL;
    pthread_mutex_lock(&f->mu); /* a copy of the ring, written to disk without the lock */
    const int rc = flight_ring_to_dump(&f->ring, f->rank, f->world, dev_clock_now(d), status, code, &dump);
    pthread_mutex_unlock(&f->mu);
    if (rc != 0) {
        fprintf(stderr, "twinrun: rank %d: out of host memory for the flight dump\n", f->rank);
        return;
    }
    dev_info info;
    dev_get_info(d, &info);
    snprintf(dump.backend, sizeof dump.backend, "%s", info.backend); /* "cuda" or "musa", not the ring's "twin" */
    if (!(out = fopen(path, "w")) || flight_dump_write(out, &dump) != 0 || fclose(out) != 0)
        fprintf(stderr,
                "twinrun: rank %d: cannot write the flight dump %s: %s (set TWINRUN_FLIGHT_DIR to a writable "
                "directory)\n",
                f->rank, path, strerror(errno));
    else
        fprintf(stderr,
                "twinrun: rank %d: flight recorder dumped to %s (read all ranks' with: blame %s/flight_rank*.txt)\n",
                f->rank, path, dir);
    flight_dump_free(&dump);
}

static void flight_free(dev_device *d) {
    struct tr_cu_flight *f = d->flight;
    if (!f) return;
    if (f->env.at_exit) write_dump(d, "exited", 0);
    flight_ring_free(&f->ring);
    pthread_mutex_destroy(&f->mu);
    for (int i = 0; i < f->ncomms; i++) free(f->ranks[i]);
    free(f->ranks);
    free(f->live);
    free(f);
    d->flight = NULL;
}

static struct tr_cu_flight *state(dev_device *d, int my_rank) {
    if (d->flight) return d->flight;
    struct tr_cu_flight *f = calloc(1, sizeof *f);
    TR_CHECK(f != NULL, "out of host memory for the flight recorder");
    char err[512];
    if (tr_launch_flight_env_read(&f->env, err, sizeof err)) tr_fatal("%s", err);
    tr_launch_vars v;
    f->world = tr_launch_vars_from_env(&v, err, sizeof err) == 0 ? v.world : 1;
    f->rank = my_rank;
    flight_ring_init(&f->ring, f->env.records);
    pthread_mutex_init(&f->mu, NULL);
    d->flight = f;
    d->flight_free = flight_free;
    return f;
}

/* FNV-1a of the unique id: the same on every member, different for every communicator. */
static uint64_t uid_of(const void *id, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = id;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

int tr_cu_flight_comm(dev_device *d, int my_rank, const void *id, size_t idlen, const char *name, const int *ranks,
                      int nranks, coll_comm *c) {
    struct tr_cu_flight *f = state(d, my_rank);
    if (f->world <= ranks[nranks - 1]) f->world = ranks[nranks - 1] + 1; /* no launcher: what the groups show */
    if (f->ncomms == f->cap) {
        const int cap = f->cap ? 2 * f->cap : 16;
        coll_comm **l = realloc(f->live, sizeof *l * (size_t)cap);
        TR_CHECK(l != NULL, "out of host memory for the flight recorder");
        f->live = l;
        int **r = realloc(f->ranks, sizeof *r * (size_t)cap);
        TR_CHECK(r != NULL, "out of host memory for the flight recorder");
        f->ranks = r;
        f->cap = cap;
    }
    int *copy = malloc(sizeof(int) * (size_t)nranks);
    TR_CHECK(copy != NULL, "out of host memory for the flight recorder");
    memcpy(copy, ranks, sizeof(int) * (size_t)nranks);
    f->live[f->ncomms] = c;
    f->ranks[f->ncomms] = copy;
    f->ncomms++;
    pthread_mutex_lock(&f->mu);
    const int k = flight_ring_add_comm(&f->ring, uid_of(id, idlen), name, nranks, copy);
    pthread_mutex_unlock(&f->mu);
    return k;
}

void tr_cu_flight_comm_gone(dev_device *d, coll_comm *c) {
    struct tr_cu_flight *f = d->flight;
    for (int i = 0; f && i < f->ncomms; i++)
        if (f->live[i] == c) f->live[i] = NULL;
}

uint64_t tr_cu_flight_rec(dev_device *d, int comm, flight_op op, uint64_t seq, size_t count, int dtype, int redop,
                          int peer, flight_state st) {
    struct tr_cu_flight *f = d->flight;
    const double t = dev_clock_now(d);
    const flight_record r = {.comm = comm,
                             .seq = seq,
                             .op = op,
                             .redop = redop,
                             .dtype = dtype,
                             .count = count,
                             .peer = peer,
                             .state = st,
                             .t_sched = t,
                             .t_start = st == FLIGHT_SCHEDULED ? -1 : t,
                             .t_end = st == FLIGHT_COMPLETED ? t : -1};
    pthread_mutex_lock(&f->mu);
    const uint64_t id = flight_ring_add(&f->ring, &r);
    pthread_mutex_unlock(&f->mu);
    return id;
}

void tr_cu_flight_set_at(dev_device *d, uint64_t id, flight_state st, double t) {
    struct tr_cu_flight *f = d->flight;
    pthread_mutex_lock(&f->mu);
    flight_record *r = flight_ring_get(&f->ring, id);
    if (r) { /* else overwritten by newer records */
        /* times never go back (the dump format's rule, which blame checks): an event's time mapped onto
         * the host clock (coll_watchdog.c) may land a few microseconds before the enqueue's host time */
        if (st == FLIGHT_STARTED || st == FLIGHT_COMPLETED) t = t > r->t_sched ? t : r->t_sched;
        if (st == FLIGHT_STARTED) r->t_start = t;
        if (st == FLIGHT_COMPLETED) {
            if (r->t_start < 0) r->t_start = t;
            r->t_end = t > r->t_start ? t : r->t_start;
        }
        r->state = st;
    }
    pthread_mutex_unlock(&f->mu);
}

void tr_cu_flight_set(dev_device *d, uint64_t id, flight_state st) { tr_cu_flight_set_at(d, id, st, dev_clock_now(d)); }

int tr_cu_flight_rank(const dev_device *d) { return d->flight ? d->flight->rank : -1; }

void tr_cu_flight_dump(dev_device *d, const char *status) {
    if (d->flight) write_dump(d, status, 0);
}

void tr_cu_flight_watchdog(dev_device *d, const char *what) {
    struct tr_cu_flight *f = d->flight;
    fprintf(stderr, "twinrun: rank %d: watchdog: %s; dumping the flight recorder and aborting every communicator\n",
            f->rank, what);
    write_dump(d, "blocked", 0);
    tr_cu_hang_release(); /* an injected GPU hang (TWINRUN_COLL_HANG) must not outlive the abort */
    for (int i = 0; i < f->ncomms; i++)
        if (f->live[i]) coll_abort(f->live[i]);
    const char *mode = getenv("TWINRUN_COLL_ON_TIMEOUT");
    if (mode && strcmp(mode, "return") == 0) return;
    if (mode && *mode && strcmp(mode, "exit") != 0)
        fprintf(stderr, "twinrun: TWINRUN_COLL_ON_TIMEOUT=%s is neither exit nor return; exiting\n", mode);
    fprintf(stderr, "twinrun: rank %d: exiting after a collective timeout (--distributed-timeout-minutes)\n", f->rank);
    dev_rank_abort(TR_EXIT_FATAL);
}
