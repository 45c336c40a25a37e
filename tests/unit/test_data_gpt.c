/* GPTDataset, BlendedDataset, mock data and the flag-level errors, on small corpora whose
 * expected numbers are derived by hand in the comments from Megatron's rules (gpt_dataset.py,
 * helpers.cpp, blended_megatron_dataset_builder.py; summarised in docs/data.md). */
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
#include "data/blended_dataset.h"
#include "data/gpt_index.h"
#include "data/indexed_dataset.h"
#include "data/mock_dataset.h"
#include "twinrun/config.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    return fx_tmpdir(g_dir, sizeof g_dir, "data-gpt");
}
static int teardown(void **state) {
    (void)state;
    return fx_rm_rf(g_dir);
}

/* Writes a corpus of n documents; document k has len[k] tokens, token j = base + 1000*k + j. */
static void write_corpus(const char *name, int code, const int32_t *len, int n, int64_t base) {
    char prefix[256], err[256];
    snprintf(prefix, sizeof prefix, "%s/%s", g_dir, name);
    tr_idx_writer *w = tr_idx_writer_open(prefix, code, true, err, sizeof err); /* a case may rewrite one */
    assert_non_null(w);
    for (int k = 0; k < n; k++) {
        int64_t t[2048];
        for (int j = 0; j < len[k]; j++) t[j] = base + 1000 * k + j;
        assert_int_equal(tr_idx_writer_add(w, t, len[k], err, sizeof err), 0);
    }
    assert_int_equal(tr_idx_writer_finish(w, err, sizeof err), 0);
}

static void config(tr_config *c, int seq, int64_t train_samples) {
    tr_config_defaults(c);
    c->seq_length = seq;
    c->train_samples = train_samples;
    c->global_batch_size = 1;
    c->micro_batch_size = 1;
    c->eval_iters = 0;
    c->vocab_size = 200000;
    snprintf(c->split, sizeof c->split, "100,0,0");
    snprintf(c->data_cache_path, TR_PATH_LEN, "%s/cache", g_dir);
}

/* Three documents of 10 + 11 + 20 = 41 tokens, S = 4, X = 1:
 *   n = 10: need 41 tokens <= 41  -> 1 epoch,  N = (41 - 1) // 4 = 10
 *   n = 12: need 49 -> 2 epochs; sans = (41 - 1) // 4 = 10, final = 2, per = 10,
 *           2 < int(0.8 * 10) = 8 -> separate final epoch; N = (82 - 1) // 4 = 20
 *   n = 18: final = 8, not < 8 -> one shuffle over both epochs; N = 20
 *   n = 21: need 85 > 82 -> 3 epochs; sans = (82 - 1) // 4 = 20, final = 1 -> separate; N = 30 */
static void test_epochs_and_separate_final_epoch(void **state) {
    (void)state;
    const int32_t len[3] = {10, 11, 20};
    struct {
        int64_t n;
        int epochs, separate;
        int64_t N, sans;
    } cases[] = {{10, 1, 0, 10, 0}, {12, 2, 1, 20, 10}, {18, 2, 0, 20, 0}, {21, 3, 1, 30, 20}};
    char err[256];
    for (unsigned i = 0; i < 4; i++) {
        tr_gpt_index_params p = {len, 3, 0, 3, cases[i].n, 4, 1234, 1};
        tr_gpt_index ix;
        assert_int_equal(tr_gpt_index_build(&p, &ix, err, sizeof err), 0);
        assert_int_equal(ix.epochs, cases[i].epochs);
        assert_int_equal(ix.separate_final_epoch, cases[i].separate);
        assert_int_equal(ix.n_samples, cases[i].N);
        assert_int_equal(ix.n_doc, 3 * cases[i].epochs);
        assert_int_equal(tr_gpt_index_check(&p, &ix, err, sizeof err), 0);
        if (cases[i].separate) {
            /* the last epoch is shuffled alone: its 3 entries are a permutation of {0, 1, 2},
             * and the shuffle keeps [0, sans) and [sans, N) apart */
            int seen = 0;
            for (int k = 0; k < 3; k++) seen |= 1 << ix.doc_index[ix.n_doc - 3 + k];
            assert_int_equal(seen, 7);
            for (int64_t k = 0; k < ix.n_samples; k++)
                assert_true((k < cases[i].sans) == (tr_gpt_shuffle(&ix, k) < cases[i].sans));
        }
        tr_gpt_index_free(&ix);
    }
    /* a split too small for one sample is an error, not Megatron's endless epoch loop */
    const int32_t tiny[1] = {1};
    tr_gpt_index_params p = {tiny, 1, 0, 1, 5, 4, 1234, 1};
    tr_gpt_index ix;
    assert_int_equal(tr_gpt_index_build(&p, &ix, err, sizeof err), -1);
}

/* One document of 10 tokens, S = 4: samples are tokens [0..4] and [4..8] (the boundary token is
 * shared): sample_index = (0,0), (0,4), (0,8). */
static void test_sample_index_by_hand(void **state) {
    (void)state;
    const int32_t len[1] = {10};
    tr_gpt_index_params p = {len, 1, 0, 1, 2, 4, 1234, 1};
    tr_gpt_index ix;
    char err[256];
    assert_int_equal(tr_gpt_index_build(&p, &ix, err, sizeof err), 0);
    assert_int_equal(ix.n_samples, 2);
    const int64_t want[6] = {0, 0, 0, 4, 0, 8};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(tr_gpt_sample_doc(&ix, k), want[2 * k]);
        assert_int_equal(tr_gpt_sample_off(&ix, k), want[2 * k + 1]);
    }
    tr_gpt_index_free(&ix);
}

/* int32 tokens (vocab > 65500 -> Megatron writes int32): ids above 65535 come back intact, and a
 * sample is the concatenation its sample_index describes; ids >= --vocab-size are refused. */
static void test_int32_corpus(void **state) {
    (void)state;
    const int32_t len[4] = {30, 7, 50, 13};
    write_corpus("big", tr_idx_optimal_code(128256), len, 4, 100000);
    tr_config c;
    config(&c, 16, 4);
    c.n_data_path = 1;
    snprintf(c.data_path[0], TR_PATH_LEN, "%s/big", g_dir);
    char err[512];
    tr_data *d = tr_data_open(&c, 0, 1, err, sizeof err);
    assert_non_null(d);
    const tr_gpt_dataset *g = tr_data_gpt(d, 0, 0);
    assert_int_equal(g->cache, TR_CACHE_BUILT);
    int64_t text[17];
    for (int64_t i = 0; i < tr_data_split_len(d, 0); i++) {
        assert_int_equal(tr_data_sample(d, 0, i, text, err, sizeof err), 0);
        /* rebuild the sample from the arrays: doc = doc_index[sample_index[j][0]], offsets */
        int64_t j = tr_gpt_shuffle(&g->ix, i);
        int64_t dpos = tr_gpt_sample_doc(&g->ix, j), off = tr_gpt_sample_off(&g->ix, j);
        for (int t = 0; t < 17; t++) {
            int32_t doc = g->ix.doc_index[dpos];
            while (off >= len[doc]) doc = g->ix.doc_index[++dpos], off = 0;
            assert_int_equal(text[t], 100000 + 1000 * doc + off);
            off++;
        }
    }
    int32_t tk[16], lb[16], pos[16];
    float m[16];
    assert_int_equal(tr_data_next_train(d, tk, lb, m, pos, err, sizeof err), 0);
    assert_true(tk[0] >= 100000);
    assert_int_equal(lb[0], tk[1]);
    tr_data_close(d);
    /* second open: a cache hit */
    d = tr_data_open(&c, 0, 1, err, sizeof err);
    assert_int_equal(tr_data_gpt(d, 0, 0)->cache, TR_CACHE_HIT);
    tr_data_close(d);
    c.vocab_size = 32000;
    d = tr_data_open(&c, 0, 1, err, sizeof err);
    assert_non_null(d);
    assert_int_equal(tr_data_sample(d, 0, 0, text, err, sizeof err), 0); /* what the first batch reads */
    assert_int_equal(tr_data_next_train(d, tk, lb, m, pos, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside the vocabulary"));
    /* the message names the file, the document and the token: 100000 + 1000 * doc + offset */
    char origin[600];
    snprintf(origin, sizeof origin, "train sample 0 (%s/big: document %lld, token %lld): token id %lld at position 0",
             g_dir, (long long)((text[0] - 100000) / 1000), (long long)(text[0] % 1000), (long long)text[0]);
    assert_non_null(strstr(err, origin));
    assert_int_equal(tr_data_consumed_samples(d), 0); /* a failed batch does not advance */
    tr_data_close(d);
}

/* Blend --data-path 3 A 7 B, 10 train samples. Weights normalise to 0.3/0.7. Dataset sizes:
 * ceil(ceil(10 * 0.3) * 1.005) = 4 and ceil(ceil(10 * 0.7) * 1.005) = ceil(7.035) = 8; blend size
 * 3 + 7 = 10. Choice per i (x = max(i, 1); error_d = w_d * x - count_d, largest wins, ties low):
 *   i=0: .3, .7 -> B   i=1: .3, -.3 -> A   i=2: -.4, .4 -> B   i=3: -.1, .1 -> B   i=4: .2, -.2 -> A
 *   i=5: -.5, .5 -> B  i=6: -.2, .2 -> B   i=7: .1, -.1 -> A   i=8: -.6, .6 -> B   i=9: -.3, .3 -> B */
static void test_blend_two_datasets(void **state) {
    (void)state;
    const int32_t la[5] = {40, 30, 20, 33, 17}, lb[6] = {25, 45, 35, 15, 50, 30};
    write_corpus("A", TR_IDX_UINT16, la, 5, 0);
    write_corpus("B", TR_IDX_UINT16, lb, 6, 10000);
    tr_config c;
    config(&c, 8, 10);
    c.vocab_size = 32000;
    c.n_data_path = 4;
    snprintf(c.data_path[0], TR_PATH_LEN, "3");
    snprintf(c.data_path[1], TR_PATH_LEN, "%s/A", g_dir);
    snprintf(c.data_path[2], TR_PATH_LEN, "7");
    snprintf(c.data_path[3], TR_PATH_LEN, "%s/B", g_dir);
    char err[512];
    tr_data *d = tr_data_open(&c, 0, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    assert_int_equal(tr_data_gpt(d, 0, 0)->num_samples, 4);
    assert_int_equal(tr_data_gpt(d, 0, 1)->num_samples, 8);
    assert_int_equal(tr_data_split_len(d, 0), 10);
    const int which[10] = {1, 0, 1, 1, 0, 1, 1, 0, 1, 1};
    int count[2] = {0, 0};
    for (int i = 0; i < 10; i++) {
        int64_t text[9], want[9];
        assert_int_equal(tr_data_sample(d, 0, i, text, err, sizeof err), 0);
        assert_int_equal(tr_gpt_dataset_get(tr_data_gpt(d, 0, which[i]), count[which[i]]++, want, err, sizeof err), 0);
        assert_memory_equal(text, want, sizeof text);
        assert_true((text[0] >= 10000) == (which[i] == 1));
    }
    char info[2048];
    tr_data_describe(d, 0, info, sizeof info);
    assert_non_null(strstr(info, "BlendedDataset of 2: 10 samples"));
    tr_data_close(d);
    /* a vocabulary A's ids fit and B's (10000 + ...) do not: the first batch (sample 0, from B) names B */
    c.vocab_size = 10000;
    d = tr_data_open(&c, 0, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    int64_t first[9];
    assert_int_equal(tr_gpt_dataset_get(tr_data_gpt(d, 0, 1), 0, first, err, sizeof err), 0);
    int32_t tk[8], lab[8], pos[8];
    float m[8];
    assert_int_equal(tr_data_next_train(d, tk, lab, m, pos, err, sizeof err), -1);
    char origin[400];
    snprintf(origin, sizeof origin, "train sample 0 (%s/B: document %lld, token %lld): token id %lld", g_dir,
             (long long)((first[0] - 10000) / 1000), (long long)(first[0] % 1000), (long long)first[0]);
    assert_non_null(strstr(err, origin));
    tr_data_close(d);
    /* the same blend from the indices alone */
    int16_t di[10];
    int64_t dsi[10];
    const double w[2] = {0.3, 0.7};
    tr_blend_indices(w, 2, 10, di, dsi);
    for (int i = 0; i < 10; i++) assert_int_equal(di[i], which[i]);
    assert_int_equal(dsi[9], 6);
}

typedef struct hook_log {
    int n;
    int split[8];
    int64_t idx[8];
    bool begin[8];
} hook_log;

static void record_read(void *arg, int split, int64_t idx, bool begin) {
    hook_log *h = arg;
    if (h->n < 8) h->split[h->n] = split, h->idx[h->n] = idx, h->begin[h->n] = begin;
    h->n++;
}

/* The data-loader watchdog's view of the blend above: the hook brackets each sample's read, and the
 * place tr_data_sample_where names holds the sample's first token (read back from the .bin itself). */
static void test_read_hook_and_where(void **state) {
    (void)state;
    const int32_t la[5] = {40, 30, 20, 33, 17}, lb[6] = {25, 45, 35, 15, 50, 30};
    write_corpus("A", TR_IDX_UINT16, la, 5, 0);
    write_corpus("B", TR_IDX_UINT16, lb, 6, 10000);
    tr_config c;
    config(&c, 8, 10);
    c.vocab_size = 32000;
    c.global_batch_size = c.micro_batch_size = 2;
    c.n_data_path = 4;
    snprintf(c.data_path[0], TR_PATH_LEN, "3");
    snprintf(c.data_path[1], TR_PATH_LEN, "%s/A", g_dir);
    snprintf(c.data_path[2], TR_PATH_LEN, "7");
    snprintf(c.data_path[3], TR_PATH_LEN, "%s/B", g_dir);
    char err[512];
    tr_data *d = tr_data_open(&c, 0, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    hook_log h = {0};
    tr_data_set_read_hook(d, record_read, &h);
    int32_t tk[16], lab[16], pos[16];
    float m[16];
    assert_int_equal(tr_data_next_train(d, tk, lab, m, pos, err, sizeof err), 0);
    assert_int_equal(h.n, 4); /* two samples, each begun and ended */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(h.split[i], 0);
        assert_int_equal(h.idx[i], i / 2);
        assert_int_equal(h.begin[i], i % 2 == 0);
    }
    tr_data_set_read_hook(d, NULL, NULL);
    assert_int_equal(tr_data_next_train(d, tk, lab, m, pos, err, sizeof err), 0);
    assert_int_equal(h.n, 4);
    for (int64_t i = 0; i < 10; i++) {
        int64_t text[9];
        assert_int_equal(tr_data_sample(d, 0, i, text, err, sizeof err), 0);
        char where[600], file[300], path[300];
        long long byte, doc, tok;
        tr_data_sample_where(d, 0, i, where, sizeof where, file, sizeof file);
        assert_int_equal(sscanf(where, "%299s at byte %lld (document %lld, token %lld)", path, &byte, &doc, &tok), 4);
        assert_string_equal(path, file);
        snprintf(path, sizeof path, "%s/%s.bin", g_dir, text[0] >= 10000 ? "B" : "A");
        assert_string_equal(file, path);
        FILE *f = fopen(file, "rb");
        assert_non_null(f);
        uint16_t t = 0;
        assert_int_equal(fseek(f, (long)byte, SEEK_SET), 0);
        assert_int_equal(fread(&t, sizeof t, 1, f), 1);
        fclose(f);
        assert_int_equal(t, text[0]);
        assert_int_equal(t % 1000, tok); /* token j of document k is base + 1000 k + j */
        assert_int_equal((t % 10000) / 1000, doc);
    }
    tr_data_close(d);
}

/* --mock-data: split forced to 1,1,1 over 100000 documents (train = documents [0, 33333)),
 * eod = vocab - 1; inside a document tokens count up 1, 2, ... and each document ends in eod, so
 * consecutive tokens t, u satisfy u == t + 1, or u == eod, or (t == eod and u == 1). With vocab
 * 5000 > 4096 no count reaches eod. */
static void test_mock_data(void **state) {
    (void)state;
    tr_config c;
    config(&c, 256, 64);
    c.mock_data = true;
    c.vocab_size = 5000;
    c.eval_iters = 1;
    c.data_cache_path[0] = '\0';
    char err[512];
    tr_data *d = tr_data_open(&c, 0, 1, err, sizeof err);
    if (!d) fail_msg("%s", err);
    assert_int_equal(tr_data_eod(d), 4999);
    const tr_gpt_dataset *g = tr_data_gpt(d, 0, 0);
    assert_int_equal(g->ix.n_doc, 33333);
    assert_int_equal(tr_data_gpt(d, 1, 0)->ix.n_doc, 66667 - 33333);
    assert_non_null(strstr(g->description, "\"class\": \"MockGPTDataset\""));
    assert_non_null(strstr(g->description, "\"dataset_path\": null"));
    assert_non_null(strstr(g->description, "\"split\": \"1,1,1\""));
    int eods = 0;
    for (int64_t i = 0; i < 64; i++) {
        int64_t text[257];
        assert_int_equal(tr_data_sample(d, 0, i, text, err, sizeof err), 0);
        for (int k = 0; k < 256; k++) {
            int64_t t = text[k], u = text[k + 1];
            assert_true(u == t + 1 || u == 4999 || (t == 4999 && u == 1));
            eods += t == 4999;
        }
    }
    assert_true(eods > 0);
    char where[64], file[16] = "x";
    tr_data_sample_where(d, 0, 0, where, sizeof where, file, sizeof file);
    assert_string_equal(where, "mock data (no file)");
    assert_string_equal(file, "");
    /* --eod-mask-loss and --reset-position-ids follow the input token */
    const int64_t text[6] = {5, 4999, 1, 2, 4999, 1};
    int32_t tk[5], lb[5], pos[5];
    float m[5];
    assert_int_equal(tr_data_fill_sample(text, 5, 5000, 4999, 1, 1, tk, lb, m, pos, err, sizeof err), 0);
    const float wm[5] = {1, 0, 1, 1, 0};
    const int32_t wp[5] = {0, 1, 0, 1, 2};
    for (int k = 0; k < 5; k++) {
        assert_true(m[k] == wm[k]);
        assert_int_equal(pos[k], wp[k]);
        assert_int_equal(lb[k], text[k + 1]);
    }
    tr_data_close(d);
    c.vocab_size = 0;
    assert_null(tr_data_open(&c, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "--vocab-size"));
}

/* Valid batches continue across evaluations (Megatron's single iterator); the resume value is
 * (iteration // eval_interval) * eval_iters * GBS. */
static void test_valid_iterator(void **state) {
    (void)state;
    tr_config c;
    config(&c, 32, 40);
    c.mock_data = true;
    c.vocab_size = 5000;
    c.data_cache_path[0] = '\0';
    c.global_batch_size = 4;
    c.micro_batch_size = 2;
    c.eval_iters = 3;
    c.eval_interval = 5;
    char err[512];
    tr_data *d = tr_data_open(&c, 1, 2, err, sizeof err);
    if (!d) fail_msg("%s", err);
    /* train_iters = 40 / 4 = 10 -> (10 // 5 + 1) * 3 * 4 = 36 valid samples; test 3 * 4 = 12 */
    assert_int_equal(tr_data_split_requested(d, 1), 36);
    assert_int_equal(tr_data_split_requested(d, 2), 12);
    assert_int_equal(tr_data_valid_samples_at(d, 7), 12);
    int32_t tk[64], lb[64], pos[64];
    float m[64];
    int64_t text[33];
    for (int k = 0; k < 3; k++) {
        assert_int_equal(tr_data_next_valid(d, tk, lb, m, pos, err, sizeof err), 0);
        /* rank 1 of 2, mbs 2: global samples 4k + 2, 4k + 3 */
        assert_int_equal(tr_data_sample(d, 1, 4 * k + 3, text, err, sizeof err), 0);
        assert_int_equal(tk[32], text[0]);
    }
    assert_int_equal(tr_data_consumed_valid_samples(d), 12);
    tr_data_close(d);
}

/* Flag-level mistakes: each a precise message. */
static void test_bad_flags(void **state) {
    (void)state;
    const int32_t len[2] = {30, 30};
    write_corpus("two", TR_IDX_UINT16, len, 2, 0);
    tr_config c;
    char err[512];
    struct {
        const char *words[3];
        int n;
        const char *split;
        const char *msg;
    } cases[] = {
        {{"0.3", "0.7"}, 2, "1,0,0", "is a number where a dataset prefix belongs"},
        {{"0.3", "X", "0.7"}, 3, "1,0,0", "is a number where a dataset prefix belongs"},
        {{"/nonexistent/corpus"}, 1, "1,0,0", "cannot open"},
        {{"TWO"}, 1, "0,0,0", "sums to zero"},
        {{"TWO"}, 1, "1,1,1", "split is empty"},
        {{"-1", "TWO"}, 2, "1,0,0", "positive"},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        config(&c, 8, 2);
        c.n_data_path = cases[i].n;
        for (int k = 0; k < cases[i].n; k++) {
            if (!strcmp(cases[i].words[k], "TWO")) snprintf(c.data_path[k], TR_PATH_LEN, "%s/two", g_dir);
            else snprintf(c.data_path[k], TR_PATH_LEN, "%s", cases[i].words[k]);
        }
        snprintf(c.split, sizeof c.split, "%s", cases[i].split);
        err[0] = '\0';
        tr_data *d = tr_data_open(&c, 0, 1, err, sizeof err);
        if (d) fail_msg("case %u accepted", i);
        if (!strstr(err, cases[i].msg)) fail_msg("case %u: '%s' lacks '%s'", i, err, cases[i].msg);
    }
    config(&c, 8, 2);
    c.n_data_path = 0;
    assert_null(tr_data_open(&c, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "--mock-data"));
    config(&c, 8, 0);
    c.mock_data = true;
    c.vocab_size = 100;
    assert_null(tr_data_open(&c, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "--train-samples"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_epochs_and_separate_final_epoch),
        cmocka_unit_test(test_sample_index_by_hand),
        cmocka_unit_test(test_int32_corpus),
        cmocka_unit_test(test_blend_two_datasets),
        cmocka_unit_test(test_read_hook_and_where),
        cmocka_unit_test(test_mock_data),
        cmocka_unit_test(test_valid_iterator),
        cmocka_unit_test(test_bad_flags),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
