/* The manifest: JSON round trip (exact doubles, 64-bit seed), precise errors for every broken
 * field, and the model comparison that refuses a checkpoint of another model by flag name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ckpt_test_model.h"
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
    char err[512];
    char *json = ckpt_manifest_to_json(&m, err, sizeof err);
    assert_non_null(json);
    assert_int_equal(ckpt_manifest_parse(&back, json, strlen(json), "m.json", err, sizeof err), 0);
    assert_true(back.sched.min_lr == 1.0 / 3.0 && back.seed == m.seed && back.iteration == 1234567);
    assert_true(back.files[0].crc32 == 0xdeadbeef && back.files[1].size == 200);
    assert_memory_equal(&back.model, &m.model, sizeof m.model);
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
        cmocka_unit_test(test_model_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
