/* The checkpoint tests' fixtures (fixture_ckpt.h): fault_io, the file-system table that crashes or
 * fails on cue and then undoes what a power cut may lose, and the tm_ model every layout saves. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"

/* ---- fault_io ----------------------------------------------------------------------------- */

static void fio_parent(char *out, const char *path) {
    snprintf(out, FIO_PATH, "%s", path);
    char *s = strrchr(out, '/');
    if (s) *s = '\0';
    else strcpy(out, ".");
}

static fio_file *fio_track(fault_io *f, const char *path) {
    for (int i = 0; i < f->nfiles; i++)
        if (strcmp(f->files[i].path, path) == 0) return &f->files[i];
    if (f->nfiles == FIO_MAX) abort();
    fio_file *t = &f->files[f->nfiles++];
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    return t;
}

static void fio_add_op(fault_io *f, fio_op_kind kind, const char *path, const char *from, int backup) {
    if (f->nops == FIO_MAX) abort();
    fio_op *o = &f->ops[f->nops++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    snprintf(o->path, sizeof o->path, "%s", path);
    if (from) snprintf(o->from, sizeof o->from, "%s", from);
    fio_parent(o->parent, path);
    if (backup) o->backup = fx_read_file(path, &o->backup_len);
}

/* Every call passes here first: count it, maybe crash, maybe fail. */
static int fio_enter(fault_io *f, int is_write) {
    int s = f->step++;
    if (f->crash_at == s) f->dead = 1;
    if (f->dead) {
        errno = EIO;
        return -1;
    }
    if (is_write) f->writes++;
    int at = f->fail_writes_only ? (is_write ? f->writes - 1 : -2) : s;
    if (f->fail_at >= 0 && at == f->fail_at) {
        errno = f->fail_errno;
        return -1;
    }
    return 0;
}

static int fio_open(void *ctx, const char *path, int flags, int mode) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    struct stat st;
    int existed = stat(path, &st) == 0;
    int fd = open(path, flags, mode);
    if (fd < 0) return -1;
    fio_file *t = fio_track(f, path);
    if (!existed) fio_add_op(f, OP_CREATE, path, NULL, 0), t->synced = 0;
    if (flags & O_TRUNC) t->synced = 0; /* truncation is treated as immediate */
    f->fds[f->nfds] = fd, f->fd_file[f->nfds] = (int)(t - f->files), f->nfds++;
    return fd;
}

static fio_file *fio_of_fd(fault_io *f, int fd) {
    for (int i = 0; i < f->nfds; i++)
        if (f->fds[i] == fd) return &f->files[f->fd_file[i]];
    return NULL;
}

static ssize_t fio_write(void *ctx, int fd, const void *buf, size_t n) {
    fault_io *f = ctx;
    if (fio_enter(f, 1)) return -1;
    fio_file *t = fio_of_fd(f, fd);
    if (t) t->dirty = 1;
    return write(fd, buf, n);
}

static int fio_fsync(void *ctx, int fd) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_file *t = fio_of_fd(f, fd);
    if (t) t->synced = lseek(fd, 0, SEEK_END), t->dirty = 0;
    return fsync(fd);
}

static int fio_close(void *ctx, int fd) {
    fault_io *f = ctx;
    int failed = fio_enter(f, 0);
    for (int i = 0; i < f->nfds; i++)
        if (f->fds[i] == fd) f->fds[i] = f->fds[--f->nfds], f->fd_file[i] = f->fd_file[f->nfds];
    close(fd); /* a failed close still releases the descriptor */
    return failed ? -1 : 0;
}

static int fio_rename(void *ctx, const char *from, const char *to) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_add_op(f, OP_RENAME, to, from, 1);
    if (rename(from, to)) {
        f->nops--;
        return -1;
    }
    fio_file *t = fio_track(f, from), *u = fio_track(f, to);
    *u = *t, snprintf(u->path, sizeof u->path, "%s", to);
    t->synced = 0, t->dirty = 0;
    return 0;
}

static int fio_fsync_dir(void *ctx, const char *dir) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    int k = 0;
    for (int i = 0; i < f->nops; i++) {
        if (strcmp(f->ops[i].parent, dir) == 0) free(f->ops[i].backup);
        else f->ops[k++] = f->ops[i];
    }
    f->nops = k;
    return 0;
}

static int fio_unlink(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    fio_add_op(f, OP_UNLINK, path, NULL, 1);
    if (unlink(path)) {
        free(f->ops[--f->nops].backup);
        return -1;
    }
    return 0;
}

static int fio_mkdir(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    if (mkdir(path, 0755)) return -1;
    fio_add_op(f, OP_MKDIR, path, NULL, 0);
    return 0;
}

static int fio_rmdir(void *ctx, const char *path) {
    fault_io *f = ctx;
    if (fio_enter(f, 0)) return -1;
    return rmdir(path);
}

void fio_init(fault_io *f) {
    memset(f, 0, sizeof *f);
    f->io = (ckpt_io){f,          fio_open,      fio_write,  fio_fsync, fio_close,
                      fio_rename, fio_fsync_dir, fio_unlink, fio_mkdir, fio_rmdir};
    f->crash_at = -1, f->fail_at = -1;
}

void fio_crash_aftermath(fault_io *f) {
    for (int i = 0; i < f->nfds; i++) close(f->fds[i]);
    f->nfds = 0;
    for (int i = 0; i < f->nfiles; i++)
        if (f->files[i].dirty) {
            struct stat st;
            if (stat(f->files[i].path, &st) == 0 && st.st_size > f->files[i].synced)
                if (truncate(f->files[i].path, f->files[i].synced)) abort();
        }
    for (int i = f->nops - 1; i >= 0; i--) {
        fio_op *o = &f->ops[i];
        switch (o->kind) {
        case OP_CREATE: unlink(o->path); break;
        case OP_RENAME:
            rename(o->path, o->from);
            if (o->backup) fx_write_file(o->path, o->backup, o->backup_len);
            break;
        case OP_UNLINK:
            if (o->backup) fx_write_file(o->path, o->backup, o->backup_len);
            break;
        case OP_MKDIR: rmdir(o->path); break;
        }
        free(o->backup);
    }
    f->nops = 0;
}

void fio_release(fault_io *f) {
    for (int i = 0; i < f->nops; i++) free(f->ops[i].backup);
    for (int i = 0; i < f->nfds; i++) close(f->fds[i]);
    f->nops = 0, f->nfds = 0;
}

/* ---- the tm_ model ------------------------------------------------------------------------ */

static uint64_t tm_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static double tm_value(const char *name, uint64_t g, int64_t iter) {
    return (double)(tm_hash(name) % 1000) + (double)g * 0.5 + (double)iter * 0.25;
}

int64_t tm_fill(const char *name, ckpt_dtype dt, const int64_t *shape, int ndim, ckpt_place *p, int64_t iter,
                void **out) {
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

static void tm_add(tm_rank *r, const char *name, ckpt_dtype dt, int ndim, int64_t d0, int64_t d1, ckpt_place p,
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

void tm_rank_blobs(tm_rank *r, const ckpt_layout *L, int rank, int64_t iter) {
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

void tm_rank_free(tm_rank *r) {
    for (int i = 0; i < r->n; i++) free(r->data[i]);
}

ckpt_manifest tm_manifest(int64_t iter, const ckpt_layout *L) {
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

int tm_save_over(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos,
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

int tm_save(const ckpt_io *io, const char *dir, int64_t iter, const ckpt_layout *L, int gather_infos, char *err,
            size_t errlen) {
    return tm_save_over(io, dir, iter, L, gather_infos, false, err, errlen);
}

int tm_check_region(ckpt_reader *rd, const char *name, ckpt_dtype dt, const int64_t *shape, int ndim, ckpt_place p,
                    int64_t iter, char *err, size_t errlen) {
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
