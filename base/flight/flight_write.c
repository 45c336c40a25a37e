/* Writes one rank's dump in the text format of flight.h. Times print with nanosecond digits,
 * which round-trip the simulated clock's values closely enough for blame (it compares times
 * only to order events). */
#include <inttypes.h>

#include "flight/flight.h"
#include "twinrun/dtype.h"

static void put_time(FILE *f, const char *key, double t) {
    if (t < 0) fprintf(f, " %s -", key);
    else fprintf(f, " %s %.9f", key, t);
}

int flight_dump_write(FILE *f, const flight_dump *d) {
    fprintf(f, "twinrun-flight 1\n");
    fprintf(f, "rank %d world %d backend %s time %.9f status %s %d\n", d->rank, d->world, d->backend,
            d->time < 0 ? 0.0 : d->time, d->status, d->exit_code);
    for (int i = 0; i < d->ncomms; i++) {
        const flight_comm *c = &d->comms[i];
        fprintf(f, "comm %d uid %016" PRIx64 " name %s size %d ranks ", i, c->uid, c->name, c->size);
        flight_ranks_format(f, c->ranks, c->size);
        fputc('\n', f);
    }
    for (size_t i = 0; i < d->nrecords; i++) {
        const flight_record *r = &d->records[i];
        fprintf(f, "rec %" PRIu64 " comm %d seq %" PRIu64 " op %s count %" PRIu64 " dtype %s redop %s peer %d state %s",
                r->id, r->comm, r->seq, flight_op_name(r->op), r->count, tr_dtype_name((tr_dtype)r->dtype),
                flight_redop_name(r->redop), r->peer, flight_state_name(r->state));
        put_time(f, "t_sched", r->t_sched);
        put_time(f, "t_start", r->t_start);
        put_time(f, "t_end", r->t_end);
        fputc('\n', f);
    }
    fprintf(f, "dropped %" PRIu64 "\nend\n", d->dropped);
    return ferror(f) ? -1 : 0;
}
