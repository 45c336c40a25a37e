/* Errors: precise messages with the fix in them, and the one rank-fail path.
 *
 * Parsers and loaders return -1 with a message in a caller's buffer (tr_errf); they never exit.
 * Fatal conditions inside a running rank (a device call failing, an invariant broken) call
 * tr_fatal, which prints "twinrun: rank R: ..." and ends through dev_rank_abort: the process
 * in real mode, only that rank in the twin. */
#ifndef TWINRUN_BASE_ERR_H
#define TWINRUN_BASE_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* Exit codes, as Megatron's launcher sees them. */
enum {
    TR_EXIT_OK = 0,
    TR_EXIT_FATAL = 1,
    TR_EXIT_USAGE = 2,
    TR_EXIT_NAN = 16, /* Megatron's rerun machinery: NaN/Inf, reproducible */
};

/* snprintf into err (if non-NULL) and return -1. */
int tr_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Several errors reported at once: a configuration check keeps going after the first problem so the
 * user fixes everything in one round instead of one error per launch. Lines live in the struct
 * (no allocation); tr_errlist_format writes them to an err buffer. */
#define TR_ERRLIST_LEN 8192
typedef struct tr_errlist {
    int n; /* errors added (including any that no longer fit) */
    size_t len;
    char text[TR_ERRLIST_LEN]; /* the lines, each ending in '\n' */
} tr_errlist;

void tr_errlist_init(tr_errlist *el);
/* Adds one line (a repeated line is kept once); returns -1 so a check can `return tr_errlist_add(...)`. */
int tr_errlist_add(tr_errlist *el, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One error: its line as is. Several: "N problems in the configuration:" and the lines, each on its own
 * line indented by two spaces. Returns -1 when there is any error, else 0 (err untouched). */
int tr_errlist_format(const tr_errlist *el, char *err, size_t errlen);

/* Prints "twinrun: fatal: ..." to stderr and ends the rank through dev_rank_abort(TR_EXIT_FATAL). */
_Noreturn void tr_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Invariant check with a hint: TR_CHECK(n > 0, "batch is empty; check --micro-batch-size"). */
#define TR_CHECK(cond, hint)                                                                                           \
    do {                                                                                                               \
        if (!(cond)) tr_fatal("%s:%d: check `%s` failed: %s", __FILE__, __LINE__, #cond, hint);                        \
    } while (0)

#endif
