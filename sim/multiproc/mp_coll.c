/* Collectives and sends whose members live in several processes (the multi-process twin,
 * multiproc.h): the same meeting as sim/coll/coll_match.c, with the members of other processes
 * arriving as messages.
 *
 * Each process that hosts members of a collective sends the others its members' arrival times and
 * data once all of them have arrived; every process then holds every member's contribution and
 * reduces in group-rank order exactly as sim/coll/coll_reduce.c does in one process, and completes its
 * members at max(arrivals) + cost, so data and clocks are bit-identical to one process. Only the
 * data a process needs travels to it: a reduce-scatter sends each process its members' blocks, a
 * broadcast only the root's buffer, a receive only its arrival time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mp_internal.h"
#include "twinrun/err.h"

#define MP_INST_BUCKETS 4096

typedef struct mp_inst_key {
    uint64_t uid, seq;
    int32_t a, b; /* send/recv: sender's and receiver's group ranks; collectives: -1, -1 */
} mp_inst_key;

struct mp_inst {
    mp_inst_key key;
    int n; /* members: the group's size, or 2 (sender, receiver) */
    bool have_desc;
    coll_desc desc; /* the first call seen, which later ones must match */
    int desc_rank;
    coll_group *g; /* set by the first local member */
    int nlocal, local_arrived, nhave;
    double *arrival;           /* [n] */
    const unsigned char **src; /* [n] a local member's send buffer or a remote member's data */
    uint64_t *src_len;         /* [n] remote data bytes */
    int *rank;                 /* [n] global ranks, -1 until known */
    coll_pending **pend;       /* [n] this process's members */
    unsigned char *have;       /* [n] */
    void **bufs;               /* received payloads the data points into */
    int nbufs;
    double wall_start; /* when the first local member arrived (watchdog) */
    struct mp_inst *hnext, *pprev, *pnext;
};

/* The job's meetings in progress (mp_job.meetings). */
struct mp_meetings {
    mp_inst *buckets[MP_INST_BUCKETS];
    mp_inst *pending; /* with local members waiting, oldest first */
    mp_inst *pending_last;
};

static uint64_t key_hash(const mp_inst_key *k) {
    return twin_mix64(k->uid ^ twin_mix64(k->seq ^ ((uint64_t)(uint32_t)k->a << 32 | (uint32_t)k->b)));
}

static bool key_eq(const mp_inst_key *x, const mp_inst_key *y) {
    return x->uid == y->uid && x->seq == y->seq && x->a == y->a && x->b == y->b;
}

static bool is_p2p(flight_op op) { return op == FLIGHT_SEND || op == FLIGHT_RECV; }

static mp_inst *lookup(mp_job *J, const mp_inst_key *k, int n, bool create) {
    if (!J->meetings) {
        if (!create) return NULL;
        J->meetings = calloc(1, sizeof *J->meetings);
        TR_CHECK(J->meetings != NULL, "out of host memory for cross-process collectives");
    }
    mp_inst **slot = &J->meetings->buckets[key_hash(k) % MP_INST_BUCKETS];
    for (mp_inst *x = *slot; x; x = x->hnext)
        if (key_eq(&x->key, k)) return x;
    if (!create) return NULL;
    mp_inst *x = calloc(1, sizeof *x);
    TR_CHECK(x != NULL, "out of host memory for a cross-process collective");
    x->key = *k;
    x->n = n;
    x->arrival = calloc((size_t)n, sizeof *x->arrival);
    x->src = calloc((size_t)n, sizeof *x->src);
    x->src_len = calloc((size_t)n, sizeof *x->src_len);
    x->rank = malloc(sizeof *x->rank * (size_t)n);
    x->pend = calloc((size_t)n, sizeof *x->pend);
    x->have = calloc((size_t)n, 1);
    TR_CHECK(x->arrival && x->src && x->src_len && x->rank && x->pend && x->have,
             "out of host memory for a cross-process collective");
    for (int i = 0; i < n; i++) x->rank[i] = -1;
    x->hnext = *slot;
    *slot = x;
    return x;
}

static void pending_add(mp_job *J, mp_inst *x) {
    x->pprev = J->meetings->pending_last;
    if (x->pprev) x->pprev->pnext = x;
    else J->meetings->pending = x;
    J->meetings->pending_last = x;
}

static void unlink_free(mp_job *J, mp_inst *x) {
    mp_inst **slot = &J->meetings->buckets[key_hash(&x->key) % MP_INST_BUCKETS];
    while (*slot != x) slot = &(*slot)->hnext;
    *slot = x->hnext;
    if (x->local_arrived) {
        if (x->pprev) x->pprev->pnext = x->pnext;
        else J->meetings->pending = x->pnext;
        if (x->pnext) x->pnext->pprev = x->pprev;
        else J->meetings->pending_last = x->pprev;
    }
    for (int i = 0; i < x->nbufs; i++) free(x->bufs[i]);
    free(x->bufs);
    free(x->arrival);
    free(x->src);
    free(x->src_len);
    free(x->rank);
    free(x->pend);
    free(x->have);
    free(x);
}

void mp_coll_group_init(void *job, coll_group *g) {
    const mp_job *J = job;
    const int self = J->cfg.proc, nprocs = J->cfg.nprocs;
    unsigned char *hosts = calloc((size_t)nprocs, 1);
    TR_CHECK(hosts != NULL, "out of host memory for a communicator group");
    g->nlocal = 0;
    for (int i = 0; i < g->size; i++) {
        const int p = mp_proc_of(J, g->ranks[i]);
        hosts[p] = 1;
        g->nlocal += p == self;
    }
    int np = 0;
    for (int p = 0; p < nprocs; p++) np += hosts[p] && p != self;
    int *procs = malloc(sizeof *procs * (size_t)(np ? np : 1));
    TR_CHECK(procs != NULL, "out of host memory for a communicator group");
    np = 0;
    for (int p = 0; p < nprocs; p++)
        if (hosts[p] && p != self) procs[np++] = p;
    free(hosts);
    g->remote = np > 0;
    if (!g->remote) {
        free(procs);
        return;
    }
    g->procs = procs;
    g->nprocs = np;
}

/* Which position among the members that `proc` hosts group rank j has (reduce-scatter blocks). */
static int block_pos(const mp_job *J, const coll_group *g, int proc, int j) {
    int k = 0;
    for (int i = 0; i < j; i++) k += mp_proc_of(J, g->ranks[i]) == proc;
    return k;
}

static uint64_t member_bytes(const mp_job *J, const coll_desc *d, const coll_group *g, int index, int to_proc,
                             bool sender) {
    const uint64_t block = (uint64_t)d->count * tr_dtype_size(d->dt);
    switch (d->op) {
    case FLIGHT_ALL_REDUCE:
    case FLIGHT_ALL_GATHER: return block;
    case FLIGHT_REDUCE_SCATTER: return block * (uint64_t)block_pos(J, g, to_proc, g->size);
    case FLIGHT_BROADCAST: return index == d->peer ? block : 0;
    case FLIGHT_SEND:
    case FLIGHT_RECV: return sender ? block : 0;
    case FLIGHT_BARRIER:
    case FLIGHT_OP_COUNT: break;
    }
    return 0;
}

/* This process's members' device work issued before they arrived has run (sched/pool.h): their
 * send buffers are final and their receive buffers free to write. */
static void drain_local(const mp_inst *x) {
    twin_rank *few[16] = {0}, **ranks = x->n <= 16 ? few : malloc(sizeof *ranks * (size_t)x->n);
    TR_CHECK(ranks != NULL, "out of host memory for a collective's members");
    int k = 0;
    for (int i = 0; i < x->n; i++)
        if (x->pend[i]) ranks[k++] = x->pend[i]->rank;
    twin_ranks_drain(ranks, k);
    if (ranks != few) free(ranks);
}

/* This process's members have all arrived: hand their arrivals and data to the other processes. */
static void send_local(mp_job *J, mp_inst *x) {
    if (x->desc.count) drain_local(x);
    const coll_group *g = x->g;
    const coll_desc *d = &x->desc;
    const bool p2p = x->key.a >= 0;
    const size_t block = d->count * tr_dtype_size(d->dt);
    const int self = J->cfg.proc;
    int nm = 0;
    for (int i = 0; i < x->n; i++) nm += x->pend[i] != NULL || (x->have[i] && mp_proc_of(J, x->rank[i]) == self);
    mp_contrib_member *m = calloc((size_t)nm, sizeof *m);
    TR_CHECK(m != NULL, "out of host memory for a contribution");
    const int ndest = p2p ? 1 : g->nprocs;
    for (int k = 0; k < ndest; k++) {
        const int to = p2p ? mp_proc_of(J, x->rank[x->pend[0] ? 1 : 0]) : g->procs[k];
        uint64_t total = 0;
        int j = 0;
        for (int i = 0; i < x->n; i++) {
            if (!x->have[i] || mp_proc_of(J, x->rank[i]) != self) continue;
            m[j] = (mp_contrib_member){.index = (uint32_t)i,
                                       .rank = (uint32_t)x->rank[i],
                                       .arrival = x->arrival[i],
                                       .data_len = member_bytes(J, d, g, i, to, p2p && i == 0)};
            total += m[j++].data_len;
        }
        const mp_contrib c = {.uid = x->key.uid,
                              .seq = x->key.seq,
                              .a = x->key.a,
                              .b = x->key.b,
                              .n = x->n,
                              .op = (int)d->op,
                              .dtype = (int)d->dt,
                              .redop = d->redop,
                              .peer = d->peer,
                              .nmembers = (uint32_t)j,
                              .count = d->count};
        const size_t len = mp_contrib_size((uint32_t)j, total);
        unsigned char *buf = malloc(len);
        TR_CHECK(buf != NULL, "out of host memory for a contribution");
        unsigned char *data = mp_contrib_encode(buf, &c, m);
        for (int q = 0; q < j; q++) {
            const unsigned char *src = x->src[m[q].index];
            if (d->op == FLIGHT_REDUCE_SCATTER) {
                for (int b = 0; b < g->size; b++)
                    if (mp_proc_of(J, g->ranks[b]) == to) {
                        memcpy(data, src + (size_t)b * block, block);
                        data += block;
                    }
            } else if (m[q].data_len) {
                memcpy(data, src, (size_t)m[q].data_len);
                data += m[q].data_len;
            }
        }
        mp_job_send(J, to, MP_CONTRIB, 0, buf, len);
    }
    free(m);
}

static void *scratch(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    TR_CHECK(p != NULL, "out of host memory for collective scratch");
    return p;
}

/* A remote member's data must be what its call moves; a peer built from other sources would
 * otherwise make this process read past a buffer. */
static bool sizes_ok(mp_job *J, const mp_inst *x) {
    const int self = J->cfg.proc;
    for (int i = 0; i < x->n; i++) {
        if (x->pend[i] || mp_proc_of(J, x->rank[i]) == self) continue;
        const uint64_t want = member_bytes(J, &x->desc, x->g, i, self, x->key.a >= 0 && i == 0);
        if (x->src_len[i] != want) {
            mp_job_abortf(J,
                          "rank %d's contribution to %s seq %llu on '%s' has %llu bytes, expected %llu: the processes "
                          "run different builds or programs",
                          x->rank[i], flight_op_name(x->desc.op), (unsigned long long)x->key.seq, x->g->name,
                          (unsigned long long)x->src_len[i], (unsigned long long)want);
            return false;
        }
    }
    return true;
}

static void exec(const mp_job *J, mp_inst *x) {
    const coll_group *g = x->g;
    const coll_desc *d = &x->desc;
    const int n = x->n, self = J->cfg.proc;
    const size_t count = d->count, esz = tr_dtype_size(d->dt);
    if (count) drain_local(x); /* drained for send_local already, unless a rank issued work since: cheap */
    if (x->key.a >= 0) {       /* send/recv: only a local receiver takes data */
        if (x->pend[1] && count) memmove(x->pend[1]->recv, x->src[0], count * esz);
        return;
    }
    if (count == 0 || d->op == FLIGHT_BARRIER) return;
    const void **srcs = malloc(sizeof *srcs * (size_t)n);
    TR_CHECK(srcs != NULL, "out of host memory for collective scratch");
    switch (d->op) {
    case FLIGHT_ALL_REDUCE: {
        for (int r = 0; r < n; r++) srcs[r] = x->src[r];
        void *acc = scratch(count * 4);
        coll_reduce_into(acc, srcs, n, 0, count, d->dt, d->redop);
        for (int r = 0; r < n; r++)
            if (x->pend[r]) coll_store_acc(x->pend[r]->recv, acc, count, d->dt);
        free(acc);
        break;
    }
    case FLIGHT_REDUCE_SCATTER: {
        char *acc = scratch((size_t)x->nlocal * count * 4);
        int k = 0;
        for (int b = 0; b < n; b++) {
            if (mp_proc_of(J, g->ranks[b]) != self) continue;
            const size_t pos = (size_t)block_pos(J, g, self, b);
            for (int r = 0; r < n; r++)
                srcs[r] = mp_proc_of(J, g->ranks[r]) == self ? x->src[r] + (size_t)b * count * esz
                                                             : x->src[r] + pos * count * esz;
            coll_reduce_into(acc + (size_t)k++ * count * 4, srcs, n, 0, count, d->dt, d->redop);
        }
        k = 0;
        for (int b = 0; b < n; b++) {
            if (mp_proc_of(J, g->ranks[b]) != self) continue;
            if (x->pend[b]) coll_store_acc(x->pend[b]->recv, acc + (size_t)k * count * 4, count, d->dt);
            k++;
        }
        free(acc);
        break;
    }
    case FLIGHT_ALL_GATHER: {
        char *all = scratch((size_t)n * count * esz);
        for (int r = 0; r < n; r++) memcpy(all + (size_t)r * count * esz, x->src[r], count * esz);
        for (int r = 0; r < n; r++)
            if (x->pend[r]) memmove(x->pend[r]->recv, all, (size_t)n * count * esz);
        free(all);
        break;
    }
    case FLIGHT_BROADCAST:
        for (int r = 0; r < n; r++)
            if (x->pend[r] && r != d->peer) memmove(x->pend[r]->recv, x->src[d->peer], count * esz);
        break;
    case FLIGHT_SEND:
    case FLIGHT_RECV:
    case FLIGHT_BARRIER:
    case FLIGHT_OP_COUNT: break;
    }
    free(srcs);
}

/* Every member is here: move the data and complete this process's members, as complete_instance
 * and post_p2p do in one process (same start, cost and jitter keys). */
static void complete(mp_job *J, mp_inst *x) {
    coll_group *g = x->g;
    const coll_desc *d = &x->desc;
    if (!sizes_ok(J, x)) return;
    double start = 0;
    for (int i = 0; i < x->n; i++) start = fmax(start, x->arrival[i]);
    const double bytes = (double)(d->count * tr_dtype_size(d->dt));
    double end;
    if (x->key.a >= 0) {
        const int s = g->ranks[x->key.a], r = g->ranks[x->key.b];
        const int pair[2] = {s < r ? s : r, s < r ? r : s};
        end = start + twin_coll_seconds(twin_spec(), twin_gpus_per_node(), TWIN_COST_P2P, pair, 2, bytes) *
                          twin_jitter(g->uid ^ twin_mix64(x->key.seq * 2 + 1) ^ (uint64_t)pair[0] << 32);
    } else {
        end = start +
              twin_coll_seconds(twin_spec(), twin_gpus_per_node(), coll_cost_kind(d->op), g->ranks, g->size, bytes) *
                  twin_jitter(g->uid ^ twin_mix64(x->key.seq));
    }
    exec(J, x);
    twin_log("%.9f done %s %016llx seq %llu %s count %zu (across processes)", end, g->name, (unsigned long long)g->uid,
             (unsigned long long)x->key.seq, flight_op_name(d->op), d->count);
    coll_pending *local[2], **pend = x->pend;
    const int n = x->n;
    if (n == 2) { /* unlinked before anyone is woken, as complete_instance does */
        local[0] = pend[0];
        local[1] = pend[1];
        pend = local;
    } else {
        pend = malloc(sizeof *pend * (size_t)n);
        TR_CHECK(pend != NULL, "out of host memory completing a collective");
        memcpy(pend, x->pend, sizeof *pend * (size_t)n);
    }
    unlink_free(J, x);
    for (int i = 0; i < n; i++)
        if (pend[i]) {
            pend[i]->remote = NULL;
            pend[i]->xfer_start = start;
            coll_finish(pend[i], end, COLL_OK);
        }
    if (pend != local) free(pend);
}

static bool compatible(const coll_desc *a, const coll_desc *b) {
    if (is_p2p(a->op)) return is_p2p(b->op) && a->count == b->count && a->dt == b->dt;
    return a->op == b->op && a->count == b->count && a->dt == b->dt && a->redop == b->redop && a->peer == b->peer;
}

bool mp_coll_post(void *job, coll_pending *p) {
    mp_job *J = job;
    coll_comm *c = p->comm;
    coll_group *g = c->g;
    const bool p2p = is_p2p(p->desc.op), sender = p->desc.op == FLIGHT_SEND;
    if (p2p && mp_proc_of(J, g->ranks[p->desc.peer]) == J->cfg.proc) return false; /* both ends here */
    mp_inst_key k = {.uid = g->uid, .seq = p->seq, .a = -1, .b = -1};
    if (p2p) {
        k.a = sender ? c->group_rank : p->desc.peer;
        k.b = sender ? p->desc.peer : c->group_rank;
    }
    const int n = p2p ? 2 : g->size, index = p2p ? (sender ? 0 : 1) : c->group_rank;
    mp_inst *x = lookup(J, &k, n, true);
    TR_CHECK(x->n == n, "a cross-process collective changed its size");
    if (x->have_desc && !compatible(&x->desc, &p->desc)) {
        char where[64];
        snprintf(where, sizeof where, "%sseq %llu", p2p ? "p2p " : "", (unsigned long long)p->seq);
        if (p2p) (sender ? c->p2p_send : c->p2p_recv)[p->desc.peer]--;
        else c->seq--; /* the call never happened */
        coll_mismatch(p, where, x->desc_rank, &x->desc);
    }
    if (!x->have_desc) {
        x->have_desc = true;
        x->desc = p->desc;
        x->desc_rank = p->rank->id;
    }
    TR_CHECK(!x->have[index], "a rank arrived twice at one cross-process collective");
    if (!x->g) {
        x->g = g;
        x->nlocal = p2p ? 1 : g->nlocal;
        if (p2p) {
            x->rank[0] = g->ranks[k.a];
            x->rank[1] = g->ranks[k.b];
        } else {
            for (int i = 0; i < n; i++) x->rank[i] = g->ranks[i];
        }
    }
    x->pend[index] = p;
    x->src[index] = p->send;
    x->arrival[index] = p->arrival;
    x->have[index] = 1;
    x->nhave++;
    p->remote = x;
    coll_record(p);
    if (x->local_arrived++ == 0) {
        x->wall_start = mp_job_wall_now();
        pending_add(J, x);
    }
    if (x->local_arrived == x->nlocal) {
        send_local(J, x);
        if (x->nhave == x->n) complete(J, x);
    }
    return true;
}

void mp_coll_deliver(mp_job *J, int from, unsigned char *payload, size_t len) {
    mp_contrib c;
    mp_contrib_member *m;
    char err[256];
    if (mp_contrib_decode(payload, len, &c, &m, err, sizeof err)) {
        free(payload);
        mp_job_abortf(J, "process %d sent a malformed contribution: %s", from, err);
        return;
    }
    const mp_inst_key k = {.uid = c.uid, .seq = c.seq, .a = c.a, .b = c.b};
    mp_inst *x = lookup(J, &k, c.n, true);
    const coll_desc d = {
        .op = (flight_op)c.op, .count = (size_t)c.count, .dt = (tr_dtype)c.dtype, .redop = c.redop, .peer = c.peer};
    const char *problem = NULL;
    if (x->n != c.n) problem = "a meeting of another size";
    for (uint32_t i = 0; !problem && i < c.nmembers; i++) {
        const int idx = (int)m[i].index;
        if (x->have[idx]) problem = "a member twice";
        else if (mp_proc_of(J, (int)m[i].rank) != from) problem = "a member it does not host";
        else if (x->rank[idx] >= 0 && x->rank[idx] != (int)m[i].rank) problem = "a member of another group";
    }
    if (problem) {
        free(m);
        free(payload);
        mp_job_abortf(J,
                      "process %d sent a contribution with %s (uid %016llx seq %llu): the processes run different "
                      "builds or jobs",
                      from, problem, (unsigned long long)c.uid, (unsigned long long)c.seq);
        return;
    }
    if (x->have_desc && !compatible(&x->desc, &d)) {
        char mine[128], theirs[128];
        coll_describe(theirs, sizeof theirs, &d);
        coll_describe(mine, sizeof mine, &x->desc);
        const char *name = x->g ? x->g->name : "?";
        mp_job_abortf(J, "mismatch on comm '%s' uid %016llx %sseq %llu: rank %u called %s but rank %d called %s", name,
                      (unsigned long long)c.uid, k.a >= 0 ? "p2p " : "", (unsigned long long)c.seq, m[0].rank, theirs,
                      x->desc_rank, mine);
        free(m);
        free(payload);
        return;
    }
    if (!x->have_desc) {
        x->have_desc = true;
        x->desc = d;
        x->desc_rank = (int)m[0].rank;
    }
    for (uint32_t i = 0; i < c.nmembers; i++) {
        const int idx = (int)m[i].index;
        x->have[idx] = 1;
        x->rank[idx] = (int)m[i].rank;
        x->arrival[idx] = m[i].arrival;
        x->src[idx] = m[i].data;
        x->src_len[idx] = m[i].data_len;
        x->nhave++;
    }
    free(m);
    void **bufs = realloc(x->bufs, sizeof *bufs * (size_t)(x->nbufs + 1));
    TR_CHECK(bufs != NULL, "out of host memory for a contribution");
    x->bufs = bufs;
    x->bufs[x->nbufs++] = payload;
    if (x->g && x->local_arrived == x->nlocal && x->nhave == x->n) complete(J, x);
}

void mp_coll_withdraw(void *job, coll_pending *p) {
    (void)job;
    mp_inst *x = p->remote;
    for (int i = 0; i < x->n; i++)
        if (x->pend[i] == p) x->pend[i] = NULL;
    p->remote = NULL;
}

void mp_coll_group_abort(void *job, coll_group *g, twin_rank *timed_out, double t) {
    mp_job *J = job;
    if (!J->meetings) return;
    for (int b = 0; b < MP_INST_BUCKETS; b++)
        for (mp_inst *x = J->meetings->buckets[b], *next; x; x = next) {
            next = x->hnext;
            if (x->g != g) continue;
            coll_pending *pend[2], **list = x->n == 2 ? pend : malloc(sizeof *list * (size_t)x->n);
            TR_CHECK(list != NULL, "out of host memory aborting a collective");
            memcpy(list, x->pend, sizeof *list * (size_t)x->n);
            const int n = x->n;
            unlink_free(J, x);
            for (int i = 0; i < n; i++)
                if (list[i]) {
                    list[i]->remote = NULL;
                    coll_finish(list[i], fmax(t, list[i]->rank->now),
                                list[i]->rank == timed_out ? COLL_TIMEOUT : COLL_ABORTED);
                }
            if (list != pend) free(list);
            next = J->meetings->buckets[b]; /* finishing may have changed the chain */
        }
}

bool mp_coll_waiting(const mp_job *J) { return J->meetings && J->meetings->pending; }

bool mp_coll_oldest(const mp_job *J, const unsigned char *gone, mp_coll_wait *w) {
    if (!J->meetings) return false;
    for (mp_inst *x = J->meetings->pending; x; x = x->pnext) {
        int first_missing = -1, nmissing = 0;
        for (int i = 0; i < x->n; i++) {
            if (x->have[i] || x->rank[i] < 0) continue;
            if (gone && !gone[mp_proc_of(J, x->rank[i])]) continue;
            if (first_missing < 0) first_missing = i;
            nmissing++;
        }
        if (first_missing < 0) continue;
        const twin_rank *waiter = NULL;
        for (int i = 0; i < x->n && !waiter; i++)
            if (x->pend[i]) waiter = x->pend[i]->rank;
        w->wall_start = x->wall_start;
        w->missing_proc = mp_proc_of(J, x->rank[first_missing]);
        w->watchdog_s = waiter ? waiter->watchdog_s : 0;
        snprintf(w->what, sizeof w->what,
                 "rank %d waits in %s seq %llu on '%s' for %d rank%s of process %d (rank %d "
                 "first)",
                 waiter ? waiter->id : -1, flight_op_name(x->desc.op), (unsigned long long)x->key.seq,
                 x->g ? x->g->name : "?", nmissing, nmissing == 1 ? "" : "s", w->missing_proc, x->rank[first_missing]);
        return true;
    }
    return false;
}

void mp_coll_free(mp_job *J) {
    if (!J->meetings) return;
    for (int b = 0; b < MP_INST_BUCKETS; b++)
        while (J->meetings->buckets[b]) {
            mp_inst *x = J->meetings->buckets[b];
            for (int i = 0; i < x->n; i++)
                if (x->pend[i]) x->pend[i]->remote = NULL;
            unlink_free(J, x);
        }
    free(J->meetings);
    J->meetings = NULL;
}
