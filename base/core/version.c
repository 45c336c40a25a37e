/* --version for every program (twinrun/version.h). The commit and the backend's name come from a
 * header the build regenerates (cmake/commit.cmake) for the preset that built this library. */
#include "twinrun/version.h"

#include <string.h>

#include "twinrun_commit.h"

const char *tr_version_commit(void) { return TWINRUN_COMMIT; }
const char *tr_version_backend(void) { return TWINRUN_BACKEND_NAME; }

void tr_version_print(FILE *out, const char *program) {
    fprintf(out, "%s (twinrun %s, commit %s, backend %s)\n", program, TR_VERSION_NUMBER, tr_version_commit(),
            tr_version_backend());
}

bool tr_version_requested(int argc, char **argv) { return argc >= 2 && argv[1] && !strcmp(argv[1], "--version"); }
