/* Inside the multi-process twin's job (xproc.h): the state its three parts share.
 *   xstart.c  start-up (bootstrap, endpoint, hello round) and the end
 *   xjob.c    messages, the wall-clock watchdog, goodbye
 *   xabort.c  the job-wide abort and its blame over every process's flight dumps */
#ifndef TWINRUN_SIM_FABRIC_XJOB_H
#define TWINRUN_SIM_FABRIC_XJOB_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "fab.h"
#include "xproc.h"

typedef struct xpeer {
    xw_peer info;
    bool hello;
    bool bye;            /* said goodbye: every rank of it has ended */
    uint64_t bye_after;  /* ranks' messages (xjob_ranks_message) it sent here before its goodbye */
    uint64_t sent;       /* messages sent to it */
    uint64_t received;   /* messages from it handled here */
    /* The ranks' messages alone, counted both ways: a process keeps sending control messages after
     * its goodbye (IDLE, CONFIRM_OK: it still takes part in quiescence while it waits for the others),
     * so counting every message would let those stand in for a large contribution still on its way
     * (a payload over XW_INLINE_MAX arrives after later small messages) and judge the process gone
     * before its last data arrived. */
    uint64_t ranks_sent, ranks_received;
    int bye_code;
    bool dumped;         /* answered an abort with its flight dumps */
    char *dump;
    size_t dump_len;
} xpeer;

typedef struct xjob {
    bool active;
    xproc_config cfg;
    fab *fab;
    xpeer *peers;        /* [nprocs] */
    uint64_t id;         /* the same in every process of the job: strays from other jobs are refused */
    bool aborting;
    bool line_reported;  /* the abort's reason is in this process's report already */
    bool mpi;            /* MPI was initialised for the bootstrap */
    unsigned char *gone; /* [nprocs] processes that said goodbye and whose messages all arrived */
    fab_msg *early, *early_last; /* messages that came during the hello round, handled afterwards */
    /* quiescence (xquiet.c): the messages that can wake a process, counted both ways */
    uint64_t work_sent, work_recv;
    bool quiet;          /* waiting with nothing to run, counts unchanged since the last report */
    bool reported;
    uint64_t rep_sent, rep_recv;
    unsigned char *idle; /* process 0: [nprocs] reported idle, with these counts */
    uint64_t *isent, *irecv;
    uint64_t round;
    bool confirming;
    int oks;
} xjob;

extern xjob g_xjob; /* process state, like the scheduler's: one job per process */
/* SIGTERM arrived: mpirun and torchrun stop the survivors this way when a process dies */
extern volatile sig_atomic_t g_xjob_sigterm;

double xjob_wall_now(void);
/* "process 2 (ranks 512-767 on host node-7, pid 4242)" */
const char *xjob_who(int proc, char *buf, size_t n);
void xjob_send(int proc, xw_type type, int64_t arg, void *payload, size_t len);
/* Handles every message that has arrived; returns how many. */
int xjob_pump(void);
/* Tears the job down (xabort.c). `line` goes into this process's report and to the others; `why`
 * (short) heads the blame. */
void xjob_abort(const char *why, const char *line);
/* The transport's first failure, if any, becomes an abort. */
void xjob_check_network(void);

/* Quiescence (xquiet.c): a process about to wait with nothing to run says so to process 0, which
 * declares the job stuck once every process waits and every message sent has arrived — the
 * deadlock of one process, across processes, found at once instead of by the wall-clock watchdog. */
bool xjob_counts(xw_type t); /* does a message of this type wake its receiver? */
/* Is it a message of the sender's ranks (a contribution, a rank's failure), never sent after its
 * goodbye? Those are what a peer must have received before it judges the sender gone. */
bool xjob_ranks_message(xw_type t);
void xjob_quiet_enter(void);
/* IDLE, CONFIRM, CONFIRM_OK and STUCK messages. */
void xjob_quiet_message(const fab_msg *m);

#endif
