/* Every command-line flag twinrun knows: Megatron-LM's names, kinds, defaults and ranges
 * (checked against megatron/training/arguments.py, core_v0.15), and for each flag whether twinrun
 * implements it, accepts it as a harmless no-op, accepts it with a warning, or refuses it with
 * the fix. The parser, --help, docs/flags.md and the tests are all driven by this table. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/flags.h"
#include "twinrun/err.h"

#define F(m) .has_field = true, .offset = offsetof(tr_config, m), .size = sizeof(((tr_config *)0)->m)
#define GE(x) .range = {.has_min = true, .min = (x)}
#define GT(x) .range = {.has_min = true, .min_open = true, .min = (x)}
#define UNIT_OPEN .range = {.has_min = true, .min = 0, .has_max = true, .max_open = true, .max = 1} /* [0,1) */
#define RANGE(lo, hi) .range = {.has_min = true, .min = (lo), .has_max = true, .max = (hi)}
#define UNIT_POS .range = {.has_min = true, .min_open = true, .min = 0, .has_max = true, .max = 1} /* (0,1] */

/* Reasons shared by many rows. */
#define R_FUSION                                                                                                       \
    "a kernel-fusion switch of Megatron's PyTorch stack; twinrun's kernels compute the same values either way"
#define R_TOKENIZER "twinrun reads token ids that preprocessing already produced; no tokenizer runs while training"
#define R_CKPT_FORMAT                                                                                                  \
    "twinrun writes and reads its own sharded, checksummed checkpoint format whatever the value (docs/checkpoints.md)"

static const tr_choice POS_EMB[] = {
    {"learned_absolute", TR_POS_LEARNED,
     "twinrun's Llama has rotary embeddings only; use --position-embedding-type rope"},
    {"rope", TR_POS_ROPE, NULL},
    {"none", TR_POS_NONE, "twinrun's Llama has rotary embeddings only; use --position-embedding-type rope"},
    {"yarn", 0, "YaRN is not implemented; Llama 3 uses --position-embedding-type rope"},
    {"mrope", 0, "multimodal RoPE is not implemented; Llama 3 uses --position-embedding-type rope"},
    {"relative", 0, "relative (T5-style) position embeddings are not implemented; use rope"},
    {NULL, 0, NULL},
};
static const tr_choice NORM[] = {
    {"LayerNorm", TR_NORM_LAYERNORM, NULL},
    {"RMSNorm", TR_NORM_RMSNORM, NULL},
    {NULL, 0, NULL},
};
static const tr_choice LR_STYLE[] = {
    {"constant", TR_LR_CONSTANT, NULL},
    {"linear", TR_LR_LINEAR, NULL},
    {"cosine", TR_LR_COSINE, NULL},
    {"inverse-square-root", TR_LR_INVERSE_SQRT, NULL},
    {"WSD", 0, "not supported yet; use cosine, linear, constant or inverse-square-root"},
    {NULL, 0, NULL},
};
static const tr_choice OPTIMIZER[] = {
    {"adam", 0, NULL},
    {"sgd", 0, "twinrun implements AdamW only; use --optimizer adam"},
    {"muon", 0, "twinrun implements AdamW only; use --optimizer adam"},
    {"dist_muon", 0, "twinrun implements AdamW only; use --optimizer adam"},
    {"lion", 0, "twinrun implements AdamW only; use --optimizer adam"},
    {NULL, 0, NULL},
};
static const tr_choice ATTN_BACKEND[] = {
    {"flash", 0, NULL}, {"fused", 0, NULL}, {"unfused", 0, NULL},
    {"local", 0, NULL}, {"auto", 0, NULL},  {NULL, 0, NULL},
};
static const tr_choice TRANSFORMER_IMPL[] = {
    {"local", 0, NULL},
    {"transformer_engine", 0, NULL},
    {NULL, 0, NULL},
};
static const tr_choice FP8_FORMAT[] = {
    {"e4m3", TR_FP8_MODE_E4M3, NULL}, {"hybrid", TR_FP8_MODE_HYBRID, NULL}, {NULL, 0, NULL}};
static const tr_choice FP8_RECIPE[] = {
    {"delayed", 1, NULL},
    {"tensorwise", 0,
     "per-tensor current scaling (Transformer Engine's Float8CurrentScaling) is not implemented; twinrun runs "
     "delayed scaling, Megatron's default: use --fp8-recipe delayed"},
    {"mxfp8", 0,
     "MXFP8 block scaling needs Blackwell's block-scaled tensor cores and is not implemented; use --fp8-recipe "
     "delayed"},
    {"blockwise", 0, "blockwise (1x128 / 128x128) scaling is not implemented; use --fp8-recipe delayed"},
    {NULL, 0, NULL},
};
static const tr_choice FP8_SPIKE[] = {{"warn", 0, NULL}, {"stop", 1, NULL}, {NULL, 0, NULL}};
static const tr_choice FP8_AMAX_ALGO[] = {{"most_recent", 1, NULL}, {"max", 0, NULL}, {NULL, 0, NULL}};
static const tr_choice EMPTY_MEM[] = {{"0", 0, NULL}, {"1", 1, NULL}, {"2", 2, NULL}, {NULL, 0, NULL}};
static const tr_choice RECOMPUTE_GRAN[] = {
    {"full", TR_RECOMPUTE_FULL, NULL}, {"selective", TR_RECOMPUTE_SELECTIVE, NULL}, {NULL, 0, NULL}};
static const tr_choice RECOMPUTE_METHOD[] = {
    {"uniform", TR_RECOMPUTE_METHOD_UNIFORM, NULL}, {"block", TR_RECOMPUTE_METHOD_BLOCK, NULL}, {NULL, 0, NULL}};
static const tr_choice TOKENIZER_TYPE[] = {
    {"BertWordPieceLowerCase", 0, NULL},
    {"BertWordPieceCase", 0, NULL},
    {"GPT2BPETokenizer", 0, NULL},
    {"SentencePieceTokenizer", 0, NULL},
    {"GPTSentencePieceTokenizer", 0, NULL},
    {"HuggingFaceTokenizer", 0, NULL},
    {"Llama2Tokenizer", 0, NULL},
    {"TikTokenizer", 0, NULL},
    {"MultimodalTokenizer", 0, NULL},
    {"NullTokenizer", 0, NULL},
    {"NullMultimodalTokenizer", 0, NULL},
    {"SFTTokenizer", 0, NULL},
    {NULL, 0, NULL},
};
static const tr_choice TIKTOKEN_PATTERN[] = {{"v1", 0, NULL}, {"v2", 0, NULL}, {NULL, 0, NULL}};
static const tr_choice DATALOADER_TYPE[] = {
    {"single", 0, NULL},
    {"cyclic", 0, "only Megatron's default 'single' data loader is implemented (the GPTDataset sample order)"},
    {"external", 0, "only Megatron's default 'single' data loader is implemented (the GPTDataset sample order)"},
    {NULL, 0, NULL},
};
static const tr_choice DIST_BACKEND[] = {{"nccl", 0, NULL}, {"gloo", 0, NULL}, {NULL, 0, NULL}};
static const tr_choice CKPT_FORMAT[] = {
    {"torch", 0, NULL},     {"torch_dist", 0, NULL},   {"zarr", 0, NULL},
    {"torch_dcp", 0, NULL}, {"fsdp_dtensor", 0, NULL}, {NULL, 0, NULL},
};

static void use_rope(tr_config *cfg) { cfg->position_embedding_type = TR_POS_ROPE; }
/* Megatron's --recompute-activations is shorthand for --recompute-granularity selective. */
static void recompute_selective(tr_config *cfg) { cfg->recompute_granularity = TR_RECOMPUTE_SELECTIVE; }

/* --recompute-modules: of Megatron's submodules a dense Llama has core attention (its default); the
 * others are MoE, MLA or recompute what twinrun keeps anyway. */
static int check_recompute_module(const char *flag, const char *v, char *err, size_t errlen) {
    if (!strcmp(v, "core_attn")) return 0;
    return tr_errf(err, errlen,
                   "%s %s: twinrun recomputes core attention only (core_attn, Megatron's default); for "
                   "whole layers use --recompute-granularity full",
                   flag, v);
}

/* --split: Megatron reads the numbers with the regex [.0-9]+ and ignores everything else (so the
 * literal quotes in the seed's "--split '99,1,0'" are harmless); at most three, each a float. */
static int check_split(const char *flag, const char *v, char *err, size_t errlen);

static const tr_flag FLAGS[] = {
    /* ---- model ---------------------------------------------------------------------------- */
    {"--num-layers", TR_K_INT, TR_SEC_MODEL, F(num_layers), GE(1), .metavar = "N", .def = "required",
     .help = "number of transformer layers"},
    {"--hidden-size", TR_K_INT, TR_SEC_MODEL, F(hidden_size), GE(1), .metavar = "N", .def = "required",
     .help = "model width h"},
    {"--ffn-hidden-size", TR_K_INT, TR_SEC_MODEL, F(ffn_hidden_size), GE(1), .metavar = "N",
     .def = "4h; int(8h/3/64)*64 with --swiglu", .help = "MLP inner width"},
    {"--num-attention-heads", TR_K_INT, TR_SEC_MODEL, F(num_attention_heads), GE(1), .metavar = "N", .def = "required",
     .help = "number of query heads"},
    {"--group-query-attention", TR_K_BOOL, TR_SEC_MODEL, F(group_query_attention), .def = "off",
     .help = "share K/V heads between groups of query heads (GQA); set the count with --num-query-groups"},
    {"--num-query-groups", TR_K_INT, TR_SEC_MODEL, F(num_query_groups), GE(1), .metavar = "N",
     .def = "1 with --group-query-attention", .help = "number of K/V heads; read only with --group-query-attention"},
    {"--kv-channels", TR_K_INT, TR_SEC_MODEL, F(kv_channels), GE(1), .metavar = "N", .def = "h / heads",
     .help = "head dimension"},
    {"--seq-length", TR_K_INT, TR_SEC_MODEL, F(seq_length), GE(1), .metavar = "N", .def = "required",
     .help = "tokens per training sample"},
    {"--max-position-embeddings", TR_K_INT, TR_SEC_MODEL, F(max_position_embeddings), GE(1), .metavar = "N",
     .def = "required", .help = "longest sequence the position embedding covers; at least --seq-length"},
    {"--position-embedding-type", TR_K_ENUM, TR_SEC_MODEL, F(position_embedding_type), .choices = POS_EMB,
     .metavar = "TYPE", .def = "learned_absolute", .help = "position encoding; Llama uses rope"},
    {"--use-rotary-position-embeddings", TR_K_BOOL, TR_SEC_MODEL, .apply = use_rope, .def = "off",
     .help = "old spelling of --position-embedding-type rope"},
    {"--rotary-base", TR_K_DOUBLE, TR_SEC_MODEL, F(rotary_base), GT(0), .metavar = "THETA", .def = "10000",
     .help = "RoPE base (Llama 3: 500000)"},
    {"--rotary-percent", TR_K_DOUBLE, TR_SEC_MODEL, F(rotary_percent), UNIT_POS, .metavar = "F", .def = "1.0",
     .help = "fraction of each head's channels that RoPE rotates"},
    {"--rotary-interleaved", TR_K_BOOL, TR_SEC_MODEL, .def = "off", .status = TR_ST_REJECTED,
     .reason =
         "twinrun implements the Llama/Hugging Face (non-interleaved) RoPE layout only; drop --rotary-interleaved",
     .help = "rotate adjacent channel pairs instead of the two halves"},
    {"--use-rope-scaling", TR_K_BOOL, TR_SEC_MODEL, .def = "off", .status = TR_ST_WARNED,
     .reason = "Llama 3.1 RoPE frequency scaling is not implemented yet; RoPE runs unscaled",
     .help = "Llama 3.1 RoPE frequency scaling"},
    {"--rope-scaling-factor", TR_K_DOUBLE, TR_SEC_MODEL, GT(0), .metavar = "F", .def = "8.0", .status = TR_ST_WARNED,
     .reason = "Llama 3.1 RoPE frequency scaling is not implemented yet; RoPE runs unscaled",
     .help = "factor of --use-rope-scaling"},
    {"--normalization", TR_K_ENUM, TR_SEC_MODEL, F(normalization), .choices = NORM, .metavar = "KIND",
     .def = "LayerNorm", .help = "normalization layer; Llama uses RMSNorm"},
    {"--norm-epsilon", TR_K_DOUBLE, TR_SEC_MODEL, F(norm_epsilon), GT(0), .metavar = "EPS", .def = "1e-5",
     .help = "epsilon of LayerNorm/RMSNorm"},
    {"--apply-layernorm-1p", TR_K_BOOL, TR_SEC_MODEL, F(apply_layernorm_1p), .def = "off",
     .help = "store norm weights as (gamma - 1), i.e. zero-centred"},
    {"--swiglu", TR_K_BOOL, TR_SEC_MODEL, F(swiglu), .def = "off", .help = "SwiGLU MLP (gated SiLU) instead of GeLU"},
    {"--untie-embeddings-and-output-weights", TR_K_BOOL, TR_SEC_MODEL, F(untie_embeddings_and_output_weights),
     .def = "off", .help = "separate input embedding and output projection"},
    {"--disable-bias-linear", TR_K_BOOL, TR_SEC_MODEL, F(disable_bias_linear), .def = "off (biases)",
     .help = "no bias in any linear layer (Llama 3 has none)"},
    {"--add-bias-linear", TR_K_BOOL_OFF, TR_SEC_MODEL, F(disable_bias_linear), .def = "on",
     .help = "biases in every linear layer: Megatron's default, spelled out (undoes --disable-bias-linear)"},
    {"--add-qkv-bias", TR_K_BOOL, TR_SEC_MODEL, F(add_qkv_bias), .def = "off",
     .help = "biases in the q/k/v projections only (Qwen-style); implied by linear biases"},
    {"--qk-layernorm", TR_K_BOOL, TR_SEC_MODEL, F(qk_layernorm), .def = "off",
     .help = "normalise each head's queries and keys (with the --normalization kind) before RoPE"},
    {"--attention-dropout", TR_K_DOUBLE, TR_SEC_MODEL, F(attention_dropout), UNIT_OPEN, .metavar = "P", .def = "0.1",
     .status = TR_ST_ZERO_ONLY,
     .reason = "twinrun trains without dropout; Megatron's default is 0.1, so pass 0 (as Llama pretraining does) for "
               "the same results and no warning",
     .help = "dropout on attention probabilities"},
    {"--hidden-dropout", TR_K_DOUBLE, TR_SEC_MODEL, F(hidden_dropout), UNIT_OPEN, .metavar = "P", .def = "0.1",
     .status = TR_ST_ZERO_ONLY,
     .reason = "twinrun trains without dropout; Megatron's default is 0.1, so pass 0 (as Llama pretraining does) for "
               "the same results and no warning",
     .help = "dropout on the residual branches"},
    {"--init-method-std", TR_K_DOUBLE, TR_SEC_MODEL, F(init_method_std), GT(0), .metavar = "STD", .def = "0.02",
     .help = "standard deviation of the normal weight initialisation"},
    {"--vocab-size", TR_K_INT, TR_SEC_MODEL, F(vocab_size), GE(1), .metavar = "N", .def = "required unless --hf-load",
     .help = "vocabulary size before padding (Llama 3: 128256)"},
    {"--make-vocab-size-divisible-by", TR_K_INT, TR_SEC_MODEL, F(make_vocab_size_divisible_by), GE(1), .metavar = "N",
     .def = "128",
     .help = "pad the vocabulary to a multiple of N x TP; the padding rows take no part in the loss (Hugging Face's "
             "loss; Megatron's softmax includes them: docs/parallel.md)"},
    {"--use-mcore-models", TR_K_BOOL, TR_SEC_MODEL, F(use_mcore_models), .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun has one model implementation", .help = "use Megatron-Core models (deprecated in Megatron)"},
    {"--attention-backend", TR_K_ENUM, TR_SEC_MODEL, .choices = ATTN_BACKEND, .metavar = "KIND", .def = "auto",
     .status = TR_ST_ACCEPTED,
     .reason = "twinrun has one attention kernel per backend (fused on GPUs, plain C in the twin)",
     .help = "attention kernel family"},
    {"--transformer-impl", TR_K_ENUM, TR_SEC_MODEL, .choices = TRANSFORMER_IMPL, .metavar = "IMPL",
     .def = "transformer_engine", .status = TR_ST_ACCEPTED,
     .reason = "twinrun uses its own kernels, not Transformer Engine or Megatron's local modules",
     .help = "Transformer Engine or Megatron's local layers"},
    {"--use-flash-attn", TR_K_BOOL, TR_SEC_MODEL, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun has one attention kernel per backend (fused on GPUs, plain C in the twin)",
     .help = "FlashAttention kernels"},

    /* ---- training --------------------------------------------------------------------------- */
    {"--micro-batch-size", TR_K_INT, TR_SEC_TRAINING, F(micro_batch_size), GE(1), .metavar = "N", .def = "required",
     .help = "samples per forward/backward on one data-parallel rank"},
    {"--global-batch-size", TR_K_INT, TR_SEC_TRAINING, F(global_batch_size), GE(1), .metavar = "N",
     .def = "micro-batch-size x DP", .help = "samples per optimizer step; a multiple of micro-batch-size x DP"},
    {"--rampup-batch-size", TR_K_LIST, TR_SEC_TRAINING, .metavar = "START INCR SAMPLES", .def = "none",
     .status = TR_ST_REJECTED, .reason = "batch-size ramp-up is not supported; use a fixed --global-batch-size",
     .help = "grow the global batch during training"},
    {"--batch-size", TR_K_INT, TR_SEC_TRAINING, .metavar = "N", .def = "none", .status = TR_ST_REJECTED,
     .reason = "--batch-size is gone from Megatron; use --micro-batch-size", .help = "old name of --micro-batch-size"},
    {"--train-iters", TR_K_INT64, TR_SEC_TRAINING, F(train_iters), GE(1), .metavar = "N",
     .def = "this or --train-samples", .help = "optimizer steps to train for (iteration-based run)"},
    {"--train-samples", TR_K_INT64, TR_SEC_TRAINING, F(train_samples), GE(1), .metavar = "N",
     .def = "this or --train-iters", .help = "samples to train on (sample-based run)"},
    {"--exit-interval", TR_K_INT, TR_SEC_TRAINING, F(exit_interval), GE(1), .metavar = "N", .def = "none",
     .help = "stop after an iteration that is a multiple of N"},
    {"--exit-duration-in-mins", TR_K_DOUBLE, TR_SEC_TRAINING, F(exit_duration_in_mins), GT(0), .metavar = "MIN",
     .def = "none", .help = "stop (and save) after this much wall time"},
    {"--seed", TR_K_U64, TR_SEC_TRAINING, F(seed), GE(0), .metavar = "N", .def = "1234",
     .help = "seed of initialisation and the data order (twinrun has no dropout)"},
    {"--bf16", TR_K_BOOL, TR_SEC_TRAINING, F(bf16), .def = "off (fp32)",
     .help = "bf16 weights and activations with fp32 master weights and optimizer state"},
    {"--fp16", TR_K_BOOL, TR_SEC_TRAINING, .def = "off", .status = TR_ST_REJECTED,
     .reason = "twinrun trains in bf16 or fp32; use --bf16", .help = "fp16 with loss scaling"},
    {"--grad-reduce-in-bf16", TR_K_BOOL, TR_SEC_TRAINING, F(grad_reduce_in_bf16), .def = "off",
     .help = "reduce gradients across data-parallel ranks in bf16"},
    {"--calculate-per-token-loss", TR_K_BOOL, TR_SEC_TRAINING, F(calculate_per_token_loss), .def = "off",
     .help = "average the loss over the non-masked tokens of the global batch"},
    {"--cross-entropy-loss-fusion", TR_K_BOOL, TR_SEC_TRAINING, F(cross_entropy_loss_fusion), .def = "off",
     .help = "fused vocab-parallel cross-entropy"},
    {"--no-check-for-nan-in-loss-and-grad", TR_K_BOOL_OFF, TR_SEC_TRAINING, F(check_for_nan_in_loss_and_grad),
     .def = "checks on", .help = "do not stop on a NaN/Inf loss or gradient"},
    {"--no-store-param-remainders", TR_K_BOOL_OFF, TR_SEC_TRAINING, F(store_param_remainders), .def = "remainders",
     .help = "with --bf16, keep the fp32 master weights as a whole fp32 copy (4 bytes a parameter) instead of the "
             "16 bits the bf16 weights lack (2 bytes; the same fp32 values, Megatron-Core's store_param_remainders; "
             "the bf16 weights then round ties away from zero instead of to even)"},
    {"--use-precision-aware-optimizer", TR_K_BOOL, TR_SEC_TRAINING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "its default dtypes (fp32 master, gradients and moments, the master stored as remainders) are "
               "twinrun's own bf16 recipe; --main-params-dtype, --exp-avg-dtype and the like are not supported",
     .help = "Megatron-Core's optimizer with per-state dtypes"},
    {"--manual-gc", TR_K_BOOL, TR_SEC_TRAINING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "no Python garbage collector", .help = "run Python's garbage collector by hand"},
    {"--manual-gc-interval", TR_K_INT, TR_SEC_TRAINING, GE(0), .metavar = "N", .def = "0", .status = TR_ST_ACCEPTED,
     .reason = "no Python garbage collector", .help = "iterations between manual collections"},
    {"--recompute-activations", TR_K_BOOL, TR_SEC_TRAINING, .apply = recompute_selective, .def = "off",
     .help = "selective activation recomputation (= --recompute-granularity selective)"},
    {"--recompute-granularity", TR_K_ENUM, TR_SEC_TRAINING, F(recompute_granularity), .choices = RECOMPUTE_GRAN,
     .metavar = "KIND", .def = "none",
     .help = "recompute in the backward pass instead of keeping: whole layers (full) or core attention (selective)"},
    {"--recompute-method", TR_K_ENUM, TR_SEC_TRAINING, F(recompute_method), .choices = RECOMPUTE_METHOD,
     .metavar = "KIND", .def = "none",
     .help = "full recompute: units of --recompute-num-layers layers (uniform) or the first N layers of each "
             "stage (block)"},
    {"--recompute-num-layers", TR_K_INT, TR_SEC_TRAINING, F(recompute_num_layers), GE(1), .metavar = "N", .def = "none",
     .help = "layers per recompute unit (uniform) or recomputed layers per stage (block)"},
    {"--recompute-modules", TR_K_LIST, TR_SEC_TRAINING, .check = check_recompute_module, .metavar = "MODULE ...",
     .def = "core_attn", .status = TR_ST_ACCEPTED,
     .reason = "core_attn is what selective recomputation does in twinrun; other modules are refused",
     .help = "submodules selective recomputation covers"},
    {"--exit-signal-handler", TR_K_BOOL, TR_SEC_TRAINING, F(exit_signal_handler), .def = "off",
     .help = "on SIGTERM finish the iteration, save a checkpoint (with --save) and exit 0"},
    {"--deterministic-mode", TR_K_BOOL, TR_SEC_TRAINING, F(deterministic_mode), .def = "off",
     .help = "deterministic execution: the attention backward takes cuDNN's fixed-order variant (every other "
             "kernel always sums in a fixed order); as in Megatron, NCCL_ALGO must be Tree, Ring, CollnetDirect, "
             "CollnetChain or ^NVLS"},
    {"--checkpoint-activations", TR_K_BOOL, TR_SEC_TRAINING, .def = "off", .status = TR_ST_REJECTED,
     .reason = "--checkpoint-activations is gone from Megatron; use --recompute-activations",
     .help = "old name of activation recomputation"},

    /* ---- optimizer and learning rate ------------------------------------------------------ */
    {"--optimizer", TR_K_ENUM, TR_SEC_OPTIMIZER, .choices = OPTIMIZER, .metavar = "NAME", .def = "adam",
     .status = TR_ST_ACCEPTED, .reason = "AdamW is twinrun's only optimizer; other choices are refused",
     .help = "optimizer (Adam with decoupled weight decay)"},
    {"--lr", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(lr), GE(0), .metavar = "LR", .def = "required",
     .help = "peak learning rate"},
    {"--min-lr", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(min_lr), GE(0), .metavar = "LR", .def = "0.0",
     .help = "floor the decay ends at"},
    {"--lr-decay-style", TR_K_ENUM, TR_SEC_OPTIMIZER, F(lr_decay_style), .choices = LR_STYLE, .metavar = "STYLE",
     .def = "linear", .help = "shape of the decay after warmup"},
    {"--lr-decay-iters", TR_K_INT64, TR_SEC_OPTIMIZER, F(lr_decay_iters), GE(1), .metavar = "N", .def = "--train-iters",
     .help = "iterations the decay spans (iteration-based runs)"},
    {"--lr-decay-samples", TR_K_INT64, TR_SEC_OPTIMIZER, F(lr_decay_samples), GE(1), .metavar = "N",
     .def = "--train-samples", .help = "samples the decay spans (sample-based runs)"},
    {"--lr-warmup-iters", TR_K_INT64, TR_SEC_OPTIMIZER, F(lr_warmup_iters), GE(0), .metavar = "N", .def = "0",
     .help = "linear warmup length in iterations (iteration-based runs)"},
    {"--lr-warmup-samples", TR_K_INT64, TR_SEC_OPTIMIZER, F(lr_warmup_samples), GE(0), .metavar = "N", .def = "0",
     .help = "linear warmup length in samples (sample-based runs)"},
    {"--lr-warmup-fraction", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(lr_warmup_fraction), UNIT_OPEN, .metavar = "F",
     .def = "none", .help = "warmup as a fraction of the decay span; replaces --lr-warmup-iters/-samples"},
    {"--lr-warmup-init", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(lr_warmup_init), GE(0), .metavar = "LR", .def = "0.0",
     .help = "learning rate the warmup starts from"},
    {"--warmup", TR_K_INT, TR_SEC_OPTIMIZER, .metavar = "N", .def = "none", .status = TR_ST_REJECTED,
     .reason = "--warmup is gone from Megatron; use --lr-warmup-fraction or --lr-warmup-iters",
     .help = "old warmup flag"},
    {"--weight-decay", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(weight_decay), GE(0), .metavar = "WD", .def = "0.01",
     .help = "decoupled weight decay; not applied to biases and norm weights"},
    {"--clip-grad", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(clip_grad), GE(0), .metavar = "NORM", .def = "1.0",
     .help = "clip the global gradient L2 norm to this; 0 turns clipping off"},
    {"--adam-beta1", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(adam_beta1), UNIT_OPEN, .metavar = "B", .def = "0.9",
     .help = "decay of Adam's first moment"},
    {"--adam-beta2", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(adam_beta2), UNIT_OPEN, .metavar = "B", .def = "0.999",
     .help = "decay of Adam's second moment"},
    {"--decoupled-lr", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(decoupled_lr), GE(0), .metavar = "LR", .def = "--lr",
     .help = "peak learning rate of the input embedding and the output layer"},
    {"--decoupled-min-lr", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(decoupled_min_lr), GE(0), .metavar = "LR",
     .def = "--min-lr", .help = "floor of the embedding and output layer's decay (read with --decoupled-lr)"},
    {"--adam-eps", TR_K_DOUBLE, TR_SEC_OPTIMIZER, F(adam_eps), GT(0), .metavar = "EPS", .def = "1e-8",
     .help = "Adam's denominator epsilon"},

    /* ---- parallelism ------------------------------------------------------------------------ */
    {"--tensor-model-parallel-size", TR_K_INT, TR_SEC_PARALLEL, F(tensor_model_parallel_size), GE(1), .metavar = "TP",
     .def = "1", .help = "ranks that split each layer's matrices"},
    {"--pipeline-model-parallel-size", TR_K_INT, TR_SEC_PARALLEL, F(pipeline_model_parallel_size), GE(1),
     .metavar = "PP", .def = "1", .help = "pipeline stages (1F1B schedule)"},
    {"--context-parallel-size", TR_K_INT, TR_SEC_PARALLEL, F(context_parallel_size), GE(1), .metavar = "CP", .def = "1",
     .help = "ranks that split each sequence"},
    {"--sequence-parallel", TR_K_BOOL, TR_SEC_PARALLEL, F(sequence_parallel), .def = "off",
     .help = "split norms along the sequence across TP ranks; turned off (with a warning) at TP 1"},
    {"--use-distributed-optimizer", TR_K_BOOL, TR_SEC_PARALLEL, F(use_distributed_optimizer), .def = "off",
     .help = "shard fp32 master weights and optimizer state across data-parallel ranks"},
    {"--overlap-grad-reduce", TR_K_BOOL, TR_SEC_PARALLEL, F(overlap_grad_reduce), .def = "off",
     .help = "reduce the gradients in buckets (--ddp-bucket-size), each as soon as the backward pass has written "
             "it, on a stream of its own beside the backward pass"},
    {"--overlap-param-gather", TR_K_BOOL, TR_SEC_PARALLEL, F(overlap_param_gather), .def = "off",
     .help = "all-gather the updated parameters bucket by bucket beside the next forward pass, which waits for "
             "each bucket before it reads it (needs --use-distributed-optimizer and --overlap-grad-reduce)"},
    {"--distributed-timeout-minutes", TR_K_DOUBLE, TR_SEC_PARALLEL, F(distributed_timeout_minutes), GT(0),
     .metavar = "MIN", .def = "10", .help = "collective watchdog timeout"},
    {"--distributed-backend", TR_K_ENUM, TR_SEC_PARALLEL, .choices = DIST_BACKEND, .metavar = "NAME", .def = "nccl",
     .status = TR_ST_ACCEPTED,
     .reason = "collectives go through twinrun's own layer (NCCL/MCCL on GPUs, simulated in the twin)",
     .help = "torch.distributed backend"},
    {"--local-rank", TR_K_INT, TR_SEC_PARALLEL, GE(0), .metavar = "N", .def = "$LOCAL_RANK", .status = TR_ST_ACCEPTED,
     .reason = "twinrun reads LOCAL_RANK from the launcher's environment",
     .help = "local rank passed by old launchers"},
    {"--model-parallel-size", TR_K_INT, TR_SEC_PARALLEL, .metavar = "N", .def = "none", .status = TR_ST_REJECTED,
     .reason = "--model-parallel-size is gone from Megatron; use --tensor-model-parallel-size",
     .help = "old name of --tensor-model-parallel-size"},
    {"--num-layers-per-virtual-pipeline-stage", TR_K_INT, TR_SEC_PARALLEL, .metavar = "N", .def = "none",
     .status = TR_ST_REJECTED,
     .reason = "the interleaved (virtual) pipeline schedule is not implemented; twinrun runs plain 1F1B",
     .help = "interleaved pipeline schedule"},
    {"--num-virtual-stages-per-pipeline-rank", TR_K_INT, TR_SEC_PARALLEL, .metavar = "N", .def = "none",
     .status = TR_ST_REJECTED,
     .reason = "the interleaved (virtual) pipeline schedule is not implemented; twinrun runs plain 1F1B",
     .help = "interleaved pipeline schedule"},
    {"--decoder-first-pipeline-num-layers", TR_K_INT, TR_SEC_PARALLEL, .metavar = "N", .def = "even split",
     .status = TR_ST_REJECTED,
     .reason = "uneven pipeline stages are not implemented; --num-layers must divide evenly by PP",
     .help = "layers on the first pipeline stage"},
    {"--decoder-last-pipeline-num-layers", TR_K_INT, TR_SEC_PARALLEL, .metavar = "N", .def = "even split",
     .status = TR_ST_REJECTED,
     .reason = "uneven pipeline stages are not implemented; --num-layers must divide evenly by PP",
     .help = "layers on the last pipeline stage"},
    {"--use-torch-fsdp2", TR_K_BOOL, TR_SEC_PARALLEL, .def = "off", .status = TR_ST_REJECTED,
     .reason = "FSDP is not implemented; use --use-distributed-optimizer", .help = "PyTorch FSDP2"},
    {"--use-megatron-fsdp", TR_K_BOOL, TR_SEC_PARALLEL, .def = "off", .status = TR_ST_REJECTED,
     .reason = "FSDP is not implemented; use --use-distributed-optimizer", .help = "Megatron FSDP"},
    {"--tp-comm-overlap", TR_K_BOOL, TR_SEC_PARALLEL, .def = "off", .status = TR_ST_WARNED,
     .reason = "overlap of TP communication with GEMMs is not implemented; results are the same, only slower",
     .help = "overlap TP communication with GEMMs (Transformer Engine userbuffers)"},
    {"--ddp-bucket-size", TR_K_INT64, TR_SEC_PARALLEL, F(ddp_bucket_size), GE(1), .metavar = "N",
     .def = "max(40000000, 1000000 x DP)",
     .help = "elements per gradient bucket with --overlap-grad-reduce (without it: one bucket, as Megatron)"},

    /* ---- data ------------------------------------------------------------------------------- */
    {"--data-path", TR_K_LIST, TR_SEC_DATA, F(data_path), .metavar = "[W] PREFIX ...", .def = "none",
     .help = "IndexedDataset prefixes (no .bin/.idx), or weight prefix pairs to blend"},
    {"--mock-data", TR_K_BOOL, TR_SEC_DATA, F(mock_data), .def = "off",
     .help = "Megatron's synthetic MockGPTDataset instead of files"},
    {"--split", TR_K_STRING, TR_SEC_DATA, F(split), .check = check_split, .metavar = "TRAIN,VALID,TEST",
     .def = "969, 30, 1", .help = "train/valid/test proportions of --data-path"},
    {"--data-cache-path", TR_K_STRING, TR_SEC_DATA, F(data_cache_path), .metavar = "DIR", .def = "<prefix dir>/cache",
     .help = "where the GPTDataset index caches are read and written"},
    {"--tokenizer-type", TR_K_ENUM, TR_SEC_DATA, F(tokenizer_type), .enum_as_string = true, .choices = TOKENIZER_TYPE,
     .metavar = "TYPE", .def = "none", .help = "tokenizer the data was made with (NullTokenizer: eod = vocab - 1)"},
    {"--tokenizer-model", TR_K_STRING, TR_SEC_DATA, F(tokenizer_model), .metavar = "PATH", .def = "none",
     .help = "tokenizer directory (tokenizer.json, tokenizer_config.json) or TikTokenizer rank file (.json), read at "
             "start: its vocabulary, eod and bos"},
    {"--vocab-file", TR_K_STRING, TR_SEC_DATA, .metavar = "FILE", .def = "none", .status = TR_ST_ACCEPTED,
     .reason = R_TOKENIZER, .help = "vocabulary of the BPE/WordPiece tokenizers"},
    {"--merge-file", TR_K_STRING, TR_SEC_DATA, .metavar = "FILE", .def = "none", .status = TR_ST_ACCEPTED,
     .reason = R_TOKENIZER, .help = "BPE merges"},
    {"--tiktoken-pattern", TR_K_ENUM, TR_SEC_DATA, F(tiktoken_pattern), .enum_as_string = true,
     .choices = TIKTOKEN_PATTERN, .metavar = "V", .def = "none",
     .help = "TikTokenizer split pattern (Megatron's v1 or v2), read with --tokenizer-model at start"},
    {"--tiktoken-num-special-tokens", TR_K_INT, TR_SEC_DATA, F(tiktoken_num_special_tokens), GE(3), .metavar = "N",
     .def = "1000", .help = "TikTokenizer: ids 0..N-1 are special tokens (<unk> <s> </s>, then fillers)"},
    {"--eod-mask-loss", TR_K_BOOL, TR_SEC_DATA, F(eod_mask_loss), .def = "off",
     .help = "no loss on end-of-document tokens"},
    {"--reset-position-ids", TR_K_BOOL, TR_SEC_DATA, F(reset_position_ids), .def = "off",
     .help = "restart positions after each end-of-document token"},
    {"--reset-attention-mask", TR_K_BOOL, TR_SEC_DATA, F(reset_attention_mask), .def = "off", .status = TR_ST_REJECTED,
     .reason = "twinrun's attention masks causally over the whole sequence; per-document masks are not implemented: "
               "drop --reset-attention-mask (--reset-position-ids and --eod-mask-loss work)",
     .help = "no attention across end-of-document tokens"},
    {"--no-mmap-bin-files", TR_K_BOOL_OFF, TR_SEC_DATA, F(mmap_bin_files), .def = "mmap on",
     .help = "read .bin files with read() instead of mmap"},
    {"--no-create-attention-mask-in-dataloader", TR_K_BOOL, TR_SEC_DATA, .def = "masks made", .status = TR_ST_ACCEPTED,
     .reason = "twinrun's attention applies the causal mask inside the kernel; no mask tensor is built",
     .help = "do not build attention-mask tensors in the data loader"},
    {"--data-read-timeout-minutes", TR_K_DOUBLE, TR_SEC_DATA, F(data_read_timeout_minutes), GE(0), .metavar = "MIN",
     .def = "5",
     .help = "data-loader watchdog: a micro-batch's sample not read within MIN stops the rank, naming the file, byte "
             "offset and rank (0: off); below --distributed-timeout-minutes, so the stalled read is named before the "
             "peers' collective watchdog fires"},
    {"--num-workers", TR_K_INT, TR_SEC_DATA, F(num_workers), GE(0), .metavar = "N", .def = "2",
     .help = "data-loader worker threads"},
    {"--dataloader-type", TR_K_ENUM, TR_SEC_DATA, .choices = DATALOADER_TYPE, .metavar = "KIND", .def = "single",
     .status = TR_ST_ACCEPTED, .reason = "'single' is what twinrun does; the other kinds are refused",
     .help = "data-loader sampling"},
    {"--train-data-path", TR_K_LIST, TR_SEC_DATA, .metavar = "[W] PREFIX ...", .def = "none", .status = TR_ST_REJECTED,
     .reason = "separate per-split data paths are not supported yet; use --data-path with --split",
     .help = "training set of its own"},
    {"--valid-data-path", TR_K_LIST, TR_SEC_DATA, .metavar = "[W] PREFIX ...", .def = "none", .status = TR_ST_REJECTED,
     .reason = "separate per-split data paths are not supported yet; use --data-path with --split",
     .help = "validation set of its own"},
    {"--test-data-path", TR_K_LIST, TR_SEC_DATA, .metavar = "[W] PREFIX ...", .def = "none", .status = TR_ST_REJECTED,
     .reason = "separate per-split data paths are not supported yet; use --data-path with --split",
     .help = "test set of its own"},
    {"--data-args-path", TR_K_STRING, TR_SEC_DATA, .metavar = "FILE", .def = "none", .status = TR_ST_REJECTED,
     .reason = "reading --data-path from a file is not supported yet; pass the prefixes to --data-path",
     .help = "file holding the --data-path list"},

    /* ---- evaluation and logging ------------------------------------------------------------ */
    {"--log-interval", TR_K_INT, TR_SEC_LOGGING, F(log_interval), GE(1), .metavar = "N", .def = "100",
     .help = "iterations between log lines"},
    {"--eval-interval", TR_K_INT, TR_SEC_LOGGING, F(eval_interval), GE(1), .metavar = "N", .def = "1000",
     .help = "iterations between validation runs"},
    {"--eval-iters", TR_K_INT, TR_SEC_LOGGING, F(eval_iters), GE(0), .metavar = "N", .def = "100",
     .help = "batches per validation run; 0 skips validation"},
    {"--log-throughput", TR_K_BOOL, TR_SEC_LOGGING, F(log_throughput), .def = "off",
     .help = "add TFLOP/s per GPU to the log line"},
    {"--log-straggler", TR_K_BOOL, TR_SEC_LOGGING, F(log_straggler), .def = "off",
     .help = "at every log interval, compare each rank's busy time per iteration with the median and name the "
             "slowest (twin: simulated compute time; GPU: wall time)"},
    {"--tensorboard-dir", TR_K_STRING, TR_SEC_LOGGING, F(tensorboard_dir), .metavar = "DIR", .def = "none",
     .help = "write TensorBoard event files here (by the last rank, Megatron's tags)"},
    {"--tensorboard-log-interval", TR_K_INT, TR_SEC_LOGGING, F(tensorboard_log_interval), GE(1), .metavar = "N",
     .def = "1", .help = "iterations between TensorBoard writes"},
    {"--tensorboard-queue-size", TR_K_INT, TR_SEC_LOGGING, GE(1), .metavar = "N", .def = "1000",
     .status = TR_ST_ACCEPTED, .reason = "twinrun's TensorBoard writer flushes every event; there is no queue",
     .help = "pending TensorBoard events before a flush"},
    {"--log-timers-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, F(log_timers_to_tensorboard), .def = "off",
     .help = "iteration-time (and throughput with --log-throughput) to TensorBoard every --log-interval"},
    {"--log-validation-ppl-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, F(log_validation_ppl_to_tensorboard),
     .def = "off", .help = "validation perplexity to TensorBoard"},
    {"--log-memory-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, F(log_memory_to_tensorboard), .def = "off",
     .help = "device memory (allocated, peak) of the reporting rank to TensorBoard"},
    {"--no-log-loss-scale-to-tensorboard", TR_K_BOOL_OFF, TR_SEC_LOGGING, F(log_loss_scale_to_tensorboard),
     .def = "logged", .help = "leave the loss scale (always 1.0: bf16 and fp32 need no scaler) out of TensorBoard"},
    {"--log-loss-scale-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, F(log_loss_scale_to_tensorboard), .def = "on",
     .help = "loss scale to TensorBoard: Megatron's default, spelled out (Megatron itself has only the --no- form)"},
    {"--log-batch-size-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "the batch size goes to TensorBoard every iteration anyway (as in Megatron since the flag went away)",
     .help = "batch size to TensorBoard (Megatron before 2024)"},
    {"--log-world-size-to-tensorboard", TR_K_BOOL, TR_SEC_LOGGING, F(log_world_size_to_tensorboard), .def = "off",
     .help = "world size to TensorBoard"},
    {"--log-params-norm", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_WARNED,
     .reason = "the parameter norm is not computed; the log line has no 'params norm' field",
     .help = "log the parameter L2 norm"},
    {"--log-num-zeros-in-grad", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_WARNED,
     .reason = "zeros in the gradient are not counted; the log line has no 'num zeros' field",
     .help = "log how many gradient elements are zero"},
    {"--log-progress", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "progress.txt is not written; the log lines carry the same numbers",
     .help = "append job progress to progress.txt"},
    {"--timing-log-level", TR_K_INT, TR_SEC_LOGGING, .range = {.has_min = true, .min = 0, .has_max = true, .max = 2},
     .metavar = "N", .def = "0", .status = TR_ST_ACCEPTED,
     .reason = "twinrun reports per-iteration time only; the twin's trace has the rest",
     .help = "detail of Megatron's timers"},
    {"--wandb-project", TR_K_STRING, TR_SEC_LOGGING, .metavar = "NAME", .def = "none", .status = TR_ST_WARNED,
     .reason = "there is no Weights & Biases client; use --metrics-jsonl or --tensorboard-dir",
     .help = "Weights & Biases project"},
    {"--wandb-exp-name", TR_K_STRING, TR_SEC_LOGGING, .metavar = "NAME", .def = "none", .status = TR_ST_WARNED,
     .reason = "there is no Weights & Biases client; use --metrics-jsonl or --tensorboard-dir",
     .help = "Weights & Biases run name"},
    {"--wandb-save-dir", TR_K_STRING, TR_SEC_LOGGING, .metavar = "DIR", .def = "none", .status = TR_ST_WARNED,
     .reason = "there is no Weights & Biases client; use --metrics-jsonl or --tensorboard-dir",
     .help = "Weights & Biases local directory"},
    {"--profile", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "no nsys/PyTorch profiler hooks; the twin's scenario runner writes a Perfetto trace of the whole run",
     .help = "profile iterations --profile-step-start to --profile-step-end"},
    {"--profile-step-start", TR_K_INT, TR_SEC_LOGGING, GE(0), .metavar = "N", .def = "10", .status = TR_ST_ACCEPTED,
     .reason = "no nsys/PyTorch profiler hooks; the twin's scenario runner writes a Perfetto trace of the whole run",
     .help = "first profiled iteration"},
    {"--profile-step-end", TR_K_INT, TR_SEC_LOGGING, GE(0), .metavar = "N", .def = "12", .status = TR_ST_ACCEPTED,
     .reason = "no nsys/PyTorch profiler hooks; the twin's scenario runner writes a Perfetto trace of the whole run",
     .help = "iteration where profiling stops"},
    {"--use-pytorch-profiler", TR_K_BOOL, TR_SEC_LOGGING, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "no nsys/PyTorch profiler hooks; the twin's scenario runner writes a Perfetto trace of the whole run",
     .help = "PyTorch profiler instead of nsys"},

    /* ---- checkpoints ----------------------------------------------------------------------- */
    {"--save", TR_K_STRING, TR_SEC_CHECKPOINT, F(save), .metavar = "DIR", .def = "none",
     .help = "write checkpoints here (iter_NNNNNNN/ and latest_checkpointed_iteration.txt; an iter_NNNNNNN path "
             "means the directory above it); locked for the job's life"},
    {"--save-interval", TR_K_INT, TR_SEC_CHECKPOINT, F(save_interval), GE(1), .metavar = "N",
     .def = "none (required with --save)", .help = "iterations between checkpoints"},
    {"--load", TR_K_STRING, TR_SEC_CHECKPOINT, F(load), .metavar = "DIR", .def = "none",
     .help = "resume from the latest checkpoint here, or from DIR/iter_NNNNNNN as given; an absent or empty DIR "
             "starts from scratch, anything else that cannot be loaded is an error"},
    {"--ckpt-format", TR_K_ENUM, TR_SEC_CHECKPOINT, F(ckpt_format), .enum_as_string = true, .choices = CKPT_FORMAT,
     .metavar = "FMT", .def = "torch_dist", .status = TR_ST_ACCEPTED, .reason = R_CKPT_FORMAT,
     .help = "checkpoint format Megatron would write"},
    {"--ckpt-step", TR_K_INT64, TR_SEC_CHECKPOINT, F(ckpt_step), GE(0), .metavar = "N", .def = "latest",
     .help = "load the checkpoint of iteration N from --load instead of the latest"},
    {"--exit-on-missing-checkpoint", TR_K_BOOL, TR_SEC_CHECKPOINT, F(exit_on_missing_checkpoint), .def = "off",
     .help = "when --load holds no checkpoint, say so and exit 1 (as Megatron does) instead of training from scratch"},
    {"--use-checkpoint-args", TR_K_BOOL, TR_SEC_CHECKPOINT, F(use_checkpoint_args), .def = "off",
     .help = "take the model flags (shape, norm, RoPE, biases) from the --load checkpoint instead of the command line"},
    {"--finetune", TR_K_BOOL, TR_SEC_CHECKPOINT, F(finetune), .def = "off",
     .help = "load weights only; iteration 0, fresh optimizer, scheduler and RNG"},
    {"--no-load-optim", TR_K_BOOL, TR_SEC_CHECKPOINT, F(no_load_optim), .def = "off",
     .help = "do not load optimizer state"},
    {"--no-load-rng", TR_K_BOOL, TR_SEC_CHECKPOINT, F(no_load_rng), .def = "off",
     .help = "do not load RNG state: twinrun's is the seed, so a resume may take another --seed (the data order "
             "changes from there)"},
    {"--override-opt_param-scheduler", TR_K_BOOL, TR_SEC_CHECKPOINT, F(override_opt_param_scheduler), .def = "off",
     .help = "on resume, use this run's learning-rate schedule where it differs from the checkpoint's"},
    {"--use-checkpoint-opt_param-scheduler", TR_K_BOOL, TR_SEC_CHECKPOINT, F(use_checkpoint_opt_param_scheduler),
     .def = "off",
     .help = "on resume, take the learning-rate schedule from the checkpoint instead of the command line"},
    {"--no-save-optim", TR_K_BOOL, TR_SEC_CHECKPOINT, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun always saves optimizer and RNG state so that a resume is bit-exact",
     .help = "leave optimizer state out of checkpoints"},
    {"--no-save-rng", TR_K_BOOL, TR_SEC_CHECKPOINT, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun always saves optimizer and RNG state so that a resume is bit-exact",
     .help = "leave RNG state out of checkpoints"},
    {"--async-save", TR_K_BOOL, TR_SEC_CHECKPOINT, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "checkpoints are written synchronously; the files are the same",
     .help = "write checkpoints in the background"},
    {"--use-dist-ckpt", TR_K_BOOL, TR_SEC_CHECKPOINT, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "deprecated in Megatron in favour of --ckpt-format; twinrun's checkpoints are always sharded",
     .help = "old switch for distributed checkpoints"},
    {"--auto-detect-ckpt-format", TR_K_BOOL, TR_SEC_CHECKPOINT, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun reads only its own checkpoint format", .help = "detect the format of --load"},

    /* ---- performance switches of Megatron's PyTorch stack ------------------------------------ */
    {"--empty-unused-memory-level", TR_K_ENUM, TR_SEC_PERF, .choices = EMPTY_MEM, .metavar = "N", .def = "0",
     .status = TR_ST_ACCEPTED, .reason = "no PyTorch caching allocator to empty; twinrun allocates its buffers once",
     .help = "release cached GPU memory every iteration"},
    {"--no-masked-softmax-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED, .reason = R_FUSION,
     .help = "unfused scale-mask-softmax"},
    {"--no-bias-swiglu-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED, .reason = R_FUSION,
     .help = "unfused bias + SwiGLU"},
    {"--no-bias-gelu-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED, .reason = R_FUSION,
     .help = "unfused bias + GeLU"},
    {"--no-bias-dropout-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED, .reason = R_FUSION,
     .help = "unfused bias + dropout + add"},
    {"--no-rope-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED, .reason = R_FUSION,
     .help = "unfused RoPE"},
    {"--no-gradient-accumulation-fusion", TR_K_BOOL, TR_SEC_PERF, .def = "fused", .status = TR_ST_ACCEPTED,
     .reason = R_FUSION, .help = "accumulate weight gradients outside the GEMM"},
    {"--no-persist-layer-norm", TR_K_BOOL, TR_SEC_PERF, .def = "persistent", .status = TR_ST_ACCEPTED,
     .reason = R_FUSION, .help = "non-persistent LayerNorm kernel"},
    {"--attention-softmax-in-fp32", TR_K_BOOL, TR_SEC_PERF, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun's attention always computes the softmax in fp32", .help = "fp32 softmax inside attention"},
    {"--accumulate-allreduce-grads-in-fp32", TR_K_BOOL, TR_SEC_PERF, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "gradients are fp32 unless --grad-reduce-in-bf16", .help = "fp32 gradient accumulation and reduction"},
    {"--use-cpu-initialization", TR_K_BOOL, TR_SEC_PERF, .def = "off", .status = TR_ST_ACCEPTED,
     .reason = "twinrun's initialisation is layout-independent on any device", .help = "initialise weights on the CPU"},
    {"--fp8-format", TR_K_ENUM, TR_SEC_PERF, F(fp8), .choices = FP8_FORMAT, .metavar = "FMT", .def = "none (no FP8)",
     .help = "the linear layers' GEMMs in FP8 with delayed scaling: e4m3 everywhere, or hybrid (gradients in "
             "e5m2); needs --bf16 (docs/fp8.md)"},
    {"--fp8-recipe", TR_K_ENUM, TR_SEC_PERF, F(fp8_recipe), .choices = FP8_RECIPE, .metavar = "RECIPE",
     .def = "delayed", .help = "FP8 scaling recipe: delayed (per-tensor scales from the amax history)"},
    {"--fp8-margin", TR_K_INT, TR_SEC_PERF, F(fp8_margin), RANGE(0, 64), .metavar = "N", .def = "0",
     .help = "scale = FP8 max x 2^-N / amax"},
    {"--fp8-amax-history-len", TR_K_INT, TR_SEC_PERF, F(fp8_amax_history_len), RANGE(1, 65536), .metavar = "N",
     .def = "1", .help = "passes of amax history per FP8 tensor"},
    {"--fp8-amax-compute-algo", TR_K_ENUM, TR_SEC_PERF, F(fp8_amax_compute_algo), .choices = FP8_AMAX_ALGO,
     .metavar = "ALGO", .def = "most_recent", .help = "how amax is taken from the history"},
    {"--no-fp8-wgrad", TR_K_BOOL_OFF, TR_SEC_PERF, F(fp8_wgrad), .def = "off",
     .help = "with --fp8-format: the weight-gradient GEMM in bf16"},
    {"--fp8-param-gather", TR_K_BOOL, TR_SEC_PERF, F(fp8_param_gather), .def = "off",
     .help = "keep the FP8 layers' weights in FP8 and all-gather them in FP8 (needs --use-distributed-optimizer)"},

    /* ---- twinrun's own ------------------------------------------------------------------------ */
    {"--hf-load", TR_K_STRING, TR_SEC_TWINRUN, F(hf_load), .metavar = "DIR", .def = "none",
     .help = "import a Hugging Face Llama (config.json + *.safetensors); the model flags come from it"},
    {"--metrics-jsonl", TR_K_STRING, TR_SEC_TWINRUN, F(metrics_jsonl), .metavar = "FILE", .def = "none",
     .help = "append one JSON object per iteration (loss, lr, grad norm, timings)"},
    {"--tokens-file", TR_K_STRING, TR_SEC_TWINRUN, F(tokens_file), .metavar = "FILE", .def = "none",
     .help = "raw little-endian int32 tokens [iters, global batch, seq+1] instead of a dataset (tests)"},
    {"--fp8-amax-spike", TR_K_ENUM, TR_SEC_TWINRUN, F(fp8_amax_spike), .choices = FP8_SPIKE, .metavar = "ACTION",
     .def = "warn",
     .help = "with --fp8-format, an FP8 tensor's amax 16x beyond what its scale allowed on a rank: warn, naming "
             "it, or stop the job before the step is saved (a supervisor resumes from the checkpoint before it)"},
    {"--keep-last", TR_K_INT, TR_SEC_TWINRUN, F(keep_last), GE(0), .metavar = "N", .def = "0 (keep all)",
     .help = "after each save keep only the N newest checkpoints in --save (never the newest complete one)"},
    {"--overwrite-checkpoints", TR_K_BOOL, TR_SEC_TWINRUN, F(overwrite_checkpoints), .def = "off",
     .help = "let this run save over complete checkpoints in --save (a fresh start into a directory that holds "
             "some, or a resume from an older --ckpt-step); without it such a run is refused at start"},
    {"--allow-data-change", TR_K_BOOL, TR_SEC_TWINRUN, F(allow_data_change), .def = "off",
     .help = "resume although --data-path or its files differ from the checkpoint's (the data position carries over "
             "in samples)"},
    {"--allow-tokenizer-change", TR_K_BOOL, TR_SEC_TWINRUN, F(allow_tokenizer_change), .def = "off",
     .help = "resume although the tokenizer differs from the checkpoint's"},
    {"--predict", TR_K_BOOL, TR_SEC_TWINRUN, F(predict), .def = "off",
     .help = "twin build only: run the job at full size in shape-only mode (memory and simulated time, no math) and "
             "report whether it fits and how fast a step is (docs/prediction.md)"},
    {"--predict-json", TR_K_STRING, TR_SEC_TWINRUN, F(predict_json), .metavar = "FILE", .def = "none",
     .help = "with --predict: also write the report as JSON (device, capacity, step time, tokens/s, MFU, memory "
             "per pipeline stage); written to a temporary name and renamed over FILE once whole"},
};

_Static_assert(sizeof FLAGS / sizeof FLAGS[0] <= TR_FLAGS_MAX, "raise TR_FLAGS_MAX");
_Static_assert(sizeof(tr_pos_emb) == sizeof(int) && sizeof(tr_norm_type) == sizeof(int) &&
                   sizeof(tr_lr_style) == sizeof(int),
               "enum fields are written as int");

const tr_flag *tr_flags(size_t *count) {
    *count = sizeof FLAGS / sizeof FLAGS[0];
    return FLAGS;
}

static int check_split(const char *flag, const char *v, char *err, size_t errlen) {
    int n = 0;
    double sum = 0;
    for (const char *p = v; *p;) {
        if (!((*p >= '0' && *p <= '9') || *p == '.')) {
            p++;
            continue;
        }
        const char *start = p;
        int dots = 0, digits = 0;
        while ((*p >= '0' && *p <= '9') || *p == '.') {
            if (*p == '.') dots++;
            else digits++;
            p++;
        }
        if (dots > 1 || digits == 0)
            return tr_errf(err, errlen, "%s '%s': '%.*s' is not a number; give proportions like 99,1,0", flag, v,
                           (int)(p - start), start);
        if (++n > 3)
            return tr_errf(err, errlen, "%s '%s' has more than three parts; give train,valid,test like 99,1,0", flag,
                           v);
        char num[64];
        size_t len = (size_t)(p - start);
        if (len >= sizeof num) return tr_errf(err, errlen, "%s: a proportion has %zu digits; keep it short", flag, len);
        for (size_t i = 0; i < len; i++) num[i] = start[i];
        num[len] = 0;
        double x = 0;
        if (sscanf(num, "%lf", &x) == 1) sum += x;
    }
    if (n == 0 || !(sum > 0))
        return tr_errf(err, errlen, "%s '%s' has no positive proportion; give train,valid,test like 99,1,0", flag, v);
    return 0;
}
