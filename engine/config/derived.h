/* What Megatron derives when a flag is absent (validate_args in megatron/training/arguments.py).
 * validate.c checks these effective values on a config that may not hold them yet; finalize.c
 * writes them in. Private to engine/config. */
#ifndef TWINRUN_ENGINE_CONFIG_DERIVED_H
#define TWINRUN_ENGINE_CONFIG_DERIVED_H

#include <stdint.h>

#include "twinrun/config.h"

/* Head dimension: --kv-channels, else hidden / heads (0 when that is not a whole number). */
static inline int64_t tr_eff_kv_channels(const tr_config *c) {
    if (c->kv_channels > 0) return c->kv_channels;
    if (c->num_attention_heads <= 0 || c->hidden_size % c->num_attention_heads) return 0;
    return c->hidden_size / c->num_attention_heads;
}

/* K/V heads: every head without --group-query-attention; with it, --num-query-groups or
 * Megatron's argparse default of 1. */
static inline int64_t tr_eff_query_groups(const tr_config *c) {
    if (!c->group_query_attention) return c->num_attention_heads;
    return c->num_query_groups > 0 ? c->num_query_groups : 1;
}

/* MLP width: --ffn-hidden-size, else 4h, or with --swiglu int((4h * 2/3) / 64) * 64 — Megatron's
 * float expression; floor(floor(8h/3)/64) is the same number in integers. */
static inline int64_t tr_eff_ffn_hidden_size(const tr_config *c) {
    if (c->ffn_hidden_size > 0) return c->ffn_hidden_size;
    int64_t h = c->hidden_size;
    return c->swiglu ? (8 * h / 3) / 64 * 64 : 4 * h;
}

/* TP * PP * CP, the ranks of one model replica. Only once validate has seen that it divides the
 * world (before that the product may overflow). */
static inline int64_t tr_model_parallel(const tr_config *c) {
    return (int64_t)c->tensor_model_parallel_size * c->pipeline_model_parallel_size * c->context_parallel_size;
}

/* Global batch: --global-batch-size, else micro-batch-size * DP. */
static inline int64_t tr_eff_global_batch(const tr_config *c, int world) {
    if (c->global_batch_size > 0) return c->global_batch_size;
    int64_t mp = tr_model_parallel(c);
    return mp > 0 ? (int64_t)c->micro_batch_size * (world / mp) : 0;
}

#endif
