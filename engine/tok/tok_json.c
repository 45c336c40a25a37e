/* tokenizer.json (Hugging Face `tokenizers`' serialisation) -> tr_tok. What it reads, it reads as
 * `tokenizers` 0.2x writes it: model BPE (vocab object, merges as "a b" strings or [a, b] pairs),
 * added_tokens, the pre-tokenizer, decoder and post-processor of the Llama-3 and GPT-2 layouts. Any
 * other component is refused by its type name, so no text is ever encoded differently in silence. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

/* GPT-2's pattern: what ByteLevel's own regex (use_regex true) splits with. */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

static bool flag(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* A token id as the file writes it: an integer 0..INT32_MAX. The range is checked before the cast
 * (casting 2e77 or NaN to an integer is undefined); tr_tok_set_id narrows it to the ids it keeps. */
static bool json_id(const cJSON *v, int32_t *id) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= INT32_MAX)) return false;
    *id = (int32_t)v->valuedouble;
    return (double)*id == v->valuedouble;
}

/* A byte-level token (as tokenizer.json writes it) -> its bytes in out [>= strlen(s)]. A token with a
 * character outside the byte-level alphabet keeps its UTF-8 as is (the ByteLevel decoder's fallback);
 * returns false for it, since the BPE can never produce it. */
static bool unbyte(const char *s, char *out, size_t *len) {
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)tr_tok_utf8_next(s + i, n - i, &cp);
        int b = tr_tok_char_byte(cp);
        if (b < 0) {
            memcpy(out, s, n);
            *len = n;
            return false;
        }
        out[k++] = (char)b;
    }
    *len = k;
    return true;
}

static int vocab(tr_tok *t, const cJSON *v, char *err, size_t errlen) {
    if (!cJSON_IsObject(v)) return tr_errf(err, errlen, "%s: model.vocab is not an object of token: id", t->name);
    char *buf = NULL;
    size_t bcap = 0;
    int rc = 0;
    for (const cJSON *e = v->child; e && !rc; e = e->next) {
        int32_t id;
        if (!json_id(e, &id)) {
            rc =
                tr_errf(err, errlen, "%s: model.vocab['%s'] is not an integer id 0..%d", t->name, e->string, INT32_MAX);
            break;
        }
        size_t n = strlen(e->string), len;
        if (n + 1 > bcap && !(buf = realloc(buf, bcap = n + 1))) return tr_errf(err, errlen, "out of memory");
        bool mapped = unbyte(e->string, buf, &len);
        rc = tr_tok_set_id(t, id, buf, len, TR_TOK_MODEL, err, errlen);
        if (!rc && (tr_tok_map_put(&t->text, e->string, n, id) || (mapped && tr_tok_map_put(&t->raw, buf, len, id))))
            rc = tr_errf(err, errlen, "out of memory");
    }
    free(buf);
    return rc;
}

/* One merge: "a b" (a space between, which byte-level tokens never hold) or ["a", "b"]. */
static int merge_pair(const cJSON *m, const char **a, size_t *alen, const char **b) {
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp || strchr(sp + 1, ' ')) return -1;
        *a = m->valuestring;
        *alen = (size_t)(sp - m->valuestring);
        *b = sp + 1;
        return 0;
    }
    const cJSON *x = cJSON_GetArrayItem(m, 0), *y = cJSON_GetArrayItem(m, 1);
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 2 || !cJSON_IsString(x) || !cJSON_IsString(y)) return -1;
    *a = x->valuestring;
    *alen = strlen(x->valuestring);
    *b = y->valuestring;
    return 0;
}

static int merges(tr_tok *t, const cJSON *ms, char *err, size_t errlen) {
    if (!cJSON_IsArray(ms)) return tr_errf(err, errlen, "%s: model.merges is not an array", t->name);
    char *cat = NULL;
    size_t ccap = 0;
    int32_t rank = 0;
    int rc = 0;
    for (const cJSON *m = ms->child; m && !rc; m = m->next, rank++) {
        const char *a, *b;
        size_t alen;
        if (merge_pair(m, &a, &alen, &b)) {
            rc = tr_errf(err, errlen, "%s: model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", t->name, rank);
            break;
        }
        size_t blen = strlen(b);
        if (alen + blen + 1 > ccap && !(cat = realloc(cat, ccap = 2 * (alen + blen + 1))))
            return tr_errf(err, errlen, "out of memory");
        memcpy(cat, a, alen);
        memcpy(cat + alen, b, blen + 1);
        int32_t l = tr_tok_map_get(&t->text, a, alen), r = tr_tok_map_get(&t->text, b, blen);
        int32_t id = tr_tok_map_get(&t->text, cat, alen + blen);
        if (l < 0 || r < 0 || id < 0)
            rc = tr_errf(err, errlen, "%s: model.merges[%d] ('%.*s' + '%s'): '%s' is not in the vocabulary", t->name,
                         rank, (int)alen, a, b,
                         l < 0   ? "left"
                         : r < 0 ? "right"
                                 : cat);
        else rc = tr_tok_merge_put(t, l, r, rank, id, err, errlen);
    }
    free(cat);
    return rc;
}

static int model(tr_tok *t, const cJSON *m, char *err, size_t errlen) {
    if (!cJSON_IsObject(m)) return tr_errf(err, errlen, "%s: no \"model\" object", t->name);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(m, "type");
    if (ty && strcmp(type_of(m), "BPE"))
        return tr_errf(err, errlen, "%s: model %s is not implemented (twinrun reads byte-level BPE tokenizers)",
                       t->name, type_of(m));
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return tr_errf(err, errlen, "%s: BPE dropout is not implemented (it makes encoding random)", t->name);
    if (flag(m, "byte_fallback"))
        return tr_errf(err, errlen, "%s: BPE byte_fallback is not implemented (a SentencePiece-style model)", t->name);
    const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(m, affix[i]);
        if (cJSON_IsString(a) && a->valuestring[0])
            return tr_errf(err, errlen, "%s: BPE %s is not implemented", t->name, affix[i]);
    }
    t->ignore_merges = flag(m, "ignore_merges");
    if (vocab(t, cJSON_GetObjectItemCaseSensitive(m, "vocab"), err, errlen)) return -1;
    return merges(t, cJSON_GetObjectItemCaseSensitive(m, "merges"), err, errlen);
}

static int added(tr_tok *t, const cJSON *a, char *err, size_t errlen) {
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsArray(a)) return tr_errf(err, errlen, "%s: added_tokens is not an array", t->name);
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"),
                    *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        int32_t tid;
        if (!json_id(id, &tid) || !cJSON_IsString(c) || !c->valuestring[0])
            return tr_errf(err, errlen,
                           "%s: added_tokens[%d] needs an integer \"id\" (0..%d) and a non-empty \"content\"", t->name,
                           i, INT32_MAX);
        const char *opts[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (flag(e, opts[k]))
                return tr_errf(err, errlen, "%s: added_tokens[%d] ('%s'): %s is not implemented", t->name, i,
                               c->valuestring, opts[k]);
        size_t n = strlen(c->valuestring), len;
        char *buf = malloc(n + 1);
        if (!buf) return tr_errf(err, errlen, "out of memory");
        unbyte(c->valuestring, buf, &len); /* decoding runs the ByteLevel decoder over added tokens too */
        int rc = tr_tok_set_id(t, tid, buf, len, flag(e, "special") ? TR_TOK_SPECIAL : TR_TOK_ADDED, err, errlen);
        free(buf);
        if (rc) return -1;
        if (tr_tok_map_put(&t->added, c->valuestring, n, tid) || tr_tok_map_put(&t->text, c->valuestring, n, tid))
            return tr_errf(err, errlen, "out of memory");
        t->added_first[(unsigned char)c->valuestring[0]] = true;
        if (n > t->added_maxlen) t->added_maxlen = (uint32_t)n;
    }
    return 0;
}

static int byte_level_ok(tr_tok *t, const cJSON *p, bool want_regex, char *err, size_t errlen) {
    if (flag(p, "add_prefix_space"))
        return tr_errf(err, errlen, "%s: pre-tokenizer ByteLevel with add_prefix_space is not implemented", t->name);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
    bool regex = !r || cJSON_IsTrue(r); /* `tokenizers`' default */
    if (regex != want_regex)
        return tr_errf(err, errlen, "%s: pre-tokenizer ByteLevel with use_regex %s %s is not implemented", t->name,
                       regex ? "true" : "false", want_regex ? "alone" : "after a Split");
    return 0;
}

static int split_ok(tr_tok *t, const cJSON *p, char *err, size_t errlen) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(p, "behavior"),
                *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    if (!cJSON_IsString(b) || strcmp(b->valuestring, "Isolated"))
        return tr_errf(err, errlen, "%s: pre-tokenizer Split with behavior %s is not implemented (Isolated is)",
                       t->name, cJSON_IsString(b) ? b->valuestring : "(none)");
    if (flag(p, "invert"))
        return tr_errf(err, errlen, "%s: pre-tokenizer Split with invert is not implemented", t->name);
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex"),
                *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *s = cJSON_IsString(re) ? re : lit;
    if (!cJSON_IsString(s))
        return tr_errf(err, errlen, "%s: pre-tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}",
                       t->name);
    return tr_tok_set_pattern(t, s->valuestring, strlen(s->valuestring), s == lit, err, errlen);
}

/* Sequence [Split(pattern, Isolated), ByteLevel(use_regex false)] (Llama 3) or ByteLevel alone (GPT-2). */
static int pre_tokenizer(tr_tok *t, const cJSON *p, char *err, size_t errlen) {
    if (!cJSON_IsObject(p)) return tr_errf(err, errlen, "%s: no pre_tokenizer (a byte-level BPE needs one)", t->name);
    if (!strcmp(type_of(p), "ByteLevel")) {
        if (byte_level_ok(t, p, true, err, errlen)) return -1;
        return tr_tok_set_pattern(t, GPT2_PATTERN, strlen(GPT2_PATTERN), false, err, errlen);
    }
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
    const cJSON *a = cJSON_GetArrayItem(seq, 0), *b = cJSON_GetArrayItem(seq, 1);
    if (strcmp(type_of(p), "Sequence") || cJSON_GetArraySize(seq) != 2 || strcmp(type_of(a), "Split") ||
        strcmp(type_of(b), "ByteLevel"))
        return tr_errf(
            err, errlen,
            "%s: pre-tokenizer %s%s%s%s%s is not implemented (Sequence [Split, ByteLevel] and ByteLevel are)", t->name,
            type_of(p), seq ? " [" : "", seq ? type_of(a) : "", seq ? ", " : "", seq ? type_of(b) : "");
    if (split_ok(t, a, err, errlen)) return -1;
    return byte_level_ok(t, b, false, err, errlen);
}

/* TemplateProcessing's "single": special tokens before and after the sequence $A. */
static int template(tr_tok *t, const cJSON *p, char *err, size_t errlen) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(p, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(p, "special_tokens");
    bool seen_a = false;
    for (const cJSON *e = single ? single->child : NULL; e; e = e->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "SpecialToken"), "id");
        if (!sp) {
            if (!cJSON_GetObjectItemCaseSensitive(e, "Sequence"))
                return tr_errf(err, errlen, "%s: post_processor template piece is neither SpecialToken nor Sequence",
                               t->name);
            seen_a = true;
            continue;
        }
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(specials, cJSON_IsString(sp) ? sp->valuestring : ""), "ids");
        if (!cJSON_IsArray(ids))
            return tr_errf(err, errlen, "%s: post_processor template token '%s' has no ids in special_tokens", t->name,
                           cJSON_IsString(sp) ? sp->valuestring : "?");
        for (const cJSON *i = ids->child; i; i = i->next) {
            int *n = seen_a ? &t->npost : &t->npre;
            int32_t id;
            if (*n == TR_TOK_TEMPLATE_MAX || !json_id(i, &id))
                return tr_errf(err, errlen,
                               "%s: post_processor template: more than %d special ids, or one not an integer id",
                               t->name, TR_TOK_TEMPLATE_MAX);
            (seen_a ? t->post : t->pre)[(*n)++] = id;
        }
    }
    return 0;
}

static int post_processor(tr_tok *t, const cJSON *p, char *err, size_t errlen) {
    if (!p || cJSON_IsNull(p) || !strcmp(type_of(p), "ByteLevel")) return 0; /* ByteLevel: offsets only */
    if (!strcmp(type_of(p), "TemplateProcessing")) return template(t, p, err, errlen);
    if (!strcmp(type_of(p), "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(p, "processors");
        if (!cJSON_IsArray(list))
            return tr_errf(err, errlen, "%s: post_processor Sequence without processors", t->name);
        for (const cJSON *e = list->child; e; e = e->next)
            if (post_processor(t, e, err, errlen)) return -1;
        return 0;
    }
    return tr_errf(err, errlen, "%s: post_processor %s is not implemented", t->name, type_of(p));
}

static int components(tr_tok *t, const cJSON *root, char *err, size_t errlen) {
    const char *must_be_null[] = {"normalizer", "truncation", "padding"};
    for (int i = 0; i < 3; i++) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, must_be_null[i]);
        if (c && !cJSON_IsNull(c))
            return tr_errf(err, errlen, "%s: %s %s is not implemented (Llama 3's is null)", t->name, must_be_null[i],
                           cJSON_GetObjectItemCaseSensitive(c, "type") ? type_of(c) : "(set)");
    }
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!cJSON_IsObject(dec) || strcmp(type_of(dec), "ByteLevel"))
        return tr_errf(err, errlen, "%s: decoder %s is not implemented (ByteLevel is)", t->name,
                       cJSON_IsObject(dec) ? type_of(dec) : "null");
    if (model(t, cJSON_GetObjectItemCaseSensitive(root, "model"), err, errlen)) return -1;
    if (added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err, errlen)) return -1;
    if (pre_tokenizer(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err, errlen)) return -1;
    if (post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), err, errlen)) return -1;
    return tr_tok_finish(t, err, errlen);
}

tr_tok *tr_tok_from_json(const char *json, size_t len, const char *name, char *err, size_t errlen) {
    tr_tok *t = tr_tok_alloc(name);
    if (!t) {
        tr_errf(err, errlen, "out of memory");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!cJSON_IsObject(root)) {
        size_t at = root || !end ? 0 : (size_t)(end - json);
        tr_errf(err, errlen, "%s: not a JSON object (%s at byte %zu); give the tokenizer.json that `tokenizers` saved",
                name, root ? "another JSON value" : "a syntax error", at);
        cJSON_Delete(root);
        tr_tok_free(t);
        return NULL;
    }
    int rc = components(t, root, err, errlen);
    cJSON_Delete(root);
    if (rc) {
        tr_tok_free(t);
        return NULL;
    }
    return t;
}
