/* mode: doctor: the doctor (engine/doctor) over the scenario's cluster on the twin, with its faults, and a
 * judge per fault: the doctor's check for that kind must fail and name the fault's node; and no other check
 * may fail (a false alarm is a failure too). No training, no yardstick. docs/doctor.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/safe_file.h"
#include "doctor/doctor.h"
#include "runner_internal.h"
#include "twinrun/err.h"

/* The check that names each kind, and the stage checks a slow link also fails. */
static const char *check_of(fault_kind k) {
    switch (k) {
    case FAULT_VERSION_SKEW: return "build";
    case FAULT_SHORT_NODE: return "gpus";
    case FAULT_SLOW_LINK: return "links";
    case FAULT_HIDDEN_DIR: return "dir:";
    default: return NULL;
    }
}

/* A failed check some fault of the scenario explains: its kind's check on its node, or (a slow link) a
 * collective stage of a group that holds the node. */
static bool explained(const scenario *s, const doctor_check *c) {
    for (int i = 0; i < s->faults.n; i++) {
        const fault_spec *f = &s->faults.faults[i];
        const char *id = check_of(f->kind);
        const int lo = f->node * s->gpus_per_node, hi = lo + s->gpus_per_node - 1;
        if (id && !strncmp(c->id, id, strlen(id)) && c->node == f->node) return true;
        if (f->kind == FAULT_SLOW_LINK && !strncmp(c->id, "coll:", 5) && c->first_rank <= hi && c->last_rank >= lo)
            return true;
    }
    return false;
}

int runner_doctor_run(const scenario *s, const sc_run_options *o, sc_report *r, char *err, size_t errlen) {
    const int world = s->nodes * s->gpus_per_node;
    doctor_options d;
    doctor_options_default(&d);
    d.gpus_per_node = s->gpus_per_node;
    d.tp = s->tp, d.pp = s->pp, d.cp = s->cp;
    /* the rehearsal's shared directory: the work folder's, which every node of the twin sees (until a
     * hidden_dir fault hides it from one) */
    d.ndirs = 1;
    snprintf(d.dirs[0].what, sizeof d.dirs[0].what, "shared");
    snprintf(d.dirs[0].path, sizeof d.dirs[0].path, "%.*s/shared", (int)sizeof d.dirs[0].path - 8, o->work_dir);
    d.dirs[0].writable = true;
    if (runner_make_dir(d.dirs[0].path, err, errlen)) return -1;
    if (s->watchdog_seconds > 0) d.timeout_s = s->watchdog_seconds;
    fault_plan plan = s->faults;
    plan.fired = calloc((size_t)(plan.n ? plan.n : 1), sizeof *plan.fired); /* the scenario's stays clean */
    TR_CHECK(plan.fired != NULL, "out of host memory");
    d.faults = &plan;
    twin_options opt;
    twin_options_default(&opt);
    opt.seed = s->seed, opt.device = s->device, opt.gpus_per_node = s->gpus_per_node, opt.quiet = true;
    opt.capacity_scale = s->capacity_scale > 0 ? s->capacity_scale : 1.0;
    opt.watchdog_timeout_s = d.timeout_s;
    twin_result tres = {0};
    sc_launch l = {&opt, &tres};
    if (o->progress) fprintf(o->progress, "  doctor over %d ranks ...\n", world);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    doctor_report rep;
    const int rc = doctor_run_with(&d, world, &rep, runner_launch_on_twin, &l, err, errlen);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->sim_seconds = tres.end_time;
    twin_result_free(&tres);
    if (rc) {
        free(plan.fired);
        return -1;
    }
    sc_attempt *at = calloc(1, sizeof *at);
    TR_CHECK(at != NULL, "out of host memory for an attempt");
    at->exit_code = rep.exit_code;
    at->sim_seconds = r->sim_seconds;
    at->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    snprintf(at->cause, sizeof at->cause, "doctor: %s", rep.passed ? "every check passed" : "checks failed");
    r->attempts = at, r->nattempts = 1;
    size_t len = 0;
    FILE *f = open_memstream(&r->doctor_text, &len);
    TR_CHECK(f != NULL, "out of host memory for the doctor's report");
    doctor_report_text(f, &rep);
    fclose(f);
    char path[SC_PATH_LEN + 16];
    snprintf(path, sizeof path, "%s/doctor.json", o->work_dir);
    /* beside the job's log: the whole report, for a person or a script; whole or not at all (the run's own
     * work folder, so an earlier run's report is replaced) */
    tr_safe_file js;
    char why[512];
    if (tr_safe_open(&js, path, true, NULL, why, sizeof why) == 0) {
        doctor_report_json(js.f, &rep);
        if (tr_safe_commit(&js, why, sizeof why)) fprintf(stderr, "scenario: %s not written: %s\n", path, why);
    } else {
        fprintf(stderr, "scenario: %s not written: %s\n", path, why);
    }

    runner_add_check(r, rep.reported, "doctor ran", "%d ranks, %d checks", world, rep.nchecks);
    r->nfaults = s->faults.n;
    r->faults = calloc((size_t)(r->nfaults ? r->nfaults : 1), sizeof *r->faults);
    TR_CHECK(r->faults != NULL, "out of host memory");
    for (int i = 0; i < s->faults.n; i++) {
        sc_fault_outcome *fo = &r->faults[i];
        fo->fault = s->faults.faults[i];
        fo->fired = plan.fired[i].fired;
        fo->attempt = fo->fired ? 0 : -1;
        fo->detect_seconds = -1;
        const doctor_check *c = doctor_report_failed(&rep, check_of(fo->fault.kind));
        /* a kind's check may fail on several nodes (two faults of one kind): any naming this one */
        for (int k = 0; c && k < rep.nchecks && c->node != fo->fault.node; k++)
            if (rep.checks[k].status == DOCTOR_FAIL && !strncmp(rep.checks[k].id, check_of(fo->fault.kind), 4) &&
                rep.checks[k].node == fo->fault.node)
                c = &rep.checks[k];
        fo->detected = c != NULL;
        fo->attributed = c && c->node == fo->fault.node;
        if (c) {
            fo->detect_seconds = 0;
            snprintf(fo->diagnosis, sizeof fo->diagnosis, "%.60s: %.440s", c->title, c->detail);
        }
    }
    int unexplained = 0, failed = 0;
    const doctor_check *first = NULL;
    for (int i = 0; i < rep.nchecks; i++) {
        if (rep.checks[i].status != DOCTOR_FAIL) continue;
        failed++;
        if (!explained(s, &rep.checks[i])) unexplained++, first = first ? first : &rep.checks[i];
    }
    if (first)
        runner_add_check(r, false, "no false alarms", "%d failed check(s) that no fault explains: %s: %.300s",
                         unexplained, first->title, first->detail);
    else runner_add_check(r, true, "no false alarms", "%d failed check(s), each explained by a fault", failed);
    free(plan.fired);
    doctor_report_free(&rep);
    return 0;
}
