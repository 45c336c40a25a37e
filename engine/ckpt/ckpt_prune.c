/* Retention (--keep-last style): keep the newest complete checkpoints up to the tracker's, delete
 * the older ones and the debris of interrupted saves below it. Never touches the tracker's
 * checkpoint or anything newer (a save may be in progress there). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

static int has_manifest(const char *idir) {
    char path[TR_CKPT_PATH_MAX];
    struct stat st;
    ckpt_pathf(path, sizeof path, "%s/%s", idir, CKPT_MANIFEST);
    return stat(path, &st) == 0;
}

/* The manifest goes first (and that is made durable), so a crash halfway leaves a directory that
 * can never pass for a complete checkpoint. */
static int remove_iter(const ckpt_io *io, const char *dir, const char *idir, char *err, size_t errlen) {
    char path[TR_CKPT_PATH_MAX];
    ckpt_pathf(path, sizeof path, "%s/%s", idir, CKPT_MANIFEST);
    if (has_manifest(idir)) {
        if (io->unlink(io->ctx, path)) return ckpt_io_err("unlink", path, errno, err, errlen);
        if (io->fsync_dir(io->ctx, idir)) return ckpt_io_err("fsync", idir, errno, err, errlen);
    }
    DIR *d = opendir(idir);
    if (!d) return ckpt_io_err("opendir", idir, errno, err, errlen);
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        ckpt_pathf(path, sizeof path, "%s/%s", idir, e->d_name);
        if (io->unlink(io->ctx, path)) rc = ckpt_io_err("unlink", path, errno, err, errlen);
    }
    closedir(d);
    if (!rc && io->rmdir(io->ctx, idir)) rc = ckpt_io_err("rmdir", idir, errno, err, errlen);
    if (!rc && io->fsync_dir(io->ctx, dir)) rc = ckpt_io_err("fsync", dir, errno, err, errlen);
    return rc;
}

int ckpt_prune(const ckpt_io *io, const char *dir, int keep_last, char *err, size_t errlen) {
    if (!io) io = ckpt_io_posix();
    if (keep_last < 1) return tr_errf(err, errlen, "keep_last %d: at least the newest checkpoint is kept", keep_last);
    int64_t latest;
    int found = ckpt_latest(dir, &latest, err, errlen);
    if (found == 1) return 0; /* nothing complete yet: nothing can be told apart as old */
    if (found < 0) return -1;
    int n = ckpt_list(dir, NULL, 0, err, errlen);
    if (n < 0) return -1;
    int64_t *iters = malloc((size_t)(n ? n : 1) * sizeof *iters);
    if (!iters) return tr_errf(err, errlen, "out of host memory");
    n = ckpt_list(dir, iters, n, err, errlen);
    int kept = 0, rc = n < 0 ? -1 : 0;
    for (int i = n - 1; !rc && i >= 0; i--) {
        if (iters[i] > latest) continue;
        char idir[TR_CKPT_PATH_MAX];
        ckpt_iter_dir(idir, sizeof idir, dir, iters[i]);
        if (iters[i] == latest || (kept < keep_last && has_manifest(idir))) {
            kept++;
            continue;
        }
        rc = remove_iter(io, dir, idir, err, errlen);
    }
    free(iters);
    return rc;
}
