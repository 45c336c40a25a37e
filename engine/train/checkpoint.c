#include "train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "twinrun/err.h"

/* A parameter as the checkpoint names it: the fused fc1 is two tensors (gate_proj and up_proj),
 * each a row slice; every other parameter is one tensor, whole or sliced along one axis. */
typedef struct piece {
    char name[LLAMA_NAME_LEN + 8];
    int ndim;
    int64_t gshape[2];
    ckpt_place slice;
    size_t local_off, numel; /* elements within the local parameter */
} piece;

static int pieces_of(const llama_param *p, piece out[2]) {
    const llama_placement *pl = &p->place;
    if (llama_hf_fc1_half(p->name, 0, out[0].name, sizeof out[0].name)) { /* the fused fc1, weight or bias */
        int64_t half_rows = p->shape[0] / 2, F = pl->gshape[0] / 2;
        for (int h = 0; h < 2; h++) {
            llama_hf_fc1_half(p->name, h, out[h].name, sizeof out[h].name);
            out[h].ndim = p->ndim;
            out[h].gshape[0] = F, out[h].gshape[1] = pl->gshape[1];
            out[h].slice = ckpt_place_slice(0, pl->seg_global[h] - h * F, half_rows);
            out[h].local_off = (size_t)h * p->numel / 2;
            out[h].numel = p->numel / 2;
        }
        return 2;
    }
    piece *q = &out[0];
    snprintf(q->name, sizeof q->name, "%s", p->name);
    q->ndim = p->ndim;
    q->gshape[0] = pl->gshape[0], q->gshape[1] = pl->gshape[1];
    if (p->ndim == 2 && p->shape[1] != pl->gshape[1]) q->slice = ckpt_place_slice(1, pl->col0, p->shape[1]);
    else q->slice = ckpt_place_slice(0, pl->seg_global[0], p->shape[0]);
    q->local_off = 0;
    q->numel = p->numel;
    return 1;
}

static void layout_of(const tr_config *cfg, const tr_grid *g, ckpt_layout *l, ckpt_coords *c) {
    l->tp = g->size[TR_AXIS_TP], l->pp = g->size[TR_AXIS_PP], l->dp = g->size[TR_AXIS_DP], l->cp = g->size[TR_AXIS_CP];
    l->dist_opt = cfg->use_distributed_optimizer;
    c->rank = g->rank;
    c->tp = g->coord[TR_AXIS_TP], c->pp = g->coord[TR_AXIS_PP], c->dp = g->coord[TR_AXIS_DP],
    c->cp = g->coord[TR_AXIS_CP];
}

static float *download(llama_model *m, const float *dev, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    TR_CHECK(h != NULL, "out of host memory for a checkpoint");
    dev_copy_d2h(m->stream, h, dev, n * sizeof *h);
    dev_stream_sync(m->stream);
    return h;
}

/* Blob storage: names must outlive ckpt_shard_write. */
typedef struct blobs {
    ckpt_blob *b;
    char (*names)[256];
    int n, cap;
} blobs;

static void add_blob(blobs *bs, const char *prefix, const piece *pc, const void *data, ckpt_place place) {
    TR_CHECK(bs->n < bs->cap, "checkpoint blob table overflow");
    snprintf(bs->names[bs->n], sizeof bs->names[bs->n], "%s%s", prefix, pc->name);
    ckpt_blob *b = &bs->b[bs->n++];
    memset(b, 0, sizeof *b);
    b->name = bs->names[bs->n - 1];
    b->dtype = CKPT_F32;
    b->data = data;
    b->ndim = pc->ndim;
    b->shape[0] = pc->gshape[0];
    if (pc->ndim == 2) b->shape[1] = pc->gshape[1];
    b->place = place;
}

/* The flat range of piece pc (of parameter p) inside [lo, hi) of the parameter buffer; n == 0 if none. */
static ckpt_place shard_part(const llama_param *p, const piece *pc, size_t lo, size_t hi, size_t *first) {
    size_t b0 = p->offset + pc->local_off, e0 = b0 + pc->numel;
    size_t b = b0 > lo ? b0 : lo, e = e0 < hi ? e0 : hi;
    ckpt_place pl = pc->slice;
    pl.off = 0, pl.n = 0;
    if (b < e) pl.off = (int64_t)(b - b0), pl.n = (int64_t)(e - b);
    *first = b;
    return pl;
}

/* ---- FP8 state: per global layer, "model.layers.N.fp8_meta" [12, len + 2] fp32: row (module * 3 + role),
 * role 0 the input, 1 the weight, 2 the output gradient; columns the amax history (row 0 first, as the
 * device keeps it), then the scale and its inverse. Every rank of a stage holds the same state (the
 * amaxes are reduced over TP x CP x DP), so the writers of replicated tensors write it, by global layer:
 * a checkpoint resharded over TP, DP or PP keeps it. ---- */
enum { FP8_ROWS = LLAMA_FP8_MODULES * 3 };

static void fp8_meta_name(char *out, size_t n, const llama_model *m, int l) {
    snprintf(out, n, "model.layers.%d.fp8_meta", m->dims.l0 + l);
}

/* Between the device state's host image (llama_fp8_get_state's order) and per-layer tables
 * [nl, FP8_ROWS, len + 2]; to_meta chooses the direction. */
static void fp8_meta_convert(const llama_model *m, float *state, float *meta, bool to_meta) {
    const llama_fp8 *f = &m->fp8;
    const size_t len = (size_t)f->len, cols = len + 2;
    float *fh = state, *bh = fh + len * f->nfwd, *fs = bh + len * f->nbwd, *bsc = fs + 2 * (size_t)f->nfwd;
    for (int l = 0; l < m->dims.nl; l++)
        for (int mod = 0; mod < LLAMA_FP8_MODULES; mod++)
            for (int role = 0; role < 3; role++) {
                float *row = meta + ((size_t)l * FP8_ROWS + (size_t)mod * 3 + role) * cols;
                const bool fwd = role < 2;
                const size_t t =
                    fwd ? (size_t)((l * LLAMA_FP8_MODULES + mod) * 2 + role) : (size_t)(l * LLAMA_FP8_MODULES + mod);
                const size_t n = fwd ? (size_t)f->nfwd : (size_t)f->nbwd;
                float *hist = fwd ? fh : bh, *sc = fwd ? fs : bsc;
                for (size_t i = 0; i < len; i++) {
                    if (to_meta) row[i] = hist[i * n + t];
                    else hist[i * n + t] = row[i];
                }
                if (to_meta) row[len] = sc[t], row[len + 1] = sc[n + t];
                else sc[t] = row[len], sc[n + t] = row[len + 1];
            }
}

/* The FP8 tables of this stage's layers [nl, FP8_ROWS, len + 2], or NULL without FP8. */
static float *fp8_meta_download(llama_model *m) {
    const size_t n = llama_fp8_state_count(m);
    if (!n) return NULL;
    float *state = malloc(n * sizeof *state), *meta = malloc(n * sizeof *meta); /* the same count, reordered */
    TR_CHECK(state && meta, "out of host memory for a checkpoint");
    llama_fp8_get_state(m, state);
    fp8_meta_convert(m, state, meta, true);
    free(state);
    return meta;
}

/* Loads the FP8 tables where the checkpoint has them with this run's history length; otherwise the
 * state stays as llama_fp8_create left it (histories zero, scales one) and a note says so once. */
static int fp8_meta_load(ckpt_reader *rd, llama_model *m, int rank, char *err, size_t errlen) {
    const size_t n = llama_fp8_state_count(m);
    if (!n) return 0;
    const int64_t cols = m->fp8.len + 2;
    float *meta = malloc(n * sizeof *meta), *state = malloc(n * sizeof *state);
    TR_CHECK(meta && state, "out of host memory for a checkpoint");
    char name[128];
    int missing = 0, rc = 0;
    for (int l = 0; !rc && l < m->dims.nl; l++) {
        fp8_meta_name(name, sizeof name, m, l);
        ckpt_dtype dt;
        int ndim;
        int64_t shape[CKPT_MAX_DIMS];
        if (ckpt_reader_tensor(rd, name, &dt, &ndim, shape) || ndim != 2 || shape[0] != FP8_ROWS || shape[1] != cols) {
            missing = 1;
            break;
        }
        rc = ckpt_read(rd, name, CKPT_F32, ckpt_place_slice(0, 0, FP8_ROWS), meta + (size_t)l * FP8_ROWS * (size_t)cols,
                       err, errlen);
    }
    if (!rc && !missing) {
        llama_fp8_get_state(m, state);
        fp8_meta_convert(m, state, meta, false);
        llama_fp8_set_state(m, state);
    } else if (!rc && rank == 0) {
        printf("twinrun: the checkpoint has no FP8 state for --fp8-amax-history-len %d (a bf16 run's, or another "
               "history length): FP8 scales start at 1 and histories empty, as in a fresh FP8 run\n",
               m->fp8.len);
    }
    free(meta), free(state);
    return rc;
}

/* The lowest rank whose shard write failed (-1: none), agreed by all. Takes the barrier's place. */
static int first_failed_rank(llama_model *m, const tr_groups *gr, int mine) {
    float *d = dev_alloc(m->dev, sizeof(float), "checkpoint status");
    TR_CHECK(d != NULL, "out of device memory for the checkpoint status");
    float h = mine >= 0 ? -(float)mine : -16777216.0f; /* MAX of -rank picks the lowest failing rank */
    dev_copy_h2d(m->stream, d, &h, sizeof h);
    coll_all_reduce(gr->world, m->stream, d, d, 1, TR_F32, COLL_MAX);
    dev_copy_d2h(m->stream, &h, d, sizeof h);
    dev_stream_sync(m->stream);
    dev_free(m->dev, d);
    return h > -16777216.0f ? (int)-h : -1;
}

int train_ckpt_save(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_grid *g, const tr_groups *gr,
                    const tr_lr_schedule *sched, const tr_run_position *pos, const ckpt_provenance *prov,
                    const ckpt_io *io, int *culprit, char *err, size_t errlen) {
    int ignored;
    if (!culprit) culprit = &ignored;
    *culprit = g->rank;
    if (!io) io = ckpt_io_posix();
    ckpt_layout lay;
    ckpt_coords me;
    layout_of(cfg, g, &lay, &me);
    int rc = 0;
    if (g->rank == 0) rc = ckpt_save_begin(io, cfg->save, pos->iteration, cfg->overwrite_checkpoints, err, errlen);
    coll_barrier(gr->world, m->stream);
    if (rc) return rc;

    /* the first replica of each tensor writes it: DP rank 0 and CP rank 0, TP rank 0 for norms; what
     * the distributed optimizer shards (Adam's moments, and a bf16 model's master weights) every DP x CP
     * rank writes its part of, as flat ranges that a reader reassembles like whole tensors */
    const bool writer = g->coord[TR_AXIS_DP] == 0 && g->coord[TR_AXIS_CP] == 0;
    const bool master_sharded = llama_master_sharded(m);
    const size_t nmaster = llama_master_count(m);
    float *master = malloc((nmaster ? nmaster : 1) * sizeof *master); /* indexed by llama_master_index */
    TR_CHECK(master != NULL, "out of host memory for a checkpoint");
    llama_download_master(m, master);
    float *mh = download(m, o->m, o->shard_len), *vh = download(m, o->v, o->shard_len);
    blobs bs = {.cap = 6 * m->nparams + m->dims.nl};
    bs.b = calloc((size_t)bs.cap, sizeof *bs.b);
    bs.names = calloc((size_t)bs.cap, sizeof *bs.names);
    TR_CHECK(bs.b && bs.names, "out of host memory for a checkpoint");
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        if (p->place.tp_replicated && g->coord[TR_AXIS_TP] != 0) continue;
        piece pcs[2];
        int np = pieces_of(p, pcs);
        for (int k = 0; k < np; k++) {
            const piece *pc = &pcs[k];
            size_t first = p->offset + pc->local_off;
            ckpt_place part = pc->slice;
            const llama_seg sg = optim_seg_of(o, m, p->offset); /* a parameter lies in one bucket */
            if (o->distributed) part = shard_part(p, pc, sg.begin, sg.begin + sg.len, &first);
            if (master_sharded) {
                if (part.n > 0) add_blob(&bs, "", pc, master + llama_master_index(m, first), part);
            } else if (writer) {
                add_blob(&bs, "", pc, master + p->offset + pc->local_off, pc->slice);
            }
            if (!o->distributed) {
                if (!writer) continue;
                add_blob(&bs, "optim.exp_avg/", pc, mh + p->offset + pc->local_off, pc->slice);
                add_blob(&bs, "optim.exp_avg_sq/", pc, vh + p->offset + pc->local_off, pc->slice);
            } else {
                if (part.n == 0) continue;
                add_blob(&bs, "optim.exp_avg/", pc, mh + sg.local + (first - sg.begin), part);
                add_blob(&bs, "optim.exp_avg_sq/", pc, vh + sg.local + (first - sg.begin), part);
            }
        }
    }
    float *fp8 = writer && g->coord[TR_AXIS_TP] == 0 ? fp8_meta_download(m) : NULL;
    for (int l = 0; fp8 && l < m->dims.nl; l++) {
        piece pc = {.ndim = 2, .gshape = {FP8_ROWS, m->fp8.len + 2}, .slice = ckpt_place_slice(0, 0, FP8_ROWS)};
        fp8_meta_name(pc.name, sizeof pc.name, m, l);
        add_blob(&bs, "", &pc, fp8 + (size_t)l * FP8_ROWS * (size_t)(m->fp8.len + 2), pc.slice);
    }
    rc = ckpt_shard_write(io, cfg->save, pos->iteration, &lay, &me, bs.b, bs.n, NULL, err, errlen);
    free(bs.b), free(bs.names), free(master), free(mh), free(vh), free(fp8);
    /* commit only what every rank wrote: the lowest failing rank (+1) reaches everyone */
    int failed = first_failed_rank(m, gr, rc ? g->rank : -1);
    if (rc) return rc;
    *culprit = failed;
    if (failed >= 0)
        return tr_errf(err, errlen,
                       "checkpoint at iteration %lld not committed: rank %d could not write its shard "
                       "(its message says why); the previous checkpoint stays the latest",
                       (long long)pos->iteration, failed);
    if (g->rank != 0) return 0;

    ckpt_manifest man;
    memset(&man, 0, sizeof man);
    man.iteration = pos->iteration;
    man.consumed_train_samples = pos->consumed_train;
    man.consumed_valid_samples = pos->consumed_valid;
    ckpt_model_from_config(cfg, &man.model);
    man.layout = lay;
    man.sched = (ckpt_sched){sched->max_lr,        sched->min_lr,       sched->init_lr,   sched->warmup_samples,
                             sched->decay_samples, pos->consumed_train, (int)sched->style};
    man.optimizer_step = o->step;
    man.seed = cfg->seed;
    man.bf16 = cfg->bf16;
    man.prov = *prov; /* borrowed: the job owns its paths */
    if (ckpt_save_commit(io, cfg->save, pos->iteration, &man, err, errlen)) return -1;
    return cfg->keep_last > 0 ? ckpt_prune(io, cfg->save, cfg->keep_last, err, errlen) : 0;
}

int train_ckpt_open(const tr_config *cfg, ckpt_reader **rd, char *err, size_t errlen) {
    *rd = NULL;
    int64_t it;
    int r = train_ckpt_pick(cfg, &it, NULL, 0, err, errlen);
    if (r < 0) return -1;
    if (r == 1) return 0; /* nothing there yet (train_ckpt_pick says why): a fresh start */
    ckpt_verify_report rep;
    if (ckpt_verify(cfg->load, it, &rep, err, errlen)) return -1;
    *rd = ckpt_reader_open(cfg->load, it, err, errlen);
    return *rd ? 0 : -1;
}

int train_ckpt_read_weights(ckpt_reader *rd, const llama_model *m, float *host, char *err, size_t errlen) {
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        piece pcs[2];
        int np = pieces_of(p, pcs);
        for (int k = 0; k < np; k++)
            if (ckpt_read(rd, pcs[k].name, CKPT_F32, pcs[k].slice, host + p->offset + pcs[k].local_off, err, errlen))
                return -1;
    }
    return 0;
}

int train_ckpt_load_from(ckpt_reader *rd, llama_model *m, tr_optimizer *o, const tr_config *cfg, int rank,
                         tr_run_position *pos, int *loaded, char *err, size_t errlen) {
    *loaded = 0;
    if (!rd) return 0;
    const ckpt_manifest *man = ckpt_reader_manifest(rd);
    ckpt_model_shape run;
    ckpt_model_from_config(cfg, &run);
    char where[TR_PATH_LEN + 32];
    snprintf(where, sizeof where, "%s iteration %lld", cfg->load, (long long)man->iteration);
    int rc = ckpt_model_compare(&man->model, &run, where, err, errlen);
    const bool with_optim = !cfg->finetune && !cfg->no_load_optim;
    float *master = calloc(m->total ? m->total : 1, sizeof *master);
    float *mh = calloc(o->shard_len ? o->shard_len : 1, sizeof *mh),
          *vh = calloc(o->shard_len ? o->shard_len : 1, sizeof *vh);
    TR_CHECK(master && mh && vh, "out of host memory for a checkpoint");
    char name[512];
    for (int i = 0; !rc && i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        piece pcs[2];
        int np = pieces_of(p, pcs);
        for (int k = 0; !rc && k < np; k++) {
            const piece *pc = &pcs[k];
            rc = ckpt_read(rd, pc->name, CKPT_F32, pc->slice, master + p->offset + pc->local_off, err, errlen);
            if (rc || !with_optim) continue;
            size_t first = p->offset + pc->local_off;
            ckpt_place want = pc->slice;
            const llama_seg sg = optim_seg_of(o, m, p->offset); /* a parameter lies in one bucket */
            if (o->distributed) {
                want = shard_part(p, pc, sg.begin, sg.begin + sg.len, &first);
                if (want.n == 0) continue;
            }
            const size_t at = sg.local + (first - sg.begin);
            snprintf(name, sizeof name, "optim.exp_avg/%s", pc->name);
            rc = ckpt_read(rd, name, CKPT_F32, want, mh + at, err, errlen);
            snprintf(name, sizeof name, "optim.exp_avg_sq/%s", pc->name);
            if (!rc) rc = ckpt_read(rd, name, CKPT_F32, want, vh + at, err, errlen);
        }
    }
    if (!rc && !cfg->finetune) rc = fp8_meta_load(rd, m, rank, err, errlen);
    if (!rc) {
        llama_set_master(m, master);
        if (with_optim) {
            dev_copy_h2d(m->stream, o->m, mh, o->shard_len * sizeof *mh);
            dev_copy_h2d(m->stream, o->v, vh, o->shard_len * sizeof *vh);
            dev_stream_sync(m->stream);
            o->step = (int)man->optimizer_step;
        }
        if (!cfg->finetune) {
            pos->iteration = man->iteration;
            pos->consumed_train = man->consumed_train_samples;
            pos->consumed_valid = man->consumed_valid_samples;
        }
        *loaded = 1;
    }
    free(master), free(mh), free(vh);
    return rc;
}
