/* Hugging Face config.json: both transformers 4.x and 5.x forms, every rejected field, and the
 * merge into a Megatron-style tr_config (conflicting user flags are errors naming both). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/assert_text.h"
#include "io/hf_config.h"
#include "twinrun/config.h"

#define ERRLEN 1024

/* meta-llama/Meta-Llama-3-8B's config.json as transformers 4.x writes it (values from the model
 * card's published config), with the Llama 3.1 rope_scaling block added where a test wants it. */
static const char *LLAMA3_8B_4X = "{\n"
                                  "  \"architectures\": [\"LlamaForCausalLM\"],\n"
                                  "  \"attention_bias\": false,\n"
                                  "  \"attention_dropout\": 0.0,\n"
                                  "  \"bos_token_id\": 128000,\n"
                                  "  \"eos_token_id\": 128001,\n"
                                  "  \"hidden_act\": \"silu\",\n"
                                  "  \"hidden_size\": 4096,\n"
                                  "  \"initializer_range\": 0.02,\n"
                                  "  \"intermediate_size\": 14336,\n"
                                  "  \"max_position_embeddings\": 8192,\n"
                                  "  \"model_type\": \"llama\",\n"
                                  "  \"num_attention_heads\": 32,\n"
                                  "  \"num_hidden_layers\": 32,\n"
                                  "  \"num_key_value_heads\": 8,\n"
                                  "  \"pretraining_tp\": 1,\n"
                                  "  \"rms_norm_eps\": 1e-05,\n"
                                  "  \"rope_scaling\": null,\n"
                                  "  \"rope_theta\": 500000.0,\n"
                                  "  \"tie_word_embeddings\": false,\n"
                                  "  \"torch_dtype\": \"bfloat16\",\n"
                                  "  \"transformers_version\": \"4.40.0.dev0\",\n"
                                  "  \"use_cache\": true,\n"
                                  "  \"vocab_size\": 128256\n"
                                  "}\n";

/* tests/data/tiny_gqa/config.json verbatim (transformers 5.17), kept inline so each test can
 * mutate one key. test_tiny_gqa_file checks the file itself parses to the same values. */
static const char *TINY_5X = "{\n"
                             "  \"architectures\": [\"LlamaForCausalLM\"],\n"
                             "  \"attention_bias\": false,\n"
                             "  \"attention_dropout\": 0.0,\n"
                             "  \"bos_token_id\": 1,\n"
                             "  \"dtype\": \"float32\",\n"
                             "  \"eos_token_id\": 2,\n"
                             "  \"head_dim\": 8,\n"
                             "  \"hidden_act\": \"silu\",\n"
                             "  \"hidden_size\": 64,\n"
                             "  \"initializer_range\": 0.02,\n"
                             "  \"intermediate_size\": 176,\n"
                             "  \"max_position_embeddings\": 128,\n"
                             "  \"mlp_bias\": false,\n"
                             "  \"model_type\": \"llama\",\n"
                             "  \"num_attention_heads\": 8,\n"
                             "  \"num_hidden_layers\": 2,\n"
                             "  \"num_key_value_heads\": 2,\n"
                             "  \"pad_token_id\": null,\n"
                             "  \"pretraining_tp\": 1,\n"
                             "  \"rms_norm_eps\": 1e-05,\n"
                             "  \"rope_parameters\": {\n"
                             "    \"rope_theta\": 500000.0,\n"
                             "    \"rope_type\": \"default\"\n"
                             "  },\n"
                             "  \"tie_word_embeddings\": false,\n"
                             "  \"transformers_version\": \"5.17.0\",\n"
                             "  \"use_cache\": true,\n"
                             "  \"vocab_size\": 512\n"
                             "}\n";

#define LLAMA31_SCALING                                                                                                \
    "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "                                          \
    "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}"

/* base with the first occurrence of `from` replaced by `to` (the test fails if it is absent). */
static char *edit(const char *base, const char *from, const char *to) {
    const char *at = strstr(base, from);
    if (!at) fail_msg("test bug: \"%s\" not in the base config", from);
    size_t pre = (size_t)(at - base), fl = strlen(from), tl = strlen(to), bl = strlen(base);
    char *out = malloc(bl - fl + tl + 1);
    memcpy(out, base, pre);
    memcpy(out + pre, to, tl);
    memcpy(out + pre + tl, at + fl, bl - pre - fl + 1);
    return out;
}

static int parse_text(const char *text, hf_llama_config *c, char *err) {
    return hf_config_parse(c, text, strlen(text), "cfg/config.json", err, ERRLEN);
}

/* Edits base and expects the parse to fail with needle in the message (and the path). */
static void expect_edit_error(const char *base, const char *from, const char *to, const char *needle) {
    char *text = edit(base, from, to);
    hf_llama_config c;
    char err[ERRLEN] = "";
    int rc = parse_text(text, &c, err);
    free(text);
    assert_error(rc, err, needle);
    assert_non_null(strstr(err, "cfg/config.json"));
}

static hf_llama_config parse_ok(const char *text) {
    hf_llama_config c;
    char err[ERRLEN] = "";
    memset(&c, 0xAB, sizeof c);
    assert_ok(parse_text(text, &c, err), err);
    return c;
}

/* ---- accepted forms ------------------------------------------------------------------------- */

static void test_llama3_8b_4x(void **state) {
    (void)state;
    hf_llama_config c = parse_ok(LLAMA3_8B_4X);
    assert_int_equal(c.hidden_size, 4096);
    assert_int_equal(c.intermediate_size, 14336);
    assert_int_equal(c.num_hidden_layers, 32);
    assert_int_equal(c.num_attention_heads, 32);
    assert_int_equal(c.num_key_value_heads, 8);
    assert_int_equal(c.head_dim, 128); /* no head_dim key: hidden / heads */
    assert_int_equal(c.vocab_size, 128256);
    assert_int_equal(c.max_position_embeddings, 8192);
    assert_true(c.rms_norm_eps == 1e-5);
    assert_true(c.rope_theta == 500000.0);
    assert_false(c.tie_word_embeddings);
    assert_false(c.has_rope_scaling);
}

static void test_tiny_5x(void **state) {
    (void)state;
    hf_llama_config c = parse_ok(TINY_5X);
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.intermediate_size, 176);
    assert_int_equal(c.num_hidden_layers, 2);
    assert_int_equal(c.num_attention_heads, 8);
    assert_int_equal(c.num_key_value_heads, 2);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.vocab_size, 512);
    assert_int_equal(c.max_position_embeddings, 128);
    assert_true(c.rope_theta == 500000.0); /* from rope_parameters */
    assert_false(c.has_rope_scaling);
}

static void test_tiny_gqa_file(void **state) {
    (void)state;
    hf_llama_config c, inl = parse_ok(TINY_5X);
    char err[ERRLEN] = "";
    assert_ok(hf_config_load(&c, TWINRUN_TEST_DATA "/tiny_gqa/config.json", err, ERRLEN), err);
    assert_memory_equal(&c, &inl, sizeof c);
    assert_error(hf_config_load(&c, TWINRUN_TEST_DATA "/tiny_gqa/missing.json", err, ERRLEN), err,
                 "missing.json: cannot open");
}

static void test_rope_scaling_llama3_4x(void **state) {
    (void)state;
    char *text = edit(LLAMA3_8B_4X, "\"rope_scaling\": null", "\"rope_scaling\": " LLAMA31_SCALING);
    hf_llama_config c = parse_ok(text);
    free(text);
    assert_true(c.has_rope_scaling);
    assert_true(c.rope_factor == 8.0);
    assert_true(c.rope_low_freq_factor == 1.0);
    assert_true(c.rope_high_freq_factor == 4.0);
    assert_int_equal(c.rope_original_max_position_embeddings, 8192);
    assert_true(c.rope_theta == 500000.0);
}

static void test_rope_scaling_legacy_type_key(void **state) {
    (void)state;
    char *text = edit(LLAMA3_8B_4X, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"original_max_position_embeddings\": 8192, \"type\": \"llama3\"}");
    hf_llama_config c = parse_ok(text);
    free(text);
    assert_true(c.has_rope_scaling);
    text = edit(LLAMA3_8B_4X, "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"default\"}");
    c = parse_ok(text);
    free(text);
    assert_false(c.has_rope_scaling);
}

static void test_rope_parameters_llama3_5x(void **state) {
    (void)state;
    char *text = edit(TINY_5X, "\"rope_type\": \"default\"",
                      "\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0, "
                      "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64");
    hf_llama_config c = parse_ok(text);
    free(text);
    assert_true(c.has_rope_scaling);
    assert_true(c.rope_factor == 32.0);
    assert_int_equal(c.rope_original_max_position_embeddings, 64);
    assert_true(c.rope_theta == 500000.0);
}

static void test_rope_theta_sources(void **state) {
    (void)state;
    /* 5.x dict without a theta falls back to the top-level key, as transformers does */
    char *a = edit(TINY_5X, "\"rope_theta\": 500000.0,\n", "");
    char *b = edit(a, "\"rms_norm_eps\": 1e-05,", "\"rms_norm_eps\": 1e-05, \"rope_theta\": 250000.0,");
    hf_llama_config c = parse_ok(b);
    assert_true(c.rope_theta == 250000.0);
    free(b);
    /* and with neither, there is no base at all */
    hf_llama_config d;
    char err[ERRLEN] = "";
    assert_error(parse_text(a, &d, err), err, "no RoPE base: neither \"rope_theta\"");
    free(a);
    /* both, agreeing, is fine; disagreeing is not */
    a = edit(TINY_5X, "\"rms_norm_eps\": 1e-05,", "\"rms_norm_eps\": 1e-05, \"rope_theta\": 500000,");
    c = parse_ok(a);
    free(a);
    expect_edit_error(TINY_5X, "\"rms_norm_eps\": 1e-05,", "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,",
                      "\"rope_theta\" is 10000 but \"rope_parameters\".rope_theta is 500000; keep one");
    /* 4.x without rope_theta */
    expect_edit_error(LLAMA3_8B_4X, "\"rope_theta\": 500000.0,", "", "no RoPE base");
}

static void test_optional_keys_default(void **state) {
    (void)state;
    /* num_key_value_heads absent or null = heads; biases, act and tie absent = transformers' defaults */
    char *a = edit(LLAMA3_8B_4X, "\"num_key_value_heads\": 8,", "\"num_key_value_heads\": null,");
    char *b = edit(a, "\"attention_bias\": false,", "");
    char *c2 = edit(b, "\"hidden_act\": \"silu\",", "");
    char *d = edit(c2, "\"tie_word_embeddings\": false,", "");
    hf_llama_config c = parse_ok(d);
    assert_int_equal(c.num_key_value_heads, 32);
    assert_false(c.tie_word_embeddings);
    free(a), free(b), free(c2), free(d);
    a = edit(LLAMA3_8B_4X, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
    c = parse_ok(a);
    assert_true(c.tie_word_embeddings);
    free(a);
    /* an explicit head_dim need not divide the hidden size (as in some Llama-family exports) */
    a = edit(LLAMA3_8B_4X, "\"hidden_size\": 4096,", "\"hidden_size\": 4001, \"head_dim\": 128,");
    c = parse_ok(a);
    assert_int_equal(c.head_dim, 128);
    free(a);
}

/* ---- rejected configs ----------------------------------------------------------------------- */

static void test_missing_required_keys(void **state) {
    (void)state;
    static const char *const keys[][2] = {
        {"\"hidden_size\": 4096,", "hidden_size"},
        {"\"intermediate_size\": 14336,", "intermediate_size"},
        {"\"num_hidden_layers\": 32,", "num_hidden_layers"},
        {"\"num_attention_heads\": 32,", "num_attention_heads"},
        {"\"max_position_embeddings\": 8192,", "max_position_embeddings"},
        {"\"rms_norm_eps\": 1e-05,", "rms_norm_eps"},
        {"\"model_type\": \"llama\",", "model_type"},
        {",\n  \"vocab_size\": 128256", "vocab_size"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char needle[128];
        snprintf(needle, sizeof needle, "required key \"%s\" is missing", keys[i][1]);
        expect_edit_error(LLAMA3_8B_4X, keys[i][0], "", needle);
    }
    /* null counts as missing for a required key */
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_size\": 4096", "\"hidden_size\": null",
                      "required key \"hidden_size\" is missing");
}

static void test_wrong_json_types(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_size\": 4096", "\"hidden_size\": \"4096\"",
                      "\"hidden_size\" must be an integer, got a string");
    expect_edit_error(LLAMA3_8B_4X, "\"num_hidden_layers\": 32", "\"num_hidden_layers\": 32.5",
                      "\"num_hidden_layers\" must be an integer, got a fraction");
    expect_edit_error(LLAMA3_8B_4X, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": [1e-05]",
                      "\"rms_norm_eps\" must be a number, got a list");
    expect_edit_error(LLAMA3_8B_4X, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 0",
                      "\"tie_word_embeddings\" must be true or false, got a number");
    expect_edit_error(LLAMA3_8B_4X, "\"model_type\": \"llama\"", "\"model_type\": 7",
                      "\"model_type\" must be a string, got a number");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_theta\": 500000.0", "\"rope_theta\": \"500000\"",
                      "\"rope_theta\" must be a number, got a string");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null", "\"rope_scaling\": \"llama3\"",
                      "\"rope_scaling\" must be an object");
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_size\": 4096", "\"hidden_size\": 4096, \"hidden_size\": 2048",
                      "\"hidden_size\" appears twice");
}

static void test_non_positive_sizes(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_size\": 4096", "\"hidden_size\": 0",
                      "\"hidden_size\" is 0; it must be a positive integer");
    expect_edit_error(LLAMA3_8B_4X, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": -8",
                      "\"num_key_value_heads\" is -8; it must be a positive integer");
    expect_edit_error(LLAMA3_8B_4X, "\"vocab_size\": 128256", "\"vocab_size\": 3000000000",
                      "\"vocab_size\" is 3000000000; it must be a positive integer (at most 2147483647)");
    expect_edit_error(LLAMA3_8B_4X, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0",
                      "\"rms_norm_eps\" is 0; it must be a positive number");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_theta\": 500000.0", "\"rope_theta\": -1",
                      "\"rope_theta\" is -1; it must be a positive number");
}

static void test_indivisible_heads(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_size\": 4096", "\"hidden_size\": 4001",
                      "hidden_size 4001 is not divisible by num_attention_heads 32 and there is no head_dim");
    expect_edit_error(LLAMA3_8B_4X, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 6",
                      "num_attention_heads 32 is not divisible by num_key_value_heads 6");
}

/* attention_bias and mlp_bias together are Megatron's linear biases; one without the other is not. */
static void test_biases(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"attention_bias\": false", "\"attention_bias\": true",
                      "attention_bias is true but mlp_bias is false; Megatron (and twinrun) has biases in every linear "
                      "layer or in none");
    expect_edit_error(TINY_5X, "\"mlp_bias\": false", "\"mlp_bias\": true",
                      "attention_bias is false but mlp_bias is true");
    char *a = edit(TINY_5X, "\"attention_bias\": false", "\"attention_bias\": true");
    char *both = edit(a, "\"mlp_bias\": false", "\"mlp_bias\": true");
    hf_llama_config c = parse_ok(both);
    assert_true(c.attention_bias && c.mlp_bias);
    tr_config *cfg = malloc(sizeof *cfg);
    char err[ERRLEN] = "";
    tr_config_defaults(cfg);
    assert_ok(hf_config_apply(&c, cfg, err, ERRLEN), err);
    assert_false(cfg->disable_bias_linear);
    c = parse_ok(TINY_5X);
    tr_config_defaults(cfg);
    assert_ok(hf_config_apply(&c, cfg, err, ERRLEN), err);
    assert_true(cfg->disable_bias_linear);
    free(cfg), free(a), free(both);
}

static void test_hidden_act_and_model_type(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"",
                      "hidden_act is \"gelu\"; twinrun's Llama MLP is SwiGLU, so it must be \"silu\"");
    expect_edit_error(LLAMA3_8B_4X, "\"model_type\": \"llama\"", "\"model_type\": \"mistral\"",
                      "model_type is \"mistral\"; twinrun imports only \"llama\"");
    expect_edit_error(LLAMA3_8B_4X, "\"pretraining_tp\": 1,", "\"partial_rotary_factor\": 0.5,",
                      "partial_rotary_factor is 0.5");
}

static void test_rope_type_rejected(void **state) {
    (void)state;
    expect_edit_error(TINY_5X, "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"",
                      "rope_parameters: rope_type \"yarn\" is not supported; twinrun implements \"default\" and "
                      "\"llama3\"");
    expect_edit_error(TINY_5X, "\"rope_type\": \"default\"", "\"rope_type\": \"spiral\"",
                      "unknown rope_type \"spiral\"");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}",
                      "rope_scaling: rope_type \"linear\" is not supported");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"type\": \"linear\", \"rope_type\": \"llama3\"}",
                      "\"rope_type\" is \"llama3\" but the legacy \"type\" says \"linear\"");
}

static void test_rope_llama3_incomplete(void **state) {
    (void)state;
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"rope_type\": \"llama3\"}",
                      "rope_scaling: required key \"original_max_position_embeddings\" is missing");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 4.0, \"high_freq_factor\": 1.0, "
                      "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}",
                      "llama3 \"high_freq_factor\" (1) must be greater than \"low_freq_factor\" (4)");
    expect_edit_error(LLAMA3_8B_4X, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"factor\": 0.5, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}",
                      "llama3 \"factor\" is 0.5; it must be at least 1");
}

static void test_rope_scaling_and_parameters_disagree(void **state) {
    (void)state;
    expect_edit_error(TINY_5X, "\"rms_norm_eps\": 1e-05,",
                      "\"rms_norm_eps\": 1e-05, \"rope_scaling\": " LLAMA31_SCALING ",",
                      "\"rope_scaling\" (transformers 4.x) and \"rope_parameters\" (5.x) disagree");
}

static void test_malformed_json(void **state) {
    (void)state;
    hf_llama_config c;
    char err[ERRLEN] = "";
    const char *bad = "{\n  \"hidden_size\": 64\n  \"num_hidden_layers\": 2\n}";
    assert_error(parse_text(bad, &c, err), err,
                 "cfg/config.json: malformed JSON at byte 24 (line 3, column 3) near \"\"num_hidden_layers\"");
    assert_error(parse_text("", &c, err), err, "malformed JSON at byte 0");
    assert_error(parse_text("[1]", &c, err), err, "expected a JSON object");
    assert_error(parse_text("{} {}", &c, err), err, "malformed JSON");
    /* not NUL-terminated: the parser must honour len */
    char raw[2] = {'{', '}'};
    assert_error(hf_config_parse(&c, raw, 2, "raw", err, ERRLEN), err, "required key \"model_type\" is missing");
}

/* ---- hf_config_apply ------------------------------------------------------------------------ */

static tr_config *defaults(void) {
    tr_config *cfg = malloc(sizeof *cfg);
    tr_config_defaults(cfg);
    return cfg;
}

static void test_apply_fills_megatron_config(void **state) {
    (void)state;
    hf_llama_config hf = parse_ok(TINY_5X);
    tr_config *cfg = defaults();
    char err[ERRLEN] = "";
    assert_ok(hf_config_apply(&hf, cfg, err, ERRLEN), err);
    assert_int_equal(cfg->num_layers, 2);
    assert_int_equal(cfg->hidden_size, 64);
    assert_int_equal(cfg->ffn_hidden_size, 176);
    assert_int_equal(cfg->num_attention_heads, 8);
    assert_true(cfg->group_query_attention);
    assert_int_equal(cfg->num_query_groups, 2);
    assert_int_equal(cfg->kv_channels, 8);
    assert_int_equal(cfg->vocab_size, 512);
    assert_int_equal(cfg->max_position_embeddings, 128);
    assert_true(cfg->rotary_base == 500000.0);
    assert_true(cfg->norm_epsilon == 1e-5);
    assert_int_equal(cfg->normalization, TR_NORM_RMSNORM);
    assert_int_equal(cfg->position_embedding_type, TR_POS_ROPE);
    assert_true(cfg->swiglu);
    assert_true(cfg->untie_embeddings_and_output_weights);
    assert_true(cfg->disable_bias_linear);
    free(cfg);
}

static void test_apply_accepts_matching_flags(void **state) {
    (void)state;
    /* what the 8B seed's MODEL_ARGS pass, all agreeing with the HF config */
    hf_llama_config hf = parse_ok(LLAMA3_8B_4X);
    tr_config *cfg = defaults();
    cfg->num_layers = 32;
    cfg->hidden_size = 4096;
    cfg->ffn_hidden_size = 14336;
    cfg->num_attention_heads = 32;
    cfg->group_query_attention = true;
    cfg->num_query_groups = 8;
    cfg->max_position_embeddings = 8192;
    cfg->rotary_base = 500000;
    cfg->normalization = TR_NORM_RMSNORM;
    cfg->position_embedding_type = TR_POS_ROPE;
    cfg->swiglu = true;
    cfg->untie_embeddings_and_output_weights = true;
    cfg->disable_bias_linear = true;
    char err[ERRLEN] = "";
    assert_ok(hf_config_apply(&hf, cfg, err, ERRLEN), err);
    assert_int_equal(cfg->kv_channels, 128);
    assert_int_equal(cfg->vocab_size, 128256);
    free(cfg);
}

static void test_apply_conflicts_name_both(void **state) {
    (void)state;
    hf_llama_config hf = parse_ok(TINY_5X);
    char err[ERRLEN] = "";
    tr_config *cfg = defaults();
    cfg->num_layers = 4;
    cfg->hidden_size = 999; /* also wrong, but the first conflict is reported */
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err,
                 "--num-layers 4 disagrees with num_hidden_layers 2 in the Hugging Face config.json");
    assert_int_equal(cfg->num_layers, 4); /* untouched on error */
    assert_int_equal(cfg->num_attention_heads, 0);
    free(cfg);

    cfg = defaults();
    cfg->num_query_groups = 4;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err,
                 "--num-query-groups 4 disagrees with "
                 "num_key_value_heads 2");
    free(cfg);
    cfg = defaults();
    cfg->rotary_base = 1e6;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--rotary-base 1000000 disagrees with rope_theta 500000");
    free(cfg);
    cfg = defaults();
    cfg->norm_epsilon = 1e-6;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--norm-epsilon 1e-06 disagrees with rms_norm_eps 1e-05");
    free(cfg);
    cfg = defaults();
    cfg->kv_channels = 16;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--kv-channels 16 disagrees with head_dim 8");
    free(cfg);
    cfg = defaults();
    cfg->apply_layernorm_1p = true;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--apply-layernorm-1p is set");
    assert_false(cfg->swiglu);
    free(cfg);
    cfg = defaults();
    cfg->position_embedding_type = TR_POS_NONE;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--position-embedding-type is not rope");
    free(cfg);
    cfg = defaults();
    cfg->rotary_percent = 0.5;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "--rotary-percent is below 1");
    free(cfg);

    hf.tie_word_embeddings = true;
    cfg = defaults();
    cfg->untie_embeddings_and_output_weights = true;
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "tie_word_embeddings true");
    free(cfg);
    cfg = defaults();
    assert_ok(hf_config_apply(&hf, cfg, err, ERRLEN), err);
    assert_false(cfg->untie_embeddings_and_output_weights);
    free(cfg);
}

static void test_apply_mha_keeps_gqa_flag(void **state) {
    (void)state;
    char *text = edit(LLAMA3_8B_4X, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 32");
    hf_llama_config hf = parse_ok(text);
    free(text);
    char err[ERRLEN] = "";
    tr_config *cfg = defaults();
    assert_ok(hf_config_apply(&hf, cfg, err, ERRLEN), err);
    assert_false(cfg->group_query_attention);
    assert_int_equal(cfg->num_query_groups, 32);
    free(cfg);
    cfg = defaults();
    cfg->group_query_attention = true; /* with groups == heads this is plain MHA: no conflict */
    assert_ok(hf_config_apply(&hf, cfg, err, ERRLEN), err);
    assert_true(cfg->group_query_attention);
    free(cfg);
}

static void test_apply_rejects_rope_scaling(void **state) {
    (void)state;
    char *text = edit(LLAMA3_8B_4X, "\"rope_scaling\": null", "\"rope_scaling\": " LLAMA31_SCALING);
    hf_llama_config hf = parse_ok(text);
    free(text);
    char err[ERRLEN] = "";
    tr_config *cfg = defaults();
    assert_error(hf_config_apply(&hf, cfg, err, ERRLEN), err, "Llama 3.1 rope_scaling (rope_type llama3, factor 8");
    assert_int_equal(cfg->num_layers, 0);
    free(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_8b_4x),
        cmocka_unit_test(test_tiny_5x),
        cmocka_unit_test(test_tiny_gqa_file),
        cmocka_unit_test(test_rope_scaling_llama3_4x),
        cmocka_unit_test(test_rope_scaling_legacy_type_key),
        cmocka_unit_test(test_rope_parameters_llama3_5x),
        cmocka_unit_test(test_rope_theta_sources),
        cmocka_unit_test(test_optional_keys_default),
        cmocka_unit_test(test_missing_required_keys),
        cmocka_unit_test(test_wrong_json_types),
        cmocka_unit_test(test_non_positive_sizes),
        cmocka_unit_test(test_indivisible_heads),
        cmocka_unit_test(test_biases),
        cmocka_unit_test(test_hidden_act_and_model_type),
        cmocka_unit_test(test_rope_type_rejected),
        cmocka_unit_test(test_rope_llama3_incomplete),
        cmocka_unit_test(test_rope_scaling_and_parameters_disagree),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_apply_fills_megatron_config),
        cmocka_unit_test(test_apply_accepts_matching_flags),
        cmocka_unit_test(test_apply_conflicts_name_both),
        cmocka_unit_test(test_apply_mha_keeps_gqa_flag),
        cmocka_unit_test(test_apply_rejects_rope_scaling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
