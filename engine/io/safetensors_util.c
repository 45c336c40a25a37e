/* UTF-8 validation and shape formatting for the safetensors reader and writer. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors_internal.h"

bool st_utf8_valid(const uint8_t *s, size_t len, size_t *bad_at) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        size_t extra;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3, cp = c & 0x07, min = 0x10000;
        } else {
            goto bad;
        }
        if (len - i <= extra) goto bad;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xC0) != 0x80) goto bad;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
        i += extra + 1;
        continue;
    bad:
        if (bad_at) *bad_at = i;
        return false;
    }
    return true;
}

void st_format_shape(char *buf, size_t buflen, const int64_t *shape, int ndim) {
    if (buflen == 0) return;
    size_t used = 0;
    buf[0] = '\0';
    for (int i = -1; i <= ndim; i++) {
        char piece[32];
        if (i == -1) snprintf(piece, sizeof piece, "[");
        else if (i == ndim) snprintf(piece, sizeof piece, "]");
        else snprintf(piece, sizeof piece, "%s%" PRId64, i ? ", " : "", shape[i]);
        size_t n = strlen(piece);
        if (used + n + 4 > buflen) { /* keep room for "..." */
            snprintf(buf + used, buflen - used, "...");
            return;
        }
        memcpy(buf + used, piece, n + 1);
        used += n;
    }
}
