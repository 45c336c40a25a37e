/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the rendezvous store's client proves it holds
 * the job token without sending it (base/launch/store_proto.h).
 *
 * Hand-written, not a library: the engine links no crypto library today, a GPU machine without internet
 * would need one among its local packages (lab/gpu_env.sh, --debs), and these ~120 lines are checked
 * against the FIPS 180-4 and RFC 4231 test vectors (tests/unit/test_sha256.c). */
#ifndef TWINRUN_BASE_LAUNCH_SHA256_H
#define TWINRUN_BASE_LAUNCH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TR_SHA256_BYTES 32

typedef struct tr_sha256 {
    uint32_t h[8];
    uint64_t bytes; /* message length so far */
    unsigned char block[64];
    size_t fill; /* bytes waiting in block */
} tr_sha256;

void tr_sha256_init(tr_sha256 *s);
void tr_sha256_update(tr_sha256 *s, const void *p, size_t n);
void tr_sha256_final(tr_sha256 *s, unsigned char out[TR_SHA256_BYTES]);

/* HMAC-SHA256 over the concatenation of two parts (either may be empty). */
void tr_hmac_sha256(const void *key, size_t key_len, const void *a, size_t a_len, const void *b, size_t b_len,
                    unsigned char out[TR_SHA256_BYTES]);

/* Compares n bytes in time that does not depend on where they differ: 1 when equal. */
int tr_sha256_equal_ct(const void *a, const void *b, size_t n);

#endif
