/* libFuzzer target: the decoders of what the processes of a multi-process twin send each other
 * (sim/multiproc/mp_wire.c): message headers, collective contributions, bootstrap records and abort
 * texts. The first byte picks the decoder; whatever decodes must encode back to the same bytes.
 * Seeds: fuzz/corpus/fuzz_mp_wire/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/multiproc/mp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void header(const uint8_t *p, size_t n) {
    mp_header h;
    char err[256];
    if (mp_header_decode(p, n, &h, err, sizeof err)) return;
    unsigned char again[MP_HDR_SIZE];
    mp_header_encode(again, &h);
    if (memcmp(again, p, MP_HDR_SIZE) != 0) abort();
}

static void contrib(const uint8_t *p, size_t n) {
    mp_contrib c;
    mp_contrib_member *m;
    char err[256];
    if (mp_contrib_decode(p, n, &c, &m, err, sizeof err)) return;
    uint64_t data = 0;
    for (uint32_t i = 0; i < c.nmembers; i++) {
        if (m[i].data < p || m[i].data + m[i].data_len > p + n) abort();
        data += m[i].data_len;
    }
    if (mp_contrib_size(c.nmembers, data) != n) abort();
    unsigned char *again = malloc(n);
    if (!again) abort();
    unsigned char *tail = mp_contrib_encode(again, &c, m);
    if ((size_t)(tail - again) != n - data || memcmp(again, p, n - data) != 0) abort();
    free(again);
    free(m);
}

static void peer(const uint8_t *p, size_t n) {
    mp_peer a, b;
    char err[256];
    if (mp_peer_decode(p, n, &a, err, sizeof err)) return;
    unsigned char again[MP_PEER_SIZE];
    mp_peer_encode(again, &a);
    if (mp_peer_decode(again, sizeof again, &b, err, sizeof err) || memcmp(&a, &b, sizeof a) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    const size_t n = size - 1;
    char err[256];
    switch (data[0] % 4) {
    case 0: header(p, n); break;
    case 1: contrib(p, n); break;
    case 2: peer(p, n); break;
    case 3: (void)mp_text_check(p, n, err, sizeof err); break;
    }
    return 0;
}
