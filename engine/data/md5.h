/* MD5 (RFC 1321), only to name cache files exactly as Megatron does: <md5 of the JSON
 * description>-GPTDataset-<split>-*.npy. Written here rather than taken from libcrypto: MD5 is a
 * hundred lines, and the engine then needs no crypto library in either build. Not for security. */
#ifndef TWINRUN_ENGINE_DATA_MD5_H
#define TWINRUN_ENGINE_DATA_MD5_H

#include <stddef.h>
#include <stdint.h>

/* hex: 32 lowercase hex digits and a NUL. */
void tr_md5_hex(const void *data, size_t len, char hex[33]);

#endif
