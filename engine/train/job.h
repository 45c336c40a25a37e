/* What every rank of a training job shares: the datasets, --load's checkpoint, --save's lock, the
 * provenance a save records, the predict report and SIGTERM's guard, opened before the ranks start and
 * closed after they end; and where the ranks report. */
#ifndef TWINRUN_ENGINE_TRAIN_JOB_H
#define TWINRUN_ENGINE_TRAIN_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt/ckpt.h"
#include "data/batch.h"
#include "train/predict_report.h"
#include "train/signal_exit.h"
#include "train/trainer.h"

/* Ranks only read it, except the reporting rank, which fills the summary, and a failing rank the error. */
typedef struct tr_job {
    const tr_config *cfg;
    int world;
    FILE *log;
    tr_train_summary *summary;
    tr_data *data;                 /* the datasets, built once; each rank reads through its own view */
    size_t peak;                   /* largest device peak of any rank */
    uint64_t data_fp;              /* the data files' fingerprint, for the preflight */
    ckpt_provenance prov;          /* what every save records of where the run came from */
    ckpt_reader *ckpt;             /* --load's checkpoint, verified and opened once for every rank; NULL = none */
    char fresh[TR_PATH_LEN + 256]; /* --load without a checkpoint: why (train_ckpt_pick) */
    ckpt_lock *lock;               /* --save's, for the job's life (this process runs rank 0) */
    tr_predict *predict;           /* --predict: what every rank's device counted; NULL otherwise */
    tr_predict own;                /* the report when the caller keeps none */
    bool keep;                     /* the caller's report (summary->predict): left to the caller */
    tr_signal_guard sig;
    char err[1024 + 32];  /* "rank N: " and a rank's 1024-byte message */
    char first_err[1024]; /* the first failing rank's message as it said it */
    int same_err_ranks;   /* later ranks that failed with exactly that message (not printed again) */
} tr_job;

/* Resets the summary (keeping the caller's arrays and report) and opens what the ranks share, SIGTERM's
 * guard last. 0, or an exit code with err (and the summary's diagnosis) with nothing left open. */
int train_job_open(tr_job *jb, const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, char *err,
                   size_t errlen);
/* After the ranks ended with rc: the guard, the predict report, the rest closed; the summary's job
 * figures and err. Returns the job's exit code. */
int train_job_close(tr_job *jb, int rc, char *err, size_t errlen);

#endif
