/* Quiescence of a multi-process twin: the job-wide version of the twin's deadlock. A process that
 * is about to wait with nothing to run reports how many waking messages it has sent and received;
 * when every process has reported and the sums agree (nothing is on its way), process 0 asks them
 * all to confirm that nothing changed since, and if all do, the job can never move again: it is
 * aborted at once with the blame, instead of after the wall-clock watchdog. A process that did
 * anything since its report has other counts, so a round never confirms a job that still moves.
 * A confirmation carries the counts it confirms: a process may have worked and reported again
 * after process 0 summed its older report (a message then still on its way), and only the counts
 * that were summed may be confirmed — the round keeps them (mp_quiet_tally's csent, crecv), since
 * the newer report replaces the older one in the tally before the answer comes. */
#include <stdlib.h>
#include <string.h>

#include "mp_internal.h"
#include "twinrun/err.h"

bool mp_job_counts(mp_msg_type t) {
    return t == MP_CONTRIB || t == MP_BYE || t == MP_FAIL || t == MP_ABORT || t == MP_DUMP;
}

static bool still_quiet(const mp_job *J) {
    return J->quiet && J->reported && J->rep_sent == J->work_sent && J->rep_recv == J->work_recv;
}

static void stuck(mp_job *J) {
    mp_job_abort(J, "deadlock across processes",
                 "deadlock: no rank of any process can run and no message is on "
                 "its way (each waits for another); aborting the job");
}

mp_quiet_tally *mp_quiet_tally_new(int nprocs) {
    mp_quiet_tally *t = calloc(1, sizeof *t);
    TR_CHECK(t != NULL, "out of host memory for the quiescence counts");
    t->nprocs = nprocs;
    t->idle = calloc((size_t)nprocs, 1);
    t->isent = calloc((size_t)nprocs * 4, sizeof *t->isent); /* the four count arrays in one block */
    TR_CHECK(t->idle && t->isent, "out of host memory for the quiescence counts");
    t->irecv = t->isent + nprocs;
    t->csent = t->irecv + nprocs;
    t->crecv = t->csent + nprocs;
    return t;
}

void mp_quiet_tally_free(mp_quiet_tally *t) {
    if (!t) return;
    free(t->idle);
    free(t->isent);
    free(t);
}

void mp_quiet_note(mp_quiet_tally *t, int p, uint64_t sent, uint64_t recv) {
    t->idle[p] = 1;
    t->isent[p] = sent;
    t->irecv[p] = recv;
}

bool mp_quiet_start(mp_quiet_tally *t) {
    if (t->confirming) return false;
    uint64_t sent = 0, recv = 0;
    for (int p = 0; p < t->nprocs; p++) {
        if (!t->idle[p]) return false;
        sent += t->isent[p];
        recv += t->irecv[p];
    }
    if (sent != recv) return false;
    /* what the confirmations must repeat: a report that comes in later (isent, irecv) was not summed */
    memcpy(t->csent, t->isent, sizeof *t->csent * (size_t)t->nprocs);
    memcpy(t->crecv, t->irecv, sizeof *t->crecv * (size_t)t->nprocs);
    t->confirming = true;
    t->round++;
    t->oks = 0;
    return true;
}

bool mp_quiet_answer(mp_quiet_tally *t, int p, uint64_t round, bool yes, uint64_t sent, uint64_t recv) {
    if (!t->confirming || round != t->round) return false;
    if (!yes || sent != t->csent[p] || recv != t->crecv[p]) {
        t->confirming = false; /* retried at process 0's next wait */
        return false;
    }
    if (++t->oks < t->nprocs) return false;
    t->confirming = false;
    return true;
}

static void answer(mp_job *J, int p, uint64_t round, bool yes, uint64_t sent, uint64_t recv) {
    if (J->aborting || !mp_quiet_answer(J->tally, p, round, yes, sent, recv)) return;
    for (int q = 1; q < J->cfg.nprocs; q++) mp_job_send(J, q, MP_STUCK, 0, NULL, 0);
    stuck(J);
}

/* Process 0: every process idle and every message arrived? Then ask them to confirm. */
static void check(mp_job *J) {
    if (J->aborting || !mp_quiet_start(J->tally)) return;
    const uint64_t round = J->tally->round;
    for (int p = 1; p < J->cfg.nprocs; p++) mp_job_send(J, p, MP_CONFIRM, (int64_t)round, NULL, 0);
    answer(J, 0, round, still_quiet(J), J->rep_sent, J->rep_recv);
}

static void note(mp_job *J, int p, uint64_t sent, uint64_t recv) {
    if (!J->tally) J->tally = mp_quiet_tally_new(J->cfg.nprocs);
    mp_quiet_note(J->tally, p, sent, recv);
}

void mp_job_quiet_enter(mp_job *J) {
    if (J->aborting) return;
    J->quiet = true;
    if (!J->reported || J->rep_sent != J->work_sent || J->rep_recv != J->work_recv) {
        J->reported = true;
        J->rep_sent = J->work_sent;
        J->rep_recv = J->work_recv;
        if (J->cfg.proc == 0) {
            note(J, 0, J->rep_sent, J->rep_recv);
        } else {
            unsigned char *b = malloc(8);
            TR_CHECK(b != NULL, "out of host memory for a message");
            for (int i = 0; i < 8; i++) b[i] = (unsigned char)(J->rep_recv >> (8 * i));
            mp_job_send(J, 0, MP_IDLE, (int64_t)J->rep_sent, b, 8);
        }
    }
    if (J->cfg.proc == 0 && J->tally) check(J);
}

void mp_job_quiet_message(mp_job *J, const mp_msg *m) {
    const int from = (int)m->h.src_proc;
    if (J->aborting) return;
    switch (m->h.type) {
    case MP_IDLE:
        if (J->cfg.proc != 0 || m->h.payload_len != 8) return;
        uint64_t recv = 0;
        for (int i = 7; i >= 0; i--) recv = recv << 8 | m->payload[i];
        note(J, from, (uint64_t)m->h.arg, recv);
        return;
    case MP_CONFIRM: { /* [quiet, the reported sent and received counts it confirms] */
        unsigned char *b = malloc(17);
        TR_CHECK(b != NULL, "out of host memory for a message");
        b[0] = still_quiet(J);
        for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(J->rep_sent >> (8 * i));
        for (int i = 0; i < 8; i++) b[9 + i] = (unsigned char)(J->rep_recv >> (8 * i));
        mp_job_send(J, from, MP_CONFIRM_OK, m->h.arg, b, 17);
        return;
    }
    case MP_CONFIRM_OK: {
        if (J->cfg.proc != 0 || m->h.payload_len != 17) return;
        uint64_t sent = 0, recv = 0;
        for (int i = 7; i >= 0; i--) sent = sent << 8 | m->payload[1 + i], recv = recv << 8 | m->payload[9 + i];
        answer(J, from, (uint64_t)m->h.arg, m->payload[0] == 1, sent, recv);
        return;
    }
    case MP_STUCK:
        if (from == 0) stuck(J);
        return;
    default: return;
    }
}
