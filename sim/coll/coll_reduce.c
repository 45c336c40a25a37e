/* Data movement of a complete collective, in group-rank order whatever the arrival order.
 *
 * Reductions (the contract the tests check against a serial loop):
 * - fp32: acc = x[0]; acc = acc (op) x[r] for r = 1..n-1, in fp32;
 * - bf16: the same in fp32 on the widened values, rounded to bf16 once at the end;
 * - int32: the same in 32-bit integers (sum wraps as unsigned);
 * - avg: as NCCL does for floating types, every input is first multiplied by (float)(1/n) and
 *   the products summed ("pre-multiplied sum"); for int32, the sum divided by n.
 * Every destination is written only after every source has been read, so in-place calls work. */
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "core/hash.h"
#include "kern/kern_bf16x4.h"
#include "twinrun/err.h"

static float load(const void *p, tr_dtype dt, size_t i) {
    return dt == TR_BF16 ? tr_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void store(void *p, tr_dtype dt, size_t i, float v) {
    if (dt == TR_BF16) ((uint16_t *)p)[i] = tr_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}

static float apply(int op, float a, float b) {
    switch (op) {
    case COLL_SUM:
    case COLL_AVG: return a + b;
    case COLL_MAX: return a != a ? a : b != b ? b : b > a ? b : a; /* a NaN propagates, as on the GPU */
    case COLL_MIN: return a != a ? a : b != b ? b : b < a ? b : a;
    }
    tr_fatal("unknown reduction op %d", op);
}

static int32_t apply_i32(int op, int32_t a, int32_t b) {
    switch (op) {
    case COLL_SUM:
    case COLL_AVG: return (int32_t)((uint32_t)a + (uint32_t)b);
    case COLL_MAX: return b > a ? b : a;
    case COLL_MIN: return b < a ? b : a;
    }
    tr_fatal("unknown reduction op %d", op);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define COLL_X86_ASM 1
#endif

/* acc + x with acc the first source: where both are NaN, acc's NaN survives (x86), as in the scalar
 * loop this replaced (gcc compiled it `addss x, acc`); pinned in asm because gcc may swap the operands
 * of a commutative add, and a NaN's sign shows in the diagnosis ("grad norm nan" against "-nan"). */
static inline float add_acc_first(float acc, float x) {
#ifdef COLL_X86_ASM
    __asm__("addss %1, %0" : "+x"(acc) : "x"(x));
    return acc;
#else
    return acc + x;
#endif
}

#ifdef COLL_X86_ASM
static inline __m128 add4_acc_first(__m128 acc, __m128 x) {
    __asm__("addps %1, %0" : "+x"(acc) : "x"(x));
    return acc;
}
#endif

/* acc[i] = acc[i] + x[i], i < count (fp32 sum: the DP gradients), four at a time. */
static void add_row_f32(float *acc, const float *x, size_t count) {
    size_t i = 0;
#ifdef COLL_X86_ASM
    for (; i + 4 <= count; i += 4) _mm_storeu_ps(acc + i, add4_acc_first(_mm_loadu_ps(acc + i), _mm_loadu_ps(x + i)));
#endif
    for (; i < count; i++) acc[i] = add_acc_first(acc[i], x[i]);
}

/* acc[i] = acc[i] + (float)x[i], i < count (bf16 sum: the sequence-parallel reduce-scatters). */
static void add_row_bf16(float *acc, const uint16_t *x, size_t count) {
    size_t i = 0;
#ifdef COLL_X86_ASM
    for (; i + 4 <= count; i += 4) _mm_storeu_ps(acc + i, add4_acc_first(_mm_loadu_ps(acc + i), f32x4_of_bf16(x + i)));
#endif
    for (; i < count; i++) acc[i] = add_acc_first(acc[i], tr_bf16_to_f32(x[i]));
}

/* acc[i] = (float)x[i], i < count. */
static void widen_row_bf16(float *acc, const uint16_t *x, size_t count) {
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 4 <= count; i += 4) _mm_storeu_ps(acc + i, f32x4_of_bf16(x + i));
#endif
    for (; i < count; i++) acc[i] = tr_bf16_to_f32(x[i]);
}

/* out[i] = reduce over group ranks r of srcs[r][offset + i], i < count. */
static void reduce_block(void *out, const void *const *srcs, int n, size_t offset, size_t count, tr_dtype dt, int op) {
    if (dt == TR_I32) {
        int32_t *acc = out;
        for (size_t i = 0; i < count; i++) acc[i] = ((const int32_t *)srcs[0])[offset + i];
        for (int r = 1; r < n; r++) {
            const int32_t *x = (const int32_t *)srcs[r] + offset;
            for (size_t i = 0; i < count; i++) acc[i] = apply_i32(op, acc[i], x[i]);
        }
        if (op == COLL_AVG)
            for (size_t i = 0; i < count; i++) acc[i] /= n;
        return;
    }
    float *acc = out;
    if (op == COLL_SUM) { /* the common case, a row at a time: the same adds in the same order */
        if (dt == TR_BF16) widen_row_bf16(acc, (const uint16_t *)srcs[0] + offset, count);
        else memcpy(acc, (const float *)srcs[0] + offset, count * 4);
        for (int r = 1; r < n; r++) {
            if (dt == TR_BF16) add_row_bf16(acc, (const uint16_t *)srcs[r] + offset, count);
            else add_row_f32(acc, (const float *)srcs[r] + offset, count);
        }
        return;
    }
    const float scale = (float)(1.0 / n);
    for (size_t i = 0; i < count; i++) {
        float v = load(srcs[0], dt, offset + i);
        acc[i] = op == COLL_AVG ? v * scale : v;
    }
    for (int r = 1; r < n; r++) {
        for (size_t i = 0; i < count; i++) {
            float v = load(srcs[r], dt, offset + i);
            acc[i] = apply(op, acc[i], op == COLL_AVG ? v * scale : v);
        }
    }
}

/* Writes an fp32 (or int32) accumulator into dst of type dt, rounding bf16 once. */
static void write_acc(void *dst, const void *acc, size_t count, tr_dtype dt) {
    if (dt != TR_BF16) {
        memmove(dst, acc, count * 4);
        return;
    }
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 4 <= count; i += 4)
        _mm_storel_epi64((__m128i *)((uint16_t *)dst + i), bf16x4_of(_mm_loadu_ps((const float *)acc + i)));
#endif
    for (; i < count; i++) store(dst, dt, i, ((const float *)acc)[i]);
}

static void *scratch(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    TR_CHECK(p != NULL, "out of host memory for collective scratch");
    return p;
}

static bool overlap(const void *a, size_t alen, const void *b, size_t blen) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + blen && y < x + alen;
}

/* Whether an all-gather may copy each block straight from its sender into every receiver: no receiver
 * overlaps another receiver or another member's send buffer, and a member's own send buffer is
 * either apart from its receive buffer or exactly its block there (Megatron's in-place gather). Then
 * no copy overwrites a block before it is read, and the result is the staged copy's, byte for byte. */
static bool gather_in_place_safe(coll_pending *const *m, int n, size_t block) {
    const size_t all = (size_t)n * block;
    for (int r = 0; r < n; r++) {
        const char *recv = m[r]->recv, *own = m[r]->send;
        if (overlap(recv, all, own, block) && own != recv + (size_t)r * block) return false;
        for (int q = 0; q < n; q++)
            if (q != r && (overlap(recv, all, m[q]->send, block) || overlap(recv, all, m[q]->recv, all))) return false;
    }
    return true;
}

/* The all-gather without the staging copy: block q of every receiver from member q's send buffer. */
static void gather_direct(coll_pending *const *m, int n, size_t block) {
    for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++) {
            char *dst = (char *)m[r]->recv + (size_t)q * block;
            if (dst != m[q]->send) memcpy(dst, m[q]->send, block); /* in place: already there */
        }
}

void coll_exec(const coll_group *g, coll_instance *inst) {
    const int n = g->size;
    const coll_desc *d = &inst->desc;
    const size_t esz = tr_dtype_size(d->dt), count = d->count;
    coll_pending *const *m = inst->members;
    if (count == 0 || d->op == FLIGHT_BARRIER) return;
    if (dev_shape_only(m[0]->comm->dev)) return;         /* predict mode: the buffers are only addresses */
    const void **srcs = calloc((size_t)n, sizeof *srcs); /* calloc: gcc -fprofile-update=atomic saw it unset */
    TR_CHECK(srcs != NULL, "out of host memory for collective scratch");
    for (int r = 0; r < n; r++) srcs[r] = m[r]->send;
    switch (d->op) {
    case FLIGHT_ALL_REDUCE: {
        void *acc = scratch(count * 4);
        reduce_block(acc, srcs, n, 0, count, d->dt, d->redop);
        for (int r = 0; r < n; r++) write_acc(m[r]->recv, acc, count, d->dt);
        free(acc);
        break;
    }
    case FLIGHT_REDUCE_SCATTER: {
        void *acc = scratch((size_t)n * count * 4);
        for (int b = 0; b < n; b++)
            reduce_block((char *)acc + (size_t)b * count * 4, srcs, n, (size_t)b * count, count, d->dt, d->redop);
        for (int r = 0; r < n; r++) write_acc(m[r]->recv, (char *)acc + (size_t)r * count * 4, count, d->dt);
        free(acc);
        break;
    }
    case FLIGHT_ALL_GATHER: {
        if (gather_in_place_safe(m, n, count * esz)) {
            gather_direct(m, n, count * esz);
            break;
        }
        char *all = scratch((size_t)n * count * esz);
        for (int r = 0; r < n; r++) memcpy(all + (size_t)r * count * esz, srcs[r], count * esz);
        for (int r = 0; r < n; r++) memmove(m[r]->recv, all, (size_t)n * count * esz);
        free(all);
        break;
    }
    case FLIGHT_BROADCAST: {
        const void *root = m[d->peer]->send;
        for (int r = 0; r < n; r++)
            if (r != d->peer) memmove(m[r]->recv, root, count * esz);
        break;
    }
    case FLIGHT_SEND:
    case FLIGHT_RECV:
    case FLIGHT_BARRIER:
    case FLIGHT_OP_COUNT: tr_fatal("coll_exec: %s is not a collective", flight_op_name(d->op));
    }
    free(srcs);
}

void coll_exec_p2p(const coll_pending *send, const coll_pending *recv) {
    if (send->desc.count && !dev_shape_only(send->comm->dev))
        memmove(recv->recv, send->send, send->desc.count * tr_dtype_size(send->desc.dt));
}

uint64_t coll_result_hash(const coll_group *g, const coll_instance *inst) {
    const coll_desc *d = &inst->desc;
    const size_t esz = tr_dtype_size(d->dt);
    uint64_t h = TR_FNV_OFFSET;
    if (dev_shape_only(inst->members[0]->comm->dev)) return h; /* nothing was moved */
    for (int r = 0; r < g->size; r++) {
        const coll_pending *p = inst->members[r];
        switch (d->op) {
        case FLIGHT_ALL_REDUCE:
        case FLIGHT_REDUCE_SCATTER:
        case FLIGHT_BROADCAST: h = tr_fnv1a(h, p->recv, d->count * esz); break;
        case FLIGHT_ALL_GATHER: h = tr_fnv1a(h, p->recv, (size_t)g->size * d->count * esz); break;
        default: break;
        }
    }
    return h;
}

void coll_reduce_into(void *out, const void *const *srcs, int n, size_t offset, size_t count, tr_dtype dt, int op) {
    reduce_block(out, srcs, n, offset, count, dt, op);
}

void coll_store_acc(void *dst, const void *acc, size_t count, tr_dtype dt) { write_acc(dst, acc, count, dt); }
