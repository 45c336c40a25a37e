/* Shared by the ckpt tests: a ckpt_io that crashes or fails at a chosen step. A crash makes that
 * call and every later one fail without touching the disk (the machine is dead), so the code under
 * test unwinds and frees its memory (no longjmp, no leaks under valgrind); fio_crash_aftermath then
 * undoes what a power cut may lose: data not fsynced, directory entries whose directory was not
 * fsynced -- the worst case. Also small filesystem helpers. */
#ifndef TWINRUN_TESTS_CKPT_CKPT_TEST_UTIL_H
#define TWINRUN_TESTS_CKPT_CKPT_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

static inline void fio_parent(char *out, const char *path) {
    snprintf(out, FIO_PATH, "%s", path);
    char *s = strrchr(out, '/');
    if (s) *s = '\0';
    else strcpy(out, ".");
}

static inline char *fio_slurp(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static inline void fio_spit(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

static inline fio_file *fio_track(fault_io *f, const char *path) {
    for (int i = 0; i < f->nfiles; i++)
        if (strcmp(f->files[i].path, path) == 0) return &f->files[i];
    if (f->nfiles == FIO_MAX) abort();
    fio_file *t = &f->files[f->nfiles++];
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    return t;
}

static inline void fio_add_op(fault_io *f, fio_op_kind kind, const char *path, const char *from, int backup) {
    if (f->nops == FIO_MAX) abort();
    fio_op *o = &f->ops[f->nops++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    snprintf(o->path, sizeof o->path, "%s", path);
    if (from) snprintf(o->from, sizeof o->from, "%s", from);
    fio_parent(o->parent, path);
    if (backup) o->backup = fio_slurp(path, &o->backup_len);
}

/* Every call passes here first: count it, maybe crash, maybe fail. */
static inline int fio_enter(fault_io *f, int is_write) {
    int s = f->step++;
    if (f->crash_at == s) f->dead = 1;
    if (f->dead) {
        errno = EIO;
        return -1;
    }
    if (is_write) f->writes++;
    int at = f->fail_writes_only ? (is_write ? f->writes - 1 : -2) : s;
    if (f->fail_at >= 0 && at == f->fail_at) {
        errno = f->fail_errno;
        return -1;
    }
    return 0;
}

static inline int fio_open(void *ctx, const char *path, int flags, int mode) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    struct stat st;
    int existed = stat(path, &st) == 0;
    int fd = open(path, flags, mode);
    if (fd < 0) return -1;
    fio_file *t = fio_track(f, path);
    if (!existed) fio_add_op(f, OP_CREATE, path, NULL, 0), t->synced = 0;
    if (flags & O_TRUNC) t->synced = 0; /* truncation is treated as immediate */
    f->fds[f->nfds] = fd, f->fd_file[f->nfds] = (int)(t - f->files), f->nfds++;
    return fd;
}

static inline fio_file *fio_of_fd(fault_io *f, int fd) {
    for (int i = 0; i < f->nfds; i++)
        if (f->fds[i] == fd) return &f->files[f->fd_file[i]];
    return NULL;
}

static inline ssize_t fio_write(void *ctx, int fd, const void *buf, size_t n) {
    fault_io *f = ctx;
    if (fio_enter(f, 1)) return -1;
    fio_file *t = fio_of_fd(f, fd);
    if (t) t->dirty = 1;
    return write(fd, buf, n);
}

static inline int fio_fsync(void *ctx, int fd) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_file *t = fio_of_fd(f, fd);
    if (t) t->synced = lseek(fd, 0, SEEK_END), t->dirty = 0;
    return fsync(fd);
}

static inline int fio_close(void *ctx, int fd) {
    fault_io *f = ctx;
    int failed = fio_enter(f, 0);
    for (int i = 0; i < f->nfds; i++)
        if (f->fds[i] == fd) f->fds[i] = f->fds[--f->nfds], f->fd_file[i] = f->fd_file[f->nfds];
    close(fd); /* a failed close still releases the descriptor */
    return failed ? -1 : 0;
}

static inline int fio_rename(void *ctx, const char *from, const char *to) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_add_op(f, OP_RENAME, to, from, 1);
    if (rename(from, to)) {
        f->nops--;
        return -1;
    }
    fio_file *t = fio_track(f, from), *u = fio_track(f, to);
    *u = *t, snprintf(u->path, sizeof u->path, "%s", to);
    t->synced = 0, t->dirty = 0;
    return 0;
}

static inline int fio_fsync_dir(void *ctx, const char *dir) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    int k = 0;
    for (int i = 0; i < f->nops; i++) {
        if (strcmp(f->ops[i].parent, dir) == 0) free(f->ops[i].backup);
        else f->ops[k++] = f->ops[i];
    }
    f->nops = k;
    return 0;
}

static inline int fio_unlink(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_add_op(f, OP_UNLINK, path, NULL, 1);
    if (unlink(path)) {
        free(f->ops[--f->nops].backup);
        return -1;
    }
    return 0;
}

static inline int fio_mkdir(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    if (mkdir(path, 0755)) return -1;
    fio_add_op(f, OP_MKDIR, path, NULL, 0);
    return 0;
}

static inline int fio_rmdir(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    return rmdir(path);
}

static inline void fio_init(fault_io *f) {
    memset(f, 0, sizeof *f);
    f->io = (ckpt_io){f,          fio_open,      fio_write,  fio_fsync, fio_close,
                      fio_rename, fio_fsync_dir, fio_unlink, fio_mkdir, fio_rmdir};
    f->crash_at = -1, f->fail_at = -1;
}

/* After a crash: lose unsynced data, then undo un-fsynced directory changes, newest first. */
static inline void fio_crash_aftermath(fault_io *f) {
    for (int i = 0; i < f->nfds; i++) close(f->fds[i]);
    f->nfds = 0;
    for (int i = 0; i < f->nfiles; i++)
        if (f->files[i].dirty) {
            struct stat st;
            if (stat(f->files[i].path, &st) == 0 && st.st_size > f->files[i].synced)
                if (truncate(f->files[i].path, f->files[i].synced)) abort();
        }
    for (int i = f->nops - 1; i >= 0; i--) {
        fio_op *o = &f->ops[i];
        switch (o->kind) {
        case OP_CREATE: unlink(o->path); break;
        case OP_RENAME:
            rename(o->path, o->from);
            if (o->backup) fio_spit(o->path, o->backup, o->backup_len);
            break;
        case OP_UNLINK:
            if (o->backup) fio_spit(o->path, o->backup, o->backup_len);
            break;
        case OP_MKDIR: rmdir(o->path); break;
        }
        free(o->backup);
    }
    f->nops = 0;
}

static inline void fio_release(fault_io *f) {
    for (int i = 0; i < f->nops; i++) free(f->ops[i].backup);
    for (int i = 0; i < f->nfds; i++) close(f->fds[i]);
    f->nops = 0, f->nfds = 0;
}

/* rm -r (two levels: DIR/iter_N/files). */
static inline void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[CKPT_PATH_MAX];
        ckpt_pathf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p)) rm_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

#endif
