/* Inside the multi-process twin's job (multiproc.h): the state its three parts share.
 *   mp_start.c  start-up (bootstrap, endpoint, hello round) and the end
 *   mp_job.c    messages, the wall-clock watchdog, goodbye
 *   mp_abort.c  the job-wide abort and its blame over every process's flight dumps */
#ifndef TWINRUN_SIM_FABRIC_XJOB_H
#define TWINRUN_SIM_FABRIC_XJOB_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "mp_transport.h"
#include "multiproc.h"

typedef struct mp_peer_state {
    mp_peer info;
    bool hello;
    bool bye;            /* said goodbye: every rank of it has ended */
    uint64_t bye_after;  /* messages it sent here before its goodbye */
    uint64_t sent;       /* messages sent to it */
    uint64_t received;   /* messages from it handled here */
    int bye_code;
    bool dumped;         /* answered an abort with its flight dumps */
    char *dump;
    size_t dump_len;
} mp_peer_state;

typedef struct mp_job {
    bool active;
    mp_config cfg;
    mp_net *net;
    mp_peer_state *peers;        /* [nprocs] */
    uint64_t id;         /* the same in every process of the job: strays from other jobs are refused */
    bool aborting;
    bool line_reported;  /* the abort's reason is in this process's report already */
    bool mpi;            /* MPI was initialised for the bootstrap */
    unsigned char *gone; /* [nprocs] processes that said goodbye and whose messages all arrived */
    mp_msg *early, *early_last; /* messages that came during the hello round, handled afterwards */
    /* quiescence (mp_quiet.c): the messages that can wake a process, counted both ways */
    uint64_t work_sent, work_recv;
    bool quiet;          /* waiting with nothing to run, counts unchanged since the last report */
    bool reported;
    uint64_t rep_sent, rep_recv;
    unsigned char *idle; /* process 0: [nprocs] reported idle, with these counts */
    uint64_t *isent, *irecv;
    uint64_t round;
    bool confirming;
    int oks;
} mp_job;

extern mp_job g_mp_job; /* process state, like the scheduler's: one job per process */
/* SIGTERM arrived: mpirun and torchrun stop the survivors this way when a process dies */
extern volatile sig_atomic_t g_mp_sigterm;

double mp_job_wall_now(void);
/* "process 2 (ranks 512-767 on host node-7, pid 4242)" */
const char *mp_job_who(int proc, char *buf, size_t n);
void mp_job_send(int proc, mp_msg_type type, int64_t arg, void *payload, size_t len);
/* Handles every message that has arrived; returns how many. */
int mp_job_pump(void);
/* Tears the job down (mp_abort.c). `line` goes into this process's report and to the others; `why`
 * (short) heads the blame. */
void mp_job_abort(const char *why, const char *line);
/* The transport's first failure, if any, becomes an abort. */
void mp_job_check_network(void);

/* Quiescence (mp_quiet.c): a process about to wait with nothing to run says so to process 0, which
 * declares the job stuck once every process waits and every message sent has arrived — the
 * deadlock of one process, across processes, found at once instead of by the wall-clock watchdog. */
bool mp_job_counts(mp_msg_type t); /* does a message of this type wake its receiver? */
void mp_job_quiet_enter(void);
/* IDLE, CONFIRM, CONFIRM_OK and STUCK messages. */
void mp_job_quiet_message(const mp_msg *m);

#endif
