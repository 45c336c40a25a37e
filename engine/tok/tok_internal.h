/* The tokenizer's tables, shared by the loaders, the encoder and the decoder of engine/tok. */
#ifndef TWINRUN_ENGINE_TOK_TOK_INTERNAL_H
#define TWINRUN_ENGINE_TOK_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok/tok.h"

/* Byte strings to ids: open addressing over (hash, bytes); the strings live in the map's arena. */
typedef struct tr_tok_map {
    int32_t *slot; /* [mask + 1]: index into the entries, -1 empty */
    uint64_t mask;
    char **key;    /* [n]: the key's bytes (arena) */
    uint32_t *len; /* [n] */
    int32_t *id;   /* [n] */
    int64_t n, cap;
} tr_tok_map;

int tr_tok_map_init(tr_tok_map *m, int64_t expect);
void tr_tok_map_free(tr_tok_map *m);
int32_t tr_tok_map_get(const tr_tok_map *m, const char *key, size_t len);
/* Sets key -> id (a key already there takes the new id, as a Rust HashMap's insert does). */
int tr_tok_map_put(tr_tok_map *m, const char *key, size_t len, int32_t id);

/* A merge's pair of ids -> its rank and the id of the merged token. */
typedef struct tr_tok_merge {
    uint64_t pair; /* (left << 32) | right; UINT64_MAX empty */
    int32_t rank, id;
} tr_tok_merge;

/* What a token id is: nothing, a model (BPE) token, an added token, an added special token. */
enum { TR_TOK_NONE = 0, TR_TOK_MODEL = 1, TR_TOK_ADDED = 2, TR_TOK_SPECIAL = 3 };

#define TR_TOK_TEMPLATE_MAX 16

struct tr_tok {
    char name[512];
    int32_t nid;          /* largest id + 1 */
    char **bytes;         /* [nid]: what the id decodes to (NULL: no token) */
    uint32_t *blen;       /* [nid] */
    unsigned char *kind;  /* [nid]: TR_TOK_* */
    tr_tok_map raw;       /* a model token's bytes -> id (the BPE's whole-word lookup) */
    tr_tok_map text;      /* a token as written in the file (model key or added content) -> id */
    tr_tok_map added;     /* added token content -> id, matched in the text before the pre-tokenizer */
    tr_tok_merge *merges; /* [mmask + 1] */
    uint64_t mmask, mcount;
    int32_t byte_id[256];  /* the one-byte token of each byte */
    bool added_first[256]; /* bytes an added token starts with */
    uint32_t added_maxlen;
    bool ignore_merges; /* a piece that is a whole vocabulary token is that token */
    void *re;           /* pcre2_code: the pre-tokenizer's split pattern */
    bool jit;
    int32_t pre[TR_TOK_TEMPLATE_MAX], post[TR_TOK_TEMPLATE_MAX]; /* the post-processor's template ids */
    int npre, npost;
    int64_t nvocab; /* the vocabulary's size where the tables do not say it (TikTokenizer); 0: text.n */
};

/* Allocation and the per-id tables; an id set twice keeps the last. */
tr_tok *tr_tok_alloc(const char *name);
int tr_tok_set_id(tr_tok *t, int32_t id, const char *bytes, size_t len, int kind, char *err, size_t errlen);
/* Compiles the split regex (PCRE2, UTF and Unicode properties; JIT where the machine has it). */
int tr_tok_set_pattern(tr_tok *t, const char *pattern, size_t len, bool literal, char *err, size_t errlen);
int tr_tok_merge_put(tr_tok *t, int32_t left, int32_t right, int32_t rank, int32_t id, char *err, size_t errlen);
const tr_tok_merge *tr_tok_merge_get(const tr_tok *t, int32_t left, int32_t right);
/* Every byte must have its one-byte token (else some text could not be encoded). */
int tr_tok_finish(tr_tok *t, char *err, size_t errlen);

/* GPT-2's byte-level alphabet: byte -> code point, and code point -> byte (-1 outside it). */
uint32_t tr_tok_byte_char(unsigned char b);
int tr_tok_char_byte(uint32_t cp);
/* Decodes one code point at s [n] (valid UTF-8 assumed); returns its length. */
int tr_tok_utf8_next(const char *s, size_t n, uint32_t *cp);

/* BPE over bytes [n] into b->ids (appended). */
int tr_tok_bpe(const tr_tok *t, tr_tok_buf *b, const unsigned char *bytes, size_t n);
int tr_tok_buf_push(tr_tok_buf *b, int32_t id);

#endif
