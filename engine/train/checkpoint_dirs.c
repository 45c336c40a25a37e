/* --load and --save before anything trains: the paths as the guide writes them, which checkpoint a
 * load reads (or why there is none), and a --save directory made safe for this job alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

int train_ckpt_resolve_paths(tr_config *cfg, char *err, size_t errlen) {
    char root[TR_PATH_LEN];
    int64_t it;
    if (cfg->load[0] && ckpt_iter_path(cfg->load, root, sizeof root, &it)) {
        /* the guide's `--load .../checkpoints/<STEP_DIR>`: that iteration of the root above it */
        if (cfg->ckpt_step >= 0 && cfg->ckpt_step != it)
            return tr_errf(err, errlen,
                           "--load %s names iteration %lld but --ckpt-step says %lld: give the checkpoint root "
                           "with --ckpt-step, or the iteration directory alone",
                           cfg->load, (long long)it, (long long)cfg->ckpt_step);
        cfg->ckpt_step = it;
        snprintf(cfg->load, sizeof cfg->load, "%s", root);
    }
    /* saves go beside it, into the root, never nested inside an iteration directory */
    if (cfg->save[0] && ckpt_iter_path(cfg->save, root, sizeof root, &it))
        snprintf(cfg->save, sizeof cfg->save, "%s", root);
    return 0;
}

int train_ckpt_pick(const tr_config *cfg, int64_t *it, char *fresh, size_t freshlen, char *err, size_t errlen) {
    char scratch[8];
    if (!fresh) fresh = scratch, freshlen = sizeof scratch;
    fresh[0] = '\0';
    ckpt_dir_info info;
    char why[1024];
    if (ckpt_dir_probe(cfg->load, &info, why, sizeof why)) return tr_errf(err, errlen, "--load %s", why);
    char list[512];
    ckpt_dir_list_text(&info, list, sizeof list);
    if (cfg->ckpt_step < 0) switch (info.kind) {
        case CKPT_DIR_ABSENT: snprintf(fresh, freshlen, "--load %s does not exist", cfg->load); return 1;
        case CKPT_DIR_EMPTY: snprintf(fresh, freshlen, "--load %s is empty", cfg->load); return 1;
        case CKPT_DIR_INTERRUPTED:
            snprintf(fresh, freshlen,
                     "--load %s holds no complete checkpoint (iter_%07lld has no %s: a save that never finished)",
                     cfg->load, (long long)info.incomplete, CKPT_MANIFEST);
            return 1;
        case CKPT_DIR_FOREIGN:
            return tr_errf(err, errlen,
                           "--load %s holds no twinrun checkpoint (no %s, no iter_NNNNNNN/ with a %s; it has "
                           "'%s'%s): give the directory --save wrote, or an empty or new one to start from scratch",
                           cfg->load, CKPT_TRACKER, CKPT_MANIFEST, info.foreign, info.n_foreign > 1 ? " and more" : "");
        case CKPT_DIR_UNTRACKED:
            return tr_errf(err, errlen,
                           "--load %s holds complete checkpoints (iterations %s) but no %s (it is written last: "
                           "a save was interrupted, or it was removed): resume from the newest with --load %s "
                           "--ckpt-step %lld",
                           cfg->load, list, CKPT_TRACKER, cfg->load, (long long)info.newest_complete);
        case CKPT_DIR_TRACKED: return ckpt_latest(cfg->load, it, err, errlen);
        }
    /* --ckpt-step N: that iteration, complete or not at all (Megatron reads iter_N without the tracker) */
    if (info.kind == CKPT_DIR_ABSENT)
        return tr_errf(err, errlen, "--ckpt-step %lld: --load %s does not exist", (long long)cfg->ckpt_step, cfg->load);
    ckpt_manifest m;
    char idir[TR_PATH_LEN + 32];
    snprintf(idir, sizeof idir, "%s/iter_%07lld", cfg->load, (long long)cfg->ckpt_step);
    struct stat st;
    if (stat(idir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tr_errf(err, errlen,
                       "--ckpt-step %lld: %s has no checkpoint of that iteration (it has: %s); pick one of "
                       "those or drop --ckpt-step for the latest",
                       (long long)cfg->ckpt_step, cfg->load, list[0] ? list : "none");
    if (ckpt_manifest_load(cfg->load, cfg->ckpt_step, &m, why, sizeof why))
        return tr_errf(err, errlen, "--ckpt-step %lld: %s holds no complete checkpoint of it (%s)%s%s",
                       (long long)cfg->ckpt_step, cfg->load, why, list[0] ? "; complete ones: " : "", list);
    ckpt_manifest_free(&m);
    *it = cfg->ckpt_step;
    return 0;
}

int train_resume_iteration(const tr_config *cfg, int64_t *it) {
    *it = 0;
    if (!cfg->load[0] || cfg->finetune) return cfg->load[0] ? -1 : 0; /* --finetune loads, then starts at 0 */
    char err[1024], fresh[2048]; /* room for --load's path and the words: gcc -O2 inlines the pick and checks it */
    const int r = train_ckpt_pick(cfg, it, fresh, sizeof fresh, err, sizeof err);
    if (r == 1) *it = 0;
    return r < 0 ? -1 : 0;
}

void train_ckpt_describe_load(const tr_config *cfg, char *out, size_t cap) {
    out[0] = '\0';
    if (!cfg->load[0]) return;
    int64_t it = -1;
    char fresh[TR_PATH_LEN + 256], err[1024];
    const int r = train_ckpt_pick(cfg, &it, fresh, sizeof fresh, err, sizeof err);
    if (r == 0)
        snprintf(out, cap, "loading iteration %lld from %s (%s)", (long long)it, cfg->load,
                 cfg->ckpt_step >= 0 ? "as --load or --ckpt-step named it" : "the latest, as its tracker names it");
    else if (r == 1 && cfg->exit_on_missing_checkpoint)
        snprintf(out, cap, "nothing to load: %s; --exit-on-missing-checkpoint stops the job", fresh);
    else if (r == 1) snprintf(out, cap, "nothing to load: %s; training starts from scratch at iteration 1", fresh);
    else snprintf(out, cap, "cannot load: %s", err);
}

/* Whether this process runs global rank 0 (which holds the lock): the whole job, or process 0. */
static bool hosts_rank0(void) {
    int nprocs = 1, proc = 0, per = 1;
    char err[256];
    const int r = launch_process_layout(&nprocs, &proc, &per, err, sizeof err);
    return r <= 0 || proc == 0; /* a malformed layout failed earlier, in launch_world_size */
}

int train_ckpt_guard_save(const tr_config *cfg, int64_t start, ckpt_lock **lock, char *err, size_t errlen) {
    *lock = NULL;
    if (!cfg->save[0]) return 0;
    char why[1024];
    if (ckpt_make_dirs(cfg->save, why, sizeof why))
        return tr_errf(err, errlen, "--save %s: %s; give a directory this job can create", cfg->save, why);
    if (ckpt_dir_writable(cfg->save, err, errlen)) return -1;
    if (hosts_rank0() && !(*lock = ckpt_lock_take(cfg->save, err, errlen))) return -1;
    ckpt_dir_info info;
    if (ckpt_dir_probe(cfg->save, &info, err, errlen)) goto refuse;
    /* what this run would save over: complete checkpoints past its starting point */
    int later = 0;
    char list[512] = "";
    size_t used = 0;
    const int n = info.n_complete < CKPT_DIR_LIST_MAX ? info.n_complete : CKPT_DIR_LIST_MAX;
    for (int i = 0; i < n; i++)
        if (info.complete[i] > start) {
            if (used + 24 < sizeof list)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%lld", later ? ", " : "",
                                         (long long)info.complete[i]);
            later++;
        }
    if (!later || cfg->overwrite_checkpoints) return 0;
    char all[512];
    ckpt_dir_list_text(&info, all, sizeof all);
    if (start == 0)
        tr_errf(err, errlen,
                "--save %s already holds complete checkpoints (iterations %s) and this run starts from scratch: "
                "it would replace them. To resume, add --load %s (the latest) or --load %s --ckpt-step N with N "
                "one of %s; to start over, give another --save, or pass --overwrite-checkpoints",
                cfg->save, all, cfg->save, cfg->save, all);
    else
        tr_errf(err, errlen,
                "--save %s holds complete checkpoints after iteration %lld, where this run starts (iterations "
                "%s): it would replace them. Resume from the newest with --load %s --ckpt-step %lld, give "
                "another --save, or pass --overwrite-checkpoints to replace them",
                cfg->save, (long long)start, list, cfg->save, (long long)info.newest_complete);
refuse:
    ckpt_lock_release(*lock);
    *lock = NULL;
    return -1;
}
