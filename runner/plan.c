/* The planner's search (runner/plan.h): candidates from the scenario's job, each a shape-only run (or
 * two, extrapolated along 1F1B's linear schedule), pruned by monotony. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/plan.h"
#include "runner_internal.h"
#include "train/predict_report.h"
#include "twin_cost.h"
#include "twinrun/err.h"

/* The job's flags the planner sets itself: the batch and the schedule of one iteration (an LR
 * schedule's warm-up or decay span would not fit one iteration), recomputation, and what writes or
 * reads checkpoints. */
static const char *const planned_flags[] = {
    "micro-batch-size",      "global-batch-size",
    "train-iters",           "train-samples",
    "rampup-batch-size",     "recompute-activations",
    "recompute-granularity", "recompute-method",
    "recompute-num-layers",  "recompute-modules",
    "lr-warmup-iters",       "lr-warmup-samples",
    "lr-warmup-fraction",    "lr-decay-iters",
    "lr-decay-samples",      "lr-wsd-decay-iters",
    "lr-wsd-decay-samples",  "eval-iters",
    "eval-interval",         "save",
    "save-interval",         "load",
    "exit-interval",         "exit-duration-in-mins",
};

static bool planned(const char *name) {
    for (size_t i = 0; i < sizeof planned_flags / sizeof planned_flags[0]; i++)
        if (strcmp(name, planned_flags[i]) == 0) return true;
    return false;
}

void plan_options_default(sc_plan_options *o) {
    memset(o, 0, sizeof *o);
    o->work_dir = "build/scenarios/plan";
    o->max_micro = 8;
    o->headroom = 0.05;
}

const char *plan_recompute_name(sc_plan_recompute rc) {
    static const char *const names[SC_RC_COUNT] = {"none", "selective", "full"};
    return (int)rc >= 0 && rc < SC_RC_COUNT ? names[rc] : "?";
}

/* The run of one candidate at `micro` micro-batches per DP rank. */
typedef struct plan_ctx {
    const scenario *base;
    const sc_plan_options *o;
    sc_plan_result *r;
    FILE *log;
    char device[32];
    double capacity_scale;
} plan_ctx;

/* Appends a flag to t (the strings are the caller's, alive until the job is parsed). */
static void add_flag(scenario *t, const char *name, const char *value) {
    sc_flag *f = &t->flags[t->nflags++];
    memset(f, 0, sizeof *f);
    f->name = (char *)name;
    f->value = (char *)value;
}

/* The job of candidate c with `micro` micro-batches per DP rank, parsed and checked for its layout: 0,
 * or -1 with the engine's reason in err. */
static int cand_job(const plan_ctx *x, const sc_plan_cand *c, int64_t micro, sc_job *j, char *err, size_t errlen) {
    scenario t = *x->base;
    t.tp = c->tp, t.pp = c->pp, t.cp = c->cp, t.dp = c->dp;
    snprintf(t.device, sizeof t.device, "%s", x->device);
    t.flags = calloc((size_t)x->base->nflags + 8, sizeof *t.flags);
    TR_CHECK(t.flags != NULL, "out of host memory for a candidate's flags");
    t.nflags = 0;
    for (int i = 0; i < x->base->nflags; i++)
        if (!planned(x->base->flags[i].name)) t.flags[t.nflags++] = x->base->flags[i];
    char mb[24], gbs[24];
    snprintf(mb, sizeof mb, "%d", c->micro);
    snprintf(gbs, sizeof gbs, "%" PRId64, micro * c->micro * c->dp);
    add_flag(&t, "micro-batch-size", mb);
    add_flag(&t, "global-batch-size", gbs);
    add_flag(&t, "train-iters", "1");
    add_flag(&t, "eval-iters", "0");
    if (c->recompute == SC_RC_SELECTIVE) add_flag(&t, "recompute-granularity", "selective");
    if (c->recompute == SC_RC_FULL) {
        add_flag(&t, "recompute-granularity", "full");
        add_flag(&t, "recompute-method", "uniform");
        add_flag(&t, "recompute-num-layers", "1");
    }
    const sc_run_options ro = {.work_dir = x->o->work_dir};
    int rc = runner_job_init(j, &t, &ro, err, errlen);
    free(t.flags);
    if (rc) return -1;
    j->opt.device = x->device; /* runner_job_init pointed it into t, which ends here */
    j->cfg->predict = true;
    j->cfg->predict_json[0] = 0;
    j->log = x->log;
    return 0;
}

/* One shape-only run of c at `micro` micro-batches: 0 with p filled (free with train_predict_free), 1 when
 * the engine refuses the flags, 2 when the run fails; the reason in c->note. */
static int run_once(plan_ctx *x, sc_plan_cand *c, int64_t micro, tr_predict *p) {
    sc_job j;
    char err[2048] = "";
    if (cand_job(x, c, micro, &j, err, sizeof err)) {
        runner_job_free(&j);
        const char *why = strstr(err, "does not fit this layout: ");
        snprintf(c->note, sizeof c->note, "%.250s", why ? why + strlen("does not fit this layout: ") : err);
        return 1;
    }
    memset(p, 0, sizeof *p);
    j.predict = p;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sc_run run;
    runner_job_run(&j, &run);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    x->r->runs++;
    int rc = 0;
    if (run.rc) {
        snprintf(c->note, sizeof c->note, "the shape-only run failed: %.200s", run.err);
        train_predict_free(p);
        rc = 2;
    }
    if (x->o->progress) {
        int st = 0;
        fprintf(x->o->progress, "  plan: TP%d PP%d CP%d DP%d micro-batch %d %-9s %5" PRId64 " micro-batches: ", c->tp,
                c->pp, c->cp, c->dp, c->micro, plan_recompute_name(c->recompute), micro);
        if (rc) fprintf(x->o->progress, "failed");
        else
            fprintf(x->o->progress, "peak %.2f GiB, step %.3f s", train_predict_max_peak(p, &st) / 1073741824.0,
                    p->step_time);
        fprintf(x->o->progress, " (%.1f s)\n",
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    }
    runner_run_free(&run);
    runner_job_free(&j);
    return rc;
}

/* Fills c: its peak from a run at min(M, PP) (1F1B's peak stops growing at PP micro-batches), whether it
 * fits, and if so its step at M, extrapolated from PP and PP + 1 when M is larger. */
static void evaluate(plan_ctx *x, sc_plan_cand *c) {
    const int64_t M = c->micro_batches, m1 = M <= c->pp + 1 ? M : c->pp, m2 = c->pp + 1;
    tr_predict p1, p2;
    int rc = run_once(x, c, m1, &p1);
    if (rc) {
        c->status = rc == 1 ? SC_PLAN_INVALID : SC_PLAN_FAILED;
        return;
    }
    c->run_micro[0] = m1;
    c->peak = train_predict_max_peak(&p1, &c->peak_stage);
    const double limit = (1.0 - x->r->headroom) * (double)x->r->capacity;
    c->status = (double)c->peak <= limit ? SC_PLAN_FITS : SC_PLAN_NO_FIT;
    double step = 0;
    if (M == m1) {
        step = p1.step_time;
    } else if (c->status == SC_PLAN_FITS) {
        rc = run_once(x, c, m2, &p2);
        if (rc) {
            c->status = SC_PLAN_FAILED;
            train_predict_free(&p1);
            return;
        }
        c->run_micro[1] = m2;
        step = p1.step_time + (double)(M - m1) * (p2.step_time - p1.step_time) / (double)(m2 - m1);
        train_predict_free(&p2);
    }
    if (step > 0) {
        c->step_time = step;
        c->tokens_per_s = (double)x->r->global_batch * x->r->seq_length / step;
        const double flops = p1.flops_per_step * (double)M / (double)m1;
        c->mfu = p1.peak_flops > 0 ? flops / (step * x->r->world * p1.peak_flops) : 0;
    }
    if (c->status == SC_PLAN_NO_FIT)
        snprintf(c->note, sizeof c->note, "stage %d's %.2f GiB > %.2f GiB", c->peak_stage, c->peak / 1073741824.0,
                 limit / 1073741824.0);
    train_predict_free(&p1);
}

static sc_plan_cand *new_cand(sc_plan_result *r, const int layout[4], int micro, sc_plan_recompute rc) {
    sc_plan_cand *c = realloc(r->cand, sizeof *c * (size_t)(r->ncand + 1));
    TR_CHECK(c != NULL, "out of host memory for the planner's candidates");
    r->cand = c;
    c = &r->cand[r->ncand++];
    memset(c, 0, sizeof *c);
    c->tp = layout[0], c->pp = layout[1], c->cp = layout[2], c->dp = layout[3];
    c->micro = micro, c->recompute = rc;
    c->peak_stage = -1;
    return c;
}

/* Micro-batch sizes of one layout: the options' (a size the global batch does not allow shows as
 * invalid), or 1, 2, 4, ... up to max_micro, those that divide the global batch over DP. */
static int micro_sizes(const sc_plan_options *o, int64_t global_batch, int dp, int *out) {
    if (o->nmicro > 0) {
        memcpy(out, o->micro, sizeof *out * (size_t)o->nmicro);
        return o->nmicro;
    }
    int n = 0;
    for (int m = 1; m <= o->max_micro && n < SC_PLAN_MAX_MICRO; m *= 2)
        if (global_batch % ((int64_t)m * dp) == 0) out[n++] = m;
    return n;
}

/* The candidates of one layout, micro-batches ascending and the lightest recomputation first; in a
 * search of layouts, a layout the engine refuses ends at its first candidate. */
static void plan_layout(plan_ctx *x, const int layout[4]) {
    const sc_plan_options *o = x->o;
    const unsigned mask = o->recompute ? o->recompute : (1u << SC_RC_COUNT) - 1;
    int sizes[SC_PLAN_MAX_MICRO];
    const int nsizes = micro_sizes(o, x->r->global_batch, layout[3], sizes);
    bool failed[SC_RC_COUNT] = {false};
    for (int k = 0; k < nsizes; k++) {
        const int mb = sizes[k];
        const int64_t per = (int64_t)mb * layout[3];
        bool fitted = false, tried = false;
        for (int rc = 0; rc < SC_RC_COUNT; rc++) {
            if (!(mask & (1u << rc))) continue;
            sc_plan_cand *c = new_cand(x->r, layout, mb, (sc_plan_recompute)rc);
            if (x->r->global_batch % per != 0) {
                c->status = SC_PLAN_INVALID;
                snprintf(c->note, sizeof c->note,
                         "global batch %" PRId64 " is not a multiple of micro-batch x DP %" PRId64, x->r->global_batch,
                         per);
                break;
            }
            c->micro_batches = x->r->global_batch / per;
            if (!o->all && fitted) {
                c->status = SC_PLAN_SKIPPED;
                snprintf(c->note, sizeof c->note, "a lighter setting fits (recomputation only adds time)");
                continue;
            }
            if (!o->all && failed[rc]) {
                c->status = SC_PLAN_SKIPPED;
                snprintf(c->note, sizeof c->note, "did not fit at a smaller micro-batch");
                continue;
            }
            evaluate(x, c);
            tried = true;
            if (c->status == SC_PLAN_INVALID && x->o->layouts) return; /* the layout itself is refused */
            if (c->status == SC_PLAN_FITS) fitted = true;
            if (c->status == SC_PLAN_NO_FIT) failed[rc] = true;
        }
        bool all_failed = true;
        for (int rc = 0; rc < SC_RC_COUNT; rc++)
            if ((mask & (1u << rc)) && !failed[rc]) all_failed = false;
        if (!o->all && tried && all_failed) return; /* a larger micro-batch only needs more */
    }
}

/* Divisors of n up to `max`, ascending. */
static int divisors(int n, int max, int *out, int cap) {
    int k = 0;
    for (int d = 1; d <= n && d <= max && k < cap; d++)
        if (n % d == 0) out[k++] = d;
    return k;
}

int plan_search(const scenario *s, const sc_plan_options *o, sc_plan_result *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->best = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *device = o->device ? o->device : s->device;
    const twin_device_spec *spec = twin_device_spec_find(device);
    if (!spec) return tr_errf(err, errlen, "unknown device '%s' (sim/cost/device_spec.c)", device);
    if (o->headroom < 0 || o->headroom >= 1) return tr_errf(err, errlen, "headroom %g: want 0 <= h < 1", o->headroom);
    if (runner_make_dir(o->work_dir, err, errlen)) return -1;
    snprintf(r->scenario, sizeof r->scenario, "%s", s->path);
    snprintf(r->device, sizeof r->device, "%s", spec->name);
    r->headroom = o->headroom;
    r->world = s->nodes * s->gpus_per_node;
    /* what a rank may allocate: the card's memory less what the runtime holds (the spec's measured figure),
     * as a shape-only run's device has (sim/dev/dev_sim.c) */
    r->capacity =
        (size_t)((double)(spec->mem_bytes - spec->runtime_bytes) * (s->capacity_scale > 0 ? s->capacity_scale : 1.0));

    /* the job as written: its global batch and sequence, and that its flags parse */
    sc_job base;
    const sc_run_options ro = {.work_dir = o->work_dir};
    if (runner_job_init(&base, s, &ro, err, errlen)) {
        runner_job_free(&base);
        return -1;
    }
    r->global_batch = base.cfg->global_batch_size;
    r->seq_length = base.cfg->seq_length;
    const int layers = base.cfg->num_layers;
    runner_job_free(&base);

    char path[SC_PATH_LEN + 16];
    snprintf(path, sizeof path, "%s/plan.log", o->work_dir);
    plan_ctx x = {.base = s, .o = o, .r = r};
    snprintf(x.device, sizeof x.device, "%s", spec->name);
    x.log = fopen(path, "w");
    if (!x.log) return tr_errf(err, errlen, "cannot write %s: %s", path, strerror(errno));

    if (!o->layouts) {
        const int layout[4] = {s->tp, s->pp, s->cp, s->dp};
        plan_layout(&x, layout);
    } else { /* TP within a node, PP up to the layers, CP up to 8; DP the rest */
        int tps[64], pps[64], cps[8];
        const int ntp = divisors(s->gpus_per_node, s->gpus_per_node, tps, 64);
        for (int a = 0; a < ntp; a++) {
            const int npp = divisors(r->world / tps[a], layers, pps, 64);
            for (int b = 0; b < npp; b++) {
                const int ncp = divisors(r->world / (tps[a] * pps[b]), 8, cps, 8);
                for (int c = 0; c < ncp; c++) {
                    const int layout[4] = {tps[a], pps[b], cps[c], r->world / (tps[a] * pps[b] * cps[c])};
                    plan_layout(&x, layout);
                }
            }
        }
    }
    fclose(x.log);
    for (int i = 0; i < r->ncand; i++)
        if (r->cand[i].status == SC_PLAN_FITS && r->cand[i].step_time > 0 &&
            (r->best < 0 || r->cand[i].step_time < r->cand[r->best].step_time))
            r->best = i;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (r->ncand == 0) {
        plan_free(r);
        return tr_errf(err, errlen, "%s: no candidate to plan (micro-batch sizes or recompute settings empty?)",
                       s->path);
    }
    return 0;
}

void plan_free(sc_plan_result *r) {
    free(r->cand);
    memset(r, 0, sizeof *r);
    r->best = -1;
}
