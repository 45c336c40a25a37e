/* A rank's flight-recorder ring and the names shared by the dump format. */
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/err.h"

static const char *const op_names[FLIGHT_OP_COUNT] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                                      "send",       "recv",       "barrier"};
static const char *const state_names[FLIGHT_STATE_COUNT] = {"scheduled", "started", "completed", "aborted"};
static const char *const redop_names[4] = {"sum", "avg", "max", "min"};

const char *flight_op_name(flight_op op) { return op >= 0 && op < FLIGHT_OP_COUNT ? op_names[op] : "?"; }
const char *flight_state_name(flight_state s) { return s >= 0 && s < FLIGHT_STATE_COUNT ? state_names[s] : "?"; }
const char *flight_redop_name(int redop) { return redop >= 0 && redop < 4 ? redop_names[redop] : "-"; }

void flight_ring_init(flight_ring *r, size_t cap) {
    memset(r, 0, sizeof *r);
    r->cap = cap;
}

void flight_ring_free(flight_ring *r) {
    free(r->rec);
    free(r->comms);
    memset(r, 0, sizeof *r);
}

int flight_ring_add_comm(flight_ring *r, uint64_t uid, const char *name, int size, int *ranks) {
    if (r->ncomms == r->comm_cap) {
        int cap = r->comm_cap ? 2 * r->comm_cap : 4;
        flight_comm *c = realloc(r->comms, sizeof *c * (size_t)cap);
        TR_CHECK(c != NULL, "out of host memory growing the flight recorder's communicator table");
        r->comms = c;
        r->comm_cap = cap;
    }
    flight_comm *c = &r->comms[r->ncomms];
    memset(c, 0, sizeof *c);
    c->uid = uid;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->size = size;
    c->ranks = ranks;
    return r->ncomms++;
}

uint64_t flight_ring_add(flight_ring *r, const flight_record *rec) {
    if (!r->rec) {
        /* lazily: a rank that never communicates costs no ring */
        r->rec = malloc(sizeof *r->rec * r->cap);
        TR_CHECK(r->rec != NULL, "out of host memory for the flight recorder ring");
    }
    uint64_t id = r->next_id++;
    flight_record *slot = &r->rec[id % r->cap];
    *slot = *rec;
    slot->id = id;
    if (r->count < r->cap) r->count++;
    return id;
}

flight_record *flight_ring_get(flight_ring *r, uint64_t id) {
    if (!r->rec || id >= r->next_id || r->next_id - id > r->count) return NULL;
    return &r->rec[id % r->cap];
}

int flight_ring_to_dump(const flight_ring *r, int rank, int world, double time, const char *status, int exit_code,
                        flight_dump *out) {
    memset(out, 0, sizeof *out);
    out->rank = rank;
    out->world = world;
    snprintf(out->backend, sizeof out->backend, "twin");
    out->time = time;
    snprintf(out->status, sizeof out->status, "%s", status);
    out->exit_code = exit_code;
    out->ncomms = r->ncomms;
    if (r->ncomms) {
        out->comms = malloc(sizeof *out->comms * (size_t)r->ncomms);
        if (!out->comms) return -1;
        memcpy(out->comms, r->comms, sizeof *out->comms * (size_t)r->ncomms);
    }
    out->nrecords = r->count;
    out->dropped = r->next_id - r->count;
    if (r->count) {
        out->records = malloc(sizeof *out->records * r->count);
        if (!out->records) {
            free(out->comms);
            return -1;
        }
        for (size_t i = 0; i < r->count; i++) out->records[i] = r->rec[(out->dropped + i) % r->cap];
    }
    return 0;
}

void flight_dump_free(flight_dump *d) {
    if (d->owns_ranks)
        for (int i = 0; i < d->ncomms; i++) free(d->comms[i].ranks);
    free(d->comms);
    free(d->records);
    memset(d, 0, sizeof *d);
}
