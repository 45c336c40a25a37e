/* Megatron's MockGPTLowLevelDataset: 100000 documents whose lengths are
 * numpy.random.default_rng(0).integers(1, 4096, size=100000, dtype=int32) (reproduced by
 * pcg64.c, first values 3484 2609 2094 1105 1261 168, sum 204637097); document k of length L is
 * (1, 2, ..., L-1) % vocab_size followed by eod. */
#ifndef TWINRUN_ENGINE_DATA_MOCK_DATASET_H
#define TWINRUN_ENGINE_DATA_MOCK_DATASET_H

#include "data/source.h"

#define TR_MOCK_DOCS 100000
#define TR_MOCK_MAX_LEN 4096

typedef struct tr_mock_dataset {
    int32_t lengths[TR_MOCK_DOCS]; /* [100000] */
    int64_t vocab_size, eod;
} tr_mock_dataset;

/* m is large (400 kB): allocate it. */
int tr_mock_init(tr_mock_dataset *m, int64_t vocab_size, int64_t eod, char *err, size_t errlen);
tr_doc_source tr_mock_source(const tr_mock_dataset *m);

#endif
