/* The twin's shape-only ("predict") device memory: allocations that are only addresses and sizes.
 *
 * The engine never dereferences device memory on the host, and in shape-only mode no kernel,
 * copy or collective touches it either, so an allocation needs no host memory behind it: it gets a
 * fresh range of a reserved, non-canonical address space (bit 62 set: any stray dereference faults
 * at once instead of reading someone's memory), distinct from every other live range of the device,
 * so the collectives' overlap checks and pointer arithmetic inside a buffer work as on a GPU.
 * Ranges are handed out in ascending order and never reused; the table keeps them sorted, and
 * dev_free finds one by binary search. */
#ifndef TWINRUN_SIM_PREDICT_SHAPE_HEAP_H
#define TWINRUN_SIM_PREDICT_SHAPE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct shape_block {
    uintptr_t addr;
    size_t bytes;
    int tag;   /* dev_mem_tag at allocation */
    bool live; /* false: freed (dropped at the next compaction) */
} shape_block;

typedef struct shape_heap {
    uintptr_t next;      /* the next range's start */
    shape_block *blocks; /* [n], ascending addr */
    size_t n, cap, dead;
} shape_heap;

/* A new range of `bytes` (64-byte aligned, 0 bytes still distinct) tagged `tag`; NULL when the
 * table cannot grow (host memory). */
void *shape_heap_alloc(shape_heap *h, size_t bytes, int tag);
/* Takes back the range starting at p: its bytes and tag in *bytes, *tag. false when p is not the start of
 * a live range (a double free, or a pointer shape_heap_alloc did not return). */
bool shape_heap_free(shape_heap *h, const void *p, size_t *bytes, int *tag);
/* The first live range (to reclaim a dead rank's memory); NULL when none. */
void *shape_heap_first(const shape_heap *h);
void shape_heap_release(shape_heap *h); /* the table itself */

#endif
