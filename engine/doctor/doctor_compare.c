/* Rank 0 compares what the ranks saw, node by node, against what most of them saw (the training
 * preflight's rule: one odd node stands out whichever rank it holds), and says what to fix. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/majority.h"
#include "doctor/doctor_internal.h"
#include "twinrun/err.h"

#define VALUE_LEN 320

doctor_check *doctor_add(doctor_report *r, const char *id, const char *title, doctor_status st, int node,
                         const char *fmt, ...) {
    doctor_check *grown = realloc(r->checks, sizeof *grown * (size_t)(r->nchecks + 1));
    TR_CHECK(grown != NULL, "out of host memory for the doctor's report");
    r->checks = grown;
    doctor_check *c = &r->checks[r->nchecks++];
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    snprintf(c->title, sizeof c->title, "%s", title);
    c->status = st;
    c->node = node;
    c->first_rank = c->last_rank = -1;
    if (node >= 0) doctor_node_ranks(r, node, &c->first_rank, &c->last_rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
    return c;
}

void doctor_node_ranks(const doctor_report *r, int node, int *first, int *last) {
    *first = node * r->gpus_per_node;
    *last = *first + r->gpus_per_node - 1;
}

/* One key compared over the ranks that report it (leaders: only each node's first rank). */
typedef struct cmp_result {
    int counted_nodes, diff_nodes;
    int first_node; /* the first node that differs; -1 none */
    char first_value[VALUE_LEN], majority[VALUE_LEN];
    bool has_majority;
    char more[160]; /* "; also nodes 18, 19 (4 nodes in all)" */
} cmp_result;

static void cmp(const doctor_report *r, const doctor_wire *all, const char *key, const char *absent, bool leaders,
                cmp_result *out) {
    const int world = r->world, g = r->gpus_per_node;
    memset(out, 0, sizeof *out);
    out->first_node = -1;
    uint64_t *h = calloc((size_t)world, sizeof *h);
    bool *skip = calloc((size_t)world, sizeof *skip);
    TR_CHECK(h && skip, "out of host memory");
    char v[VALUE_LEN];
    for (int rk = 0; rk < world; rk++) {
        const bool has = doctor_fact(all[rk].text, key, v, sizeof v);
        skip[rk] = (leaders && rk % g) || (!has && !absent);
        if (!has && absent) snprintf(v, sizeof v, "%s", absent);
        h[rk] = tr_fnv1a(TR_FNV_OFFSET, v, strlen(v));
    }
    const uint64_t want = tr_majority_u64(h, skip, world, &out->has_majority);
    size_t used = 0;
    int listed = 0;
    for (int rk = 0; rk < world; rk++) {
        if (skip[rk]) continue;
        if (h[rk] == want && !out->majority[0]) {
            if (!doctor_fact(all[rk].text, key, out->majority, sizeof out->majority))
                snprintf(out->majority, sizeof out->majority, "%s", absent ? absent : "");
        }
    }
    for (int node = 0; node < world / g; node++) {
        int odd = -1, counted = 0;
        for (int rk = node * g; rk < (node + 1) * g; rk++) {
            if (skip[rk]) continue;
            counted = 1;
            if (h[rk] != want && odd < 0) odd = rk;
        }
        out->counted_nodes += counted;
        if (odd < 0) continue;
        if (out->diff_nodes++ == 0) {
            out->first_node = node;
            if (!doctor_fact(all[odd].text, key, out->first_value, sizeof out->first_value))
                snprintf(out->first_value, sizeof out->first_value, "%s", absent ? absent : "");
        } else if (listed < 8 && used < sizeof out->more) {
            used += (size_t)snprintf(out->more + used, sizeof out->more - used, "%s%d", listed ? ", " : "; also nodes ",
                                     node);
            listed++;
        }
    }
    if (out->diff_nodes > 1 && used < sizeof out->more)
        snprintf(out->more + used, sizeof out->more - used, "%s (%d nodes in all)", out->diff_nodes > 9 ? ", ..." : "",
                 out->diff_nodes);
    free(h);
    free(skip);
}

/* "node 17 (ranks 136-143) runs 'X', 127 other nodes run 'Y'; also nodes ..." (verb: "runs\0run") */
static int describe(const doctor_report *r, const cmp_result *c, const char *verb, char *out, size_t outlen) {
    int a, b;
    doctor_node_ranks(r, c->first_node, &a, &b);
    const int others = c->counted_nodes - c->diff_nodes;
    return snprintf(out, outlen, "node %d (ranks %d-%d) %s '%s', %d other node%s %s '%s'%s%s", c->first_node, a, b,
                    verb, c->first_value, others, others == 1 ? "" : "s", others == 1 ? verb : verb + strlen(verb) + 1,
                    c->majority, c->more,
                    c->has_majority ? "" : " (no majority: the nodes split evenly; rank 0's node is the reference)");
}

static void simple(doctor_report *r, const doctor_wire *all, const char *key, const char *id, const char *title,
                   const char *verb, const char *fix) {
    cmp_result c;
    cmp(r, all, key, NULL, false, &c);
    char text[1200];
    if (c.diff_nodes == 0) {
        doctor_add(r, id, title, DOCTOR_PASS, -1, "every node %s '%s'", verb, c.majority);
        return;
    }
    describe(r, &c, verb, text, sizeof text);
    doctor_add(r, id, title, DOCTOR_FAIL, c.first_node, "%s: %s", text, fix);
}

/* The launcher settings (NCCL_*, MCCL_*, ...) one by one: a setting one node lacks counts as different. */
static void settings(doctor_report *r, const doctor_wire *all) {
    enum { MAX_NAMES = 256 };
    char(*names)[80] = calloc(MAX_NAMES, sizeof *names);
    TR_CHECK(names != NULL, "out of host memory");
    int n = 0;
    for (int rk = 0; rk < r->world; rk++)
        for (const char *p = strstr(all[rk].text, "\nenv."); p; p = strstr(p + 1, "\nenv.")) {
            const char *eq = strchr(p + 5, '=');
            if (!eq || eq - (p + 5) >= 80) continue;
            char name[80];
            snprintf(name, sizeof name, "%.*s", (int)(eq - (p + 5)), p + 5);
            int k = 0;
            while (k < n && strcmp(names[k], name)) k++;
            if (k == n && n < MAX_NAMES) snprintf(names[n++], sizeof names[0], "%s", name);
        }
    char detail[1000] = "";
    size_t used = 0;
    int differ = 0, first_node = -1;
    for (int k = 0; k < n; k++) {
        char key[96], text[1200];
        snprintf(key, sizeof key, "env.%s", names[k]);
        cmp_result c;
        cmp(r, all, key, "(unset)", false, &c);
        if (c.diff_nodes == 0) continue;
        if (differ++ == 0) first_node = c.first_node;
        describe(r, &c, "has\0have", text, sizeof text);
        if (used < sizeof detail)
            used += (size_t)snprintf(detail + used, sizeof detail - used, "%s%s: %s", used ? "; " : "", names[k], text);
    }
    if (!differ) {
        doctor_add(r, "env", "launcher settings", DOCTOR_PASS, -1,
                   "%d setting%s (NCCL_*, MCCL_*, MUSA_*, CUDA_*, FI_*, TWINRUN_*, ...) the same on every node", n,
                   n == 1 ? "" : "s");
    } else {
        doctor_add(r, "env", "launcher settings", DOCTOR_FAIL, first_node,
                   "%s: export the same settings on every node (mpirun -x NAME, or the job's environment; the "
                   "guide's FAQ Q3)",
                   detail);
    }
    free(names);
}

static void gpus(const doctor_options *o, doctor_report *r, const doctor_wire *all) {
    cmp_result c;
    cmp(r, all, "count", NULL, false, &c);
    char text[1200];
    if (c.diff_nodes) {
        describe(r, &c, "shows\0show", text, sizeof text);
        doctor_add(r, "gpus", "GPU count per node", DOCTOR_FAIL, c.first_node,
                   "%s GPUs: check the node's GPUs (nvidia-smi / mthreads-gmi: a lost card, a driver error) and "
                   "CUDA_VISIBLE_DEVICES / MTHREADS_VISIBLE_DEVICES; drain it from the hostfile until it shows all %d",
                   text, o->gpus_per_node);
    } else if (atoi(c.majority) < o->gpus_per_node && atoi(c.majority) != 1) {
        doctor_add(r, "gpus", "GPU count per node", DOCTOR_WARN, -1,
                   "every node shows %s GPUs, fewer than its %d ranks: more ranks than GPUs per node share devices",
                   c.majority, o->gpus_per_node);
    } else {
        doctor_add(r, "gpus", "GPU count per node", DOCTOR_PASS, -1, "every node shows %s GPU%s", c.majority,
                   atoi(c.majority) == 1 ? "" : "s");
    }
}

static void health(doctor_report *r, const doctor_wire *all) {
    dev_health *h = calloc((size_t)r->world, sizeof *h);
    TR_CHECK(h != NULL, "out of host memory for the doctor's health readings");
    for (int rk = 0; rk < r->world; rk++) doctor_health_parse(all[rk].text, &h[rk]);
    doctor_health_judge(r, h);
    free(h);
}

static void clocks(const doctor_options *o, doctor_report *r, const doctor_wire *all) {
    char v[64];
    double t0 = doctor_fact(all[0].text, "clock", v, sizeof v) ? atof(v) : 0, worst = 0;
    int who = 0;
    for (int rk = 1; rk < r->world; rk++) {
        const double d = (doctor_fact(all[rk].text, "clock", v, sizeof v) ? atof(v) : t0) - t0;
        if (fabs(d) > fabs(worst)) worst = d, who = rk;
    }
    r->clock_skew_s = fabs(worst), r->clock_skew_rank = who;
    const char *clock = r->simulated[0] ? "simulated clocks" : "wall clocks";
    if (fabs(worst) > o->max_clock_skew_s)
        doctor_add(r, "clock", "clock skew", DOCTOR_FAIL, who / r->gpus_per_node,
                   "rank %d's clock is %.3f s %s rank 0's after a barrier (limit %.3f s): synchronise the clocks "
                   "(chrony or ntpd) on every node",
                   who, fabs(worst), worst > 0 ? "ahead of" : "behind", o->max_clock_skew_s);
    else
        doctor_add(r, "clock", "clock skew", DOCTOR_PASS, -1,
                   "largest skew %.6f s (rank %d) against rank 0 after a barrier (%s; limit %.3f s)", fabs(worst), who,
                   clock, o->max_clock_skew_s);
}

static void dirs(const doctor_options *o, doctor_report *r, const doctor_wire *all) {
    for (int k = 0; k < o->ndirs; k++) {
        const doctor_dir *dd = &o->dirs[k];
        char key[16], id[48], title[96];
        snprintf(key, sizeof key, "dir%d", k);
        snprintf(id, sizeof id, "dir:%s", dd->what);
        for (int j = 0; j < k; j++)
            if (!strcmp(o->dirs[j].what, dd->what)) snprintf(id, sizeof id, "dir:%s%d", dd->what, k);
        snprintf(title, sizeof title, "%s directory %.60s", dd->what, dd->path);
        cmp_result c;
        cmp(r, all, key, NULL, true, &c);
        const bool maj_ok = !strncmp(c.majority, "ok ", 3);
        if (!maj_ok) {
            doctor_add(r, id, title, DOCTOR_FAIL, c.diff_nodes ? c.first_node : 0,
                       "%s: %s on %s: create it on the shared file system (the guide's §2.1 layout) and mount it at "
                       "the same path on every node",
                       dd->path, c.majority, c.diff_nodes ? "most nodes" : "every node");
            continue;
        }
        if (c.diff_nodes == 0) {
            int entries = 0;
            sscanf(c.majority + 3, "%*s %d", &entries);
            doctor_add(r, id, title, DOCTOR_PASS, -1, "%s: visible%s from every node, the same %d entr%s", dd->path,
                       dd->writable ? " and writable" : "", entries, entries == 1 ? "y" : "ies");
            continue;
        }
        int a, b;
        doctor_node_ranks(r, c.first_node, &a, &b);
        const int others = c.counted_nodes - c.diff_nodes;
        if (!strncmp(c.first_value, "ok ", 3)) {
            int mine = 0, theirs = 0;
            sscanf(c.first_value + 3, "%*s %d", &mine);
            sscanf(c.majority + 3, "%*s %d", &theirs);
            doctor_add(r, id, title, DOCTOR_FAIL, c.first_node,
                       "node %d (ranks %d-%d) sees other files in %s (%d entries; %d other nodes see %d)%s: it mounts "
                       "another file system or a stale copy there: mount the same shared directory on every node",
                       c.first_node, a, b, dd->path, mine, others, theirs, c.more);
        } else {
            const bool ro = !strncmp(c.first_value, "not writable", 12);
            doctor_add(r, id, title, DOCTOR_FAIL, c.first_node,
                       "node %d (ranks %d-%d) cannot %s %s (%s), %d other node%s can%s: %s", c.first_node, a, b,
                       ro ? "write to" : "see", dd->path, c.first_value, others, others == 1 ? "" : "s", c.more,
                       ro ? "make it writable there (permissions, a read-only mount)"
                          : "mount the shared file system at the same path on that node (/etc/fstab, the container's "
                            "-v) or drain it from the hostfile");
        }
    }
}

void doctor_compare(const doctor_options *o, doctor_report *r, const doctor_wire *all) {
    simple(r, all, "build", "build", "twinrun build and commit", "runs\0run",
           "install the same twinrun build on every node (doctor --version prints version and commit)");
    simple(r, all, "versions", "versions", "driver, runtime and collective library", "has\0have",
           "install the same driver, runtime and NCCL/MCCL on every node (one container image; the guide's FAQ Q1)");
    settings(r, all);
    gpus(o, r, all);
    health(r, all);
    clocks(o, r, all);
    dirs(o, r, all);
}
