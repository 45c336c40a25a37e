/* The per-rank trainer: build the rank, resume, then Megatron's loop (train_step, then the observers that
 * set-up registered: rank.c, observers.h), the end of training, and what every rank reports. */
#include "train/trainer.h"

#include <string.h>

#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/job.h"
#include "train/observer.h"
#include "train/rank.h"
#include "train/step.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

/* One evaluation over the validation set after iteration `it` (final: the one after training), and its
 * loss to the observers. */
static int validate(tr_rank *st, const tr_config *cfg, int64_t it, bool final) {
    const tr_parallel par = {&st->grid, &st->groups};
    double vloss;
    int rc = train_evaluate(st->model, &par, cfg->eval_iters, st->num_micro, st->src.next_valid, st->src.ctx, &vloss,
                            st->loop.err, sizeof st->loop.err);
    if (!rc) train_observers_validation(&st->obs, &st->loop, it, vloss, final);
    return rc;
}

/* The iterations from the start position to the job's last, or to a stop; the first error stops them.
 * *stopped: an observer stopped them early (Megatron then exits at once). */
static int iterate(tr_rank *st, const tr_config *cfg, bool *stopped) {
    const tr_parallel par = {&st->grid, &st->groups};
    tr_loop *l = &st->loop;
    for (int64_t it = l->start + 1; it <= l->iters; it++) {
        l->iteration = it;
        l->lr = tr_lr_at(&st->sched, l->consumed);
        l->decoupled_lr = l->decoupled ? tr_lr_at(&st->dsched, l->consumed) : -1.0;
        optim_set_decoupled_lr(st->optim, l->decoupled_lr);
        dev_step_mark(st->dev, it);
        train_observers_iteration_begin(&st->obs, l);
        l->step_rc = train_step(st->model, st->optim, cfg, &par, st->num_micro, l->lr, st->src.next, st->src.ctx,
                                &l->res, l->err, sizeof l->err);
        train_observers_step_end(&st->obs, l);
        if (l->step_rc) return l->step_rc;
        l->consumed += cfg->global_batch_size;
        train_observers_iteration_end(&st->obs, l);
        if (it % cfg->log_interval == 0) train_observers_log_interval(&st->obs, l);
        int rc = 0;
        if (st->src.next_valid && cfg->eval_iters > 0 && cfg->eval_interval > 0 && it % cfg->eval_interval == 0)
            rc = validate(st, cfg, it, false);
        if (!rc) rc = train_observers_checkpoint(&st->obs, l);
        if (rc) return rc;
        l->done = it;
        if (train_observers_should_stop(&st->obs, l)) {
            if ((rc = train_observers_stop(&st->obs, l))) return rc;
            *stopped = true;
            break;
        }
    }
    dev_step_mark(st->dev, 0); /* what follows (the last save, evaluation, reports) is no iteration */
    return 0;
}

/* The end of a run that went well: the observers' (Megatron's last save between save intervals), the
 * evaluation after training, the memory report of each pipeline stage's first rank (ranks are stage-major:
 * tp, cp and dp 0 of the stage) and of the reporter. */
static int finish(tr_rank *st, const tr_job *jb, bool stopped) {
    const tr_config *cfg = jb->cfg;
    int rc = train_observers_train_end(&st->obs, &st->loop);
    if (rc) return rc;
    /* Megatron evaluates once more when training ends (not when it exits early): after the last save */
    if (!stopped && st->src.next_valid && cfg->eval_iters > 0 && (rc = validate(st, cfg, st->loop.done, true)))
        return rc;
    const int per_stage = st->world / (st->model->layout.pp > 0 ? st->model->layout.pp : 1);
    if (st->rank % (per_stage > 0 ? per_stage : 1) == 0 || st->reporter) train_rank_memory_report(st, cfg, jb->log);
    return 0;
}

/* A failed rank: the job's first message, and stderr unless every rank reached the same error. */
static int report_failure(const tr_rank *st, tr_job *jb, int rc) {
    const char *err = st->loop.err;
    if (rc < 0) rc = TR_EXIT_FATAL;
    /* every failing rank says so, but a message already said by another rank is counted, not
     * repeated (a thousand ranks failing alike print one line); the report keeps the first */
    const bool repeat = jb->err[0] && !strcmp(jb->first_err, err);
    if (!jb->err[0]) {
        snprintf(jb->err, sizeof jb->err, "rank %d: %s", st->rank, err);
        snprintf(jb->first_err, sizeof jb->first_err, "%s", err);
    }
    /* what every rank agreed on (a NaN's origin, the preflight table) is said once, by the reporter */
    const bool agreed = rc == TR_EXIT_NAN || st->loop.agreed_error;
    if (repeat && !agreed) jb->same_err_ranks++;
    else if (st->world > 1 && (!agreed || st->reporter)) fprintf(stderr, "twinrun: rank %d: %s\n", st->rank, err);
    return rc;
}

/* The training entry of one rank: build, resume, iterate, finish; what every rank reports (peak memory,
 * weight digest) whatever happened. */
static int train_rank(int rank, int world, void *arg) {
    tr_job *jb = arg;
    tr_train_summary *sum = jb->summary;
    tr_rank st;
    memset(&st, 0, sizeof st);
    bool stopped = false;
    int rc = train_rank_open(&st, jb, rank, world);
    if (!rc) rc = train_rank_resume(&st, jb);
    const tr_loop *l = &st.loop;
    if (st.reporter) sum->start_iteration = l->start;
    if (!rc && st.reporter && l->start >= l->iters)
        fprintf(jb->log,
                " the checkpoint is at iteration %lld and this run trains to iteration %lld: nothing left to "
                "train (raise --train-iters or --train-samples to continue, with --override-opt_param-scheduler: "
                "a longer run decays the learning rate over more iterations)\n",
                (long long)l->start, (long long)l->iters);
    if (!rc) train_observers_train_begin(&st.obs, l);
    if (!rc) rc = iterate(&st, jb->cfg, &stopped);
    if (!rc) rc = finish(&st, jb, stopped);
    if (st.reporter) sum->consumed_samples = l->consumed, sum->reported = true;
    if (st.dev && dev_mem_peak(st.dev) > jb->peak) jb->peak = dev_mem_peak(st.dev);
    /* predict mode: the weights are only addresses (and the digest's host copy would be full size) */
    if (st.optim && st.model) optim_params_ready(st.optim, st.model); /* --overlap-param-gather's last gathers */
    if (!rc && sum->weight_digest && !jb->cfg->predict) sum->weight_digest[rank] = train_rank_weight_digest(&st);
    train_observers_exit(&st.obs, l, rc); /* --predict: the timing's report */
    if (st.reporter && st.dev) {
        dev_info info;
        dev_get_info(st.dev, &info);
        sum->device_capacity = info.capacity;
    }
    if (rc) rc = report_failure(&st, jb, rc);
    if (st.dev) dev_set_reclaim(st.dev, NULL, NULL); /* returning: this rank frees its own state */
    train_rank_close(&st);
    return rc;
}

int train_run(const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, char *err, size_t errlen) {
    return train_run_with(cfg, world, log, sum, NULL, NULL, err, errlen);
}

int train_run_with(const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, launch_fn launch,
                   void *launch_ctx, char *err, size_t errlen) {
    tr_job jb;
    int rc = train_job_open(&jb, cfg, world, log, sum, err, errlen);
    if (rc) return rc;
    rc = launch ? launch(launch_ctx, world, train_rank, &jb, err, errlen)
                : launch_ranks(world, train_rank, &jb, err, errlen);
    return train_job_close(&jb, rc, err, errlen);
}
