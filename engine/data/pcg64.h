/* numpy's Generator as default_rng(seed) builds it: SeedSequence(seed) -> PCG64 (XSL-RR 128/64),
 * and Generator.integers for int32 (Lemire's bounded method). Only what Megatron's
 * MockGPTLowLevelDataset needs: default_rng(0).integers(1, 4096, size=100000, dtype=int32).
 * Written from the published algorithms (O'Neill's PCG, numpy's SeedSequence mixing, Lemire 2019),
 * checked against numpy's known output in tests/unit/test_data_formats.c. */
#ifndef TWINRUN_ENGINE_DATA_PCG64_H
#define TWINRUN_ENGINE_DATA_PCG64_H

#include <stdint.h>

typedef struct tr_pcg64 {
    unsigned __int128 state, inc; /* GCC/Clang extension: the generator is defined on 128 bits */
    int has_u32;                  /* numpy hands out a 64-bit draw as two 32-bit halves, low first */
    uint32_t u32;
} tr_pcg64;

/* numpy.random.default_rng(seed) for a non-negative integer seed below 2^64. */
void tr_pcg64_seed(tr_pcg64 *g, uint64_t seed);
uint64_t tr_pcg64_next64(tr_pcg64 *g);
uint32_t tr_pcg64_next32(tr_pcg64 *g);
/* Generator.integers(low, high, size=n, dtype=int32) with endpoint=False; requires low < high. */
void tr_pcg64_integers_i32(tr_pcg64 *g, int32_t low, int32_t high, int32_t *out, int64_t n); /* out: [n] */

#endif
