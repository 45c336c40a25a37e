/* libFuzzer: one line of `dataset preprocess`'s text input (tr_pre_line: JSON, the keys, UTF-8, the
 * tokenizer) with tests/data/tokenizer_small and --append-eod. A bad line is refused with a message;
 * a good one ends each non-empty document in the eod, and its sequence lengths add up. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/preprocess.h"
#include "tok/tok_dir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* tokenizer_small through the engine's own loader (Megatron's HuggingFaceTokenizer directory) */
static tr_tok *load(void) {
    char err[512];
    tr_tok_specials sp;
    tr_tok *t = tr_tok_open("HuggingFaceTokenizer", TWINRUN_TEST_DATA "/tokenizer_small", NULL, &sp, err, sizeof err);
    if (!t) __builtin_trap();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tr_tok *t;
    static tr_tok_buf b;
    static tr_pre_doc docs[2];
    if (!t) t = load();
    tr_pre_opts o = {.keys = {"text", "t2"}, .nkeys = 2, .tok = t, .add_special = true, .append_eod = true, .eod = 1};
    char err[512] = "";
    if (tr_pre_line(&o, &b, (const char *)data, size, docs, err, sizeof err)) {
        if (!err[0]) __builtin_trap();
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        int64_t sum = 0;
        for (int64_t q = 0; q < docs[k].nseq; q++) sum += docs[k].lens[q];
        if (sum != docs[k].n || (docs[k].n && docs[k].ids[docs[k].n - 1] != 1)) __builtin_trap();
    }
    return 0;
}
