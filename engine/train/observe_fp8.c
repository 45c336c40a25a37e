/* FP8 amax spikes as an observer (--fp8-format): after each step the ranks agree on the largest spike any
 * of them saw (llama_fp8.c's check of a pass's own amaxes against its scales, before the reduction that
 * spreads the spike to every rank of the stage), and the reporter names the rank, the tensor and what it
 * does to the scales — a warning, not an error: the step's values saturated, and the next passes
 * quantise with scales the spike lowered (docs/fp8.md). */
#include <stdio.h>
#include <stdlib.h>

#include "train/observers.h"
#include "twinrun/err.h"

typedef struct fp8_obs {
    llama_model *model;
    fault_rank *faults; /* amax_spike faults (NULL: none) */
    coll_comm *world;
    dev_device *dev;
    float *buf;         /* [4] device: the agreement's all-reduces */
    int rank, len;      /* this rank; the history length */
    bool max_algo;      /* --fp8-amax-compute-algo max: a spike stays in the window for len passes */
    tr_diagnosis *diag; /* the summary's, on the reporter; NULL elsewhere */
    bool reporter;
    bool stop; /* --fp8-amax-spike stop */
} fp8_obs;

/* v on every rank reduced with op over the world. */
static void agree(fp8_obs *s, float *v, int n, coll_op op) {
    dev_stream *st = dev_stream_default(s->dev);
    dev_copy_h2d(st, s->buf, v, (size_t)n * sizeof *v);
    coll_all_reduce(s->world, st, s->buf, s->buf, (size_t)n, TR_F32, op);
    dev_copy_d2h(st, v, s->buf, (size_t)n * sizeof *v);
    dev_stream_sync(st);
}

static void step_end(void *state, tr_loop *l) {
    fp8_obs *s = state;
    struct llama_fp8_spike *mine = &s->model->fp8.spike;
    if (l->step_rc != 0) {
        mine->ratio = 0; /* an error ends the loop on every rank alike: no agreement */
        return;
    }
    float top = mine->ratio;
    agree(s, &top, 1, COLL_MAX);
    if (!(top >= LLAMA_FP8_SPIKE_RATIO)) return;
    float who = mine->ratio == top ? (float)s->rank : -1.0f; /* ties: the highest rank */
    agree(s, &who, 1, COLL_MAX);
    float what[4] = {0, 0, 0, 0}; /* layer, module * 3 + role, amax, scale: the named rank's */
    if ((int)who == s->rank)
        what[0] = (float)mine->layer, what[1] = (float)(mine->mod * 3 + mine->role), what[2] = mine->amax,
        what[3] = mine->scale;
    agree(s, what, 4, COLL_SUM);
    mine->ratio = 0;
    static const char *const mods[] = {"qkv", "proj", "fc1", "fc2"}, *const roles[] = {"input", "weight", "grad"};
    const int layer = (int)what[0], mr = (int)what[1];
    char msg[512];
    snprintf(msg, sizeof msg,
             "FP8 amax spike at iteration %lld on rank %d: layer %d %s.%s amax %.6g is %.4gx what its scale %.6g "
             "allowed; its values saturated, and the reduced amax lowers that tensor's scale on every rank of the "
             "stage for the next %d pass%s",
             (long long)l->iteration, (int)who, layer, mods[mr / 3], roles[mr % 3], what[2], top, what[3],
             s->max_algo ? s->len : 1, s->max_algo && s->len > 1 ? "es" : "");
    if (s->stop) { /* every rank agreed on it: the step ends the run before anything saves it */
        l->step_rc = TR_EXIT_FATAL, l->agreed_error = true;
        snprintf(l->err, sizeof l->err, "%s (--fp8-amax-spike stop: resume from the checkpoint before it)", msg);
    } else if (s->reporter) {
        printf("twinrun: warning: %s\n", msg);
        fflush(stdout);
    }
    if (!s->reporter) return;
    if (s->diag && !s->diag->kind[0]) {
        *s->diag = (tr_diagnosis){.kind = "fp8_spike",
                                  .rank = (int)who,
                                  .layer = layer,
                                  .micro = -1,
                                  .iteration = l->iteration,
                                  .time = dev_clock_now(s->dev)};
        snprintf(s->diag->detail, sizeof s->diag->detail, "%s.%s", mods[mr / 3], roles[mr % 3]);
    }
}

/* llama_fp8's hook: an amax_spike fault of this pass multiplies the qkv input's (or its output gradient's)
 * amax of the fault's layer, as an outlier value in that tensor would. */
static bool spike_hook(void *arg, bool forward, float *amax, int n, int l0) {
    fp8_obs *s = arg;
    int layer;
    double factor;
    if (!fault_amax_spike(s->faults, !forward, l0, s->model->dims.nl, &layer, &factor)) return false;
    const int l = layer - l0, t = forward ? l * LLAMA_FP8_MODULES * 2 : l * LLAMA_FP8_MODULES; /* qkv's */
    TR_CHECK(t >= 0 && t < n, "amax_spike: the layer is not on this rank's stage");
    amax[t] = (float)((double)amax[t] * factor);
    return true;
}

static void close_fp8(void *state) {
    fp8_obs *s = state;
    dev_free(s->dev, s->buf);
    free(s);
}

int train_observe_fp8(tr_rank *st, const tr_job *jb) {
    if (!st->model->fp8.on) return 0;
    fp8_obs *s = calloc(1, sizeof *s);
    if (!s) return tr_errf(st->loop.err, sizeof st->loop.err, "out of host memory"), TR_EXIT_FATAL;
    s->model = st->model, s->world = st->groups.world, s->dev = st->dev, s->rank = st->rank, s->faults = st->faults;
    s->len = jb->cfg->fp8_amax_history_len, s->max_algo = jb->cfg->fp8_amax_compute_algo == 0;
    s->reporter = st->reporter, s->stop = jb->cfg->fp8_amax_spike == 1;
    s->diag = st->reporter ? &jb->summary->diag : NULL;
    s->buf = dev_alloc(st->dev, 4 * sizeof(float), "fp8 spike agreement");
    if (!s->buf) {
        free(s);
        return tr_errf(st->loop.err, sizeof st->loop.err, "out of device memory for the FP8 spike check"),
               TR_EXIT_FATAL;
    }
    if (s->reporter && st->model->fp8.shape_note[0]) fprintf(jb->log, "twinrun: note: %s\n", st->model->fp8.shape_note);
    if (s->faults) st->model->fp8.amax_hook = spike_hook, st->model->fp8.amax_hook_arg = s;
    return train_observer_register(st, &(tr_observer){.state = s, .on_step_end = step_end, .close = close_fp8});
}
