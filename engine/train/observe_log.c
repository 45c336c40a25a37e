/* The reporter's record of the run (Megatron logs from the last rank): the summary, one JSON line and
 * TensorBoard's values per iteration, every --log-interval Megatron's line with the loss and time
 * averaged over the interval, and the validation blocks. */
#include <stdlib.h>
#include <time.h>

#include "train/observers.h"
#include "train/tb_log.h"
#include "train/train_log.h"
#include "twinrun/err.h"

typedef struct log_obs {
    const tr_config *cfg;
    FILE *log;
    tr_train_summary *sum;
    int world;
    FILE *metrics;          /* --metrics-jsonl; NULL without */
    tr_tb_log *tb;          /* --tensorboard-dir; NULL without */
    char simulated[64];     /* the device spec behind simulated timings; "" for wall time */
    double loss_acc, t_acc; /* over the current logging interval */
    int n_acc;
} log_obs;

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void begin(void *state, tr_loop *l) {
    log_obs *s = state;
    if (l->iteration == l->start + 1) s->sum->first_iteration_wall = wall_seconds(); /* start-up ends */
}

/* The iteration's own line; the interval's averages replace its loss and times. */
static tr_log_line line_of(const log_obs *s, const tr_loop *l) {
    const double dt = l->seconds;
    return (tr_log_line){
        .iteration = l->iteration,
        .train_iters = l->iters,
        .consumed_samples = l->consumed,
        .elapsed_ms_per_iter = dt * 1000.0,
        .tflops_per_gpu = dt > 0 ? l->flops / dt / 1e12 / s->world : 0.0,
        .lr = l->lr,
        .has_decoupled_lr = l->decoupled,
        .decoupled_lr = l->decoupled_lr,
        .global_batch_size = s->cfg->global_batch_size,
        .lm_loss = l->res.loss,
        .grad_norm = l->res.grad_norm,
        .skipped_iters = 0,
        .nan_iters = l->nan_iters,
        .simulated = s->simulated[0] ? s->simulated : NULL,
    };
}

static void iteration_end(void *state, tr_loop *l) {
    log_obs *s = state;
    tr_train_summary *sum = s->sum;
    if (sum->iteration_loss) sum->iteration_loss[l->iteration] = l->res.loss;
    if (l->iteration == l->start + 1) sum->first_loss = l->res.loss;
    sum->last_loss = l->res.loss;
    sum->last_grad_norm = l->res.grad_norm;
    sum->iterations = l->iteration;
    s->loss_acc += l->res.loss;
    s->t_acc += l->seconds;
    s->n_acc++;
    tr_log_line line = line_of(s, l);
    if (s->metrics) train_log_write_json(s->metrics, &line);
    train_tb_log_iteration(s->tb, &line);
}

static void log_interval(void *state, tr_loop *l) {
    log_obs *s = state;
    tr_log_line line = line_of(s, l);
    line.lm_loss = s->loss_acc / s->n_acc;
    line.elapsed_ms_per_iter = s->t_acc / s->n_acc * 1000.0;
    line.tflops_per_gpu = s->t_acc > 0 ? l->flops / (s->t_acc / s->n_acc) / 1e12 / s->world : 0.0;
    train_tb_log_interval(s->tb, &line);
    char ts[64];
    train_log_timestamp(ts, sizeof ts, wall_seconds());
    train_log_write_line(s->log, ts, &line, s->cfg->log_throughput);
    s->loss_acc = s->t_acc = 0;
    s->n_acc = 0;
}

static void validation(void *state, const tr_loop *l, int64_t it, double loss, bool final) {
    log_obs *s = state;
    if (final) {
        char at[64];
        snprintf(at, sizeof at, "iteration %lld on validation set", (long long)it);
        train_log_write_validation_at(s->log, at, loss);
    } else {
        train_log_write_validation(s->log, it, loss);
    }
    train_tb_log_validation(s->tb, it, l->consumed, loss);
    s->sum->last_valid_loss = loss;
}

static void close_log(void *state) {
    log_obs *s = state;
    if (s->metrics) fclose(s->metrics);
    train_tb_log_close(s->tb);
    free(s);
}

int train_observe_log(tr_rank *st, const tr_job *jb) {
    const tr_config *cfg = jb->cfg;
    char *err = st->loop.err;
    const size_t errlen = sizeof st->loop.err;
    log_obs *s = calloc(1, sizeof *s);
    if (!s) return tr_errf(err, errlen, "out of host memory for the log"), TR_EXIT_FATAL;
    s->cfg = cfg, s->log = jb->log, s->sum = jb->summary, s->world = st->world;
    dev_info info;
    dev_get_info(st->dev, &info);
    snprintf(s->simulated, sizeof s->simulated, "%s", info.simulated);
    int rc = train_observer_register(st, &(tr_observer){.state = s,
                                                        .on_iteration_begin = begin,
                                                        .on_iteration_end = iteration_end,
                                                        .on_log_interval = log_interval,
                                                        .on_validation = validation,
                                                        .close = close_log});
    if (rc) return rc;
    if (cfg->metrics_jsonl[0] && !(s->metrics = fopen(cfg->metrics_jsonl, "w")))
        return tr_errf(err, errlen, "--metrics-jsonl %s: cannot open for writing", cfg->metrics_jsonl), TR_EXIT_USAGE;
    if (cfg->tensorboard_dir[0] && !(s->tb = train_tb_log_open(cfg, st->world, st->dev, err, errlen)))
        return TR_EXIT_USAGE;
    return 0;
}
