/* A low-level dataset as GPTDataset sees it: documents with lengths, readable by slice.
 * Implemented by the IndexedDataset (one "document" = one sequence, as Megatron's GPTDataset
 * counts them) and by the mock dataset. */
#ifndef TWINRUN_ENGINE_DATA_SOURCE_H
#define TWINRUN_ENGINE_DATA_SOURCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tr_doc_source {
    const char *path;       /* Megatron's dataset_path (the --data-path prefix as given); NULL = mock */
    int64_t n;              /* documents */
    const int32_t *lengths; /* [n] */
    /* tokens [off, off+count) of document doc into out[count]; 0 or -1 with err */
    int (*read)(const void *ctx, int64_t doc, int64_t off, int64_t count, int64_t *out, char *err, size_t errlen);
    const void *ctx;
} tr_doc_source;

#endif
