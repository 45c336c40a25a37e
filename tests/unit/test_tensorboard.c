/* TensorBoard event files: CRC-32C test vectors, the protobuf bytes of one event checked by hand,
 * and a file written by tr_tb_open/tr_tb_scalar parsed back record by record (frame CRCs, Event
 * fields, Summary values) by the small reader below, written from the format documentation. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fixture.h"

#include "io/crc32c.h"
#include "io/tensorboard.h"

static void test_crc32c_vectors(void **state) {
    (void)state;
    assert_int_equal(tr_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(tr_crc32c(0, "", 0), 0u);
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    /* RFC 3720 B.4 */
    assert_int_equal(tr_crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(tr_crc32c(0, ones, 32), 0x62A8AB43u);
    /* continuing a CRC equals one pass */
    assert_int_equal(tr_crc32c(tr_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

/* ---- a minimal reader ---------------------------------------------------------------------- */
typedef struct event {
    double wall_time;
    int64_t step;
    char file_version[64];
    char tag[128];
    float value;
    int has_value;
} event;

static uint64_t get_varint(const unsigned char **p, const unsigned char *end) {
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        const unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail_msg("truncated varint");
    return 0;
}

static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void parse_value(const unsigned char *p, const unsigned char *end, event *e) {
    while (p < end) {
        const uint64_t key = get_varint(&p, end);
        if (key == (1 << 3 | 2)) {
            const uint64_t n = get_varint(&p, end);
            assert_true(n < sizeof e->tag && p + n <= end);
            memcpy(e->tag, p, n);
            e->tag[n] = '\0';
            p += n;
        } else if (key == (2 << 3 | 5)) {
            const uint32_t bits = (uint32_t)get_le(p, 4);
            memcpy(&e->value, &bits, 4);
            e->has_value = 1;
            p += 4;
        } else {
            fail_msg("unexpected Summary.Value key %llu", (unsigned long long)key);
        }
    }
}

static void parse_event(const unsigned char *p, size_t len, event *e) {
    const unsigned char *end = p + len;
    memset(e, 0, sizeof *e);
    while (p < end) {
        const uint64_t key = get_varint(&p, end);
        if (key == (1 << 3 | 1)) {
            const uint64_t bits = get_le(p, 8);
            memcpy(&e->wall_time, &bits, 8);
            p += 8;
        } else if (key == (2 << 3 | 0)) {
            e->step = (int64_t)get_varint(&p, end);
        } else if (key == (3 << 3 | 2)) {
            const uint64_t n = get_varint(&p, end);
            assert_true(n < sizeof e->file_version);
            memcpy(e->file_version, p, n);
            p += n;
        } else if (key == (5 << 3 | 2)) {
            const uint64_t n = get_varint(&p, end);
            const unsigned char *send = p + n;
            assert_true(send <= end);
            assert_int_equal(get_varint(&p, send), 1 << 3 | 2); /* Summary.value */
            const uint64_t vn = get_varint(&p, send);
            assert_true(p + vn == send); /* exactly one value */
            parse_value(p, send, e);
            p = send;
        } else {
            fail_msg("unexpected Event key %llu", (unsigned long long)key);
        }
    }
    assert_true(p == end);
}

/* Reads every record of the file, checking both CRCs of each frame. */
static int read_events(const char *path, event *out, int max) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int n = 0;
    unsigned char head[12], data[4096], crc[4];
    while (fread(head, 1, 12, f) == 12) {
        const uint64_t len = get_le(head, 8);
        assert_int_equal((uint32_t)get_le(head + 8, 4), tr_crc32c_masked(head, 8));
        assert_true(len <= sizeof data);
        assert_int_equal(fread(data, 1, len, f), len);
        assert_int_equal(fread(crc, 1, 4, f), 4);
        assert_int_equal((uint32_t)get_le(crc, 4), tr_crc32c_masked(data, len));
        assert_true(n < max);
        parse_event(data, len, &out[n++]);
    }
    assert_true(feof(f));
    fclose(f);
    return n;
}

static void test_event_bytes(void **state) {
    (void)state;
    unsigned char buf[256];
    const size_t n = tr_tb_encode_event(buf, sizeof buf, 1.5, 300, NULL, "lm loss", 2.0f);
    /* 09 <double 1.5> 10 ac 02 2a 10 0a 0e 0a 07 "lm loss" 15 <float 2.0> */
    const unsigned char want[] = {0x09, 0,    0,    0,   0,   0,   0,   0xf8, 0x3f, 0x10, 0xac, 0x02, 0x2a, 0x10, 0x0a,
                                  0x0e, 0x0a, 0x07, 'l', 'm', ' ', 'l', 'o',  's',  's',  0x15, 0,    0,    0,    0x40};
    assert_int_equal(n, sizeof want);
    assert_memory_equal(buf, want, sizeof want);
    /* too small a buffer says so instead of writing past it */
    assert_int_equal(tr_tb_encode_event(buf, 10, 1.5, 300, NULL, "lm loss", 2.0f), 0);
    unsigned char rec[64];
    assert_int_equal(tr_tb_frame(rec, sizeof rec, buf, n), n + 16);
    assert_int_equal(tr_tb_frame(rec, n + 15, buf, n), 0);
}

static void test_file_round_trip(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "tb"), 0);
    char sub[512], err[512] = "";
    snprintf(sub, sizeof sub, "%s/a/b", dir); /* created, parents too */
    tr_tb_writer *w = tr_tb_open(sub, err, sizeof err);
    assert_non_null(w);
    const char *path = tr_tb_path(w);
    assert_non_null(strstr(path, "/events.out.tfevents."));
    for (int it = 1; it <= 3; it++) {
        assert_int_equal(tr_tb_scalar(w, "lm loss", 10.0 / it, it, err, sizeof err), 0);
        assert_int_equal(tr_tb_scalar(w, "lm loss vs samples", 10.0 / it, 8 * it, err, sizeof err), 0);
    }
    assert_int_equal(tr_tb_scalar(w, "throughput", 123.25, 1ll << 40, err, sizeof err), 0);
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    assert_int_equal(tr_tb_close(w), 0);

    event ev[16];
    const int n = read_events(copy, ev, 16);
    assert_int_equal(n, 8);
    assert_string_equal(ev[0].file_version, "brain.Event:2");
    assert_false(ev[0].has_value);
    assert_true(ev[0].wall_time > 1.6e9);
    for (int it = 1; it <= 3; it++) {
        const event *a = &ev[2 * it - 1], *b = &ev[2 * it];
        assert_string_equal(a->tag, "lm loss");
        assert_int_equal(a->step, it);
        assert_true(a->value == (float)(10.0 / it));
        assert_string_equal(b->tag, "lm loss vs samples");
        assert_int_equal(b->step, 8 * it);
        assert_true(a->wall_time >= ev[0].wall_time);
    }
    assert_string_equal(ev[7].tag, "throughput");
    assert_int_equal(ev[7].step, 1ll << 40);
    assert_true(ev[7].value == 123.25f);
    assert_int_equal(fx_rm_rf(dir), 0); /* the event file and the folders made for it */
}

static void test_open_errors(void **state) {
    (void)state;
    char err[512] = "";
    assert_null(tr_tb_open("", err, sizeof err));
    assert_non_null(strstr(err, "empty path"));
    char file[] = "/tmp/twinrun_tb_file_XXXXXX";
    const int fd = mkstemp(file);
    assert_true(fd >= 0);
    close(fd);
    assert_null(tr_tb_open(file, err, sizeof err));
    assert_non_null(strstr(err, "not a directory"));
    char below[600];
    snprintf(below, sizeof below, "%s/x", file);
    assert_null(tr_tb_open(below, err, sizeof err));
    assert_non_null(strstr(err, "cannot create"));
    unlink(file);
    /* a NULL writer is a no-op, as for non-reporting ranks */
    assert_int_equal(tr_tb_scalar(NULL, "x", 1, 1, err, sizeof err), 0);
    assert_int_equal(tr_tb_close(NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_event_bytes),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
