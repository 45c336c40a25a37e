/* The observers of the training loop (observer.h), one file each, registered by the rank's set-up
 * (rank.c) in this order, which is the order of their side effects in an iteration:
 *   data watch   (observe_data_watch.c) --data-read-timeout-minutes over the rank's reads
 *   log          (observe_log.c)        the reporter's summary, JSONL, TensorBoard, Megatron's lines
 *   timing       (observe_timing.c)     the step's simulated split, for the predict report
 *   faults       (observe_faults.c)     the fault plan's step: stalls, slowness, crashes, preemption
 *   NaN probe    (observe_nan.c)        where the first NaN/Inf came from
 *   FP8 spikes   (observe_fp8.c)        --fp8-format: the largest amax spike of the step, named
 *   straggler    (observe_straggler.c)  --log-straggler's report at each log interval
 *   checkpoint   (observe_checkpoint.c) --save at --save-interval, on SIGTERM and at the end
 *   signal       (observe_signal.c)     SIGTERM (or a scenario's preemption) as save-and-stop
 *   exit         (observe_exit.c)       --exit-interval and --exit-duration-in-mins
 * Each returns 0, or an exit code with st->loop.err; what it registered is freed by train_rank_close. */
#ifndef TWINRUN_ENGINE_TRAIN_OBSERVERS_H
#define TWINRUN_ENGINE_TRAIN_OBSERVERS_H

#include "train/job.h"
#include "train/observer.h"
#include "train/rank.h"

int train_observe_data_watch(tr_rank *st, const tr_job *jb);
int train_observe_log(tr_rank *st, const tr_job *jb); /* the reporter's */
int train_observe_timing(tr_rank *st, const tr_job *jb);
int train_observe_faults(tr_rank *st, const tr_job *jb);
int train_observe_nan(tr_rank *st, const tr_job *jb);
int train_observe_fp8(tr_rank *st, const tr_job *jb);
int train_observe_straggler(tr_rank *st, const tr_job *jb);
int train_observe_checkpoint(tr_rank *st, const tr_job *jb);
int train_observe_signal(tr_rank *st, const tr_job *jb);
int train_observe_exit(tr_rank *st, const tr_job *jb);

/* Appends o to st's observers; when the list is full, closes o and returns TR_EXIT_FATAL with st->loop.err. */
int train_observer_register(tr_rank *st, const tr_observer *o);

#endif
