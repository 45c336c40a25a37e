/* The multi-process twin's transport: one libfabric RDM endpoint with tagged messages per
 * process (providers tcp;ofi_rxm on any network, shm inside a host; FI_PROVIDER picks), carrying
 * the messages of mp_wire.h between the processes of a job.
 *
 * Progress is driven by the caller (mp_net_progress, mp_net_wait), never by a thread: the twin stays
 * single-threaded and deterministic, and sends queue instead of blocking (mp_net_send never waits).
 * Failures of the network (a peer that cannot be reached, a stray message) are remembered, not
 * fatal: mp_net_error says what went wrong first, and the job decides. */
#ifndef TWINRUN_SIM_MULTIPROC_MP_TRANSPORT_H
#define TWINRUN_SIM_MULTIPROC_MP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mp_wire.h"

typedef struct mp_net mp_net;

typedef struct mp_msg {
    mp_header h;
    unsigned char *payload; /* h.payload_len bytes (NULL when 0) */
    struct mp_msg *next;
} mp_msg;

/* Opens the endpoint. NULL with err naming the provider and the fix (FI_PROVIDER unknown, ...). */
mp_net *mp_net_open(char *err, size_t errlen);
void mp_net_close(mp_net *f);
const char *mp_net_provider(const mp_net *f);
/* This endpoint's address for the peers (bootstrap record). */
int mp_net_address(const mp_net *f, unsigned char *addr, uint32_t *len, char *err, size_t errlen);
/* Makes peers[p] (p != self) reachable; job tags every message so strays from another job are refused. */
int mp_net_connect(mp_net *f, const mp_peer *peers, int nprocs, int self, uint64_t job, char *err, size_t errlen);

/* Queues a message to process `proc`; payload (len bytes, malloc'd or NULL) is owned by the transport from now. */
void mp_net_send(mp_net *f, int proc, mp_msg_type type, int64_t arg, void *payload, size_t len);
/* Handles whatever completed; returns how many completions it handled. */
int mp_net_progress(mp_net *f);
/* Waits up to timeout_s seconds of wall time for a completion, then handles what came. */
void mp_net_wait(mp_net *f, double timeout_s);
/* The next received message, in arrival order, or NULL. Free it with mp_msg_free. */
mp_msg *mp_net_next(mp_net *f);
void mp_msg_free(mp_msg *m);
/* Messages not yet handed to the network or not yet completed. */
size_t mp_net_sends_pending(const mp_net *f);
/* The first network failure: its text, and the peer it concerns (-1 when unknown); NULL if none. */
const char *mp_net_error(const mp_net *f, int *proc);
/* Forgets that failure (the job found it harmless: mp_job_check_network). */
void mp_net_clear_error(mp_net *f);
/* Peer `proc` said goodbye, every message of its ranks has arrived, and this process has queued its
 * own goodbye to it: it may leave at any moment, so new messages to it are dropped (those queued
 * stay: they include that goodbye) and a failure concerning it is no error. */
void mp_net_peer_departed(mp_net *f, int proc);

#endif
