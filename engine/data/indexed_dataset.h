/* Megatron's IndexedDataset: <prefix>.idx (MMIDIDX version 1) + <prefix>.bin (raw tokens).
 * Layout (little-endian, no padding): magic "MMIDIDX\0\0", u64 version = 1, u8 dtype code,
 * u64 sequence count S, u64 document count D, int32 lengths[S], int64 byte pointers[S],
 * int64 document_indices[D] (0 .. S), then optionally int8 sequence modes[S] (multimodal files;
 * not flagged in the header, recognised by the file size). */
#ifndef TWINRUN_ENGINE_DATA_INDEXED_DATASET_H
#define TWINRUN_ENGINE_DATA_INDEXED_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Megatron's DType codes. */
enum {
    TR_IDX_UINT8 = 1,
    TR_IDX_INT8 = 2,
    TR_IDX_INT16 = 3,
    TR_IDX_INT32 = 4,
    TR_IDX_INT64 = 5,
    TR_IDX_FLOAT64 = 6,
    TR_IDX_FLOAT32 = 7,
    TR_IDX_UINT16 = 8,
};

typedef struct tr_idx_dataset tr_idx_dataset;

/* itemsize of a dtype code, 0 if unknown; its numpy name ("uint16"). */
int tr_idx_itemsize(int code);
const char *tr_idx_dtype_name(int code);
/* Megatron's choice for a tokenizer: uint16 below 65500 ids, else int32. */
int tr_idx_optimal_code(int64_t vocab_size);

/* Opens and validates <prefix>.idx and <prefix>.bin. use_mmap: map .bin (Megatron's default) or
 * read it with pread (--no-mmap-bin-files). The .idx arrays are copied into aligned memory. */
tr_idx_dataset *tr_idx_open(const char *prefix, bool use_mmap, char *err, size_t errlen);
/* The same checks on an in-memory .idx image and a .bin of bin_size bytes (fuzzing, tests). */
tr_idx_dataset *tr_idx_parse(const void *idx, size_t idx_len, int64_t bin_size, const char *what, char *err,
                             size_t errlen);
void tr_idx_close(tr_idx_dataset *d);

int tr_idx_dtype(const tr_idx_dataset *d);
int64_t tr_idx_num_sequences(const tr_idx_dataset *d);
int64_t tr_idx_num_documents(const tr_idx_dataset *d);   /* D - 1 */
const int32_t *tr_idx_lengths(const tr_idx_dataset *d);  /* [S] */
const int64_t *tr_idx_pointers(const tr_idx_dataset *d); /* [S] byte offsets */
const int8_t *tr_idx_modes(const tr_idx_dataset *d);     /* [S] or NULL */

/* Tokens [offset, offset+count) of sequence seq, widened to int64 (out: [count]). */
int tr_idx_read(const tr_idx_dataset *d, int64_t seq, int64_t offset, int64_t count, int64_t *out, char *err,
                size_t errlen);

/* Writer, as Megatron's IndexedDatasetBuilder: sequences, and document ends after them (a document
 * of several sequences: a JSON list of sentences; of none: a text with no tokens). Tokens are
 * range-checked against the dtype. */
typedef struct tr_idx_writer tr_idx_writer;
/* Writes PREFIX.bin/.idx under temporary names, renamed at the finish: a failure leaves an earlier
 * dataset at PREFIX as it was. An existing PREFIX.bin or .idx is refused unless overwrite. */
tr_idx_writer *tr_idx_writer_open(const char *prefix, int dtype_code, bool overwrite, char *err, size_t errlen);
/* The open's refusal alone: -1, naming the files and --overwrite, when PREFIX.bin or .idx exists. */
int tr_idx_writer_check_new(const char *prefix, char *err, size_t errlen);
int tr_idx_writer_add_sequence(tr_idx_writer *w, const int64_t *tokens, int64_t n, char *err, size_t errlen); /* [n] */
int tr_idx_writer_end_document(tr_idx_writer *w, char *err, size_t errlen);
/* A document of one sequence: add_sequence, then end_document. */
int tr_idx_writer_add(tr_idx_writer *w, const int64_t *tokens, int64_t n, char *err, size_t errlen); /* [n] */
/* Writes the .idx and renames both files to their names; on failure removes the temporary files
 * (never an earlier dataset). Always frees w. */
int tr_idx_writer_finish(tr_idx_writer *w, char *err, size_t errlen);
/* The finish in two steps, for several datasets that are kept all or none (preprocess's --json-keys):
 * close writes the .idx and syncs both files (on failure w stays for the abort); commit renames them
 * and always frees w. */
int tr_idx_writer_close(tr_idx_writer *w, char *err, size_t errlen);
int tr_idx_writer_commit(tr_idx_writer *w, char *err, size_t errlen);
/* Removes the temporary files and frees w. */
void tr_idx_writer_abort(tr_idx_writer *w);

#endif
