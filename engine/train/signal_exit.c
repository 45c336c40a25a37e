/* SIGTERM as a request to save and stop (signal_exit.h). */
#include "train/signal_exit.h"

#include <pthread.h>
#include <time.h>

void train_signal_guard_begin(tr_signal_guard *g, bool enable) {
    g->active = false;
    if (!enable) return;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    g->active = pthread_sigmask(SIG_BLOCK, &term, &g->old_mask) == 0;
}

void train_signal_guard_end(tr_signal_guard *g) {
    if (!g->active) return;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    const struct timespec now = {0, 0};
    while (train_sigterm_pending() && sigtimedwait(&term, NULL, &now) == SIGTERM) {}
    pthread_sigmask(SIG_SETMASK, &g->old_mask, NULL);
    g->active = false;
}

bool train_sigterm_pending(void) {
    sigset_t pending;
    return sigpending(&pending) == 0 && sigismember(&pending, SIGTERM) == 1;
}
