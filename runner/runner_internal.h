/* Private to the runner's files: one run of the job and its outcome. */
#ifndef TWINRUN_RUNNER_RUNNER_INTERNAL_H
#define TWINRUN_RUNNER_RUNNER_INTERNAL_H

#include "runner/runner.h"
#include "train/trainer.h"
#include "twin.h"
#include "twinrun/config.h"

/* What the supervisor knows about the job it runs: the config for this layout, and where it runs. */
typedef struct sc_job {
    tr_config *cfg; /* heap: the struct is large */
    int world;
    int64_t iters;
    twin_options opt;
    FILE *log;
    char ckpt_dir[SC_PATH_LEN];
    struct tr_predict *predict; /* mode: predict: where a run gathers its report (tr_train_summary.predict) */
} sc_job;

/* One run of the job (an attempt, or the fault-free reference). */
typedef struct sc_run {
    int rc;
    char err[2048];
    tr_train_summary sum;
    twin_result tres;
    double *losses;    /* [iters + 1], NaN where not run */
    uint64_t *digests; /* [world] */
    double wall;
} sc_run;

int runner_job_init(sc_job *j, const scenario *s, const sc_run_options *o, char *err, size_t errlen);
void runner_job_free(sc_job *j);
/* Runs the job once with cfg->faults / load / save as they are; fills out (free with runner_run_free). */
void runner_job_run(sc_job *j, sc_run *out);
void runner_run_free(sc_run *r);

/* Decides whether the run that fault i fired in detected it and named its culprit; fills o. */
void runner_judge_fault(const sc_job *j, const fault_plan *plan, int i, const sc_run *run, sc_fault_outcome *o);
/* One line on why the run stopped. */
void runner_run_cause(const sc_job *j, const sc_run *run, char *out, size_t outlen);

/* data_corrupt (runner_data_damage.c): the first call points the job's --data-path files at copies in
 * work/data_copies, later calls copy the originals over them again (the repair); with a data_corrupt
 * fault (NULL: none) a copy is then damaged as its `damage` says, `first` naming the file and `what`
 * the act. Returns how many paths have files (0: nothing to damage), or -1 when a copy or the damage
 * failed. */
int runner_data_copies(sc_job *j, const char *work, const fault_spec *damage, char *first, size_t firstlen, char *what,
                       size_t whatlen);

/* Deletes DIR and what it holds, never following a symbolic link out of it; absent is fine (work_clean.c).
 * 0, or -1 after saying on stderr what could not be removed. */
int work_remove_tree(const char *dir);

/* mkdir -p: 0, or -1 with err. */
int runner_make_dir(const char *path, char *err, size_t errlen);

/* Appends a check to r. */
void runner_add_check(sc_report *r, bool passed, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What a supervised run needs: the job, its scenario and options, and the fault-free reference run
 * to compare with (NULL: none). */
typedef struct sc_supervisor {
    sc_job *job;
    const scenario *s;
    const sc_run_options *o;
    const sc_run *reference;
    /* a campaign's snapshots: the fault-free run's checkpoints (every save kept) in this folder, NULL
     * none; with resume_at > 0 the supervised run starts from the one of iteration resume_at (the
     * scenario's keep_last latest up to it copied in first) instead of from iteration 1, its losses up
     * to there the reference's (runner_campaign.c says why that is the same run) */
    const char *snapshots;
    int64_t resume_at;
    /* a campaign's verified resumes (runner_resume.c), NULL none: a restart that would run one of them
     * is not run again (runner_supervise) */
    const struct sc_resumes *resumes;
} sc_supervisor;

/* How a supervised run ended. */
typedef struct sc_supervised {
    bool completed;        /* the job reached its last iteration */
    bool continuity_ok;    /* every iteration's loss is the reference's, bit for bit */
    bool weights_ok;       /* the final weights' digests are the reference's */
    int64_t resumed_from;  /* the snapshot's iteration it started from (sc_supervisor.resume_at); 0: iteration 1 */
    int64_t replayed_from; /* -1: the last attempt ran; else the iteration of the verified resume that stood for it */
} sc_supervised;

/* The supervised run of one fault plan: attempts with restarts, each fault judged by its kind's
 * judge (runner_supervise.c), final losses and digests compared with the reference. Fills r's
 * attempts, faults and losses and *out; returns the last run's rc. */
int runner_supervise(const sc_supervisor *sv, fault_plan *plan, sc_report *r, sc_supervised *out);

/* A campaign's verified resumes (runner_resume.c). A restart's outcome is a function of what it starts
 * from — the config, the checkpoint folder it loads from and saves into, the data, the fault plan — and
 * of nothing else (the twin is deterministic). So for each iteration L a restart can resume from (0: from
 * scratch; a multiple of checkpoint.interval before the last iteration) the job is run once, without a
 * fault, from the checkpoint folder a restart from L finds (the fault-free run's saves up to L), to
 * the end; verified[L] when every later loss and the final weights were the fault-free run's, bit for
 * bit. A trial's restart that starts from exactly those inputs is that run again, and is not run. */
typedef struct sc_resumes {
    int64_t iters;
    bool *verified; /* [iters + 1] */
    tr_config *key; /* the config those runs had, its paths and fault plan left out (runner_resume.c) */
    int runs;       /* how many ran */
    double wall_seconds;
    size_t peak_bytes, capacity_bytes; /* their largest device peak of a rank, the device's capacity */
} sc_resumes;

/* Runs the verification runs of sv's campaign (sv->snapshots set) into rs, with a check in r for each
 * (a resume that does not reproduce the fault-free run is a finding of its own). */
void runner_resumes_verify(const sc_supervisor *sv, sc_resumes *rs, sc_report *r);
void runner_resumes_free(sc_resumes *rs);
/* Whether the run about to start with sv->job's config (its fault plan all spent) starts from the
 * inputs of a verified resume: its iteration L, or -1. Where only a save that never finished, at the
 * next save U after L, whose resume is verified, stands in the way: -1 with *unfinished = U (else -1)
 * and *loads = L: the run from the snapshot of U - 1 up to its save of U then is (runner_resume.c). */
int64_t runner_resume_known(const sc_supervisor *sv, int64_t *unfinished, int64_t *loads);

/* Whether the campaign has a fault kind it can throw at this job; when not, a failed check into r that
 * says what each kind needs. Asked before the fault-free run, which would be for nothing. */
bool runner_campaign_can_draw(const sc_job *j, const scenario *s, sc_report *r);

/* A campaign: s->campaign.count single faults at random, each supervised; totals and checks into r.
 * runner_campaign_can_draw said yes. */
int runner_campaign_run(const sc_supervisor *sv, sc_report *r);

/* mode: predict: one shape-only run of the job at full size (runner_predict.c); the predict report, the
 * attempt and the "completes" check into r, the JSON report into the work folder's predict.json. */
void runner_predict_run(sc_job *j, const sc_run_options *o, sc_report *r);
/* The engine's launcher for the runner's runs (train_run_with, doctor_run_with): the twin with the run's
 * options, its result kept. ctx is an sc_launch. */
typedef struct sc_launch {
    const twin_options *opt;
    twin_result *result;
} sc_launch;
int runner_launch_on_twin(void *ctx, int world, launch_entry entry, void *arg, char *err, size_t errlen);
/* mode: doctor (runner_doctor.c): the doctor over the cluster with the scenario's faults, each judged. 0, or
 * -1 with err when it could not run. */
int runner_doctor_run(const scenario *s, const sc_run_options *o, sc_report *r, char *err, size_t errlen);

#endif
