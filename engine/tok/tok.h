/* Text to token ids and back, as Hugging Face `tokenizers` does it for a byte-level BPE tokenizer.json
 * (the Llama-3 layout: added tokens matched in the raw text, a Split pre-tokenizer with a regex then
 * ByteLevel, a BPE model with ignore_merges, a ByteLevel decoder, a TemplateProcessing post-processor)
 * and for Megatron's TikTokenizer rank files. The ids are `tokenizers`' (and tiktoken's) ids, id for id.
 *
 * A loaded tokenizer is read-only and shared by threads; each thread encodes through its own
 * tr_tok_buf (the regex's match state and the id buffer). Components the library does not implement
 * (another normalizer, model, pre-tokenizer or decoder) are refused at load, by name. */
#ifndef TWINRUN_ENGINE_TOK_TOK_H
#define TWINRUN_ENGINE_TOK_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tr_tok tr_tok;

/* A tokenizer.json already in memory (len bytes, need not end in NUL); name goes into errors. */
tr_tok *tr_tok_from_json(const char *json, size_t len, const char *name, char *err, size_t errlen);
/* Megatron's TikTokenizer (CustomTikTokenizer) by its flags. The special tokens take ids
 * 0..num_special-1 (special [nspecial] in order, then <SPECIAL_k> fillers) and rank r id num_special + r.
 * Encoding is tiktoken's encode_ordinary, as Megatron's tokenize: a special token's text in the input is
 * plain text; decoding gives the special tokens' text. */
typedef struct tr_tok_tiktoken {
    const char *pattern;        /* --tiktoken-pattern: "v1" or "v2" (Megatron's two patterns) */
    int64_t vocab_size;         /* --vocab-size; 0: Megatron's fallback, 131072 */
    int64_t num_special;        /* --tiktoken-num-special-tokens (Megatron's default 1000) */
    const char *const *special; /* [nspecial] --tiktoken-special-tokens; NULL: <unk> <s> </s> */
    int nspecial;
} tr_tok_tiktoken;

/* Megatron's rank file in memory: a JSON list whose entry i is {"rank": i, "token_bytes": BASE64,
 * "token_str": ...}, the 256 single bytes first; ranks past vocab_size - num_special are cut. */
tr_tok *tr_tok_from_tiktoken(const char *json, size_t len, const char *name, const tr_tok_tiktoken *o, char *err,
                             size_t errlen);
void tr_tok_free(tr_tok *t);

/* A special token the text may contain, matched before the pre-tokenizer (tiktoken's specials; the
 * tokenizer.json's added tokens are read with the file). Fails if the id or content is taken. */
int tr_tok_add_special(tr_tok *t, const char *content, int32_t id, char *err, size_t errlen);

/* Distinct tokens, model and added (Hugging Face's len(tokenizer), Megatron's vocab_size). */
int64_t tr_tok_vocab_size(const tr_tok *t);
/* The id of a token written as text (an added token's content, or a model token's bytes); -1 if none. */
int32_t tr_tok_token_id(const tr_tok *t, const char *token);
/* The bytes id decodes to (*len of them; not NUL-terminated); NULL for an id with no token. */
const char *tr_tok_id_bytes(const tr_tok *t, int32_t id, size_t *len);

/* Per-thread encoding state. ids [n] is the last encode's result, valid until the next call. */
typedef struct tr_tok_buf {
    int32_t *ids; /* [n] */
    int64_t n, cap;
    void *match;  /* the regex's match data, owned */
    int32_t *sym; /* [symcap]: BPE scratch */
    int64_t symcap;
} tr_tok_buf;

void tr_tok_buf_free(tr_tok_buf *b);

/* Length of the valid UTF-8 prefix of s [n]: n when all of it is valid (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
size_t tr_tok_utf8_valid(const char *s, size_t n);

/* Encodes text [len bytes of UTF-8] into b->ids. add_special: the post-processor's template (for
 * Llama 3 a leading <|begin_of_text|>), as `tokenizers`' encode(text, add_special_tokens=True) and
 * Megatron's HuggingFaceTokenizer.tokenize do. Fails only on invalid UTF-8 (the byte offset named)
 * or out of memory. */
int tr_tok_encode(const tr_tok *t, tr_tok_buf *b, const char *text, size_t len, bool add_special, char *err,
                  size_t errlen);

/* Appends the text of ids [n] to *out (grown with realloc; *len bytes, *cap allocated, always NUL
 * terminated). skip_special: leave added special tokens out. Fails on an id with no token. */
int tr_tok_decode(const tr_tok *t, const int32_t *ids, int64_t n, bool skip_special, char **out, size_t *len,
                  size_t *cap, char *err, size_t errlen);

/* Whether id is one of the tokenizer's special tokens (bos, eos, <|eot_id|>, ...). */
bool tr_tok_is_special(const tr_tok *t, int64_t id);

/* Whether ids [n] (one sequence of a dataset) are what t makes of their own text: the special tokens
 * at either end (the template's bos, --append-eod's eod) set aside, the rest decoded and encoded again.
 * 1: they are; 0: they are not, and why says where (the position and both tokens, an id outside the
 * vocabulary, bytes that are not UTF-8); -1: out of memory. */
int tr_tok_check_ids(const tr_tok *t, tr_tok_buf *b, const int64_t *ids, int64_t n, char *why, size_t whylen);

#endif
