/* The data path against Megatron-LM itself: tests/data/megatron_data/gpt_u16_seq64 holds a corpus
 * written by Megatron's IndexedDatasetBuilder, the .npy indices Megatron's GPTDataset built for it
 * (split 99,1,0, seq 64, seed 1234, 400 train / 100 valid samples) and the tokens/labels of the
 * samples it served (case.json). From the .bin/.idx and the flags alone we must reproduce the
 * description (so the MD5 file names), the index arrays bit for bit, and every sample. */
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

#include "data/batch.h"
#include "data/npy.h"
#include "twinrun/config.h"

#define CASE TWINRUN_TEST_DATA "/megatron_data/gpt_u16_seq64"
#define TRAIN_HASH "43f473d5acc29bbab094e5d3c3524f59"
#define VALID_HASH "6fb7c580cad95290a1998b0ab11d79b5"
/* case.json: the reference run's tokenizer class "Tok" with vocab 32000 */
#define TOK_JSON "{\"class\": \"Tok\", \"vocab\": 32000}"

static const char *const ARRAYS[3] = {"document_index", "sample_index", "shuffle_index"};

/* Flags that give Megatron's requested sizes: train 400 samples; valid (400/50 // 1000 + 1) * 2 * 50 = 100. */
static void case_config(tr_config *c, const char *cache) {
    tr_config_defaults(c);
    c->n_data_path = 1;
    snprintf(c->data_path[0], TR_PATH_LEN, "corpus");
    snprintf(c->split, sizeof c->split, "99,1,0");
    c->seq_length = 64;
    c->seed = 1234;
    c->train_samples = 400;
    c->global_batch_size = 50;
    c->micro_batch_size = 5;
    c->eval_iters = 2;
    c->vocab_size = 32000;
    snprintf(c->data_cache_path, TR_PATH_LEN, "%s", cache);
}

static tr_data *open_case(const char *cache, int dp_rank, int dp_size) {
    tr_config c;
    case_config(&c, cache);
    tr_data_options o = {TOK_JSON, -1};
    char err[1024] = "";
    tr_data *d = tr_data_open_ex(&c, dp_rank, dp_size, &o, err, sizeof err);
    if (!d) fprintf(stderr, "%s\n", err);
    return d;
}

/* A scratch copy of Megatron's cache/, so that a failing run never writes into tests/data. */
static char g_cache[64];

static int setup(void **state) {
    (void)state;
    /* Megatron ran with the relative prefix "corpus" (its description says so) */
    if (chdir(CASE) != 0) return -1;
    if (fx_tmpdir(g_cache, sizeof g_cache, "data-refcache")) return -1;
    return fx_sh("cp cache/* '%s'/ && chmod u+w '%s'/*", g_cache, g_cache);
}

static int teardown(void **state) {
    (void)state;
    return fx_rm_rf(g_cache);
}

static void load(const char *path, tr_npy *a) {
    char err[512];
    int rc = tr_npy_load(path, a, err, sizeof err);
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
}

/* Megatron's cache is found (same description -> same MD5 file names) and accepted. */
static void test_megatron_cache_is_hit(void **state) {
    (void)state;
    tr_data *d = open_case(g_cache, 0, 1);
    assert_non_null(d);
    const tr_gpt_dataset *t = tr_data_gpt(d, 0, 0), *v = tr_data_gpt(d, 1, 0);
    assert_string_equal(t->hash, TRAIN_HASH);
    assert_string_equal(v->hash, VALID_HASH);
    assert_int_equal(t->cache, TR_CACHE_HIT);
    assert_int_equal(v->cache, TR_CACHE_HIT);
    assert_false(tr_data_has_split(d, 2)); /* 99,1,0: no test split */
    assert_int_equal(tr_data_split_requested(d, 1), 100);
    tr_data_close(d);
}

/* Built from scratch in an empty cache directory: the .npy files are byte-identical to Megatron's. */
static void test_indices_bit_for_bit(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "data-ref"), 0);
    tr_data *d = open_case(dir, 0, 1);
    assert_non_null(d);
    assert_int_equal(tr_data_gpt(d, 0, 0)->cache, TR_CACHE_BUILT);
    /* train: one epoch of 297 documents; valid: 3 documents, 22 epochs, separate final epoch */
    assert_int_equal(tr_data_gpt(d, 0, 0)->ix.epochs, 1);
    assert_int_equal(tr_data_gpt(d, 1, 0)->ix.epochs, 22);
    assert_true(tr_data_gpt(d, 1, 0)->ix.separate_final_epoch);
    const char *hash[2] = {TRAIN_HASH, VALID_HASH}, *split[2] = {"train", "valid"};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++) {
            char mine[512], ref[512];
            const char *what = k < 3 ? ARRAYS[k] : "description";
            const char *ext = k < 3 ? "npy" : "txt";
            snprintf(mine, sizeof mine, "%s/%s-GPTDataset-%s-%s.%s", dir, hash[s], split[s], what, ext);
            snprintf(ref, sizeof ref, "cache/%s-GPTDataset-%s-%s.%s", hash[s], split[s], what, ext);
            if (fx_sh("cmp -s '%s' '%s'", mine, ref) != 0) fail_msg("%s differs from Megatron's %s", mine, ref);
        }
    tr_data_close(d);
    assert_int_equal(fx_rm_rf(dir), 0);
}

/* Every train sample (400) and the first valid samples, in order, token for token. */
static void check_samples(tr_data *d) {
    tr_npy tok, lab, val;
    load("train_tokens.npy", &tok);
    load("train_labels.npy", &lab);
    load("valid_tokens.npy", &val);
    assert_int_equal(tok.shape[0], 400);
    assert_int_equal(tok.shape[1], 64);
    int64_t text[65];
    int32_t t[64], l[64], p[64];
    float m[64];
    char err[512];
    for (int64_t i = 0; i < 400; i++) {
        assert_int_equal(tr_data_sample(d, 0, i, text, err, sizeof err), 0);
        assert_int_equal(tr_data_fill_sample(text, 64, 32000, 31999, 0, 0, t, l, m, p, err, sizeof err), 0);
        for (int j = 0; j < 64; j++) {
            if (t[j] != ((int64_t *)tok.data)[i * 64 + j] || l[j] != ((int64_t *)lab.data)[i * 64 + j])
                fail_msg("train sample %lld position %d differs from Megatron's", (long long)i, j);
        }
    }
    for (int64_t i = 0; i < val.shape[0]; i++) {
        assert_int_equal(tr_data_sample(d, 1, i, text, err, sizeof err), 0);
        for (int j = 0; j < 64; j++)
            if (text[j] != ((int64_t *)val.data)[i * 64 + j]) fail_msg("valid sample %lld differs", (long long)i);
    }
    tr_npy_free(&tok);
    tr_npy_free(&lab);
    tr_npy_free(&val);
}

static void test_samples_from_cache(void **state) {
    (void)state;
    tr_data *d = open_case(g_cache, 0, 1);
    assert_non_null(d);
    check_samples(d);
    tr_data_close(d);
}

static void test_samples_built_without_cache(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "data-ref"), 0);
    tr_data *d = open_case(dir, 0, 1);
    assert_non_null(d);
    check_samples(d);
    tr_data_close(d);
    assert_int_equal(fx_rm_rf(dir), 0);
}

/* The sampler: with dp 2 and mbs 5, rank r's k-th micro-batch is samples 10k + 5r .. +5; one
 * iteration of GBS 50 is 5 micro-batches and moves consumed_samples by 50. Checked against
 * Megatron's served tokens. */
static void test_sampler_dp_ranks(void **state) {
    (void)state;
    tr_npy tok;
    load("train_tokens.npy", &tok);
    for (int r = 0; r < 2; r++) {
        tr_data *d = open_case(g_cache, r, 2);
        assert_non_null(d);
        int32_t t[5 * 64], l[5 * 64], p[5 * 64];
        float m[5 * 64];
        char err[512];
        for (int k = 0; k < 40; k++) { /* 8 iterations */
            assert_int_equal(tr_data_next_train(d, t, l, m, p, err, sizeof err), 0);
            for (int b = 0; b < 5; b++) {
                int64_t g = 10 * k + 5 * r + b;
                assert_int_equal(t[b * 64], ((int64_t *)tok.data)[g * 64]);
                assert_int_equal(t[b * 64 + 63], ((int64_t *)tok.data)[g * 64 + 63]);
                assert_int_equal(p[b * 64 + 7], 7);
                assert_true(m[b * 64] == 1.0f);
            }
            if (k % 5 == 4) assert_int_equal(tr_data_consumed_samples(d), 50 * (k / 5 + 1));
        }
        /* resume: set consumed to 350 -> next micro-batch is sample 350 + 5r */
        assert_int_equal(tr_data_set_consumed_samples(d, 350, err, sizeof err), 0);
        assert_int_equal(tr_data_next_train(d, t, l, m, p, err, sizeof err), 0);
        assert_int_equal(t[0], ((int64_t *)tok.data)[(350 + 5 * r) * 64]);
        tr_data_close(d);
    }
    tr_npy_free(&tok);
}

/* A stale or corrupt cache is detected, rebuilt and rewritten; the result is Megatron's again. */
static void test_corrupt_cache_is_rebuilt(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "data-ref"), 0);
    assert_int_equal(fx_sh("cp cache/* '%s'/ && chmod u+w '%s'/*", dir, dir), 0);
    /* duplicate one shuffle entry: still a valid .npy, no longer a permutation */
    char path[600];
    snprintf(path, sizeof path, "%s/%s-GPTDataset-train-shuffle_index.npy", dir, TRAIN_HASH);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    unsigned char e[4];
    assert_int_equal(fseek(f, 128, SEEK_SET), 0);
    assert_int_equal(fread(e, 1, 4, f), 4);
    assert_int_equal(fseek(f, 132, SEEK_SET), 0);
    assert_int_equal(fwrite(e, 1, 4, f), 4);
    fclose(f);
    /* truncate the valid sample index: shape and payload disagree */
    snprintf(path, sizeof path, "%s/%s-GPTDataset-valid-sample_index.npy", dir, VALID_HASH);
    assert_int_equal(truncate(path, 500), 0);
    tr_data *d = open_case(dir, 0, 1);
    assert_non_null(d);
    assert_int_equal(tr_data_gpt(d, 0, 0)->cache, TR_CACHE_REBUILT);
    assert_non_null(strstr(tr_data_gpt(d, 0, 0)->cache_note, "permutation"));
    assert_int_equal(tr_data_gpt(d, 1, 0)->cache, TR_CACHE_REBUILT);
    assert_non_null(strstr(tr_data_gpt(d, 1, 0)->cache_note, "payload"));
    tr_data_close(d);
    assert_int_equal(
        fx_sh("cmp -s '%s/%s-GPTDataset-train-shuffle_index.npy' cache/%s-GPTDataset-train-shuffle_index.npy", dir,
              TRAIN_HASH, TRAIN_HASH),
        0);
    /* and now it is a hit */
    d = open_case(dir, 0, 1);
    assert_non_null(d);
    assert_int_equal(tr_data_gpt(d, 0, 0)->cache, TR_CACHE_HIT);
    assert_int_equal(tr_data_gpt(d, 1, 0)->cache, TR_CACHE_HIT);
    tr_data_close(d);
    assert_int_equal(fx_rm_rf(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_cache_is_hit), cmocka_unit_test(test_indices_bit_for_bit),
        cmocka_unit_test(test_samples_from_cache),    cmocka_unit_test(test_samples_built_without_cache),
        cmocka_unit_test(test_sampler_dp_ranks),      cmocka_unit_test(test_corrupt_cache_is_rebuilt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
