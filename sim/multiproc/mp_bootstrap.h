/* Exchange of bootstrap records (mp_wire.h) between the processes of a multi-process twin:
 * all[p * MP_PEER_SIZE] receives process p's record, this process's included. */
#ifndef TWINRUN_SIM_MULTIPROC_MP_BOOTSTRAP_H
#define TWINRUN_SIM_MULTIPROC_MP_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>

#include "launch/tcp_store.h"
#include "mp_wire.h"

/* Through MPI (the process was started by mpirun): MPI_Init (*inited_here = true when this call did it),
 * then MPI_Allgather. */
int mp_boot_mpi(const unsigned char *mine, unsigned char *all, int nprocs, int proc, bool *inited_here, char *err,
                size_t errlen);
/* MPI_Finalize when this process initialised MPI (inited_here) and the job ended well. */
void mp_boot_mpi_finish(bool inited_here, bool ok);
/* Through the rendezvous store (MASTER_ADDR:MASTER_PORT, the job token), which process 0 serves;
 * each wait ends after timeout_s. */
int mp_boot_store(const unsigned char *mine, unsigned char *all, int nprocs, int proc, const tr_store_conf *store,
                  double timeout_s, char *err, size_t errlen);

#endif
