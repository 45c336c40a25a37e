/* What a checkpoint directory holds, before anything reads or writes it: whether a path names one
 * iteration (the guide's `--load .../checkpoints/iter_0000004`), and whether a root is absent,
 * empty, tracked, or holds files no load could use — so a typo never becomes a silent fresh start. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

/* "iter_" and 7 to 15 digits (Megatron's iter_%07d; longer once past 9999999): the iteration, or -1. */
static int64_t iter_of_name(const char *s, size_t len) {
    if (len < 12 || len > 20 || strncmp(s, "iter_", 5) != 0) return -1;
    int64_t it = 0;
    for (size_t i = 5; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        it = it * 10 + (s[i] - '0');
    }
    return it;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int ckpt_iter_path(const char *path, char *root, size_t cap, int64_t *iteration) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/') b--;
    const int64_t it = iter_of_name(path + b, len - b);
    if (it < 0 || len >= CKPT_PATH_MAX) return 0;
    /* a root that someone named iter_N keeps its meaning: it holds the tracker itself */
    char tracker[CKPT_PATH_MAX + 64];
    snprintf(tracker, sizeof tracker, "%.*s/%s", (int)len, path, CKPT_TRACKER);
    if (is_file(tracker)) return 0;
    size_t e = b;
    while (e > 1 && path[e - 1] == '/') e--;
    if (b == 0) snprintf(root, cap, ".");
    else snprintf(root, cap, "%.*s", (int)e, path);
    *iteration = it;
    return 1;
}

static bool is_lock_file(const char *name) { return strcmp(name, CKPT_LOCK) == 0; }

int ckpt_dir_probe(const char *dir, ckpt_dir_info *info, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    info->newest_complete = -1;
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT) return info->kind = CKPT_DIR_ABSENT, 0;
        return ckpt_io_err("stat", dir, errno, err, errlen);
    }
    if (!S_ISDIR(st.st_mode))
        return tr_errf(err, errlen, "%s: is not a directory; give the checkpoint directory (the one that holds %s)",
                       dir, CKPT_TRACKER);
    DIR *d = opendir(dir);
    if (!d) return ckpt_io_err("opendir", dir, errno, err, errlen);
    bool tracker = false;
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        if (!strcmp(s, ".") || !strcmp(s, "..") || is_lock_file(s)) continue;
        if (!strcmp(s, CKPT_TRACKER)) {
            tracker = true;
            continue;
        }
        const int64_t it = iter_of_name(s, strlen(s));
        if (it < 0) {
            if (!info->n_foreign++) snprintf(info->foreign, sizeof info->foreign, "%s", s);
            continue;
        }
        char m[CKPT_PATH_MAX + 64];
        snprintf(m, sizeof m, "%s/%s/%s", dir, s, CKPT_MANIFEST);
        if (!is_file(m)) {
            if (!info->n_incomplete++) info->incomplete = it;
            continue;
        }
        if (info->n_complete < CKPT_DIR_LIST_MAX) info->complete[info->n_complete] = it;
        info->n_complete++;
        if (it > info->newest_complete) info->newest_complete = it;
    }
    closedir(d);
    /* ascending, for the messages that list them */
    const int n = info->n_complete < CKPT_DIR_LIST_MAX ? info->n_complete : CKPT_DIR_LIST_MAX;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && info->complete[j - 1] > info->complete[j]; j--) {
            const int64_t t = info->complete[j];
            info->complete[j] = info->complete[j - 1], info->complete[j - 1] = t;
        }
    if (tracker) info->kind = CKPT_DIR_TRACKED;
    else if (info->n_complete) info->kind = CKPT_DIR_UNTRACKED;
    else if (info->n_foreign) info->kind = CKPT_DIR_FOREIGN;
    else if (info->n_incomplete) info->kind = CKPT_DIR_INTERRUPTED;
    else info->kind = CKPT_DIR_EMPTY;
    return 0;
}

void ckpt_dir_list_text(const ckpt_dir_info *info, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    const int n = info->n_complete < CKPT_DIR_LIST_MAX ? info->n_complete : CKPT_DIR_LIST_MAX;
    for (int i = 0; i < n && used + 24 < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%lld", i ? ", " : "", (long long)info->complete[i]);
    if (info->n_complete > n && used + 24 < cap) snprintf(out + used, cap - used, " and %d more", info->n_complete - n);
}
