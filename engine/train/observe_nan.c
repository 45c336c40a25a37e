/* The NaN probe as an observer (nan_probe.h): probing while the step runs, and when the step's check
 * fired, where the first non-finite value came from, into the error and the reporter's diagnosis. */
#include <stdlib.h>
#include <string.h>

#include "train/nan_probe.h"
#include "train/observers.h"
#include "twinrun/err.h"

typedef struct nan_obs {
    tr_nan_probe probe;
    llama_model *model;
    int rank;
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

/* With --fp8-format: the FP8 scales of the origin's layer, as its rank holds them (the rank of the origin
 * contributes them to a sum over the world, every other rank zeros), appended to where: an infinite or zero
 * scale, or one far from its neighbours, points at the FP8 tensor that made the value. */
static void fp8_scales_of_origin(nan_obs *s, const tr_nan_origin *o, char *where, size_t n) {
    llama_model *m = s->model;
    if (!m->fp8.on || o->rank < 0 || o->site == LLAMA_SITE_LOSS) return;
    float v[12] = {0}; /* per module: input, weight, output gradient */
    float *dv = dev_alloc(s->dev, sizeof v, "NaN origin's FP8 scales");
    TR_CHECK(dv != NULL, "out of device memory for the NaN origin's FP8 scales");
    const llama_fp8 *f = &m->fp8;
    const int l = o->layer - m->dims.l0;
    if (o->rank == s->rank && l >= 0 && l < m->dims.nl) {
        const size_t count = llama_fp8_state_count(m);
        float *st = malloc(count * sizeof *st);
        TR_CHECK(st != NULL, "out of host memory");
        llama_fp8_get_state(m, st);
        const float *fs = st + (size_t)f->len * (size_t)(f->nfwd + f->nbwd), *bs = fs + 2 * (size_t)f->nfwd;
        for (int mod = 0; mod < LLAMA_FP8_MODULES; mod++) {
            v[mod * 3 + 0] = fs[(l * LLAMA_FP8_MODULES + mod) * 2];
            v[mod * 3 + 1] = fs[(l * LLAMA_FP8_MODULES + mod) * 2 + 1];
            v[mod * 3 + 2] = bs[l * LLAMA_FP8_MODULES + mod];
        }
        free(st);
    }
    dev_stream *st = dev_stream_default(s->dev);
    dev_copy_h2d(st, dv, v, sizeof v);
    coll_all_reduce(s->groups->world, st, dv, dv, 12, TR_F32, COLL_SUM);
    dev_copy_d2h(st, v, dv, sizeof v);
    dev_stream_sync(st);
    dev_free(s->dev, dv);
    static const char *const mods[] = {"qkv", "proj", "fc1", "fc2"};
    size_t len = strlen(where);
    len += (size_t)snprintf(where + len, len < n ? n - len : 0, "; its layer's FP8 scales (input/weight/grad):");
    for (int mod = 0; mod < LLAMA_FP8_MODULES && len < n; mod++)
        len += (size_t)snprintf(where + len, n - len, " %s %.4g/%.4g/%.4g", mods[mod], v[mod * 3], v[mod * 3 + 1],
                                v[mod * 3 + 2]);
}

/* A NaN/Inf stopped the iteration: a collective over the world, as every rank's check fired alike. */
static void diagnose(nan_obs *s, tr_loop *l) {
    l->nan_iters++;
    tr_nan_origin origin;
    train_nan_probe_origin(&s->probe, s->groups, &origin);
    tr_grid og;
    char where[512], why[600];
    const bool known = origin.rank >= 0 && !tr_grid_init(&og, s->cfg, s->world, origin.rank, NULL, 0);
    train_nan_origin_describe(&origin, known ? &og : NULL, where, sizeof where);
    fp8_scales_of_origin(s, &origin, where, sizeof where);
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
    s->cfg = cfg, s->groups = &st->groups, s->dev = st->dev, s->world = st->world, s->model = st->model;
    s->rank = st->rank;
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
