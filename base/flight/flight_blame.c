/* Blame: from every rank's flight records, which collective each communicator is stuck in, who
 * never joined it, and which rank stopped first.
 *
 * For a communicator, the stuck collective is the lowest sequence number that some member
 * launched and never saw complete. A member joined it if it has a record at that sequence or
 * later and is not dead (failed or killed); the others never joined. Point-to-point operations
 * count per (sender, receiver) pair: a stuck send to B is unmatched if B has no receive from the
 * sender at that pair sequence. "Stopped first" is the non-joiner whose last recorded progress
 * is earliest (lowest rank on ties): the others usually stopped because they waited on it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"

typedef struct comm_ref {
    uint64_t uid;
    const flight_comm *c;
} comm_ref;

typedef struct comm_state {
    const flight_comm *c;
    uint64_t *top; /* [size]: 1 + highest collective seq recorded by that member, 0 = none */
    bool stuck;
    flight_record first; /* the stuck record (lowest incomplete seq) */
    double since;
} comm_state;

static int cmp_ref(const void *a, const void *b) {
    const comm_ref *x = a, *y = b;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

static int member_pos(const flight_comm *c, int rank) {
    int lo = 0, hi = c->size - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c->ranks[mid] == rank) return mid;
        if (c->ranks[mid] < rank) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static bool dead(const flight_dump *d) {
    return d && (strcmp(d->status, "failed") == 0 || strcmp(d->status, "killed") == 0);
}

static double last_progress(const flight_dump *d) {
    if (!d) return -INFINITY;
    double t = -INFINITY;
    for (size_t i = 0; i < d->nrecords; i++) {
        const flight_record *r = &d->records[i];
        t = fmax(t, fmax(r->t_sched, fmax(r->t_start, r->t_end)));
    }
    return t;
}

static comm_state *find_state(comm_state *st, int n, uint64_t uid, const comm_ref *refs) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (refs[mid].uid == uid) return &st[mid];
        if (refs[mid].uid < uid) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static int add_stuck(flight_blame_result *out, const flight_comm *c, const flight_record *r, int njoined,
                     const int *missing, int nmissing, double since) {
    flight_stuck *s = realloc(out->stuck, sizeof *s * (size_t)(out->nstuck + 1));
    if (!s) return -1;
    out->stuck = s;
    flight_stuck *e = &s[out->nstuck++];
    memset(e, 0, sizeof *e);
    e->uid = c->uid;
    memcpy(e->name, c->name, sizeof e->name);
    e->size = c->size;
    e->seq = r->seq;
    e->op = r->op;
    e->count = r->count;
    e->dtype = r->dtype;
    e->redop = r->redop;
    e->peer = r->peer;
    e->njoined = njoined;
    e->since = since;
    e->nmissing = nmissing;
    if (nmissing) {
        e->missing = malloc(sizeof(int) * (size_t)nmissing);
        if (!e->missing) return -1;
        memcpy(e->missing, missing, sizeof(int) * (size_t)nmissing);
    }
    return 0;
}

/* Unique communicators across dumps, checked for agreement on name and members. */
static int collect_comms(const flight_dump *dumps, size_t n, comm_ref **refs_out, int *nref_out, char *err,
                         size_t errlen) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += (size_t)dumps[i].ncomms;
    comm_ref *refs = malloc(sizeof *refs * (total ? total : 1));
    if (!refs) return tr_errf(err, errlen, "blame: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < dumps[i].ncomms; j++) refs[k++] = (comm_ref){dumps[i].comms[j].uid, &dumps[i].comms[j]};
    qsort(refs, total, sizeof *refs, cmp_ref);
    int u = 0;
    for (size_t i = 0; i < total; i++) {
        if (u > 0 && refs[u - 1].uid == refs[i].uid) {
            const flight_comm *a = refs[u - 1].c, *b = refs[i].c;
            if (strcmp(a->name, b->name) != 0 || a->size != b->size ||
                memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->size) != 0) {
                free(refs);
                return tr_errf(err, errlen,
                               "blame: communicator uid %016llx is '%s' (%d ranks) in one dump and '%s' "
                               "(%d ranks) or other members in another",
                               (unsigned long long)a->uid, a->name, a->size, b->name, b->size);
            }
            continue;
        }
        refs[u++] = refs[i];
    }
    *refs_out = refs;
    *nref_out = u;
    return 0;
}

static int blame_p2p(flight_blame_result *out, const flight_dump *d, const flight_record *r, const flight_comm *c,
                     const flight_dump *const *by_rank) {
    const int peer_rank = c->ranks[r->peer];
    const int me = member_pos(c, d->rank);
    const flight_dump *pd = by_rank[peer_rank];
    const flight_op want = r->op == FLIGHT_SEND ? FLIGHT_RECV : FLIGHT_SEND;
    bool matched = false;
    if (pd && !dead(pd))
        for (size_t i = 0; i < pd->nrecords && !matched; i++) {
            const flight_record *q = &pd->records[i];
            matched = q->op == want && q->peer == me && pd->comms[q->comm].uid == c->uid && q->seq >= r->seq;
        }
    int njoined = matched ? 2 : 1;
    return add_stuck(out, c, r, njoined, matched ? NULL : &peer_rank, matched ? 0 : 1, r->t_start);
}

/* Inside a collective it launched and that has not finished: waiting on others. */
static bool waiting(const flight_dump *d) {
    if (!d) return false;
    for (size_t i = 0; i < d->nrecords; i++)
        if (d->records[i].state == FLIGHT_STARTED || d->records[i].state == FLIGHT_SCHEDULED) return true;
    return false;
}

int flight_blame(const flight_dump *dumps, size_t n, flight_blame_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->first_stopped = -1;
    if (n == 0) return tr_errf(err, errlen, "blame: no dumps");
    const int world = dumps[0].world;
    const flight_dump **by_rank = calloc((size_t)world, sizeof *by_rank);
    comm_ref *refs = NULL;
    comm_state *st = NULL;
    int nref = 0, rc = -1;
    int *missing = malloc(sizeof(int) * (size_t)world);
    if (!by_rank || !missing) {
        tr_errf(err, errlen, "blame: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (dumps[i].world != world) {
            tr_errf(err, errlen, "blame: rank %d's dump says world %d, rank %d's says %d", dumps[0].rank, world,
                    dumps[i].rank, dumps[i].world);
            goto out;
        }
        if (by_rank[dumps[i].rank]) {
            tr_errf(err, errlen, "blame: two dumps of rank %d", dumps[i].rank);
            goto out;
        }
        by_rank[dumps[i].rank] = &dumps[i];
    }
    if (collect_comms(dumps, n, &refs, &nref, err, errlen)) goto out;
    st = calloc((size_t)(nref ? nref : 1), sizeof *st);
    if (!st) goto oom;
    for (int u = 0; u < nref; u++) {
        st[u].c = refs[u].c;
        st[u].top = calloc((size_t)refs[u].c->size, sizeof(uint64_t));
        if (!st[u].top) goto oom;
    }
    /* pass 1: per member, the highest collective seq; per communicator, the lowest incomplete one */
    for (size_t i = 0; i < n; i++) {
        const flight_dump *d = &dumps[i];
        for (size_t j = 0; j < d->nrecords; j++) {
            const flight_record *r = &d->records[j];
            if (r->op == FLIGHT_SEND || r->op == FLIGHT_RECV) continue;
            comm_state *s = find_state(st, nref, d->comms[r->comm].uid, refs);
            int pos = member_pos(s->c, d->rank);
            if (r->seq + 1 > s->top[pos]) s->top[pos] = r->seq + 1;
            if (r->state == FLIGHT_COMPLETED) continue;
            if (!s->stuck || r->seq < s->first.seq) {
                s->stuck = true;
                s->first = *r;
                s->since = r->t_start >= 0 ? r->t_start : r->t_sched;
            } else if (r->seq == s->first.seq) {
                double t = r->t_start >= 0 ? r->t_start : r->t_sched;
                if (t < s->since) s->since = t;
            }
        }
    }
    for (int u = 0; u < nref; u++) {
        if (!st[u].stuck) continue;
        const flight_comm *c = st[u].c;
        int nm = 0, nj = 0;
        for (int m = 0; m < c->size; m++) {
            const flight_dump *d = by_rank[c->ranks[m]];
            if (d && !dead(d) && st[u].top[m] > st[u].first.seq) nj++;
            else missing[nm++] = c->ranks[m];
        }
        if (add_stuck(out, c, &st[u].first, nj, missing, nm, st[u].since)) goto oom;
    }
    /* pass 2: point-to-point operations still waiting */
    for (size_t i = 0; i < n; i++) {
        const flight_dump *d = &dumps[i];
        for (size_t j = 0; j < d->nrecords; j++) {
            const flight_record *r = &d->records[j];
            if ((r->op != FLIGHT_SEND && r->op != FLIGHT_RECV) || r->state == FLIGHT_COMPLETED) continue;
            if (blame_p2p(out, d, r, &d->comms[r->comm], by_rank)) goto oom;
        }
    }
    for (int r = 0; r < world; r++)
        if (!by_rank[r]) missing[out->nmissing_dumps++] = r;
    if (out->nmissing_dumps) {
        out->missing_dumps = malloc(sizeof(int) * (size_t)out->nmissing_dumps);
        if (!out->missing_dumps) goto oom;
        memcpy(out->missing_dumps, missing, sizeof(int) * (size_t)out->nmissing_dumps);
    }
    /* A missing rank that is itself waiting in a collective is a victim further down the chain
     * (a stage blocked in a receive); the culprit is a missing rank stuck outside communication —
     * hung, crashed, or without a dump. Only when every missing rank waits (a cycle) do all count. */
    bool any_outside = false;
    for (int k = 0; k < out->nstuck; k++)
        for (int m = 0; m < out->stuck[k].nmissing; m++) any_outside |= !waiting(by_rank[out->stuck[k].missing[m]]);
    double best = INFINITY;
    for (int k = 0; k < out->nstuck; k++)
        for (int m = 0; m < out->stuck[k].nmissing; m++) {
            int rank = out->stuck[k].missing[m];
            if (any_outside && waiting(by_rank[rank])) continue;
            double t = last_progress(by_rank[rank]);
            if (t < best || (t == best && rank < out->first_stopped)) {
                best = t;
                out->first_stopped = rank;
            }
        }
    out->first_stopped_time = best;
    rc = 0;
    goto out;
oom:
    tr_errf(err, errlen, "blame: out of memory");
out:
    if (st)
        for (int u = 0; u < nref; u++) free(st[u].top);
    free(st);
    free(refs);
    free(missing);
    free(by_rank);
    if (rc) flight_blame_free(out);
    return rc;
}

void flight_blame_free(flight_blame_result *b) {
    for (int i = 0; i < b->nstuck; i++) free(b->stuck[i].missing);
    free(b->stuck);
    free(b->missing_dumps);
    memset(b, 0, sizeof *b);
    b->first_stopped = -1;
}

void flight_blame_print(FILE *f, const flight_blame_result *b, const flight_dump *dumps, size_t n) {
    if (b->nstuck == 0) fprintf(f, "  no communicator has an unfinished operation\n");
    for (int i = 0; i < b->nstuck; i++) {
        const flight_stuck *s = &b->stuck[i];
        fprintf(f, "  comm '%s' uid %016llx (%d ranks) seq %llu %s count %llu %s", s->name, (unsigned long long)s->uid,
                s->size, (unsigned long long)s->seq, flight_op_name(s->op), (unsigned long long)s->count,
                tr_dtype_name((tr_dtype)s->dtype));
        if (s->redop >= 0) fprintf(f, " %s", flight_redop_name(s->redop));
        if (s->peer >= 0) fprintf(f, " peer %d", s->peer);
        fprintf(f, ": %d joined since t=%.9f s; ", s->njoined, s->since);
        if (s->nmissing == 0) fprintf(f, "every member joined (it waits on something outside this communicator)\n");
        else {
            fprintf(f, "%d never joined: ", s->nmissing);
            flight_ranks_format(f, s->missing, s->nmissing);
            fputc('\n', f);
        }
    }
    if (b->nmissing_dumps) {
        fprintf(f, "  no dump from %d ranks: ", b->nmissing_dumps);
        flight_ranks_format(f, b->missing_dumps, b->nmissing_dumps);
        fputc('\n', f);
    }
    if (b->first_stopped >= 0) {
        const flight_dump *d = NULL;
        for (size_t i = 0; i < n; i++)
            if (dumps[i].rank == b->first_stopped) d = &dumps[i];
        fprintf(f, "  stopped first: rank %d", b->first_stopped);
        if (!d) fprintf(f, " (no dump)\n");
        else if (isfinite(b->first_stopped_time))
            fprintf(f, " (last progress t=%.9f s, status %s %d)\n", b->first_stopped_time, d->status, d->exit_code);
        else fprintf(f, " (no collective recorded, status %s %d)\n", d->status, d->exit_code);
    }
}
