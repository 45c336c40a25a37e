/* What a scenario run found, and the ways it is reported: a one-screen text summary (with a
 * progress bar on a terminal), JSON, JUnit XML (one test case per expectation, so CI systems list
 * them) and a Chrome/Perfetto trace of the simulated timeline. The runner fills sc_report; the
 * writers only read it. */
#ifndef TWINRUN_RUNNER_RUNNER_REPORT_H
#define TWINRUN_RUNNER_RUNNER_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runner/scenario.h"

/* One run of the job: the first, or a restart from a checkpoint. */
typedef struct sc_attempt {
    int index;               /* 0 = first run */
    int64_t start_iteration; /* resumed from this iteration (0 = from scratch) */
    int64_t end_iteration;   /* last iteration completed */
    int exit_code;           /* the job's exit code (0 = reached train-iters) */
    char cause[512];         /* why it stopped: "watchdog: rank 213 never joined dp all_reduce #41" */
    double sim_seconds;      /* simulated time the attempt took */
    double wall_seconds;
} sc_attempt;

/* What became of one injected fault. */
typedef struct sc_fault_outcome {
    fault_spec fault;
    bool fired;
    bool detected;
    bool attributed;       /* the diagnosis named the fault's rank or node and kind */
    int attempt;           /* attempt it fired in; -1 when it never fired */
    double fired_at;       /* simulated seconds, within the attempt */
    double detect_seconds; /* detection time minus fired_at; < 0 when not detected */
    char diagnosis[512];   /* what the engine or the twin said */
} sc_fault_outcome;

/* One expectation, checked: becomes one JUnit test case. */
typedef struct sc_check {
    char name[96]; /* "fault 1 (hang of rank 213) detected", "continuity", ... */
    bool passed;
    char detail[512]; /* why it passed or failed, with the numbers */
} sc_check;

/* One trial of a campaign: its fault and fate, and whether the job then ended as the fault-free run. */
typedef struct sc_campaign_trial {
    int number; /* 1-based: the fault the campaign's seed draws number-th (`scenario run --trial`) */
    double wall_seconds;
    int64_t resumed_from;  /* the fault-free run's checkpoint it started from; 0: from iteration 1 */
    int64_t replayed_from; /* -1: its last attempt ran; else it restarted from this iteration exactly as a
                            * verified resume did, and was not run again (runner_resume.c) */
    sc_fault_outcome outcome;
    bool continuity_ok; /* every loss and the final weights bit-identical to the fault-free run */
    bool completed;     /* reached the last iteration */
    bool ok;            /* fired, detected, attributed, continuity kept, completed */
} sc_campaign_trial;

/* A random campaign's totals, and each trial (so a report says which fault a failed trial threw). */
typedef struct sc_campaign_result {
    int trials, fired, detected, attributed, continuity_ok, recovered;
    double max_detect_seconds, mean_detect_seconds;
    double wall_seconds;
    double mean_trial_seconds; /* wall time of a trial, its own process's */
    uint64_t seed;             /* the draws' seed (campaign.seed or --campaign-seed) */
    int jobs;                  /* trials at once */
    int64_t replay_trial;      /* > 0: this report is the replay of that one trial (--trial) */
    int per_kind_trials[FAULT_KIND_COUNT], per_kind_ok[FAULT_KIND_COUNT];
    sc_campaign_trial *trial; /* [trials]; NULL when out of memory (the totals stay) */
} sc_campaign_result;

typedef struct sc_report {
    char name[SC_NAME_LEN];
    char path[SC_PATH_LEN];
    int world, nodes, gpus_per_node, tp, pp, cp, dp;
    char device[32];
    int64_t train_iters;
    bool passed; /* every check passed */
    int nattempts;
    sc_attempt *attempts;
    int nfaults;
    sc_fault_outcome *faults;
    int nchecks;
    sc_check *checks;
    bool has_campaign;
    sc_campaign_result campaign;
    double *losses;           /* [train_iters + 1], losses[it] of the run as finally completed; NaN when missing */
    double *reference_losses; /* [train_iters + 1] of the fault-free run, NULL when not run */
    size_t peak_bytes, capacity_bytes; /* largest device peak of any rank; the device capacity */
    bool predict;                      /* mode: predict: the figures below are the shape-only run's */
    double step_time_s, tokens_per_s, mfu;
    char *predict_text; /* the engine's [predict] report; NULL when not a predict run */
    char *doctor_text;  /* mode: doctor: the doctor's own report (docs/doctor.md); NULL otherwise */
    double wall_seconds, sim_seconds;
} sc_report;

void report_free(sc_report *r);

/* The one-screen summary. */
void report_text(FILE *f, const sc_report *r);
/* A progress line for a terminal ("\r[#####.....] attempt 2, iteration 5/8"); nothing when f is not a tty. */
void report_progress(FILE *f, const char *what, int64_t done, int64_t total);
/* One plain line (CI logs too): "  [12.3 s, about 40 s left] what", the estimate from done of total
 * (iterations, trials) at the pace so far; no estimate when nothing is done yet or all is. */
void report_progress_line(FILE *f, double elapsed, int64_t done, int64_t total, const char *what);
int report_json(FILE *f, const sc_report *r);
/* One <testsuites> with a <testsuite> per report and a <testcase> per check. */
int report_junit(FILE *f, const sc_report *const *reports, int n);

/* The HTML report (docs/reports.md#html): one self-contained page that opens offline, drawn from a
 * JSON report (report_json's text) and, where given, the scenario's work folder (what
 * sc_run_options.record kept there: each run's metrics, each attempt's trace of every rank, job.log)
 * and a real run's --metrics-jsonl to compare with. uPlot's script, style and license are inlined
 * from uplot_dir (NULL: $TWINRUN_UPLOT_DIR, else build/npm/node_modules/uplot, where ci/deps.sh puts it). */
typedef struct report_html_input {
    const char *report_json; /* the JSON report's text */
    const char *work_dir;    /* NULL: the report alone (no grad norms, heat maps or per-stage memory) */
    const char *compare;     /* NULL: none */
    const char *uplot_dir;
} report_html_input;
/* The page to f: 0, or -1 with err (a report that is not one, a metrics file with a bad line, no uPlot). */
int report_html(FILE *f, const report_html_input *in, char *err, size_t errlen);
/* The page to path, whole or not at all (base/core/safe_file.h); a file already there is replaced
 * only when it is a page report_html wrote. 0, or -1 with err. */
int report_html_write(const char *path, const report_html_input *in, char *err, size_t errlen);

#endif
