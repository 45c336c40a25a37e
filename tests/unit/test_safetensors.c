/* safetensors: the tiny_gqa reference files, every validation rule, dtype conversions, writer
 * round trip and sharded model directories.
 *
 * Expected values from the reference files were read once with python3's struct and json modules
 * only (no safetensors library): u64 header length, json.loads of the header, then
 * struct.unpack('<f' / '<i') at 8 + N + data_offsets[0] + 4 * flat_index. The float bit patterns
 * come from struct.pack('<f', value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "io/safetensors.h"

#define ERRLEN 1024
#define MODEL_FILE TWINRUN_TEST_DATA "/tiny_gqa/model.safetensors"
#define REF_FILE TWINRUN_TEST_DATA "/tiny_gqa/reference.safetensors"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- building images by hand ---------------------------------------------------------------- */

/* 8-byte little-endian length, the header text as given, data_len bytes of a counting pattern. */
static uint8_t *image(const char *header, uint64_t header_len_field, size_t data_len, size_t *len_out) {
    size_t hl = strlen(header);
    size_t len = 8 + hl + data_len;
    uint8_t *b = malloc(len ? len : 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(header_len_field >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)i;
    *len_out = len;
    return b;
}

/* Parses an image whose length field is the header's true length. */
static int parse_header_text(const char *header, size_t data_len, st_file *f, char *err) {
    size_t len;
    uint8_t *b = image(header, strlen(header), data_len, &len);
    int rc = st_parse(f, b, len, "test.safetensors", err, ERRLEN);
    free(b);
    return rc;
}

static void expect_header_error(const char *header, size_t data_len, const char *needle) {
    st_file f;
    char err[ERRLEN] = "";
    int rc = parse_header_text(header, data_len, &f, err);
    assert_error(rc, err, needle);
    assert_non_null(strstr(err, "test.safetensors")); /* every message names the file */
    assert_int_equal(f.n, 0);                         /* and leaves nothing behind */
    st_close(&f);
}

#define T8(name, off) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" off "]}"

/* ---- the reference files -------------------------------------------------------------------- */

static void test_tiny_gqa_model(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(st_open(&f, MODEL_FILE, err, ERRLEN), err);
    assert_int_equal(f.n, 21);
    assert_true(f.mapped);
    assert_string_equal(st_metadata_get(&f, "format"), "pt");
    assert_int_equal(f.data_len, 615680); /* last data_offsets end; the file is 8 + 2144 + 615680 bytes */
    /* sorted by begin: lm_head.weight is first, model.norm.weight last */
    assert_string_equal(f.tensors[0].name, "lm_head.weight");
    assert_string_equal(f.tensors[20].name, "model.norm.weight");
    assert_int_equal(f.tensors[20].begin, 615424);

    const st_tensor *t = st_find(&f, "model.embed_tokens.weight");
    assert_non_null(t);
    assert_int_equal(t->dtype, ST_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 512);
    assert_int_equal(t->shape[1], 64);
    t = st_find(&f, "model.layers.1.self_attn.k_proj.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0], 16);
    t = st_find(&f, "model.layers.0.mlp.down_proj.weight");
    assert_int_equal(t->shape[0], 64);
    assert_int_equal(t->shape[1], 176);
    assert_null(st_find(&f, "model.layers.2.mlp.down_proj.weight"));
    assert_null(st_find(&f, "__metadata__"));

    float norm[64];
    int64_t s64[1] = {64};
    assert_ok(st_read_f32(&f, "model.norm.weight", norm, s64, 1, err, ERRLEN), err);
    assert_int_equal(f32_bits(norm[0]), 0x3f5aa185); /* 0.8540270924568176 */
    assert_int_equal(f32_bits(norm[1]), 0x3f93e14f); /* 1.1553133726119995 */
    assert_int_equal(f32_bits(norm[3]), 0x3f4f95c9); /* 0.8108792901039124 */

    float *q = malloc(64 * 64 * sizeof *q);
    int64_t sq[2] = {64, 64};
    assert_ok(st_read_f32(&f, "model.layers.1.self_attn.q_proj.weight", q, sq, 2, err, ERRLEN), err);
    assert_int_equal(f32_bits(q[3 * 64 + 5]), 0xbce63055); /* [3, 5] = -0.028099218383431435 */
    free(q);

    float *emb = malloc(512 * 64 * sizeof *emb);
    int64_t se[2] = {512, 64};
    assert_ok(st_read_f32(&f, "model.embed_tokens.weight", emb, se, 2, err, ERRLEN), err);
    assert_int_equal(f32_bits(emb[0]), 0x3ccbc1d7); /* 0.024872703477740288 */
    assert_int_equal(f32_bits(emb[1]), 0x3cedd2eb); /* 0.029031237587332726 */
    free(emb);
    st_close(&f);
    assert_null(f.tensors);
}

static void test_tiny_gqa_reference(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(st_open(&f, REF_FILE, err, ERRLEN), err);
    assert_int_equal(f.n, 47);
    assert_int_equal(f.n_metadata, 0); /* this file has no __metadata__ */
    assert_null(st_metadata_get(&f, "format"));

    int32_t *tok = malloc(6 * 2 * 33 * sizeof *tok);
    int64_t st[3] = {6, 2, 33};
    assert_ok(st_read_i32(&f, "tokens", tok, st, 3, err, ERRLEN), err);
    assert_int_equal(tok[0], 203);
    assert_int_equal(tok[1], 290);
    assert_int_equal(tok[2], 2);
    assert_int_equal(tok[4], 451);
    assert_int_equal(tok[5 * 66 + 1 * 33 + 32], 183); /* tokens[5, 1, 32] */
    free(tok);

    float loss;
    int64_t s1[1] = {1};
    assert_ok(st_read_f32(&f, "loss", &loss, s1, 1, err, ERRLEN), err);
    assert_int_equal(f32_bits(loss), 0x40c6fe4a); /* 6.218541145324707 */

    const st_tensor *t = st_find(&f, "logits");
    assert_non_null(t);
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->shape[2], 512);
    st_close(&f);
}

static void test_read_wrong_shape_names_both(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(st_open(&f, MODEL_FILE, err, ERRLEN), err);
    float buf[64 * 64];
    int64_t want[2] = {64, 64};
    int rc = st_read_f32(&f, "model.layers.0.self_attn.k_proj.weight", buf, want, 2, err, ERRLEN);
    assert_error(rc, err, "model.layers.0.self_attn.k_proj.weight' has shape [16, 64], expected [64, 64]");
    int64_t flat[1] = {1024};
    rc = st_read_f32(&f, "model.layers.0.self_attn.k_proj.weight", buf, flat, 1, err, ERRLEN);
    assert_error(rc, err, "expected [1024]");
    rc = st_read_f32(&f, "model.layers.9.mlp.up_proj.weight", buf, want, 2, err, ERRLEN);
    assert_error(rc, err, "no tensor named 'model.layers.9.mlp.up_proj.weight'");
    int32_t ibuf[64];
    int64_t s64[1] = {64};
    rc = st_read_i32(&f, "model.norm.weight", ibuf, s64, 1, err, ERRLEN);
    assert_error(rc, err, "'model.norm.weight' has dtype F32, expected an integer type");
    st_close(&f);

    assert_ok(st_open(&f, REF_FILE, err, ERRLEN), err);
    int64_t st[3] = {6, 2, 33};
    float *fb = malloc(6 * 2 * 33 * sizeof *fb);
    rc = st_read_f32(&f, "tokens", fb, st, 3, err, ERRLEN);
    assert_error(rc, err, "'tokens' has dtype I32, expected a floating type");
    free(fb);
    st_close(&f);
}

static void test_open_missing_and_directory(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    assert_error(st_open(&f, TWINRUN_TEST_DATA "/tiny_gqa/nope.safetensors", err, ERRLEN), err,
                 "nope.safetensors: "
                 "cannot open");
    assert_error(st_open(&f, TWINRUN_TEST_DATA "/tiny_gqa", err, ERRLEN), err, "is a directory");
    st_close(&f);
}

/* ---- every validation rule, one test each --------------------------------------------------- */

static void test_file_too_short(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    const uint8_t b[5] = {1, 0, 0, 0, 0};
    assert_error(st_parse(&f, b, sizeof b, "short.safetensors", err, ERRLEN), err,
                 "short.safetensors: file is 5 bytes, shorter than the 8-byte header length");
}

static void test_header_length_zero(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    size_t len;
    uint8_t *b = image("", 0, 16, &len);
    assert_error(st_parse(&f, b, len, "z.safetensors", err, ERRLEN), err, "header length is 0");
    free(b);
}

static void test_header_length_too_large(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    size_t len;
    uint8_t *b = image("{}", 100000001ull, 0, &len);
    assert_error(st_parse(&f, b, len, "big.safetensors", err, ERRLEN), err,
                 "header length 100000001 exceeds the 100,000,000-byte limit");
    free(b);
    b = image("{}", UINT64_MAX, 0, &len); /* must not wrap around in 8 + N */
    assert_error(st_parse(&f, b, len, "big.safetensors", err, ERRLEN), err, "exceeds");
    free(b);
}

static void test_header_past_eof(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    size_t len;
    uint8_t *b = image("{}", 3, 0, &len); /* claims 3 header bytes, file holds 2 */
    assert_error(st_parse(&f, b, len, "cut.safetensors", err, ERRLEN), err,
                 "header length 3 runs past the end of the 10-byte file");
    free(b);
}

static void test_header_not_utf8(void **state) {
    (void)state;
    expect_header_error("{\"a\xff\":1}", 0, "header byte 3 is not valid UTF-8");
    expect_header_error("{\"\xc0\xaf\":1}", 0, "not valid UTF-8");     /* overlong '/' */
    expect_header_error("{\"\xed\xa0\x80\":1}", 0, "not valid UTF-8"); /* a surrogate */
}

static void test_header_not_object(void **state) {
    (void)state;
    expect_header_error("[1, 2]", 0, "header is not a JSON object (it starts with '[' at byte 0");
    expect_header_error("   ", 0, "not a JSON object");
    expect_header_error("\xef\xbb\xbf{}", 0, "not a JSON object"); /* a byte-order mark */
}

static void test_header_bad_json(void **state) {
    (void)state;
    expect_header_error("{\"a\": {\"dtype\": \"F32\",\n \"shape\": [2,, 3]}}", 0,
                        "header JSON is malformed at byte 36 (line 2, column 14) near \", 3]}}\"");
    expect_header_error("{\"a\": ", 0, "malformed");
}

static void test_header_trailing_text(void **state) {
    (void)state;
    expect_header_error("{} x", 0, "header has data after its JSON object at byte 3");
    /* space padding is how writers align the data section, so it must be accepted */
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(parse_header_text("{}      ", 0, &f, err), err);
    assert_int_equal(f.n, 0);
    st_close(&f);
}

static void test_entry_not_object(void **state) {
    (void)state;
    expect_header_error("{\"w\": 5}", 0, "tensor 'w': header entry is not a JSON object");
    expect_header_error("{\"w\": [\"F32\", [2], [0, 8]]}", 8, "tensor 'w': header entry is not a JSON object");
}

static void test_entry_missing_dtype(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                        "tensor 'w': header entry has no "
                        "\"dtype\"");
}

static void test_entry_missing_shape(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "has no \"shape\"");
}

static void test_entry_missing_offsets(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "has no \"data_offsets\"");
}

static void test_entry_duplicate_field(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                        "key \"dtype\" appears twice");
}

static void test_unknown_dtype(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"float32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                        "tensor 'w': dtype \"float32\" is not one twinrun reads");
    expect_header_error("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                        "dtype \"F8_E4M3\" is not one twinrun reads");
    expect_header_error("{\"w\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "\"dtype\" must be a string");
}

static void test_shape_negative(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,8]}}", 8,
                        "tensor 'w': shape dimension 1 is not a non-negative integer");
}

static void test_shape_not_integer(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
                        "shape dimension 0 is not a non-negative integer");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
                        "shape dimension 0 is not");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
                        "\"shape\" must be a JSON list");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}}", 8,
                        "shape dimension 0 is not");
}

static void test_shape_too_many_dims(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
                        "tensor 'w': shape has 9 dimensions; twinrun reads at most 8");
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(
        parse_header_text("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, &f, err),
        err);
    assert_int_equal(f.tensors[0].ndim, 8);
    st_close(&f);
}

static void test_offsets_malformed(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8,
                        "tensor 'w': \"data_offsets\" must be two non-negative integers");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 8, "must be two");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "must be two");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.5]}}", 8, "must be two");
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":\"0,8\"}}", 8, "must be two");
}

static void test_offsets_reversed(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8,
                        "data_offsets [8, 0] end before they begin");
}

static void test_size_mismatch(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12,
                        "tensor 'w': shape [2, 2] of F32 needs 16 bytes but data_offsets [0, 12] span 12");
    expect_header_error("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12,
                        "shape [3] of BF16 needs 6 bytes");
}

static void test_size_overflow(void **state) {
    (void)state;
    expect_header_error("{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                        "shape [4294967296, 4294967296] of F64 overflows a 64-bit byte count");
    /* the product overflows only through the item size */
    expect_header_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,8]}}", 8,
                        "overflows");
}

static void test_offsets_overlap(void **state) {
    (void)state;
    expect_header_error("{" T8("a", "0,8") "," T8("b", "4,12") "}", 12,
                        "tensor 'b': data_offsets [4, 12] overlap tensor 'a' (which ends at 8)");
}

static void test_offsets_gap(void **state) {
    (void)state;
    expect_header_error("{" T8("a", "0,8") "," T8("b", "12,20") "}", 20,
                        "tensor 'b': data_offsets begin at 12 but the previous tensor ends at 8: a gap of 4");
    expect_header_error("{" T8("a", "4,12") "}", 12,
                        "tensor 'a': data_offsets begin at 4 but the previous tensor "
                        "ends at 0");
}

static void test_offsets_out_of_range(void **state) {
    (void)state;
    expect_header_error("{" T8("a", "0,8") "," T8("b", "8,16") "}", 12,
                        "tensor 'b': data_offsets [8, 16] run past the end of the data section (12 bytes): the file "
                        "is truncated");
    expect_header_error("{" T8("a", "9007199254740984,9007199254740992") "}", 8, "run past the end");
}

static void test_truncated_data(void **state) {
    (void)state;
    /* the reference model with its last 100 bytes cut off */
    FILE *fp = fopen(MODEL_FILE, "rb");
    assert_non_null(fp);
    uint8_t *b = malloc(700000);
    size_t len = fread(b, 1, 700000, fp);
    fclose(fp);
    assert_int_equal(len, 617832);
    st_file f;
    char err[ERRLEN] = "";
    assert_error(st_parse(&f, b, len - 100, "cut.safetensors", err, ERRLEN), err,
                 "tensor 'model.norm.weight': data_offsets [615424, 615680] run past the end of the data section "
                 "(615580 bytes)");
    /* untouched, the same bytes parse */
    assert_ok(st_parse(&f, b, len, "whole.safetensors", err, ERRLEN), err);
    assert_int_equal(f.n, 21);
    st_close(&f);
    free(b);
}

static void test_trailing_bytes(void **state) {
    (void)state;
    expect_header_error("{" T8("a", "0,8") "}", 12,
                        "4 trailing bytes after the last tensor (tensors end at 8, data "
                        "section is 12 bytes)");
    expect_header_error("{}", 1, "1 trailing bytes");
}

static void test_duplicate_name(void **state) {
    (void)state;
    expect_header_error("{" T8("a", "0,8") "," T8("a", "8,16") "}", 16, "tensor 'a' appears twice in the header");
}

static void test_metadata_not_string_map(void **state) {
    (void)state;
    expect_header_error("{\"__metadata__\":{\"format\":\"pt\",\"step\":5}}", 0,
                        "\"__metadata__\" entry \"step\" is not a string");
    expect_header_error("{\"__metadata__\":[\"pt\"]}", 0, "\"__metadata__\" must be a JSON object");
    expect_header_error("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "\"__metadata__\" appears twice");
    expect_header_error("{\"__metadata__\":{\"b\":\"1\",\"a\":\"x\",\"a\":\"y\"}}", 0,
                        "\"__metadata__\" has the key \"a\" twice");
}

static void test_valid_edge_cases(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    /* empty file, empty tensors sharing an offset, a scalar, tensors listed out of order */
    assert_ok(parse_header_text("{}", 0, &f, err), err);
    assert_int_equal(f.n, 0);
    assert_null(st_find(&f, "x"));
    st_close(&f);
    assert_ok(parse_header_text("{\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]},"
                                "\"e1\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]},"
                                "\"e0\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]}," T8("a", "0,8") "}",
                                12, &f, err),
              err);
    assert_int_equal(f.n, 4);
    assert_string_equal(f.tensors[0].name, "e0");
    assert_string_equal(f.tensors[1].name, "a");
    assert_string_equal(f.tensors[3].name, "s");
    int32_t v;
    assert_ok(st_read_i32(&f, "s", &v, NULL, 0, err, ERRLEN), err);
    assert_int_equal(v, 0x0b0a0908); /* data bytes 8..11 of the counting pattern */
    float none;
    int64_t s03[2] = {0, 3};
    assert_ok(st_read_f32(&f, "e1", &none, s03, 2, err, ERRLEN), err);
    st_close(&f);
}

/* ---- conversions ---------------------------------------------------------------------------- */

static void test_float_conversions(void **state) {
    (void)state;
    const uint16_t f16[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x3555, 0x8000, 0x7C00, 0xFC00, 0x7E00};
    const uint16_t bf16[] = {0x3F80, 0x4049, 0xFF80, 0x0001};
    const double f64[] = {1.0 / 3.0, -2.5, 3.4e38, 1e-50};
    st_writer *w = st_writer_new();
    char err[ERRLEN] = "";
    int64_t n10[1] = {10}, n4[1] = {4};
    assert_ok(st_writer_add(w, "h", ST_F16, n10, 1, f16, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "b", ST_BF16, n4, 1, bf16, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "d", ST_F64, n4, 1, f64, err, ERRLEN), err);
    const double too_big[1] = {1e300};
    int64_t n1[1] = {1};
    assert_ok(st_writer_add(w, "big", ST_F64, n1, 1, too_big, err, ERRLEN), err);
    char path[] = "/tmp/twinrun_st_conv_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);

    st_file f;
    assert_ok(st_open(&f, path, err, ERRLEN), err);
    float out[10];
    assert_ok(st_read_f32(&f, "h", out, n10, 1, err, ERRLEN), err);
    assert_true(out[0] == 1.0f);
    assert_true(out[1] == -2.0f);
    assert_true(out[2] == 65504.0f);
    assert_true(out[3] == 5.960464477539063e-08f); /* smallest subnormal half, 2^-24 */
    assert_true(out[4] == 6.097555160522461e-05f); /* largest subnormal half */
    assert_true(out[5] == 0.333251953125f);
    assert_true(out[6] == 0.0f && signbit(out[6]));
    assert_true(isinf(out[7]) && out[7] > 0);
    assert_true(isinf(out[8]) && out[8] < 0);
    assert_true(isnan(out[9]));
    assert_ok(st_read_f32(&f, "b", out, n4, 1, err, ERRLEN), err);
    assert_true(out[0] == 1.0f);
    assert_true(out[1] == 3.140625f);
    assert_true(isinf(out[2]) && out[2] < 0);
    assert_int_equal(f32_bits(out[3]), 0x00010000); /* a bf16 subnormal keeps its bits */
    assert_ok(st_read_f32(&f, "d", out, n4, 1, err, ERRLEN), err);
    assert_true(out[0] == (float)(1.0 / 3.0));
    assert_true(out[1] == -2.5f);
    assert_true(out[2] == 3.4e38f);
    assert_true(out[3] == 0.0f); /* underflow to zero is fine; overflow is not */
    assert_error(st_read_f32(&f, "big", out, n1, 1, err, ERRLEN), err,
                 "tensor 'big' (F64): element 0 = 1e+300 does "
                 "not fit float32");
    st_close(&f);
    unlink(path);
}

static void test_int_conversions(void **state) {
    (void)state;
    const int64_t i64[] = {-5, 2147483647, -2147483648LL};
    const int64_t i64_big[] = {7, 2147483648LL};
    const uint8_t u8[] = {0, 255};
    const int8_t i8[] = {-128, 127};
    const int16_t i16[] = {-32768, 32767};
    const uint16_t u16[] = {0, 65535};
    const uint8_t bools[] = {0, 1};
    const uint8_t bad_bool[] = {2};
    st_writer *w = st_writer_new();
    char err[ERRLEN] = "";
    int64_t n1[1] = {1}, n2[1] = {2}, n3[1] = {3};
    assert_ok(st_writer_add(w, "i64", ST_I64, n3, 1, i64, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "i64_big", ST_I64, n2, 1, i64_big, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "u8", ST_U8, n2, 1, u8, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "i8", ST_I8, n2, 1, i8, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "i16", ST_I16, n2, 1, i16, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "u16", ST_U16, n2, 1, u16, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "bool", ST_BOOL, n2, 1, bools, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "bad_bool", ST_BOOL, n1, 1, bad_bool, err, ERRLEN), err);
    char path[] = "/tmp/twinrun_st_int_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);

    st_file f;
    assert_ok(st_open(&f, path, err, ERRLEN), err);
    int32_t out[3];
    assert_ok(st_read_i32(&f, "i64", out, n3, 1, err, ERRLEN), err);
    assert_int_equal(out[0], -5);
    assert_int_equal(out[1], INT32_MAX);
    assert_int_equal(out[2], INT32_MIN);
    assert_error(st_read_i32(&f, "i64_big", out, n2, 1, err, ERRLEN), err,
                 "tensor 'i64_big' (I64): element 1 = "
                 "2147483648 does not fit int32");
    assert_ok(st_read_i32(&f, "u8", out, n2, 1, err, ERRLEN), err);
    assert_int_equal(out[1], 255);
    assert_ok(st_read_i32(&f, "i8", out, n2, 1, err, ERRLEN), err);
    assert_int_equal(out[0], -128);
    assert_ok(st_read_i32(&f, "i16", out, n2, 1, err, ERRLEN), err);
    assert_int_equal(out[0], -32768);
    assert_int_equal(out[1], 32767);
    assert_ok(st_read_i32(&f, "u16", out, n2, 1, err, ERRLEN), err);
    assert_int_equal(out[1], 65535);
    assert_ok(st_read_i32(&f, "bool", out, n2, 1, err, ERRLEN), err);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_error(st_read_i32(&f, "bad_bool", out, n1, 1, err, ERRLEN), err, "element 0 is byte 2, not 0 or 1");
    st_close(&f);
    unlink(path);
}

/* ---- writer --------------------------------------------------------------------------------- */

static void test_writer_round_trip_bit_exact(void **state) {
    (void)state;
    enum { R = 5, C = 7 };
    float a[R * C];
    for (int i = 0; i < R * C; i++) a[i] = (float)((i * 2654435761u) % 1000003u) / 977.0f - 500.0f;
    const uint32_t odd_bits[] = {0x7FC12345u /* NaN with a payload */, 0x80000000u /* -0 */, 0x00000001u, 0x7F800000u,
                                 0xFF7FFFFFu};
    memcpy(&a[0], &odd_bits[0], sizeof odd_bits);
    uint16_t h[3] = {0x1234, 0xFFFF, 0x0000};
    int32_t scalar = -77;
    st_writer *w = st_writer_new();
    char err[ERRLEN] = "";
    int64_t sa[2] = {R, C}, sh[1] = {3};
    /* insertion order, not name order, decides the layout */
    assert_ok(st_writer_add(w, "z.weight", ST_F32, sa, 2, a, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "a \"quoted\"\\name\n", ST_BF16, sh, 1, h, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "m.scalar", ST_I32, NULL, 0, &scalar, err, ERRLEN), err);
    assert_int_equal(st_writer_data_bytes(w), 4 * R * C + 6 + 4);
    a[0] = 1.0f; /* the writer copied; later changes to the source do not leak in */
    char dir[] = "/tmp/twinrun_st_rt_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], tmp[300];
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed away */

    st_file f;
    assert_ok(st_open(&f, path, err, ERRLEN), err);
    assert_int_equal(f.n, 3);
    assert_string_equal(st_metadata_get(&f, "format"), "pt");
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f.owned[i] << (8 * i);
    assert_int_equal(hlen % 8, 0);
    assert_int_equal(f.owned[8 + hlen - 1] == ' ' || f.owned[8 + hlen - 1] == '}', 1);
    assert_string_equal(f.tensors[0].name, "z.weight");
    assert_int_equal(f.tensors[0].begin, 0);
    assert_string_equal(f.tensors[1].name, "a \"quoted\"\\name\n");
    assert_int_equal(f.tensors[1].begin, 4 * R * C);
    assert_int_equal(f.tensors[2].ndim, 0);
    memcpy(&a[0], &odd_bits[0], 4);
    float back[R * C];
    assert_ok(st_read_f32(&f, "z.weight", back, sa, 2, err, ERRLEN), err);
    assert_memory_equal(back, a, sizeof a);
    assert_memory_equal(f.data + f.tensors[1].begin, h, sizeof h);
    int32_t s;
    assert_ok(st_read_i32(&f, "m.scalar", &s, NULL, 0, err, ERRLEN), err);
    assert_int_equal(s, -77);
    st_close(&f);
    unlink(path);
    rmdir(dir);
}

/* model.safetensors was written by Hugging Face's safetensors library; writing its tensors back in
 * file order must give the same bytes (header JSON, padding and data alike). */
static void test_writer_reproduces_hf_file(void **state) {
    (void)state;
    st_file f;
    char err[ERRLEN] = "";
    assert_ok(st_open(&f, MODEL_FILE, err, ERRLEN), err);
    st_writer *w = st_writer_new();
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        assert_ok(st_writer_add(w, t->name, t->dtype, t->shape, t->ndim, f.data + t->begin, err, ERRLEN), err);
    }
    char path[] = "/tmp/twinrun_st_hf_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    uint8_t *b = malloc(f.owned_len + 1);
    size_t len = fread(b, 1, f.owned_len + 1, fp);
    fclose(fp);
    assert_int_equal(len, f.owned_len);
    assert_memory_equal(b, f.owned, len);
    free(b);
    st_close(&f);
    unlink(path);
}

static void test_writer_rejects_bad_tensors(void **state) {
    (void)state;
    st_writer *w = st_writer_new();
    char err[ERRLEN] = "";
    float x[4] = {0};
    int64_t s[1] = {4}, neg[1] = {-4}, many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
    assert_ok(st_writer_add(w, "x", ST_F32, s, 1, x, err, ERRLEN), err);
    assert_error(st_writer_add(w, "x", ST_F32, s, 1, x, err, ERRLEN), err, "tensor 'x' was already added");
    assert_error(st_writer_add(w, "__metadata__", ST_F32, s, 1, x, err, ERRLEN), err, "'__metadata__' is reserved");
    assert_error(st_writer_add(w, "", ST_F32, s, 1, x, err, ERRLEN), err, "empty or not UTF-8");
    assert_error(st_writer_add(w, "bad\xff", ST_F32, s, 1, x, err, ERRLEN), err, "empty or not UTF-8");
    assert_error(st_writer_add(w, "n", ST_F32, neg, 1, x, err, ERRLEN), err, "tensor 'n': dimension 0 is -4");
    assert_error(st_writer_add(w, "m", ST_F32, many, 9, x, err, ERRLEN), err, "tensor 'm': 9 dimensions");
    assert_error(st_writer_add(w, "d", (st_dtype)99, s, 1, x, err, ERRLEN), err, "dtype value 99");
    assert_error(st_writer_write(w, "/nonexistent_dir_twinrun/x.safetensors", err, ERRLEN), err, "cannot create");
    st_writer_free(w);
}

/* ---- model directories ---------------------------------------------------------------------- */

/* Two shards: s1 holds a [2,3] and b [4], s2 holds c [5]. Values are index + base. */
static void make_shards(const char *dir) {
    char err[ERRLEN] = "", path[512];
    float v[6];
    for (int i = 0; i < 6; i++) v[i] = (float)i + 0.5f;
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s5[1] = {5};
    st_writer *w = st_writer_new();
    assert_ok(st_writer_add(w, "a", ST_F32, s23, 2, v, err, ERRLEN), err);
    assert_ok(st_writer_add(w, "b", ST_F32, s4, 1, v, err, ERRLEN), err);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);
    w = st_writer_new();
    assert_ok(st_writer_add(w, "c", ST_F32, s5, 1, v, err, ERRLEN), err);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    assert_ok(st_writer_write(w, path, err, ERRLEN), err);
    st_writer_free(w);
}

#define GOOD_INDEX                                                                                                     \
    "{\"metadata\": {\"total_size\": 60}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "              \
    "\"b\": \"model-00001-of-00002.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}}"

static void test_model_sharded(void **state) {
    (void)state;
    char dir[] = "/tmp/twinrun_st_shard_XXXXXX";
    assert_non_null(mkdtemp(dir));
    make_shards(dir);
    fx_write_text(dir, "model.safetensors.index.json", GOOD_INDEX);
    st_model m;
    char err[ERRLEN] = "";
    assert_ok(st_model_open(&m, dir, err, ERRLEN), err);
    assert_int_equal(m.nfiles, 2);
    assert_int_equal(st_model_count(&m), 3);
    assert_string_equal(st_model_name(&m, 0), "a");
    assert_null(st_model_name(&m, 3));
    const st_file *file = NULL;
    const st_tensor *t = st_model_find(&m, "c", &file);
    assert_non_null(t);
    assert_non_null(strstr(file->path, "model-00002-of-00002.safetensors"));
    assert_null(st_model_find(&m, "d", NULL));

    const char *unread[4];
    assert_int_equal(st_model_unread(&m, unread, 4), 3);
    float out[6];
    int64_t s23[2] = {2, 3}, s5[1] = {5};
    assert_ok(st_model_read_f32(&m, "a", out, s23, 2, err, ERRLEN), err);
    assert_true(out[5] == 5.5f);
    assert_ok(st_model_read_f32(&m, "c", out, s5, 1, err, ERRLEN), err);
    assert_true(out[4] == 4.5f);
    assert_error(st_model_read_f32(&m, "b", out, s5, 1, err, ERRLEN), err, "'b' has shape [4], expected [5]");
    assert_error(st_model_read_f32(&m, "nope", out, s5, 1, err, ERRLEN), err, "model has no tensor named 'nope'");
    assert_int_equal(st_model_unread(&m, unread, 4), 1); /* a failed read does not count */
    assert_string_equal(unread[0], "b");
    assert_int_equal(st_model_unread(&m, NULL, 0), 1);
    st_model_close(&m);
    fx_rm_rf(dir);
}

static void expect_model_error(const char *index, const char *needle) {
    char dir[] = "/tmp/twinrun_st_bad_XXXXXX";
    assert_non_null(mkdtemp(dir));
    make_shards(dir);
    fx_write_text(dir, "model.safetensors.index.json", index);
    st_model m;
    char err[ERRLEN] = "";
    assert_error(st_model_open(&m, dir, err, ERRLEN), err, needle);
    assert_int_equal(m.nfiles, 0);
    fx_rm_rf(dir);
}

static void test_model_missing_shard(void **state) {
    (void)state;
    expect_model_error("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                       "\"b\": \"model-00001-of-00002.safetensors\", \"c\": \"model-00003-of-00003.safetensors\"}}",
                       "model-00003-of-00003.safetensors: shard named by");
}

static void test_model_entry_missing_from_shard(void **state) {
    (void)state;
    expect_model_error("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                       "\"b\": \"model-00001-of-00002.safetensors\", \"c\": \"model-00001-of-00002.safetensors\"}}",
                       "weight_map says 'c' is in model-00001-of-00002.safetensors, but that shard has no such "
                       "tensor");
}

static void test_model_shard_tensor_not_in_map(void **state) {
    (void)state;
    expect_model_error("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                       "\"c\": \"model-00002-of-00002.safetensors\"}}",
                       "holds tensor 'b', which");
}

static void test_model_shard_name_escapes_dir(void **state) {
    (void)state;
    expect_model_error(
        "{\"weight_map\": {\"a\": \"../model-00001-of-00002.safetensors\"}}",
        "weight_map puts 'a' in \"../model-00001-of-00002.safetensors\", which is not a plain file name");
    expect_model_error("{\"weight_map\": {\"a\": \"sub/x.safetensors\"}}", "not a plain file name");
    expect_model_error("{\"weight_map\": {\"a\": \"\"}}", "not a plain file name");
}

static void test_model_bad_index_json(void **state) {
    (void)state;
    expect_model_error("{\"weight_map\": {\"a\": ", "model.safetensors.index.json: malformed JSON at byte");
    expect_model_error("{\"metadata\": {}}", "\"weight_map\" is missing");
    expect_model_error("{\"weight_map\": {\"a\": 3}}", "weight_map entry 'a' is not a file name string");
    expect_model_error("{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                       "\"a\": \"model-00001-of-00002.safetensors\"}}",
                       "weight_map lists 'a' twice");
    expect_model_error("{\"metadata\": {\"total_size\": \"60\"}, \"weight_map\": {}}",
                       "\"total_size\" is a byte count");
}

static void test_model_bad_shard_contents(void **state) {
    (void)state;
    char dir[] = "/tmp/twinrun_st_badshard_XXXXXX";
    assert_non_null(mkdtemp(dir));
    fx_write_text(dir, "s.safetensors", "garbage!");
    fx_write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"s.safetensors\"}}");
    st_model m;
    char err[ERRLEN] = "";
    assert_error(st_model_open(&m, dir, err, ERRLEN), err, "s.safetensors: header length");
    fx_rm_rf(dir);
}

static void test_model_single_file_and_empty_dir(void **state) {
    (void)state;
    st_model m;
    char err[ERRLEN] = "";
    assert_ok(st_model_open(&m, TWINRUN_TEST_DATA "/tiny_gqa", err, ERRLEN), err);
    assert_int_equal(m.nfiles, 1);
    assert_int_equal(st_model_count(&m), 21);
    float norm[64];
    int64_t s64[1] = {64};
    assert_ok(st_model_read_f32(&m, "model.norm.weight", norm, s64, 1, err, ERRLEN), err);
    assert_int_equal(f32_bits(norm[2]), 0x3f78946c); /* 0.9710147380828857 */
    assert_int_equal(st_model_unread(&m, NULL, 0), 20);
    st_model_close(&m);

    char dir[] = "/tmp/twinrun_st_empty_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_error(st_model_open(&m, dir, err, ERRLEN), err,
                 "neither model.safetensors nor "
                 "model.safetensors.index.json is there");
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_gqa_model),
        cmocka_unit_test(test_tiny_gqa_reference),
        cmocka_unit_test(test_read_wrong_shape_names_both),
        cmocka_unit_test(test_open_missing_and_directory),
        cmocka_unit_test(test_file_too_short),
        cmocka_unit_test(test_header_length_zero),
        cmocka_unit_test(test_header_length_too_large),
        cmocka_unit_test(test_header_past_eof),
        cmocka_unit_test(test_header_not_utf8),
        cmocka_unit_test(test_header_not_object),
        cmocka_unit_test(test_header_bad_json),
        cmocka_unit_test(test_header_trailing_text),
        cmocka_unit_test(test_entry_not_object),
        cmocka_unit_test(test_entry_missing_dtype),
        cmocka_unit_test(test_entry_missing_shape),
        cmocka_unit_test(test_entry_missing_offsets),
        cmocka_unit_test(test_entry_duplicate_field),
        cmocka_unit_test(test_unknown_dtype),
        cmocka_unit_test(test_shape_negative),
        cmocka_unit_test(test_shape_not_integer),
        cmocka_unit_test(test_shape_too_many_dims),
        cmocka_unit_test(test_offsets_malformed),
        cmocka_unit_test(test_offsets_reversed),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_size_overflow),
        cmocka_unit_test(test_offsets_overlap),
        cmocka_unit_test(test_offsets_gap),
        cmocka_unit_test(test_offsets_out_of_range),
        cmocka_unit_test(test_truncated_data),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_duplicate_name),
        cmocka_unit_test(test_metadata_not_string_map),
        cmocka_unit_test(test_valid_edge_cases),
        cmocka_unit_test(test_float_conversions),
        cmocka_unit_test(test_int_conversions),
        cmocka_unit_test(test_writer_round_trip_bit_exact),
        cmocka_unit_test(test_writer_reproduces_hf_file),
        cmocka_unit_test(test_writer_rejects_bad_tensors),
        cmocka_unit_test(test_model_sharded),
        cmocka_unit_test(test_model_missing_shard),
        cmocka_unit_test(test_model_entry_missing_from_shard),
        cmocka_unit_test(test_model_shard_tensor_not_in_map),
        cmocka_unit_test(test_model_shard_name_escapes_dir),
        cmocka_unit_test(test_model_bad_index_json),
        cmocka_unit_test(test_model_bad_shard_contents),
        cmocka_unit_test(test_model_single_file_and_empty_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
