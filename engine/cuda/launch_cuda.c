/* The real build's launch: this process is one rank of the job, numbered by its launcher
 * (torchrun: RANK; OpenMPI: OMPI_COMM_WORLD_RANK). A job of one needs no launcher. */
#include <errno.h>
#include <stdlib.h>

#include "twinrun/err.h"
#include "twinrun/launch.h"

static int env_int(const char *name, int *out, char *err, size_t errlen) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 0 || n > 1 << 20) return tr_errf(err, errlen, "%s=\"%s\" is not a rank", name, v);
    *out = (int)n;
    return 1;
}

int launch_ranks(int world, launch_entry entry, void *arg, char *err, size_t errlen) {
    int launcher_world = launch_world_size(err, errlen);
    if (launcher_world < 0) return -1;
    if (launcher_world != world)
        return tr_errf(err, errlen, "the job needs %d ranks but the launcher started %d (WORLD_SIZE); "
                                    "start one process per GPU",
                       world, launcher_world);
    int rank = 0, r;
    if ((r = env_int("RANK", &rank, err, errlen)) < 0) return -1;
    if (!r && env_int("OMPI_COMM_WORLD_RANK", &rank, err, errlen) < 0) return -1;
    if (rank >= world) return tr_errf(err, errlen, "rank %d is outside a world of %d", rank, world);
    return entry(rank, world, arg);
}
