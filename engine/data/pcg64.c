/* PCG64 + SeedSequence + bounded int32 draws, bit-compatible with numpy (see pcg64.h). */
#include "data/pcg64.h"

/* SeedSequence hash constants (numpy/random/bit_generator.pyx, after Melissa O'Neill's seed_seq). */
#define INIT_A 0x43b0d7e5u
#define MULT_A 0x931e8875u
#define INIT_B 0x8b51f9ddu
#define MULT_B 0x58f38dedu
#define MIX_MULT_L 0xca01f9ddu
#define MIX_MULT_R 0x4973f715u
#define XSHIFT 16
#define POOL 4

static uint32_t hashmix(uint32_t value, uint32_t *hash_const) {
    value ^= *hash_const;
    *hash_const *= MULT_A;
    value *= *hash_const;
    value ^= value >> XSHIFT;
    return value;
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t r = MIX_MULT_L * x - MIX_MULT_R * y;
    return r ^ (r >> XSHIFT);
}

/* SeedSequence(seed).generate_state(4, uint64): the entropy is the seed as little-endian 32-bit
 * words (one word for seeds < 2^32, including 0), mixed into a pool of 4 words. */
static void seed_sequence_state(uint64_t seed, uint64_t out[4]) {
    uint32_t entropy[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int n_entropy = (seed >> 32) ? 2 : 1;
    uint32_t pool[POOL];
    uint32_t hc = INIT_A;
    for (int i = 0; i < POOL; i++) pool[i] = hashmix(i < n_entropy ? entropy[i] : 0u, &hc);
    for (int src = 0; src < POOL; src++)
        for (int dst = 0; dst < POOL; dst++)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &hc));
    /* entropy words beyond the pool size (none for seeds < 2^128) would be mixed in here */
    uint32_t words[8]; /* [8] = 4 uint64 as little-endian 32-bit halves */
    uint32_t hb = INIT_B;
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % POOL];
        v ^= hb;
        hb *= MULT_B;
        v *= hb;
        v ^= v >> XSHIFT;
        words[i] = v;
    }
    for (int i = 0; i < 4; i++) out[i] = (uint64_t)words[2 * i] | ((uint64_t)words[2 * i + 1] << 32);
}

static unsigned __int128 u128(uint64_t hi, uint64_t lo) { return ((unsigned __int128)hi << 64) | lo; }

static void step(tr_pcg64 *g) {
    const unsigned __int128 mult = u128(2549297995355413924ull, 4865540595714422341ull);
    g->state = g->state * mult + g->inc;
}

void tr_pcg64_seed(tr_pcg64 *g, uint64_t seed) {
    uint64_t v[4];
    seed_sequence_state(seed, v);
    /* pcg64_set_seed: state seed = (v0:v1), stream = (v2:v3); then PCG's srandom. */
    unsigned __int128 initstate = u128(v[0], v[1]), initseq = u128(v[2], v[3]);
    g->state = 0;
    g->inc = (initseq << 1) | 1u;
    step(g);
    g->state += initstate;
    step(g);
    g->has_u32 = 0;
    g->u32 = 0;
}

uint64_t tr_pcg64_next64(tr_pcg64 *g) {
    step(g);
    /* XSL-RR output of the new state */
    uint64_t x = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
    unsigned rot = (unsigned)(g->state >> 122);
    return (x >> rot) | (x << ((64u - rot) & 63u));
}

uint32_t tr_pcg64_next32(tr_pcg64 *g) {
    if (g->has_u32) {
        g->has_u32 = 0;
        return g->u32;
    }
    uint64_t v = tr_pcg64_next64(g);
    g->has_u32 = 1;
    g->u32 = (uint32_t)(v >> 32);
    return (uint32_t)v;
}

/* Lemire's nearly-divisionless method on a closed range [0, rng], rng < 2^32 - 1. */
static uint32_t bounded_lemire32(tr_pcg64 *g, uint32_t rng) {
    const uint32_t excl = rng + 1u;
    uint64_t m = (uint64_t)tr_pcg64_next32(g) * excl;
    uint32_t left = (uint32_t)m;
    if (left < excl) {
        const uint32_t threshold = (UINT32_MAX - rng) % excl;
        while (left < threshold) {
            m = (uint64_t)tr_pcg64_next32(g) * excl;
            left = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void tr_pcg64_integers_i32(tr_pcg64 *g, int32_t low, int32_t high, int32_t *out, int64_t n) {
    /* endpoint=False: the closed range is [low, high-1]; numpy works in uint32 offsets */
    uint32_t rng = (uint32_t)((int64_t)high - 1 - (int64_t)low);
    uint32_t off = (uint32_t)low;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v;
        if (rng == 0) v = 0;
        else if (rng == UINT32_MAX) v = tr_pcg64_next32(g);
        else v = bounded_lemire32(g, rng);
        out[i] = (int32_t)(off + v);
    }
}
