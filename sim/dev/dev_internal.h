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

struct dev_stream {
    dev_device *dev;
};

struct dev_event {
    dev_device *dev;
    double time; /* simulated time at record */
};

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
    bool capacity_from_spec;            /* capacity is the spec's memory (not set by the caller) */
    shape_heap shape;                   /* shape-only allocations */
    twin_ledger *ledger;                /* TWINRUN_TWIN_PROFILE's, for one rank (cost_ledger.h) */
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

#endif
