/* --log-straggler as an observer (straggler.h): at each log interval, a collective over the world names the
 * slowest rank, before the interval's log line (the log observer's on_log_interval) says the averages. */
#include <stdlib.h>

#include "train/observers.h"
#include "train/straggler.h"
#include "twinrun/err.h"

typedef struct straggler_obs {
    tr_straggler strag;
    const tr_config *cfg;
    const tr_groups *groups;
    dev_device *dev;
    FILE *log;             /* the reporter's; NULL elsewhere */
    tr_train_summary *sum; /* the reporter's; NULL elsewhere */
} straggler_obs;

static void train_begin(void *state, const tr_loop *l) {
    straggler_obs *s = state;
    train_straggler_init(&s->strag, s->dev, l->start + 1);
}

static void iteration_end(void *state, tr_loop *l) {
    straggler_obs *s = state;
    if (!s->cfg->log_straggler || l->iteration % s->cfg->log_interval != 0) return;
    train_straggler_report(&s->strag, s->groups, s->dev, l->iteration, s->log);
    if (s->sum)
        s->sum->straggler_rank = s->strag.worst_rank, s->sum->straggler_ratio = s->strag.worst_ratio,
        s->sum->straggler_time = s->strag.first_listed;
}

int train_observe_straggler(tr_rank *st, const tr_job *jb) {
    straggler_obs *s = calloc(1, sizeof *s);
    if (!s)
        return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the straggler report"), TR_EXIT_FATAL;
    s->cfg = jb->cfg, s->groups = &st->groups, s->dev = st->dev;
    s->log = st->reporter ? jb->log : NULL;
    s->sum = st->reporter ? jb->summary : NULL;
    return train_observer_register(
        st,
        &(tr_observer){.state = s, .on_train_begin = train_begin, .on_iteration_end = iteration_end, .close = free});
}
