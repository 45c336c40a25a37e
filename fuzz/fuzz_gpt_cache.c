/* libFuzzer: validation of cached GPTDataset indices (tr_gpt_index_check), the guard between a
 * corrupt or stale cache file and out-of-bounds sample reads. The input is split into three .npy
 * images (document, sample, shuffle index; 2-byte little-endian lengths in front of the first
 * two). Arrays that pass must let every sample be assembled within the documents. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/gpt_index.h"
#include "data/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int32_t lengths[5] = {10, 3, 7, 1, 12}; /* [5] documents, 33 tokens */
    if (size < 4) return 0;
    size_t l0 = (size_t)data[0] | (size_t)data[1] << 8, l1 = (size_t)data[2] | (size_t)data[3] << 8;
    data += 4, size -= 4;
    if (l0 > size || l1 > size - l0) return 0;
    tr_gpt_index_params p = {lengths, 5, 1, 5, 6, 4, 1234, 1};
    tr_gpt_index ix;
    char err[512];
    if (tr_gpt_index_plan(&p, &ix, err, sizeof err)) return 0;
    tr_npy a[3];
    memset(a, 0, sizeof a);
    const uint8_t *part[3] = {data, data + l0, data + l0 + l1};
    size_t plen[3] = {l0, l1, size - l0 - l1};
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) ok = tr_npy_parse(part[k], plen[k], "fuzz", &a[k], err, sizeof err) == 0;
    /* the loader's shape/dtype checks (gpt_dataset.c) before the value checks */
    ok = ok && a[0].dtype == TR_NPY_INT32 && a[0].ndim == 1 && a[0].shape[0] == ix.n_doc;
    ok = ok && a[1].dtype == (ix.sample64 ? TR_NPY_INT64 : TR_NPY_INT32) && a[1].ndim == 2 &&
         a[1].shape[0] == ix.n_samples + 1 && a[1].shape[1] == 2;
    ok = ok && a[2].dtype == (ix.shuffle64 ? TR_NPY_INT64 : TR_NPY_UINT32) && a[2].ndim == 1 &&
         a[2].shape[0] == ix.n_samples;
    if (ok) {
        ix.doc_index = a[0].data, ix.sample_index = a[1].data, ix.shuffle_index = a[2].data;
        if (tr_gpt_index_check(&p, &ix, err, sizeof err) == 0) {
            for (int64_t i = 0; i < ix.n_samples; i++) { /* assemble each sample's span */
                int64_t j = tr_gpt_shuffle(&ix, i);
                int64_t d0 = tr_gpt_sample_doc(&ix, j), d1 = tr_gpt_sample_doc(&ix, j + 1);
                if (j < 0 || j >= ix.n_samples || d0 < 0 || d1 >= ix.n_doc) __builtin_trap();
                for (int64_t d = d0; d <= d1; d++)
                    if (ix.doc_index[d] < 1 || ix.doc_index[d] >= 5) __builtin_trap();
            }
        }
        ix.doc_index = NULL, ix.sample_index = NULL, ix.shuffle_index = NULL;
    }
    for (int k = 0; k < 3; k++) tr_npy_free(&a[k]);
    return 0;
}
