#!/usr/bin/env python3
"""The PyTorch baseline of lab/gpu_bench.sh: Hugging Face LlamaForCausalLM (SDPA attention) trained on
random tokens with fused AdamW and gradient clipping, in one of two recipes:

  bf16  every parameter, gradient and optimizer state in bf16 (the fastest eager recipe);
  amp   fp32 parameters and optimizer state, bf16 autocast for the forward and backward: the recipe of
        twinrun and Megatron (fp32 master weights, bf16 compute).

Prints one JSON object (also written to --json): step time (median of the timed steps), tokens/s,
Megatron's TFLOP/s, peak memory (torch.cuda.max_memory_allocated) and start-up (process start to the
first step).
"""
import time

T_START = time.time()  # before importing torch: start-up counts the import, as twinrun's counts its loading

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402


def megatron_flops(gbs, seq, hidden, layers, heads, groups, kv, ffn, vocab, swiglu=True):
    """FLOPs of one iteration, the formula of engine/train/train_log.c (Megatron's)."""
    q, k = heads * kv, groups * kv
    mlp = 6.0 * hidden * ffn * (3.0 if swiglu else 2.0) * layers
    attn_proj = 6.0 * layers * (hidden * (q + 2.0 * k) + q * hidden)
    logits = 6.0 * hidden * vocab
    return gbs * seq * (mlp + attn_proj + logits) + gbs * seq * seq * 6.0 * q * layers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["bf16", "amp"], required=True)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    # transformers 5 keeps the rotary settings in rope_parameters; 4.x took rope_theta
    rope = ({"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
            if int(transformers.__version__.split(".")[0]) >= 5 else {"rope_theta": 500000.0})
    cfg = LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.groups, max_position_embeddings=a.seq,
        rms_norm_eps=1e-5, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        attention_dropout=0.0, use_cache=False, attn_implementation="sdpa", **rope,
    )
    with dev:  # initialise on the GPU: PyTorch's fast start-up
        model = LlamaForCausalLM(cfg)
    if a.mode == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(a.seed)

    def step():
        ids = torch.randint(0, a.vocab, (a.micro_batch, a.seq), device=dev, generator=gen)
        if a.mode == "amp":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    torch.cuda.synchronize()
    startup = time.time() - T_START
    times, loss = [], None
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    tokens = a.micro_batch * a.seq
    flops = megatron_flops(a.micro_batch, a.seq, a.hidden, a.layers, a.heads, a.groups, a.hidden // a.heads, a.ffn,
                           a.vocab)
    res = {
        "recipe": "pytorch_" + a.mode, "seq": a.seq, "micro_batch": a.micro_batch, "steps": a.steps,
        "step_ms": ms, "tokens_per_s": tokens / (ms / 1e3), "tflops": flops / (ms / 1e3) / 1e12,
        "peak_bytes": torch.cuda.max_memory_allocated(), "startup_s": startup, "last_loss": float(loss.item()),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "gpu": torch.cuda.get_device_name(0), "attn_implementation": getattr(model.config, "_attn_implementation", None),
    }
    print(json.dumps(res), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
