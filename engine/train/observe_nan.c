/* The NaN probe as an observer (nan_probe.h): probing while the step runs, and when the step's check
 * fired, where the first non-finite value came from, into the error and the reporter's diagnosis. */
#include <stdlib.h>

#include "train/nan_probe.h"
#include "train/observers.h"
#include "twinrun/err.h"

typedef struct nan_obs {
    tr_nan_probe probe;
    const tr_config *cfg;
    const tr_groups *groups;
    dev_device *dev;
    int world;
    tr_diagnosis *diag; /* the summary's, on the reporter; NULL elsewhere */
} nan_obs;

static void begin(void *state, tr_loop *l) {
    (void)l;
    train_nan_probe_begin(&((nan_obs *)state)->probe);
}

/* A NaN/Inf stopped the iteration: a collective over the world, as every rank's check fired alike. */
static void diagnose(nan_obs *s, tr_loop *l) {
    l->nan_iters++;
    tr_nan_origin origin;
    train_nan_probe_origin(&s->probe, s->groups, &origin);
    tr_grid og;
    char where[256], why[600];
    const bool known = origin.rank >= 0 && !tr_grid_init(&og, s->cfg, s->world, origin.rank, NULL, 0);
    train_nan_origin_describe(&origin, known ? &og : NULL, where, sizeof where);
    snprintf(why, sizeof why, "%.599s", l->err);
    snprintf(l->err, sizeof l->err, "iteration %lld: %s. First non-finite value: %s", (long long)l->iteration, why,
             where);
    if (s->diag) {
        *s->diag = (tr_diagnosis){.kind = "nan",
                                  .rank = origin.rank,
                                  .layer = origin.layer,
                                  .micro = origin.micro,
                                  .iteration = l->iteration,
                                  .time = dev_clock_now(s->dev)};
        snprintf(s->diag->detail, sizeof s->diag->detail, "%s",
                 origin.rank >= 0 ? train_nan_site_name(origin.site) : "");
    }
}

static void step_end(void *state, tr_loop *l) {
    nan_obs *s = state;
    train_nan_probe_end(&s->probe);
    if (l->step_rc == TR_EXIT_NAN) diagnose(s, l);
}

static void close_nan(void *state) {
    nan_obs *s = state;
    train_nan_probe_free(&s->probe);
    free(s);
}

int train_observe_nan(tr_rank *st, const tr_job *jb) {
    const tr_config *cfg = jb->cfg;
    nan_obs *s = calloc(1, sizeof *s);
    if (!s) return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory for the NaN probe"), TR_EXIT_FATAL;
    s->cfg = cfg, s->groups = &st->groups, s->dev = st->dev, s->world = st->world;
    s->diag = st->reporter ? &jb->summary->diag : NULL;
    if (train_nan_probe_init(&s->probe, st->model, st->num_micro, cfg->num_layers, cfg->check_for_nan_in_loss_and_grad,
                             st->faults)) {
        tr_errf(st->loop.err, sizeof st->loop.err, "out of device memory for the NaN/Inf probes: %s",
                dev_last_error(st->dev));
        close_nan(s); /* after the message: freeing may replace the device's last error */
        return TR_EXIT_FATAL;
    }
    return train_observer_register(
        st, &(tr_observer){.state = s, .on_iteration_begin = begin, .on_step_end = step_end, .close = close_nan});
}
