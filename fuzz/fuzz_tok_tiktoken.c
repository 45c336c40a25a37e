/* libFuzzer: Megatron's TikTokenizer rank file (tr_tok_from_tiktoken). The input's first byte picks the
 * pattern (v1, v2, or none) and the number of special tokens, the next two the vocabulary past 256
 * (0: Megatron's default); the rest is the file. A refusal must say why; an accepted file must encode
 * any text back to itself, byte for byte (every id decodes to the bytes it stands for). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    static const char *const pattern[] = {"v1", "v2", NULL};
    int64_t extra = data[1] | data[2] << 8;
    tr_tok_tiktoken o = {
        .pattern = pattern[data[0] % 3], .num_special = 3 + (data[0] >> 2), .vocab_size = extra ? 256 + extra : 0};
    char err[512] = "";
    tr_tok *t = tr_tok_from_tiktoken((const char *)data + 3, size - 3, "fuzz.json", &o, err, sizeof err);
    if (!t) {
        if (!err[0]) __builtin_trap();
        return 0;
    }
    static const char text[] = "Hello, world! <s></s> don't 12345 \xe6\x95\xb0\xe5\xad\x97\n\n  x\r\n\tAbC/dEf";
    tr_tok_buf b = {0};
    char *out = NULL;
    size_t len = 0, cap = 0;
    if (tr_tok_encode(t, &b, text, sizeof text - 1, true, err, sizeof err) ||
        tr_tok_decode(t, b.ids, b.n, false, &out, &len, &cap, err, sizeof err) || len != sizeof text - 1 ||
        memcmp(out, text, len))
        __builtin_trap();
    free(out);
    tr_tok_buf_free(&b);
    tr_tok_free(t);
    return 0;
}
