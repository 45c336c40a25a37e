/* Tiny model configurations (fixture.h): the few shapes the model, training and checkpoint tests build,
 * so that a change to what "a tiny Llama 3" means is made once. */
#include <stdio.h>

#include "common/fixture.h"

void fx_tiny_llama(tr_config *c, int hidden, int ffn, int seq, int vocab) {
    tr_config_defaults(c);
    c->num_layers = 2, c->hidden_size = hidden, c->ffn_hidden_size = ffn, c->num_attention_heads = 4;
    c->group_query_attention = true, c->num_query_groups = 2;
    c->seq_length = seq, c->max_position_embeddings = seq, c->vocab_size = vocab;
    c->position_embedding_type = TR_POS_ROPE, c->normalization = TR_NORM_RMSNORM;
    c->swiglu = true, c->untie_embeddings_and_output_weights = true, c->disable_bias_linear = true;
    c->micro_batch_size = 1, c->global_batch_size = 1;
}

int fx_tiny_gqa(tr_config *c, hf_llama_config *hf, char *err, size_t errlen) {
    hf_llama_config own;
    if (!hf) hf = &own;
    tr_config_defaults(c);
    if (hf_config_load(hf, FX_TINY_GQA "/config.json", err, errlen) || hf_config_apply(hf, c, err, errlen)) return -1;
    c->micro_batch_size = 1, c->seq_length = 8;
    return 0;
}
