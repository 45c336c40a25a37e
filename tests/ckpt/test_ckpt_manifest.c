/* The manifest: JSON round trip (exact doubles, 64-bit seed, provenance), precise errors for every
 * broken field, its own checksum (an edited value is refused, naming the fix; an older manifest without
 * one loads with a note), and the model comparison that refuses a checkpoint of another model by flag
 * name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"
#include "twinrun/config.h"

static char *replace(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    assert_non_null(at);
    char *out = malloc(strlen(s) + strlen(to) + 1);
    sprintf(out, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

static void test_round_trip_and_errors(void **state) {
    (void)state;
    ckpt_layout L = {.tp = 2, .pp = 1, .dp = 1, .cp = 1};
    ckpt_manifest m = tm_manifest(1234567, &L), back;
    ckpt_file_info files[2] = {{"shard_00000.bin", 100, 0xdeadbeef}, {"shard_00001.bin", 200, 0x00000001}};
    m.n_files = 2, m.files = files, m.sched.min_lr = 1.0 / 3.0;
    m.prov.present = false; /* the layout of manifests written before provenance: every field but those */
    char err[512];
    char *json = ckpt_manifest_to_json(&m, err, sizeof err);
    assert_non_null(json);
    assert_int_equal(ckpt_manifest_parse(&back, json, strlen(json), "m.json", err, sizeof err), 0);
    assert_true(back.sched.min_lr == 1.0 / 3.0 && back.seed == m.seed && back.iteration == 1234567);
    assert_true(back.files[0].crc32 == 0xdeadbeef && back.files[1].size == 200);
    assert_memory_equal(&back.model, &m.model, sizeof m.model);
    assert_false(back.prov.present);
    assert_non_null(strstr(ckpt_manifest_note(&back), "no checksum of its own"));
    ckpt_manifest_free(&back);
    const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"iteration\":", "\"iteratio\":", "\"iteration\" is missing"},
        {"\"tp\":\t2", "\"tp\":\t3", "layout world 2 != tp3"},
        {"\"tp\":\t2", "\"tp\":\t0", "\"tp\" must be an integer in [1,"},
        {"\"crc32\":\t\"deadbeef\"", "\"crc32\":\t\"deadbeeg\"", "files[0].crc32 must be 8 hex digits"},
        {"\"shard_00001.bin\"", "\"../shard_00001.bin\"", "files[1] must be rank 1's \"shard_00001.bin\""},
        {"\"decay_style\":\t\"cosine\"", "\"decay_style\":\t\"cosin\"", "must be one of: constant, linear, cosine"},
        {"\"seed\":\t\"18446744073709551557\"", "\"seed\":\t\"18446744073709551616\"", "rng.seed"},
        {"\"seed\":\t\"18446744073709551557\"", "\"seed\":\t1234", "rng.seed"},
        {"\"version\":\t1", "\"version\":\t2", "format version 2"},
        {"\"bf16\":\ttrue", "\"bf16\":\t1", "\"bf16\" must be true or false"},
        {"\"consumed_train_samples\":\t19753072", "\"consumed_train_samples\":\t-1", "consumed_train_samples"},
        {"\"hidden_size\":\t8", "\"hidden_size\":\t8, \"hidden_size\": 9", "appears 2 times"},
        {"{", "[", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = replace(json, cases[i].from, cases[i].to);
        err[0] = '\0';
        if (ckpt_manifest_parse(&back, bad, strlen(bad), "m.json", err, sizeof err) == 0)
            fail_msg("case %zu accepted", i);
        if (!strstr(err, cases[i].msg) || !strstr(err, "m.json")) fail_msg("case %zu: %s", i, err);
        free(bad);
    }
    /* every prefix of the text is refused without a crash */
    for (size_t n = 0; n < strlen(json); n += 13) {
        assert_int_equal(ckpt_manifest_parse(&back, json, n, "m.json", err, sizeof err), -1);
        assert_true(err[0] != '\0');
    }
    free(json);
}

static void parse_fails(const char *json, const char *msg) {
    ckpt_manifest back;
    char err[1024] = "";
    if (ckpt_manifest_parse(&back, json, strlen(json), "m.json", err, sizeof err) == 0) fail_msg("accepted: %s", msg);
    if (!strstr(err, msg) || !strstr(err, "m.json")) fail_msg("wanted \"%s\", got: %s", msg, err);
}

static void test_provenance_and_checksum(void **state) {
    (void)state;
    ckpt_layout L = {.tp = 2, .pp = 1, .dp = 1, .cp = 1};
    ckpt_manifest m = tm_manifest(4, &L), back;
    ckpt_file_info files[2] = {{"shard_00000.bin", 100, 0xdeadbeef}, {"shard_00001.bin", 200, 0x00000001}};
    m.n_files = 2, m.files = files;
    char err[1024];
    char *json = ckpt_manifest_to_json(&m, err, sizeof err);
    assert_non_null(json);
    assert_int_equal(ckpt_manifest_parse(&back, json, strlen(json), "m.json", err, sizeof err), 0);
    const ckpt_provenance *p = &back.prov;
    assert_true(p->present && ckpt_manifest_note(&back) == NULL);
    assert_string_equal(p->commit, "0123456789ab");
    assert_string_equal(p->version, "0.3.0");
    assert_string_equal(p->backend, "twin");
    assert_string_equal(p->tokenizer_type, "HuggingFaceTokenizer");
    assert_string_equal(p->tokenizer_model, "/models/llama3");
    assert_true(p->global_batch_size == 16 && p->micro_batch_size == 2 && !p->mock_data);
    assert_true(p->data_fingerprint == 0xfedcba9876543210ull && p->tokenizer_fingerprint == 0x0123456789abcdefull);
    assert_int_equal(p->n_data_path, 4);
    for (int i = 0; i < 4; i++) assert_string_equal(p->data_path[i], m.prov.data_path[i]);
    ckpt_manifest_free(&back);
    /* whitespace is not content: the checksum covers the values, so a reformatted manifest still loads */
    char *spaced = replace(json, "\"iteration\":\t4", "\"iteration\"  :    4");
    assert_int_equal(ckpt_manifest_parse(&back, spaced, strlen(spaced), "m.json", err, sizeof err), 0);
    ckpt_manifest_free(&back);
    free(spaced);
    /* every edit of a value is refused with the fix, wherever it is; so is a removed checksum */
    const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"\"consumed_train_samples\":\t64", "\"consumed_train_samples\":\t1000007", "checksum does not match"},
        {"\"hidden_size\":\t8", "\"hidden_size\":\t16", "restore it from a copy, or resume from an older"},
        {"\"seed\":\t\"18446744073709551557\"", "\"seed\":\t\"5\"", "checksum does not match"},
        {"\"commit\":\t\"0123456789ab\"", "\"commit\":\t\"0123456789ac\"", "checksum does not match"},
        {"\"/data/web_text_document\"", "\"/data/other\"", "checksum does not match"},
        {"\"max_lr\":\t0.0003", "\"max_lr\":\t0.0006", "checksum does not match"},
        {"\"manifest_crc32\":\t\"", "\"manifest_crc\":\t\"", "\"twinrun\" without \"manifest_crc32\""},
        {"\"manifest_crc32\":\t\"", "\"manifest_crc32\":\t\"x", "\"manifest_crc32\" must be 8 hex digits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = replace(json, cases[i].from, cases[i].to);
        parse_fails(bad, cases[i].msg);
        free(bad);
    }
    free(json);
    /* bad provenance values, each written with a valid checksum (the writer does not judge them) */
    const struct {
        const char *field, *msg;
    } bad_values[] = {{"commit", "\"commit\" must be a string of at most 63 printable bytes"},
                      {"batch", "\"global_batch_size\" must be an integer in [1,"},
                      {"path", "data.paths[1] must be a string"}};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        ckpt_manifest e = m;
        char esc[] = "ab\x1b[2Jcd", *paths[4] = {m.prov.data_path[0], esc, m.prov.data_path[2], m.prov.data_path[3]};
        if (i == 0) snprintf(e.prov.commit, sizeof e.prov.commit, "%s", esc);
        if (i == 1) e.prov.global_batch_size = 0;
        if (i == 2) e.prov.data_path = paths;
        char *t = ckpt_manifest_to_json(&e, err, sizeof err);
        assert_non_null(t);
        parse_fails(t, bad_values[i].msg);
        free(t);
    }
}

static void test_model_compare(void **state) {
    (void)state;
    tr_config cfg;
    tr_config_defaults(&cfg);
    cfg.num_layers = 4, cfg.hidden_size = 64, cfg.num_attention_heads = 8, cfg.num_query_groups = 2;
    ckpt_model_shape a, b;
    ckpt_model_from_config(&cfg, &a);
    b = a;
    char err[512];
    assert_int_equal(ckpt_model_compare(&a, &b, "ckpt", err, sizeof err), 0);
    b.seq_length = a.seq_length * 2; /* a longer context on resume is allowed, as in Megatron */
    assert_int_equal(ckpt_model_compare(&a, &b, "ckpt", err, sizeof err), 0);
    b.num_layers = 2;
    assert_int_equal(ckpt_model_compare(&a, &b, "ckpt", err, sizeof err), -1);
    assert_non_null(strstr(err, "the checkpoint has --num-layers 4, this run 2"));
    b = a, b.num_query_groups = 8;
    assert_int_equal(ckpt_model_compare(&a, &b, "ckpt", err, sizeof err), -1);
    assert_non_null(strstr(err, "--num-query-groups 2, this run 8"));
    b = a, b.rotary_base = a.rotary_base * 2;
    assert_int_equal(ckpt_model_compare(&a, &b, "ckpt", err, sizeof err), -1);
    assert_non_null(strstr(err, "--rotary-base"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_errors),
        cmocka_unit_test(test_provenance_and_checksum),
        cmocka_unit_test(test_model_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
