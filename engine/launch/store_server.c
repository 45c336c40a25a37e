/* The rendezvous store's server (tcp_store.h): one thread, poll() over the listening socket, a wake
 * pipe and the open connections. A get of a missing key parks its connection until a set of that
 * key answers it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launch/store_proto.h"
#include "launch/tcp_store.h"
#include "twinrun/err.h"

typedef struct entry {
    char key[TR_STORE_MAX_KEY + 1];
    unsigned char *value;
    size_t len;
} entry;

typedef struct conn {
    int fd;
    unsigned char *buf;
    size_t len;
    char waiting[TR_STORE_MAX_KEY + 1]; /* a parked get: its key; "" otherwise */
    bool done;                          /* answered or broken: closed after this poll round */
} conn;

struct tr_store_server {
    int listen_fd, wake[2], port;
    pthread_t thread;
    conn *conns;
    size_t nconns, cap_conns;
    entry *entries;
    size_t nentries, cap_entries;
};

static void send_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        const ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* the client went away: nothing to tell it */
        b += w;
        n -= (size_t)w;
    }
}

static void reply_value(int fd, const entry *e) {
    unsigned char head[5] = {'V'};
    for (int i = 0; i < 4; i++) head[1 + i] = (unsigned char)(e->len >> (8 * i));
    send_all(fd, head, 5);
    send_all(fd, e->value, e->len);
}

static void reply_error(int fd, const char *msg) {
    const size_t n = strlen(msg) > 1024 ? 1024 : strlen(msg);
    unsigned char head[3] = {'E', (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    send_all(fd, head, 3);
    send_all(fd, msg, n);
}

static entry *find(tr_store_server *s, const char *key) {
    for (size_t i = 0; i < s->nentries; i++)
        if (strcmp(s->entries[i].key, key) == 0) return &s->entries[i];
    return NULL;
}

static void drop(tr_store_server *s, size_t i) {
    close(s->conns[i].fd);
    free(s->conns[i].buf);
    s->conns[i] = s->conns[--s->nconns];
}

/* Stores a set; answers the gets parked on its key. Returns false when out of memory. */
static bool do_set(tr_store_server *s, const tr_store_req *r) {
    entry *e = find(s, r->key);
    if (!e) {
        if (s->nentries == s->cap_entries) {
            const size_t cap = s->cap_entries ? 2 * s->cap_entries : 64;
            entry *n = realloc(s->entries, cap * sizeof *n);
            if (!n) return false;
            s->entries = n;
            s->cap_entries = cap;
        }
        e = &s->entries[s->nentries++];
        memset(e, 0, sizeof *e);
        memcpy(e->key, r->key, sizeof e->key);
    }
    unsigned char *v = malloc(r->value_len ? r->value_len : 1);
    if (!v) return false;
    if (r->value_len) memcpy(v, r->value, r->value_len);
    free(e->value);
    e->value = v;
    e->len = r->value_len;
    for (size_t i = 0; i < s->nconns; i++)
        if (!s->conns[i].done && strcmp(s->conns[i].waiting, e->key) == 0) {
            reply_value(s->conns[i].fd, e);
            s->conns[i].done = true;
        }
    return true;
}

/* Reads what conn i sent; handles a complete request. Returns false when the connection ends. */
static bool serve_conn(tr_store_server *s, size_t i) {
    conn *c = &s->conns[i];
    unsigned char tmp[16384];
    const ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0 || c->waiting[0]) return false; /* closed, or bytes after a parked get */
    if (c->len + (size_t)n > TR_STORE_MAX_REQUEST) {
        reply_error(c->fd, "request too large");
        return false;
    }
    unsigned char *b = realloc(c->buf, c->len + (size_t)n);
    if (!b) return false;
    c->buf = b;
    memcpy(c->buf + c->len, tmp, (size_t)n);
    c->len += (size_t)n;
    tr_store_req req;
    size_t used = 0;
    char err[256];
    const int got = tr_store_parse_request(c->buf, c->len, &req, &used, err, sizeof err);
    if (got == 0) return true;
    if (got < 0) {
        reply_error(c->fd, err);
        return false;
    }
    if (req.op == 'S') {
        if (!do_set(s, &req)) {
            reply_error(c->fd, "rendezvous server out of memory");
            return false;
        }
        send_all(c->fd, "K", 1);
        return false;
    }
    const entry *e = find(s, req.key);
    if (e) {
        reply_value(c->fd, e);
        return false;
    }
    memcpy(c->waiting, req.key, sizeof c->waiting);
    return true;
}

static void accept_one(tr_store_server *s) {
    const int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) return;
    if (s->nconns == s->cap_conns) {
        const size_t cap = s->cap_conns ? 2 * s->cap_conns : 64;
        conn *n = realloc(s->conns, cap * sizeof *n);
        if (!n) {
            close(fd);
            return;
        }
        s->conns = n;
        s->cap_conns = cap;
    }
    s->conns[s->nconns++] = (conn){.fd = fd};
}

static void *serve(void *arg) {
    tr_store_server *s = arg;
    struct pollfd *pf = NULL;
    size_t cap = 0;
    for (;;) {
        if (cap < s->nconns + 2) {
            cap = 2 * (s->nconns + 2);
            struct pollfd *n = realloc(pf, cap * sizeof *n);
            if (!n) break;
            pf = n;
        }
        pf[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pf[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        const size_t n = s->nconns;
        for (size_t i = 0; i < n; i++) pf[2 + i] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
        if (poll(pf, n + 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[0].revents) break;
        /* connections are only marked done here and closed after the round, so indices stay valid */
        for (size_t i = 0; i < n; i++)
            if (pf[2 + i].revents && !s->conns[i].done && !serve_conn(s, i)) s->conns[i].done = true;
        for (size_t i = 0; i < s->nconns;) {
            if (s->conns[i].done) drop(s, i);
            else i++;
        }
        if (pf[1].revents & POLLIN) accept_one(s);
    }
    free(pf);
    return NULL;
}

tr_store_server *tr_store_serve(int port, char *err, size_t errlen) {
    tr_store_server *s = calloc(1, sizeof *s);
    if (!s) {
        tr_errf(err, errlen, "rendezvous: out of host memory");
        return NULL;
    }
    s->wake[0] = s->wake[1] = -1;
    /* dual-stack: one IPv6 socket also takes IPv4 clients; plain IPv4 where IPv6 is off */
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    if (fd >= 0) {
        const int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)port);
        sl = sizeof *a;
    } else {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)port);
        sl = sizeof *a;
    }
    if (fd < 0) {
        tr_errf(err, errlen, "rendezvous: socket: %s", strerror(errno));
        free(s);
        return NULL;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a previous run's TIME_WAIT must not block us */
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1024) != 0) {
        const int e = errno;
        if (e == EADDRINUSE)
            tr_errf(err, errlen, "rendezvous: MASTER_PORT %d is already in use on this host (another job, or a "
                                 "previous run still exiting): choose another MASTER_PORT for every rank", port);
        else if (e == EACCES)
            tr_errf(err, errlen, "rendezvous: not allowed to listen on port %d: use a MASTER_PORT above 1023", port);
        else
            tr_errf(err, errlen, "rendezvous: cannot listen on port %d: %s", port, strerror(e));
        close(fd);
        free(s);
        return NULL;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    if (pipe2(s->wake, O_CLOEXEC) != 0 || pthread_create(&s->thread, NULL, serve, s) != 0) {
        tr_errf(err, errlen, "rendezvous: cannot start the server thread: %s", strerror(errno));
        close(fd);
        if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
        free(s);
        return NULL;
    }
    return s;
}

int tr_store_server_port(const tr_store_server *s) { return s->port; }

void tr_store_server_stop(tr_store_server *s) {
    if (!s) return;
    if (write(s->wake[1], "x", 1) < 0) { /* the thread then never wakes: nothing better to do than detach */
        pthread_detach(s->thread);
        return;
    }
    pthread_join(s->thread, NULL);
    while (s->nconns) drop(s, 0);
    for (size_t i = 0; i < s->nentries; i++) free(s->entries[i].value);
    free(s->entries);
    free(s->conns);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}
