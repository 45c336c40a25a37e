/* Where did the first NaN/Inf come from? (--check-for-nan-in-loss-and-grad)
 *
 * While a step runs, every rank keeps, on the device, the sum of squares of each tensor the model
 * hands to its observer (a layer's output, the losses, a layer's input gradient) — finite exactly
 * when the tensor is. Nothing is read back while the step is healthy. When the step's loss or grad
 * norm is not finite, every rank reads its sums, picks its earliest non-finite site in the causal
 * order of one micro-batch (forward by layer, loss, backward by layer), and the ranks agree on the
 * earliest of all: the rank, layer and tensor where the value first went bad. The same observer
 * is the fault library's NaN injection site. */
#ifndef TWINRUN_ENGINE_TRAIN_NAN_PROBE_H
#define TWINRUN_ENGINE_TRAIN_NAN_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "fault/fault.h"
#include "model/llama.h"
#include "parallel/grid.h"

typedef struct tr_nan_probe {
    llama_model *m;
    fault_rank *faults;    /* NULL = no injection */
    bool check;            /* probing on */
    bool active;           /* inside a training step (evaluation is not probed) */
    int num_micro, layers; /* layers: of the whole model */
    int nsites;
    float *sites; /* device [num_micro * (2 * nl + 1)] */
    float *host;  /* [nsites] */
} tr_nan_probe;

/* What the ranks agreed on. rank -1 when no site was non-finite (the NaN arose after the last
 * probe, e.g. in the gradient reduction). */
typedef struct tr_nan_origin {
    int rank, layer, micro;
    llama_site site;
} tr_nan_origin;

/* Installs the probe as m's observer when check or faults is set. 0, or -1 on device OOM. */
int train_nan_probe_init(tr_nan_probe *p, llama_model *m, int num_micro, int layers, bool check, fault_rank *faults);
void train_nan_probe_free(tr_nan_probe *p);
/* Before a training step: clears the sums and starts probing; after: stops. */
void train_nan_probe_begin(tr_nan_probe *p);
void train_nan_probe_end(tr_nan_probe *p);
/* Collective over the world, called by every rank when the step's check fired. */
void train_nan_probe_origin(tr_nan_probe *p, const tr_groups *gr, tr_nan_origin *out);
/* "rank 213 (tp 5, pp 3, dp 2), layer 41 activation, micro-batch 0" */
void train_nan_origin_describe(const tr_nan_origin *o, const tr_grid *g_of_origin, char *out, size_t outlen);
const char *train_nan_site_name(llama_site s);

#endif
