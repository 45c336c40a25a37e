/* The rendezvous store's client (tcp_store.h): connect with retries until the deadline, read the
 * server's greeting (its nonce), send one request authenticated with the job's token, precise errors. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch/store_proto.h"
#include "launch/tcp_store.h"
#include "twinrun/err.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ms_until(double deadline) {
    const double left = deadline - now();
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

/* One non-blocking connect to one address, waiting at most until `deadline`. fd, or -1 with errno. */
static int connect_one(const struct addrinfo *ai, double deadline) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    const int wait = ms_until(deadline) < 5000 ? ms_until(deadline) : 5000; /* a lost SYN: retry soon */
    int soerr = ETIMEDOUT;
    if (poll(&p, 1, wait) == 1) {
        socklen_t sl = sizeof soerr;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    }
    if (soerr) {
        close(fd);
        errno = soerr;
        return -1;
    }
    return fd;
}

/* Connects to host:port, retrying until the deadline; fd or -1 with err. */
static int dial(const char *host, int port, double deadline, double timeout_s, char *err, size_t errlen) {
    char service[16], last[256] = "no attempt finished";
    snprintf(service, sizeof service, "%d", port);
    double pause = 0.05;
    bool noted = false;
    const double t0 = now();
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        const int g = getaddrinfo(host, service, &hints, &res);
        if (g != 0) {
            /* keep retrying: on Kubernetes the master pod's name resolves only once it runs */
            snprintf(last, sizeof last, "MASTER_ADDR '%s' does not resolve (%s): check the host name", host,
                     gai_strerror(g));
        } else {
            for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                const int fd = connect_one(ai, deadline);
                if (fd >= 0) {
                    freeaddrinfo(res);
                    const int fl = fcntl(fd, F_GETFL);
                    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
                    return fd;
                }
                if (errno == ECONNREFUSED)
                    snprintf(last, sizeof last,
                             "connection refused: nothing listens on %s:%d yet (has rank 0 started? "
                             "is MASTER_PORT the same for every rank?)",
                             host, port);
                else
                    snprintf(last, sizeof last,
                             "%s (is %s reachable from this node, and port %d open in its firewall?)", strerror(errno),
                             host, port);
            }
            freeaddrinfo(res);
        }
        if (now() >= deadline)
            return tr_errf(err, errlen, "rendezvous: could not reach %s:%d within %g s: %s", host, port, timeout_s,
                           last);
        if (!noted && now() - t0 > 10.0) {
            fprintf(stderr, "twinrun: still waiting for the rendezvous at %s:%d (%s)\n", host, port, last);
            noted = true;
        }
        const double p = pause < deadline - now() ? pause : deadline - now();
        if (p > 0) {
            struct timespec ts = {(time_t)p, (long)((p - (double)(time_t)p) * 1e9)};
            nanosleep(&ts, NULL);
        }
        pause = pause * 2 > 1.0 ? 1.0 : pause * 2;
    }
}

/* Reads exactly n bytes before the deadline. 1, 0 on timeout, -1 when the peer closed or failed. */
static int read_exact(int fd, void *buf, size_t n, double deadline) {
    unsigned char *p = buf;
    while (n) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        const int r = poll(&pf, 1, ms_until(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return 0;
        const ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

static int send_all(int fd, const unsigned char *p, size_t n) {
    while (n) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static unsigned le(const unsigned char *p, int n) {
    unsigned v = 0;
    for (int i = 0; i < n; i++) v |= (unsigned)p[i] << (8 * i);
    return v;
}

/* What the protocol can carry, checked before any connection is made. */
static bool storable(const char *key, size_t len) {
    if (!key || len > TR_STORE_MAX_VALUE) return false;
    const size_t k = strlen(key);
    if (k < 1 || k > TR_STORE_MAX_KEY) return false;
    for (size_t i = 0; i < k; i++)
        if (key[i] < 0x21 || key[i] > 0x7e) return false;
    return true;
}

/* Reads the server's greeting (its nonce for this connection); 0, -1 with err, or -2 with err when
 * the server closed the connection first (at its connection limit: worth another try). */
static int greeting(int fd, const char *host, int port, double deadline, double timeout_s,
                    unsigned char nonce[TR_STORE_NONCE], char *err, size_t errlen) {
    unsigned char hello[TR_STORE_GREETING];
    const int r = read_exact(fd, hello, sizeof hello, deadline);
    if (r == 0)
        return tr_errf(err, errlen,
                       "rendezvous: %s:%d accepted the connection but sent no twinrun greeting within "
                       "%.0f s (is MASTER_PORT used by another service?)",
                       host, port, timeout_s);
    if (r < 0) {
        tr_errf(err, errlen,
                "rendezvous: %s:%d kept closing the connection before greeting until the deadline (a "
                "server at its connection limit, or not a twinrun rendezvous)",
                host, port);
        return -2;
    }
    char why[256];
    if (tr_store_parse_greeting(hello, sizeof hello, nonce, why, sizeof why) != 1)
        return tr_errf(err, errlen, "rendezvous: %s:%d: %s", host, port, why);
    return 0;
}

/* Connects, reads the greeting and sends one authenticated request; the connection's fd, or -1 with err. */
static int send_request(const tr_store_conf *c, char op, const char *key, const void *value, size_t len,
                        double deadline, double timeout_s, char *err, size_t errlen) {
    const char *host = c->host;
    const int port = c->port;
    if (!host || !*host) return tr_errf(err, errlen, "rendezvous: no MASTER_ADDR to reach the store at");
    if (!storable(key, len))
        return tr_errf(err, errlen,
                       "rendezvous: key '%.80s' or its %zu-byte value is not storable (keys: 1..%d "
                       "printable characters, values: at most %d bytes)",
                       key ? key : "", len, TR_STORE_MAX_KEY, TR_STORE_MAX_VALUE);
    tr_store_auth auth = {.token = c->token, .token_len = c->token_len};
    int fd = -1;
    for (double pause = 0.05;; pause = pause * 2 > 1.0 ? 1.0 : pause * 2) {
        if ((fd = dial(host, port, deadline, timeout_s, err, errlen)) < 0) return -1;
        const int g = greeting(fd, host, port, deadline, timeout_s, auth.nonce, err, errlen);
        if (g == 0) break;
        close(fd);
        if (g == -1 || ms_until(deadline) == 0) return -1;
        const double p = pause < deadline - now() ? pause : deadline - now();
        if (p > 0) nanosleep(&(struct timespec){(time_t)p, (long)((p - (double)(time_t)p) * 1e9)}, NULL);
    }
    unsigned char *req = malloc(TR_STORE_MAX_REQUEST);
    if (!req) {
        close(fd);
        return tr_errf(err, errlen, "rendezvous: out of host memory");
    }
    const size_t n = tr_store_encode_request(req, TR_STORE_MAX_REQUEST, &auth, op, key, value, len);
    if (n == 0) {
        free(req);
        close(fd);
        return tr_errf(err, errlen, "rendezvous: key '%.80s' or its %zu-byte value is not storable", key, len);
    }
    const int rc = send_all(fd, req, n);
    free(req);
    if (rc) {
        close(fd);
        return tr_errf(err, errlen, "rendezvous: %s:%d closed the connection (did rank 0's process exit?)", host, port);
    }
    return fd;
}

/* Sends one request and reads the reply's status byte and (for 'V') the value. */
static int request(const tr_store_conf *c, char op, const char *key, const void *value, size_t len, void *out,
                   size_t out_len, double timeout_s, char *err, size_t errlen) {
    const char *host = c->host;
    const int port = c->port;
    const double deadline = now() + timeout_s;
    const int fd = send_request(c, op, key, value, len, deadline, timeout_s, err, errlen);
    if (fd < 0) return -1;
    unsigned char st = 0, head[4];
    int rc = read_exact(fd, &st, 1, deadline) == 1 ? 0 : -2;
    if (rc == -2 && ms_until(deadline) == 0)
        rc = tr_errf(err, errlen,
                     "rendezvous: waited %.0f s for '%s' at %s:%d: the communicator's rank 0 never "
                     "published it (did every rank start? do all use the same MASTER_ADDR/MASTER_PORT?)",
                     timeout_s, key, host, port);
    else if (rc)
        rc = tr_errf(err, errlen, "rendezvous: %s:%d closed the connection (did rank 0's process exit?)", host, port);
    else if (st == 'K' && op == 'S') rc = 0;
    else if (st == 'V' && op == 'G') {
        if (read_exact(fd, head, 4, deadline) != 1)
            rc = tr_errf(err, errlen, "rendezvous: truncated reply from %s:%d", host, port);
        else if (le(head, 4) != out_len)
            rc = tr_errf(err, errlen, "rendezvous: '%s' holds %u bytes, expected %zu (ranks of different builds?)", key,
                         le(head, 4), out_len);
        else if (read_exact(fd, out, out_len, deadline) != 1)
            rc = tr_errf(err, errlen, "rendezvous: truncated reply from %s:%d", host, port);
    } else if (st == 'E') {
        char msg[1025] = "";
        const unsigned m = read_exact(fd, head, 2, deadline) == 1 ? le(head, 2) : 0;
        if (m && m < sizeof msg && read_exact(fd, msg, m, deadline) == 1) msg[m] = '\0';
        rc = tr_errf(err, errlen, "rendezvous: %s:%d refused the request: %s", host, port, msg);
    } else {
        rc = tr_errf(err, errlen,
                     "rendezvous: %s:%d answered something that is not a twinrun rendezvous (is "
                     "MASTER_PORT used by another service?)",
                     host, port);
    }
    close(fd);
    return rc;
}

int tr_store_set(const tr_store_conf *c, const char *key, const void *value, size_t len, double timeout_s, char *err,
                 size_t errlen) {
    return request(c, 'S', key, value, len, NULL, 0, timeout_s, err, errlen);
}

int tr_store_get(const tr_store_conf *c, const char *key, void *value, size_t len, double timeout_s, char *err,
                 size_t errlen) {
    return request(c, 'G', key, NULL, 0, value, len, timeout_s, err, errlen);
}

int tr_store_join(const tr_store_conf *c, const char *key, const char *who, double timeout_s, char *err,
                  size_t errlen) {
    const double deadline = now() + timeout_s;
    const int fd = send_request(c, 'H', key, who, strlen(who), deadline, timeout_s, err, errlen);
    if (fd < 0) return -1;
    unsigned char st = 0;
    if (read_exact(fd, &st, 1, deadline) == 1 && st == 'K') return fd;
    close(fd);
    return tr_errf(err, errlen, "rendezvous: %s:%d did not take the heartbeat (%s)", c->host, c->port,
                   st == 'E' ? "it refused it: a twinrun build without heartbeats?" : "no answer");
}

tr_store_conf tr_store_conf_of(const tr_launch_vars *v) {
    return (tr_store_conf){.host = v->master_addr,
                           .port = v->master_port,
                           .bind = v->store_bind,
                           .token = (const unsigned char *)v->store_token,
                           .token_len = strlen(v->store_token)};
}
