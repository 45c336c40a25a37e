/* Start and end of a multi-process twin job: open the libfabric endpoint, exchange bootstrap
 * records (MPI or the rendezvous store), check that every process belongs to the same job, and
 * say hello over libfabric to every peer so that an unreachable one is named at start-up rather
 * than found by a watchdog. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../coll/coll_internal.h"
#include "core/hash.h"
#include "xboot.h"
#include "xjob.h"
#include "twinrun/err.h"

static int check_peer(const xw_peer *me, const xw_peer *p, int index, char *err, size_t errlen) {
    if ((int)p->proc != index)
        return tr_errf(err, errlen, "the bootstrap record in slot %d says it is process %u", index, p->proc);
    if (p->nprocs != me->nprocs || p->ranks_per_proc != me->ranks_per_proc || p->chunk != me->chunk)
        return tr_errf(err, errlen, "process %d (host %s) runs %u processes x %u ranks in chunks of %u, this one %u x %u "
                       "in chunks of %u: start every process with the same launcher world, TWINRUN_RANKS_PER_PROCESS "
                       "and TWINRUN_RANK_CHUNK", index, p->host, p->nprocs, p->ranks_per_proc, p->chunk, me->nprocs,
                       me->ranks_per_proc, me->chunk);
    if (strcmp(p->provider, me->provider) != 0)
        return tr_errf(err, errlen, "process %d (host %s) uses libfabric provider '%s', this one '%s': set the same "
                       "FI_PROVIDER for every process (e.g. mpirun -x FI_PROVIDER)", index, p->host, p->provider,
                       me->provider);
    return 0;
}

static uint64_t job_id(const unsigned char *all, size_t n) {
    return tr_fnv1a(TR_FNV_OFFSET, all, n); /* over every record: the same in every process */
}

/* Every peer answers a hello over libfabric; messages that overtake the hellos wait in `early`. */
static int hello_round(double timeout_s, char *err, size_t errlen) {
    xjob *J = &g_xjob;
    for (int p = 0; p < J->cfg.nprocs; p++)
        if (p != J->cfg.proc) xjob_send(p, XW_HELLO, 0, NULL, 0);
    const double deadline = xjob_wall_now() + timeout_s;
    for (;;) {
        fab_progress(J->fab);
        for (fab_msg *m; (m = fab_next(J->fab));) {
            if (m->h.type == XW_HELLO) {
                J->peers[m->h.src_proc].hello = true;
                J->peers[m->h.src_proc].received++;
                fab_msg_free(m);
                continue;
            }
            if (J->early_last) J->early_last->next = m;
            else J->early = m;
            J->early_last = m;
        }
        int p;
        const char *e = fab_error(J->fab, &p);
        char w[160];
        if (e) return tr_errf(err, errlen, "libfabric (provider %s) at start-up: %s%s%s", fab_provider(J->fab), e,
                              p >= 0 ? "; " : "", p >= 0 ? xjob_who(p, w, sizeof w) : "");
        int missing = -1, nmissing = 0;
        for (int q = 0; q < J->cfg.nprocs; q++)
            if (q != J->cfg.proc && !J->peers[q].hello) {
                if (missing < 0) missing = q;
                nmissing++;
            }
        if (!nmissing) return 0;
        if (xjob_wall_now() >= deadline)
            return tr_errf(err, errlen, "no hello over libfabric (provider %s) from %s%s within %.0f s: the address it "
                           "published is not reachable from this host; pick an interface every host can reach "
                           "(FI_TCP_IFACE=eth0, say) and open the firewall, or use FI_PROVIDER=shm on one host",
                           fab_provider(J->fab), xjob_who(missing, w, sizeof w),
                           nmissing > 1 ? " and others" : "", timeout_s);
        fab_wait(J->fab, 0.05);
    }
}

static int start(const xproc_config *c, char *err, size_t errlen) {
    xjob *J = &g_xjob;
    J->cfg = *c;
    if (!(J->fab = fab_open(err, errlen))) return -1;
    xw_peer me = {.proc = (uint32_t)c->proc, .nprocs = (uint32_t)c->nprocs,
                  .ranks_per_proc = (uint32_t)c->ranks_per_proc, .world = (uint32_t)c->world,
                  .pid = (uint32_t)getpid(), .chunk = (uint32_t)c->chunk};
    if (gethostname(me.host, sizeof me.host - 1)) snprintf(me.host, sizeof me.host, "?");
    for (char *h = me.host; *h; h++)
        if (*h < 0x21 || *h > 0x7e) *h = '?';
    snprintf(me.provider, sizeof me.provider, "%s", fab_provider(J->fab));
    if (fab_address(J->fab, me.addr, &me.addrlen, err, errlen)) return -1;
    const size_t total = (size_t)c->nprocs * XW_PEER_SIZE;
    unsigned char mine[XW_PEER_SIZE], *all = malloc(total);
    J->peers = calloc((size_t)c->nprocs, sizeof *J->peers);
    J->gone = calloc((size_t)c->nprocs, 1);
    if (!all || !J->peers || !J->gone) {
        free(all);
        return tr_errf(err, errlen, "out of host memory for %d processes", c->nprocs);
    }
    xw_peer_encode(mine, &me);
    int rc = c->mpi ? xboot_mpi(mine, all, c->nprocs, c->proc, err, errlen)
                    : xboot_store(mine, all, c->nprocs, c->proc,
                                  &(tr_store_conf){.host = c->master_addr, .port = c->master_port,
                                                   .bind = c->store_bind,
                                                   .token = (const unsigned char *)c->store_token,
                                                   .token_len = strlen(c->store_token)},
                                  c->bootstrap_timeout_s, err, errlen);
    J->mpi = c->mpi;
    xw_peer *info = rc ? NULL : calloc((size_t)c->nprocs, sizeof *info);
    if (!rc && !info) rc = tr_errf(err, errlen, "out of host memory for %d processes", c->nprocs);
    for (int p = 0; p < c->nprocs && !rc; p++) {
        char why[256];
        if (xw_peer_decode(all + (size_t)p * XW_PEER_SIZE, XW_PEER_SIZE, &info[p], why, sizeof why))
            rc = tr_errf(err, errlen, "process %d's bootstrap record: %s", p, why);
        else rc = check_peer(&me, &info[p], p, err, errlen);
        J->peers[p].info = info[p];
    }
    if (!rc) {
        J->id = job_id(all, total);
        rc = fab_connect(J->fab, info, c->nprocs, c->proc, J->id, err, errlen);
    }
    free(info);
    free(all);
    if (rc) return -1;
    return hello_round(c->bootstrap_timeout_s, err, errlen);
}

static struct sigaction g_old_term;

static void on_sigterm(int sig) {
    (void)sig;
    g_xjob_sigterm = 1;
}

int xproc_start(const xproc_config *c, char *err, size_t errlen) {
    TR_CHECK(!g_xjob.active, "a multi-process twin job is already running in this process");
    memset(&g_xjob, 0, sizeof g_xjob);
    if (start(c, err, errlen)) {
        xproc_stop(false);
        return -1;
    }
    g_xjob.active = true;
    /* the launcher's SIGTERM becomes a job abort, so the survivors still report who died */
    g_xjob_sigterm = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_old_term);
    return 0;
}

void xproc_stop(bool ok) {
    xjob *J = &g_xjob;
    if (J->active) sigaction(SIGTERM, &g_old_term, NULL);
    coll_remote_free();
    fab_close(J->fab);
    if (J->mpi) xboot_mpi_finish(ok);
    if (J->peers)
        for (int p = 0; p < J->cfg.nprocs; p++) free(J->peers[p].dump);
    for (fab_msg *m = J->early, *next; m; m = next) {
        next = m->next;
        fab_msg_free(m);
    }
    free(J->peers);
    free(J->gone);
    free(J->idle);
    free(J->isent);
    free(J->irecv);
    memset(J, 0, sizeof *J);
}
