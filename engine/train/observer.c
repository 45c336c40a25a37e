/* The observer list of a rank's run (observer.h): registration, and each hook called over the list in the
 * order that keeps the side effects of the loop where they were. */
#include "train/observer.h"

#include "twinrun/err.h"

int train_observers_add(tr_observers *obs, const tr_observer *o, char *err, size_t errlen) {
    if (obs->n == TR_OBSERVERS_MAX)
        return tr_errf(err, errlen, "more than %d training observers (TR_OBSERVERS_MAX)", TR_OBSERVERS_MAX);
    obs->list[obs->n++] = *o;
    return 0;
}

void train_observers_close(tr_observers *obs) {
    /* the last registered first: an observer may lean on one registered before it */
    for (int i = obs->n - 1; i >= 0; i--)
        if (obs->list[i].close) obs->list[i].close(obs->list[i].state);
    obs->n = 0;
}

void train_observers_train_begin(tr_observers *obs, const tr_loop *l) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_train_begin) obs->list[i].on_train_begin(obs->list[i].state, l);
}

void train_observers_iteration_begin(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_iteration_begin) obs->list[i].on_iteration_begin(obs->list[i].state, l);
}

void train_observers_step_end(tr_observers *obs, tr_loop *l) {
    for (int i = obs->n - 1; i >= 0; i--)
        if (obs->list[i].on_step_end) obs->list[i].on_step_end(obs->list[i].state, l);
}

void train_observers_iteration_end(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_iteration_end) obs->list[i].on_iteration_end(obs->list[i].state, l);
}

void train_observers_log_interval(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_log_interval) obs->list[i].on_log_interval(obs->list[i].state, l);
}

void train_observers_validation(tr_observers *obs, const tr_loop *l, int64_t it, double loss, bool final) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_validation) obs->list[i].on_validation(obs->list[i].state, l, it, loss, final);
}

int train_observers_checkpoint(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++) {
        int rc = obs->list[i].on_checkpoint ? obs->list[i].on_checkpoint(obs->list[i].state, l) : 0;
        if (rc) return rc;
    }
    return 0;
}

int train_observers_stop(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++) {
        int rc = obs->list[i].on_stop ? obs->list[i].on_stop(obs->list[i].state, l) : 0;
        if (rc) return rc;
    }
    return 0;
}

int train_observers_train_end(tr_observers *obs, tr_loop *l) {
    for (int i = 0; i < obs->n; i++) {
        int rc = obs->list[i].on_train_end ? obs->list[i].on_train_end(obs->list[i].state, l) : 0;
        if (rc) return rc;
    }
    return 0;
}

bool train_observers_should_stop(tr_observers *obs, tr_loop *l) {
    /* the first that stops the loop ends the asking: a later observer's vote is a collective the ranks
     * would otherwise each have to reach */
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].should_stop && obs->list[i].should_stop(obs->list[i].state, l)) return true;
    return false;
}

void train_observers_exit(tr_observers *obs, const tr_loop *l, int rc) {
    for (int i = 0; i < obs->n; i++)
        if (obs->list[i].on_exit) obs->list[i].on_exit(obs->list[i].state, l, rc);
}

bool train_any_rank(dev_device *d, coll_comm *world, bool mine) {
    float *flag = dev_alloc(d, sizeof(float), "stop flag");
    TR_CHECK(flag != NULL, "out of device memory for a flag");
    float h = mine ? 1.0f : 0.0f;
    dev_copy_h2d(dev_stream_default(d), flag, &h, sizeof h);
    coll_all_reduce(world, dev_stream_default(d), flag, flag, 1, TR_F32, COLL_MAX);
    dev_copy_d2h(dev_stream_default(d), &h, flag, sizeof h);
    dev_stream_sync(dev_stream_default(d));
    dev_free(d, flag);
    return h > 0.5f;
}
