/* One rank of a training job, built: its grid position, device, communicators, model shard, optimizer,
 * lr schedules, data share and fault plan, and the observers of its loop, registered in set-up order
 * (observer.h); then --load's checkpoint into it. The trainer runs the loop over it. */
#ifndef TWINRUN_ENGINE_TRAIN_RANK_H
#define TWINRUN_ENGINE_TRAIN_RANK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fault/fault.h"
#include "model/llama.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/grid.h"
#include "train/batch_source.h"
#include "train/job.h"
#include "train/observer.h"

typedef struct tr_rank {
    int rank, world;
    bool reporter; /* the last rank: Megatron logs from it, and it fills the summary */
    tr_grid grid;
    tr_groups groups;
    dev_device *dev;
    llama_model *model;
    tr_optimizer *optim;
    tr_batch_source src;
    bool have_src;
    fault_rank *faults; /* NULL without a fault plan */
    tr_lr_schedule sched;
    tr_lr_schedule dsched; /* --decoupled-lr: the embedding and output layer's own schedule */
    int num_micro;         /* micro-batches per iteration on this DP rank */
    tr_observers obs;
    tr_loop loop;
} tr_rank;

/* Builds rank `rank` of `world` into *st (zeroed by the caller) and registers its observers. 0, or an
 * exit code with st->loop.err; train_rank_close frees what was built either way. */
int train_rank_open(tr_rank *st, const tr_job *jb, int rank, int world);
/* --load: the checkpoint's weights, optimizer state and data position; st->loop starts there. */
int train_rank_resume(tr_rank *st, const tr_job *jb);
void train_rank_close(tr_rank *st);
/* The memory report of this rank (printed by each pipeline stage's first rank and the reporter). */
void train_rank_memory_report(const tr_rank *st, const tr_config *cfg, FILE *log);
/* FNV-1a of this rank's fp32 master weights (its optimizer shard of them when the distributed
 * optimizer shards them; the other shards are other ranks' digests): equal digests, equal bits. */
uint64_t train_rank_weight_digest(const tr_rank *st);

#endif
