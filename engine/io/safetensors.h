/* Hugging Face safetensors: validated reading (one file or a sharded model directory) and atomic
 * writing.
 *
 * File layout: u64 little-endian header length N, N bytes of UTF-8 JSON, then the data section.
 * The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
 * to the data section) plus an optional "__metadata__" string->string map.
 *
 * Every parser here returns 0, or -1 with a one-line message in err that names the file, the
 * tensor or key, the problem and the fix. Nothing here exits or aborts on bad input. */
#ifndef TWINRUN_ENGINE_IO_SAFETENSORS_H
#define TWINRUN_ENGINE_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER_LEN 100000000ull /* the limit Hugging Face's reader enforces */

typedef enum st_dtype {
    ST_F32,
    ST_BF16,
    ST_F16,
    ST_F64,
    ST_I32,
    ST_I64,
    ST_U8,
    ST_I8,
    ST_I16,
    ST_U16,
    ST_BOOL
} st_dtype;

#define ST_NUM_DTYPES 11

/* "F32", "BF16", ...; "?" for a value outside the enum. */
const char *st_dtype_name(st_dtype dt);
/* Bytes per element; 0 for a value outside the enum. */
size_t st_dtype_size(st_dtype dt);
/* Parses a safetensors dtype string ("F32", ...). Returns 0, or -1 when twinrun does not know it. */
int st_dtype_parse(const char *s, st_dtype *out);

typedef struct st_tensor {
    char *name; /* owned */
    st_dtype dtype;
    int ndim; /* 0..8 */
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets relative to the data section */
} st_tensor;

typedef struct st_file {
    char path[1024];
    int n;               /* tensors, excluding __metadata__ */
    st_tensor *tensors;  /* sorted by begin */
    const uint8_t *data; /* data section (points into `owned`) */
    uint64_t data_len;
    uint8_t *owned; /* whole file contents: a private copy, or a read-only mapping when `mapped` */
    size_t owned_len;
    bool mapped;    /* owned is an mmap of the file (st_open), else malloc'd */
    int *by_name;   /* indices into tensors, sorted by name (binary search in st_find) */
    int n_metadata; /* __metadata__ entries, as parallel arrays of owned strings */
    char **metadata_keys, **metadata_values;
} st_file;

/* Parses a safetensors image held in memory. On success f owns a private COPY of buf (the caller
 * keeps buf); on failure f is left empty (st_close on it is harmless). Checks, each with its own
 * message: file shorter than 8 bytes; header length N == 0, > 100,000,000 or past the end of the
 * file; header not UTF-8 or not one JSON object (trailing spaces allowed); an entry that is not an
 * object or lacks dtype/shape/data_offsets; unknown dtype; shape not a list of at most 8
 * non-negative integers; data_offsets not two non-negative integers with begin <= end;
 * end - begin != numel * itemsize (with overflow checks); offsets that overlap or leave gaps
 * (sorted by begin they must tile the data section from 0); last end != data length (truncated
 * data or trailing bytes); duplicate names; __metadata__ not a string->string map. */
int st_parse(st_file *f, const uint8_t *buf, size_t len, const char *path_for_messages, char *err, size_t errlen);

/* Same, but takes ownership of buf (a malloc'd block) whether it succeeds or fails. */
int st_parse_take(st_file *f, uint8_t *buf, size_t len, const char *path_for_messages, char *err, size_t errlen);

/* Maps (or, where mapping fails, reads) the whole file and parses it. */
int st_open(st_file *f, const char *path, char *err, size_t errlen);
void st_close(st_file *f);

/* NULL when absent. */
const st_tensor *st_find(const st_file *f, const char *name);
/* __metadata__[key], or NULL. */
const char *st_metadata_get(const st_file *f, const char *key);
/* Elements in t (product of its shape; 1 for a scalar). Parsed tensors never overflow. */
uint64_t st_tensor_numel(const st_tensor *t);

/* Copies tensor `name` into dst as float32, converting F32, BF16, F16 and F64 (an F64 value
 * outside float32's range is an error, not a silent inf), after checking that its shape equals
 * shape[0..ndim) exactly. Errors name the tensor and the expected and found shape or dtype. */
int st_read_f32(const st_file *f, const char *name, float *dst, const int64_t *shape, int ndim, char *err,
                size_t errlen);
/* Same for integers into int32: I32, I64 (each value range-checked), U8, I8, I16, U16, BOOL. */
int st_read_i32(const st_file *f, const char *name, int32_t *dst, const int64_t *shape, int ndim, char *err,
                size_t errlen);

/* The same conversions on an already-found tensor (t must belong to f). */
int st_tensor_read_f32(const st_file *f, const st_tensor *t, float *dst, const int64_t *shape, int ndim, char *err,
                       size_t errlen);
int st_tensor_read_i32(const st_file *f, const st_tensor *t, int32_t *dst, const int64_t *shape, int ndim, char *err,
                       size_t errlen);

/* ---- a model directory ----------------------------------------------------------------------
 * DIR/model.safetensors, or else DIR/model.safetensors.index.json
 * {"metadata": {"total_size": N}, "weight_map": {name: file}} and its shards (the single file wins
 * when both exist, as in transformers). Validated: every shard exists and parses; every
 * weight_map entry is in the shard it names, and listed once; no shard holds a tensor the
 * weight_map does not list or assigns elsewhere; shard names are plain file names (no '/', '\\'
 * or '..'). total_size must be a number when present but is not compared: exporters disagree on
 * what it counts. */
typedef struct st_model_entry st_model_entry;
typedef struct st_model {
    int nfiles;
    st_file *files;
    int n;                   /* tensor names across all files */
    st_model_entry *entries; /* sorted by name */
    bool *read;              /* read[i]: entries[i] was read through st_model_read_* */
} st_model;

int st_model_open(st_model *m, const char *dir, char *err, size_t errlen);
void st_model_close(st_model *m);
const st_tensor *st_model_find(const st_model *m, const char *name, const st_file **file_out);
/* Like st_read_f32 on whichever shard holds `name`; each success marks the name read (bookkeeping
 * held behind the const pointer, so a loader can pass the model around read-only). */
int st_model_read_f32(const st_model *m, const char *name, float *dst, const int64_t *shape, int ndim, char *err,
                      size_t errlen);
/* Tensor names in the model (all shards). A loader that read k distinct expected names and finds
 * st_model_count > k knows there are unexpected tensors; st_model_unread lists them. */
int st_model_count(const st_model *m);
/* Name i (0 <= i < count), in name order. */
const char *st_model_name(const st_model *m, int i);
/* Names never read by st_model_read_*: writes up to max of them to names (may be NULL when max
 * is 0) and returns how many there are in all. */
int st_model_unread(const st_model *m, const char **names, int max);

/* ---- writer (export) ------------------------------------------------------------------------
 * Tensors are laid out contiguously in insertion order; the header is
 * {"__metadata__": {"format": "pt"}, name: {...}, ...} padded with spaces to a multiple of 8 (so
 * the data section is 8-byte aligned), which is what transformers' loader expects. */
typedef struct st_writer st_writer;

st_writer *st_writer_new(void); /* NULL only when out of memory */
/* Copies data (numel * itemsize bytes). Rejects an empty or non-UTF-8 name, "__metadata__", a
 * name added before, ndim outside 0..8, a negative dim, and sizes that overflow. */
int st_writer_add(st_writer *w, const char *name, st_dtype dtype, const int64_t *shape, int ndim, const void *data,
                  char *err, size_t errlen);
/* Writes path atomically: path.tmp, fsync, rename over path, fsync of the directory. On failure
 * path is untouched and path.tmp removed. The writer may be written again or freed. */
int st_writer_write(st_writer *w, const char *path, char *err, size_t errlen);
/* Total data bytes added so far (for a sharded index's total_size). */
uint64_t st_writer_data_bytes(const st_writer *w);
void st_writer_free(st_writer *w);

#endif
