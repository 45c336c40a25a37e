/* The POSIX ckpt_io, and the write helpers every save step goes through (so that a test's io can
 * fail or crash at each of them). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "core/safe_file.h"
#include "twinrun/err.h"

static int px_open(void *ctx, const char *path, int flags, int mode) {
    (void)ctx;
    return open(path, flags | O_CLOEXEC, mode);
}
static ssize_t px_write(void *ctx, int fd, const void *buf, size_t n) {
    (void)ctx;
    return write(fd, buf, n);
}
static int px_fsync(void *ctx, int fd) {
    (void)ctx;
    return fsync(fd);
}
static int px_close(void *ctx, int fd) {
    (void)ctx;
    return close(fd);
}
static int px_rename(void *ctx, const char *from, const char *to) {
    (void)ctx;
    return rename(from, to);
}
/* After a create, rename or unlink the directory entry must reach the disk too, or a crash can undo it. */
static int px_fsync_dir(void *ctx, const char *dir) {
    (void)ctx;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}
static int px_unlink(void *ctx, const char *path) {
    (void)ctx;
    return unlink(path);
}
static int px_mkdir(void *ctx, const char *path) {
    (void)ctx;
    return mkdir(path, 0755);
}
static int px_rmdir(void *ctx, const char *path) {
    (void)ctx;
    return rmdir(path);
}

static const ckpt_io posix_io = {NULL,      px_open,      px_write,  px_fsync, px_close,
                                 px_rename, px_fsync_dir, px_unlink, px_mkdir, px_rmdir};

const ckpt_io *ckpt_io_posix(void) { return &posix_io; }

static int no_fsync(void *ctx, int fd) {
    (void)ctx, (void)fd;
    return 0;
}
static int no_fsync_dir(void *ctx, const char *dir) {
    (void)ctx, (void)dir;
    return 0;
}

static const ckpt_io posix_nosync_io = {NULL,      px_open,      px_write,  no_fsync, px_close,
                                        px_rename, no_fsync_dir, px_unlink, px_mkdir, px_rmdir};

const ckpt_io *ckpt_io_posix_nosync(void) { return &posix_nosync_io; }

int ckpt_io_err(const char *what, const char *path, int errnum, char *err, size_t errlen) {
    return tr_errf(err, errlen, "%s: %s failed: %s", path, what, strerror(errnum));
}

int ckpt_open_read(const char *path, char *err, size_t errlen) {
    char why[256];
    const int fd = tr_safe_open_regular(path, why, sizeof why);
    if (fd >= 0) return fd;
    if (errno) return ckpt_io_err("open", path, errno, err, errlen);
    /* a FIFO would block the open, a device every read: refused before either */
    return tr_errf(err, errlen, "%s: %s; a checkpoint's files are regular files: put back the file the save wrote",
                   path, why);
}

int ckpt_write_all(const ckpt_io *io, int fd, const void *buf, size_t n, const char *path, uint64_t done,
                   uint64_t total, char *err, size_t errlen) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = io->write(io->ctx, fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == ENOSPC || errno == EDQUOT))
            return tr_errf(err, errlen,
                           "%s: no space left on device after %llu of %llu bytes; this file needs %llu bytes "
                           "(%llu more); free space or point --save elsewhere",
                           path, (unsigned long long)done, (unsigned long long)total, (unsigned long long)total,
                           (unsigned long long)(total - done));
        if (k <= 0) return ckpt_io_err("write", path, k < 0 ? errno : EIO, err, errlen);
        p += k, n -= (size_t)k, done += (uint64_t)k;
    }
    return 0;
}

int ckpt_write_atomic(const ckpt_io *io, const char *path, const char *parent_dir, const void *data, size_t n,
                      char *err, size_t errlen) {
    char tmp[TR_CKPT_PATH_MAX];
    ckpt_pathf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = io->open(io->ctx, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return ckpt_io_err("open", tmp, errno, err, errlen);
    int rc = ckpt_write_all(io, fd, data, n, tmp, 0, n, err, errlen);
    if (!rc && io->fsync(io->ctx, fd)) rc = ckpt_io_err("fsync", tmp, errno, err, errlen);
    if (io->close(io->ctx, fd) && !rc) rc = ckpt_io_err("close", tmp, errno, err, errlen);
    if (!rc && io->rename(io->ctx, tmp, path)) rc = ckpt_io_err("rename to its final name", tmp, errno, err, errlen);
    if (rc) {
        io->unlink(io->ctx, tmp);
        return -1;
    }
    if (io->fsync_dir(io->ctx, parent_dir)) return ckpt_io_err("fsync", parent_dir, errno, err, errlen);
    return 0;
}

char *ckpt_read_small(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    const int fd = ckpt_open_read(path, err, errlen);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) ckpt_io_err("open", path, errno, err, errlen), close(fd);
        return NULL;
    }
    /* sized by the file, not by the limit: a 64 MiB buffer per manifest read is slow under valgrind */
    struct stat st;
    size_t cap = fstat(fileno(f), &st) == 0 && st.st_size >= 0 && (uint64_t)st.st_size < max ? (size_t)st.st_size : max;
    char *buf = malloc(cap + 2);
    size_t n = buf ? fread(buf, 1, cap + 1, f) : 0;
    if (buf && n == cap + 1 && cap < max) { /* the file grew since fstat: read on up to the limit */
        char *big = realloc(buf, max + 2);
        if (!big) free(buf);
        buf = big;
        if (buf) n += fread(buf + n, 1, max + 1 - n, f);
    }
    int bad = buf && ferror(f);
    fclose(f);
    if (!buf || bad || n > max) {
        if (!buf) tr_errf(err, errlen, "%s: out of host memory", path);
        else if (bad) tr_errf(err, errlen, "%s: read failed", path);
        else tr_errf(err, errlen, "%s: larger than %zu bytes; not a file twinrun wrote", path, max);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void ckpt_iter_dir(char *out, size_t cap, const char *dir, int64_t iteration) {
    snprintf(out, cap, "%s/iter_%07lld", dir, (long long)iteration);
}

void ckpt_pathf(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}
