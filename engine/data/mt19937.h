/* numpy's legacy RandomState (MT19937), only as far as Megatron's GPTDataset uses it:
 * RandomState(seed) then shuffle() of 1-D integer arrays, in call order on one state.
 * Re-implemented from the published algorithm (Matsumoto & Nishimura's init_genrand/genrand_int32)
 * and numpy's documented legacy bounded draw, so that shuffles are bit-identical to numpy's. */
#ifndef TWINRUN_ENGINE_DATA_MT19937_H
#define TWINRUN_ENGINE_DATA_MT19937_H

#include <stdint.h>

#define TR_MT_N 624

typedef struct tr_mt19937 {
    uint32_t key[TR_MT_N]; /* [624] the twister state */
    int pos;               /* next word of key to temper; TR_MT_N = regenerate first */
} tr_mt19937;

/* numpy.random.RandomState(seed) for an integer seed in [0, 2^32). */
void tr_mt_seed(tr_mt19937 *mt, uint32_t seed);
uint32_t tr_mt_next32(tr_mt19937 *mt);
/* Two 32-bit draws, the first one the high half (numpy's legacy next_uint64). */
uint64_t tr_mt_next64(tr_mt19937 *mt);
/* Uniform in [0, max] by masked rejection, as numpy's legacy random_interval. */
uint64_t tr_mt_interval(tr_mt19937 *mt, uint64_t max);

/* RandomState.shuffle of a 1-D array: Fisher-Yates from the end, j = interval(i). */
void tr_mt_shuffle_i32(tr_mt19937 *mt, int32_t *a, int64_t n);  /* a: [n] */
void tr_mt_shuffle_u32(tr_mt19937 *mt, uint32_t *a, int64_t n); /* a: [n] */
void tr_mt_shuffle_i64(tr_mt19937 *mt, int64_t *a, int64_t n);  /* a: [n] */

#endif
