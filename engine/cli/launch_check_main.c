/* launch_check: rehearses a job's bootstrap without a GPU or a model. Started the way train_llama3
 * will be (torchrun-style variables, mpirun, scripts/launch_llama3.sh), each process prints which
 * rank it is and checks in at the rendezvous store; rank 0 serves the store and reports when every
 * rank has arrived. The dry run the 70B guide asks for before booking the cluster: it fails, with
 * what to fix, when MASTER_ADDR does not resolve, the port is wrong or taken, or a rank never came.
 *
 *   launch_check [TIMEOUT_SECONDS]     (default 60)
 *
 * Exit status: 0 every rank checked in, 1 the rendezvous failed, 2 a launcher variable is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch/launch_vars.h"
#include "launch/tcp_store.h"
#include "twinrun/version.h"

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "launch_check");
        return 0;
    }
    char err[1024];
    double timeout = 60;
    if (argc > 1) {
        char *end;
        timeout = strtod(argv[1], &end);
        if (*end || !(timeout > 0)) {
            fprintf(stderr, "usage: launch_check [TIMEOUT_SECONDS]  (a positive number, default 60)\n");
            return 2;
        }
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
    tr_store_server_stop(s);
    return rc;
}
