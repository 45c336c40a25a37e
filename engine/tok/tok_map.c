/* The tokenizer's string -> id maps: open addressing, FNV-1a, a power-of-two table at most half full.
 * Keys are copied (a tokenizer.json's vocabulary is freed after load). */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "tok/tok_internal.h"

int tr_tok_map_init(tr_tok_map *m, int64_t expect) {
    memset(m, 0, sizeof *m);
    uint64_t size = 64;
    while (size < (uint64_t)expect * 2) size <<= 1;
    m->slot = malloc(size * sizeof *m->slot);
    if (!m->slot) return -1;
    memset(m->slot, 0xff, size * sizeof *m->slot);
    m->mask = size - 1;
    return 0;
}

void tr_tok_map_free(tr_tok_map *m) {
    for (int64_t i = 0; i < m->n; i++) free(m->key[i]);
    free(m->slot);
    free(m->key);
    free(m->len);
    free(m->id);
    memset(m, 0, sizeof *m);
}

/* The slot key's probe ends at: its entry, or the empty slot where it would go. */
static uint64_t find(const tr_tok_map *m, const char *key, size_t len) {
    uint64_t h = tr_fnv1a(TR_FNV_OFFSET, key, len) & m->mask;
    for (;;) {
        int32_t e = m->slot[h];
        if (e < 0 || (m->len[e] == len && !memcmp(m->key[e], key, len))) return h;
        h = (h + 1) & m->mask;
    }
}

int32_t tr_tok_map_get(const tr_tok_map *m, const char *key, size_t len) {
    if (!m->slot) return -1;
    int32_t e = m->slot[find(m, key, len)];
    return e < 0 ? -1 : m->id[e];
}

static int grow(tr_tok_map *m) {
    uint64_t size = (m->mask + 1) * 2;
    int32_t *slot = malloc(size * sizeof *slot);
    if (!slot) return -1;
    memset(slot, 0xff, size * sizeof *slot);
    free(m->slot);
    m->slot = slot;
    m->mask = size - 1;
    for (int64_t e = 0; e < m->n; e++) m->slot[find(m, m->key[e], m->len[e])] = (int32_t)e;
    return 0;
}

int tr_tok_map_put(tr_tok_map *m, const char *key, size_t len, int32_t id) {
    uint64_t h = find(m, key, len);
    if (m->slot[h] >= 0) {
        m->id[m->slot[h]] = id;
        return 0;
    }
    if (m->n == m->cap) {
        int64_t nc = m->cap ? 2 * m->cap : 256;
        char **k = realloc(m->key, (size_t)nc * sizeof *k);
        if (k) m->key = k;
        uint32_t *l = k ? realloc(m->len, (size_t)nc * sizeof *l) : NULL;
        if (l) m->len = l;
        int32_t *i = l ? realloc(m->id, (size_t)nc * sizeof *i) : NULL;
        if (!i) return -1;
        m->id = i;
        m->cap = nc;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, key, len);
    copy[len] = 0;
    m->key[m->n] = copy;
    m->len[m->n] = (uint32_t)len;
    m->id[m->n] = id;
    m->slot[h] = (int32_t)m->n++;
    if ((uint64_t)m->n * 2 > m->mask + 1) return grow(m);
    return 0;
}
