/* fakegpu's device: the parts of dev.h (and cuda_dev.h's tr_cu_*) that coll_smoke and the collective files
 * use, on host memory and the fake streams of fake_cuda.c. Mirrors dev_cuda.cu where the collectives
 * depend on it: dev_free calls the watchdog's quiesce hook, dev_close its close hook before the flight
 * recorder's, dev_rank_abort waits while the watchdog ends the process. Copies of more than 1 MB take
 * an extra 5 ms on their stream, so a collective not ordered after its input's copy reads stale data. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_hang.h"
#include "cuda_check.h"
#include "cuda_dev.h"

/* ---- failure path ---- */
const char *tr_cu_hint(cudaError_t e) {
    (void)e;
    return "fakegpu";
}

void tr_cu_fail(const char *file, int line, const char *lib, const char *call, int status, const char *detail,
                const char *hint) {
    fprintf(stderr, "twinrun: fatal: %s:%d: %s call `%s` failed: status %d (%s)\n  hint: %s\n", file, line, lib, call,
            status, detail ? detail : "-", hint ? hint : "-");
    dev_rank_abort(TR_EXIT_FATAL);
}

void dev_rank_abort(int code) {
    for (int i = 0; i < 1000 && tr_cu_process_ending(); i++) usleep(10000);
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

void dev_rank_note(const char *msg) { (void)msg; }

void dev_rank_hang(void) {
    for (;;) pause();
}

/* ---- device ---- */
dev_device *dev_open(int ordinal, size_t capacity, char *err, size_t errlen) {
    if (ordinal != 0) {
        snprintf(err, errlen, "fakegpu has one device");
        return NULL;
    }
    dev_device *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->capacity = capacity ? capacity : (size_t)1 << 34;
    snprintf(d->name, sizeof d->name, "fakegpu");
    d->default_stream.dev = d;
    CU_CHECK(cudaStreamCreateWithFlags(&d->default_stream.st, cudaStreamNonBlocking));
    return d;
}

void dev_close(dev_device *d) {
    if (!d) return;
    if (d->wd_close) d->wd_close(d);
    if (d->flight_free) d->flight_free(d);
    CU_CHECK(cudaStreamDestroy(d->default_stream.st));
    free(d);
}

void dev_get_info(const dev_device *d, dev_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", d->name);
    snprintf(out->backend, sizeof out->backend, "cuda");
    out->capacity = d->capacity;
    out->count = 1;
}

/* A header before each allocation keeps its size. */
void *dev_alloc(dev_device *d, size_t bytes, const char *what) {
    (void)what;
    size_t *p = malloc(sizeof(size_t) * 2 + (bytes ? bytes : 1));
    if (!p) return NULL;
    p[0] = bytes;
    d->used += bytes;
    if (d->used > d->peak) d->peak = d->used;
    return p + 2;
}

void dev_free(dev_device *d, void *ptr) {
    if (!ptr) return;
    size_t *p = (size_t *)ptr - 2;
    d->used -= p[0];
    if (d->wd_quiesce) d->wd_quiesce(d);
    memset(ptr, 0xff, p[0]); /* a collective still using it would now see garbage */
    free(p);
}

size_t dev_mem_used(const dev_device *d) { return d->used; }
size_t dev_mem_peak(const dev_device *d) { return d->peak; }
const char *dev_last_error(const dev_device *d) { return d->last_error; }

/* ---- streams ---- */
cudaStream_t tr_cu_stream(dev_stream *s) {
    if (!s) {
        fprintf(stderr, "fakegpu: NULL dev_stream\n");
        abort();
    }
    return s->st;
}

dev_stream *dev_stream_default(dev_device *d) { return &d->default_stream; }
void dev_stream_sync(dev_stream *s) { CU_CHECK(cudaStreamSynchronize(tr_cu_stream(s))); }
dev_device *dev_stream_device(dev_stream *s) { return s->dev; }
void dev_stream_set_name(dev_stream *s, const char *name) { (void)s, (void)name; }
void dev_stream_set_background(dev_stream *s, bool active) { (void)s, (void)active; }

typedef struct {
    void *dst;
    const void *src;
    size_t n;
} copy_arg;

static void do_copy(void *arg) {
    copy_arg *c = arg;
    if (c->n > ((size_t)1 << 20)) usleep(5000);
    memmove(c->dst, c->src, c->n);
    free(c);
}

static void copy(dev_stream *s, void *dst, const void *src, size_t n) {
    copy_arg *c = malloc(sizeof *c);
    if (!c) abort();
    *c = (copy_arg){dst, src, n};
    fake_enqueue(tr_cu_stream(s), do_copy, c);
}

void dev_copy_h2d(dev_stream *s, void *dst, const void *src, size_t bytes) { copy(s, dst, src, bytes); }
void dev_copy_d2h(dev_stream *s, void *dst, const void *src, size_t bytes) { copy(s, dst, src, bytes); }
void dev_copy_d2d(dev_stream *s, void *dst, const void *src, size_t bytes) { copy(s, dst, src, bytes); }

static void do_free(void *p) { free(p); }
void *tr_cu_scratch(dev_stream *s, size_t bytes, const char *what) {
    (void)s;
    (void)what;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) abort();
    return p;
}
void tr_cu_scratch_free(dev_stream *s, void *p) {
    if (p) fake_enqueue(tr_cu_stream(s), do_free, p);
}

/* ---- clock ---- */
double dev_clock_now(dev_device *d) {
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dev_sleep(dev_device *d, double seconds) {
    (void)d;
    if (seconds > 0) usleep((useconds_t)(seconds * 1e6));
}

/* ---- coll_hang.h ---- */
static atomic_int hang_released;

static void spin(void *arg) {
    (void)arg;
    while (!atomic_load(&hang_released)) usleep(200);
}

void tr_cu_hang_enqueue(cudaStream_t st) { fake_enqueue(st, spin, NULL); }
void tr_cu_hang_release(void) { atomic_store(&hang_released, 1); }
