/* Megatron's --exit-interval and --exit-duration-in-mins as an observer: stop after this iteration; every
 * rank stops at the same one once any rank's clock (wall time, or the twin's simulated time) has run past
 * the duration. The end-of-training save (the checkpoint observer's on_train_end) keeps the work. */
#include <stdlib.h>

#include "train/observers.h"
#include "twinrun/err.h"

typedef struct exit_obs {
    const tr_config *cfg;
    dev_device *dev;
    coll_comm *world;
    FILE *log;    /* the reporter's; NULL elsewhere */
    double start; /* the rank's clock when training began */
} exit_obs;

static void train_begin(void *state, const tr_loop *l) {
    (void)l;
    exit_obs *s = state;
    s->start = dev_clock_now(s->dev);
}

static bool should_stop(void *state, tr_loop *l) {
    exit_obs *s = state;
    const tr_config *cfg = s->cfg;
    if (cfg->exit_interval > 0 && l->iteration % cfg->exit_interval == 0) return l->stop = TR_STOP_EXIT, true;
    if (cfg->exit_duration_in_mins > 0 &&
        train_any_rank(s->dev, s->world, (dev_clock_now(s->dev) - s->start) / 60.0 > cfg->exit_duration_in_mins)) {
        if (s->log)
            fprintf(s->log, " exiting program after %g minutes (--exit-duration-in-mins)\n",
                    cfg->exit_duration_in_mins);
        return l->stop = TR_STOP_EXIT, true;
    }
    return false;
}

int train_observe_exit(tr_rank *st, const tr_job *jb) {
    exit_obs *s = calloc(1, sizeof *s);
    if (!s) return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the exit checks"), TR_EXIT_FATAL;
    s->cfg = jb->cfg, s->dev = st->dev, s->world = st->groups.world;
    s->log = st->reporter ? jb->log : NULL;
    return train_observer_register(
        st, &(tr_observer){.state = s, .on_train_begin = train_begin, .should_stop = should_stop, .close = free});
}
