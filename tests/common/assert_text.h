/* Assertions on results and their messages, for the cmocka tests (include after <cmocka.h>):
 * parsers and loaders return 0, or -1 with a message that must name the problem. */
#ifndef TWINRUN_TESTS_COMMON_ASSERT_TEXT_H
#define TWINRUN_TESTS_COMMON_ASSERT_TEXT_H

#include <string.h>

/* hay contains needle. */
#define assert_contains(hay, needle)                                                                                   \
    do {                                                                                                               \
        if (!strstr((hay), (needle))) fail_msg("\"%s\"\n  lacks \"%s\"", (hay), (needle));                             \
    } while (0)

/* rc is -1 and the message err contains needle. */
#define assert_error(rc, err, needle)                                                                                  \
    do {                                                                                                               \
        int rc_ = (rc);                                                                                                \
        if (rc_ != -1) fail_msg("expected -1, got %d (looking for \"%s\")", rc_, (needle));                            \
        if (!strstr((err), (needle))) fail_msg("error message \"%s\"\n  lacks \"%s\"", (err), (needle));               \
    } while (0)

/* rc is 0 (err says why not). */
#define assert_ok(rc, err)                                                                                             \
    do {                                                                                                               \
        int rc_ = (rc);                                                                                                \
        if (rc_ != 0) fail_msg("unexpected result %d: %s", rc_, (err));                                                \
    } while (0)

#endif
