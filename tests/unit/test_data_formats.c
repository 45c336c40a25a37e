/* The data path's building blocks against published values: MT19937 (C++ standard), numpy's
 * PCG64 default_rng(0) mock lengths (values numpy printed, in docs/notes), MD5 (RFC 1321 test
 * suite), Python's float repr, .npy and .idx layouts (worked examples derived by hand below). */
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

#include "data/indexed_dataset.h"
#include "data/md5.h"
#include "data/mt19937.h"
#include "data/npy.h"
#include "data/pcg64.h"
#include "data/pyjson.h"
#include "data/split.h"

/* C++ [rand.predef]: the 10000th output of a default-seeded (5489) mt19937 is 4123659995; the
 * first is 3499211612 (mt19937ar.c reference output). */
static void test_mt19937_published(void **state) {
    (void)state;
    tr_mt19937 mt;
    tr_mt_seed(&mt, 5489);
    uint32_t v = tr_mt_next32(&mt);
    assert_int_equal(v, 3499211612u);
    for (int i = 2; i <= 10000; i++) v = tr_mt_next32(&mt);
    assert_int_equal(v, 4123659995u);
}

/* numpy's legacy interval(): mask = next power of two minus one, rejection of draws > max. With
 * max = 5 the mask is 7, so every result is a draw & 7 that is <= 5, taken in stream order. */
static void test_mt_interval_rejection(void **state) {
    (void)state;
    tr_mt19937 a, b;
    tr_mt_seed(&a, 1234);
    tr_mt_seed(&b, 1234);
    for (int i = 0; i < 1000; i++) {
        uint64_t got = tr_mt_interval(&a, 5);
        uint32_t d;
        do d = tr_mt_next32(&b) & 7u;
        while (d > 5);
        assert_int_equal(got, d);
    }
    /* max above 2^32 - 1 takes two 32-bit draws, high first */
    tr_mt_seed(&a, 7);
    tr_mt_seed(&b, 7);
    uint64_t big = 0x1ffffffffull; /* mask == max: never rejects */
    uint64_t hi = tr_mt_next32(&b), lo = tr_mt_next32(&b);
    assert_int_equal(tr_mt_interval(&a, big), ((hi << 32) | lo) & big);
}

/* default_rng(0).integers(1, 4096, size=100000, dtype=int32): first values and sum as numpy
 * printed them (/work/shared/notes/megatron.md, MockGPTDataset). */
static void test_pcg64_mock_lengths(void **state) {
    (void)state;
    static int32_t a[100000];
    tr_pcg64 g;
    tr_pcg64_seed(&g, 0);
    tr_pcg64_integers_i32(&g, 1, 4096, a, 100000);
    const int32_t first[6] = {3484, 2609, 2094, 1105, 1261, 168};
    for (int i = 0; i < 6; i++) assert_int_equal(a[i], first[i]);
    int64_t sum = 0;
    for (int i = 0; i < 100000; i++) {
        assert_true(a[i] >= 1 && a[i] <= 4095);
        sum += a[i];
    }
    assert_int_equal(sum, 204637097);
}

/* RFC 1321 appendix A.5 test suite. */
static void test_md5_rfc1321(void **state) {
    (void)state;
    const char *in[] = {"",
                        "a",
                        "abc",
                        "message digest",
                        "abcdefghijklmnopqrstuvwxyz",
                        "12345678901234567890123456789012345678901234567890123456789012345678901234567890"};
    const char *out[] = {"d41d8cd98f00b204e9800998ecf8427e", "0cc175b9c0f1b6a831c399e269772661",
                         "900150983cd24fb0d6963f7d28e17f72", "f96b697d7cb7938d525a2f31aaf161d0",
                         "c3fcd3d76192e4007dfb496cca67e13b", "57edf4a22be3c955ac49da2e2107b67a"};
    char h[33];
    for (int i = 0; i < 6; i++) {
        tr_md5_hex(in[i], strlen(in[i]), h);
        assert_string_equal(h, out[i]);
    }
}

/* Python 3 repr() of these floats (CPython's shortest round-trip rule). */
static void test_py_float_repr(void **state) {
    (void)state;
    const double v[] = {0.99, 1.0, 0.01, 1e-5, 1e16, 1e15, 0.1 + 0.2, 2.0 / 3, 1e-4, 100.0, 0.969, 0.03};
    const char *r[] = {
        "0.99",   "1.0",   "0.01",  "1e-05", "1e+16", "1000000000000000.0", "0.30000000000000004", "0.6666666666666666",
        "0.0001", "100.0", "0.969", "0.03"};
    char b[64];
    for (unsigned i = 0; i < sizeof v / sizeof *v; i++) {
        tr_pyjson_float_repr(v[i], b, sizeof b);
        assert_string_equal(b, r[i]);
    }
}

/* json.dumps(..., indent=4) layout: nested lists, null, empty containers. */
static void test_pyjson_layout(void **state) {
    (void)state;
    tr_pyjson j;
    tr_pyjson_init(&j);
    tr_pyjson_obj_begin(&j);
    tr_pyjson_key(&j, "a");
    tr_pyjson_arr_begin(&j);
    tr_pyjson_arr_begin(&j);
    tr_pyjson_int(&j, 0);
    tr_pyjson_float(&j, 0.5);
    tr_pyjson_arr_end(&j);
    tr_pyjson_null(&j);
    tr_pyjson_arr_end(&j);
    tr_pyjson_key(&j, "b");
    tr_pyjson_arr_begin(&j);
    tr_pyjson_arr_end(&j);
    tr_pyjson_key(&j, "c\xc3\xa9");
    assert_int_equal(tr_pyjson_raw(&j, "{\"x\": \"q\\\"\", \"y\": 2}"), 0);
    tr_pyjson_obj_end(&j);
    assert_string_equal(j.buf, "{\n    \"a\": [\n        [\n            0,\n            0.5\n        ],\n        null\n"
                               "    ],\n    \"b\": [],\n    \"c\\u00e9\": {\n        \"x\": \"q\\\"\",\n"
                               "        \"y\": 2\n    }\n}");
    tr_pyjson_free(&j);
}

/* Megatron's split: regex numbers, padding, normalisation, half-to-even document bounds. */
static void test_split(void **state) {
    (void)state;
    tr_split s;
    char err[256];
    int64_t b, e;
    assert_int_equal(tr_split_parse("969, 30, 1", &s, err, sizeof err), 0);
    tr_split_range(&s, 0, 1000, &b, &e);
    assert_int_equal(b, 0), assert_int_equal(e, 969);
    tr_split_range(&s, 1, 1000, &b, &e);
    assert_int_equal(b, 969), assert_int_equal(e, 999);
    tr_split_range(&s, 2, 1000, &b, &e);
    assert_int_equal(b, 999), assert_int_equal(e, 1000);
    /* "1,1" pads to [0.5, 0.5, 0]: 0.5 * 5 = 2.5 rounds to 2 (even), 0.5 * 7 = 3.5 to 4 */
    assert_int_equal(tr_split_parse("1,1", &s, err, sizeof err), 0);
    assert_false(s.present[2]);
    tr_split_range(&s, 0, 5, &b, &e);
    assert_int_equal(e, 2);
    tr_split_range(&s, 0, 7, &b, &e);
    assert_int_equal(e, 4);
    /* mock: 1,1,1 over 100000 -> 33333.33 -> 33333, 66666.67 -> 66667 */
    assert_int_equal(tr_split_parse("1,1,1", &s, err, sizeof err), 0);
    tr_split_range(&s, 1, 100000, &b, &e);
    assert_int_equal(b, 33333), assert_int_equal(e, 66667);
    assert_int_equal(tr_split_parse("0,0,0", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "sums to zero"));
    assert_int_equal(tr_split_parse("1.2.3", &s, err, sizeof err), -1);
    assert_int_equal(tr_split_parse("1,2,3,4", &s, err, sizeof err), -1);
    assert_int_equal(tr_split_parse("abc", &s, err, sizeof err), -1);
}

/* numpy 1.24+ .npy v1.0 header for int32 shape (3,): 'descr' sorted first, 21-digit growth
 * padding, 64-byte alignment -> a 128-byte header; round trip and rejections. */
static void test_npy(void **state) {
    (void)state;
    char path[] = "/tmp/twinrun-npy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    int32_t v[3] = {7, -1, 2};
    int64_t shape[1] = {3};
    char err[512];
    assert_int_equal(tr_npy_save(path, TR_NPY_INT32, 1, shape, v, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    unsigned char buf[256];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_int_equal(n, 128 + 12);
    assert_memory_equal(buf + 10, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 57);
    assert_int_equal(buf[127], '\n');
    tr_npy a;
    assert_int_equal(tr_npy_parse(buf, n, "x", &a, err, sizeof err), 0);
    assert_int_equal(a.dtype, TR_NPY_INT32);
    assert_memory_equal(a.data, v, 12);
    tr_npy_free(&a);
    assert_int_equal(tr_npy_parse(buf, n - 1, "x", &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "payload"));
    buf[12] = 'X';
    assert_int_equal(tr_npy_parse(buf, n, "x", &a, err, sizeof err), -1);
    memcpy(buf + 10, "{'descr': '>i4'", 15);
    assert_int_equal(tr_npy_parse(buf, n, "x", &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "not supported"));
    buf[0] = 0;
    assert_int_equal(tr_npy_parse(buf, n, "x", &a, err, sizeof err), -1);
    assert_non_null(strstr(err, "magic"));
    unlink(path);
}

/* The worked example: int32 documents [1,2,3] and [4,5] -> an 82-byte .idx:
 * 9 magic + 8 version + 1 dtype + 8 S(2) + 8 D(3) + 2*4 lengths + 2*8 pointers + 3*8 doc indices. */
static void test_idx_worked_example(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "idx"), 0);
    char prefix[256], err[512];
    snprintf(prefix, sizeof prefix, "%s/ex", dir);
    tr_idx_writer *w = tr_idx_writer_open(prefix, TR_IDX_INT32, false, err, sizeof err);
    assert_non_null(w);
    const int64_t d0[3] = {1, 2, 3}, d1[2] = {4, 5};
    assert_int_equal(tr_idx_writer_add(w, d0, 3, err, sizeof err), 0);
    assert_int_equal(tr_idx_writer_add(w, d1, 2, err, sizeof err), 0);
    assert_int_equal(tr_idx_writer_finish(w, err, sizeof err), 0);
    char path[300];
    snprintf(path, sizeof path, "%s.idx", prefix);
    FILE *f = fopen(path, "rb");
    unsigned char b[128];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    const unsigned char want[82] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  1, 0, 0, 0, 0, 0, 0, 0, 4, 2, 0, 0,
                                    0,   0,   0,   0,   0,   3,   0,   0, 0,  0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0,
                                    0,   0,   0,   0,   0,   0,   0,   0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                    0,   0,   0,   1,   0,   0,   0,   0, 0,  0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(n, 82);
    assert_memory_equal(b, want, 82);
    for (int mm = 0; mm < 2; mm++) {
        tr_idx_dataset *d = tr_idx_open(prefix, mm, err, sizeof err);
        assert_non_null(d);
        assert_int_equal(tr_idx_num_documents(d), 2);
        int64_t t[2];
        assert_int_equal(tr_idx_read(d, 0, 1, 2, t, err, sizeof err), 0);
        assert_int_equal(t[0], 2), assert_int_equal(t[1], 3);
        assert_int_equal(tr_idx_read(d, 1, 0, 3, t, err, sizeof err), -1);
        tr_idx_close(d);
    }
    assert_int_equal(fx_rm_rf(dir), 0);
}

static size_t slurp(const char *prefix, const char *ext, unsigned char *buf, size_t cap) {
    char path[300];
    snprintf(path, sizeof path, "%s.%s", prefix, ext);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* A dataset at the prefix is never replaced without overwrite, and a writer that stops (abort, or
 * before its commit) leaves it byte for byte and no temporary file behind. */
static void test_idx_writer_keeps_existing(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "idx"), 0);
    char prefix[256], err[512];
    snprintf(prefix, sizeof prefix, "%s/k", dir);
    const int64_t a[3] = {1, 2, 3}, b[2] = {7, 8};
    tr_idx_writer *w = tr_idx_writer_open(prefix, TR_IDX_INT32, false, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(tr_idx_writer_add(w, a, 3, err, sizeof err), 0);
    assert_int_equal(tr_idx_writer_finish(w, err, sizeof err), 0);
    unsigned char bin0[256], idx0[256], now[256];
    size_t nb = slurp(prefix, "bin", bin0, sizeof bin0), ni = slurp(prefix, "idx", idx0, sizeof idx0);
    assert_null(tr_idx_writer_open(prefix, TR_IDX_INT32, false, err, sizeof err));
    assert_non_null(strstr(err, "already exist (a complete dataset): pass --overwrite to replace it"));
    /* overwrite asked, then abandoned twice: after writing, and after close (before the commit) */
    for (int stage = 0; stage < 2; stage++) {
        w = tr_idx_writer_open(prefix, TR_IDX_INT32, true, err, sizeof err);
        assert_non_null(w);
        assert_int_equal(tr_idx_writer_add(w, b, 2, err, sizeof err), 0);
        if (stage) assert_int_equal(tr_idx_writer_close(w, err, sizeof err), 0);
        tr_idx_writer_abort(w);
        assert_int_equal(slurp(prefix, "bin", now, sizeof now), nb);
        assert_memory_equal(now, bin0, nb);
        assert_int_equal(slurp(prefix, "idx", now, sizeof now), ni);
        assert_memory_equal(now, idx0, ni);
    }
    assert_int_equal(fx_sh("test $(ls '%s' | wc -l) -eq 2", dir), 0); /* k.bin and k.idx: no temporary file left */
    /* committed: replaced */
    w = tr_idx_writer_open(prefix, TR_IDX_INT32, true, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(tr_idx_writer_add(w, b, 2, err, sizeof err), 0);
    assert_int_equal(tr_idx_writer_finish(w, err, sizeof err), 0);
    tr_idx_dataset *d = tr_idx_open(prefix, true, err, sizeof err);
    assert_non_null(d);
    int64_t t[2];
    assert_int_equal(tr_idx_read(d, 0, 0, 2, t, err, sizeof err), 0);
    assert_int_equal(t[0], 7), assert_int_equal(t[1], 8);
    tr_idx_close(d);
    assert_int_equal(fx_rm_rf(dir), 0);
}

/* Every dtype code round-trips through writer and reader (float codes are read-only). */
static void test_idx_dtypes(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "idx"), 0);
    char prefix[256], err[512];
    snprintf(prefix, sizeof prefix, "%s/t", dir);
    const int codes[6] = {TR_IDX_UINT8, TR_IDX_INT8, TR_IDX_INT16, TR_IDX_INT32, TR_IDX_INT64, TR_IDX_UINT16};
    const int64_t big[6] = {255, 127, 32767, 2147483647, 5000000000ll, 65535};
    for (int c = 0; c < 6; c++) {
        tr_idx_writer *w = tr_idx_writer_open(prefix, codes[c], true, err, sizeof err);
        assert_non_null(w);
        int64_t doc[3] = {0, big[c], 1};
        assert_int_equal(tr_idx_writer_add(w, doc, 3, err, sizeof err), 0);
        int64_t bad = big[c] + 1;
        if (codes[c] != TR_IDX_INT64) assert_int_equal(tr_idx_writer_add(w, &bad, 1, err, sizeof err), -1);
        assert_int_equal(tr_idx_writer_finish(w, err, sizeof err), 0);
        tr_idx_dataset *d = tr_idx_open(prefix, c % 2, err, sizeof err);
        assert_non_null(d);
        assert_int_equal(tr_idx_dtype(d), codes[c]);
        int64_t t[3];
        assert_int_equal(tr_idx_read(d, 0, 0, 3, t, err, sizeof err), 0);
        assert_true(t[1] == big[c]);
        tr_idx_close(d);
    }
    assert_int_equal(tr_idx_optimal_code(32000), TR_IDX_UINT16);
    assert_int_equal(tr_idx_optimal_code(128256), TR_IDX_INT32);
    assert_int_equal(fx_rm_rf(dir), 0);
}

/* Bad .idx/.bin input: a precise error each, never a crash. Starts from the 82-byte example. */
static void test_idx_rejects(void **state) {
    (void)state;
    unsigned char base[82 + 2] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  1, 0, 0, 0, 0, 0, 0, 0, 4, 2, 0, 0,
                                  0,   0,   0,   0,   0,   3,   0,   0, 0,  0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0,
                                  0,   0,   0,   0,   0,   0,   0,   0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                  0,   0,   0,   1,   0,   0,   0,   0, 0,  0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    unsigned char b[84];
    char err[512];
    tr_idx_dataset *d = tr_idx_parse(base, 82, 20, "t", err, sizeof err);
    assert_non_null(d);
    assert_null(tr_idx_modes(d));
    tr_idx_close(d);
    /* two trailing bytes = sequence modes (multimodal) */
    d = tr_idx_parse(base, 84, 20, "t", err, sizeof err);
    assert_non_null(d);
    assert_non_null(tr_idx_modes(d));
    assert_int_equal(tr_idx_modes(d)[1], 1);
    tr_idx_close(d);
    struct {
        int at, val;
        size_t len;
        int64_t bin;
        const char *msg;
    } cases[] = {
        {0, 'X', 82, 20, "magic"},      {9, 2, 82, 20, "version"},    {17, 9, 82, 20, "dtype code"},
        {18, 5, 82, 20, "need"},        {-1, 0, 83, 20, "need"},      {-1, 0, 82, 19, "outside"},
        {50, 13, 82, 20, "outside"},    {74, 1, 82, 20, "ends at 1"}, {58, 1, 82, 20, "starts at"},
        {34, 0xff, 82, 64, "negative"}, {-1, 0, 20, 20, "shorter"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(b, base, sizeof b);
        if (cases[i].at >= 0) b[cases[i].at] = (unsigned char)cases[i].val;
        if (cases[i].at == 34) b[35] = b[36] = b[37] = 0xff;
        err[0] = '\0';
        d = tr_idx_parse(b, cases[i].len, cases[i].bin, "t", err, sizeof err);
        if (d) fail_msg("case %u accepted", i);
        if (!strstr(err, cases[i].msg)) fail_msg("case %u: '%s' lacks '%s'", i, err, cases[i].msg);
    }
    assert_null(tr_idx_open("/nonexistent/prefix", 1, err, sizeof err));
    assert_non_null(strstr(err, ".bin"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937_published),
        cmocka_unit_test(test_mt_interval_rejection),
        cmocka_unit_test(test_pcg64_mock_lengths),
        cmocka_unit_test(test_md5_rfc1321),
        cmocka_unit_test(test_py_float_repr),
        cmocka_unit_test(test_pyjson_layout),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_npy),
        cmocka_unit_test(test_idx_worked_example),
        cmocka_unit_test(test_idx_dtypes),
        cmocka_unit_test(test_idx_writer_keeps_existing),
        cmocka_unit_test(test_idx_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
