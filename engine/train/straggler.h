/* The straggler report (--log-straggler): at each log interval every rank contributes its busy time
 * per iteration (dev_busy_seconds: compute, not waiting in collectives — a slow rank makes every
 * rank's step slow, but only its own busy time grows) and the slowest is named against the median. */
#ifndef TWINRUN_ENGINE_TRAIN_STRAGGLER_H
#define TWINRUN_ENGINE_TRAIN_STRAGGLER_H

#include <stdint.h>
#include <stdio.h>

#include "parallel/grid.h"
#include "train/trainer.h" /* TR_STRAGGLER_RATIO */
#include "twinrun/dev.h"

typedef struct tr_straggler {
    double busy_start; /* dev_busy_seconds at the start of the interval */
    int64_t first_iteration;
    int worst_rank;      /* the slowest rank of any interval so far, -1 none */
    double worst_ratio;  /* its busy time over the median */
    double first_listed; /* clock when a rank was first over TR_STRAGGLER_RATIO; < 0 never */
} tr_straggler;

void train_straggler_init(tr_straggler *s, dev_device *d, int64_t next_iteration);
/* Collective over the world at the end of iteration `it` (every rank, same iterations). log: the
 * reporting rank's log, NULL on the others. */
void train_straggler_report(tr_straggler *s, const tr_groups *gr, dev_device *d, int64_t it, FILE *log);

#endif
