/* libFuzzer: Megatron .idx parsing (tr_idx_parse). The first 8 input bytes choose the size of
 * the .bin the index must fit; the rest is the .idx image. Every rejection must be an error
 * message, never a crash; an accepted index must describe only in-bounds sequences. */
#include <stdint.h>
#include <string.h>

#include "data/indexed_dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    uint64_t bin;
    memcpy(&bin, data, 8);
    int64_t bin_size = (int64_t)(bin % (1u << 20));
    char err[512];
    tr_idx_dataset *d = tr_idx_parse(data + 8, size - 8, bin_size, "fuzz", err, sizeof err);
    if (!d) {
        if (!err[0]) __builtin_trap(); /* every rejection says why */
        return 0;
    }
    int64_t S = tr_idx_num_sequences(d);
    const int32_t *len = tr_idx_lengths(d);
    const int64_t *ptr = tr_idx_pointers(d);
    int isz = tr_idx_itemsize(tr_idx_dtype(d));
    for (int64_t i = 0; i < S; i++)
        if (len[i] < 0 || ptr[i] < 0 || ptr[i] + (int64_t)len[i] * isz > bin_size) __builtin_trap();
    tr_idx_close(d);
    return 0;
}
