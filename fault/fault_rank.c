/* The injection sites: what a rank does when a fault of the plan is due.
 *
 * A fault fires at most once per job (across restarts): the first rank it targets marks it with
 * the attempt number, and other ranks of the same node may still fire it in that attempt (a node
 * crash takes the whole node down). Every message a fault prints starts with "fault injected" so
 * nobody mistakes a rehearsal for a real failure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "twinrun/err.h"

struct fault_rank {
    fault_plan *plan;
    int rank, world;
    dev_device *d;
    int64_t step;  /* the iteration running; 0 during set-up */
    int n;         /* faults that target this rank */
    int *mine;     /* [n] indices into plan->faults */
    tr_file_io io; /* the wrapper fault_ckpt_io hands out */
    const tr_file_io *base;
    int io_fault;     /* index of the checkpoint fault in force, -1 none */
    int64_t io_bytes; /* bytes written so far under a ckpt_crash */
};

fault_rank *fault_rank_open(fault_plan *plan, int rank, int world, dev_device *d) {
    if (!plan || plan->n == 0) return NULL;
    fault_rank *fr = calloc(1, sizeof *fr);
    TR_CHECK(fr != NULL, "out of host memory for the fault plan");
    fr->plan = plan, fr->rank = rank, fr->world = world, fr->d = d, fr->io_fault = -1;
    fr->mine = calloc((size_t)plan->n, sizeof *fr->mine);
    TR_CHECK(fr->mine != NULL, "out of host memory for the fault plan");
    for (int i = 0; i < plan->n; i++)
        if (fault_targets_rank(&plan->faults[i], rank, plan->gpus_per_node)) fr->mine[fr->n++] = i;
    return fr;
}

void fault_rank_close(fault_rank *fr) {
    if (!fr) return;
    free(fr->mine);
    free(fr);
}

/* May fault i fire now? Not when it fired in an earlier attempt, or (rank faults) at all before. */
static bool may_fire(const fault_rank *fr, int i) {
    const fault_plan *p = fr->plan;
    if (p->supervised) {
        int a = p->fired[i].attempt;
        if (a == 0) return true;
        return a == p->attempt + 1 && p->faults[i].rank < 0; /* the rest of a node, same attempt */
    }
    return !p->fired[i].fired || p->faults[i].rank < 0;
}

static void mark_fired(fault_rank *fr, int i) {
    fault_plan *p = fr->plan;
    if (p->supervised && p->fired[i].attempt == 0) {
        p->fired[i].attempt = p->attempt + 1;
        p->fired[i].at = dev_clock_now(fr->d);
        p->fired[i].rank = fr->rank;
    }
    p->fired[i].fired = true;
}

static void say(const fault_rank *fr, int i) {
    char what[256];
    fault_spec_describe(&fr->plan->faults[i], what, sizeof what);
    fprintf(stderr, "twinrun: rank %d: fault injected: %s\n", fr->rank, what);
}

static bool name_matches(const char *want, const char *have) { return !strcmp(want, "any") || !strcmp(want, have); }

static void observe(void *arg, coll_comm *c, const char *op) {
    fault_rank *fr = arg;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_HANG && f->kind != FAULT_COLL_MISMATCH) continue;
        if (fr->step < f->step || !may_fire(fr, i)) continue;
        if (!name_matches(f->group, coll_comm_name(c)) || !name_matches(f->op, op)) continue;
        mark_fired(fr, i);
        say(fr, i);
        if (f->kind == FAULT_HANG) dev_rank_hang();
        /* a call the rest of the group does not make: at this sequence number they issue `op` */
        int32_t *one = dev_alloc(fr->d, sizeof(int32_t) * (size_t)(coll_comm_size(c) + 1), "fault: mismatched call");
        TR_CHECK(one != NULL, "out of device memory for an injected collective");
        if (!strcmp(op, "all_gather")) coll_all_reduce(c, dev_stream_default(fr->d), one, one, 1, TR_I32, COLL_SUM);
        else coll_all_gather(c, dev_stream_default(fr->d), one, one + 1, 1, TR_I32);
        dev_free(fr->d, one);
    }
}

void fault_rank_watch(fault_rank *fr, coll_comm *c) {
    if (!fr || !c) return;
    for (int k = 0; k < fr->n; k++) {
        fault_kind kind = fr->plan->faults[fr->mine[k]].kind;
        if (kind == FAULT_HANG || kind == FAULT_COLL_MISMATCH) {
            coll_comm_set_observer(c, observe, fr);
            return;
        }
    }
}

void fault_step_begin(fault_rank *fr, int64_t it) {
    if (!fr) return;
    fr->step = it;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->step != it || !may_fire(fr, i)) continue;
        if (f->kind == FAULT_CRASH || f->kind == FAULT_NODE_CRASH) {
            mark_fired(fr, i);
            say(fr, i);
            dev_rank_abort(137); /* what a launcher reports for a process killed by SIGKILL */
        }
        if (f->kind == FAULT_OOM) {
            mark_fired(fr, i);
            say(fr, i);
            dev_info info;
            dev_get_info(fr->d, &info);
            size_t used = dev_mem_used(fr->d);
            size_t want = info.capacity > used ? info.capacity - used + ((size_t)1 << 20) : ((size_t)1 << 50);
            void *p = dev_alloc(fr->d, want, "activations of the next micro-batch (fault: oom)");
            if (p) dev_free(fr->d, p); /* an unlimited device: nothing to exhaust */
            else tr_fatal("%s", dev_last_error(fr->d));
        }
    }
}

bool fault_preempt(fault_rank *fr) {
    if (!fr) return false;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_PREEMPT || f->step != fr->step || !may_fire(fr, i)) continue;
        mark_fired(fr, i);
        say(fr, i);
        return true;
    }
    return false;
}

double fault_data_stall(fault_rank *fr) {
    if (!fr) return 0;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_DATA_STALL || f->step != fr->step || !may_fire(fr, i)) continue;
        mark_fired(fr, i);
        say(fr, i);
        return INFINITY;
    }
    return 0;
}

void fault_step_end(fault_rank *fr, double busy_seconds) {
    if (!fr) return;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_STRAGGLER || fr->step < f->step) continue;
        /* slow for the rest of the attempt it started in; a restart gets a healthy node */
        const fault_plan *p = fr->plan;
        if (p->supervised && p->fired[i].attempt != 0 && p->fired[i].attempt != p->attempt + 1) continue;
        if (!p->fired[i].fired || (p->supervised && p->fired[i].attempt == 0)) {
            mark_fired(fr, i);
            say(fr, i);
        }
        if (busy_seconds > 0) dev_sleep(fr->d, (f->factor - 1.0) * busy_seconds);
    }
}

void fault_tensor_site(fault_rank *fr, fault_tensor t, int layer, dev_stream *s, void *x, tr_dtype dt, size_t n) {
    if (!fr || n == 0) return;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_NAN || f->tensor != t || f->step != fr->step || !may_fire(fr, i)) continue;
        if (t != FAULT_T_LOSS && f->layer >= 0 && f->layer != layer) continue;
        mark_fired(fr, i);
        say(fr, i);
        const float v = f->inf ? __builtin_inff() : __builtin_nanf("");
        if (dt == TR_BF16) {
            uint16_t b = tr_f32_to_bf16(v);
            dev_copy_h2d(s, x, &b, sizeof b);
        } else {
            TR_CHECK(dt == TR_F32, "a NaN can only be injected into fp32 or bf16 tensors");
            dev_copy_h2d(s, x, &v, sizeof v);
        }
        dev_stream_sync(s); /* the host value must outlive the copy */
    }
}

bool fault_amax_spike(fault_rank *fr, bool gradient, int first_layer, int nlayers, int *layer, double *factor) {
    if (!fr) return false;
    const fault_tensor t = gradient ? FAULT_T_GRADIENT : FAULT_T_ACTIVATION;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_AMAX_SPIKE || f->tensor != t || f->step != fr->step || !may_fire(fr, i)) continue;
        if (f->layer >= 0 && (f->layer < first_layer || f->layer >= first_layer + nlayers)) continue;
        mark_fired(fr, i);
        say(fr, i);
        *layer = f->layer >= 0 ? f->layer : first_layer, *factor = f->factor;
        return true;
    }
    return false;
}

/* ---- checkpoint I/O ------------------------------------------------------------------------ */
static int io_open(void *ctx, const char *path, int flags, int mode) {
    fault_rank *fr = ctx;
    return fr->base->open(fr->base->ctx, path, flags, mode);
}

static ssize_t io_write(void *ctx, int fd, const void *buf, size_t n) {
    fault_rank *fr = ctx;
    const fault_spec *f = &fr->plan->faults[fr->io_fault];
    if (f->kind == FAULT_CKPT_ENOSPC) {
        errno = ENOSPC;
        return -1;
    }
    /* ckpt_crash: half a kilobyte reaches the disk, then the process is gone */
    if (fr->io_bytes + (int64_t)n > 512) {
        size_t part = fr->io_bytes < 512 ? (size_t)(512 - fr->io_bytes) : 0;
        if (part) (void)fr->base->write(fr->base->ctx, fd, buf, part);
        dev_rank_abort(137);
    }
    fr->io_bytes += (int64_t)n;
    return fr->base->write(fr->base->ctx, fd, buf, n);
}

static int io_fsync(void *ctx, int fd) {
    fault_rank *fr = ctx;
    return fr->base->fsync(fr->base->ctx, fd);
}
static int io_close(void *ctx, int fd) {
    fault_rank *fr = ctx;
    return fr->base->close(fr->base->ctx, fd);
}
static int io_rename(void *ctx, const char *a, const char *b) {
    fault_rank *fr = ctx;
    return fr->base->rename(fr->base->ctx, a, b);
}
static int io_fsync_dir(void *ctx, const char *d) {
    fault_rank *fr = ctx;
    return fr->base->fsync_dir(fr->base->ctx, d);
}
static int io_unlink(void *ctx, const char *p) {
    fault_rank *fr = ctx;
    return fr->base->unlink(fr->base->ctx, p);
}
static int io_mkdir(void *ctx, const char *p) {
    fault_rank *fr = ctx;
    return fr->base->mkdir(fr->base->ctx, p);
}
static int io_rmdir(void *ctx, const char *p) {
    fault_rank *fr = ctx;
    return fr->base->rmdir(fr->base->ctx, p);
}

const tr_file_io *fault_ckpt_io(fault_rank *fr, int64_t it, const tr_file_io *base) {
    if (!fr) return base;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if ((f->kind != FAULT_CKPT_ENOSPC && f->kind != FAULT_CKPT_CRASH) || f->step != it || !may_fire(fr, i))
            continue;
        mark_fired(fr, i);
        say(fr, i);
        fr->base = base, fr->io_fault = i, fr->io_bytes = 0;
        fr->io = (tr_file_io){fr,        io_open,      io_write,  io_fsync, io_close,
                              io_rename, io_fsync_dir, io_unlink, io_mkdir, io_rmdir};
        return &fr->io;
    }
    return base;
}

int fault_visible_devices(fault_rank *fr, int devices) {
    if (!fr) return devices;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_SHORT_NODE || !may_fire(fr, i)) continue;
        mark_fired(fr, i);
        return f->devices > 0 ? f->devices : devices - 1;
    }
    return devices;
}

const char *fault_build_version(fault_rank *fr, const char *version) {
    if (!fr) return version;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_VERSION_SKEW || !may_fire(fr, i)) continue;
        mark_fired(fr, i);
        return f->version;
    }
    return version;
}

void fault_slow_links(fault_rank *fr) {
    if (!fr) return;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_SLOW_LINK || !may_fire(fr, i)) continue;
        mark_fired(fr, i);
        if (fr->rank % fr->plan->gpus_per_node == 0) say(fr, i); /* once a node */
        coll_set_link_slowdown(fr->d, f->factor);
        return;
    }
}

/* Whether path[0..n) is dir, or (a relative dir) ends with it as whole components ("shared" names
 * /data/shared; "/data/shared" names only itself). */
static bool names_dir(const char *path, size_t n, const char *dir) {
    const size_t m = strlen(dir);
    if (m > n || strncmp(path + n - m, dir, m) != 0) return false;
    return m == n || (dir[0] != '/' && path[n - m - 1] == '/');
}

/* A hidden directory hides everything below it: /data/shared/logs when /data/shared is not mounted. */
static bool path_under(const char *path, const char *dir) {
    const size_t n = strlen(path);
    for (size_t i = 1; i <= n; i++)
        if ((i == n || path[i] == '/') && names_dir(path, i, dir)) return true;
    return false;
}

bool fault_dir_hidden(fault_rank *fr, const char *path) {
    if (!fr || !path) return false;
    for (int k = 0; k < fr->n; k++) {
        const int i = fr->mine[k];
        const fault_spec *f = &fr->plan->faults[i];
        if (f->kind != FAULT_HIDDEN_DIR || !may_fire(fr, i)) continue;
        if (f->dir[0] && !path_under(path, f->dir)) continue;
        mark_fired(fr, i);
        say(fr, i);
        return true;
    }
    return false;
}
