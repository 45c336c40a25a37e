#!/usr/bin/env python3
"""torch SDPA's cuDNN and flash backends at attn_bench's shapes (causal, 32 query heads / 8 groups,
bf16, [B, T, H, D] tensors seen as [B, H, T, D], as twinrun lays them out: q, k, v and the output's
gradient, which is also how a Hugging Face Llama's backward hands it to SDPA), timed like attn_bench:
CUDA events around each call, the median of 15 after 3 warm-ups; the forward with autograd on (the
training forward, which keeps the log-sum-exp), the backward alone (autograd.grad on a kept graph).
Prints "attn torch-<backend> D .. T .. B .. fwd .. ms bwd .. ms .. / .. TFLOP/s" lines;
lab/attn_bench.sh puts them beside twinrun's. --shape D T B and --backend cudnn|flash time one shape
and one backend (lab/attn_bench.sh's interleaved rounds)."""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

NH, KV, WARMUP, RUNS = 32, 8, 3, 15


def median_ms(fn):
    for _ in range(WARMUP):
        fn()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(RUNS)]
    for a, b in evs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in evs)
    return ms[RUNS // 2]


def bench(backend, name, B, T, D):
    g = torch.Generator(device="cuda").manual_seed(4242)
    mk = lambda h: (torch.rand(B, T, h, D, device="cuda", generator=g, dtype=torch.float32) * 2 - 1).to(
        torch.bfloat16).transpose(1, 2).requires_grad_()
    q, k, v = mk(NH), mk(KV), mk(KV)
    dout = (torch.rand(B, T, NH, D, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16).transpose(1, 2)
    gqa = True
    with sdpa_kernel([backend]):
        try:
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            out = f()
        except RuntimeError:
            # this backend takes no grouped heads: K and V repeated to every query head
            gqa = False
            kk = k.repeat_interleave(NH // KV, dim=1)
            vv = v.repeat_interleave(NH // KV, dim=1)
            f = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True)
            out = f()
        # the forward as training runs it: with autograd on, so the backend also writes the softmax's
        # log-sum-exp for the backward (under no_grad cuDNN runs its inference variant, which does not)
        fwd = median_ms(f)
        bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    flops = 4.0 * B * NH * T * T * D / 2
    print(f"attn {name:<13} D {D:3d} T {T:5d} B {B} fwd {fwd:8.3f} ms bwd {bwd:8.3f} ms  "
          f"{flops / fwd * 1e-9:6.1f} / {2.5 * flops / bwd * 1e-9:6.1f} TFLOP/s{'' if gqa else '  (K/V repeated)'}",
          flush=True)


BACKENDS = {"cudnn": (SDPBackend.CUDNN_ATTENTION, "torch-cudnn"), "flash": (SDPBackend.FLASH_ATTENTION, "torch-flash")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs=3, type=int, metavar=("D", "T", "B"), help="one shape (default: every one)")
    ap.add_argument("--backend", choices=sorted(BACKENDS), help="one backend (default: both)")
    args = ap.parse_args()
    if args.shape and min(args.shape) < 1:
        ap.error(f"--shape {' '.join(map(str, args.shape))}: D, T and B must be positive")
    shapes = [tuple(args.shape)] if args.shape else [(D, T, B) for D in (64, 128)
                                                     for B, T in ((4, 1024), (1, 4096), (1, 8192))]
    backends = [BACKENDS[args.backend]] if args.backend else [BACKENDS["cudnn"], BACKENDS["flash"]]
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    for D, T, B in shapes:
        for backend, name in backends:
            try:
                bench(backend, name, B, T, D)
            except RuntimeError as e:
                print(f"attn {name:<13} D {D:3d} T {T:5d} B {B} unavailable: {str(e).splitlines()[0][:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
