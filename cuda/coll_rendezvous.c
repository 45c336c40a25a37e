/* File rendezvous for NCCL unique ids (see coll_rendezvous.h).
 *
 * File layout: 8 bytes of magic "TWRDZV01", then the payload. The publisher writes
 * dir/.key.tmp.<pid> and renames it to dir/key, so a reader sees either nothing or the whole
 * file. A file left by a crashed earlier run under the same key would be read as current: keys
 * carry a run id (coll_nccl.c) and rank 0 removes the file once the communicator is up. */
#include "coll_rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "twinrun/err.h"

static const char rdv_magic[8] = {'T', 'W', 'R', 'D', 'Z', 'V', '0', '1'};

int tr_cu_rdv_publish(const char *dir, const char *key, const void *data, size_t len, char *err, size_t errlen) {
    char tmp[1024], path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, key) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld", dir, key, (long)getpid()) >= (int)sizeof tmp)
        return tr_errf(err, errlen, "rendezvous path under '%s' is too long", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return tr_errf(err, errlen,
                       "rendezvous: cannot create %s: %s (does TWINRUN_RENDEZVOUS_DIR exist and is it "
                       "writable?)",
                       tmp, strerror(errno));
    const unsigned char *p = (const unsigned char *)data;
    int ok = write(fd, rdv_magic, sizeof rdv_magic) == (ssize_t)sizeof rdv_magic;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok = 0;
        else off += (size_t)w;
    }
    if (ok && fsync(fd) != 0) ok = 0;
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        return tr_errf(err, errlen, "rendezvous: cannot publish %s: %s", path, strerror(e));
    }
    return 0;
}

/* 1: read the whole payload; 0: not there (yet); -1: there but malformed. */
static int try_read(const char *path, void *data, size_t len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    char magic[sizeof rdv_magic];
    unsigned char *p = (unsigned char *)data;
    int rc = read(fd, magic, sizeof magic) == (ssize_t)sizeof magic && memcmp(magic, rdv_magic, sizeof magic) == 0;
    size_t off = 0;
    while (rc == 1 && off < len) {
        ssize_t r = read(fd, p + off, len - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t)r;
    }
    close(fd);
    return rc == 1 && off == len ? 1 : -1;
}

int tr_cu_rdv_fetch(dev_device *d, const char *dir, const char *key, void *data, size_t len, double timeout_s,
                    char *err, size_t errlen) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, key) >= (int)sizeof path)
        return tr_errf(err, errlen, "rendezvous path under '%s' is too long", dir);
    const double deadline = dev_clock_now(d) + timeout_s;
    for (;;) {
        const int rc = try_read(path, data, len);
        if (rc == 1) return 0;
        if (rc < 0)
            return tr_errf(err, errlen, "rendezvous: %s is not a twinrun rendezvous file of %zu bytes", path, len);
        if (dev_clock_now(d) > deadline)
            return tr_errf(err, errlen,
                           "rendezvous: waited %.0f s for %s; the group's rank 0 never published it (did it start? "
                           "do all ranks share TWINRUN_RENDEZVOUS_DIR and TWINRUN_RUN_ID?)",
                           timeout_s, path);
        dev_sleep(d, 0.01);
    }
}

void tr_cu_rdv_remove(const char *dir, const char *key) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, key) < (int)sizeof path) unlink(path);
}
