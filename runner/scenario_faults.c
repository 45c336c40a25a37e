/* faults:, campaign: and expect:, checked against the cluster and the job they run on: a fault
 * that can never fire (a rank that does not exist, a step after the last iteration, a
 * checkpoint fault at an iteration that saves nothing) is a mistake in the scenario. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault/fault_keys.h"
#include "scenario_internal.h"

static const char *const kind_names[] = {
    "hang",         "crash",      "node_crash",   "nan",          "straggler",  "coll_mismatch",
    "ckpt_enospc",  "ckpt_crash", "ckpt_corrupt", "data_corrupt", "oom",        "short_node",
    "version_skew", "preempt",    "data_stall",   "slow_link",    "hidden_dir", NULL};

static int kind_value(sc_ctx *c, const scn_node *v, const char *path, fault_kind *out) {
    char name[64];
    if (scenario_get_string(c, v, path, name, sizeof name, false)) return -1;
    int k = fault_kind_from_name(name);
    if (k < 0) {
        const char *near = scenario_closest(name, kind_names);
        return scenario_fail(c, v,
                             "%s: unknown fault kind '%s'%s%s%s; kinds: hang, crash, node_crash, nan, straggler, "
                             "coll_mismatch, ckpt_enospc, ckpt_crash, ckpt_corrupt, data_corrupt, oom, short_node, "
                             "version_skew, preempt, data_stall, slow_link, hidden_dir",
                             path, name, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    }
    *out = (fault_kind)k;
    return 0;
}

/* The value of one fault key as text for fault_spec_set, after checking its YAML type. */
static int key_text(sc_ctx *c, const scn_node *v, const char *path, fault_key k, char *out, size_t outlen) {
    char got[96];
    int64_t i;
    double d;
    scenario_describe(v, got, sizeof got);
    switch (fault_key_type_of(k)) {
    case FAULT_KT_INT:
        if (scenario_int_value(v, &i)) return scenario_fail(c, v, "%s: expected an integer, got %s", path, got);
        break;
    case FAULT_KT_NUMBER:
        if (scenario_number_value(v, &d)) return scenario_fail(c, v, "%s: expected a number, got %s", path, got);
        break;
    case FAULT_KT_BOOL: {
        int b = scenario_bool_value(v);
        if (b < 0) return scenario_fail(c, v, "%s: expected true or false, got %s", path, got);
        snprintf(out, outlen, "%s", b ? "true" : "false");
        return 0;
    }
    case FAULT_KT_NAME: break;
    }
    return scenario_get_string(c, v, path, out, outlen, false);
}

/* Whether the job writes a checkpoint after iteration `step`: every interval, and at the end. */
static int load_fault(sc_ctx *c, const scn_node *item, int idx, scenario *s, fault_spec *f) {
    char path[64], kpath[96], text[64], msg[384];
    snprintf(path, sizeof path, "faults[%d]", idx);
    if (scenario_want_map(c, item, path)) return -1;
    static const char *const keys[] = {"kind", "step",   "rank",    "node",    "group",  "op",  "tensor", "layer",
                                       "inf",  "factor", "devices", "version", "damage", "dir", NULL};
    if (scenario_check_keys(c, item, path, keys)) return -1;
    const scn_node *kk, *kv = scenario_yaml_get(item, "kind", &kk);
    if (!kv) return scenario_fail(c, item, "%s: kind is missing: add kind: hang (or crash, nan, ...)", path);
    fault_kind kind = FAULT_HANG;
    snprintf(kpath, sizeof kpath, "%s.kind", path);
    if (kind_value(c, kv, kpath, &kind)) return -1;
    fault_spec_default(f, kind);
    f->line = item->line;
    f->col = item->col;
    const char *kn = fault_kind_name(kind);

    const scn_node *sk, *sv = scenario_yaml_get(item, "step", &sk);
    snprintf(kpath, sizeof kpath, "%s.step", path);
    if (sv) {
        int64_t step;
        if (scenario_get_int(c, sv, kpath, 0, INT64_MAX, &step)) return -1;
        f->step = step;
    } else if (!fault_kind_is_startup(kind)) {
        return scenario_fail(c, item, "%s (%s): step is missing: the iteration it fires at, 1-%lld", path, kn,
                             (long long)s->train_iters);
    }

    unsigned given = 0;
    for (int i = 0; i < item->n; i++) {
        const scn_node *k = item->items[2 * i], *v = item->items[2 * i + 1];
        int key = fault_key_from_name(k->text);
        if (key < 0) continue; /* kind and step, read above */
        snprintf(kpath, sizeof kpath, "%s.%s", path, k->text);
        if (!fault_key_applies(kind, (fault_key)key)) {
            char ks[128];
            fault_kind_keys_text(kind, ks, sizeof ks);
            return scenario_fail(c, k, "%s: %s does not apply to %s (it takes: %s)", kpath, k->text, kn, ks);
        }
        if (key_text(c, v, kpath, (fault_key)key, text, sizeof text)) return -1;
        if (fault_spec_set(f, (fault_key)key, text, msg, sizeof msg)) return scenario_fail(c, v, "%s: %s", path, msg);
        given |= 1u << key;
    }

    const sc_flag *nl = scenario_flag_last(s, "num-layers");
    long long layers = nl && nl->value ? strtoll(nl->value, NULL, 10) : 0;
    const fault_job job = {.world = s->nodes * s->gpus_per_node,
                           .gpus_per_node = s->gpus_per_node,
                           .train_iters = s->train_iters,
                           .num_layers = layers > 0 && layers <= INT32_MAX ? (int)layers : 0,
                           .save_interval = s->save_interval,
                           .iters_name = "training.train-iters",
                           .layers_name = "num-layers",
                           .interval_name = "checkpoint.interval",
                           .fp8 = scenario_flag_last(s, "fp8-format") != NULL};
    fault_check_at at;
    if (fault_spec_check_job(f, &job, &at, msg, sizeof msg)) {
        const scn_node *where = at == FAULT_AT_STEP && sv ? sv : item;
        if (at == FAULT_AT_LAYER && scenario_yaml_get(item, "layer", NULL))
            where = scenario_yaml_get(item, "layer", NULL);
        return scenario_fail(c, where, "%s (%s): %s", path, kn, msg);
    }
    fault_spec_normalize(f, given, s->gpus_per_node);
    return 0;
}

int scenario_load_faults(sc_ctx *c, const scn_node *root, scenario *s) {
    const scn_node *list = scenario_yaml_get(root, "faults", NULL);
    int n = list && !scenario_is_null(list) ? (list->kind == SCN_SEQ ? list->n : -1) : 0;
    if (n < 0) return scenario_want_seq(c, list, "faults");
    if (n > FAULT_PLAN_MAX)
        return scenario_fail(c, list, "faults: %d faults; at most %d fit in one plan", n, FAULT_PLAN_MAX);
    if (fault_plan_init(&s->faults, n, s->gpus_per_node)) return scenario_fail(c, list, "faults: out of memory");
    for (int i = 0; i < n; i++)
        if (load_fault(c, list->items[i], i, s, &s->faults.faults[i])) return -1;
    return 0;
}

int scenario_load_campaign(sc_ctx *c, const scn_node *root, scenario *s) {
    sc_campaign *cp = &s->campaign;
    cp->seed = s->seed;
    /* a preemption needs --exit-signal-handler to be survivable: a scenario of its own */
    cp->kinds = ((1u << FAULT_KIND_COUNT) - 1) & ~(1u << FAULT_PREEMPT);
    /* data_stall came after the others: drawn only when campaign.kinds lists it, so a campaign's seed draws
     * the faults it drew before the kind existed */
    cp->kinds &= ~(1u << FAULT_DATA_STALL);
    /* the doctor's kinds are found before a job, not by one: a campaign of training never draws them */
    cp->kinds &= ~(1u << FAULT_SLOW_LINK) & ~(1u << FAULT_HIDDEN_DIR);
    /* amax_spike came later and needs an FP8 job: drawn only when campaign.kinds lists it */
    cp->kinds &= ~(1u << FAULT_AMAX_SPIKE);
    cp->step_min = 1;
    cp->step_max = s->train_iters;
    const scn_node *camp = scenario_yaml_get(root, "campaign", NULL);
    if (!camp) return 0;
    static const char *const keys[] = {"count", "seed", "kinds", "steps", NULL};
    if (scenario_want_map(c, camp, "campaign") || scenario_check_keys(c, camp, "campaign", keys)) return -1;
    const scn_node *v;
    int64_t x;
    if ((v = scenario_yaml_get(camp, "count", NULL))) {
        if (scenario_get_int(c, v, "campaign.count", 0, 100000, &x)) return -1;
        cp->count = (int)x;
    }
    if ((v = scenario_yaml_get(camp, "seed", NULL)) && scenario_get_u64(c, v, "campaign.seed", &cp->seed)) return -1;
    if ((v = scenario_yaml_get(camp, "kinds", NULL))) {
        if (scenario_want_seq(c, v, "campaign.kinds")) return -1;
        if (v->n == 0)
            return scenario_fail(c, v, "campaign.kinds: empty: name at least one kind, or leave kinds out for all");
        cp->kinds = 0;
        for (int i = 0; i < v->n; i++) {
            char p[48];
            fault_kind k = FAULT_HANG;
            snprintf(p, sizeof p, "campaign.kinds[%d]", i);
            if (kind_value(c, v->items[i], p, &k)) return -1;
            if (fault_kind_is_doctor(k))
                return scenario_fail(c, v->items[i],
                                     "%s: %s is found by the doctor before a job, not by training: throw it in a "
                                     "scenario of mode: doctor",
                                     p, fault_kind_name(k));
            if (cp->kinds & (1u << k))
                return scenario_fail(c, v->items[i], "%s: %s is listed twice", p, fault_kind_name(k));
            cp->kinds |= 1u << k;
        }
    }
    if ((v = scenario_yaml_get(camp, "steps", NULL))) {
        int64_t lo, hi;
        if (scenario_want_seq(c, v, "campaign.steps")) return -1;
        if (v->n != 2) return scenario_fail(c, v, "campaign.steps: expected [first, last], got %d values", v->n);
        if (scenario_get_int(c, v->items[0], "campaign.steps[0]", 1, s->train_iters, &lo) ||
            scenario_get_int(c, v->items[1], "campaign.steps[1]", 1, s->train_iters, &hi))
            return -1;
        if (lo > hi)
            return scenario_fail(c, v, "campaign.steps: first %lld is after last %lld", (long long)lo, (long long)hi);
        cp->step_min = lo;
        cp->step_max = hi;
    }
    return 0;
}

int scenario_load_expect(sc_ctx *c, const scn_node *root, scenario *s) {
    sc_expect *e = &s->expect;
    *e = (sc_expect){.completes = true,
                     .detected = true,
                     .attributed = true,
                     .continuity = true,
                     .final_weights = true,
                     .memory_under_capacity = true,
                     .max_restarts = -1,
                     .expect_failure_kind = -1};
    const scn_node *ek, *ex = scenario_yaml_get(root, "expect", &ek);
    if (!ex) return 0;
    e->line = ek->line;
    e->col = ek->col;
    static const char *const keys[] = {
        "completes",          "detected",     "attributed", "continuity", "final_weights", "memory_under_capacity",
        "max_detect_seconds", "max_restarts", "failure",    NULL};
    if (scenario_want_map(c, ex, "expect") || scenario_check_keys(c, ex, "expect", keys)) return -1;
    const scn_node *v;
    struct {
        const char *key;
        bool *field;
    } bools[] = {{"completes", &e->completes},         {"detected", &e->detected},
                 {"attributed", &e->attributed},       {"continuity", &e->continuity},
                 {"final_weights", &e->final_weights}, {"memory_under_capacity", &e->memory_under_capacity}};
    const scn_node *fk, *failure = scenario_yaml_get(ex, "failure", &fk);
    if (failure) {
        /* a job that must stop cannot also reach train-iters with the fault-free run's numbers */
        fault_kind k = FAULT_HANG;
        if (kind_value(c, failure, "expect.failure", &k)) return -1;
        e->expect_failure_kind = (int)k;
        e->completes = e->continuity = e->final_weights = false;
    }
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        char p[64];
        snprintf(p, sizeof p, "expect.%s", bools[i].key);
        if ((v = scenario_yaml_get(ex, bools[i].key, NULL)) && scenario_get_bool(c, v, p, bools[i].field)) return -1;
    }
    if (failure && e->completes)
        return scenario_fail(c, scenario_yaml_get(ex, "completes", NULL),
                             "expect.completes: true contradicts failure: %s (the job must stop on it): remove one",
                             fault_kind_name((fault_kind)e->expect_failure_kind));
    if ((v = scenario_yaml_get(ex, "max_detect_seconds", NULL))) {
        if (scenario_get_number(c, v, "expect.max_detect_seconds", &e->max_detect_seconds)) return -1;
        if (!(e->max_detect_seconds >= 0))
            return scenario_fail(c, v, "expect.max_detect_seconds: must be >= 0 (0 = no limit), got %g",
                                 e->max_detect_seconds);
    }
    int64_t x;
    if ((v = scenario_yaml_get(ex, "max_restarts", NULL))) {
        if (scenario_get_int(c, v, "expect.max_restarts", -1, 1000000, &x)) return -1;
        e->max_restarts = (int)x;
    }
    return 0;
}
