/* The twin's device: host memory with a per-rank capacity and peak accounting, work that runs in
 * issue order (at launch, or on the rank's queue with a worker pool: dev_queue.c), and the owning
 * rank's simulated clock, which the default stream keeps (side streams: dev_streams.c).
 *
 * A device belongs to the rank that opened it (inside twin_run, the running coroutine; outside,
 * the implicit rank 0). Each allocation carries a header with its size and list links, so
 * dev_free accounts without a table and a rank that dies can have its memory reclaimed, as a
 * crashed process's would be. Time only moves when something advances it (collectives, the
 * kernel cost hook, dev_sleep); wall time never leaks in, so runs are reproducible. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost_ledger.h"
#include "dev_internal.h"
#include "twin_stream.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

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
    twin_sched *s = twin_sched_get();
    d->ordinal = ordinal;
    d->owner = twin_self();
    d->capacity = capacity;
    if (s) {
        d->spec = s->spec;
        d->capacity_from_spec = !capacity && !s->opt.device_capacity;
        if (!capacity)
            d->capacity = s->opt.device_capacity ? s->opt.device_capacity
                                                 : (size_t)((double)s->spec->mem_bytes * s->opt.capacity_scale);
    }
    d->default_stream.dev = d;
    d->ledger = twin_ledger_open(d->owner->id);
    d->next_owned = d->owner->devices;
    if (d->next_owned) d->next_owned->prev_owned = d;
    d->owner->devices = d;
    return d;
}

void dev_close(dev_device *d) {
    if (!d) return;
    /* Allocations still live are the caller's leak; detach them so dev_free cannot reach d. */
    for (alloc_header *h = d->allocs, *next; h; h = next) {
        next = h->next;
        h->prev = h->next = NULL;
    }
    if (d->prev_owned) d->prev_owned->next_owned = d->next_owned;
    else d->owner->devices = d->next_owned;
    if (d->next_owned) d->next_owned->prev_owned = d->prev_owned;
    shape_heap_release(&d->shape);
    twin_streams_free(d);
    twin_ledger_close(d->ledger, d->spec ? d->spec : twin_spec());
    free(d);
}

void dev_set_reclaim(dev_device *d, void (*fn)(void *arg), void *arg) {
    d->reclaim_fn = fn;
    d->reclaim_arg = fn ? arg : NULL;
}

void dev_twin_reclaim(twin_rank *r) {
    /* The owner's host state first (dev_set_reclaim): it may free buffers of these devices. Its
     * queued kernels may still read that state: they run first. The hook runs as the rank, so what it
     * calls finds its devices' owner as the running rank. */
    twin_sched *s = twin_sched_get();
    for (dev_device *d = r->devices; d; d = d->next_owned)
        if (d->reclaim_fn) {
            void (*fn)(void *) = d->reclaim_fn;
            d->reclaim_fn = NULL;
            twin_rank_drain(r);
            twin_rank *was = s ? s->current : NULL;
            if (s) s->current = r;
            fn(d->reclaim_arg);
            if (s) s->current = was;
        }
    while (r->devices) {
        dev_device *d = r->devices;
        while (d->allocs) dev_free(d, d->allocs + 1);
        for (void *p; (p = shape_heap_first(&d->shape));) dev_free(d, p);
        dev_close(d);
    }
}

void dev_get_info(const dev_device *d, dev_info *out) {
    memset(out, 0, sizeof *out);
    if (d->spec) snprintf(out->name, sizeof out->name, "%s rank %d", d->spec->full_name, d->owner->id);
    else snprintf(out->name, sizeof out->name, "twin-cpu:%d", d->ordinal);
    snprintf(out->backend, sizeof out->backend, "twin");
    out->capacity = d->capacity;
    out->count = twin_gpus_per_node();
    snprintf(out->simulated, sizeof out->simulated, "%s", (d->spec ? d->spec : twin_spec())->name);
    out->peak_bf16_flops = (d->spec ? d->spec : twin_spec())->bf16_flops;
    if (d->shape_only && d->capacity_from_spec && d->spec) out->runtime_bytes = d->spec->runtime_bytes;
    snprintf(out->versions, sizeof out->versions, "twin %s, simulated %s", TR_VERSION_NUMBER, out->simulated);
}

/* The twin's devices have no sensors: the doctor's health check is skipped with this reason. */
void dev_get_health(const dev_device *d, dev_health *out) {
    (void)d;
    memset(out, 0, sizeof *out);
    out->index = -1;
    snprintf(out->reason, sizeof out->reason, "the twin has no sensors");
}

/* The bytes of one allocation (n > 0) or free (n < 0) under its purpose; the parts at the peak. */
static void account(dev_device *d, size_t bytes, int tag, int sign) {
    if (sign < 0) {
        d->used -= bytes, d->tag_used[tag] -= bytes;
        return;
    }
    d->used += bytes, d->tag_used[tag] += bytes;
    if (d->used > d->peak) {
        d->peak = d->used;
        memcpy(d->tag_peak, d->tag_used, sizeof d->tag_peak);
    }
}

void *dev_alloc(dev_device *d, size_t bytes, const char *what) {
    if (d->shape_only) { /* no capacity check: the predict report compares the peak with it */
        void *p = shape_heap_alloc(&d->shape, bytes, (int)d->tag);
        if (!p)
            snprintf(d->last_error, sizeof d->last_error, "rank %d: out of host memory recording %s", d->owner->id,
                     what ? what : "?");
        else account(d, bytes, (int)d->tag, +1);
        return p;
    }
    if (d->capacity && (bytes > d->capacity || d->used > d->capacity - bytes)) {
        snprintf(d->last_error, sizeof d->last_error,
                 "rank %d: out of device memory allocating %zu bytes for %s: %zu of %zu bytes in use (peak %zu)",
                 d->owner->id, bytes, what ? what : "?", d->used, d->capacity, d->peak);
        return NULL;
    }
    const size_t rounded = (bytes + DEV_SIM_ALIGN - 1) / DEV_SIM_ALIGN * DEV_SIM_ALIGN;
    alloc_header *h = rounded < bytes ? NULL : aligned_alloc(DEV_SIM_ALIGN, sizeof(alloc_header) + rounded);
    if (!h) {
        snprintf(d->last_error, sizeof d->last_error, "rank %d: host allocation of %zu bytes for %s failed",
                 d->owner->id, bytes, what ? what : "?");
        return NULL;
    }
    h->bytes = bytes;
    h->magic = ALLOC_MAGIC;
    h->tag = (int)d->tag;
    h->prev = NULL;
    h->next = d->allocs;
    if (h->next) h->next->prev = h;
    d->allocs = h;
    account(d, bytes, h->tag, +1);
    return h + 1;
}

static void free_job(void *args) { free(*(void **)args); }

void dev_free(dev_device *d, void *p) {
    if (!p) return;
    if (d->shape_only) {
        size_t bytes;
        int tag;
        TR_CHECK(shape_heap_free(&d->shape, p, &bytes, &tag),
                 "dev_free of a pointer dev_alloc did not return (double free?)");
        account(d, bytes, tag, -1);
        twin_streams_forget(d, p, bytes);
        return;
    }
    alloc_header *h = (alloc_header *)p - 1;
    TR_CHECK(h->magic == ALLOC_MAGIC, "dev_free of a pointer dev_alloc did not return (double free?)");
    /* the hazard check forgets the memory: an allocation at the same address later is other memory */
    twin_streams_forget(d, p, h->bytes);
    h->magic = 0;
    if (h->prev) h->prev->next = h->next;
    else if (d->allocs == h) d->allocs = h->next;
    if (h->next) h->next->prev = h->prev;
    account(d, h->bytes, h->tag, -1);
    /* the accounting is now; the memory goes back after the work queued before the free has run */
    twin_rank_submit(d->owner, free_job, &h, sizeof h);
}

size_t dev_mem_used(const dev_device *d) { return d->used; }

dev_mem_tag dev_mem_tag_set(dev_device *d, dev_mem_tag tag) {
    TR_CHECK((int)tag >= 0 && tag < DEV_MEM_TAG_COUNT, "dev_mem_tag_set: unknown purpose");
    const dev_mem_tag was = d->tag;
    d->tag = tag;
    return was;
}

void dev_mem_peak_parts(const dev_device *d, size_t parts[DEV_MEM_TAG_COUNT]) {
    memcpy(parts, d->tag_peak, sizeof d->tag_peak);
}

int dev_set_shape_only(dev_device *d, char *err, size_t errlen) {
    if (d->used || d->allocs) return tr_errf(err, errlen, "shape-only mode must be set before the first allocation");
    const twin_sched *s = twin_sched_get();
    if (s && s->opt.remote) /* the transport between processes moves real bytes */
        return tr_errf(err, errlen,
                       "predict mode runs every rank in one process: drop the launcher (mpirun, torchrun) and "
                       "TWINRUN_RANKS_PER_PROCESS, and set only WORLD_SIZE");
    d->shape_only = true;
    /* A prediction answers "will it fit on the real device": there the CUDA context and libraries hold
     * part of the memory before the engine allocates (the spec's runtime_bytes, measured), so the rank may
     * allocate the rest, as the real build's capacity is the memory free when it opens the device. A
     * rehearsal at shrunk widths keeps the whole (its report's "of 80.00 GiB" stays the card's size). */
    if (d->capacity_from_spec && d->spec && s)
        d->capacity = (size_t)((double)(d->spec->mem_bytes - d->spec->runtime_bytes) * s->opt.capacity_scale);
    return 0;
}

bool dev_shape_only(const dev_device *d) { return d->shape_only; }
void dev_set_deterministic(dev_device *d, bool on) { d->deterministic = on; }
bool dev_deterministic(const dev_device *d) { return d->deterministic; }
bool twin_stream_shape_only(const dev_stream *s) { return s->dev->shape_only; }
size_t dev_mem_peak(const dev_device *d) { return d->peak; }
const char *dev_last_error(const dev_device *d) { return d->last_error; }

double dev_clock_now(dev_device *d) { return d->owner->now; }

double dev_busy_seconds(dev_device *d) { return d->owner->now - d->owner->coll_seconds; }

void dev_wait_split(dev_device *d, double *wait, double *comm) {
    *wait = d->owner->wait_seconds;
    *comm = d->owner->coll_seconds - d->owner->wait_seconds;
}

void dev_sleep(dev_device *d, double seconds) {
    TR_CHECK(seconds == seconds, "dev_sleep of NaN seconds");
    if (seconds <= 0) return;
    twin_rank *r = d->owner;
    const double t0 = r->now;
    r->now += seconds;
    if (r->trace) twin_trace_sleep(r->trace, t0, r->now);
    twin_log("%.9f r%d sleep %.9f", r->now, r->id, seconds);
    twin_sync(r); /* a blocking point: ranks with earlier clocks (and watchdogs) go first */
}

void dev_step_mark(dev_device *d, int64_t iteration) { twin_ledger_step(d->ledger, iteration); }

void twin_cost_kernel(dev_stream *s, const twin_kernel_cost *kc) {
    dev_device *d = s->dev;
    const twin_device_spec *spec = d->spec ? d->spec : twin_spec();
    double seconds = twin_kernel_cost_seconds(spec, kc);
    if (!s->id && d->background_sms > 0 && (kc->kind == TWIN_K_GEMM || kc->kind == TWIN_K_GEMM_FP8))
        seconds *= (double)spec->sms / (spec->sms - d->background_sms); /* on the multiprocessors it keeps */
    twin_ledger_kernel(d->ledger, spec, kc, seconds);
    if (seconds <= 0) return; /* a memset on an uncalibrated spec: free, and no trace event */
    twin_rank *r = d->owner;
    if (s->id) { /* a side stream: its own clock; the host's stays (dev_streams.c). Not traced yet. */
        const double t0 = twin_stream_start(s);
        if (s->id == d->background_id) seconds /= d->background_rate; /* it yields (dev_streams.c) */
        s->clock = t0 + seconds * twin_jitter(r->rng ^ (uint64_t)(t0 * 1e9));
        return;
    }
    const double t0 = r->now;
    r->now += seconds * twin_jitter(r->rng ^ (uint64_t)(r->now * 1e9));
    if (r->trace) twin_trace_compute(r->trace, t0, r->now);
}

#ifdef TWINRUN_COVERAGE
void __gcov_dump(void); /* libgcov (coverage builds): _Exit skips the atexit handler that writes the counters */
#endif

_Noreturn void dev_rank_abort(int code) {
    fflush(stdout);
    fflush(stderr);
    if (twin_pool_in_job()) { /* deferred work belongs to no running rank: nothing smaller can end */
        fputs("twinrun: fatal: the failure above was in a kernel's deferred work (twin worker pool): the process "
              "ends\n",
              stderr);
#ifdef TWINRUN_COVERAGE
        __gcov_dump();
#endif
        _Exit(code);
    }
    twin_sched *s = twin_sched_get();
    if (s && s->current) twin_rank_finish(s->current, RANK_FAILED, code);
    exit(code);
}

void dev_rank_note(const char *msg) {
    twin_sched *s = twin_sched_get();
    if (!s || !s->current || !msg || twin_pool_in_job()) return;
    free(s->current->fail_msg);
    s->current->fail_msg = strdup(msg);
}

_Noreturn void dev_rank_hang(void) {
    if (!twin_active()) tr_fatal("a hang was injected outside a twin run: the process would never end");
    twin_hang_forever();
}
