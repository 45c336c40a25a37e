#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/ckpt.h"
#include "core/hash.h"
#include "fault/fault.h"
#include "model/llama.h"
#include "model/llama_hf.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/grid.h"
#include "train/batch_source.h"
#include "train/checkpoint.h"
#include "train/data_watch.h"
#include "train/memory_report.h"
#include "train/nan_probe.h"
#include "train/predict_report.h"
#include "train/preflight.h"
#include "train/provenance.h"
#include "train/signal_exit.h"
#include "train/step.h"
#include "train/straggler.h"
#include "train/tb_log.h"
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
    tr_data *data;                 /* the datasets, built once; each rank reads through its own view */
    size_t peak;                   /* largest device peak of any rank */
    uint64_t data_fp;              /* the data files' fingerprint, for the preflight */
    ckpt_provenance prov;          /* what every save records of where the run came from */
    ckpt_reader *ckpt;             /* --load's checkpoint, verified and opened once for every rank; NULL = none */
    char fresh[TR_PATH_LEN + 256]; /* --load without a checkpoint: why (train_ckpt_pick) */
    ckpt_lock *lock;               /* --save's, for the job's life (this process runs rank 0) */
    tr_predict *predict;           /* --predict: what every rank's device counted; NULL otherwise */
    char err[1024 + 32];           /* "rank N: " and a rank's 1024-byte message */
    char first_err[1024];          /* the first failing rank's message as it said it */
    int same_err_ranks;            /* later ranks that failed with exactly that message (not printed again) */
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
    fault_rank *faults;        /* NULL without a fault plan */
    tr_data_watch *data_watch; /* --data-read-timeout-minutes over src's reads; NULL for --tokens-file */
    bool agreed_error; /* the error is one every rank reached alike (preflight, NaN, a save's vote): said once */
    tr_nan_probe probe;
    tr_tb_log *tb; /* --tensorboard-dir, reporting rank only */
} rank_state;

static void rank_state_free(rank_state *st) {
    if (st->metrics) fclose(st->metrics);
    if (st->model) train_nan_probe_free(&st->probe);
    train_data_watch_close(st->data_watch); /* before the reader it watches and the fault plan it asks */
    fault_rank_close(st->faults);
    train_tb_log_close(st->tb);
    if (st->have_src) st->src.close(st->src.ctx);
    optim_destroy(st->optim, st->model);
    llama_destroy(st->model);
    tr_groups_destroy(&st->groups);
    if (st->dev) dev_close(st->dev);
}

/* dev_set_reclaim's hook: the twin ended this rank mid-call (a crash, the watchdog's abort), as an OS
 * ends a process, and reclaims what it held: its communicators are already destroyed and the device
 * is closed after this, so both are left out; the rest is freed as train_rank would. */
static void rank_state_reclaim(void *arg) {
    rank_state *st = arg;
    memset(&st->groups, 0, sizeof st->groups);
    st->dev = NULL;
    rank_state_free(st);
}

static int setup(rank_state *st, const job *jb, int rank, int world, bool reporter, char *err, size_t errlen) {
    const tr_config *cfg = jb->cfg;
    if (tr_grid_init(&st->grid, cfg, world, rank, err, errlen)) return TR_EXIT_USAGE;
    st->dev = dev_open(0, 0, err, errlen);
    if (!st->dev) return TR_EXIT_FATAL;
    dev_set_reclaim(st->dev, rank_state_reclaim, st);
    /* --predict: from the first allocation on, memory is only counted and kernels only timed */
    if (cfg->predict && dev_set_shape_only(st->dev, err, errlen)) return TR_EXIT_USAGE;
    dev_set_deterministic(st->dev, cfg->deterministic_mode);
    coll_set_timeout(st->dev, cfg->distributed_timeout_minutes * 60.0);
    if (tr_groups_create(&st->groups, &st->grid, st->dev, err, errlen)) return TR_EXIT_FATAL;
    st->faults = fault_rank_open(cfg->faults, rank, world, st->dev);
    coll_comm *comms[] = {st->groups.tp, st->groups.cp,    st->groups.dp,
                          st->groups.pp, st->groups.dp_cp, st->groups.world};
    for (size_t i = 0; i < sizeof comms / sizeof *comms; i++) fault_rank_watch(st->faults, comms[i]);
    tr_preflight_result pre;
    if (train_preflight(cfg, &st->groups, st->dev, rank, world, jb->data_fp, st->faults, &pre, err, errlen)) {
        st->agreed_error = true;
        tr_diagnosis *dg = &jb->summary->diag;
        if (reporter) {
            *dg = (tr_diagnosis){
                .kind = "preflight", .rank = pre.first_rank, .layer = -1, .micro = -1, .time = dev_clock_now(st->dev)};
            snprintf(dg->detail, sizeof dg->detail, "%s", train_preflight_issue_name(pre.issue));
        }
        return TR_EXIT_USAGE;
    }
    const tr_grid *g = &st->grid;
    int dp_total = g->size[TR_AXIS_DP] * g->size[TR_AXIS_CP];
    llama_layout lay = {.tp = g->size[TR_AXIS_TP],
                        .tp_rank = g->coord[TR_AXIS_TP],
                        .pp = g->size[TR_AXIS_PP],
                        .pp_rank = g->coord[TR_AXIS_PP],
                        .cp = g->size[TR_AXIS_CP],
                        .cp_rank = g->coord[TR_AXIS_CP],
                        .slots = g->size[TR_AXIS_PP] - g->coord[TR_AXIS_PP]};
    optim_shard_of(cfg, g, &lay.opt_shards, &lay.opt_shard); /* a bf16 model's master: the shard only */
    size_t pad = cfg->use_distributed_optimizer ? (size_t)dp_total : 1;
    /* Megatron's DDP: buckets only with --overlap-grad-reduce, of max(40M, 1M x DP) elements by default */
    if (cfg->overlap_grad_reduce)
        lay.bucket_elems = cfg->ddp_bucket_size > 0                  ? (size_t)cfg->ddp_bucket_size
                           : (size_t)dp_total * 1000000u > 40000000u ? (size_t)dp_total * 1000000u
                                                                     : 40000000u;
    st->model = llama_create_shard(cfg, &lay, pad, st->groups.tp, lay.cp > 1 ? st->groups.cp : NULL, st->dev,
                                   dev_stream_default(st->dev), err, errlen);
    if (!st->model) return TR_EXIT_USAGE;
    if (cfg->hf_load[0]) {
        if (llama_hf_load(st->model, cfg->hf_load, err, errlen)) return TR_EXIT_USAGE;
    } else if (!jb->ckpt) { /* a resumed job's weights come from the checkpoint */
        llama_init_params(st->model, cfg->seed, cfg->init_method_std);
    }
    st->optim = optim_create(st->model, cfg, g, err, errlen);
    if (!st->optim) return TR_EXIT_FATAL;
    if (train_batch_source_open(&st->src, cfg, jb->data, g->coord[TR_AXIS_DP], g->size[TR_AXIS_DP], err, errlen))
        return TR_EXIT_USAGE;
    st->have_src = true;
    if (st->src.data && !(st->data_watch = train_data_watch_open(st->src.data, st->dev, st->faults, rank,
                                                                 cfg->data_read_timeout_minutes * 60.0, err, errlen)))
        return TR_EXIT_FATAL;
    if (reporter && cfg->metrics_jsonl[0]) {
        st->metrics = fopen(cfg->metrics_jsonl, "w");
        if (!st->metrics)
            return tr_errf(err, errlen, "--metrics-jsonl %s: cannot open for writing", cfg->metrics_jsonl),
                   TR_EXIT_USAGE;
    }
    if (reporter && cfg->tensorboard_dir[0] && !(st->tb = train_tb_log_open(cfg, world, st->dev, err, errlen)))
        return TR_EXIT_USAGE;
    return 0;
}

/* True on every rank when it is true on any: the ranks stop together, at the same iteration. */
static bool any_rank(rank_state *st, bool mine) {
    float *flag = dev_alloc(st->dev, sizeof(float), "stop flag");
    TR_CHECK(flag != NULL, "out of device memory for a flag");
    float h = mine ? 1.0f : 0.0f;
    dev_copy_h2d(dev_stream_default(st->dev), flag, &h, sizeof h);
    coll_all_reduce(st->groups.world, dev_stream_default(st->dev), flag, flag, 1, TR_F32, COLL_MAX);
    dev_copy_d2h(dev_stream_default(st->dev), &h, flag, sizeof h);
    dev_stream_sync(dev_stream_default(st->dev));
    dev_free(st->dev, flag);
    return h > 0.5f;
}

/* Megatron's --exit-duration-in-mins: every rank stops at the same iteration once any rank's clock
 * (wall time, or the twin's simulated time) has run past the limit. */
static bool exit_duration_reached(rank_state *st, double start, double minutes) {
    return any_rank(st, (dev_clock_now(st->dev) - start) / 60.0 > minutes);
}

/* --exit-signal-handler: a SIGTERM this process received (or a scenario's preemption of this rank)
 * stops every rank after this iteration. A preempted rank without the handler dies as SIGTERM's
 * default action would kill its process. */
static bool stop_on_signal(rank_state *st, const tr_config *cfg, bool preempted) {
    if (preempted && !cfg->exit_signal_handler) {
        dev_rank_note("killed by SIGTERM (no --exit-signal-handler)");
        dev_rank_abort(143);
    }
    return cfg->exit_signal_handler && any_rank(st, preempted || train_sigterm_pending());
}

/* A checkpoint save through the fault library's I/O; a rank whose own shard failed is the culprit. */
static int save(rank_state *st, job *jb, const tr_config *cfg, const tr_lr_schedule *sched, const tr_run_position *now,
                int rank, char *err, size_t errlen) {
    const ckpt_io *io = fault_ckpt_io(st->faults, now->iteration, ckpt_io_posix());
    int culprit;
    optim_params_ready(st->optim, st->model); /* --overlap-param-gather: the last step's gathers first */
    if (!train_ckpt_save(st->model, st->optim, cfg, &st->grid, &st->groups, sched, now, &jb->prov, io, &culprit, err,
                         errlen))
        return 0;
    st->agreed_error = culprit != rank;
    tr_diagnosis *dg = &jb->summary->diag;
    if (!dg->kind[0] && culprit == rank)
        *dg = (tr_diagnosis){.kind = "ckpt_write",
                             .rank = rank,
                             .layer = -1,
                             .micro = -1,
                             .iteration = now->iteration,
                             .time = dev_clock_now(st->dev)};
    return TR_EXIT_FATAL;
}

/* The validation position a save records: the data's, or with --eval-iters 0 the one the run resumed with. */
static int64_t valid_position(const rank_state *st, const tr_config *cfg, int64_t resumed) {
    return cfg->eval_iters > 0 ? st->src.valid_consumed(st->src.ctx) : resumed;
}

/* FNV-1a of this rank's fp32 master weights (its optimizer shard of them when the distributed
 * optimizer shards them; the other shards are other ranks' digests): equal digests, equal bits. */
static uint64_t weight_digest(llama_model *m) {
    const size_t n = llama_master_count(m);
    float *h = malloc(sizeof(float) * (n ? n : 1));
    TR_CHECK(h != NULL, "out of host memory for the weight digest");
    dev_copy_d2h(m->stream, h, m->master, sizeof(float) * n);
    dev_stream_sync(m->stream);
    uint64_t x = tr_fnv1a(TR_FNV_OFFSET, h, sizeof(float) * n);
    free(h);
    return x;
}

/* One rank's run through the iterations: what the steps of train_rank share. */
typedef struct rank_run {
    int rank, world;
    bool reporter; /* the last rank: Megatron logs from it, and it fills the summary */
    tr_lr_schedule sched;
    tr_lr_schedule dsched; /* --decoupled-lr: the embedding and output layer's own schedule */
    bool decoupled;
    dev_info dinfo;         /* whether the time figures are the twin's cost model's */
    int num_micro;          /* micro-batches per iteration on this DP rank */
    int64_t iters;          /* the last iteration of the job */
    double flops;           /* per iteration, for the TFLOP/s column */
    tr_run_position pos;    /* where the run starts: 0, or the loaded checkpoint's position */
    int64_t consumed;       /* train samples consumed so far */
    double loss_acc, t_acc; /* over the current logging interval */
    int n_acc, nan_iters;
    tr_predict_time last_time; /* the last iteration's simulated split (the predict report) */
    int64_t saved_at;          /* the last iteration saved (or loaded) */
    int64_t last;              /* the last iteration completed */
    double start;              /* the rank's clock at the start, for --exit-duration-in-mins */
    bool stopped;              /* by SIGTERM, --exit-interval or --exit-duration-in-mins: Megatron exits at once */
    tr_straggler strag;
    char err[1024];
} rank_run;

/* Builds the rank (setup), its lr schedule and NaN probes, and the run's constants. */
static int prepare(rank_state *st, const job *jb, rank_run *r) {
    const tr_config *cfg = jb->cfg;
    int rc = setup(st, jb, r->rank, r->world, r->reporter, r->err, sizeof r->err);
    if (!rc && tr_lr_schedule_init(&r->sched, cfg, r->err, sizeof r->err)) rc = TR_EXIT_USAGE;
    r->decoupled = !rc && tr_lr_schedule_decoupled(&r->dsched, &r->sched, cfg);
    if (st->dev) dev_get_info(st->dev, &r->dinfo);
    r->num_micro = rc ? 0 : cfg->global_batch_size / (cfg->micro_batch_size * st->grid.size[TR_AXIS_DP]);
    r->iters = cfg->train_iters > 0 ? cfg->train_iters : cfg->train_samples / cfg->global_batch_size;
    r->flops = rc ? 0 : train_flops_per_iteration(cfg, st->model->dims.V);
    if (!rc && train_nan_probe_init(&st->probe, st->model, r->num_micro, cfg->num_layers,
                                    cfg->check_for_nan_in_loss_and_grad, st->faults)) {
        tr_errf(r->err, sizeof r->err, "out of device memory for the NaN/Inf probes: %s", dev_last_error(st->dev));
        rc = TR_EXIT_FATAL;
    }
    return rc;
}

/* --load: the checkpoint's weights, optimizer state and data position. */
static int resume(rank_state *st, const job *jb, rank_run *r) {
    const tr_config *cfg = jb->cfg;
    if (!cfg->load[0]) return 0;
    int rc = 0, loaded = 0;
    if (train_ckpt_load_from(jb->ckpt, st->model, st->optim, cfg, &r->pos, &loaded, r->err, sizeof r->err))
        rc = TR_EXIT_USAGE;
    /* a run without validation (--eval-iters 0) has no validation set to place the checkpoint's
     * position in: it carries the position unchanged to its own saves, as Megatron does */
    else if (loaded && st->src.set_position(st->src.ctx, r->pos.consumed_train,
                                            cfg->eval_iters > 0 ? r->pos.consumed_valid : 0, r->err, sizeof r->err))
        rc = TR_EXIT_USAGE;
    if (!rc && r->reporter && loaded)
        fprintf(jb->log, " loaded checkpoint from %s at iteration %lld\n", cfg->load, (long long)r->pos.iteration);
    else if (!rc && r->reporter) fprintf(jb->log, " nothing to load: %s; training from scratch\n", jb->fresh);
    return rc;
}

/* A NaN/Inf stopped iteration `it`: where it came from goes into the error and the diagnosis. */
static void diagnose_nan(rank_state *st, const job *jb, rank_run *r, int64_t it) {
    r->nan_iters++;
    tr_nan_origin origin;
    train_nan_probe_origin(&st->probe, &st->groups, &origin);
    tr_grid og;
    char where[256], why[600];
    const bool known = origin.rank >= 0 && !tr_grid_init(&og, jb->cfg, r->world, origin.rank, NULL, 0);
    train_nan_origin_describe(&origin, known ? &og : NULL, where, sizeof where);
    snprintf(why, sizeof why, "%.599s", r->err);
    snprintf(r->err, sizeof r->err, "iteration %lld: %s. First non-finite value: %s", (long long)it, why, where);
    if (r->reporter) {
        tr_diagnosis *diag = &jb->summary->diag;
        *diag = (tr_diagnosis){.kind = "nan",
                               .rank = origin.rank,
                               .layer = origin.layer,
                               .micro = origin.micro,
                               .iteration = it,
                               .time = dev_clock_now(st->dev)};
        snprintf(diag->detail, sizeof diag->detail, "%s", origin.rank >= 0 ? train_nan_site_name(origin.site) : "");
    }
}

/* The iteration's numbers: the summary, the JSON line, TensorBoard, the straggler report, and every
 * log interval Megatron's line with the loss and time averaged over the interval. */
static void log_iteration(rank_state *st, const job *jb, rank_run *r, int64_t it, double lr, double dlr, double dt,
                          const tr_step_result *res) {
    const tr_config *cfg = jb->cfg;
    tr_train_summary *sum = jb->summary;
    if (r->reporter) {
        if (it == r->pos.iteration + 1) sum->first_loss = res->loss;
        sum->last_loss = res->loss;
        sum->last_grad_norm = res->grad_norm;
        sum->iterations = it;
    }
    r->loss_acc += res->loss;
    r->t_acc += dt;
    r->n_acc++;
    tr_log_line line = {
        .iteration = it,
        .train_iters = r->iters,
        .consumed_samples = r->consumed,
        .elapsed_ms_per_iter = dt * 1000.0,
        .tflops_per_gpu = dt > 0 ? r->flops / dt / 1e12 / r->world : 0.0,
        .lr = lr,
        .has_decoupled_lr = r->decoupled,
        .decoupled_lr = dlr,
        .global_batch_size = cfg->global_batch_size,
        .lm_loss = res->loss,
        .grad_norm = res->grad_norm,
        .skipped_iters = 0,
        .nan_iters = r->nan_iters,
        .simulated = r->dinfo.simulated[0] ? r->dinfo.simulated : NULL,
    };
    if (st->metrics) train_log_write_json(st->metrics, &line);
    train_tb_log_iteration(st->tb, &line);
    if (cfg->log_straggler && it % cfg->log_interval == 0) {
        train_straggler_report(&r->strag, &st->groups, st->dev, it, r->reporter ? jb->log : NULL);
        if (r->reporter)
            sum->straggler_rank = r->strag.worst_rank, sum->straggler_ratio = r->strag.worst_ratio,
            sum->straggler_time = r->strag.first_listed;
    }
    if (it % cfg->log_interval == 0) {
        line.lm_loss = r->loss_acc / r->n_acc;
        line.elapsed_ms_per_iter = r->t_acc / r->n_acc * 1000.0;
        line.tflops_per_gpu = r->t_acc > 0 ? r->flops / (r->t_acc / r->n_acc) / 1e12 / r->world : 0.0;
        train_tb_log_interval(st->tb, &line);
        if (r->reporter) {
            char ts[64];
            train_log_timestamp(ts, sizeof ts, wall_seconds());
            train_log_write_line(jb->log, ts, &line, cfg->log_throughput);
        }
        r->loss_acc = r->t_acc = 0;
        r->n_acc = 0;
    }
}

/* After iteration `it`: validation and a checkpoint when their intervals say so. */
static int evaluate_and_save(rank_state *st, job *jb, rank_run *r, int64_t it, const tr_parallel *par) {
    const tr_config *cfg = jb->cfg;
    if (st->src.next_valid && cfg->eval_iters > 0 && cfg->eval_interval > 0 && it % cfg->eval_interval == 0) {
        double vloss;
        int rc = train_evaluate(st->model, par, cfg->eval_iters, r->num_micro, st->src.next_valid, st->src.ctx, &vloss,
                                r->err, sizeof r->err);
        if (rc) return rc;
        if (r->reporter) {
            train_log_write_validation(jb->log, it, vloss);
            train_tb_log_validation(st->tb, it, r->consumed, vloss);
            jb->summary->last_valid_loss = vloss;
        }
    }
    if (cfg->save[0] && cfg->save_interval > 0 && it % cfg->save_interval == 0) {
        tr_run_position now = {it, r->consumed, valid_position(st, cfg, r->pos.consumed_valid)};
        int rc = save(st, jb, cfg, &r->sched, &now, r->rank, r->err, sizeof r->err);
        if (rc) return rc;
        r->saved_at = it;
        if (r->reporter) fprintf(jb->log, " saved checkpoint at iteration %lld to %s\n", (long long)it, cfg->save);
    }
    return 0;
}

/* --exit-signal-handler stopped the job after iteration `it`: save it (unless the save interval just
 * did) and say so, as Megatron does. */
static int signal_save(rank_state *st, job *jb, rank_run *r, int64_t it) {
    const tr_config *cfg = jb->cfg;
    if (cfg->save[0] && r->saved_at < it) {
        tr_run_position now = {it, r->consumed, valid_position(st, cfg, r->pos.consumed_valid)};
        int rc = save(st, jb, cfg, &r->sched, &now, r->rank, r->err, sizeof r->err);
        if (rc) return rc;
        r->saved_at = it;
        if (r->reporter) fprintf(jb->log, " saved checkpoint at iteration %lld to %s\n", (long long)it, cfg->save);
    }
    if (r->reporter) {
        fprintf(jb->log, " exiting program after receiving SIGTERM.\n");
        jb->summary->signal_exit_iteration = it, jb->summary->signal_exit_time = dev_clock_now(st->dev);
    }
    return 0;
}

/* Megatron's --exit-interval and --exit-duration-in-mins: stop after iteration `it`. */
static bool exit_requested(rank_state *st, const job *jb, const rank_run *r, int64_t it) {
    const tr_config *cfg = jb->cfg;
    if (cfg->exit_interval > 0 && it % cfg->exit_interval == 0) return true;
    if (cfg->exit_duration_in_mins > 0 && exit_duration_reached(st, r->start, cfg->exit_duration_in_mins)) {
        if (r->reporter)
            fprintf(jb->log, " exiting program after %g minutes (--exit-duration-in-mins)\n",
                    cfg->exit_duration_in_mins);
        return true; /* the end-of-training save in finish() keeps the work */
    }
    return false;
}

/* The iterations from the start position to the job's last, or to an exit request; the first
 * error stops them. */
static int iterate(rank_state *st, job *jb, rank_run *r) {
    const tr_config *cfg = jb->cfg;
    const tr_parallel par = {&st->grid, &st->groups};
    for (int64_t it = r->pos.iteration + 1; it <= r->iters; it++) {
        double lr = tr_lr_at(&r->sched, r->consumed), dlr = r->decoupled ? tr_lr_at(&r->dsched, r->consumed) : -1.0;
        optim_set_decoupled_lr(st->optim, dlr);
        if (r->reporter && it == r->pos.iteration + 1) /* start-up ends */
            jb->summary->first_iteration_wall = wall_seconds();
        dev_step_mark(st->dev, it);
        double t0 = dev_clock_now(st->dev), busy0 = dev_busy_seconds(st->dev), bubble0, comm0;
        dev_wait_split(st->dev, &bubble0, &comm0);
        fault_step_begin(st->faults, it);
        const bool preempted = fault_preempt(st->faults);
        tr_step_result res;
        train_nan_probe_begin(&st->probe);
        int rc = train_step(st->model, st->optim, cfg, &par, r->num_micro, lr, st->src.next, st->src.ctx, &res, r->err,
                            sizeof r->err);
        train_nan_probe_end(&st->probe);
        if (rc == TR_EXIT_NAN) diagnose_nan(st, jb, r, it);
        if (rc) return rc;
        fault_step_end(st->faults, dev_busy_seconds(st->dev) - busy0);
        if (r->reporter && jb->summary->iteration_loss) jb->summary->iteration_loss[it] = res.loss;
        double dt = dev_clock_now(st->dev) - t0, bubble1, comm1;
        dev_wait_split(st->dev, &bubble1, &comm1);
        r->last_time = (tr_predict_time){.step = dt,
                                         .compute = dev_busy_seconds(st->dev) - busy0,
                                         .comm = comm1 - comm0,
                                         .bubble = bubble1 - bubble0};
        r->consumed += cfg->global_batch_size;
        log_iteration(st, jb, r, it, lr, dlr, dt, &res);
        if ((rc = evaluate_and_save(st, jb, r, it, &par))) return rc;
        r->last = it;
        if (stop_on_signal(st, cfg, preempted)) {
            if ((rc = signal_save(st, jb, r, it))) return rc;
            r->stopped = true;
            break;
        }
        if (exit_requested(st, jb, r, it)) {
            r->stopped = true;
            break;
        }
    }
    dev_step_mark(st->dev, 0); /* what follows (the last save, evaluation, reports) is no iteration */
    return 0;
}

/* The end of a run that went well: Megatron's last save between save intervals, the memory report
 * of the first stage (the most loaded) and of the reporter. */
static int finish(rank_state *st, job *jb, rank_run *r) {
    const tr_config *cfg = jb->cfg;
    if (cfg->save[0] && r->last > r->saved_at) {
        tr_run_position now = {r->last, r->consumed, valid_position(st, cfg, r->pos.consumed_valid)};
        int rc = save(st, jb, cfg, &r->sched, &now, r->rank, r->err, sizeof r->err);
        if (rc) return rc;
        if (r->reporter) fprintf(jb->log, " saved checkpoint at iteration %lld to %s\n", (long long)r->last, cfg->save);
    }
    /* Megatron evaluates once more when training ends (not when it exits early): after the last save */
    if (!r->stopped && st->src.next_valid && cfg->eval_iters > 0) {
        double vloss;
        const tr_parallel par = {&st->grid, &st->groups};
        int rc = train_evaluate(st->model, &par, cfg->eval_iters, r->num_micro, st->src.next_valid, st->src.ctx, &vloss,
                                r->err, sizeof r->err);
        if (rc) return rc;
        if (r->reporter) {
            char at[64];
            snprintf(at, sizeof at, "iteration %lld on validation set", (long long)r->last);
            train_log_write_validation_at(jb->log, at, vloss);
            train_tb_log_validation(st->tb, r->last, r->consumed, vloss);
            jb->summary->last_valid_loss = vloss;
        }
    }
    if (r->rank == 0 || r->reporter) {
        tr_memory_report mr;
        train_memory_report_of(&mr, st->model, st->optim);
        train_memory_report_print(
            jb->log, r->rank, &mr,
            train_megatron_weight_optimizer_bytes(cfg, st->model->dims.V, st->grid.size[TR_AXIS_DP]));
    }
    return 0;
}

/* A failed rank: the job's first message, and stderr unless every rank reached the same error. */
static int report_failure(const rank_state *st, job *jb, const rank_run *r, int rc) {
    if (rc < 0) rc = TR_EXIT_FATAL;
    /* every failing rank says so, but a message already said by another rank is counted, not
     * repeated (a thousand ranks failing alike print one line); the report keeps the first */
    const bool repeat = jb->err[0] && !strcmp(jb->first_err, r->err);
    if (!jb->err[0]) {
        snprintf(jb->err, sizeof jb->err, "rank %d: %s", r->rank, r->err);
        snprintf(jb->first_err, sizeof jb->first_err, "%s", r->err);
    }
    /* what every rank agreed on (a NaN's origin, the preflight table) is said once, by the reporter */
    const bool agreed = rc == TR_EXIT_NAN || st->agreed_error;
    if (repeat && !agreed) jb->same_err_ranks++;
    else if (r->world > 1 && (!agreed || r->reporter)) fprintf(stderr, "twinrun: rank %d: %s\n", r->rank, r->err);
    return rc;
}

/* --predict: this rank's device counts and last iteration into the job's report. */
static void predict_add(tr_predict *p, const rank_state *st, const rank_run *r) {
    if (r->rank == 0) {
        dev_info info;
        dev_get_info(st->dev, &info);
        snprintf(p->device, sizeof p->device, "%s", info.simulated[0] ? info.simulated : info.name);
        p->capacity = info.capacity;
        p->runtime = info.runtime_bytes;
        p->peak_flops = info.peak_bf16_flops;
        p->flops_per_step = r->flops; /* needs the padded vocabulary, which the model knows */
    }
    if (r->reporter) p->iterations = r->last - r->pos.iteration;
    train_predict_add_rank(p, st->grid.coord[TR_AXIS_PP], r->rank, st->dev, &r->last_time);
}

/* The training entry of one rank: prepare, resume, iterate, finish; what every rank reports
 * (peak memory, weight digest) whatever happened. */
static int train_rank(int rank, int world, void *arg) {
    job *jb = arg;
    tr_train_summary *sum = jb->summary;
    rank_state st;
    memset(&st, 0, sizeof st);
    rank_run r;
    memset(&r, 0, sizeof r);
    r.rank = rank, r.world = world, r.reporter = rank == world - 1; /* Megatron logs from the last rank */
    int rc = prepare(&st, jb, &r);
    if (!rc) rc = resume(&st, jb, &r);
    r.consumed = r.pos.consumed_train;
    r.saved_at = r.last = r.pos.iteration;
    r.start = st.dev ? dev_clock_now(st.dev) : 0.0;
    if (r.reporter) sum->start_iteration = r.pos.iteration;
    if (!rc && r.reporter && r.pos.iteration >= r.iters)
        fprintf(jb->log,
                " the checkpoint is at iteration %lld and this run trains to iteration %lld: nothing left to "
                "train (raise --train-iters or --train-samples to continue)\n",
                (long long)r.pos.iteration, (long long)r.iters);
    if (!rc) train_straggler_init(&r.strag, st.dev, r.pos.iteration + 1);
    if (!rc) rc = iterate(&st, jb, &r);
    if (!rc) rc = finish(&st, jb, &r);
    if (r.reporter) sum->consumed_samples = r.consumed, sum->reported = true;
    if (st.dev && dev_mem_peak(st.dev) > jb->peak) jb->peak = dev_mem_peak(st.dev);
    /* predict mode: the weights are only addresses (and the digest's host copy would be full size) */
    if (st.optim && st.model) optim_params_ready(st.optim, st.model); /* --overlap-param-gather's last gathers */
    if (!rc && sum->weight_digest && !jb->cfg->predict) sum->weight_digest[rank] = weight_digest(st.model);
    if (!rc && jb->predict) predict_add(jb->predict, &st, &r);
    if (r.reporter && st.dev) {
        dev_info info;
        dev_get_info(st.dev, &info);
        sum->device_capacity = info.capacity;
    }
    if (rc) rc = report_failure(&st, jb, &r, rc);
    if (st.dev) dev_set_reclaim(st.dev, NULL, NULL); /* returning: this rank frees its own state */
    rank_state_free(&st);
    return rc;
}

int train_run(const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, char *err, size_t errlen) {
    return train_run_with(cfg, world, log, sum, NULL, NULL, err, errlen);
}

int train_run_with(const tr_config *cfg, int world, FILE *log, tr_train_summary *sum, launch_fn launch,
                   void *launch_ctx, char *err, size_t errlen) {
    double *losses = sum->iteration_loss;
    uint64_t *digests = sum->weight_digest;
    tr_predict *keep = sum->predict;
    memset(sum, 0, sizeof *sum);
    sum->iteration_loss = losses, sum->weight_digest = digests, sum->predict = keep;
    sum->straggler_rank = -1;
    sum->straggler_time = -1;
    sum->diag.rank = -1;
    job jb = {.cfg = cfg, .log = log, .summary = sum};
    if (train_job_data_open(&jb.data, cfg, err, errlen)) {
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "data");
        return TR_EXIT_USAGE;
    }
    jb.data_fp = train_data_fingerprint(cfg);
    if (cfg->load[0] && train_ckpt_open(cfg, &jb.ckpt, err, errlen)) {
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_load");
        tr_data_close(jb.data);
        return TR_EXIT_USAGE;
    }
    if (cfg->load[0] && !jb.ckpt) {
        int64_t none;
        (void)train_ckpt_pick(cfg, &none, jb.fresh, sizeof jb.fresh, err, errlen);
    }
    if (cfg->load[0] && !jb.ckpt && cfg->exit_on_missing_checkpoint) {
        /* Megatron's words; non-zero (as Megatron now exits) so a scheduler or CI sees the typo */
        fprintf(log,
                ">> '--exit-on-missing-checkpoint' is set but no checkpoint was found: %s. Exiting with a non-zero "
                "status. <<\n",
                jb.fresh);
        tr_data_close(jb.data);
        snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_load");
        return tr_errf(err, errlen,
                       "--exit-on-missing-checkpoint: nothing to load (%s); give the directory --save wrote (or its "
                       "iter_NNNNNNN), or drop the flag to start from scratch",
                       jb.fresh),
               TR_EXIT_FATAL;
    }
    {
        const int64_t start = jb.ckpt && !cfg->finetune ? ckpt_reader_manifest(jb.ckpt)->iteration : 0;
        if (train_ckpt_guard_save(cfg, start, &jb.lock, err, errlen)) {
            snprintf(sum->diag.kind, sizeof sum->diag.kind, "ckpt_save");
            if (jb.ckpt) ckpt_reader_close(jb.ckpt);
            tr_data_close(jb.data);
            return TR_EXIT_USAGE;
        }
    }
    tr_predict own, *predict = keep ? keep : &own; /* the caller's, or this call's */
    if (cfg->predict) {
        if (train_predict_init(predict, cfg->pipeline_model_parallel_size, world)) {
            if (jb.ckpt) ckpt_reader_close(jb.ckpt);
            tr_data_close(jb.data);
            ckpt_lock_release(jb.lock);
            return tr_errf(err, errlen, "out of host memory for the predict report"), TR_EXIT_FATAL;
        }
        jb.predict = predict;
        predict->tokens_per_step = (double)cfg->global_batch_size * cfg->seq_length;
        predict->micro_batch = cfg->micro_batch_size;
    }
    if (train_provenance_of(cfg, jb.data_fp, &jb.prov, err, errlen)) {
        if (jb.predict && !keep) train_predict_free(predict);
        if (jb.ckpt) ckpt_reader_close(jb.ckpt);
        tr_data_close(jb.data);
        return TR_EXIT_FATAL;
    }
    tr_signal_guard sig;
    train_signal_guard_begin(&sig, cfg->exit_signal_handler);
    int rc = launch ? launch(launch_ctx, world, train_rank, &jb, err, errlen)
                    : launch_ranks(world, train_rank, &jb, err, errlen);
    train_signal_guard_end(&sig);
    if (jb.predict) {
        if (rc == 0) {
            train_predict_print(log, predict);
            if (cfg->predict_json[0] && train_predict_write_json(cfg->predict_json, predict, err, errlen)) rc = -1;
        }
        if (!keep) train_predict_free(predict);
    }
    ckpt_provenance_free(&jb.prov);
    if (jb.ckpt) ckpt_reader_close(jb.ckpt);
    tr_data_close(jb.data);
    ckpt_lock_release(jb.lock);
    if (rc < 0) return TR_EXIT_USAGE;
    sum->device_peak_bytes = jb.peak;
    sum->world = world;
    if (jb.same_err_ranks > 0)
        fprintf(stderr, "twinrun: %d more rank%s stopped with the same error\n", jb.same_err_ranks,
                jb.same_err_ranks == 1 ? "" : "s");
    if (rc) tr_errf(err, errlen, "%s", jb.err[0] ? jb.err : "a rank failed (see above)");
    return rc;
}
