#!/usr/bin/env bash
# FP8 against bf16 on real text: a small Llama-3-style model (4 layers, hidden 128, 8 heads / 4 groups, FFN
# 384, seq 128, global batch 8) trained 300 iterations twice from the same seed on
# tests/data/tokenizer_small/megatron/small_noeod_text_document (Debian man pages and READMEs tokenized by
# Megatron-LM's preprocess_data.py with a 4096-token byte-level BPE in the Llama-3 layout), once in bf16
# and once with the 8B seed's FP8 recipe (hybrid, a 1024-pass max history). Prints both losses (the mean of
# the last 20 iterations, and the last) and their ratio; exit 1 when the FP8 mean is not within 1% of bf16's.
# Usage (repository root): lab/fp8_quality.sh TRAIN_LLAMA3 OUTDIR     (the twin's or a GPU build's binary)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: lab/fp8_quality.sh TRAIN_LLAMA3 OUTDIR" >&2; exit 2; }
bin=$1 out=$2
cd "$(dirname "$0")/.."
mkdir -p "$out"
args=(--num-layers 4 --hidden-size 128 --ffn-hidden-size 384 --num-attention-heads 8 --group-query-attention
    --num-query-groups 4 --seq-length 128 --max-position-embeddings 128 --position-embedding-type rope
    --rotary-base 500000 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights
    --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 4 --global-batch-size 8
    --train-iters 300 --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 20 --lr-decay-iters 300
    --clip-grad 1.0 --weight-decay 0.1 --vocab-size 4096 --split 98,2,0 --eval-iters 0 --log-interval 50
    --seed 1234 --bf16 --data-path tests/data/tokenizer_small/megatron/small_noeod_text_document
    --data-cache-path "$out/cache")
"$bin" "${args[@]}" --metrics-jsonl "$out/bf16.jsonl" >"$out/bf16.log" 2>&1
"$bin" "${args[@]}" --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
    --metrics-jsonl "$out/fp8.jsonl" >"$out/fp8.log" 2>&1
python3 - "$out/bf16.jsonl" "$out/fp8.jsonl" <<'PY'
import json, sys
runs = [[json.loads(l)["lm_loss"] for l in open(p)] for p in sys.argv[1:]]
assert all(len(r) == 300 for r in runs), [len(r) for r in runs]
mean = [sum(r[-20:]) / 20 for r in runs]
print(f"bf16: last-20 mean loss {mean[0]:.5f}, final {runs[0][-1]:.5f}")
print(f"fp8:  last-20 mean loss {mean[1]:.5f}, final {runs[1][-1]:.5f}")
ratio = mean[1] / mean[0]
print(f"fp8 / bf16: {ratio:.4f} (mean of the last 20 iterations), {runs[1][-1] / runs[0][-1]:.4f} (last)")
sys.exit(0 if abs(ratio - 1) <= 0.01 else 1)
PY
