/* One job per --save directory. Two jobs saving into one directory interleave their iterations and
 * collide on the same temporary names; the second is refused at start instead, told who holds it.
 *
 * An open-file-description lock (F_OFD_SETLK): unlike a process-wide POSIX lock it also conflicts
 * between two jobs of one process (the scenario runner's), the kernel drops it when the holder dies
 * (no stale lock after a crash), and Linux's NFS client forwards it to the server. The file's text
 * only names the holder for the message; the lock is the truth. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* F_OFD_SETLK */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "core/safe_file.h"
#include "twinrun/err.h"

#ifndef F_OFD_SETLK
#define F_OFD_SETLK F_SETLK /* older C libraries: a process-wide lock, still exclusive across jobs */
#endif

struct ckpt_lock {
    int fd;
    char path[CKPT_PATH_MAX];
};

static int lock_fd(int fd) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    return fcntl(fd, F_OFD_SETLK, &fl);
}

/* The holder's line from the file, for the refusal. */
static void holder_of(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "its identity is not recorded");
    FILE *f = tr_safe_fopen_regular(path, NULL, 0);
    if (!f) return;
    char line[512];
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) snprintf(out, cap, "%s", line);
    }
    fclose(f);
}

ckpt_lock *ckpt_lock_take(const char *dir, char *err, size_t errlen) {
    ckpt_lock *l = calloc(1, sizeof *l);
    if (!l) return tr_errf(err, errlen, "out of host memory"), NULL;
    ckpt_pathf(l->path, sizeof l->path, "%s/%s", dir, CKPT_LOCK);
    /* the holder may remove the file between our open and our lock: then lock the new one */
    for (int attempt = 0; attempt < 8; attempt++) {
        /* O_NONBLOCK: a FIFO or device in the lock file's place must not block the open; refused below */
        l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
        if (l->fd < 0) {
            tr_errf(err, errlen,
                    "--save %s: cannot create its lock file %s: %s; give a --save directory this job can write", dir,
                    l->path, strerror(errno));
            free(l);
            return NULL;
        }
        struct stat st;
        if (fstat(l->fd, &st) == 0 && !S_ISREG(st.st_mode)) {
            close(l->fd);
            tr_errf(err, errlen,
                    "--save %s: %s is not a regular file (twinrun's lock file is one); remove it, or give another "
                    "--save",
                    dir, l->path);
            free(l);
            return NULL;
        }
        if (lock_fd(l->fd) != 0) {
            const int e = errno;
            close(l->fd);
            if (e != EACCES && e != EAGAIN) {
                tr_errf(err, errlen, "--save %s: cannot lock %s: %s", dir, l->path, strerror(e));
                free(l);
                return NULL;
            }
            char who[512];
            holder_of(l->path, who, sizeof who);
            tr_errf(err, errlen,
                    "--save %s is in use by another job (%s): two jobs saving into one directory overwrite "
                    "each other's checkpoints; wait for that job to end, or give this one another --save",
                    dir, who);
            free(l);
            return NULL;
        }
        struct stat a, b;
        if (fstat(l->fd, &a) == 0 && stat(l->path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) break;
        close(l->fd);
        l->fd = -1;
    }
    if (l->fd < 0) {
        tr_errf(err, errlen, "--save %s: its lock file %s keeps changing; is another job starting?", dir, l->path);
        free(l);
        return NULL;
    }
    char host[256] = "?", when[64] = "?", text[512];
    (void)gethostname(host, sizeof host - 1);
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    const int n = snprintf(text, sizeof text, "host %s, pid %ld, since %s\n", host, (long)getpid(), when);
    if (ftruncate(l->fd, 0) != 0 || pwrite(l->fd, text, (size_t)n, 0) != n) {
        tr_errf(err, errlen, "--save %s: cannot write its lock file %s: %s", dir, l->path, strerror(errno));
        ckpt_lock_release(l);
        return NULL;
    }
    return l;
}

void ckpt_lock_release(ckpt_lock *l) {
    if (!l) return;
    (void)unlink(l->path); /* while still locked: a job that opened it meanwhile sees another inode */
    close(l->fd);
    free(l);
}

int ckpt_dir_writable(const char *dir, char *err, size_t errlen) {
    char path[CKPT_PATH_MAX], host[64] = "host";
    (void)gethostname(host, sizeof host - 1);
    ckpt_pathf(path, sizeof path, "%s/.twinrun.probe.%s.%ld", dir, host, (long)getpid());
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int e = 0;
    if (fd < 0) e = errno;
    else {
        if (write(fd, "ok", 2) != 2 || fsync(fd) != 0) e = errno ? errno : EIO;
        close(fd);
        (void)unlink(path);
    }
    if (!e) return 0;
    return tr_errf(err, errlen,
                   "--save %s cannot be written (%s): the first checkpoint would fail; fix its permissions or "
                   "mount, or give another --save",
                   dir, strerror(e));
}
