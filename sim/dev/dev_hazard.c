/* The stream hazard check (docs/twin.md#streams): an operation that touches bytes another stream's
 * unordered operation writes (or, when it writes, reads or writes) is a stream race, the bug that
 * only shows on a real GPU because the twin runs everything in issue order. Reported as a fatal error
 * of the rank naming both streams, the allocation and both operations, with the fix.
 *
 * Recording starts with the device's first side stream (dev_streams.c); until then every call
 * returns at once. Operations are kept until every live stream, or the host, is ordered after them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_internal.h"
#include "dev_streams.h"
#include "twinrun/err.h"

/* [lo, hi) of the overlap of two ranges; false when they do not overlap. */
static bool overlap(const twin_access *a, const twin_access *b, uintptr_t *lo, uintptr_t *hi) {
    const uintptr_t a0 = (uintptr_t)a->p, a1 = a0 + a->bytes, b0 = (uintptr_t)b->p, b1 = b0 + b->bytes;
    *lo = a0 > b0 ? a0 : b0;
    *hi = a1 < b1 ? a1 : b1;
    return *lo < *hi;
}

/* "bytes [64, 128) of a 4096-byte main_grads allocation": the allocation holding [lo, hi). */
static void describe_buffer(const dev_device *d, uintptr_t lo, uintptr_t hi, char *buf, size_t n) {
    for (const alloc_header *h = d->allocs; h; h = h->next) {
        const uintptr_t base = (uintptr_t)(h + 1);
        if (lo >= base && lo < base + h->bytes) {
            /* no address: reports are byte-identical run to run */
            snprintf(buf, n, "bytes [%zu, %zu) of a %zu-byte %s allocation", (size_t)(lo - base), (size_t)(hi - base),
                     h->bytes, dev_mem_tag_name((dev_mem_tag)h->tag));
            return;
        }
    }
    snprintf(buf, n, "%zu bytes outside its allocations", (size_t)(hi - lo)); /* shape-only mode */
}

static void describe_op(const char *what, const char *detail, char *buf, size_t n) {
    if (detail) snprintf(buf, n, "%s on '%s'", what, detail);
    else snprintf(buf, n, "%s", what);
}

_Noreturn static void race(dev_device *d, int a, const char *what, const char *detail, const twin_access *mine, int b,
                           const twin_op_rec *x, const twin_access *theirs, uintptr_t lo, uintptr_t hi) {
    const twin_streams *t = d->streams;
    char buf[160], op_a[96], op_b[96];
    describe_buffer(d, lo, hi, buf, sizeof buf);
    describe_op(what, detail, op_a, sizeof op_a);
    describe_op(x->what, x->detail, op_b, sizeof op_b);
    const char *sa = t->slot[a].name, *sb = t->slot[b].name;
    tr_fatal("stream race on rank %d: %s on stream '%s' %s %s, which %s on stream '%s' (its operation %llu) %s "
             "with no event between them. Record an event on '%s' after %s and dev_stream_wait_event on '%s' "
             "before %s (or dev_stream_sync '%s' first)",
             d->owner->id, op_a, sa, mine->write ? "writes" : "reads", buf, op_b, sb, (unsigned long long)x->seq,
             theirs->write ? "writes" : "reads", sb, op_b, sa, op_a, sb);
}

/* The new operation's ranges against slot b's pending operations not ordered before slot a. */
static void check_slot(dev_device *d, int a, int b, const char *what, const char *detail, const twin_access *acc,
                       int n) {
    const stream_slot *sl = &d->streams->slot[b];
    for (size_t i = sl->head; i < sl->n; i++) {
        const twin_op_rec *x = &sl->ops[i];
        if (twin_streams_ordered(d->streams, a, b, x->seq)) continue;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < x->nacc; j++) {
                uintptr_t lo, hi;
                if ((acc[k].write || x->acc[j].write) && overlap(&acc[k], &x->acc[j], &lo, &hi))
                    race(d, a, what, detail, &acc[k], b, x, &x->acc[j], lo, hi);
            }
    }
}

static twin_op_rec *append(dev_device *d, stream_slot *sl) {
    if (sl->n - sl->head >= TWIN_STREAM_OPS_MAX) twin_streams_prune(d);
    if (sl->n - sl->head >= TWIN_STREAM_OPS_MAX) sl->head++, sl->dropped++; /* bounded: the oldest goes */
    /* compact only when that frees at least half the array: at the bound every append drops one, and
     * moving the whole array each time made a 64-micro-batch step spend 95% of its time in memmove */
    if (sl->n == sl->cap && sl->head >= sl->cap / 2) {
        memmove(sl->ops, sl->ops + sl->head, (sl->n - sl->head) * sizeof *sl->ops);
        sl->n -= sl->head;
        sl->head = 0;
    }
    if (sl->n == sl->cap) {
        const size_t cap = sl->cap ? 2 * sl->cap : 16;
        twin_op_rec *ops = realloc(sl->ops, cap * sizeof *ops);
        TR_CHECK(ops != NULL, "out of host memory recording stream operations");
        sl->ops = ops;
        sl->cap = cap;
    }
    return &sl->ops[sl->n++];
}

void twin_stream_op(dev_stream *s, const char *what, const char *detail, const twin_access *acc, int n) {
    dev_device *d = s->dev;
    if (!d->streams) return; /* the default stream alone: nothing can race */
    TR_CHECK(n >= 0 && n <= TWIN_OP_ACCESS_MAX, "an operation declares more ranges than the twin records");
    twin_access keep[TWIN_OP_ACCESS_MAX];
    int m = 0;
    for (int k = 0; k < n; k++)
        if (acc[k].p && acc[k].bytes) keep[m++] = acc[k];
    if (!m) return;
    const int a = s->id;
    for (int b = 0; b < TWIN_STREAMS_MAX; b++)
        if (b != a) check_slot(d, a, b, what, detail, keep, m);
    stream_slot *sl = &d->streams->slot[a];
    twin_op_rec *x = append(d, sl);
    x->seq = ++sl->seq;
    x->what = what;
    x->detail = detail;
    x->nacc = m;
    memcpy(x->acc, keep, (size_t)m * sizeof *keep);
}

/* Every live stream other than b, or the host, is ordered after operation seq of slot b. */
static bool settled(const twin_streams *t, int b, uint64_t seq) {
    if (seq <= t->host_seen[b]) return true;
    for (int a = 0; a < TWIN_STREAMS_MAX; a++)
        if (a != b && t->slot[a].stream && seq > t->slot[a].seen[b]) return false;
    return true;
}

void twin_streams_prune(dev_device *d) {
    twin_streams *t = d->streams;
    for (int b = 0; b < TWIN_STREAMS_MAX; b++) {
        stream_slot *sl = &t->slot[b];
        while (sl->head < sl->n && settled(t, b, sl->ops[sl->head].seq)) sl->head++;
        if (sl->head == sl->n) sl->head = sl->n = 0;
    }
}

void twin_streams_forget(dev_device *d, const void *p, size_t bytes) {
    if (!d->streams) return;
    const twin_access freed = {p, bytes, true};
    for (int b = 0; b < TWIN_STREAMS_MAX; b++) {
        stream_slot *sl = &d->streams->slot[b];
        for (size_t i = sl->head; i < sl->n; i++)
            for (int j = 0; j < sl->ops[i].nacc; j++) {
                uintptr_t lo, hi;
                if (overlap(&freed, &sl->ops[i].acc[j], &lo, &hi)) sl->ops[i].acc[j].bytes = 0;
            }
    }
}
