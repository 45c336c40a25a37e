/* The value most of a job's ranks hold, so one odd node stands out whichever rank it holds: the
 * training preflight's fingerprints and the doctor's facts are compared against it. */
#ifndef TWINRUN_BASE_CORE_MAJORITY_H
#define TWINRUN_BASE_CORE_MAJORITY_H

#include <stdbool.h>
#include <stdint.h>

/* Of v[0..n) (n >= 1), skipping those where skip (may be NULL) is true: the value held by more than half
 * (Boyer-Moore vote; *has_majority true), else the first counted one's (*has_majority false: they split). */
uint64_t tr_majority_u64(const uint64_t *v, const bool *skip, int n, bool *has_majority);

#endif
