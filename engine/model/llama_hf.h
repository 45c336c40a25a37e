/* Hugging Face weights in and out: model.safetensors (single or sharded) with Llama names. */
#ifndef TWINRUN_ENGINE_MODEL_LLAMA_HF_H
#define TWINRUN_ENGINE_MODEL_LLAMA_HF_H

#include "model/llama.h"

/* Reads every parameter from the HF model directory `dir` into host [m->total] fp32 (padded
 * vocabulary rows are zero), checking each shape; an HF tensor twinrun does not use is an error,
 * so nothing is silently dropped. */
int llama_hf_read(const llama_model *m, const char *dir, float *host, char *err, size_t errlen);

/* Reads the weights into the model (master and compute copies). */
int llama_hf_load(llama_model *m, const char *dir, char *err, size_t errlen);

/* Writes host [m->total] fp32 values as HF tensors (the fused fc1 split back into gate_proj and
 * up_proj, vocabulary padding dropped) to `path`, atomically. `prefix` is prepended to every name
 * ("" for a model file). */
int llama_hf_write(const llama_model *m, const float *host, const char *path, const char *prefix, char *err,
                   size_t errlen);

#endif
