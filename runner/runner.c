/* runner_run: the fault-free twin first (the yardstick), then the supervised run of the
 * scenario's faults or its random campaign, then every expectation checked. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runner_internal.h"
#include "twinrun/err.h"

int runner_make_dir(const char *path, char *err, size_t errlen) {
    char tmp[SC_PATH_LEN];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return tr_errf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST) return tr_errf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    return 0;
}

static void check_faults(sc_report *r, const scenario *s) {
    for (int i = 0; i < r->nfaults; i++) {
        const sc_fault_outcome *fo = &r->faults[i];
        char what[200], name[96];
        fault_spec_describe(&fo->fault, what, sizeof what);
        snprintf(name, sizeof name, "fault %d (%s) detected", i + 1, fault_kind_name(fo->fault.kind));
        if (s->expect.detected)
            runner_add_check(r, fo->fired && fo->detected, name, "%s: %s%s", what,
                             !fo->fired     ? "never fired (no matching iteration, collective or tensor)"
                             : fo->detected ? "detected: "
                                            : "NOT detected",
                             fo->detected ? fo->diagnosis : "");
        snprintf(name, sizeof name, "fault %d (%s) attributed", i + 1, fault_kind_name(fo->fault.kind));
        if (s->expect.attributed)
            runner_add_check(r, fo->fired && fo->attributed, name, "%s: %s", what,
                             fo->attributed ? "the diagnosis names the right rank or node"
                                            : "the diagnosis names another rank, or none");
        if (s->expect.max_detect_seconds > 0 && fo->fired) {
            snprintf(name, sizeof name, "fault %d (%s) time to detect", i + 1, fault_kind_name(fo->fault.kind));
            runner_add_check(r, fo->detected && fo->detect_seconds <= s->expect.max_detect_seconds, name,
                             "%.3f s simulated (limit %.1f s)", fo->detect_seconds, s->expect.max_detect_seconds);
        }
    }
}

/* Faults that could never fire in this layout: a loss off the last pipeline stage, a layer on
 * another stage. Said before anything runs, at the fault's place in the file. */
int runner_check_faults(const scenario *s, char *err, size_t errlen) {
    int layers = 0;
    for (int i = 0; i < s->nflags; i++) /* the last setting wins, as in scenario_argv */
        if (!strcmp(s->flags[i].name, "num-layers") && s->flags[i].value) layers = atoi(s->flags[i].value);
    if (layers < s->pp || s->pp < 1) return 0; /* the engine's own checks say what is wrong */
    const int world = s->nodes * s->gpus_per_node, per_stage = world / s->pp, stage_layers = layers / s->pp;
    for (int i = 0; i < s->faults.n; i++) {
        const fault_spec *f = &s->faults.faults[i];
        if (f->kind != FAULT_NAN || f->rank < 0) continue;
        const int stage = f->rank / per_stage;
        if (f->tensor == FAULT_T_LOSS && stage != s->pp - 1)
            return tr_errf(err, errlen,
                           "%s:%d:%d: rank %d is on pipeline stage %d and holds no loss: the loss is on the last "
                           "stage, ranks %d-%d",
                           s->path, f->line, f->col, f->rank, stage, world - per_stage, world - 1);
        if (f->tensor != FAULT_T_LOSS && f->layer >= 0 && f->layer / stage_layers != stage)
            return tr_errf(
                err, errlen, "%s:%d:%d: layer %d is on pipeline stage %d (ranks %d-%d), not on rank %d's stage %d",
                s->path, f->line, f->col, f->layer, f->layer / stage_layers, f->layer / stage_layers * per_stage,
                (f->layer / stage_layers + 1) * per_stage - 1, f->rank, stage);
    }
    return 0;
}

int runner_check(const scenario *s, const char *work_dir, char *err, size_t errlen) {
    if (s->doctor) return 0; /* no job: the file's checks were all */
    sc_run_options o = {.work_dir = work_dir};
    sc_job j;
    int rc = runner_job_init(&j, s, &o, err, errlen);
    runner_job_free(&j);
    return rc ? -1 : runner_check_faults(s, err, errlen);
}

int runner_run(const scenario *s, const sc_run_options *o, sc_report *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", s->name);
    snprintf(r->path, sizeof r->path, "%s", s->path);
    snprintf(r->device, sizeof r->device, "%s", s->device);
    r->nodes = s->nodes, r->gpus_per_node = s->gpus_per_node, r->world = s->nodes * s->gpus_per_node;
    r->tp = s->tp, r->pp = s->pp, r->cp = s->cp, r->dp = s->dp;
    if (work_prepare(o->work_dir, s, err, errlen)) return -1;
    if (s->doctor) { /* no job to train: the doctor alone, each fault judged by the check that names it */
        struct timespec d0, d1;
        clock_gettime(CLOCK_MONOTONIC, &d0);
        if (runner_doctor_run(s, o, r, err, errlen)) return -1;
        check_faults(r, s);
        clock_gettime(CLOCK_MONOTONIC, &d1);
        r->wall_seconds = (double)(d1.tv_sec - d0.tv_sec) + (d1.tv_nsec - d0.tv_nsec) * 1e-9;
        r->passed = r->nchecks > 0;
        for (int i = 0; i < r->nchecks; i++) r->passed &= r->checks[i].passed;
        return 0;
    }
    sc_job j;
    if (runner_job_init(&j, s, o, err, errlen)) {
        runner_job_free(&j);
        return -1;
    }
    r->train_iters = j.iters;
    if (runner_check_faults(s, err, errlen)) {
        runner_job_free(&j);
        return -1;
    }
    FILE *own_log = NULL;
    if (o->job_log) {
        j.log = o->job_log;
    } else {
        char path[SC_PATH_LEN + 16];
        snprintf(path, sizeof path, "%s/job.log", o->work_dir);
        j.log = own_log = fopen(path, "w");
        if (!j.log) {
            runner_job_free(&j);
            return tr_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* a campaign with nothing to draw fails its check at once, not after the fault-free run */
    const bool campaign = !s->predict && s->campaign.count > 0;
    /* its thousands of saves without fsync: its faults end processes, never the machine, so what a
     * process wrote is there for the next whether synced or not (docs/scenarios.md) */
    j.cfg->ckpt_no_fsync = campaign;
    const bool campaign_ok = !campaign || runner_campaign_can_draw(&j, s, r);

    /* the yardstick: the same job, same seed, no faults, no checkpoints */
    sc_run ref = {0};
    char snapshots[SC_PATH_LEN + 16] = "";
    const bool want_ref =
        !s->predict && campaign_ok && (s->expect.continuity || s->expect.final_weights || s->campaign.count > 0);
    if (want_ref) {
        if (o->progress) fprintf(o->progress, "  fault-free run of %d ranks ...\n", j.world);
        if (o->record) /* its losses and grad norms, for report_html (a campaign's trials keep none) */
            snprintf(j.cfg->metrics_jsonl, sizeof j.cfg->metrics_jsonl, "%.*s/metrics_reference.jsonl",
                     (int)sizeof j.cfg->metrics_jsonl - 32, o->work_dir);
        /* a campaign's snapshots: the fault-free run saves a checkpoint at every iteration and keeps
         * them all (saving reads the state, it changes no bit of it), and each trial starts from the one
         * of the iteration before its fault's */
        const bool snap = campaign && s->save_interval > 0 && !o->from_start;
        char save0[sizeof j.cfg->save], load0[sizeof j.cfg->load];
        const int interval0 = j.cfg->save_interval, keep0 = j.cfg->keep_last;
        memcpy(save0, j.cfg->save, sizeof save0), memcpy(load0, j.cfg->load, sizeof load0);
        if (snap) {
            snprintf(snapshots, sizeof snapshots, "%s/snapshots", o->work_dir);
            (void)work_remove_tree(snapshots); /* an earlier run's: the engine would refuse to save over them */
            snprintf(j.cfg->save, sizeof j.cfg->save, "%s", snapshots);
            j.cfg->load[0] = 0;
            j.cfg->save_interval = 1; /* a trial starts from the iteration before its fault's */
            j.cfg->keep_last = 0;
        }
        runner_job_run(&j, &ref);
        memcpy(j.cfg->save, save0, sizeof save0), memcpy(j.cfg->load, load0, sizeof load0);
        j.cfg->save_interval = interval0, j.cfg->keep_last = keep0;
        j.cfg->metrics_jsonl[0] = 0;
        if (ref.rc) {
            tr_errf(err, errlen, "%s: the fault-free run failed, so there is nothing to compare with: %s", s->path,
                    ref.err);
            runner_run_free(&ref);
            if (own_log) fclose(own_log);
            runner_job_free(&j);
            return -1;
        }
        r->reference_losses = malloc(sizeof(double) * (size_t)(j.iters + 1));
        TR_CHECK(r->reference_losses != NULL, "out of host memory");
        memcpy(r->reference_losses, ref.losses, sizeof(double) * (size_t)(j.iters + 1));
    }

    sc_supervisor sv = {&j, s, o, want_ref ? &ref : NULL, snapshots[0] ? snapshots : NULL, 0, NULL};
    /* a campaign's restarts from the snapshots, each run once without a fault (runner_resume.c) */
    sc_resumes resumes = {0};
    if (campaign && campaign_ok && sv.snapshots && !o->to_the_end) {
        runner_resumes_verify(&sv, &resumes, r);
        sv.resumes = &resumes;
    }
    if (s->predict) {
        runner_predict_run(&j, o, r);
    } else if (campaign) {
        if (campaign_ok) runner_campaign_run(&sv, r);
    } else {
        fault_plan plan = s->faults;
        plan.fired = calloc((size_t)(plan.n ? plan.n : 1), sizeof *plan.fired); /* the scenario's stays clean */
        TR_CHECK(plan.fired != NULL, "out of host memory");
        sc_supervised out;
        runner_supervise(&sv, &plan, r, &out);
        free(plan.fired);
        const bool done = out.completed, cont = out.continuity_ok, weights = out.weights_ok;
        const bool stop_expected = s->expect.expect_failure_kind >= 0;
        if (s->expect.completes && !stop_expected)
            runner_add_check(r, done, "completes", "%s after %d attempt(s)",
                             done ? "reached the last iteration" : "did NOT reach the last iteration", r->nattempts);
        if (stop_expected) {
            bool stopped = !done && r->nattempts > 0;
            runner_add_check(r, stopped, "stops on the expected fault", "expected the job to stop on %s: %s",
                             fault_kind_name((fault_kind)s->expect.expect_failure_kind),
                             r->nattempts ? r->attempts[r->nattempts - 1].cause : "no attempt");
        }
        check_faults(r, s);
        if (s->expect.continuity && !stop_expected)
            runner_add_check(r, cont, "continuity", "%s",
                             cont ? "every iteration's loss is bit-identical to the fault-free run"
                                  : "some iteration's loss differs from the fault-free run (or is missing)");
        if (s->expect.final_weights && !stop_expected)
            runner_add_check(r, weights, "final weights", "%s",
                             weights ? "every rank's fp32 weights are bit-identical to the fault-free run"
                                     : "the final weights differ from the fault-free run");
        if (s->expect.max_restarts >= 0)
            runner_add_check(r, r->nattempts - 1 <= s->expect.max_restarts, "restarts",
                             "%d restart(s), at most %d expected", r->nattempts - 1, s->expect.max_restarts);
    }
    if (s->expect.memory_under_capacity) {
        bool ok = r->capacity_bytes == 0 || r->peak_bytes <= r->capacity_bytes;
        runner_add_check(r, ok, "memory under capacity", "device peak %.1f MiB per rank, capacity %.1f MiB",
                         r->peak_bytes / 1048576.0, r->capacity_bytes / 1048576.0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    r->passed = r->nchecks > 0;
    for (int i = 0; i < r->nchecks; i++) r->passed &= r->checks[i].passed;
    runner_run_free(&ref);
    runner_resumes_free(&resumes);
    if (own_log) fclose(own_log);
    runner_job_free(&j);
    return 0;
}
