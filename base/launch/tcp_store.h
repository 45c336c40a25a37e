/* The rendezvous store: a tiny key-value server that global rank 0 runs on MASTER_ADDR:MASTER_PORT
 * (like torch's TCPStore), through which each communicator's rank 0 hands its NCCL unique id to
 * the other members (and the multi-process twin its processes' addresses). No shared file system
 * needed; format in store_proto.h.
 *
 * Unlike torch's TCPStore it is closed to strangers: it listens only on MASTER_ADDR's interface (or
 * TWINRUN_STORE_BIND), every request carries a MAC made with the job's token (TWINRUN_STORE_TOKEN,
 * which scripts/launch_llama3.sh generates), sizes and connection counts are bounded, a connection
 * that does not authenticate in time is closed, dead peers are found by TCP keepalive, and every
 * refusal is counted (the first 16 are printed); nothing a client sends can crash the server.
 *
 * Clients retry connecting until their deadline (rank 0 may start last), and every failure says
 * what to check: an address that does not resolve, a port nobody listens on, a port in use by
 * something else, a wrong token, a key nobody published in time. Nothing waits forever. */
#ifndef TWINRUN_BASE_LAUNCH_TCP_STORE_H
#define TWINRUN_BASE_LAUNCH_TCP_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "launch/launch_vars.h"

typedef struct tr_store_conf {
    const char *host;           /* where clients dial: MASTER_ADDR */
    int port;                   /* MASTER_PORT; the server takes 0 as "any free port" (tr_store_server_port) */
    const char *bind;           /* where the server listens: an address or name of this host, "*" for every
                          interface; NULL or "": host */
    const unsigned char *token; /* the job's token; empty: no secret (the server warns once) */
    size_t token_len;
    double handshake_s; /* server: a connection must authenticate and finish its request within this
                           (0: 30 s); a get that then waits for its key may wait as long as it likes */
    int max_conns;      /* server: open connections at most (0: 4096); more are closed at once */
    bool quiet;         /* server: do not print refusals (tests count them: tr_store_server_refusals) */
} tr_store_conf;

/* The configuration a job's launch variables give (MASTER_ADDR/PORT, TWINRUN_STORE_TOKEN,
 * TWINRUN_STORE_BIND); it points into *v. */
tr_store_conf tr_store_conf_of(const tr_launch_vars *v);

/* Makes a connection a member's (heartbeat.h; key "heartbeat.<rank>", who: host and pid): the open
 * socket after the server's 'K', or -1 with err. */
int tr_store_join(const tr_store_conf *c, const char *key, const char *who, double timeout_s, char *err, size_t errlen);

typedef struct tr_store_server tr_store_server;

/* Listens on c->bind (else c->host) and serves from a background thread. NULL with err (port in use,
 * an address that is not this host's, ...). */
tr_store_server *tr_store_serve(const tr_store_conf *c, char *err, size_t errlen);
int tr_store_server_port(const tr_store_server *s);
/* Connections refused so far (no or wrong token, malformed or oversized frames, too slow, too many). */
long tr_store_server_refusals(const tr_store_server *s);
/* Stops the thread and closes every connection. */
void tr_store_server_stop(tr_store_server *s);

/* Stores value[len] under key. 0, or -1 with err. */
int tr_store_set(const tr_store_conf *c, const char *key, const void *value, size_t len, double timeout_s, char *err,
                 size_t errlen);
/* Waits until key exists (at most timeout_s seconds in all) and copies exactly `len` bytes of it
 * into value. 0, or -1 with err. */
int tr_store_get(const tr_store_conf *c, const char *key, void *value, size_t len, double timeout_s, char *err,
                 size_t errlen);

#endif
