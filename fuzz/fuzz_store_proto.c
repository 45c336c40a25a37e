/* libFuzzer target: the rendezvous store's request and greeting parsers (base/launch/store_proto.c),
 * which read bytes from the network. Each input is fed whole and also in two pieces, as TCP may
 * deliver it; an accepted request must encode back to the same bytes. The MAC check runs with a fixed
 * token and nonce: an input the fuzzer cannot authenticate still exercises every length check before
 * it, and the seeds (fuzz/corpus/fuzz_store_proto/, made with that token and nonce) reach past it.
 * Seeds: fuzz/corpus/fuzz_store_proto/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launch/store_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tr_store_auth auth = {.token = (const unsigned char *)"fuzz-token-0123456789",
                                   .token_len = 21,
                                   .nonce = {0x6e, 0x6f, 0x6e, 0x63, 0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_store_req req;
    size_t used = 0;
    char err[256];
    unsigned char nonce[TR_STORE_NONCE];
    const int hello = tr_store_parse_greeting(data, size, nonce, err, sizeof err);
    if (hello == 1 && (size < TR_STORE_GREETING || memcmp(nonce, data + 4, TR_STORE_NONCE) != 0)) abort();
    const int whole = tr_store_parse_request(data, size, &auth, &req, &used, err, sizeof err);
    if (whole == 1) {
        if (used > size) abort();
        static unsigned char again[TR_STORE_MAX_REQUEST];
        const size_t n = tr_store_encode_request(again, sizeof again, &auth, req.op, req.key, req.value, req.value_len);
        if (n != used || memcmp(again, data, n) != 0) abort();
    }
    /* a prefix is never complete unless the whole is, and never wrong unless the whole is */
    const size_t cut = size / 2;
    size_t used2 = 0;
    const int part = tr_store_parse_request(data, cut, &auth, &req, &used2, err, sizeof err);
    if (part == 1 && (whole != 1 || used2 != used)) abort();
    if (part == -1 && whole != -1) abort();
    return 0;
}
