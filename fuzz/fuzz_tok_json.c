/* libFuzzer: tokenizer.json's loader (tr_tok_from_json). A file it refuses must say why; a file it
 * accepts must encode and decode a fixed text (added tokens, digits, CJK, runs of blanks) within its
 * memory. The round trip is not asserted here: a file may give two tokens one id, and then the id
 * decodes to one of them (fuzz_tok_encode asserts it for a real tokenizer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    tr_tok *t = tr_tok_from_json((const char *)data, size, "fuzz.json", err, sizeof err);
    if (!t) {
        if (!err[0]) __builtin_trap(); /* every refusal says why */
        return 0;
    }
    static const char text[] = "Hello, world! <|end_of_text|> don't 12345 \xe6\x95\xb0\xe5\xad\x97\n\n  x";
    tr_tok_buf b = {0};
    char *out = NULL;
    size_t len = 0, cap = 0;
    if (tr_tok_encode(t, &b, text, sizeof text - 1, true, err, sizeof err) == 0)
        (void)tr_tok_decode(t, b.ids, b.n, false, &out, &len, &cap, err, sizeof err);
    free(out);
    tr_tok_buf_free(&b);
    tr_tok_free(t);
    return 0;
}
