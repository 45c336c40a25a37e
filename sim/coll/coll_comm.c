/* Communicators: validation, the registry that pairs each rank's handle with its peers', and
 * cleanup (by the rank, by a crashed rank's reclaim, at the end of the run). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "twinrun/err.h"

static uint64_t key_of(const char *name, const int *ranks, int n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over the name and the rank list */
    for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)ranks[i]) * 0x100000001b3ULL;
    return twin_mix64(h ^ (uint64_t)n);
}

static int check_args(const int *ranks, int nranks, int my_rank, const char *name, int world, int self, char *err,
                      size_t errlen) {
    if (!name || !*name) return tr_errf(err, errlen, "coll_comm_create: communicator name is empty");
    if (strlen(name) >= FLIGHT_NAME_MAX)
        return tr_errf(err, errlen, "coll_comm_create: name '%s' is longer than %d characters", name,
                       FLIGHT_NAME_MAX - 1);
    for (const char *c = name; *c; c++)
        if (!isgraph((unsigned char)*c))
            return tr_errf(err, errlen,
                           "coll_comm_create: name '%s' has a space or control character; "
                           "names are one token in flight dumps",
                           name);
    if (!ranks || nranks < 1) return tr_errf(err, errlen, "communicator '%s': empty rank list", name);
    if (nranks > world) {
        if (world == 1)
            return tr_errf(err, errlen,
                           "communicator '%s' over %d ranks: outside twin_run this process is one rank; run the "
                           "ranks with twin_run (sim/include/twin.h) or use TP=PP=CP=DP=1",
                           name, nranks);
        return tr_errf(err, errlen, "communicator '%s' over %d ranks in a twin of %d", name, nranks, world);
    }
    bool member = false;
    for (int i = 0; i < nranks; i++) {
        if (ranks[i] < 0 || ranks[i] >= world)
            return tr_errf(err, errlen, "communicator '%s': rank %d outside [0, %d)", name, ranks[i], world);
        if (i && ranks[i] <= ranks[i - 1])
            return tr_errf(err, errlen, "communicator '%s': ranks must be ascending and unique (%d after %d)", name,
                           ranks[i], ranks[i - 1]);
        member |= ranks[i] == my_rank;
    }
    if (my_rank != self)
        return tr_errf(err, errlen, "communicator '%s': my_rank %d but the calling twin rank is %d", name, my_rank,
                       self);
    if (!member) return tr_errf(err, errlen, "communicator '%s': rank %d is not in its rank list", name, my_rank);
    return 0;
}

static int position(const int *ranks, int n, int rank) {
    for (int i = 0; i < n; i++)
        if (ranks[i] == rank) return i;
    return -1;
}

/* The k-th creation of (name, ranks) on this rank joins the k-th group with that key. */
static coll_group *join_group(struct coll_registry **regp, const char *name, const int *ranks, int n, int pos) {
    if (!*regp) {
        *regp = calloc(1, sizeof **regp);
        TR_CHECK(*regp != NULL, "out of host memory for the communicator registry");
    }
    struct coll_registry *reg = *regp;
    const uint64_t key = key_of(name, ranks, n);
    coll_group **slot = &reg->buckets[key % COLL_BUCKETS];
    uint64_t occurrence = 0;
    for (; *slot; slot = &(*slot)->next_in_bucket) {
        coll_group *g = *slot;
        if (g->key != key || g->size != n || strcmp(g->name, name) != 0 ||
            memcmp(g->ranks, ranks, sizeof(int) * (size_t)n) != 0)
            continue;
        if (!g->joined[pos]) return g;
        occurrence++;
    }
    coll_group *g = calloc(1, sizeof *g);
    TR_CHECK(g != NULL, "out of host memory for a communicator group");
    g->key = key;
    g->uid = twin_mix64(key + occurrence);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->size = n;
    g->ranks = malloc(sizeof(int) * (size_t)n);
    g->joined = calloc((size_t)n, 1);
    TR_CHECK(g->ranks && g->joined, "out of host memory for a communicator group");
    memcpy(g->ranks, ranks, sizeof(int) * (size_t)n);
    *slot = g;
    reg->ngroups++;
    const twin_remote *rm = twin_remote_get();
    if (rm) rm->group_init(rm->job, g);
    return g;
}

coll_comm *coll_comm_create(dev_device *d, const int *ranks, int nranks, int my_rank, const char *name, char *err,
                            size_t errlen) {
    twin_rank *self = twin_self();
    if (!d) {
        tr_errf(err, errlen, "coll_comm_create: device is NULL");
        return NULL;
    }
    if (check_args(ranks, nranks, my_rank, name, twin_world(), self->id, err, errlen)) return NULL;
    coll_comm *c = calloc(1, sizeof *c);
    if (!c) {
        tr_errf(err, errlen, "out of host memory creating communicator '%s'", name);
        return NULL;
    }
    const int pos = position(ranks, nranks, my_rank);
    c->g = join_group(twin_registry(), name, ranks, nranks, pos);
    c->g->joined[pos] = 1;
    c->g->refs++;
    c->owner = self;
    c->dev = d;
    c->group_rank = pos;
    c->flight_comm =
        self->recording ? flight_ring_add_comm(&self->flight, c->g->uid, c->g->name, c->g->size, c->g->ranks) : -1;
    c->next_owned = self->comms;
    if (c->next_owned) c->next_owned->prev_owned = c;
    self->comms = c;
    twin_log("%.9f r%d comm %s %016llx size %d", self->now, self->id, name, (unsigned long long)c->g->uid, nranks);
    return c;
}

static void free_group(coll_group *g) {
    TR_CHECK(!g->open && !g->p2p_first, "freeing a communicator group with operations in flight");
    free(g->ranks);
    free(g->joined);
    free(g->procs);
    free(g);
}

void coll_comm_destroy(coll_comm *c) {
    if (!c) return;
    if (c->inflight)
        tr_fatal("coll_comm_destroy of '%s' with %d operations in flight; end the group (coll_group_end) or "
                 "abort the communicator first",
                 c->g->name, c->inflight);
    if (c->prev_owned) c->prev_owned->next_owned = c->next_owned;
    else c->owner->comms = c->next_owned;
    if (c->next_owned) c->next_owned->prev_owned = c->prev_owned;
    coll_group *g = c->g;
    g->refs--;
    /* Outside twin_run nobody else can hold the group; inside, flight rings still point at its
     * rank list, so it lives until the run ends. */
    if (g->refs == 0 && !twin_sched_get()) {
        struct coll_registry *reg = *twin_registry();
        coll_group **slot = &reg->buckets[g->key % COLL_BUCKETS];
        while (*slot != g) slot = &(*slot)->next_in_bucket;
        *slot = g->next_in_bucket;
        reg->ngroups--;
        free_group(g);
        if (reg->ngroups == 0) {
            free(reg);
            *twin_registry() = NULL;
        }
    }
    free(c->p2p_send);
    free(c->p2p_recv);
    free(c);
}

int coll_comm_size(const coll_comm *c) { return c->g->size; }
int coll_comm_rank(const coll_comm *c) { return c->group_rank; }
const char *coll_comm_name(const coll_comm *c) { return c->g->name; }

void coll_twin_reclaim(twin_rank *r) {
    /* operations a dead rank launched inside an unfinished group: peers must not touch its buffers */
    for (coll_pending *p = r->group_first, *next; p; p = next) {
        next = p->next_group;
        if (!p->done) coll_withdraw(p);
        free(p);
    }
    r->group_first = r->group_last = NULL;
    r->group_depth = 0;
    while (r->comms) coll_comm_destroy(r->comms);
}

void coll_twin_abort_all(twin_rank *timed_out, double t) {
    struct coll_registry *reg = *twin_registry();
    if (!reg) return;
    for (int b = 0; b < COLL_BUCKETS; b++)
        for (coll_group *g = reg->buckets[b]; g; g = g->next_in_bucket) coll_group_abort(g, timed_out, t);
}

void coll_twin_registry_free(struct coll_registry **regp) {
    struct coll_registry *reg = *regp;
    if (!reg) return;
    for (int b = 0; b < COLL_BUCKETS; b++)
        for (coll_group *g = reg->buckets[b], *next; g; g = next) {
            next = g->next_in_bucket;
            free_group(g);
        }
    free(reg);
    *regp = NULL;
}
