/* The memo of kern_init_param's results: kern_init_memo.h says why it is safe. A chained hash table
 * keyed by every field the generator reads, compared in full (the hash only picks the bucket). */
#include "kern_init_memo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/init_normal.h"

enum { MEMO_KEY_WORDS = 11, MEMO_BUCKETS = 4096 };

typedef struct memo_entry {
    struct memo_entry *next;
    uint64_t key[MEMO_KEY_WORDS];
    size_t n;
    float values[]; /* [n] */
} memo_entry;

/* A hit copies under the read side, so that the pool's threads copy at once rather than queue behind
 * one another's page faults (a copy first touches the rank's fresh memory); insertion, the clear and
 * reset take the write side, briefly: an entry is filled before it is listed. */
static struct init_memo {
    pthread_rwlock_t lock;
    memo_entry *table[MEMO_BUCKETS];
    kern_init_memo_stats stats;
} g_init_memo = {.lock = PTHREAD_RWLOCK_INITIALIZER}; /* docs/architecture.md#mutable-state */

/* Every input of the generator, as words: std by its bits (so -0.0 and NaN are told apart), n too. */
static void memo_key(const kern_init_desc *d, size_t n, uint64_t key[MEMO_KEY_WORDS]) {
    uint64_t std_bits;
    memcpy(&std_bits, &d->std, sizeof std_bits);
    const uint64_t k[MEMO_KEY_WORDS] = {d->key,
                                        std_bits,
                                        (uint64_t)d->cols,
                                        (uint64_t)d->gcols,
                                        (uint64_t)d->col0,
                                        (uint64_t)d->nseg,
                                        (uint64_t)d->seg_local1,
                                        (uint64_t)d->seg_global0,
                                        (uint64_t)d->seg_global1,
                                        (uint64_t)d->first,
                                        (uint64_t)n};
    memcpy(key, k, sizeof k);
}

static size_t memo_bucket(const uint64_t key[MEMO_KEY_WORDS]) {
    uint64_t h = 0;
    for (int i = 0; i < MEMO_KEY_WORDS; i++) h = tr_mix64(h ^ key[i]);
    return (size_t)(h & (MEMO_BUCKETS - 1));
}

/* The entry of key in bucket b, or NULL; g_init_memo.lock held (either side). */
static memo_entry *memo_find(size_t b, const uint64_t key[MEMO_KEY_WORDS]) {
    for (memo_entry *e = g_init_memo.table[b]; e; e = e->next)
        if (memcmp(e->key, key, sizeof e->key) == 0) return e;
    return NULL;
}

/* Frees every entry; g_init_memo.lock held for writing. */
static void memo_clear_locked(void) {
    for (size_t b = 0; b < MEMO_BUCKETS; b++) {
        for (memo_entry *e = g_init_memo.table[b], *next; e; e = next) {
            next = e->next;
            free(e);
        }
        g_init_memo.table[b] = NULL;
    }
    g_init_memo.stats.entries = 0;
    g_init_memo.stats.bytes = 0;
}

bool kern_init_memo_get(const kern_init_desc *d, size_t n, float *out) {
    if (!d->normal) return false;
    uint64_t key[MEMO_KEY_WORDS];
    memo_key(d, n, key);
    const size_t b = memo_bucket(key);
    pthread_rwlock_rdlock(&g_init_memo.lock);
    const memo_entry *e = memo_find(b, key);
    if (e) memcpy(out, e->values, n * sizeof(float)); /* under the lock: a clear may free e */
    __atomic_fetch_add(e ? &g_init_memo.stats.hits : &g_init_memo.stats.misses, 1,
                       __ATOMIC_RELAXED); /* readers at once */
    pthread_rwlock_unlock(&g_init_memo.lock);
    return e != NULL;
}

void kern_init_memo_put(const kern_init_desc *d, size_t n, const float *out) {
    const size_t bytes = n * sizeof(float);
    if (!d->normal || n == 0 || bytes > KERN_INIT_MEMO_BUDGET / 2) return;
    memo_entry *e = malloc(sizeof *e + bytes); /* filled outside the lock */
    if (!e) return;                            /* a memo is optional: no memory, no entry */
    memo_key(d, n, e->key);
    e->n = n;
    memcpy(e->values, out, bytes);
    const size_t b = memo_bucket(e->key);
    pthread_rwlock_wrlock(&g_init_memo.lock);
    if (memo_find(b, e->key)) { /* another thread computed the same call meanwhile: same bits */
        pthread_rwlock_unlock(&g_init_memo.lock);
        free(e);
        return;
    }
    if (g_init_memo.stats.bytes + bytes > KERN_INIT_MEMO_BUDGET) memo_clear_locked();
    e->next = g_init_memo.table[b];
    g_init_memo.table[b] = e;
    g_init_memo.stats.entries++;
    g_init_memo.stats.bytes += bytes;
    pthread_rwlock_unlock(&g_init_memo.lock);
}

kern_init_memo_stats kern_init_memo_stats_now(void) {
    pthread_rwlock_wrlock(&g_init_memo.lock); /* no reader counting meanwhile */
    const kern_init_memo_stats s = g_init_memo.stats;
    pthread_rwlock_unlock(&g_init_memo.lock);
    return s;
}

void kern_init_memo_reset(void) {
    pthread_rwlock_wrlock(&g_init_memo.lock);
    memo_clear_locked();
    g_init_memo.stats = (kern_init_memo_stats){0};
    pthread_rwlock_unlock(&g_init_memo.lock);
}
