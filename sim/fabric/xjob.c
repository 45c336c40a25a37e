/* The multi-process twin's running job: the messages between processes, the wall-clock watchdog on
 * waits for other processes, and goodbye (xproc.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../coll/coll_internal.h"
#include "xjob.h"
#include "twinrun/err.h"

xjob g_xjob;
volatile sig_atomic_t g_xjob_sigterm;

static void stopped_by_launcher(void) {
    if (!g_xjob_sigterm || g_xjob.aborting) return;
    xjob_abort("stopped by the launcher", "SIGTERM: the launcher is stopping the job (mpirun and torchrun do when one "
                                          "of its processes dies or fails)");
}

double xjob_wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool xproc_active(void) { return g_xjob.active; }
int xproc_self(void) { return g_xjob.cfg.proc; }
int xproc_nprocs(void) { return g_xjob.cfg.nprocs; }
int xproc_proc_of(int rank) { return rank / g_xjob.cfg.chunk % g_xjob.cfg.nprocs; }

const char *xjob_who(int p, char *buf, size_t n) {
    const xproc_config *c = &g_xjob.cfg;
    const int first = p * c->chunk, last = first + c->chunk - 1;
    char ranks[64];
    if (first == last && c->chunk == c->ranks_per_proc) snprintf(ranks, sizeof ranks, "rank %d", first);
    else if (c->chunk == c->ranks_per_proc) snprintf(ranks, sizeof ranks, "ranks %d-%d", first, last);
    else snprintf(ranks, sizeof ranks, "ranks %d-%d,... every %d", first, last, c->chunk * c->nprocs);
    if (g_xjob.peers && g_xjob.peers[p].info.pid)
        snprintf(buf, n, "process %d (%s on host %s, pid %u)", p, ranks, g_xjob.peers[p].info.host,
                 g_xjob.peers[p].info.pid);
    else snprintf(buf, n, "process %d (%s)", p, ranks);
    return buf;
}

bool xjob_ranks_message(xw_type t) { return t == XW_CONTRIB || t == XW_FAIL; }

void xjob_send(int proc, xw_type type, int64_t arg, void *payload, size_t len) {
    g_xjob.peers[proc].sent++;
    if (xjob_ranks_message(type)) g_xjob.peers[proc].ranks_sent++;
    if (xjob_counts(type)) {
        g_xjob.work_sent++;
        g_xjob.quiet = false;
    }
    fab_send(g_xjob.fab, proc, type, arg, payload, len);
}

void xproc_send(int proc, xw_type type, void *payload, size_t len) { xjob_send(proc, type, 0, payload, len); }

static void dispatch(fab_msg *m) {
    xjob *J = &g_xjob;
    const int from = (int)m->h.src_proc;
    xpeer *pe = &J->peers[from];
    char err[256], w[160];
    pe->received++;
    if (xjob_ranks_message(m->h.type)) pe->ranks_received++;
    if (xjob_counts(m->h.type)) {
        J->work_recv++;
        J->quiet = false;
    }
    switch (m->h.type) {
    case XW_HELLO: pe->hello = true; break;
    case XW_CONTRIB:
        if (!J->aborting) {
            unsigned char *payload = m->payload;
            m->payload = NULL;
            coll_remote_deliver(from, payload, (size_t)m->h.payload_len);
        }
        break;
    case XW_BYE:
        pe->bye = true;
        pe->bye_after = (uint64_t)m->h.arg;
        if (m->h.payload_len == 4)
            pe->bye_code = (int)((unsigned)m->payload[0] | (unsigned)m->payload[1] << 8 |
                                 (unsigned)m->payload[2] << 16 | (unsigned)m->payload[3] << 24);
        break;
    case XW_FAIL:
    case XW_ABORT:
        if (J->aborting) break;
        if (xw_text_check(m->payload, (size_t)m->h.payload_len, err, sizeof err)) {
            char line[400];
            snprintf(line, sizeof line, "%s sent an abort that is not text (%s)", xjob_who(from, w, sizeof w), err);
            xjob_abort("abort from another process", line);
        } else {
            char line[1400];
            snprintf(line, sizeof line, "abort from %.*s", (int)m->h.payload_len, (const char *)m->payload);
            xjob_abort("abort from another process", line);
        }
        break;
    case XW_DUMP:
        if (!pe->dumped) {
            pe->dumped = true;
            pe->dump = (char *)m->payload;
            pe->dump_len = (size_t)m->h.payload_len;
            m->payload = NULL;
        }
        break;
    case XW_IDLE:
    case XW_CONFIRM:
    case XW_CONFIRM_OK:
    case XW_STUCK: xjob_quiet_message(m); break;
    case XW_TYPE_END: break;
    }
    fab_msg_free(m);
}

int xjob_pump(void) {
    xjob *J = &g_xjob;
    int n = 0;
    for (fab_msg *m; (m = J->early); n++) { /* what came during the hello round, first */
        J->early = m->next;
        if (!J->early) J->early_last = NULL;
        m->next = NULL;
        dispatch(m);
    }
    fab_progress(J->fab);
    for (fab_msg *m; (m = fab_next(J->fab)); n++) dispatch(m);
    return n;
}

/* A process has gone once its goodbye and every message of its ranks sent before it arrived. */
static void update_gone(void) {
    for (int p = 0; p < g_xjob.cfg.nprocs; p++) {
        const xpeer *pe = &g_xjob.peers[p];
        g_xjob.gone[p] = pe->bye && pe->ranks_received >= pe->bye_after;
    }
}

bool xproc_progress(bool may_block) {
    xjob *J = &g_xjob;
    if (!J->active) return false;
    const bool did = xjob_pump() > 0;
    xjob_check_network();
    stopped_by_launcher();
    if (J->aborting || !coll_remote_waiting()) return did;
    coll_remote_wait rw;
    char line[1024], w[160];
    update_gone();
    if (coll_remote_oldest(J->gone, &rw)) {
        snprintf(line, sizeof line, "%s has ended, but %s", xjob_who(rw.missing_proc, w, sizeof w), rw.what);
        xjob_abort("a process ended early", line);
        return did;
    }
    if (coll_remote_oldest(NULL, &rw)) {
        /* TWINRUN_REMOTE_TIMEOUT, else the waiting rank's own timeout (--distributed-timeout-minutes) */
        const double limit = J->cfg.timeout_explicit || !(rw.watchdog_s > 0) ? J->cfg.timeout_s : rw.watchdog_s;
        const double waited = xjob_wall_now() - rw.wall_start;
        if (waited > limit) {
            snprintf(line, sizeof line, "watchdog: %s; waited %.1f s of wall time (%s %g s); aborting the job", rw.what,
                     waited, J->cfg.timeout_explicit ? "TWINRUN_REMOTE_TIMEOUT" : "the rank's collective timeout",
                     limit);
            xjob_abort("watchdog across processes", line);
            return did;
        }
        if (may_block && !did) {
            xjob_quiet_enter();
            fab_wait(J->fab, fmin(0.25, limit - waited + 1e-3));
        }
    } else if (may_block && !did) {
        xjob_quiet_enter();
        fab_wait(J->fab, 0.05); /* a local member has not arrived yet: it waits on something else here */
    }
    return true;
}

void xproc_run_end(twin_sched *s) {
    xjob *J = &g_xjob;
    if (!J->aborting) {
        int code = 0;
        for (int i = 0; i < s->nranks; i++)
            if (s->ranks[i].exit_code > code) code = s->ranks[i].exit_code;
        for (int p = 0; p < J->cfg.nprocs; p++) {
            if (p == J->cfg.proc) continue;
            unsigned char *c = malloc(4);
            TR_CHECK(c != NULL, "out of host memory for a message");
            for (int i = 0; i < 4; i++) c[i] = (unsigned char)((unsigned)code >> (8 * i));
            /* arg: the ranks' messages sent to p before this one, so that p knows when it has them all */
            xjob_send(p, XW_BYE, (int64_t)J->peers[p].ranks_sent, c, 4);
        }
        const double deadline = xjob_wall_now() + J->cfg.timeout_s;
        for (;;) {
            update_gone();
            int waiting = 0, first = -1;
            for (int p = 0; p < J->cfg.nprocs; p++)
                if (p != J->cfg.proc && !J->gone[p]) {
                    waiting++;
                    if (first < 0) first = p;
                }
            xjob_check_network();
            stopped_by_launcher();
            if (!waiting || J->aborting) break;
            if (xjob_wall_now() >= deadline) {
                char line[1024], w[160];
                snprintf(line, sizeof line, "every rank here has ended, but %s%s has not finished %.0f s later",
                         xjob_who(first, w, sizeof w), waiting > 1 ? " (and others)" : "", J->cfg.timeout_s);
                xjob_abort("a process did not finish", line);
                break;
            }
            xjob_quiet_enter();
            fab_wait(J->fab, 0.25);
            xjob_pump();
        }
    }
    /* what this process sent (data, goodbyes, dumps) must reach the others before it exits: after a
     * clean end every peer is still there and takes it (a send to a peer that died fails, which ends
     * the wait too), so wait as long as the watchdog would — a large payload on a loaded machine can
     * take seconds; after an abort only briefly, for those that answered: the silent ones never will */
    const double deadline = xjob_wall_now() + (g_xjob_sigterm ? fmin(J->cfg.timeout_s, 0.1)
                                               : J->aborting ? fmin(J->cfg.timeout_s, 1.0) : J->cfg.timeout_s);
    while (fab_sends_pending(J->fab) && xjob_wall_now() < deadline) {
        fab_wait(J->fab, 0.05);
        xjob_pump();
    }
}
