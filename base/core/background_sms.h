#ifndef TWINRUN_BASE_CORE_BACKGROUND_SMS_H
#define TWINRUN_BASE_CORE_BACKGROUND_SMS_H

#include <stddef.h>

/* The multiprocessors a device's GEMMs leave to an active background stream (dev_stream_set_background:
 * the optimizer's step ahead of the forward pass), out of the device's `nsm`. Both backends read it: the
 * CUDA build sets its GEMMs' SM-count target from it, the twin charges the same GEMMs the time of the
 * multiprocessors they keep. */
#define TR_BACKGROUND_SMS_DEFAULT 24 /* of an H100's 132: the fastest step of 0, 8, 16, 24, 32 (docs/benchmarks.md) */

/* TWINRUN_BACKGROUND_SMS, else TR_BACKGROUND_SMS_DEFAULT capped at a quarter of the device: 0 .. nsm / 2.
 * Returns the count, or -1 with err saying what to give. */
#ifdef __cplusplus
extern "C" {
#endif
int tr_background_sms(int nsm, char *err, size_t errlen);
#ifdef __cplusplus
}
#endif

#endif
