/* Megatron-style iteration lines (training_log's fields and formats) and a JSON-lines metrics file. */
#ifndef TWINRUN_ENGINE_TRAIN_TRAIN_LOG_H
#define TWINRUN_ENGINE_TRAIN_TRAIN_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "twinrun/config.h"

typedef struct tr_log_line {
    int64_t iteration, train_iters, consumed_samples;
    double elapsed_ms_per_iter;
    double tflops_per_gpu; /* printed only with --log-throughput */
    double lr;
    bool has_decoupled_lr; /* --decoupled-lr given: its schedule's value now is decoupled_lr */
    double decoupled_lr;
    int global_batch_size;
    double lm_loss;
    double grad_norm;
    int skipped_iters, nan_iters;
    const char *simulated; /* the device spec behind simulated timings ("H100"), or NULL for wall time */
} tr_log_line;

/* Writes " [YYYY-mm-dd HH:MM:SS.ffffff] iteration ... |" and a newline to out. `timestamp` is the
 * bracketed time text (the caller decides the clock: wall time, or the twin's simulated time). With
 * l->simulated the time and throughput figures say "(simulated, H100 spec)". */
void train_log_write_line(FILE *out, const char *timestamp, const tr_log_line *l, int log_throughput);

/* Formats unix time `seconds` as Megatron's "%Y-%m-%d %H:%M:%S.%f" (UTC). */
void train_log_timestamp(char *buf, size_t n, double seconds);

/* Megatron's evaluate_and_print_results block: a dashed rule, " validation loss at iteration N |
 * lm loss value: X | lm loss PPL: Y | ", the rule again (PPL = exp(min(20, loss))). */
void train_log_write_validation(FILE *out, int64_t iteration, double loss);
/* The same block for any "at" text: " validation loss at <at> | ..." ("iteration 100 on validation set"
 * after training, as Megatron prints it). */
void train_log_write_validation_at(FILE *out, const char *at, double loss);

/* One JSON object per line: {"iteration":..,"lm_loss":..,...,"simulated":true|false}; "simulated" is
 * constant for a run and says whether the time fields come from the twin's cost model. */
void train_log_write_json(FILE *out, const tr_log_line *l);

/* Megatron's num_floating_point_operations for one iteration (causal-halved attention term). */
double train_flops_per_iteration(const tr_config *cfg, int padded_vocab);

#endif
