/* `scenario run --clean`: after a scenario passed, its work folder keeps the reports and logs and
 * loses what only a rerun or a post-mortem needs — the checkpoints (a campaign's snapshots too) and the
 * data-index cache, which
 * are most of its bytes (a mock dataset's indices alone are ~150 MB a configuration, Megatron's size).
 * A CI job that rehearses many scenarios would otherwise fill its disk. Only in a folder scenario run
 * marked as its own (runner/work_dir.c). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/runner.h"
#include "runner_internal.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    int rc = (flag == FTW_DP) ? rmdir(path) : unlink(path);
    if (rc && errno != ENOENT) {
        fprintf(stderr, "scenario --clean: cannot remove %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Deletes DIR (depth first, never following symbolic links out of it); absent is fine. */
int work_remove_tree(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT ? 0 : -1;
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int work_clean(const char *work_dir) {
    static const char *const parts[] = {"checkpoints", "checkpoints.quarantine", "data_cache", "snapshots"};
    char marker[4096];
    struct stat st;
    snprintf(marker, sizeof marker, "%s/" SC_WORK_MARKER, work_dir);
    /* only a folder scenario run made and marked; never through a link to somewhere else */
    if (lstat(work_dir, &st) != 0 || !S_ISDIR(st.st_mode) || lstat(marker, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr,
                "scenario --clean: %s has no " SC_WORK_MARKER " (scenario run did not make it, or it is a link): "
                "nothing removed; delete what you no longer need yourself\n",
                work_dir);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", work_dir, parts[i]) >= (int)sizeof path) return -1;
        if (work_remove_tree(path)) rc = -1;
    }
    return rc;
}
