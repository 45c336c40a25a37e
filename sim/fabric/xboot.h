/* Exchange of bootstrap records (xwire.h) between the processes of a multi-process twin:
 * all[p * XW_PEER_SIZE] receives process p's record, this process's included. */
#ifndef TWINRUN_SIM_FABRIC_XBOOT_H
#define TWINRUN_SIM_FABRIC_XBOOT_H

#include <stdbool.h>
#include <stddef.h>

#include "../../engine/launch/tcp_store.h"
#include "xwire.h"

/* Through MPI (the process was started by mpirun): MPI_Init, then MPI_Allgather. */
int xboot_mpi(const unsigned char *mine, unsigned char *all, int nprocs, int proc, char *err, size_t errlen);
/* MPI_Finalize when this process initialised MPI and the job ended well. */
void xboot_mpi_finish(bool ok);
/* Through the rendezvous store (MASTER_ADDR:MASTER_PORT, the job token), which process 0 serves;
 * each wait ends after timeout_s. */
int xboot_store(const unsigned char *mine, unsigned char *all, int nprocs, int proc, const tr_store_conf *store,
                double timeout_s, char *err, size_t errlen);

#endif
