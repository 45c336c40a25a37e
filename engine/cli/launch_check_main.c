/* launch_check: rehearses a job's bootstrap without a GPU or a model. Started the way train_llama3
 * will be (torchrun-style variables, mpirun, scripts/launch_llama3.sh), each process prints which
 * rank it is and checks in at the rendezvous store; rank 0 serves the store and reports when every
 * rank has arrived. The dry run the 70B guide asks for before booking the cluster: it fails, with
 * what to fix, when MASTER_ADDR does not resolve, the port is wrong or taken, or a rank never came.
 *
 *   launch_check [TIMEOUT_SECONDS] [--hold SECONDS]     (default 60; hold 0)
 *
 * With --hold every rank stays SECONDS after checking in, on the job's heartbeat (launch/heartbeat.h)
 * as train_llama3's ranks are: kill one and the others name it and exit 1 within seconds.
 *
 * Exit status: 0 every rank checked in, 1 the rendezvous failed or a peer's process was lost, 2 a launcher
 * variable is wrong. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "launch/launch_vars.h"
#include "launch/tcp_store.h"
#include "twinrun/version.h"

static int g_rank;

/* A peer's process is gone: say who, and end as train_llama3's ranks do (without its flight recorder). */
static void peer_gone(void *arg, int rank, const char *what) {
    (void)arg;
    fprintf(stderr, "launch_check: rank %d: heartbeat: %s; stopped first: rank %d; exiting\n", g_rank, what, rank);
    fflush(stdout);
    fflush(stderr);
    _exit(1);
}

/* A positive (hold: non-negative) number of seconds, all of the text; -1 otherwise. */
static double seconds_of(const char *s, bool zero_ok) {
    char *end;
    const double v = strtod(s, &end);
    return *s && !*end && (v > 0 || (zero_ok && v == 0)) && v < 1e7 ? v : -1;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "launch_check");
        return 0;
    }
    char err[1024];
    double timeout = 60, hold = 0;
    int a = 1;
    if (a < argc && strcmp(argv[a], "--hold") != 0 && (timeout = seconds_of(argv[a++], false)) < 0) a = -1;
    if (a > 0 && a < argc &&
        (strcmp(argv[a], "--hold") != 0 || a + 1 >= argc || (hold = seconds_of(argv[a + 1], true)) < 0))
        a = -1;
    if (a > 0 && a < argc && a + 2 != argc) a = -1;
    if (a < 0) {
        fprintf(stderr, "usage: launch_check [TIMEOUT_SECONDS] [--hold SECONDS]  (TIMEOUT a positive number, default "
                        "60; SECONDS to stay on the heartbeat after checking in, default 0)\n");
        return 2;
    }
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, sizeof err)) {
        fprintf(stderr, "launch_check: %s\n", err);
        return 2;
    }
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    printf("launch_check: rank %d of %d (local rank %d%s%.0d) on %s via %s", v.rank, v.world, v.local_rank,
           v.local_world ? " of " : "", v.local_world, host, tr_launcher_name(v.launcher));
    if (v.has_master) printf("; rendezvous %s:%d", v.master_addr, v.master_port);
    printf("\n");
    fflush(stdout);
    if (v.world == 1) return 0;
    if (!v.has_master) {
        fprintf(stderr, "launch_check: %d ranks but no MASTER_ADDR: set MASTER_ADDR and MASTER_PORT\n", v.world);
        return 2;
    }
    const tr_store_conf store = tr_store_conf_of(&v);
    tr_store_server *s = NULL;
    if (v.rank == 0 && !(s = tr_store_serve(&store, err, sizeof err))) {
        fprintf(stderr, "launch_check: rank 0: %s\n", err);
        return 1;
    }
    const char *run = getenv("TWINRUN_RUN_ID") ? getenv("TWINRUN_RUN_ID") : "default";
    char key[200], name[256];
    int rc = 0;
    snprintf(key, sizeof key, "launch_check.%.64s.hello.%d", run, v.rank);
    memset(name, 0, sizeof name);
    snprintf(name, sizeof name, "%s", host);
    if (tr_store_set(&store, key, name, sizeof name, timeout, err, sizeof err)) rc = 1;
    g_rank = v.rank;
    tr_heartbeat *hb = NULL;
    if (!rc && hold > 0 && !(hb = tr_heartbeat_start(&store, v.rank, timeout, peer_gone, NULL, err, sizeof err)))
        rc = 1;
    if (hb) {
        printf("launch_check: rank %d: on the heartbeat for %g s\n", v.rank, hold);
        fflush(stdout);
        struct timespec ts = {(time_t)hold, (long)((hold - (double)(time_t)hold) * 1e9)};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    /* rank 0 reads everyone's hello, then tells them all it is done, and only then stops serving */
    if (!rc && v.rank == 0) {
        for (int r = 0; r < v.world && !rc; r++) {
            snprintf(key, sizeof key, "launch_check.%.64s.hello.%d", run, r);
            if (tr_store_get(&store, key, name, sizeof name, timeout, err, sizeof err)) rc = 1;
        }
        if (!rc)
            printf("launch_check: all %d ranks reached the rendezvous at %s:%d\n", v.world, v.master_addr,
                   v.master_port);
        snprintf(key, sizeof key, "launch_check.%.64s.done", run);
        if (!rc && tr_store_set(&store, key, "", 0, timeout, err, sizeof err)) rc = 1;
        for (int r = 1; r < v.world && !rc; r++) {
            snprintf(key, sizeof key, "launch_check.%.64s.bye.%d", run, r);
            if (tr_store_get(&store, key, NULL, 0, timeout, err, sizeof err)) rc = 1;
        }
    } else if (!rc) {
        snprintf(key, sizeof key, "launch_check.%.64s.done", run);
        if (tr_store_get(&store, key, NULL, 0, timeout, err, sizeof err)) rc = 1;
        snprintf(key, sizeof key, "launch_check.%.64s.bye.%d", run, v.rank);
        if (!rc && tr_store_set(&store, key, "", 0, timeout, err, sizeof err)) rc = 1;
    }
    if (rc) fprintf(stderr, "launch_check: rank %d: %s\n", v.rank, err);
    tr_heartbeat_stop(hb);
    tr_store_server_stop(s);
    return rc;
}
