/* twinrun's own checkpoint: one shard file per rank, a manifest, a tracker file written last.
 *
 *   DIR/latest_checkpointed_iteration.txt      "100" (no newline: Megatron's tracker), replaced atomically LAST
 *   DIR/iter_0000100/shard_00000.bin ...       one per global rank (Megatron order: tp fastest, then cp, dp, pp)
 *   DIR/iter_0000100/manifest.json             written by rank 0 once every shard is durable and checked
 *
 * A shard holds named blobs. Each blob is a piece of a GLOBAL tensor (its global name, dtype and
 * global shape) described by a ckpt_place, so a run with another layout can reassemble any region
 * from whichever shards hold it (ckpt_read). Every blob, every shard header and every file carries
 * a CRC-32 (zlib's), checked by ckpt_verify and ckpt_save_commit.
 *
 * Save, in order: rank 0 ckpt_save_begin; barrier; every rank ckpt_shard_write; gather the
 * ckpt_file_info of every rank to rank 0 (optional, see ckpt_save_commit); barrier; rank 0
 * ckpt_save_commit. A crash anywhere leaves the tracker naming the previous complete checkpoint.
 *
 * Every function returns 0, or -1 with a one-line message in err naming the file and the problem
 * (ENOSPC: the bytes needed). Nothing here exits or aborts on bad input. */
#ifndef TWINRUN_ENGINE_CKPT_CKPT_H
#define TWINRUN_ENGINE_CKPT_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "twinrun/file_io.h"

#define CKPT_FORMAT_VERSION 1
#define CKPT_NAME_MAX 255 /* bytes in a blob name */
#define CKPT_MAX_DIMS 4
#define CKPT_TRACKER "latest_checkpointed_iteration.txt"
#define CKPT_MANIFEST "manifest.json"
#define CKPT_FILE_NAME_LEN 64
#define CKPT_PATH_MAX 4096 /* DIR itself is limited to 3000 bytes */

/* ---- file I/O, through a table so tests can inject crashes and ENOSPC at every step ---------- */
typedef tr_file_io ckpt_io; /* twinrun/file_io.h: the table, shared with the fault library */

/* The real thing (plain POSIX calls). Every function below accepts io == NULL for it. */
const ckpt_io *ckpt_io_posix(void);
/* The same without fsync (of a file or a directory: each returns 0 at once), for a rehearsal whose faults
 * end processes, never the machine: what a process wrote is in the page cache, synced or not, for the
 * next one to read (tr_config.ckpt_no_fsync). */
const ckpt_io *ckpt_io_posix_nosync(void);

/* ---- tensors and where a blob sits in them -------------------------------------------------- */
typedef enum ckpt_dtype {
    CKPT_F32 = 1,
    CKPT_BF16,
    CKPT_F16,
    CKPT_F64,
    CKPT_I32,
    CKPT_I64,
    CKPT_U8,
    CKPT_U64
} ckpt_dtype;

const char *ckpt_dtype_name(ckpt_dtype dt); /* "F32", ...; "?" outside the enum */
size_t ckpt_dtype_size(ckpt_dtype dt);      /* 0 outside the enum */

/* A blob holds the sub-tensor with indices [start, start + len) along `axis` (all of every other
 * axis), and of that sub-tensor the elements [off, off + n) in row-major order. This covers a
 * whole tensor, TP splits along rows (axis 0) or columns (axis 1), and a distributed optimizer's
 * flat range of a TP split. len = -1 / n = -1 mean "to the end" and are resolved on write. */
typedef struct ckpt_place {
    int axis;
    int64_t start, len;
    int64_t off, n;
} ckpt_place;

ckpt_place ckpt_place_full(void);                                  /* the whole tensor */
ckpt_place ckpt_place_slice(int axis, int64_t start, int64_t len); /* a TP split */
ckpt_place ckpt_place_flat(int64_t off, int64_t n);                /* a flat range of the whole tensor */

typedef struct ckpt_blob {
    const char *name; /* global name, e.g. "model.norm.weight", "optim.exp_avg/model.norm.weight" */
    ckpt_dtype dtype;
    const void *data;             /* HOST memory: place.n elements (after resolving) */
    int ndim;                     /* 0..CKPT_MAX_DIMS */
    int64_t shape[CKPT_MAX_DIMS]; /* the GLOBAL shape */
    ckpt_place place;
} ckpt_blob;

/* ---- layout ---------------------------------------------------------------------------------- */
typedef struct ckpt_layout {
    int tp, pp, dp, cp;
    bool dist_opt; /* --use-distributed-optimizer */
} ckpt_layout;

typedef struct ckpt_coords {
    int rank, tp, pp, dp, cp; /* global rank and its coordinates */
} ckpt_coords;

int ckpt_layout_world(const ckpt_layout *l);
/* Megatron's order tp-cp-dp-pp (tp fastest). */
ckpt_coords ckpt_coords_of(const ckpt_layout *l, int rank);
/* "shard_00003.bin" */
void ckpt_shard_name(char *out, size_t cap, int rank);

/* ---- the manifest ---------------------------------------------------------------------------- */
typedef struct ckpt_model_shape { /* what must match on load (seq_length is recorded, not enforced) */
    int num_layers, hidden_size, ffn_hidden_size, num_attention_heads, num_query_groups, kv_channels;
    int vocab_size, make_vocab_size_divisible_by, max_position_embeddings, seq_length;
    int normalization; /* tr_norm_type */
    bool swiglu, untie_embeddings_and_output_weights;
    double rotary_base, norm_epsilon;
    /* Recorded by newer versions (has_architecture false in older manifests, which are then not checked on
     * these): every other flag that changes what the weights mean. */
    bool has_architecture;
    bool apply_layernorm_1p, add_bias_linear, add_qkv_bias, qk_layernorm;
    double rotary_percent;
} ckpt_model_shape;

typedef struct ckpt_sched { /* Megatron's OptimizerParamScheduler state, in samples */
    double max_lr, min_lr, init_lr;
    int64_t warmup_samples, decay_samples, num_steps;
    int style; /* tr_lr_style */
} ckpt_sched;

typedef struct ckpt_file_info {
    char name[CKPT_FILE_NAME_LEN];
    uint64_t size;
    uint32_t crc32; /* of the whole file */
} ckpt_file_info;

/* Where a checkpoint came from: written by every save, printed by `ckpt inspect`, compared on resume
 * (engine/train/resume_check.c). present is false in a manifest written before twinrun recorded it; such
 * a manifest has no checksum of its own either (ckpt_manifest_note says so). */
#define CKPT_PROV_STR 64
#define CKPT_PROV_PATH 1024
#define CKPT_PROV_MAX_PATHS 64
typedef struct ckpt_provenance {
    bool present;
    char version[CKPT_PROV_STR], commit[CKPT_PROV_STR], backend[CKPT_PROV_STR]; /* the build that saved */
    int global_batch_size, micro_batch_size;
    bool mock_data;
    int n_data_path;
    char **data_path;          /* --data-path as given (weights and prefixes); ckpt_provenance_free */
    uint64_t data_fingerprint; /* the preflight's (train_data_fingerprint); 0 = no data files */
    char tokenizer_type[CKPT_PROV_STR], tokenizer_model[CKPT_PROV_PATH];
    uint64_t tokenizer_fingerprint; /* FNV-1a of the tokenizer's file; 0 = none */
} ckpt_provenance;

void ckpt_provenance_free(ckpt_provenance *p);
/* Copies paths into p (malloc'd): 0, or -1 when out of memory or more than CKPT_PROV_MAX_PATHS. */
int ckpt_provenance_set_paths(ckpt_provenance *p, int n, const char *const *paths);

typedef struct ckpt_manifest {
    int version;
    int64_t iteration, consumed_train_samples, consumed_valid_samples;
    ckpt_model_shape model;
    ckpt_layout layout;
    ckpt_sched sched;
    int64_t optimizer_step;
    uint64_t seed;
    bool bf16;
    int n_files;             /* = world, in rank order; 0/NULL when handing a manifest to commit */
    ckpt_file_info *files;   /* malloc'd when loaded: ckpt_manifest_free */
    ckpt_provenance prov;    /* loaded: owns its paths (ckpt_manifest_free) */
    uint32_t manifest_crc32; /* the manifest's own checksum as loaded (prov.present) */
} ckpt_manifest;

void ckpt_manifest_free(ckpt_manifest *m);
/* JSON text (malloc'd), NULL with err. With m->prov.present, the provenance and, last, the key
 * "manifest_crc32": the CRC-32 of the compact JSON text (cJSON_PrintUnformatted) of everything else. */
char *ckpt_manifest_to_json(const ckpt_manifest *m, char *err, size_t errlen);
/* Strict: every key present with the right type and range, layout world = number of files, file
 * names "shard_NNNNN.bin" in rank order, the manifest's own checksum when it has one (then the
 * provenance is required; without one, provenance keys are refused as an edit). On failure m is left
 * empty. */
int ckpt_manifest_parse(ckpt_manifest *m, const char *json, size_t len, const char *path_for_messages, char *err,
                        size_t errlen);

/* NULL, or one line to show wherever the manifest is used: an older manifest without provenance or checksum. */
const char *ckpt_manifest_note(const ckpt_manifest *m);

struct tr_config;
void ckpt_model_from_config(const struct tr_config *cfg, ckpt_model_shape *out);
/* The other way: the model flags of a checkpoint into cfg (--use-checkpoint-args). */
void ckpt_model_to_config(const ckpt_model_shape *s, struct tr_config *cfg);
/* -1 naming the first difference and both values ("checkpoint has --num-layers 4, this run 2"). */
int ckpt_model_compare(const ckpt_model_shape *saved, const ckpt_model_shape *run, const char *where, char *err,
                       size_t errlen);

/* ---- save ------------------------------------------------------------------------------------ */
/* Rank 0, before any shard: creates DIR and DIR/iter_N. A complete iter_N (its manifest there) is
 * never replaced unless overwrite: then the tracker, when it names N, is first pointed at the newest
 * older complete checkpoint (or removed when there is none), so that a crash while N is rewritten
 * leaves a tracker that names a complete checkpoint; then N's manifest is removed so the directory
 * cannot pass for complete while its shards are rewritten. */
int ckpt_save_begin(const ckpt_io *io, const char *dir, int64_t iteration, bool overwrite, char *err, size_t errlen);

/* Every rank: writes DIR/iter_N/shard_<rank>.bin via a temporary file, fsync, rename, fsync of
 * the directory. Returns its size and CRC in *info (may be NULL). */
int ckpt_shard_write(const ckpt_io *io, const char *dir, int64_t iteration, const ckpt_layout *layout,
                     const ckpt_coords *rank, const ckpt_blob *blobs, int n, ckpt_file_info *info, char *err,
                     size_t errlen);

/* Rank 0, after every shard: checks that every rank's shard exists with a valid header (its
 * iteration, layout and coordinates), that every tensor is fully covered, and each file's CRC:
 * against m->files when given (n_files = world, gathered from ckpt_shard_write: then only headers
 * are read), else by reading every byte. Then writes manifest.json and finally the tracker, each
 * atomically. m->iteration must equal iteration. */
int ckpt_save_commit(const ckpt_io *io, const char *dir, int64_t iteration, const ckpt_manifest *m, char *err,
                     size_t errlen);

/* ---- find, load, verify ---------------------------------------------------------------------- */
/* The tracker's iteration: 0 when found (and its manifest is present), 1 when DIR has no tracker
 * (nothing saved yet), -1 with err on a bad tracker or a missing manifest. */
int ckpt_latest(const char *dir, int64_t *iteration, char *err, size_t errlen);
/* Iterations that have an iter_N directory, ascending; returns how many (up to max stored), -1 on error. */
int ckpt_list(const char *dir, int64_t *iters, int max, char *err, size_t errlen);
int ckpt_manifest_load(const char *dir, int64_t iteration, ckpt_manifest *m, char *err, size_t errlen);

typedef struct ckpt_verify_report {
    int n_files; /* checked so far */
    uint64_t total_bytes;
    int n_tensors;
    char bad_file[CKPT_PATH_MAX]; /* "" when all good */
    int64_t older_complete;       /* on failure: the newest older checkpoint that verifies, or -1 */
    bool manifest_checked;        /* the manifest had its own checksum, and it matched */
    uint32_t manifest_crc32;
} ckpt_verify_report;

/* Full check of iter_N: manifest (its own checksum when it has one), every shard's size, header, every blob CRC, the file CRC, the
 * manifest's sizes and CRCs, coverage of every tensor. -1 names the bad file in err and rep->bad_file,
 * and says whether an older complete checkpoint exists (rep->older_complete). rep may be NULL. */
int ckpt_verify(const char *dir, int64_t iteration, ckpt_verify_report *rep, char *err, size_t errlen);

/* ---- what a directory holds (ckpt_dir.c) --------------------------------------------------- */
#define CKPT_LOCK ".twinrun.lock" /* a --save directory's lock (ckpt_lock.c): ignored by every reader */
#define CKPT_DIR_LIST_MAX 64

/* 1 when the last component of path is an iteration directory, iter_NNNNNNN (unless it holds a
 * tracker itself, then it is a root): root gets the directory above it ("." for a bare name) and
 * *iteration its number. 0 otherwise. The directory need not exist. */
int ckpt_iter_path(const char *path, char *root, size_t cap, int64_t *iteration);

typedef enum ckpt_dir_kind {
    CKPT_DIR_ABSENT,      /* no such path */
    CKPT_DIR_EMPTY,       /* a directory with nothing in it (the lock file aside) */
    CKPT_DIR_TRACKED,     /* holds the tracker: a load reads what it names */
    CKPT_DIR_UNTRACKED,   /* complete iter_N (with a manifest) but no tracker */
    CKPT_DIR_FOREIGN,     /* no tracker, no complete iter_N, and files that are not checkpoints */
    CKPT_DIR_INTERRUPTED, /* only iter_N without a manifest: saves that never completed */
} ckpt_dir_kind;

typedef struct ckpt_dir_info {
    ckpt_dir_kind kind;
    int n_complete;                      /* iter_N directories holding a manifest */
    int64_t complete[CKPT_DIR_LIST_MAX]; /* ascending (the first CKPT_DIR_LIST_MAX found) */
    int64_t newest_complete;             /* -1: none */
    int n_incomplete;                    /* iter_N without a manifest */
    int64_t incomplete;                  /* one of them */
    int n_foreign;                       /* other entries */
    char foreign[256];                   /* one of them */
} ckpt_dir_info;

/* Classifies dir. 0, or -1 with err when it cannot be read or is not a directory. */
int ckpt_dir_probe(const char *dir, ckpt_dir_info *info, char *err, size_t errlen);
/* "2, 4, 6" (the complete iterations), "" when none. */
void ckpt_dir_list_text(const ckpt_dir_info *info, char *out, size_t cap);

/* ---- a --save directory's lock (ckpt_lock.c) ------------------------------------------------ */
/* Held for a job's life by the process of rank 0: an open-file-description lock on DIR/CKPT_LOCK
 * (released by the kernel when the process dies, also over NFS), whose text names its holder
 * ("host H pid P since T"). NULL with err when another job holds it (naming that job) or DIR cannot
 * be written. DIR must exist. */
typedef struct ckpt_lock ckpt_lock;
ckpt_lock *ckpt_lock_take(const char *dir, char *err, size_t errlen);
/* Removes the lock file and releases the lock; NULL is fine. */
void ckpt_lock_release(ckpt_lock *l);
/* Creates, writes, fsyncs and removes a file of its own in dir: 0, or -1 with err naming why the
 * first save would fail (read-only, no permission, full). */
int ckpt_dir_writable(const char *dir, char *err, size_t errlen);
/* dir and its missing parents, as Megatron's os.makedirs(exist_ok=True). */
int ckpt_make_dirs(const char *dir, char *err, size_t errlen);

/* ---- reassembly: any region of a global tensor, from whichever shards hold it -------------- */
typedef struct ckpt_reader ckpt_reader;

/* Loads the manifest and every shard header (sizes checked against the manifest). Call
 * ckpt_verify first when the data's checksums must be checked before use. */
ckpt_reader *ckpt_reader_open(const char *dir, int64_t iteration, char *err, size_t errlen);
void ckpt_reader_close(ckpt_reader *r);
const ckpt_manifest *ckpt_reader_manifest(const ckpt_reader *r);
/* The global dtype and shape of a tensor; -1 when no shard holds it. */
int ckpt_reader_tensor(const ckpt_reader *r, const char *name, ckpt_dtype *dtype, int *ndim, int64_t *shape);
/* Fills dst (want.n elements after resolving against the global shape) with the region `want` of
 * tensor `name`. dtype must be the stored one. Replicas (the same element in several shards) are
 * read once; an element no shard holds is an error naming it. */
int ckpt_read(ckpt_reader *r, const char *name, ckpt_dtype dtype, ckpt_place want, void *dst, char *err, size_t errlen);

/* ---- retention ------------------------------------------------------------------------------- */
/* Keeps the keep_last newest checkpoints up to the tracker's (always including it) and deletes
 * older iter_N directories (manifest first, so a half-deleted one never passes for complete).
 * Directories newer than the tracker's (a save in progress) are left alone. keep_last >= 1. */
int ckpt_prune(const ckpt_io *io, const char *dir, int keep_last, char *err, size_t errlen);

#endif
