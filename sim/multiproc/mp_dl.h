/* libfabric and Open MPI, opened (dlopen) when a multi-process job starts instead of linked into every
 * program. Linked, their start-up ran in every twin program, one process or many: libfabric's psm
 * provider pulls in libinfinipath, whose constructor spends 0.2 s in a timing loop, and valgrind loaded
 * their twenty libraries for each test. The entry points are typed from the libraries' own headers. */
#ifndef TWINRUN_SIM_MULTIPROC_MP_DL_H
#define TWINRUN_SIM_MULTIPROC_MP_DL_H

#include <mpi.h>
#include <stddef.h>

#include <rdma/fabric.h>

/* the few libfabric functions that are exported (the rest are inline calls through the objects' ops) */
typedef struct mp_fabric_api {
    __typeof__(fi_getinfo) *getinfo;
    __typeof__(fi_freeinfo) *freeinfo;
    __typeof__(fi_dupinfo) *dupinfo; /* fi_allocinfo() is dupinfo(NULL) */
    __typeof__(fi_fabric) *fabric;
    __typeof__(fi_strerror) *strerror;
} mp_fabric_api;

/* Fills api from libfabric.so.1 (opened once per process; never closed, as providers may keep threads).
 * 0, or -1 with err naming the library and the package that has it. */
int mp_fabric_load(mp_fabric_api *api, char *err, size_t errlen);

/* what the mpirun bootstrap calls, and the three predefined handles it passes */
typedef struct mp_mpi_api {
    __typeof__(MPI_Initialized) *initialized;
    __typeof__(MPI_Init) *init;
    __typeof__(MPI_Comm_set_errhandler) *comm_set_errhandler;
    __typeof__(MPI_Comm_size) *comm_size;
    __typeof__(MPI_Comm_rank) *comm_rank;
    __typeof__(MPI_Allgather) *allgather;
    __typeof__(MPI_Finalize) *finalize;
    MPI_Comm comm_world;
    MPI_Datatype byte;
    MPI_Errhandler errors_return;
} mp_mpi_api;

/* Fills api from Open MPI's libmpi.so.40 (opened RTLD_GLOBAL: its components need its symbols). */
int mp_mpi_load(mp_mpi_api *api, char *err, size_t errlen);

#endif
