#!/bin/sh
# Activation recomputation on TP2 x PP2 x DP2 (sequence parallel, distributed optimizer, fp32): every
# granularity and method trains to the same bits as the run without it (metrics byte-identical once the
# simulated timings are set aside), and the memory report says what each one saved.
# Usage: recompute.sh BIN_DIR WORK_DIR
set -u
bin=$1 work=$2
mkdir -p "$work" && cd "$work" || exit 1
base="--num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --vocab-size 300 --micro-batch-size 1 --global-batch-size 8 --train-iters 4 --lr 1e-3
 --lr-decay-style cosine --mock-data --data-cache-path $work/cache --log-interval 1 --eval-iters 0
 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer"
fail() { echo "FAIL: $*"; exit 1; }

run() { # name, recompute flags...
    name=$1; shift
    # shellcheck disable=SC2086
    env WORLD_SIZE=8 "$bin/train_llama3" $base "$@" --metrics-jsonl "$work/$name.jsonl" >"$work/$name.log" 2>&1 ||
        { cat "$work/$name.log"; fail "$name: exit status $?"; }
    sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$work/$name.jsonl" >"$work/$name.bits"
}

run plain
[ "$(wc -l <"$work/plain.bits")" -eq 4 ] || fail "the plain run did not log 4 iterations"
for variant in "uniform1:--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" \
               "uniform2:--recompute-granularity full --recompute-method uniform --recompute-num-layers 2" \
               "block1:--recompute-granularity full --recompute-method block --recompute-num-layers 1" \
               "block2:--recompute-granularity full --recompute-method block --recompute-num-layers 2" \
               "selective:--recompute-granularity selective" \
               "activations:--recompute-activations"; do
    name=${variant%%:*} flags=${variant#*:}
    # shellcheck disable=SC2086
    run "$name" $flags
    cmp "$work/plain.bits" "$work/$name.bits" || fail "$name: metrics differ from the run without recompute"
    line=$(grep "^\[memory\] rank 0: activation recompute" "$work/$name.log") || fail "$name: no recompute line in the memory report"
    # the number itself, or nothing (sed -n ... p): a line of another form must not pass as a saving
    saved=$(echo "$line" | sed -nE 's/.*, ([0-9]+(\.[0-9]+)?) kB \(([0-9]+)%\) saved$/\1/p')
    [ -n "$saved" ] || fail "$name: no 'N kB (P%) saved' at the end of: $line"
    awk -v s="$saved" 'BEGIN { exit !(s + 0 > 0) }' || fail "$name: nothing saved: $line"
    echo "$name: same bits; $line"
done
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
rm -rf "$work/cache"
echo "recompute: every granularity and method bit-identical to the plain run"
