#include "coll_bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_rendezvous.h"
#include "cuda_dev.h"
#include "launch/launch_vars.h"
#include "launch/tcp_store.h"
#include "twinrun/err.h"

static const char *run_id(void) {
    static const char *const names[] = {"TWINRUN_RUN_ID", "TORCHELASTIC_RUN_ID", "MASTER_PORT"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return v;
    }
    return "default";
}

/* FNV-1a over the group's name and rank list. */
static unsigned long long group_key(const char *name, const int *ranks, int nranks) {
    unsigned long long h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    for (int i = 0; i < nranks; i++)
        for (int b = 0; b < 4; b++) h = (h ^ (((unsigned)ranks[i] >> (8 * b)) & 0xffu)) * 1099511628211ULL;
    return h;
}

/* bump: a new communicator of this group (exchange); else the one just made (done). */
static unsigned generation(dev_device *d, unsigned long long key, int bump) {
    for (int i = 0; i < d->coll_ngen; i++)
        if (d->coll_gen[i].key == key) return bump ? ++d->coll_gen[i].gen : d->coll_gen[i].gen;
    if (bump && d->coll_ngen < (int)(sizeof d->coll_gen / sizeof d->coll_gen[0])) {
        d->coll_gen[d->coll_ngen].key = key;
        d->coll_gen[d->coll_ngen].gen = 0;
        d->coll_ngen++;
    }
    return 0;
}

/* Keeps [A-Za-z0-9_-] of s (file names and store keys). */
static void sanitize(char *dst, size_t n, const char *s) {
    size_t j = 0;
    for (; *s && j + 1 < n; s++) {
        const char c = *s;
        dst[j++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') ? c : '_';
    }
    dst[j] = '\0';
}

static void make_key(char *key, size_t n, dev_device *d, const char *name, const int *ranks, int nranks, int bump) {
    const unsigned long long gk = group_key(name, ranks, nranks);
    char rid[64], nm[32];
    sanitize(rid, sizeof rid, run_id());
    sanitize(nm, sizeof nm, name);
    snprintf(key, n, "twinrun-nccl.%s.%s.r%d.%016llx.g%u", rid, nm, ranks[0], gk, generation(d, gk, bump));
}

int tr_cu_exchange_id(dev_device *d, const char *name, const int *ranks, int nranks, int pos, void *id, size_t len,
                      double timeout_s, char *err, size_t errlen) {
    if (nranks == 1) return 0;
    char key[256];
    make_key(key, sizeof key, d, name, ranks, nranks, 1);
    const char *dir = getenv("TWINRUN_RENDEZVOUS_DIR");
    if (dir && *dir)
        return pos == 0 ? tr_cu_rdv_publish(dir, key, id, len, err, errlen)
                        : tr_cu_rdv_fetch(d, dir, key, id, len, timeout_s, err, errlen);
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    if (!v.has_master)
        return tr_errf(err, errlen,
                       "communicator '%s' over %d ranks needs a rendezvous: launch with torchrun-style variables "
                       "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; scripts/launch_llama3.sh sets them), "
                       "with mpirun, or set TWINRUN_RENDEZVOUS_DIR to a directory every rank shares",
                       name, nranks);
    const tr_store_conf store = tr_store_conf_of(&v);
    return pos == 0 ? tr_store_set(&store, key, id, len, timeout_s, err, errlen)
                    : tr_store_get(&store, key, id, len, timeout_s, err, errlen);
}

void tr_cu_exchange_done(dev_device *d, const char *name, const int *ranks, int nranks, int pos) {
    const char *dir = getenv("TWINRUN_RENDEZVOUS_DIR");
    if (nranks == 1 || pos != 0 || !dir || !*dir) return;
    char key[256];
    make_key(key, sizeof key, d, name, ranks, nranks, 0);
    tr_cu_rdv_remove(dir, key);
}
