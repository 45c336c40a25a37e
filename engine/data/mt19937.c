/* MT19937 with numpy RandomState's seeding and bounded draws (see mt19937.h). */
#include "data/mt19937.h"

#define MT_M 397
#define MATRIX_A 0x9908b0dfu
#define UPPER_MASK 0x80000000u
#define LOWER_MASK 0x7fffffffu

void tr_mt_seed(tr_mt19937 *mt, uint32_t seed) {
    /* Knuth's multiplier recurrence (init_genrand); numpy seeds integers exactly this way. */
    mt->key[0] = seed;
    for (int i = 1; i < TR_MT_N; i++) {
        uint32_t prev = mt->key[i - 1];
        mt->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->pos = TR_MT_N;
}

static void regenerate(tr_mt19937 *mt) {
    uint32_t *k = mt->key;
    for (int i = 0; i < TR_MT_N; i++) {
        uint32_t y = (k[i] & UPPER_MASK) | (k[(i + 1) % TR_MT_N] & LOWER_MASK);
        k[i] = k[(i + MT_M) % TR_MT_N] ^ (y >> 1) ^ ((y & 1u) ? MATRIX_A : 0u);
    }
    mt->pos = 0;
}

uint32_t tr_mt_next32(tr_mt19937 *mt) {
    if (mt->pos >= TR_MT_N) regenerate(mt);
    uint32_t y = mt->key[mt->pos++];
    /* tempering */
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t tr_mt_next64(tr_mt19937 *mt) {
    uint64_t hi = tr_mt_next32(mt);
    return (hi << 32) | tr_mt_next32(mt);
}

uint64_t tr_mt_interval(tr_mt19937 *mt, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t v;
    if (max <= 0xffffffffu) {
        /* one 32-bit draw per try: the draw count (and so every later value) depends on this */
        do v = tr_mt_next32(mt) & mask;
        while (v > max);
    } else {
        do v = tr_mt_next64(mt) & mask;
        while (v > max);
    }
    return v;
}

#define SHUFFLE_BODY(T)                                                                                                \
    for (int64_t i = n - 1; i >= 1; i--) {                                                                             \
        int64_t j = (int64_t)tr_mt_interval(mt, (uint64_t)i);                                                          \
        T t = a[i];                                                                                                    \
        a[i] = a[j];                                                                                                   \
        a[j] = t;                                                                                                      \
    }

void tr_mt_shuffle_i32(tr_mt19937 *mt, int32_t *a, int64_t n) { SHUFFLE_BODY(int32_t) }
void tr_mt_shuffle_u32(tr_mt19937 *mt, uint32_t *a, int64_t n) { SHUFFLE_BODY(uint32_t) }
void tr_mt_shuffle_i64(tr_mt19937 *mt, int64_t *a, int64_t n) { SHUFFLE_BODY(int64_t) }
