/* Encoding, in `tokenizers`' order: added tokens are cut out of the raw text first (leftmost, the
 * longest where several start at one place, as its Aho-Corasick matcher finds them); each stretch
 * between them is split by the pre-tokenizer's pattern into pieces (the matches, and the text between
 * matches, each a piece: the "Isolated" behaviour); each piece is byte-pair encoded on its own. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

void tr_tok_buf_free(tr_tok_buf *b) {
    free(b->ids);
    free(b->sym);
    pcre2_match_data_free(b->match);
    memset(b, 0, sizeof *b);
}

static int piece(const tr_tok *t, tr_tok_buf *b, const char *s, size_t from, size_t to) {
    return from < to ? tr_tok_bpe(t, b, (const unsigned char *)s + from, to - from) : 0;
}

/* One stretch without added tokens, s [n]. An empty match (a pattern that allows one) makes no piece;
 * the search goes on one character later and that character joins the text before the next match. */
static int split(const tr_tok *t, tr_tok_buf *b, const char *s, size_t n) {
    pcre2_match_data *md = b->match;
    size_t gap = 0, at = 0;
    while (at < n) {
        int rc = t->jit ? pcre2_jit_match(t->re, (PCRE2_SPTR)s, n, at, 0, md, NULL)
                        : pcre2_match(t->re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break; /* PCRE2_ERROR_NOMATCH; a match error (limits) leaves the rest one piece */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0], end = ov[1];
        if (end == start) {
            uint32_t cp;
            at = start + (size_t)tr_tok_utf8_next(s + start, n - start, &cp);
            continue;
        }
        if (piece(t, b, s, gap, start) || piece(t, b, s, start, end)) return -1;
        gap = at = end;
    }
    return piece(t, b, s, gap, n);
}

/* The longest added token starting at s [n], or -1 (*len its length). */
static int32_t added_at(const tr_tok *t, const char *s, size_t n, size_t *len) {
    size_t max = n < t->added_maxlen ? n : t->added_maxlen;
    for (size_t l = max; l > 0; l--) {
        int32_t id = tr_tok_map_get(&t->added, s, l);
        if (id >= 0) {
            *len = l;
            return id;
        }
    }
    return -1;
}

static int push_all(tr_tok_buf *b, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        if (tr_tok_buf_push(b, ids[i])) return -1;
    return 0;
}

int tr_tok_encode(const tr_tok *t, tr_tok_buf *b, const char *text, size_t len, bool add_special, char *err,
                  size_t errlen) {
    b->n = 0;
    size_t valid = tr_tok_utf8_valid(text, len);
    if (valid < len) return tr_errf(err, errlen, "invalid UTF-8 at byte %zu of the text", valid);
    if (!b->match && !(b->match = pcre2_match_data_create_from_pattern(t->re, NULL)))
        return tr_errf(err, errlen, "out of memory");
    if (add_special && push_all(b, t->pre, t->npre)) return tr_errf(err, errlen, "out of memory");
    size_t from = 0;
    for (size_t i = 0; i < len && t->added.n; i++) {
        size_t l;
        int32_t id = t->added_first[(unsigned char)text[i]] ? added_at(t, text + i, len - i, &l) : -1;
        if (id < 0) continue;
        if (split(t, b, text + from, i - from) || tr_tok_buf_push(b, id)) return tr_errf(err, errlen, "out of memory");
        from = i + l;
        i = from - 1;
    }
    if (split(t, b, text + from, len - from)) return tr_errf(err, errlen, "out of memory");
    if (add_special && push_all(b, t->post, t->npost)) return tr_errf(err, errlen, "out of memory");
    return 0;
}
