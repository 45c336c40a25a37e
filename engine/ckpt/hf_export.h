/* Hugging Face export of a twinrun Llama: config.json (LlamaConfig keys that transformers 4.x and
 * 5.x read) and the weights as model.safetensors, or above a size as model-0000k-of-0000n.safetensors
 * shards plus model.safetensors.index.json -- the layout transformers' from_pretrained loads and
 * engine/io's importer (hf_config_load, st_model_open) reads back exactly. */
#ifndef TWINRUN_ENGINE_CKPT_HF_EXPORT_H
#define TWINRUN_ENGINE_CKPT_HF_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/llama.h"
#include "twinrun/config.h"

/* transformers' default max_shard_size (5 GB) */
#define CKPT_HF_SHARD_BYTES ((uint64_t)5000000000)

/* config.json text for cfg (malloc'd), or NULL with err when HF's LlamaConfig cannot describe the
 * model (LayerNorm, no SwiGLU, tied embeddings, learned positions, layernorm-1p, partial rotary). */
char *ckpt_hf_config_json(const tr_config *cfg, char *err, size_t errlen);

/* Writes dir/config.json and the weights host [m->total] fp32 (the fused fc1 split into gate_proj
 * and up_proj, vocabulary padding dropped). One file when the weights fit in shard_bytes (0 = no
 * limit), else shards of at most shard_bytes each (a larger tensor gets a shard of its own) and the
 * index; a stale file of the other form is removed, since transformers prefers the single file.
 * A dir that is absent or empty gets the export whole or not at all (built in dir.tmp.PID, renamed);
 * in a dir that holds other files (a tokenizer) every file is written atomically, config.json last.
 * A dir that already holds an export (config.json, model*.safetensors, the index) is refused unless
 * overwrite. */
int ckpt_hf_export(const llama_model *m, const tr_config *cfg, const float *host, const char *dir, uint64_t shard_bytes,
                   bool overwrite, char *err, size_t errlen);
/* The export's refusal alone, before any work: -1 with err naming the export's files and --overwrite. */
int ckpt_hf_export_check(const char *dir, bool overwrite, char *err, size_t errlen);

#endif
