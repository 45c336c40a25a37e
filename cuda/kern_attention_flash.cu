/* FlashAttention-2-style grouped-query attention on the tensor cores, bf16 in and out, fp32
 * accumulation, head dim 64 or 128; causal or position-masked (context parallelism). Never holds a
 * score matrix in memory: scores live in registers one 64-key tile at a time.
 *
 * Tensor-core arithmetic is mma.sync.m16n8k16 (bf16 x bf16 -> fp32) through inline PTX; fragments
 * are read from shared memory with ldmatrix (row-major operands) or ldmatrix.trans (operands
 * that must be transposed: V in P V, K in dS K, dO in P^T dO, Q in dS^T Q). Tiles wholly below the
 * causal diagonal skip the per-element mask. Row strides in shared
 * memory are D + 8 elements, so the 8 rows a quad of lanes reads fall in distinct banks.
 *
 * Forward (k_flash_fwd), one block of 4 warps per (64 queries, head, batch), each warp owning 16
 * query rows: S = Q K^T per 64-key tile, the online softmax in the log2 domain (running max m and
 * sum l per row, rescaling the output accumulator by 2^(m_old - m_new)), P rounded to bf16 for
 * O += P V; at the end O / l and lse = ln2 (m + log2 l). Causal blocks stop at the diagonal tile;
 * the longest rows are scheduled first.
 * Backward, deterministic (no atomics: every output element is summed in a fixed order by one thread):
 *   k_flash_delta    Delta_i = dO_i . O_i (one warp per row);
 *   k_flash_bwd_dq   per (64 queries, head, batch): over key tiles, S and dP = dO V^T, then
 *                    dS = P (dP - Delta) and dQ += dS K; dQ *= scale;
 *   k_flash_bwd_dkv  per (64 keys, head, batch): over 32-query tiles, S^T = K Q^T, P^T,
 *                    dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q; with one head a group dK *= scale
 *                    and both are written; else each head's fp32 share is, and
 *   k_flash_dkv_reduce sums a group's shares in head order (dK times scale).
 *   Scores are recomputed twice (dQ and dK/dV kernels) instead of accumulating dQ with atomics.
 * Tiles stream through two shared-memory buffers filled by cp.async (K/V in the forward and dQ
 * kernels, Q/dO in dK/dV): the next tile is in flight while the warps compute on the current one.
 * Out-of-range rows of a tile are loaded as zeros and masked, so odd T and Tq != Tk are fine.
 *
 * Variants (kern_attention_flash.cuh, FLV_*): TWINRUN_FLASH_VARIANT names a set of them, read once, for
 * A/B timing (tools/flash_bench). Unset or "default" is all of them (the fastest on an H200 at every
 * shape of the 1.5B benchmark: forward 1.21-1.25x, backward 1.14-1.16x the plain kernels; cuda/
 * README.md, "Attention variants"); "plain" runs the kernels above as first tuned.
 *
 * Checks: kern_oracle's attention cases (T 600 .. 4096, D 64 and 128, CP positions), test_kern_attention
 * and test_kern_cp on the GPU; tools/flash_emu on a CPU.
 * Files: this one holds the entry points and the variant choice; kern_attention_flash_launch.cuh the
 * launch templates, instantiated once per (head dim, mask) in kern_attention_flash_d{64,128}_{causal,
 * positions}.cu so that nvcc compiles them side by side (PTX identical to the single file's).
 * On MUSA this file builds only the stubs (tr_cu_flash_supported is false): the simple kernels serve. */
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <type_traits>

#include "kern_attention_flash.h"
#include "kern_common.cuh"

#if !defined(TWINRUN_MUSA)

#include "kern_attention_flash_launch.cuh"

TR_FLASH_EXTERN(64, tr_flash::fl_causal)
TR_FLASH_EXTERN(64, tr_flash::fl_positions)
TR_FLASH_EXTERN(128, tr_flash::fl_causal)
TR_FLASH_EXTERN(128, tr_flash::fl_positions)

namespace {
using namespace tr_flash;

static_assert(TR_CU_FLASH_INEXACT == FLV_EX2, "kern_attention_flash.h's TR_CU_FLASH_INEXACT is FLV_EX2");

/* The variant's names, as TWINRUN_FLASH_VARIANT and tr_cu_flash_set_variant take them: joined by '+' */
const struct {
    const char *name;
    unsigned flags;
} k_variant_names[] = {{"default", FLV_ALL}, {"plain", 0},     {"rt2", FLV_RT2}, {"occ", FLV_OCC},
                       {"bq64", FLV_BQ64},   {"ex2", FLV_EX2}, {"all", FLV_ALL}};

/* flags of a name like "rt2+ex2"; -1 for an unknown part */
int parse_variant(const char *name) {
    unsigned flags = 0;
    for (const char *p = name; *p;) {
        const char *end = strchr(p, '+');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        bool known = false;
        for (const auto &v : k_variant_names)
            if (strlen(v.name) == len && strncmp(v.name, p, len) == 0) flags |= v.flags, known = true;
        if (!known) return -1;
        p += len + (end ? 1 : 0);
    }
    return (int)flags;
}

/* -1 until chosen: by tr_cu_flash_set_variant, else from TWINRUN_FLASH_VARIANT at the first launch */
std::atomic<int> g_variant{-1};

} /* namespace */

unsigned tr_flash_launch::flash_variant() {
    int v = g_variant.load(std::memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv("TWINRUN_FLASH_VARIANT");
        v = env && *env ? parse_variant(env) : (int)FLV_ALL;
        if (v < 0)
            tr_fatal("TWINRUN_FLASH_VARIANT=%s: give default, plain, or names of rt2, occ, bq64, ex2, all joined by +",
                     env);
        g_variant.store(v, std::memory_order_relaxed);
    }
    return (unsigned)v;
}

extern "C" bool tr_cu_flash_supported(int D) { return D == 64 || D == 128; }

extern "C" int tr_cu_flash_set_variant(const char *name) {
    const int v = parse_variant(name ? name : "");
    if (v >= 0) g_variant.store(v, std::memory_order_relaxed);
    return v;
}

extern "C" void tr_cu_flash_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                    const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                                    int D) {
    TR_CHECK(tr_cu_flash_supported(D), "flash attention: head dim must be 64 or 128");
    TR_CHECK((q_pos == NULL) == (k_pos == NULL), "flash attention: give both q_pos and k_pos, or neither");
    TR_CHECK(q_pos != NULL || Tq == Tk, "causal flash attention needs Tq == Tk");
    if (q_pos) {
        const tr_flash::fl_positions m{q_pos, k_pos};
        if (D == 64) tr_flash_launch::forward_d<64>(s, out, lse, q, k, v, B, Tq, Tk, NH, KV, m);
        else tr_flash_launch::forward_d<128>(s, out, lse, q, k, v, B, Tq, Tk, NH, KV, m);
    } else {
        if (D == 64) tr_flash_launch::forward_d<64>(s, out, lse, q, k, v, B, Tq, Tk, NH, KV, tr_flash::fl_causal());
        else tr_flash_launch::forward_d<128>(s, out, lse, q, k, v, B, Tq, Tk, NH, KV, tr_flash::fl_causal());
    }
}

extern "C" void tr_cu_flash_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                     tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos,
                                     int B, int Tq, int Tk, int NH, int KV, int D) {
    TR_CHECK(tr_cu_flash_supported(D), "flash attention: head dim must be 64 or 128");
    TR_CHECK((q_pos == NULL) == (k_pos == NULL), "flash attention: give both q_pos and k_pos, or neither");
    TR_CHECK(q_pos != NULL || Tq == Tk, "causal flash attention needs Tq == Tk");
    if (q_pos) {
        const tr_flash::fl_positions m{q_pos, k_pos};
        if (D == 64) tr_flash_launch::backward_d<64>(s, dq, dk, dv, dout, q, k, v, out, lse, B, Tq, Tk, NH, KV, m);
        else tr_flash_launch::backward_d<128>(s, dq, dk, dv, dout, q, k, v, out, lse, B, Tq, Tk, NH, KV, m);
    } else {
        if (D == 64)
            tr_flash_launch::backward_d<64>(s, dq, dk, dv, dout, q, k, v, out, lse, B, Tq, Tk, NH, KV,
                                            tr_flash::fl_causal());
        else
            tr_flash_launch::backward_d<128>(s, dq, dk, dv, dout, q, k, v, out, lse, B, Tq, Tk, NH, KV,
                                             tr_flash::fl_causal());
    }
}

#else /* TWINRUN_MUSA: no tensor-core path yet; kern_attention.cu keeps to the simple kernels */

extern "C" bool tr_cu_flash_supported(int D) {
    (void)D;
    return false;
}

extern "C" int tr_cu_flash_set_variant(const char *name) {
    (void)name;
    return -1;
}

extern "C" void tr_cu_flash_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                    const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                                    int D) {
    (void)s, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)q_pos, (void)k_pos;
    (void)B, (void)Tq, (void)Tk, (void)NH, (void)KV, (void)D;
    tr_fatal("flash attention is not built for MUSA; TWINRUN_ATTENTION=simple");
}

extern "C" void tr_cu_flash_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                     tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos,
                                     int B, int Tq, int Tk, int NH, int KV, int D) {
    (void)s, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse;
    (void)q_pos, (void)k_pos, (void)B, (void)Tq, (void)Tk, (void)NH, (void)KV, (void)D;
    tr_fatal("flash attention is not built for MUSA; TWINRUN_ATTENTION=simple");
}

#endif
