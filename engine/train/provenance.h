/* Where a checkpoint comes from, as a save records it in the manifest (engine/ckpt's ckpt_provenance):
 * the build (version, commit, backend), the global and micro batch, --data-path as given with the
 * preflight's data fingerprint, and the tokenizer with its files' fingerprint. Built once per job. */
#ifndef TWINRUN_ENGINE_TRAIN_PROVENANCE_H
#define TWINRUN_ENGINE_TRAIN_PROVENANCE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "twinrun/config.h"

/* This run's provenance into *out (free with ckpt_provenance_free); data_fp is train_data_fingerprint's.
 * 0, or -1 with err (out of host memory). */
int train_provenance_of(const tr_config *cfg, uint64_t data_fp, ckpt_provenance *out, char *err, size_t errlen);

/* FNV-1a of --tokenizer-model's file, or of a directory's tokenizer files (tokenizer.json,
 * tokenizer.model, tokenizer_config.json, vocab.json, merges.txt, each with its name); 0 when there
 * is none (NullTokenizer, or nothing readable). */
uint64_t train_tokenizer_fingerprint(const tr_config *cfg);

#endif
