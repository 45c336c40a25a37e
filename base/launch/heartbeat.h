/* The heartbeat beside the rendezvous connection: every rank of a real job keeps one connection to the
 * store (tcp_store.h) open for the job's life, so that when a rank's process vanishes — killed, crashed,
 * its node gone — every other rank hears within seconds who it was, instead of finding out when its
 * next collective times out (--distributed-timeout-minutes, 10 minutes by default).
 *
 * Each member and the server send a byte a second (TR_HEARTBEAT_PERIOD_S). The server (in rank 0's
 * process) tells every other member, once, about the first member that ends without leaving cleanly:
 * its connection closed (kill -9, a crash, a fatal error's exit(): the kernel closes its sockets) or it
 * was silent for TR_HEARTBEAT_TIMEOUT_S (its node went down, the process is stopped). A rank that
 * returns from its entry leaves quietly, whatever its status: the ranks stop together on the errors
 * they agree on (a NaN's exit 16), and none may turn another's status into a lost peer's. A member that hears
 * nothing from the server for as long, or whose connection closes, blames rank 0, the server's
 * process. Either way the member's callback runs on the heartbeat's thread; the real launcher's dumps
 * the flight recorder and ends the process (cuda/launch_cuda.c). Wire format: store_proto.h. */
#ifndef TWINRUN_BASE_LAUNCH_HEARTBEAT_H
#define TWINRUN_BASE_LAUNCH_HEARTBEAT_H

#include "launch/tcp_store.h"

#define TR_HEARTBEAT_PERIOD_S 1.0
#define TR_HEARTBEAT_TIMEOUT_S 5.0

typedef struct tr_heartbeat tr_heartbeat;

/* Called on the heartbeat's thread when a peer is gone: `what` names the rank and how it ended ("rank 1
 * (node7 pid 4242) is gone: ..."), `rank` is that rank. Meant to end the process; if it returns, the
 * heartbeat stops watching. */
typedef void (*tr_heartbeat_fn)(void *arg, int rank, const char *what);

/* Joins the job's heartbeat as `rank` (connecting within timeout_s, as a store request does) and
 * watches from a thread of its own. NULL with err. */
tr_heartbeat *tr_heartbeat_start(const tr_store_conf *c, int rank, double timeout_s, tr_heartbeat_fn fn, void *arg,
                                 char *err, size_t errlen);
/* Leaves quietly and stops the thread. NULL is fine. */
void tr_heartbeat_stop(tr_heartbeat *h);

#endif
