/* libFuzzer: --split strings (tr_split_parse): any text either fails with a message or yields
 * bounds 0 <= lo <= hi <= 1 (up to rounding) and in-range document ranges. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    tr_split sp;
    char err[512];
    err[0] = '\0';
    if (tr_split_parse(s, &sp, err, sizeof err)) {
        if (!err[0]) __builtin_trap();
    } else {
        for (int k = 0; k < TR_NSPLITS; k++) {
            if (sp.lo[k] < 0 || sp.hi[k] > 1.0000001 || sp.hi[k] < sp.lo[k]) __builtin_trap();
            int64_t b, e;
            tr_split_range(&sp, k, 1000003, &b, &e);
            if (b < 0 || e > 1000003 || b > e) __builtin_trap();
        }
    }
    free(s);
    return 0;
}
