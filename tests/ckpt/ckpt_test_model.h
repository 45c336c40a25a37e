/* A small "model" saved by any (tp, pp, dp, cp) layout, the way the engine will: TP splits along
 * rows (column-parallel) and columns (row-parallel), replicas across DP, a distributed optimizer's
 * flat ranges, per-rank RNG state, a bf16 tensor and a scalar. Every element's value depends only on
 * (tensor, global index, iteration), so any region read back can be checked exactly. */
#ifndef TWINRUN_TESTS_CKPT_CKPT_TEST_MODEL_H
#define TWINRUN_TESTS_CKPT_CKPT_TEST_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_internal.h"

#define TM_LAYERS 2
#define TM_MAX_BLOBS 16

static inline uint64_t tm_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static inline double tm_value(const char *name, uint64_t g, int64_t iter) {
    return (double)(tm_hash(name) % 1000) + (double)g * 0.5 + (double)iter * 0.25;
}

/* What a blob with this placement holds: n elements written to out as dtype. Returns n (-1 on error). */
static inline int64_t tm_fill(const char *name, ckpt_dtype dt, const int64_t *shape, int ndim, ckpt_place *p,
                              int64_t iter, void **out) {
    char err[256];
    if (ckpt_place_resolve(p, shape, ndim, name, err, sizeof err)) return -1;
    size_t esz = ckpt_dtype_size(dt);
    uint8_t *b = malloc((size_t)p->n * esz + 1);
    ckpt_runs it;
    ckpt_runs_init(&it, p, shape, ndim);
    uint64_t g, local, len;
    for (uint64_t k = 0; ckpt_runs_get(&it, k, &g, &local, &len); k++)
        for (uint64_t e = 0; e < len; e++) {
            double v = tm_value(name, g + e, iter);
            uint8_t *dst = b + (local + e) * esz;
            if (dt == CKPT_F32) {
                float f = (float)v;
                memcpy(dst, &f, 4);
            } else if (dt == CKPT_BF16) {
                uint16_t h = (uint16_t)((uint64_t)v & 0xffff);
                memcpy(dst, &h, 2);
            } else {
                uint64_t u = (uint64_t)v;
                memcpy(dst, &u, esz);
            }
        }
    *out = b;
    return p->n;
}

typedef struct tm_rank {
    ckpt_blob blobs[TM_MAX_BLOBS];
    char names[TM_MAX_BLOBS][64];
    void *data[TM_MAX_BLOBS];
    int n;
} tm_rank;

static inline void tm_add(tm_rank *r, const char *name, ckpt_dtype dt, int ndim, int64_t d0, int64_t d1, ckpt_place p,
                          int64_t iter) {
    ckpt_blob *b = &r->blobs[r->n];
    memset(b, 0, sizeof *b);
    snprintf(r->names[r->n], sizeof r->names[r->n], "%s", name);
    b->name = r->names[r->n], b->dtype = dt, b->ndim = ndim, b->shape[0] = d0, b->shape[1] = d1;
    b->place = p;
    tm_fill(name, dt, b->shape, ndim, &b->place, iter, &r->data[r->n]);
    b->data = r->data[r->n];
    r->n++;
}

/* Global tensors: layers.{l}.col [8, 6] (rows split by TP; every DP rank writes its replica),
 * layers.{l}.row [6, 8] (columns split by TP; DP rank 0), optim.exp_avg/layers.{l}.row (TP
 * columns, then a flat range per DP rank when dist_opt, else DP rank 0), norm BF16 [8], step I64
 * scalar, rng/rank_R U64 [3] for each rank. Layers are split evenly over PP stages. */
static inline void tm_rank_blobs(tm_rank *r, const ckpt_layout *L, int rank, int64_t iter) {
    memset(r, 0, sizeof *r);
    ckpt_coords c = ckpt_coords_of(L, rank);
    char name[64];
    int per = TM_LAYERS / L->pp, rows = 8 / L->tp;
    for (int l = c.pp * per; l < (c.pp + 1) * per; l++) {
        if (c.cp == 0) {
            snprintf(name, sizeof name, "layers.%d.col", l);
            tm_add(r, name, CKPT_F32, 2, 8, 6, ckpt_place_slice(0, rows * c.tp, rows), iter);
        }
        if (c.cp == 0 && c.dp == 0) {
            snprintf(name, sizeof name, "layers.%d.row", l);
            tm_add(r, name, CKPT_F32, 2, 6, 8, ckpt_place_slice(1, rows * c.tp, rows), iter);
        }
        snprintf(name, sizeof name, "optim.exp_avg/layers.%d.row", l);
        ckpt_place p = ckpt_place_slice(1, rows * c.tp, rows);
        if (L->dist_opt) {
            int64_t sub = 6 * rows, chunk = sub / L->dp;
            p.off = chunk * c.dp, p.n = c.dp == L->dp - 1 ? sub - p.off : chunk;
        }
        if (c.cp == 0 && (L->dist_opt || c.dp == 0)) tm_add(r, name, CKPT_F32, 2, 6, 8, p, iter);
    }
    if (rank == 0) {
        tm_add(r, "norm", CKPT_BF16, 1, 8, 0, ckpt_place_full(), iter);
        tm_add(r, "step", CKPT_I64, 0, 0, 0, ckpt_place_full(), iter);
    }
    snprintf(name, sizeof name, "rng/rank_%05d", rank);
    tm_add(r, name, CKPT_U64, 1, 3, 0, ckpt_place_full(), iter);
}

static inline void tm_rank_free(tm_rank *r) {
    for (int i = 0; i < r->n; i++) free(r->data[i]);
}

static inline ckpt_manifest tm_manifest(int64_t iter, const ckpt_layout *L) {
    ckpt_manifest m;
    memset(&m, 0, sizeof m);
    m.iteration = iter, m.consumed_train_samples = iter * 16, m.consumed_valid_samples = iter / 10 * 32;
    m.model = (ckpt_model_shape){.num_layers = TM_LAYERS,
                                 .hidden_size = 8,
                                 .ffn_hidden_size = 24,
                                 .num_attention_heads = 2,
                                 .num_query_groups = 1,
                                 .kv_channels = 4,
                                 .vocab_size = 300,
                                 .make_vocab_size_divisible_by = 128,
                                 .max_position_embeddings = 64,
                                 .seq_length = 16,
                                 .normalization = 1,
                                 .swiglu = true,
                                 .untie_embeddings_and_output_weights = true,
                                 .rotary_base = 500000.0,
                                 .norm_epsilon = 1e-5};
    m.layout = *L;
    m.sched = (ckpt_sched){.max_lr = 3e-4,
                           .min_lr = 3e-5,
                           .init_lr = 0.0,
                           .warmup_samples = 32,
                           .decay_samples = 1600,
                           .num_steps = iter * 16,
                           .style = 2};
    m.optimizer_step = iter, m.seed = 18446744073709551557ull, m.bf16 = true;
    /* provenance: one weighted blend and a tokenizer, as a real run records them */
    static char p0[] = "0.7", p1[] = "/data/web_text_document", p2[] = "0.3", p3[] = "/data/code_text_document";
    static char *paths[] = {p0, p1, p2, p3};
    m.prov = (ckpt_provenance){.present = true,
                               .version = "0.3.0",
                               .commit = "0123456789ab",
                               .backend = "twin",
                               .global_batch_size = 16,
                               .micro_batch_size = 2,
                               .n_data_path = 4,
                               .data_path = paths,
                               .data_fingerprint = 0xfedcba9876543210ull,
                               .tokenizer_type = "HuggingFaceTokenizer",
                               .tokenizer_model = "/models/llama3",
                               .tokenizer_fingerprint = 0x0123456789abcdefull};
    return m;
}

/* A whole save through io: begin (replacing a complete iter only when overwrite), every rank's shard,
 * commit (full re-read when infos is 0). */
static inline int tm_save_over(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos,
                               bool overwrite, char *err, size_t errlen) {
    if (ckpt_save_begin(io, dir, iter, overwrite, err, errlen)) return -1;
    int world = ckpt_layout_world(L);
    ckpt_file_info *infos = calloc((size_t)world, sizeof *infos);
    int rc = 0;
    for (int r = 0; r < world && !rc; r++) {
        tm_rank tr;
        tm_rank_blobs(&tr, L, r, iter);
        ckpt_coords c = ckpt_coords_of(L, r);
        rc = ckpt_shard_write(io, dir, iter, L, &c, tr.blobs, tr.n, &infos[r], err, errlen);
        tm_rank_free(&tr);
    }
    ckpt_manifest m = tm_manifest(iter, L);
    if (gather_infos) m.n_files = world, m.files = infos;
    if (!rc) rc = ckpt_save_commit(io, dir, iter, &m, err, errlen);
    free(infos);
    return rc;
}

static inline int tm_save(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos,
                          char *err, size_t errlen) {
    return tm_save_over(io, dir, iter, L, gather_infos, false, err, errlen);
}

/* Reads region p of a tensor and compares it with what the model says; 0 when equal. */
static inline int tm_check_region(ckpt_reader *rd, const char *name, ckpt_dtype dt, const int64_t *shape, int ndim,
                                  ckpt_place p, int64_t iter, char *err, size_t errlen) {
    void *want;
    int64_t n = tm_fill(name, dt, shape, ndim, &p, iter, &want);
    if (n < 0) return -1;
    size_t bytes = (size_t)n * ckpt_dtype_size(dt);
    void *got = malloc(bytes + 1);
    int rc = ckpt_read(rd, name, dt, p, got, err, errlen);
    if (!rc && memcmp(got, want, bytes) != 0) rc = -1, snprintf(err, errlen, "tensor %s: values differ", name);
    free(got), free(want);
    return rc;
}

#endif
