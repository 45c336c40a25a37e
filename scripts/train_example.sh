#!/usr/bin/env bash
# An example training job: a short Llama-3 training run on the CPU twin with Megatron-LM's flags,
# in the shape of the user's 8B script (GQA, SwiGLU, RoPE, untied embeddings, bf16, cosine lr in
# samples) and the 70B guide's parallel flags (TP, PP, sequence parallel, distributed optimizer) on
# 8 ranks in one process (TP2 x PP2 x DP2), scaled down so it runs in seconds. (The main job,
# `make run`, is ci/run_main.sh: the thousand-card scenario.)
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/run
mkdir -p "$out"

MODEL_ARGS=(
  --num-layers 2 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 8
  --group-query-attention --num-query-groups 2 --seq-length 64 --max-position-embeddings 64
  --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu
  --untie-embeddings-and-output-weights --disable-bias-linear --init-method-std 0.02
  --attention-dropout 0.0 --hidden-dropout 0.0
)
TRAINING_ARGS=(
  --micro-batch-size 2 --global-batch-size 8 --train-samples 320
  --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-samples 32 --lr-decay-samples 320
  --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --seed 1234
)
DATA_ARGS=(--mock-data --tokenizer-type NullTokenizer --vocab-size 512 --split 99,1,0
           --data-cache-path "$out/cache")
PARALLEL_ARGS=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --context-parallel-size 1
               --sequence-parallel --use-distributed-optimizer)
LOG_ARGS=(--log-interval 5 --eval-interval 20 --eval-iters 2 --metrics-jsonl "$out/metrics.jsonl")

WORLD_SIZE=${WORLD_SIZE:-8} ${TRAIN_LLAMA3:-build/twin/bin/train_llama3} "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" \
    "${PARALLEL_ARGS[@]}" "${DATA_ARGS[@]}" "${LOG_ARGS[@]}"
echo "twinrun: metrics in $out/metrics.jsonl"
