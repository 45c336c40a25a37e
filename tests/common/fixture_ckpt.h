/* The checkpoint tests' fixtures (tests/ckpt; fixture_ckpt.c in twinrun_test_fixtures).
 *
 * fault_io: a ckpt_io that crashes or fails at a chosen step. A crash makes that
 * call and every later one fail without touching the disk (the machine is dead), so the code under
 * test unwinds and frees its memory (no longjmp, no leaks under valgrind); fio_crash_aftermath then
 * undoes what a power cut may lose: data not fsynced, directory entries whose directory was not
 * fsynced -- the worst case.
 *
 * The tm_ model: a small "model" saved by any (tp, pp, dp, cp) layout, the way the engine will: TP
 * splits along rows (column-parallel) and columns (row-parallel), replicas across DP, a distributed
 * optimizer's flat ranges, per-rank RNG state, a bf16 tensor and a scalar. Every element's value depends
 * only on (tensor, global index, iteration), so any region read back can be checked exactly. */
#ifndef TWINRUN_TESTS_COMMON_FIXTURE_CKPT_H
#define TWINRUN_TESTS_COMMON_FIXTURE_CKPT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_internal.h"

#define FIO_MAX 128
#define FIO_PATH 512 /* test paths are short; keeps a fault_io small enough for the stack */

typedef struct fio_file { /* a file written through the io: what survives a crash */
    char path[FIO_PATH];
    off_t synced; /* bytes made durable by the last fsync */
    int dirty;
} fio_file;

typedef enum { OP_CREATE, OP_RENAME, OP_UNLINK, OP_MKDIR } fio_op_kind;
typedef struct fio_op { /* a directory change not yet made durable by fsync of its parent */
    fio_op_kind kind;
    char path[FIO_PATH], from[FIO_PATH], parent[FIO_PATH];
    char *backup; /* contents `path` had before (rename over it, unlink), or NULL */
    size_t backup_len;
} fio_op;

typedef struct fault_io {
    ckpt_io io;
    int step;     /* io calls made so far */
    int crash_at; /* -1, or the step at which the "machine" dies (before that call) */
    int dead;     /* crashed: every call fails from here on */
    int fail_at;  /* -1, or the step that fails with fail_errno */
    int fail_errno;
    int fail_writes_only; /* fail_at counts write calls only */
    int writes;
    int fds[FIO_MAX], fd_file[FIO_MAX], nfds;
    fio_file files[FIO_MAX];
    int nfiles;
    fio_op ops[FIO_MAX];
    int nops;
} fault_io;

/* A fault_io that does what the disk does: no crash, no failure (set crash_at or fail_at after). */
void fio_init(fault_io *f);

/* After a crash: lose unsynced data, then undo un-fsynced directory changes, newest first. */
void fio_crash_aftermath(fault_io *f);

/* Frees what the io still holds (backups of directory changes, open descriptors). */
void fio_release(fault_io *f);

/* ---- the tm_ model ------------------------------------------------------------------------ */

#define TM_LAYERS 2
#define TM_MAX_BLOBS 16

/* What a blob with this placement holds: n elements written to out as dtype. Returns n (-1 on error). */
int64_t tm_fill(const char *name, ckpt_dtype dt, const int64_t *shape, int ndim, ckpt_place *p, int64_t iter,
                void **out);

typedef struct tm_rank {
    ckpt_blob blobs[TM_MAX_BLOBS];
    char names[TM_MAX_BLOBS][64];
    void *data[TM_MAX_BLOBS];
    int n;
} tm_rank;

/* Global tensors: layers.{l}.col [8, 6] (rows split by TP; every DP rank writes its replica),
 * layers.{l}.row [6, 8] (columns split by TP; DP rank 0), optim.exp_avg/layers.{l}.row (TP
 * columns, then a flat range per DP rank when dist_opt, else DP rank 0), norm BF16 [8], step I64
 * scalar, rng/rank_R U64 [3] for each rank. Layers are split evenly over PP stages. */
void tm_rank_blobs(tm_rank *r, const ckpt_layout *L, int rank, int64_t iter);

/* Frees what tm_rank_blobs allocated for the blobs' data. */
void tm_rank_free(tm_rank *r);

/* The manifest a save of iteration iter in layout L commits: the model's shape, the schedule, provenance. */
ckpt_manifest tm_manifest(int64_t iter, const ckpt_layout *L);

/* A whole save through io: begin (replacing a complete iter only when overwrite), every rank's shard,
 * commit (full re-read when infos is 0). */
int tm_save_over(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos,
                 bool overwrite, char *err, size_t errlen);

/* tm_save_over without overwrite: a complete iteration already there is refused. */
int tm_save(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos, char *err,
            size_t errlen);

/* Reads region p of a tensor and compares it with what the model says; 0 when equal. */
int tm_check_region(ckpt_reader *rd, const char *name, ckpt_dtype dt, const int64_t *shape, int ndim, ckpt_place p,
                    int64_t iter, char *err, size_t errlen);

#endif
