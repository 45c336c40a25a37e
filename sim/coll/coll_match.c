/* Meeting points: ranks arrive at collective instances and send/receive pairs; the last arrival
 * moves the data and completes everyone at one simulated time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "twin_stream.h"
#include "twinrun/err.h"

static void describe(char *buf, size_t n, const coll_desc *d) {
    int k = snprintf(buf, n, "%s(count=%zu, %s", flight_op_name(d->op), d->count, tr_dtype_name(d->dt));
    if (k < 0 || (size_t)k >= n) return;
    if (d->redop >= 0) k += snprintf(buf + k, n - (size_t)k, ", %s", flight_redop_name(d->redop));
    if (k >= 0 && (size_t)k < n && d->peer >= 0)
        k += snprintf(buf + k, n - (size_t)k, ", %s %d", d->op == FLIGHT_BROADCAST ? "root" : "peer", d->peer);
    if (k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ")");
}

static bool same_call(const coll_desc *a, const coll_desc *b) {
    return a->op == b->op && a->count == b->count && a->dt == b->dt && a->redop == b->redop && a->peer == b->peer;
}

static twin_coll_kind cost_kind(flight_op op) {
    switch (op) {
    case FLIGHT_ALL_REDUCE: return TWIN_COST_ALL_REDUCE;
    case FLIGHT_ALL_GATHER: return TWIN_COST_ALL_GATHER;
    case FLIGHT_REDUCE_SCATTER: return TWIN_COST_REDUCE_SCATTER;
    case FLIGHT_BROADCAST: return TWIN_COST_BROADCAST;
    case FLIGHT_SEND:
    case FLIGHT_RECV: return TWIN_COST_P2P;
    case FLIGHT_BARRIER:
    case FLIGHT_OP_COUNT: break;
    }
    return TWIN_COST_BARRIER;
}

/* The calling rank's call does not match what a peer called at the same place: say both sides
 * in the run's report, then end the calling rank (its peers then hang and the watchdog names it). */
_Noreturn static void mismatch(coll_pending *p, const char *where, int other_rank, const coll_desc *other) {
    char mine[128], theirs[128];
    describe(mine, sizeof mine, &p->desc);
    describe(theirs, sizeof theirs, other);
    const coll_group *g = p->comm->g;
    const int me = p->rank->id;
    twin_report("mismatch on comm '%s' uid %016llx %s: rank %d called %s but rank %d called %s", g->name,
                (unsigned long long)g->uid, where, me, mine, other_rank, theirs);
    /* the call never launched */
    p->rank->waiting--;
    p->comm->inflight--;
    if (p->heap_owned) free(p);
    tr_fatal("collective mismatch on communicator '%s' %s: rank %d called %s, rank %d called %s", g->name, where, me,
             mine, other_rank, theirs);
}

static void trace_finish(const coll_pending *p, double t, coll_status st) {
    const twin_trace_coll c = {
        .group = p->comm->g->name,
        .op = p->desc.op,
        .seq = p->seq,
        .count = p->desc.count,
        .dtype = (int)p->desc.dt,
        .redop = p->desc.redop,
        .peer = p->desc.peer,
        .arrival = p->arrival,
        .xfer_start = st == COLL_OK ? p->xfer_start : -1,
        .end = t,
        .status = (int)st,
    };
    twin_trace_coll_done(p->rank->trace, &c);
}

void coll_finish(coll_pending *p, double t, coll_status st) {
    TR_CHECK(!p->done, "a collective finished twice");
    p->done = true;
    p->inst = NULL;
    p->comm->inflight--;
    if (p->recorded) {
        flight_record *rec = flight_ring_get(&p->rank->flight, p->flight_id);
        if (rec) {
            rec->state = st == COLL_OK ? FLIGHT_COMPLETED : FLIGHT_ABORTED;
            rec->t_end = t;
        }
    }
    if (p->rank->trace) trace_finish(p, t, st);
    if (p->side) {
        /* the transfer ends on the stream's clock; the host waited for the members' hosts only, and
         * that is waiting, not communication (twin_stream.h) */
        twin_stream_advance(p->side, t);
        const double host = st == COLL_OK ? fmax(p->host_wake, p->rank->now) : t;
        if (host > p->rank->now) p->rank->wait_seconds += host - p->rank->now;
        twin_op_done(p->rank, host, st);
        return;
    }
    /* of the clock's advance to t, the part spent before the last peer arrived (a pipeline's bubble,
     * or a rank ahead of its group) is waiting; the rest, the transfer, is communication (dev_wait_split) */
    if (p->xfer_start > p->rank->now) p->rank->wait_seconds += fmin(p->xfer_start, t) - p->rank->now;
    twin_op_done(p->rank, t, st);
}

static void record(coll_pending *p) {
    twin_rank *r = p->rank;
    p->recorded = r->recording && p->comm->flight_comm >= 0;
    if (!p->recorded) return;
    flight_record rec = {
        .comm = p->comm->flight_comm,
        .seq = p->seq,
        .op = p->desc.op,
        .redop = p->desc.redop,
        .dtype = (int)p->desc.dt,
        .count = p->desc.count,
        .peer = p->desc.peer,
        .state = FLIGHT_STARTED,
        .t_sched = p->arrival,
        .t_start = p->arrival,
        .t_end = -1,
    };
    p->flight_id = flight_ring_add(&r->flight, &rec);
}

/* Every member's device work issued before it arrived has run (sched/pool.h): the data moves now. */
static void drain_members(coll_pending *const *members, int n) {
    const twin_sched *s = twin_sched_get();
    if (!s || !s->pool) return; /* one thread: the work ran at launch */
    twin_rank *few[16], **ranks = n <= 16 ? few : malloc(sizeof *ranks * (size_t)n);
    TR_CHECK(ranks != NULL, "out of host memory for a collective's members");
    for (int m = 0; m < n; m++) ranks[m] = members[m]->rank;
    twin_ranks_drain(ranks, n);
    if (ranks != few) free(ranks);
}

/* A slow link's factor for a transfer among these members: the largest of theirs when the transfer
 * crosses nodes (a ring runs at its slowest link), 1 inside a node (the fault slows the network only). */
static double link_factor(coll_pending *const *members, int n, const int *ranks, int nranks) {
    const int gpn = twin_gpus_per_node();
    if (ranks[0] / gpn == ranks[nranks - 1] / gpn) return 1.0;
    double f = 1.0;
    for (int m = 0; m < n; m++)
        if (members[m] && members[m]->rank->link_slowdown > f) f = members[m]->rank->link_slowdown;
    return f;
}

static void complete_instance(coll_group *g, coll_instance *inst) {
    double start = 0, host_wake = 0;
    for (int m = 0; m < g->size; m++) {
        start = fmax(start, inst->members[m]->arrival);
        host_wake = fmax(host_wake, inst->members[m]->host_arrival);
    }
    const size_t bytes = inst->desc.count * tr_dtype_size(inst->desc.dt);
    double cost = twin_coll_seconds(twin_spec(), twin_gpus_per_node(), cost_kind(inst->desc.op), g->ranks, g->size,
                                    (double)bytes) *
                  link_factor(inst->members, g->size, g->ranks, g->size);
    const double end = start + cost * twin_jitter(g->uid ^ twin_mix64(inst->seq));
    if (inst->desc.count && inst->desc.op != FLIGHT_BARRIER) drain_members(inst->members, g->size);
    coll_exec(g, inst);
    if (twin_logging())
        twin_log("%.9f done %s %016llx seq %llu %s count %zu hash %016llx", end, g->name, (unsigned long long)g->uid,
                 (unsigned long long)inst->seq, flight_op_name(inst->desc.op), inst->desc.count,
                 (unsigned long long)coll_result_hash(g, inst));
    /* unlink before waking anyone */
    coll_instance **slot = &g->open;
    while (*slot != inst) slot = &(*slot)->next;
    *slot = inst->next;
    for (int m = 0; m < g->size; m++) {
        inst->members[m]->xfer_start = start;
        inst->members[m]->host_wake = host_wake;
        coll_finish(inst->members[m], end, COLL_OK);
    }
    free(inst->members);
    free(inst);
}

static void post_collective(coll_pending *p) {
    coll_group *g = p->comm->g;
    coll_instance **slot = &g->open;
    while (*slot && (*slot)->seq < p->seq) slot = &(*slot)->next;
    coll_instance *inst = *slot;
    if (inst && inst->seq == p->seq) {
        if (!same_call(&inst->desc, &p->desc)) {
            char where[48];
            snprintf(where, sizeof where, "seq %llu", (unsigned long long)p->seq);
            p->comm->seq--; /* the call never happened */
            mismatch(p, where, inst->first_rank, &inst->desc);
        }
    } else {
        inst = calloc(1, sizeof *inst);
        TR_CHECK(inst != NULL, "out of host memory for a collective instance");
        inst->members = calloc((size_t)g->size, sizeof *inst->members);
        TR_CHECK(inst->members != NULL, "out of host memory for a collective instance");
        inst->seq = p->seq;
        inst->desc = p->desc;
        inst->first_rank = p->rank->id;
        inst->next = *slot;
        *slot = inst;
    }
    TR_CHECK(inst->members[p->comm->group_rank] == NULL, "a rank arrived twice at one collective");
    inst->members[p->comm->group_rank] = p;
    p->inst = inst;
    record(p);
    if (++inst->arrived == g->size) complete_instance(g, inst);
}

static void post_p2p(coll_pending *p) {
    coll_comm *c = p->comm;
    coll_group *g = c->g;
    const flight_op want = p->desc.op == FLIGHT_SEND ? FLIGHT_RECV : FLIGHT_SEND;
    coll_pending **slot = &g->p2p_first, *prev = NULL;
    for (; *slot; prev = *slot, slot = &(*slot)->next_p2p) {
        coll_pending *q = *slot;
        if (q->desc.op == want && q->comm->group_rank == p->desc.peer && q->desc.peer == c->group_rank) break;
    }
    coll_pending *q = *slot;
    if (q && (q->desc.count != p->desc.count || q->desc.dt != p->desc.dt)) {
        char where[64];
        snprintf(where, sizeof where, "p2p seq %llu", (unsigned long long)p->seq);
        uint64_t *counter = p->desc.op == FLIGHT_SEND ? c->p2p_send : c->p2p_recv;
        counter[p->desc.peer]--;
        mismatch(p, where, q->rank->id, &q->desc);
    }
    record(p);
    if (!q) {
        p->next_p2p = NULL;
        if (g->p2p_last) g->p2p_last->next_p2p = p;
        else g->p2p_first = p;
        g->p2p_last = p;
        return;
    }
    *slot = q->next_p2p;
    if (g->p2p_last == q) g->p2p_last = prev;
    const coll_pending *send = p->desc.op == FLIGHT_SEND ? p : q, *recv = p->desc.op == FLIGHT_SEND ? q : p;
    const int pair[2] = {
        g->ranks[send->comm->group_rank] < g->ranks[recv->comm->group_rank] ? g->ranks[send->comm->group_rank]
                                                                            : g->ranks[recv->comm->group_rank],
        g->ranks[send->comm->group_rank] < g->ranks[recv->comm->group_rank] ? g->ranks[recv->comm->group_rank]
                                                                            : g->ranks[send->comm->group_rank]};
    const double bytes = (double)(p->desc.count * tr_dtype_size(p->desc.dt));
    const double start = fmax(p->arrival, q->arrival);
    const double end = start + twin_coll_seconds(twin_spec(), twin_gpus_per_node(), TWIN_COST_P2P, pair, 2, bytes) *
                                   link_factor((coll_pending *const[]){p, q}, 2, pair, 2) *
                                   twin_jitter(g->uid ^ twin_mix64(send->seq * 2 + 1) ^ (uint64_t)pair[0] << 32);
    if (p->desc.count) drain_members((coll_pending *const[]){p, q}, 2);
    coll_exec_p2p(send, recv);
    twin_log("%.9f done %s %016llx p2p %d->%d seq %llu count %zu", end, g->name, (unsigned long long)g->uid,
             g->ranks[send->comm->group_rank], g->ranks[recv->comm->group_rank], (unsigned long long)send->seq,
             send->desc.count);
    p->xfer_start = q->xfer_start = start;
    p->host_wake = q->host_wake = fmax(p->host_arrival, q->host_arrival);
    coll_finish(q, end, COLL_OK);
    coll_finish(p, end, COLL_OK);
}

void coll_post(coll_pending *p) {
    p->rank->waiting++;
    p->comm->inflight++;
    twin_log("%.9f r%d post %s seq %llu %s", p->arrival, p->rank->id, p->comm->g->name, (unsigned long long)p->seq,
             flight_op_name(p->desc.op));
    const twin_remote *rm = twin_remote_get();
    if (p->comm->g->remote && rm->post(rm->job, p)) return;
    if (p->desc.op == FLIGHT_SEND || p->desc.op == FLIGHT_RECV) post_p2p(p);
    else post_collective(p);
}

void coll_withdraw(coll_pending *p) {
    TR_CHECK(!p->done, "withdrawing a finished operation");
    coll_group *g = p->comm->g;
    if (p->remote) {
        const twin_remote *rm = twin_remote_get();
        rm->withdraw(rm->job, p);
    } else if (p->inst) {
        coll_instance *inst = p->inst;
        inst->members[p->comm->group_rank] = NULL;
        if (--inst->arrived == 0) {
            coll_instance **slot = &g->open;
            while (*slot != inst) slot = &(*slot)->next;
            *slot = inst->next;
            free(inst->members);
            free(inst);
        }
    } else {
        coll_pending **slot = &g->p2p_first, *prev = NULL;
        while (*slot && *slot != p) prev = *slot, slot = &(*slot)->next_p2p;
        TR_CHECK(*slot == p, "a launched send/recv is in no queue");
        *slot = p->next_p2p;
        if (g->p2p_last == p) g->p2p_last = prev;
    }
    if (p->recorded) {
        flight_record *rec = flight_ring_get(&p->rank->flight, p->flight_id);
        if (rec) rec->state = FLIGHT_ABORTED;
    }
    p->done = true;
    p->inst = NULL;
    p->comm->inflight--;
    p->rank->waiting--;
}

void coll_group_abort(coll_group *g, twin_rank *timed_out, double t) {
    g->aborted = true;
    while (g->open) {
        coll_instance *inst = g->open;
        g->open = inst->next;
        for (int m = 0; m < g->size; m++)
            if (inst->members[m]) {
                coll_pending *p = inst->members[m];
                coll_finish(p, fmax(t, p->rank->now), p->rank == timed_out ? COLL_TIMEOUT : COLL_ABORTED);
            }
        free(inst->members);
        free(inst);
    }
    while (g->p2p_first) {
        coll_pending *p = g->p2p_first;
        g->p2p_first = p->next_p2p;
        coll_finish(p, fmax(t, p->rank->now), p->rank == timed_out ? COLL_TIMEOUT : COLL_ABORTED);
    }
    g->p2p_last = NULL;
    if (g->remote) {
        const twin_remote *rm = twin_remote_get();
        rm->group_abort(rm->job, g, timed_out, t);
    }
}

void coll_describe(char *buf, size_t n, const coll_desc *d) { describe(buf, n, d); }
twin_coll_kind coll_cost_kind(flight_op op) { return cost_kind(op); }
void coll_record(coll_pending *p) { record(p); }
_Noreturn void coll_mismatch(coll_pending *p, const char *where, int other_rank, const coll_desc *other) {
    mismatch(p, where, other_rank, other);
}
