/* Start and end of a multi-process twin job: open the libfabric endpoint, exchange bootstrap
 * records (MPI or the rendezvous store), check that every process belongs to the same job, and
 * say hello over libfabric to every peer so that an unreachable one is named at start-up rather
 * than found by a watchdog. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
#include "mp_bootstrap.h"
#include "mp_internal.h"
#include "twinrun/err.h"

static int check_peer(const mp_peer *me, const mp_peer *p, int index, char *err, size_t errlen) {
    if ((int)p->proc != index)
        return tr_errf(err, errlen, "the bootstrap record in slot %d says it is process %u", index, p->proc);
    if (p->nprocs != me->nprocs || p->ranks_per_proc != me->ranks_per_proc || p->chunk != me->chunk)
        return tr_errf(err, errlen,
                       "process %d (host %s) runs %u processes x %u ranks in chunks of %u, this one %u x %u "
                       "in chunks of %u: start every process with the same launcher world, TWINRUN_RANKS_PER_PROCESS "
                       "and TWINRUN_RANK_CHUNK",
                       index, p->host, p->nprocs, p->ranks_per_proc, p->chunk, me->nprocs, me->ranks_per_proc,
                       me->chunk);
    if (strcmp(p->provider, me->provider) != 0)
        return tr_errf(err, errlen,
                       "process %d (host %s) uses libfabric provider '%s', this one '%s': set the same "
                       "FI_PROVIDER for every process (e.g. mpirun -x FI_PROVIDER)",
                       index, p->host, p->provider, me->provider);
    return 0;
}

static uint64_t job_id(const unsigned char *all, size_t n) {
    return tr_fnv1a(TR_FNV_OFFSET, all, n); /* over every record: the same in every process */
}

/* Every peer answers a hello over libfabric; messages that overtake the hellos wait in `early`. */
static int hello_round(mp_job *J, double timeout_s, char *err, size_t errlen) {
    for (int p = 0; p < J->cfg.nprocs; p++)
        if (p != J->cfg.proc) mp_job_send(J, p, MP_HELLO, 0, NULL, 0);
    const double deadline = mp_job_wall_now() + timeout_s;
    for (;;) {
        mp_net_progress(J->net);
        for (mp_msg *m; (m = mp_net_next(J->net));) {
            if (m->h.type == MP_HELLO) {
                J->peers[m->h.src_proc].hello = true;
                J->peers[m->h.src_proc].received++;
                mp_msg_free(m);
                continue;
            }
            if (J->early_last) J->early_last->next = m;
            else J->early = m;
            J->early_last = m;
        }
        int p;
        const char *e = mp_net_error(J->net, &p);
        char w[160];
        if (e)
            return tr_errf(err, errlen, "libfabric (provider %s) at start-up: %s%s%s", mp_net_provider(J->net), e,
                           p >= 0 ? "; " : "", p >= 0 ? mp_job_who(J, p, w, sizeof w) : "");
        int missing = -1, nmissing = 0;
        for (int q = 0; q < J->cfg.nprocs; q++)
            if (q != J->cfg.proc && !J->peers[q].hello) {
                if (missing < 0) missing = q;
                nmissing++;
            }
        if (!nmissing) return 0;
        if (mp_job_wall_now() >= deadline)
            return tr_errf(err, errlen,
                           "no hello over libfabric (provider %s) from %s%s within %.0f s: the address it "
                           "published is not reachable from this host; pick an interface every host can reach "
                           "(FI_TCP_IFACE=eth0, say) and open the firewall, or use FI_PROVIDER=shm on one host",
                           mp_net_provider(J->net), mp_job_who(J, missing, w, sizeof w),
                           nmissing > 1 ? " and others" : "", timeout_s);
        mp_net_wait(J->net, 0.05);
    }
}

static int start(mp_job *J, const mp_config *c, char *err, size_t errlen) {
    J->cfg = *c;
    if (!(J->net = mp_net_open(err, errlen))) return -1;
    mp_peer me = {.proc = (uint32_t)c->proc,
                  .nprocs = (uint32_t)c->nprocs,
                  .ranks_per_proc = (uint32_t)c->ranks_per_proc,
                  .world = (uint32_t)c->world,
                  .pid = (uint32_t)getpid(),
                  .chunk = (uint32_t)c->chunk};
    if (gethostname(me.host, sizeof me.host - 1)) snprintf(me.host, sizeof me.host, "?");
    for (char *h = me.host; *h; h++)
        if (*h < 0x21 || *h > 0x7e) *h = '?';
    snprintf(me.provider, sizeof me.provider, "%s", mp_net_provider(J->net));
    if (mp_net_address(J->net, me.addr, &me.addrlen, err, errlen)) return -1;
    const size_t total = (size_t)c->nprocs * MP_PEER_SIZE;
    unsigned char mine[MP_PEER_SIZE], *all = malloc(total);
    J->peers = calloc((size_t)c->nprocs, sizeof *J->peers);
    J->gone = calloc((size_t)c->nprocs, 1);
    if (!all || !J->peers || !J->gone) {
        free(all);
        return tr_errf(err, errlen, "out of host memory for %d processes", c->nprocs);
    }
    mp_peer_encode(mine, &me);
    int rc = c->mpi ? mp_boot_mpi(mine, all, c->nprocs, c->proc, &J->mpi_inited, err, errlen)
                    : mp_boot_store(mine, all, c->nprocs, c->proc,
                                    &(tr_store_conf){.host = c->master_addr,
                                                     .port = c->master_port,
                                                     .bind = c->store_bind,
                                                     .token = (const unsigned char *)c->store_token,
                                                     .token_len = strlen(c->store_token)},
                                    c->bootstrap_timeout_s, err, errlen);
    J->mpi = c->mpi;
    mp_peer *info = rc ? NULL : calloc((size_t)c->nprocs, sizeof *info);
    if (!rc && !info) rc = tr_errf(err, errlen, "out of host memory for %d processes", c->nprocs);
    for (int p = 0; p < c->nprocs && !rc; p++) {
        char why[256];
        if (mp_peer_decode(all + (size_t)p * MP_PEER_SIZE, MP_PEER_SIZE, &info[p], why, sizeof why))
            rc = tr_errf(err, errlen, "process %d's bootstrap record: %s", p, why);
        else rc = check_peer(&me, &info[p], p, err, errlen);
        J->peers[p].info = info[p];
    }
    if (!rc) {
        J->id = job_id(all, total);
        rc = mp_net_connect(J->net, info, c->nprocs, c->proc, J->id, err, errlen);
    }
    free(info);
    free(all);
    if (rc) return -1;
    return hello_round(J, c->bootstrap_timeout_s, err, errlen);
}

static void on_sigterm(int sig) {
    (void)sig;
    g_mp_sigterm = 1;
}

mp_job *mp_start(const mp_config *c, char *err, size_t errlen) {
    struct sigaction now;
    sigaction(SIGTERM, NULL, &now);
    TR_CHECK(now.sa_handler != on_sigterm, "a multi-process twin job is already running in this process");
    mp_job *J = calloc(1, sizeof *J);
    if (!J) {
        tr_errf(err, errlen, "out of host memory for a multi-process job");
        return NULL;
    }
    if (start(J, c, err, errlen)) {
        mp_stop(J, false);
        return NULL;
    }
    J->remote = (twin_remote){.job = J,
                              .progress = mp_job_progress,
                              .rank_failed = mp_job_rank_failed,
                              .hang = mp_job_hang,
                              .run_end = mp_job_run_end,
                              .group_init = mp_coll_group_init,
                              .post = mp_coll_post,
                              .withdraw = mp_coll_withdraw,
                              .group_abort = mp_coll_group_abort};
    J->active = true;
    /* the launcher's SIGTERM becomes a job abort, so the survivors still report who died */
    g_mp_sigterm = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &J->old_term);
    return J;
}

const twin_remote *mp_remote(mp_job *J) { return &J->remote; }

void mp_stop(mp_job *J, bool ok) {
    if (!J) return;
    if (J->active) sigaction(SIGTERM, &J->old_term, NULL);
    mp_coll_free(J);
    mp_net_close(J->net);
    if (J->mpi) mp_boot_mpi_finish(J->mpi_inited, ok);
    if (J->peers)
        for (int p = 0; p < J->cfg.nprocs; p++) free(J->peers[p].dump);
    for (mp_msg *m = J->early, *next; m; m = next) {
        next = m->next;
        mp_msg_free(m);
    }
    free(J->peers);
    free(J->gone);
    mp_quiet_tally_free(J->tally);
    free(J);
}
