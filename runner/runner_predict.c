/* mode: predict: the job once, shape-only, at the scenario's full widths (docs/prediction.md). No
 * reference run and no supervision: nothing is computed, so there is nothing to compare or recover. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner_internal.h"
#include "train/predict_report.h"
#include "twinrun/err.h"

void runner_predict_run(sc_job *j, const sc_run_options *o, sc_report *r) {
    tr_predict p;
    memset(&p, 0, sizeof p);
    j->cfg->predict = true;
    snprintf(j->cfg->predict_json, sizeof j->cfg->predict_json, "%.*s/predict.json",
             (int)sizeof j->cfg->predict_json - 16, o->work_dir);
    j->predict = &p;
    if (o->progress) fprintf(o->progress, "  predict: shape-only run of %d ranks ...\n", j->world);
    j->opt.trace_path = o->trace_path; /* --trace: the predicted timeline (ranks 0-63 unless told) */
    sc_run run;
    runner_job_run(j, &run);
    j->predict = NULL;
    sc_attempt *at = calloc(1, sizeof *at);
    TR_CHECK(at != NULL, "out of host memory for an attempt");
    at->end_iteration = run.sum.iterations;
    at->exit_code = run.rc;
    at->sim_seconds = run.tres.end_time;
    at->wall_seconds = run.wall;
    snprintf(at->cause, sizeof at->cause, "%.*s", (int)sizeof at->cause - 1,
             run.rc ? run.err : "predicted (shape-only)");
    r->attempts = at, r->nattempts = 1;
    r->sim_seconds = run.tres.end_time;
    r->peak_bytes = run.sum.device_peak_bytes;
    r->capacity_bytes = run.sum.device_capacity;
    r->predict = true;
    if (run.rc == 0) {
        r->step_time_s = p.step_time, r->tokens_per_s = train_predict_tokens_per_s(&p), r->mfu = train_predict_mfu(&p);
        size_t len = 0;
        FILE *f = open_memstream(&r->predict_text, &len);
        TR_CHECK(f != NULL, "out of host memory for the predict report");
        train_predict_print(f, &p);
        fclose(f);
    }
    runner_add_check(r, run.rc == 0 && run.sum.iterations >= j->iters, "completes", "%s",
                     run.rc ? run.err : "the shape-only run reached the last iteration");
    train_predict_free(&p);
    runner_run_free(&run);
}
