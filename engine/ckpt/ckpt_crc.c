/* CRC-32 through zlib (Debian zlib1g-dev): the one place that needs the library. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

uint32_t ckpt_crc32(uint32_t crc, const void *buf, size_t n) {
    const Bytef *p = buf;
    uLong c = crc;
    while (n > 0) { /* zlib takes 32-bit lengths */
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k, n -= k;
    }
    return (uint32_t)c;
}

int ckpt_crc32_file(const char *path, uint32_t *crc, uint64_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ckpt_io_err("open", path, errno, err, errlen);
    enum { CHUNK = 4 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return tr_errf(err, errlen, "%s: out of host memory", path);
    }
    uint32_t c = 0;
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t k = read(fd, buf, CHUNK);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            rc = ckpt_io_err("read", path, errno, err, errlen);
            break;
        }
        if (k == 0) break;
        c = ckpt_crc32(c, buf, (size_t)k);
        total += (uint64_t)k;
    }
    free(buf);
    close(fd);
    if (!rc) *crc = c, *size = total;
    return rc;
}
