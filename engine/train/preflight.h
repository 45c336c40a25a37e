/* The start-up preflight (FAQ: wrong world size, a node that cannot see all its GPUs, nodes running
 * different builds, different flags or data): every rank publishes a fingerprint — build version,
 * config, data files, devices its node shows — and the job stops before training, with a table of
 * who differs from whom, when they do not all agree. */
#ifndef TWINRUN_ENGINE_TRAIN_PREFLIGHT_H
#define TWINRUN_ENGINE_TRAIN_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "fault/fault.h"
#include "parallel/grid.h"
#include "twinrun/config.h"
#include "twinrun/dev.h"
#include "twinrun/version.h"

#define TR_VERSION "twinrun " TR_VERSION_NUMBER

typedef enum tr_preflight_issue {
    TR_PREFLIGHT_OK = 0,
    TR_PREFLIGHT_VERSION, /* builds differ */
    TR_PREFLIGHT_DEVICES, /* a node shows fewer devices than the others */
    TR_PREFLIGHT_CONFIG,  /* flags differ */
    TR_PREFLIGHT_DATA,    /* data files differ */
} tr_preflight_issue;

typedef struct tr_preflight_result {
    tr_preflight_issue issue; /* the first kind of difference found */
    int first_rank;           /* the lowest rank that differs from the majority */
    int ndiffer;              /* ranks that differ */
} tr_preflight_result;

/* FNV-1a of the config's flags (not the run-time fields): equal on every rank of a healthy job. */
uint64_t train_config_fingerprint(const tr_config *cfg);

/* Collective over the world. data_fp fingerprints this process's data files (0 = none). Returns 0
 * when every rank agrees; otherwise -1 with the table (at most a screen) in err, on every rank. */
int train_preflight(const tr_config *cfg, const tr_groups *gr, dev_device *d, int rank, int world, uint64_t data_fp,
                    fault_rank *faults, tr_preflight_result *res, char *err, size_t errlen);

const char *train_preflight_issue_name(tr_preflight_issue i);
/* FNV-1a over the --data-path files (each .idx whole, each .bin's size and first MiB); 0 = none. */
uint64_t train_data_fingerprint(const tr_config *cfg);

#endif
