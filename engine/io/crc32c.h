/* CRC-32C (Castagnoli) and TFRecord's masked form of it. */
#ifndef TWINRUN_ENGINE_IO_CRC32C_H
#define TWINRUN_ENGINE_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc over n bytes (start with 0). crc32c("123456789") = 0xE3069283. */
uint32_t tr_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's masked CRC of n bytes: rotate right by 15, add 0xa282ead8. */
uint32_t tr_crc32c_masked(const void *data, size_t n);

#endif
