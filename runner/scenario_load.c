/* Loading a scenario: the top level, the cluster (with its hostfile), the parallel layout,
 * checkpoints and the supervisor; flags and faults have their own files. Sections load in the
 * order their checks need: faults are checked against the cluster, train-iters and checkpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"
#include "twin_cost.h"
#include "twinrun/err.h"

static const char *const top_keys[] = {"name",       "description", "seed",     "mode",   "cluster",
                                       "parallel",   "model",       "training", "data",   "checkpoint",
                                       "supervisor", "faults",      "campaign", "expect", NULL};

/* "a/b/thousand_card.yaml" -> "thousand_card" */
static void default_name(const char *path, char *out, size_t outlen) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".yaml") == 0) n -= 5;
    else if (n > 4 && strcmp(base + n - 4, ".yml") == 0) n -= 4;
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), base);
}

static int check_hosts(sc_ctx *c, const scn_node *at, scenario *s, bool nodes_given, bool gpn_given) {
    /* what the file does not say, the hostfile does: one node per host, its slots per node */
    if (!nodes_given) s->nodes = s->nhosts;
    if (!gpn_given) s->gpus_per_node = s->hosts[0].slots;
    if (s->gpus_per_node > 64)
        return scenario_fail(c, at, "cluster.hostfile: %s:%d: host %s has %d slots; a node has at most 64 GPUs here",
                             s->hostfile, s->hosts[0].line, s->hosts[0].name, s->hosts[0].slots);
    long long slots = 0;
    for (int i = 0; i < s->nhosts; i++) slots += s->hosts[i].slots;
    for (int i = 0; i < s->nhosts; i++)
        if (s->hosts[i].slots != s->gpus_per_node)
            return scenario_fail(
                c, at,
                "cluster.hostfile: %s:%d: host %s has slots=%d but cluster.gpus_per_node is %d: every node "
                "runs one rank per GPU; write '%s slots=%d' (the hostfile's %d slots must equal %d nodes x "
                "%d = %lld ranks)",
                s->hostfile, s->hosts[i].line, s->hosts[i].name, s->hosts[i].slots, s->gpus_per_node, s->hosts[i].name,
                s->gpus_per_node, (int)slots, s->nodes, s->gpus_per_node, (long long)s->nodes * s->gpus_per_node);
    if (s->nhosts != s->nodes)
        return scenario_fail(
            c, at,
            "cluster.hostfile: %s:%d: %d hosts with %lld slots, but cluster has %d nodes x %d = %lld ranks: "
            "%s the hostfile, or set nodes: %d",
            s->hostfile, s->hosts[s->nhosts - 1].line, s->nhosts, slots, s->nodes, s->gpus_per_node,
            (long long)s->nodes * s->gpus_per_node,
            s->nhosts < s->nodes ? "add the missing hosts to" : "remove the extra hosts from", s->nhosts);
    return 0;
}

int scenario_load_cluster(sc_ctx *c, const scn_node *root, scenario *s) {
    const scn_node *ck, *cl = scenario_yaml_get(root, "cluster", &ck);
    if (!cl) return scenario_fail(c, root, "cluster: is missing: add cluster: with nodes: N (and gpus_per_node: 8)");
    static const char *const keys[] = {"nodes", "gpus_per_node", "device", "capacity_scale", "hostfile", NULL};
    if (scenario_want_map(c, cl, "cluster") || scenario_check_keys(c, cl, "cluster", keys)) return -1;
    const scn_node *v, *hk, *hf = scenario_yaml_get(cl, "hostfile", &hk);
    int64_t x;
    const scn_node *nodes = scenario_yaml_get(cl, "nodes", NULL), *gpn = scenario_yaml_get(cl, "gpus_per_node", NULL);
    if (nodes) {
        if (scenario_get_int(c, nodes, "cluster.nodes", 1, SC_NODES_CAP, &x)) return -1;
        s->nodes = (int)x;
    } else if (!hf) {
        return scenario_fail(c, ck, "cluster.nodes is missing: add nodes: N (or a hostfile: with one line per node)");
    }
    if (gpn) {
        if (scenario_get_int(c, gpn, "cluster.gpus_per_node", 1, 64, &x)) return -1;
        s->gpus_per_node = (int)x;
    }
    if ((v = scenario_yaml_get(cl, "device", NULL))) {
        char dev[64];
        if (scenario_get_string(c, v, "cluster.device", dev, sizeof dev, false)) return -1;
        const twin_device_spec *spec = twin_device_spec_find(dev);
        if (!spec) {
            char list[256] = "";
            size_t used = 0;
            for (int i = 0; i < twin_device_spec_count(); i++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", twin_device_spec_at(i)->name);
                if (w < 0 || (size_t)w >= sizeof list - used) break;
                used += (size_t)w;
            }
            return scenario_fail(c, v, "cluster.device: unknown device '%s'; devices: %s", dev, list);
        }
        snprintf(s->device, sizeof s->device, "%s", spec->name);
    }
    if ((v = scenario_yaml_get(cl, "capacity_scale", NULL))) {
        if (scenario_get_number(c, v, "cluster.capacity_scale", &s->capacity_scale)) return -1;
        if (!(s->capacity_scale > 0) || s->capacity_scale > 1e6)
            return scenario_fail(c, v, "cluster.capacity_scale: %g must be in (0, 1e6]: it scales the device's memory",
                                 s->capacity_scale);
    }
    if (hf) {
        char rel[SC_PATH_LEN], why[128], msg[512];
        if (scenario_get_string(c, hf, "cluster.hostfile", rel, sizeof rel, false)) return -1;
        if (scenario_resolve_path(c->name, rel, s->hostfile, sizeof s->hostfile))
            return scenario_fail(c, hf, "cluster.hostfile: the resolved path is longer than %d bytes", SC_PATH_LEN - 1);
        char *text;
        size_t len;
        if (scenario_read_file(s->hostfile, &text, &len, why, sizeof why))
            return scenario_fail(c, hf, "cluster.hostfile: cannot read %s: %s", s->hostfile, why);
        int rc = scenario_hostfile_parse(text, len, s->hostfile, &s->hosts, &s->nhosts, msg, sizeof msg);
        free(text);
        if (rc) return scenario_fail(c, hf, "cluster.hostfile: %s", msg);
        if (check_hosts(c, hf, s, nodes != NULL, gpn != NULL)) return -1;
    }
    if ((long long)s->nodes * s->gpus_per_node > SC_WORLD_MAX)
        return scenario_fail(c, nodes ? nodes : ck, "cluster: %d nodes x %d = %lld ranks; the twin runs at most %d",
                             s->nodes, s->gpus_per_node, (long long)s->nodes * s->gpus_per_node, SC_WORLD_MAX);
    return 0;
}

static long long gcd(long long a, long long b) {
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int scenario_load_parallel(sc_ctx *c, const scn_node *root, scenario *s) {
    int world = s->nodes * s->gpus_per_node;
    s->tp = s->pp = s->cp = 1;
    const scn_node *pk, *par = scenario_yaml_get(root, "parallel", &pk);
    const scn_node *dv = NULL;
    if (par) {
        static const char *const keys[] = {
            "tensor", "pipeline", "context", "data", "sequence_parallel", "distributed_optimizer", NULL};
        if (scenario_want_map(c, par, "parallel") || scenario_check_keys(c, par, "parallel", keys)) return -1;
        struct {
            const char *key;
            int *field;
        } sizes[] = {{"tensor", &s->tp}, {"pipeline", &s->pp}, {"context", &s->cp}, {"data", &s->dp}};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            const scn_node *v = scenario_yaml_get(par, sizes[i].key, NULL);
            char p[48];
            int64_t x;
            snprintf(p, sizeof p, "parallel.%s", sizes[i].key);
            if (!v) continue;
            if (scenario_get_int(c, v, p, 1, SC_WORLD_MAX, &x)) return -1;
            *sizes[i].field = (int)x;
            if (i == 3) dv = v;
        }
        const scn_node *v;
        if ((v = scenario_yaml_get(par, "sequence_parallel", NULL)) &&
            scenario_get_bool(c, v, "parallel.sequence_parallel", &s->sequence_parallel))
            return -1;
        if ((v = scenario_yaml_get(par, "distributed_optimizer", NULL)) &&
            scenario_get_bool(c, v, "parallel.distributed_optimizer", &s->distributed_optimizer))
            return -1;
    }
    long long model = (long long)s->tp * s->pp * s->cp; /* each <= 2^20: no overflow */
    if (model > world || world % model != 0) {
        /* the nearest node counts that would work, so the fix is concrete */
        long long step = model / gcd(model, s->gpus_per_node);
        long long n_lo = s->nodes / step * step, n_hi = n_lo + step;
        char fix[160];
        if (n_lo >= 1)
            snprintf(fix, sizeof fix, "use %lld or %lld nodes, or change tensor/pipeline/context", n_lo, n_hi);
        else snprintf(fix, sizeof fix, "use %lld nodes, or change tensor/pipeline/context", n_hi);
        return scenario_fail(
            c, par ? pk : root,
            "parallel: tensor %d x pipeline %d x context %d = %lld does not divide the cluster's %d nodes x "
            "%d = %d ranks: %s",
            s->tp, s->pp, s->cp, model, s->nodes, s->gpus_per_node, world, fix);
    }
    if (dv && model * s->dp != world) /* model <= world <= 2^20 here */
        return scenario_fail(
            c, dv,
            "parallel: tensor %d x pipeline %d x context %d x data %d = %lld ranks, but cluster has %d "
            "nodes x %d = %d: set data: %lld, or leave data out to derive it",
            s->tp, s->pp, s->cp, s->dp, model * s->dp, s->nodes, s->gpus_per_node, world, world / model);
    s->dp = (int)(world / model);
    return 0;
}

static int load_checkpoint(sc_ctx *c, const scn_node *root, scenario *s) {
    const scn_node *ck = scenario_yaml_get(root, "checkpoint", NULL), *v;
    if (!ck) return 0;
    static const char *const keys[] = {"interval", "keep_last", NULL};
    if (scenario_want_map(c, ck, "checkpoint") || scenario_check_keys(c, ck, "checkpoint", keys)) return -1;
    int64_t x;
    if ((v = scenario_yaml_get(ck, "interval", NULL))) {
        if (scenario_get_int(c, v, "checkpoint.interval", 0, 1 << 30, &x)) return -1;
        s->save_interval = (int)x;
    }
    if ((v = scenario_yaml_get(ck, "keep_last", NULL))) {
        if (scenario_get_int(c, v, "checkpoint.keep_last", 0, 1 << 30, &x)) return -1;
        s->keep_last = (int)x;
    }
    return 0;
}

static int load_supervisor(sc_ctx *c, const scn_node *root, scenario *s) {
    s->max_restarts = 5;
    /* the watchdog is the collective timeout: Megatron's --distributed-timeout-minutes (10) unless set */
    const sc_flag *dt = scenario_flag_last(s, "distributed-timeout-minutes");
    double minutes = dt && dt->value ? strtod(dt->value, NULL) : 10;
    const scn_node *sup = scenario_yaml_get(root, "supervisor", NULL), *v;
    if (sup) {
        static const char *const keys[] = {"max_restarts", "watchdog_minutes", NULL};
        if (scenario_want_map(c, sup, "supervisor") || scenario_check_keys(c, sup, "supervisor", keys)) return -1;
        int64_t x;
        if ((v = scenario_yaml_get(sup, "max_restarts", NULL))) {
            if (scenario_get_int(c, v, "supervisor.max_restarts", 0, 1000000, &x)) return -1;
            s->max_restarts = (int)x;
        }
        if ((v = scenario_yaml_get(sup, "watchdog_minutes", NULL))) {
            double m;
            if (scenario_get_number(c, v, "supervisor.watchdog_minutes", &m)) return -1;
            if (!(m > 0) || m > 1e6)
                return scenario_fail(c, v, "supervisor.watchdog_minutes: %g must be in (0, 1e6]", m);
            if (dt && m != minutes)
                return scenario_fail(
                    c, v,
                    "supervisor.watchdog_minutes %g and training.distributed-timeout-minutes %g disagree: "
                    "the watchdog is the collective timeout; keep one",
                    m, minutes);
            minutes = m;
        }
    }
    s->watchdog_seconds = minutes * 60;
    return 0;
}

/* mode: rehearse (the default: faults, restarts, bit-identical checks at the file's widths) or predict
 * (one shape-only run: memory and simulated time at full size, docs/prediction.md). */
static int load_mode(sc_ctx *c, const scn_node *v, scenario *s) {
    char mode[32];
    if (scenario_get_string(c, v, "mode", mode, sizeof mode, false)) return -1;
    if (!strcmp(mode, "predict")) s->predict = true;
    else if (!strcmp(mode, "doctor")) s->doctor = true;
    else if (strcmp(mode, "rehearse"))
        return scenario_fail(c, v, "mode: '%s' is not a mode: use rehearse (the default), predict or doctor", mode);
    return 0;
}

static int load_top(sc_ctx *c, const scn_node *root, scenario *s) {
    if (root->kind != SCN_MAP) {
        char got[96];
        scenario_describe(root, got, sizeof got);
        return scenario_fail(c, root, "a scenario is a mapping (name:, cluster:, training:, ...), got %s", got);
    }
    if (scenario_check_keys(c, root, "", top_keys)) return -1;
    const scn_node *v;
    if ((v = scenario_yaml_get(root, "name", NULL)) &&
        scenario_get_string(c, v, "name", s->name, sizeof s->name, false))
        return -1;
    if (work_check_name(c, v, s->name)) return -1;
    if ((v = scenario_yaml_get(root, "description", NULL)) &&
        scenario_get_string(c, v, "description", s->description, sizeof s->description, true))
        return -1;
    if ((v = scenario_yaml_get(root, "seed", NULL)) && scenario_get_u64(c, v, "seed", &s->seed)) return -1;
    const scn_node *mode = scenario_yaml_get(root, "mode", NULL);
    if (mode && load_mode(c, mode, s)) return -1;
    if (scenario_load_cluster(c, root, s) || scenario_load_parallel(c, root, s) || scenario_load_flags(c, root, s) ||
        load_checkpoint(c, root, s) || load_supervisor(c, root, s) || scenario_load_faults(c, root, s) ||
        scenario_load_campaign(c, root, s) || scenario_load_expect(c, root, s))
        return -1;
    /* a shape-only run computes no values: a fault in one would test nothing */
    if (s->predict && (s->faults.n > 0 || s->campaign.count > 0))
        return scenario_fail(
            c, mode,
            "mode: predict runs the job shape-only (no values are computed), so %s would test nothing: "
            "remove %s, or rehearse them in a scenario of mode: rehearse",
            s->faults.n > 0 ? "faults:" : "campaign:", s->faults.n > 0 ? "faults:" : "campaign:");
    if (s->doctor && s->campaign.count > 0)
        return scenario_fail(c, mode, "mode: doctor runs no training, so a campaign: would test nothing: remove it");
    /* the doctor names four kinds before a job; training notices the others (and has no judge for those four) */
    for (int i = 0; i < s->faults.n; i++) {
        const fault_spec *f = &s->faults.faults[i];
        const bool for_doctor =
            fault_kind_is_doctor(f->kind) || f->kind == FAULT_VERSION_SKEW || f->kind == FAULT_SHORT_NODE;
        if (s->doctor && !for_doctor)
            return scenario_fail(c, &(scn_node){.line = f->line, .col = f->col},
                                 "faults[%d] (%s): mode: doctor runs no training: the doctor names version_skew, "
                                 "short_node, slow_link and hidden_dir",
                                 i, fault_kind_name(f->kind));
        if (!s->doctor && fault_kind_is_doctor(f->kind))
            return scenario_fail(c, &(scn_node){.line = f->line, .col = f->col},
                                 "faults[%d] (%s): found by the doctor before a job, not by training: throw it in a "
                                 "scenario of mode: doctor",
                                 i, fault_kind_name(f->kind));
    }
    return 0;
}

int scenario_parse(const char *text, size_t len, const char *name, scenario *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return tr_errf(err, errlen, "scenario_parse: no scenario");
    memset(out, 0, sizeof *out);
    if (!name) name = "<scenario>";
    sc_ctx c = {.name = name, .err = err, .errlen = errlen};
    snprintf(out->path, sizeof out->path, "%s", name);
    default_name(name, out->name, sizeof out->name);
    out->seed = 1234;
    out->gpus_per_node = 8;
    snprintf(out->device, sizeof out->device, "H100");
    out->capacity_scale = 1;
    out->faults.gpus_per_node = 8;
    if (!text) return tr_errf(err, errlen, "%s: no text", name);
    if (len > SC_TEXT_MAX)
        return scenario_fail(&c, NULL, "%zu bytes; a scenario file has at most %u", len, SC_TEXT_MAX);
    scn_node *root;
    if (scenario_yaml_load(text, len, name, &root, err, errlen)) {
        scenario_free(out);
        return -1;
    }
    int rc = root && !scenario_is_null(root)
                 ? load_top(&c, root, out)
                 : scenario_fail(&c, root,
                                 "the file is empty: a scenario needs at least cluster: and training: (see "
                                 "docs/scenarios.md)");
    scenario_yaml_free(root);
    if (rc) scenario_free(out);
    return rc;
}

int scenario_load(const char *path, scenario *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return tr_errf(err, errlen, "scenario_load: no scenario");
    memset(out, 0, sizeof *out);
    if (!path) return tr_errf(err, errlen, "scenario_load: no path");
    char *text, why[128];
    size_t len;
    if (scenario_read_file(path, &text, &len, why, sizeof why))
        return tr_errf(err, errlen, "%s: cannot read: %s", path, why);
    int rc = scenario_parse(text, len, path, out, err, errlen);
    free(text);
    return rc;
}

void scenario_free(scenario *s) {
    if (!s) return;
    scenario_flags_free(s);
    free(s->hosts);
    s->hosts = NULL;
    s->nhosts = 0;
    fault_plan_free(&s->faults);
}
