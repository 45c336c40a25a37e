/* Death tests for the rank-fail path: run a case in a forked child and check that it ended through
 * tr_fatal (exit code TR_EXIT_FATAL) with a message naming the problem. Header-only, for tests. */
#ifndef TWINRUN_TESTS_UNIT_EXPECT_FATAL_H
#define TWINRUN_TESTS_UNIT_EXPECT_FATAL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "twinrun/err.h"

typedef void (*guard_case_fn)(void);

/* Runs fn in a child; asserts it exits with TR_EXIT_FATAL and stderr contains both needles. */
static void expect_fatal(const char *name, guard_case_fn fn, const char *needle1, const char *needle2) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        fn();
        _exit(0); /* the guard did not fire */
    }
    close(fds[1]);
    char msg[2048];
    size_t len = 0;
    ssize_t got;
    while ((got = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)got;
    msg[len] = '\0';
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    printf("  %-30s -> %s", name, len ? msg : "(no message)\n");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != TR_EXIT_FATAL)
        fail_msg("%s: child did not end through tr_fatal (status 0x%x)", name, status);
    if (!strstr(msg, needle1) || !strstr(msg, needle2))
        fail_msg("%s: message lacks \"%s\" / \"%s\": %s", name, needle1, needle2, msg);
}

#endif
