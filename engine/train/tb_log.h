/* What the trainer writes to TensorBoard (--tensorboard-dir), with Megatron's tags and schedule
 * (megatron/training/training.py, training_log and evaluate_and_print_results):
 *   at step 0: "simulated" (1: the time figures come from the twin's cost model; 0: wall time);
 *   every --tensorboard-log-interval iterations: learning-rate, batch-size, lm loss, grad-norm,
 *     loss-scale (unless --no-log-loss-scale-to-tensorboard), world-size (with
 *     --log-world-size-to-tensorboard), each also "<tag> vs samples" (step = consumed samples); with --log-memory-to-tensorboard
 *     mem-allocated-bytes, mem-max-allocated-bytes, mem-reserved-bytes (the reporting rank's device);
 *   every --log-interval with --log-timers-to-tensorboard: iteration-time (s, interval average) and,
 *     with --log-throughput, throughput (TFLOP/s per GPU);
 *   after validation: "lm loss validation" (+ vs samples; ppl with --log-validation-ppl-to-tensorboard).
 * Only the reporting (last) rank opens a writer; every call accepts NULL and then does nothing.
 * A failed write warns once on stderr and stops the writer: logs never end a training run. */
#ifndef TWINRUN_ENGINE_TRAIN_TB_LOG_H
#define TWINRUN_ENGINE_TRAIN_TB_LOG_H

#include <stdint.h>

#include "train/train_log.h"
#include "twinrun/config.h"
#include "twinrun/dev.h"

typedef struct tr_tb_log tr_tb_log;

/* Opens the event file in cfg->tensorboard_dir for a job of `world` ranks. NULL with err when that fails. */
tr_tb_log *train_tb_log_open(const tr_config *cfg, int world, dev_device *d, char *err, size_t errlen);
/* Every iteration, with that iteration's own values (Megatron writes the iteration's loss, not the
 * interval's average). */
void train_tb_log_iteration(tr_tb_log *t, const tr_log_line *l);
/* At each --log-interval, with the interval's averages (timers, throughput). */
void train_tb_log_interval(tr_tb_log *t, const tr_log_line *avg);
void train_tb_log_validation(tr_tb_log *t, int64_t iteration, int64_t consumed_samples, double loss);
void train_tb_log_close(tr_tb_log *t);

#endif
