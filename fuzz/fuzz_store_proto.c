/* libFuzzer target: the rendezvous store's request parser (engine/launch/store_proto.c), which reads
 * bytes from the network. Each input is fed whole and also in two pieces, as TCP may deliver it;
 * an accepted request must encode back to the same bytes.
 * Seeds: fuzz/corpus/fuzz_store_proto/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launch/store_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_store_req req;
    size_t used = 0;
    char err[256];
    const int whole = tr_store_parse_request(data, size, &req, &used, err, sizeof err);
    if (whole == 1) {
        if (used > size) abort();
        static unsigned char again[TR_STORE_MAX_REQUEST];
        const size_t n = tr_store_encode_request(again, sizeof again, req.op, req.key, req.value, req.value_len);
        if (n != used || memcmp(again, data, n) != 0) abort();
    }
    /* a prefix is never complete unless the whole is, and never wrong unless the whole is */
    const size_t cut = size / 2;
    size_t used2 = 0;
    const int part = tr_store_parse_request(data, cut, &req, &used2, err, sizeof err);
    if (part == 1 && (whole != 1 || used2 != used)) abort();
    if (part == -1 && whole != -1) abort();
    return 0;
}
