/* A tokenizer by Megatron's flags: --tokenizer-type TYPE --tokenizer-model PATH. */
#ifndef TWINRUN_ENGINE_TOK_TOK_DIR_H
#define TWINRUN_ENGINE_TOK_TOK_DIR_H

#include "tok/tok.h"

/* The special tokens Megatron takes from the tokenizer (eod is eos); -1 where it names none. */
typedef struct tr_tok_specials {
    int32_t bos, eos;
} tr_tok_specials;

/* HuggingFaceTokenizer: model is a directory with tokenizer.json and tokenizer_config.json. */
tr_tok *tr_tok_open(const char *type, const char *model, tr_tok_specials *sp, char *err, size_t errlen);

#endif
