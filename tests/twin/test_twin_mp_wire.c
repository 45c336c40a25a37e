/* The multi-process twin's wire format (sim/multiproc/mp_wire.h): what the encoders write decodes to
 * the same values, and every malformed byte string a peer (or a stranger on the port) could send is
 * refused with the reason, never read past its end. fuzz/fuzz_mp_wire.c throws random bytes at the
 * decoders; these are the named cases, one per check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flight/flight.h"
#include "multiproc/mp_wire.h"

static char err[512];

#define REFUSED(call, want)                                                                                            \
    do {                                                                                                               \
        err[0] = '\0';                                                                                                 \
        assert_int_equal((call), -1);                                                                                  \
        if (!strstr(err, (want))) fail_msg("error '%s' lacks '%s'", err, (want));                                      \
    } while (0)

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static const mp_header hdr0 = {
    .type = MP_ABORT, .src_proc = 2, .nprocs = 4, .job = 0x1234567890abcdefULL, .payload_len = 5, .arg = -7};

static void test_header_round_trip_and_refusals(void **state) {
    (void)state;
    unsigned char b[MP_HDR_SIZE + 5];
    mp_header h;
    mp_header_encode(b, &hdr0);
    memcpy(b + MP_HDR_SIZE, "why?\n", 5);
    assert_int_equal(mp_header_decode(b, sizeof b, &h, err, sizeof err), 0);
    assert_int_equal(h.type, MP_ABORT);
    assert_int_equal(h.src_proc, 2);
    assert_int_equal(h.nprocs, 4);
    assert_true(h.job == hdr0.job);
    assert_int_equal(h.payload_len, 5);
    assert_int_equal(h.payload_tag, 0);
    assert_int_equal(h.arg, -7);

    REFUSED(mp_header_decode(b, 10, &h, err, sizeof err), "message of 10 bytes is shorter than a header (48)");
    unsigned char c[sizeof b];
#define MUTATE(stmt)                                                                                                   \
    memcpy(c, b, sizeof b);                                                                                            \
    stmt
    MUTATE(c[0] = 'X');
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "does not start with \"TWX1\": not a twinrun peer");
    MUTATE(c[4] = 9);
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "message of wire version 9, this build speaks 1");
    MUTATE(c[6] = 0);
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "unknown message type 0");
    MUTATE(c[6] = MP_TYPE_END);
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "unknown message type");
    MUTATE(put32(c + 8, 4));
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "message from process 4 of 4: outside [0, 4)");
    MUTATE(put32(c + 12, 0));
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "of 0: outside");
    MUTATE(put64(c + 24, MP_MAX_PAYLOAD + 1));
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "payload bytes (more than 1099511627776)");
    MUTATE(put64(c + 24, MP_INLINE_MAX + 1));
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "inline payload of 8193 bytes (at most 8192)");
    REFUSED(mp_header_decode(b, sizeof b - 1, &h, err, sizeof err), "message of 52 bytes but its header says 53");
    /* a payload that follows as its own message: the header alone, its tag with the high bit */
    MUTATE(put64(c + 32, (1ULL << 63) | 5));
    assert_int_equal(mp_header_decode(c, MP_HDR_SIZE, &h, err, sizeof err), 0);
    assert_true(h.payload_tag == ((1ULL << 63) | 5));
    REFUSED(mp_header_decode(c, sizeof c, &h, err, sizeof err), "a header with a separate payload has 53 bytes");
    MUTATE(put64(c + 32, 5));
    REFUSED(mp_header_decode(c, MP_HDR_SIZE, &h, err, sizeof err), "payload tag without its high bit");
#undef MUTATE
}

/* An all_reduce contribution of members 1 and 3 of 4, 8 and 4 data bytes. */
static size_t contrib(unsigned char *buf) {
    const mp_contrib c = {.uid = 77,
                          .seq = 5,
                          .a = -1,
                          .b = -1,
                          .n = 4,
                          .op = FLIGHT_ALL_REDUCE,
                          .dtype = 0,
                          .redop = 0,
                          .peer = -1,
                          .nmembers = 2,
                          .count = 3};
    const mp_contrib_member m[2] = {{.index = 1, .rank = 9, .arrival = 0.5, .data_len = 8},
                                    {.index = 3, .rank = 11, .arrival = 1.25, .data_len = 4}};
    const size_t n = mp_contrib_size(2, 12);
    assert_int_equal(n, MP_CONTRIB_FIXED + 2 * MP_CONTRIB_MEMBER_SIZE + 12);
    unsigned char *data = mp_contrib_encode(buf, &c, m);
    assert_ptr_equal(data, buf + MP_CONTRIB_FIXED + 2 * MP_CONTRIB_MEMBER_SIZE);
    memcpy(data, "abcdefghWXYZ", 12);
    return n;
}

static void test_contribution_round_trip_and_refusals(void **state) {
    (void)state;
    unsigned char b[256], c[256];
    const size_t n = contrib(b);
    mp_contrib k;
    mp_contrib_member *m = NULL;
    assert_int_equal(mp_contrib_decode(b, n, &k, &m, err, sizeof err), 0);
    assert_true(k.uid == 77 && k.seq == 5 && k.n == 4 && k.nmembers == 2 && k.count == 3);
    assert_int_equal(k.op, FLIGHT_ALL_REDUCE);
    assert_int_equal(k.a, -1);
    assert_int_equal(m[0].index, 1);
    assert_int_equal(m[1].rank, 11);
    assert_true(m[1].arrival == 1.25);
    assert_memory_equal(m[0].data, "abcdefgh", 8);
    assert_memory_equal(m[1].data, "WXYZ", 4);
    free(m);

#define MUTATE(stmt)                                                                                                   \
    memcpy(c, b, n);                                                                                                   \
    stmt
#define DECODE(len) mp_contrib_decode(c, (len), &k, &m, err, sizeof err)
    MUTATE((void)0);
    REFUSED(DECODE(20), "contribution of 20 bytes is too short");
    MUTATE(c[31] = 1);
    REFUSED(DECODE(n), "contribution with a non-zero reserved byte");
    MUTATE(put32(c + 24, 0));
    REFUSED(DECODE(n), "contribution to a meeting of 0 members");
    MUTATE(c[28] = FLIGHT_OP_COUNT);
    REFUSED(DECODE(n), "contribution with unknown operation");
    MUTATE(put32(c + 16, 0));
    REFUSED(DECODE(n), "contribution's pair (0, -1) does not fit a ");
    /* a send/recv names two different members of a meeting of 2 */
    MUTATE(c[28] = FLIGHT_SEND);
    REFUSED(DECODE(n), "contribution's pair (-1, -1) does not fit a ");
    MUTATE(c[29] = 3);
    REFUSED(DECODE(n), "contribution with unknown element type 3");
    MUTATE(c[30] = 4);
    REFUSED(DECODE(n), "contribution with unknown reduction 4");
    MUTATE(put32(c + 32, (uint32_t)-2));
    REFUSED(DECODE(n), "contribution with peer -2");
    MUTATE(put64(c + 40, (1ULL << 48) + 1));
    REFUSED(DECODE(n), "contribution of 281474976710657 elements");
    MUTATE(put32(c + 36, 5));
    REFUSED(DECODE(n), "contribution of 5 members to a meeting of 4");
    MUTATE((void)0);
    REFUSED(DECODE(MP_CONTRIB_FIXED + MP_CONTRIB_MEMBER_SIZE), "cannot hold 2 members");
    unsigned char *m1 = c + MP_CONTRIB_FIXED + MP_CONTRIB_MEMBER_SIZE; /* the second member's entry */
    MUTATE(put32(m1, 1));
    REFUSED(DECODE(n), "contribution member 1: index 1 out of order or outside [0, 4)");
    MUTATE(put32(m1, 4));
    REFUSED(DECODE(n), "contribution member 1: index 4 out of order");
    MUTATE(put64(m1 + 8, 0xfff0000000000000ULL)); /* -inf */
    REFUSED(DECODE(n), "contribution member 1: arrival time is not a finite time");
    MUTATE(put64(m1 + 16, 5));
    REFUSED(DECODE(n), "contribution member 1: 5 data bytes but 4 left");
    MUTATE(put64(m1 + 16, 3));
    REFUSED(DECODE(n), "contribution has 1 bytes past its members' data");
    assert_null(m); /* nothing allocated is handed back on a refusal */
#undef DECODE
#undef MUTATE
}

static void test_bootstrap_record_round_trip_and_refusals(void **state) {
    (void)state;
    mp_peer p = {.proc = 1, .nprocs = 2, .ranks_per_proc = 4, .world = 8, .pid = 4242, .chunk = 2, .addrlen = 3};
    strcpy(p.host, "node-7");
    strcpy(p.provider, "tcp;ofi_rxm");
    memcpy(p.addr, "\x01\x02\x03", 3);
    unsigned char b[MP_PEER_SIZE], c[MP_PEER_SIZE];
    mp_peer_encode(b, &p);
    mp_peer q;
    assert_int_equal(mp_peer_decode(b, sizeof b, &q, err, sizeof err), 0);
    assert_int_equal(q.proc, 1);
    assert_int_equal(q.world, 8);
    assert_int_equal(q.pid, 4242);
    assert_int_equal(q.chunk, 2);
    assert_string_equal(q.host, "node-7");
    assert_string_equal(q.provider, "tcp;ofi_rxm");
    assert_int_equal(q.addrlen, 3);
    assert_memory_equal(q.addr, "\x01\x02\x03", 3);

#define MUTATE(stmt)                                                                                                   \
    memcpy(c, b, sizeof b);                                                                                            \
    stmt
#define DECODE() mp_peer_decode(c, sizeof c, &q, err, sizeof err)
    REFUSED(mp_peer_decode(b, 100, &q, err, sizeof err), "bootstrap record of 100 bytes (expected 256)");
    MUTATE(c[3] = '2');
    REFUSED(DECODE(), "does not start with \"TWB1\": another program uses this rendezvous");
    MUTATE(put32(c + 4, 2));
    REFUSED(DECODE(), "bootstrap record of process 2 of 2");
    MUTATE(put32(c + 16, 9));
    REFUSED(DECODE(), "bootstrap record: 2 processes x 4 ranks is not a world of 9");
    MUTATE(put32(c + 252, 3));
    REFUSED(DECODE(), "bootstrap record: chunks of 3 ranks do not divide 4 ranks per process");
    MUTATE(memset(c + 24, 'h', MP_HOST_MAX));
    REFUSED(DECODE(), "bootstrap record: host name is not terminated");
    MUTATE(c[24] = ' ');
    REFUSED(DECODE(), "bootstrap record: host name has a byte 0x20");
    MUTATE(c[88] = 0x7f);
    REFUSED(DECODE(), "bootstrap record: provider name has a byte 0x7f");
    MUTATE(put32(c + 120, MP_ADDR_MAX + 1));
    REFUSED(DECODE(), "bootstrap record: endpoint address of 129 bytes");
    MUTATE(put32(c + 120, 0));
    REFUSED(DECODE(), "bootstrap record: endpoint address of 0 bytes");
#undef DECODE
#undef MUTATE
}

static void test_text_payloads(void **state) {
    (void)state;
    const unsigned char ok[] = "rank 3 failed\n\tat t=1.5 s";
    assert_int_equal(mp_text_check(ok, sizeof ok - 1, err, sizeof err), 0);
    REFUSED(mp_text_check((const unsigned char *)"bad\x01", 4, err, sizeof err), "text has a byte 0x01 at 3");
    unsigned char *big = calloc(MP_MAX_TEXT + 1, 1);
    assert_non_null(big);
    memset(big, 'a', MP_MAX_TEXT + 1);
    REFUSED(mp_text_check(big, MP_MAX_TEXT + 1, err, sizeof err), "text of 65537 bytes (at most 65536)");
    assert_int_equal(mp_text_check(big, MP_MAX_TEXT, err, sizeof err), 0);
    free(big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip_and_refusals),
        cmocka_unit_test(test_contribution_round_trip_and_refusals),
        cmocka_unit_test(test_bootstrap_record_round_trip_and_refusals),
        cmocka_unit_test(test_text_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
