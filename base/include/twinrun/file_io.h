/* The file-system calls a writer of durable files makes (checkpoints), through a table: the plain
 * POSIX calls in a run, a wrapper when a fault plan fails a write with ENOSPC or ends the rank
 * half-way through it (fault/), a test's injector at every step. A base type, so the fault library
 * and the checkpoint writer share it without depending on each other. */
#ifndef TWINRUN_BASE_FILE_IO_H
#define TWINRUN_BASE_FILE_IO_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tr_file_io {
    void *ctx;
    int (*open)(void *ctx, const char *path, int flags, int mode); /* open(2): fd, or -1 with errno */
    ssize_t (*write)(void *ctx, int fd, const void *buf, size_t n);
    int (*fsync)(void *ctx, int fd);
    int (*close)(void *ctx, int fd);
    int (*rename)(void *ctx, const char *from, const char *to);
    int (*fsync_dir)(void *ctx, const char *dir);
    int (*unlink)(void *ctx, const char *path);
    int (*mkdir)(void *ctx, const char *path);
    int (*rmdir)(void *ctx, const char *path);
} tr_file_io;

#endif
