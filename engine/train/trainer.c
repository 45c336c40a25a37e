#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/llama.h"
#include "model/llama_hf.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/grid.h"
#include "train/checkpoint.h"
#include "train/memory_report.h"
#include "train/step.h"
#include "train/train_log.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What every rank shares: the config and where the last rank reports. Ranks only read it, except
 * the reporting rank, which fills the summary and the error. */
typedef struct job {
    const tr_config *cfg;
    FILE *log;
    tr_train_summary *summary;
    tr_data *data; /* the datasets, built once; each rank reads through its own view */
    size_t peak;   /* largest device peak of any rank */
    char err[1024 + 32]; /* "rank N: " and a rank's 1024-byte message */
} job;

typedef struct rank_state {
    tr_grid grid;
    tr_groups groups;
    dev_device *dev;
    llama_model *model;
    tr_optimizer *optim;
    tr_batch_source src;
    bool have_src;
    FILE *metrics;
} rank_state;

static void rank_state_free(rank_state *st) {
    if (st->metrics) fclose(st->metrics);
    if (st->have_src) st->src.close(st->src.ctx);
    optim_destroy(st->optim, st->model);
    llama_destroy(st->model);
    tr_groups_destroy(&st->groups);
    if (st->dev) dev_close(st->dev);
}

static int setup(rank_state *st, const job *jb, int rank, int world, bool reporter, char *err, size_t errlen) {
    const tr_config *cfg = jb->cfg;
    if (tr_grid_init(&st->grid, cfg, world, rank, err, errlen)) return TR_EXIT_USAGE;
    if (cfg->context_parallel_size > 1 && cfg->reset_position_ids)
        return tr_errf(err, errlen, "--context-parallel-size %d with --reset-position-ids is not supported yet "
                                    "(the all-gathered attention assumes positions 0..seq-1)",
                       cfg->context_parallel_size),
               TR_EXIT_USAGE;
    st->dev = dev_open(0, 0, err, errlen);
    if (!st->dev) return TR_EXIT_FATAL;
    if (tr_groups_create(&st->groups, &st->grid, st->dev, err, errlen)) return TR_EXIT_FATAL;
    const tr_grid *g = &st->grid;
    int dp_total = g->size[TR_AXIS_DP] * g->size[TR_AXIS_CP];
    llama_layout lay = {.tp = g->size[TR_AXIS_TP], .tp_rank = g->coord[TR_AXIS_TP], .pp = g->size[TR_AXIS_PP],
                        .pp_rank = g->coord[TR_AXIS_PP], .cp = g->size[TR_AXIS_CP], .cp_rank = g->coord[TR_AXIS_CP],
                        .slots = g->size[TR_AXIS_PP] - g->coord[TR_AXIS_PP]};
    size_t pad = cfg->use_distributed_optimizer ? (size_t)dp_total : 1;
    st->model = llama_create_shard(cfg, &lay, pad, st->groups.tp, lay.cp > 1 ? st->groups.cp : NULL, st->dev,
                                   dev_stream_default(st->dev), err, errlen);
    if (!st->model) return TR_EXIT_USAGE;
    if (cfg->hf_load[0]) {
        if (llama_hf_load(st->model, cfg->hf_load, err, errlen)) return TR_EXIT_USAGE;
    } else {
        llama_init_params(st->model, cfg->seed, cfg->init_method_std);
    }
    st->optim = optim_create(st->model, cfg, g, err, errlen);
    if (!st->optim) return TR_EXIT_FATAL;
    if (tr_batch_source_open(&st->src, cfg, jb->data, g->coord[TR_AXIS_DP], g->size[TR_AXIS_DP], err, errlen))
        return TR_EXIT_USAGE;
    st->have_src = true;
    if (reporter && cfg->metrics_jsonl[0]) {
        st->metrics = fopen(cfg->metrics_jsonl, "w");
        if (!st->metrics)
            return tr_errf(err, errlen, "--metrics-jsonl %s: cannot open for writing", cfg->metrics_jsonl),
                   TR_EXIT_USAGE;
    }
    return 0;
}

/* Megatron's --exit-duration-in-mins: every rank stops at the same iteration once any rank's clock
 * (wall time, or the twin's simulated time) has run past the limit. */
static bool exit_duration_reached(rank_state *st, double start, double minutes) {
    float *flag = dev_alloc(st->dev, sizeof(float), "exit-duration flag");
    TR_CHECK(flag != NULL, "out of device memory for a flag");
    float h = (dev_clock_now(st->dev) - start) / 60.0 > minutes ? 1.0f : 0.0f;
    dev_copy_h2d(dev_stream_default(st->dev), flag, &h, sizeof h);
    coll_all_reduce(st->groups.world, dev_stream_default(st->dev), flag, flag, 1, TR_F32, COLL_MAX);
    dev_copy_d2h(dev_stream_default(st->dev), &h, flag, sizeof h);
    dev_stream_sync(dev_stream_default(st->dev));
    dev_free(st->dev, flag);
    return h > 0.5f;
}

static int train_rank(int rank, int world, void *arg) {
    job *jb = arg;
    const tr_config *cfg = jb->cfg;
    const bool reporter = rank == world - 1; /* Megatron logs from the last rank */
    char err[1024] = "";
    rank_state st;
    memset(&st, 0, sizeof st);
    tr_lr_schedule sched;
    int rc = setup(&st, jb, rank, world, reporter, err, sizeof err);
    if (!rc && tr_lr_schedule_init(&sched, cfg, err, sizeof err)) rc = TR_EXIT_USAGE;
    tr_train_summary *sum = jb->summary;
    const tr_grid *g = &st.grid;
    const tr_parallel par = {&st.grid, &st.groups};
    const int num_micro = rc ? 0 : cfg->global_batch_size / (cfg->micro_batch_size * g->size[TR_AXIS_DP]);
    const int64_t iters = cfg->train_iters > 0 ? cfg->train_iters : cfg->train_samples / cfg->global_batch_size;
    const double flops = rc ? 0 : tr_flops_per_iteration(cfg, st.model->dims.V);
    tr_run_position pos = {0, 0, 0};
    if (!rc && cfg->load[0]) {
        int loaded = 0;
        if (tr_ckpt_load(st.model, st.optim, cfg, g, &pos, &loaded, err, sizeof err)) rc = TR_EXIT_USAGE;
        else if (loaded && st.src.set_position(st.src.ctx, pos.consumed_train, pos.consumed_valid, err, sizeof err))
            rc = TR_EXIT_USAGE;
        if (!rc && reporter)
            fprintf(jb->log, loaded ? " loaded checkpoint from %s at iteration %lld\n"
                                    : " could not find a checkpoint in %s: training from scratch\n",
                    cfg->load, (long long)pos.iteration);
    }
    int64_t consumed = pos.consumed_train;
    double loss_acc = 0, t_acc = 0;
    int n_acc = 0, nan_iters = 0;
    int64_t saved_at = pos.iteration, it = pos.iteration;
    const double start = st.dev ? dev_clock_now(st.dev) : 0.0;
    for (it = pos.iteration + 1; !rc && it <= iters; it++) {
        double lr = tr_lr_at(&sched, consumed);
        double t0 = dev_clock_now(st.dev);
        tr_step_result res;
        rc = train_step(st.model, st.optim, cfg, &par, num_micro, lr, st.src.next, st.src.ctx, &res, err, sizeof err);
        if (rc == TR_EXIT_NAN) nan_iters++;
        if (rc) break;
        double dt = dev_clock_now(st.dev) - t0;
        consumed += cfg->global_batch_size;
        if (reporter) {
            if (it == pos.iteration + 1) sum->first_loss = res.loss;
            sum->last_loss = res.loss;
            sum->last_grad_norm = res.grad_norm;
            sum->iterations = it;
        }
        loss_acc += res.loss;
        t_acc += dt;
        n_acc++;
        tr_log_line line = {
            .iteration = it, .train_iters = iters, .consumed_samples = consumed,
            .elapsed_ms_per_iter = dt * 1000.0, .tflops_per_gpu = dt > 0 ? flops / dt / 1e12 / world : 0.0,
            .lr = lr, .global_batch_size = cfg->global_batch_size, .lm_loss = res.loss,
            .grad_norm = res.grad_norm, .skipped_iters = 0, .nan_iters = nan_iters,
        };
        if (st.metrics) tr_log_write_json(st.metrics, &line);
        if (it % cfg->log_interval == 0) {
            /* Megatron averages the loss and the time over the logging interval */
            line.lm_loss = loss_acc / n_acc;
            line.elapsed_ms_per_iter = t_acc / n_acc * 1000.0;
            line.tflops_per_gpu = t_acc > 0 ? flops / (t_acc / n_acc) / 1e12 / world : 0.0;
            if (reporter) {
                char ts[64];
                tr_log_timestamp(ts, sizeof ts, wall_seconds());
                tr_log_write_line(jb->log, ts, &line, cfg->log_throughput);
            }
            loss_acc = t_acc = 0;
            n_acc = 0;
        }
        if (st.src.next_valid && cfg->eval_iters > 0 && cfg->eval_interval > 0 && it % cfg->eval_interval == 0) {
            double vloss;
            rc = train_evaluate(st.model, &par, cfg->eval_iters, num_micro, st.src.next_valid, st.src.ctx, &vloss, err,
                                sizeof err);
            if (rc) break;
            if (reporter) {
                tr_log_write_validation(jb->log, it, vloss);
                sum->last_valid_loss = vloss;
            }
        }
        if (cfg->save[0] && cfg->save_interval > 0 && it % cfg->save_interval == 0) {
            tr_run_position now = {it, consumed, st.src.valid_consumed(st.src.ctx)};
            if ((rc = tr_ckpt_save(st.model, st.optim, cfg, g, &st.groups, &sched, &now, err, sizeof err) ? TR_EXIT_FATAL : 0))
                break;
            saved_at = it;
            if (reporter) fprintf(jb->log, " saved checkpoint at iteration %lld to %s\n", (long long)it, cfg->save);
        }
        if (cfg->exit_interval > 0 && it % cfg->exit_interval == 0) {
            it++;
            break;
        }
        if (cfg->exit_duration_in_mins > 0 && exit_duration_reached(&st, start, cfg->exit_duration_in_mins)) {
            if (reporter) fprintf(jb->log, " exiting program after %g minutes (--exit-duration-in-mins)\n", cfg->exit_duration_in_mins);
            it++;
            break; /* the end-of-training save below keeps the work */
        }
    }
    int64_t last = it - 1;
    /* Megatron saves once more when training ends between save intervals */
    if (!rc && cfg->save[0] && last > saved_at) {
        tr_run_position now = {last, consumed, st.src.valid_consumed(st.src.ctx)};
        rc = tr_ckpt_save(st.model, st.optim, cfg, g, &st.groups, &sched, &now, err, sizeof err) ? TR_EXIT_FATAL : 0;
        if (!rc && reporter) fprintf(jb->log, " saved checkpoint at iteration %lld to %s\n", (long long)last, cfg->save);
    }
    if (reporter) sum->consumed_samples = consumed;
    if (!rc && (rank == 0 || reporter)) { /* the first stage is the most loaded; the last reports */
        tr_memory_report mr;
        tr_memory_report_of(&mr, st.model, st.optim);
        tr_memory_report_print(jb->log, rank, &mr,
                               tr_megatron_weight_optimizer_bytes(cfg, st.model->dims.V, g->size[TR_AXIS_DP]));
    }
    if (st.dev && dev_mem_peak(st.dev) > jb->peak) jb->peak = dev_mem_peak(st.dev);
    if (rc) {
        if (rc < 0) rc = TR_EXIT_FATAL;
        /* every failing rank says so; the report keeps the first message */
        if (!jb->err[0]) snprintf(jb->err, sizeof jb->err, "rank %d: %s", rank, err);
        if (world > 1) fprintf(stderr, "twinrun: rank %d: %s\n", rank, err);
    }
    rank_state_free(&st);
    return rc;
}

int tr_train(const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, char *err, size_t errlen) {
    memset(sum, 0, sizeof *sum);
    job jb = {.cfg = cfg, .log = log, .summary = sum};
    if (tr_job_data_open(&jb.data, cfg, err, errlen)) return TR_EXIT_USAGE;
    int rc = launch_ranks(world, train_rank, &jb, err, errlen);
    tr_data_close(jb.data);
    if (rc < 0) return TR_EXIT_USAGE;
    sum->device_peak_bytes = jb.peak;
    sum->world = world;
    if (rc) tr_errf(err, errlen, "%s", jb.err[0] ? jb.err : "a rank failed (see above)");
    return rc;
}
