/* tr_config_validate: the cross-flag rules of Megatron's validate_args (and the asserts of its
 * LR scheduler and TransformerConfig) for a run on `world` ranks. Each message names the flags
 * and the fix. Works on a config before or after tr_config_finalize. */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "config/derived.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

static int check_required(const tr_config *c, tr_errlist *el) {
    const int before = el->n;
    const char *from_hf = c->hf_load[0] ? "" : " (or --hf-load DIR to take it from a Hugging Face config.json)";
    if (c->num_layers <= 0) tr_errlist_add(el, "--num-layers is required%s", from_hf);
    if (c->hidden_size <= 0) tr_errlist_add(el, "--hidden-size is required%s", from_hf);
    if (c->num_attention_heads <= 0) tr_errlist_add(el, "--num-attention-heads is required%s", from_hf);
    if (c->max_position_embeddings <= 0)
        tr_errlist_add(el, "--max-position-embeddings is required%s; Llama 3 uses 8192", from_hf);
    if (c->seq_length <= 0) tr_errlist_add(el, "--seq-length is required, e.g. --seq-length 8192");
    if (c->vocab_size <= 0)
        tr_errlist_add(el, "--vocab-size is required (Llama 3: 128256) unless --hf-load DIR provides it");
    if (c->micro_batch_size <= 0) tr_errlist_add(el, "--micro-batch-size is required, e.g. --micro-batch-size 1");
    if (!(c->lr > 0)) tr_errlist_add(el, "--lr is required and must be > 0 (Megatron has no default), e.g. --lr 3e-4");
    if (c->tensor_model_parallel_size < 1 || c->pipeline_model_parallel_size < 1 || c->context_parallel_size < 1)
        tr_errlist_add(el, "--tensor-model-parallel-size, --pipeline-model-parallel-size and "
                           "--context-parallel-size must be at least 1");
    return el->n > before ? -1 : 0;
}

static int check_layout(const tr_config *c, int world, tr_errlist *el) {
    const int tp = c->tensor_model_parallel_size, pp = c->pipeline_model_parallel_size, cp = c->context_parallel_size;
    if (world < 1) return tr_errlist_add(el, "world size %d: need at least one rank", world);
    /* world % (tp*pp*cp) one factor at a time: the product itself may not fit in 64 bits */
    if (world % tp || (world / tp) % pp || (world / tp / pp) % cp)
        return tr_errlist_add(el,
                              "world %d is not divisible by TP*PP*CP = %.0f (TP %d x PP %d x CP %d); "
                              "choose --tensor-model-parallel-size, --pipeline-model-parallel-size and "
                              "--context-parallel-size whose product divides the rank count",
                              world, (double)tp * pp * cp, tp, pp, cp);
    if (c->num_layers % pp)
        return tr_errlist_add(el,
                              "--num-layers %d is not divisible by --pipeline-model-parallel-size %d; "
                              "every pipeline stage must get the same number of layers",
                              c->num_layers, pp);
    if (cp > 1 && c->seq_length % (2 * cp))
        return tr_errlist_add(el,
                              "--seq-length %d must be a multiple of 2 x --context-parallel-size = %d "
                              "(each CP rank takes two chunks of the sequence)",
                              c->seq_length, 2 * cp);
    if (c->sequence_parallel && tp > 1 && (c->seq_length / cp) % tp)
        return tr_errlist_add(el,
                              "--sequence-parallel splits the sequence across TP: --seq-length %d / CP %d "
                              "must be divisible by --tensor-model-parallel-size %d",
                              c->seq_length, cp, tp);
    return 0;
}

static int check_model(const tr_config *c, tr_errlist *el) {
    const int tp = c->tensor_model_parallel_size, heads = c->num_attention_heads;
    if (c->kv_channels <= 0 && c->hidden_size % heads)
        return tr_errlist_add(el,
                              "--hidden-size %d is not divisible by --num-attention-heads %d; change one, or "
                              "give the head dimension with --kv-channels",
                              c->hidden_size, heads);
    if (c->group_query_attention && c->num_query_groups > 0) {
        if (c->num_query_groups > heads)
            return tr_errlist_add(el,
                                  "--num-query-groups %d is more than --num-attention-heads %d; a group "
                                  "shares K/V among query heads, so groups <= heads",
                                  c->num_query_groups, heads);
        if (heads % c->num_query_groups)
            return tr_errlist_add(el,
                                  "--num-query-groups %d does not divide --num-attention-heads %d; choose a "
                                  "divisor (Llama 3: 8 groups)",
                                  c->num_query_groups, heads);
    }
    if (heads % tp)
        return tr_errlist_add(el,
                              "--num-attention-heads %d is not divisible by --tensor-model-parallel-size %d; "
                              "each TP rank needs whole heads",
                              heads, tp);
    const int64_t groups = tr_eff_query_groups(c);
    if (groups % tp)
        return tr_errlist_add(el,
                              "%lld query groups (K/V heads) are not divisible by --tensor-model-parallel-size "
                              "%d; use fewer TP ranks or more --num-query-groups",
                              (long long)groups, tp);
    const int64_t ffn = tr_eff_ffn_hidden_size(c);
    if (ffn <= 0 || ffn > INT_MAX)
        return tr_errlist_add(el, "MLP width %lld (from --hidden-size %d) is out of range; give --ffn-hidden-size",
                              (long long)ffn, c->hidden_size);
    if (ffn % tp)
        return tr_errlist_add(el, "--ffn-hidden-size %lld is not divisible by --tensor-model-parallel-size %d",
                              (long long)ffn, tp);
    if (c->seq_length > c->max_position_embeddings)
        return tr_errlist_add(el,
                              "--seq-length %d exceeds --max-position-embeddings %d; raise "
                              "--max-position-embeddings or shorten the sequence",
                              c->seq_length, c->max_position_embeddings);
    if (c->position_embedding_type == TR_POS_ROPE) {
        if (!(c->rotary_percent > 0 && c->rotary_percent <= 1))
            return tr_errlist_add(el, "--rotary-percent %g must be in (0, 1]", c->rotary_percent);
        if (!(c->rotary_base > 0)) return tr_errlist_add(el, "--rotary-base %g must be > 0", c->rotary_base);
        const int64_t kv = tr_eff_kv_channels(c);
        const int64_t rot = (int64_t)((double)kv * c->rotary_percent);
        if (rot <= 0 || rot % 2)
            return tr_errlist_add(el,
                                  "RoPE rotates kv-channels %lld x --rotary-percent %g = %lld channels; that "
                                  "must be a positive even number: adjust --rotary-percent or --kv-channels",
                                  (long long)kv, c->rotary_percent, (long long)rot);
    }
    if (!(c->norm_epsilon > 0)) return tr_errlist_add(el, "--norm-epsilon %g must be > 0", c->norm_epsilon);
    if (c->make_vocab_size_divisible_by < 1)
        return tr_errlist_add(el, "--make-vocab-size-divisible-by %d must be at least 1",
                              c->make_vocab_size_divisible_by);
    /* the padded vocabulary (a multiple of --make-vocab-size-divisible-by x TP) is an int row count and
     * token ids are int32: a size whose padding passes INT32_MAX would wrap negative further on */
    const int64_t mult = (int64_t)c->make_vocab_size_divisible_by *
                         (c->tensor_model_parallel_size > 0 ? c->tensor_model_parallel_size : 1);
    const int64_t padded = ((int64_t)c->vocab_size + mult - 1) / mult * mult;
    if (c->vocab_size > 0 && padded > INT32_MAX)
        return tr_errlist_add(el,
                              "--vocab-size %d padded to a multiple of %lld (--make-vocab-size-divisible-by %d x "
                              "TP %d) is %lld, beyond %d (token ids are 32-bit); give the tokenizer's "
                              "vocabulary (Llama 3: 128256)",
                              c->vocab_size, (long long)mult, c->make_vocab_size_divisible_by,
                              c->tensor_model_parallel_size, (long long)padded, INT32_MAX);
    return 0;
}

static int check_batch(const tr_config *c, int world, tr_errlist *el) {
    const int64_t dp = world / tr_model_parallel(c);
    const int64_t step = (int64_t)c->micro_batch_size * dp;
    if (c->global_batch_size > 0) {
        if (c->global_batch_size % step)
            return tr_errlist_add(el,
                                  "--global-batch-size %d is not divisible by --micro-batch-size %d x DP %lld "
                                  "= %lld; make it a multiple of %lld",
                                  c->global_batch_size, c->micro_batch_size, (long long)dp, (long long)step,
                                  (long long)step);
    } else if (step > INT_MAX) {
        return tr_errlist_add(el, "--micro-batch-size %d x DP %lld overflows; give --global-batch-size",
                              c->micro_batch_size, (long long)dp);
    }
    return 0;
}

/* Megatron's iteration- vs sample-based rules and the learning rates' order. */
static int check_schedule_flags(const tr_config *c, tr_errlist *el) {
    const bool iters = c->train_iters > 0, samples = c->train_samples > 0;
    if (iters && samples) return tr_errlist_add(el, "give either --train-iters or --train-samples, not both");
    if (!iters && !samples) return tr_errlist_add(el, "give --train-iters N or --train-samples N");
    const bool fraction = c->lr_warmup_fraction >= 0;
    if (iters) {
        if (c->lr_decay_samples > 0 || c->lr_warmup_samples > 0)
            return tr_errlist_add(el, "--%s is for sample-based runs (--train-samples); with --train-iters use --%s",
                                  c->lr_decay_samples > 0 ? "lr-decay-samples" : "lr-warmup-samples",
                                  c->lr_decay_samples > 0 ? "lr-decay-iters"
                                                          : "lr-warmup-iters or --lr-warmup-fraction");
        if (fraction && c->lr_warmup_iters > 0)
            return tr_errlist_add(el, "give either --lr-warmup-fraction or --lr-warmup-iters, not both");
    } else {
        if (c->lr_decay_iters > 0 || c->lr_warmup_iters > 0)
            return tr_errlist_add(el, "--%s is for iteration-based runs (--train-iters); with --train-samples use --%s",
                                  c->lr_decay_iters > 0 ? "lr-decay-iters" : "lr-warmup-iters",
                                  c->lr_decay_iters > 0 ? "lr-decay-samples"
                                                        : "lr-warmup-samples or --lr-warmup-fraction");
        if (fraction && c->lr_warmup_samples > 0)
            return tr_errlist_add(el, "give either --lr-warmup-fraction or --lr-warmup-samples, not both");
    }
    if (c->lr_warmup_fraction >= 1)
        return tr_errlist_add(el, "--lr-warmup-fraction %g must be below 1", c->lr_warmup_fraction);
    if (c->min_lr < 0) return tr_errlist_add(el, "--min-lr %g must be >= 0", c->min_lr);
    if (c->min_lr > c->lr)
        return tr_errlist_add(el, "--min-lr %g is above --lr %g; the decay ends at --min-lr, so lower it", c->min_lr,
                              c->lr);
    if (c->lr_warmup_init > c->lr)
        return tr_errlist_add(el, "--lr-warmup-init %g is above --lr %g; warmup climbs from it to --lr",
                              c->lr_warmup_init, c->lr);
    if (c->decoupled_lr >= 0 && c->decoupled_min_lr > c->decoupled_lr)
        return tr_errlist_add(el, "--decoupled-min-lr %g is above --decoupled-lr %g; lower it", c->decoupled_min_lr,
                              c->decoupled_lr);
    return 0;
}

/* The scheduler's asserts, which need the global batch (and so a layout that divides the world). */
static int check_schedule(const tr_config *c, int world, tr_errlist *el) {
    if (check_schedule_flags(c, el)) return -1;
    const bool iters = c->train_iters > 0;
    const bool fraction = c->lr_warmup_fraction >= 0;

    /* the scheduler counts samples: warmup must end before the decay does */
    const int64_t gbs = tr_eff_global_batch(c, world);
    double decay, warmup;
    if (iters) {
        decay = (double)(c->lr_decay_iters > 0 ? c->lr_decay_iters : c->train_iters) * (double)gbs;
        warmup = fraction ? c->lr_warmup_fraction * decay : (double)c->lr_warmup_iters * (double)gbs;
    } else {
        decay = (double)(c->lr_decay_samples > 0 ? c->lr_decay_samples : c->train_samples);
        warmup = fraction ? c->lr_warmup_fraction * decay : (double)c->lr_warmup_samples;
    }
    if (!(warmup < decay))
        return tr_errlist_add(el,
                              "lr warmup (%.0f samples) must end before the decay span (%.0f samples); lower "
                              "--lr-warmup-%s or raise --lr-decay-%s",
                              warmup, decay, iters ? "iters" : "samples", iters ? "iters" : "samples");
    return 0;
}

static int check_data_and_output(const tr_config *c, tr_errlist *el) {
    const int before = el->n;
    const int sources = (c->n_data_path > 0) + c->mock_data + (c->tokens_file[0] != 0);
    if (sources > 1) tr_errlist_add(el, "give one data source: --data-path, --mock-data or --tokens-file, not several");
    if (sources == 0)
        tr_errlist_add(el, "no training data: give --data-path PREFIX, --mock-data, or --tokens-file FILE");
    if (c->save[0] && c->save_interval <= 0)
        tr_errlist_add(el, "--save needs --save-interval N (iterations between checkpoints)");
    if (c->eval_interval < 1 || c->log_interval < 1)
        tr_errlist_add(el, "--eval-interval and --log-interval must be at least 1");
    if (c->context_parallel_size > 1 && c->reset_position_ids)
        tr_errlist_add(el,
                       "--context-parallel-size %d with --reset-position-ids is not supported yet (the "
                       "all-gathered attention assumes positions 0..seq-1); drop one of them",
                       c->context_parallel_size);
    return el->n > before ? -1 : 0;
}

/* Megatron's TransformerConfig rules for activation recomputation, for this pipeline stage's layers. */
static int check_recompute(const tr_config *c, tr_errlist *el) {
    const int stage_layers = c->pipeline_model_parallel_size > 0 ? c->num_layers / c->pipeline_model_parallel_size : 0;
    if (c->recompute_granularity == TR_RECOMPUTE_NONE) return 0;
    if (c->recompute_granularity == TR_RECOMPUTE_SELECTIVE) {
        if (c->recompute_method != TR_RECOMPUTE_METHOD_NONE)
            return tr_errlist_add(el, "--recompute-method is for --recompute-granularity full; selective "
                                      "recomputation covers every layer (Megatron refuses the pair too): drop it");
        if (c->recompute_num_layers > 0)
            return tr_errlist_add(el, "--recompute-num-layers is for --recompute-granularity full; drop it with "
                                      "selective recomputation (Megatron refuses the pair too)");
        return 0;
    }
    if (c->recompute_method == TR_RECOMPUTE_METHOD_NONE)
        return tr_errlist_add(el, "--recompute-granularity full needs --recompute-method uniform or block");
    if (c->recompute_num_layers <= 0)
        return tr_errlist_add(el,
                              "--recompute-granularity full needs --recompute-num-layers N, between 1 and the "
                              "%d layers of a pipeline stage",
                              stage_layers);
    if (c->recompute_method == TR_RECOMPUTE_METHOD_UNIFORM && stage_layers > 0 &&
        stage_layers % c->recompute_num_layers)
        return tr_errlist_add(el,
                              "--recompute-method uniform cuts each pipeline stage's %d layers into units of "
                              "--recompute-num-layers %d, which must divide it (Megatron fails on the last, "
                              "short unit)",
                              stage_layers, c->recompute_num_layers);
    return 0;
}

/* --predict runs the engine on device memory that holds nothing: whatever would read real weights
 * or inject faults into real values cannot come with it. (--save is dropped with a warning by
 * tr_config_finalize: the flags of a real job still predict.) */
static void check_predict(const tr_config *c, tr_errlist *el) {
    if (c->predict_json[0] && !c->predict)
        tr_errlist_add(el, "--predict-json %s writes the predict report: give --predict too", c->predict_json);
    if (!c->predict) return;
    if (c->load[0])
        tr_errlist_add(el,
                       "--predict starts from a fresh model and reads no checkpoint (its device memory holds "
                       "nothing): drop --load %s",
                       c->load);
    if (c->hf_load[0])
        tr_errlist_add(el,
                       "--predict reads no weights: drop --hf-load %s and give the model flags (--num-layers, "
                       "--hidden-size, ...) from its config.json",
                       c->hf_load);
    if (c->faults)
        tr_errlist_add(el, "--predict computes no values, so injected faults (TWINRUN_FAULTS, a scenario's faults) "
                           "would test nothing: run them without --predict");
}

/* Flags that only mean something together with another one. */
static int check_features(const tr_config *c, tr_errlist *el) {
    const int before = el->n;
    check_recompute(c, el);
    if (c->ckpt_step >= 0 && !c->load[0])
        tr_errlist_add(el, "--ckpt-step %lld names a checkpoint to load: give --load DIR too", (long long)c->ckpt_step);
    if (c->use_checkpoint_args && !c->load[0])
        tr_errlist_add(el, "--use-checkpoint-args takes the model flags from the checkpoint: give --load DIR too");
    check_predict(c, el);
    /* Megatron's rules (validate_args): the parameter gather overlaps the distributed optimizer's buckets */
    if (c->overlap_param_gather && !c->use_distributed_optimizer)
        tr_errlist_add(el, "--overlap-param-gather gathers the distributed optimizer's shards: add "
                           "--use-distributed-optimizer, or drop --overlap-param-gather");
    if (c->overlap_param_gather && !c->overlap_grad_reduce)
        tr_errlist_add(el,
                       "--overlap-param-gather works on --overlap-grad-reduce's buckets: add --overlap-grad-reduce");
    if (c->fp8 != TR_FP8_MODE_NONE && !c->bf16)
        tr_errlist_add(el, "--fp8-format runs the linear layers in FP8 around a bf16 model (Transformer Engine's "
                           "recipe; docs/fp8.md): add --bf16");
    if (c->fp8_param_gather && !c->use_distributed_optimizer)
        tr_errlist_add(el, "--fp8-param-gather all-gathers the distributed optimizer's FP8 shards (Megatron's rule): "
                           "add --use-distributed-optimizer, or drop --fp8-param-gather");
    if (c->fp8 == TR_FP8_MODE_NONE && c->fp8_param_gather)
        tr_errlist_add(el, "--fp8-param-gather keeps FP8 parameters, which only an FP8 run has: add --fp8-format "
                           "hybrid (or e4m3), or drop --fp8-param-gather");
    if (c->deterministic_mode) {
        /* Megatron's rule (validate_args): NCCL must be pinned to an algorithm whose reductions have a
         * fixed order; NVLS (NVLink SHARP) reduces in the switch */
        static const char *const algos[] = {"Tree", "Ring", "CollnetDirect", "CollnetChain", "^NVLS"};
        bool ok = false;
        for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) ok = ok || strcmp(c->nccl_algo, algos[i]) == 0;
        if (!ok)
            tr_errlist_add(el,
                           "--deterministic-mode needs NCCL_ALGO set to Tree, Ring, CollnetDirect, CollnetChain or "
                           "^NVLS (it is %s%s%s), as Megatron requires: e.g. export NCCL_ALGO=Ring",
                           c->nccl_algo[0] ? "'" : "unset", c->nccl_algo, c->nccl_algo[0] ? "'" : "");
    }
    return el->n > before ? -1 : 0;
}

int tr_config_collect_errors(const tr_config *cfg, int world, tr_errlist *el) {
    const int before = el->n;
    if (!cfg) return tr_errlist_add(el, "tr_config_validate: no config");
    /* every independent group is checked, so one run names every problem; a group whose arithmetic
     * needs an earlier one to hold (sizes set, the layout dividing the world) waits for it */
    const bool required_ok = check_required(cfg, el) == 0;
    const bool layout_ok = required_ok && check_layout(cfg, world, el) == 0;
    if (required_ok) check_model(cfg, el);
    if (layout_ok) {
        check_batch(cfg, world, el);
        check_schedule(cfg, world, el);
    } else if (required_ok) {
        check_schedule_flags(cfg, el);
    }
    check_data_and_output(cfg, el);
    check_features(cfg, el);
    return el->n > before ? -1 : 0;
}

int tr_config_validate(const tr_config *cfg, int world, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    tr_errlist el;
    tr_errlist_init(&el);
    tr_config_collect_errors(cfg, world, &el);
    return tr_errlist_format(&el, err, errlen);
}
