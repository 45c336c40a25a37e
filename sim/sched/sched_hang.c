/* What the twin says when it finds a hang: every rank's flight recorder as a dump, the blame
 * analysis over all of them, and (when asked) the dumps on disk for the blame program. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"
#include "twinrun/err.h"

static const char *status_of(const twin_rank *r) {
    switch (r->state) {
    case RANK_RUNNABLE: return "running";
    case RANK_BLOCKED: return "blocked";
    case RANK_DONE: return "exited";
    case RANK_FAILED: return "failed";
    case RANK_KILLED: return "killed";
    }
    return "?";
}

static void write_dumps(twin_sched *s, const flight_dump *dumps) {
    for (int i = 0; i < s->nranks; i++) {
        char path[4096];
        int n = snprintf(path, sizeof path, "%s/flight_rank%05d.txt", s->opt.dump_dir, dumps[i].rank);
        if (n < 0 || (size_t)n >= sizeof path) {
            twin_report("flight dumps: directory path too long: %s", s->opt.dump_dir);
            return;
        }
        FILE *f = fopen(path, "w");
        if (!f) {
            twin_report("flight dumps: cannot write %s: %s", path, strerror(errno));
            return;
        }
        int rc = flight_dump_write(f, &dumps[i]);
        if (fclose(f) != 0 || rc != 0) {
            twin_report("flight dumps: writing %s failed", path);
            return;
        }
    }
    twin_report("flight dumps: %d files in %s (read them with: blame %s/flight_rank*.txt)", s->nranks, s->opt.dump_dir,
                s->opt.dump_dir);
}

flight_dump *twin_local_dumps(twin_sched *s) {
    flight_dump *dumps = calloc((size_t)s->nranks, sizeof *dumps);
    TR_CHECK(dumps != NULL, "out of host memory for the flight dumps");
    for (int i = 0; i < s->nranks; i++) {
        const twin_rank *r = &s->ranks[i];
        int rc = flight_ring_to_dump(&r->flight, r->id, s->world, r->now, status_of(r), r->exit_code, &dumps[i]);
        TR_CHECK(rc == 0, "out of host memory converting a flight ring to a dump");
    }
    return dumps;
}

void twin_hang_report(twin_sched *s, const char *why) {
    if (s->xproc) { /* the blame needs every process's dumps */
        s->remote->hang(s->remote->job, s, why);
        return;
    }
    flight_dump *dumps = twin_local_dumps(s);
    flight_blame_result b;
    char err[512];
    if (flight_blame(dumps, (size_t)s->nranks, &b, err, sizeof err) == 0) {
        twin_report("blame (%s):", why);
        flight_blame_print(s->report_stream, &b, dumps, (size_t)s->nranks);
        s->blamed_rank = b.first_stopped;
        flight_blame_free(&b);
    } else {
        twin_report("blame failed: %s", err);
    }
    if (s->opt.dump_dir) write_dumps(s, dumps);
    for (int i = 0; i < s->nranks; i++) flight_dump_free(&dumps[i]);
    free(dumps);
}

/* dump_at_exit: every rank's records after a run that ended normally, for trace comparisons. */
void twin_dump_all(twin_sched *s) {
    flight_dump *dumps = twin_local_dumps(s);
    write_dumps(s, dumps);
    for (int i = 0; i < s->nranks; i++) flight_dump_free(&dumps[i]);
    free(dumps);
}
