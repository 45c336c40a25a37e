/* The model settings a checkpoint must match on load, named by their Megatron flags so the
 * message says which flag to change. seq_length is recorded but may change (Megatron allows it). */
#include <stdio.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

void ckpt_model_from_config(const tr_config *cfg, ckpt_model_shape *s) {
    memset(s, 0, sizeof *s);
    s->num_layers = cfg->num_layers, s->hidden_size = cfg->hidden_size, s->ffn_hidden_size = cfg->ffn_hidden_size;
    s->num_attention_heads = cfg->num_attention_heads, s->num_query_groups = cfg->num_query_groups;
    s->kv_channels = cfg->kv_channels, s->vocab_size = cfg->vocab_size;
    s->make_vocab_size_divisible_by = cfg->make_vocab_size_divisible_by;
    s->max_position_embeddings = cfg->max_position_embeddings, s->seq_length = cfg->seq_length;
    s->normalization = (int)cfg->normalization, s->swiglu = cfg->swiglu;
    s->untie_embeddings_and_output_weights = cfg->untie_embeddings_and_output_weights;
    s->rotary_base = cfg->rotary_base, s->norm_epsilon = cfg->norm_epsilon;
    s->has_architecture = true;
    s->apply_layernorm_1p = cfg->apply_layernorm_1p, s->add_bias_linear = !cfg->disable_bias_linear;
    s->add_qkv_bias = cfg->add_qkv_bias || !cfg->disable_bias_linear, s->qk_layernorm = cfg->qk_layernorm;
    s->rotary_percent = cfg->rotary_percent;
}

void ckpt_model_to_config(const ckpt_model_shape *s, struct tr_config *cfg) {
    cfg->num_layers = s->num_layers, cfg->hidden_size = s->hidden_size, cfg->ffn_hidden_size = s->ffn_hidden_size;
    cfg->num_attention_heads = s->num_attention_heads, cfg->kv_channels = s->kv_channels;
    cfg->num_query_groups = s->num_query_groups;
    cfg->group_query_attention = s->num_query_groups != s->num_attention_heads || cfg->group_query_attention;
    cfg->vocab_size = s->vocab_size, cfg->make_vocab_size_divisible_by = s->make_vocab_size_divisible_by;
    cfg->max_position_embeddings = s->max_position_embeddings;
    cfg->normalization = (tr_norm_type)s->normalization, cfg->swiglu = s->swiglu;
    cfg->untie_embeddings_and_output_weights = s->untie_embeddings_and_output_weights;
    cfg->rotary_base = s->rotary_base, cfg->norm_epsilon = s->norm_epsilon;
    cfg->position_embedding_type = TR_POS_ROPE; /* the only kind a twinrun checkpoint can hold */
    if (!s->has_architecture) return;
    cfg->apply_layernorm_1p = s->apply_layernorm_1p, cfg->disable_bias_linear = !s->add_bias_linear;
    cfg->add_qkv_bias = s->add_qkv_bias && !s->add_bias_linear, cfg->qk_layernorm = s->qk_layernorm;
    cfg->rotary_percent = s->rotary_percent;
}

int ckpt_model_compare(const ckpt_model_shape *a, const ckpt_model_shape *b, const char *where, char *err,
                       size_t errlen) {
    const struct {
        const char *flag;
        int x, y;
    } ints[] = {
        {"--num-layers", a->num_layers, b->num_layers},
        {"--hidden-size", a->hidden_size, b->hidden_size},
        {"--ffn-hidden-size", a->ffn_hidden_size, b->ffn_hidden_size},
        {"--num-attention-heads", a->num_attention_heads, b->num_attention_heads},
        {"--num-query-groups", a->num_query_groups, b->num_query_groups},
        {"--kv-channels", a->kv_channels, b->kv_channels},
        {"--vocab-size", a->vocab_size, b->vocab_size},
        {"--make-vocab-size-divisible-by", a->make_vocab_size_divisible_by, b->make_vocab_size_divisible_by},
        {"--max-position-embeddings", a->max_position_embeddings, b->max_position_embeddings},
        {"--normalization (0 LayerNorm, 1 RMSNorm)", a->normalization, b->normalization},
        {"--swiglu", a->swiglu, b->swiglu},
        {"--untie-embeddings-and-output-weights", a->untie_embeddings_and_output_weights,
         b->untie_embeddings_and_output_weights},
    };
    const int nints = sizeof ints / sizeof ints[0];
    /* a pre-issue-16 checkpoint did not record the rest: what it holds cannot be checked */
    const struct {
        const char *flag;
        int x, y;
    } arch[] = {
        {"--apply-layernorm-1p", a->apply_layernorm_1p, b->apply_layernorm_1p},
        {"linear biases (--add-bias-linear / --disable-bias-linear)", a->add_bias_linear, b->add_bias_linear},
        {"--add-qkv-bias", a->add_qkv_bias, b->add_qkv_bias},
        {"--qk-layernorm", a->qk_layernorm, b->qk_layernorm},
    };
    for (int i = 0; i < nints; i++)
        if (ints[i].x != ints[i].y)
            return tr_errf(err, errlen, "%s: the checkpoint has %s %d, this run %d; use the checkpoint's value", where,
                           ints[i].flag, ints[i].x, ints[i].y);
    if (a->has_architecture && b->has_architecture) {
        for (size_t i = 0; i < sizeof arch / sizeof arch[0]; i++)
            if (arch[i].x != arch[i].y)
                return tr_errf(err, errlen,
                               "%s: the checkpoint was saved %s %s, this run %s; %s it (or "
                               "--use-checkpoint-args takes the checkpoint's model flags)",
                               where, arch[i].x ? "with" : "without", arch[i].flag, arch[i].y ? "has it" : "has not",
                               arch[i].x ? "add" : "drop");
        if (a->rotary_percent != b->rotary_percent)
            return tr_errf(err, errlen, "%s: the checkpoint has --rotary-percent %.17g, this run %.17g", where,
                           a->rotary_percent, b->rotary_percent);
    }
    if (a->rotary_base != b->rotary_base)
        return tr_errf(err, errlen, "%s: the checkpoint has --rotary-base %.17g, this run %.17g", where, a->rotary_base,
                       b->rotary_base);
    if (a->norm_epsilon != b->norm_epsilon)
        return tr_errf(err, errlen, "%s: the checkpoint has --norm-epsilon %.17g, this run %.17g", where,
                       a->norm_epsilon, b->norm_epsilon);
    return 0;
}
