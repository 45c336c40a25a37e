/* Asynchronous collectives and the watchdog thread (the default mode; TWINRUN_COLL_SYNC=1 turns it off).
 *
 * As PyTorch's ProcessGroupNCCL does it: each communicator has its own CUDA stream; a collective
 * called with the caller's stream s is ordered after the work already on s (an event recorded on s,
 * waited for by the communicator's stream), runs on the communicator's stream between a start and an
 * end event, and the work enqueued on s afterwards waits for the end event. So the host never waits,
 * and every later kernel or copy on s sees the result, as if the collective had run on s itself.
 *
 * The "work" of each call (its flight record, events, enqueue time, deadline) stays in an in-flight
 * table until its end event has passed. One watchdog thread per process (started with the first
 * asynchronous communicator) polls that table every TWINRUN_COLL_WATCHDOG_POLL_MS (default 100):
 * cudaEventQuery on the start and end events (the flight record becomes started, then completed, with
 * the event's own GPU time: coll_watchdog.c's "anchors" map GPU event times onto the host clock) and
 * ncclCommGetAsyncError of every communicator. A work still unfinished `timeout` seconds after it was
 * enqueued (--distributed-timeout-minutes; TWINRUN_COLL_TIMEOUT_S), or a communicator with an
 * asynchronous error, ends the process: flight dump (status blocked, the format `blame` reads),
 * ncclCommAbort of every communicator, exit status 1 — once, whichever thread sees it first. With
 * TWINRUN_COLL_ON_TIMEOUT=return it aborts and lets the process go on: later calls return COLL_TIMEOUT.
 *
 * Locking: one mutex per device (tr_cu_wd_lock) guards the table, the event pool and every use of an
 * NCCL communicator handle by either thread (the main thread's NCCL calls, the watchdog's polls and
 * aborts), so an abort never frees a communicator under a call. The lock is never held across a wait.
 *
 * Memory: dev_free waits for the in-flight collectives' streams before it frees (tr_wd_quiesce), so a
 * buffer is never freed under a collective still reading or writing it; stream-ordered scratch freed
 * on the caller's stream is safe already (the caller's stream waits for the end event). */
#ifndef TWINRUN_CUDA_COLL_WATCHDOG_H
#define TWINRUN_CUDA_COLL_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>

#include "coll_comm.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"

typedef struct tr_cu_watchdog tr_cu_watchdog;
typedef struct tr_cu_work tr_cu_work;

/* Gives c its stream and ready event and puts it under the device's watchdog, which starts (thread,
 * first time anchor) with the first communicator. Call before c is used, from the main thread. */
void tr_cu_wd_attach(dev_device *d, coll_comm *c);
/* Waits for c's stream, retires its works, takes it off the watchdog, destroys its stream and event. */
void tr_cu_wd_detach(coll_comm *c);

/* Takes the lock for a call on c. While the watchdog is ending the process it waits (for good: the
 * process exits). Returns false, without the lock, when c is dead (aborted, timed out, failed). */
bool tr_cu_wd_lock(coll_comm *c);
void tr_cu_wd_unlock(coll_comm *c);
/* The same lock without a communicator (group ends, coll_abort): waits out an ending watchdog only. */
void tr_cu_wd_lock_any(tr_cu_watchdog *w);
void tr_cu_wd_unlock_any(tr_cu_watchdog *w);

/* Under the lock, before the NCCL call: orders c's stream after s, records the start event, adds the
 * work (flight record `rec`; its sequence number and op for messages) to the in-flight table and, if
 * `hang`, enqueues the injected GPU hang (coll_hang.cu) after the start event. */
tr_cu_work *tr_cu_wd_begin(coll_comm *c, dev_stream *s, uint64_t rec, uint64_t seq, const char *op, bool hang);
/* Under the lock, once NCCL has enqueued the call (after ncclGroupEnd in a group) — or failed to: records
 * the end event on c's stream and makes s wait for it. Every work that tr_cu_wd_begin returned must come
 * here exactly once (the table frees it afterwards, never before). */
void tr_cu_wd_end(tr_cu_work *w, dev_stream *s);

/* Under the lock: ncclCommAbort of c (if it is still alive); `why` is what its later calls return; its
 * unfinished works' records become aborted. */
void tr_cu_wd_abort_comm(coll_comm *c, coll_status why);

/* The main thread is between ncclGroupStart and ncclGroupEnd with calls on w's communicators: with
 * TWINRUN_COLL_ON_TIMEOUT=return the watchdog waits for the group's end before it aborts (NCCL's
 * pending group still points at the communicators). Under the lock. */
void tr_cu_wd_group_open(tr_cu_watchdog *w, bool open);

/* The process's end after a timeout or an NCCL error (from either thread; the first caller does it):
 * `what` says which call; c (may be NULL) gets status `why`, every other communicator COLL_ABORTED.
 * Dumps the flight recorder, releases injected hangs, aborts every communicator and exits 1 — or,
 * with TWINRUN_COLL_ON_TIMEOUT=return, returns. Without the lock. */
void tr_cu_wd_fire(tr_cu_watchdog *w, const char *what, coll_comm *c, coll_status why);

/* A peer's process is gone (the heartbeat, base/launch/heartbeat.h; `what` names it): the end of
 * tr_cu_wd_fire without waiting for a collective to time out — this rank's flight recorder dumped, every
 * communicator aborted, exit 1 (also with TWINRUN_COLL_ON_TIMEOUT=return: the job cannot go on). Without
 * a watchdog running (before the first asynchronous communicator, TWINRUN_COLL_SYNC=1) it only says so
 * and exits 1. From any thread; never returns. */
_Noreturn void tr_cu_peer_lost(const char *what);

/* True while a watchdog ends the process: dev_rank_abort waits then (the watchdog's exit wins), so a
 * main thread that fails on the aborted communicators does not race the watchdog's exit. */
bool tr_cu_process_ending(void);

#endif
