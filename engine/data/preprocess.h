/* Megatron's tools/preprocess_data.py in C: JSON lines of text -> PREFIX_KEY_document.bin/.idx, one
 * document per line and key, byte for byte what Megatron's tool writes for the same input and
 * tokenizer (without --split-sentences: each string one sequence; a JSON list of strings, one
 * sequence per non-empty string; --append-eod after a document's last token). */
#ifndef TWINRUN_ENGINE_DATA_PREPROCESS_H
#define TWINRUN_ENGINE_DATA_PREPROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok/tok.h"

#define TR_PRE_MAX_KEYS 16

typedef struct tr_pre_opts {
    const char *input, *prefix;
    const char *keys[TR_PRE_MAX_KEYS]; /* --json-keys (default text) */
    int nkeys;
    const tr_tok *tok;
    bool add_special; /* the tokenizer's template (Megatron's include_special_tokens, on by default) */
    bool append_eod;
    int32_t eod;          /* the tokenizer's eos */
    int workers;          /* threads that encode */
    int partitions;       /* Megatron's --partitions: documents come out partition by partition */
    bool keep_sequential; /* --keep-sequential-samples: partitions are contiguous, input order kept */
    bool skip_bad;        /* a bad line is skipped and counted (else the run stops at it) */
    int64_t log_interval; /* documents between progress lines on stderr (0: none) */
    bool overwrite;       /* --overwrite: an existing PREFIX_KEY_document.bin/.idx may be replaced */
} tr_pre_opts;

typedef struct tr_pre_stats {
    int64_t docs, tokens, bytes, bad_lines, first_bad_line;
    char first_bad[512]; /* the first bad line's message */
    double seconds;
} tr_pre_stats;

/* One document's ids for each key: ids [n] and its sequences' lengths lens [nseq]. */
typedef struct tr_pre_doc {
    int32_t *ids;
    int64_t n, cap;
    int64_t *lens;
    int64_t nseq, lcap;
} tr_pre_doc;

/* Encodes one input line [len bytes, no newline] into docs [nkeys] (reset first). -1 with err for a bad
 * line: invalid UTF-8, not a JSON object, a key missing or not a string or list of strings, a NUL. */
int tr_pre_line(const tr_pre_opts *o, tr_tok_buf *b, const char *line, size_t len, tr_pre_doc *docs, char *err,
                size_t errlen);
void tr_pre_doc_free(tr_pre_doc *d);

/* The whole run, stats filled. The outputs appear, all keys together, only when it succeeds: a failure
 * leaves an earlier dataset at the same names as it was. */
int tr_pre_run(const tr_pre_opts *o, tr_pre_stats *st, char *err, size_t errlen);
/* The run's refusal of existing outputs (without --overwrite), alone: -1 naming the first. */
int tr_pre_check_outputs(const tr_pre_opts *o, char *err, size_t errlen);

#endif
