/* The coll.h seam over the twin: argument checks, launch, wait. Outside a group a call returns
 * when its collective has completed (on a side stream: when every member has launched it, the
 * transfer goes on the stream's clock; the data moves then either way); inside
 * coll_group_start/end calls launch at once and coll_group_end waits for all of them, so a
 * pipeline stage can post a send and a receive together as NCCL users do. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "twin_stream.h"
#include "twinrun/err.h"

static void check_common(coll_comm *c, dev_stream *s, const char *what) {
    TR_CHECK(c != NULL, "collective on a NULL communicator");
    twin_rank *self = twin_self();
    if (c->owner != self)
        tr_fatal("%s on communicator '%s' from rank %d, but rank %d created it", what, c->g->name, self->id,
                 c->owner->id);
    if (s && dev_stream_device(s) != c->dev)
        tr_fatal("%s on communicator '%s' with a stream of another device", what, c->g->name);
}

static void check_buffers(const coll_comm *c, const char *what, const void *send, const void *recv, size_t count,
                          tr_dtype dt) {
    if (dt != TR_F32 && dt != TR_BF16 && dt != TR_I32 && dt != TR_U8)
        tr_fatal("%s on '%s': unknown element type %d", what, c->g->name, (int)dt);
    if (count && (!send || !recv)) tr_fatal("%s on '%s': NULL buffer for %zu elements", what, c->g->name, count);
    if (count > ((size_t)1 << 48)) tr_fatal("%s on '%s': count %zu is not plausible", what, c->g->name, count);
}

/* NCCL's in-place rule for the collectives whose buffers differ in size: the small buffer (count
 * elements) may lie inside the large one (size*count) only as the caller's own block. Any other
 * overlap would read data the call is writing, which the twin (reducing from a copy) would forgive
 * and NCCL would not. */
static void check_in_place(const coll_comm *c, const char *what, const void *big, const void *small, size_t count,
                           tr_dtype dt) {
    const size_t block = count * tr_dtype_size(dt);
    const uintptr_t b = (uintptr_t)big, s = (uintptr_t)small, n = (uintptr_t)c->g->size;
    if (!block || s + block <= b || b + n * block <= s) return; /* disjoint */
    if (s != b + (uintptr_t)c->group_rank * block)
        tr_fatal("%s on '%s': the buffers overlap other than in place (group rank %d's block at byte %zu of the "
                 "%zu-byte buffer, found at byte offset %td)",
                 what, c->g->name, c->group_rank, (size_t)c->group_rank * block, (size_t)n * block,
                 (ptrdiff_t)((intptr_t)s - (intptr_t)b));
}

static void check_redop(const coll_comm *c, const char *what, coll_op op, tr_dtype dt) {
    if (op != COLL_SUM && op != COLL_AVG && op != COLL_MAX && op != COLL_MIN)
        tr_fatal("%s on '%s': unknown reduction op %d", what, c->g->name, (int)op);
    if (dt == TR_U8) /* FP8 bytes: a sum of codes is no value (NCCL would add them as integers) */
        tr_fatal("%s on '%s': uint8 (FP8 bytes) is gathered, never reduced", what, c->g->name);
}

static void check_peer(const coll_comm *c, const char *what, int peer) {
    if (peer < 0 || peer >= c->g->size)
        tr_fatal("%s on '%s': group rank %d outside [0, %d)", what, c->g->name, peer, c->g->size);
}

/* A job's watchdog ends every rank its abort reached (twin_options.end_on_abort), so no rank goes on
 * computing with a collective's missing result. */
static coll_status end_if_aborted(twin_rank *r, coll_status st) {
    twin_sched *s = twin_sched_get();
    if (st == COLL_OK || !s || !s->opt.end_on_abort) return st;
    twin_rank_finish(r, RANK_KILLED, -1);
}

/* The bytes a call reads (send) and writes (recv), for the stream hazard check: count elements, or
 * the group's size times that for all-gather's output and reduce-scatter's input. */
static void declare(coll_comm *c, dev_stream *s, coll_desc desc, const void *send, void *recv) {
    if (!s || desc.op == FLIGHT_BARRIER) return;
    const size_t block = desc.count * tr_dtype_size(desc.dt), all = block * (size_t)c->g->size;
    size_t in = block, out = block;
    if (desc.op == FLIGHT_ALL_GATHER) out = all;
    if (desc.op == FLIGHT_REDUCE_SCATTER) in = all;
    if (desc.op == FLIGHT_BROADCAST && desc.peer != c->group_rank) send = NULL; /* a receiver only writes */
    if (desc.op == FLIGHT_BROADCAST && desc.peer == c->group_rank) recv = NULL; /* the root only reads */
    twin_stream_op(s, flight_op_name(desc.op), c->g->name, (const twin_access[]){{send, in, false}, {recv, out, true}},
                   2);
}

static coll_status launch(coll_comm *c, dev_stream *s, coll_desc desc, const void *send, void *recv) {
    twin_rank *r = c->owner;
    if (c->observer && !c->in_observer) {
        c->in_observer = true;
        c->observer(c->observer_arg, c, flight_op_name(desc.op));
        c->in_observer = false;
    }
    if (c->g->aborted) return end_if_aborted(r, COLL_ABORTED);
    /* arrive only when this rank's clock is the earliest: watchdogs before it fire first (a group's
     * later calls arrive with its first, below, so they must not yield in between) */
    if (!r->group_first) twin_sync(r);
    if (c->g->aborted) return end_if_aborted(r, COLL_ABORTED);
    declare(c, s, desc, send, recv);
    coll_pending local, *p = &local;
    if (r->group_depth) {
        p = malloc(sizeof *p);
        TR_CHECK(p != NULL, "out of host memory queueing a grouped collective");
    }
    memset(p, 0, sizeof *p);
    p->rank = r;
    p->comm = c;
    p->desc = desc;
    p->send = send;
    p->recv = recv;
    /* A group launches together (ncclGroupEnd): every call in it arrives when the first did, whatever
     * completed in between, so clocks never depend on which peer the scheduler ran first (the
     * multi-process twin relies on that: docs/multiprocess.md). */
    p->side = s && twin_stream_is_side(s) ? s : NULL;
    p->arrival = r->group_first ? r->group_first->arrival : p->side ? twin_stream_start(s) : r->now;
    p->host_arrival = r->group_first ? r->group_first->host_arrival : r->now;
    p->heap_owned = r->group_depth > 0;
    if (desc.op == FLIGHT_SEND || desc.op == FLIGHT_RECV) {
        uint64_t **counter = desc.op == FLIGHT_SEND ? &c->p2p_send : &c->p2p_recv;
        if (!*counter) {
            *counter = calloc((size_t)c->g->size, sizeof **counter);
            TR_CHECK(*counter != NULL, "out of host memory for point-to-point sequence numbers");
        }
        p->seq = (*counter)[desc.peer]++;
    } else {
        p->seq = c->seq++;
    }
    coll_post(p);
    if (r->group_depth) {
        if (r->group_last) r->group_last->next_group = p;
        else r->group_first = p;
        r->group_last = p;
        return COLL_OK;
    }
    snprintf(r->wait_desc, sizeof r->wait_desc, "%s seq %llu on '%s'", flight_op_name(desc.op),
             (unsigned long long)p->seq, c->g->name);
    return end_if_aborted(r, twin_wait(r, r->wait_desc));
}

coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op) {
    check_common(c, s, "all_reduce");
    check_buffers(c, "all_reduce", send, recv, count, dt);
    check_redop(c, "all_reduce", op, dt);
    return launch(c, s, (coll_desc){FLIGHT_ALL_REDUCE, count, dt, (int)op, -1}, send, recv);
}

coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    check_common(c, s, "all_gather");
    check_buffers(c, "all_gather", send, recv, count, dt);
    check_in_place(c, "all_gather", recv, send, count, dt);
    return launch(c, s, (coll_desc){FLIGHT_ALL_GATHER, count, dt, -1, -1}, send, recv);
}

coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                                coll_op op) {
    check_common(c, s, "reduce_scatter");
    check_buffers(c, "reduce_scatter", send, recv, count, dt);
    check_in_place(c, "reduce_scatter", send, recv, count, dt);
    check_redop(c, "reduce_scatter", op, dt);
    return launch(c, s, (coll_desc){FLIGHT_REDUCE_SCATTER, count, dt, (int)op, -1}, send, recv);
}

coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root) {
    check_common(c, s, "broadcast");
    check_buffers(c, "broadcast", buf, buf, count, dt);
    check_peer(c, "broadcast root", root);
    return launch(c, s, (coll_desc){FLIGHT_BROADCAST, count, dt, -1, root}, buf, buf);
}

coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer) {
    check_common(c, s, "send");
    check_buffers(c, "send", buf, buf, count, dt);
    check_peer(c, "send", peer);
    if (peer == c->group_rank) tr_fatal("send on '%s' to itself (group rank %d)", c->g->name, peer);
    return launch(c, s, (coll_desc){FLIGHT_SEND, count, dt, -1, peer}, buf, NULL);
}

coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer) {
    check_common(c, s, "recv");
    check_buffers(c, "recv", buf, buf, count, dt);
    check_peer(c, "recv", peer);
    if (peer == c->group_rank) tr_fatal("recv on '%s' from itself (group rank %d)", c->g->name, peer);
    return launch(c, s, (coll_desc){FLIGHT_RECV, count, dt, -1, peer}, NULL, buf);
}

coll_status coll_barrier(coll_comm *c, dev_stream *s) {
    check_common(c, s, "barrier");
    return launch(c, s, (coll_desc){FLIGHT_BARRIER, 0, TR_F32, -1, -1}, NULL, NULL);
}

void coll_group_start(void) { twin_self()->group_depth++; }

void coll_group_end(void) {
    twin_rank *r = twin_self();
    TR_CHECK(r->group_depth > 0, "coll_group_end without coll_group_start");
    if (--r->group_depth) return;
    snprintf(r->wait_desc, sizeof r->wait_desc, "group of %s%s",
             r->group_first ? flight_op_name(r->group_first->desc.op) : "nothing",
             r->group_first && r->group_first->next_group ? ", ..." : "");
    /* failures show in later calls (the communicator stays aborted), or end the rank now */
    coll_status st = twin_wait(r, r->wait_desc);
    if (st != COLL_OK) {
        twin_sched *s = twin_sched_get();
        if (s && s->opt.end_on_abort) {
            for (coll_pending *p = r->group_first, *next; p; p = next) { /* all completed by the abort */
                next = p->next_group;
                free(p);
            }
            r->group_first = r->group_last = NULL;
            (void)end_if_aborted(r, st);
        }
    }
    for (coll_pending *p = r->group_first, *next; p; p = next) {
        next = p->next_group;
        TR_CHECK(p->done, "a grouped operation is still running after its group ended");
        free(p);
    }
    r->group_first = r->group_last = NULL;
}

void coll_comm_set_observer(coll_comm *c, coll_observer fn, void *arg) {
    TR_CHECK(c != NULL, "coll_comm_set_observer on a NULL communicator");
    c->observer = fn;
    c->observer_arg = arg;
}

void coll_abort(coll_comm *c) {
    TR_CHECK(c != NULL, "coll_abort of a NULL communicator");
    twin_log("%.9f r%d abort %s", c->owner->now, c->owner->id, c->g->name);
    coll_group_abort(c->g, NULL, c->owner->now);
}

/* --distributed-timeout-minutes: the rank's watchdog in simulated seconds, so a 60-minute timeout
 * costs no wall time here either. */
void coll_set_timeout(dev_device *d, double seconds) {
    (void)d;
    twin_set_watchdog(seconds);
}

void coll_set_link_slowdown(dev_device *d, double factor) {
    (void)d;
    if (!(factor >= 1 && factor <= 1e6)) tr_fatal("coll_set_link_slowdown: factor %g is not in [1, 1e6]", factor);
    twin_self()->link_slowdown = factor;
}
