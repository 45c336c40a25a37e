/* The event file itself: naming, directory creation, appending framed events (see tensorboard.h). */
#include "io/tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "twinrun/err.h"

struct tr_tb_writer {
    FILE *f;
    char path[4096];
};

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mkdir -p: the seed's scripts create only the parent of TENSORBOARD_LOGS_PATH. */
static int make_dirs(const char *dir, char *err, size_t errlen) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return tr_errf(err, errlen, "--tensorboard-dir: path longer than %zu bytes", sizeof buf - 1);
    for (char *p = buf + 1;; p++) {
        const char c = *p;
        if (c != '/' && c != '\0') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tr_errf(err, errlen, "--tensorboard-dir %s: cannot create %s: %s", dir, buf, strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tr_errf(err, errlen, "--tensorboard-dir %s: exists but is not a directory; pass a directory", dir);
    return 0;
}

static int write_event(tr_tb_writer *w, double wall, int64_t step, const char *version, const char *tag, float v,
                       char *err, size_t errlen) {
    unsigned char ev[1024], rec[1024 + 16];
    const size_t n = tr_tb_encode_event(ev, sizeof ev, wall, step, version, tag, v);
    if (n == 0) return tr_errf(err, errlen, "tensorboard: tag '%s' is too long for an event", tag ? tag : "");
    const size_t m = tr_tb_frame(rec, sizeof rec, ev, n);
    if (fwrite(rec, 1, m, w->f) != m || fflush(w->f) != 0)
        return tr_errf(err, errlen, "tensorboard: writing %s failed: %s (disk full? drop --tensorboard-dir)", w->path,
                       strerror(errno));
    return 0;
}

tr_tb_writer *tr_tb_open(const char *dir, char *err, size_t errlen) {
    if (!dir || !*dir) {
        tr_errf(err, errlen, "--tensorboard-dir: empty path");
        return NULL;
    }
    if (make_dirs(dir, err, errlen)) return NULL;
    tr_tb_writer *w = calloc(1, sizeof *w);
    if (!w) {
        tr_errf(err, errlen, "tensorboard: out of host memory");
        return NULL;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    const double now = wall_now();
    if (snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s.%ld.0", dir, (long long)now, host,
                 (long)getpid()) >= (int)sizeof w->path) {
        tr_errf(err, errlen, "--tensorboard-dir %s: path too long", dir);
        free(w);
        return NULL;
    }
    /* "x": two writers (two runs, two ranks by mistake) never share a file */
    w->f = fopen(w->path, "wbx");
    if (!w->f) {
        tr_errf(err, errlen, "--tensorboard-dir: cannot create %s: %s", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    if (write_event(w, now, 0, "brain.Event:2", NULL, 0.0f, err, errlen)) {
        tr_tb_close(w);
        return NULL;
    }
    return w;
}

int tr_tb_scalar(tr_tb_writer *w, const char *tag, double value, int64_t step, char *err, size_t errlen) {
    if (!w) return 0;
    return write_event(w, wall_now(), step, NULL, tag, (float)value, err, errlen);
}

int tr_tb_close(tr_tb_writer *w) {
    if (!w) return 0;
    const int rc = fclose(w->f) == 0 ? 0 : -1;
    free(w);
    return rc;
}

const char *tr_tb_path(const tr_tb_writer *w) { return w ? w->path : ""; }
