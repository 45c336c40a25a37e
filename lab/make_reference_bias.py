#!/usr/bin/env python3
"""make_reference_bias.py OUT_DIR: writes a Hugging Face reference like tests/data/tiny_gqa, for a Llama
with Megatron's linear biases (transformers' attention_bias and mlp_bias true) and a vocabulary that is
not a multiple of 128 (500: twinrun pads it to 512 and keeps the padding out of the softmax).

Runs on any machine with transformers and torch (a CPU is enough): the float32 weights
are drawn once, then everything is computed in float64 on the CPU from them, as tiny_gqa was.

OUT_DIR gets config.json + model.safetensors (the float32 weights, biases and norm weights perturbed away
from 0 and 1 on purpose), reference.safetensors (tokens [6, 2, 33], step-0 logits / loss / every
gradient, six AdamW steps' losses and grad norms, the final weights) and reference.json, which
`refcheck OUT_DIR` reads (tests/reference/tests.cmake runs it when tests/data/tiny_gqa_bias exists)."""
import json
import math
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, HIDDEN, HEADS, KV, FFN, LAYERS, SEQ, BATCH, STEPS = 500, 64, 8, 2, 176, 2, 32, 2, 6
THETA, EPS, SEED = 500000.0, 1e-5, 1234
BETAS, ADAM_EPS, WD, CLIP = (0.9, 0.95), 1e-8, 0.1, 1.0
MAX_LR, MIN_LR, WARMUP, DECAY = 3e-3, 3e-4, 4, 12  # samples, Megatron's OptimizerParamScheduler


def megatron_lr(samples):
    """Megatron's cosine schedule with linear warmup from 0, in samples."""
    if samples <= WARMUP:
        return MAX_LR * samples / WARMUP
    if samples > DECAY:
        return MIN_LR
    ratio = (samples - WARMUP) / (DECAY - WARMUP)
    return MIN_LR + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (MAX_LR - MIN_LR)


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HIDDEN // HEADS,
                      max_position_embeddings=128, rms_norm_eps=EPS, rope_theta=THETA,  # 4.x
                      rope_parameters={"rope_type": "default", "rope_theta": THETA},  # 5.x
                      tie_word_embeddings=False,
                      attention_bias=True, mlp_bias=True, hidden_act="silu", initializer_range=0.02,
                      attention_dropout=0.0)
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():  # norms away from 1, biases away from 0: their gradients must be generic
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.05 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)  # config.json + model.safetensors (float32)

    tokens = torch.randint(0, VOCAB, (STEPS, BATCH, SEQ + 1), dtype=torch.int64)
    m = model.double()
    names = [n for n, _ in m.named_parameters()]
    params = [p for _, p in m.named_parameters()]

    def loss_of(step):
        x, y = tokens[step][:, :-1], tokens[step][:, 1:]
        logits = m(input_ids=x).logits  # [B, S, VOCAB]
        return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    ref = {"tokens": tokens.to(torch.int32)}
    logits, loss = loss_of(0)
    loss.backward()
    ref["logits"] = logits.detach().float()
    ref["loss"] = loss.detach().float().reshape(1)
    for n, p in zip(names, params):
        ref["grad." + n] = p.grad.detach().float().clone()
    m.zero_grad(set_to_none=True)

    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=0.0, betas=BETAS, eps=ADAM_EPS)
    losses, norms, lrs = [], [], []
    for k in range(STEPS):
        lr = megatron_lr(k * BATCH)
        lrs.append(lr)
        _, loss = loss_of(k)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)  # coefficient CLIP / (norm + 1e-6), as Megatron
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        norms.append(norm.item())
    ref["train.losses"] = torch.tensor(losses, dtype=torch.float32)
    ref["train.grad_norms"] = torch.tensor(norms, dtype=torch.float32)
    for n, p in zip(names, params):
        ref["final." + n] = p.detach().float().clone()
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out, "reference.safetensors"))

    meta = {
        "name": os.path.basename(os.path.normpath(out)),
        "source": "transformers LlamaForCausalLM with attention_bias and mlp_bias, float64 on CPU from float32 "
                  "weights (lab/make_reference_bias.py)",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model": {"vocab": VOCAB, "hidden": HIDDEN, "heads": HEADS, "kv": KV, "ffn": FFN, "layers": LAYERS,
                  "seq": SEQ, "batch": BATCH, "theta": THETA, "eps": EPS, "seed": SEED, "steps": STEPS,
                  "attention_bias": True, "mlp_bias": True},
        "loss": "mean token cross entropy over batch*seq (softmax over the 500 vocabulary logits)",
        "inputs": "tokens[k][:, :-1] predicts tokens[k][:, 1:]; step-0 logits/loss/grads use tokens[0]",
        "optimizer": {
            "kind": "AdamW", "betas": list(BETAS), "eps": ADAM_EPS, "weight_decay": WD,
            "weight_decay_on": "parameters with 2 or more dims only (no decay on biases and norms)",
            "clip_grad_global_norm": CLIP, "lr_per_step": lrs,
            "lr_schedule": {"style": "cosine", "max_lr": MAX_LR, "min_lr": MIN_LR, "warmup_samples": WARMUP,
                            "decay_samples": DECAY, "global_batch": BATCH,
                            "rule": "lr for iteration i (0-based) = schedule(i*global_batch samples)"},
        },
        "outputs": ["train.losses[k]: loss of iteration k before its update",
                    "train.grad_norms[k]: global grad L2 norm before clipping",
                    "final.<param>: weights after all K updates"],
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(f"make_reference_bias: wrote {out} (step-0 loss {ref['loss'].item():.6f}, final loss {losses[-1]:.6f})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
