/* A resume that changes what its checkpoint recorded is named, item by item, before any rank starts:
 * the learning-rate schedule (Megatron's OptimizerParamScheduler rule: refused unless
 * --override-opt_param-scheduler or --use-checkpoint-opt_param-scheduler), the seed (refused unless
 * --no-load-rng: the seed is twinrun's whole random state, and the data order follows it), the data
 * and the tokenizer (refused unless --allow-data-change / --allow-tokenizer-change), the batch sizes
 * and the build that saved (said, and the run goes on, as Megatron goes on). --finetune and
 * --no-load-optim load no scheduler, --finetune no data position or seed either: then each change is
 * only said. Another model shape is an error, listed first (ckpt_model_compare, which the load repeats). */
#ifndef TWINRUN_ENGINE_TRAIN_RESUME_CHECK_H
#define TWINRUN_ENGINE_TRAIN_RESUME_CHECK_H

#include <stddef.h>

#include "twinrun/config.h"

/* On a finalized cfg with --load: compares the checkpoint --load will read with this run. Changes that
 * go on become warnings in cfg (tr_config_warn); --use-checkpoint-opt_param-scheduler writes the
 * checkpoint's schedule into cfg. 0, or -1 with every refused change in err, each with its fix. A
 * --load that holds no loadable checkpoint is left to the job's own load, which says why (0 here). */
int train_resume_check(tr_config *cfg, char *err, size_t errlen);

#endif
