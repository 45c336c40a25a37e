/* CRC-32 through zlib (Debian zlib1g-dev): the one place that needs the library. */
#include <zlib.h>

#include "ckpt/ckpt_internal.h"

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
