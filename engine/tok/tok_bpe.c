/* Byte-pair encoding of one pre-tokenized piece, as `tokenizers`' BPE model (word.rs merge_all):
 * start from the piece's bytes, one token each; repeatedly merge the adjacent pair of lowest rank, the
 * leftmost of equal ranks, until no adjacent pair has a merge. A heap of candidate merges keeps it
 * O(n log n) for long pieces; an entry made stale by an earlier merge is skipped when popped. */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"

int tr_tok_buf_push(tr_tok_buf *b, int32_t id) {
    if (b->n == b->cap) {
        int64_t nc = b->cap ? 2 * b->cap : 1024;
        int32_t *ids = realloc(b->ids, (size_t)nc * sizeof *ids);
        if (!ids) return -1;
        b->ids = ids;
        b->cap = nc;
    }
    b->ids[b->n++] = id;
    return 0;
}

typedef struct {
    int32_t rank, pos, id;
} cand;

static bool before(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(cand *h, int64_t *n, cand c) {
    int64_t i = (*n)++;
    while (i > 0 && before(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, int64_t *n) {
    cand top = h[0], last = h[--*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(const tr_tok *t, cand *h, int64_t *nh, const int32_t *id, int32_t pos, int32_t next) {
    const tr_tok_merge *m = tr_tok_merge_get(t, id[pos], id[next]);
    if (m) heap_push(h, nh, (cand){m->rank, pos, m->id});
}

/* Scratch for n bytes: ids, next and prev links [n] each, then the heap (at most 3n entries: the
 * first n - 1 pairs and two new ones per merge). */
static int scratch(tr_tok_buf *b, size_t n) {
    int64_t need = (int64_t)n * 3 + (int64_t)n * 3 * (int64_t)(sizeof(cand) / sizeof(int32_t));
    if (need <= b->symcap) return 0;
    int32_t *s = realloc(b->sym, (size_t)need * sizeof *s);
    if (!s) return -1;
    b->sym = s;
    b->symcap = need;
    return 0;
}

int tr_tok_bpe(const tr_tok *t, tr_tok_buf *b, const unsigned char *bytes, size_t n) {
    if (n == 1) return tr_tok_buf_push(b, t->byte_id[bytes[0]]);
    if (t->ignore_merges) {
        int32_t whole = tr_tok_map_get(&t->raw, (const char *)bytes, n);
        if (whole >= 0) return tr_tok_buf_push(b, whole);
    }
    if (n > INT32_MAX / 16 || scratch(b, n)) return -1;
    int32_t *id = b->sym, *next = id + n, *prev = next + n;
    cand *h = (cand *)(prev + n);
    int64_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        id[i] = t->byte_id[bytes[i]];
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, h, &nh, id, (int32_t)i, (int32_t)i + 1);
    while (nh > 0) {
        cand c = heap_pop(h, &nh);
        int32_t nx = next[c.pos];
        if (id[c.pos] < 0 || nx < 0) continue;
        const tr_tok_merge *m = tr_tok_merge_get(t, id[c.pos], id[nx]);
        if (!m || m->id != c.id) continue; /* stale: one side was merged into something else */
        id[c.pos] = c.id;
        id[nx] = -1;
        next[c.pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = c.pos;
        if (prev[c.pos] >= 0) push_pair(t, h, &nh, id, prev[c.pos], c.pos);
        if (next[c.pos] >= 0) push_pair(t, h, &nh, id, c.pos, next[c.pos]);
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (tr_tok_buf_push(b, id[i])) return -1;
    return 0;
}
