/* Mock documents, identical to Megatron's MockGPTLowLevelDataset (see mock_dataset.h). */
#include "data/mock_dataset.h"

#include "data/pcg64.h"
#include "twinrun/err.h"

int tr_mock_init(tr_mock_dataset *m, int64_t vocab_size, int64_t eod, char *err, size_t errlen) {
    if (vocab_size <= 0)
        return tr_errf(err, errlen, "--mock-data needs --vocab-size (the mock tokens are ids %% vocab)");
    m->vocab_size = vocab_size;
    m->eod = eod;
    tr_pcg64 g;
    tr_pcg64_seed(&g, 0); /* Megatron hard-codes seed 0, independent of --seed */
    tr_pcg64_integers_i32(&g, 1, TR_MOCK_MAX_LEN, m->lengths, TR_MOCK_DOCS);
    return 0;
}

static int mock_read(const void *ctx, int64_t doc, int64_t off, int64_t count, int64_t *out, char *err, size_t errlen) {
    const tr_mock_dataset *m = ctx;
    if (doc < 0 || doc >= TR_MOCK_DOCS || off < 0 || count < 0 || off + count > m->lengths[doc])
        return tr_errf(err, errlen, "mock document %lld: read [%lld, +%lld) out of range", (long long)doc,
                       (long long)off, (long long)count);
    int64_t last = m->lengths[doc] - 1;
    for (int64_t i = 0; i < count; i++) {
        int64_t p = off + i;
        out[i] = p == last ? m->eod : (p + 1) % m->vocab_size;
    }
    return 0;
}

tr_doc_source tr_mock_source(const tr_mock_dataset *m) {
    tr_doc_source s = {NULL, TR_MOCK_DOCS, m->lengths, mock_read, m};
    return s;
}
