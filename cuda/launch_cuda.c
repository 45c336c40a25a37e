/* The real build's launch: this process is one rank of the job, numbered by its launcher
 * (base/launch/launch_vars.h: torchrun-style RANK/LOCAL_RANK, OpenMPI's OMPI_COMM_WORLD_*, or
 * none for a job of one). Its GPU is the launcher's local rank (dev_select.c). Global rank 0 of a
 * multi-rank job serves the rendezvous store on MASTER_PORT for the job's lifetime, through which
 * every communicator's NCCL id travels (coll_bootstrap.h); with TWINRUN_RENDEZVOUS_DIR set, files
 * there are used instead and no store runs. Beside it every rank keeps the job's heartbeat
 * (launch/heartbeat.h): when another rank's process is lost this one dumps its flight recorder, names
 * that rank and exits 1 within seconds, instead of waiting out --distributed-timeout-minutes. */
#include <stdio.h>
#include <stdlib.h>

#include "coll_watchdog.h"
#include "launch/heartbeat.h"
#include "launch/launch_vars.h"
#include "launch/tcp_store.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

static int g_rank;

static void peer_lost(void *arg, int rank, const char *what) {
    (void)arg;
    char line[768];
    snprintf(line, sizeof line, "heartbeat: %s; stopped first: rank %d", what, rank);
    fprintf(stderr, "twinrun: rank %d: %s\n", g_rank, line);
    tr_cu_peer_lost(line);
}

int launch_ranks(int world, launch_entry entry, void *arg, char *err, size_t errlen) {
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    if (v.world != world)
        return tr_errf(err, errlen,
                       "the job needs %d ranks but the launcher started %d (%s): start one process per "
                       "GPU",
                       world, v.world, tr_launcher_name(v.launcher));
    tr_store_server *store = NULL;
    const char *dir = getenv("TWINRUN_RENDEZVOUS_DIR");
    if (world > 1 && v.rank == 0 && !(dir && *dir)) {
        if (!v.has_master)
            return tr_errf(err, errlen,
                           "%d ranks need a rendezvous: set MASTER_ADDR and MASTER_PORT (torchrun does; "
                           "scripts/launch_llama3.sh does) or TWINRUN_RENDEZVOUS_DIR",
                           world);
        const tr_store_conf conf = tr_store_conf_of(&v);
        if (!(store = tr_store_serve(&conf, err, errlen))) return -1;
    }
    tr_heartbeat *hb = NULL;
    if (world > 1 && !(dir && *dir)) {
        const tr_store_conf conf = tr_store_conf_of(&v);
        const char *t = getenv("TWINRUN_COLL_TIMEOUT_S");
        g_rank = v.rank;
        /* the store's own clients wait as long (rank 0 may start last) */
        if (!(hb = tr_heartbeat_start(&conf, v.rank, t && atof(t) > 0 ? atof(t) : 600.0, peer_lost, NULL, err,
                                      errlen))) {
            tr_store_server_stop(store);
            return -1;
        }
    }
    const int rc = entry(v.rank, world, arg);
    tr_heartbeat_stop(hb);
    tr_store_server_stop(store);
    return rc;
}
