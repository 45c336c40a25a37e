/* The launcher's world size, read the same way by both builds. */
#include <errno.h>
#include <stdlib.h>

#include "twinrun/err.h"
#include "twinrun/launch.h"

int launch_world_size(char *err, size_t errlen) {
    const char *names[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (!v || !*v) continue;
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || *end || n < 1 || n > 1 << 20)
            return tr_errf(err, errlen, "%s=\"%s\" is not a world size (a positive integer)", names[i], v);
        return (int)n;
    }
    return 1;
}
