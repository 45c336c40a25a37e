/* The twin's collectives for a communicator of one rank: every collective is a copy.
 *
 * The multi-rank twin (coroutine scheduler, fake collectives over many in-process ranks, flight
 * recorder) replaces this file; until then a communicator over more than one rank is refused with
 * a message saying so, never silently mis-reduced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/coll.h"
#include "twinrun/err.h"

struct coll_comm {
    dev_device *dev;
    int rank;
    bool aborted;
    char name[32];
};

coll_comm *coll_comm_create(dev_device *d, const int *ranks, int nranks, int my_rank, const char *name, char *err,
                            size_t errlen) {
    if (nranks != 1 || !ranks || ranks[0] != my_rank) {
        tr_errf(err, errlen,
                "communicator '%s' over %d ranks: this twin build runs one rank per process; "
                "use TP=PP=CP=DP=1 (multi-rank twin collectives are not built yet)",
                name ? name : "?", nranks);
        return NULL;
    }
    coll_comm *c = calloc(1, sizeof *c);
    if (!c) {
        tr_errf(err, errlen, "out of host memory creating communicator '%s'", name ? name : "?");
        return NULL;
    }
    c->dev = d;
    c->rank = my_rank;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "?");
    return c;
}

void coll_comm_destroy(coll_comm *c) { free(c); }
int coll_comm_size(const coll_comm *c) { (void)c; return 1; }
int coll_comm_rank(const coll_comm *c) { (void)c; return 0; }
const char *coll_comm_name(const coll_comm *c) { return c->name; }

static coll_status copy_one(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    if (c->aborted) return COLL_ABORTED;
    if (send != recv) dev_copy_d2d(s, recv, send, count * tr_dtype_size(dt));
    return COLL_OK;
}

coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op) {
    (void)op; /* sum, avg, max and min of one contribution are that contribution */
    return copy_one(c, s, send, recv, count, dt);
}

coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt) {
    return copy_one(c, s, send, recv, count, dt);
}

coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count,
                                tr_dtype dt, coll_op op) {
    (void)op;
    return copy_one(c, s, send, recv, count, dt);
}

coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root) {
    (void)s, (void)buf, (void)count, (void)dt;
    TR_CHECK(root == 0, "broadcast root outside a one-rank communicator");
    return c->aborted ? COLL_ABORTED : COLL_OK;
}

coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer) {
    (void)c, (void)s, (void)buf, (void)count, (void)dt, (void)peer;
    tr_fatal("coll_send on one-rank communicator '%s': there is no peer", c->name);
}

coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer) {
    (void)c, (void)s, (void)buf, (void)count, (void)dt, (void)peer;
    tr_fatal("coll_recv on one-rank communicator '%s': there is no peer", c->name);
}

coll_status coll_barrier(coll_comm *c, dev_stream *s) {
    (void)s;
    return c->aborted ? COLL_ABORTED : COLL_OK;
}

void coll_group_start(void) {}
void coll_group_end(void) {}
void coll_abort(coll_comm *c) { c->aborted = true; }
