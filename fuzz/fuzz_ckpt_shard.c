/* libFuzzer target: the shard header parser on raw bytes (the header CRC is checked elsewhere, so
 * every structural check is reachable). What parses must keep its promises: every blob's data lies
 * inside the file, in order, aligned, sized by its placement. */
#include <stdint.h>
#include <stdlib.h>

#include "ckpt/ckpt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_shard_header h;
    char err[512] = "";
    if (ckpt_shard_header_parse(&h, data, size, "fuzz/shard.bin", err, sizeof err) != 0) {
        if (err[0] == '\0') abort();
        return 0;
    }
    uint64_t prev_end = h.header_len;
    for (int i = 0; i < h.n; i++) {
        const ckpt_blob_desc *d = &h.blobs[i];
        if (d->offset < prev_end || d->offset % CKPT_ALIGN || d->offset + d->nbytes > h.file_size) abort();
        if (d->nbytes != (uint64_t)d->place.n * ckpt_dtype_size(d->dtype)) abort();
        ckpt_runs it;
        ckpt_runs_init(&it, &d->place, d->shape, d->ndim);
        uint64_t g, local, len, total = 0, numel = ckpt_numel(d->shape, d->ndim);
        for (uint64_t k = 0; k < 64 && ckpt_runs_get(&it, k, &g, &local, &len); k++) {
            if (g + len > numel || local != total) abort();
            total += len;
        }
        prev_end = d->offset + d->nbytes;
    }
    ckpt_shard_header_free(&h);
    return 0;
}
