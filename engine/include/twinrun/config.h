/* The training configuration: Megatron-LM's command-line flags, parsed (engine/config/args.c).
 * Field names follow the flag names (--num-layers -> num_layers). Defaults are Megatron's. */
#ifndef TWINRUN_ENGINE_CONFIG_H
#define TWINRUN_ENGINE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "twinrun/err.h"

#define TR_MAX_PATHS 64
#define TR_PATH_LEN 1024
#define TR_WARNINGS_LEN 4096

typedef enum tr_norm_type { TR_NORM_LAYERNORM = 0, TR_NORM_RMSNORM = 1 } tr_norm_type;
typedef enum tr_pos_emb { TR_POS_ROPE = 0, TR_POS_LEARNED = 1, TR_POS_NONE = 2 } tr_pos_emb;
typedef enum tr_lr_style {
    TR_LR_CONSTANT = 0,
    TR_LR_LINEAR,
    TR_LR_COSINE,
    TR_LR_INVERSE_SQRT,
} tr_lr_style;
/* --recompute-granularity and --recompute-method (Megatron's TransformerConfig). */
typedef enum tr_recompute { TR_RECOMPUTE_NONE = 0, TR_RECOMPUTE_FULL, TR_RECOMPUTE_SELECTIVE } tr_recompute;
typedef enum tr_recompute_method {
    TR_RECOMPUTE_METHOD_NONE = 0,
    TR_RECOMPUTE_METHOD_UNIFORM,
    TR_RECOMPUTE_METHOD_BLOCK,
} tr_recompute_method;

/* --fp8-format: the linear layers' GEMMs in FP8 (docs/fp8.md). */
typedef enum tr_fp8_mode { TR_FP8_MODE_NONE = 0, TR_FP8_MODE_E4M3, TR_FP8_MODE_HYBRID } tr_fp8_mode;

typedef struct tr_config {
    /* model */
    int num_layers, hidden_size, ffn_hidden_size, num_attention_heads;
    bool group_query_attention;
    int num_query_groups; /* = heads unless --group-query-attention */
    int kv_channels;      /* head dim; 0 = hidden / heads */
    int seq_length, max_position_embeddings;
    tr_pos_emb position_embedding_type;
    double rotary_base, rotary_percent;
    tr_norm_type normalization;
    double norm_epsilon;
    bool apply_layernorm_1p, swiglu, untie_embeddings_and_output_weights;
    bool disable_bias_linear; /* Megatron's default is linear layers with biases (--add-bias-linear) */
    bool add_qkv_bias;        /* biases on q/k/v only; implied by linear biases, as in Megatron */
    bool qk_layernorm;        /* normalise each head's queries and keys (the --normalization kind) */
    double attention_dropout, hidden_dropout;
    double init_method_std;
    int vocab_size;                   /* from --vocab-size or the HF config; 0 = unset */
    int make_vocab_size_divisible_by; /* 128 */
    bool use_mcore_models;

    /* training */
    int micro_batch_size, global_batch_size;
    int64_t train_iters, train_samples; /* exactly one is set (>0) */
    double lr, min_lr, lr_warmup_init;
    tr_lr_style lr_decay_style;
    int64_t lr_decay_iters, lr_decay_samples; /* 0 = unset */
    int64_t lr_warmup_iters, lr_warmup_samples;
    double lr_warmup_fraction; /* <0 = unset */
    double clip_grad, weight_decay, adam_beta1, adam_beta2, adam_eps;
    bool bf16, grad_reduce_in_bf16;
    bool calculate_per_token_loss, cross_entropy_loss_fusion;
    bool check_for_nan_in_loss_and_grad; /* default on */
    bool store_param_remainders;         /* default on: bf16 training's fp32 master as 16-bit remainders */
    tr_fp8_mode fp8;                     /* --fp8-format (bf16 training only) */
    int fp8_recipe;                      /* --fp8-recipe: only delayed (1) is implemented; the others are refused */
    int fp8_margin, fp8_amax_history_len;
    int fp8_amax_compute_algo;          /* tr_fp8_amax_algo: 0 max, 1 most_recent (Megatron's default) */
    bool fp8_wgrad;                     /* default on; --no-fp8-wgrad keeps the weight-gradient GEMM in bf16 */
    bool fp8_param_gather;              /* --fp8-param-gather */
    int fp8_amax_spike;                 /* twinrun's --fp8-amax-spike: 0 warn, 1 stop (engine/train/observe_fp8.c) */
    uint64_t seed;                      /* 1234 */
    tr_recompute recompute_granularity; /* --recompute-granularity / --recompute-activations */
    tr_recompute_method recompute_method;
    int recompute_num_layers;              /* 0 = unset */
    bool exit_signal_handler;              /* SIGTERM: finish the step, save, exit 0 */
    bool deterministic_mode;               /* Megatron's --deterministic-mode: needs nccl_algo (below) */
    char nccl_algo[64];                    /* the NCCL_ALGO environment variable as launched; "" = unset */
    double decoupled_lr, decoupled_min_lr; /* embedding and output layer; <0 = unset (use --lr / --min-lr) */
    int exit_interval;                     /* 0 = none */
    double exit_duration_in_mins;          /* 0 = none */

    /* parallelism */
    int tensor_model_parallel_size, pipeline_model_parallel_size, context_parallel_size;
    bool sequence_parallel, use_distributed_optimizer, overlap_grad_reduce, overlap_param_gather;
    int64_t ddp_bucket_size; /* elements per gradient bucket with --overlap-grad-reduce; 0 = Megatron's default */

    /* data */
    int n_data_path;
    char data_path[TR_MAX_PATHS][TR_PATH_LEN]; /* as given: [weight] prefix pairs or prefixes */
    bool mock_data;
    char split[64]; /* "969, 30, 1" */
    char data_cache_path[TR_PATH_LEN];
    char tokenizer_type[64], tokenizer_model[TR_PATH_LEN];
    char tiktoken_pattern[8];        /* TikTokenizer: "v1" or "v2" */
    int tiktoken_num_special_tokens; /* TikTokenizer: ids 0..N-1 are special tokens (Megatron's 1000) */
    /* read from --tokenizer-model at start (train/setup.c), as Megatron's tokenizer has them: its
     * distinct tokens, end-of-document (eos) and bos ids; 0 / -1 where no tokenizer was read */
    int64_t tokenizer_vocab, tokenizer_eod, tokenizer_bos;
    bool eod_mask_loss, reset_position_ids, reset_attention_mask, mmap_bin_files;
    int num_workers;

    /* evaluation, logging, checkpoints */
    int log_interval, eval_interval, eval_iters, save_interval;
    bool log_throughput;
    bool log_straggler;
    double distributed_timeout_minutes;
    double data_read_timeout_minutes; /* the data-loader watchdog (engine/train/data_watch.c); 0: off */
    char save[TR_PATH_LEN], load[TR_PATH_LEN], tensorboard_dir[TR_PATH_LEN], ckpt_format[32];
    int tensorboard_log_interval; /* iterations between TensorBoard scalars (engine/train/tb_log.c) */
    bool log_timers_to_tensorboard, log_memory_to_tensorboard, log_validation_ppl_to_tensorboard;
    bool log_loss_scale_to_tensorboard; /* default on (Megatron's --no-log-loss-scale-to-tensorboard clears it) */
    bool log_world_size_to_tensorboard;
    bool finetune;      /* --finetune: load weights only; iteration, optimizer, scheduler, RNG start fresh */
    bool no_load_optim; /* --no-load-optim: keep the checkpoint's weights, start a fresh optimizer */
    bool no_load_rng;   /* --no-load-rng: keep the checkpoint's weights, reseed the RNG from --seed */
    int64_t ckpt_step;  /* --ckpt-step N: load iteration N instead of the latest; -1 = latest */
    bool exit_on_missing_checkpoint; /* --load with nothing to load exits 1 instead of a fresh start */
    bool use_checkpoint_args;        /* the model flags come from the checkpoint's manifest */
    /* a resumed learning-rate schedule that differs from the checkpoint's (Megatron's scheduler asserts
     * unless one of these): this run's values, or the checkpoint's */
    bool override_opt_param_scheduler, use_checkpoint_opt_param_scheduler;

    /* twinrun's own */
    char hf_load[TR_PATH_LEN];       /* --hf-load DIR: import Hugging Face weights and config */
    char metrics_jsonl[TR_PATH_LEN]; /* --metrics-jsonl FILE: one JSON object per iteration */
    char tokens_file[TR_PATH_LEN];   /* --tokens-file FILE: raw int32 [iters, GBS, seq+1] (tests) */
    int keep_last;                   /* --keep-last N: checkpoints kept in --save after each save; 0 = all */
    bool overwrite_checkpoints;      /* --overwrite-checkpoints: a save may replace a complete iter_N */
    bool allow_data_change;          /* resume although the data differ from the checkpoint's (train/resume_check.c) */
    bool allow_tokenizer_change;     /* resume although the tokenizer differs from the checkpoint's */
    bool predict;                    /* --predict: the twin in shape-only mode (docs/prediction.md) */
    char predict_json[TR_PATH_LEN];  /* --predict-json FILE: the predict report as JSON */

    /* what parsing noticed: flags accepted but ignored, settings Megatron silently changes.
     * Complete lines "twinrun: warning: ...\n"; the caller prints them once: fputs(cfg->warnings, stderr). */
    int n_warnings;
    char warnings[TR_WARNINGS_LEN];

    /* Not a flag: faults to inject (fault/fault.h), set by the scenario runner or from
     * TWINRUN_FAULTS. NULL = none. Every rank reads it; the plan records what fired. */
    struct fault_plan *faults;
    /* Not a flag: saves without fsync (ckpt_io_posix_nosync), set by the scenario runner for a campaign,
     * whose faults end processes, never the machine: ~1.8 s a save of 1024 shards on a VM's disk. */
    bool ckpt_no_fsync;
} tr_config;

/* Fills cfg with Megatron's defaults. */
void tr_config_defaults(tr_config *cfg);

/* Parses argv (without argv[0]) into cfg, which must hold defaults. Returns 0, or -1 with a
 * one-line message in err naming the flag and the fix (e.g. the closest known flag). --help
 * returns 1 and prints the flag list to stdout. */
int tr_config_parse(tr_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Cross-flag checks after parsing and after an HF config is merged in (divisibility, ranges,
 * batch arithmetic for `world` ranks). Returns 0 or -1 with err: one line for one problem, or
 * "N problems in the configuration:" and one indented line per problem. */
int tr_config_validate(const tr_config *cfg, int world, char *err, size_t errlen);

/* The same checks, every problem added to el (one line each) instead of stopping at the first: what a
 * job runs once before its ranks start. Returns -1 when it added any, else 0. */
int tr_config_collect_errors(const tr_config *cfg, int world, tr_errlist *el);

/* Appends "twinrun: warning: <fmt>\n" to cfg->warnings unless the same line is already there: what
 * parsing and job preparation noticed, printed once by the caller. */
void tr_config_warn(tr_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the --help text. */
void tr_config_print_help(FILE *out);

/* Call after parsing and after an HF config is merged in: fills what Megatron derives when a flag is
 * absent (kv_channels = hidden/heads; num_query_groups = heads, or 1 with --group-query-attention
 * alone; ffn_hidden_size = 4h, or int(8h/3/64)*64 with --swiglu; global_batch_size = micro * DP),
 * then runs tr_config_validate. Returns 0 or -1 with err. */
int tr_config_finalize(tr_config *cfg, int world, char *err, size_t errlen);

#endif
