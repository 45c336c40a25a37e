/* Files a user keeps (datasets, exports, reports) written whole or not at all: the bytes go to a
 * temporary name beside the file (PATH.tmp.PID, so two writers never share one) and are renamed over
 * PATH only once every byte is on disk. A failure or a kill leaves PATH as it was; a file that exists
 * is replaced only when the caller says so (overwrite), and then in one rename, never truncated first. */
#ifndef TWINRUN_BASE_CORE_SAFE_FILE_H
#define TWINRUN_BASE_CORE_SAFE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TR_SAFE_PATH_MAX 1100

typedef struct tr_safe_file {
    FILE *f; /* open for writing on tmp; NULL once committed or aborted */
    bool overwrite;
    char path[TR_SAFE_PATH_MAX]; /* the final name */
    char tmp[TR_SAFE_PATH_MAX];  /* where the bytes go until the commit */
} tr_safe_file;

/* Opens PATH's temporary file. Without overwrite, an existing PATH is refused here (before any work)
 * with "PATH already exists" and the caller's hint appended (the flag that replaces it); NULL hint:
 * none. Returns 0, or -1 with the reason in err. */
int tr_safe_open(tr_safe_file *s, const char *path, bool overwrite, const char *hint, char *err, size_t errlen);

/* Flushes, fsyncs and closes the temporary file and renames it to PATH (without overwrite, a PATH
 * that appeared meanwhile is not replaced: an error), then fsyncs the directory. On any failure the
 * temporary file is removed and PATH is untouched. */
int tr_safe_commit(tr_safe_file *s, char *err, size_t errlen);

/* Closes and removes the temporary file; PATH is untouched. Safe to call twice or after a commit. */
void tr_safe_abort(tr_safe_file *s);

/* Only the last step of a commit: fsyncs and closes the temporary file (the caller commits several
 * files together: each is closed first, then each renamed). */
int tr_safe_close(tr_safe_file *s, char *err, size_t errlen);
int tr_safe_rename(tr_safe_file *s, char *err, size_t errlen);

/* Writes TEXT[0..n) to PATH whole (overwrite as above). */
int tr_safe_write(const char *path, const void *text, size_t n, bool overwrite, const char *hint, char *err,
                  size_t errlen);

/* Reading a file that must be a regular file (a checkpoint shard, a manifest, a dataset, a tokenizer, a
 * configuration): opened with O_NONBLOCK first, so that a FIFO or a device in its place is refused at
 * once instead of blocking the open (a FIFO waits forever for a writer) or every read, then switched back
 * to blocking reads. Returns the descriptor (O_CLOEXEC), or -1 with errno and why set: errno the open's
 * error (why its text), or 0 when the path is no regular file (why: "is a FIFO, not a regular file", ...). */
int tr_safe_open_regular(const char *path, char *why, size_t whylen);
/* The same as a stdio stream for reading ("rb"); NULL as above. */
FILE *tr_safe_fopen_regular(const char *path, char *why, size_t whylen);

#endif
