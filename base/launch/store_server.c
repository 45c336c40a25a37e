/* The rendezvous store's server (tcp_store.h): one thread, poll() over the listening socket, a wake
 * pipe and the open connections. Each new connection is greeted with a fresh nonce and must send
 * one complete, authenticated request before its handshake deadline; a get of a missing key then
 * parks its connection until a set of that key answers it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "launch/store_proto.h"
#include "launch/tcp_store.h"
#include "twinrun/err.h"

#define DEFAULT_HANDSHAKE_S 30.0
#define DEFAULT_MAX_CONNS 4096
#define MAX_ENTRIES 65536
#define MAX_STORED_BYTES (64u << 20)
#define MAX_LOGGED_REFUSALS 16

typedef struct entry {
    char key[TR_STORE_MAX_KEY + 1];
    unsigned char *value;
    size_t len;
} entry;

typedef struct conn {
    int fd;
    unsigned char *buf;
    size_t len;
    unsigned char nonce[TR_STORE_NONCE];
    double deadline;                    /* to authenticate and finish the request; 0 once parked */
    char peer[64];                      /* for the log */
    char waiting[TR_STORE_MAX_KEY + 1]; /* a parked get: its key; "" otherwise */
    bool done;                          /* answered or broken: closed after this poll round */
    int member;                         /* a heartbeat member's rank (heartbeat.h); -1 otherwise */
    char who[TR_STORE_MAX_KEY + 1];     /* the member's host and pid, as it said */
    double last_seen;                   /* the member's last byte */
} conn;

struct tr_store_server {
    int listen_fd, wake[2], port;
    pthread_t thread;
    unsigned char token[TR_STORE_MAX_TOKEN];
    size_t token_len;
    double handshake_s;
    size_t max_conns;
    bool quiet;
    char where[300]; /* "ADDR:PORT" for the log */
    conn *conns;
    size_t nconns, cap_conns;
    entry *entries;
    size_t nentries, cap_entries, stored_bytes;
    atomic_long refusals;
    double next_ping; /* when the members are next told the server lives */
    bool gone_told;   /* a member's end was told to the others (once: the first is the one to blame) */
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void refuse_log(tr_store_server *s, const char *peer, const char *why) {
    const long n = atomic_fetch_add(&s->refusals, 1) + 1;
    if (s->quiet) return;
    if (n <= MAX_LOGGED_REFUSALS)
        fprintf(stderr, "twinrun: rendezvous store on %s refused a connection from %s: %s\n", s->where, peer, why);
    if (n == MAX_LOGGED_REFUSALS)
        fprintf(stderr, "twinrun: rendezvous store on %s: further refusals are counted, not printed\n", s->where);
}

static void send_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        const ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* the client went away (or stopped reading): nothing to tell it */
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

/* Stores a set; answers the gets parked on its key. NULL, or why it was not stored. */
static const char *do_set(tr_store_server *s, const tr_store_req *r) {
    entry *e = find(s, r->key);
    const size_t old = e ? e->len : 0;
    if (s->stored_bytes - old + r->value_len > MAX_STORED_BYTES)
        return "the rendezvous store is full (64 MiB of values): a job publishes a few bytes per communicator";
    if (!e) {
        if (s->nentries == MAX_ENTRIES) return "the rendezvous store is full (65536 keys)";
        if (s->nentries == s->cap_entries) {
            const size_t cap = s->cap_entries ? 2 * s->cap_entries : 64;
            entry *n = realloc(s->entries, cap * sizeof *n);
            if (!n) return "rendezvous server out of memory";
            s->entries = n;
            s->cap_entries = cap;
        }
        e = &s->entries[s->nentries++];
        memset(e, 0, sizeof *e);
        memcpy(e->key, r->key, sizeof e->key);
    }
    unsigned char *v = malloc(r->value_len ? r->value_len : 1);
    if (!v) return "rendezvous server out of memory";
    if (r->value_len) memcpy(v, r->value, r->value_len);
    free(e->value);
    e->value = v;
    e->len = r->value_len;
    s->stored_bytes = s->stored_bytes - old + r->value_len;
    for (size_t i = 0; i < s->nconns; i++)
        if (!s->conns[i].done && strcmp(s->conns[i].waiting, e->key) == 0) {
            reply_value(s->conns[i].fd, e);
            s->conns[i].done = true;
        }
    return NULL;
}

/* Member i has ended without leaving cleanly: the other members hear who, once (heartbeat.h). */
static void member_gone(tr_store_server *s, size_t i, const char *how) {
    conn *c = &s->conns[i];
    c->done = true;
    if (s->gone_told) return;
    s->gone_told = true;
    char msg[512];
    const int n = snprintf(msg, sizeof msg, "rank %d (%s) %s", c->member, c->who, how);
    const size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    const unsigned char head[3] = {'D', (unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
    for (size_t k = 0; k < s->nconns; k++) {
        if (k == i || s->conns[k].member < 0 || s->conns[k].done) continue;
        send_all(s->conns[k].fd, head, 3);
        send_all(s->conns[k].fd, msg, len);
    }
}

/* Bytes a member sent after its heartbeat request: 'P' alive, 'L' when it leaves. False when the
 * connection ends. */
static bool serve_member(tr_store_server *s, size_t i, const unsigned char *b, size_t n) {
    conn *c = &s->conns[i];
    c->last_seen = now();
    for (size_t k = 0; k < n; k++) {
        if (b[k] == 'P') continue;
        /* a rank that returns, with any status, leaves quietly: when every rank stops on an error they
         * agreed on (a NaN's exit 16), none must turn the others' status into a lost peer's */
        if (b[k] == 'L') return false;
        member_gone(s, i, "broke the heartbeat protocol");
        return false;
    }
    return true;
}

/* Reads what conn i sent; handles a complete request. Returns false when the connection ends. */
static bool serve_conn(tr_store_server *s, size_t i) {
    conn *c = &s->conns[i];
    unsigned char tmp[16384];
    const ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0 && c->member >= 0) {
        member_gone(s, i,
                    "is gone: its connection to the rendezvous store closed without a goodbye (the process was "
                    "killed, crashed or ended on a fatal error)");
        return false;
    }
    if (n > 0 && c->member >= 0) return serve_member(s, i, tmp, (size_t)n);
    if (n <= 0) {
        if (!c->waiting[0] && c->len) refuse_log(s, c->peer, "closed in the middle of a request");
        return false;
    }
    if (c->waiting[0]) {
        refuse_log(s, c->peer, "sent bytes after its request");
        return false;
    }
    if (c->len + (size_t)n > TR_STORE_MAX_REQUEST) {
        refuse_log(s, c->peer, "request too large");
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
    tr_store_auth auth = {.token = s->token, .token_len = s->token_len};
    memcpy(auth.nonce, c->nonce, sizeof auth.nonce);
    const int got = tr_store_parse_request(c->buf, c->len, &auth, &req, &used, err, sizeof err);
    if (got == 0) return true;
    if (got < 0 || used != c->len) {
        if (got > 0) snprintf(err, sizeof err, "bytes after its request");
        refuse_log(s, c->peer, err);
        reply_error(c->fd, err);
        return false;
    }
    if (req.op == 'H') {
        int rank = -1;
        char tail;
        if (sscanf(req.key, "heartbeat.%d%c", &rank, &tail) != 1 || rank < 0 || req.value_len >= sizeof c->who) {
            reply_error(c->fd, "a heartbeat's key is heartbeat.<rank>, its value the member's host and pid");
            return false;
        }
        c->member = rank;
        memcpy(c->who, req.value, req.value_len);
        c->who[req.value_len] = '\0';
        for (char *p = c->who; *p; p++)
            if (*p < 0x20 || *p > 0x7e) *p = '?'; /* printed by every other rank */
        c->deadline = 0, c->last_seen = now();
        send_all(c->fd, "K", 1);
        return true;
    }
    if (req.op == 'S') {
        const char *why = do_set(s, &req);
        if (why) {
            reply_error(c->fd, why);
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
    c->deadline = 0; /* authenticated: it may wait for its key as long as its client does */
    return true;
}

static void peer_name(const struct sockaddr_storage *a, char *out, size_t cap) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v = (const struct sockaddr_in6 *)a;
        inet_ntop(AF_INET6, &v->sin6_addr, host, sizeof host);
        port = ntohs(v->sin6_port);
    } else if (a->ss_family == AF_INET) {
        const struct sockaddr_in *v = (const struct sockaddr_in *)a;
        inet_ntop(AF_INET, &v->sin_addr, host, sizeof host);
        port = ntohs(v->sin_port);
    }
    snprintf(out, cap, "%s port %d", host, port);
}

static void accept_one(tr_store_server *s) {
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    memset(&a, 0, sizeof a);
    const int fd = accept4(s->listen_fd, (struct sockaddr *)&a, &al, SOCK_CLOEXEC);
    if (fd < 0) return;
    char peer[64];
    peer_name(&a, peer, sizeof peer);
    if (s->nconns >= s->max_conns) {
        refuse_log(s, peer, "too many open connections");
        close(fd);
        return;
    }
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
    /* a client that vanished without closing (a crashed node) is found by keepalive in ~2 minutes,
     * so a parked get cannot hold its connection forever */
    const int one = 1, idle = 60, intvl = 10, cnt = 6;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    /* replies are sent blocking (recv only runs when poll says so); a client that stops reading
     * costs the server at most this long per reply, then its reply is dropped */
    const struct timeval snd = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
    conn c = {.fd = fd, .deadline = now() + s->handshake_s, .member = -1};
    memcpy(c.peer, peer, sizeof c.peer);
    if (getrandom(c.nonce, sizeof c.nonce, 0) != (ssize_t)sizeof c.nonce) {
        close(fd);
        return;
    }
    unsigned char hello[TR_STORE_GREETING];
    tr_store_encode_greeting(hello, c.nonce);
    send_all(fd, hello, sizeof hello); /* 20 bytes into an empty socket buffer: never blocks */
    s->conns[s->nconns++] = c;
}

/* Milliseconds until the nearest handshake deadline or ping (-1: none). */
static int poll_timeout(const tr_store_server *s, double t) {
    double first = 0;
    for (size_t i = 0; i < s->nconns; i++) {
        const double d = s->conns[i].member >= 0 ? s->next_ping : s->conns[i].deadline;
        if (d > 0 && (first == 0 || d < first)) first = d;
    }
    if (first == 0) return -1;
    return first <= t ? 0 : (int)((first - t) * 1000.0) + 1;
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
        if (poll(pf, n + 2, poll_timeout(s, now())) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[0].revents) break;
        /* connections are only marked done here and closed after the round, so indices stay valid */
        for (size_t i = 0; i < n; i++)
            if (pf[2 + i].revents && !s->conns[i].done && !serve_conn(s, i)) s->conns[i].done = true;
        const double t = now();
        const bool ping = t >= s->next_ping;
        if (ping) s->next_ping = t + TR_HEARTBEAT_PERIOD_S;
        for (size_t i = 0; i < s->nconns; i++) {
            conn *c = &s->conns[i];
            if (c->member < 0 || c->done) continue;
            if (t - c->last_seen > TR_HEARTBEAT_TIMEOUT_S) {
                char how[128];
                snprintf(how, sizeof how,
                         "sent no heartbeat for %.0f s (its node is down or unreachable, or the process is stopped)",
                         TR_HEARTBEAT_TIMEOUT_S);
                member_gone(s, i, how);
            } else if (ping) {
                send_all(c->fd, "P", 1);
            }
        }
        for (size_t i = 0; i < s->nconns; i++) {
            conn *c = &s->conns[i];
            if (!c->done && c->deadline > 0 && t >= c->deadline) {
                char why[96];
                snprintf(why, sizeof why, "no complete request within %.0f s of connecting", s->handshake_s);
                refuse_log(s, c->peer, why);
                c->done = true;
            }
        }
        for (size_t i = 0; i < s->nconns;) {
            if (s->conns[i].done) drop(s, i);
            else i++;
        }
        if (pf[1].revents & POLLIN) accept_one(s);
    }
    free(pf);
    return NULL;
}

static bool is_loopback(const struct sockaddr *a) {
    if (a->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
    return false;
}

/* A listening socket on one address; fd or -1 with errno. */
static int listen_on(const struct sockaddr *a, socklen_t al) {
    const int fd = socket(a->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int one = 1, off = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a previous run's TIME_WAIT must not block us */
    if (a->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    if (bind(fd, a, al) != 0 || listen(fd, 1024) != 0) {
        const int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int listen_error(int e, const char *where, int port, char *err, size_t errlen) {
    if (e == EADDRINUSE)
        return tr_errf(err, errlen,
                       "rendezvous: MASTER_PORT %d is already in use on this host (another job, or a "
                       "previous run still exiting): choose another MASTER_PORT for every rank",
                       port);
    if (e == EACCES)
        return tr_errf(err, errlen, "rendezvous: not allowed to listen on port %d: use a MASTER_PORT above 1023", port);
    if (e == EADDRNOTAVAIL)
        return tr_errf(err, errlen,
                       "rendezvous: '%s' is not an address of this host, so rank 0 cannot listen there: "
                       "run rank 0 on MASTER_ADDR's node, or set TWINRUN_STORE_BIND to this host's "
                       "address on the network the other nodes reach",
                       where);
    return tr_errf(err, errlen, "rendezvous: cannot listen on %s port %d: %s", where, port, strerror(e));
}

/* Binds the listening socket: every interface for "*", else the first address `where` resolves to
 * that this host can listen on. */
static int open_listener(const char *where, int port, char *err, size_t errlen) {
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
    const bool every = strcmp(where, "*") == 0;
    const int g = getaddrinfo(every ? NULL : where, service, &hints, &res);
    if (g != 0)
        return tr_errf(err, errlen,
                       "rendezvous: cannot listen on '%s': it does not resolve (%s); set MASTER_ADDR "
                       "(or TWINRUN_STORE_BIND) to this host's name or address",
                       where, gai_strerror(g));
    int fd = -1, e = EADDRNOTAVAIL;
    bool loop_only = true;
    /* for "*": the IPv6 wildcard takes IPv4 clients too (dual stack); IPv4 alone where IPv6 is off */
    for (int pass = every ? 0 : 1; pass < 2 && fd < 0; pass++)
        for (const struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            if (pass == 0 && ai->ai_family != AF_INET6) continue;
            loop_only = loop_only && is_loopback(ai->ai_addr);
            fd = listen_on(ai->ai_addr, ai->ai_addrlen);
            if (fd < 0) e = errno;
        }
    freeaddrinfo(res);
    if (fd < 0) return listen_error(e, where, port, err, errlen);
    if (loop_only && !every && strcmp(where, "localhost") != 0 && strncmp(where, "127.", 4) != 0 &&
        strcmp(where, "::1") != 0)
        fprintf(stderr,
                "twinrun: warning: '%s' resolves to a loopback address on this host, so the rendezvous store "
                "listens on loopback only and ranks on other nodes cannot reach it; for a multi-node job set "
                "TWINRUN_STORE_BIND to this host's address on the cluster network\n",
                where);
    return fd;
}

tr_store_server *tr_store_serve(const tr_store_conf *c, char *err, size_t errlen) {
    const char *where = c->bind && *c->bind ? c->bind : c->host;
    if (!where || !*where) {
        tr_errf(err, errlen, "rendezvous: no address to listen on: set MASTER_ADDR");
        return NULL;
    }
    if (c->token_len > TR_STORE_MAX_TOKEN) {
        tr_errf(err, errlen, "rendezvous: the job token is %zu bytes; at most %d", c->token_len, TR_STORE_MAX_TOKEN);
        return NULL;
    }
    tr_store_server *s = calloc(1, sizeof *s);
    if (!s) {
        tr_errf(err, errlen, "rendezvous: out of host memory");
        return NULL;
    }
    s->wake[0] = s->wake[1] = -1;
    const int fd = open_listener(where, c->port, err, errlen);
    if (fd < 0) {
        free(s);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    s->listen_fd = fd;
    if (c->token_len) memcpy(s->token, c->token, c->token_len);
    s->token_len = c->token_len;
    s->handshake_s = c->handshake_s > 0 ? c->handshake_s : DEFAULT_HANDSHAKE_S;
    s->max_conns = c->max_conns > 0 ? (size_t)c->max_conns : DEFAULT_MAX_CONNS;
    s->quiet = c->quiet;
    snprintf(s->where, sizeof s->where, "%s:%d", where, s->port);
    atomic_init(&s->refusals, 0);
    if (!s->token_len && !s->quiet)
        fprintf(stderr,
                "twinrun: warning: the rendezvous store on %s runs without a job token: any program that "
                "reaches it can read and write the job's keys; export the same secret as TWINRUN_STORE_TOKEN "
                "to every rank (scripts/launch_llama3.sh does)\n",
                s->where);
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

long tr_store_server_refusals(const tr_store_server *s) { return atomic_load(&((tr_store_server *)s)->refusals); }

void tr_store_server_stop(tr_store_server *s) {
    if (!s) return;
    if (write(s->wake[1], "x", 1) < 0) { /* the thread then never wakes: nothing better to do than detach */
        pthread_detach(s->thread);
        return;
    }
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < s->nconns; i++) /* the job is over: its members stop watching */
        if (s->conns[i].member >= 0 && !s->conns[i].done) send_all(s->conns[i].fd, "X", 1);
    while (s->nconns) drop(s, 0);
    for (size_t i = 0; i < s->nentries; i++) free(s->entries[i].value);
    free(s->entries);
    free(s->conns);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}
