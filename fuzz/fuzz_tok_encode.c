/* libFuzzer: the encoder (tr_tok_encode) on any bytes, with tests/data/tokenizer_small. Invalid
 * UTF-8 must be refused with a message; valid text must decode back to itself, byte for byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"
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
    if (!t) t = load();
    char err[256] = "", *out = NULL;
    size_t len = 0, cap = 0;
    const char *s = (const char *)data;
    if (tr_tok_encode(t, &b, s, size, false, err, sizeof err)) {
        if (tr_tok_utf8_valid(s, size) == size || !err[0]) __builtin_trap();
        return 0;
    }
    if (tr_tok_decode(t, b.ids, b.n, false, &out, &len, &cap, err, sizeof err)) __builtin_trap();
    if (len != size || memcmp(out, s, size)) __builtin_trap();
    free(out);
    return 0;
}
