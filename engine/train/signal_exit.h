/* --exit-signal-handler: SIGTERM (what a scheduler sends before it preempts a job) lets the ranks
 * finish the iteration, save a checkpoint and exit 0, as Megatron's DistributedSignalHandler does.
 *
 * No handler and no global flag: while a job runs, SIGTERM is blocked in the calling thread (and so in
 * every thread the job starts), where it stays pending; each rank asks whether one is pending after
 * each iteration, and the ranks agree through an all-reduce (one rank seeing it is enough). */
#ifndef TWINRUN_ENGINE_TRAIN_SIGNAL_EXIT_H
#define TWINRUN_ENGINE_TRAIN_SIGNAL_EXIT_H

#include <signal.h>
#include <stdbool.h>

typedef struct tr_signal_guard {
    bool active;
    sigset_t old_mask;
} tr_signal_guard;

/* Blocks SIGTERM for the job when `enable` (--exit-signal-handler); a no-op otherwise. */
void train_signal_guard_begin(tr_signal_guard *g, bool enable);
/* Consumes a SIGTERM the job acted on (so it does not kill the process once unblocked) and restores
 * the caller's mask. */
void train_signal_guard_end(tr_signal_guard *g);
/* True while a SIGTERM is pending for this process. */
bool train_sigterm_pending(void);

#endif
