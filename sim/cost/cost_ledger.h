/* TWINRUN_TWIN_PROFILE=FILE: the twin's answer to the GPU build's TWINRUN_GPU_PROFILE table — what
 * one rank's kernels of one iteration cost, per kind of launch, in the GPU profile's kind names
 * ("gemm 4096x2048x2048 NT bf16.bf16>bf16", "norm_backward"), with the FLOPs, bytes and roofline
 * terms the cost model charged them for. lab/fit_cost_model.py sets the one beside the other to fit
 * the kernel efficiencies of a calibrated spec (docs/prediction.md#calibration).
 *
 * The ledger belongs to one device (the rank of TWINRUN_TWIN_PROFILE_RANK, default 0) and reports the
 * last iteration the training loop completed (dev_step_mark): every twin iteration costs the same,
 * and the set-up and the tail around the iterations are left out, as the GPU table's steady columns
 * leave them out. The file is JSON, written when the device closes:
 *   {"device", "rank", "iteration", "kernel_s", "kinds": [{"kind", "class", "calls", "flops", "bytes",
 *    "compute_s", "memory_s", "roofline_s", "seconds"}]}
 * compute_s = sum of flops / peak, memory_s = sum of bytes / bandwidth (no latency, no efficiency);
 * roofline_s the uncalibrated roofline with launch overhead; seconds what the spec charged. */
#ifndef TWINRUN_SIM_COST_COST_LEDGER_H
#define TWINRUN_SIM_COST_COST_LEDGER_H

#include <stdint.h>

#include "twin_cost.h"

typedef struct twin_ledger twin_ledger;

/* A ledger for the device of global rank `rank` when TWINRUN_TWIN_PROFILE names a file and
 * TWINRUN_TWIN_PROFILE_RANK (default 0) is that rank; NULL otherwise. */
twin_ledger *twin_ledger_open(int rank);
/* One launch of kc that cost `seconds` (NULL ledger: nothing). */
void twin_ledger_kernel(twin_ledger *l, const twin_device_spec *spec, const twin_kernel_cost *kc, double seconds);
/* dev_step_mark: iteration >= 1 starts, 0 the iterations end (NULL ledger: nothing). */
void twin_ledger_step(twin_ledger *l, int64_t iteration);
/* Writes the file (a warning on stderr if it cannot) and frees the ledger (NULL: nothing). */
void twin_ledger_close(twin_ledger *l, const twin_device_spec *spec);

#endif
