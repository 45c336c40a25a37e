/* --exit-signal-handler as an observer (signal_exit.h): a SIGTERM this process received, or a scenario's
 * preemption of this rank, stops every rank after this iteration; the checkpoint observer, registered
 * before, saves on the way out, and then the reporter says why, as Megatron does. A preempted rank without
 * the handler dies as SIGTERM's default action would kill its process. */
#include <stdlib.h>

#include "train/observers.h"
#include "train/signal_exit.h"
#include "twinrun/err.h"

typedef struct signal_obs {
    bool handler; /* --exit-signal-handler */
    dev_device *dev;
    coll_comm *world;
    FILE *log;             /* the reporter's; NULL elsewhere */
    tr_train_summary *sum; /* the reporter's; NULL elsewhere */
} signal_obs;

static bool should_stop(void *state, tr_loop *l) {
    signal_obs *s = state;
    if (l->preempted && !s->handler) {
        dev_rank_note("killed by SIGTERM (no --exit-signal-handler)");
        dev_rank_abort(143);
    }
    if (!s->handler || !train_any_rank(s->dev, s->world, l->preempted || train_sigterm_pending())) return false;
    l->stop = TR_STOP_SIGNAL;
    return true;
}

static int stopped(void *state, tr_loop *l) {
    signal_obs *s = state;
    if (l->stop != TR_STOP_SIGNAL || !s->log) return 0;
    fprintf(s->log, " exiting program after receiving SIGTERM.\n");
    s->sum->signal_exit_iteration = l->iteration, s->sum->signal_exit_time = dev_clock_now(s->dev);
    return 0;
}

int train_observe_signal(tr_rank *st, const tr_job *jb) {
    signal_obs *s = calloc(1, sizeof *s);
    if (!s)
        return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the signal handler"), TR_EXIT_FATAL;
    s->handler = jb->cfg->exit_signal_handler, s->dev = st->dev, s->world = st->groups.world;
    s->log = st->reporter ? jb->log : NULL;
    s->sum = st->reporter ? jb->summary : NULL;
    return train_observer_register(
        st, &(tr_observer){.state = s, .should_stop = should_stop, .on_stop = stopped, .close = free});
}
