/* The flight-recorder dump format: rank ranges, write/parse round trips, and precise errors for
 * every kind of bad input (dumps come from other machines and other builds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flight/flight.h"

static char *format_ranks(const int *r, int n) {
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    flight_ranks_format(f, r, n);
    fclose(f);
    return text;
}

static void test_rank_ranges(void **state) {
    (void)state;
    int world[1024], dp[128], odd[5] = {3, 5, 9, 10, 11};
    for (int i = 0; i < 1024; i++) world[i] = i;
    for (int i = 0; i < 128; i++) dp[i] = 5 + 8 * i;
    struct {
        const int *r;
        int n;
        const char *text;
    } cases[] = {
        {world, 1024, "0-1023"}, {dp, 128, "5-1021:8"}, {odd, 5, "3,5,9-11"}, {world, 1, "0"}, {world, 2, "0,1"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *t = format_ranks(cases[k].r, cases[k].n);
        assert_string_equal(t, cases[k].text);
        int *back, n;
        char err[160];
        assert_int_equal(flight_ranks_parse(t, 1024, &back, &n, err, sizeof err), 0);
        assert_int_equal(n, cases[k].n);
        assert_memory_equal(back, cases[k].r, sizeof(int) * (size_t)n);
        free(back);
        free(t);
    }
    const char *bad[] = {"", "1,", "3-1", "0-10:3", "5,4", "1,1", "0-1024", "a", "-1", "1-2:0", "1--2", "99999999999"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int *back, n;
        char err[160];
        assert_int_equal(flight_ranks_parse(bad[k], 1024, &back, &n, err, sizeof err), -1);
        assert_null(back);
        assert_true(strlen(err) > 10);
    }
}

static const char good[] =
    "# a comment\n"
    "twinrun-flight 1\n"
    "rank 3 world 16 backend cuda time 12.500000000 status running 0\n"
    "comm 0 uid 00000000000000ab name world size 16 ranks 0-15\n"
    "comm 1 uid 00000000000000cd name dp size 2 ranks 3,11\n"
    "rec 7 comm 0 seq 4 op all_reduce count 1024 dtype bf16 redop avg peer -1 state completed t_sched 1.000000000 t_start 1.000000000 t_end 1.250000000\n"
    "rec 8 comm 1 seq 0 op send count 8 dtype fp32 redop - peer 1 state started t_sched 2.000000000 t_start 2.000000000 t_end -\n"
    "rec 9 comm 0 seq 5 op broadcast count 1 dtype int32 redop - peer 15 state scheduled t_sched 3.000000000 t_start - t_end -\n"
    "dropped 7\n"
    "end\n";

static void test_parse_write_round_trip(void **state) {
    (void)state;
    flight_dump d;
    size_t pos = 0, line = 0;
    char err[256];
    assert_int_equal(flight_dump_parse(good, strlen(good), &pos, &line, &d, err, sizeof err), 1);
    assert_int_equal(d.rank, 3);
    assert_int_equal(d.world, 16);
    assert_string_equal(d.backend, "cuda");
    assert_int_equal(d.ncomms, 2);
    assert_int_equal(d.comms[1].ranks[1], 11);
    assert_int_equal((int)d.nrecords, 3);
    assert_int_equal(d.records[0].op, FLIGHT_ALL_REDUCE);
    assert_int_equal(d.records[0].redop, 1);
    assert_true(d.records[0].t_end == 1.25);
    assert_int_equal(d.records[1].state, FLIGHT_STARTED);
    assert_true(d.records[1].t_end < 0);
    assert_int_equal((int)d.dropped, 7);
    /* the end of input after one dump */
    flight_dump more;
    assert_int_equal(flight_dump_parse(good, strlen(good), &pos, &line, &more, err, sizeof err), 0);
    /* write it out and parse again: the same text */
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(flight_dump_write(f, &d), 0);
    fclose(f);
    assert_string_equal(text, strchr(good, '\n') + 1);
    flight_dump_free(&d);
    /* two dumps back to back */
    char *two = malloc(2 * len + 1);
    memcpy(two, text, len);
    memcpy(two + len, text, len + 1);
    pos = line = 0;
    assert_int_equal(flight_dump_parse(two, 2 * len, &pos, &line, &d, err, sizeof err), 1);
    flight_dump_free(&d);
    assert_int_equal(flight_dump_parse(two, 2 * len, &pos, &line, &d, err, sizeof err), 1);
    flight_dump_free(&d);
    free(two);
    free(text);
}

/* Replaces `from` in the good dump by `to` and expects an error mentioning `want`. */
static void expect_error(const char *from, const char *to, const char *want) {
    char text[4096];
    const char *at = strstr(good, from);
    assert_non_null(at);
    int n = snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    assert_true(n > 0 && (size_t)n < sizeof text);
    flight_dump d;
    size_t pos = 0, line = 0;
    char err[256] = "";
    int rc = flight_dump_parse(text, strlen(text), &pos, &line, &d, err, sizeof err);
    if (rc != -1 || !strstr(err, want))
        fail_msg("'%s' -> '%s': rc %d, error '%s', wanted '%s'", from, to, rc, err, want);
}

static void test_bad_dumps_are_rejected_precisely(void **state) {
    (void)state;
    expect_error("twinrun-flight 1", "twinrun-flight 2", "line 2: unsupported dump version");
    expect_error("twinrun-flight 1", "nccl-trace 1", "starts with 'twinrun-flight 1'");
    expect_error("rank 3 world 16", "rank 16 world 16", "line 3: rank outside [0, world)");
    expect_error("world 16", "world 0", "bad world size");
    expect_error("status running", "status dancing", "status must be");
    expect_error("time 12.500000000", "time nan", "bad dump time");
    expect_error("time 12.500000000", "time -1", "bad dump time");
    expect_error("uid 00000000000000ab", "uid 00ab", "uid must be 16 lowercase hex digits");
    expect_error("comm 1 uid", "comm 2 uid", "line 5: comm ids must count");
    expect_error("ranks 3,11", "ranks 2,11", "the dumping rank is not a member");
    expect_error("size 2 ranks 3,11", "size 3 ranks 3,11", "rank list length differs from size");
    expect_error("ranks 0-15", "ranks 0-16", "rank 16 outside the world of 16");
    expect_error("name dp", "name", "want 'comm I uid HEX name N size S ranks LIST'");
    expect_error("rec 8 comm 1", "rec 7 comm 1", "line 7: record ids must increase");
    expect_error("rec 8 comm 1", "rec 8 comm 2", "comm is not a declared communicator");
    expect_error("op send", "op gossip", "unknown op");
    expect_error("dtype fp32", "dtype fp8", "unknown dtype");
    expect_error("redop avg", "redop -", "reduction needs sum, avg, max or min");
    expect_error("redop - peer 1", "redop sum peer 1", "redop must be '-' for this op");
    expect_error("peer 1 state", "peer 2 state", "peer outside the communicator");
    expect_error("peer -1 state", "peer 0 state", "peer must be -1 for this op");
    expect_error("state started", "state stuck", "unknown state");
    expect_error("t_start 2.000000000 t_end -", "t_start - t_end -", "t_start must be '-' exactly when scheduled");
    expect_error("t_start 1.000000000 t_end 1.250000000", "t_start 1.000000000 t_end -", "t_end must be given");
    expect_error("t_end 1.250000000", "t_end 0.500000000", "times must not decrease");
    expect_error("count 1024", "count 1e3", "bad count");
    expect_error("seq 4 ", "seq -4 ", "bad seq");
    expect_error("dropped 7\n", "dropped x\n", "want 'dropped N'");
    expect_error("end\n", "fin\n", "expected 'end' after 'dropped'");
    expect_error("dropped 7\nend\n", "", "ends without 'dropped N' and 'end'");
    expect_error("rec 9", "bogus 9", "unknown line kind");
    expect_error(
        "comm 0 uid",
        "rec 0 comm 0 seq 0 op barrier count 0 dtype fp32 redop - peer -1 state completed t_sched 0 t_start 0 t_end 0\ncomm 0 uid",
        "comm is not a declared communicator");
}

/* Blame on hand-written dumps: three ranks of four joined seq 2; rank 1 stopped after seq 1. */
static void test_blame_from_dumps(void **state) {
    (void)state;
    flight_dump d[3];
    const int ranks[3] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        char text[1024];
        snprintf(
            text, sizeof text,
            "twinrun-flight 1\nrank %d world 4 backend cuda time 700 status running 0\n"
            "comm 0 uid 0123456789abcdef name world size 4 ranks 0-3\n"
            "rec 1 comm 0 seq 1 op all_reduce count 4 dtype fp32 redop sum peer -1 state completed t_sched 1 t_start 1 t_end 2\n"
            "rec 2 comm 0 seq 2 op all_reduce count 4 dtype fp32 redop sum peer -1 state started t_sched %d t_start %d t_end -\n"
            "dropped 1\nend\n",
            ranks[i], 3 + i, 3 + i);
        size_t pos = 0, line = 0;
        char err[256];
        assert_int_equal(flight_dump_parse(text, strlen(text), &pos, &line, &d[i], err, sizeof err), 1);
    }
    flight_blame_result b;
    char err[256];
    assert_int_equal(flight_blame(d, 3, &b, err, sizeof err), 0);
    assert_int_equal(b.nstuck, 1);
    assert_int_equal(b.stuck[0].njoined, 3);
    assert_int_equal(b.stuck[0].nmissing, 1);
    assert_int_equal(b.stuck[0].missing[0], 1);
    assert_true(b.stuck[0].since == 3.0);
    assert_int_equal(b.first_stopped, 1); /* no dump at all: it stopped before anything was recorded */
    assert_int_equal(b.nmissing_dumps, 1);
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    flight_blame_print(f, &b, d, 3);
    fclose(f);
    assert_non_null(
        strstr(text, "seq 2 all_reduce count 4 fp32 sum: 3 joined since t=3.000000000 s; 1 never joined: 1"));
    assert_non_null(strstr(text, "no dump from 1 ranks: 1"));
    assert_non_null(strstr(text, "stopped first: rank 1 (no dump)"));
    free(text);
    flight_blame_free(&b);
    /* contradicting dumps: two of rank 0 */
    d[1].rank = 0;
    assert_int_equal(flight_blame(d, 3, &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "two dumps of rank 0"));
    for (int i = 0; i < 3; i++) flight_dump_free(&d[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_ranges),
        cmocka_unit_test(test_parse_write_round_trip),
        cmocka_unit_test(test_bad_dumps_are_rejected_precisely),
        cmocka_unit_test(test_blame_from_dumps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
