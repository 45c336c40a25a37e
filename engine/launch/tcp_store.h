/* The rendezvous store: a tiny key-value server that global rank 0 runs on MASTER_ADDR:MASTER_PORT
 * (like torch's TCPStore), through which each communicator's rank 0 hands its NCCL unique id to
 * the other members. No shared file system needed; format in store_proto.h.
 *
 * Clients retry connecting until their deadline (rank 0 may start last), and every failure says
 * what to check: an address that does not resolve, a port nobody listens on, a port in use by
 * something else, a key nobody published in time. Nothing waits forever. */
#ifndef TWINRUN_ENGINE_LAUNCH_TCP_STORE_H
#define TWINRUN_ENGINE_LAUNCH_TCP_STORE_H

#include <stddef.h>

typedef struct tr_store_server tr_store_server;

/* Listens on `port` of every interface (0: a free port, see tr_store_server_port) and serves from
 * a background thread. NULL with err (port in use, ...). */
tr_store_server *tr_store_serve(int port, char *err, size_t errlen);
int tr_store_server_port(const tr_store_server *s);
/* Stops the thread and closes every connection. */
void tr_store_server_stop(tr_store_server *s);

/* Stores value[len] under key. 0, or -1 with err. */
int tr_store_set(const char *host, int port, const char *key, const void *value, size_t len, double timeout_s,
                 char *err, size_t errlen);
/* Waits until key exists (at most timeout_s seconds in all) and copies exactly `len` bytes of it
 * into value. 0, or -1 with err. */
int tr_store_get(const char *host, int port, const char *key, void *value, size_t len, double timeout_s, char *err,
                 size_t errlen);

#endif
