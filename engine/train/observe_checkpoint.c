/* Checkpointing as an observer: --save every --save-interval iterations (after the validation, as Megatron
 * saves), before a SIGTERM's exit unless the interval just saved, and at the end of a run that went well
 * when the last iteration is not saved yet. Every save goes through the fault plan's file I/O; a rank
 * whose own shard failed is the culprit. */
#include <stdlib.h>

#include "train/checkpoint.h"
#include "train/observers.h"
#include "twinrun/err.h"

typedef struct ckpt_obs {
    tr_rank *st;
    const tr_config *cfg;
    const ckpt_provenance *prov;
    FILE *log;             /* the reporter's; NULL elsewhere */
    tr_train_summary *sum; /* its diagnosis names a failed save's culprit */
    int64_t saved_at;      /* the last iteration saved (or loaded) */
} ckpt_obs;

/* The validation position a save records: the data's, or with --eval-iters 0 the one the run resumed with. */
static int64_t valid_position(const ckpt_obs *s, const tr_loop *l) {
    return s->cfg->eval_iters > 0 ? s->st->src.valid_consumed(s->st->src.ctx) : l->resumed_valid;
}

/* A collective over the world: saves iteration `it`, and says so. */
static int save(ckpt_obs *s, tr_loop *l, int64_t it) {
    tr_rank *st = s->st;
    const tr_run_position now = {it, l->consumed, valid_position(s, l)};
    const ckpt_io *io =
        fault_ckpt_io(st->faults, now.iteration, s->cfg->ckpt_no_fsync ? ckpt_io_posix_nosync() : ckpt_io_posix());
    int culprit;
    optim_params_ready(st->optim, st->model); /* --overlap-param-gather: the last step's gathers first */
    if (train_ckpt_save(st->model, st->optim, s->cfg, &st->grid, &st->groups, &st->sched, &now, s->prov, io, &culprit,
                        l->err, sizeof l->err)) {
        l->agreed_error = culprit != st->rank;
        tr_diagnosis *dg = &s->sum->diag;
        if (!dg->kind[0] && culprit == st->rank)
            *dg = (tr_diagnosis){.kind = "ckpt_write",
                                 .rank = st->rank,
                                 .layer = -1,
                                 .micro = -1,
                                 .iteration = now.iteration,
                                 .time = dev_clock_now(st->dev)};
        return TR_EXIT_FATAL;
    }
    if (s->log) fprintf(s->log, " saved checkpoint at iteration %lld to %s\n", (long long)it, s->cfg->save);
    return 0;
}

static void train_begin(void *state, const tr_loop *l) { ((ckpt_obs *)state)->saved_at = l->start; }

static int at_interval(void *state, tr_loop *l) {
    ckpt_obs *s = state;
    if (!s->cfg->save[0] || s->cfg->save_interval <= 0 || l->iteration % s->cfg->save_interval != 0) return 0;
    int rc = save(s, l, l->iteration);
    if (!rc) s->saved_at = l->iteration;
    return rc;
}

static int at_stop(void *state, tr_loop *l) {
    ckpt_obs *s = state;
    if (l->stop != TR_STOP_SIGNAL || !s->cfg->save[0] || s->saved_at >= l->iteration) return 0;
    int rc = save(s, l, l->iteration);
    if (!rc) s->saved_at = l->iteration;
    return rc;
}

/* Megatron's last save between save intervals. */
static int at_end(void *state, tr_loop *l) {
    ckpt_obs *s = state;
    return s->cfg->save[0] && l->done > s->saved_at ? save(s, l, l->done) : 0;
}

int train_observe_checkpoint(tr_rank *st, const tr_job *jb) {
    ckpt_obs *s = calloc(1, sizeof *s);
    if (!s) return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for checkpointing"), TR_EXIT_FATAL;
    s->st = st, s->cfg = jb->cfg, s->prov = &jb->prov, s->sum = jb->summary;
    s->log = st->reporter ? jb->log : NULL;
    return train_observer_register(st, &(tr_observer){.state = s,
                                                      .on_train_begin = train_begin,
                                                      .on_checkpoint = at_interval,
                                                      .on_stop = at_stop,
                                                      .on_train_end = at_end,
                                                      .close = free});
}
