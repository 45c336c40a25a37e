/* The wire format of the rendezvous store (tcp_store.h), kept apart so the parser of bytes that
 * arrive from the network can be fuzzed (fuzz/fuzz_store_proto.c).
 *
 * Request:  "TWS1" op:u8 ('S' set | 'G' get, waiting until the key exists) keylen:u16 key
 *           [vlen:u32 value]  (set only; integers little-endian)
 * Response: 'K' (set done) | 'V' vlen:u32 value | 'E' mlen:u16 message
 * Keys are 1..255 printable ASCII characters; values at most TR_STORE_MAX_VALUE bytes. One request
 * per connection. */
#ifndef TWINRUN_ENGINE_LAUNCH_STORE_PROTO_H
#define TWINRUN_ENGINE_LAUNCH_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define TR_STORE_MAX_KEY 255
#define TR_STORE_MAX_VALUE 65536
#define TR_STORE_MAX_REQUEST (4 + 1 + 2 + TR_STORE_MAX_KEY + 4 + TR_STORE_MAX_VALUE)

typedef struct tr_store_req {
    char op;                  /* 'S' or 'G' */
    char key[TR_STORE_MAX_KEY + 1];
    const unsigned char *value; /* into the parsed buffer (set only) */
    size_t value_len;
} tr_store_req;

/* Parses one request from buf[n]. 1: complete (*used bytes); 0: incomplete so far; -1: malformed,
 * err says how. */
int tr_store_parse_request(const unsigned char *buf, size_t n, tr_store_req *req, size_t *used, char *err,
                           size_t errlen);
/* Encodes a request into out[cap]; returns its length, or 0 if the key or value is invalid or
 * does not fit. */
size_t tr_store_encode_request(unsigned char *out, size_t cap, char op, const char *key, const void *value,
                               size_t value_len);

#endif
