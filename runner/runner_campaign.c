/* A campaign: N random single faults, each rehearsed from scratch under the supervisor and judged
 * like a scenario's own faults; the totals say how many were detected, blamed right, and recovered
 * with the fault-free run's losses and weights. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int runner_campaign_run(const sc_supervisor *sv, sc_report *r) {
    sc_job *j = sv->job;
    const scenario *s = sv->s;
    const sc_run_options *o = sv->o;
    sc_campaign_result *c = &r->campaign;
    memset(c, 0, sizeof *c);
    r->has_campaign = true;
    uint64_t rng = s->campaign.seed ^ 0x7477696e72756eULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double detect_sum = 0;
    int failures_listed = 0;
    c->trial = s->campaign.count > 0 ? calloc((size_t)s->campaign.count, sizeof *c->trial) : NULL;
    for (int t = 0; t < s->campaign.count; t++) {
        fault_spec f;
        draw(j, s, &rng, &f);
        fault_plan plan = {.n = 1, .faults = &f, .gpus_per_node = s->gpus_per_node};
        fault_firing fired = {0};
        plan.fired = &fired;
        sc_report one = {0};
        sc_supervised out;
        runner_supervise(sv, &plan, &one, &out);
        const bool cont = out.continuity_ok, weights = out.weights_ok, done = out.completed;
        const sc_fault_outcome *fo = &one.faults[0];
        if (one.peak_bytes > r->peak_bytes) r->peak_bytes = one.peak_bytes;
        if (one.capacity_bytes) r->capacity_bytes = one.capacity_bytes;
        r->sim_seconds += one.sim_seconds;
        c->trials++;
        c->per_kind_trials[f.kind]++;
        c->fired += fo->fired;
        c->detected += fo->fired && fo->detected;
        c->attributed += fo->fired && fo->attributed;
        c->continuity_ok += cont && weights;
        c->recovered += done;
        const bool ok = fo->fired && fo->detected && fo->attributed && cont && weights && done;
        c->per_kind_ok[f.kind] += ok;
        if (c->trial)
            c->trial[t] =
                (sc_campaign_trial){.outcome = *fo, .continuity_ok = cont && weights, .completed = done, .ok = ok};
        if (fo->detected && fo->detect_seconds >= 0) {
            detect_sum += fo->detect_seconds;
            if (fo->detect_seconds > c->max_detect_seconds) c->max_detect_seconds = fo->detect_seconds;
        }
        if (!ok && failures_listed++ < 8) {
            char what[200], name[96];
            fault_spec_describe(&f, what, sizeof what);
            snprintf(name, sizeof name, "campaign trial %d", t + 1);
            runner_add_check(r, false, name,
                             "%s: fired %d, detected %d, attributed %d, continuity %d, weights %d, completed %d; %s",
                             what, fo->fired, fo->detected, fo->attributed, cont, weights, done, fo->diagnosis);
        }
        if (o->progress) report_progress(o->progress, "campaign trials", t + 1, s->campaign.count);
        plan.faults = NULL;
        report_free(&one);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
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
