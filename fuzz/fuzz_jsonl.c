/* libFuzzer: the `dataset preprocess` input line parser (tr_jsonl_ids). Accepted ids must lie in
 * [0, vocab) and leave room for an appended eod. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/jsonl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t *ids = NULL, cap = 0;
    char err[512];
    err[0] = '\0';
    int64_t n = tr_jsonl_ids(s, &ids, &cap, 50000, err, sizeof err);
    if (n < 0) {
        if (!err[0]) __builtin_trap();
    } else {
        if (n + 1 > cap) __builtin_trap();
        for (int64_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= 50000) __builtin_trap();
        ids[n] = 49999; /* the eod slot exists */
    }
    free(ids);
    free(s);
    return 0;
}
