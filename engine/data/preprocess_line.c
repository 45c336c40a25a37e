/* One line of preprocess_data.py's input, as its Encoder.encode reads it: json.loads(line), then for
 * each --json-keys key the string (or list of strings) tokenized, empty results dropped, the eod
 * appended to a document that has tokens. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "data/preprocess.h"
#include "twinrun/err.h"

void tr_pre_doc_free(tr_pre_doc *d) {
    free(d->ids);
    free(d->lens);
    memset(d, 0, sizeof *d);
}

static int append(tr_pre_doc *d, const int32_t *ids, int64_t n) {
    if (d->n + n + 1 > d->cap) {
        int64_t nc = d->cap ? d->cap : 1024;
        while (nc < d->n + n + 1) nc *= 2;
        int32_t *g = realloc(d->ids, (size_t)nc * sizeof *g);
        if (!g) return -1;
        d->ids = g;
        d->cap = nc;
    }
    if (d->nseq == d->lcap) {
        int64_t nc = d->lcap ? 2 * d->lcap : 16;
        int64_t *g = realloc(d->lens, (size_t)nc * sizeof *g);
        if (!g) return -1;
        d->lens = g;
        d->lcap = nc;
    }
    memcpy(d->ids + d->n, ids, (size_t)n * sizeof *ids);
    d->n += n;
    d->lens[d->nseq++] = n;
    return 0;
}

/* cJSON's strings end at a NUL, so a \u0000 escape would cut the text short: refused instead. */
static bool has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) return true;
        i++; /* the escaped character */
    }
    return false;
}

/* Python's dict keeps the last of repeated keys; cJSON's lookup finds the first. */
static const cJSON *last_item(const cJSON *o, const char *key) {
    const cJSON *found = NULL;
    for (const cJSON *e = o->child; e; e = e->next)
        if (e->string && !strcmp(e->string, key)) found = e;
    return found;
}

static int encode_text(const tr_pre_opts *o, tr_tok_buf *b, const char *key, const cJSON *s, tr_pre_doc *d, char *err,
                       size_t errlen) {
    char why[256];
    if (tr_tok_encode(o->tok, b, s->valuestring, strlen(s->valuestring), o->add_special, why, sizeof why))
        return tr_errf(err, errlen, "\"%s\": %s", key, why);
    if (b->n > 0 && append(d, b->ids, b->n)) return tr_errf(err, errlen, "out of memory");
    return 0;
}

static int encode_key(const tr_pre_opts *o, tr_tok_buf *b, const cJSON *root, const char *key, tr_pre_doc *d, char *err,
                      size_t errlen) {
    const cJSON *v = last_item(root, key);
    if (!v) return tr_errf(err, errlen, "no key \"%s\" (--json-keys names the keys to read)", key);
    if (cJSON_IsString(v)) {
        if (encode_text(o, b, key, v, d, err, errlen)) return -1;
    } else if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e; e = e->next) {
            if (!cJSON_IsString(e)) return tr_errf(err, errlen, "\"%s\" is a list holding a non-string", key);
            if (encode_text(o, b, key, e, d, err, errlen)) return -1;
        }
    } else {
        return tr_errf(err, errlen, "\"%s\" is not a string or a list of strings", key);
    }
    if (d->n > 0 && o->append_eod) {
        d->ids[d->n++] = o->eod; /* append() leaves room for it */
        d->lens[d->nseq - 1]++;
    }
    return 0;
}

int tr_pre_line(const tr_pre_opts *o, tr_tok_buf *b, const char *line, size_t len, tr_pre_doc *docs, char *err,
                size_t errlen) {
    for (int k = 0; k < o->nkeys; k++) docs[k].n = docs[k].nseq = 0;
    size_t valid = tr_tok_utf8_valid(line, len);
    if (valid < len) return tr_errf(err, errlen, "invalid UTF-8 at byte %zu of the line", valid);
    if (has_nul_escape(line, len))
        return tr_errf(err, errlen,
                       "a \\u0000 escape (NUL character), which twinrun's JSON reader cannot carry; remove "
                       "NULs from the text");
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tr_errf(err, errlen, len ? "not a JSON object" : "an empty line (not a JSON object)");
    }
    int rc = 0;
    for (int k = 0; k < o->nkeys && !rc; k++) rc = encode_key(o, b, root, o->keys[k], &docs[k], err, errlen);
    cJSON_Delete(root);
    return rc;
}
