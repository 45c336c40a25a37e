#include "launch/launch_vars.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

#define MAX_WORLD (1 << 20)

/* 1 with *out, 0 when unset or empty, -1 with err when not an integer in [lo, hi]. */
static int get_int(tr_env_get get, void *ctx, const char *name, long lo, long hi, int *out, char *err, size_t errlen) {
    const char *v = get(name, ctx);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    if (errno || *end || end == v || isspace((unsigned char)*v) || n < lo || n > hi)
        return tr_errf(err, errlen, "%s=\"%.64s\": expected an integer in [%ld, %ld]", name, v, lo, hi);
    *out = (int)n;
    return 1;
}

int tr_launch_parse_port(const char *name, const char *v, int *port, char *err, size_t errlen) {
    char *end;
    errno = 0;
    const long n = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || errno || *end || isspace((unsigned char)*v) || n < 1 || n > 65535)
        return tr_errf(err, errlen,
                       "%s=\"%.64s\" is not a TCP port: use a number in 1..65535 that is free on the "
                       "master node (torchrun's default is %d)",
                       name, v ? v : "", TR_DEFAULT_MASTER_PORT);
    *port = (int)n;
    return 0;
}

static int get_master(tr_env_get get, void *ctx, tr_launch_vars *o, bool local_default, char *err, size_t errlen) {
    const char *addr = get("MASTER_ADDR", ctx), *port = get("MASTER_PORT", ctx);
    if (addr && *addr) {
        const size_t n = strlen(addr);
        if (n >= sizeof o->master_addr)
            return tr_errf(err, errlen, "MASTER_ADDR is %zu characters long; a host name has at most 255", n);
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)addr[i]))
                return tr_errf(err, errlen,
                               "MASTER_ADDR=\"%.64s\" contains a space or control character; set it to the "
                               "first node's host name or address",
                               addr);
        memcpy(o->master_addr, addr, n + 1);
    } else if (local_default) {
        snprintf(o->master_addr, sizeof o->master_addr, "127.0.0.1");
    } else {
        return 0;
    }
    o->master_port = TR_DEFAULT_MASTER_PORT;
    if (port && *port && tr_launch_parse_port("MASTER_PORT", port, &o->master_port, err, errlen)) return -1;
    o->has_master = true;
    return 0;
}

/* TWINRUN_STORE_TOKEN and TWINRUN_STORE_BIND: printable, bounded; the token long enough to guess. */
static int get_store(tr_env_get get, void *ctx, tr_launch_vars *o, char *err, size_t errlen) {
    const char *tok = get("TWINRUN_STORE_TOKEN", ctx), *bind = get("TWINRUN_STORE_BIND", ctx);
    if (tok && *tok) {
        const size_t n = strlen(tok);
        if (n < 16 || n >= sizeof o->store_token)
            return tr_errf(err, errlen,
                           "TWINRUN_STORE_TOKEN is %zu characters: use 16 to 256 random printable "
                           "characters, the same for every rank (e.g. $(od -An -N16 -tx1 /dev/urandom | "
                           "tr -d ' \\n'))",
                           n);
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)tok[i]))
                return tr_errf(err, errlen,
                               "TWINRUN_STORE_TOKEN contains a space or control character at position "
                               "%zu: use printable characters only (e.g. hexadecimal)",
                               i);
        memcpy(o->store_token, tok, n + 1);
    }
    if (bind && *bind) {
        const size_t n = strlen(bind);
        if (n >= sizeof o->store_bind)
            return tr_errf(err, errlen, "TWINRUN_STORE_BIND is %zu characters long; an address has at most 255", n);
        for (size_t i = 0; i < n; i++)
            if (!isgraph((unsigned char)bind[i]))
                return tr_errf(err, errlen,
                               "TWINRUN_STORE_BIND=\"%.64s\" contains a space or control character: set "
                               "it to an address of rank 0's host, or * for every interface",
                               bind);
        memcpy(o->store_bind, bind, n + 1);
    }
    return 0;
}

int tr_launch_vars_parse(tr_env_get get, void *ctx, tr_launch_vars *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    if (get_store(get, ctx, o, err, errlen)) return -1;
    o->world = 1;
    int r;
    const char *local = get("LOCAL_RANK", ctx), *ompi = get("OMPI_COMM_WORLD_RANK", ctx);
    if (local && *local) {
        o->launcher = TR_LAUNCHER_TORCHRUN;
        if ((r = get_int(get, ctx, "WORLD_SIZE", 1, MAX_WORLD, &o->world, err, errlen)) <= 0)
            return r < 0 ? -1
                         : tr_errf(err, errlen,
                                   "LOCAL_RANK is set but WORLD_SIZE is not: a torchrun-style launch "
                                   "sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT");
        if ((r = get_int(get, ctx, "RANK", 0, MAX_WORLD - 1, &o->rank, err, errlen)) <= 0)
            return r < 0 ? -1
                         : tr_errf(err, errlen,
                                   "LOCAL_RANK is set but RANK is not: set RANK to this process's "
                                   "global rank (node index x GPUs per node + LOCAL_RANK)");
        if (get_int(get, ctx, "LOCAL_RANK", 0, MAX_WORLD - 1, &o->local_rank, err, errlen) < 0) return -1;
        if (get_int(get, ctx, "LOCAL_WORLD_SIZE", 1, MAX_WORLD, &o->local_world, err, errlen) < 0) return -1;
        if (get_master(get, ctx, o, o->world == 1, err, errlen)) return -1;
        if (!o->has_master && o->world > 1)
            return tr_errf(err, errlen,
                           "WORLD_SIZE=%d but MASTER_ADDR is not set: every rank needs the rendezvous "
                           "address (MASTER_ADDR=<node 0's host> MASTER_PORT=%d), as torchrun sets it",
                           o->world, TR_DEFAULT_MASTER_PORT);
    } else if (ompi && *ompi) {
        o->launcher = TR_LAUNCHER_OMPI;
        if ((r = get_int(get, ctx, "OMPI_COMM_WORLD_SIZE", 1, MAX_WORLD, &o->world, err, errlen)) <= 0)
            return r < 0 ? -1
                         : tr_errf(err, errlen,
                                   "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not; "
                                   "start the job with OpenMPI's mpirun");
        if (get_int(get, ctx, "OMPI_COMM_WORLD_RANK", 0, MAX_WORLD - 1, &o->rank, err, errlen) < 0) return -1;
        if ((r = get_int(get, ctx, "OMPI_COMM_WORLD_LOCAL_RANK", 0, MAX_WORLD - 1, &o->local_rank, err, errlen)) < 0)
            return -1;
        if (!r) o->local_rank = o->rank;
        if (get_int(get, ctx, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, MAX_WORLD, &o->local_world, err, errlen) < 0) return -1;
        const bool one_host = o->local_world == o->world;
        if (get_master(get, ctx, o, one_host, err, errlen)) return -1;
        if (!o->has_master && o->world > 1)
            return tr_errf(err, errlen,
                           "mpirun started %d ranks on several hosts and MASTER_ADDR is not set: pass the "
                           "rendezvous to every rank, e.g. mpirun --hostfile hostfile -x "
                           "MASTER_ADDR=<first host of the hostfile> -x MASTER_PORT=%d ...",
                           o->world, TR_DEFAULT_MASTER_PORT);
    } else {
        if ((r = get_int(get, ctx, "WORLD_SIZE", 1, MAX_WORLD, &o->world, err, errlen)) < 0) return -1;
        o->launcher = r ? TR_LAUNCHER_PLAIN : TR_LAUNCHER_NONE;
        if (get_int(get, ctx, "RANK", 0, MAX_WORLD - 1, &o->rank, err, errlen) < 0) return -1;
        o->local_rank = o->rank;
        if (get_master(get, ctx, o, o->world == 1, err, errlen)) return -1;
    }
    if (o->rank >= o->world)
        return tr_errf(err, errlen, "rank %d is outside a world of %d ranks (%s): ranks are 0..%d", o->rank, o->world,
                       tr_launcher_name(o->launcher), o->world - 1);
    if (o->local_world && o->local_rank >= o->local_world)
        return tr_errf(err, errlen, "local rank %d is outside the %d ranks of this node (%s)", o->local_rank,
                       o->local_world, tr_launcher_name(o->launcher));
    return 0;
}

static const char *from_env(const char *name, void *ctx) {
    (void)ctx;
    return getenv(name);
}

int tr_launch_vars_from_env(tr_launch_vars *out, char *err, size_t errlen) {
    return tr_launch_vars_parse(from_env, NULL, out, err, errlen);
}

const char *tr_launcher_name(tr_launcher l) {
    switch (l) {
    case TR_LAUNCHER_NONE: return "no launcher";
    case TR_LAUNCHER_PLAIN: return "WORLD_SIZE";
    case TR_LAUNCHER_TORCHRUN: return "torchrun-style RANK/LOCAL_RANK";
    case TR_LAUNCHER_OMPI: return "mpirun";
    }
    return "?";
}
