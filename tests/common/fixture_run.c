/* A printer's output as a string, and death tests (fixture.h). A death test forks: the case runs in a
 * child whose end (tr_fatal's exit) would otherwise end the test program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fixture.h"
#include "twinrun/err.h"

char *fx_capture(void (*print)(FILE *f, const void *arg), const void *arg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    print(f, arg);
    fclose(f);
    return buf;
}

char *fx_capture_f(void (*print)(FILE *f)) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    print(f);
    fclose(f);
    return buf;
}

void fx_expect_fatal(const char *name, fx_case_fn fn, const char *needle1, const char *needle2) {
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
