/* A member of the job's heartbeat (heartbeat.h): a thread that sends 'P' every second on its store
 * connection and reads what the server says. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "twinrun/err.h"

struct tr_heartbeat {
    int fd, wake[2];
    int rank;
    char where[300]; /* the store's "ADDR:PORT", for messages */
    tr_heartbeat_fn fn;
    void *arg;
    pthread_t thread;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void send_byte(int fd, unsigned char b) {
    while (send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {}
}

/* The server is gone with rank 0's process (or its node). */
static void store_gone(tr_heartbeat *h, const char *how) {
    char what[512];
    snprintf(what, sizeof what, "rank 0 (the rendezvous store's process, %s) %s", h->where, how);
    h->fn(h->arg, 0, what);
}

/* Reads a 'D' message that follows in the stream: "rank R (...) ...". False when it is not whole. */
static bool read_gone(tr_heartbeat *h, const unsigned char *b, size_t n, size_t *used) {
    if (n < 3) return false;
    const size_t len = (size_t)b[1] | (size_t)b[2] << 8;
    if (n < 3 + len) return false;
    char what[600];
    snprintf(what, sizeof what, "%.*s", (int)len, (const char *)b + 3);
    int rank = -1;
    if (sscanf(what, "rank %d", &rank) != 1) rank = -1;
    *used = 3 + len;
    h->fn(h->arg, rank, what);
    return true;
}

static void *watch(void *arg) {
    tr_heartbeat *h = arg;
    unsigned char buf[1024];
    size_t have = 0;
    double heard = now(), next_ping = 0;
    for (;;) {
        const double t = now();
        if (t >= next_ping) send_byte(h->fd, 'P'), next_ping = t + TR_HEARTBEAT_PERIOD_S;
        if (t - heard > TR_HEARTBEAT_TIMEOUT_S) {
            char how[128];
            snprintf(how, sizeof how, "sent no heartbeat for %.0f s (its node is down or unreachable)",
                     TR_HEARTBEAT_TIMEOUT_S);
            store_gone(h, how);
            return NULL;
        }
        struct pollfd pf[2] = {{.fd = h->wake[0], .events = POLLIN}, {.fd = h->fd, .events = POLLIN}};
        const int wait = (int)((next_ping - t) * 1000.0) + 1;
        if (poll(pf, 2, wait > 0 ? wait : 0) < 0 && errno != EINTR) return NULL;
        if (pf[0].revents) return NULL; /* tr_heartbeat_stop */
        if (!pf[1].revents) continue;
        const ssize_t k = recv(h->fd, buf + have, sizeof buf - have, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) {
            store_gone(h, "is gone: its connection closed without a goodbye (the process was killed or crashed)");
            return NULL;
        }
        heard = now();
        have += (size_t)k;
        size_t pos = 0;
        while (pos < have) {
            const unsigned char op = buf[pos];
            size_t used = 0;
            if (op == 'P') {
                pos++;
            } else if (op == 'X') { /* the job is over: nothing more to watch */
                return NULL;
            } else if (op == 'D') {
                if (!read_gone(h, buf + pos, have - pos, &used)) break;
                return NULL; /* the callback returned: stop watching */
            } else {
                store_gone(h, "broke the heartbeat protocol (another program on MASTER_PORT?)");
                return NULL;
            }
        }
        memmove(buf, buf + pos, have - pos);
        have -= pos;
    }
}

tr_heartbeat *tr_heartbeat_start(const tr_store_conf *c, int rank, double timeout_s, tr_heartbeat_fn fn, void *arg,
                                 char *err, size_t errlen) {
    char key[32], host[128] = "?", who[200];
    snprintf(key, sizeof key, "heartbeat.%d", rank);
    gethostname(host, sizeof host - 1);
    snprintf(who, sizeof who, "%s pid %ld", host, (long)getpid());
    tr_heartbeat *h = calloc(1, sizeof *h);
    if (!h) return tr_errf(err, errlen, "heartbeat: out of host memory"), NULL;
    h->rank = rank, h->fn = fn, h->arg = arg, h->wake[0] = h->wake[1] = -1;
    snprintf(h->where, sizeof h->where, "%s:%d", c->host ? c->host : "?", c->port);
    if ((h->fd = tr_store_join(c, key, who, timeout_s, err, errlen)) < 0) {
        free(h);
        return NULL;
    }
    if (pipe2(h->wake, O_CLOEXEC) != 0 || pthread_create(&h->thread, NULL, watch, h) != 0) {
        tr_errf(err, errlen, "heartbeat: cannot start its thread: %s", strerror(errno));
        close(h->fd);
        if (h->wake[0] >= 0) close(h->wake[0]), close(h->wake[1]);
        free(h);
        return NULL;
    }
    return h;
}

void tr_heartbeat_stop(tr_heartbeat *h) {
    if (!h) return;
    if (write(h->wake[1], "x", 1) == 1) pthread_join(h->thread, NULL);
    else pthread_detach(h->thread);
    (void)send(h->fd, "L", 1, MSG_NOSIGNAL);
    close(h->fd);
    close(h->wake[0]);
    close(h->wake[1]);
    free(h);
}
