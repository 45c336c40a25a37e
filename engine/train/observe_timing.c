/* The step's time on the rank's clock, split into compute, communication and waiting (dev_wait_split):
 * the log's elapsed time (l->seconds) and, with --predict, the last iteration's split in the report. */
#include <stdlib.h>

#include "train/observers.h"
#include "twinrun/err.h"

typedef struct timing_obs {
    dev_device *dev;
    tr_predict *predict; /* NULL without --predict */
    int rank, stage;
    bool reporter;
    double t0, busy0, bubble0, comm0;
    tr_predict_time last; /* the last iteration's simulated split */
} timing_obs;

static void begin(void *state, tr_loop *l) {
    (void)l;
    timing_obs *s = state;
    s->t0 = dev_clock_now(s->dev), s->busy0 = dev_busy_seconds(s->dev);
    dev_wait_split(s->dev, &s->bubble0, &s->comm0);
}

static void step_end(void *state, tr_loop *l) {
    timing_obs *s = state;
    if (l->step_rc) return;
    double bubble1, comm1;
    l->seconds = dev_clock_now(s->dev) - s->t0;
    dev_wait_split(s->dev, &bubble1, &comm1);
    s->last = (tr_predict_time){.step = l->seconds,
                                .compute = dev_busy_seconds(s->dev) - s->busy0,
                                .comm = comm1 - s->comm0,
                                .bubble = bubble1 - s->bubble0};
}

/* --predict: this rank's device counts and last iteration into the job's report. */
static void add_to_report(void *state, const tr_loop *l, int rc) {
    timing_obs *s = state;
    if (rc || !s->predict) return;
    tr_predict *p = s->predict;
    if (s->rank == 0) {
        dev_info info;
        dev_get_info(s->dev, &info);
        snprintf(p->device, sizeof p->device, "%s", info.simulated[0] ? info.simulated : info.name);
        p->capacity = info.capacity;
        p->runtime = info.runtime_bytes;
        p->peak_flops = info.peak_bf16_flops;
        p->flops_per_step = l->flops; /* needs the padded vocabulary, which the model knows */
    }
    if (s->reporter) p->iterations = l->done - l->start;
    train_predict_add_rank(p, s->stage, s->rank, s->dev, &s->last);
}

int train_observe_timing(tr_rank *st, const tr_job *jb) {
    timing_obs *s = calloc(1, sizeof *s);
    if (!s)
        return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the timing observer"), TR_EXIT_FATAL;
    s->dev = st->dev, s->predict = jb->predict, s->rank = st->rank, s->reporter = st->reporter;
    s->stage = st->grid.coord[TR_AXIS_PP];
    return train_observer_register(
        st,
        &(tr_observer){
            .state = s, .on_iteration_begin = begin, .on_step_end = step_end, .on_exit = add_to_report, .close = free});
}
