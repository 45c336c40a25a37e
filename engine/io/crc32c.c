/* CRC-32C (Castagnoli), the checksum of TFRecord framing in TensorBoard event files.
 *
 * Written by hand because nothing already linked provides it: zlib's crc32 uses the IEEE
 * polynomial, Debian 12 packages no C crc32c library (only python3-crc32c), and the GPU image
 * has none either; a 1 KiB table and a loop are less to carry than a new dependency. Event files
 * are a few hundred bytes per iteration, so the bytewise table is fast enough. */
#include "io/crc32c.h"

/* Reflected form of the Castagnoli polynomial 0x1EDC6F41. */
#define CRC32C_POLY 0x82F63B78u

static uint32_t table_entry(uint32_t b) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    return c;
}

uint32_t tr_crc32c(uint32_t crc, const void *data, size_t n) {
    /* The table is a pure function of the polynomial: built into a local array rather than a
     * mutable global, 256 entries per call cost nothing beside an event's file write. */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) table[i] = table_entry(i);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
    return ~c;
}

uint32_t tr_crc32c_masked(const void *data, size_t n) {
    const uint32_t c = tr_crc32c(0, data, n);
    /* TFRecord's mask, so that a CRC over bytes that themselves hold CRCs stays well spread */
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
