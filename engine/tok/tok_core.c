/* The tokenizer's tables: ids and their bytes, merges, the split pattern; what both loaders fill. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

tr_tok *tr_tok_alloc(const char *name) {
    tr_tok *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (tr_tok_map_init(&t->raw, 1024) || tr_tok_map_init(&t->text, 1024) || tr_tok_map_init(&t->added, 16)) {
        tr_tok_free(t);
        return NULL;
    }
    return t;
}

void tr_tok_free(tr_tok *t) {
    if (!t) return;
    for (int32_t i = 0; i < t->nid; i++) free(t->bytes[i]);
    free(t->bytes);
    free(t->blen);
    free(t->kind);
    tr_tok_map_free(&t->raw);
    tr_tok_map_free(&t->text);
    tr_tok_map_free(&t->added);
    free(t->merges);
    pcre2_code_free(t->re);
    free(t);
}

/* Ids are dense in practice (0..vocab-1); the per-id tables grow to the largest one. */
#define TR_TOK_ID_MAX (1 << 24)

int tr_tok_set_id(tr_tok *t, int32_t id, const char *bytes, size_t len, int kind, char *err, size_t errlen) {
    if (id < 0 || id >= TR_TOK_ID_MAX)
        return tr_errf(err, errlen, "%s: token id %d is outside 0..%d", t->name, id, TR_TOK_ID_MAX - 1);
    if (id >= t->nid) {
        int32_t n = t->nid ? t->nid : 1024;
        while (n <= id) n *= 2;
        char **b = realloc(t->bytes, (size_t)n * sizeof *b);
        if (b) t->bytes = b;
        uint32_t *l = b ? realloc(t->blen, (size_t)n * sizeof *l) : NULL;
        if (l) t->blen = l;
        unsigned char *k = l ? realloc(t->kind, (size_t)n) : NULL;
        if (!k) return tr_errf(err, errlen, "%s: out of memory", t->name);
        t->kind = k;
        memset(t->bytes + t->nid, 0, (size_t)(n - t->nid) * sizeof *b);
        memset(t->blen + t->nid, 0, (size_t)(n - t->nid) * sizeof *l);
        memset(t->kind + t->nid, 0, (size_t)(n - t->nid));
        t->nid = n;
    }
    char *copy = malloc(len + 1);
    if (!copy) return tr_errf(err, errlen, "%s: out of memory", t->name);
    memcpy(copy, bytes, len);
    copy[len] = 0;
    free(t->bytes[id]);
    t->bytes[id] = copy;
    t->blen[id] = (uint32_t)len;
    t->kind[id] = (unsigned char)kind;
    return 0;
}

int tr_tok_set_pattern(tr_tok *t, const char *pattern, size_t len, bool literal, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return tr_errf(err, errlen, "%s: the pre-tokenizer's pattern does not compile at character %zu: %s", t->name,
                       (size_t)off, (char *)msg);
    }
    pcre2_code_free(t->re);
    t->re = re;
    t->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

static uint64_t merge_slot(const tr_tok_merge *m, uint64_t mask, uint64_t pair) {
    uint64_t h = (pair * 0x9e3779b97f4a7c15ULL) >> 24 & mask;
    while (m[h].pair != UINT64_MAX && m[h].pair != pair) h = (h + 1) & mask;
    return h;
}

static int merges_resize(tr_tok *t, uint64_t size) {
    tr_tok_merge *m = malloc(size * sizeof *m);
    if (!m) return -1;
    for (uint64_t i = 0; i < size; i++) m[i].pair = UINT64_MAX;
    for (uint64_t i = 0; t->merges && i <= t->mmask; i++)
        if (t->merges[i].pair != UINT64_MAX) m[merge_slot(m, size - 1, t->merges[i].pair)] = t->merges[i];
    free(t->merges);
    t->merges = m;
    t->mmask = size - 1;
    return 0;
}

/* A pair merged twice keeps the later rank, as `tokenizers`' merge map (a HashMap filled in order). */
int tr_tok_merge_put(tr_tok *t, int32_t left, int32_t right, int32_t rank, int32_t id, char *err, size_t errlen) {
    if ((t->mcount + 1) * 2 > (t->merges ? t->mmask + 1 : 0) && merges_resize(t, t->merges ? (t->mmask + 1) * 2 : 1024))
        return tr_errf(err, errlen, "%s: out of memory", t->name);
    uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint64_t h = merge_slot(t->merges, t->mmask, pair);
    t->mcount += t->merges[h].pair == UINT64_MAX;
    t->merges[h] = (tr_tok_merge){pair, rank, id};
    return 0;
}

const tr_tok_merge *tr_tok_merge_get(const tr_tok *t, int32_t left, int32_t right) {
    if (!t->merges) return NULL;
    uint64_t pair = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    const tr_tok_merge *m = &t->merges[merge_slot(t->merges, t->mmask, pair)];
    return m->pair == pair ? m : NULL;
}

int tr_tok_finish(tr_tok *t, char *err, size_t errlen) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = tr_tok_map_get(&t->raw, &c, 1);
        if (t->byte_id[b] < 0)
            return tr_errf(err, errlen,
                           "%s: byte 0x%02x has no token of its own (U+%04X in the byte-level vocabulary), so text "
                           "holding it could not be encoded; use a tokenizer trained with the full byte alphabet",
                           t->name, b, (unsigned)tr_tok_byte_char((unsigned char)b));
    }
    if (!t->re) return tr_errf(err, errlen, "%s: no pre-tokenizer pattern", t->name);
    return 0;
}

int tr_tok_add_special(tr_tok *t, const char *content, int32_t id, char *err, size_t errlen) {
    size_t len = strlen(content);
    if (!len) return tr_errf(err, errlen, "%s: an added token with empty content", t->name);
    if (tr_tok_map_get(&t->text, content, len) >= 0 && tr_tok_map_get(&t->text, content, len) != id)
        return tr_errf(err, errlen, "%s: added token '%s' (id %d) is already token %d", t->name, content, id,
                       tr_tok_map_get(&t->text, content, len));
    if (tr_tok_set_id(t, id, content, len, TR_TOK_SPECIAL, err, errlen)) return -1;
    if (tr_tok_map_put(&t->added, content, len, id) || tr_tok_map_put(&t->text, content, len, id))
        return tr_errf(err, errlen, "%s: out of memory", t->name);
    t->added_first[(unsigned char)content[0]] = true;
    if (len > t->added_maxlen) t->added_maxlen = (uint32_t)len;
    return 0;
}

int64_t tr_tok_vocab_size(const tr_tok *t) { return t->nvocab > 0 ? t->nvocab : t->text.n; }

int32_t tr_tok_token_id(const tr_tok *t, const char *token) { return tr_tok_map_get(&t->text, token, strlen(token)); }

const char *tr_tok_id_bytes(const tr_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->nid || !t->bytes[id]) return NULL;
    *len = t->blen[id];
    return t->bytes[id];
}
