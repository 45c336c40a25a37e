/* The scenario runner: the supervisor of a rehearsal. It runs the job on the twin with the
 * scenario's faults; when the job stops it records why, restarts it from the latest checkpoint (as
 * the seeds' restart loop does), up to a limit; it runs the fault-free twin of the same job for
 * comparison, and checks every expectation. A campaign repeats that for N random single faults. */
#ifndef TWINRUN_RUNNER_RUNNER_RUNNER_H
#define TWINRUN_RUNNER_RUNNER_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runner/report.h"
#include "runner/scenario.h"

typedef struct sc_run_options {
    const char *work_dir;   /* checkpoints and logs of the rehearsal go here (created; emptied first) */
    FILE *job_log;          /* the job's Megatron lines; NULL = work_dir/job.log */
    FILE *progress;         /* progress bar (a tty) and one line per attempt; NULL = none */
    const char *trace_path; /* Perfetto trace of the first attempt; NULL = none */
    bool record;            /* also keep in work_dir what report_html draws: each run's metrics JSONL
                               (metrics_reference.jsonl, metrics_attempt<N>.jsonl) and each attempt's
                               trace of every rank (trace_attempt<N>.json); of a campaign only the
                               fault-free run's metrics (its trials are in the report) */
    int jobs;               /* a campaign's trials at once, each in a process of its own with a one-thread
                               twin and the folder work_dir/trial_<K>; 0: one per online CPU; 1: one after
                               another in this process */
    bool campaign_seed_set; /* campaign_seed replaces the scenario's campaign.seed */
    uint64_t campaign_seed;
    int trial;       /* > 0: the campaign runs only its trial number `trial` (1-based): the replay of one trial */
    bool from_start; /* a campaign's trials from iteration 1, not from the fault-free run's checkpoints */
    bool to_the_end; /* every attempt of a campaign's trials runs, a verified resume's too (runner_resume.c) */
} sc_run_options;

/* Rehearses s. Returns 0 with the report filled (r->passed says whether every expectation held), or
 * -1 with err when the rehearsal itself could not run (bad flags for this layout, no work dir). */
int runner_run(const scenario *s, const sc_run_options *o, sc_report *r, char *err, size_t errlen);

/* Faults that could never fire in the scenario's layout (a NaN in the loss off the last pipeline
 * stage, in a layer on another stage): -1 with "FILE:LINE:COL: ..." in err. runner_run checks
 * it first; `scenario check` too. */
int runner_check_faults(const scenario *s, char *err, size_t errlen);

/* Every check runner_run makes before its first job, writing nothing: the job's flags parsed and
 * validated for this layout as the engine validates them (a missing --lr, a tokenizer that cannot be
 * read, ...), then runner_check_faults. `scenario check` calls it, so a file it calls ok is one
 * `scenario run` starts. 0, or -1 with the same message runner_run would give. */
int runner_check(const scenario *s, const char *work_dir, char *err, size_t errlen);

/* Removes WORK_DIR/checkpoints and WORK_DIR/data_cache (what `scenario run --clean` drops after a
 * scenario passed; reports and logs stay), only in a folder that holds SC_WORK_MARKER. 0, or -1 with
 * the reason on stderr. */
int work_clean(const char *work_dir);

/* The file runner_run puts in each work folder it makes (runner/work_dir.c). */
#define SC_WORK_MARKER ".twinrun-scenario"
/* -1 with err when DIR may not be a work folder: a symbolic link, not a directory, a folder that holds
 * files but no marker (someone else's), or a part a rehearsal writes (checkpoints, job.log, ...) that
 * is a symbolic link. An absent DIR is fine. Writes nothing: `scenario check` asks it too. */
int work_check(const char *dir, char *err, size_t errlen);
/* work_check, then DIR created and marked (runner_run does it first). */
int work_prepare(const char *dir, const scenario *s, char *err, size_t errlen);

#endif
