/* The supervisor's restart loop: run, and when the job stops, say why, then start it again from the
 * latest checkpoint — like the seeds' `while ! torchrun ...; do` loop, but with every fault
 * accounted for and the result compared with the fault-free twin. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
#include <unistd.h>

#include "runner_internal.h"
#include "twinrun/err.h"

void sc_add_check(sc_report *r, bool passed, const char *name, const char *fmt, ...) {
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
    char from[SC_PATH_LEN + 64], to[SC_PATH_LEN + 80];
    snprintf(from, sizeof from, "%s/iter_%07lld", dir, (long long)bad);
    snprintf(to, sizeof to, "%s.corrupt", from);
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

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    return rc;
}

/* data_corrupt: the job reads copies of its --data-path files from the work folder (the user's data
 * is never touched); the fault cuts two bytes off a copy's .bin, and the repair copies it again. */
static int data_copies(sc_job *j, const char *work, bool damage, char *first, size_t firstlen) {
    tr_config *cfg = j->cfg;
    int n = 0;
    for (int i = 0; i < cfg->n_data_path; i++) {
        char src[TR_PATH_LEN + 8], dst[SC_PATH_LEN + TR_PATH_LEN + 64], base[TR_PATH_LEN];
        const char *orig = cfg->data_path[i];
        const char *copy_dir_prefix = strstr(orig, "/data_copies/");
        snprintf(src, sizeof src, "%s.bin", orig);
        if (access(src, R_OK) != 0) continue; /* a blend weight */
        const char *slash = strrchr(orig, '/');
        snprintf(base, sizeof base, "%s", slash ? slash + 1 : orig);
        if (!copy_dir_prefix) { /* first time: take copies of the originals */
            char dir[SC_PATH_LEN + 32];
            snprintf(dir, sizeof dir, "%s/data_copies", work);
            (void)mkdir(dir, 0755);
            snprintf(dst, sizeof dst, "%s/%s", dir, base);
            for (int e = 0; e < 2; e++) {
                char a[TR_PATH_LEN + 8], b[sizeof dst + 8];
                snprintf(a, sizeof a, "%s%s", orig, e ? ".idx" : ".bin");
                snprintf(b, sizeof b, "%s%s", dst, e ? ".idx" : ".bin");
                if (copy_file(a, b)) return -1;
            }
            char keep[sizeof dst + 8];
            snprintf(keep, sizeof keep, "%s.orig", dst);
            if (symlink(orig, keep) && errno != EEXIST) return -1; /* where the repair copies from */
            snprintf(cfg->data_path[i], sizeof cfg->data_path[i], "%.*s", (int)sizeof cfg->data_path[i] - 1, dst);
        } else { /* repair: copy the original .bin again */
            char keep[TR_PATH_LEN + 8], target[PATH_MAX];
            snprintf(keep, sizeof keep, "%s.orig", orig);
            ssize_t k = readlink(keep, target, sizeof target - 1);
            if (k <= 0) return -1;
            target[k] = 0;
            char a[PATH_MAX + 8];
            snprintf(a, sizeof a, "%s.bin", target);
            if (copy_file(a, src)) return -1;
        }
        if (damage && n == 0) {
            snprintf(src, sizeof src, "%s.bin", cfg->data_path[i]);
            struct stat st;
            if (stat(src, &st) || truncate(src, st.st_size > 2 ? st.st_size - 2 : 0)) return -1;
            snprintf(first, firstlen, "%s", src);
        }
        n++;
    }
    return n;
}

static void rm_tree(const char *path) {
    DIR *dp = opendir(path);
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

int sc_supervise(sc_job *j, const scenario *s, fault_plan *plan, const sc_run_options *o, sc_report *r,
                 const sc_run *reference, bool *continuity_ok, bool *weights_ok, bool *completed) {
    tr_config *cfg = j->cfg;
    rm_tree(j->ckpt_dir);
    const bool ckpts = s->save_interval > 0;
    if (ckpts) {
        snprintf(cfg->save, sizeof cfg->save, "%s", j->ckpt_dir);
        snprintf(cfg->load, sizeof cfg->load, "%s", j->ckpt_dir);
        cfg->save_interval = s->save_interval;
        cfg->keep_last = s->keep_last;
    }
    cfg->faults = plan;
    const int nf = plan->n;
    free(plan->fired_attempt), free(plan->fired_at), free(plan->fired_rank);
    plan->fired_attempt = calloc((size_t)(nf ? nf : 1), sizeof *plan->fired_attempt);
    plan->fired_at = calloc((size_t)(nf ? nf : 1), sizeof *plan->fired_at);
    plan->fired_rank = calloc((size_t)(nf ? nf : 1), sizeof *plan->fired_rank);
    TR_CHECK(plan->fired_attempt && plan->fired_at && plan->fired_rank, "out of host memory for the fault plan");
    memset(plan->fired, 0, (size_t)nf);
    r->faults = calloc((size_t)(nf ? nf : 1), sizeof *r->faults);
    TR_CHECK(r->faults != NULL, "out of host memory for the faults' outcomes");
    r->nfaults = nf;
    for (int i = 0; i < nf; i++) r->faults[i].fault = plan->faults[i], r->faults[i].attempt = -1;
    double *final = malloc(sizeof(double) * (size_t)(j->iters + 1));
    TR_CHECK(final != NULL, "out of host memory for the losses");
    for (int64_t i = 0; i <= j->iters; i++) final[i] = NAN;

    sc_run run = {0};
    int rc = 0, restarts = 0;
    const int max_restarts = s->max_restarts;
    for (int a = 0;; a++) {
        plan->attempt = a;
        /* a planned stop after the save a checkpoint fault will damage */
        int corrupt = -1;
        for (int i = 0; i < nf && ckpts; i++)
            if (plan->faults[i].kind == FAULT_CKPT_CORRUPT && !plan->fired_attempt[i] &&
                read_latest(j->ckpt_dir) < plan->faults[i].step) {
                corrupt = i;
                break;
            }
        cfg->exit_interval = corrupt >= 0 ? (int)plan->faults[corrupt].step : 0;
        char damaged[SC_PATH_LEN + 320] = "";
        for (int i = 0; i < nf; i++)
            if (plan->faults[i].kind == FAULT_DATA_CORRUPT && !plan->fired_attempt[i]) {
                if (data_copies(j, o->work_dir, true, damaged, sizeof damaged) > 0) {
                    plan->fired_attempt[i] = a + 1, plan->fired[i] = 1, plan->fired_at[i] = 0;
                    fprintf(stderr, "twinrun: fault injected: cut 2 bytes off %s\n", damaged);
                }
                break;
            }
        j->opt.trace_path = a == 0 ? o->trace_path : NULL;
        sc_run_free(&run);
        sc_job_run(j, &run);
        rc = run.rc;
        sc_attempt *at = realloc(r->attempts, sizeof *at * (size_t)(r->nattempts + 1));
        TR_CHECK(at != NULL, "out of host memory for an attempt");
        r->attempts = at;
        at = &r->attempts[r->nattempts++];
        memset(at, 0, sizeof *at);
        at->index = a;
        at->start_iteration = run.sum.start_iteration;
        at->end_iteration = run.sum.start_iteration;
        for (int64_t it = 1; it <= j->iters; it++)
            if (!isnan(run.losses[it])) final[it] = run.losses[it], at->end_iteration = it;
        at->exit_code = rc;
        at->sim_seconds = run.tres.end_time;
        at->wall_seconds = run.wall;
        r->sim_seconds += run.tres.end_time;
        if (run.sum.device_peak_bytes > r->peak_bytes) r->peak_bytes = run.sum.device_peak_bytes;
        if (run.sum.device_capacity) r->capacity_bytes = run.sum.device_capacity;
        sc_run_cause(j, &run, at->cause, sizeof at->cause);

        for (int i = 0; i < nf; i++) {
            sc_fault_outcome *fo = &r->faults[i];
            if (plan->fired_attempt[i] != a + 1 || plan->faults[i].kind == FAULT_CKPT_CORRUPT ||
                plan->faults[i].kind == FAULT_DATA_CORRUPT)
                continue;
            fo->fired = true, fo->attempt = a, fo->fired_at = plan->fired_at[i];
            sc_judge_fault(j, plan, i, &run, fo);
        }
        for (int i = 0; i < nf; i++) { /* the damaged data file: the loader must name it */
            sc_fault_outcome *fo = &r->faults[i];
            if (plan->faults[i].kind != FAULT_DATA_CORRUPT || plan->fired_attempt[i] != a + 1) continue;
            char prefix[sizeof damaged]; /* the loader names the dataset by its prefix */
            snprintf(prefix, sizeof prefix, "%.*s", (int)(strlen(damaged) > 4 ? strlen(damaged) - 4 : 0), damaged);
            fo->fired = true, fo->attempt = a, fo->fired_at = 0;
            fo->detected = !strcmp(run.sum.diag.kind, "data");
            fo->attributed = fo->detected && prefix[0] && strstr(run.err, prefix);
            fo->detect_seconds = fo->detected ? 0 : -1; /* at start-up, before any rank runs */
            snprintf(fo->diagnosis, sizeof fo->diagnosis, "%.500s", run.err);
            (void)data_copies(j, o->work_dir, false, damaged, sizeof damaged); /* the operator restores the file */
        }
        /* the damaged checkpoint's load, in the attempt after the one that saved it */
        for (int i = 0; i < nf; i++) {
            sc_fault_outcome *fo = &r->faults[i];
            if (plan->faults[i].kind != FAULT_CKPT_CORRUPT || plan->fired_attempt[i] != a) continue;
            if (!fo->detected && !strcmp(run.sum.diag.kind, "ckpt_load")) { /* refused on load, naming the file */
                char name[32];
                snprintf(name, sizeof name, "shard_%05d.bin", plan->faults[i].rank);
                fo->detected = true;
                fo->attributed = strstr(run.err, name) != NULL;
                fo->detect_seconds = 0; /* on load, before any work */
                snprintf(fo->diagnosis, sizeof fo->diagnosis, "%.500s", run.err);
                int64_t back = quarantine(j->ckpt_dir, plan->faults[i].step);
                snprintf(at->cause, sizeof at->cause, "checkpoint %lld refused on load (checksum); moved aside, "
                         "resuming from %lld", (long long)plan->faults[i].step, (long long)back);
            }
        }
        if (o->progress)
            fprintf(o->progress, "  attempt %d: iterations %lld..%lld, %s\n", a, (long long)at->start_iteration,
                    (long long)at->end_iteration, at->cause);
        if (corrupt >= 0 && rc == 0 && at->end_iteration == plan->faults[corrupt].step) {
            char path[SC_PATH_LEN + 64];
            if (!damage_shard(j->ckpt_dir, plan->faults[corrupt].step, plan->faults[corrupt].rank, path, sizeof path)) {
                plan->fired_attempt[corrupt] = a + 1;
                plan->fired[corrupt] = 1;
                plan->fired_at[corrupt] = run.tres.end_time;
                r->faults[corrupt].fired = true, r->faults[corrupt].attempt = a;
                r->faults[corrupt].fired_at = run.tres.end_time;
                fprintf(stderr, "twinrun: fault injected: flipped a byte of %s\n", path);
            }
            continue; /* the planned stop is not a restart */
        }
        bool stop_kind = false;
        for (int i = 0; i < nf; i++)
            stop_kind |= s->expect.expect_failure_kind == (int)plan->faults[i].kind && plan->fired_attempt[i] == a + 1;
        /* a job that stopped cleanly before its last iteration (a preemption it saved for) is rescheduled */
        const bool finished = rc == 0 && at->end_iteration >= j->iters;
        if (finished || (rc == 0 && at->end_iteration <= at->start_iteration) || stop_kind ||
            restarts >= max_restarts)
            break;
        restarts++;
    }
    *completed = rc == 0 && !isnan(final[j->iters]);
    *continuity_ok = reference != NULL;
    if (reference)
        for (int64_t it = 1; it <= j->iters; it++)
            if (memcmp(&final[it], &reference->losses[it], sizeof(double)) != 0) *continuity_ok = false;
    *weights_ok = reference != NULL && rc == 0 &&
                  !memcmp(run.digests, reference->digests, sizeof(uint64_t) * (size_t)j->world);
    free(r->losses);
    r->losses = final;
    sc_run_free(&run);
    cfg->faults = NULL;
    return rc;
}
