/* The multi-process twin's transport: one libfabric RDM endpoint with tagged messages per
 * process (providers tcp;ofi_rxm on any network, shm inside a host; FI_PROVIDER picks), carrying
 * the messages of xwire.h between the processes of a job.
 *
 * Progress is driven by the caller (fab_progress, fab_wait), never by a thread: the twin stays
 * single-threaded and deterministic, and sends queue instead of blocking (fab_send never waits).
 * Failures of the network (a peer that cannot be reached, a stray message) are remembered, not
 * fatal: fab_error says what went wrong first, and the job decides. */
#ifndef TWINRUN_SIM_FABRIC_FAB_H
#define TWINRUN_SIM_FABRIC_FAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xwire.h"

typedef struct fab fab;

typedef struct fab_msg {
    xw_header h;
    unsigned char *payload; /* h.payload_len bytes (NULL when 0) */
    struct fab_msg *next;
} fab_msg;

/* Opens the endpoint. NULL with err naming the provider and the fix (FI_PROVIDER unknown, ...). */
fab *fab_open(char *err, size_t errlen);
void fab_close(fab *f);
const char *fab_provider(const fab *f);
/* This endpoint's address for the peers (bootstrap record). */
int fab_address(const fab *f, unsigned char *addr, uint32_t *len, char *err, size_t errlen);
/* Makes peers[p] (p != self) reachable; job tags every message so strays from another job are refused. */
int fab_connect(fab *f, const xw_peer *peers, int nprocs, int self, uint64_t job, char *err, size_t errlen);

/* Queues a message to process `proc`; payload (len bytes, malloc'd or NULL) is owned by fab from now. */
void fab_send(fab *f, int proc, xw_type type, int64_t arg, void *payload, size_t len);
/* Handles whatever completed; returns how many completions it handled. */
int fab_progress(fab *f);
/* Waits up to timeout_s seconds of wall time for a completion, then handles what came. */
void fab_wait(fab *f, double timeout_s);
/* The next received message, in arrival order, or NULL. Free it with fab_msg_free. */
fab_msg *fab_next(fab *f);
void fab_msg_free(fab_msg *m);
/* Messages not yet handed to the network or not yet completed. */
size_t fab_sends_pending(const fab *f);
/* The first network failure: its text, and the peer it concerns (-1 when unknown); NULL if none. */
const char *fab_error(const fab *f, int *proc);

#endif
