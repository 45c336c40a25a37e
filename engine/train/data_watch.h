/* The data-loader watchdog (--data-read-timeout-minutes): every sample a rank reads for a micro-batch is
 * timed on the device's clock, and one not read within the limit stops the rank with the file, the byte
 * offset and the rank — as the collective watchdog names a hung collective, but minutes before the
 * peers' collectives would time out and with the file to look at (docs/faults.md, data_stall).
 *
 * Where dev_clock_now is wall time (a real device) a thread watches the read in flight, so a read that
 * never returns (a hung network file system) is reported too; in the twin the clock is simulated and
 * reads take no time, so only an injected stall (fault_data_stall) sleeps, up to the deadline. */
#ifndef TWINRUN_ENGINE_TRAIN_DATA_WATCH_H
#define TWINRUN_ENGINE_TRAIN_DATA_WATCH_H

#include "data/batch.h"
#include "fault/fault.h"
#include "twinrun/dev.h"

typedef struct tr_data_watch tr_data_watch;

/* Watches the reads of `data` (this rank's reader) with a limit of limit_s seconds; limit_s 0: no
 * deadline, but an injected stall still stops the read forever. NULL with err when the watching thread
 * cannot start. */
tr_data_watch *train_data_watch_open(tr_data *data, dev_device *dev, fault_rank *fr, int rank, double limit_s,
                                     char *err, size_t errlen);
/* Stops the thread and removes the hook; NULL is fine. */
void train_data_watch_close(tr_data_watch *w);

#endif
