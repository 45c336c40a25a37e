/* Binary min-heap on (time, rank): ties go to the lower rank, which is what makes the schedule
 * independent of insertion order. */
#include "rank_heap.h"

#include <stdlib.h>

#include "twinrun/err.h"

int rank_heap_init(rank_heap *h, int nranks) {
    h->n = 0;
    h->cap = nranks;
    h->ids = malloc(sizeof(int) * (size_t)nranks);
    h->keys = malloc(sizeof(double) * (size_t)nranks);
    h->pos = malloc(sizeof(int) * (size_t)nranks);
    if (!h->ids || !h->keys || !h->pos) {
        rank_heap_free(h);
        return -1;
    }
    for (int i = 0; i < nranks; i++) h->pos[i] = -1;
    return 0;
}

void rank_heap_free(rank_heap *h) {
    free(h->ids);
    free(h->keys);
    free(h->pos);
    h->ids = h->pos = NULL;
    h->keys = NULL;
    h->n = h->cap = 0;
}

static bool less(const rank_heap *h, int a, int b) {
    double ka = h->keys[a], kb = h->keys[b];
    return ka < kb || (ka == kb && a < b);
}

static void place(rank_heap *h, int i, int rank) {
    h->ids[i] = rank;
    h->pos[rank] = i;
}

static void sift_up(rank_heap *h, int i) {
    int r = h->ids[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!less(h, r, h->ids[parent])) break;
        place(h, i, h->ids[parent]);
        i = parent;
    }
    place(h, i, r);
}

static void sift_down(rank_heap *h, int i) {
    int r = h->ids[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && less(h, h->ids[c + 1], h->ids[c])) c++;
        if (!less(h, h->ids[c], r)) break;
        place(h, i, h->ids[c]);
        i = c;
    }
    place(h, i, r);
}

bool rank_heap_contains(const rank_heap *h, int rank) { return h->pos[rank] >= 0; }

void rank_heap_set(rank_heap *h, int rank, double t) {
    TR_CHECK(rank >= 0 && rank < h->cap, "rank outside the scheduler's heap");
    TR_CHECK(t == t, "scheduler key is NaN: a cost or sleep produced NaN");
    if (h->pos[rank] < 0) {
        h->keys[rank] = t;
        place(h, h->n++, rank);
        sift_up(h, h->n - 1);
        return;
    }
    double old = h->keys[rank];
    h->keys[rank] = t;
    if (t < old) sift_up(h, h->pos[rank]);
    else sift_down(h, h->pos[rank]);
}

void rank_heap_remove(rank_heap *h, int rank) {
    int i = h->pos[rank];
    if (i < 0) return;
    h->pos[rank] = -1;
    h->n--;
    if (i == h->n) return;
    int last = h->ids[h->n];
    place(h, i, last);
    sift_up(h, i);
    sift_down(h, h->pos[last]);
}

bool rank_heap_peek(const rank_heap *h, int *rank, double *t) {
    if (h->n == 0) return false;
    *rank = h->ids[0];
    *t = h->keys[h->ids[0]];
    return true;
}
