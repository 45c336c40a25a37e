/* Megatron-LM's defaults (megatron/training/arguments.py, core_v0.15) for every tr_config field.
 * 0 in a size or count means "not given": either required (validate says so) or derived by
 * tr_config_finalize the way Megatron derives it. */
#include <string.h>

#include "twinrun/config.h"

void tr_config_defaults(tr_config *cfg) {
    memset(cfg, 0, sizeof *cfg);

    /* model: the shape has no default in Megatron (required, or taken from --hf-load) */
    cfg->position_embedding_type = TR_POS_LEARNED; /* learned_absolute; Llama passes rope */
    cfg->rotary_base = 10000;
    cfg->rotary_percent = 1.0;
    cfg->normalization = TR_NORM_LAYERNORM;
    cfg->norm_epsilon = 1e-5;
    cfg->attention_dropout = 0.1;
    cfg->hidden_dropout = 0.1;
    cfg->init_method_std = 0.02;
    cfg->make_vocab_size_divisible_by = 128;
    cfg->tokenizer_eod = cfg->tokenizer_bos = -1;
    cfg->tiktoken_num_special_tokens = 1000;

    /* training: --lr has no default in Megatron; 0 here and validate insists on it */
    cfg->min_lr = 0.0;
    cfg->lr_warmup_init = 0.0;
    cfg->lr_decay_style = TR_LR_LINEAR;
    cfg->lr_warmup_fraction = -1.0; /* unset */
    cfg->clip_grad = 1.0;
    cfg->weight_decay = 0.01;
    cfg->adam_beta1 = 0.9;
    cfg->adam_beta2 = 0.999;
    cfg->adam_eps = 1e-8;
    cfg->check_for_nan_in_loss_and_grad = true;
    cfg->store_param_remainders = true;
    cfg->fp8_recipe = 1; /* delayed */
    cfg->fp8_amax_history_len = 1;
    cfg->fp8_amax_compute_algo = 1; /* most_recent */
    cfg->fp8_wgrad = true;
    cfg->seed = 1234;
    cfg->decoupled_lr = -1.0;     /* unset: the embedding and output layer follow --lr */
    cfg->decoupled_min_lr = -1.0; /* unset: they follow --min-lr */

    /* parallelism */
    cfg->tensor_model_parallel_size = 1;
    cfg->pipeline_model_parallel_size = 1;
    cfg->context_parallel_size = 1;

    /* data: Megatron's legacy split when --data-path comes without --split */
    strcpy(cfg->split, "969, 30, 1");
    cfg->mmap_bin_files = true;
    cfg->num_workers = 2;

    /* evaluation, logging, checkpoints */
    cfg->log_interval = 100;
    cfg->tensorboard_log_interval = 1;
    cfg->eval_interval = 1000;
    cfg->eval_iters = 100;
    cfg->distributed_timeout_minutes = 10;
    cfg->data_read_timeout_minutes = 5;
    cfg->log_loss_scale_to_tensorboard = true;
    cfg->ckpt_step = -1;
    strcpy(cfg->ckpt_format, "torch_dist");
}
