/* The collective tests' fixtures (fixture_coll.h): a varied input per (rank, index, salt) and the
 * serial loop every reduction of the twin must match bit for bit. */
#include "common/fixture_coll.h"

float tt_input(int rank, size_t i, int salt) {
    uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15ULL ^ (uint64_t)i * 0xbf58476d1ce4e5b9ULL ^
                 (uint64_t)salt * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 29;
    double u = (double)(x >> 11) * 0x1.0p-53;      /* [0, 1) */
    double mag = ldexp(1.0 + u, (int)(x % 7) - 3); /* [1/8, 16) */
    return (float)((x >> 7) & 1 ? -mag : mag);
}

void tt_fill(void *dst, tr_dtype dt, int rank, size_t offset, size_t n, int salt) {
    for (size_t i = 0; i < n; i++) {
        float v = tt_input(rank, offset + i, salt);
        if (dt == TR_F32) ((float *)dst)[i] = v;
        else if (dt == TR_BF16) ((uint16_t *)dst)[i] = tr_f32_to_bf16(v);
        else ((int32_t *)dst)[i] = (int32_t)(v * 1000.0f);
    }
}

float tt_widen(const void *src, tr_dtype dt, size_t i) {
    return dt == TR_BF16 ? tr_bf16_to_f32(((const uint16_t *)src)[i]) : ((const float *)src)[i];
}

void tt_reduce_ref(void *out, tr_dtype dt, coll_op op, const int *ranks, int n, size_t offset, size_t count, int salt) {
    uint16_t tmp16;
    int32_t tmp32;
    float tmpf;
    for (size_t i = 0; i < count; i++) {
        if (dt == TR_I32) {
            int32_t acc = 0;
            for (int r = 0; r < n; r++) {
                tt_fill(&tmp32, dt, ranks[r], offset + i, 1, salt);
                if (r == 0) acc = tmp32;
                else if (op == COLL_SUM || op == COLL_AVG) acc = (int32_t)((uint32_t)acc + (uint32_t)tmp32);
                else if (op == COLL_MAX) acc = tmp32 > acc ? tmp32 : acc;
                else acc = tmp32 < acc ? tmp32 : acc;
            }
            if (op == COLL_AVG) acc /= n;
            ((int32_t *)out)[i] = acc;
            continue;
        }
        float acc = 0;
        for (int r = 0; r < n; r++) {
            if (dt == TR_BF16) {
                tt_fill(&tmp16, dt, ranks[r], offset + i, 1, salt);
                tmpf = tr_bf16_to_f32(tmp16);
            } else {
                tt_fill(&tmpf, dt, ranks[r], offset + i, 1, salt);
            }
            if (op == COLL_AVG) tmpf = tmpf * (float)(1.0 / n);
            if (r == 0) acc = tmpf;
            else if (op == COLL_SUM || op == COLL_AVG) acc = acc + tmpf;
            else if (op == COLL_MAX) acc = tmpf > acc ? tmpf : acc;
            else acc = tmpf < acc ? tmpf : acc;
        }
        if (dt == TR_BF16) ((uint16_t *)out)[i] = tr_f32_to_bf16(acc);
        else ((float *)out)[i] = acc;
    }
}

void tt_range(int *ranks, int first, int n, int stride) {
    for (int i = 0; i < n; i++) ranks[i] = first + i * stride;
}
