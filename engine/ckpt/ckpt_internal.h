/* Shared by engine/ckpt's files: the shard header in memory, paths, checksums, placements.
 *
 * Shard file (little-endian):
 *   "TWINCKPT"  u32 version  u32 header_len  u64 file_size  i64 iteration
 *   i32 rank, tp_rank, pp_rank, dp_rank, cp_rank, tp, pp, dp, cp, dist_opt   u32 n_blobs
 *   n_blobs records: u16 name_len, name, u8 dtype, u8 ndim, u8 axis, u8 0, i64 shape[ndim],
 *                    i64 start, len, off, n, u64 data_offset, u64 nbytes, u32 crc32
 *   u32 crc32 of every header byte before it                      (header_len bytes so far)
 *   zero padding to 64 bytes, then each blob's data at its data_offset (64-byte aligned).
 * file_size is stored so truncation is found from the header alone. */
#ifndef TWINRUN_ENGINE_CKPT_CKPT_INTERNAL_H
#define TWINRUN_ENGINE_CKPT_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"

#define CKPT_MAGIC "TWINCKPT"
#define CKPT_FIXED_LEN 76u              /* bytes before the first blob record */
#define CKPT_MAX_HEADER_LEN (64u << 20) /* a header past this is corrupt, not large */
#define CKPT_MAX_BLOBS 1000000
#define CKPT_ALIGN 64u
#define TR_CKPT_PATH_MAX CKPT_PATH_MAX

typedef struct ckpt_blob_desc {
    char name[CKPT_NAME_MAX + 1];
    ckpt_dtype dtype;
    int ndim;
    int64_t shape[CKPT_MAX_DIMS];
    ckpt_place place; /* resolved */
    uint64_t offset, nbytes;
    uint32_t crc32;
} ckpt_blob_desc;

typedef struct ckpt_shard_header {
    uint32_t version, header_len;
    uint64_t file_size;
    int64_t iteration;
    ckpt_coords coords;
    ckpt_layout layout;
    int n;
    ckpt_blob_desc *blobs; /* malloc'd */
} ckpt_shard_header;

/* Parses a header image (buf holds at least the header; len may be the whole file). Checks the
 * structure and every bound (names, dtypes, shapes, placements inside the shape, data ranges
 * inside file_size, aligned, not overlapping) but NOT the header CRC (ckpt_header_crc_ok), so it
 * needs no checksum library and a fuzzer reaches every check. */
int ckpt_shard_header_parse(ckpt_shard_header *h, const uint8_t *buf, size_t len, const char *path, char *err,
                            size_t errlen);
void ckpt_shard_header_free(ckpt_shard_header *h);
/* Encodes the header for blobs (places resolved, crcs computed, offsets assigned). malloc'd. */
uint8_t *ckpt_shard_header_encode(const ckpt_shard_header *h, uint32_t *len_out);
/* Bytes the encoded header takes for these blobs. */
uint32_t ckpt_shard_header_size(const ckpt_blob_desc *blobs, int n);

/* Reads a shard's header from path (checks its CRC, then parses). */
int ckpt_shard_header_load(ckpt_shard_header *h, const char *path, char *err, size_t errlen);

/* Checks one shard file against what the checkpoint expects; full = read every byte (blob CRCs
 * and the file CRC into *info), else header only (size from stat). */
int ckpt_shard_check(const char *path, int64_t iteration, const ckpt_layout *layout, int rank, int full,
                     ckpt_file_info *info, ckpt_shard_header *h_out, char *err, size_t errlen);

/* Every tensor named in these headers is consistent (dtype, shape) and fully covered. */
int ckpt_coverage_check(const ckpt_shard_header *hs, int nh, const char *where, int *n_tensors, char *err,
                        size_t errlen);

/* ckpt_manifest_parse with the manifest's own checksum checked or not (a fuzzer then reaches every
 * other check). */
int ckpt_manifest_parse_ex(ckpt_manifest *m, const char *json, size_t len, const char *path, int check_crc, char *err,
                           size_t errlen);

/* CRC-32 (zlib), chainable: crc = ckpt_crc32(crc, buf, n), starting from 0. */
uint32_t ckpt_crc32(uint32_t crc, const void *buf, size_t n);

/* Placement arithmetic. Resolves -1s against the shape and checks the bounds. */
int ckpt_place_resolve(ckpt_place *p, const int64_t *shape, int ndim, const char *name, char *err, size_t errlen);
uint64_t ckpt_numel(const int64_t *shape, int ndim);
/* The k-th run of a (resolved) place: a range of consecutive global flat indices [*g, *g + *len)
 * holding place elements [*local, *local + *len). Runs come in increasing global order; returns 0
 * when k is past the last run. */
typedef struct ckpt_runs {
    uint64_t inner, mid, sub_row; /* elements per axis index, axis extent, elements per outer index of the slice */
    uint64_t first_o, last_o;
    ckpt_place p;
} ckpt_runs;
void ckpt_runs_init(ckpt_runs *it, const ckpt_place *p, const int64_t *shape, int ndim);
int ckpt_runs_get(const ckpt_runs *it, uint64_t k, uint64_t *g, uint64_t *local, uint64_t *len);
uint64_t ckpt_runs_count(const ckpt_runs *it);

/* Paths: snprintf that does not trip -Wformat-truncation (DIR is checked to be short). */
void ckpt_pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ckpt_iter_dir(char *out, size_t cap, const char *dir, int64_t iteration);

/* Writes a small file atomically through io: path.tmp, fsync, rename, fsync of parent_dir. */
int ckpt_write_atomic(const ckpt_io *io, const char *path, const char *parent_dir, const void *data, size_t n,
                      char *err, size_t errlen);
/* Writes all n bytes to fd through io; errors name path and, for ENOSPC, the bytes needed. */
int ckpt_write_all(const ckpt_io *io, int fd, const void *buf, size_t n, const char *path, uint64_t done,
                   uint64_t total, char *err, size_t errlen);
/* The message for a failed io call. */
int ckpt_io_err(const char *what, const char *path, int errnum, char *err, size_t errlen);
/* Opens a checkpoint file for reading: a regular file only (a FIFO or device in its place is refused at
 * once, naming what it is). The descriptor, or -1 with err. */
int ckpt_open_read(const char *path, char *err, size_t errlen);

/* Reads a whole small file (NUL-terminated, at most max bytes). malloc'd, NULL with err. */
char *ckpt_read_small(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* Little-endian fields. */
static inline void ckpt_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static inline void ckpt_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ckpt_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t ckpt_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ckpt_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t ckpt_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#endif
