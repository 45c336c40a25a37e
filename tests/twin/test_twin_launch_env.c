/* The twin's launch reads its environment (sim/launch/launch_twin.c, launch_multi.c): every bad
 * value is refused before a rank runs, with a message naming the variable, its value and the fix;
 * a launcher world of one process runs every rank here; a process whose peers never arrive gives
 * up at the bootstrap timeout, naming the rendezvous. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "twin.h"
#include "twinrun/launch.h"

static const char *const vars[] = {"RANK",
                                   "WORLD_SIZE",
                                   "LOCAL_RANK",
                                   "LOCAL_WORLD_SIZE",
                                   "MASTER_ADDR",
                                   "MASTER_PORT",
                                   "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE",
                                   "TWINRUN_RANKS_PER_PROCESS",
                                   "TWINRUN_RANK_CHUNK",
                                   "TWINRUN_REMOTE_TIMEOUT",
                                   "TWINRUN_BOOTSTRAP_TIMEOUT",
                                   "TWINRUN_STORE_TOKEN",
                                   "TWINRUN_STORE_BIND",
                                   "TWINRUN_FLIGHT_DIR",
                                   "TWINRUN_FLIGHT_RECORDS",
                                   "TWINRUN_FLIGHT_AT_EXIT",
                                   "TWINRUN_TWIN_DEVICE",
                                   "TWINRUN_TWIN_SEED"};

static int clean_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
    return 0;
}

static int ran; /* ranks that ran their entry */

static int entry(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    ran++;
    return 0;
}

/* twin_launch of `world` ranks fails before any rank runs, with `want` in its message. */
static void refused(int world, const char *want) {
    char err[1024] = "";
    ran = 0;
    assert_int_equal(twin_launch(world, entry, NULL, NULL, NULL, err, sizeof err), -1);
    assert_int_equal(ran, 0);
    if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
}

/* two torchrun-style processes of 2 ranks each, this one process 0 */
static void two_procs(void) {
    setenv("RANK", "0", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("TWINRUN_RANKS_PER_PROCESS", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29999", 1);
}

static void test_no_ranks(void **state) {
    (void)state;
    refused(0, "world size 0: need at least one rank");
}

static void test_world_against_the_launcher(void **state) {
    (void)state;
    two_procs();
    refused(8, "the job has 8 ranks but the launcher started 2 processes x TWINRUN_RANKS_PER_PROCESS=2");
}

static void test_ranks_per_process(void **state) {
    (void)state;
    two_procs();
    setenv("TWINRUN_RANKS_PER_PROCESS", "0", 1);
    refused(4, "TWINRUN_RANKS_PER_PROCESS=\"0\": expected the number of ranks each process hosts, 1 to 1048576");
    setenv("TWINRUN_RANKS_PER_PROCESS", "2x", 1);
    refused(4, "TWINRUN_RANKS_PER_PROCESS=\"2x\"");
    setenv("TWINRUN_RANKS_PER_PROCESS", "1048576", 1);
    refused(4, "2 processes x TWINRUN_RANKS_PER_PROCESS=1048576 is more than 1048576 ranks");
}

static void test_rank_chunk(void **state) {
    (void)state;
    two_procs();
    setenv("TWINRUN_RANK_CHUNK", "many", 1);
    refused(4, "TWINRUN_RANK_CHUNK=\"many\": expected a positive number of ranks");
    setenv("TWINRUN_RANK_CHUNK", "0", 1);
    refused(4, "TWINRUN_RANK_CHUNK=\"0\": expected a positive number of ranks");
    setenv("TWINRUN_RANK_CHUNK", "3", 1);
    refused(4, "TWINRUN_RANK_CHUNK=3 does not divide the 2 ranks of each process (TWINRUN_RANKS_PER_PROCESS)");
}

static void test_no_rendezvous(void **state) {
    (void)state;
    two_procs();
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    /* torchrun style (LOCAL_RANK set): the launcher's variables are incomplete */
    refused(4, "WORLD_SIZE=2 but MASTER_ADDR is not set: every rank needs the rendezvous address");
    /* RANK and WORLD_SIZE alone: the processes of the twin have nowhere to meet */
    unsetenv("LOCAL_RANK");
    refused(4, "RANK=0 WORLD_SIZE=2: the processes meet at MASTER_ADDR:MASTER_PORT (process 0's host and a free "
               "port, as torchrun sets them); set both, or start the job with mpirun");
}

static void test_timeouts(void **state) {
    (void)state;
    two_procs();
    setenv("TWINRUN_REMOTE_TIMEOUT", "-1", 1);
    refused(4, "TWINRUN_REMOTE_TIMEOUT=\"-1\": expected a positive number of seconds");
    setenv("TWINRUN_REMOTE_TIMEOUT", "10", 1);
    setenv("TWINRUN_BOOTSTRAP_TIMEOUT", "inf", 1);
    refused(4, "TWINRUN_BOOTSTRAP_TIMEOUT=\"inf\": expected a positive number of seconds");
    setenv("TWINRUN_BOOTSTRAP_TIMEOUT", "3s", 1);
    refused(4, "TWINRUN_BOOTSTRAP_TIMEOUT=\"3s\"");
}

static void test_launcher_variables(void **state) {
    (void)state;
    two_procs();
    setenv("MASTER_PORT", "70000", 1);
    refused(4, "MASTER_PORT");
    setenv("MASTER_PORT", "29999", 1);
    setenv("WORLD_SIZE", "two", 1);
    refused(4, "WORLD_SIZE=\"two\"");
}

static void test_flight_variables(void **state) {
    (void)state;
    setenv("TWINRUN_FLIGHT_RECORDS", "0", 1);
    refused(2, "TWINRUN_FLIGHT_RECORDS=\"0\": expected 1..16777216 records per rank");
    unsetenv("TWINRUN_FLIGHT_RECORDS");
    setenv("TWINRUN_FLIGHT_AT_EXIT", "yes", 1);
    refused(2, "TWINRUN_FLIGHT_AT_EXIT=\"yes\": use 1 (dump at the end of every run) or 0");
    setenv("TWINRUN_FLIGHT_AT_EXIT", "1", 1);
    refused(2, "TWINRUN_FLIGHT_AT_EXIT=1 needs TWINRUN_FLIGHT_DIR: the directory for the dumps");
}

/* WORLD_SIZE=1 RANK=0 (a launcher of one process): every rank of the job runs here; the twin's device
 * and seed variables apply when no options are given */
static void test_one_process_runs_every_rank(void **state) {
    (void)state;
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("TWINRUN_RANKS_PER_PROCESS", "4", 1);
    setenv("TWINRUN_TWIN_DEVICE", "H200", 1);
    setenv("TWINRUN_TWIN_SEED", "7", 1);
    char err[512] = "";
    ran = 0;
    assert_int_equal(twin_launch(3, entry, NULL, NULL, NULL, err, sizeof err), 0);
    assert_int_equal(ran, 3);
    assert_int_equal(launch_ranks(2, entry, NULL, err, sizeof err), 0);
    assert_int_equal(ran, 5);
    /* an unknown device in TWINRUN_TWIN_DEVICE reaches twin_run, which refuses it */
    setenv("TWINRUN_TWIN_DEVICE", "Z9000", 1);
    refused(2, "unknown device 'Z9000'");
}

/* Process 1 of 2 whose process 0 never serves the rendezvous: start-up gives up after
 * TWINRUN_BOOTSTRAP_TIMEOUT, naming where it waited. */
static void test_peer_never_arrives(void **state) {
    (void)state;
    two_procs();
    setenv("RANK", "1", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_PORT", "9", 1); /* discard: nothing listens on loopback */
    setenv("TWINRUN_BOOTSTRAP_TIMEOUT", "0.5", 1);
    setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
    refused(4, "rendezvous: could not reach 127.0.0.1:9 within 0.5 s: connection refused: nothing listens on "
               "127.0.0.1:9 yet");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_ranks, clean_env),
        cmocka_unit_test_setup(test_world_against_the_launcher, clean_env),
        cmocka_unit_test_setup(test_ranks_per_process, clean_env),
        cmocka_unit_test_setup(test_rank_chunk, clean_env),
        cmocka_unit_test_setup(test_no_rendezvous, clean_env),
        cmocka_unit_test_setup(test_timeouts, clean_env),
        cmocka_unit_test_setup(test_launcher_variables, clean_env),
        cmocka_unit_test_setup(test_flight_variables, clean_env),
        cmocka_unit_test_setup(test_one_process_runs_every_rank, clean_env),
        cmocka_unit_test_setup(test_peer_never_arrives, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
