/* The fault plan's step as an observer: fault_step_begin before the step (and whether a scenario
 * preempts this rank now, for the signal observer), fault_step_end with the step's busy time after a step
 * that went well. */
#include <stdlib.h>

#include "train/observers.h"
#include "twinrun/err.h"

typedef struct faults_obs {
    fault_rank *fr;
    dev_device *dev;
    double busy0; /* dev_busy_seconds before the fault plan's step began */
} faults_obs;

static void begin(void *state, tr_loop *l) {
    faults_obs *s = state;
    s->busy0 = dev_busy_seconds(s->dev);
    fault_step_begin(s->fr, l->iteration);
    l->preempted = fault_preempt(s->fr);
}

static void step_end(void *state, tr_loop *l) {
    faults_obs *s = state;
    if (!l->step_rc) fault_step_end(s->fr, dev_busy_seconds(s->dev) - s->busy0);
}

int train_observe_faults(tr_rank *st, const tr_job *jb) {
    (void)jb;
    faults_obs *s = calloc(1, sizeof *s);
    if (!s)
        return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the fault observer"), TR_EXIT_FATAL;
    s->fr = st->faults, s->dev = st->dev;
    return train_observer_register(
        st, &(tr_observer){.state = s, .on_iteration_begin = begin, .on_step_end = step_end, .close = free});
}
