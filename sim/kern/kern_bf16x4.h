/* Four fp32 values at a time to and from bf16 in SSE2, bit for bit twinrun/dtype.h's scalar
 * conversions lane by lane: shared by the GEMM epilogue (sim/kern) and the collectives' reductions
 * (sim/coll). SSE2 only (every x86-64 has it); elsewhere callers keep their scalar loops. */
#ifndef TWINRUN_SIM_KERN_KERN_BF16X4_H
#define TWINRUN_SIM_KERN_KERN_BF16X4_H

#include <stdint.h>

#ifdef __SSE2__
#include <emmintrin.h>

/* Four fp32 values to bf16, tr_f32_to_bf16 lane by lane: a NaN keeps its top 16 bits, made quiet;
 * anything else rounds to nearest-even on the top 16 bits. The four results in the low 64 bits. */
static inline __m128i bf16x4_of(__m128 f) {
    const __m128i u = _mm_castps_si128(f), top = _mm_srli_epi32(u, 16);
    const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    const __m128i quiet = _mm_or_si128(top, _mm_set1_epi32(0x40));
    const __m128i rounded = _mm_srli_epi32(
        _mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7fff)), _mm_and_si128(top, _mm_set1_epi32(1))), 16);
    const __m128i r = _mm_or_si128(_mm_and_si128(nan, quiet), _mm_andnot_si128(nan, rounded)); /* each < 2^16 */
    const __m128i s = _mm_srai_epi32(_mm_slli_epi32(r, 16), 16); /* sign-extended: packs keeps the 16 bits */
    return _mm_packs_epi32(s, s);
}

/* Four bf16 values (src[0..4)) widened to fp32, tr_bf16_to_f32 lane by lane: the bits shifted up 16. */
static inline __m128 f32x4_of_bf16(const uint16_t *src) {
    const __m128i h = _mm_loadl_epi64((const __m128i *)src);
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}
#endif

#endif
