/* Megatron's learning-rate schedule (OptimizerParamScheduler), counted in samples.
 * The lr of iteration i (1-based) is lr_at((i-1) * global_batch_size): the scheduler steps
 * once at construction with increment 0, then by the global batch after every iteration. */
#ifndef TWINRUN_ENGINE_OPTIM_LR_SCHEDULE_H
#define TWINRUN_ENGINE_OPTIM_LR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/config.h"

typedef struct tr_lr_schedule {
    double max_lr, min_lr, init_lr;
    int64_t warmup_samples, decay_samples;
    tr_lr_style style;
} tr_lr_schedule;

/* From --lr, --min-lr, --lr-warmup-init, --lr-decay-style and the warmup/decay flags in samples
 * or iterations (× global batch), with --lr-warmup-fraction of the decay span; decay defaults to
 * the whole run. Returns -1 with err on inconsistent flags. */
int tr_lr_schedule_init(tr_lr_schedule *lr, const tr_config *cfg, char *err, size_t errlen);
double tr_lr_at(const tr_lr_schedule *lr, int64_t samples);

/* The schedule of the input embedding and output layer with --decoupled-lr: main's warmup and decay
 * from main's --lr-warmup-init up to --decoupled-lr, down to --decoupled-min-lr (or --min-lr), as
 * Megatron's param group with is_decoupled_lr. Returns false (dec untouched) without --decoupled-lr. */
bool tr_lr_schedule_decoupled(tr_lr_schedule *dec, const tr_lr_schedule *main, const tr_config *cfg);

#endif
