/* The multi-process twin's running job: the messages between processes, the wall-clock watchdog on
 * waits for other processes, and goodbye (multiproc.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mp_internal.h"
#include "twinrun/err.h"

volatile sig_atomic_t g_mp_sigterm;

static void stopped_by_launcher(mp_job *J) {
    if (!g_mp_sigterm || J->aborting) return;
    mp_job_abort(J, "stopped by the launcher",
                 "SIGTERM: the launcher is stopping the job (mpirun and torchrun do when one "
                 "of its processes dies or fails)");
}

double mp_job_wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *mp_job_who(const mp_job *J, int p, char *buf, size_t n) {
    const mp_config *c = &J->cfg;
    const int first = p * c->chunk, last = first + c->chunk - 1;
    char ranks[64];
    if (first == last && c->chunk == c->ranks_per_proc) snprintf(ranks, sizeof ranks, "rank %d", first);
    else if (c->chunk == c->ranks_per_proc) snprintf(ranks, sizeof ranks, "ranks %d-%d", first, last);
    else snprintf(ranks, sizeof ranks, "ranks %d-%d,... every %d", first, last, c->chunk * c->nprocs);
    if (J->peers && J->peers[p].info.pid)
        snprintf(buf, n, "process %d (%s on host %s, pid %u)", p, ranks, J->peers[p].info.host, J->peers[p].info.pid);
    else snprintf(buf, n, "process %d (%s)", p, ranks);
    return buf;
}

bool mp_job_ranks_message(mp_msg_type t) { return t == MP_CONTRIB || t == MP_FAIL; }

void mp_job_send(mp_job *J, int proc, mp_msg_type type, int64_t arg, void *payload, size_t len) {
    J->peers[proc].sent++;
    if (mp_job_ranks_message(type)) J->peers[proc].ranks_sent++;
    if (mp_job_counts(type)) {
        J->work_sent++;
        J->quiet = false;
    }
    mp_net_send(J->net, proc, type, arg, payload, len);
}

static void dispatch(mp_job *J, mp_msg *m) {
    const int from = (int)m->h.src_proc;
    mp_peer_state *pe = &J->peers[from];
    char err[256], w[160];
    pe->received++;
    if (mp_job_ranks_message(m->h.type)) pe->ranks_received++;
    if (mp_job_counts(m->h.type)) {
        J->work_recv++;
        J->quiet = false;
    }
    switch (m->h.type) {
    case MP_HELLO: pe->hello = true; break;
    case MP_CONTRIB:
        if (!J->aborting) {
            unsigned char *payload = m->payload;
            m->payload = NULL;
            mp_coll_deliver(J, from, payload, (size_t)m->h.payload_len);
        }
        break;
    case MP_BYE:
        pe->bye = true;
        pe->bye_after = (uint64_t)m->h.arg;
        if (m->h.payload_len == 4)
            pe->bye_code = (int)((unsigned)m->payload[0] | (unsigned)m->payload[1] << 8 |
                                 (unsigned)m->payload[2] << 16 | (unsigned)m->payload[3] << 24);
        break;
    case MP_FAIL:
    case MP_ABORT: {
        if (J->aborting) break;
        char how[48], line[1400];
        snprintf(how, sizeof how, "abort from process %d", from);
        if (mp_text_check(m->payload, (size_t)m->h.payload_len, err, sizeof err))
            snprintf(line, sizeof line, "%s sent an abort that is not text (%s)", mp_job_who(J, from, w, sizeof w),
                     err);
        else snprintf(line, sizeof line, "abort from %.*s", (int)m->h.payload_len, (const char *)m->payload);
        mp_job_abort(J, how, line);
        break;
    }
    case MP_DUMP:
        if (!pe->dumped) {
            pe->dumped = true;
            pe->dump = (char *)m->payload;
            pe->dump_len = (size_t)m->h.payload_len;
            m->payload = NULL;
        }
        break;
    case MP_IDLE:
    case MP_CONFIRM:
    case MP_CONFIRM_OK:
    case MP_STUCK: mp_job_quiet_message(J, m); break;
    case MP_TYPE_END: break;
    }
    mp_msg_free(m);
}

int mp_job_pump(mp_job *J) {
    int n = 0;
    for (mp_msg *m; (m = J->early); n++) { /* what came during the hello round, first */
        J->early = m->next;
        if (!J->early) J->early_last = NULL;
        m->next = NULL;
        dispatch(J, m);
    }
    mp_net_progress(J->net);
    for (mp_msg *m; (m = mp_net_next(J->net)); n++) dispatch(J, m);
    return n;
}

/* A process has gone once its goodbye and every message of its ranks sent before it arrived. Once
 * this one has said its own goodbye too, a gone process needs nothing more from it (it leaves only
 * with this one's goodbye and everything sent before it): the network may drop the chatter that
 * still goes its way and forgive a failure once it has left. */
void mp_job_update_gone(mp_job *J) {
    for (int p = 0; p < J->cfg.nprocs; p++) {
        const mp_peer_state *pe = &J->peers[p];
        J->gone[p] = pe->bye && pe->ranks_received >= pe->bye_after;
        if (J->gone[p] && J->bye_sent && p != J->cfg.proc) mp_net_peer_departed(J->net, p);
    }
}

bool mp_job_progress(void *job, bool may_block) {
    mp_job *J = job;
    if (!J->active) return false;
    const bool did = mp_job_pump(J) > 0;
    mp_job_check_network(J);
    stopped_by_launcher(J);
    if (J->aborting || !mp_coll_waiting(J)) return did;
    mp_coll_wait rw;
    char line[1024], w[160];
    mp_job_update_gone(J);
    if (mp_coll_oldest(J, J->gone, &rw)) {
        snprintf(line, sizeof line, "%s has ended, but %s", mp_job_who(J, rw.missing_proc, w, sizeof w), rw.what);
        mp_job_abort(J, "a process ended early", line);
        return did;
    }
    if (mp_coll_oldest(J, NULL, &rw)) {
        /* TWINRUN_REMOTE_TIMEOUT, else the waiting rank's own timeout (--distributed-timeout-minutes) */
        const double limit = J->cfg.timeout_explicit || !(rw.watchdog_s > 0) ? J->cfg.timeout_s : rw.watchdog_s;
        const double waited = mp_job_wall_now() - rw.wall_start;
        if (waited > limit) {
            snprintf(line, sizeof line, "watchdog: %s; waited %.1f s of wall time (%s %g s); aborting the job", rw.what,
                     waited, J->cfg.timeout_explicit ? "TWINRUN_REMOTE_TIMEOUT" : "the rank's collective timeout",
                     limit);
            mp_job_abort(J, "watchdog", line);
            return did;
        }
        if (may_block && !did) {
            mp_job_quiet_enter(J);
            mp_net_wait(J->net, fmin(0.25, limit - waited + 1e-3));
        }
    } else if (may_block && !did) {
        mp_job_quiet_enter(J);
        mp_net_wait(J->net, 0.05); /* a local member has not arrived yet: it waits on something else here */
    }
    return true;
}

void mp_job_run_end(void *job, twin_sched *s) {
    mp_job *J = job;
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
            mp_job_send(J, p, MP_BYE, (int64_t)J->peers[p].ranks_sent, c, 4);
        }
        J->bye_sent = true;
        const double deadline = mp_job_wall_now() + J->cfg.timeout_s;
        for (;;) {
            mp_job_update_gone(J);
            int waiting = 0, first = -1;
            for (int p = 0; p < J->cfg.nprocs; p++)
                if (p != J->cfg.proc && !J->gone[p]) {
                    waiting++;
                    if (first < 0) first = p;
                }
            mp_job_check_network(J);
            stopped_by_launcher(J);
            if (!waiting || J->aborting) break;
            if (mp_job_wall_now() >= deadline) {
                char line[1024], w[160];
                snprintf(line, sizeof line, "every rank here has ended, but %s%s has not finished %.0f s later",
                         mp_job_who(J, first, w, sizeof w), waiting > 1 ? " (and others)" : "", J->cfg.timeout_s);
                mp_job_abort(J, "a process did not finish", line);
                break;
            }
            mp_job_quiet_enter(J);
            mp_net_wait(J->net, 0.25);
            mp_job_pump(J);
        }
    }
    /* what this process sent (data, goodbyes, dumps) must reach the others before it exits: after a
     * clean end every peer is still there and takes it (a send to a peer that died fails, which ends
     * the wait too), so wait as long as the watchdog would — a large payload on a loaded machine can
     * take seconds; after an abort only briefly, for those that answered: the silent ones never will */
    const double deadline = mp_job_wall_now() + (g_mp_sigterm  ? fmin(J->cfg.timeout_s, 0.1)
                                                 : J->aborting ? fmin(J->cfg.timeout_s, 1.0)
                                                               : J->cfg.timeout_s);
    while (mp_net_sends_pending(J->net) && mp_job_wall_now() < deadline) {
        mp_net_wait(J->net, 0.05);
        mp_job_pump(J);
    }
}
