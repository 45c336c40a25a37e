/* Launch bootstrap without a GPU: the launcher environment (torchrun style, mpirun, plain, the
 * mistakes people make with them), the rendezvous store's wire format, and the store itself over
 * loopback: set/get, a get that waits for a later set, a get that times out, an unreachable port,
 * a port in use, and a peer that is not a twinrun store. */
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

#include "launch/launch_vars.h"
#include "launch/store_proto.h"
#include "launch/tcp_store.h"

/* ---- environment -------------------------------------------------------------------------- */
typedef struct fake_env {
    const char *kv[32]; /* "NAME=value" */
} fake_env;

static const char *fake_get(const char *name, void *ctx) {
    const fake_env *e = ctx;
    const size_t n = strlen(name);
    for (int i = 0; e->kv[i]; i++)
        if (strncmp(e->kv[i], name, n) == 0 && e->kv[i][n] == '=') return e->kv[i] + n + 1;
    return NULL;
}

static int parse(tr_launch_vars *v, char *err, const char *a, const char *b, const char *c, const char *d,
                 const char *e, const char *f) {
    fake_env env = {{a, b, c, d, e, f, NULL}};
    return tr_launch_vars_parse(fake_get, &env, v, err, 512);
}

#define assert_err(call, text)                                                                                         \
    do {                                                                                                               \
        assert_int_equal((call), -1);                                                                                  \
        if (!strstr(err, text)) fail_msg("error \"%s\" lacks \"%s\"", err, text);                                      \
    } while (0)

static void test_vars_torchrun(void **state) {
    (void)state;
    tr_launch_vars v;
    char err[512];
    assert_int_equal(parse(&v, err, "RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
                           "MASTER_ADDR=worker-0", "MASTER_PORT=29501"),
                     0);
    assert_int_equal(v.launcher, TR_LAUNCHER_TORCHRUN);
    assert_int_equal(v.rank, 5);
    assert_int_equal(v.world, 8);
    assert_int_equal(v.local_rank, 1);
    assert_int_equal(v.local_world, 4);
    assert_true(v.has_master);
    assert_string_equal(v.master_addr, "worker-0");
    assert_int_equal(v.master_port, 29501);
    /* default port */
    assert_int_equal(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL), 0);
    assert_int_equal(v.master_port, 29500);
    assert_err(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", NULL, NULL, NULL), "MASTER_ADDR is not set");
    assert_err(parse(&v, err, "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL, NULL), "RANK is not");
    assert_err(parse(&v, err, "RANK=0", "LOCAL_RANK=0", NULL, NULL, NULL, NULL), "WORLD_SIZE is not");
    assert_err(parse(&v, err, "RANK=2", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL),
               "rank 2 is outside a world of 2");
    assert_err(parse(&v, err, "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h", NULL),
               "local rank 2 is outside the 2 ranks");
    assert_err(parse(&v, err, "RANK=x", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL), "RANK=\"x\"");
    assert_err(parse(&v, err, "RANK=1", "WORLD_SIZE= 2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL), "WORLD_SIZE");
    assert_err(parse(&v, err, "RANK=-1", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL, NULL), "[0, ");
    assert_err(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=70000", NULL),
               "not a TCP port");
    assert_err(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=0", NULL),
               "1..65535");
    assert_err(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=80x", NULL),
               "not a TCP port");
    assert_err(parse(&v, err, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=a b", NULL, NULL),
               "space or control");
}

static void test_vars_mpirun_and_plain(void **state) {
    (void)state;
    tr_launch_vars v;
    char err[512];
    /* one host: the rendezvous defaults to this host */
    assert_int_equal(parse(&v, err, "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                           "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL, NULL),
                     0);
    assert_int_equal(v.launcher, TR_LAUNCHER_OMPI);
    assert_int_equal(v.rank, 1);
    assert_int_equal(v.local_rank, 1);
    assert_string_equal(v.master_addr, "127.0.0.1");
    assert_int_equal(v.master_port, 29500);
    /* mpirun wins over the node-level WORLD_SIZE/RANK a platform set */
    assert_int_equal(parse(&v, err, "WORLD_SIZE=2", "RANK=1", "OMPI_COMM_WORLD_RANK=9", "OMPI_COMM_WORLD_SIZE=16",
                           "OMPI_COMM_WORLD_LOCAL_RANK=1", "MASTER_ADDR=node0"),
                     0);
    assert_int_equal(v.world, 16);
    assert_int_equal(v.rank, 9);
    assert_string_equal(v.master_addr, "node0");
    /* several hosts without MASTER_ADDR: say how to pass it */
    assert_err(parse(&v, err, "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=16", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                     "OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL, NULL),
               "-x MASTER_ADDR=");
    assert_err(parse(&v, err, "OMPI_COMM_WORLD_RANK=1", NULL, NULL, NULL, NULL, NULL), "OMPI_COMM_WORLD_SIZE is not");
    /* plain: the twin's WORLD_SIZE */
    assert_int_equal(parse(&v, err, "WORLD_SIZE=1024", NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(v.launcher, TR_LAUNCHER_PLAIN);
    assert_int_equal(v.world, 1024);
    assert_int_equal(v.rank, 0);
    assert_false(v.has_master);
    assert_int_equal(parse(&v, err, NULL, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(v.launcher, TR_LAUNCHER_NONE);
    assert_int_equal(v.world, 1);
    assert_err(parse(&v, err, "WORLD_SIZE=0", NULL, NULL, NULL, NULL, NULL), "WORLD_SIZE=\"0\"");
}

/* The rendezvous store's token and listening address. */
static void test_vars_store(void **state) {
    (void)state;
    tr_launch_vars v;
    char err[512];
    assert_int_equal(parse(&v, err, "WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=node0",
                           "TWINRUN_STORE_TOKEN=9f2c4e1a7b3d5f60aa11", "TWINRUN_STORE_BIND=10.0.0.5", NULL),
                     0);
    assert_string_equal(v.store_token, "9f2c4e1a7b3d5f60aa11");
    assert_string_equal(v.store_bind, "10.0.0.5");
    const tr_store_conf c = tr_store_conf_of(&v);
    assert_string_equal(c.host, "node0");
    assert_string_equal(c.bind, "10.0.0.5");
    assert_int_equal(c.token_len, 20);
    assert_int_equal(parse(&v, err, "WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=node0", NULL, NULL, NULL), 0);
    assert_string_equal(v.store_token, "");
    assert_err(parse(&v, err, "TWINRUN_STORE_TOKEN=short", NULL, NULL, NULL, NULL, NULL), "16 to 256");
    assert_err(parse(&v, err, "TWINRUN_STORE_TOKEN=0123456789 abcdef", NULL, NULL, NULL, NULL, NULL), "position 10");
    assert_err(parse(&v, err, "TWINRUN_STORE_BIND=a b", NULL, NULL, NULL, NULL, NULL), "TWINRUN_STORE_BIND");
}

/* ---- wire format ---------------------------------------------------------------------------- */
static const tr_store_auth test_auth = {.token = (const unsigned char *)"0123456789abcdef-token",
                                        .token_len = 22,
                                        .nonce = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};

static void test_proto(void **state) {
    (void)state;
    unsigned char buf[512];
    const size_t n = tr_store_encode_request(buf, sizeof buf, &test_auth, 'S', "nccl.dp.0", "abc", 3);
    assert_int_equal(n, TR_STORE_HEAD + 3 + 9 + 4 + 3);
    tr_store_req r;
    size_t used = 0;
    char err[256];
    for (size_t k = 0; k < n; k++)
        assert_int_equal(tr_store_parse_request(buf, k, &test_auth, &r, &used, err, sizeof err), 0);
    assert_int_equal(tr_store_parse_request(buf, n, &test_auth, &r, &used, err, sizeof err), 1);
    assert_int_equal(used, n);
    assert_string_equal(r.key, "nccl.dp.0");
    assert_int_equal(r.value_len, 3);
    assert_memory_equal(r.value, "abc", 3);
    assert_int_equal(
        tr_store_parse_request((const unsigned char *)"GET / HTTP/1.1", 14, &test_auth, &r, &used, err, sizeof err),
        -1);
    assert_non_null(strstr(err, "not a twinrun rendezvous"));
    assert_int_equal(tr_store_encode_request(buf, sizeof buf, &test_auth, 'G', "bad key", NULL, 0), 0);
    assert_int_equal(tr_store_encode_request(buf, sizeof buf, &test_auth, 'G', "", NULL, 0), 0);
    assert_int_equal(tr_store_encode_request(buf, 8, &test_auth, 'G', "long-key", NULL, 0), 0);
    unsigned char bad_op[TR_STORE_HEAD + 4] = {'T', 'W', 'S', '2'};
    memcpy(bad_op + TR_STORE_HEAD, "X\1\0k", 4);
    assert_int_equal(tr_store_parse_request(bad_op, sizeof bad_op, &test_auth, &r, &used, err, sizeof err), -1);
    unsigned char big[TR_STORE_HEAD + 8] = {'T', 'W', 'S', '2'};
    memcpy(big + TR_STORE_HEAD, "S\1\0k\xff\xff\xff\x7f", 8);
    assert_int_equal(tr_store_parse_request(big, sizeof big, &test_auth, &r, &used, err, sizeof err), -1);
    assert_non_null(strstr(err, "at most"));
    /* the version before the job token: named, not "garbage" */
    assert_int_equal(
        tr_store_parse_request((const unsigned char *)"TWS1G\1\0k", 8, &test_auth, &r, &used, err, sizeof err), -1);
    assert_non_null(strstr(err, "version '1'"));
    /* authenticity: another token, another nonce, or one changed byte fails the MAC */
    tr_store_auth other = test_auth;
    other.token = (const unsigned char *)"0123456789abcdef-tokeN";
    assert_int_equal(tr_store_parse_request(buf, n, &other, &r, &used, err, sizeof err), -1);
    assert_non_null(strstr(err, "authentication failed"));
    other = test_auth;
    other.nonce[15] ^= 1;
    assert_int_equal(tr_store_parse_request(buf, n, &other, &r, &used, err, sizeof err), -1);
    buf[n - 1] ^= 1;
    assert_int_equal(tr_store_parse_request(buf, n, &test_auth, &r, &used, err, sizeof err), -1);
    /* greeting */
    unsigned char hello[TR_STORE_GREETING], nonce[TR_STORE_NONCE];
    tr_store_encode_greeting(hello, test_auth.nonce);
    assert_int_equal(tr_store_parse_greeting(hello, 10, nonce, err, sizeof err), 0);
    assert_int_equal(tr_store_parse_greeting(hello, sizeof hello, nonce, err, sizeof err), 1);
    assert_memory_equal(nonce, test_auth.nonce, TR_STORE_NONCE);
    assert_int_equal(
        tr_store_parse_greeting((const unsigned char *)"HTTP/1.1 400 Bad Request", 20, nonce, err, sizeof err), -1);
}

/* ---- the store over loopback ------------------------------------------------------------------ */
#define TOKEN "test-token-0123456789"
static tr_store_conf conf_at(const char *host, int port) {
    return (tr_store_conf){
        .host = host, .port = port, .token = (const unsigned char *)TOKEN, .token_len = strlen(TOKEN)};
}

typedef struct later {
    int port;
    double delay;
} later;

static void *set_later(void *arg) {
    const later *l = arg;
    struct timespec ts = {0, (long)(l->delay * 1e9)};
    nanosleep(&ts, NULL);
    char err[512];
    const tr_store_conf c = conf_at("127.0.0.1", l->port);
    const int rc = tr_store_set(&c, "late", "0123456789abcdef", 16, 5.0, err, sizeof err);
    return (void *)(intptr_t)rc;
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_store(void **state) {
    (void)state;
    char err[512];
    tr_store_conf sc = conf_at("127.0.0.1", 0);
    tr_store_server *s = tr_store_serve(&sc, err, sizeof err);
    assert_non_null(s);
    const int port = tr_store_server_port(s);
    assert_true(port > 0);
    const tr_store_conf c = conf_at("127.0.0.1", port), by_name = conf_at("localhost", port);
    unsigned char id[128], got[128];
    for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 7);
    assert_int_equal(tr_store_set(&by_name, "id.world.0", id, sizeof id, 5.0, err, sizeof err), 0);
    assert_int_equal(tr_store_get(&c, "id.world.0", got, sizeof got, 5.0, err, sizeof err), 0);
    assert_memory_equal(id, got, sizeof id);
    /* a get that arrives first waits for the set */
    later l = {port, 0.2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_later, &l), 0);
    char v[16];
    assert_int_equal(tr_store_get(&c, "late", v, 16, 5.0, err, sizeof err), 0);
    assert_memory_equal(v, "0123456789abcdef", 16);
    void *rc;
    pthread_join(t, &rc);
    assert_int_equal((intptr_t)rc, 0);
    /* nobody publishes: a precise timeout, on time */
    double t0 = mono();
    assert_err(tr_store_get(&c, "never", v, 16, 0.3, err, sizeof err), "never published it");
    assert_true(mono() - t0 < 2.0);
    /* wrong size: ranks of different builds */
    assert_err(tr_store_get(&c, "late", v, 8, 1.0, err, sizeof err), "expected 8");
    /* the same port again: in use */
    sc.port = port;
    assert_null(tr_store_serve(&sc, err, sizeof err));
    assert_non_null(strstr(err, "already in use"));
    tr_store_server_stop(s);
    /* nobody listens any more: refused until the deadline, then said so */
    t0 = mono();
    assert_err(tr_store_get(&c, "x", v, 16, 0.5, err, sizeof err), "connection refused");
    assert_true(mono() - t0 < 3.0);
    const tr_store_conf nowhere = conf_at("no-such-host.invalid", port);
    assert_err(tr_store_set(&nowhere, "x", "", 0, 0.2, err, sizeof err), "does not resolve");
    /* an address of another host: rank 0 cannot listen there */
    const tr_store_conf away = conf_at("192.0.2.1", 0);
    assert_null(tr_store_serve(&away, err, sizeof err));
    assert_non_null(strstr(err, "not an address of this host"));
}

/* Something else listens on the port: an HTTP-ish server that answers garbage. */
static void *garbage_server(void *arg) {
    const int fd = *(int *)arg;
    const int c = accept(fd, NULL, NULL);
    if (c >= 0) {
        char b[64];
        (void)!recv(c, b, sizeof b, 0);
        (void)!send(c, "HTTP/1.1 400\r\n", 14, MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

static void test_store_foreign_service(void **state) {
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    pthread_t t;
    pthread_create(&t, NULL, garbage_server, &fd);
    char err[512], v[4];
    const tr_store_conf c = conf_at("127.0.0.1", ntohs(a.sin_port));
    assert_err(tr_store_get(&c, "k", v, 4, 2.0, err, sizeof err), "another service");
    pthread_join(t, NULL);
    close(fd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vars_torchrun), cmocka_unit_test(test_vars_mpirun_and_plain),
        cmocka_unit_test(test_vars_store),    cmocka_unit_test(test_proto),
        cmocka_unit_test(test_store),         cmocka_unit_test(test_store_foreign_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
