/* What one rank sees, as "key=value" lines for rank 0 to compare: the guide's FAQ Q1 (versions and
 * commits), Q2 (devices and their health) and §1.3 (settings, directories, clocks), per rank. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/hash.h"
#include "doctor/doctor_internal.h"
#include "twinrun/version.h"

extern char **environ;

typedef struct text_out {
    char *buf;
    size_t used, cap;
} text_out;

static void put(text_out *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_out *t, const char *fmt, ...) {
    if (t->used >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->used, t->cap - t->used, fmt, ap);
    va_end(ap);
    /* a line that does not fit is dropped whole: rank 0 must never read half a value */
    if (n < 0 || (size_t)n >= t->cap - t->used) t->buf[t->used] = 0;
    else t->used += (size_t)n;
}

/* The launcher settings that must agree between nodes: the collective library's, the runtime's, the
 * network's and twinrun's own. Not the secret store token, not a rehearsal's fault plan, and not the
 * visible-device lists, which a launcher may set per process. */
static bool compared_setting(const char *name, size_t len) {
    static const char *const prefixes[] = {"NCCL_", "MCCL_", "MUSA_", "MTHREADS_", "CUDA_", "FI_", "TWINRUN_", "UCX_"};
    static const char *const skipped[] = {"TWINRUN_STORE_TOKEN", "TWINRUN_FAULTS", "CUDA_VISIBLE_DEVICES",
                                          "MUSA_VISIBLE_DEVICES", "MTHREADS_VISIBLE_DEVICES"};
    for (size_t i = 0; i < sizeof skipped / sizeof *skipped; i++)
        if (strlen(skipped[i]) == len && !strncmp(name, skipped[i], len)) return false;
    if ((len == 15 && !strncmp(name, "OMP_NUM_THREADS", len)) || (len == 15 && !strncmp(name, "LD_LIBRARY_PATH", len)))
        return true;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return true;
    return false;
}

static void put_settings(text_out *t) {
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !compared_setting(*e, (size_t)(eq - *e))) continue;
        /* one line a setting: a value with a newline would break the record */
        if (strchr(eq + 1, '\n') || strlen(*e) > 300) continue;
        put(t, "env.%s\n", *e);
    }
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The directory's first level, names and sizes in name order, hashed: two nodes that mount different file
 * systems at one path see different files. *entries: how many. */
static uint64_t listing_hash(const char *path, int *entries) {
    *entries = 0;
    DIR *dir = opendir(path);
    if (!dir) return 0;
    enum { MAX_ENTRIES = 10000 };
    char **names = malloc(sizeof *names * MAX_ENTRIES);
    int n = 0;
    for (struct dirent *de; names && n < MAX_ENTRIES && (de = readdir(dir));) {
        /* the probes of doctors running now on other nodes come and go */
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strncmp(de->d_name, ".twinrun-doctor", 15))
            continue;
        if ((names[n] = strdup(de->d_name))) n++;
    }
    closedir(dir);
    uint64_t h = TR_FNV_OFFSET;
    if (names) qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char full[DOCTOR_PATH_LEN + 256];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        struct stat st;
        long long size = stat(full, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
        h = tr_fnv1a(h, names[i], strlen(names[i]) + 1);
        h = tr_fnv1a(h, &size, sizeof size);
        free(names[i]);
    }
    free(names);
    *entries = n;
    return h;
}

/* Writes and removes a probe file: the job writes checkpoints and logs there. 0, or an errno. */
static int probe_write(const char *path, int rank) {
    char probe[DOCTOR_PATH_LEN + 64];
    snprintf(probe, sizeof probe, "%s/.twinrun-doctor-%d-%ld", path, rank, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    int rc = write(fd, "doctor\n", 7) == 7 ? 0 : errno;
    if (close(fd) && !rc) rc = errno;
    if (unlink(probe) && !rc) rc = errno;
    return rc;
}

/* "dirK=ok HASH ENTRIES", or "dirK=missing: reason", "dirK=not a directory", "dirK=read-only: reason". */
static void put_dir(text_out *t, int k, const doctor_dir *dd, fault_rank *fr, int rank) {
    struct stat st;
    if (fault_dir_hidden(fr, dd->path)) {
        put(t, "dir%d=missing: %s\n", k, strerror(ENOENT));
        return;
    }
    if (stat(dd->path, &st) != 0) {
        put(t, "dir%d=missing: %s\n", k, strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        put(t, "dir%d=not a directory\n", k);
        return;
    }
    int rc = dd->writable ? probe_write(dd->path, rank) : 0;
    if (rc) {
        put(t, "dir%d=not writable: %s\n", k, strerror(rc));
        return;
    }
    int entries;
    const uint64_t h = listing_hash(dd->path, &entries);
    put(t, "dir%d=ok %016llx %d\n", k, (unsigned long long)h, entries);
}

void doctor_facts_collect(const doctor_options *o, dev_device *d, fault_rank *fr, int rank, double clock,
                          doctor_wire *w) {
    text_out t = {w->text, 0, sizeof w->text};
    w->text[0] = 0;
    dev_info info;
    dev_get_info(d, &info);
    char host[256] = "?";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "?");
    /* the build as the training preflight compares it: version and commit; a version_skew fault
     * replaces it on its node, as another install would */
    char build[160];
    snprintf(build, sizeof build, "twinrun %s commit %s", TR_VERSION_NUMBER, tr_version_commit());
    put(&t, "host=%s\n", host);
    put(&t, "build=%s\n", fault_build_version(fr, build));
    put(&t, "backend=%s\n", info.backend);
    put(&t, "device=%s\n", info.name);
    put(&t, "versions=%s\n", info.versions);
    put(&t, "simulated=%s\n", info.simulated);
    put(&t, "count=%d\n", fault_visible_devices(fr, info.count));
    dev_health health;
    dev_get_health(d, &health);
    char lines[512];
    doctor_health_format(&health, lines, sizeof lines);
    put(&t, "%s", lines);
    put(&t, "clock=%.9f\n", clock);
    /* node-wide facts once a node: its first rank looks at the directories */
    if (rank % o->gpus_per_node == 0)
        for (int k = 0; k < o->ndirs; k++) put_dir(&t, k, &o->dirs[k], fr, rank);
    put_settings(&t);
}

bool doctor_fact(const char *text, const char *key, char *out, size_t outlen) {
    const size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > kl && p[kl] == '=' && !strncmp(p, key, kl)) {
            snprintf(out, outlen, "%.*s", (int)(len - kl - 1), p + kl + 1);
            return true;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (outlen) out[0] = 0;
    return false;
}
