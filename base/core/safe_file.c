#include "core/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "twinrun/err.h"

int tr_safe_open(tr_safe_file *s, const char *path, bool overwrite, const char *hint, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->overwrite = overwrite;
    if (snprintf(s->path, sizeof s->path, "%s", path) >= (int)sizeof s->path ||
        snprintf(s->tmp, sizeof s->tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof s->tmp) {
        s->tmp[0] = '\0';
        return tr_errf(err, errlen, "%.200s...: path too long; use a shorter one", path);
    }
    struct stat st;
    if (!overwrite && lstat(path, &st) == 0) {
        s->tmp[0] = '\0'; /* nothing of ours to remove */
        return tr_errf(err, errlen, "%s already exists%s%s", path, hint ? "; " : "", hint ? hint : "");
    }
    /* O_EXCL: a leftover of this pid's namesake is not appended to or followed through a link */
    int fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(s->tmp) == 0)
        fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        tr_errf(err, errlen, "%s: cannot be written (creating %s failed: %s)", path, s->tmp, strerror(errno));
        s->tmp[0] = '\0';
        return -1;
    }
    if (!(s->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        tr_safe_abort(s);
        return tr_errf(err, errlen, "%s.tmp.%ld: cannot open: %s", path, (long)getpid(), strerror(e));
    }
    return 0;
}

void tr_safe_abort(tr_safe_file *s) {
    if (s->f) fclose(s->f);
    s->f = NULL;
    if (s->tmp[0]) unlink(s->tmp);
    s->tmp[0] = '\0';
}

int tr_safe_close(tr_safe_file *s, char *err, size_t errlen) {
    if (!s->f) return tr_errf(err, errlen, "%s: not open for writing", s->path);
    int bad = ferror(s->f) || fflush(s->f) != 0 || fsync(fileno(s->f)) != 0;
    int e = errno;
    if (fclose(s->f) != 0 && !bad) bad = 1, e = errno;
    s->f = NULL;
    if (bad) {
        tr_safe_abort(s);
        return tr_errf(err, errlen, "%s: writing failed: %s; %s is as it was", s->path, strerror(e), s->path);
    }
    return 0;
}

static int sync_dir_of(const char *path, char *err, size_t errlen) {
    char dir[TR_SAFE_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return tr_errf(err, errlen, "%s: cannot open its directory to sync it: %s", path, strerror(errno));
    int rc = fsync(fd), e = errno;
    close(fd);
    /* some file systems cannot fsync a directory; the rename is done either way */
    if (rc != 0 && e != EINVAL && e != EROFS)
        return tr_errf(err, errlen, "%s: fsync of its directory failed: %s", path, strerror(e));
    return 0;
}

/* rename(2) that never replaces PATH: renameat2's RENAME_NOREPLACE, or a hard link where the file
 * system lacks it (both fail with EEXIST when PATH exists). */
static int rename_noreplace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

int tr_safe_rename(tr_safe_file *s, char *err, size_t errlen) {
    int rc = s->overwrite ? rename(s->tmp, s->path) : rename_noreplace(s->tmp, s->path);
    if (rc != 0) {
        int e = errno;
        tr_safe_abort(s);
        if (e == EEXIST)
            return tr_errf(err, errlen, "%s appeared while it was being written (another job?); it was left as is",
                           s->path);
        return tr_errf(err, errlen, "%s: cannot rename its temporary file over it: %s", s->path, strerror(e));
    }
    s->tmp[0] = '\0';
    return sync_dir_of(s->path, err, errlen);
}

int tr_safe_commit(tr_safe_file *s, char *err, size_t errlen) {
    if (tr_safe_close(s, err, errlen)) return -1;
    return tr_safe_rename(s, err, errlen);
}

int tr_safe_write(const char *path, const void *text, size_t n, bool overwrite, const char *hint, char *err,
                  size_t errlen) {
    tr_safe_file s;
    if (tr_safe_open(&s, path, overwrite, hint, err, errlen)) return -1;
    if (n && fwrite(text, 1, n, s.f) != n) {
        int e = errno;
        tr_safe_abort(&s);
        return tr_errf(err, errlen, "%s: writing failed: %s; %s is as it was", path, strerror(e), path);
    }
    return tr_safe_commit(&s, err, errlen);
}

static const char *file_kind(mode_t m) {
    return S_ISFIFO(m)   ? "is a FIFO"
           : S_ISCHR(m)  ? "is a character device"
           : S_ISBLK(m)  ? "is a block device"
           : S_ISSOCK(m) ? "is a socket"
           : S_ISDIR(m)  ? "is a directory"
                         : "is no file";
}

int tr_safe_open_regular(const char *path, char *why, size_t whylen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        if (why) snprintf(why, whylen, "%s", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        const bool statted = fstat(fd, &st) == 0;
        close(fd);
        if (why) {
            if (statted) snprintf(why, whylen, "%s, not a regular file", file_kind(st.st_mode));
            else snprintf(why, whylen, "%s", strerror(e));
        }
        errno = statted ? 0 : e;
        return -1;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a regular file's reads never block anyway */
    return fd;
}

FILE *tr_safe_fopen_regular(const char *path, char *why, size_t whylen) {
    const int fd = tr_safe_open_regular(path, why, whylen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        const int e = errno;
        if (why) snprintf(why, whylen, "%s", strerror(e));
        close(fd);
        errno = e;
    }
    return f;
}
