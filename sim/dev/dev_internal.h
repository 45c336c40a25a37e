/* The twin device's structures, shared by its files: dev_sim.c (memory, streams, clock) and
 * dev_queue.c (copies and kernels, deferred to the rank's queue when the run has a worker pool). */
#ifndef TWINRUN_SIM_DEV_DEV_INTERNAL_H
#define TWINRUN_SIM_DEV_DEV_INTERNAL_H

#include <stdint.h>

#include "cost/cost_ledger.h"
#include "predict/shape_heap.h"
#include "sched/sched_internal.h"
#include "twinrun/dev.h"

#define DEV_SIM_ALIGN 64

/* Streams one device can tell apart (the default stream is slot 0): vector clocks are arrays of this
 * size. A training step needs a handful (compute, gradient reduce, parameter gather). */
enum { TWIN_STREAMS_MAX = 16 };

struct dev_stream {
    dev_device *dev;
    int id;       /* slot in the device's stream table (dev_streams.c); 0 = the default stream */
    double clock; /* side streams: when their last work ends; unused on the default stream (rank's now) */
};

struct dev_event {
    dev_device *dev;
    double time;                   /* simulated time at record: when the work recorded before it ends */
    bool recorded;                 /* never recorded: waiting on it waits for nothing (as in CUDA) */
    int stream;                    /* the slot it was recorded on */
    uint64_t vc[TWIN_STREAMS_MAX]; /* the recorded stream's vector clock then, its own entry included */
};

/* The bookkeeping of a device that has had a second stream (dev_streams.c, dev_hazard.c); NULL before. */
typedef struct twin_streams twin_streams;

typedef struct alloc_header alloc_header;

struct dev_device {
    int ordinal;
    twin_rank *owner;
    const twin_device_spec *spec; /* NULL for the implicit rank's plain twin-cpu device */
    size_t capacity;              /* 0 = unlimited */
    size_t used, peak;
    struct dev_stream default_stream;
    alloc_header *allocs; /* live allocations, newest first */
    dev_device *next_owned, *prev_owned;
    char last_error[256];
    dev_mem_tag tag;                    /* purpose of the next allocations */
    size_t tag_used[DEV_MEM_TAG_COUNT]; /* bytes in use per purpose */
    size_t tag_peak[DEV_MEM_TAG_COUNT]; /* tag_used when `peak` was reached */
    bool shape_only;                    /* predict mode: sizes without memory (dev.h) */
    bool deterministic;                 /* dev_set_deterministic: recorded, changes nothing here */
    bool capacity_from_spec;            /* capacity is the spec's memory (not set by the caller) */
    int background_sms;                 /* while a background stream is active: what the GEMMs leave it */
    int background_id;                  /* the stream dev_stream_set_background named; 0: none */
    double background_rate;             /* its kernels' speed beside the model's: 1 full (dev_streams.c) */
    shape_heap shape;                   /* shape-only allocations */
    twin_ledger *ledger;                /* TWINRUN_TWIN_PROFILE's, for one rank (cost_ledger.h) */
    twin_streams *streams;              /* NULL until dev_stream_create: the default stream alone */
    void (*reclaim_fn)(void *);         /* dev_set_reclaim: the owner's state, freed if it dies */
    void *reclaim_arg;
};

struct alloc_header {
    size_t bytes;
    uint64_t magic;
    alloc_header *prev, *next;
    int tag; /* dev_mem_tag at allocation */
    char pad[DEV_SIM_ALIGN - sizeof(size_t) - sizeof(uint64_t) - 2 * sizeof(void *) - sizeof(int)];
};
_Static_assert(sizeof(alloc_header) == DEV_SIM_ALIGN, "allocation header keeps user memory 64-byte aligned");

#define ALLOC_MAGIC 0x7477696e72756eULL /* "twinrun" */

/* dev_streams.c / dev_hazard.c, inside the device. */
void twin_streams_free(dev_device *d);
/* The host has waited for slot id's work (a sync, a copy to the host): everything enqueued from now
 * on, on any stream, is ordered after it. */
void twin_streams_host_saw(dev_device *d, int id);
/* Recorded accesses inside [p, p + bytes) are forgotten: the memory is freed (a later allocation
 * at the same address is other memory). */
void twin_streams_forget(dev_device *d, const void *p, size_t bytes);
/* The host waits for stream s (dev_stream_sync, a copy to the host): clocks and ordering. */
void twin_stream_host_wait(dev_stream *s);
/* Drops the recorded operations every stream (or the host) is now ordered after. */
void twin_streams_prune(dev_device *d);
/* The vector clock of slot id (TWIN_STREAMS_MAX entries), its own entry the slot's op count. */
void twin_streams_clock_of(const dev_device *d, int id, uint64_t vc[TWIN_STREAMS_MAX]);
/* Slot id is now ordered after everything vc counts. */
void twin_streams_saw(dev_device *d, int id, const uint64_t vc[TWIN_STREAMS_MAX]);

#endif
