#!/usr/bin/env python3
"""torch.mm on the GEMMs of one training step of a Llama-3 model, product by product, to set beside the
GEMM rows of twinrun's profile (TWINRUN_GPU_PROFILE, lab/gpu_bench.sh --profile) at the same shapes.

Each linear y[N, out] = x[N, in] @ W[out, in]^T runs three products: the forward, the input gradient
dy @ W, and the weight gradient dy^T @ x with an fp32 output (the fp32 main gradient twinrun and
Megatron keep; torch.mm's out_dtype). The layers' linears are qkv (out = hidden + 2 x groups x head
dim), the attention's output projection, gate and up (twinrun fuses them into one product of 2 x FFN
outputs; here two, as PyTorch's Llama runs them), down; then the output layer (vocabulary outputs).
Random bf16 operands; the mean of 20 back-to-back calls after 3 warm-ups (CUDA events). Prints a line
per product (ms and TFLOP/s per direction) and the step's sum: layers x the layer's products + the
output layer's.

Usage: torch_gemm.py [--tokens N] [--layers L] [--hidden H] [--ffn F] [--heads NH] [--groups G]
                     [--vocab V]   (defaults: the 70B seed's layer x 2 at seq 8192, micro-batch 1)
"""
import argparse
import sys

WARMUP, RUNS = 3, 20


def mean_ms(torch, fn):
    """The mean of RUNS back-to-back calls between two CUDA events, after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(RUNS):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / RUNS


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--ffn", type=int, default=28672)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    a = ap.parse_args()
    for name in ("tokens", "layers", "hidden", "ffn", "heads", "groups", "vocab"):
        if getattr(a, name) <= 0:
            sys.exit(f"torch_gemm.py: --{name} must be positive")
    if a.hidden % a.heads or a.heads % a.groups:
        sys.exit("torch_gemm.py: --hidden must be a multiple of --heads, and --heads of --groups")
    import torch

    if not torch.cuda.is_available():
        sys.exit("torch_gemm.py: needs torch with a CUDA device")
    hd = a.hidden // a.heads
    N = a.tokens
    # (name, in, out, count in the step)
    layer = [("qkv", a.hidden, a.hidden + 2 * a.groups * hd), ("proj", a.hidden, a.hidden),
             ("gate", a.hidden, a.ffn), ("up", a.hidden, a.ffn), ("down", a.ffn, a.hidden)]
    prods = [(n, i, o, a.layers) for n, i, o in layer] + [("output", a.hidden, a.vocab, 1)]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: N {N}, {a.layers} layers")
    total = 0.0
    g = torch.Generator(device="cuda").manual_seed(1234)
    for name, i, o, count in prods:
        x = torch.randn(N, i, device="cuda", dtype=torch.bfloat16, generator=g)  # [N, in]
        w = torch.randn(o, i, device="cuda", dtype=torch.bfloat16, generator=g)  # [out, in]
        dy = torch.randn(N, o, device="cuda", dtype=torch.bfloat16, generator=g)  # [N, out]
        flop = 2.0 * N * i * o
        fwd = mean_ms(torch, lambda: x @ w.t())
        dgrad = mean_ms(torch, lambda: dy @ w)
        wgrad = mean_ms(torch, lambda: torch.mm(dy.t(), x, out_dtype=torch.float32))
        total += count * (fwd + dgrad + wgrad)
        tf = [flop / ms / 1e9 for ms in (fwd, dgrad, wgrad)]
        print(f"gemm {name:6s} in {i:6d} out {o:6d} x{count}: fwd {fwd:8.3f} ms {tf[0]:5.0f} TFLOP/s | "
              f"dgrad {dgrad:8.3f} ms {tf[1]:5.0f} | wgrad>fp32 {wgrad:8.3f} ms {tf[2]:5.0f}", flush=True)
        del x, w, dy
    print(f"step: {total:.1f} ms of GEMMs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
