/* Which Megatron model settings twinrun's Llama implements: checked once per job, before any rank
 * starts, so a whole class of mistakes is reported together and once (not once per rank). */
#include "model/llama.h"
#include "twinrun/err.h"

int llama_check_config(const tr_config *cfg, tr_errlist *el) {
    const int before = el->n;
    if (!cfg->swiglu) tr_errlist_add(el, "twinrun's Llama has a SwiGLU MLP: add --swiglu");
    if (!cfg->untie_embeddings_and_output_weights)
        tr_errlist_add(el, "tied embeddings are not supported: add --untie-embeddings-and-output-weights");
    if (cfg->position_embedding_type != TR_POS_ROPE)
        tr_errlist_add(el, "Llama uses rotary embeddings: add --position-embedding-type rope");
    return el->n > before ? -1 : 0;
}
