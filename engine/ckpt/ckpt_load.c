/* Finding checkpoints: the tracker (what a load trusts), the iter_N directories, a manifest. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

#define MAX_MANIFEST (64u << 20)

int ckpt_latest(const char *dir, int64_t *iteration, char *err, size_t errlen) {
    char path[TR_CKPT_PATH_MAX], mpath[TR_CKPT_PATH_MAX];
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    ckpt_pathf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) return 1;
    size_t len;
    char *text = ckpt_read_small(path, 64, &len, err, errlen);
    if (!text) return -1;
    /* Megatron's reader strips whitespace; its "release" marker is a converted model, not a run */
    size_t b = 0, e = len;
    while (b < e && (text[b] == ' ' || text[b] == '\n' || text[b] == '\r' || text[b] == '\t')) b++;
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\n' || text[e - 1] == '\r' || text[e - 1] == '\t')) e--;
    int64_t it = 0;
    int ok = e > b && e - b <= 15;
    for (size_t i = b; ok && i < e; i++) {
        if (text[i] < '0' || text[i] > '9') ok = 0;
        else it = it * 10 + (text[i] - '0');
    }
    int release = e - b == 7 && strncmp(text + b, "release", 7) == 0;
    free(text);
    if (release)
        return tr_errf(err, errlen,
                       "%s: says \"release\" (a converted Megatron model); twinrun loads its own "
                       "checkpoints; import Hugging Face weights with --hf-load",
                       path);
    if (!ok) return tr_errf(err, errlen, "%s: not an iteration number; the tracker is corrupt", path);
    ckpt_iter_dir(mpath, sizeof mpath, dir, it);
    size_t l = strlen(mpath);
    ckpt_pathf(mpath + l, sizeof mpath - l, "/%s", CKPT_MANIFEST);
    if (stat(mpath, &st) != 0)
        return tr_errf(err, errlen, "%s names iteration %lld but %s is missing", path, (long long)it, mpath);
    *iteration = it;
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int ckpt_list(const char *dir, int64_t *iters, int max, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return ckpt_io_err("opendir", dir, errno, err, errlen);
    int n = 0, stored = 0;
    int64_t *all = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        const char *s = e->d_name;
        size_t len = strlen(s);
        if (strncmp(s, "iter_", 5) != 0 || len < 12 || len > 20) continue;
        int64_t it = 0;
        int ok = 1;
        for (size_t i = 5; i < len && ok; i++) {
            if (s[i] < '0' || s[i] > '9') ok = 0;
            else it = it * 10 + (s[i] - '0');
        }
        if (!ok) continue;
        int64_t *grown = realloc(all, (size_t)(n + 1) * sizeof *all);
        if (!grown) {
            free(all);
            closedir(d);
            return tr_errf(err, errlen, "%s: out of host memory", dir);
        }
        all = grown;
        all[n++] = it;
    }
    closedir(d);
    if (n) qsort(all, (size_t)n, sizeof *all, cmp_i64);
    for (int i = 0; i < n && i < max; i++) iters[stored++] = all[i];
    free(all);
    return n;
}

int ckpt_manifest_load(const char *dir, int64_t iteration, ckpt_manifest *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    char path[TR_CKPT_PATH_MAX];
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    ckpt_iter_dir(path, sizeof path, dir, iteration);
    size_t l = strlen(path), len;
    ckpt_pathf(path + l, sizeof path - l, "/%s", CKPT_MANIFEST);
    char *json = ckpt_read_small(path, MAX_MANIFEST, &len, err, errlen);
    if (!json) return -1;
    int rc = ckpt_manifest_parse(m, json, len, path, err, errlen);
    free(json);
    if (!rc && m->iteration != iteration) {
        rc = tr_errf(err, errlen, "%s: says iteration %lld; it was found in the directory of %lld", path,
                     (long long)m->iteration, (long long)iteration);
        ckpt_manifest_free(m);
    }
    return rc;
}
