/* The job-wide abort of a multi-process twin: whatever stops the job (a wall-clock watchdog, a
 * failed rank, a peer gone, a mismatch seen on the wire) ends the same way in every process: each
 * tells the others, sends them its flight dumps, and reports the blame over all the dumps it got;
 * a process that does not answer within the grace period is named. Then every communicator here
 * is aborted so this process's ranks unwind and it exits non-zero. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mp_internal.h"
#include "twinrun/err.h"

#define DUMP_RECORDS 64 /* per rank: the newest records say where each rank stands, and stay small */

static char *local_dumps_text(twin_sched *s, size_t *len) {
    flight_dump *d = twin_local_dumps(s);
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    TR_CHECK(f != NULL, "out of host memory for flight dumps");
    for (int i = 0; i < s->nranks; i++) {
        flight_dump w = d[i];
        if (w.nrecords > DUMP_RECORDS) {
            w.dropped += w.nrecords - DUMP_RECORDS;
            w.records += w.nrecords - DUMP_RECORDS;
            w.nrecords = DUMP_RECORDS;
        }
        flight_dump_write(f, &w);
        flight_dump_free(&d[i]);
    }
    free(d);
    TR_CHECK(fclose(f) == 0, "out of host memory for flight dumps");
    return text;
}

/* Appends every peer's parsed dumps to *all. */
static void add_peer_dumps(const mp_job *J, flight_dump **all, size_t *n, size_t *cap) {
    for (int p = 0; p < J->cfg.nprocs; p++) {
        const mp_peer_state *pe = &J->peers[p];
        if (!pe->dumped) continue;
        size_t pos = 0, line = 1;
        for (;;) {
            if (*n == *cap) {
                *cap = *cap * 2 + 16;
                flight_dump *grown = realloc(*all, sizeof **all * *cap);
                TR_CHECK(grown != NULL, "out of host memory for flight dumps");
                *all = grown;
            }
            char err[256], w[160];
            const int rc = flight_dump_parse(pe->dump, pe->dump_len, &pos, &line, &(*all)[*n], err, sizeof err);
            if (rc == 0) break;
            if (rc < 0) {
                twin_report("  the flight dumps of %s do not parse: %s", mp_job_who(J, p, w, sizeof w), err);
                break;
            }
            (*n)++;
        }
    }
}

/* A process that did not answer is one event, reported alike by every survivor whichever way this
 * one learned that the job ends (`how`: its own watchdog, a broken pipe, another's abort, ...): the
 * silent processes first, each with how it was found, then the blame over the others' dumps. Which
 * survivor notices first is a race; only the "found by" differs between their reports. */
static void blame_across(const mp_job *J, twin_sched *s, const char *how, double grace) {
    int silent = 0;
    for (int p = 0; p < J->cfg.nprocs; p++)
        if (p != J->cfg.proc && !J->peers[p].dumped) {
            char w[160];
            twin_report(
                "no answer from %s within %.1f s: it was killed, is stopped, or cannot be reached; found by: %s",
                mp_job_who(J, p, w, sizeof w), grace, how);
            silent++;
        }
    size_t n = (size_t)s->nranks, cap = n + 16;
    flight_dump *all = malloc(sizeof *all * cap);
    TR_CHECK(all != NULL, "out of host memory for flight dumps");
    flight_dump *local = twin_local_dumps(s);
    memcpy(all, local, sizeof *all * n);
    free(local);
    add_peer_dumps(J, &all, &n, &cap);
    flight_blame_result b;
    char err[512];
    if (flight_blame(all, n, &b, err, sizeof err) == 0) {
        if (silent) twin_report("blame (flight dumps of every process that answered):");
        else twin_report("blame (%s; flight dumps of every process that answered):", how);
        flight_blame_print(s->report_stream, &b, all, n);
        s->blamed_rank = b.first_stopped;
        flight_blame_free(&b);
    } else {
        twin_report("blame failed: %s", err);
    }
    for (size_t i = 0; i < n; i++) flight_dump_free(&all[i]);
    free(all);
}

static void send_copy(mp_job *J, int p, mp_msg_type type, const void *data, size_t len) {
    void *copy = malloc(len ? len : 1);
    TR_CHECK(copy != NULL, "out of host memory for a message");
    memcpy(copy, data, len);
    mp_job_send(J, p, type, 0, copy, len);
}

void mp_job_abort(mp_job *J, const char *how, const char *line) {
    twin_sched *s = twin_sched_get();
    if (J->aborting || !s) return;
    J->aborting = true;
    if (!J->line_reported) twin_report("%s", line);
    J->line_reported = false;
    char w[160], reason[1200];
    snprintf(reason, sizeof reason, "%s: %s", mp_job_who(J, J->cfg.proc, w, sizeof w), line);
    size_t len;
    char *text = local_dumps_text(s, &len);
    for (int p = 0; p < J->cfg.nprocs; p++)
        if (p != J->cfg.proc) {
            send_copy(J, p, MP_ABORT, reason, strlen(reason));
            send_copy(J, p, MP_DUMP, text, len);
        }
    free(text);
    /* a live process answers within moments: it looks at the network between its ranks' turns; after
     * SIGTERM the launcher's SIGKILL follows soon (mpirun: 1 s), and every survivor got the signal */
    const double grace = g_mp_sigterm ? 0.3 : fmin(J->cfg.timeout_s, 10.0), deadline = mp_job_wall_now() + grace;
    for (;;) {
        int missing = 0;
        for (int p = 0; p < J->cfg.nprocs; p++) missing += p != J->cfg.proc && !J->peers[p].dumped;
        if (!missing || mp_job_wall_now() >= deadline) break;
        mp_net_wait(J->net, fmin(0.1, deadline - mp_job_wall_now()));
        mp_job_pump(J);
    }
    s->hang = true;
    blame_across(J, s, how, grace);
    if (s->opt.dump_dir) twin_dump_all(s); /* this process's ranks, complete, for the blame program */
    coll_twin_abort_all(NULL, s->now);
}

void mp_job_abortf(mp_job *J, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    mp_job_abort(J, "abort", line);
}

/* Did peer p leave after a clean goodbye? A process leaves once it has every message it waits for,
 * so this one may find the connection gone (a send of its own refused) before it has read the
 * goodbye that came first: read what arrived, for a moment, before judging (a 2-process job failed so
 * about once in 12 runs under load). */
static bool left_cleanly(mp_job *J, int p) {
    const double until = mp_job_wall_now() + 1.0;
    for (;;) {
        mp_job_pump(J);
        mp_job_update_gone(J);
        if (J->gone[p]) return true;
        if (mp_job_wall_now() >= until) return false;
        mp_net_wait(J->net, 0.02);
    }
}

void mp_job_check_network(mp_job *J) {
    int p;
    const char *e = mp_net_error(J->net, &p);
    if (!e || J->aborting) return;
    if (p >= 0 && p != J->cfg.proc && left_cleanly(J, p)) {
        mp_net_clear_error(J->net);
        return;
    }
    char w[160], line[900];
    if (p >= 0) snprintf(line, sizeof line, "network: %s; %s is gone or unreachable", e, mp_job_who(J, p, w, sizeof w));
    else snprintf(line, sizeof line, "network: %s", e);
    mp_job_abort(J, p >= 0 ? "broken pipe" : "network failure", line);
}

void mp_job_rank_failed(void *job, const twin_rank *r) {
    mp_job *J = job;
    char line[1400];
    snprintf(line, sizeof line, "rank %d failed with exit code %d at t=%.9f s%s%s", r->id, r->exit_code, r->now,
             r->fail_msg ? ": " : "", r->fail_msg ? r->fail_msg : "");
    J->line_reported = true; /* twin_rank_finish reported it here */
    mp_job_abort(J, "rank failure", line);
}

void mp_job_hang(void *job, twin_sched *s, const char *why) {
    (void)s;
    char line[160];
    snprintf(line, sizeof line, "%s among the ranks of this process", why);
    mp_job_abort(job, why, line);
}
