/* dev.h on the CUDA (or MUSA) runtime: one device per rank, accounted allocations, streams and
 * events, copies, and the wall clock.
 *
 * - dev_open selects the device (cudaSetDevice) and sets the capacity to min(requested, free
 *   memory); capacity 0 asks for all free memory. Kernel launches use the calling thread's current
 *   device, so one process drives one device (the real-mode layout: one rank per process).
 * - Every dev_alloc is recorded (pointer -> bytes) so dev_free can account and catch foreign or
 *   double frees; the out-of-memory message names the allocation, the request and the usage.
 *   Allocations of 0 bytes return a distinct 1-byte allocation (counted as 0), as the twin returns
 *   a valid pointer for them.
 * - The default stream is a non-blocking stream the device owns (never the legacy NULL stream, which
 *   would serialise with every other stream).
 * - dev_clock_now is CLOCK_MONOTONIC wall time; dev_sleep really sleeps. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/background_sms.h"
#include "cuda_check.h"
#include "cuda_dev.h"
#include "kern_attention_cudnn.h"
#include "gpu_profile.h"

/* ---- failure path ---------------------------------------------------------------------- */

extern "C" const char *tr_cu_hint(cudaError_t e) {
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "the device is out of memory: lower --micro-batch-size or use more model parallelism";
    case cudaErrorInvalidDevice:
    case cudaErrorNoDevice:
        return "no such device: check CUDA_VISIBLE_DEVICES / LOCAL_RANK and the GPUs nvidia-smi lists";
    case cudaErrorInsufficientDriver:
        return "no NVIDIA driver is loaded (no GPU on this machine?), or it is older than the CUDA runtime this "
               "was built with: check nvidia-smi, update the driver";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
        return "a kernel faulted (bad pointer, out-of-range index or token id); the error is sticky: rerun "
               "with CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer to find which kernel";
    case cudaErrorAssert:
        return "a device-side check failed (see the message printed above it, e.g. a token outside the "
               "vocabulary)";
    case cudaErrorInvalidConfiguration:
        return "a kernel was launched with an impossible grid/block: a tensor dimension is zero, negative or "
               "too large";
    case cudaErrorInvalidValue:
        return "an argument was invalid (a NULL or host pointer where a device pointer belongs?)";
    default:
        return "see the CUDA runtime documentation for this error";
    }
}

extern "C" void tr_cu_fail(const char *file, int line, const char *lib, const char *call, int status,
                           const char *detail, const char *hint) {
    fprintf(stderr, "twinrun: fatal: %s:%d: %s call `%s` failed: status %d (%s)\n  hint: %s\n", file, line, lib,
            call, status, detail ? detail : "no message", hint ? hint : "-");
    dev_rank_abort(TR_EXIT_FATAL);
}

/* The collectives' watchdog is ending the process (dump, abort, exit 1): this thread must not race
 * its exit with another status or go on as if its work had finished. Bounded: with
 * TWINRUN_COLL_ON_TIMEOUT=return the watchdog goes on, and so does the caller. */
static void wait_while_process_ends(void) {
    for (int i = 0; i < 1000 && tr_cu_process_ending(); i++) usleep(10000);
}

extern "C" void dev_rank_abort(int code) {
    wait_while_process_ends(); /* a call that failed on an aborted communicator */
    fflush(stdout);
    fflush(stderr);
    exit(code);
}

extern "C" void dev_rank_note(const char *msg) { (void)msg; /* already on stderr */ }

/* Sleeps without touching the GPU or the communicators, so peers see exactly a stuck rank. */
extern "C" void dev_rank_hang(void) {
    fflush(stdout);
    fflush(stderr);
    for (;;) pause();
}

/* ---- allocation table ------------------------------------------------------------------ */

static size_t ptr_hash(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)(x & (cap - 1)); /* cap is a power of two */
}

static void tab_insert_raw(tr_cu_alloc *tab, size_t cap, void *p, size_t bytes, int tag) {
    size_t i = ptr_hash(p, cap);
    while (tab[i].p != NULL && tab[i].p != TR_CU_TOMBSTONE) i = (i + 1) & (cap - 1);
    tab[i].p = p;
    tab[i].bytes = bytes;
    tab[i].tag = tag;
}

/* Keeps (live + dead) below half the capacity. */
static bool tab_reserve(dev_device *d) {
    if ((d->tab_live + d->tab_dead + 1) * 2 <= d->tab_cap) return true;
    size_t cap = d->tab_cap ? d->tab_cap : 256;
    while ((d->tab_live + 1) * 2 > cap / 2) cap *= 2;
    tr_cu_alloc *nt = (tr_cu_alloc *)calloc(cap, sizeof *nt);
    if (!nt) return false;
    for (size_t i = 0; i < d->tab_cap; i++)
        if (d->tab[i].p != NULL && d->tab[i].p != TR_CU_TOMBSTONE) tab_insert_raw(nt, cap, d->tab[i].p, d->tab[i].bytes, d->tab[i].tag);
    free(d->tab);
    d->tab = nt;
    d->tab_cap = cap;
    d->tab_dead = 0;
    return true;
}

static tr_cu_alloc *tab_find(const dev_device *d, const void *p) {
    if (!d->tab_cap) return NULL;
    size_t i = ptr_hash(p, d->tab_cap);
    while (d->tab[i].p != NULL) {
        if (d->tab[i].p == p) return &d->tab[i];
        i = (i + 1) & (d->tab_cap - 1);
    }
    return NULL;
}

/* ---- device ------------------------------------------------------------------------------ */

/* Streams are made non-blocking (no implicit sync with the legacy default stream), at priority `prio`. */
static cudaError_t stream_create(cudaStream_t *st, int prio) {
    return cudaStreamCreateWithPriority(st, cudaStreamNonBlocking, prio);
}

/* The stream priorities, and the multiprocessors a GEMM leaves to an active background stream
 * (TWINRUN_BACKGROUND_SMS, core/background_sms.h). Returns 0, or -1 with err set. */
static int background_sms_of(dev_device *d, char *err, size_t errlen) {
    if (cudaDeviceGetStreamPriorityRange(&d->prio_low, &d->prio_high) != cudaSuccess) {
        (void)cudaGetLastError(); /* no priorities: every stream at 0, the background too */
        d->prio_high = d->prio_low = 0;
    }
    d->background_sms = tr_background_sms(d->nsm, err, errlen);
    return d->background_sms < 0 ? -1 : 0;
}

extern "C" dev_device *dev_open(int ordinal, size_t capacity, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        tr_errf(err, errlen, "dev_open: no usable %s device: %s (%s)", TWINRUN_GPU_BACKEND, cudaGetErrorString(e),
                tr_cu_hint(e));
        return NULL;
    }
    if ((ordinal = tr_cu_pick_device(ordinal, count, err, errlen)) < 0) return NULL;
    if (ordinal < 0 || ordinal >= count) {
        tr_errf(err, errlen,
                "dev_open: device ordinal %d does not exist: this process sees %d device(s); check LOCAL_RANK "
                "and CUDA_VISIBLE_DEVICES",
                ordinal, count);
        return NULL;
    }
    if ((e = cudaSetDevice(ordinal)) != cudaSuccess) {
        tr_errf(err, errlen, "dev_open: cudaSetDevice(%d): %s (%s)", ordinal, cudaGetErrorString(e), tr_cu_hint(e));
        return NULL;
    }
    size_t free_b = 0, total_b = 0;
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
        tr_errf(err, errlen, "dev_open: cudaMemGetInfo on device %d: %s (%s)", ordinal, cudaGetErrorString(e),
                tr_cu_hint(e));
        return NULL;
    }
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    if ((e = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
        tr_errf(err, errlen, "dev_open: cudaGetDeviceProperties(%d): %s", ordinal, cudaGetErrorString(e));
        return NULL;
    }
    /* Kernel scratch comes from the default pool (cudaMallocAsync); by default the pool hands its
     * memory back to the driver at every synchronisation and maps it again for the next step's
     * scratch. Keep it: scratch is small and reused every step. */
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError(); /* a driver without pools: scratch still works, only slower */
    dev_device *d = (dev_device *)calloc(1, sizeof *d);
    if (!d) {
        tr_errf(err, errlen, "dev_open: out of host memory");
        return NULL;
    }
    d->ordinal = ordinal;
    d->capacity = capacity && capacity < free_b ? capacity : free_b;
    d->runtime_bytes = total_b - free_b; /* the context just created, and whatever else holds the GPU */
    snprintf(d->name, sizeof d->name, "%.63s", prop.name);
    d->nsm = prop.multiProcessorCount;
    if (background_sms_of(d, err, errlen) != 0) {
        free(d);
        return NULL;
    }
    d->default_stream.dev = d;
    if ((e = stream_create(&d->default_stream.st, d->prio_high)) != cudaSuccess) {
        tr_errf(err, errlen, "dev_open: creating the default stream on device %d: %s", ordinal,
                cudaGetErrorString(e));
        free(d);
        return NULL;
    }
    return d;
}

extern "C" void dev_close(dev_device *d) {
    if (!d) return;
    if (d->wd_close) d->wd_close(d);
    if (d->flight_free) d->flight_free(d);
    CU_CHECK(cudaStreamSynchronize(d->default_stream.st));
    tr_prof_close(d);
    if (d->blas_free) d->blas_free(d->blas);
    if (d->dnn_free) d->dnn_free(d->dnn);
    for (size_t i = 0; i < d->tab_cap; i++)
        if (d->tab[i].p != NULL && d->tab[i].p != TR_CU_TOMBSTONE) CU_CHECK(cudaFree(d->tab[i].p));
    CU_CHECK(cudaStreamDestroy(d->default_stream.st));
    free(d->tab);
    free(d);
}

extern "C" void dev_get_info(const dev_device *d, dev_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.63s", d->name);
    snprintf(out->backend, sizeof out->backend, "%s", TWINRUN_GPU_BACKEND);
    out->capacity = d->capacity;
    out->runtime_bytes = d->runtime_bytes;
    if (cudaGetDeviceCount(&out->count) != cudaSuccess) out->count = 0;
    /* versions are MAJOR*1000 + MINOR*10, CUDA's and MUSA's runtimes alike */
    int drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    char ccl[32];
    tr_cu_ccl_version(ccl, sizeof ccl);
    snprintf(out->versions, sizeof out->versions, "driver %d.%d, runtime %d.%d, %s", drv / 1000, drv % 1000 / 10,
             rt / 1000, rt % 1000 / 10, ccl);
}

/* ---- memory ------------------------------------------------------------------------------ */

extern "C" void *dev_alloc(dev_device *d, size_t bytes, const char *what) {
    what = what ? what : "?";
    if (bytes > d->capacity || d->used > d->capacity - bytes) {
        snprintf(d->last_error, sizeof d->last_error,
                 "out of device memory allocating %zu bytes for %s: %zu of %zu bytes in use (peak %zu) on %s:%d", bytes,
                 what, d->used, d->capacity, d->peak, d->name, d->ordinal);
        return NULL;
    }
    if (!tab_reserve(d)) {
        snprintf(d->last_error, sizeof d->last_error, "out of host memory recording the allocation for %s", what);
        return NULL;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess || !p) {
        (void)cudaGetLastError(); /* clear a non-sticky allocation error */
        snprintf(d->last_error, sizeof d->last_error,
                 "cudaMalloc of %zu bytes for %s failed: %s; %zu of %zu accounted bytes in use (peak %zu) on %s:%d "
                 "(another process on this GPU?)",
                 bytes, what, cudaGetErrorString(e), d->used, d->capacity, d->peak, d->name, d->ordinal);
        return NULL;
    }
    tab_insert_raw(d->tab, d->tab_cap, p, bytes, d->tag);
    d->tab_live++;
    d->used += bytes;
    d->tag_used[d->tag] += bytes;
    if (d->used > d->peak) {
        d->peak = d->used;
        memcpy(d->tag_peak, d->tag_used, sizeof d->tag_peak);
    }
    tr_prof_mem(d, what);
    return p;
}

extern "C" void dev_free(dev_device *d, void *p) {
    if (!p) return;
    tr_cu_alloc *a = tab_find(d, p);
    if (!a) {
        fprintf(stderr, "twinrun: fatal: dev_free(%p): not a live allocation of this device (double free, or a "
                        "pointer dev_alloc did not return)\n", p);
        dev_rank_abort(TR_EXIT_FATAL);
    }
    d->used -= a->bytes;
    d->tag_used[a->tag] -= a->bytes;
    tr_cu_cudnn_forget(p); /* a layout read from this buffer is no longer its content's */
    a->p = TR_CU_TOMBSTONE;
    a->bytes = 0;
    d->tab_live--;
    d->tab_dead++;
    if (d->wd_quiesce) d->wd_quiesce(d); /* asynchronous collectives still using p finish first */
    CU_CHECK(cudaFree(p));
}

extern "C" size_t dev_mem_used(const dev_device *d) { return d->used; }

extern "C" dev_mem_tag dev_mem_tag_set(dev_device *d, dev_mem_tag tag) {
    if ((int)tag < 0 || tag >= DEV_MEM_TAG_COUNT) {
        fprintf(stderr, "twinrun: fatal: dev_mem_tag_set: unknown purpose %d\n", (int)tag);
        dev_rank_abort(TR_EXIT_FATAL);
    }
    const dev_mem_tag was = (dev_mem_tag)d->tag;
    d->tag = (int)tag;
    return was;
}

extern "C" void dev_mem_peak_parts(const dev_device *d, size_t parts[DEV_MEM_TAG_COUNT]) {
    memcpy(parts, d->tag_peak, sizeof d->tag_peak);
}

/* Predict mode is the twin's: a real device always computes. */
/* One process per rank: a rank that dies takes its host state with it, and nothing is left to call. */
extern "C" void dev_set_reclaim(dev_device *d, void (*fn)(void *arg), void *arg) {
    (void)d, (void)fn, (void)arg;
}

extern "C" int dev_set_shape_only(dev_device *d, char *err, size_t errlen) {
    (void)d;
    snprintf(err, errlen,
             "--predict needs the twin build (build/twin/bin/train_llama3): this binary drives a real %s device",
             TWINRUN_GPU_BACKEND);
    return -1;
}

extern "C" bool dev_shape_only(const dev_device *d) {
    (void)d;
    return false;
}

extern "C" void dev_set_deterministic(dev_device *d, bool on) { d->deterministic = on; }

extern "C" bool dev_deterministic(const dev_device *d) { return d->deterministic; }
extern "C" size_t dev_mem_peak(const dev_device *d) { return d->peak; }
extern "C" const char *dev_last_error(const dev_device *d) { return d->last_error; }

extern "C" void *tr_cu_scratch(dev_stream *s, size_t bytes, const char *what) {
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, tr_cu_stream(s));
    if (e != cudaSuccess) {
        char call[128];
        snprintf(call, sizeof call, "cudaMallocAsync(%zu bytes of scratch for %s)", bytes, what);
        tr_cu_fail(__FILE__, __LINE__, "cuda", call, (int)e, cudaGetErrorString(e), tr_cu_hint(e));
    }
    return p;
}

extern "C" void tr_cu_scratch_free(dev_stream *s, void *p) {
    if (p) CU_CHECK(cudaFreeAsync(p, tr_cu_stream(s)));
}

/* ---- streams and events -------------------------------------------------------------------- */

extern "C" cudaStream_t tr_cu_stream(dev_stream *s) {
    if (!s) {
        fprintf(stderr, "twinrun: fatal: a kernel or copy was given a NULL dev_stream\n");
        dev_rank_abort(TR_EXIT_FATAL);
    }
    return s->st;
}

extern "C" dev_stream *dev_stream_default(dev_device *d) { return &d->default_stream; }

extern "C" void dev_stream_set_name(dev_stream *s, const char *name) { (void)s, (void)name; }

extern "C" dev_stream *dev_stream_create(dev_device *d) {
    dev_stream *s = (dev_stream *)calloc(1, sizeof *s);
    if (!s) tr_fatal("out of host memory creating a stream");
    s->dev = d;
    CU_CHECK(stream_create(&s->st, d->prio_high));
    return s;
}

/* A GEMM's persistent blocks fill every multiprocessor, as the update's do: without a share set aside the
 * two run one after the other however their streams are ordered. Priorities make the freed
 * multiprocessors go to the foreground's blocks first; the GEMMs' SM-count target leaves the background
 * its share (kern_gemm_cublaslt.cu). */
extern "C" void dev_stream_set_background(dev_stream *s, bool active) {
    dev_device *d = s->dev;
    if (!s->background && s != &d->default_stream) {
        CU_CHECK(cudaStreamSynchronize(s->st)); /* a new queue at the lowest priority, the old one idle */
        CU_CHECK(cudaStreamDestroy(s->st));
        CU_CHECK(stream_create(&s->st, d->prio_low));
        s->background = true;
    }
    d->sms_reserved = active && s->background ? d->background_sms : 0;
}

extern "C" void dev_stream_destroy(dev_stream *s) {
    if (!s || s == &s->dev->default_stream) return;
    CU_CHECK(cudaStreamDestroy(s->st));
    free(s);
}

extern "C" void dev_stream_sync(dev_stream *s) {
    CU_CHECK(cudaStreamSynchronize(tr_cu_stream(s)));
    /* the watchdog releases an injected GPU hang (TWINRUN_COLL_HANG) so that its abort is not held up:
     * the stream then completes, which a real hang never does — the caller must see a hang, not a result */
    wait_while_process_ends();
}
extern "C" dev_device *dev_stream_device(dev_stream *s) { return s->dev; }

extern "C" dev_event *dev_event_create(dev_device *d) {
    dev_event *e = (dev_event *)calloc(1, sizeof *e);
    if (!e) tr_fatal("out of host memory creating an event");
    e->dev = d;
    CU_CHECK(cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming));
    return e;
}

extern "C" void dev_event_destroy(dev_event *e) {
    if (!e) return;
    CU_CHECK(cudaEventDestroy(e->ev));
    free(e);
}

extern "C" void dev_event_record(dev_event *e, dev_stream *s) { CU_CHECK(cudaEventRecord(e->ev, tr_cu_stream(s))); }
extern "C" void dev_stream_wait_event(dev_stream *s, dev_event *e) {
    CU_CHECK(cudaStreamWaitEvent(tr_cu_stream(s), e->ev, 0));
}

/* ---- copies ---------------------------------------------------------------------------------- */

extern "C" void dev_copy_h2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    TR_PROF(s, "copy h2d");
    if (bytes) CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, tr_cu_stream(s)));
}
extern "C" void dev_copy_d2h(dev_stream *s, void *dst, const void *src, size_t bytes) {
    TR_PROF(s, "copy d2h");
    if (bytes) CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, tr_cu_stream(s)));
}
/* Overlapping ranges behave like memmove (as in the twin): cudaMemcpy leaves overlap undefined, so
 * those go through a stream-ordered bounce buffer. */
extern "C" void dev_copy_d2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    TR_PROF(s, "copy d2d");
    if (!bytes || dst == src) return;
    const uintptr_t a = (uintptr_t)dst, b = (uintptr_t)src;
    if (a < b + bytes && b < a + bytes) {
        void *tmp = tr_cu_scratch(s, bytes, "overlapping dev_copy_d2d");
        CU_CHECK(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
        CU_CHECK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
        tr_cu_scratch_free(s, tmp);
        return;
    }
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
}
extern "C" void dev_memset_zero(dev_stream *s, void *dst, size_t bytes) {
    TR_PROF(s, "memset");
    if (bytes) CU_CHECK(cudaMemsetAsync(dst, 0, bytes, tr_cu_stream(s)));
}

/* ---- clock ------------------------------------------------------------------------------------ */

extern "C" double dev_clock_now(dev_device *d) {
    (void)d;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

extern "C" double dev_busy_seconds(dev_device *d) { return dev_clock_now(d); }

extern "C" void dev_wait_split(dev_device *d, double *wait, double *comm) {
    (void)d;
    *wait = *comm = 0.0; /* no per-call timing in the real build (dev.h) */
}

extern "C" void dev_step_mark(dev_device *d, int64_t iteration) { tr_prof_step(d, (long long)iteration); }

extern "C" void dev_sleep(dev_device *d, double seconds) {
    (void)d;
    if (!(seconds > 0)) return;
    struct timespec req, rem;
    req.tv_sec = (time_t)seconds;
    req.tv_nsec = (long)((seconds - (double)req.tv_sec) * 1e9);
    if (req.tv_nsec >= 1000000000L) req.tv_nsec = 999999999L;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR) req = rem;
}
