/* One fault: names, defaults, the check against a world, the one-line description, and the plan
 * container. Parsing lives in fault_parse.c (compact syntax) and fault_keys.c (values). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "fault_keys.h"
#include "twinrun/err.h"

static const char *const kind_names[FAULT_KIND_COUNT] = {
    [FAULT_HANG] = "hang",
    [FAULT_CRASH] = "crash",
    [FAULT_NODE_CRASH] = "node_crash",
    [FAULT_NAN] = "nan",
    [FAULT_STRAGGLER] = "straggler",
    [FAULT_COLL_MISMATCH] = "coll_mismatch",
    [FAULT_CKPT_ENOSPC] = "ckpt_enospc",
    [FAULT_CKPT_CRASH] = "ckpt_crash",
    [FAULT_CKPT_CORRUPT] = "ckpt_corrupt",
    [FAULT_DATA_CORRUPT] = "data_corrupt",
    [FAULT_OOM] = "oom",
    [FAULT_SHORT_NODE] = "short_node",
    [FAULT_VERSION_SKEW] = "version_skew",
    [FAULT_PREEMPT] = "preempt",
    [FAULT_DATA_STALL] = "data_stall",
    [FAULT_SLOW_LINK] = "slow_link",
    [FAULT_HIDDEN_DIR] = "hidden_dir",
    [FAULT_AMAX_SPIKE] = "amax_spike",
};

static const char *const tensor_names[] = {
    [FAULT_T_LOSS] = "loss", [FAULT_T_ACTIVATION] = "activation", [FAULT_T_GRADIENT] = "gradient"};

static const char *const damage_names[FAULT_DAMAGE_COUNT] = {
    [FAULT_D_BIN_CUT] = "bin_cut",     [FAULT_D_BIN_MISSING] = "bin_missing", [FAULT_D_IDX_CUT] = "idx_cut",
    [FAULT_D_IDX_MAGIC] = "idx_magic", [FAULT_D_IDX_DTYPE] = "idx_dtype",     [FAULT_D_TOKEN] = "token",
};

#define FAULT_DEFAULT_VERSION "twinrun-0.0-skew"

const char *fault_kind_name(fault_kind k) { return (unsigned)k < FAULT_KIND_COUNT ? kind_names[k] : "?"; }

int fault_kind_from_name(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < FAULT_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

const char *fault_tensor_name(fault_tensor t) {
    return (unsigned)t < sizeof tensor_names / sizeof tensor_names[0] ? tensor_names[t] : "?";
}

int fault_tensor_from_name(const char *name) {
    if (!name) return -1;
    for (int t = 0; t < (int)(sizeof tensor_names / sizeof tensor_names[0]); t++)
        if (strcmp(name, tensor_names[t]) == 0) return t;
    return -1;
}

const char *fault_damage_name(fault_damage d) { return (unsigned)d < FAULT_DAMAGE_COUNT ? damage_names[d] : "?"; }

int fault_damage_from_name(const char *name) {
    if (!name) return -1;
    for (int d = 0; d < FAULT_DAMAGE_COUNT; d++)
        if (strcmp(name, damage_names[d]) == 0) return d;
    return -1;
}

void fault_spec_default(fault_spec *f, fault_kind k) {
    memset(f, 0, sizeof *f);
    f->kind = k;
    f->step = 0;
    f->rank = -1;
    f->node = -1;
    snprintf(f->group, sizeof f->group, "any");
    snprintf(f->op, sizeof f->op, "any");
    /* NaN in the loss only shows what the loss check already catches; an activation is the case
     * that needs the origin tracked down, so it is the default. */
    f->tensor = FAULT_T_ACTIVATION;
    f->layer = -1;
    f->inf = false;
    f->factor = k == FAULT_AMAX_SPIKE ? 1e4 : 4.0; /* a spike: an outlier four orders above the tensor */
    f->devices = 0; /* gpus_per_node is unknown here: the parsers make it gpus_per_node - 1 */
    snprintf(f->version, sizeof f->version, "%s", FAULT_DEFAULT_VERSION);
    f->damage = FAULT_D_BIN_CUT; /* the form the data faults had before there was a choice */
}

/* The node a fault hits: its node, or its rank's. -1 when neither is given. */
static int target_node(const fault_spec *f, int gpus_per_node) {
    if (f->node >= 0) return f->node;
    if (f->rank >= 0 && gpus_per_node > 0) return f->rank / gpus_per_node;
    return -1;
}

static int check_target(const fault_spec *f, int world, int gpus_per_node, char *err, size_t errlen) {
    const char *kn = fault_kind_name(f->kind);
    int nodes = world / gpus_per_node;
    if (fault_kind_is_node(f->kind)) {
        if (f->rank >= world)
            return tr_errf(err, errlen, "rank %d does not exist: the world has %d ranks (0-%d)", f->rank, world,
                           world - 1);
        if (f->node >= 0 && f->rank >= 0 && f->rank / gpus_per_node != f->node)
            return tr_errf(err, errlen, "%s: rank %d is on node %d, not node %d: give only node (or only rank)", kn,
                           f->rank, f->rank / gpus_per_node, f->node);
        int node = target_node(f, gpus_per_node);
        if (f->node >= nodes)
            return tr_errf(err, errlen, "node %d does not exist: the cluster has %d node%s of %d GPUs (0-%d)", f->node,
                           nodes, nodes == 1 ? "" : "s", gpus_per_node, nodes - 1);
        if (node < 0)
            return tr_errf(err, errlen, "%s needs a target: give node (0-%d), or a rank (0-%d) to hit its node", kn,
                           nodes - 1, world - 1);
        return 0;
    }
    if (f->node >= 0)
        return tr_errf(err, errlen,
                       "%s hits one rank, not a node: give rank (0-%d) instead of node "
                       "(node applies to node_crash, short_node, version_skew, slow_link and hidden_dir)",
                       kn, world - 1);
    if (f->rank >= world)
        return tr_errf(err, errlen, "rank %d does not exist: the world has %d ranks (0-%d)", f->rank, world, world - 1);
    /* a damaged data file is shared by every rank that reads it, so it may name no rank */
    if (f->rank < 0 && f->kind != FAULT_DATA_CORRUPT)
        return tr_errf(err, errlen, "%s needs a target: give rank (0-%d)", kn, world - 1);
    return 0;
}

static bool in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return true;
    return false;
}

static const char *const group_names[] = {"tp", "pp", "dp", "cp", "dp_cp", "world", "any", NULL};
static const char *const op_names[] = {
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv", "barrier", "any", NULL};

bool fault_group_valid(const char *g) { return g && in_list(g, group_names); }
bool fault_op_valid(const char *op) { return op && in_list(op, op_names); }

int fault_spec_check(const fault_spec *f, int world, int gpus_per_node, char *err, size_t errlen) {
    if (!f) return tr_errf(err, errlen, "no fault");
    if ((unsigned)f->kind >= FAULT_KIND_COUNT) return tr_errf(err, errlen, "unknown fault kind %d", (int)f->kind);
    if (gpus_per_node <= 0 || world <= 0 || world % gpus_per_node != 0)
        return tr_errf(err, errlen, "a world of %d ranks is not whole nodes of %d GPUs", world, gpus_per_node);
    const char *kn = fault_kind_name(f->kind);
    if (check_target(f, world, gpus_per_node, err, errlen)) return -1;

    if (f->kind == FAULT_DATA_CORRUPT && f->damage == FAULT_D_TOKEN) {
        if (f->step < 1)
            return tr_errf(err, errlen,
                           "data_corrupt with damage token needs a step >= 1: the iteration whose first sample holds "
                           "the bad token (got %lld)",
                           (long long)f->step);
    } else if (fault_kind_is_startup(f->kind)) {
        if (f->step != 0)
            return tr_errf(err, errlen, "%s happens at start-up, before iteration 1: leave out the step (got %lld)", kn,
                           (long long)f->step);
    } else if (f->step < 1) {
        return tr_errf(err, errlen, "%s needs a step >= 1, the iteration it fires at (got %lld)", kn,
                       (long long)f->step);
    }
    if (!fault_group_valid(f->group))
        return tr_errf(err, errlen, "group '%s' is not a communicator: use tp, pp, dp, cp, dp_cp, world or any",
                       f->group);
    if (!fault_op_valid(f->op))
        return tr_errf(err, errlen,
                       "op '%s' is not a collective: use all_reduce, all_gather, reduce_scatter, broadcast, send, "
                       "recv, barrier or any",
                       f->op);
    if ((unsigned)f->tensor > FAULT_T_GRADIENT)
        return tr_errf(err, errlen, "tensor %d is not loss, activation or gradient", (int)f->tensor);
    if (f->layer < -1) return tr_errf(err, errlen, "layer %d: give a layer index >= 0 (or none for any)", f->layer);
    if (f->kind == FAULT_NAN && f->tensor == FAULT_T_LOSS && f->layer >= 0)
        return tr_errf(err, errlen, "nan: layer %d applies to activation and gradient, not loss: leave out layer",
                       f->layer);
    if (f->kind == FAULT_STRAGGLER && !(f->factor > 1 && f->factor <= 1000))
        return tr_errf(err, errlen, "straggler: factor %g must be in (1, 1000]: the rank computes factor times slower",
                       f->factor);
    if (f->kind == FAULT_SLOW_LINK && !(f->factor > 1 && f->factor <= 1000))
        return tr_errf(err, errlen,
                       "slow_link: factor %g must be in (1, 1000]: the node's links run factor times slower",
                       f->factor);
    if (f->kind == FAULT_AMAX_SPIKE && f->tensor == FAULT_T_LOSS)
        return tr_errf(err, errlen,
                       "amax_spike: the loss is not an FP8 tensor: use tensor activation (the qkv input) "
                       "or gradient (its output gradient)");
    if (f->kind == FAULT_AMAX_SPIKE && !(f->factor >= 100 && f->factor <= 1e30))
        return tr_errf(err, errlen,
                       "amax_spike: factor %g must be in [100, 1e30]: the amax grows factor times, enough to stand out",
                       f->factor);
    if (f->kind == FAULT_SHORT_NODE && (f->devices < 0 || f->devices >= gpus_per_node))
        return tr_errf(err, errlen, "short_node: devices %d must be in 0-%d: the node sees fewer than its %d GPUs",
                       f->devices, gpus_per_node - 1, gpus_per_node);
    if (f->kind == FAULT_VERSION_SKEW && !f->version[0])
        return tr_errf(err, errlen, "version_skew: version is empty: give the other build's version string");
    return 0;
}

static void target_text(const fault_spec *f, char *out, size_t outlen) {
    if (f->node >= 0) snprintf(out, outlen, "node %d", f->node);
    else if (f->rank >= 0)
        snprintf(out, outlen, fault_kind_is_node(f->kind) ? "the node of rank %d" : "rank %d", f->rank);
    else snprintf(out, outlen, "every rank");
}

/* "dp all_reduce", "any collective", "a dp collective", "an all_reduce" */
static void place_text(const fault_spec *f, char *out, size_t outlen) {
    bool g = strcmp(f->group, "any") != 0, o = strcmp(f->op, "any") != 0;
    if (g && o) snprintf(out, outlen, "%s %s", f->group, f->op);
    else if (g) snprintf(out, outlen, "a %s collective", f->group);
    else if (o) snprintf(out, outlen, "an %s", f->op);
    else snprintf(out, outlen, "a collective");
}

void fault_spec_describe(const fault_spec *f, char *out, size_t outlen) {
    if (!out || outlen == 0) return;
    if (!f) {
        snprintf(out, outlen, "no fault");
        return;
    }
    char who[64], where[96];
    target_text(f, who, sizeof who);
    place_text(f, where, sizeof where);
    long long it = (long long)f->step;
    switch (f->kind) {
    case FAULT_HANG: snprintf(out, outlen, "hang of %s before %s at iteration %lld", who, where, it); break;
    case FAULT_CRASH: snprintf(out, outlen, "crash of %s at iteration %lld", who, it); break;
    case FAULT_NODE_CRASH: snprintf(out, outlen, "crash of %s (all its ranks) at iteration %lld", who, it); break;
    case FAULT_NAN: {
        const char *v = f->inf ? "Inf" : "NaN";
        if (f->tensor == FAULT_T_LOSS) snprintf(out, outlen, "%s in the loss of %s at iteration %lld", v, who, it);
        else if (f->layer >= 0)
            snprintf(out, outlen, "%s in the %s of layer %d on %s at iteration %lld", v, fault_tensor_name(f->tensor),
                     f->layer, who, it);
        else
            snprintf(out, outlen, "%s in %s (any layer) on %s at iteration %lld", v,
                     f->tensor == FAULT_T_ACTIVATION ? "an activation" : "a gradient", who, it);
        break;
    }
    case FAULT_STRAGGLER:
        snprintf(out, outlen, "straggler: %s computes %gx slower from iteration %lld", who, f->factor, it);
        break;
    case FAULT_COLL_MISMATCH:
        snprintf(out, outlen, "collective mismatch: %s issues %s its group does not, at iteration %lld", who, where,
                 it);
        break;
    case FAULT_CKPT_ENOSPC:
        snprintf(out, outlen, "ENOSPC on the checkpoint write of %s at iteration %lld", who, it);
        break;
    case FAULT_CKPT_CRASH:
        snprintf(out, outlen, "crash of %s while writing its checkpoint shard at iteration %lld", who, it);
        break;
    case FAULT_CKPT_CORRUPT:
        snprintf(out, outlen, "a flipped byte in the checkpoint shard of %s saved at iteration %lld", who, it);
        break;
    case FAULT_DATA_CORRUPT: {
        static const char *const what[FAULT_DAMAGE_COUNT] = {
            [FAULT_D_BIN_CUT] = ".bin cut short",      [FAULT_D_BIN_MISSING] = ".bin missing",
            [FAULT_D_IDX_CUT] = ".idx cut short",      [FAULT_D_IDX_MAGIC] = ".idx magic overwritten",
            [FAULT_D_IDX_DTYPE] = ".idx dtype zeroed", [FAULT_D_TOKEN] = "a token outside the vocabulary",
        };
        const char *d = (unsigned)f->damage < FAULT_DAMAGE_COUNT ? what[f->damage] : "damaged";
        if (f->damage == FAULT_D_TOKEN) snprintf(out, outlen, "corrupt data file (%s), read at iteration %lld", d, it);
        else if (f->rank >= 0)
            snprintf(out, outlen, "corrupt data file (%s) read by rank %d, before the job starts", d, f->rank);
        else snprintf(out, outlen, "corrupt data file (%s), before the job starts", d);
        break;
    }
    case FAULT_OOM: snprintf(out, outlen, "out of device memory on %s at iteration %lld", who, it); break;
    case FAULT_SHORT_NODE:
        snprintf(out, outlen, "short node: %s sees only %d device%s at start-up", who, f->devices,
                 f->devices == 1 ? "" : "s");
        break;
    case FAULT_VERSION_SKEW:
        snprintf(out, outlen, "version skew: %s runs build '%s' at start-up", who, f->version);
        break;
    case FAULT_PREEMPT: snprintf(out, outlen, "preemption: SIGTERM to %s at iteration %lld", who, it); break;
    case FAULT_DATA_STALL:
        snprintf(out, outlen, "data stall: a sample read of %s never returns at iteration %lld", who, it);
        break;
    case FAULT_SLOW_LINK: snprintf(out, outlen, "slow link: the network of %s is %gx slower", who, f->factor); break;
    case FAULT_HIDDEN_DIR:
        if (f->dir[0]) snprintf(out, outlen, "hidden directory: %s cannot see %s", who, f->dir);
        else snprintf(out, outlen, "hidden directory: %s cannot see the shared directories", who);
        break;
    case FAULT_AMAX_SPIKE: {
        char layer[32] = "its first layer";
        if (f->layer >= 0) snprintf(layer, sizeof layer, "layer %d", f->layer);
        snprintf(out, outlen, "FP8 amax spike: the %s of %s's qkv on %s is %gx at iteration %lld",
                 f->tensor == FAULT_T_GRADIENT ? "output gradient" : "input", layer, who, f->factor, it);
        break;
    }
    default: snprintf(out, outlen, "unknown fault kind %d", (int)f->kind); break;
    }
}

bool fault_targets_rank(const fault_spec *f, int r, int gpus_per_node) {
    if (!f || r < 0) return false;
    if (fault_kind_is_node(f->kind)) {
        int node = target_node(f, gpus_per_node);
        return node >= 0 && gpus_per_node > 0 && r / gpus_per_node == node;
    }
    if (f->kind == FAULT_DATA_CORRUPT && f->rank < 0) return true; /* the shared file: every reader */
    return f->rank == r;
}

int fault_plan_init(fault_plan *p, int n, int gpus_per_node) {
    if (!p) return -1;
    memset(p, 0, sizeof *p);
    p->gpus_per_node = gpus_per_node;
    if (n < 0 || n > FAULT_PLAN_MAX) return -1;
    if (n == 0) return 0;
    p->faults = calloc((size_t)n, sizeof *p->faults);
    p->fired = calloc((size_t)n, sizeof *p->fired);
    if (!p->faults || !p->fired) {
        fault_plan_free(p);
        return -1;
    }
    p->n = n;
    return 0;
}

void fault_plan_free(fault_plan *p) {
    if (!p) return;
    free(p->faults);
    free(p->fired);
    int gpn = p->gpus_per_node;
    memset(p, 0, sizeof *p);
    p->gpus_per_node = gpn;
}

int fault_spec_check_job(const fault_spec *f, const fault_job *j, fault_check_at *at, char *err, size_t errlen) {
    fault_check_at ignored;
    if (!at) at = &ignored;
    *at = FAULT_AT_SPEC;
    if (fault_spec_check(f, j->world, j->gpus_per_node, err, errlen)) return -1;
    *at = FAULT_AT_STEP;
    if (j->train_iters > 0 && f->step > j->train_iters) /* a start-up kind has step 0 */
        return tr_errf(err, errlen, "step %lld is beyond %s %lld: it would never fire; use a step in 1-%lld",
                       (long long)f->step, j->iters_name, (long long)j->train_iters, (long long)j->train_iters);
    *at = FAULT_AT_LAYER;
    if (f->layer >= 0 && j->num_layers > 0 && f->layer >= j->num_layers)
        return tr_errf(err, errlen, "layer %d does not exist: %s is %d (layers 0-%d)", f->layer, j->layers_name,
                       j->num_layers, j->num_layers - 1);
    *at = FAULT_AT_SPEC;
    if (f->kind == FAULT_AMAX_SPIKE && !j->fp8)
        return tr_errf(err, errlen, "amax_spike needs a job that trains in FP8: add --fp8-format hybrid (or e4m3)");
    const bool ckpt = f->kind == FAULT_CKPT_ENOSPC || f->kind == FAULT_CKPT_CRASH || f->kind == FAULT_CKPT_CORRUPT;
    *at = FAULT_AT_SPEC;
    if (ckpt && j->save_interval <= 0)
        return tr_errf(err, errlen, "the job saves no checkpoints: set %s", j->interval_name);
    *at = FAULT_AT_STEP;
    if (ckpt && f->step % j->save_interval != 0 && f->step != j->train_iters)
        return tr_errf(err, errlen,
                       "no checkpoint is saved at iteration %lld: use a multiple of %s %d (or train-iters %lld)",
                       (long long)f->step, j->interval_name, j->save_interval, (long long)j->train_iters);
    *at = FAULT_AT_SPEC;
    return 0;
}
