/* The data watch as an observer (data_watch.h): it hooks the rank's reads, not the loop, so the loop sees
 * only its lifetime; registered before the log so that it closes after it, before the reader it watches
 * and the fault plan it asks. */
#include "train/data_watch.h"
#include "train/observers.h"
#include "twinrun/err.h"

static void close_watch(void *state) { train_data_watch_close(state); }

int train_observe_data_watch(tr_rank *st, const tr_job *jb) {
    if (!st->src.data) return 0; /* --tokens-file: nothing to watch */
    tr_data_watch *w =
        train_data_watch_open(st->src.data, st->dev, st->faults, st->rank, jb->cfg->data_read_timeout_minutes * 60.0,
                              st->loop.err, sizeof st->loop.err);
    if (!w) return TR_EXIT_FATAL;
    return train_observer_register(st, &(tr_observer){.state = w, .close = close_watch});
}
