/* The keys of a fault and their values, shared by the compact plan syntax and scenario files so
 * both accept and refuse exactly the same things. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "fault_keys.h"
#include "twinrun/err.h"

#define KB(k) (1u << (k))
#define TARGET_RANK KB(FAULT_KEY_RANK)
#define TARGET_NODE (KB(FAULT_KEY_RANK) | KB(FAULT_KEY_NODE))
#define PLACE (KB(FAULT_KEY_GROUP) | KB(FAULT_KEY_OP))

static const struct {
    const char *name;
    fault_key_type type;
} keys[FAULT_KEY_COUNT] = {
    [FAULT_KEY_RANK] = {"rank", FAULT_KT_INT},       [FAULT_KEY_NODE] = {"node", FAULT_KT_INT},
    [FAULT_KEY_GROUP] = {"group", FAULT_KT_NAME},    [FAULT_KEY_OP] = {"op", FAULT_KT_NAME},
    [FAULT_KEY_TENSOR] = {"tensor", FAULT_KT_NAME},  [FAULT_KEY_LAYER] = {"layer", FAULT_KT_INT},
    [FAULT_KEY_INF] = {"inf", FAULT_KT_BOOL},        [FAULT_KEY_FACTOR] = {"factor", FAULT_KT_NUMBER},
    [FAULT_KEY_DEVICES] = {"devices", FAULT_KT_INT}, [FAULT_KEY_VERSION] = {"version", FAULT_KT_NAME},
    [FAULT_KEY_DAMAGE] = {"damage", FAULT_KT_NAME},  [FAULT_KEY_DIR] = {"dir", FAULT_KT_NAME},
};

/* Which keys mean something per kind: a key that does not is refused rather than ignored, so a
 * scenario never silently tests less than its author wrote. */
static const unsigned kind_keys[FAULT_KIND_COUNT] = {
    [FAULT_HANG] = TARGET_RANK | PLACE,
    [FAULT_CRASH] = TARGET_RANK,
    [FAULT_NODE_CRASH] = TARGET_NODE,
    [FAULT_NAN] = TARGET_RANK | KB(FAULT_KEY_TENSOR) | KB(FAULT_KEY_LAYER) | KB(FAULT_KEY_INF),
    [FAULT_STRAGGLER] = TARGET_RANK | KB(FAULT_KEY_FACTOR),
    [FAULT_COLL_MISMATCH] = TARGET_RANK | PLACE,
    [FAULT_CKPT_ENOSPC] = TARGET_RANK,
    [FAULT_CKPT_CRASH] = TARGET_RANK,
    [FAULT_CKPT_CORRUPT] = TARGET_RANK,
    [FAULT_DATA_CORRUPT] = TARGET_RANK | KB(FAULT_KEY_DAMAGE),
    [FAULT_OOM] = TARGET_RANK,
    [FAULT_SHORT_NODE] = TARGET_NODE | KB(FAULT_KEY_DEVICES),
    [FAULT_VERSION_SKEW] = TARGET_NODE | KB(FAULT_KEY_VERSION),
    [FAULT_PREEMPT] = TARGET_RANK,
    [FAULT_DATA_STALL] = TARGET_RANK,
    [FAULT_SLOW_LINK] = TARGET_NODE | KB(FAULT_KEY_FACTOR),
    [FAULT_HIDDEN_DIR] = TARGET_NODE | KB(FAULT_KEY_DIR),
    [FAULT_AMAX_SPIKE] = TARGET_RANK | KB(FAULT_KEY_TENSOR) | KB(FAULT_KEY_LAYER) | KB(FAULT_KEY_FACTOR),
};

const char *fault_key_name(fault_key k) { return (unsigned)k < FAULT_KEY_COUNT ? keys[k].name : "?"; }

int fault_key_from_name(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < FAULT_KEY_COUNT; k++)
        if (strcmp(name, keys[k].name) == 0) return k;
    return -1;
}

fault_key_type fault_key_type_of(fault_key k) { return (unsigned)k < FAULT_KEY_COUNT ? keys[k].type : FAULT_KT_NAME; }

const char *fault_key_list(void) {
    return "rank, node, group, op, tensor, layer, inf, factor, devices, version, damage, dir";
}

const char *fault_key_suggest(const char *name) {
    const char *hit = NULL;
    size_t best = SIZE_MAX;
    for (int k = 0; k < FAULT_KEY_COUNT; k++) {
        size_t d = tr_edit_distance(name, strlen(name), keys[k].name, strlen(keys[k].name));
        if (d < best) best = d, hit = keys[k].name;
    }
    return best <= 2 && best < strlen(name) ? hit : NULL;
}

bool fault_kind_is_startup(fault_kind kind) {
    return kind == FAULT_SHORT_NODE || kind == FAULT_VERSION_SKEW || kind == FAULT_DATA_CORRUPT ||
           fault_kind_is_doctor(kind);
}

bool fault_kind_is_node(fault_kind kind) {
    return kind == FAULT_NODE_CRASH || kind == FAULT_SHORT_NODE || kind == FAULT_VERSION_SKEW ||
           fault_kind_is_doctor(kind);
}

bool fault_kind_is_doctor(fault_kind kind) { return kind == FAULT_SLOW_LINK || kind == FAULT_HIDDEN_DIR; }

bool fault_key_applies(fault_kind kind, fault_key k) {
    return (unsigned)kind < FAULT_KIND_COUNT && (unsigned)k < FAULT_KEY_COUNT && (kind_keys[kind] & KB(k));
}

void fault_kind_keys_text(fault_kind kind, char *out, size_t outlen) {
    size_t used = 0;
    if (!outlen) return;
    out[0] = 0;
    for (int k = 0; k < FAULT_KEY_COUNT; k++) {
        if (!fault_key_applies(kind, (fault_key)k)) continue;
        int w = snprintf(out + used, outlen - used, "%s%s", used ? ", " : "", keys[k].name);
        if (w < 0 || (size_t)w >= outlen - used) return;
        used += (size_t)w;
    }
}

/* Whole text a decimal integer in [lo, hi]; no spaces, no '+', no junk. */
static int parse_int(const char *v, long lo, long hi, long *out) {
    const char *p = v + (*v == '-');
    if (!*p) return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return -1;
    errno = 0;
    long x = strtol(v, NULL, 10);
    if (errno == ERANGE || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* Names carry no spaces or separators of the compact syntax, so a plan always prints back as parsed;
 * a path may also hold '/'. */
static bool plain_text(const char *v, const char *extra) {
    if (!*v) return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(extra, *p)) return false;
    return true;
}
static bool plain_name(const char *v) { return plain_text(v, "._+-"); }

int fault_spec_set(fault_spec *f, fault_key k, const char *v, char *err, size_t errlen) {
    const char *kn = fault_key_name(k);
    long x;
    switch (k) {
    case FAULT_KEY_RANK:
    case FAULT_KEY_NODE:
    case FAULT_KEY_LAYER:
    case FAULT_KEY_DEVICES:
        if (parse_int(v, 0, INT_MAX, &x))
            return tr_errf(err, errlen, "%s: expected a non-negative integer, got '%s'%s", kn, v,
                           k == FAULT_KEY_LAYER ? " (leave out layer for any layer)" : "");
        /* the injection site reads devices 0 as "one fewer than gpus_per_node" (the default) */
        if (k == FAULT_KEY_DEVICES && x == 0)
            return tr_errf(err, errlen,
                           "devices: a node seeing 0 devices is not a short node: give 1 or more, "
                           "fewer than gpus_per_node (or leave out devices for one fewer)");
        if (k == FAULT_KEY_RANK) f->rank = (int)x;
        if (k == FAULT_KEY_NODE) f->node = (int)x;
        if (k == FAULT_KEY_LAYER) f->layer = (int)x;
        if (k == FAULT_KEY_DEVICES) f->devices = (int)x;
        return 0;
    case FAULT_KEY_GROUP:
        if (!fault_group_valid(v))
            return tr_errf(err, errlen, "group: '%s' is not a communicator: use tp, pp, dp, cp, dp_cp, world or any",
                           v);
        snprintf(f->group, sizeof f->group, "%s", v);
        return 0;
    case FAULT_KEY_OP:
        if (!fault_op_valid(v))
            return tr_errf(err, errlen,
                           "op: '%s' is not a collective: use all_reduce, all_gather, reduce_scatter, broadcast, send, "
                           "recv, barrier or any",
                           v);
        snprintf(f->op, sizeof f->op, "%s", v);
        return 0;
    case FAULT_KEY_TENSOR: {
        int t = fault_tensor_from_name(v);
        if (t < 0) return tr_errf(err, errlen, "tensor: '%s' is not loss, activation or gradient", v);
        f->tensor = (fault_tensor)t;
        return 0;
    }
    case FAULT_KEY_INF:
        if (strcmp(v, "true") == 0) f->inf = true;
        else if (strcmp(v, "false") == 0) f->inf = false;
        else return tr_errf(err, errlen, "inf: expected true or false, got '%s'", v);
        return 0;
    case FAULT_KEY_FACTOR: {
        char *end;
        errno = 0;
        /* strtod's leading spaces, hex and "inf" are not numbers a person writes for a factor */
        bool plain = *v && !isspace((unsigned char)*v) && !strpbrk(v, "xX");
        double d = plain ? strtod(v, &end) : NAN;
        if (!plain || *end || errno == ERANGE || !isfinite(d))
            return tr_errf(err, errlen, "factor: expected a number, got '%s'", v);
        f->factor = d;
        return 0;
    }
    case FAULT_KEY_VERSION:
        if (strlen(v) >= sizeof f->version || !plain_name(v))
            return tr_errf(err, errlen, "version: '%s' must be 1-%zu letters, digits or ._+- characters", v,
                           sizeof f->version - 1);
        snprintf(f->version, sizeof f->version, "%s", v);
        return 0;
    case FAULT_KEY_DIR: {
        /* no "..": the fault names a directory the doctor checks, never a way out of one */
        const size_t n = strlen(v);
        if (n >= sizeof f->dir || !plain_text(v, "._+-/") || strstr(v, ".."))
            return tr_errf(err, errlen,
                           "dir: '%s' must be 1-%zu letters, digits or ._+-/ characters, without '..' (a directory, "
                           "or the end of its path: shared)",
                           v, sizeof f->dir - 1);
        snprintf(f->dir, sizeof f->dir, "%.*s", (int)(n > 1 && v[n - 1] == '/' ? n - 1 : n), v);
        return 0;
    }
    case FAULT_KEY_DAMAGE: {
        int d = fault_damage_from_name(v);
        if (d < 0)
            return tr_errf(err, errlen,
                           "damage: '%s' is not bin_cut, bin_missing, idx_cut, idx_magic, idx_dtype or token", v);
        f->damage = (fault_damage)d;
        return 0;
    }
    default: return tr_errf(err, errlen, "unknown key %d", (int)k);
    }
}

void fault_spec_normalize(fault_spec *f, unsigned given, int gpus_per_node) {
    if (fault_kind_is_node(f->kind) && f->rank >= 0 && f->node < 0 && gpus_per_node > 0) {
        f->node = f->rank / gpus_per_node;
        f->rank = -1;
    }
    if (f->kind == FAULT_SHORT_NODE && !(given & KB(FAULT_KEY_DEVICES)) && gpus_per_node > 0)
        f->devices = gpus_per_node - 1;
}
