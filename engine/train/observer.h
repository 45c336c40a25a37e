/* The trainer's observers: what watches or acts around the training step (the fault plan, the NaN probe,
 * the step's timing for --predict, the logs, checkpoints, SIGTERM, --exit-interval, the straggler report,
 * the data watch), each a struct of optional callbacks registered at set-up, so that the loop itself
 * reads as Megatron's: train_step, then the observers.
 *
 * The order of registration is the order of side effects: every hook runs in the order the observers
 * were registered, except on_step_end, which runs in reverse so that each observer's end brackets its
 * own begin (the timing measures the fault plan's step, the fault plan the NaN probe's). */
#ifndef TWINRUN_ENGINE_TRAIN_OBSERVER_H
#define TWINRUN_ENGINE_TRAIN_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/step.h"
#include "twinrun/coll.h"

/* Why the loop stops before the job's last iteration. */
typedef enum tr_stop {
    TR_STOP_NONE,
    TR_STOP_SIGNAL, /* SIGTERM with --exit-signal-handler: save, say so, exit 0 */
    TR_STOP_EXIT,   /* --exit-interval or --exit-duration-in-mins: finish() saves */
} tr_stop;

/* One rank's run as its observers see it: the run's constants, the iteration in progress and where the
 * run stands. The trainer writes it; an observer writes only the fields its comment gives it. */
typedef struct tr_loop {
    int64_t start;           /* the iteration the run starts after: 0, or the loaded checkpoint's */
    int64_t iters;           /* the job's last iteration */
    double flops;            /* per iteration, for the TFLOP/s column */
    bool decoupled;          /* --decoupled-lr: the embedding and output layer have their own schedule */
    int64_t iteration;       /* the one in progress */
    double lr, decoupled_lr; /* decoupled_lr -1 without --decoupled-lr */
    int step_rc;             /* train_step's return */
    tr_step_result res;
    double seconds;        /* the step's time on the rank's clock: the timing observer's */
    bool preempted;        /* a scenario preempts this rank this iteration: the fault observer's */
    int64_t consumed;      /* train samples consumed, this iteration's included once it ended */
    int64_t resumed_valid; /* validation samples consumed when the run resumed */
    int64_t done;          /* the last iteration completed */
    int nan_iters;         /* iterations a NaN/Inf stopped: the NaN observer's */
    tr_stop stop;          /* set by the observer that stopped the loop */
    bool agreed_error;     /* the error is one every rank reached alike (preflight, NaN, a save's vote) */
    char err[1024];        /* the rank's error */
} tr_loop;

typedef struct tr_observer {
    void *state; /* handed to every callback */
    /* after the resume, before the first iteration */
    void (*on_train_begin)(void *state, const tr_loop *l);
    /* before train_step; then, in reverse order, after it whatever it returned (l->step_rc) */
    void (*on_iteration_begin)(void *state, tr_loop *l);
    void (*on_step_end)(void *state, tr_loop *l);
    /* after a step that went well, every iteration; then every --log-interval */
    void (*on_iteration_end)(void *state, tr_loop *l);
    void (*on_log_interval)(void *state, tr_loop *l);
    /* the validation loss after iteration `it`; final: the evaluation after training */
    void (*on_validation)(void *state, const tr_loop *l, int64_t it, double loss, bool final);
    /* after the validation, where Megatron saves when --save-interval says so; 0 or an exit code */
    int (*on_checkpoint)(void *state, tr_loop *l);
    /* true (with l->stop set) to stop after this iteration: the first observer that says so stops it */
    bool (*should_stop)(void *state, tr_loop *l);
    /* the loop stops (l->stop), and after a run that went well, its end; 0 or an exit code */
    int (*on_stop)(void *state, tr_loop *l);
    int (*on_train_end)(void *state, tr_loop *l);
    /* the rank's run is over, rc its exit code */
    void (*on_exit)(void *state, const tr_loop *l, int rc);
    /* frees the state; also when the twin reclaims a rank that ended mid-call, so no collectives */
    void (*close)(void *state);
} tr_observer;

#define TR_OBSERVERS_MAX 16

typedef struct tr_observers {
    tr_observer list[TR_OBSERVERS_MAX];
    int n;
} tr_observers;

/* Appends o; -1 with err when the list is full. */
int train_observers_add(tr_observers *obs, const tr_observer *o, char *err, size_t errlen);
/* Closes every observer, the last registered first, and empties the list. */
void train_observers_close(tr_observers *obs);

void train_observers_train_begin(tr_observers *obs, const tr_loop *l);
void train_observers_iteration_begin(tr_observers *obs, tr_loop *l);
void train_observers_step_end(tr_observers *obs, tr_loop *l);
void train_observers_iteration_end(tr_observers *obs, tr_loop *l);
void train_observers_log_interval(tr_observers *obs, tr_loop *l);
void train_observers_validation(tr_observers *obs, const tr_loop *l, int64_t it, double loss, bool final);
/* These stop at the first observer that returns an exit code, and return it. */
int train_observers_checkpoint(tr_observers *obs, tr_loop *l);
int train_observers_stop(tr_observers *obs, tr_loop *l);
int train_observers_train_end(tr_observers *obs, tr_loop *l);
bool train_observers_should_stop(tr_observers *obs, tr_loop *l);
void train_observers_exit(tr_observers *obs, const tr_loop *l, int rc);

/* True on every rank when it is true on any (a collective over `world`): observers that stop the loop
 * agree through it, so the ranks stop together, at the same iteration. */
bool train_any_rank(dev_device *d, coll_comm *world, bool mine);

#endif
