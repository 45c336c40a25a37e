/* Coroutine stacks: mmap'd, with an inaccessible guard page below so an overflow faults at once
 * instead of corrupting the neighbouring rank, and registered with valgrind so memcheck knows
 * the stack switches are deliberate. Pages are only backed when touched (MAP_NORESERVE), so a
 * generous virtual size costs nothing for ranks that do not use it. */
#ifndef TWINRUN_SIM_SCHED_STACK_H
#define TWINRUN_SIM_SCHED_STACK_H

#include <stddef.h>

typedef struct twin_stack {
    void *base;         /* start of the mapping (the guard page) */
    size_t mapped;      /* guard + usable bytes */
    void *usable;       /* first usable byte, just above the guard */
    size_t usable_size; /* bytes */
    unsigned valgrind_id;
} twin_stack;

/* Returns 0, or -1 when the mapping fails (too many ranks for the address space or map count). */
int twin_stack_alloc(twin_stack *s, size_t usable_bytes);
void twin_stack_free(twin_stack *s);

#endif
