/* A training rank's set-up and tear-down (rank.h): Megatron's setup_model_and_optimizer for one rank,
 * the observers of its loop, --load's checkpoint. */
#include "train/rank.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "model/llama_hf.h"
#include "train/checkpoint.h"
#include "train/memory_report.h"
#include "train/observers.h"
#include "train/preflight.h"
#include "train/train_log.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

void train_rank_close(tr_rank *st) {
    train_observers_close(&st->obs); /* the data watch before the reader it watches and the plan it asks */
    fault_rank_close(st->faults);
    if (st->have_src) st->src.close(st->src.ctx);
    optim_destroy(st->optim, st->model);
    llama_destroy(st->model);
    tr_groups_destroy(&st->groups);
    if (st->dev) dev_close(st->dev);
}

/* dev_set_reclaim's hook: the twin ended this rank mid-call (a crash, the watchdog's abort), as an OS
 * ends a process, and reclaims what it held: its communicators are already destroyed and the device
 * is closed after this, so both are left out; the rest is freed as train_rank would. */
static void rank_reclaim(void *arg) {
    tr_rank *st = arg;
    memset(&st->groups, 0, sizeof st->groups);
    st->dev = NULL;
    train_rank_close(st);
}

int train_observer_register(tr_rank *st, const tr_observer *o) {
    if (!train_observers_add(&st->obs, o, st->loop.err, sizeof st->loop.err)) return 0;
    if (o->close) o->close(o->state);
    return TR_EXIT_FATAL;
}

static int setup(tr_rank *st, const tr_job *jb) {
    const tr_config *cfg = jb->cfg;
    char *err = st->loop.err;
    const size_t errlen = sizeof st->loop.err;
    const int rank = st->rank, world = st->world;
    if (tr_grid_init(&st->grid, cfg, world, rank, err, errlen)) return TR_EXIT_USAGE;
    st->dev = dev_open(0, 0, err, errlen);
    if (!st->dev) return TR_EXIT_FATAL;
    dev_set_reclaim(st->dev, rank_reclaim, st);
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
        st->loop.agreed_error = true;
        tr_diagnosis *dg = &jb->summary->diag;
        if (st->reporter) {
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
    /* FP8's amax reduction group: every rank of this stage (TP x CP x DP, Megatron's with context parallelism) */
    if (g->size[TR_AXIS_DP] * g->size[TR_AXIS_CP] > 1) st->model->fp8.dp_cp_comm = st->groups.dp_cp;
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
    int rc = train_observe_data_watch(st, jb);
    if (!rc && st->reporter) rc = train_observe_log(st, jb);
    return rc;
}

int train_rank_open(tr_rank *st, const tr_job *jb, int rank, int world) {
    const tr_config *cfg = jb->cfg;
    tr_loop *l = &st->loop;
    st->rank = rank, st->world = world, st->reporter = rank == world - 1; /* Megatron logs from the last rank */
    int rc = setup(st, jb);
    if (!rc && tr_lr_schedule_init(&st->sched, cfg, l->err, sizeof l->err)) rc = TR_EXIT_USAGE;
    l->decoupled = !rc && tr_lr_schedule_decoupled(&st->dsched, &st->sched, cfg);
    st->num_micro = rc ? 0 : cfg->global_batch_size / (cfg->micro_batch_size * st->grid.size[TR_AXIS_DP]);
    l->iters = cfg->train_iters > 0 ? cfg->train_iters : cfg->train_samples / cfg->global_batch_size;
    l->flops = rc ? 0 : train_flops_per_iteration(cfg, st->model->dims.V);
    /* the order of their side effects in an iteration (observers.h) */
    if (!rc) rc = train_observe_timing(st, jb);
    if (!rc) rc = train_observe_faults(st, jb);
    if (!rc) rc = train_observe_nan(st, jb);
    if (!rc) rc = train_observe_fp8(st, jb);
    if (!rc) rc = train_observe_straggler(st, jb);
    if (!rc) rc = train_observe_checkpoint(st, jb);
    if (!rc) rc = train_observe_signal(st, jb);
    if (!rc) rc = train_observe_exit(st, jb);
    return rc;
}

int train_rank_resume(tr_rank *st, const tr_job *jb) {
    const tr_config *cfg = jb->cfg;
    tr_loop *l = &st->loop;
    tr_run_position pos = {0, 0, 0};
    int rc = 0, loaded = 0;
    if (cfg->load[0]) {
        if (train_ckpt_load_from(jb->ckpt, st->model, st->optim, cfg, st->grid.rank, &pos, &loaded, l->err,
                                 sizeof l->err))
            rc = TR_EXIT_USAGE;
        /* a run without validation (--eval-iters 0) has no validation set to place the checkpoint's
         * position in: it carries the position unchanged to its own saves, as Megatron does */
        else if (loaded && st->src.set_position(st->src.ctx, pos.consumed_train,
                                                cfg->eval_iters > 0 ? pos.consumed_valid : 0, l->err, sizeof l->err))
            rc = TR_EXIT_USAGE;
        if (!rc && st->reporter && loaded)
            fprintf(jb->log, " loaded checkpoint from %s at iteration %lld\n", cfg->load, (long long)pos.iteration);
        else if (!rc && st->reporter) fprintf(jb->log, " nothing to load: %s; training from scratch\n", jb->fresh);
    }
    l->start = l->done = pos.iteration;
    l->consumed = pos.consumed_train;
    l->resumed_valid = pos.consumed_valid;
    return rc;
}

void train_rank_memory_report(const tr_rank *st, const tr_config *cfg, FILE *log) {
    tr_memory_report mr;
    train_memory_report_of(&mr, st->model, st->optim);
    train_memory_report_print(log, st->rank, &mr,
                              train_megatron_weight_optimizer_bytes(cfg, st->model->dims.V, st->grid.size[TR_AXIS_DP]));
}

uint64_t train_rank_weight_digest(const tr_rank *st) {
    llama_model *m = st->model;
    const size_t n = llama_master_count(m);
    float *h = malloc(sizeof(float) * (n ? n : 1));
    TR_CHECK(h != NULL, "out of host memory for the weight digest");
    llama_download_master(m, h);
    uint64_t x = tr_fnv1a(TR_FNV_OFFSET, h, sizeof(float) * n);
    free(h);
    return x;
}
