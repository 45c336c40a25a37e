/* NumPy .npy files (format 1.0 written; 1.0, 2.0 and 3.0 read), for the index arrays Megatron
 * caches: document_index, sample_index, shuffle_index, dataset_index, dataset_sample_index.
 * Only little-endian C-order integer arrays of up to 2 dimensions. */
#ifndef TWINRUN_ENGINE_DATA_NPY_H
#define TWINRUN_ENGINE_DATA_NPY_H

#include <stddef.h>
#include <stdint.h>

typedef enum tr_npy_dtype {
    TR_NPY_INT8 = 0,
    TR_NPY_UINT8,
    TR_NPY_INT16,
    TR_NPY_UINT16,
    TR_NPY_INT32,
    TR_NPY_UINT32,
    TR_NPY_INT64,
    TR_NPY_NDTYPES
} tr_npy_dtype;

typedef struct tr_npy {
    tr_npy_dtype dtype;
    int ndim;         /* 1 or 2 */
    int64_t shape[2]; /* [ndim]; unused entries are 1 */
    int64_t count;    /* elements: shape[0] * shape[1] */
    void *data;       /* [count] of dtype, owned (free with tr_npy_free) */
} tr_npy;

size_t tr_npy_itemsize(tr_npy_dtype t);
const char *tr_npy_descr(tr_npy_dtype t); /* "<i4" ... */

/* Parses a whole .npy image; on success a->data is a fresh aligned copy of the payload.
 * Rejects bad magic/version, a header that is not the dict numpy writes, big-endian or
 * non-integer dtypes, Fortran order for 2-D, more than 2 dimensions, and a payload size that
 * disagrees with the shape. `what` names the file in messages. */
int tr_npy_parse(const void *buf, size_t len, const char *what, tr_npy *a, char *err, size_t errlen);
int tr_npy_load(const char *path, tr_npy *a, char *err, size_t errlen);
/* Writes format 1.0 with numpy's header layout (64-byte aligned, growth padding), atomically
 * (a temporary file renamed into place). data: [shape0 * shape1] of dtype. */
int tr_npy_save(const char *path, tr_npy_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err,
                size_t errlen);
void tr_npy_free(tr_npy *a);

#endif
