/* Per-rank device memory as the engine allocated it, beside Megatron's theoretical formula
 * (megatron/training/theoretical_memory_usage.py: weights and optimizer of the most loaded shard). */
#ifndef TWINRUN_ENGINE_TRAIN_MEMORY_REPORT_H
#define TWINRUN_ENGINE_TRAIN_MEMORY_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "model/llama.h"
#include "optim/optimizer.h"
#include "twinrun/config.h"

typedef struct tr_memory_report {
    size_t weights;           /* compute copy + fp32 master */
    size_t gradients;         /* gradient buffer (+ the distributed optimizer's reduce-scattered shard) */
    size_t optimizer;         /* Adam moments */
    size_t activations;       /* activation slots and backward scratch */
    size_t peak;              /* the device's peak */
    tr_recompute recompute;   /* --recompute-granularity */
    size_t act_storage;       /* activations kept for the backward (every slot, the recompute workspace) */
    size_t act_storage_plain; /* what they would take without recomputation */
} tr_memory_report;

void tr_memory_report_of(tr_memory_report *r, const llama_model *m, const tr_optimizer *o);

/* Megatron's compute_weight_and_optimizer_memory, in bytes, for a layout of dp data-parallel ranks. */
double tr_megatron_weight_optimizer_bytes(const tr_config *cfg, int padded_vocab, int dp);

void tr_memory_report_print(FILE *out, int rank, const tr_memory_report *r, double megatron_bytes);

#endif
