/* Helpers shared by the safetensors reader, converter and writer (not a public interface). */
#ifndef TWINRUN_ENGINE_IO_SAFETENSORS_INTERNAL_H
#define TWINRUN_ENGINE_IO_SAFETENSORS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. On failure *bad_at
 * (if non-NULL) is the offset of the first byte of the offending sequence. */
bool st_utf8_valid(const uint8_t *s, size_t len, size_t *bad_at);

/* safetensors is little-endian whatever the host is. */
static inline uint64_t st_load_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline void st_store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* "[a, b, c]" into buf (always NUL-terminated, truncated with "..." when too small). */
void st_format_shape(char *buf, size_t buflen, const int64_t *shape, int ndim);

#endif
