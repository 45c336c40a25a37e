/* The supervisor's restart loop: run, and when the job stops, say why, then start it again from the
 * latest checkpoint — like the seeds' `while ! torchrun ...; do` loop, but with every fault
 * accounted for and the result compared with the fault-free twin. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runner_internal.h"
#include "twinrun/err.h"

void runner_add_check(sc_report *r, bool passed, const char *name, const char *fmt, ...) {
    sc_check *c = realloc(r->checks, sizeof *c * (size_t)(r->nchecks + 1));
    TR_CHECK(c != NULL, "out of host memory for a check");
    r->checks = c;
    c = &r->checks[r->nchecks++];
    memset(c, 0, sizeof *c);
    c->passed = passed;
    snprintf(c->name, sizeof c->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

static int64_t read_latest(const char *dir) {
    char path[SC_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", dir);
    FILE *f = fopen(path, "r");
    long long it = 0;
    if (f) {
        if (fscanf(f, "%lld", &it) != 1) it = 0;
        fclose(f);
    }
    return it;
}

/* After a checksum failure: move the damaged checkpoint aside and point the tracker at the newest
 * older one (or at none), as an operator would. Returns the iteration resumed from. */
static int64_t quarantine(const char *dir, int64_t bad) {
    char from[SC_PATH_LEN + 64], to[SC_PATH_LEN + 96];
    snprintf(from, sizeof from, "%s/iter_%07lld", dir, (long long)bad);
    /* beside the checkpoints, not among them: a --load of dir must find only checkpoints there */
    snprintf(to, sizeof to, "%s.quarantine", dir);
    (void)mkdir(to, 0755);
    snprintf(to, sizeof to, "%s.quarantine/iter_%07lld", dir, (long long)bad);
    (void)rename(from, to);
    int64_t best = 0;
    DIR *dp = opendir(dir);
    if (dp) {
        struct dirent *e;
        while ((e = readdir(dp))) {
            long long it;
            char tail;
            if (sscanf(e->d_name, "iter_%7lld%c", &it, &tail) == 1 && it < bad && it > best) best = it;
        }
        closedir(dp);
    }
    char tracker[SC_PATH_LEN + 64];
    snprintf(tracker, sizeof tracker, "%s/latest_checkpointed_iteration.txt", dir);
    if (best == 0) {
        (void)remove(tracker);
    } else {
        FILE *f = fopen(tracker, "w");
        if (f) fprintf(f, "%lld\n", (long long)best), fclose(f);
    }
    return best;
}

/* Flips one byte of rank's shard of iteration it. 0, or -1 when the file is not there. */
static int damage_shard(const char *dir, int64_t it, int rank, char *path, size_t pathlen) {
    snprintf(path, pathlen, "%s/iter_%07lld/shard_%05d.bin", dir, (long long)it, rank);
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    int c = 0;
    if (fseek(f, 64, SEEK_SET) == 0 && (c = fgetc(f)) != EOF && fseek(f, 64, SEEK_SET) == 0) fputc(c ^ 0x5a, f);
    fclose(f);
    return 0;
}

/* Never through a symbolic link: a link is removed, not what it points to. */
static void rm_tree(const char *path) {
    struct stat st;
    DIR *dp = lstat(path, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    if (!dp) {
        (void)remove(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[SC_PATH_LEN + 300];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rm_tree(sub);
    }
    closedir(dp);
    (void)rmdir(path);
}

/* ---- one attempt, and the judges of each kind of fault ---------------------------------------- */

/* The supervisor within one attempt of a fault plan. */
typedef struct attempt_state {
    const sc_supervisor *sv;
    fault_plan *plan;
    sc_report *r;
    int a;                           /* the attempt */
    bool ckpts;                      /* the scenario saves checkpoints */
    int corrupt;                     /* the ckpt_corrupt fault whose save this attempt stops after; -1 none */
    bool data_tried;                 /* a data_corrupt fault was considered before this attempt */
    char damaged[SC_PATH_LEN + 320]; /* the data file it cut, "" none */
    sc_run run;
    sc_attempt *at;
} attempt_state;

/* What the supervisor does about one kind of fault in each attempt. Faults the job injects itself
 * need only a judge after the run; damage done outside the job (a data file, a saved checkpoint)
 * is done before the attempt (or after it) and judged when the job next reads what was damaged. */
typedef struct fault_kind_judge {
    void (*before)(attempt_state *st, int i); /* before the run; NULL: nothing */
    void (*judge)(attempt_state *st, int i);  /* after the run: detected? attributed? */
    /* before attempt st->a (after the befores): fault i fired and was judged in an earlier attempt, so it
     * can do nothing more in this one or any later one */
    bool (*spent)(const attempt_state *st, int i);
} fault_kind_judge;

/* Fired (or, data_corrupt, done) in an earlier attempt, and judged after it. */
static bool spent_before(const attempt_state *st, int i) {
    const int at = st->plan->fired[i].attempt; /* 1-based: the attempt it fired in */
    return at >= 1 && at <= st->a && st->r->faults[i].fired;
}

/* Injected by the job (hang, crash, NaN, ...): judged from the run it fired in. */
static void judge_in_job(attempt_state *st, int i) {
    const fault_firing *fired = &st->plan->fired[i];
    if (fired->attempt != st->a + 1) return;
    sc_fault_outcome *fo = &st->r->faults[i];
    fo->fired = true, fo->attempt = st->a, fo->fired_at = fired->at;
    runner_judge_fault(st->sv->job, st->plan, i, &st->run, fo);
}

/* data_corrupt, before: damage the job's copy of a data file (the first such fault not yet fired). */
static void damage_data(attempt_state *st, int i) {
    fault_firing *fired = &st->plan->fired[i];
    if (st->data_tried || fired->attempt) return;
    st->data_tried = true;
    char what[sizeof st->damaged + 64];
    if (runner_data_copies(st->sv->job, st->sv->o->work_dir, &st->plan->faults[i], st->damaged, sizeof st->damaged,
                           what, sizeof what) > 0) {
        fired->attempt = st->a + 1, fired->fired = true, fired->at = 0;
        fprintf(stderr, "twinrun: fault injected: %s\n", what);
    }
}

/* data_corrupt, after: the loader must have refused the damaged file, naming it (at start-up; the bad
 * token when the batch holding it was read). */
static void judge_data_corrupt(attempt_state *st, int i) {
    if (st->plan->fired[i].attempt != st->a + 1) return;
    sc_fault_outcome *fo = &st->r->faults[i];
    char prefix[sizeof st->damaged]; /* the loader names the dataset by its prefix */
    const size_t len = strlen(st->damaged);
    snprintf(prefix, sizeof prefix, "%.*s", (int)(len > 4 ? len - 4 : 0), st->damaged);
    fo->fired = true, fo->attempt = st->a, fo->fired_at = 0;
    if (st->plan->faults[i].damage == FAULT_D_TOKEN) { /* found when its batch is read, mid-run */
        fo->detected = st->run.rc != 0 && strstr(st->run.err, "outside the vocabulary");
        fo->detect_seconds = fo->detected ? st->run.tres.end_time : -1;
    } else { /* at start-up, before any rank runs */
        fo->detected = !strcmp(st->run.sum.diag.kind, "data");
        fo->detect_seconds = fo->detected ? 0 : -1;
    }
    fo->attributed = fo->detected && prefix[0] && strstr(st->run.err, prefix);
    snprintf(fo->diagnosis, sizeof fo->diagnosis, "%.500s", st->run.err);
    /* the operator restores the file */
    (void)runner_data_copies(st->sv->job, st->sv->o->work_dir, NULL, NULL, 0, NULL, 0);
}

/* ckpt_corrupt, before: stop this attempt after the save the fault will damage (the first such
 * fault not yet fired whose step is past the latest checkpoint). */
static void plan_ckpt_stop(attempt_state *st, int i) {
    if (!st->ckpts || st->corrupt >= 0 || st->plan->fired[i].attempt) return;
    if (read_latest(st->sv->job->ckpt_dir) < st->plan->faults[i].step) st->corrupt = i;
}

/* ckpt_corrupt, after the attempt that follows the damage: the load must refuse the checkpoint,
 * naming the damaged shard; the operator moves it aside and resumes from an older one. */
static void judge_ckpt_corrupt(attempt_state *st, int i) {
    const fault_spec *f = &st->plan->faults[i];
    sc_fault_outcome *fo = &st->r->faults[i];
    if (st->plan->fired[i].attempt != st->a) return;
    if (fo->detected || strcmp(st->run.sum.diag.kind, "ckpt_load")) return;
    char name[32];
    snprintf(name, sizeof name, "shard_%05d.bin", f->rank);
    fo->detected = true;
    fo->attributed = strstr(st->run.err, name) != NULL;
    fo->detect_seconds = 0; /* on load, before any work */
    snprintf(fo->diagnosis, sizeof fo->diagnosis, "%.500s", st->run.err);
    int64_t back = quarantine(st->sv->job->ckpt_dir, f->step);
    snprintf(st->at->cause, sizeof st->at->cause,
             "checkpoint %lld refused on load (checksum); moved aside, "
             "resuming from %lld",
             (long long)f->step, (long long)back);
}

/* The planned stop of a ckpt_corrupt fault: the attempt ended at the fault's step, so flip a byte
 * of the saved shard. True when that was this attempt's end (not a failure, so no restart). */
static bool damage_saved_checkpoint(attempt_state *st) {
    const int c = st->corrupt;
    if (c < 0 || st->run.rc != 0 || st->at->end_iteration != st->plan->faults[c].step) return false;
    char path[SC_PATH_LEN + 64];
    if (!damage_shard(st->sv->job->ckpt_dir, st->plan->faults[c].step, st->plan->faults[c].rank, path, sizeof path)) {
        fault_firing *fired = &st->plan->fired[c];
        fired->attempt = st->a + 1, fired->fired = true, fired->at = st->run.tres.end_time;
        st->r->faults[c].fired = true, st->r->faults[c].attempt = st->a;
        st->r->faults[c].fired_at = st->run.tres.end_time;
        fprintf(stderr, "twinrun: fault injected: flipped a byte of %s\n", path);
    }
    return true;
}

/* ckpt_corrupt's fired attempt is the one after the damage (the load that must refuse it), judged after
 * that attempt. */
static bool spent_ckpt_corrupt(const attempt_state *st, int i) {
    const int at = st->plan->fired[i].attempt;
    return at >= 1 && at < st->a && st->r->faults[i].fired;
}

static const fault_kind_judge IN_JOB = {NULL, judge_in_job, spent_before};
static const fault_kind_judge DATA_CORRUPT = {damage_data, judge_data_corrupt, spent_before};
static const fault_kind_judge CKPT_CORRUPT = {plan_ckpt_stop, judge_ckpt_corrupt, spent_ckpt_corrupt};
/* by fault kind; NULL: injected by the job (IN_JOB) */
static const fault_kind_judge *const JUDGES[FAULT_KIND_COUNT] = {
    [FAULT_DATA_CORRUPT] = &DATA_CORRUPT,
    [FAULT_CKPT_CORRUPT] = &CKPT_CORRUPT,
};

static const fault_kind_judge *judge_of(fault_kind k) { return JUDGES[k] ? JUDGES[k] : &IN_JOB; }

/* A zeroed attempt `index` appended to the report's. */
static sc_attempt *new_attempt(sc_report *r, int index) {
    sc_attempt *at = realloc(r->attempts, sizeof *at * (size_t)(r->nattempts + 1));
    TR_CHECK(at != NULL, "out of host memory for an attempt");
    r->attempts = at;
    at = &r->attempts[r->nattempts++];
    memset(at, 0, sizeof *at);
    at->index = index;
    return at;
}

/* Records attempt a's run in the report (iterations, exit, times, cause); its losses into final. */
static sc_attempt *record_attempt(attempt_state *st, double *final) {
    const sc_job *j = st->sv->job;
    sc_report *r = st->r;
    const sc_run *run = &st->run;
    sc_attempt *at = new_attempt(r, st->a);
    at->start_iteration = run->sum.start_iteration;
    at->end_iteration = run->sum.start_iteration;
    for (int64_t it = 1; it <= j->iters; it++)
        if (!isnan(run->losses[it])) final[it] = run->losses[it], at->end_iteration = it;
    at->exit_code = run->rc;
    at->sim_seconds = run->tres.end_time;
    at->wall_seconds = run->wall;
    r->sim_seconds += run->tres.end_time;
    if (run->sum.device_peak_bytes > r->peak_bytes) r->peak_bytes = run->sum.device_peak_bytes;
    if (run->sum.device_capacity) r->capacity_bytes = run->sum.device_capacity;
    runner_run_cause(j, run, at->cause, sizeof at->cause);
    return at;
}

/* A restart not run (runner_resume_known): an attempt in the report that says so, and the losses after
 * iteration L its verified resume's, which were the reference's. */
static void record_known(attempt_state *st, int64_t L, double *final) {
    const sc_job *j = st->sv->job;
    sc_report *r = st->r;
    sc_attempt *at = new_attempt(r, st->a);
    at->start_iteration = L;
    at->end_iteration = j->iters;
    for (int64_t it = L + 1; it <= j->iters; it++) final[it] = st->sv->reference->losses[it];
    /* its memory is the verified runs' (the same run) */
    const sc_resumes *rs = st->sv->resumes;
    if (rs->peak_bytes > r->peak_bytes) r->peak_bytes = rs->peak_bytes;
    if (rs->capacity_bytes) r->capacity_bytes = rs->capacity_bytes;
    snprintf(at->cause, sizeof at->cause,
             "not run: it resumes from iteration %lld exactly as the verified fault-free resume did, so it ends "
             "as that run did (completed)",
             (long long)L);
    if (st->sv->o->progress) fprintf(st->sv->o->progress, "  attempt %d: %s\n", st->a, at->cause);
}

/* The job's checkpoints (when the scenario saves them), the plan's records and the report's
 * outcomes, cleared for a new supervised run. */
static void start_supervision(const sc_supervisor *sv, fault_plan *plan, sc_report *r) {
    tr_config *cfg = sv->job->cfg;
    rm_tree(sv->job->ckpt_dir);
    char quarantined[SC_PATH_LEN + 16];
    snprintf(quarantined, sizeof quarantined, "%s.quarantine", sv->job->ckpt_dir);
    rm_tree(quarantined);
    if (sv->s->save_interval > 0) {
        snprintf(cfg->save, sizeof cfg->save, "%s", sv->job->ckpt_dir);
        snprintf(cfg->load, sizeof cfg->load, "%s", sv->job->ckpt_dir);
        cfg->save_interval = sv->s->save_interval;
        cfg->keep_last = sv->s->keep_last;
    }
    cfg->faults = plan;
    plan->supervised = true;
    memset(plan->fired, 0, sizeof *plan->fired * (size_t)plan->n);
    r->faults = calloc((size_t)(plan->n ? plan->n : 1), sizeof *r->faults);
    TR_CHECK(r->faults != NULL, "out of host memory for the faults' outcomes");
    r->nfaults = plan->n;
    for (int i = 0; i < plan->n; i++) r->faults[i].fault = plan->faults[i], r->faults[i].attempt = -1;
}

/* TWINRUN_PLANTED_BUG=resume_lr:KIND, for tests only: the attempt after one in which a fault of KIND
 * fired trains with 1.5 times the job's learning rate — a resume that loses the job's settings, the
 * kind of bug the campaign must catch (tests/scenario/campaign_planted.py). -1: no bug planted. */
static int planted_bug_kind(void) {
    const char *e = getenv("TWINRUN_PLANTED_BUG");
    if (!e || !*e) return -1;
    const int k = strncmp(e, "resume_lr:", 10) == 0 ? fault_kind_from_name(e + 10) : -1;
    if (k < 0) tr_fatal("TWINRUN_PLANTED_BUG=%s: resume_lr:KIND please, KIND a fault kind (docs/faults.md)", e);
    return k;
}

/* One file of a snapshot into a trial's checkpoint: a hard link (nothing writes a saved shard in place:
 * a damaged one is a new save, a quarantined one is renamed), or a copy where links do not go. */
static int place_file(const char *from, const char *to) {
    if (link(from, to) == 0) return 0;
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[1 << 16];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in && ferror(in)) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    return rc;
}

/* The newest save of checkpoint.interval at or before iteration `it` (0: none). */
static int64_t save_before(const sc_supervisor *sv, int64_t it) {
    const int64_t every = sv->s->save_interval;
    return every > 0 ? it / every * every : 0;
}

/* A campaign trial's start from the fault-free run's checkpoints (sv->snapshots, one of every
 * iteration): the saves a run from iteration 1 would hold when it reached iteration resume_at + 1 —
 * every save of checkpoint.interval up to resume_at, or the scenario's keep_last latest — placed in the
 * job's checkpoint folder, and the tracker at the newest (none before the first save). The job then
 * loads the snapshot of resume_at itself: from that folder where resume_at is a save of the interval,
 * else from the snapshots (runner_supervise). 0, or -1 (the folder emptied again: the trial then starts
 * from iteration 1). */
static int snapshot_restore(const sc_supervisor *sv) {
    const char *dir = sv->job->ckpt_dir;
    const int64_t every = sv->s->save_interval, newest = save_before(sv, sv->resume_at);
    char err[256], from[SC_PATH_LEN + 300], to[SC_PATH_LEN + 300];
    int rc = runner_make_dir(dir, err, sizeof err);
    for (int64_t it = newest, n = 0; rc == 0 && it >= every && (sv->s->keep_last <= 0 || n < sv->s->keep_last);
         it -= every, n++) {
        snprintf(from, sizeof from, "%s/iter_%07lld", sv->snapshots, (long long)it);
        snprintf(to, sizeof to, "%s/iter_%07lld", dir, (long long)it);
        DIR *d = opendir(from);
        if (!d || mkdir(to, 0755) != 0) {
            if (d) closedir(d);
            rc = -1;
            break;
        }
        struct dirent *e;
        while (rc == 0 && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            snprintf(from, sizeof from, "%s/iter_%07lld/%s", sv->snapshots, (long long)it, e->d_name);
            snprintf(to, sizeof to, "%s/iter_%07lld/%s", dir, (long long)it, e->d_name);
            rc = place_file(from, to);
        }
        closedir(d);
    }
    snprintf(to, sizeof to, "%s/latest_checkpointed_iteration.txt", dir);
    FILE *f = rc == 0 && newest > 0 ? fopen(to, "w") : NULL;
    if (rc == 0 && newest > 0 && !f) rc = -1;
    if (f && fprintf(f, "%lld\n", (long long)newest) < 0) rc = -1;
    if (f && fclose(f) != 0) rc = -1;
    if (rc) rm_tree(dir);
    return rc;
}

int runner_supervise(const sc_supervisor *sv, fault_plan *plan, sc_report *r, sc_supervised *out) {
    sc_job *j = sv->job;
    const scenario *s = sv->s;
    const int planted = planted_bug_kind();
    const double lr = j->cfg->lr;
    const int64_t ckpt_step = j->cfg->ckpt_step;
    start_supervision(sv, plan, r);
    const int nf = plan->n;
    double *final = malloc(sizeof(double) * (size_t)(j->iters + 1));
    TR_CHECK(final != NULL, "out of host memory for the losses");
    for (int64_t i = 0; i <= j->iters; i++) final[i] = NAN;
    /* from a snapshot: iterations 1..resume_at are the fault-free run's, bit for bit, by construction */
    out->resumed_from = 0;
    out->replayed_from = -1;
    if (sv->resume_at > 0 && sv->snapshots && sv->reference && snapshot_restore(sv) == 0) {
        out->resumed_from = sv->resume_at;
        for (int64_t i = 1; i <= sv->resume_at && i <= j->iters; i++) final[i] = sv->reference->losses[i];
    }

    attempt_state st = {.sv = sv, .plan = plan, .r = r, .ckpts = s->save_interval > 0};
    struct timespec t0; /* the progress lines' elapsed time */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = 0, restarts = 0;
    for (int a = 0;; a++) {
        plan->attempt = st.a = a;
        st.corrupt = -1, st.data_tried = false, st.damaged[0] = 0;
        for (int i = 0; i < nf; i++)
            if (judge_of(plan->faults[i].kind)->before) judge_of(plan->faults[i].kind)->before(&st, i);
        j->cfg->exit_interval = st.corrupt >= 0 ? (int)plan->faults[st.corrupt].step : 0;
        j->opt.trace_path = a == 0 ? sv->o->trace_path : NULL;
        char trace[SC_PATH_LEN + 32], every[32];
        if (sv->o->record && !s->campaign.count) { /* what report_html draws (runner.h) */
            snprintf(trace, sizeof trace, "%s/trace_attempt%d.json", sv->o->work_dir, a);
            j->opt.trace_path = trace, j->opt.trace_ranks = every;
            snprintf(every, sizeof every, "0-%d", j->world - 1);
            snprintf(j->cfg->metrics_jsonl, sizeof j->cfg->metrics_jsonl, "%.*s/metrics_attempt%d.jsonl",
                     (int)sizeof j->cfg->metrics_jsonl - 48, sv->o->work_dir, a);
        }
        /* a start from a snapshot between two saves of the interval loads it from the snapshots; the job's
         * own folder holds the saves before it, and every restart loads from there */
        const bool between = a == 0 && out->resumed_from > 0 && save_before(sv, out->resumed_from) != out->resumed_from;
        if (st.ckpts) {
            snprintf(j->cfg->load, sizeof j->cfg->load, "%s", between ? sv->snapshots : j->ckpt_dir);
            j->cfg->ckpt_step = between ? out->resumed_from : ckpt_step;
        }
        j->cfg->lr = lr;
        for (int i = 0; i < nf && planted >= 0; i++)
            if (a > 0 && (int)plan->faults[i].kind == planted && plan->fired[i].attempt == a) j->cfg->lr = 1.5 * lr;
        /* a restart that starts from what a verified resume started from ends as it did: not run again */
        bool spent = a > 0 && sv->resumes && !sv->o->to_the_end;
        for (int i = 0; i < nf && spent; i++) spent = judge_of(plan->faults[i].kind)->spent(&st, i);
        int64_t unfinished = -1, loads = -1;
        const int64_t known = spent ? runner_resume_known(sv, &unfinished, &loads) : -1;
        if (unfinished > 0) { /* from the snapshot before that save, up to it; then it is known */
            j->cfg->exit_interval = (int)unfinished;
            if (unfinished - 1 > loads) {
                snprintf(j->cfg->load, sizeof j->cfg->load, "%s", sv->snapshots);
                j->cfg->ckpt_step = unfinished - 1;
                for (int64_t it = loads + 1; it < unfinished; it++) final[it] = sv->reference->losses[it];
            }
        }
        if (known >= 0) {
            record_known(&st, known, final);
            j->cfg->lr = lr;
            rc = 0;
            out->replayed_from = known;
            break;
        }
        runner_run_free(&st.run);
        runner_job_run(j, &st.run);
        j->cfg->metrics_jsonl[0] = 0, j->opt.trace_ranks = NULL, j->cfg->lr = lr;
        rc = st.run.rc;
        st.at = record_attempt(&st, final);
        for (int i = 0; i < nf; i++) judge_of(plan->faults[i].kind)->judge(&st, i);
        if (sv->o->progress) {
            char line[700];
            snprintf(line, sizeof line, "attempt %d: iterations %lld..%lld, %s", a, (long long)st.at->start_iteration,
                     (long long)st.at->end_iteration, st.at->cause);
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            report_progress_line(sv->o->progress, (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) * 1e-9,
                                 st.at->end_iteration, j->iters, line);
        }
        if (damage_saved_checkpoint(&st)) continue; /* the planned stop is not a restart */
        if (unfinished > 0 && rc == 0 && st.at->end_iteration == unfinished) continue; /* nor is this one */
        bool stop_kind = false;
        for (int i = 0; i < nf; i++)
            stop_kind |= s->expect.expect_failure_kind == (int)plan->faults[i].kind && plan->fired[i].attempt == a + 1;
        /* a job that stopped cleanly before its last iteration (a preemption it saved for) is rescheduled */
        const bool finished = rc == 0 && st.at->end_iteration >= j->iters;
        if (finished || (rc == 0 && st.at->end_iteration <= st.at->start_iteration) || stop_kind ||
            restarts >= s->max_restarts)
            break;
        restarts++;
    }
    const sc_run *ref = sv->reference;
    out->completed = rc == 0 && !isnan(final[j->iters]);
    out->continuity_ok = ref != NULL;
    if (ref)
        for (int64_t it = 1; it <= j->iters; it++)
            if (memcmp(&final[it], &ref->losses[it], sizeof(double)) != 0) out->continuity_ok = false;
    /* a known restart's final weights are its verified resume's, which were the reference's */
    out->weights_ok =
        ref != NULL && rc == 0 &&
        (out->replayed_from >= 0 || !memcmp(st.run.digests, ref->digests, sizeof(uint64_t) * (size_t)j->world));
    free(r->losses);
    r->losses = final;
    runner_run_free(&st.run);
    j->cfg->faults = NULL;
    j->cfg->ckpt_step = ckpt_step;
    return rc;
}
