/* Shape-only device memory: address ranges without memory (shape_heap.h). */
#include "predict/shape_heap.h"

#include <stdlib.h>

#define SHAPE_ALIGN ((uintptr_t)64)
/* Bit 62: a non-canonical x86-64 address (and far above any user mapping elsewhere), so a
 * dereference faults. 2^62 bytes of ranges before the counter could wrap: never in practice. */
#define SHAPE_BASE ((uintptr_t)1 << 62)

void *shape_heap_alloc(shape_heap *h, size_t bytes, int tag) {
    if (!h->next) h->next = SHAPE_BASE;
    if (h->n == h->cap) {
        /* compact first: freed entries only take room */
        if (h->dead > h->n / 2) {
            size_t w = 0;
            for (size_t i = 0; i < h->n; i++)
                if (h->blocks[i].live) h->blocks[w++] = h->blocks[i];
            h->n = w, h->dead = 0;
        }
        if (h->n == h->cap) {
            size_t cap = h->cap ? 2 * h->cap : 64;
            shape_block *b = realloc(h->blocks, cap * sizeof *b);
            if (!b) return NULL;
            h->blocks = b, h->cap = cap;
        }
    }
    const uintptr_t span = ((uintptr_t)bytes + SHAPE_ALIGN) / SHAPE_ALIGN * SHAPE_ALIGN; /* >= 64: distinct */
    const uintptr_t addr = h->next;
    h->next += span;
    h->blocks[h->n++] = (shape_block){.addr = addr, .bytes = bytes, .tag = tag, .live = true};
    return (void *)addr;
}

bool shape_heap_free(shape_heap *h, const void *p, size_t *bytes, int *tag) {
    const uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = h->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->blocks[mid].addr < a) lo = mid + 1;
        else hi = mid;
    }
    if (lo == h->n || h->blocks[lo].addr != a || !h->blocks[lo].live) return false;
    h->blocks[lo].live = false;
    h->dead++;
    *bytes = h->blocks[lo].bytes;
    *tag = h->blocks[lo].tag;
    return true;
}

void *shape_heap_first(const shape_heap *h) {
    for (size_t i = 0; i < h->n; i++)
        if (h->blocks[i].live) return (void *)h->blocks[i].addr;
    return NULL;
}

void shape_heap_release(shape_heap *h) {
    free(h->blocks);
    *h = (shape_heap){0};
}
