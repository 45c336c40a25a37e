/* A campaign: N random single faults, each rehearsed on its own under the supervisor and judged
 * like a scenario's own faults; the totals say how many were detected, blamed right, and recovered
 * with the fault-free run's losses and weights.
 *
 * The faults are drawn first, all from the one seed in trial order, so trial K's fault is the same
 * however the trials run: one after another in this process, or `jobs` at a time, each in a process
 * fork()ed from this one after the fault-free run (a copy of the runner with no thread running: the
 * twin's worker pool lives only within a run) with a folder of its own and a one-thread twin (the
 * threads never change a result: docs/twin.md#threads). A child sends its trial's outcome back through
 * a pipe; the totals are then added up in trial order, so the report does not depend on which trial
 * finished first. `--campaign-seed S --trial K` replays trial K alone.
 *
 * With checkpoints in the scenario a trial starts from a snapshot: the fault-free run kept every
 * checkpoint it saved (runner.c), and the trial resumes from the newest one before its fault's
 * iteration (runner_supervise.c's snapshot_restore), which is the state a run from iteration 1 would
 * have reached, bit for bit; `--from-start` runs every trial from iteration 1. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner_internal.h"
#include "twinrun/err.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t pick(uint64_t *rng, int64_t lo, int64_t hi) {
    return lo + (int64_t)(splitmix64(rng) % (uint64_t)(hi - lo + 1));
}

/* Kinds a campaign can draw here: the start-up and file kinds need what the scenario may lack. */
static bool drawable(const sc_job *j, const scenario *s, fault_kind k) {
    if (!(s->campaign.kinds & (1u << k))) return false;
    /* a file to damage: the job reads copies of its data.path files, and each trial's judge restores it */
    if (k == FAULT_DATA_CORRUPT && j->cfg->n_data_path == 0) return false;
    /* a stalled read is blamed with its file: mock data has none */
    if (k == FAULT_DATA_STALL && j->cfg->n_data_path == 0) return false;
    if (k == FAULT_PREEMPT) return false; /* needs --exit-signal-handler: a scenario of its own */
    if (k == FAULT_AMAX_SPIKE && j->cfg->fp8 == TR_FP8_MODE_NONE) return false; /* no FP8 tensor to spike */
    if ((k == FAULT_CKPT_ENOSPC || k == FAULT_CKPT_CRASH || k == FAULT_CKPT_CORRUPT) && s->save_interval <= 0)
        return false;
    if (k == FAULT_CKPT_CORRUPT && s->keep_last == 1) return false;
    /* blame compares the nodes' versions: with two nodes a skewed one and a good one split evenly */
    if (k == FAULT_VERSION_SKEW && s->nodes < 3) return false;
    return true;
}

/* A rank that writes a checkpoint shard without the distributed optimizer (with it every rank writes its
 * part of the moments): data- and context-parallel rank 0 of a (TP, PP) position; grid order TP, CP, DP, PP. */
static int shard_writer(const scenario *s, uint64_t *rng) {
    const int tp = (int)pick(rng, 0, s->tp - 1), pp = (int)pick(rng, 0, s->pp - 1);
    return pp * s->tp * s->cp * s->dp + tp;
}

/* kinds[FAULT_KIND_COUNT]: the drawable kinds in enum order; returns how many. */
static int drawable_kinds(const sc_job *j, const scenario *s, fault_kind *kinds) {
    int nk = 0;
    for (int k = 0; k < FAULT_KIND_COUNT; k++)
        if (drawable(j, s, (fault_kind)k)) kinds[nk++] = (fault_kind)k;
    return nk;
}

bool runner_campaign_can_draw(const sc_job *j, const scenario *s, sc_report *r) {
    fault_kind kinds[FAULT_KIND_COUNT];
    if (drawable_kinds(j, s, kinds) > 0) return true;
    memset(&r->campaign, 0, sizeof r->campaign);
    r->has_campaign = true;
    runner_add_check(
        r, false, "campaign: a fault kind to draw",
        "none of campaign.kinds can be thrown at this scenario: data_corrupt and data_stall need data.path (a file "
        "to damage), preempt a scenario of its own (--exit-signal-handler), the checkpoint kinds "
        "checkpoint.interval, ckpt_corrupt keep_last other than 1, version_skew 3 nodes or more");
    return false;
}

static void draw(const sc_job *j, const scenario *s, uint64_t *rng, fault_spec *f) {
    fault_kind kinds[FAULT_KIND_COUNT];
    const int nk = drawable_kinds(j, s, kinds);
    TR_CHECK(nk > 0, "the campaign has no fault kind it can draw (runner_run asks runner_campaign_can_draw first)");
    fault_kind k = kinds[pick(rng, 0, nk - 1)];
    fault_spec_default(f, k);
    const int64_t lo = s->campaign.step_min > 0 ? s->campaign.step_min : 1;
    const int64_t hi = s->campaign.step_max > 0 ? s->campaign.step_max : j->iters;
    f->step = pick(rng, lo, hi);
    f->rank = (int)pick(rng, 0, j->world - 1);
    const int node = f->rank / s->gpus_per_node;
    switch (k) {
    case FAULT_NODE_CRASH:
    case FAULT_SHORT_NODE:
    case FAULT_VERSION_SKEW:
        f->node = node, f->rank = -1;
        if (k != FAULT_NODE_CRASH) f->step = 0;
        if (k == FAULT_SHORT_NODE) f->devices = (int)pick(rng, 0, s->gpus_per_node - 1);
        break;
    case FAULT_NAN:
        f->tensor = (fault_tensor)pick(rng, 0, 2);
        f->inf = pick(rng, 0, 1);
        f->layer = -1;                 /* the rank's first site of that tensor: every rank holds some layer */
        if (f->tensor == FAULT_T_LOSS) /* only the last pipeline stage has the loss */
            f->rank = (int)pick(rng, j->world - j->world / s->pp, j->world - 1);
        break;
    case FAULT_COLL_MISMATCH:
        /* a group that issues collectives every iteration (pp only sends and receives) */
        snprintf(f->group, sizeof f->group, "%s", s->tp > 1 ? "tp" : s->dp * s->cp > 1 ? "dp_cp" : "world");
        break;
    case FAULT_CKPT_ENOSPC:
    case FAULT_CKPT_CRASH:
    case FAULT_CKPT_CORRUPT: {
        /* a step with a save, before the last iteration so there is something to resume */
        int64_t n = (hi - 1) / s->save_interval;
        f->step = n >= 1 ? s->save_interval * pick(rng, 1, n) : s->save_interval;
        if (!s->distributed_optimizer) f->rank = shard_writer(s, rng); /* a rank without a shard has no write to fail */
        break;
    }
    case FAULT_STRAGGLER: f->factor = 3.0 + (double)pick(rng, 0, 5); break;
    case FAULT_DATA_CORRUPT:
        /* the form of damage follows what was drawn already, not a draw of its own, so the campaign's
         * stream of draws (and every earlier campaign's faults but this field) stays as it was */
        f->damage = (fault_damage)((f->rank + f->step) % FAULT_DAMAGE_COUNT);
        if (f->damage != FAULT_D_TOKEN) f->step = 0; /* the other forms are found at start-up */
        break;
    default: break;
    }
}

/* One trial's result as a child process sends it back (plain data). */
typedef struct trial_result {
    sc_campaign_trial trial;
    size_t peak_bytes, capacity_bytes;
    double sim_seconds;
} trial_result;

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Fault f supervised under sv, judged into res. */
static void trial_run(const sc_supervisor *sv0, const fault_spec *f, int number, trial_result *res) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* from the snapshot of the iteration before the fault's (its save at that iteration is made in the
     * trial, where a checkpoint fault needs it); a fault at start-up starts at iteration 1 */
    sc_supervisor snap = *sv0;
    snap.resume_at = sv0->snapshots && sv0->s->save_interval > 0 && f->step > 1 ? f->step - 1 : 0;
    const sc_supervisor *sv = &snap;
    fault_spec fault = *f;
    fault_plan plan = {.n = 1, .faults = &fault, .gpus_per_node = sv->s->gpus_per_node};
    fault_firing fired = {0};
    plan.fired = &fired;
    sc_report one = {0};
    sc_supervised out;
    runner_supervise(sv, &plan, &one, &out);
    memset(res, 0, sizeof *res);
    sc_campaign_trial *t = &res->trial;
    t->number = number;
    t->resumed_from = out.resumed_from;
    t->replayed_from = out.replayed_from;
    t->outcome = one.faults[0];
    t->continuity_ok = out.continuity_ok && out.weights_ok;
    t->completed = out.completed;
    const sc_fault_outcome *fo = &t->outcome;
    t->ok = fo->fired && fo->detected && fo->attributed && t->continuity_ok && t->completed;
    res->peak_bytes = one.peak_bytes;
    res->capacity_bytes = one.capacity_bytes;
    res->sim_seconds = one.sim_seconds;
    plan.faults = NULL;
    report_free(&one);
    t->wall_seconds = seconds_since(&t0);
}

/* A trial whose process did not report: failed, with what became of the process. */
static void trial_lost(const fault_spec *f, int number, int status, trial_result *res) {
    memset(res, 0, sizeof *res);
    res->trial.number = number;
    res->trial.outcome.fault = *f;
    res->trial.outcome.attempt = -1;
    res->trial.outcome.detect_seconds = -1;
    if (WIFSIGNALED(status))
        snprintf(res->trial.outcome.diagnosis, sizeof res->trial.outcome.diagnosis,
                 "the trial's process died of signal %d (%s) before it reported", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(res->trial.outcome.diagnosis, sizeof res->trial.outcome.diagnosis,
                 "the trial's process exited %d without a report", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Trial `number` in WORK/trial_<number> (its job.log, console.log: the ranks' messages, and its
 * checkpoints while it runs) with a one-thread twin, in a worker process (trials_parallel). 0, or -1
 * when its folder or log could not be made. */
static int trial_in_folder(const sc_supervisor *sv, const fault_spec *f, int number, trial_result *res) {
    char dir[SC_PATH_LEN + 32], logp[SC_PATH_LEN + 48], err[512];
    snprintf(dir, sizeof dir, "%s/trial_%d", sv->o->work_dir, number);
    FILE *log = NULL;
    if (runner_make_dir(dir, err, sizeof err) == 0) {
        snprintf(logp, sizeof logp, "%s/job.log", dir);
        log = fopen(logp, "w");
    }
    if (!log) return -1;
    /* the ranks' messages of trials running side by side would interleave: each trial keeps its own */
    char con[SC_PATH_LEN + 48];
    snprintf(con, sizeof con, "%s/console.log", dir);
    fflush(stdout), fflush(stderr);
    FILE *c = fopen(con, "w");
    if (c) dup2(fileno(c), STDOUT_FILENO), dup2(fileno(c), STDERR_FILENO), fclose(c);
    sc_job j = *sv->job;
    j.log = log;
    j.opt.threads = 1;
    snprintf(j.ckpt_dir, sizeof j.ckpt_dir, "%.*s/checkpoints", (int)sizeof j.ckpt_dir - 16, dir);
    sc_run_options o = *sv->o;
    o.work_dir = dir, o.job_log = log, o.progress = NULL, o.trace_path = NULL;
    const sc_supervisor csv = {&j, sv->s, &o, sv->reference, sv->snapshots, 0, sv->resumes};
    trial_run(&csv, f, number, res);
    fclose(log);
    fflush(stdout), fflush(stderr);
    /* a trial that went as it should leaves its logs; its checkpoints are what a post-mortem of a
     * failed one needs, and a thousand trials' would fill a runner's disk */
    if (res->trial.ok) {
        char ck[SC_PATH_LEN + 64];
        snprintf(ck, sizeof ck, "%s/checkpoints", dir);
        (void)work_remove_tree(ck);
        snprintf(ck, sizeof ck, "%s/checkpoints.quarantine", dir);
        (void)work_remove_tree(ck);
    }
    return 0;
}

/* All of len bytes through fd (EINTR retried): 0, or -1. */
static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        const ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, len -= (size_t)w;
    }
    return 0;
}

/* len bytes from fd: how many came before end of file or an error (len: all). */
static size_t read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        const ssize_t r = read(fd, p + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

/* A worker's side: trials one after another, each as the runner names it (its index into faults,
 * through cmd) until cmd closes, each result written whole to res. Never returns.
 *
 * Why a worker runs many trials, not one: a trial of 1024 ranks touches ~2 GiB of fresh memory, and a
 * new process gets it page by page from the kernel (on a VM, often from the host: a third of a fresh
 * process's CPU time went to zeroing and mapping pages, perf). A worker keeps what its malloc got
 * (M_TRIM_THRESHOLD) and the next trial reuses it. Trials one after another in one process are
 * what --jobs 1 runs, with the same results (tests/scenario/campaign_jobs.py): nothing of a trial
 * outlives it but freed memory. */
static void worker_main(const sc_supervisor *sv, const fault_spec *faults, int first, int cmd, int out) {
    (void)mallopt(M_TRIM_THRESHOLD, INT_MAX);
    (void)mallopt(M_MMAP_THRESHOLD, 32 << 20); /* the device's allocations in the heap, which stays */
    int i;
    while (read_all(cmd, &i, sizeof i) == sizeof i) {
        trial_result res;
        if (trial_in_folder(sv, &faults[i], first + i + 1, &res)) _exit(3);
        if (write_all(out, &res, sizeof res)) _exit(4);
    }
    /* exit, not _exit: what this process wrote is flushed into its console.log, and a coverage build
     * writes its counts (the parent flushed its own buffers before the fork: nothing is written twice) */
    exit(0);
}

/* Runs n trials (faults[i] is trial first + i + 1) in `jobs` worker processes, handing each the next
 * trial as it finishes one; fills res[i]. A worker that dies fails the trial it had (not the campaign),
 * and another takes its place. */
static void trials_parallel(const sc_supervisor *sv, const fault_spec *faults, int first, int n, int jobs,
                            trial_result *res) {
    typedef struct worker {
        pid_t pid;
        int cmd, out, i; /* the trial in hand, -1 none */
    } worker;
    worker *w = calloc((size_t)jobs, sizeof *w);
    struct pollfd *pf = calloc((size_t)jobs, sizeof *pf);
    TR_CHECK(w != NULL && pf != NULL, "out of host memory");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int next = 0, done = 0;
    while (done < n) {
        for (int k = 0; k < jobs; k++) { /* a worker for every slot while trials are left, each with one */
            if (w[k].pid <= 0 && next < n) {
                fflush(NULL); /* nothing buffered here is written twice by a child */
                int c[2], o[2];
                if (pipe(c) != 0 || pipe(o) != 0) tr_fatal("a pipe for a campaign worker: %s", strerror(errno));
                const pid_t pid = fork();
                if (pid < 0) tr_fatal("fork for a campaign worker: %s", strerror(errno));
                if (pid == 0) {
                    close(c[1]), close(o[0]);
                    for (int q = 0; q < jobs; q++)
                        if (w[q].pid > 0) close(w[q].cmd), close(w[q].out);
                    worker_main(sv, faults, first, c[0], o[1]);
                }
                close(c[0]), close(o[1]);
                w[k] = (worker){pid, c[1], o[0], -1};
            }
            if (w[k].pid > 0 && w[k].i < 0) {
                if (next < n && write_all(w[k].cmd, &next, sizeof next) == 0) w[k].i = next++;
                else if (next >= n && w[k].cmd >= 0) close(w[k].cmd), w[k].cmd = -1; /* no more: it exits */
            }
        }
        for (int k = 0; k < jobs; k++) pf[k] = (struct pollfd){w[k].pid > 0 ? w[k].out : -1, POLLIN, 0};
        if (poll(pf, (nfds_t)jobs, -1) < 0) {
            if (errno != EINTR) tr_fatal("waiting for campaign trials: %s", strerror(errno));
            continue;
        }
        for (int k = 0; k < jobs; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const int i = w[k].i;
            const size_t got = i >= 0 ? read_all(w[k].out, &res[i], sizeof *res) : 0;
            if (i >= 0 && got == sizeof *res) {
                w[k].i = -1;
            } else { /* the worker is gone (or says nothing more): reap it; its trial, if any, failed */
                int status = 0;
                while (waitpid(w[k].pid, &status, 0) < 0 && errno == EINTR) continue;
                if (w[k].cmd >= 0) close(w[k].cmd);
                close(w[k].out);
                w[k].pid = 0;
                if (i < 0) continue;
                trial_lost(&faults[i], first + i + 1, status, &res[i]);
            }
            done++;
            if (sv->o->progress) {
                char what[160];
                snprintf(what, sizeof what, "trial %d: %s (%.1f s)", res[i].trial.number,
                         res[i].trial.ok ? "ok" : "FAILED", res[i].trial.wall_seconds);
                report_progress_line(sv->o->progress, seconds_since(&t0), done, n, what);
            }
        }
    }
    for (int k = 0; k < jobs; k++) /* the last ones, told there is no more */
        if (w[k].pid > 0) {
            if (w[k].cmd >= 0) close(w[k].cmd);
            close(w[k].out);
            while (waitpid(w[k].pid, NULL, 0) < 0 && errno == EINTR) continue;
        }
    free(pf);
    free(w);
}

/* Online CPUs, at least 1. */
static int cpus(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int runner_campaign_run(const sc_supervisor *sv, sc_report *r) {
    sc_job *j = sv->job;
    const scenario *s = sv->s;
    const sc_run_options *o = sv->o;
    sc_campaign_result *c = &r->campaign;
    memset(c, 0, sizeof *c);
    r->has_campaign = true;
    c->seed = o->campaign_seed_set ? o->campaign_seed : s->campaign.seed;
    uint64_t rng = c->seed ^ 0x7477696e72756eULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* every fault first, in the seed's order: trial K's fault whatever runs */
    const int count = s->campaign.count;
    const int first = o->trial > 0 ? o->trial - 1 : 0, n = o->trial > 0 ? 1 : count;
    c->replay_trial = o->trial > 0 ? o->trial : 0;
    fault_spec *faults = calloc((size_t)(first + n), sizeof *faults);
    trial_result *res = calloc((size_t)n, sizeof *res);
    c->trial = calloc((size_t)n, sizeof *c->trial);
    TR_CHECK(faults && res, "out of host memory for the campaign's trials");
    for (int t = 0; t < first + n; t++) draw(j, s, &rng, &faults[t]);
    int jobs = o->jobs > 0 ? o->jobs : cpus();
    if (jobs > n) jobs = n;
    c->jobs = jobs;
    if (jobs > 1) {
        /* an earlier run's trial folders would read as this one's */
        DIR *d = opendir(o->work_dir);
        struct dirent *e;
        int k;
        char tail, old[SC_PATH_LEN + 300];
        while (d && (e = readdir(d)))
            if (sscanf(e->d_name, "trial_%d%c", &k, &tail) == 1) {
                snprintf(old, sizeof old, "%s/%s", o->work_dir, e->d_name);
                (void)work_remove_tree(old);
            }
        if (d) closedir(d);
        trials_parallel(sv, faults + first, first, n, jobs, res);
    } else {
        for (int i = 0; i < n; i++) {
            trial_run(sv, &faults[first + i], first + i + 1, &res[i]);
            if (o->progress) report_progress(o->progress, "campaign trials", i + 1, n);
        }
    }
    double detect_sum = 0, trial_sum = 0;
    int failures_listed = 0;
    for (int i = 0; i < n; i++) {
        const sc_campaign_trial *t = &res[i].trial;
        const sc_fault_outcome *fo = &t->outcome;
        const fault_spec *f = &faults[first + i];
        if (res[i].peak_bytes > r->peak_bytes) r->peak_bytes = res[i].peak_bytes;
        if (res[i].capacity_bytes) r->capacity_bytes = res[i].capacity_bytes;
        r->sim_seconds += res[i].sim_seconds;
        trial_sum += t->wall_seconds;
        c->trials++;
        c->per_kind_trials[f->kind]++;
        c->fired += fo->fired;
        c->detected += fo->fired && fo->detected;
        c->attributed += fo->fired && fo->attributed;
        c->continuity_ok += t->continuity_ok;
        c->recovered += t->completed;
        c->per_kind_ok[f->kind] += t->ok;
        if (c->trial) c->trial[i] = *t;
        if (fo->detected && fo->detect_seconds >= 0) {
            detect_sum += fo->detect_seconds;
            if (fo->detect_seconds > c->max_detect_seconds) c->max_detect_seconds = fo->detect_seconds;
        }
        if (!t->ok && failures_listed++ < 8) {
            char what[200], name[96];
            fault_spec_describe(f, what, sizeof what);
            snprintf(name, sizeof name, "campaign trial %d", t->number);
            runner_add_check(r, false, name,
                             "%s: fired %d, detected %d, attributed %d, continuity %d, completed %d; %s; replay: "
                             "scenario run %s --campaign-seed %llu --trial %d",
                             what, fo->fired, fo->detected, fo->attributed, t->continuity_ok, t->completed,
                             fo->diagnosis, s->path, (unsigned long long)c->seed, t->number);
        }
    }
    free(res);
    free(faults);
    c->wall_seconds = seconds_since(&t0);
    c->mean_trial_seconds = c->trials ? trial_sum / c->trials : 0;
    c->mean_detect_seconds = c->detected ? detect_sum / c->detected : 0;
    runner_add_check(r, c->fired == c->trials, "campaign: every fault fired", "%d of %d", c->fired, c->trials);
    runner_add_check(r, c->detected == c->trials, "campaign: every fault detected", "%d of %d", c->detected, c->trials);
    runner_add_check(r, c->attributed == c->trials, "campaign: every blame correct", "%d of %d", c->attributed,
                     c->trials);
    runner_add_check(r, c->continuity_ok == c->trials, "campaign: nothing lost",
                     "%d of %d recovered with every loss and the final weights bit-identical to the fault-free run",
                     c->continuity_ok, c->trials);
    if (s->expect.max_detect_seconds > 0)
        runner_add_check(r, c->max_detect_seconds <= s->expect.max_detect_seconds, "campaign: time to detect",
                         "max %.1f s, mean %.1f s simulated (limit %.1f s)", c->max_detect_seconds,
                         c->mean_detect_seconds, s->expect.max_detect_seconds);
    return 0;
}
