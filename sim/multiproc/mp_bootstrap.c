/* Start-up of the multi-process twin: every process learns every other's bootstrap record (its
 * libfabric address above all) before the first libfabric message. Under mpirun the records go
 * through MPI_Allgather; otherwise through the rendezvous store that process 0 serves on
 * MASTER_ADDR:MASTER_PORT (engine/launch/tcp_store.h, the real build's rendezvous too). */
#include "mp_bootstrap.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "launch/tcp_store.h"
#include "twinrun/err.h"

int mp_boot_mpi(const unsigned char *mine, unsigned char *all, int nprocs, int proc, bool *inited_here, char *err,
                size_t errlen) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
            return tr_errf(err, errlen, "MPI_Init failed: start the job with OpenMPI's mpirun");
        *inited_here = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int size = 0, rank = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size != nprocs || rank != proc)
        return tr_errf(err, errlen,
                       "MPI says this is process %d of %d but OMPI_COMM_WORLD_RANK/SIZE say %d of %d: "
                       "start the job with mpirun, without overriding those variables",
                       rank, size, proc, nprocs);
    if (MPI_Allgather(mine, MP_PEER_SIZE, MPI_BYTE, all, MP_PEER_SIZE, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
        return tr_errf(err, errlen, "MPI_Allgather of the libfabric addresses failed");
    return 0;
}

void mp_boot_mpi_finish(bool inited_here, bool ok) {
    /* MPI_Finalize is collective: with a peer dead or stopped it would wait forever */
    if (inited_here && ok) MPI_Finalize();
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
