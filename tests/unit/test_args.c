/* Megatron-LM command line -> tr_config: both seed documents' flag arrays, argparse's rules
 * (=value, repeats, lists, bools), every error message, the cross-flag checks of validate and
 * finalize, --help, and docs/flags.md against the flag table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "config/flags.h"
#include "twinrun/config.h"
#include "twinrun/fp8_scaling.h"

#define ERRLEN 1024

/* Splits a command line on spaces, as the seeds' unquoted ${ARRAY[@]} expansions do (so the
 * literal quotes of "--split '99,1,0'" survive into the value, as they do in bash). */
typedef struct argv_buf {
    char text[8192];
    char *v[512];
    int n;
} argv_buf;

static void split_words(argv_buf *b, const char *line) {
    assert_true(strlen(line) < sizeof b->text);
    strcpy(b->text, line);
    b->n = 0;
    for (char *tok = strtok(b->text, " \n\t"); tok; tok = strtok(NULL, " \n\t")) {
        assert_true(b->n < 511);
        b->v[b->n++] = tok;
    }
    b->v[b->n] = NULL;
}

static tr_config *cfg_new(void) {
    tr_config *c = malloc(sizeof *c);
    assert_non_null(c);
    tr_config_defaults(c);
    return c;
}

/* Parses a space-separated line into a fresh default config. */
static int parse_line(tr_config *c, const char *line, char *err) {
    argv_buf *b = malloc(sizeof *b);
    split_words(b, line);
    int rc = tr_config_parse(c, b->n, b->v, err, ERRLEN);
    free(b);
    return rc;
}

static int parse_argv(tr_config *c, int argc, const char **argv, char *err) {
    return tr_config_parse(c, argc, (char **)argv, err, ERRLEN);
}

/* ---- the seeds ------------------------------------------------------------------------------- */

/* Seed 001 (Llama3-8B Megatron tutorial), the arrays in the order the torchrun line expands them,
 * with the script's defaults: TP/CP/PP 1, micro 1, global 128, 32 layers, 4096 hidden, ffn 14336,
 * 32 heads, 8 groups, seq 8192, lr 0.00015, min 0.00001, cosine, wd 0.1, 1953125000 samples. */
#define SEED001_MODEL_ARGS                                                                                             \
    "--use-mcore-models --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "          \
    "--group-query-attention --num-query-groups 8 --kv-channels 128 --seq-length 8192 "                                \
    "--max-position-embeddings 8192 --position-embedding-type rope --rotary-base 1000000 --rotary-percent 1.0 "        \
    "--attention-dropout 0.0 --hidden-dropout 0.0 --swiglu --init-method-std 0.0134 --attention-backend fused "        \
    "--apply-layernorm-1p --untie-embeddings-and-output-weights --disable-bias-linear "
#define SEED001_TRAINING_ARGS(gbs, samples, decay, warmup)                                                             \
    "--micro-batch-size 1 --global-batch-size " gbs " --train-samples " samples " --lr-decay-samples " decay           \
    " --lr-warmup-samples " warmup " --lr 0.00015 --min-lr 0.00001 --lr-decay-style cosine --clip-grad 1.0 "           \
    "--weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 "                              \
    "--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1 "                \
    "--exit-duration-in-mins 235 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
#define SEED001_DTYPE_FP8                                                                                              \
    "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather "
#define SEED001_DATA_REAL                                                                                              \
    "--data-path /path/to/your/preprocessed_data --tokenizer-type HuggingFaceTokenizer "                               \
    "--tokenizer-model /path/to/your/tokenizer --data-cache-path /work/benchmark_cache_llama3_8b "                     \
    "--split '99,1,0' --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1 "                   \
    "--vocab-size 128256 "
#define SEED001_DATA_MOCK                                                                                              \
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 128256 "                                                  \
    "--data-cache-path /work/benchmark_cache_llama3_8b --tiktoken-pattern v2 --split '99,1,0' "                        \
    "--no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1 "
#define SEED001_EVAL_AND_LOGGING                                                                                       \
    "--log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 --log-throughput "                      \
    "--distributed-timeout-minutes 60 --save /work/checkpoints/llama3_8b --load /work/checkpoints/llama3_8b "          \
    "--tensorboard-dir /work/tensorboard_logs/llama3_8b --ckpt-format torch_dist "
#define SEED001_PROFILING "--profile --profile-step-start 4 --profile-step-end 6 "

static void test_seed_001_llama3_8b_real_data_fp8(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    /* DTYPE=fp8, ENABLE_PROFILING=1, TP 1 (so no --pipeline-model-parallel-size, PP_SIZE=1) */
    assert_ok(parse_line(c,
                         SEED001_MODEL_ARGS SEED001_TRAINING_ARGS("128", "1953125000", "1949218748", "3906252")
                             SEED001_DTYPE_FP8
                         "--tensor-model-parallel-size 1 --context-parallel-size 1 "
                         "--sequence-parallel " SEED001_DATA_REAL SEED001_EVAL_AND_LOGGING SEED001_PROFILING,
                         err),
              err);
    /* model */
    assert_true(c->use_mcore_models);
    assert_int_equal(c->num_layers, 32);
    assert_int_equal(c->hidden_size, 4096);
    assert_int_equal(c->ffn_hidden_size, 14336);
    assert_int_equal(c->num_attention_heads, 32);
    assert_true(c->group_query_attention);
    assert_int_equal(c->num_query_groups, 8);
    assert_int_equal(c->kv_channels, 128);
    assert_int_equal(c->seq_length, 8192);
    assert_int_equal(c->max_position_embeddings, 8192);
    assert_int_equal(c->position_embedding_type, TR_POS_ROPE);
    assert_true(c->rotary_base == 1000000.0);
    assert_true(c->rotary_percent == 1.0);
    assert_true(c->attention_dropout == 0.0 && c->hidden_dropout == 0.0);
    assert_true(c->swiglu && c->apply_layernorm_1p && c->untie_embeddings_and_output_weights);
    assert_true(c->disable_bias_linear);
    assert_true(c->init_method_std == 0.0134);
    assert_int_equal(c->normalization, TR_NORM_LAYERNORM); /* the tutorial never passes --normalization */
    /* training */
    assert_int_equal(c->micro_batch_size, 1);
    assert_int_equal(c->global_batch_size, 128);
    assert_true(c->train_samples == 1953125000);
    assert_true(c->train_iters == 0);
    assert_true(c->lr_decay_samples == 1949218748 && c->lr_warmup_samples == 3906252);
    assert_true(c->lr == 0.00015 && c->min_lr == 0.00001);
    assert_int_equal(c->lr_decay_style, TR_LR_COSINE);
    assert_true(c->clip_grad == 1.0 && c->weight_decay == 0.1);
    assert_true(c->adam_beta1 == 0.9 && c->adam_beta2 == 0.95 && c->adam_eps == 1e-8);
    assert_true(c->bf16 && c->grad_reduce_in_bf16 && c->cross_entropy_loss_fusion && c->calculate_per_token_loss);
    assert_true(c->exit_duration_in_mins == 235);
    assert_true(c->use_distributed_optimizer && c->overlap_grad_reduce && c->overlap_param_gather);
    /* parallel: Megatron turns sequence parallelism off at TP 1, and so does twinrun, aloud */
    assert_int_equal(c->tensor_model_parallel_size, 1);
    assert_false(c->sequence_parallel);
    assert_contains(c->warnings, "twinrun: warning: --sequence-parallel turned off");
    /* data: the seed's literal quotes reach the value, exactly as Megatron receives it */
    assert_int_equal(c->n_data_path, 1);
    assert_string_equal(c->data_path[0], "/path/to/your/preprocessed_data");
    assert_string_equal(c->split, "'99,1,0'");
    assert_string_equal(c->tokenizer_type, "HuggingFaceTokenizer");
    assert_string_equal(c->tokenizer_model, "/path/to/your/tokenizer");
    assert_string_equal(c->data_cache_path, "/work/benchmark_cache_llama3_8b");
    assert_false(c->mmap_bin_files);
    assert_int_equal(c->num_workers, 1);
    assert_int_equal(c->vocab_size, 128256);
    /* evaluation, logging, checkpoints */
    assert_int_equal(c->log_interval, 1);
    assert_int_equal(c->eval_iters, 32);
    assert_int_equal(c->eval_interval, 100);
    assert_int_equal(c->save_interval, 1000);
    assert_true(c->log_throughput);
    assert_true(c->distributed_timeout_minutes == 60);
    assert_string_equal(c->save, "/work/checkpoints/llama3_8b");
    assert_string_equal(c->load, "/work/checkpoints/llama3_8b");
    assert_string_equal(c->tensorboard_dir, "/work/tensorboard_logs/llama3_8b");
    assert_string_equal(c->ckpt_format, "torch_dist");
    /* the seed's DTYPE=fp8 recipe is stored (docs/fp8.md), the FP8 gather with it */
    assert_int_equal(c->fp8, TR_FP8_MODE_HYBRID);
    assert_int_equal(c->fp8_recipe, 1);
    assert_int_equal(c->fp8_amax_history_len, 1024);
    assert_int_equal(c->fp8_amax_compute_algo, TR_FP8_AMAX_MAX);
    assert_int_equal(c->fp8_margin, 0);
    assert_true(c->fp8_wgrad && c->fp8_param_gather);
    assert_true(strstr(c->warnings, "--fp8-format") == NULL);
    assert_true(strstr(c->warnings, "--fp8-param-gather") == NULL);
    /* --tensorboard-dir is implemented: no warning for it */
    assert_true(strstr(c->warnings, "--tensorboard-dir") == NULL);
    assert_int_equal(c->n_warnings, 1);
    /* one node of 8 GPUs */
    assert_ok(tr_config_validate(c, 8, err, ERRLEN), err);
    assert_ok(tr_config_finalize(c, 8, err, ERRLEN), err);
    assert_int_equal(c->kv_channels, 128);
    assert_int_equal(c->num_query_groups, 8);
    assert_int_equal(c->ffn_hidden_size, 14336);
    assert_int_equal(c->global_batch_size, 128);
    free(c);
}

static void test_seed_001_llama3_8b_mock_fast_test(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    /* FAST_TEST_MODE=1 with the mock data list, DTYPE=bf16 (no DTYPE_ARGS) */
    assert_ok(
        parse_line(
            c,
            SEED001_MODEL_ARGS SEED001_TRAINING_ARGS(
                "32", "1000", "800",
                "100") "--tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel " SEED001_DATA_MOCK
                SEED001_EVAL_AND_LOGGING,
            err),
        err);
    assert_true(c->mock_data);
    assert_int_equal(c->n_data_path, 0);
    assert_string_equal(c->tokenizer_type, "NullTokenizer");
    assert_int_equal(c->vocab_size, 128256);
    assert_true(c->train_samples == 1000 && c->lr_decay_samples == 800 && c->lr_warmup_samples == 100);
    assert_null(strstr(c->warnings, "--tiktoken-pattern")); /* read only with a TikTokenizer: no warning */
    assert_null(strstr(c->warnings, "--split"));            /* no --data-path, no legacy-split warning */
    assert_ok(tr_config_validate(c, 8, err, ERRLEN), err);
    free(c);
}

static void test_seed_001_multi_node_template(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    /* the two-node template: TP 2, CP 2, PP 2, micro 1, global 512 on 16 GPUs */
    assert_ok(parse_line(c,
                         SEED001_MODEL_ARGS SEED001_TRAINING_ARGS(
                             "512", "1953125000", "1949218748",
                             "3906252") "--tensor-model-parallel-size 2 --context-parallel-size 2 --sequence-parallel "
                                        "--pipeline-model-parallel-size 2 " SEED001_DATA_REAL SEED001_EVAL_AND_LOGGING,
                         err),
              err);
    assert_true(c->sequence_parallel); /* kept at TP 2 */
    assert_int_equal(c->pipeline_model_parallel_size, 2);
    assert_int_equal(c->n_warnings, 0);
    assert_ok(tr_config_validate(c, 16, err, ERRLEN), err);
    assert_error(tr_config_validate(c, 12, err, ERRLEN), err, "world 12 is not divisible by TP*PP*CP = 8");
    free(c);
}

/* The FP8 flags: recipes twinrun does not run are refused by name with the reason, FP8 needs a bf16 model,
 * the FP8 gather an FP8 run, and the numbers their ranges. */
static void test_fp8_flag_rules(void **state) {
    (void)state;
    char err[ERRLEN];
    tr_config *c = cfg_new();
    const char *base = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                       "--max-position-embeddings 32 --micro-batch-size 1 --train-iters 2 --mock-data --vocab-size 128 "
                       "--disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --lr 1e-3 ";
    assert_error(parse_line(c, "--fp8-recipe mxfp8", err), err,
                 "--fp8-recipe mxfp8: MXFP8 block scaling needs Blackwell");
    assert_error(parse_line(c, "--fp8-recipe tensorwise", err), err, "use --fp8-recipe delayed");
    assert_error(parse_line(c, "--fp8-recipe blockwise", err), err, "blockwise (1x128 / 128x128) scaling");
    assert_error(parse_line(c, "--fp8-format e5m2", err), err, "e4m3, hybrid");
    assert_error(parse_line(c, "--fp8-margin -1", err), err, "--fp8-margin");
    assert_error(parse_line(c, "--fp8-amax-history-len 0", err), err, "--fp8-amax-history-len");
    char line[512];
    snprintf(line, sizeof line, "%s--fp8-format hybrid", base);
    assert_ok(parse_line(c, line, err), err);
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "add --bf16");
    free(c);
    c = cfg_new();
    snprintf(line, sizeof line, "%s--bf16 --fp8-param-gather", base);
    assert_ok(parse_line(c, line, err), err);
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "add --fp8-format hybrid");
    free(c);
    c = cfg_new(); /* Megatron's rule: the FP8 gather is the distributed optimizer's */
    snprintf(line, sizeof line, "%s--bf16 --fp8-format hybrid --fp8-param-gather", base);
    assert_ok(parse_line(c, line, err), err);
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "add --use-distributed-optimizer");
    free(c);
    c = cfg_new();
    snprintf(line, sizeof line, "%s--bf16 --fp8-format e4m3 --fp8-recipe delayed --fp8-margin 2 --no-fp8-wgrad", base);
    assert_ok(parse_line(c, line, err), err);
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    assert_int_equal(c->fp8, TR_FP8_MODE_E4M3);
    assert_int_equal(c->fp8_margin, 2);
    assert_int_equal(c->fp8_amax_compute_algo, TR_FP8_AMAX_MOST_RECENT); /* Megatron's default */
    assert_false(c->fp8_wgrad);
    free(c);
}

/* Megatron's rules for the DDP overlap flags, each error naming the flag to add. */
static void test_overlap_flag_rules(void **state) {
    (void)state;
    char err[ERRLEN];
    tr_config *c = cfg_new();
    const char *base = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                       "--max-position-embeddings 32 --micro-batch-size 1 --train-iters 2 --mock-data --vocab-size 128 "
                       "--disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --lr 1e-3 ";
    char line[512];
    snprintf(line, sizeof line, "%s--overlap-param-gather --overlap-grad-reduce", base);
    assert_ok(parse_line(c, line, err), err);
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "add --use-distributed-optimizer");
    free(c);
    c = cfg_new();
    snprintf(line, sizeof line, "%s--overlap-param-gather --use-distributed-optimizer", base);
    assert_ok(parse_line(c, line, err), err);
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "add --overlap-grad-reduce");
    free(c);
    c = cfg_new();
    snprintf(line, sizeof line,
             "%s--overlap-param-gather --use-distributed-optimizer --overlap-grad-reduce "
             "--ddp-bucket-size 1000",
             base);
    assert_ok(parse_line(c, line, err), err);
    assert_ok(tr_config_finalize(c, 2, err, ERRLEN), err);
    assert_int_equal(c->ddp_bucket_size, 1000);
    assert_int_equal(c->n_warnings, 0);
    free(c);
    c = cfg_new(); /* a bucket size without buckets: said, not silently ignored */
    snprintf(line, sizeof line, "%s--ddp-bucket-size 1000", base);
    assert_ok(parse_line(c, line, err), err);
    assert_ok(tr_config_finalize(c, 2, err, ERRLEN), err);
    assert_non_null(strstr(c->warnings, "--ddp-bucket-size 1000 ignored"));
    free(c);
}

/* Seed 000 (Llama3-70B on 1024 MTT S5000 cards): MODEL_ARGS and PARALLEL_ARGS verbatim with
 * TP 8 PP 8 CP 1; the launch script's other flags (not shown in the guide) with realistic values. */
#define SEED000_MODEL_ARGS                                                                                             \
    "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "                             \
    "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "                   \
    "--position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights "           \
    "--bf16 "
#define SEED000_PARALLEL_ARGS                                                                                          \
    "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --context-parallel-size 1 "                       \
    "--sequence-parallel --use-distributed-optimizer "
#define SEED000_REST                                                                                                   \
    "--micro-batch-size 1 --global-batch-size 1024 --train-iters 5000 --lr 1.5e-4 --min-lr 1.5e-5 "                    \
    "--lr-decay-style cosine --lr-warmup-iters 100 --weight-decay 0.1 --adam-beta2 0.95 --clip-grad 1.0 "              \
    "--disable-bias-linear --rotary-base 500000 --norm-epsilon 1e-5 --vocab-size 128256 "                              \
    "--data-path /data/shared/llama3-70b/dataset/dedup-md5-pile-pile-cc_text_document --split 99,1,0 "                 \
    "--tokenizer-type HuggingFaceTokenizer --tokenizer-model /data/shared/llama3-70b/tokenizer "                       \
    "--save /data/shared/llama3-70b/checkpoints --load /data/shared/llama3-70b/checkpoints "                           \
    "--save-interval 500 --log-interval 1 --eval-interval 1000 --eval-iters 10"

static void test_seed_000_llama3_70b_1024_cards(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c, SEED000_MODEL_ARGS SEED000_PARALLEL_ARGS SEED000_REST, err), err);
    assert_int_equal(c->num_layers, 80);
    assert_int_equal(c->hidden_size, 8192);
    assert_int_equal(c->ffn_hidden_size, 28672);
    assert_int_equal(c->num_attention_heads, 64);
    assert_true(c->group_query_attention);
    assert_int_equal(c->num_query_groups, 8);
    assert_int_equal(c->normalization, TR_NORM_RMSNORM);
    assert_int_equal(c->position_embedding_type, TR_POS_ROPE);
    assert_true(c->swiglu && c->untie_embeddings_and_output_weights && c->bf16);
    assert_int_equal(c->tensor_model_parallel_size, 8);
    assert_int_equal(c->pipeline_model_parallel_size, 8);
    assert_int_equal(c->context_parallel_size, 1);
    assert_true(c->sequence_parallel && c->use_distributed_optimizer);
    assert_true(c->train_iters == 5000 && c->lr_warmup_iters == 100);
    assert_int_equal(c->kv_channels, 0); /* not given: finalize derives it */
    assert_int_equal(c->n_warnings, 0);
    assert_ok(tr_config_validate(c, 1024, err, ERRLEN), err); /* TP8 x PP8 x DP16 */
    assert_error(tr_config_validate(c, 1000, err, ERRLEN), err, "world 1000 is not divisible by TP*PP*CP = 64");
    assert_ok(tr_config_finalize(c, 1024, err, ERRLEN), err);
    assert_int_equal(c->kv_channels, 128);
    assert_int_equal(c->num_query_groups, 8);
    assert_int_equal(c->global_batch_size, 1024);
    free(c);
}

/* ---- argparse's rules -------------------------------------------------------------------------- */

static void test_defaults_are_megatrons(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    assert_true(c->seed == 1234);
    assert_int_equal(c->make_vocab_size_divisible_by, 128);
    assert_true(c->norm_epsilon == 1e-5 && c->adam_eps == 1e-8 && c->init_method_std == 0.02);
    assert_true(c->rotary_percent == 1.0 && c->rotary_base == 10000);
    assert_true(c->adam_beta1 == 0.9 && c->adam_beta2 == 0.999 && c->weight_decay == 0.01 && c->clip_grad == 1.0);
    assert_true(c->attention_dropout == 0.1 && c->hidden_dropout == 0.1);
    assert_int_equal(c->log_interval, 100);
    assert_int_equal(c->eval_interval, 1000);
    assert_int_equal(c->eval_iters, 100);
    assert_true(c->distributed_timeout_minutes == 10);
    assert_true(c->check_for_nan_in_loss_and_grad);
    assert_true(c->mmap_bin_files);
    assert_int_equal(c->num_workers, 2);
    assert_string_equal(c->split, "969, 30, 1");
    assert_string_equal(c->ckpt_format, "torch_dist");
    assert_int_equal(c->normalization, TR_NORM_LAYERNORM);
    assert_int_equal(c->position_embedding_type, TR_POS_LEARNED);
    assert_int_equal(c->lr_decay_style, TR_LR_LINEAR);
    assert_true(c->lr_warmup_fraction < 0);
    assert_int_equal(c->tensor_model_parallel_size, 1);
    assert_int_equal(c->n_warnings, 0);
    assert_string_equal(c->warnings, "");
    free(c);
}

static void test_equals_form(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c,
                         "--num-layers=4 --lr=1e-4 --lr-decay-style=cosine --data-path=corpus --seed=7 "
                         "--save=/tmp/ck --split=90,5,5",
                         err),
              err);
    assert_int_equal(c->num_layers, 4);
    assert_true(c->lr == 1e-4);
    assert_int_equal(c->lr_decay_style, TR_LR_COSINE);
    assert_int_equal(c->n_data_path, 1);
    assert_string_equal(c->data_path[0], "corpus");
    assert_true(c->seed == 7);
    assert_string_equal(c->save, "/tmp/ck");
    assert_string_equal(c->split, "90,5,5");
    free(c);
}

static void test_bool_flags_take_no_value(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--bf16=true", err), err, "--bf16 takes no value (got 'true')");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--no-check-for-nan-in-loss-and-grad --no-mmap-bin-files --swiglu", err), err);
    assert_false(c->check_for_nan_in_loss_and_grad);
    assert_false(c->mmap_bin_files);
    assert_true(c->swiglu);
    /* a bool followed by what looks like its value: the value is a stray argument */
    tr_config_defaults(c);
    assert_error(parse_line(c, "--swiglu true", err), err, "unexpected argument 'true'");
    free(c);
}

static void test_repeated_flag_keeps_last_value(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c,
                         "--num-layers 2 --lr-decay-style linear --num-layers 4 --lr-decay-style cosine "
                         "--data-path a b --data-path c --save x --save y",
                         err),
              err);
    assert_int_equal(c->num_layers, 4);
    assert_int_equal(c->lr_decay_style, TR_LR_COSINE);
    assert_int_equal(c->n_data_path, 1);
    assert_string_equal(c->data_path[0], "c");
    assert_string_equal(c->save, "y");
    /* a repeated warned flag warns once */
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--log-params-norm --log-params-norm", err), err);
    assert_int_equal(c->n_warnings, 1);
    assert_ok(parse_line(c, "--fp8-format hybrid --fp8-format e4m3", err), err);
    assert_int_equal(c->fp8, TR_FP8_MODE_E4M3);
    free(c);
}

static void test_unknown_flag_names_the_closest(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--num-layer 4", err), err, "unknown flag --num-layer; did you mean --num-layers?");
    assert_error(parse_line(c, "--hidden_size 4", err), err, "unknown flag --hidden_size; did you mean --hidden-size?");
    assert_error(parse_line(c, "--num-layer=4", err), err, "unknown flag --num-layer; did you mean --num-layers?");
    assert_error(parse_line(c, "--tensor-parallel-size 8", err), err, "did you mean --tensor-model-parallel-size?");
    assert_error(parse_line(c, "--check-for-nan-in-loss-and-grad", err), err,
                 "did you mean --no-check-for-nan-in-loss-and-grad?");
    assert_error(parse_line(c, "--micro-batch 1", err), err, "did you mean --micro-batch-size?");
    assert_error(parse_line(c, "--zzzzzzzzzzzzzzzzzzzz", err), err, "unknown flag --zzzzzzzzzzzzzzzzzzzz; see --help");
    assert_null(strstr(err, "did you mean"));
    assert_error(parse_line(c, "-x", err), err, "unknown flag -x");
    assert_error(parse_line(c, "32", err), err, "unexpected argument '32'");
    assert_error(parse_line(c, "--", err), err, "unexpected '--'");
    free(c);
}

static void test_missing_value(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--num-layers", err), err, "--num-layers needs a value (N)");
    assert_error(parse_line(c, "--num-layers --hidden-size 4", err), err,
                 "--num-layers needs a value (N) but is followed by --hidden-size");
    assert_error(parse_line(c, "--save -h", err), err, "--save needs a value");
    assert_error(parse_line(c, "--data-path --mock-data", err), err, "--data-path needs at least one value");
    assert_error(parse_line(c, "--data-path", err), err, "--data-path needs at least one value");
    /* a negative number is a value, so the range check speaks, not the missing-value one */
    assert_error(parse_line(c, "--lr -1", err), err, "invalid value for --lr: '-1' (must be at least 0)");
    assert_error(parse_line(c, "--min-lr -1e-5", err), err, "invalid value for --min-lr: '-1e-5'");
    /* an empty value after '=' is a value, and not a number */
    assert_error(parse_line(c, "--num-layers=", err), err, "invalid value for --num-layers: '' is not an integer");
    free(c);
}

static void test_bad_numbers(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--num-layers abc", err), err,
                 "invalid value for --num-layers: 'abc' is not an integer");
    assert_error(parse_line(c, "--num-layers 12x", err), err, "'12x' is not an integer");
    assert_error(parse_line(c, "--num-layers 1.5", err), err, "'1.5' is not an integer");
    assert_error(parse_line(c, "--num-layers 1e3", err), err, "'1e3' is not an integer");
    assert_error(parse_line(c, "--num-layers 99999999999", err), err, "'99999999999' is out of range");
    assert_error(parse_line(c, "--train-iters 99999999999999999999999", err), err, "is out of range");
    assert_error(parse_line(c, "--seed 99999999999999999999999", err), err, "is too large");
    assert_error(parse_line(c, "--seed -5", err), err, "invalid value for --seed: '-5' (must be at least 0)");
    assert_error(parse_line(c, "--lr 1e-4x", err), err, "invalid value for --lr: '1e-4x' is not a number");
    assert_error(parse_line(c, "--lr nan", err), err, "'nan' is not a number");
    assert_error(parse_line(c, "--lr inf", err), err, "'inf' is not a number");
    assert_error(parse_line(c, "--lr 0x1p3", err), err, "'0x1p3' is not a number");
    assert_error(parse_line(c, "--lr 1e999", err), err, "'1e999' is out of the range of a double");
    assert_error(parse_line(c, "--hidden-size 0", err), err,
                 "invalid value for --hidden-size: '0' (must be at least 1)");
    assert_error(parse_line(c, "--rotary-percent 1.5", err), err,
                 "invalid value for --rotary-percent: '1.5' (must be in (0, 1])");
    assert_error(parse_line(c, "--rotary-percent 0", err), err, "(must be in (0, 1])");
    assert_error(parse_line(c, "--adam-beta1 1.0", err), err,
                 "invalid value for --adam-beta1: '1.0' (must be in [0, 1))");
    assert_error(parse_line(c, "--attention-dropout 1", err), err, "(must be in [0, 1))");
    assert_error(parse_line(c, "--adam-eps 0", err), err, "(must be greater than 0)");
    assert_error(parse_line(c, "--timing-log-level 3", err), err, "(must be in [0, 2])");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--num-layers +8 --lr 3E-4 --rotary-percent 0.5 --train-iters 9000000000", err), err);
    assert_int_equal(c->num_layers, 8);
    assert_true(c->lr == 3e-4 && c->rotary_percent == 0.5 && c->train_iters == 9000000000LL);
    free(c);
}

static void test_bad_enum_lists_choices(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--lr-decay-style cosin", err), err,
                 "invalid value for --lr-decay-style: 'cosin' (choose from constant, linear, cosine, "
                 "inverse-square-root; refused: WSD)");
    assert_error(parse_line(c, "--lr-decay-style WSD", err), err, "--lr-decay-style WSD: not supported yet");
    assert_error(parse_line(c, "--normalization rmsnorm", err), err, "(choose from LayerNorm, RMSNorm)");
    assert_error(parse_line(c, "--position-embedding-type yarn", err), err,
                 "--position-embedding-type yarn: YaRN is not implemented");
    assert_error(parse_line(c, "--optimizer sgd", err), err, "--optimizer sgd: twinrun implements AdamW only");
    assert_error(parse_line(c, "--attention-backend cudnn", err), err,
                 "(choose from flash, fused, unfused, local, auto)");
    assert_error(parse_line(c, "--empty-unused-memory-level 3", err), err, "(choose from 0, 1, 2)");
    assert_error(parse_line(c, "--dataloader-type cyclic", err), err, "only Megatron's default 'single'");
    assert_error(parse_line(c, "--tokenizer-type Llama3Tokenizer", err), err, "HuggingFaceTokenizer");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--normalization RMSNorm --position-embedding-type rope --optimizer adam", err), err);
    assert_int_equal(c->normalization, TR_NORM_RMSNORM);
    assert_int_equal(c->position_embedding_type, TR_POS_ROPE);
    /* Megatron's other position embeddings are refused at parse time, not accepted and refused later */
    assert_error(parse_line(c, "--position-embedding-type none", err), err,
                 "--position-embedding-type none: twinrun's Llama has rotary embeddings only");
    assert_error(parse_line(c, "--position-embedding-type learned_absolute", err), err,
                 "use --position-embedding-type rope");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--use-rotary-position-embeddings", err), err);
    assert_int_equal(c->position_embedding_type, TR_POS_ROPE);
    free(c);
}

static void test_rejected_flags_give_the_fix(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(
        parse_line(c, "--bf16 --fp16", err), err,
        "--fp16: a Megatron-LM flag that twinrun does not support (twinrun trains in bf16 or fp32; use --bf16)");
    assert_error(parse_line(c, "--rampup-batch-size 16 16 1000", err), err, "use a fixed --global-batch-size");
    assert_error(parse_line(c, "--num-layers-per-virtual-pipeline-stage 5", err), err, "1F1B");
    assert_error(parse_line(c, "--warmup 10", err), err, "use --lr-warmup-fraction");
    assert_error(parse_line(c, "--batch-size 4", err), err, "use --micro-batch-size");
    assert_error(parse_line(c, "--rotary-interleaved", err), err, "non-interleaved");
    free(c);
}

static void test_accepted_flags_are_quiet_and_warned_flags_say_so(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c,
                         "--use-mcore-models --manual-gc --attention-backend fused --transformer-impl local "
                         "--use-flash-attn --no-masked-softmax-fusion --no-bias-swiglu-fusion --tiktoken-pattern v2 "
                         "--empty-unused-memory-level 1 --no-create-attention-mask-in-dataloader --profile "
                         "--profile-step-start 4 --profile-step-end 6 --distributed-backend nccl --optimizer adam",
                         err),
              err);
    assert_int_equal(c->n_warnings, 0);
    assert_string_equal(c->warnings, "");
    assert_true(c->use_mcore_models);
    assert_ok(parse_line(c, "--log-params-norm --wandb-project p --use-rope-scaling", err), err);
    assert_int_equal(c->n_warnings, 3);
    assert_contains(c->warnings, "twinrun: warning: --log-params-norm ignored: ");
    assert_contains(c->warnings, "twinrun: warning: --wandb-project ignored: ");
    assert_contains(c->warnings, "twinrun: warning: --use-rope-scaling ignored: ");
    /* each warning is one line */
    int lines = 0;
    for (const char *p = c->warnings; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 3);
    free(c);
}

static void test_warnings_do_not_overflow(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char line[600];
    for (int i = 0; i < 200; i++) {
        memset(line, 'a' + i % 26, sizeof line - 1);
        line[sizeof line - 1] = 0;
        snprintf(line, 16, "w%03d", i); /* distinct lines */
        line[strlen(line)] = 'x';
        tr_config_warn(c, "%s", line);
    }
    assert_true(strlen(c->warnings) < sizeof c->warnings);
    assert_contains(c->warnings, "(more warnings dropped)\n");
    assert_true(c->n_warnings > 0 && c->n_warnings < 200);
    free(c);
}

static void test_silent_megatron_changes_are_warned(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c, "--data-path corpus --num-query-groups 8", err), err);
    assert_contains(c->warnings, "--data-path without --split: using Megatron's legacy default --split '969, 30, 1'");
    assert_contains(c->warnings, "--num-query-groups 8 ignored without --group-query-attention");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--group-query-attention", err), err);
    assert_contains(c->warnings, "--group-query-attention without --num-query-groups: Megatron's default is 1 group");
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--group-query-attention --hf-load /models/llama", err), err); /* HF gives the groups */
    assert_int_equal(c->n_warnings, 0);
    free(c);
}

static void test_data_path_forms(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(
        parse_line(c, "--data-path 0.3 /d/a_text_document 0.7 /d/b_text_document --split 99,1,0 --mock-data", err),
        err);
    assert_int_equal(c->n_data_path, 4);
    assert_string_equal(c->data_path[0], "0.3");
    assert_string_equal(c->data_path[3], "/d/b_text_document");
    assert_true(c->mock_data); /* the list stopped at the next flag */
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--data-path a b c", err), err);
    assert_int_equal(c->n_data_path, 3);
    assert_error(parse_line(c, "--data-path 0.3 a b", err), err, "'0.3' looks like a weight");
    assert_error(parse_line(c, "--data-path 0.3 a b c", err), err, "mixes weights and prefixes");
    assert_error(parse_line(c, "--data-path 0 a 0 b", err), err, "the weights add up to 0");
    /* more prefixes than fit */
    char *line = malloc(TR_MAX_PATHS * 8 + 64);
    strcpy(line, "--data-path");
    for (int i = 0; i <= TR_MAX_PATHS; i++) sprintf(line + strlen(line), " p%d", i);
    assert_error(parse_line(c, line, err), err, "--data-path takes at most 64 values");
    free(line);
    free(c);
}

static void test_split_values(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c, "--split '99,1,0'", err), err);
    assert_string_equal(c->split, "'99,1,0'");
    assert_ok(parse_line(c, "--split 100", err), err);
    assert_error(parse_line(c, "--split 1.2.3", err), err, "'1.2.3' is not a number");
    assert_error(parse_line(c, "--split a,b", err), err, "has no positive proportion");
    assert_error(parse_line(c, "--split 0,0,0", err), err, "has no positive proportion");
    assert_error(parse_line(c, "--split 1,1,1,1", err), err, "more than three parts");
    free(c);
}

static void test_string_too_long(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    char *v = malloc(TR_PATH_LEN + 32);
    memset(v, 'p', TR_PATH_LEN + 10);
    v[TR_PATH_LEN + 10] = 0;
    const char *argv[] = {"--save", v};
    assert_error(parse_argv(c, 2, argv, err), err, "value of --save is 1034 bytes long; at most 1023 fit");
    const char *argv2[] = {"--data-path", v};
    assert_error(parse_argv(c, 2, argv2, err), err, "--data-path: value is 1034 bytes long");
    free(v);
    free(c);
}

static void test_odd_vectors(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(tr_config_parse(c, 0, NULL, err, ERRLEN), err);
    const char *argv[] = {"--num-layers", "4", NULL, "--bogus"};
    assert_ok(parse_argv(c, 4, argv, err), err); /* a NULL entry ends the vector, as in main's argv */
    assert_int_equal(c->num_layers, 4);
    const char *argv2[] = {"--num-layers", NULL};
    assert_error(parse_argv(c, 2, argv2, err), err, "needs a value");
    assert_error(tr_config_parse(c, 3, NULL, err, ERRLEN), err, "bad argument vector");
    assert_error(tr_config_parse(NULL, 0, NULL, err, ERRLEN), err, "no config");
    free(c);
}

/* ---- --help and docs/flags.md ------------------------------------------------------------------ */

static void test_help(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    /* --help and -h return 1 (the caller exits 0); stdout goes to a scratch file meanwhile */
    fflush(stdout);
    FILE *saved = stdout;
    FILE *sink = tmpfile();
    assert_non_null(sink);
    stdout = sink;
    int rc1 = parse_line(c, "--num-layers 4 --help", err);
    int rc2 = parse_line(c, "-h", err);
    stdout = saved;
    long written = ftell(sink);
    fclose(sink);
    assert_int_equal(rc1, 1);
    assert_int_equal(rc2, 1);
    assert_true(written > 1000);

    char *help = fx_capture_f(tr_config_print_help);
    size_t n;
    const tr_flag *t = tr_flags(&n);
    for (size_t i = 0; i < n; i++) {
        char needle[128];
        snprintf(needle, sizeof needle, "  %s ", t[i].name);
        assert_contains(help, needle);
    }
    for (int s = 0; s < TR_SEC_COUNT; s++) {
        char title[128];
        snprintf(title, sizeof title, "\n%s:\n", tr_flag_section_title((tr_flag_section)s));
        assert_contains(help, title);
    }
    assert_contains(help, "--seed N");
    assert_contains(help, "[default: 1234]");
    assert_contains(help, "accepted, no effect: no Python garbage collector");
    assert_contains(help, "accepted, ignored with a warning: Llama 3.1 RoPE frequency scaling is not implemented");
    assert_contains(help, "rejected: twinrun trains in bf16 or fp32; use --bf16");
    assert_contains(help, "(one of: constant, linear, cosine, inverse-square-root; refused: WSD)");
    free(help);
    free(c);
}

static void test_docs_flags_md_matches_table(void **state) {
    (void)state;
    const char *data = getenv("TWINRUN_TEST_DATA") ? getenv("TWINRUN_TEST_DATA") : TWINRUN_TEST_DATA;
    char path[2048];
    snprintf(path, sizeof path, "%s/../../docs/flags.md", data);
    char *want = fx_capture_f(tr_config_print_flags_md);
    if (getenv("TWINRUN_REGEN_DOCS")) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(want, f);
        fclose(f);
    }
    char *have = fx_read_file(path, NULL);
    if (!have) fail_msg("%s is missing; regenerate: TWINRUN_REGEN_DOCS=1 ctest -R test_args", path);

    size_t n;
    const tr_flag *t = tr_flags(&n);
    for (size_t i = 0; i < n; i++) {
        char spaced[128], bare[128]; /* "--lr" must not be found inside "--lr-decay-style" */
        snprintf(spaced, sizeof spaced, "| `%s ", t[i].name);
        snprintf(bare, sizeof bare, "| `%s`", t[i].name);
        if (!strstr(have, spaced) && !strstr(have, bare))
            fail_msg("docs/flags.md lacks %s; regenerate: TWINRUN_REGEN_DOCS=1 ctest -R test_args", t[i].name);
        if (t[i].status != TR_ST_IMPLEMENTED && !strstr(have, t[i].reason))
            fail_msg("docs/flags.md lacks the reason for %s: %s", t[i].name, t[i].reason);
    }
    if (strcmp(have, want) != 0)
        fail_msg("docs/flags.md differs from the flag table; regenerate: TWINRUN_REGEN_DOCS=1 ctest -R test_args");
    free(have);
    free(want);
}

static void test_table_is_consistent(void **state) {
    (void)state;
    size_t n;
    const tr_flag *t = tr_flags(&n);
    assert_true(n > 100 && n <= TR_FLAGS_MAX);
    for (size_t i = 0; i < n; i++) {
        const tr_flag *f = &t[i];
        if (strncmp(f->name, "--", 2) != 0) fail_msg("%s does not start with --", f->name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t[j].name, f->name)) fail_msg("%s appears twice", f->name);
        assert_ptr_equal(tr_flag_find(f->name, strlen(f->name)), f);
        if (!f->help || !f->help[0] || !f->def) fail_msg("%s lacks help or default", f->name);
        if (f->status == TR_ST_IMPLEMENTED && !f->has_field && !f->apply)
            fail_msg("%s is 'implemented' but stores nothing", f->name);
        if (f->status != TR_ST_IMPLEMENTED && (!f->reason || !f->reason[0]))
            fail_msg("%s is not implemented and says not why", f->name);
        const bool is_bool = f->kind == TR_K_BOOL || f->kind == TR_K_BOOL_OFF;
        if (is_bool == (f->metavar != NULL)) fail_msg("%s: a metavar exactly when it takes a value", f->name);
        if ((f->kind == TR_K_ENUM) != (f->choices != NULL)) fail_msg("%s: choices exactly for enums", f->name);
        if (f->has_field && is_bool) assert_int_equal(f->size, sizeof(bool));
        if (f->has_field && f->kind == TR_K_INT) assert_int_equal(f->size, sizeof(int));
        if (f->has_field && (f->kind == TR_K_INT64 || f->kind == TR_K_U64)) assert_int_equal(f->size, 8);
        if (f->has_field && f->kind == TR_K_DOUBLE) assert_int_equal(f->size, sizeof(double));
        if (f->has_field && f->kind == TR_K_ENUM && !f->enum_as_string) assert_int_equal(f->size, sizeof(int));
        if (f->has_field && f->kind == TR_K_LIST) assert_int_equal(f->offset, offsetof(tr_config, data_path));
    }
    /* every flag of both seeds' arrays is known */
    static const char *const seeds[] = {
        "--use-mcore-models",
        "--attention-backend",
        "--cross-entropy-loss-fusion",
        "--manual-gc",
        "--empty-unused-memory-level",
        "--exit-duration-in-mins",
        "--overlap-grad-reduce",
        "--overlap-param-gather",
        "--fp8-format",
        "--fp8-amax-history-len",
        "--fp8-amax-compute-algo",
        "--fp8-param-gather",
        "--tokenizer-type",
        "--tokenizer-model",
        "--tiktoken-pattern",
        "--split",
        "--no-create-attention-mask-in-dataloader",
        "--no-mmap-bin-files",
        "--num-workers",
        "--data-cache-path",
        "--mock-data",
        "--data-path",
        "--log-throughput",
        "--distributed-timeout-minutes",
        "--save",
        "--load",
        "--tensorboard-dir",
        "--ckpt-format",
        "--profile",
        "--profile-step-start",
        "--profile-step-end",
        "--kv-channels",
        "--train-samples",
        "--lr-decay-samples",
        "--lr-warmup-samples",
        "--bf16",
        "--grad-reduce-in-bf16",
        "--calculate-per-token-loss",
        "--eval-iters",
        "--eval-interval",
        "--save-interval",
        "--log-interval",
        "--context-parallel-size",
        "--sequence-parallel",
        "--use-distributed-optimizer",
        "--group-query-attention",
        "--num-query-groups",
        "--recompute-activations",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        if (!tr_flag_find(seeds[i], strlen(seeds[i]))) fail_msg("%s is missing from the table", seeds[i]);
}

/* ---- validate and finalize ---------------------------------------------------------------------- */

/* A small valid run: 2 layers, h 64, 8 heads, GQA 2 groups, seq 32, on `world` ranks. */
static tr_config *base(void) {
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_ok(parse_line(c,
                         "--num-layers 4 --hidden-size 64 --num-attention-heads 8 --group-query-attention "
                         "--num-query-groups 2 --seq-length 32 --max-position-embeddings 64 "
                         "--position-embedding-type rope --normalization RMSNorm --swiglu --vocab-size 512 "
                         "--micro-batch-size 2 --global-batch-size 16 --train-iters 10 --lr 1e-3 --mock-data",
                         err),
              err);
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    return c;
}

static void test_validate_model_shape(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->hidden_size = 100;
    c->num_attention_heads = 3;
    c->group_query_attention = false;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--hidden-size 100 is not divisible by --num-attention-heads 3; change one, or give the head "
                 "dimension with --kv-channels");
    c->kv_channels = 32;
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    free(c);

    c = base();
    c->num_query_groups = 16;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--num-query-groups 16 is more than --num-attention-heads 8");
    c->num_query_groups = 3;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--num-query-groups 3 does not divide --num-attention-heads 8");
    c->num_query_groups = 0; /* --group-query-attention alone: Megatron's default of one group */
    assert_ok(tr_config_finalize(c, 1, err, ERRLEN), err);
    assert_int_equal(c->num_query_groups, 1);
    free(c);

    c = base();
    c->group_query_attention = false; /* plain multi-head attention: as many groups as heads */
    c->num_query_groups = 0;
    assert_ok(tr_config_finalize(c, 1, err, ERRLEN), err);
    assert_int_equal(c->num_query_groups, 8);
    assert_int_equal(c->kv_channels, 8);
    free(c);

    c = base();
    c->seq_length = 128;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--seq-length 128 exceeds --max-position-embeddings 64");
    free(c);

    c = base();
    c->rotary_percent = 0.3; /* 8 x 0.3 = 2.4 -> 2 channels: fine */
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    c->rotary_percent = 0.2; /* 1.6 -> 1: odd */
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "= 1 channels; that must be a positive even number");
    c->rotary_percent = 1.5;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--rotary-percent 1.5 must be in (0, 1]");
    free(c);

    c = base();
    c->vocab_size = 0;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--vocab-size is required (Llama 3: 128256) unless --hf-load");
    c->num_layers = 0;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--num-layers is required (or --hf-load DIR to take it from a Hugging Face config.json)");
    strcpy(c->hf_load, "/models/llama");
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--num-layers is required");
    assert_null(strstr(err, "(or --hf-load"));
    free(c);
}

static void test_validate_ffn_default(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->hidden_size = 4096;
    c->num_attention_heads = 32;
    c->num_query_groups = 8;
    c->max_position_embeddings = 8192;
    assert_ok(tr_config_finalize(c, 1, err, ERRLEN), err);
    assert_int_equal(c->ffn_hidden_size, 10880); /* int(4*4096*2/3 / 64) * 64 */
    c->ffn_hidden_size = 0;
    c->swiglu = false;
    assert_ok(tr_config_finalize(c, 1, err, ERRLEN), err);
    assert_int_equal(c->ffn_hidden_size, 16384); /* 4h */
    c->ffn_hidden_size = 0;
    c->swiglu = true;
    c->hidden_size = 8192;
    c->num_attention_heads = 64;
    assert_ok(tr_config_finalize(c, 1, err, ERRLEN), err);
    assert_int_equal(c->ffn_hidden_size, 21824); /* the 70B passes 28672 explicitly */
    free(c);
}

static void test_validate_parallel_layout(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->global_batch_size = 0;
    c->tensor_model_parallel_size = 2;
    c->pipeline_model_parallel_size = 2;
    assert_ok(tr_config_validate(c, 8, err, ERRLEN), err);
    assert_error(tr_config_validate(c, 6, err, ERRLEN), err,
                 "world 6 is not divisible by TP*PP*CP = 4 (TP 2 x PP 2 x CP 1)");
    assert_error(tr_config_validate(c, 0, err, ERRLEN), err, "need at least one rank");
    c->pipeline_model_parallel_size = 3;
    assert_error(tr_config_validate(c, 6, err, ERRLEN), err,
                 "--num-layers 4 is not divisible by --pipeline-model-parallel-size 3");
    c->pipeline_model_parallel_size = 1;
    c->tensor_model_parallel_size = 16;
    assert_error(tr_config_validate(c, 16, err, ERRLEN), err,
                 "--num-attention-heads 8 is not divisible by "
                 "--tensor-model-parallel-size 16");
    c->tensor_model_parallel_size = 4; /* 2 groups over 4 TP ranks */
    assert_error(tr_config_validate(c, 4, err, ERRLEN), err,
                 "2 query groups (K/V heads) are not divisible by "
                 "--tensor-model-parallel-size 4");
    c->tensor_model_parallel_size = 1;
    c->context_parallel_size = 3;
    assert_error(tr_config_validate(c, 3, err, ERRLEN), err,
                 "--seq-length 32 must be a multiple of 2 x "
                 "--context-parallel-size = 6");
    /* factors whose product overflows 64 bits still get a clean answer */
    c->context_parallel_size = 2147483647;
    c->tensor_model_parallel_size = 2147483647;
    c->pipeline_model_parallel_size = 2147483647;
    assert_error(tr_config_validate(c, 1024, err, ERRLEN), err, "world 1024 is not divisible by TP*PP*CP");
    free(c);

    /* sequence parallelism at TP 1: off with a warning, as in Megatron; at TP 2 it stays */
    c = cfg_new();
    assert_ok(parse_line(c, "--sequence-parallel", err), err);
    assert_false(c->sequence_parallel);
    assert_int_equal(c->n_warnings, 1);
    tr_config_defaults(c);
    assert_ok(parse_line(c, "--sequence-parallel --tensor-model-parallel-size 2", err), err);
    assert_true(c->sequence_parallel);
    assert_int_equal(c->n_warnings, 0);
    free(c);
}

static void test_validate_batch(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->micro_batch_size = 1;
    c->global_batch_size = 100;
    c->tensor_model_parallel_size = 8;
    c->pipeline_model_parallel_size = 8;
    c->num_layers = 8;
    c->num_query_groups = 8;
    c->kv_channels = 8;
    assert_error(tr_config_validate(c, 1024, err, ERRLEN), err,
                 "--global-batch-size 100 is not divisible by --micro-batch-size 1 x DP 16 = 16; make it a multiple "
                 "of 16");
    c->global_batch_size = 0; /* default: micro x DP */
    assert_ok(tr_config_finalize(c, 1024, err, ERRLEN), err);
    assert_int_equal(c->global_batch_size, 16);
    c->micro_batch_size = 0;
    assert_error(tr_config_validate(c, 1024, err, ERRLEN), err, "--micro-batch-size is required");
    free(c);
}

static void test_validate_schedule(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->train_samples = 100;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "give either --train-iters or --train-samples, not both");
    c->train_iters = 0;
    c->train_samples = 0;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "give --train-iters N or --train-samples N");
    free(c);

    c = base(); /* iteration-based with sample-based LR flags: Megatron's "expected iteration-based" */
    c->lr_decay_samples = 50;
    assert_error(
        tr_config_validate(c, 1, err, ERRLEN), err,
        "--lr-decay-samples is for sample-based runs (--train-samples); with --train-iters use --lr-decay-iters");
    c->lr_decay_samples = 0;
    c->lr_warmup_samples = 5;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--lr-warmup-samples is for sample-based runs");
    c->lr_warmup_samples = 0;
    c->lr_warmup_iters = 2;
    c->lr_warmup_fraction = 0.1;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "give either --lr-warmup-fraction or --lr-warmup-iters");
    c->lr_warmup_fraction = -1;
    c->lr_warmup_iters = 10;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "lr warmup (160 samples) must end before the decay span "
                 "(160 samples)");
    c->lr_warmup_iters = 9;
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    free(c);

    c = base(); /* sample-based with iteration-based LR flags */
    c->train_iters = 0;
    c->train_samples = 1000;
    c->lr_decay_iters = 5;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err,
                 "--lr-decay-iters is for iteration-based runs (--train-iters); with --train-samples use "
                 "--lr-decay-samples");
    c->lr_decay_iters = 0;
    c->lr_warmup_iters = 5;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--lr-warmup-iters is for iteration-based runs");
    c->lr_warmup_iters = 0;
    c->lr_warmup_samples = 10;
    c->lr_warmup_fraction = 0.01;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "give either --lr-warmup-fraction or --lr-warmup-samples");
    c->lr_warmup_samples = 0;
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    free(c);

    c = base();
    c->min_lr = 1e-2;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--min-lr 0.01 is above --lr 0.001");
    c->min_lr = 0;
    c->lr_warmup_init = 1;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--lr-warmup-init 1 is above --lr 0.001");
    c->lr_warmup_init = 0;
    c->lr = 0;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--lr is required and must be > 0");
    free(c);
}

static void test_validate_data_and_checkpoints(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base();
    c->mock_data = false;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "no training data: give --data-path PREFIX, --mock-data");
    strcpy(c->tokens_file, "tokens.bin");
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    c->mock_data = true;
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "give one data source");
    c->tokens_file[0] = 0;
    strcpy(c->save, "/tmp/ckpt");
    assert_error(tr_config_validate(c, 1, err, ERRLEN), err, "--save needs --save-interval N");
    c->save_interval = 5;
    assert_ok(tr_config_validate(c, 1, err, ERRLEN), err);
    free(c);
}

/* ---- Megatron's flags that users' scripts carry ------------------------------------------------------ */

static void test_megatron_flags_twinrun_lacks_say_so(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_error(parse_line(c, "--moe-router-topk 2", err), err,
                 "--moe-router-topk: a Megatron-LM flag that twinrun does not support (mixture-of-experts");
    assert_error(parse_line(c, "--distribute-saved-activations", err), err,
                 "--distribute-saved-activations: a Megatron-LM flag that twinrun does not support (");
    assert_error(parse_line(c, "--retro-add-retriever", err), err, "(Retro retrieval models are not implemented)");
    /* a name Megatron does not have either is still an unknown flag with the closest one */
    assert_error(parse_line(c, "--num-layer 2", err), err, "unknown flag --num-layer; did you mean --num-layers?");
    /* refused rows of twinrun's own table read the same way */
    assert_error(parse_line(c, "--use-torch-fsdp2", err), err,
                 "--use-torch-fsdp2: a Megatron-LM flag that twinrun does not support (FSDP is not implemented");
    free(c);
}

static void test_issue_flags_are_stored(void **state) {
    (void)state;
    tr_config *c = cfg_new();
    char err[ERRLEN] = "";
    assert_true(c->decoupled_lr < 0 && c->decoupled_min_lr < 0 && c->ckpt_step == -1);
    assert_true(c->log_loss_scale_to_tensorboard && !c->disable_bias_linear); /* Megatron's defaults */
    assert_ok(parse_line(c,
                         "--decoupled-lr 1e-4 --decoupled-min-lr 1e-5 --exit-signal-handler --ckpt-step 5 "
                         "--exit-on-missing-checkpoint --use-checkpoint-args --no-log-loss-scale-to-tensorboard "
                         "--log-world-size-to-tensorboard --qk-layernorm --disable-bias-linear --add-qkv-bias "
                         "--recompute-granularity full --recompute-method block --recompute-num-layers 2",
                         err),
              err);
    assert_true(c->decoupled_lr == 1e-4 && c->decoupled_min_lr == 1e-5 && c->exit_signal_handler);
    assert_true(c->ckpt_step == 5 && c->exit_on_missing_checkpoint && c->use_checkpoint_args);
    assert_true(!c->log_loss_scale_to_tensorboard && c->log_world_size_to_tensorboard && c->qk_layernorm);
    assert_true(c->disable_bias_linear && c->add_qkv_bias);
    assert_int_equal(c->recompute_granularity, TR_RECOMPUTE_FULL);
    assert_int_equal(c->recompute_method, TR_RECOMPUTE_METHOD_BLOCK);
    assert_int_equal(c->recompute_num_layers, 2);
    assert_int_equal(c->n_warnings, 0);
    /* the spelled-out defaults undo their opposites, as a later flag does */
    assert_ok(parse_line(c, "--add-bias-linear --log-loss-scale-to-tensorboard --recompute-activations", err), err);
    assert_true(!c->disable_bias_linear && c->log_loss_scale_to_tensorboard);
    assert_int_equal(c->recompute_granularity, TR_RECOMPUTE_SELECTIVE);
    assert_error(parse_line(c, "--recompute-modules core_attn mlp", err), err,
                 "--recompute-modules mlp: twinrun recomputes core attention only");
    assert_ok(parse_line(c, "--recompute-modules core_attn", err), err);
    free(c);
}

/* --help must not call implemented what a run refuses or ignores */
static void test_help_is_truthful(void **state) {
    (void)state;
    char *help = fx_capture_f(tr_config_print_help);
    assert_contains(help, "(one of: rope; refused: learned_absolute, none, yarn, mrope, relative)");
    /* the status line sits right under its flag's line, indented 47 columns */
    char want[512];
    snprintf(want, sizeof want,
             "checkpoint format Megatron would write (one of: torch, torch_dist, zarr, torch_dcp, "
             "fsdp_dtensor) [default: torch_dist]\n%47saccepted, no effect: twinrun writes and reads "
             "its own",
             "");
    assert_contains(help, want);
    snprintf(want, sizeof want,
             "no attention across end-of-document tokens [default: off]\n%47srejected: twinrun's "
             "attention masks causally",
             "");
    assert_contains(help, want);
    /* twinrun has no dropout: the two flags say only 0 takes effect (the run warns for another value) */
    snprintf(want, sizeof want,
             "dropout on attention probabilities (in [0, 1)) [default: 0.1]\n%47sonly 0: another value is "
             "ignored with a warning: twinrun trains without dropout",
             "");
    assert_contains(help, want);
    snprintf(want, sizeof want,
             "dropout on the residual branches (in [0, 1)) [default: 0.1]\n%47sonly 0: another value is "
             "ignored with a warning: twinrun trains without dropout",
             "");
    assert_contains(help, want);
    free(help);
}

/* One validation names every problem, one per line under a count, instead of the first only. */
static void test_validate_reports_every_error(void **state) {
    (void)state;
    char err[4096] = "";
    tr_config *c = base();
    c->num_layers = 0;
    c->lr = 0;
    strcpy(c->save, "/tmp/ckpt");
    c->ckpt_step = 3;
    assert_int_equal(tr_config_validate(c, 1, err, sizeof err), -1);
    assert_contains(err, "4 problems in the configuration:\n");
    assert_contains(err, "\n  --num-layers is required");
    assert_contains(err, "\n  --lr is required and must be > 0");
    assert_contains(err, "\n  --save needs --save-interval N");
    assert_contains(err, "\n  --ckpt-step 3 names a checkpoint to load: give --load DIR too");
    /* one problem stays one line, as before */
    c->num_layers = 4, c->lr = 1e-3, c->save[0] = 0, c->ckpt_step = -1;
    c->micro_batch_size = 0;
    assert_int_equal(tr_config_validate(c, 1, err, sizeof err), -1);
    assert_null(strchr(err, '\n'));
    free(c);
}

/* Megatron's TransformerConfig rules for recomputation. */
static void test_validate_recompute(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    tr_config *c = base(); /* 4 layers */
    c->pipeline_model_parallel_size = 2, c->global_batch_size = 0;
    c->recompute_granularity = TR_RECOMPUTE_FULL;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "needs --recompute-method uniform or block");
    c->recompute_method = TR_RECOMPUTE_METHOD_UNIFORM;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "between 1 and the 2 layers of a pipeline stage");
    c->recompute_num_layers = 3;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "which must divide it");
    c->recompute_num_layers = 2;
    assert_ok(tr_config_validate(c, 2, err, ERRLEN), err);
    c->recompute_method = TR_RECOMPUTE_METHOD_BLOCK, c->recompute_num_layers = 1;
    assert_ok(tr_config_validate(c, 2, err, ERRLEN), err);
    c->recompute_granularity = TR_RECOMPUTE_SELECTIVE;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "--recompute-method is for --recompute-granularity full");
    c->recompute_method = TR_RECOMPUTE_METHOD_NONE;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err,
                 "--recompute-num-layers is for --recompute-granularity full");
    c->recompute_num_layers = 0;
    assert_ok(tr_config_validate(c, 2, err, ERRLEN), err);
    c->decoupled_lr = 1e-4, c->decoupled_min_lr = 1e-3;
    assert_error(tr_config_validate(c, 2, err, ERRLEN), err, "--decoupled-min-lr 0.001 is above --decoupled-lr 0.0001");
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_001_llama3_8b_real_data_fp8),
        cmocka_unit_test(test_seed_001_llama3_8b_mock_fast_test),
        cmocka_unit_test(test_seed_001_multi_node_template),
        cmocka_unit_test(test_overlap_flag_rules),
        cmocka_unit_test(test_fp8_flag_rules),
        cmocka_unit_test(test_seed_000_llama3_70b_1024_cards),
        cmocka_unit_test(test_defaults_are_megatrons),
        cmocka_unit_test(test_equals_form),
        cmocka_unit_test(test_bool_flags_take_no_value),
        cmocka_unit_test(test_repeated_flag_keeps_last_value),
        cmocka_unit_test(test_unknown_flag_names_the_closest),
        cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_bad_enum_lists_choices),
        cmocka_unit_test(test_rejected_flags_give_the_fix),
        cmocka_unit_test(test_accepted_flags_are_quiet_and_warned_flags_say_so),
        cmocka_unit_test(test_warnings_do_not_overflow),
        cmocka_unit_test(test_silent_megatron_changes_are_warned),
        cmocka_unit_test(test_data_path_forms),
        cmocka_unit_test(test_split_values),
        cmocka_unit_test(test_string_too_long),
        cmocka_unit_test(test_odd_vectors),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_docs_flags_md_matches_table),
        cmocka_unit_test(test_table_is_consistent),
        cmocka_unit_test(test_validate_model_shape),
        cmocka_unit_test(test_validate_ffn_default),
        cmocka_unit_test(test_validate_parallel_layout),
        cmocka_unit_test(test_validate_batch),
        cmocka_unit_test(test_validate_schedule),
        cmocka_unit_test(test_validate_data_and_checkpoints),
        cmocka_unit_test(test_megatron_flags_twinrun_lacks_say_so),
        cmocka_unit_test(test_issue_flags_are_stored),
        cmocka_unit_test(test_help_is_truthful),
        cmocka_unit_test(test_validate_reports_every_error),
        cmocka_unit_test(test_validate_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
