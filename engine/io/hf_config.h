/* Hugging Face config.json for LlamaForCausalLM (transformers 4.x and 5.x), validated strictly,
 * and its mapping onto the Megatron-style tr_config. */
#ifndef TWINRUN_ENGINE_IO_HF_CONFIG_H
#define TWINRUN_ENGINE_IO_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct tr_config;

typedef struct hf_llama_config {
    int hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads;
    int head_dim; /* config's head_dim, or hidden/heads when absent */
    int vocab_size, max_position_embeddings;
    double rms_norm_eps, rope_theta;
    bool tie_word_embeddings;
    bool attention_bias, mlp_bias; /* biases on q, k, v, o / on gate, up, down (transformers' LlamaConfig) */
    /* Llama 3.1 rope_scaling (rope_type "llama3"); has_rope_scaling false for "default"/absent */
    bool has_rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
} hf_llama_config;

/* Parses config.json text (len bytes, need not be NUL-terminated). Required: model_type "llama",
 * hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size,
 * max_position_embeddings, rms_norm_eps, and a RoPE base (top-level rope_theta as in 4.x, or
 * rope_parameters.rope_theta as in 5.x). Optional with transformers' defaults:
 * num_key_value_heads (= heads), head_dim (= hidden / heads), tie_word_embeddings (false),
 * attention_bias and mlp_bias (false; both true is Megatron's linear biases, one without the other has no
 * Megatron equivalent and is refused),
 * hidden_act ("silu", the only one accepted), rope_scaling / rope_parameters with rope_type
 * "default" or "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings all required for llama3). Returns 0, or -1 with a message
 * naming path_for_messages, the key, the problem and the fix. */
int hf_config_parse(hf_llama_config *out, const char *json, size_t len, const char *path_for_messages, char *err,
                    size_t errlen);

/* Reads and parses the file at path. */
int hf_config_load(hf_llama_config *out, const char *path, char *err, size_t errlen);

/* Copies the model shape into a Megatron config: num_layers, hidden_size, ffn_hidden_size,
 * num_attention_heads, group_query_attention (kv < heads), num_query_groups, kv_channels,
 * vocab_size, max_position_embeddings, rotary_base, norm_epsilon, normalization = RMSNorm,
 * swiglu, position embedding rope, untie (= !tie_word_embeddings), the linear biases. A field
 * the user already set (different from tr_config_defaults) that disagrees with the HF config is
 * an error naming both (e.g. --num-layers 4 vs num_hidden_layers 2), as are settings Llama cannot
 * have (--apply-layernorm-1p, --rotary-percent below 1) and Llama 3.1 rope_scaling, which
 * tr_config and the RoPE kernel cannot express yet (loading it would silently train with other
 * frequencies). cfg is unchanged on error. */
int hf_config_apply(const hf_llama_config *hf, struct tr_config *cfg, char *err, size_t errlen);

#endif
