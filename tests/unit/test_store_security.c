/* The rendezvous store against strangers (base/launch/tcp_store.h): while a real job of eight
 * clients publishes and reads its keys, others connect without the token, with a wrong token, with
 * an oversized or malformed frame, or hold connections open without a word, or open more
 * connections than the server takes. Every stranger is refused (and counted), the job completes,
 * and the server goes on serving. Also: the store listens only where it is told. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch/store_proto.h"
#include "launch/tcp_store.h"

#define TOKEN "job-secret-5f0e9d8c7b6a"
#define CLIENTS 8

static tr_store_conf conf(const char *host, int port, const char *token) {
    return (tr_store_conf){
        .host = host, .port = port, .token = (const unsigned char *)token, .token_len = token ? strlen(token) : 0};
}

/* A raw TCP connection to 127.0.0.1:port; fd. */
static int raw_connect(const char *addr, int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads until the server closes (or 5 s pass): the bytes it sent. */
static size_t drain(int fd, unsigned char *buf, size_t cap) {
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t n = 0;
    for (;;) {
        const ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
        if (n == cap) break;
    }
    return n;
}

typedef struct job_client {
    int port, rank;
    int rc;
    char err[512];
} job_client;

/* One rank of the real job: publishes its value, then reads everyone's. */
static void *job_rank(void *arg) {
    job_client *j = arg;
    const tr_store_conf c = conf("127.0.0.1", j->port, TOKEN);
    char key[32];
    unsigned char v[64];
    memset(v, j->rank, sizeof v);
    snprintf(key, sizeof key, "job.%d", j->rank);
    j->rc = tr_store_set(&c, key, v, sizeof v, 20.0, j->err, sizeof j->err);
    for (int r = 0; r < CLIENTS && !j->rc; r++) {
        snprintf(key, sizeof key, "job.%d", r);
        j->rc = tr_store_get(&c, key, v, sizeof v, 20.0, j->err, sizeof j->err);
        for (size_t i = 0; i < sizeof v && !j->rc; i++)
            if (v[i] != (unsigned char)r) j->rc = -7;
    }
    return NULL;
}

static void test_strangers_refused_job_completes(void **state) {
    (void)state;
    char err[512];
    tr_store_conf sc = conf("127.0.0.1", 0, TOKEN);
    sc.handshake_s = 2.0; /* long enough for a loaded runner, short enough for the idle ones to go */
    sc.max_conns = 24;
    sc.quiet = true;
    tr_store_server *s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int port = tr_store_server_port(s);

    /* idle strangers: connect, say nothing; more of them than the server takes */
    int idle[40];
    for (int i = 0; i < 40; i++) idle[i] = raw_connect("127.0.0.1", port);

    /* the job runs meanwhile: its clients retry while the idle ones fill the server */
    pthread_t t[CLIENTS];
    job_client jc[CLIENTS];
    for (int r = 0; r < CLIENTS; r++) {
        jc[r] = (job_client){.port = port, .rank = r};
        pthread_create(&t[r], NULL, job_rank, &jc[r]);
    }

    /* no token, a wrong token: refused with the reason */
    const tr_store_conf none = conf("127.0.0.1", port, NULL),
                        wrong = conf("127.0.0.1", port, "job-secret-5f0e9d8c7b6b");
    unsigned char v[64];
    assert_int_equal(tr_store_get(&none, "job.0", v, sizeof v, 5.0, err, sizeof err), -1);
    assert_non_null(strstr(err, "authentication failed"));
    assert_int_equal(tr_store_set(&wrong, "job.0", "evil", 4, 5.0, err, sizeof err), -1);
    assert_non_null(strstr(err, "authentication failed"));

    /* malformed frames: garbage, a wrong version, a bad op, an oversized value, too many bytes */
    const char *garbage[] = {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "TWS1G\001\000k"};
    for (int g = 0; g < 2; g++) {
        const int fd = raw_connect("127.0.0.1", port);
        if (fd < 0) continue; /* the server was full: that is a refusal too */
        (void)!send(fd, garbage[g], strlen(garbage[g]) + (g == 1 ? 3 : 0), MSG_NOSIGNAL);
        unsigned char b[256];
        drain(fd, b, sizeof b);
        close(fd);
    }
    {
        /* a header that announces a 2 GiB value */
        unsigned char f[TR_STORE_HEAD + 8] = {'T', 'W', 'S', '2'};
        memcpy(f + TR_STORE_HEAD, "S\001\000k\377\377\377\177", 8);
        const int fd = raw_connect("127.0.0.1", port);
        if (fd >= 0) {
            (void)!send(fd, f, sizeof f, MSG_NOSIGNAL);
            unsigned char b[256];
            drain(fd, b, sizeof b);
            close(fd);
        }
        /* a stream of more bytes than any request holds */
        const int fd2 = raw_connect("127.0.0.1", port);
        if (fd2 >= 0) {
            unsigned char *big = calloc(TR_STORE_MAX_REQUEST + 4096, 1);
            memcpy(big, "TWS2", 4);
            (void)!send(fd2, big, TR_STORE_MAX_REQUEST + 4096, MSG_NOSIGNAL);
            free(big);
            unsigned char b[256];
            drain(fd2, b, sizeof b);
            close(fd2);
        }
    }

    for (int r = 0; r < CLIENTS; r++) {
        pthread_join(t[r], NULL);
        if (jc[r].rc) fail_msg("job rank %d failed (%d): %s", r, jc[r].rc, jc[r].err);
    }
    /* the idle strangers were closed by the server: their reads end */
    for (int i = 0; i < 40; i++) {
        if (idle[i] < 0) continue;
        unsigned char b[64];
        const size_t n = drain(idle[i], b, sizeof b);
        assert_true(n <= TR_STORE_GREETING);
        close(idle[i]);
    }
    /* 2 unauthenticated + >= 2 malformed + 40 idle or over the limit */
    const long refused = tr_store_server_refusals(s);
    if (refused < 44) fail_msg("only %ld refusals counted", refused);
    /* and it still serves the job */
    const tr_store_conf c = conf("127.0.0.1", port, TOKEN);
    assert_int_equal(tr_store_get(&c, "job.3", v, sizeof v, 5.0, err, sizeof err), 0);
    assert_int_equal(v[0], 3);
    tr_store_server_stop(s);
}

/* The first IPv4 address of this host that is not loopback, or "" when it has none. */
static void other_address(char *out, size_t cap) {
    out[0] = '\0';
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return;
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            const struct in_addr a = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) != 127) {
                inet_ntop(AF_INET, &a, out, (socklen_t)cap);
                break;
            }
        }
    freeifaddrs(ifs);
}

/* MASTER_ADDR=127.0.0.1: the store answers on loopback */
static void test_listens_on_loopback(void **state) {
    (void)state;
    char err[512];
    tr_store_conf sc = conf("127.0.0.1", 0, TOKEN);
    sc.quiet = true;
    tr_store_server *s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int ok = raw_connect("127.0.0.1", tr_store_server_port(s));
    assert_true(ok >= 0);
    close(ok);
    tr_store_server_stop(s);
}

/* The other interface (state: its address): bound to loopback the store does not answer there; bound to
 * every interface it does; bound to that address it does not answer on loopback. Skipped, saying why, on
 * a host with no address but loopback: there is nothing to check there. */
static void test_listens_only_where_told(void **state) {
    const char *other = *state;
    if (!other[0]) {
        print_message("no non-loopback IPv4 address on this host: the store's binding cannot be checked "
                      "from another interface\n");
        skip();
    }
    char err[512];
    tr_store_conf sc = conf("127.0.0.1", 0, TOKEN);
    sc.quiet = true;
    tr_store_server *s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int no = raw_connect(other, tr_store_server_port(s));
    if (no >= 0) fail_msg("the store bound to 127.0.0.1 answered on %s", other);
    tr_store_server_stop(s);
    /* TWINRUN_STORE_BIND=*: every interface, as asked */
    sc.bind = "*";
    s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int yes = raw_connect(other, tr_store_server_port(s));
    assert_true(yes >= 0);
    close(yes);
    tr_store_server_stop(s);
    /* TWINRUN_STORE_BIND=<the other address>: that one, not loopback */
    sc.bind = other;
    s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int lo = raw_connect("127.0.0.1", tr_store_server_port(s));
    if (lo >= 0) fail_msg("the store bound to %s answered on 127.0.0.1", other);
    tr_store_server_stop(s);
}

/* `test_store_security other-interface`: only the half that needs a second address. On a host without
 * one cmocka reports the test skipped, and the program exits 77 (ctest's SKIP_RETURN_CODE,
 * tests/unit/tests.cmake) so that ctest reports it skipped too, rather than passed (cmocka's skip alone
 * exits 0). Without arguments: the halves every host can run. */
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "other-interface") == 0) {
        static char other[INET_ADDRSTRLEN];
        other_address(other, sizeof other);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_prestate(test_listens_only_where_told, other),
        };
        const int failed = cmocka_run_group_tests(tests, NULL, NULL);
        return failed ? failed : other[0] ? 0 : 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strangers_refused_job_completes),
        cmocka_unit_test(test_listens_on_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
