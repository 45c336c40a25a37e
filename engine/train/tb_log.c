#include "train/tb_log.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/tensorboard.h"

struct tr_tb_log {
    tr_tb_writer *w;
    const tr_config *cfg;
    int world;
    dev_device *dev;
};

static void scalar(tr_tb_log *t, const char *tag, double v, int64_t step, int64_t samples, bool vs_samples);

tr_tb_log *train_tb_log_open(const tr_config *cfg, int world, dev_device *d, char *err, size_t errlen) {
    tr_tb_log *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of host memory for the TensorBoard writer");
        return NULL;
    }
    t->cfg = cfg;
    t->world = world;
    t->dev = d;
    t->w = tr_tb_open(cfg->tensorboard_dir, err, errlen);
    if (!t->w) {
        free(t);
        return NULL;
    }
    /* whether iteration-time and throughput below are measured or the twin's cost model's estimate */
    dev_info info = {0};
    if (d) dev_get_info(d, &info);
    scalar(t, "simulated", info.simulated[0] ? 1.0 : 0.0, 0, 0, false);
    return t;
}

/* Writes tag (and "tag vs samples") or, on the first failure, warns and stops writing. */
static void scalar(tr_tb_log *t, const char *tag, double v, int64_t step, int64_t samples, bool vs_samples) {
    if (!t->w) return;
    char err[512], vs[128];
    int rc = tr_tb_scalar(t->w, tag, v, step, err, sizeof err);
    if (!rc && vs_samples) {
        snprintf(vs, sizeof vs, "%s vs samples", tag);
        rc = tr_tb_scalar(t->w, vs, v, samples, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "twinrun: warning: %s; no more TensorBoard events are written\n", err);
        tr_tb_close(t->w);
        t->w = NULL;
    }
}

void train_tb_log_iteration(tr_tb_log *t, const tr_log_line *l) {
    if (!t || l->iteration % t->cfg->tensorboard_log_interval != 0) return;
    const int64_t it = l->iteration, n = l->consumed_samples;
    scalar(t, "learning-rate", l->lr, it, n, true);
    if (l->has_decoupled_lr) scalar(t, "decoupled-learning-rate", l->decoupled_lr, it, n, false);
    scalar(t, "batch-size", l->global_batch_size, it, n, true);
    scalar(t, "lm loss", l->lm_loss, it, n, true);
    /* bf16 and fp32 train without a loss scaler: Megatron logs 1.0 then too */
    if (t->cfg->log_loss_scale_to_tensorboard) scalar(t, "loss-scale", 1.0, it, n, true);
    if (t->cfg->log_world_size_to_tensorboard) scalar(t, "world-size", t->world, it, n, true);
    if (isfinite(l->grad_norm)) scalar(t, "grad-norm", l->grad_norm, it, n, true);
    if (t->cfg->log_memory_to_tensorboard && t->dev) {
        /* no caching allocator: what is reserved is what is allocated */
        scalar(t, "mem-reserved-bytes", (double)dev_mem_used(t->dev), it, n, false);
        scalar(t, "mem-allocated-bytes", (double)dev_mem_used(t->dev), it, n, false);
        scalar(t, "mem-max-allocated-bytes", (double)dev_mem_peak(t->dev), it, n, false);
    }
}

void train_tb_log_interval(tr_tb_log *t, const tr_log_line *avg) {
    if (!t || !t->cfg->log_timers_to_tensorboard) return;
    scalar(t, "iteration-time", avg->elapsed_ms_per_iter / 1000.0, avg->iteration, 0, false);
    if (t->cfg->log_throughput) scalar(t, "throughput", avg->tflops_per_gpu, avg->iteration, 0, false);
}

void train_tb_log_validation(tr_tb_log *t, int64_t iteration, int64_t consumed_samples, double loss) {
    if (!t) return;
    scalar(t, "lm loss validation", loss, iteration, consumed_samples, true);
    if (t->cfg->log_validation_ppl_to_tensorboard)
        scalar(t, "lm loss validation ppl", exp(loss < 20.0 ? loss : 20.0), iteration, consumed_samples, true);
}

void train_tb_log_close(tr_tb_log *t) {
    if (!t) return;
    tr_tb_close(t->w);
    free(t);
}
