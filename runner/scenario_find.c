/* Where a scenario named on the command line is: as given, or under scenarios/ (the shipped ones), so
 * that `scenario run thousand_card.yaml` typed at the repository root finds scenarios/thousand_card.yaml. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/scenario.h"

static int copy(char *path, size_t cap, const char *from, char *err, size_t errlen) {
    if (snprintf(path, cap, "%s", from) < (int)cap) return 0;
    snprintf(err, errlen, "%s: path too long", from);
    return -1;
}

int scenario_find(const char *arg, char *path, size_t cap, char *err, size_t errlen) {
    struct stat st;
    /* there; or another trouble than "not there" (the loader names it); or a path spelled out in full */
    if (stat(arg, &st) == 0 || errno != ENOENT || strchr(arg, '/')) return copy(path, cap, arg, err, errlen);
    char shipped[4096];
    if (snprintf(shipped, sizeof shipped, "scenarios/%s", arg) >= (int)sizeof shipped)
        return snprintf(err, errlen, "%s: path too long", arg), -1;
    if (stat(shipped, &st) == 0) return copy(path, cap, shipped, err, errlen) ? -1 : 1;
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "the current directory");
    snprintf(err, errlen,
             "%s: no such file or directory (looked in %s and in its scenarios/; give the path, or run from the "
             "repository root for the shipped scenarios)",
             arg, cwd);
    return -1;
}
