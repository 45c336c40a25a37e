/* A scenario's work folder is --work/NAME and everything a rehearsal writes, empties or deletes lies
 * inside it. So NAME is one plain folder name (no '/', no '..', nothing absolute), the folder is a
 * real directory (not a symbolic link out), and it is one `scenario run` made: a marker file names
 * it as such. A folder of the user's that happens to sit at --work/NAME (a training run's
 * checkpoints/, say) is refused, never emptied; `--clean` deletes only in a marked folder. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "runner/runner.h"
#include "runner_internal.h"
#include "scenario_internal.h"
#include "twinrun/err.h"

/* What a rehearsal writes in its folder (runner_job.c, runner.c, runner_predict.c, runner_supervise.c,
 * runner_data_damage.c): none may be a symbolic link, which would carry a write or a wipe out. */
static const char *const parts[] = {"checkpoints", "checkpoints.quarantine", "data_cache", "data_copies",
                                    "job.log",     "predict.json",           "snapshots"};

int work_check_name(sc_ctx *c, const scn_node *at, const char *name) {
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    const char *why = NULL;
    if (!name[0]) why = "is empty";
    else if (name[0] == '/') why = "is an absolute path";
    else if (!strcmp(name, "..") || (strchr(name, '/') && strstr(name, ".."))) why = "climbs out of --work ('..')";
    else if (strchr(name, '/')) why = "is a path, not a name";
    else if (!strcmp(name, ".")) why = "is --work itself";
    else if (name[0] == '.') why = "starts with '.'";
    else if (name[strspn(name, ok)]) why = "holds a character other than letters, digits, '.', '_' and '-'";
    if (!why) return 0;
    return scenario_fail(
        c, at,
        "%s '%.80s' %s: it names the scenario's work folder, --work/NAME, where a rehearsal writes and "
        "empties its checkpoints; use one plain folder name (letters, digits, '.', '_', '-')%s",
        at ? "name:" : "the file's name (the scenario's default name)", name, why,
        at ? "" : ", or give the scenario a name:");
}

/* 1: DIR holds the marker; 0: it does not; -1: DIR cannot be read (errno). */
static int marked(const char *dir) {
    char path[SC_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/" SC_WORK_MARKER, dir);
    struct stat st;
    if (lstat(path, &st) == 0) return S_ISREG(st.st_mode);
    return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
}

/* Up to three of DIR's entries, for a refusal; the count in *n. */
static void some_entries(const char *dir, char *out, size_t cap, int *n) {
    size_t len = 0;
    out[0] = '\0';
    *n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if ((*n)++ < 3 && len + 80 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s'%.64s'", len ? ", " : "", e->d_name);
    }
    if (d) closedir(d);
    if (*n > 3 && len + 8 < cap) snprintf(out + len, cap - len, ", ...");
}

int work_check(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return 0;
        return tr_errf(err, errlen, "work folder %s: %s", dir, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return tr_errf(err, errlen,
                       "work folder %s is a symbolic link: a rehearsal writes and empties checkpoints only inside "
                       "--work; remove the link, or give another --work",
                       dir);
    if (!S_ISDIR(st.st_mode))
        return tr_errf(err, errlen, "work folder %s is not a directory; give another --work or rename the scenario",
                       dir);
    const int m = marked(dir);
    if (m < 0) return tr_errf(err, errlen, "work folder %s: %s", dir, strerror(errno));
    char list[320];
    int n;
    some_entries(dir, list, sizeof list, &n);
    if (!m && n > 0)
        return tr_errf(err, errlen,
                       "work folder %s already exists and scenario run did not make it (no " SC_WORK_MARKER
                       " in it; it holds %s): a rehearsal empties its checkpoints/, so it is left alone; give "
                       "another --work or rename the scenario (or remove the folder, if it is an old work folder)",
                       dir, list);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char path[SC_PATH_LEN + 64];
        snprintf(path, sizeof path, "%s/%s", dir, parts[i]);
        if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return tr_errf(err, errlen,
                           "%s is a symbolic link: a rehearsal writes and empties it, so it must lie inside the work "
                           "folder; remove the link",
                           path);
    }
    return 0;
}

int work_prepare(const char *dir, const scenario *s, char *err, size_t errlen) {
    if (work_check(dir, err, errlen) || runner_make_dir(dir, err, errlen)) return -1;
    const int m = marked(dir);
    if (m > 0) return 0;
    char path[SC_PATH_LEN + 64], text[SC_NAME_LEN + SC_PATH_LEN + 160];
    snprintf(path, sizeof path, "%s/" SC_WORK_MARKER, dir);
    const int n = snprintf(text, sizeof text,
                           "work folder of scenario %s (%s), made by scenario run; --clean deletes only in "
                           "folders that hold this file\n",
                           s->name, s->path);
    return tr_safe_write(path, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, false, NULL, err, errlen);
}
