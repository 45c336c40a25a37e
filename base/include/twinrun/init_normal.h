/* The generator of the layout-independent initialisation: element e of the global parameter named
 * `name` gets N(0, std) from (seed, name, e) alone, never from the layout (DESIGN.md §5).
 *
 * key = mix64(seed ^ mix64(fnv1a(name))) names the parameter; splitmix64 of key ^ mix64(e) gives two
 * 53-bit uniforms and Box-Muller in double gives z; the value is (float)(z * std).
 *
 * One source for every side: the engine's host initialiser (llama_init_value), the twin's
 * kern_init_param and the CUDA kernel (host and device functions alike, TR_HD). Everything up to
 * the uniforms is exact integer arithmetic; sqrt is correctly rounded everywhere; only log and cos
 * may differ in their last bit between libm and the GPU's library, which the CUDA kernel handles by
 * sending the rare values whose fp32 rounding that could change back to the host (kern_init.cu). */
#ifndef TWINRUN_BASE_INIT_NORMAL_H
#define TWINRUN_BASE_INIT_NORMAL_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TR_HD __host__ __device__
#else
#define TR_HD
#endif

/* splitmix64's finaliser: a well-mixed 64-bit hash. */
static inline TR_HD uint64_t tr_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The parameter's identity: its name (FNV-1a) under the seed. */
static inline uint64_t tr_init_key(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 0x100000001b3ULL;
    return tr_mix64(seed ^ tr_mix64(h));
}

/* z * std of element e, in double: the value before its one rounding to fp32. */
static inline TR_HD double tr_init_normal_double(uint64_t key, uint64_t e, double std) {
    const uint64_t k = key ^ tr_mix64(e);
    const uint64_t r1 = tr_mix64(k), r2 = tr_mix64(k ^ 0xa5a5a5a5a5a5a5a5ULL);
    /* Box-Muller on two uniforms in (0, 1]; 53-bit mantissas, so the tails are exact enough. */
    const double u1 = ((double)(r1 >> 11) + 1.0) / 9007199254740992.0;
    const double u2 = (double)(r2 >> 11) / 9007199254740992.0;
    const double z = sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
    return z * std;
}

/* Global index of local element i of a shard: local row i / cols lies in segment s (the second of
 * two starts at local row seg_local1), which starts at global row seg_global[s]; e = global row *
 * gcols + col0 + local column. 1-D: cols = gcols = 1, col0 = 0, one segment at 0: e = i. */
static inline TR_HD uint64_t tr_init_global_index(uint64_t i, int64_t cols, int64_t gcols, int64_t col0, int nseg,
                                                  int64_t seg_local1, int64_t seg_global0, int64_t seg_global1) {
    const int64_t row = (int64_t)i / cols, col = (int64_t)i % cols;
    const int second = nseg == 2 && row >= seg_local1;
    const int64_t grow = second ? seg_global1 + (row - seg_local1) : seg_global0 + row;
    return (uint64_t)(grow * gcols + col0 + col);
}

#endif
