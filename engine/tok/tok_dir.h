/* A tokenizer by Megatron's flags: --tokenizer-type TYPE --tokenizer-model PATH. */
#ifndef TWINRUN_ENGINE_TOK_TOK_DIR_H
#define TWINRUN_ENGINE_TOK_TOK_DIR_H

#include "tok/tok.h"

/* The special tokens Megatron takes from the tokenizer (eod is eos); -1 where it names none. */
typedef struct tr_tok_specials {
    int32_t bos, eos;
} tr_tok_specials;

/* HuggingFaceTokenizer: model is a directory with tokenizer.json and tokenizer_config.json.
 * TikTokenizer: model is Megatron's rank file (FILE.json), read with tk's flags (NULL: Megatron's
 * defaults, which lack the pattern Megatron requires). */
tr_tok *tr_tok_open(const char *type, const char *model, const tr_tok_tiktoken *tk, tr_tok_specials *sp, char *err,
                    size_t errlen);

#endif
