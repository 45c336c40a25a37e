/* The collectives' reduction (sim/coll/coll_reduce.c) bit for bit against a serial loop that spells out
 * x86's NaN rule: acc = x[0]; acc = acc + x[r] for r ascending, where a NaN accumulator keeps its own
 * NaN (quieted) even when x[r] is a NaN too, else a NaN x[r] comes through (quieted); bf16 widened
 * exactly and rounded once at the store (tr_f32_to_bf16). Inputs mix NaNs of both signs and several
 * payloads (quiet and signalling), infinities, signed zeros, denormals and ordinary values; lengths
 * cover every tail of the four-wide loops. Swapping the add's operands in the reduction fails it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/coll_internal.h"
#include "twinrun/dtype.h"

enum { MAXN = 5, MAXCOUNT = 37 };

static uint64_t rng = 0x2026120211ULL;

static uint32_t next32(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 32);
}

/* An fp32 bit pattern, one in three a NaN (either sign, quiet or signalling, random payload). */
static uint32_t input_bits(void) {
    static const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u,
                                       0x807fffffu, 0x3f800000u, 0xbf800000u, 0x7f7fffffu};
    const uint32_t pick = next32() % 9;
    if (pick < 3) return (next32() & 0x80000000u) | 0x7f800000u | (next32() % 0x7fffffu + 1u); /* a NaN */
    if (pick < 5) return special[next32() % (sizeof special / sizeof special[0])];
    return (next32() & 0xbfffffffu); /* ordinary, |x| < 2 */
}

static float f32_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static bool is_nan(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu); }

/* acc + x under x86's rule, acc the first source. */
static float add_ref(float acc, float x) {
    const uint32_t a = bits_of(acc), b = bits_of(x);
    if (is_nan(a)) return f32_of(a | 0x00400000u);
    if (is_nan(b)) return f32_of(b | 0x00400000u);
    return acc + x;
}

static void check(tr_dtype dt, int n, size_t count) {
    uint32_t in[MAXN][MAXCOUNT];
    uint16_t in16[MAXN][MAXCOUNT];
    const void *srcs[MAXN];
    for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < count; i++) {
            in[r][i] = input_bits();
            in16[r][i] = (uint16_t)(in[r][i] >> 16);
        }
        srcs[r] = dt == TR_BF16 ? (const void *)in16[r] : (const void *)in[r];
    }
    float acc[MAXCOUNT];
    uint32_t out[MAXCOUNT];
    coll_reduce_into(acc, srcs, n, 0, count, dt, COLL_SUM);
    coll_store_acc(out, acc, count, dt);
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < n; r++) {
            const float x = dt == TR_BF16 ? tr_bf16_to_f32(in16[r][i]) : f32_of(in[r][i]);
            want = r == 0 ? x : add_ref(want, x);
        }
        const uint32_t got = dt == TR_BF16 ? ((const uint16_t *)out)[i] : out[i];
        const uint32_t exp = dt == TR_BF16 ? tr_f32_to_bf16(want) : bits_of(want);
        if (got != exp)
            fail_msg("%s sum of %d ranks, %zu elements: element %zu is 0x%08x, the serial loop's 0x%08x",
                     tr_dtype_name(dt), n, count, i, got, exp);
    }
}

static void test_sum_bits_match_the_serial_loop(void **state) {
    (void)state;
    for (int rep = 0; rep < 20; rep++)
        for (int n = 1; n <= MAXN; n++)
            for (size_t count = 0; count <= MAXCOUNT; count++) {
                check(TR_F32, n, count);
                check(TR_BF16, n, count);
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sum_bits_match_the_serial_loop)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
