/* Decoding: each id's bytes, concatenated (the ByteLevel decoder maps the byte-level alphabet back to
 * bytes, which the tables already hold; added tokens are their content). */
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

int tr_tok_decode(const tr_tok *t, const int32_t *ids, int64_t n, bool skip_special, char **out, size_t *len,
                  size_t *cap, char *err, size_t errlen) {
    for (int64_t i = 0; i < n; i++) {
        size_t l;
        const char *s = tr_tok_id_bytes(t, ids[i], &l);
        if (!s)
            return tr_errf(err, errlen, "token id %d (position %lld) is not in %s (%lld tokens)", ids[i], (long long)i,
                           t->name, (long long)tr_tok_vocab_size(t));
        if (skip_special && t->kind[ids[i]] == TR_TOK_SPECIAL) continue;
        if (*len + l + 1 > *cap) {
            size_t nc = *cap ? *cap : 256;
            while (nc < *len + l + 1) nc *= 2;
            char *o = realloc(*out, nc);
            if (!o) return tr_errf(err, errlen, "out of memory");
            *out = o;
            *cap = nc;
        }
        memcpy(*out + *len, s, l);
        *len += l;
        (*out)[*len] = 0;
    }
    if (!*out) {
        *out = calloc(1, 1);
        if (!*out) return tr_errf(err, errlen, "out of memory");
        *cap = 1;
    }
    return 0;
}
