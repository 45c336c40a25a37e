/* FNV-1a, 64 bits: the fingerprints and digests twinrun compares for equality (preflight,
 * weight digests, collective results, job ids). Not for anything adversarial. */
#ifndef TWINRUN_BASE_CORE_HASH_H
#define TWINRUN_BASE_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TR_FNV_OFFSET 0xcbf29ce484222325ULL

static inline uint64_t tr_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#endif
