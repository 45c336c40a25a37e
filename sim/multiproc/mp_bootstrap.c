/* Start-up of the multi-process twin: every process learns every other's bootstrap record (its
 * libfabric address above all) before the first libfabric message. Under mpirun the records go
 * through MPI_Allgather; otherwise through the rendezvous store that process 0 serves on
 * MASTER_ADDR:MASTER_PORT (base/launch/tcp_store.h, the real build's rendezvous too). */
#include "mp_bootstrap.h"

#include <stdio.h>
#include <string.h>

#include "launch/tcp_store.h"
#include "mp_dl.h"
#include "twinrun/err.h"

int mp_boot_mpi(const unsigned char *mine, unsigned char *all, int nprocs, int proc, bool *inited_here, char *err,
                size_t errlen) {
    mp_mpi_api mpi;
    if (mp_mpi_load(&mpi, err, errlen)) return -1;
    int inited = 0;
    mpi.initialized(&inited);
    if (!inited) {
        if (mpi.init(NULL, NULL) != MPI_SUCCESS)
            return tr_errf(err, errlen, "MPI_Init failed: start the job with OpenMPI's mpirun");
        *inited_here = true;
    }
    mpi.comm_set_errhandler(mpi.comm_world, mpi.errors_return);
    int size = 0, rank = -1;
    mpi.comm_size(mpi.comm_world, &size);
    mpi.comm_rank(mpi.comm_world, &rank);
    if (size != nprocs || rank != proc)
        return tr_errf(err, errlen,
                       "MPI says this is process %d of %d but OMPI_COMM_WORLD_RANK/SIZE say %d of %d: "
                       "start the job with mpirun, without overriding those variables",
                       rank, size, proc, nprocs);
    if (mpi.allgather(mine, MP_PEER_SIZE, mpi.byte, all, MP_PEER_SIZE, mpi.byte, mpi.comm_world) != MPI_SUCCESS)
        return tr_errf(err, errlen, "MPI_Allgather of the libfabric addresses failed");
    return 0;
}

void mp_boot_mpi_finish(bool inited_here, bool ok) {
    /* MPI_Finalize is collective: with a peer dead or stopped it would wait forever */
    char err[256];
    mp_mpi_api mpi;
    if (inited_here && ok && mp_mpi_load(&mpi, err, sizeof err) == 0) mpi.finalize();
}

int mp_boot_store(const unsigned char *mine, unsigned char *all, int nprocs, int proc, const tr_store_conf *store,
                  double timeout_s, char *err, size_t errlen) {
    tr_store_server *srv = NULL;
    if (proc == 0 && !(srv = tr_store_serve(store, err, errlen))) return -1;
    char key[64];
    int rc = 0;
    snprintf(key, sizeof key, "twinrun/fabric/peer/%d", proc);
    rc = tr_store_set(store, key, mine, MP_PEER_SIZE, timeout_s, err, errlen);
    for (int p = 0; p < nprocs && !rc; p++) {
        snprintf(key, sizeof key, "twinrun/fabric/peer/%d", p);
        rc = tr_store_get(store, key, all + (size_t)p * MP_PEER_SIZE, MP_PEER_SIZE, timeout_s, err, errlen);
    }
    /* process 0 serves until everyone has read every record */
    snprintf(key, sizeof key, "twinrun/fabric/read/%d", proc);
    if (!rc) rc = tr_store_set(store, key, "1", 1, timeout_s, err, errlen);
    for (int p = 1; p < nprocs && !rc && srv; p++) {
        char one;
        snprintf(key, sizeof key, "twinrun/fabric/read/%d", p);
        rc = tr_store_get(store, key, &one, 1, timeout_s, err, errlen);
    }
    if (srv) tr_store_server_stop(srv);
    return rc;
}
