/* The twin's device: host memory with a per-rank capacity and peak accounting, streams that run
 * work synchronously in issue order, and a simulated clock.
 *
 * Each allocation carries a small header recording its size, so dev_free can account without a
 * table. Time only moves when something advances it (the cost model, dev_sleep); wall time never
 * leaks in, so runs are reproducible. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/dev.h"
#include "twinrun/err.h"

#define DEV_SIM_ALIGN 64

struct dev_stream {
    dev_device *dev;
};

struct dev_event {
    dev_device *dev;
    double time; /* simulated time at record */
};

struct dev_device {
    int ordinal;
    size_t capacity; /* 0 = unlimited */
    size_t used, peak;
    double now; /* simulated seconds */
    struct dev_stream default_stream;
    char last_error[256];
};

typedef struct alloc_header {
    size_t bytes;
    uint64_t magic;
    char pad[DEV_SIM_ALIGN - sizeof(size_t) - sizeof(uint64_t)];
} alloc_header;

#define ALLOC_MAGIC 0x7477696e72756eULL /* "twinrun" */

dev_device *dev_open(int ordinal, size_t capacity, char *err, size_t errlen) {
    if (ordinal < 0) {
        tr_errf(err, errlen, "dev_open: device ordinal %d is negative", ordinal);
        return NULL;
    }
    dev_device *d = calloc(1, sizeof *d);
    if (!d) {
        tr_errf(err, errlen, "dev_open: out of host memory");
        return NULL;
    }
    d->ordinal = ordinal;
    d->capacity = capacity;
    d->default_stream.dev = d;
    return d;
}

void dev_close(dev_device *d) { free(d); }

void dev_get_info(const dev_device *d, dev_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "twin-cpu:%d", d->ordinal);
    snprintf(out->backend, sizeof out->backend, "twin");
    out->capacity = d->capacity;
}

void *dev_alloc(dev_device *d, size_t bytes, const char *what) {
    if (d->capacity && (bytes > d->capacity || d->used > d->capacity - bytes)) {
        snprintf(d->last_error, sizeof d->last_error,
                 "out of device memory allocating %zu bytes for %s: %zu of %zu bytes in use (peak %zu)", bytes,
                 what ? what : "?", d->used, d->capacity, d->peak);
        return NULL;
    }
    alloc_header *h = aligned_alloc(DEV_SIM_ALIGN, sizeof(alloc_header) + ((bytes + DEV_SIM_ALIGN - 1) /
                                                                            DEV_SIM_ALIGN * DEV_SIM_ALIGN));
    if (!h) {
        snprintf(d->last_error, sizeof d->last_error, "host allocation of %zu bytes for %s failed", bytes,
                 what ? what : "?");
        return NULL;
    }
    h->bytes = bytes;
    h->magic = ALLOC_MAGIC;
    d->used += bytes;
    if (d->used > d->peak) d->peak = d->used;
    return h + 1;
}

void dev_free(dev_device *d, void *p) {
    if (!p) return;
    alloc_header *h = (alloc_header *)p - 1;
    TR_CHECK(h->magic == ALLOC_MAGIC, "dev_free of a pointer dev_alloc did not return (double free?)");
    h->magic = 0;
    d->used -= h->bytes;
    free(h);
}

size_t dev_mem_used(const dev_device *d) { return d->used; }
size_t dev_mem_peak(const dev_device *d) { return d->peak; }
const char *dev_last_error(const dev_device *d) { return d->last_error; }

dev_stream *dev_stream_default(dev_device *d) { return &d->default_stream; }

dev_stream *dev_stream_create(dev_device *d) {
    dev_stream *s = calloc(1, sizeof *s);
    TR_CHECK(s != NULL, "out of host memory creating a stream");
    s->dev = d;
    return s;
}

void dev_stream_destroy(dev_stream *s) {
    if (s && s != &s->dev->default_stream) free(s);
}

void dev_stream_sync(dev_stream *s) { (void)s; }
dev_device *dev_stream_device(dev_stream *s) { return s->dev; }

dev_event *dev_event_create(dev_device *d) {
    dev_event *e = calloc(1, sizeof *e);
    TR_CHECK(e != NULL, "out of host memory creating an event");
    e->dev = d;
    return e;
}

void dev_event_destroy(dev_event *e) { free(e); }
void dev_event_record(dev_event *e, dev_stream *s) { e->time = s->dev->now; }
void dev_stream_wait_event(dev_stream *s, dev_event *e) { (void)s, (void)e; }

void dev_copy_h2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    (void)s;
    if (bytes) memcpy(dst, src, bytes);
}
void dev_copy_d2h(dev_stream *s, void *dst, const void *src, size_t bytes) {
    (void)s;
    if (bytes) memcpy(dst, src, bytes);
}
void dev_copy_d2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    (void)s;
    if (bytes) memmove(dst, src, bytes);
}
void dev_memset_zero(dev_stream *s, void *dst, size_t bytes) {
    (void)s;
    if (bytes) memset(dst, 0, bytes);
}

double dev_clock_now(dev_device *d) { return d->now; }
void dev_sleep(dev_device *d, double seconds) {
    if (seconds > 0) d->now += seconds;
}

_Noreturn void dev_rank_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    exit(code);
}
