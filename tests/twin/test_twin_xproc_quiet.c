/* Quiescence across processes (sim/multiproc/mp_quiet.c), process 0's tally on its own: the rounds
 * that declare a multi-process job stuck, driven message by message in the orders the network may
 * deliver them. The first case is the interleaving that once aborted a healthy 4-process job
 * (multiproc_kill, before its kill) with "deadlock: no rank of any process can run and no message
 * is on its way": a process summed with an older report reported again before it answered, and its
 * answer, repeating the newer counts, was taken for a confirmation of the sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "multiproc/mp_internal.h"

#define NPROCS 4

/* A tally to which every process reported (sent[p], recv[p]), balanced: a round has started. */
static mp_quiet_tally *summed(const uint64_t *sent, const uint64_t *recv) {
    mp_quiet_tally *t = mp_quiet_tally_new(NPROCS);
    for (int p = 0; p < NPROCS; p++) mp_quiet_note(t, p, sent[p], recv[p]);
    assert_true(mp_quiet_start(t));
    return t;
}

/* Processes 1..3 then 0 answer yes with (sent[p], recv[p]); returns at which answer (1-based) the
 * round completed, 0 if none did. */
static int confirm_all(mp_quiet_tally *t, const uint64_t *sent, const uint64_t *recv) {
    const uint64_t round = t->round;
    for (int k = 1; k <= NPROCS; k++) {
        const int p = k % NPROCS;
        if (mp_quiet_answer(t, p, round, true, sent[p], recv[p])) return k;
    }
    return 0;
}

/* Process 3 reported (10, 10). Process 2 then sent it a contribution and reported (6, 5); process
 * 3 took it, its rank ran and sent two (to processes 1 and 2), and it reported (12, 11); process 1
 * took its own and reported (5, 6), process 2's is still on its way. Process 0 summed before process
 * 3's newer report came: 25 sent, 25 received, as if nothing moved. Process 3 answers the round with
 * the counts it has, (12, 11): not what was summed, so no confirmation. */
static void newer_report_between_sum_and_answer(void **state) {
    (void)state;
    uint64_t sent[NPROCS] = {4, 5, 6, 10}, recv[NPROCS] = {4, 6, 5, 10};
    mp_quiet_tally *t = summed(sent, recv);
    sent[3] = 12, recv[3] = 11;
    mp_quiet_note(t, 3, sent[3], recv[3]); /* the newer report comes before the answer (one sender: in order) */
    /* process 2 answers before the contribution reaches it: quiet, with the counts summed */
    assert_int_equal(confirm_all(t, sent, recv), 0);
    assert_false(t->confirming);
    /* the next sum has the newer report: one message on its way, no round */
    assert_false(mp_quiet_start(t));
    /* it arrives and wakes nobody for good (the rank waits on more): the job is stuck now */
    recv[2]++;
    mp_quiet_note(t, 2, sent[2], recv[2]);
    assert_true(mp_quiet_start(t));
    assert_int_equal(confirm_all(t, sent, recv), NPROCS);
    mp_quiet_tally_free(t);
}

/* The same answer delivered before the newer report (the transport is asked for no order): refused
 * too. */
static void newer_report_after_answer(void **state) {
    (void)state;
    const uint64_t sent[NPROCS] = {4, 5, 6, 10}, recv[NPROCS] = {4, 6, 5, 10};
    mp_quiet_tally *t = summed(sent, recv);
    assert_false(mp_quiet_answer(t, 3, t->round, true, 12, 11));
    assert_false(t->confirming);
    mp_quiet_tally_free(t);
}

/* A job that really waits: every process confirms the counts summed, the last answer declares it. */
static void stuck_job_declared_at_last_answer(void **state) {
    (void)state;
    const uint64_t sent[NPROCS] = {3, 7, 2, 9}, recv[NPROCS] = {5, 5, 6, 5};
    mp_quiet_tally *t = summed(sent, recv);
    assert_false(mp_quiet_start(t)); /* one round at a time */
    /* reports that repeat the summed counts (a process waits again with nothing new) change nothing */
    mp_quiet_note(t, 2, sent[2], recv[2]);
    assert_int_equal(confirm_all(t, sent, recv), NPROCS);
    mp_quiet_tally_free(t);
}

/* No round while a process has not reported or a message is on its way; a busy answer or a wrong
 * round ends or leaves the round, and a later one starts afresh. */
static void rounds_start_and_end(void **state) {
    (void)state;
    mp_quiet_tally *t = mp_quiet_tally_new(NPROCS);
    uint64_t sent[NPROCS] = {1, 1, 1, 1}, recv[NPROCS] = {1, 1, 1, 1};
    for (int p = 0; p < NPROCS - 1; p++) mp_quiet_note(t, p, sent[p], recv[p]);
    assert_false(mp_quiet_start(t)); /* process 3 never reported */
    mp_quiet_note(t, 3, 2, 1);
    assert_false(mp_quiet_start(t)); /* 5 sent, 4 received */
    mp_quiet_note(t, 3, sent[3], recv[3]);
    assert_true(mp_quiet_start(t));
    const uint64_t first = t->round;
    assert_false(mp_quiet_answer(t, 1, first + 1, true, sent[1], recv[1])); /* another round's: ignored */
    assert_true(t->confirming);
    assert_false(mp_quiet_answer(t, 2, first, false, sent[2], recv[2])); /* it works again */
    assert_false(t->confirming);
    assert_false(mp_quiet_answer(t, 1, first, true, sent[1], recv[1])); /* late answer to the ended round */
    assert_true(mp_quiet_start(t));
    assert_int_equal(t->round, first + 1);
    assert_int_equal(confirm_all(t, sent, recv), NPROCS);
    mp_quiet_tally_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(newer_report_between_sum_and_answer),
        cmocka_unit_test(newer_report_after_answer),
        cmocka_unit_test(stuck_job_declared_at_last_answer),
        cmocka_unit_test(rounds_start_and_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
