/* Beginning and committing a save. The order is the whole point: shards durable -> checked ->
 * manifest durable -> tracker renamed and its directory fsynced. The tracker is what a load
 * trusts, so until its rename reaches the disk the previous checkpoint stays the latest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

static int ensure_dir(const ckpt_io *io, const char *path, const char *parent, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        return tr_errf(err, errlen, "%s: exists and is not a directory", path);
    }
    if (io->mkdir(io->ctx, path) && errno != EEXIST) return ckpt_io_err("mkdir", path, errno, err, errlen);
    if (parent && io->fsync_dir(io->ctx, parent)) return ckpt_io_err("fsync", parent, errno, err, errlen);
    return 0;
}

static void parent_of(char *out, size_t cap, const char *dir) {
    snprintf(out, cap, "%s", dir);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

/* --save DIR with its missing parents, as Megatron's os.makedirs(exist_ok=True) makes them. */
static int ensure_tree(const ckpt_io *io, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) == 0) return ensure_dir(io, path, NULL, err, errlen);
    char parent[TR_CKPT_PATH_MAX];
    parent_of(parent, sizeof parent, path);
    if (strcmp(parent, path) && strcmp(parent, ".") && ensure_tree(io, parent, err, errlen)) return -1;
    return ensure_dir(io, path, parent, err, errlen);
}

int ckpt_make_dirs(const char *dir, char *err, size_t errlen) {
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    return ensure_tree(ckpt_io_posix(), dir, err, errlen);
}

/* --overwrite-checkpoints replacing the tracker's own iteration: the tracker first names the newest
 * older complete checkpoint (or nothing), so it never names a directory being rewritten. */
static int step_tracker_back(const ckpt_io *io, const char *dir, int64_t iteration, char *err, size_t errlen) {
    ckpt_dir_info info;
    if (ckpt_dir_probe(dir, &info, err, errlen)) return -1;
    int64_t back = -1;
    const int n = info.n_complete < CKPT_DIR_LIST_MAX ? info.n_complete : CKPT_DIR_LIST_MAX;
    for (int i = 0; i < n; i++)
        if (info.complete[i] < iteration && info.complete[i] > back) back = info.complete[i];
    char path[TR_CKPT_PATH_MAX], text[32];
    ckpt_pathf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    if (back < 0) {
        if (io->unlink(io->ctx, path)) return ckpt_io_err("unlink", path, errno, err, errlen);
        return io->fsync_dir(io->ctx, dir) ? ckpt_io_err("fsync", dir, errno, err, errlen) : 0;
    }
    const int len = snprintf(text, sizeof text, "%lld", (long long)back);
    return ckpt_write_atomic(io, path, dir, text, (size_t)len, err, errlen);
}

int ckpt_save_begin(const ckpt_io *io, const char *dir, int64_t iteration, bool overwrite, char *err, size_t errlen) {
    if (!io) io = ckpt_io_posix();
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    if (iteration < 0 || iteration > 9999999)
        return tr_errf(err, errlen, "iteration %lld outside 0..9999999 (iter_%%07d)", (long long)iteration);
    char idir[TR_CKPT_PATH_MAX], path[TR_CKPT_PATH_MAX];
    if (ensure_tree(io, dir, err, errlen)) return -1;
    int64_t latest;
    char lerr[256];
    int found = ckpt_latest(dir, &latest, lerr, sizeof lerr);
    ckpt_iter_dir(idir, sizeof idir, dir, iteration);
    ckpt_pathf(path, sizeof path, "%s/%s", idir, CKPT_MANIFEST);
    struct stat st;
    const bool complete = stat(path, &st) == 0;
    if ((complete || (found == 0 && latest == iteration)) && !overwrite)
        return tr_errf(err, errlen,
                       "%s: iteration %lld is already a complete checkpoint%s; it is not overwritten (save into "
                       "another --save directory, or pass --overwrite-checkpoints to replace it)",
                       dir, (long long)iteration, found == 0 && latest == iteration ? " (the latest)" : "");
    if (found == 0 && latest == iteration && step_tracker_back(io, dir, iteration, err, errlen)) return -1;
    if (ensure_dir(io, idir, dir, err, errlen)) return -1;
    /* a manifest of N (an overwritten checkpoint's) goes first */
    if (complete) {
        if (io->unlink(io->ctx, path)) return ckpt_io_err("unlink", path, errno, err, errlen);
        if (io->fsync_dir(io->ctx, idir)) return ckpt_io_err("fsync", idir, errno, err, errlen);
    }
    return 0;
}

int ckpt_save_commit(const ckpt_io *io, const char *dir, int64_t iteration, const ckpt_manifest *m, char *err,
                     size_t errlen) {
    if (!io) io = ckpt_io_posix();
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    if (m->iteration != iteration)
        return tr_errf(err, errlen, "manifest iteration %lld != %lld", (long long)m->iteration, (long long)iteration);
    const ckpt_layout *L = &m->layout;
    int64_t ranks = L->tp < 1 || L->pp < 1 || L->dp < 1 || L->cp < 1 || L->tp > (1 << 20) || L->pp > (1 << 20) ||
                            L->dp > (1 << 20) || L->cp > (1 << 20)
                        ? -1
                        : (int64_t)L->tp * L->pp * L->dp; /* < 2^60: no overflow */
    if (ranks >= 0 && ranks <= (1 << 20)) ranks *= L->cp;
    if (ranks < 1 || ranks > (1 << 20))
        return tr_errf(err, errlen, "layout tp%d pp%d dp%d cp%d is not valid", m->layout.tp, m->layout.pp, m->layout.dp,
                       m->layout.cp);
    int world = (int)ranks;
    if (m->n_files != 0 && m->n_files != world)
        return tr_errf(err, errlen, "manifest lists %d files for %d ranks", m->n_files, world);
    ckpt_manifest full = *m;
    full.version = CKPT_FORMAT_VERSION;
    full.n_files = world;
    full.files = calloc((size_t)world, sizeof *full.files);
    ckpt_shard_header *hs = calloc((size_t)world, sizeof *hs);
    char idir[TR_CKPT_PATH_MAX], path[TR_CKPT_PATH_MAX], text[32];
    char *json = NULL;
    int rc = -1;
    if (!full.files || !hs) {
        tr_errf(err, errlen, "out of host memory");
        goto out;
    }
    ckpt_iter_dir(idir, sizeof idir, dir, iteration);
    for (int r = 0; r < world; r++) {
        char name[CKPT_FILE_NAME_LEN];
        ckpt_shard_name(name, sizeof name, r);
        ckpt_pathf(path, sizeof path, "%s/%s", idir, name);
        int quick = m->n_files == world; /* sizes and CRCs gathered from the ranks: headers suffice */
        if (ckpt_shard_check(path, iteration, &m->layout, r, !quick, &full.files[r], &hs[r], err, errlen)) goto out;
        if (quick) {
            if (m->files[r].size != full.files[r].size || strcmp(m->files[r].name, name) != 0) {
                tr_errf(err, errlen, "%s: %llu bytes on disk, rank %d reported %s with %llu", path,
                        (unsigned long long)full.files[r].size, r, m->files[r].name,
                        (unsigned long long)m->files[r].size);
                goto out;
            }
            full.files[r].crc32 = m->files[r].crc32;
        }
    }
    if (ckpt_coverage_check(hs, world, idir, NULL, err, errlen)) goto out;
    json = ckpt_manifest_to_json(&full, err, errlen);
    if (!json) goto out;
    ckpt_pathf(path, sizeof path, "%s/%s", idir, CKPT_MANIFEST);
    if (ckpt_write_atomic(io, path, idir, json, strlen(json), err, errlen)) goto out;
    ckpt_pathf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    int n = snprintf(text, sizeof text, "%lld", (long long)iteration); /* no newline: Megatron's tracker */
    if (ckpt_write_atomic(io, path, dir, text, (size_t)n, err, errlen)) goto out;
    rc = 0;
out:
    for (int r = 0; hs && r < world; r++) ckpt_shard_header_free(&hs[r]);
    free(hs);
    free(full.files);
    free(json);
    return rc;
}
