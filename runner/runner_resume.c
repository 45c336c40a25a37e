/* A campaign's verified resumes: a trial's restart that starts from the inputs of a run already made
 * is not made again (runner_internal.h's sc_resumes says what is verified; docs/scenarios.md why it
 * is the same run).
 *
 * The inputs of a run of the job are its config, the checkpoint folder it loads from and saves into,
 * the data files and the fault plan; the twin adds nothing of its own (same inputs, same bits: its
 * scheduler, clock and kernels are deterministic, and its thread count changes no result). So a
 * restart is known when
 * - its fault plan is spent: every fault fired and was judged in an earlier attempt, and a fault fires
 *   once per job (fault_rank.c), so the plan injects nothing more;
 * - its config is the verification run's but for the paths of its own folders (--save, --load) and
 *   the plan (a planted bug's learning rate, a damaged data file's copy, a planned stop all differ);
 * - the checkpoint it loads (train_resume_iteration, the engine's own choice) is of an iteration L
 *   that was verified, and its folder holds exactly what the verification run's held: the saves up to
 *   L that the scenario keeps, each file byte for byte the fault-free run's, and the tracker naming L —
 *   no save that never finished, nothing else.
 * A save that never finished (a crash or a full disk while writing) at U, the next save after L, is
 * what a restart must cope with when it saves U again, so that save runs. Up to U - 1 the restart is the
 * verified resume from L (the same inputs, and no save between L and U to meet the unfinished one), so
 * it reaches U - 1 as the fault-free run did, where the fault-free run's snapshot of U - 1 is: the
 * restart starts there, runs iteration U and its save and stops (--exit-interval), as every trial starts
 * from a snapshot and as the engine's stop after a save and its resume from it are the run through it,
 * bit for bit. From U it is known when its save is the fault-free run's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runner_internal.h"
#include "twinrun/err.h"

#define TRACKER "latest_checkpointed_iteration.txt"

/* cfg without what names this run's own folders or carries its fault plan. */
static void config_key(const tr_config *cfg, tr_config *key) {
    *key = *cfg;
    memset(key->save, 0, sizeof key->save);
    memset(key->load, 0, sizeof key->load);
    key->faults = NULL;
}

void runner_resumes_free(sc_resumes *rs) {
    free(rs->verified);
    free(rs->key);
    memset(rs, 0, sizeof *rs);
}

void runner_resumes_verify(const sc_supervisor *sv, sc_resumes *rs, sc_report *r) {
    sc_job *j = sv->job;
    const int64_t every = sv->s->save_interval;
    memset(rs, 0, sizeof *rs);
    rs->iters = j->iters;
    rs->verified = calloc((size_t)(j->iters + 1), sizeof *rs->verified);
    rs->key = calloc(1, sizeof *rs->key);
    TR_CHECK(rs->verified && rs->key, "out of host memory for the verified resumes");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool keyed = false;
    for (int64_t L = 0; every > 0 && L < j->iters; L += every) {
        sc_supervisor v = *sv;
        v.resume_at = L, v.resumes = NULL;
        fault_firing none = {0};
        fault_plan plan = {.n = 0, .faults = NULL, .gpus_per_node = sv->s->gpus_per_node, .fired = &none};
        sc_report one = {0};
        sc_supervised out;
        runner_supervise(&v, &plan, &one, &out);
        tr_config *key = malloc(sizeof *key);
        TR_CHECK(key != NULL, "out of host memory");
        config_key(j->cfg, key);
        /* every run the same config: the key is one (a difference would be a supervisor's bug) */
        const bool same = !keyed || !memcmp(key, rs->key, sizeof *key);
        if (!keyed) *rs->key = *key, keyed = true;
        free(key);
        const bool ok =
            same && out.resumed_from == L && one.nattempts == 1 && out.completed && out.continuity_ok && out.weights_ok;
        rs->verified[L] = ok;
        rs->runs++;
        if (one.peak_bytes > rs->peak_bytes) rs->peak_bytes = one.peak_bytes;
        if (one.capacity_bytes) rs->capacity_bytes = one.capacity_bytes;
        char name[96];
        snprintf(name, sizeof name, "campaign: a restart from iteration %lld", (long long)L);
        runner_add_check(
            r, ok, name, "%s",
            ok ? "resumed without a fault, every later loss and the final weights are the fault-free run's"
               : "resumed without a fault, it does NOT end as the fault-free run did (or did not run whole)");
        if (sv->o->progress)
            fprintf(sv->o->progress, "  %s: %s\n", name, ok ? "the fault-free run's, bit for bit" : "DIFFERS");
        report_free(&one);
    }
    (void)work_remove_tree(j->ckpt_dir);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rs->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/* The same bytes: one file linked twice, or two files of equal size and content. */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) || stat(b, &sb) || !S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode)) return false;
    if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) return true;
    if (sa.st_size != sb.st_size) return false;
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    char x[1 << 14], y[1 << 14];
    size_t n;
    while (same && (n = fread(x, 1, sizeof x, fa)) > 0) same = fread(y, 1, n, fb) == n && !memcmp(x, y, n);
    if (same) same = !ferror(fa) && fgetc(fb) == EOF;
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* Entries of dir other than . and ..; -1 when it cannot be read. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Checkpoint `it` of dir holds exactly the files of the snapshots' one, byte for byte. */
static bool same_checkpoint(const char *dir, const char *snapshots, int64_t it) {
    char a[SC_PATH_LEN + 300], b[SC_PATH_LEN + 300];
    snprintf(a, sizeof a, "%s/iter_%07lld", dir, (long long)it);
    snprintf(b, sizeof b, "%s/iter_%07lld", snapshots, (long long)it);
    DIR *d = opendir(b);
    if (!d) return false;
    int n = 0;
    bool same = true;
    struct dirent *e;
    while (same && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(a, sizeof a, "%s/iter_%07lld/%s", dir, (long long)it, e->d_name);
        snprintf(b, sizeof b, "%s/iter_%07lld/%s", snapshots, (long long)it, e->d_name);
        same = same_file(a, b), n++;
    }
    closedir(d);
    snprintf(a, sizeof a, "%s/iter_%07lld", dir, (long long)it);
    return same && count_entries(a) == n;
}

/* dir holds what a restart from L finds after snapshot_restore (runner_supervise.c): the saves of
 * iterations L, L - interval, ... (the scenario's keep_last of them, all without keep_last), each the
 * fault-free run's, and the tracker naming L; from scratch (L = 0), nothing (or no folder). */
/* The iteration of dir's one save that never finished (an iter_N without its manifest) after L and before
 * the last iteration, at a save of the interval; -1 none. */
static int64_t unfinished_save(const sc_supervisor *sv, int64_t L) {
    const int64_t every = sv->s->save_interval;
    for (int64_t it = L + every; every > 0 && L % every == 0 && it < sv->job->iters; it += every) {
        char path[SC_PATH_LEN + 64];
        struct stat st;
        snprintf(path, sizeof path, "%s/iter_%07lld", sv->job->ckpt_dir, (long long)it);
        if (stat(path, &st) || !S_ISDIR(st.st_mode)) continue;
        snprintf(path, sizeof path, "%s/iter_%07lld/manifest.json", sv->job->ckpt_dir, (long long)it);
        return stat(path, &st) ? it : -1;
    }
    return -1;
}

static bool folder_is_resume(const sc_supervisor *sv, int64_t L, int64_t *unfinished) {
    const char *dir = sv->job->ckpt_dir;
    const int64_t every = sv->s->save_interval;
    const int keep = sv->s->keep_last;
    const int n = count_entries(dir);
    if (n < 0) return L == 0 && errno == ENOENT;
    int expect = L > 0 ? 1 : 0; /* the tracker */
    for (int64_t it = L, k = 0; every > 0 && it >= every && (keep <= 0 || k < keep); it -= every, k++, expect++)
        if (!same_checkpoint(dir, sv->snapshots, it)) return false;
    char path[SC_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, TRACKER);
    FILE *f = L > 0 ? fopen(path, "r") : NULL;
    long long named = -1;
    if (f) {
        if (fscanf(f, "%lld", &named) != 1) named = -1;
        fclose(f);
    }
    if (L > 0 && named != L) return false;
    if (n == expect + 1) *unfinished = unfinished_save(sv, L);
    return n == expect;
}

int64_t runner_resume_known(const sc_supervisor *sv, int64_t *unfinished, int64_t *loads) {
    const sc_resumes *rs = sv->resumes;
    const tr_config *cfg = sv->job->cfg;
    int64_t L;
    *unfinished = *loads = -1;
    if (!rs || !sv->snapshots || train_resume_iteration(cfg, &L) || L < 0 || L > rs->iters || !rs->verified[L])
        return -1;
    tr_config *key = malloc(sizeof *key);
    TR_CHECK(key != NULL, "out of host memory");
    config_key(cfg, key);
    const bool same = !memcmp(key, rs->key, sizeof *key);
    free(key);
    if (!same) return -1;
    const bool is = folder_is_resume(sv, L, unfinished);
    /* the save that never finished is the next one after L (nothing saved between them): see the top */
    if (*unfinished >= 0 &&
        (*unfinished >= rs->iters || !rs->verified[*unfinished] || *unfinished != L + sv->s->save_interval))
        *unfinished = -1;
    *loads = L;
    return is ? L : -1;
}
