/* Whether token ids are what a tokenizer makes of their own text (`dataset check-tokenizer`): the data
 * was made with this tokenizer exactly when encode(decode(ids)) == ids, since decoding a byte-level
 * tokenizer's ids gives the very text it encoded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

bool tr_tok_is_special(const tr_tok *t, int64_t id) { return id >= 0 && id < t->nid && t->kind[id] == TR_TOK_SPECIAL; }

/* a token's bytes for a message: printable ASCII as is, others as \xNN (at most 24 bytes) */
static void show(const tr_tok *t, int32_t id, char *out, size_t cap) {
    size_t len, k = 0;
    const char *s = tr_tok_id_bytes(t, id, &len);
    for (size_t i = 0; s && i < len && i < 24 && k + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        k += (size_t)snprintf(out + k, cap - k, c >= 0x20 && c < 0x7f && c != '\'' ? "%c" : "\\x%02x", c);
    }
    out[k] = 0;
}

int tr_tok_check_ids(const tr_tok *t, tr_tok_buf *b, const int64_t *ids, int64_t n, char *why, size_t whylen) {
    int64_t lo = 0, hi = n;
    while (lo < hi && tr_tok_is_special(t, ids[lo])) lo++;
    while (hi > lo && tr_tok_is_special(t, ids[hi - 1])) hi--;
    int32_t *mid = malloc(sizeof *mid * (size_t)(hi - lo + 1));
    char *text = NULL, err[256];
    size_t len = 0, cap = 0;
    int rc = 1;
    if (!mid) return -1;
    for (int64_t i = lo; i < hi && rc == 1; i++) {
        if (ids[i] >= 0 && ids[i] < t->nid && t->bytes[ids[i]]) mid[i - lo] = (int32_t)ids[i];
        else {
            tr_errf(why, whylen, "token id %lld at position %lld is not in %s (%lld tokens)", (long long)ids[i],
                    (long long)i, t->name, (long long)tr_tok_vocab_size(t));
            rc = 0;
        }
    }
    if (rc == 1 && tr_tok_decode(t, mid, hi - lo, false, &text, &len, &cap, err, sizeof err)) rc = -1;
    size_t valid = rc == 1 ? tr_tok_utf8_valid(text, len) : len;
    if (rc == 1 && valid < len) {
        tr_errf(why, whylen, "its ids decode to bytes that are not UTF-8 (at byte %zu): not text %s encoded", valid,
                t->name);
        rc = 0;
    }
    if (rc == 1 && tr_tok_encode(t, b, text, len, false, err, sizeof err)) rc = -1;
    for (int64_t i = 0; rc == 1 && i < hi - lo && i < b->n; i++) {
        if (b->ids[i] == mid[i]) continue;
        char had[128], made[128];
        show(t, mid[i], had, sizeof had);
        show(t, b->ids[i], made, sizeof made);
        tr_errf(why, whylen, "at position %lld the data has token %d ('%s'), %s makes token %d ('%s') of the same text",
                (long long)(lo + i), mid[i], had, t->name, b->ids[i], made);
        rc = 0;
    }
    if (rc == 1 && b->n != hi - lo) {
        tr_errf(why, whylen, "%s makes %lld tokens of the same text, the data has %lld", t->name, (long long)b->n,
                (long long)(hi - lo));
        rc = 0;
    }
    if (rc < 0) tr_errf(why, whylen, "out of memory");
    free(mid);
    free(text);
    return rc;
}
