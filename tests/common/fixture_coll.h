/* The collective tests' fixtures (tests/twin; fixture_coll.c in twinrun_test_fixtures): deterministic
 * inputs and the serial reference reductions.
 *
 * The references are the straightforward loop the twin promises to match bit for bit:
 * acc = x[0]; acc = acc op x[r] for r = 1..n-1 in fp32; bf16 widened and rounded once at the end;
 * avg multiplies every input by (float)(1/n) first. cmocka's asserts longjmp, which must never
 * cross coroutine stacks, so rank entries count problems and the test's main thread asserts. */
#ifndef TWINRUN_TESTS_COMMON_FIXTURE_COLL_H
#define TWINRUN_TESTS_COMMON_FIXTURE_COLL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "twinrun/coll.h"
#include "twinrun/dtype.h"

/* A value for (rank, index, salt) with a varied exponent and sign, so fp32 sums round. */
float tt_input(int rank, size_t i, int salt);

/* Fills host memory with the inputs of dtype dt. */
void tt_fill(void *dst, tr_dtype dt, int rank, size_t offset, size_t n, int salt);

float tt_widen(const void *src, tr_dtype dt, size_t i);

/* Serial reference: out[i] = reduce over members (global ranks[]) of input(rank, offset + i). */
void tt_reduce_ref(void *out, tr_dtype dt, coll_op op, const int *ranks, int n, size_t offset, size_t count, int salt);

/* ranks [first, first + n*stride) by stride */
void tt_range(int *ranks, int first, int n, int stride);

#endif
