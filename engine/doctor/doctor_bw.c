/* Rank 0 turns the ranks' times into nccl-tests' figures per stage (a group's time is its slowest rank's),
 * finds the groups far below their stage's median, and names the slowest link: a node every one of whose
 * pairs is slow, else the slowest pair. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_internal.h"
#include "twinrun/err.h"

enum { STAGES = 4 };
static const char *const stage_names[STAGES] = {"one_node", "two_nodes", "mp_group", "all_ranks"};
static const char *const stage_titles[STAGES] = {"collectives: one node's cards", "collectives: two nodes",
                                                 "collectives: one model-parallel group", "collectives: all ranks"};

typedef struct group {
    int round, first, last, n;
    double busbw[DOCTOR_OPS][DOCTOR_MAX_SIZES], time[DOCTOR_OPS][DOCTOR_MAX_SIZES];
    char name[64];
    int node_a, node_b; /* its nodes (a pair's two; a node's one, b = a); -1 for wider groups */
} group;

static int stage_of(int round) {
    return round == DOCTOR_R_NODE ? 0 : round == DOCTOR_R_MP ? 2 : round == DOCTOR_R_ALL ? 3 : 1;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Every group of every round, with its time and bus bandwidth per op and size. */
static group *find_groups(const doctor_options *o, const doctor_report *r, const doctor_wire *all, int *ngroups) {
    const int world = r->world, g = r->gpus_per_node;
    int *members = malloc(sizeof *members * (size_t)world), *key = malloc(sizeof *key * (size_t)world);
    group *gs = NULL;
    int n = 0;
    TR_CHECK(members && key, "out of host memory");
    for (int round = 0; round < DOCTOR_ROUNDS; round++) {
        for (int i = 0; i < world; i++) key[i] = -1;
        for (int rk = 0; rk < world; rk++) {
            const int m = doctor_group(o, world, round, rk, members);
            if (m < 2) continue;
            int gi = key[members[0]];
            if (gi < 0) {
                gs = realloc(gs, sizeof *gs * (size_t)(n + 1));
                TR_CHECK(gs != NULL, "out of host memory");
                gi = key[members[0]] = n++;
                group *x = &gs[gi];
                memset(x, 0, sizeof *x);
                x->round = round, x->first = members[0], x->last = members[m - 1], x->n = m;
                x->node_a = x->node_b = -1;
                if (round == DOCTOR_R_NODE) {
                    x->node_a = x->node_b = members[0] / g;
                    snprintf(x->name, sizeof x->name, "node %d", x->node_a);
                } else if (round == DOCTOR_R_PAIR_A || round == DOCTOR_R_PAIR_B) {
                    x->node_a = members[0] / g, x->node_b = members[m - 1] / g;
                    snprintf(x->name, sizeof x->name, "nodes %d-%d", x->node_a, x->node_b);
                } else if (round == DOCTOR_R_MP) {
                    snprintf(x->name, sizeof x->name, "the model-parallel group of dp %d",
                             members[0] / (o->tp * o->cp) % (world / (o->tp * o->cp * o->pp)));
                } else {
                    snprintf(x->name, sizeof x->name, "all %d ranks", m);
                }
                for (int op = 0; op < DOCTOR_OPS; op++)
                    for (int k = 0; k < DOCTOR_MAX_SIZES; k++) x->time[op][k] = 0;
            }
            group *x = &gs[gi];
            for (int op = 0; op < DOCTOR_OPS; op++)
                for (int k = 0; k < o->nsizes; k++) {
                    const double t = all[rk].times[doctor_time_index(round, op, k)];
                    if (t > x->time[op][k]) x->time[op][k] = t;
                }
        }
    }
    for (int i = 0; i < n; i++)
        for (int op = 0; op < DOCTOR_OPS; op++)
            for (int k = 0; k < o->nsizes; k++) {
                const double t = gs[i].time[op][k], bytes = (double)doctor_op_bytes(op, o->sizes[k], gs[i].n);
                gs[i].busbw[op][k] = t > 0 ? bytes / t * doctor_busbw_factor(op, gs[i].n) : 0;
            }
    free(members);
    free(key);
    *ngroups = n;
    return gs;
}

static void add_measure(doctor_report *r, const doctor_measure *m) {
    doctor_measure *grown = realloc(r->measures, sizeof *grown * (size_t)(r->nmeasures + 1));
    TR_CHECK(grown != NULL, "out of host memory");
    r->measures = grown;
    r->measures[r->nmeasures++] = *m;
}

static const char *size_text(size_t b, char *out, size_t outlen) {
    if (b >= (1u << 30) && b % (1u << 30) == 0) snprintf(out, outlen, "%zu GiB", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(out, outlen, "%zu MiB", b >> 20);
    else if (b >= (1u << 10) && b % (1u << 10) == 0) snprintf(out, outlen, "%zu KiB", b >> 10);
    else snprintf(out, outlen, "%zu B", b);
    return out;
}

/* The largest size tested: where bus bandwidth, not latency, sets the time. */
static int largest(const doctor_options *o) {
    int k = 0;
    for (int i = 1; i < o->nsizes; i++)
        if (o->sizes[i] > o->sizes[k]) k = i;
    return k;
}

/* Per stage: the measures, and the check (groups far below the stage's median). slow[i] marks group i. */
static void stage(const doctor_options *o, doctor_report *r, group *gs, int ngroups, int st, bool *slow) {
    int *in = malloc(sizeof *in * (size_t)(ngroups + 1)), n = 0;
    double *v = malloc(sizeof *v * (size_t)(ngroups + 1));
    TR_CHECK(in && v, "out of host memory");
    for (int i = 0; i < ngroups; i++)
        if (stage_of(gs[i].round) == st) in[n++] = i;
    char id[48], sz[32];
    snprintf(id, sizeof id, "coll:%s", stage_names[st]);
    if (n == 0) {
        doctor_add(r, id, stage_titles[st], DOCTOR_SKIP, -1, "%s",
                   st == 1   ? "one node: no second node to pair it with"
                   : st == 2 ? "the model-parallel group is one rank: give --tensor-model-parallel-size and "
                               "--pipeline-model-parallel-size"
                             : "one rank: nothing to test");
        free(in), free(v);
        return;
    }
    for (int op = 0; op < DOCTOR_OPS; op++)
        for (int k = 0; k < o->nsizes; k++) {
            doctor_measure m = {0};
            snprintf(m.stage, sizeof m.stage, "%s", stage_names[st]);
            snprintf(m.op, sizeof m.op, "%s", doctor_op_name(op));
            int worst = in[0];
            for (int j = 0; j < n; j++) {
                v[j] = gs[in[j]].busbw[op][k];
                if (v[j] < gs[worst].busbw[op][k]) worst = in[j];
            }
            const group *w = &gs[worst];
            m.bytes = doctor_op_bytes(op, o->sizes[k], w->n);
            m.groups = n, m.group_size = w->n;
            m.time_s = w->time[op][k];
            m.busbw = w->busbw[op][k];
            m.algbw = m.busbw / doctor_busbw_factor(op, w->n);
            m.median_busbw = median(v, n);
            m.slow_first = w->first, m.slow_last = w->last;
            snprintf(m.slow_name, sizeof m.slow_name, "%s", w->name);
            add_measure(r, &m);
        }
    /* slow: below slow_ratio x the median at the largest size, in any op */
    const int k = largest(o);
    int worst = -1, worst_op = 0;
    double worst_ratio = 1, worst_median = 0;
    for (int op = 0; op < DOCTOR_OPS && n > 1; op++) {
        for (int j = 0; j < n; j++) v[j] = gs[in[j]].busbw[op][k];
        const double med = median(v, n);
        for (int j = 0; j < n; j++) {
            const double ratio = med > 0 ? gs[in[j]].busbw[op][k] / med : 1;
            if (ratio < o->slow_ratio) slow[in[j]] = true;
            if (ratio < worst_ratio) worst_ratio = ratio, worst = in[j], worst_op = op, worst_median = med;
        }
    }
    for (int j = 0; j < n; j++) v[j] = gs[in[j]].busbw[DOCTOR_OP_ALL_REDUCE][k];
    const double med_ar = median(v, n);
    size_text(o->sizes[k], sz, sizeof sz);
    if (worst >= 0 && worst_ratio < o->slow_ratio) {
        int nslow = 0;
        for (int j = 0; j < n; j++) nslow += slow[in[j]];
        const group *w = &gs[worst];
        doctor_check *c = doctor_add(
            r, id, stage_titles[st], DOCTOR_FAIL, w->node_a,
            "%s (ranks %d to %d): %s busbw %.2f GB/s at %s, %.1fx below the median %.2f GB/s of the stage's %d groups "
            "(%d slow): check the network of %s (ibstat, ethtool -S, the switch ports; NCCL_IB_HCA, NCCL_SOCKET_IFNAME "
            "or MCCL's) before the job",
            w->name, w->first, w->last, doctor_op_name(worst_op), w->busbw[worst_op][k] / 1e9, sz,
            worst_ratio > 0 ? 1 / worst_ratio : INFINITY, worst_median / 1e9, n, nslow, w->name);
        c->first_rank = w->first, c->last_rank = w->last;
    } else {
        doctor_add(r, id, stage_titles[st], DOCTOR_PASS, -1,
                   "%d group%s of %d ranks: all_reduce busbw %.2f GB/s at %s%s", n, n == 1 ? "" : "s", gs[in[0]].n,
                   med_ar / 1e9, sz, n > 1 ? " (the groups' median), none far below it" : "");
    }
    free(in), free(v);
}

/* The slowest link: a node all of whose pairs are slow (the node, not its neighbours), else the slowest pair. */
static void links(const doctor_options *o, doctor_report *r, const group *gs, int ngroups, const bool *slow) {
    const int k = largest(o), nodes = r->nodes, op = DOCTOR_OP_ALL_REDUCE;
    int slowest = -1;
    for (int i = 0; i < ngroups; i++)
        if (stage_of(gs[i].round) == (nodes > 1 ? 1 : 0) &&
            (slowest < 0 || gs[i].busbw[op][k] < gs[slowest].busbw[op][k]))
            slowest = i;
    if (slowest < 0) {
        doctor_add(r, "links", "slowest link", DOCTOR_SKIP, -1, "one rank: no link to test");
        return;
    }
    const group *w = &gs[slowest];
    char sz[32];
    size_text(o->sizes[k], sz, sizeof sz);
    snprintf(r->slowest_link, sizeof r->slowest_link, "%s (ranks %d-%d): all_reduce busbw %.2f GB/s at %s", w->name,
             w->first, w->last, w->busbw[op][k] / 1e9, sz);
    int *pairs = calloc((size_t)nodes, sizeof *pairs), *slow_pairs = calloc((size_t)nodes, sizeof *slow_pairs);
    TR_CHECK(pairs && slow_pairs, "out of host memory");
    int culprit = -1;
    for (int i = 0; i < ngroups; i++) {
        if (stage_of(gs[i].round) != 1) continue;
        pairs[gs[i].node_a]++, pairs[gs[i].node_b]++;
        if (slow[i]) slow_pairs[gs[i].node_a]++, slow_pairs[gs[i].node_b]++;
    }
    for (int nd = 0; nd < nodes && culprit < 0; nd++)
        if (pairs[nd] >= 2 && slow_pairs[nd] == pairs[nd]) culprit = nd;
    free(pairs), free(slow_pairs);
    if (culprit >= 0) {
        r->slow_node = culprit;
        char also[128] = "";
        size_t used = 0;
        for (int i = 0; i < ngroups; i++)
            if (stage_of(gs[i].round) == 1 && slow[i] && (gs[i].node_a == culprit || gs[i].node_b == culprit) &&
                used < sizeof also)
                used += (size_t)snprintf(also + used, sizeof also - used, "%s%s %.2f GB/s", used ? ", " : "",
                                         gs[i].name, gs[i].busbw[op][k] / 1e9);
        doctor_add(r, "links", "slowest link", DOCTOR_FAIL, culprit,
                   "node %d's network: every pair with it is slow (%s at %s): check its NIC, cable and switch port "
                   "(ibstat, ethtool -S) and drain it from the hostfile until its link runs at the others' speed",
                   culprit, also, sz);
    } else if (slow[slowest]) {
        doctor_check *c = doctor_add(r, "links", "slowest link", DOCTOR_FAIL, w->node_a,
                                     "%s is slow and no single node explains it: check the switch path between them",
                                     r->slowest_link);
        c->first_rank = w->first, c->last_rank = w->last;
    } else {
        doctor_add(r, "links", "slowest link", DOCTOR_PASS, -1, "%s; none far below the others", r->slowest_link);
    }
}

void doctor_bandwidth(const doctor_options *o, doctor_report *r, const doctor_wire *all) {
    int n = 0;
    group *gs = find_groups(o, r, all, &n);
    bool *slow = calloc((size_t)n + 1, sizeof *slow);
    TR_CHECK(slow != NULL, "out of host memory");
    for (int st = 0; st < STAGES; st++) stage(o, r, gs, n, st, slow);
    links(o, r, gs, n, slow);
    free(slow);
    free(gs);
}
