/* libFuzzer: .npy parsing (tr_npy_parse), as used for Megatron's cached index arrays. An accepted
 * array's payload must be exactly count * itemsize bytes of the input. */
#include <stdint.h>
#include <stdlib.h>

#include "data/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_npy a;
    char err[512];
    err[0] = '\0';
    if (tr_npy_parse(data, size, "fuzz", &a, err, sizeof err)) {
        if (!err[0]) __builtin_trap();
        return 0;
    }
    size_t bytes = (size_t)a.count * tr_npy_itemsize(a.dtype);
    if (bytes > size) __builtin_trap();
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < bytes; i++) sink ^= ((unsigned char *)a.data)[i]; /* touch every byte */
    (void)sink;
    tr_npy_free(&a);
    return 0;
}
