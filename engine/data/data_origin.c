/* tr_data_token_origin: a train sample's token traced back to its file and byte. */
#include <stdio.h>

#include "data/data_internal.h"
#include "data/data_origin.h"
#include "twinrun/err.h"

int tr_data_token_origin(const tr_config *cfg, int64_t iteration, char *bin_path, size_t pathlen, int64_t *byte_offset,
                         int *dtype_code, int *itemsize, char *err, size_t errlen) {
    if (cfg->mock_data) return tr_errf(err, errlen, "mock data has no file to trace a token to");
    tr_data *d = tr_data_open(cfg, 0, 1, err, errlen);
    if (!d) return -1;
    int rc = -1;
    const int64_t idx = (iteration - 1) * (int64_t)d->gbs, pos = d->seq / 2;
    int64_t inner, doc, off;
    const tr_gpt_dataset *g = iteration >= 1 ? tr_data_sample_source(d, TR_SPLIT_TRAIN, idx, &inner) : NULL;
    if (!g) {
        tr_errf(err, errlen, "iteration %lld reads no train sample (the split has %lld)", (long long)iteration,
                (long long)tr_data_split_len(d, TR_SPLIT_TRAIN));
        goto done;
    }
    const int k = (int)(g - d->sp[TR_SPLIT_TRAIN].gpt); /* the split's datasets are the prefixes, in order */
    if (k < 0 || k >= d->n_prefix || !d->idx[k] || tr_gpt_dataset_locate(g, inner, pos, &doc, &off)) {
        tr_errf(err, errlen, "train sample %lld: cannot trace token %lld to a file", (long long)idx, (long long)pos);
        goto done;
    }
    const int code = tr_idx_dtype(d->idx[k]);
    snprintf(bin_path, pathlen, "%s.bin", d->prefix[k]);
    *byte_offset = tr_idx_pointers(d->idx[k])[doc] + off * tr_idx_itemsize(code);
    *dtype_code = code;
    *itemsize = tr_idx_itemsize(code);
    rc = 0;
done:
    tr_data_close(d);
    return rc;
}
