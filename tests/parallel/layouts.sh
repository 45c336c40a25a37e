#!/usr/bin/env bash
# Every layout computes the single-rank model: the same Llama (GQA, untied, 8 layers), seed, mock data
# and global batch, trained for STEPS steps in fp32 under (TP, PP, CP, DP) layouts up to the thousand-card
# TP8 x PP8 x DP16, with and without the distributed optimizer and sequence parallelism; each run's per-step lm loss and grad norm
# must match the one-rank run within 1e-5 relative (ci/compare_metrics.py).
# Usage: layouts.sh BIN_DIR SOURCE_DIR WORK_DIR [STEPS] [MIN_WORLD-MAX_WORLD]
# The world range runs only the layouts of that many ranks (default 1-1024), so ctest runs the sweep
# as two tests on two cores, and the coverage build a short form (the 1024-rank layout runs the same
# code as the 16-rank ones; at -O0 it alone would take most of the stage).
set -euo pipefail
bin=$1 src=$2 work=$3 steps=${4:-20} worlds=${5:-1-1024}
min_world=${worlds%-*} max_world=${worlds#*-}
mkdir -p "$work"
args=(--num-layers 8 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
      --num-query-groups 8 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 32 --train-iters "$steps"
      --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1
      --mock-data --vocab-size 1024 --eval-iters 0 --log-interval 1000 --data-cache-path "$work/cache")
WORLD_SIZE=1 "$bin/train_llama3" "${args[@]}" --metrics-jsonl "$work/base.jsonl" >/dev/null
fail=0
#      TP PP CP DP
for lay in "2 1 1 1" "1 2 1 1" "1 1 2 1" "1 1 1 2" "2 2 1 2" "2 2 2 2" "4 2 1 2" "8 8 1 16"; do
    read -r tp pp cp dp <<<"$lay"
    world=$((tp * pp * cp * dp))
    if [ "$world" -lt "$min_world" ] || [ "$world" -gt "$max_world" ]; then
        echo "tp${tp}_pp${pp}_cp${cp}_dp${dp}: not in this run (world $world outside $worlds)"; continue
    fi
    for dist in no yes; do
        [ "$dist" = yes ] && [ $((dp * cp)) = 1 ] && [ "$tp" = 1 ] && continue
        # the distributed-optimizer runs also split the sequence over TP (--sequence-parallel), as the
        # thousand-card seed does; the others run plain TP
        extra=(); [ "$dist" = yes ] && extra=(--use-distributed-optimizer)
        [ "$dist" = yes ] && [ "$tp" -gt 1 ] && extra+=(--sequence-parallel)
        name="tp${tp}_pp${pp}_cp${cp}_dp${dp}_dist-${dist}"
        WORLD_SIZE=$world "$bin/train_llama3" "${args[@]}" --tensor-model-parallel-size "$tp" \
            --pipeline-model-parallel-size "$pp" --context-parallel-size "$cp" "${extra[@]}" \
            --metrics-jsonl "$work/$name.jsonl" >/dev/null
        echo "$name (world $world):"
        python3 "$src/ci/compare_metrics.py" "$work/$name.jsonl" "$work/base.jsonl" 1e-5 || fail=1
    done
done
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
[ $fail -ne 0 ] || rm -rf "$work/cache"
exit $fail
