/* The wire format of the rendezvous store (tcp_store.h), kept apart so the parser of bytes that
 * arrive from the network can be fuzzed (fuzz/fuzz_store_proto.c).
 *
 * Greeting: the server speaks first, on every new connection: "TWS2" nonce[16] (fresh random bytes).
 * Request:  "TWS2" mac[32] op:u8 ('S' set | 'G' get, waiting until the key exists | 'H' heartbeat)
 *           keylen:u16 key [vlen:u32 value]  (set and heartbeat; integers little-endian)
 *           mac = HMAC-SHA256(job token, nonce || the request's bytes from op to its end)
 * Response: 'K' (set done) | 'V' vlen:u32 value | 'E' mlen:u16 message
 * Keys are 1..255 printable ASCII characters; values at most TR_STORE_MAX_VALUE bytes. One request
 * per connection.
 *
 * A heartbeat ('H', key "heartbeat.<rank>", value: the member's host and pid as text) makes the
 * connection a member's for the job's life (heartbeat.h): after the 'K' the member sends 'P' (alive)
 * every second and 'L' when it leaves (whatever its exit status); the server sends 'P' every second, 'D' mlen:u16
 * message when a member is gone (to every other member, once), and 'X' when it stops serving. These
 * bytes ride the authenticated connection without a MAC of their own.
 *
 * The MAC proves that the client holds the job's token (TWINRUN_STORE_TOKEN) without sending it,
 * binds the request to this connection (a recorded request cannot be replayed: the nonce differs)
 * and covers every byte of it (nothing can be altered on the way). Values travel in clear: the
 * token keeps strangers from reading or writing keys, not a listener on the wire from seeing them. */
#ifndef TWINRUN_BASE_LAUNCH_STORE_PROTO_H
#define TWINRUN_BASE_LAUNCH_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define TR_STORE_MAX_KEY 255
#define TR_STORE_MAX_VALUE 65536
#define TR_STORE_NONCE 16
#define TR_STORE_MAC 32
#define TR_STORE_GREETING (4 + TR_STORE_NONCE)
#define TR_STORE_HEAD (4 + TR_STORE_MAC) /* magic and MAC, before op */
#define TR_STORE_MAX_REQUEST (TR_STORE_HEAD + 1 + 2 + TR_STORE_MAX_KEY + 4 + TR_STORE_MAX_VALUE)
#define TR_STORE_MAX_TOKEN 256

/* What a request is authenticated with: the job's token and the connection's nonce. */
typedef struct tr_store_auth {
    const unsigned char *token; /* may be empty (no TWINRUN_STORE_TOKEN: the server warns) */
    size_t token_len;
    unsigned char nonce[TR_STORE_NONCE];
} tr_store_auth;

typedef struct tr_store_req {
    char op; /* 'S', 'G' or 'H' */
    char key[TR_STORE_MAX_KEY + 1];
    const unsigned char *value; /* into the parsed buffer (set and heartbeat) */
    size_t value_len;
} tr_store_req;

/* The greeting: 1 with the nonce when buf[n] holds one, 0 when incomplete, -1 with err when it is
 * not a twinrun rendezvous (or an older version). */
int tr_store_parse_greeting(const unsigned char *buf, size_t n, unsigned char nonce[TR_STORE_NONCE], char *err,
                            size_t errlen);
void tr_store_encode_greeting(unsigned char out[TR_STORE_GREETING], const unsigned char nonce[TR_STORE_NONCE]);

/* Parses one request from buf[n]. 1: complete and authentic (*used bytes); 0: incomplete so far;
 * -1: malformed or not authentic, err says how (an authentication failure starts with
 * "authentication failed"). */
int tr_store_parse_request(const unsigned char *buf, size_t n, const tr_store_auth *auth, tr_store_req *req,
                           size_t *used, char *err, size_t errlen);
/* Encodes an authenticated request into out[cap]; returns its length, or 0 if the key or value is
 * invalid or does not fit. */
size_t tr_store_encode_request(unsigned char *out, size_t cap, const tr_store_auth *auth, char op, const char *key,
                               const void *value, size_t value_len);

#endif
