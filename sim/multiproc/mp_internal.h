/* Inside the multi-process twin's job (multiproc.h): the state its parts share, passed as a pointer.
 *   mp_start.c  start-up (bootstrap, endpoint, hello round) and the end
 *   mp_job.c    messages, the wall-clock watchdog, goodbye
 *   mp_quiet.c  quiescence: the job-wide deadlock
 *   mp_abort.c  the job-wide abort and its blame over every process's flight dumps
 *   mp_coll.c   the collectives' meetings whose members live in several processes
 * below them the transport (mp_transport.c), the bytes on the wire (mp_wire.c) and the bootstrap
 * record exchange (mp_bootstrap.c). */
#ifndef TWINRUN_SIM_MULTIPROC_MP_INTERNAL_H
#define TWINRUN_SIM_MULTIPROC_MP_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "coll/coll_internal.h"
#include "mp_transport.h"
#include "mp_wire.h"
#include "multiproc.h"
#include "sched/sched_internal.h"

typedef struct mp_peer_state {
    mp_peer info;
    bool hello;
    bool bye;           /* said goodbye: every rank of it has ended */
    uint64_t bye_after; /* its ranks' messages (mp_job_ranks_message) sent here before its goodbye */
    uint64_t sent;      /* messages sent to it */
    uint64_t received;  /* messages from it handled here */
    /* The ranks' messages alone, counted both ways: a process keeps sending control messages after
     * its goodbye (IDLE, CONFIRM_OK: it still takes part in quiescence while it waits for the others),
     * so counting every message would let those stand in for a large contribution still on its way
     * (a payload over MP_INLINE_MAX arrives after later small messages) and judge the process gone
     * before its last data arrived. */
    uint64_t ranks_sent, ranks_received;
    int bye_code;
    bool dumped; /* answered an abort with its flight dumps */
    char *dump;
    size_t dump_len;
} mp_peer_state;

struct mp_meetings;

struct mp_job {
    twin_remote remote; /* the hooks twin_run calls, remote.job = this job */
    bool active;
    mp_config cfg;
    mp_net *net;
    mp_peer_state *peers; /* [nprocs] */
    uint64_t id;          /* the same in every process of the job: strays from other jobs are refused */
    bool aborting;
    bool line_reported;         /* the abort's reason is in this process's report already */
    bool mpi;                   /* the bootstrap went through MPI */
    bool mpi_inited;            /* ... and this process called MPI_Init: MPI_Finalize at the end */
    struct sigaction old_term;  /* SIGTERM's handler before the job took it */
    unsigned char *gone;        /* [nprocs] processes that said goodbye and whose messages all arrived */
    bool bye_sent;              /* this process has queued its goodbye to every other */
    mp_msg *early, *early_last; /* messages that came during the hello round, handled afterwards */
    /* quiescence (mp_quiet.c): the messages that can wake a process, counted both ways */
    uint64_t work_sent, work_recv;
    bool quiet; /* waiting with nothing to run, counts unchanged since the last report */
    bool reported;
    uint64_t rep_sent, rep_recv;
    struct mp_quiet_tally *tally; /* process 0: the reports and the round in progress; NULL until the first */
    struct mp_meetings *meetings; /* mp_coll.c: meetings in progress; NULL until the first */
};

/* SIGTERM arrived: mpirun and torchrun stop the survivors this way when a process dies. Set by the
 * signal handler, hence process state (a sig_atomic_t), read by the job's loops. */
extern volatile sig_atomic_t g_mp_sigterm;

/* The process that hosts global rank `rank` (chunks of cfg.chunk ranks dealt round-robin). */
static inline int mp_proc_of(const mp_job *J, int rank) { return rank / J->cfg.chunk % J->cfg.nprocs; }

double mp_job_wall_now(void);
/* "process 2 (ranks 512-767 on host node-7, pid 4242)" */
const char *mp_job_who(const mp_job *J, int proc, char *buf, size_t n);
void mp_job_send(mp_job *J, int proc, mp_msg_type type, int64_t arg, void *payload, size_t len);
/* Handles every message that has arrived; returns how many. */
int mp_job_pump(mp_job *J);

/* ---- the scheduler's hooks (twin_remote; job is the mp_job) ---------------------------------- */
bool mp_job_progress(void *job, bool may_block);             /* mp_job.c */
void mp_job_run_end(void *job, twin_sched *s);               /* mp_job.c */
void mp_job_rank_failed(void *job, const twin_rank *r);      /* mp_abort.c */
void mp_job_hang(void *job, twin_sched *s, const char *why); /* mp_abort.c */

/* Tears the job down (mp_abort.c). `line` goes into this process's report and to the others; `how`
 * (short: "watchdog", "broken pipe", "abort from process 2") says how this process found that the job
 * ends, in the blame's heading or after each process that did not answer. */
void mp_job_abort(mp_job *J, const char *how, const char *line);
/* Aborts the job because of what the network brought (a mismatch, a malformed message). */
void mp_job_abortf(mp_job *J, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The transport's first failure, if any, becomes an abort. */
void mp_job_check_network(mp_job *J);
/* Marks in J->gone the processes that said goodbye and whose messages all arrived (mp_job.c). */
void mp_job_update_gone(mp_job *J);

/* Quiescence (mp_quiet.c): a process about to wait with nothing to run says so to process 0, which
 * declares the job stuck once every process waits and every message sent has arrived — the
 * deadlock of one process, across processes, found at once instead of by the wall-clock watchdog. */
bool mp_job_counts(mp_msg_type t); /* does a message of this type wake its receiver? */
/* Process 0's tally, apart from the messages (tests/twin/test_twin_xproc_quiet.c drives it): each
 * process's latest report, and the round in progress with the counts it summed. A round confirms
 * only those: a process may report again (it worked in between) after the sum and before it
 * answers, and its answer then repeats the newer counts, which were never summed. */
typedef struct mp_quiet_tally {
    int nprocs;
    unsigned char *idle;     /* [nprocs] reported idle, with these counts */
    uint64_t *isent, *irecv; /* [nprocs] the latest reports (one allocation with csent, crecv) */
    uint64_t *csent, *crecv; /* [nprocs] the reports the round in progress summed */
    uint64_t round;
    bool confirming;
    int oks;
} mp_quiet_tally;
mp_quiet_tally *mp_quiet_tally_new(int nprocs);
void mp_quiet_tally_free(mp_quiet_tally *t);
void mp_quiet_note(mp_quiet_tally *t, int p, uint64_t sent, uint64_t recv); /* process p's report */
/* Every process has reported and the sums agree: starts round t->round (true), whose confirmations
 * must repeat the counts summed now. False while a round is on, or when the job may still move. */
bool mp_quiet_start(mp_quiet_tally *t);
/* Process p's answer to `round`: quiet or not, with the counts it confirms. True when this answer
 * completes the round: every process confirmed what was summed, so the job can never move again. */
bool mp_quiet_answer(mp_quiet_tally *t, int p, uint64_t round, bool yes, uint64_t sent, uint64_t recv);
/* Is it a message of the sender's ranks (a contribution, a rank's failure), never sent after its
 * goodbye? Those are what a peer must have received before it judges the sender gone. */
bool mp_job_ranks_message(mp_msg_type t);
void mp_job_quiet_enter(mp_job *J);
/* IDLE, CONFIRM, CONFIRM_OK and STUCK messages. */
void mp_job_quiet_message(mp_job *J, const mp_msg *m);

/* ---- meetings across processes (mp_coll.c) ------------------------------------------------- */
typedef struct mp_inst mp_inst;
/* The collectives' hooks (twin_remote): a new group's remote fields, a launched operation whose
 * meeting spans processes (false: both ends of a send/recv are here), one withdrawn by a rank that
 * ended, a group's meetings aborted. */
void mp_coll_group_init(void *job, coll_group *g);
bool mp_coll_post(void *job, coll_pending *p);
void mp_coll_withdraw(void *job, coll_pending *p);
void mp_coll_group_abort(void *job, coll_group *g, twin_rank *timed_out, double t);
/* A contribution message from process `from`; takes ownership of payload (malloc'd). */
void mp_coll_deliver(mp_job *J, int from, unsigned char *payload, size_t len);
/* Something of this process waits on another process. */
bool mp_coll_waiting(const mp_job *J);
typedef struct mp_coll_wait {
    double wall_start; /* when this process's first member arrived (wall clock) */
    int missing_proc;  /* a process whose members have not arrived */
    double watchdog_s; /* the waiting rank's collective timeout (coll_set_timeout) */
    char what[256];    /* "rank 0 waits in all_reduce seq 3 on 'tp' for 1 rank of process 2 (rank 2 first)" */
} mp_coll_wait;
/* The oldest wait on other processes (limited to members of processes marked in `gone`, if given). */
bool mp_coll_oldest(const mp_job *J, const unsigned char *gone, mp_coll_wait *w);
void mp_coll_free(mp_job *J);

#endif
