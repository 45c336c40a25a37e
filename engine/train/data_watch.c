/* The data-loader watchdog: the read hook (data/batch.h) arms a deadline before each sample and checks
 * it after; on a wall clock a thread checks it meanwhile. The first to see it passed stops the rank. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/split.h"
#include "train/data_watch.h"
#include "twinrun/config.h" /* TR_PATH_LEN */
#include "twinrun/err.h"

struct tr_data_watch {
    tr_data *data;
    dev_device *dev;
    fault_rank *fr;
    int rank;
    double limit_s;
    bool simulated; /* the twin's clock: no thread */
    pthread_mutex_t mu;
    /* the read in flight, under mu */
    bool armed, fired, stop;
    int split;
    int64_t idx;
    double start;
    pthread_t thread;
    bool has_thread;
};

/* Stops the rank, once: a second caller (the thread and the reader both past the deadline) waits for
 * the first one's exit. */
static _Noreturn void fire(tr_data_watch *w, int split, int64_t idx, double waited) {
    pthread_mutex_lock(&w->mu);
    const bool first = !w->fired;
    w->fired = true;
    pthread_mutex_unlock(&w->mu);
    if (!first)
        for (;;) {
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
        }
    char where[TR_PATH_LEN + 128], file[TR_PATH_LEN + 8];
    tr_data_sample_where(w->data, split, idx, where, sizeof where, file, sizeof file);
    tr_fatal("data watchdog: rank %d waited %.3f s%s reading %s sample %lld from %s; the rank stops "
             "(--data-read-timeout-minutes %g): check the file system that holds %s",
             w->rank, waited, w->simulated ? " (simulated)" : "", tr_split_name(split), (long long)idx, where,
             w->limit_s / 60.0, file[0] ? file : "the data");
}

/* The read in flight has run past the deadline: stop. Called by the reader (after a read, after a
 * stall) and by the thread. */
static void check(tr_data_watch *w) {
    if (!(w->limit_s > 0)) return;
    pthread_mutex_lock(&w->mu);
    const bool armed = w->armed;
    const int split = w->split;
    const int64_t idx = w->idx;
    const double waited = dev_clock_now(w->dev) - w->start;
    pthread_mutex_unlock(&w->mu);
    if (armed && waited >= w->limit_s) fire(w, split, idx, waited);
}

static void on_read(void *arg, int split, int64_t idx, bool begin) {
    tr_data_watch *w = arg;
    if (!begin) {
        check(w); /* a slow read that did return is as late as one that did not */
        pthread_mutex_lock(&w->mu);
        w->armed = false;
        pthread_mutex_unlock(&w->mu);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->split = split, w->idx = idx, w->start = dev_clock_now(w->dev), w->armed = true;
    pthread_mutex_unlock(&w->mu);
    const double stall = fault_data_stall(w->fr);
    if (!(stall > 0)) return;
    if (!(w->limit_s > 0)) dev_rank_hang(); /* no data watchdog: only the peers' collective watchdog notices */
    dev_sleep(w->dev, fmin(stall, w->limit_s));
    check(w);
}

static void *watch_thread(void *arg) {
    tr_data_watch *w = arg;
    /* a tenth of the limit, at most a second: the report comes at most that late */
    const double period = fmin(1.0, w->limit_s / 10.0);
    const struct timespec ts = {(time_t)period, (long)((period - floor(period)) * 1e9)};
    for (;;) {
        pthread_mutex_lock(&w->mu);
        const bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop) return NULL;
        check(w);
        nanosleep(&ts, NULL);
    }
}

tr_data_watch *train_data_watch_open(tr_data *data, dev_device *dev, fault_rank *fr, int rank, double limit_s,
                                     char *err, size_t errlen) {
    tr_data_watch *w = calloc(1, sizeof *w);
    if (!w) return tr_errf(err, errlen, "out of host memory for the data watchdog"), NULL;
    w->data = data, w->dev = dev, w->fr = fr, w->rank = rank, w->limit_s = limit_s > 0 ? limit_s : 0;
    dev_info info;
    dev_get_info(dev, &info);
    w->simulated = info.simulated[0] != 0;
    pthread_mutex_init(&w->mu, NULL);
    if (!w->simulated && w->limit_s > 0) {
        if (pthread_create(&w->thread, NULL, watch_thread, w) != 0) {
            pthread_mutex_destroy(&w->mu);
            free(w);
            return tr_errf(err, errlen,
                           "cannot start the data watchdog's thread (--data-read-timeout-minutes 0 "
                           "turns it off)"),
                   NULL;
        }
        w->has_thread = true;
    }
    tr_data_set_read_hook(data, on_read, w);
    return w;
}

void train_data_watch_close(tr_data_watch *w) {
    if (!w) return;
    tr_data_set_read_hook(w->data, NULL, NULL);
    if (w->has_thread) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_destroy(&w->mu);
    free(w);
}
