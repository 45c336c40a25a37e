/* Per-rank device memory as the engine allocated it, beside Megatron's theoretical formula
 * (megatron/training/theoretical_memory_usage.py: weights and optimizer of the most loaded shard). */
#ifndef TWINRUN_ENGINE_TRAIN_MEMORY_REPORT_H
#define TWINRUN_ENGINE_TRAIN_MEMORY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "model/llama.h"
#include "optim/optimizer.h"
#include "twinrun/config.h"

typedef struct tr_memory_report {
    size_t weights;               /* compute copy + fp32 master (its shard with the distributed optimizer in bf16) */
    size_t gradients;             /* gradient buffer */
    size_t optimizer;             /* Adam moments (their shard with the distributed optimizer) */
    size_t params;                /* this rank's parameters */
    size_t fp8_weights;           /* --fp8-param-gather's FP8 copy in a buffer of its own (bytes; 0 without) */
    size_t fp8_weights_in_params; /* ... and inside the bf16 parameters' dead halves (bytes, no memory of its own) */
    /* twinrun's static bytes per parameter (optimizer.h): act + grad + state / dp, state being 12 (fp32
     * master + m + v) or 8 (m + v: fp32 training, whose params are the master) and dp the distributed
     * optimizer's DP x CP shards (1 without it) */
    int act_bytes, grad_bytes, state_bytes, dp;
    bool distributed;
    size_t activations;            /* activation slots and backward scratch */
    size_t peak;                   /* the device's peak */
    tr_recompute recompute;        /* --recompute-granularity */
    size_t act_storage;            /* activations kept for the backward (every slot, the recompute workspace) */
    size_t act_storage_plain;      /* what they would take without recomputation */
    int nbuckets;                  /* gradient buckets (one without --overlap-grad-reduce) */
    bool overlap;                  /* their reductions overlap the backward pass */
    size_t bucket_min, bucket_max; /* elements per bucket, padding included */
} tr_memory_report;

/* Weights, gradients and optimizer state as the device counted their allocations. */
void train_memory_report_of(tr_memory_report *r, const llama_model *m, const tr_optimizer *o);
/* twinrun's formula for r's rank: bytes per parameter of weights, gradients and optimizer state. */
double train_memory_formula_per_param(const tr_memory_report *r);
/* Megatron's per parameter (theoretical_memory_usage.py): 6 + 12/dp with the distributed optimizer, else 18. */
double train_megatron_per_param(bool distributed, int dp);

/* Megatron's compute_weight_and_optimizer_memory, in bytes, for a layout of dp data-parallel ranks. */
double train_megatron_weight_optimizer_bytes(const tr_config *cfg, int padded_vocab, int dp);

void train_memory_report_print(FILE *out, int rank, const tr_memory_report *r, double megatron_bytes);

#endif
