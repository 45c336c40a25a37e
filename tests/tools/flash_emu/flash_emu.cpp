/* flash_emu: the flash-attention kernels of cuda/kern_attention_flash.cuh, run on the CPU.
 *
 * The kernels were written on machines without a GPU. This program compiles their very source for the
 * host and runs each CUDA thread as a coroutine (ucontext), so that:
 *   - __syncthreads is a real block barrier, and a barrier some threads never reach is reported as a
 *     deadlock instead of hanging;
 *   - the warp-wide instructions (mma.sync m16n8k16 bf16, ldmatrix.x4.trans, shfl.xor) are emulated
 *     from their PTX definitions: every lane deposits its registers, the warp meets, and each lane
 *     takes the fragment the ISA says it gets (ldmatrix also checks its row addresses: inside shared
 *     memory, 16-byte aligned);
 *   - cp.async copies land only when their thread waits for their group, so a tile read before its
 *     wait holds stale bytes;
 *   - shared memory has a guard zone checked after every block, and every global tensor ends at a
 *     PROT_NONE page, so a read or write past an end faults at once.
 * Outputs are compared with a double-precision attention (forward and backward) on the same bf16
 * inputs: causal and position-masked (context parallelism), head dims 64 and 128, sequence lengths
 * that are not multiples of the tiles, Tq != Tk, GQA. Every case runs the default kernels, then the
 * variants of k_variants (TWINRUN_FLASH_VARIANT's FLV_* flags): each against the reference, and those
 * that keep the default's arithmetic also bit for bit against the default's outputs.
 *
 * What it cannot show: timing, races between warps that a real GPU would expose (the emulator runs a
 * block's threads one after another between barriers), and the exact rounding of the hardware's
 * fp32 accumulation order. compute-sanitizer and kern_oracle do that on the GPU.
 *
 * Build and run (CPU machine): tests/tools/flash_emu/flash_emu.sh */
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

/* ---- the CUDA dialect of the kernels, on the host ------------------------------------------------ */
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define FL_EMULATED 1
using std::max;
using std::min;

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
static emu_dim3 threadIdx, blockIdx, gridDim, blockDim;
struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

static inline float tr_bf16_bits_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) { /* nearest-even, as kern_common.cuh and cvt.rn.bf16x2 */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void emu_fail(const char *why);
#define TR_DEVICE_FAIL(...)                                                                                     \
    do {                                                                                                        \
        printf("device check: " __VA_ARGS__);                                                                   \
        emu_fail("TR_DEVICE_FAIL");                                                                             \
    } while (0)

/* ---- the scheduler: one coroutine per thread of a block ------------------------------------------- */
enum thread_state { T_RUN, T_BLOCK_BARRIER, T_WARP_BARRIER, T_DONE };

struct emu_thread {
    ucontext_t ctx;
    std::vector<char> stack;
    thread_state st;
};

static std::vector<emu_thread> g_thr;
static int g_cur = -1;
static ucontext_t g_sched;
static unsigned char *g_smem;
static size_t g_smem_bytes;
static const std::function<void()> *g_body;

/* cp.async state (see cp_async16 below). */
struct async_copy {
    unsigned char *dst;
    const unsigned char *src; /* NULL: zero-fill */
};
static std::vector<std::vector<std::vector<async_copy>>> g_groups; /* [thread][committed group][copy] */
static std::vector<std::vector<async_copy>> g_open;                /* [thread] copies not yet committed */

static void emu_fail(const char *why) {
    fprintf(stderr, "flash_emu: %s in block (%u,%u,%u) thread %d\n", why, blockIdx.x, blockIdx.y, blockIdx.z, g_cur);
    exit(2);
}

static void yield_as(thread_state s) {
    g_thr[g_cur].st = s;
    swapcontext(&g_thr[g_cur].ctx, &g_sched);
}

static void __syncthreads() { yield_as(T_BLOCK_BARRIER); }

static int lane_id() { return (int)threadIdx.x & 31; }
static int warp_id() { return (int)threadIdx.x >> 5; }

/* What each lane hands to a warp-wide instruction, and the warp's shared result. */
struct lane_regs {
    uint32_t a[4], b[2];
    float c[4], f;
    const uint16_t *row;
};
struct warp_exchange {
    lane_regs lane[32];
    unsigned long gen = 0, done_gen = ~0ul; /* the warp instruction whose result is computed */
    float d[16][8];                          /* mma result */
};
static std::vector<warp_exchange> g_warp;

static void warp_meet() { yield_as(T_WARP_BARRIER); }

static void thread_entry() {
    (*g_body)();
    if (!g_open[(size_t)g_cur].empty() || !g_groups[(size_t)g_cur].empty())
        emu_fail("thread ended with cp.async copies it never waited for");
    g_thr[g_cur].st = T_DONE;
    swapcontext(&g_thr[g_cur].ctx, &g_sched);
}

static void run_block(int nthreads, const std::function<void()> &body) {
    g_body = &body;
    g_thr.assign((size_t)nthreads, emu_thread());
    g_warp.assign((size_t)(nthreads + 31) / 32, warp_exchange());
    g_groups.assign((size_t)nthreads, {});
    g_open.assign((size_t)nthreads, {});
    for (int t = 0; t < nthreads; t++) {
        emu_thread &th = g_thr[(size_t)t];
        th.stack.resize(256 * 1024);
        getcontext(&th.ctx);
        th.ctx.uc_stack.ss_sp = th.stack.data();
        th.ctx.uc_stack.ss_size = th.stack.size();
        th.ctx.uc_link = nullptr;
        makecontext(&th.ctx, thread_entry, 0);
        th.st = T_RUN;
    }
    for (;;) {
        for (int t = 0; t < nthreads; t++) {
            if (g_thr[(size_t)t].st != T_RUN) continue;
            g_cur = t;
            threadIdx.x = (unsigned)t;
            swapcontext(&g_sched, &g_thr[(size_t)t].ctx);
        }
        int done = 0, at_block = 0, released = 0;
        for (int t = 0; t < nthreads; t++) done += g_thr[(size_t)t].st == T_DONE, at_block += g_thr[(size_t)t].st == T_BLOCK_BARRIER;
        if (done == nthreads) break;
        for (int w = 0; w * 32 < nthreads; w++) {
            int at = 0;
            for (int l = 0; l < 32; l++) at += g_thr[(size_t)(w * 32 + l)].st == T_WARP_BARRIER;
            if (at == 32) {
                for (int l = 0; l < 32; l++) g_thr[(size_t)(w * 32 + l)].st = T_RUN;
                g_warp[(size_t)w].gen++;
                released++;
            }
        }
        if (!released && at_block > 0 && at_block + done == nthreads) {
            for (int t = 0; t < nthreads; t++)
                if (g_thr[(size_t)t].st == T_BLOCK_BARRIER) g_thr[(size_t)t].st = T_RUN;
            released++;
        }
        if (!released) {
            fprintf(stderr, "flash_emu: deadlock in block (%u,%u,%u):", blockIdx.x, blockIdx.y, blockIdx.z);
            for (int t = 0; t < nthreads; t++) fprintf(stderr, " %d", (int)g_thr[(size_t)t].st);
            fprintf(stderr, "\n  (0 running, 1 at __syncthreads, 2 at a warp instruction, 3 done)\n");
            exit(2);
        }
    }
    g_cur = -1;
}

/* ---- the warp-wide instructions ------------------------------------------------------------------- */
static float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    if (mask != 0xffffffffu) emu_fail("shfl with a partial mask");
    warp_exchange &w = g_warp[(size_t)warp_id()];
    w.lane[lane_id()].f = v;
    warp_meet();
    const float r = w.lane[lane_id() ^ lane_mask].f;
    warp_meet();
    return r;
}

static float bf_lo(uint32_t x) { return tr_bf16_bits_to_f32((uint16_t)(x & 0xffffu)); }
static float bf_hi(uint32_t x) { return tr_bf16_bits_to_f32((uint16_t)(x >> 16)); }

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, fragments as the PTX ISA lays them out:
 * groupID g = lane / 4, t = lane % 4; A: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
 * B: b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g); C/D: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1). */
static void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    warp_exchange &w = g_warp[(size_t)warp_id()];
    lane_regs &me = w.lane[lane_id()];
    memcpy(me.a, a, sizeof me.a);
    me.b[0] = b0, me.b[1] = b1;
    memcpy(me.c, c, sizeof me.c);
    warp_meet();
    if (w.done_gen != w.gen) { /* the first lane through computes the warp's product */
        float A[16][16], B[16][8];
        for (int l = 0; l < 32; l++) {
            const int g = l >> 2, t = l & 3;
            const lane_regs &r = w.lane[l];
            A[g][2 * t] = bf_lo(r.a[0]), A[g][2 * t + 1] = bf_hi(r.a[0]);
            A[g + 8][2 * t] = bf_lo(r.a[1]), A[g + 8][2 * t + 1] = bf_hi(r.a[1]);
            A[g][2 * t + 8] = bf_lo(r.a[2]), A[g][2 * t + 9] = bf_hi(r.a[2]);
            A[g + 8][2 * t + 8] = bf_lo(r.a[3]), A[g + 8][2 * t + 9] = bf_hi(r.a[3]);
            B[2 * t][g] = bf_lo(r.b[0]), B[2 * t + 1][g] = bf_hi(r.b[0]);
            B[2 * t + 8][g] = bf_lo(r.b[1]), B[2 * t + 9][g] = bf_hi(r.b[1]);
            w.d[g][2 * t] = r.c[0], w.d[g][2 * t + 1] = r.c[1];
            w.d[g + 8][2 * t] = r.c[2], w.d[g + 8][2 * t + 1] = r.c[3];
        }
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                float s = 0.0f;
                for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
                w.d[i][j] += s;
            }
        w.done_gen = w.gen;
    }
    const int g = lane_id() >> 2, t = lane_id() & 3;
    c[0] = w.d[g][2 * t], c[1] = w.d[g][2 * t + 1], c[2] = w.d[g + 8][2 * t], c[3] = w.d[g + 8][2 * t + 1];
    warp_meet();
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8m..8m+7 give the rows of matrix m. Plain:
 * register m of lane l gets row l/4, columns 2(l%4) and 2(l%4)+1 of matrix m; .trans: rows 2(l%4)
 * and 2(l%4)+1, column l/4 (low half first, both). */
static void ldsm_x4_any(uint32_t r[4], const uint16_t *row, bool trans) {
    warp_exchange &w = g_warp[(size_t)warp_id()];
    const unsigned char *p = (const unsigned char *)row;
    if (p < g_smem || p + 16 > g_smem + g_smem_bytes) emu_fail("ldmatrix row address outside shared memory");
    if (((uintptr_t)(p - g_smem)) % 16 != 0) emu_fail("ldmatrix row address not 16-byte aligned");
    w.lane[lane_id()].row = row;
    warp_meet();
    const int l = lane_id();
    for (int m = 0; m < 4; m++) {
        const uint16_t lo = trans ? w.lane[8 * m + 2 * (l & 3)].row[l >> 2] : w.lane[8 * m + (l >> 2)].row[2 * (l & 3)];
        const uint16_t hi =
            trans ? w.lane[8 * m + 2 * (l & 3) + 1].row[l >> 2] : w.lane[8 * m + (l >> 2)].row[2 * (l & 3) + 1];
        r[m] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    warp_meet();
}

static void ldsm_x4(uint32_t r[4], const uint16_t *row) { ldsm_x4_any(r, row, false); }
static void ldsm_x4_trans(uint32_t r[4], const uint16_t *row) { ldsm_x4_any(r, row, true); }

static uint32_t pack_bf16(float lo, float hi) { return (uint32_t)f32_to_bf16(lo) | (uint32_t)f32_to_bf16(hi) << 16; }

/* ex2.approx.ftz.f32: subnormal input and output flushed to zero; the hardware's approximation (2 ulp)
 * is libm's exp2f here, as exp2f stands for the device's exp2f (ex2.approx.f32) in the default kernels. */
static float ex2_ftz(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    const float r = exp2f(x);
    return std::fpclassify(r) == FP_SUBNORMAL ? 0.0f : r;
}

static float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

/* cp.async: a thread's copies land only when it waits for their group (cp.async.wait_group), so a
 * kernel that reads a tile before waiting for it reads stale bytes and fails the comparison. */

static void cp_async16(void *smem, const void *gmem, bool valid) {
    unsigned char *d = (unsigned char *)smem;
    if (d < g_smem || d + 16 > g_smem + g_smem_bytes) emu_fail("cp.async destination outside shared memory");
    if (((uintptr_t)(d - g_smem)) % 16 != 0 || ((uintptr_t)gmem) % 16 != 0) emu_fail("cp.async address not 16-byte aligned");
    g_open[(size_t)g_cur].push_back(async_copy{d, valid ? (const unsigned char *)gmem : nullptr});
}

static void cp_async_commit() {
    g_groups[(size_t)g_cur].push_back(g_open[(size_t)g_cur]);
    g_open[(size_t)g_cur].clear();
}

template <int N>
static void cp_async_wait() {
    auto &q = g_groups[(size_t)g_cur];
    while (q.size() > (size_t)N) {
        for (const async_copy &c : q.front()) {
            if (c.src) memcpy(c.dst, c.src, 16);
            else memset(c.dst, 0, 16);
        }
        q.erase(q.begin());
    }
}

#define FL_SMEM(name) unsigned char *name = g_smem

#include "kern_attention_flash.cuh"

using namespace tr_flash;

/* ---- launching -------------------------------------------------------------------------------------- */
static const size_t GUARD = 4096;

static void launch(emu_dim3 grid, int threads, size_t smem_bytes, const std::function<void()> &body) {
    std::vector<unsigned char> smem(smem_bytes + GUARD, 0xA5);
    g_smem = smem.data();
    g_smem_bytes = smem_bytes;
    gridDim = grid;
    blockDim = emu_dim3{(unsigned)threads, 1, 1};
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx.x = x, blockIdx.y = y, blockIdx.z = z;
                run_block(threads, body);
                for (size_t i = smem_bytes; i < smem_bytes + GUARD; i++)
                    if (smem[i] != 0xA5) emu_fail("write past the end of shared memory");
            }
}

/* A device tensor: its last byte sits just before a PROT_NONE page. */
template <class T>
struct guarded {
    T *p = nullptr;
    size_t n = 0;
    void *base = nullptr;
    size_t mapped = 0;
    explicit guarded(size_t count) : n(count) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = count * sizeof(T);
        const size_t body = (bytes + page - 1) / page * page;
        mapped = body + page;
        base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) abort();
        mprotect((char *)base + body, page, PROT_NONE);
        p = (T *)((char *)base + body - bytes);
        poison();
    }
    void poison() { memset(p, 0xff, n * sizeof(T)); } /* NaN in bf16 and fp32: anything read before it is written shows */
    ~guarded() { munmap(base, mapped); }
    guarded(const guarded &) = delete;
    guarded &operator=(const guarded &) = delete;
};

/* ---- the reference: attention in double on the bf16 inputs ---------------------------------------- */
struct shape {
    const char *name;
    int B, Tq, Tk, NH, KV, D;
    bool positions; /* else causal */
    std::vector<int32_t> qpos, kpos;
};

static uint64_t g_rng = 99;
static double urand() {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static void fill(guarded<uint16_t> &t, double scale) {
    for (size_t i = 0; i < t.n; i++) t.p[i] = f32_to_bf16((float)((2.0 * urand() - 1.0) * scale));
}

static bool sees(const shape &s, int i, int j) { return s.positions ? s.kpos[(size_t)j] <= s.qpos[(size_t)i] : j <= i; }

static double rel_l2(const std::vector<double> &ref, const float *got, size_t n, size_t *nonfinite) {
    double num = 0, den = 0;
    *nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(got[i])) (*nonfinite)++;
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int g_failures;

/* One output against the reference: a line of its own for the default variant, else a field of the
 * variant's line (the caller ends it). */
static void check(const char *what, const shape &s, const char *variant, const std::vector<double> &ref,
                  const float *got, size_t n, double tol) {
    size_t bad = 0;
    const double r = rel_l2(ref, got, n, &bad);
    const bool ok = r <= tol && bad == 0;
    if (!variant)
        printf("  %-34s %-8s rel L2 %.3e (bound %.0e)%s%s\n", s.name, what, r, tol, bad ? "  NON-FINITE" : "",
               ok ? "" : "  FAILED");
    else printf(" %s %.2e%s%s", what, r, bad ? " NON-FINITE" : "", ok ? "" : " FAILED");
    if (!ok) g_failures++;
}

/* The variants flash_emu runs (kern_attention_flash.cuh, FLV_*): FLV_OCC only bounds registers, which
 * the emulator has not, so it rides along in "all"; rt2 and bq64 change different kernels and both
 * promise the default's bits, so one run checks both. */
struct emu_variant {
    const char *name;
    unsigned flags;
};
static const emu_variant k_variants[] = {
    {nullptr, 0}, {"rt2+bq64", FLV_RT2 | FLV_BQ64}, {"ex2", FLV_EX2}, {"all", FLV_ALL}};

static void run_case(shape s) {
    const int B = s.B, Tq = s.Tq, Tk = s.Tk, NH = s.NH, KV = s.KV, D = s.D, rep = NH / KV;
    const size_t nq = (size_t)B * Tq * NH * D, nk = (size_t)B * Tk * KV * D;
    guarded<uint16_t> q(nq), k(nk), v(nk), out(nq), dout(nq), dq(nq), dk(nk), dv(nk);
    guarded<float> lse((size_t)B * NH * Tq), delta((size_t)B * NH * Tq), part_k(nk * rep), part_v(nk * rep);
    guarded<int32_t> qp(s.positions ? (size_t)Tq : 1), kp(s.positions ? (size_t)Tk : 1);
    fill(q, 2.0), fill(k, 2.0), fill(v, 1.0), fill(dout, 1.0);
    if (s.positions) {
        memcpy(qp.p, s.qpos.data(), (size_t)Tq * 4);
        memcpy(kp.p, s.kpos.data(), (size_t)Tk * 4);
    }
    const double scale = 1.0 / sqrt((double)D);
    float sc, scl2;
    sc = (float)scale, scl2 = (float)(scale * 1.4426950408889634);

    auto run_fwd = [&](auto mask, auto dtag, auto vtag) {
        constexpr int DD = decltype(dtag)::value;
        constexpr unsigned V = decltype(vtag)::value;
        constexpr int BM = fwd_bm<DD, V>;
        launch(emu_dim3{(unsigned)((Tq + BM - 1) / BM), (unsigned)NH, (unsigned)B}, FL_THREADS, fwd_smem<DD, V>(),
               [&] { k_flash_fwd<DD, decltype(mask), V>(out.p, lse.p, q.p, k.p, v.p, Tq, Tk, NH, KV, scl2, mask); });
        const size_t rows = (size_t)B * Tq * NH;
        launch(emu_dim3{(unsigned)((rows + 3) / 4), 1, 1}, FL_THREADS, 0,
               [&] { k_flash_delta<DD>(delta.p, dout.p, out.p, Tq, NH, rows); });
        launch(emu_dim3{(unsigned)((Tq + FL_BM - 1) / FL_BM), (unsigned)NH, (unsigned)B}, FL_THREADS,
               dq_smem<DD, V>(), [&] {
                   k_flash_bwd_dq<DD, decltype(mask), V>(dq.p, dout.p, q.p, k.p, v.p, lse.p, delta.p, Tq, Tk, NH, KV,
                                                         sc, scl2, mask);
               });
        /* as kern_attention_flash.cu: per-head shares and their reduction when a group has several heads */
        float *pk = rep > 1 ? part_k.p : nullptr, *pv = rep > 1 ? part_v.p : nullptr;
        launch(emu_dim3{(unsigned)((Tk + FL_BN - 1) / FL_BN), (unsigned)NH, (unsigned)B}, FL_THREADS,
               dkv_smem<DD, V>(), [&] {
                   k_flash_bwd_dkv<DD, decltype(mask), V>(dk.p, dv.p, pk, pv, dout.p, q.p, k.p, v.p, lse.p, delta.p, Tq,
                                                          Tk, NH, KV, sc, scl2, mask);
               });
        if (rep > 1)
            launch(emu_dim3{(unsigned)((nk + 255) / 256), 1, 1}, 256, 0,
                   [&] { k_flash_dkv_reduce(dk.p, dv.p, part_k.p, part_v.p, KV, rep, D, sc, nk); });
    };
    auto run_variant = [&](auto vtag) {
        for (guarded<uint16_t> *t : {&out, &dq, &dk, &dv}) t->poison();
        for (guarded<float> *t : {&lse, &delta, &part_k, &part_v}) t->poison();
        if (s.positions) {
            const fl_positions m{qp.p, kp.p};
            if (D == 64) run_fwd(m, std::integral_constant<int, 64>(), vtag);
            else run_fwd(m, std::integral_constant<int, 128>(), vtag);
        } else {
            if (D == 64) run_fwd(fl_causal(), std::integral_constant<int, 64>(), vtag);
            else run_fwd(fl_causal(), std::integral_constant<int, 128>(), vtag);
        }
    };

    /* reference */
    auto Q = [&](int b, int i, int h, int d) { return (double)tr_bf16_bits_to_f32(q.p[(((size_t)b * Tq + i) * NH + h) * D + d]); };
    auto K = [&](int b, int j, int g, int d) { return (double)tr_bf16_bits_to_f32(k.p[(((size_t)b * Tk + j) * KV + g) * D + d]); };
    auto V = [&](int b, int j, int g, int d) { return (double)tr_bf16_bits_to_f32(v.p[(((size_t)b * Tk + j) * KV + g) * D + d]); };
    auto dO = [&](int b, int i, int h, int d) { return (double)tr_bf16_bits_to_f32(dout.p[(((size_t)b * Tq + i) * NH + h) * D + d]); };
    std::vector<double> r_out(nq), r_lse((size_t)B * NH * Tq), r_dq(nq, 0.0), r_dk(nk, 0.0), r_dv(nk, 0.0);
    std::vector<double> p((size_t)Tk), dp((size_t)Tk);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const int g = h / rep;
            for (int i = 0; i < Tq; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < Tk; j++) {
                    if (!sees(s, i, j)) continue;
                    double a = 0;
                    for (int d = 0; d < D; d++) a += Q(b, i, h, d) * K(b, j, g, d);
                    p[(size_t)j] = a * scale;
                    mx = std::max(mx, p[(size_t)j]);
                }
                double sum = 0;
                for (int j = 0; j < Tk; j++) sum += sees(s, i, j) ? exp(p[(size_t)j] - mx) : 0.0;
                const double L = mx + log(sum);
                r_lse[((size_t)b * NH + h) * Tq + i] = L;
                double dl = 0;
                for (int j = 0; j < Tk; j++) {
                    p[(size_t)j] = sees(s, i, j) ? exp(p[(size_t)j] - L) : 0.0;
                    double a = 0;
                    for (int d = 0; d < D; d++) a += dO(b, i, h, d) * V(b, j, g, d);
                    dp[(size_t)j] = a;
                    dl += p[(size_t)j] * a;
                }
                for (int d = 0; d < D; d++) {
                    double o = 0, gq = 0;
                    for (int j = 0; j < Tk; j++) {
                        o += p[(size_t)j] * V(b, j, g, d);
                        gq += p[(size_t)j] * (dp[(size_t)j] - dl) * K(b, j, g, d);
                    }
                    r_out[(((size_t)b * Tq + i) * NH + h) * D + d] = o;
                    r_dq[(((size_t)b * Tq + i) * NH + h) * D + d] = gq * scale;
                }
                for (int j = 0; j < Tk; j++) {
                    if (p[(size_t)j] == 0.0) continue;
                    const double ds = p[(size_t)j] * (dp[(size_t)j] - dl);
                    for (int d = 0; d < D; d++) {
                        r_dk[(((size_t)b * Tk + j) * KV + g) * D + d] += ds * Q(b, i, h, d) * scale;
                        r_dv[(((size_t)b * Tk + j) * KV + g) * D + d] += p[(size_t)j] * dO(b, i, h, d);
                    }
                }
            }
        }
    auto widen = [](const guarded<uint16_t> &t) {
        std::vector<float> f(t.n);
        for (size_t i = 0; i < t.n; i++) f[i] = tr_bf16_bits_to_f32(t.p[i]);
        return f;
    };
    /* the default's outputs, which the variants that keep its arithmetic must match bit for bit */
    std::vector<uint16_t> d_out, d_dq, d_dk, d_dv;
    std::vector<float> d_lse;
    for (const emu_variant &ev : k_variants) {
        switch (ev.flags) {
        case 0: run_variant(std::integral_constant<unsigned, 0>()); break;
        case FLV_RT2 | FLV_BQ64: run_variant(std::integral_constant<unsigned, FLV_RT2 | FLV_BQ64>()); break;
        case FLV_EX2: run_variant(std::integral_constant<unsigned, FLV_EX2>()); break;
        case FLV_ALL: run_variant(std::integral_constant<unsigned, FLV_ALL>()); break;
        default: emu_fail("a variant without its instantiation in run_case");
        }
        if (ev.name) printf("  %-34s %-8s", s.name, ev.name);
        check("out", s, ev.name, r_out, widen(out).data(), nq, 1e-2);
        check("lse", s, ev.name, r_lse, lse.p, (size_t)B * NH * Tq, 1e-5);
        check("dq", s, ev.name, r_dq, widen(dq).data(), nq, 2e-2);
        check("dk", s, ev.name, r_dk, widen(dk).data(), nk, 2e-2);
        check("dv", s, ev.name, r_dv, widen(dv).data(), nk, 2e-2);
        if (!ev.name) {
            d_out.assign(out.p, out.p + nq), d_dq.assign(dq.p, dq.p + nq), d_dk.assign(dk.p, dk.p + nk);
            d_dv.assign(dv.p, dv.p + nk), d_lse.assign(lse.p, lse.p + lse.n);
            continue;
        }
        const bool same = memcmp(d_out.data(), out.p, nq * 2) == 0 && memcmp(d_dq.data(), dq.p, nq * 2) == 0 &&
                          memcmp(d_dk.data(), dk.p, nk * 2) == 0 && memcmp(d_dv.data(), dv.p, nk * 2) == 0 &&
                          memcmp(d_lse.data(), lse.p, lse.n * 4) == 0;
        if (ev.flags & FLV_EX2) {
            printf("  (%s the default's bits)\n", same ? "=" : "!=");
        } else {
            printf("  %s\n", same ? "= the default's bits" : "!= the default's bits  FAILED");
            if (!same) g_failures++;
        }
    }
}

/* flash_emu [CASE]: every case, or only case CASE (0-based; flash_emu.sh runs the cases side by side, one
 * process each, since the emulator is single-threaded); flash_emu --cases prints how many there are. */
int main(int argc, char **argv) {
    std::vector<shape> cases;
    cases.push_back(shape{"causal B2 T150 NH4 KV2 D64", 2, 150, 150, 4, 2, 64, false, {}, {}});
    cases.push_back(shape{"causal B1 T130 NH2 KV1 D128", 1, 130, 130, 2, 1, 128, false, {}, {}});
    cases.push_back(shape{"causal B1 T64 NH1 KV1 D64 (one tile)", 1, 64, 64, 1, 1, 64, false, {}, {}});
    /* context parallelism 2 over T 200: 4 chunks of 50, rank 0 holds chunks 0 and 3 */
    shape cp{"positions CP2 Tq100 Tk200 NH4 KV2 D64", 1, 100, 200, 4, 2, 64, true, {}, {}};
    for (int i = 0; i < 50; i++) cp.qpos.push_back(i);
    for (int i = 0; i < 50; i++) cp.qpos.push_back(150 + i);
    for (int j = 0; j < 200; j++) cp.kpos.push_back(j);
    cases.push_back(cp);
    shape cp128 = cp;
    cp128.name = "positions CP2 Tq100 Tk200 NH2 KV1 D128";
    cp128.NH = 2, cp128.KV = 1, cp128.D = 128;
    cases.push_back(cp128);
    if (argc == 2 && strcmp(argv[1], "--cases") == 0) {
        printf("%zu\n", cases.size());
        return 0;
    }
    long only = -1;
    if (argc == 2) {
        char *end;
        only = strtol(argv[1], &end, 10);
        if (*end || only < 0 || only >= (long)cases.size()) {
            fprintf(stderr, "flash_emu: no case '%s' (there are %zu: 0..%zu)\nusage: flash_emu [CASE | --cases]\n", argv[1],
                    cases.size(), cases.size() - 1);
            return 2;
        }
    } else if (argc > 2) {
        fprintf(stderr, "usage: flash_emu [CASE | --cases]\n");
        return 2;
    }
    if (only < 0)
        printf("flash_emu: kern_attention_flash.cuh's kernels on the CPU (emulated warps) vs double-precision attention\n");
    for (size_t i = 0; i < cases.size(); i++) {
        if (only >= 0 && (size_t)only != i) continue;
        g_rng = 99 + i; /* a case's inputs do not depend on which cases ran before it */
        run_case(cases[i]);
    }
    printf("flash_emu: %s (%d failure(s))\n", g_failures ? "FAILED" : "all ok", g_failures);
    return g_failures ? 1 : 0;
}
