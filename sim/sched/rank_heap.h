/* A min-heap of ranks keyed by (time, rank id): the scheduler's "who runs next" and "whose
 * watchdog fires next" in one order. Each rank is in it at most once; its key can change. */
#ifndef TWINRUN_SIM_SCHED_RANK_HEAP_H
#define TWINRUN_SIM_SCHED_RANK_HEAP_H

#include <stdbool.h>

typedef struct rank_heap {
    int n, cap;
    int *ids;     /* heap order */
    double *keys; /* keys[rank] */
    int *pos;     /* pos[rank]: index in ids, -1 when absent */
} rank_heap;

int rank_heap_init(rank_heap *h, int nranks);
void rank_heap_free(rank_heap *h);
bool rank_heap_contains(const rank_heap *h, int rank);
/* Inserts rank with key t, or moves it to key t if present. */
void rank_heap_set(rank_heap *h, int rank, double t);
void rank_heap_remove(rank_heap *h, int rank);
/* The minimum; false when empty. */
bool rank_heap_peek(const rank_heap *h, int *rank, double *t);

#endif
