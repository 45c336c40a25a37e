/* The tokenizer against Hugging Face `tokenizers`: tests/data/tokenizer_small holds a tokenizer.json
 * trained by `tokenizers`, 228 documents of real text (Debian man pages and READMEs, edge cases) and
 * the ids `tokenizers` 0.23 gave them. Every document must encode to exactly those ids and decode back
 * to its text. Then the loader's refusals, one per component it does not implement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/fixture.h"

#include "tok/tok.h"
#include "tok/tok_internal.h"

#define SMALL TWINRUN_TEST_DATA "/tokenizer_small"

static tr_tok *small(void) {
    size_t len;
    char *json = fx_read_file(SMALL "/tokenizer.json", &len), err[512] = "";
    assert_non_null(json);
    tr_tok *t = tr_tok_from_json(json, len, "tokenizer_small", err, sizeof err);
    if (!t) fail_msg("%s", err);
    free(json);
    return t;
}

/* The text of a {"text": ...} line, its length (the text may hold NUL escapes: cJSON's string is
 * NUL-terminated, so none may appear in the reference) */
static char *line_text(const char *line, size_t *len) {
    cJSON *o = cJSON_Parse(line);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "text");
    assert_true(cJSON_IsString(s));
    char *t = strdup(s->valuestring);
    *len = strlen(t);
    cJSON_Delete(o);
    return t;
}

static void test_ids_match_tokenizers(void **state) {
    (void)state;
    tr_tok *t = small();
    assert_int_equal(tr_tok_vocab_size(t), 4096);
    FILE *texts = fopen(SMALL "/test.jsonl", "r"), *ids = fopen(SMALL "/ids.jsonl", "r");
    assert_non_null(texts);
    assert_non_null(ids);
    char *tl = NULL, *il = NULL, err[512], *back = NULL;
    size_t tc = 0, ic = 0, bcap = 0;
    tr_tok_buf b = {0};
    int docs = 0;
    int64_t total = 0;
    while (getline(&tl, &tc, texts) > 0) {
        assert_true(getline(&il, &ic, ids) > 0);
        size_t len;
        char *text = line_text(tl, &len);
        if (tr_tok_encode(t, &b, text, len, false, err, sizeof err)) fail_msg("document %d: %s", docs, err);
        cJSON *want = cJSON_Parse(il);
        assert_true(cJSON_IsArray(want));
        int64_t n = cJSON_GetArraySize(want), i = 0;
        for (const cJSON *e = want->child; e; e = e->next, i++)
            if (i >= b.n || b.ids[i] != (int32_t)e->valuedouble)
                fail_msg("document %d: id %lld is %d, tokenizers gives %d", docs, (long long)i, i < b.n ? b.ids[i] : -1,
                         (int)e->valuedouble);
        assert_int_equal(b.n, n);
        size_t blen = 0;
        assert_int_equal(tr_tok_decode(t, b.ids, b.n, false, &back, &blen, &bcap, err, sizeof err), 0);
        assert_int_equal(blen, len);
        assert_memory_equal(back, text, len);
        total += n;
        cJSON_Delete(want);
        free(text);
        docs++;
    }
    assert_int_equal(docs, 228);
    assert_int_equal(total, 238263); /* the reference's README */
    free(tl);
    free(il);
    free(back);
    fclose(texts);
    fclose(ids);
    tr_tok_buf_free(&b);
    tr_tok_free(t);
}

/* Special tokens inside text are one token each, wherever they stand; decoding skips them on request. */
static void test_special_tokens_in_text(void **state) {
    (void)state;
    tr_tok *t = small();
    tr_tok_buf b = {0};
    char err[256], *out = NULL;
    size_t len = 0, cap = 0;
    const char *s = "a<|eot_id|><|end_of_text|>b<|end_of_text";
    assert_int_equal(tr_tok_encode(t, &b, s, strlen(s), false, err, sizeof err), 0);
    assert_true(b.n >= 4);
    assert_int_equal(b.ids[1], tr_tok_token_id(t, "<|eot_id|>"));
    assert_int_equal(b.ids[2], 1);
    for (int64_t i = 4; i < b.n; i++) assert_true(b.ids[i] > 2); /* the unfinished one is plain text */
    assert_int_equal(tr_tok_decode(t, b.ids, b.n, true, &out, &len, &cap, err, sizeof err), 0);
    assert_string_equal(out, "ab<|end_of_text");
    free(out);
    tr_tok_buf_free(&b);
    tr_tok_free(t);
}

static void test_invalid_utf8_named(void **state) {
    (void)state;
    tr_tok *t = small();
    tr_tok_buf b = {0};
    char err[256] = "";
    const char bad[] = "ok \xed\xa0\x80 surrogate";
    assert_int_equal(tr_tok_encode(t, &b, bad, sizeof bad - 1, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "invalid UTF-8 at byte 3"));
    const char over[] = "\xc0\xaf";
    assert_int_equal(tr_tok_encode(t, &b, over, 2, false, err, sizeof err), -1);
    tr_tok_buf_free(&b);
    tr_tok_free(t);
}

/* tokenizer_small's file with one field replaced (a JSON text spliced in at the key) must fail with
 * a message holding want. */
static void refuse(const char *key, const char *value, const char *want) {
    size_t len;
    char *json = fx_read_file(SMALL "/tokenizer.json", &len), err[512] = "";
    cJSON *root = cJSON_Parse(json);
    free(json);
    cJSON_ReplaceItemInObjectCaseSensitive(root, key, cJSON_Parse(value));
    char *text = cJSON_PrintUnformatted(root);
    tr_tok *t = tr_tok_from_json(text, strlen(text), "tok.json", err, sizeof err);
    if (t || !strstr(err, want)) fail_msg("%s = %s: got '%s', want '%s'", key, value, t ? "(loaded)" : err, want);
    free(text);
    cJSON_Delete(root);
}

static void test_components_refused_by_name(void **state) {
    (void)state;
    refuse("normalizer", "{\"type\": \"NFC\"}", "normalizer NFC is not implemented");
    refuse("decoder", "{\"type\": \"WordPiece\"}", "decoder WordPiece is not implemented");
    refuse("pre_tokenizer", "{\"type\": \"Whitespace\"}", "pre-tokenizer Whitespace is not implemented");
    refuse("pre_tokenizer",
           "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"},"
           " \"behavior\": \"Removed\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}",
           "Split with behavior Removed is not implemented");
    refuse("pre_tokenizer",
           "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"},"
           " \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}",
           "pattern does not compile at character 1");
    refuse("post_processor", "{\"type\": \"BertProcessing\"}", "post_processor BertProcessing is not implemented");
    refuse("truncation", "{\"max_length\": 5}", "truncation (set) is not implemented");
    refuse("model", "{\"type\": \"WordPiece\"}", "model WordPiece is not implemented");
    refuse("model", "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}",
           "model.merges[0] ('a' + 'b'): 'right' is not in the vocabulary");
    refuse("model", "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}", "byte 0x00 has no token of its own");
    refuse("model", "{\"type\": \"BPE\", \"vocab\": {\"a\": 0.5}, \"merges\": []}",
           "model.vocab['a'] is not an integer");
    refuse("added_tokens", "[{\"id\": 5, \"content\": \"x\", \"lstrip\": true}]", "('x'): lstrip is not implemented");
    /* ids outside int32 were cast before they were checked (undefined behaviour; the fuzz target's
     * crash, kept in fuzz/corpus/fuzz_tok_json) */
    refuse("model", "{\"type\": \"BPE\", \"vocab\": {\"a\": 2e77}, \"merges\": []}",
           "model.vocab['a'] is not an integer id 0..2147483647");
    refuse("model", "{\"type\": \"BPE\", \"vocab\": {\"a\": -1}, \"merges\": []}",
           "model.vocab['a'] is not an integer id 0..2147483647");
    refuse("added_tokens", "[{\"id\": 1e300, \"content\": \"x\"}]",
           "added_tokens[0] needs an integer \"id\" (0..2147483647)");
    refuse("post_processor",
           "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"s\"}}],"
           " \"special_tokens\": {\"s\": {\"ids\": [-3e40]}}}",
           "post_processor template: more than 16 special ids, or one not an integer id");
}

/* A tokenizer.json with the 256 byte tokens, "ab" (id 256), "abc" (257), one merge a+b, and
 * ignore_merges as given; `tokenizers` encodes "abc" as the whole-word token only with ignore_merges
 * (Llama 3's setting), since no merge makes "abc". */
static tr_tok *tiny(bool ignore_merges) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tr_tok_byte_char((unsigned char)b);
        char u[4] = {0};
        if (cp < 0x80) u[0] = (char)cp;
        else u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f));
        cJSON_AddNumberToObject(vocab, u, b);
    }
    cJSON_AddNumberToObject(vocab, "ab", 256);
    cJSON_AddNumberToObject(vocab, "abc", 257);
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    cJSON_AddItemToArray(merges, cJSON_CreateString("a b"));
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", false);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type", "ByteLevel");
    char *text = cJSON_PrintUnformatted(root), err[256] = "";
    tr_tok *t = tr_tok_from_json(text, strlen(text), "tiny", err, sizeof err);
    if (!t) fail_msg("%s", err);
    free(text);
    cJSON_Delete(root);
    return t;
}

static void test_ignore_merges(void **state) {
    (void)state;
    tr_tok_buf b = {0};
    char err[128];
    tr_tok *with = tiny(true), *without = tiny(false);
    assert_int_equal(tr_tok_encode(with, &b, "abc abd", 7, false, err, sizeof err), 0);
    int32_t want_with[] = {257, ' ', 256, 'd'};
    assert_int_equal(b.n, 4);
    assert_memory_equal(b.ids, want_with, sizeof want_with);
    assert_int_equal(tr_tok_encode(without, &b, "abc", 3, false, err, sizeof err), 0);
    int32_t want_without[] = {256, 'c'};
    assert_int_equal(b.n, 2);
    assert_memory_equal(b.ids, want_without, sizeof want_without);
    tr_tok_buf_free(&b);
    tr_tok_free(with);
    tr_tok_free(without);
}

static void test_not_json_named(void **state) {
    (void)state;
    char err[256] = "";
    assert_null(tr_tok_from_json("{\"model\": ", 10, "dir/tokenizer.json", err, sizeof err));
    if (!strstr(err, "dir/tokenizer.json: not a JSON object (a syntax error at byte")) fail_msg("%s", err);
    assert_null(tr_tok_from_json("", 0, "empty.json", err, sizeof err));
    assert_non_null(strstr(err, "empty.json: not a JSON object"));
}

/* A rank file in Megatron's format: the 256 bytes, then "ab" and "abc" (ranks 256, 257), and extra
 * (appended inside the list, a JSON text: ", {...}"). */
static char *ranks_json(const char *extra) {
    cJSON *list = cJSON_CreateArray();
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int r = 0; r < 258; r++) {
        unsigned char tok[3] = {(unsigned char)r, 0, 0};
        int n = 1;
        if (r >= 256) tok[0] = 'a', tok[1] = 'b', tok[2] = 'c', n = r == 256 ? 2 : 3;
        uint32_t w = (uint32_t)tok[0] << 16 | (uint32_t)tok[1] << 8 | tok[2];
        char enc[5] = {b64[w >> 18], b64[w >> 12 & 63], n > 1 ? b64[w >> 6 & 63] : '=', n > 2 ? b64[w & 63] : '=', 0};
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", r);
        cJSON_AddStringToObject(e, "token_bytes", enc);
        cJSON_AddStringToObject(e, "token_str", "");
        cJSON_AddItemToArray(list, e);
    }
    char *text = cJSON_PrintUnformatted(list), *out = malloc(strlen(text) + strlen(extra) + 1);
    size_t n = strlen(text) - 1; /* before the closing ] */
    memcpy(out, text, n);
    strcpy(out + n, extra);
    strcat(out, "]");
    free(text);
    cJSON_Delete(list);
    return out;
}

static tr_tok *tiktoken(const char *extra, const tr_tok_tiktoken *o, char *err, size_t errlen) {
    char *json = ranks_json(extra);
    tr_tok *t = tr_tok_from_tiktoken(json, strlen(json), "ranks.json", o, err, errlen);
    free(json);
    return t;
}

/* Megatron's layout: the specials first (<unk> <s> </s>, then fillers), rank r at num_special + r; a
 * whole piece that is a token is that token; specials in the text are plain text (encode_ordinary). */
static void test_tiktoken_layout(void **state) {
    (void)state;
    char err[512] = "", *out = NULL;
    tr_tok_tiktoken o = {.pattern = "v1", .vocab_size = 262, .num_special = 4};
    tr_tok *t = tiktoken("", &o, err, sizeof err);
    if (!t) fail_msg("%s", err);
    assert_int_equal(tr_tok_vocab_size(t), 262);
    assert_int_equal(tr_tok_token_id(t, "<unk>"), 0);
    assert_int_equal(tr_tok_token_id(t, "<s>"), 1);
    assert_int_equal(tr_tok_token_id(t, "</s>"), 2);
    assert_int_equal(tr_tok_token_id(t, "<SPECIAL_3>"), 3);
    tr_tok_buf b = {0};
    assert_int_equal(tr_tok_encode(t, &b, "abc abd", 7, true, err, sizeof err), 0);
    int32_t want[] = {4 + 257, 4 + ' ', 4 + 256, 4 + 'd'};
    assert_int_equal(b.n, 4);
    assert_memory_equal(b.ids, want, sizeof want);
    assert_int_equal(tr_tok_encode(t, &b, "<s>", 3, true, err, sizeof err), 0);
    int32_t plain[] = {4 + '<', 4 + 's', 4 + '>'};
    assert_int_equal(b.n, 3);
    assert_memory_equal(b.ids, plain, sizeof plain);
    int32_t ids[] = {1, 4 + 257, 2};
    size_t len = 0, cap = 0;
    assert_int_equal(tr_tok_decode(t, ids, 3, false, &out, &len, &cap, err, sizeof err), 0);
    assert_string_equal(out, "<s>abc</s>");
    tr_tok_free(t);
    /* the vocabulary cut: without rank 257 ("abc") the piece merges to ab + c */
    o.vocab_size = 261;
    assert_non_null(t = tiktoken("", &o, err, sizeof err));
    assert_int_equal(tr_tok_encode(t, &b, "abc", 3, false, err, sizeof err), 0);
    int32_t cut[] = {4 + 256, 4 + 'c'};
    assert_int_equal(b.n, 2);
    assert_memory_equal(b.ids, cut, sizeof cut);
    tr_tok_free(t);
    free(out);
    tr_tok_buf_free(&b);
}

static void tiktoken_refuses(const char *extra, const tr_tok_tiktoken *o, const char *want) {
    char err[512] = "";
    tr_tok *t = tiktoken(extra, o, err, sizeof err);
    if (t || !strstr(err, want)) fail_msg("%s: got '%s', want '%s'", extra, t ? "(loaded)" : err, want);
}

static void test_tiktoken_refusals(void **state) {
    (void)state;
    tr_tok_tiktoken o = {.pattern = "v2", .vocab_size = 261, .num_special = 3};
    tiktoken_refuses(", {\"rank\": 258, \"token_bytes\": \"YWJjZA==\"}", &(tr_tok_tiktoken){"v2", 262, 3, 0, 0},
                     "entry 258 is not {\"rank\", \"token_bytes\", \"token_str\"}");
    tiktoken_refuses(", {\"rank\": 7, \"token_bytes\": \"YWJjZA==\", \"token_str\": \"\"}",
                     &(tr_tok_tiktoken){"v2", 262, 3, 0, 0}, "entry 258 has rank another; the ranks must be 0, 1, 2");
    tiktoken_refuses(", {\"rank\": 258, \"token_bytes\": \"YWJj*A==\", \"token_str\": \"\"}",
                     &(tr_tok_tiktoken){"v2", 262, 3, 0, 0}, "entry 258: token_bytes 'YWJj*A==' is not base64");
    tiktoken_refuses(", {\"rank\": 258, \"token_bytes\": \"YWI=\", \"token_str\": \"\"}",
                     &(tr_tok_tiktoken){"v2", 262, 3, 0, 0}, "entry 258 has the bytes of entry 256");
    tiktoken_refuses("", &(tr_tok_tiktoken){"v2", 1000, 3, 0, 0},
                     "has 258 ranks; --vocab-size 1000 with 3 special tokens needs 997");
    tiktoken_refuses("", &(tr_tok_tiktoken){"v3", 261, 3, 0, 0}, "needs --tiktoken-pattern v1 or v2");
    tiktoken_refuses("", &(tr_tok_tiktoken){NULL, 261, 3, 0, 0}, "needs --tiktoken-pattern v1 or v2");
    tiktoken_refuses("", &(tr_tok_tiktoken){"v1", 261, 2, 0, 0}, "--tiktoken-num-special-tokens 2 must be at least 3");
    const char *no_eos[] = {"<unk>", "<s>", "<eos>"}, *twice[] = {"<unk>", "<s>", "</s>", "<s>"};
    tiktoken_refuses("", &(tr_tok_tiktoken){"v1", 262, 4, no_eos, 3}, "'</s>' is missing");
    tiktoken_refuses("", &(tr_tok_tiktoken){"v1", 262, 4, twice, 4}, "special token '<s>' is given twice");
    tiktoken_refuses("", &(tr_tok_tiktoken){"v1", 261, 3, twice, 4}, "4 special tokens, more than");
    char err[512] = "";
    assert_null(tr_tok_from_tiktoken("{\"a\": 1}", 8, "r.json", &o, err, sizeof err));
    assert_non_null(strstr(err, "r.json: not a JSON list"));
    assert_null(tr_tok_from_tiktoken("[{", 2, "r.json", &o, err, sizeof err));
    assert_non_null(strstr(err, "r.json: not JSON (a syntax error at byte"));
    /* the first 256 must be the bytes in order: byte 5's entry holding byte 6 */
    char *json = ranks_json(""), *five = strstr(json, "\"BQ==\"");
    assert_non_null(five);
    memcpy(five, "\"Bg==\"", 6);
    assert_null(tr_tok_from_tiktoken(json, strlen(json), "r.json", &o, err, sizeof err));
    if (!strstr(err, "entry 5 must be the single byte 0x05")) fail_msg("%s", err);
    free(json);
    /* the first 256 must be the bytes in order */
    const char *ab = "[{\"rank\": 0, \"token_bytes\": \"YWI=\", \"token_str\": \"ab\"}]";
    assert_null(tr_tok_from_tiktoken(ab, strlen(ab), "r.json", &(tr_tok_tiktoken){"v1", 4, 3, 0, 0}, err, sizeof err));
    if (!strstr(err, "fewer than the 256 single-byte ranks")) fail_msg("%s", err);
}

/* check-tokenizer's test: ids are what the tokenizer makes of their own text, whatever specials stand
 * at their ends; any other id (another merge, one outside the vocabulary, bytes that are no text) is
 * named. */
static void test_check_ids(void **state) {
    (void)state;
    tr_tok *t = small();
    tr_tok_buf b = {0}, scratch = {0};
    char err[256], why[512] = "";
    const char *text = "The quick brown fox, \xe6\x95\xb0\xe5\xad\x97 12345!";
    assert_int_equal(tr_tok_encode(t, &b, text, strlen(text), false, err, sizeof err), 0);
    /* as a template and --append-eod leave them: <|begin_of_text|> ids <|end_of_text|> */
    int64_t n = b.n + 1, ids[256] = {tr_tok_token_id(t, "<|begin_of_text|>")};
    assert_true(n > 8 && n < 250);
    for (int64_t i = 1; i < n; i++) ids[i] = b.ids[i - 1];
    ids[n] = tr_tok_token_id(t, "<|end_of_text|>");
    assert_int_equal(tr_tok_check_ids(t, &scratch, ids, n + 1, why, sizeof why), 1);
    assert_int_equal(tr_tok_check_ids(t, &scratch, ids + 1, n - 1, why, sizeof why), 1);
    assert_int_equal(tr_tok_check_ids(t, &scratch, ids, 0, why, sizeof why), 1);
    /* "The" as its three bytes: the same text, other ids */
    int64_t split[260] = {ids[0], t->byte_id['T'], t->byte_id['h'], t->byte_id['e']};
    size_t tl;
    assert_non_null(tr_tok_id_bytes(t, (int32_t)ids[1], &tl));
    assert_int_equal(tl, 3);
    memcpy(split + 4, ids + 2, sizeof *ids * (size_t)(n - 2));
    assert_int_equal(tr_tok_check_ids(t, &scratch, split, n + 2, why, sizeof why), 0);
    if (!strstr(why, "at position 1 the data has token") || !strstr(why, "('T'), tokenizer_small makes token"))
        fail_msg("%s", why);
    int64_t far[] = {ids[1], 5000000};
    assert_int_equal(tr_tok_check_ids(t, &scratch, far, 2, why, sizeof why), 0);
    assert_non_null(strstr(why, "token id 5000000 at position 1 is not in tokenizer_small (4096 tokens)"));
    int64_t bad[] = {ids[1], t->byte_id[0xe6]};
    assert_int_equal(tr_tok_check_ids(t, &scratch, bad, 2, why, sizeof why), 0);
    assert_non_null(strstr(why, "decode to bytes that are not UTF-8 (at byte 3)"));
    tr_tok_buf_free(&b);
    tr_tok_buf_free(&scratch);
    tr_tok_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_match_tokenizers),
        cmocka_unit_test(test_special_tokens_in_text),
        cmocka_unit_test(test_invalid_utf8_named),
        cmocka_unit_test(test_components_refused_by_name),
        cmocka_unit_test(test_ignore_merges),
        cmocka_unit_test(test_not_json_named),
        cmocka_unit_test(test_tiktoken_layout),
        cmocka_unit_test(test_tiktoken_refusals),
        cmocka_unit_test(test_check_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
