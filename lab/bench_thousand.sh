#!/usr/bin/env bash
# Benchmark: the thousand-card layout of the 70B seed (TP8 x PP8 x CP1 x DP16 = 1024 ranks, 80 layers,
# distributed optimizer, sequence parallel flag as the seed sets it) with tiny widths, on the twin.
# Prints Megatron's iteration lines (simulated time per iteration on the chosen device), the per-rank
# memory report, and this process's wall time per iteration and peak RSS.
#   lab/bench_thousand.sh [STEPS [more train_llama3 flags]]
# LAUNCH starts it another way than one process, e.g. LAUNCH="mpirun -np 4 -x TWINRUN_RANKS_PER_PROCESS=256"
# (lab/bench_multiproc.sh); BIN picks the build (default build/twin/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-5}
shift || true
out=build/bench_thousand
mkdir -p "$out"
args=(--num-layers 80 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
      --num-query-groups 8 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --bf16 --micro-batch-size 1 --global-batch-size 32
      --train-iters "$steps" --lr 1.5e-4 --min-lr 1.5e-5 --lr-decay-style cosine --lr-warmup-iters 1
      --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --context-parallel-size 1
      --sequence-parallel --use-distributed-optimizer --log-interval 1 --log-throughput
      --mock-data --vocab-size "${VOCAB:-1024}" --eval-iters 0 --data-cache-path "$out/cache")
export TWINRUN_TWIN_DEVICE=${TWINRUN_TWIN_DEVICE:-H100}
if [ -n "${LAUNCH:-}" ]; then
    # shellcheck disable=SC2086
    $LAUNCH "${BIN:-build/twin/bin}/train_llama3" "${args[@]}" "$@"
else
    WORLD_SIZE=1024 "${BIN:-build/twin/bin}/train_llama3" "${args[@]}" "$@"
fi
