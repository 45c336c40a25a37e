#include "train/trainer.h"

#include <string.h>
#include <time.h>

#include "model/llama.h"
#include "model/llama_hf.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/train_log.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct train_state {
    dev_device *dev;
    coll_comm *world;
    llama_model *model;
    tr_optimizer *optim;
    FILE *metrics;
} train_state;

static void train_state_free(train_state *st) {
    if (st->metrics) fclose(st->metrics);
    optim_destroy(st->optim, st->model);
    llama_destroy(st->model);
    if (st->world) coll_comm_destroy(st->world);
    if (st->dev) dev_close(st->dev);
}

static int setup(train_state *st, const tr_config *cfg, char *err, size_t errlen) {
    int world = cfg->tensor_model_parallel_size * cfg->pipeline_model_parallel_size * cfg->context_parallel_size;
    if (world != 1) {
        tr_errf(err, errlen,
                "TP %d x PP %d x CP %d: this trainer runs one rank; parallel layouts are not built yet "
                "(use --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --context-parallel-size 1)",
                cfg->tensor_model_parallel_size, cfg->pipeline_model_parallel_size, cfg->context_parallel_size);
        return TR_EXIT_USAGE;
    }
    st->dev = dev_open(0, 0, err, errlen);
    if (!st->dev) return TR_EXIT_FATAL;
    const int ranks[1] = {0};
    st->world = coll_comm_create(st->dev, ranks, 1, 0, "world", err, errlen);
    if (!st->world) return TR_EXIT_FATAL;
    st->model = llama_create(cfg, st->dev, dev_stream_default(st->dev), err, errlen);
    if (!st->model) return TR_EXIT_USAGE;
    if (cfg->hf_load[0]) {
        if (llama_hf_load(st->model, cfg->hf_load, err, errlen)) return TR_EXIT_USAGE;
    } else {
        llama_init_params(st->model, cfg->seed, cfg->init_method_std);
    }
    st->optim = optim_create(st->model, cfg, err, errlen);
    if (!st->optim) return TR_EXIT_FATAL;
    if (cfg->metrics_jsonl[0]) {
        st->metrics = fopen(cfg->metrics_jsonl, "w");
        if (!st->metrics) {
            tr_errf(err, errlen, "--metrics-jsonl %s: cannot open for writing", cfg->metrics_jsonl);
            return TR_EXIT_USAGE;
        }
    }
    return 0;
}

int tr_train(const tr_config *cfg, tr_batch_source *src, FILE *log, tr_train_summary *sum, char *err,
             size_t errlen) {
    memset(sum, 0, sizeof *sum);
    train_state st = {0};
    tr_lr_schedule sched;
    int rc = setup(&st, cfg, err, errlen);
    if (!rc && tr_lr_schedule_init(&sched, cfg, err, errlen)) rc = TR_EXIT_USAGE;
    if (rc) {
        train_state_free(&st);
        return rc;
    }
    const int dp = 1;
    const int num_micro = cfg->global_batch_size / (cfg->micro_batch_size * dp);
    const int64_t iters = cfg->train_iters > 0 ? cfg->train_iters : cfg->train_samples / cfg->global_batch_size;
    const double flops = tr_flops_per_iteration(cfg, st.model->dims.V);
    int64_t consumed = 0;
    double loss_acc = 0, t_acc = 0;
    int n_acc = 0, nan_iters = 0;
    for (int64_t it = 1; it <= iters; it++) {
        double lr = tr_lr_at(&sched, consumed);
        double t0 = dev_clock_now(st.dev);
        tr_step_result res;
        rc = train_step(st.model, st.optim, cfg, num_micro, lr, src->next, src->ctx, &res, err, errlen);
        if (rc == TR_EXIT_NAN) nan_iters++;
        if (rc) break;
        double dt = dev_clock_now(st.dev) - t0;
        consumed += cfg->global_batch_size;
        if (it == 1) sum->first_loss = res.loss;
        sum->last_loss = res.loss;
        sum->last_grad_norm = res.grad_norm;
        sum->iterations = it;
        loss_acc += res.loss;
        t_acc += dt;
        n_acc++;
        tr_log_line line = {
            .iteration = it, .train_iters = iters, .consumed_samples = consumed,
            .elapsed_ms_per_iter = dt * 1000.0, .tflops_per_gpu = dt > 0 ? flops / dt / 1e12 / dp : 0.0,
            .lr = lr, .global_batch_size = cfg->global_batch_size, .lm_loss = res.loss,
            .grad_norm = res.grad_norm, .skipped_iters = 0, .nan_iters = nan_iters,
        };
        if (st.metrics) tr_log_write_json(st.metrics, &line);
        if (it % cfg->log_interval == 0) {
            /* Megatron averages the loss and the time over the logging interval */
            line.lm_loss = loss_acc / n_acc;
            line.elapsed_ms_per_iter = t_acc / n_acc * 1000.0;
            line.tflops_per_gpu = t_acc > 0 ? flops / (t_acc / n_acc) / 1e12 / dp : 0.0;
            char ts[64];
            tr_log_timestamp(ts, sizeof ts, wall_seconds());
            tr_log_write_line(log, ts, &line, cfg->log_throughput);
            loss_acc = t_acc = 0;
            n_acc = 0;
        }
        if (src->next_valid && cfg->eval_iters > 0 && cfg->eval_interval > 0 && it % cfg->eval_interval == 0) {
            double vloss;
            rc = train_evaluate(st.model, cfg->eval_iters, num_micro, src->next_valid, src->ctx, &vloss, err, errlen);
            if (rc) break;
            tr_log_write_validation(log, it, vloss);
            sum->last_valid_loss = vloss;
        }
        if (cfg->exit_interval > 0 && it % cfg->exit_interval == 0) break;
    }
    sum->consumed_samples = consumed;
    sum->device_peak_bytes = dev_mem_peak(st.dev);
    train_state_free(&st);
    return rc < 0 ? TR_EXIT_FATAL : rc;
}
