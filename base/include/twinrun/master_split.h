/* An fp32 master weight kept as two 16-bit halves: the bf16 weight the model computes with, and a
 * 16-bit remainder. Together they are the fp32 value exactly, so the optimizer updates the same fp32
 * master as with a whole fp32 copy, in 2 bytes a parameter instead of 4 (Transformer Engine's FusedAdam
 * with store_param_remainders, which Megatron-Core uses with --use-precision-aware-optimizer).
 *
 * The split: hi is the fp32 bit pattern's upper half, lo its lower half read as int16; a negative lo
 * (lower half >= 0x8000) rounds hi up by one. So hi is the fp32 value rounded to the nearest bf16,
 * ties away from zero (a plain cast rounds ties to even: the two differ only when the lower half is
 * exactly 0x8000), and the join undoes the rounding: hi - (lo < 0), then the halves side by side.
 * Every fp32 bit pattern round-trips, but a NaN: its bf16 half would round into another pattern, so a
 * NaN splits into a quiet NaN of the same sign and a zero remainder (its payload is lost, not its NaN).
 * One source for the twin's kernels, the engine's host code and the CUDA kernels (TR_HD). */
#ifndef TWINRUN_BASE_MASTER_SPLIT_H
#define TWINRUN_BASE_MASTER_SPLIT_H

#include <stdint.h>
#include <string.h>

#ifndef TR_HD
#ifdef __CUDACC__
#define TR_HD __host__ __device__
#else
#define TR_HD
#endif
#endif

/* The fp32 value of bf16 bits hi with remainder rem. */
static inline TR_HD float tr_master_join(uint16_t hi, int16_t rem) {
    const uint32_t u = (uint32_t)(uint16_t)(hi - (rem < 0 ? 1u : 0u)) << 16 | (uint32_t)(uint16_t)rem;
    float w;
    memcpy(&w, &u, sizeof w);
    return w;
}

/* w as bf16 bits (*hi, w rounded to nearest, ties away from zero) and the remainder (*rem). */
static inline TR_HD void tr_master_split(float w, uint16_t *hi, int16_t *rem) {
    uint32_t u;
    memcpy(&u, &w, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) { /* NaN */
        *hi = (uint16_t)((u >> 16) | 0x0040u);
        *rem = 0;
        return;
    }
    const int16_t lo = (int16_t)(uint16_t)(u & 0xffffu);
    *hi = (uint16_t)((u >> 16) + (lo < 0 ? 1u : 0u));
    *rem = lo;
}

#endif
