/* The job's shared part (job.h): opened once per process before its ranks start, closed after them. */
#include "train/job.h"

#include <string.h>

#include "train/batch_source.h"
#include "train/checkpoint.h"
#include "train/preflight.h"
#include "train/provenance.h"
#include "twinrun/err.h"

int train_job_open(tr_job *jb, const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, char *err,
                   size_t errlen) {
    double *losses = sum->iteration_loss;
    uint64_t *digests = sum->weight_digest;
    tr_predict *keep = sum->predict;
    memset(sum, 0, sizeof *sum);
    sum->iteration_loss = losses, sum->weight_digest = digests, sum->predict = keep;
    sum->straggler_rank = -1;
    sum->straggler_time = -1;
    sum->diag.rank = -1;
    memset(jb, 0, sizeof *jb);
    jb->cfg = cfg, jb->world = world, jb->log = log, jb->summary = sum, jb->keep = keep != NULL;
    if (train_job_data_open(&jb->data, cfg, err, errlen)) {
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "data");
        return TR_EXIT_USAGE;
    }
    jb->data_fp = train_data_fingerprint(cfg);
    if (cfg->load[0] && train_ckpt_open(cfg, &jb->ckpt, err, errlen)) {
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_load");
        tr_data_close(jb->data);
        return TR_EXIT_USAGE;
    }
    if (cfg->load[0] && !jb->ckpt) {
        int64_t none;
        (void)train_ckpt_pick(cfg, &none, jb->fresh, sizeof jb->fresh, err, errlen);
    }
    if (cfg->load[0] && !jb->ckpt && cfg->exit_on_missing_checkpoint) {
        /* Megatron's words; non-zero (as Megatron now exits) so a scheduler or CI sees the typo */
        fprintf(log,
                ">> '--exit-on-missing-checkpoint' is set but no checkpoint was found: %s. Exiting with a non-zero "
                "status. <<\n",
                jb->fresh);
        tr_data_close(jb->data);
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_load");
        return tr_errf(err, errlen,
                       "--exit-on-missing-checkpoint: nothing to load (%s); give the directory --save wrote (or its "
                       "iter_NNNNNNN), or drop the flag to start from scratch",
                       jb->fresh),
               TR_EXIT_FATAL;
    }
    {
        const int64_t start = jb->ckpt && !cfg->finetune ? ckpt_reader_manifest(jb->ckpt)->iteration : 0;
        if (train_ckpt_guard_save(cfg, start, &jb->lock, err, errlen)) {
            snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_save");
            if (jb->ckpt) ckpt_reader_close(jb->ckpt);
            tr_data_close(jb->data);
            return TR_EXIT_USAGE;
        }
    }
    tr_predict *predict = keep ? keep : &jb->own; /* the caller's, or this job's */
    if (cfg->predict) {
        if (train_predict_init(predict, cfg->pipeline_model_parallel_size, world)) {
            if (jb->ckpt) ckpt_reader_close(jb->ckpt);
            tr_data_close(jb->data);
            ckpt_lock_release(jb->lock);
            return tr_errf(err, errlen, "out of host memory for the predict report"), TR_EXIT_FATAL;
        }
        jb->predict = predict;
        predict->tokens_per_step = (double)cfg->global_batch_size * cfg->seq_length;
        predict->micro_batch = cfg->micro_batch_size;
    }
    if (train_provenance_of(cfg, jb->data_fp, &jb->prov, err, errlen)) {
        if (jb->predict && !keep) train_predict_free(predict);
        if (jb->ckpt) ckpt_reader_close(jb->ckpt);
        tr_data_close(jb->data);
        ckpt_lock_release(jb->lock); /* the --save folder is not this job's any more: the next may take it */
        jb->lock = NULL;
        return TR_EXIT_FATAL;
    }
    train_signal_guard_begin(&jb->sig, cfg->exit_signal_handler);
    return 0;
}

int train_job_close(tr_job *jb, int rc, char *err, size_t errlen) {
    const tr_config *cfg = jb->cfg;
    tr_train_summary *sum = jb->summary;
    train_signal_guard_end(&jb->sig);
    if (jb->predict) {
        if (rc == 0) {
            train_predict_print(jb->log, jb->predict);
            if (cfg->predict_json[0] && train_predict_write_json(cfg->predict_json, jb->predict, err, errlen)) rc = -1;
        }
        if (!jb->keep) train_predict_free(jb->predict);
    }
    ckpt_provenance_free(&jb->prov);
    if (jb->ckpt) ckpt_reader_close(jb->ckpt);
    tr_data_close(jb->data);
    ckpt_lock_release(jb->lock);
    if (rc < 0) return TR_EXIT_USAGE;
    sum->device_peak_bytes = jb->peak;
    sum->world = jb->world;
    if (jb->same_err_ranks > 0)
        fprintf(stderr, "twinrun: %d more rank%s stopped with the same error\n", jb->same_err_ranks,
                jb->same_err_ranks == 1 ? "" : "s");
    if (rc) tr_errf(err, errlen, "%s", jb->err[0] ? jb->err : "a rank failed (see above)");
    return rc;
}
