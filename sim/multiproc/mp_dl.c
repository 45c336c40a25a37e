/* dlopen of libfabric and Open MPI for the multi-process twin (mp_dl.h says why not linked). */
#include "mp_dl.h"

#include <dlfcn.h>
#include <string.h>

#include "twinrun/err.h"

#ifndef OPEN_MPI
#error                                                                                                                 \
    "the mpirun bootstrap reads Open MPI's predefined handles (ompi_mpi_comm_world, ...): build with Open MPI's mpi.h"
#endif

/* one symbol into *slot (a function or object pointer of any type); -1 with err when missing */
static int sym(void *lib, const char *libname, const char *name, void *slot, char *err, size_t errlen) {
    void *p = dlsym(lib, name);
    if (!p) return tr_errf(err, errlen, "%s has no symbol %s: %s", libname, name, dlerror());
    memcpy(slot, &p, sizeof p); /* object pointer to function pointer: same size on every ABI we build for */
    return 0;
}

static void *open_lib(const char *soname, const char *package, char *err, size_t errlen) {
    void *lib = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        tr_errf(err, errlen, "the multi-process twin needs %s (apt-get install %s): %s", soname, package, dlerror());
    return lib;
}

int mp_fabric_load(mp_fabric_api *api, char *err, size_t errlen) {
    const char *so = "libfabric.so.1";
    void *lib = open_lib(so, "libfabric1", err, errlen);
    if (!lib) return -1;
    if (sym(lib, so, "fi_getinfo", &api->getinfo, err, errlen) ||
        sym(lib, so, "fi_freeinfo", &api->freeinfo, err, errlen) ||
        sym(lib, so, "fi_dupinfo", &api->dupinfo, err, errlen) ||
        sym(lib, so, "fi_fabric", &api->fabric, err, errlen) ||
        sym(lib, so, "fi_strerror", &api->strerror, err, errlen))
        return -1;
    return 0;
}

int mp_mpi_load(mp_mpi_api *api, char *err, size_t errlen) {
    const char *so = "libmpi.so.40";
    void *lib = open_lib(so, "libopenmpi3", err, errlen);
    if (!lib) return -1;
    /* MPI_COMM_WORLD, MPI_BYTE and MPI_ERRORS_RETURN are, in Open MPI's mpi.h, the addresses of these */
    void *world = NULL, *byte = NULL, *errors_return = NULL;
    if (sym(lib, so, "MPI_Initialized", &api->initialized, err, errlen) ||
        sym(lib, so, "MPI_Init", &api->init, err, errlen) ||
        sym(lib, so, "MPI_Comm_set_errhandler", &api->comm_set_errhandler, err, errlen) ||
        sym(lib, so, "MPI_Comm_size", &api->comm_size, err, errlen) ||
        sym(lib, so, "MPI_Comm_rank", &api->comm_rank, err, errlen) ||
        sym(lib, so, "MPI_Allgather", &api->allgather, err, errlen) ||
        sym(lib, so, "MPI_Finalize", &api->finalize, err, errlen) ||
        sym(lib, so, "ompi_mpi_comm_world", &world, err, errlen) || sym(lib, so, "ompi_mpi_byte", &byte, err, errlen) ||
        sym(lib, so, "ompi_mpi_errors_return", &errors_return, err, errlen))
        return -1;
    api->comm_world = (MPI_Comm)world;
    api->byte = (MPI_Datatype)byte;
    api->errors_return = (MPI_Errhandler)errors_return;
    return 0;
}
