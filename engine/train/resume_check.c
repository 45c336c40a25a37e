#include "train/resume_check.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/preflight.h"
#include "train/provenance.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

static const char *style_name(int s) {
    static const char *const names[] = {"constant", "linear", "cosine", "inverse-square-root"};
    return s >= 0 && s < 4 ? names[s] : "?";
}

/* Appends "; " and the formatted item to buf (cut at cap). */
static void add_item(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_item(char *buf, size_t cap, const char *fmt, ...) {
    size_t used = strnlen(buf, cap);
    if (used + 3 >= cap) return;
    if (used) memcpy(buf + used, "; ", 3), used += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* Each item of the schedule that differs, in the flags that set it; "" when none. */
static void schedule_diff(const tr_lr_schedule *run, const ckpt_sched *ck, char *out, size_t cap) {
    out[0] = 0;
    if (run->max_lr != ck->max_lr) add_item(out, cap, "--lr %.9g (the checkpoint's %.9g)", run->max_lr, ck->max_lr);
    if (run->min_lr != ck->min_lr) add_item(out, cap, "--min-lr %.9g (the checkpoint's %.9g)", run->min_lr, ck->min_lr);
    if (run->init_lr != ck->init_lr)
        add_item(out, cap, "--lr-warmup-init %.9g (the checkpoint's %.9g)", run->init_lr, ck->init_lr);
    if ((int)run->style != ck->style)
        add_item(out, cap, "--lr-decay-style %s (the checkpoint's %s)", style_name((int)run->style),
                 style_name(ck->style));
    if (run->warmup_samples != ck->warmup_samples)
        add_item(out, cap, "warmup %lld samples (--lr-warmup-iters/-samples/-fraction; the checkpoint's %lld)",
                 (long long)run->warmup_samples, (long long)ck->warmup_samples);
    if (run->decay_samples != ck->decay_samples)
        add_item(out, cap,
                 "decay %lld samples (--lr-decay-iters/-samples, else --train-iters/-samples; the checkpoint's %lld)",
                 (long long)run->decay_samples, (long long)ck->decay_samples);
}

/* --use-checkpoint-opt_param-scheduler: the checkpoint's schedule in the flags this run reads. */
static int take_schedule(tr_config *cfg, const ckpt_sched *s, const char *where, tr_errlist *el) {
    const int64_t gbs = cfg->global_batch_size;
    if (cfg->train_samples <= 0 && gbs > 0 && (s->decay_samples % gbs || s->warmup_samples % gbs))
        return tr_errlist_add(el,
                              "--use-checkpoint-opt_param-scheduler: %s's warmup (%lld samples) and decay (%lld "
                              "samples) are not whole iterations of --global-batch-size %lld; train with "
                              "--train-samples, or give the schedule with --override-opt_param-scheduler",
                              where, (long long)s->warmup_samples, (long long)s->decay_samples, (long long)gbs);
    cfg->lr = s->max_lr, cfg->min_lr = s->min_lr, cfg->lr_warmup_init = s->init_lr;
    cfg->lr_decay_style = (tr_lr_style)s->style;
    cfg->lr_warmup_fraction = -1;
    if (cfg->train_samples > 0) cfg->lr_decay_samples = s->decay_samples, cfg->lr_warmup_samples = s->warmup_samples;
    else cfg->lr_decay_iters = s->decay_samples / gbs, cfg->lr_warmup_iters = s->warmup_samples / gbs;
    return 0;
}

/* Megatron's OptimizerParamScheduler._check_and_set: a value that differs is an assertion unless
 * --override-opt_param-scheduler (the command line's) or --use-checkpoint-opt_param-scheduler (the
 * checkpoint's). --finetune and --no-load-optim do not load the scheduler at all. */
static void check_schedule(tr_config *cfg, const ckpt_manifest *m, const char *where, tr_errlist *el) {
    tr_lr_schedule run;
    char why[512], diff[1536];
    if (tr_lr_schedule_init(&run, cfg, why, sizeof why)) return; /* the job's own start says why */
    schedule_diff(&run, &m->sched, diff, sizeof diff);
    if (!diff[0]) return;
    if (cfg->finetune || cfg->no_load_optim)
        tr_config_warn(cfg, "%s: this run's learning-rate schedule (%s does not load the checkpoint's): %s", where,
                       cfg->finetune ? "--finetune" : "--no-load-optim", diff);
    else if (cfg->override_opt_param_scheduler)
        tr_config_warn(cfg, "%s: --override-opt_param-scheduler: this run's learning-rate schedule: %s", where, diff);
    else if (cfg->use_checkpoint_opt_param_scheduler) {
        if (!take_schedule(cfg, &m->sched, where, el))
            tr_config_warn(cfg,
                           "%s: --use-checkpoint-opt_param-scheduler: the checkpoint's learning-rate schedule, not "
                           "the command line's: %s",
                           where, diff);
    } else
        tr_errlist_add(el,
                       "%s was saved with another learning-rate schedule: %s; pass --override-opt_param-scheduler "
                       "to use this run's, or --use-checkpoint-opt_param-scheduler to keep the checkpoint's "
                       "(Megatron's rule)",
                       where, diff);
}

/* The seed is twinrun's whole random state (no dropout; it orders the data), which Megatron loads
 * from a checkpoint unless --no-load-rng. */
static void check_seed(tr_config *cfg, const ckpt_manifest *m, const char *where, tr_errlist *el) {
    if (m->seed == cfg->seed) return;
    const unsigned long long run = (unsigned long long)cfg->seed, ck = (unsigned long long)m->seed;
    if (cfg->finetune)
        tr_config_warn(cfg, "%s: --seed %llu (the checkpoint's %llu): --finetune starts the data over in its order",
                       where, run, ck);
    else if (cfg->no_load_rng)
        tr_config_warn(cfg,
                       "%s: --no-load-rng: --seed %llu, not the checkpoint's %llu: the data order changes from "
                       "here (samples already seen may come again)",
                       where, run, ck);
    else
        tr_errlist_add(el,
                       "%s was saved with --seed %llu, this run has --seed %llu: the seed orders the data (twinrun's "
                       "random state, which a resume loads as Megatron loads its RNG state); pass --seed %llu to "
                       "continue the run, or --no-load-rng to go on with --seed %llu",
                       where, ck, run, ck, run);
}

static void paths_text(char *out, size_t cap, bool mock, int n, char *const *paths) {
    out[0] = 0;
    if (mock) {
        snprintf(out, cap, "mock data");
        return;
    }
    size_t used = 0;
    for (int i = 0; i < n && used + 2 < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? " " : "", paths[i]);
    if (n == 0) snprintf(out, cap, "no --data-path");
}

static void check_data(tr_config *cfg, const ckpt_manifest *m, const char *where, tr_errlist *el) {
    const ckpt_provenance *p = &m->prov;
    char run[2048], ck[2048];
    char *rp[TR_MAX_PATHS];
    for (int i = 0; i < cfg->n_data_path; i++) rp[i] = cfg->data_path[i];
    paths_text(run, sizeof run, cfg->mock_data, cfg->n_data_path, rp);
    paths_text(ck, sizeof ck, p->mock_data, p->n_data_path, p->data_path);
    const uint64_t fp = train_data_fingerprint(cfg);
    const bool same_paths = !strcmp(run, ck);
    if (same_paths && fp == p->data_fingerprint) return;
    if (cfg->mock_data == p->mock_data && fp == p->data_fingerprint) { /* moved or renamed: the same bytes */
        tr_config_warn(cfg, "%s: --data-path %s (the checkpoint's %s): the same files by their fingerprint", where, run,
                       ck);
        return;
    }
    char what[4096 + 128];
    if (same_paths)
        snprintf(what, sizeof what,
                 "the files of --data-path %s changed since the save (fingerprint %016" PRIx64
                 ", the checkpoint's %016" PRIx64 ")",
                 run, fp, p->data_fingerprint);
    else snprintf(what, sizeof what, "%s%s (the checkpoint's %s)", cfg->mock_data ? "" : "--data-path ", run, ck);
    if (cfg->finetune || cfg->allow_data_change)
        tr_config_warn(cfg, "%s: %s: %s", where, cfg->finetune ? "--finetune" : "--allow-data-change", what);
    else
        tr_errlist_add(el,
                       "%s was trained on other data: %s; its position (%lld samples) means other samples here: "
                       "give the checkpoint's data, or pass --allow-data-change to go on",
                       where, what, (long long)m->consumed_train_samples);
}

static void check_tokenizer(tr_config *cfg, const ckpt_manifest *m, const char *where, tr_errlist *el) {
    const ckpt_provenance *p = &m->prov;
    const uint64_t fp = train_tokenizer_fingerprint(cfg);
    const bool same_type = !strcmp(cfg->tokenizer_type, p->tokenizer_type);
    const bool same_model = !strcmp(cfg->tokenizer_model, p->tokenizer_model);
    if (same_type && fp == p->tokenizer_fingerprint) {
        if (!same_model)
            tr_config_warn(cfg, "%s: --tokenizer-model %s (the checkpoint's %s): the same files by their fingerprint",
                           where, cfg->tokenizer_model, p->tokenizer_model);
        return;
    }
    char what[3 * CKPT_PROV_PATH];
    snprintf(what, sizeof what, "--tokenizer-type %s --tokenizer-model %s%s (the checkpoint's %s %s)",
             cfg->tokenizer_type[0] ? cfg->tokenizer_type : "(none)",
             cfg->tokenizer_model[0] ? cfg->tokenizer_model : "(none)",
             same_type && same_model ? " whose files changed since the save" : "",
             p->tokenizer_type[0] ? p->tokenizer_type : "(none)",
             p->tokenizer_model[0] ? p->tokenizer_model : "(none)");
    if (cfg->finetune || cfg->allow_tokenizer_change)
        tr_config_warn(cfg, "%s: %s: %s", where, cfg->finetune ? "--finetune" : "--allow-tokenizer-change", what);
    else
        tr_errlist_add(el,
                       "%s was trained with another tokenizer: %s; token ids would change meaning: give the "
                       "checkpoint's tokenizer, or pass --allow-tokenizer-change to go on",
                       where, what);
}

/* The batch sizes and the build: said, and the run goes on (Megatron continues across both; the data
 * position and the schedule are counted in samples). */
static void note_batch_and_build(tr_config *cfg, const ckpt_manifest *m, const char *where) {
    const ckpt_provenance *p = &m->prov;
    if (cfg->global_batch_size != p->global_batch_size)
        tr_config_warn(cfg,
                       "%s: --global-batch-size %d (the checkpoint's %d): the data position (%lld samples) carries "
                       "over; an iteration is now %d samples",
                       where, cfg->global_batch_size, p->global_batch_size, (long long)m->consumed_train_samples,
                       cfg->global_batch_size);
    if (cfg->micro_batch_size != p->micro_batch_size)
        tr_config_warn(cfg, "%s: --micro-batch-size %d (the checkpoint's %d)", where, cfg->micro_batch_size,
                       p->micro_batch_size);
    if (strcmp(p->version, TR_VERSION_NUMBER) || strcmp(p->commit, tr_version_commit()) ||
        strcmp(p->backend, tr_version_backend()))
        tr_config_warn(cfg,
                       "%s was saved by twinrun %s (commit %s, backend %s), this is twinrun %s (commit %s, backend "
                       "%s): losses continue bit for bit only with the same commit and backend",
                       where, p->version, p->commit, p->backend, TR_VERSION_NUMBER, tr_version_commit(),
                       tr_version_backend());
}

int train_resume_check(tr_config *cfg, char *err, size_t errlen) {
    if (!cfg->load[0] || cfg->predict) return 0;
    if (cfg->override_opt_param_scheduler && cfg->use_checkpoint_opt_param_scheduler)
        return tr_errf(err, errlen,
                       "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler are both set "
                       "(Megatron refuses it too): keep the one whose schedule the run should follow");
    int64_t it;
    char ignored[1024];
    /* nothing to load, or a checkpoint that cannot be read: the job's load says so with its fix */
    if (train_ckpt_pick(cfg, &it, NULL, 0, ignored, sizeof ignored) != 0) return 0;
    ckpt_manifest m;
    if (ckpt_manifest_load(cfg->load, it, &m, ignored, sizeof ignored)) return 0;
    char where[TR_PATH_LEN + 64];
    snprintf(where, sizeof where, "--load %s iteration %lld", cfg->load, (long long)it);
    tr_errlist el;
    tr_errlist_init(&el);
    /* another shape is an error whatever the flags (the weights would mean something else); listed first,
     * with whatever else changed, so one round fixes the command line */
    ckpt_model_shape run;
    ckpt_model_from_config(cfg, &run);
    char at[TR_PATH_LEN + 32], shape[1024];
    snprintf(at, sizeof at, "%s iteration %lld", cfg->load, (long long)it);
    if (ckpt_model_compare(&m.model, &run, at, shape, sizeof shape)) tr_errlist_add(&el, "%s", shape);
    check_schedule(cfg, &m, where, &el);
    check_seed(cfg, &m, where, &el);
    if (m.prov.present) {
        check_data(cfg, &m, where, &el);
        check_tokenizer(cfg, &m, where, &el);
        note_batch_and_build(cfg, &m, where);
    } else {
        const char *note = ckpt_manifest_note(&m);
        if (note) tr_config_warn(cfg, "%s: %s", where, note);
    }
    ckpt_manifest_free(&m);
    return tr_errlist_format(&el, err, errlen);
}
