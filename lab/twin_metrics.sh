#!/usr/bin/env bash
# Writes the twin's side of the twin-vs-GPU comparison (lab/gpu_check.sh, lab/gpu_multi.sh) into DIR
# (default .gpu_inputs): the arguments, the metrics and the flight dumps (collective trace:
# lab/compare_flight.py) of the same small run in fp32 and bf16. On any machine with a twin build.
#   lab/twin_metrics.sh [DIR]   TWINRUN_STEPS: iterations (default 50); TWIN_BIN: the twin's train_llama3
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu_inputs}
STEPS=${TWINRUN_STEPS:-50}
mkdir -p "$DIR"
base="--num-layers 2 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --group-query-attention
 --num-query-groups 2 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope --rotary-base 500000
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
 --attention-dropout 0.0 --hidden-dropout 0.0 --micro-batch-size 2 --global-batch-size 4 --train-iters $STEPS
 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 5 --clip-grad 1.0 --weight-decay 0.1
 --mock-data --vocab-size 512 --eval-iters 0 --log-interval 10 --seed 1234"
for dt in fp32 bf16; do
    args="$base"; [ $dt = bf16 ] && args="$args --bf16"
    echo $args > "$DIR/args_$dt.txt"
    rm -rf "$DIR/flight_$dt" && mkdir -p "$DIR/flight_$dt"
    # shellcheck disable=SC2086
    TWINRUN_FLIGHT_DIR="$DIR/flight_$dt" TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
        "${TWIN_BIN:-build/twin/bin/train_llama3}" $args --data-cache-path "$DIR/cache_$dt" \
        --metrics-jsonl "$DIR/twin_$dt.jsonl" >/dev/null
    rm -rf "$DIR/cache_$dt"
    echo "twin $dt: $(wc -l < "$DIR/twin_$dt.jsonl") iterations -> $DIR/twin_$dt.jsonl"
done
