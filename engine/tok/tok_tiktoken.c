/* Megatron's TikTokenizer rank file -> tr_tok, as CustomTikTokenizer builds its tiktoken Encoding
 * (megatron/training/tokenizer/tokenizer.py): a JSON list whose entry i is {"rank": i, "token_bytes":
 * BASE64, "token_str": ...}, the 256 single bytes first, in byte order; ranks at or past vocab_size -
 * num_special are cut; the special tokens take ids 0..num_special-1 (the given ones in order, then
 * <SPECIAL_k> fillers) and rank r becomes id num_special + r. tiktoken merges the adjacent pair whose
 * concatenation has the lowest rank: that is a BPE whose merge (a, b) -> ab has ab's rank, for every
 * split of a token into two tokens; a piece that is a whole token is that token (its first lookup). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok_internal.h"
#include "twinrun/err.h"

/* Megatron's PATTERN_TIKTOKEN (v1) and PATTERN_TIKTOKEN_V2, for --tiktoken-pattern */
static const char PATTERN_V1[] =
    "[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
static const char PATTERN_V2[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"
    "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

#define TIKTOKEN_VOCAB_DEFAULT (1 << 17) /* Megatron's fallback when --vocab-size is not given */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with its padding (Python's b64decode without altchars) into out [>= 3 * n / 4];
 * -1 on any other character or length. */
static int b64_decode(const char *s, unsigned char *out, size_t *len) {
    size_t n = strlen(s), k = 0;
    if (n % 4) return -1;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = b64_value((unsigned char)s[i + j]);
            bool pad = s[i + j] == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=');
            if (v[j] < 0 && !pad) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)(v[2] < 0 ? 0 : v[2]) << 6 |
                     (uint32_t)(v[3] < 0 ? 0 : v[3]);
        out[k++] = (unsigned char)(w >> 16);
        if (v[2] >= 0) out[k++] = (unsigned char)(w >> 8);
        if (v[3] >= 0) out[k++] = (unsigned char)w;
    }
    *len = k;
    return 0;
}

static int specials(tr_tok *t, const tr_tok_tiktoken *o, int64_t nspecial, char *err, size_t errlen) {
    static const char *const dflt[] = {"<unk>", "<s>", "</s>"};
    const char *const *sp = o->special ? o->special : dflt;
    int n = o->special ? o->nspecial : 3;
    if (n > nspecial)
        return tr_errf(err, errlen, "%s: %d special tokens, more than --tiktoken-num-special-tokens %lld", t->name, n,
                       (long long)nspecial);
    for (int i = 0; i < n; i++) {
        if (!sp[i][0]) return tr_errf(err, errlen, "%s: special token %d is empty", t->name, i);
        for (int k = 0; k < i; k++)
            if (!strcmp(sp[i], sp[k]))
                return tr_errf(err, errlen, "%s: special token '%s' is given twice (--tiktoken-special-tokens)",
                               t->name, sp[i]);
    }
    for (int d = 0; d < 3; d++) {
        bool found = false;
        for (int i = 0; i < n; i++) found |= !strcmp(sp[i], dflt[d]);
        if (!found)
            return tr_errf(err, errlen,
                           "%s: --tiktoken-special-tokens must include <unk>, <s> and </s> (Megatron's "
                           "TikTokenizer takes unk, bos and eos from them); '%s' is missing",
                           t->name, dflt[d]);
    }
    char filler[64];
    for (int64_t i = 0; i < nspecial; i++) {
        const char *s = filler;
        if (i < n) s = sp[i];
        else snprintf(filler, sizeof filler, "<SPECIAL_%lld>", (long long)i);
        /* in the id tables (decoding, tr_tok_token_id), never matched in text: encode_ordinary */
        if (tr_tok_set_id(t, (int32_t)i, s, strlen(s), TR_TOK_SPECIAL, err, errlen)) return -1;
        if (tr_tok_map_get(&t->text, s, strlen(s)) >= 0)
            return tr_errf(err, errlen, "%s: special token '%s' is given twice (a filler's name)", t->name, s);
        if (tr_tok_map_put(&t->text, s, strlen(s), (int32_t)i)) return tr_errf(err, errlen, "out of memory");
    }
    return 0;
}

static int ranks(tr_tok *t, const cJSON *list, int64_t inner, int32_t base, char *err, size_t errlen) {
    unsigned char *buf = NULL;
    size_t bcap = 0;
    int rc = 0;
    int64_t i = 0;
    for (const cJSON *e = list->child; e && i < inner && !rc; e = e->next, i++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "rank"),
                    *b = cJSON_GetObjectItemCaseSensitive(e, "token_bytes"),
                    *s = cJSON_GetObjectItemCaseSensitive(e, "token_str");
        if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) != 3 || !r || !cJSON_IsString(b) || !s) {
            rc = tr_errf(err, errlen,
                         "%s: entry %lld is not {\"rank\", \"token_bytes\", \"token_str\"} (Megatron's "
                         "TikTokenizer rank file)",
                         t->name, (long long)i);
            break;
        }
        if (!cJSON_IsNumber(r) || r->valuedouble != (double)i) {
            rc = tr_errf(err, errlen, "%s: entry %lld has rank %s; the ranks must be 0, 1, 2, ... in order", t->name,
                         (long long)i, cJSON_IsNumber(r) ? "another" : "not a number");
            break;
        }
        size_t n = strlen(b->valuestring), len;
        if (n + 3 > bcap && !(buf = realloc(buf, bcap = 2 * n + 3))) return tr_errf(err, errlen, "out of memory");
        if (b64_decode(b->valuestring, buf, &len) || len == 0) {
            rc = tr_errf(err, errlen, "%s: entry %lld: token_bytes '%.40s' is not base64 of one or more bytes", t->name,
                         (long long)i, b->valuestring);
            break;
        }
        if (i < 256 && (len != 1 || buf[0] != i)) {
            rc = tr_errf(err, errlen,
                         "%s: entry %lld must be the single byte 0x%02llx (the 256 bytes come first, in "
                         "order)",
                         t->name, (long long)i, (long long)i);
            break;
        }
        int32_t id = base + (int32_t)i, dup = tr_tok_map_get(&t->raw, (const char *)buf, len);
        if (dup >= 0) {
            rc = tr_errf(err, errlen, "%s: entry %lld has the bytes of entry %lld", t->name, (long long)i,
                         (long long)(dup - base));
            break;
        }
        rc = tr_tok_set_id(t, id, (const char *)buf, len, TR_TOK_MODEL, err, errlen);
        if (!rc && tr_tok_map_put(&t->raw, (const char *)buf, len, id)) rc = tr_errf(err, errlen, "out of memory");
    }
    free(buf);
    return rc;
}

/* Every split of every token into two tokens is a merge of the token's rank. */
static int merges(tr_tok *t, int32_t base, int32_t end, char *err, size_t errlen) {
    for (int32_t id = base + 256; id < end; id++) {
        const char *s = t->bytes[id];
        uint32_t n = t->blen[id];
        for (uint32_t k = 1; k < n; k++) {
            int32_t l = tr_tok_map_get(&t->raw, s, k), r = l < 0 ? -1 : tr_tok_map_get(&t->raw, s + k, n - k);
            if (r >= 0 && tr_tok_merge_put(t, l, r, id - base, id, err, errlen)) return -1;
        }
    }
    return 0;
}

static int build(tr_tok *t, const cJSON *list, const tr_tok_tiktoken *o, char *err, size_t errlen) {
    const char *pat = !o->pattern                 ? NULL
                      : !strcmp(o->pattern, "v1") ? PATTERN_V1
                      : !strcmp(o->pattern, "v2") ? PATTERN_V2
                                                  : NULL;
    if (!pat)
        return tr_errf(err, errlen, "%s: TikTokenizer needs --tiktoken-pattern v1 or v2 (Megatron's two patterns)%s%s",
                       t->name, o->pattern ? "; got " : "", o->pattern ? o->pattern : "");
    int64_t vocab = o->vocab_size > 0 ? o->vocab_size : TIKTOKEN_VOCAB_DEFAULT, ns = o->num_special;
    if (vocab > (1 << 24))
        return tr_errf(err, errlen, "%s: --vocab-size %lld is more than twinrun's %d tokens", t->name, (long long)vocab,
                       1 << 24);
    if (ns < 3 || ns >= vocab)
        return tr_errf(err, errlen,
                       "%s: --tiktoken-num-special-tokens %lld must be at least 3 (<unk> <s> </s>) and "
                       "below the vocabulary (%lld)",
                       t->name, (long long)ns, (long long)vocab);
    if (!cJSON_IsArray(list))
        return tr_errf(err, errlen,
                       "%s: not a JSON list of {\"rank\", \"token_bytes\", \"token_str\"} (Megatron's "
                       "TikTokenizer rank file)",
                       t->name);
    int64_t inner = vocab - ns, have = cJSON_GetArraySize(list);
    if (have < inner)
        return tr_errf(err, errlen,
                       "%s has %lld ranks; --vocab-size %lld with %lld special tokens needs %lld (every "
                       "id below the vocabulary is a token): give --vocab-size %lld%s",
                       t->name, (long long)have, (long long)vocab, (long long)ns, (long long)inner,
                       (long long)(have + ns), o->vocab_size > 0 ? "" : " (Megatron's default is 131072)");
    if (have < 256) return tr_errf(err, errlen, "%s: fewer than the 256 single-byte ranks", t->name);
    if (specials(t, o, ns, err, errlen) || ranks(t, list, inner, (int32_t)ns, err, errlen) ||
        merges(t, (int32_t)ns, (int32_t)vocab, err, errlen))
        return -1;
    t->ignore_merges = true;
    t->nvocab = vocab;
    if (tr_tok_set_pattern(t, pat, strlen(pat), false, err, errlen)) return -1;
    return tr_tok_finish(t, err, errlen);
}

tr_tok *tr_tok_from_tiktoken(const char *json, size_t len, const char *name, const tr_tok_tiktoken *o, char *err,
                             size_t errlen) {
    tr_tok *t = tr_tok_alloc(name);
    if (!t) {
        tr_errf(err, errlen, "out of memory");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    int rc = -1;
    if (!root)
        tr_errf(err, errlen, "%s: not JSON (a syntax error at byte %zu); give Megatron's TikTokenizer rank file", name,
                end ? (size_t)(end - json) : (size_t)0);
    else rc = build(t, root, o, err, errlen);
    cJSON_Delete(root);
    if (rc) {
        tr_tok_free(t);
        return NULL;
    }
    return t;
}
