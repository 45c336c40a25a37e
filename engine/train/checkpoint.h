/* Checkpoints of a training run (engine/ckpt's format): every rank writes its shard of the fp32
 * master weights and Adam's moments under global names with their placement (with the distributed
 * optimizer each DP x CP rank its flat part of the moments, and in bf16 of the master weights, which
 * it alone holds), rank 0 commits; a load
 * reads each rank's own placement from whichever shards hold it, so a checkpoint saved with one
 * (TP, PP, CP, DP) layout loads into another. */
#ifndef TWINRUN_ENGINE_TRAIN_CHECKPOINT_H
#define TWINRUN_ENGINE_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "ckpt/ckpt.h"
#include "model/llama.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/grid.h"
#include "twinrun/config.h"

typedef struct tr_run_position {
    int64_t iteration, consumed_train, consumed_valid;
} tr_run_position;

/* Collective over the world: saves iteration `pos->iteration` into cfg->save through io (NULL =
 * plain POSIX), its manifest recording prov (train_provenance_of). The checkpoint is committed only when every rank wrote its shard; otherwise every
 * rank returns -1, the failing rank with its own error and the others naming it, and the previous
 * checkpoint stays the latest. *culprit (may be NULL) gets the failing rank: this rank's own on
 * its own failure, else the lowest rank whose shard failed. */
struct tr_file_io;
int train_ckpt_save(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_grid *g, const tr_groups *gr,
                    const tr_lr_schedule *sched, const tr_run_position *pos, const ckpt_provenance *prov,
                    const struct tr_file_io *io, int *culprit, char *err, size_t errlen);

/* Loads the latest checkpoint into this rank, as Megatron does, from the checkpoint the job opened once
 * for all its ranks (train_ckpt_open: a thousand twin ranks then verify and index the files once, not a
 * thousand times; rd NULL: nothing saved yet): weights always; optimizer state unless --no-load-optim
 * or --finetune; iteration and consumed samples unless --finetune (which starts at 0). *loaded is 0
 * when the directory holds no checkpoint yet (training starts from scratch). With --fp8-format the FP8
 * scales and amax histories too, where the checkpoint has them (rank 0 says so once where it has not). */
struct ckpt_reader;
int train_ckpt_load_from(struct ckpt_reader *rd, llama_model *m, tr_optimizer *o, const tr_config *cfg, int rank,
                         tr_run_position *pos, int *loaded, char *err, size_t errlen);
/* The iteration a load reads: --ckpt-step's (which must exist and be complete), else the tracker's.
 * 0 with *it; 1 when --load is absent, empty or holds only saves that never completed (fresh, may be
 * NULL, says which); -1 with err when it holds anything else that cannot be loaded (files that are
 * no checkpoint, complete checkpoints without the tracker, a bad tracker), naming the fix. */
int train_ckpt_pick(const tr_config *cfg, int64_t *it, char *fresh, size_t freshlen, char *err, size_t errlen);
/* One line on what --load will do ("loading iteration 4 from DIR ...", "nothing to load: ... from
 * scratch"); "" without --load. For the banner. */
void train_ckpt_describe_load(const tr_config *cfg, char *out, size_t cap);
/* The guide's paths: --load DIR/iter_NNNNNNN becomes --load DIR --ckpt-step N (an error when
 * --ckpt-step says another), --save DIR/iter_NNNNNNN becomes --save DIR. 0, or -1 with err. */
int train_ckpt_resolve_paths(tr_config *cfg, char *err, size_t errlen);
/* Before the first rank starts, in every process: creates --save, checks that it can be written,
 * takes its lock in the process of rank 0 (*lock; release with ckpt_lock_release), and refuses a
 * run that would save over complete checkpoints after `start` (the iteration it begins from: 0 from
 * scratch), listing them and the --load/--ckpt-step that would resume, unless
 * --overwrite-checkpoints. 0, or -1 with err (no lock held). */
struct ckpt_lock;
int train_ckpt_guard_save(const tr_config *cfg, int64_t start, struct ckpt_lock **lock, char *err, size_t errlen);
/* The fp32 master weights of m's parameters (its placements: any layout's shard, or the whole model of
 * llama_create_table) from an open checkpoint into host [m->total]. 0, or -1 with err. */
int train_ckpt_read_weights(struct ckpt_reader *rd, const llama_model *m, float *host, char *err, size_t errlen);
/* Finds cfg->load's latest checkpoint (or --ckpt-step's), verifies every checksum and opens it: 0 with *rd (NULL when
 * nothing is saved yet), or -1 with err naming the bad file. */
int train_ckpt_open(const tr_config *cfg, struct ckpt_reader **rd, char *err, size_t errlen);

#endif
