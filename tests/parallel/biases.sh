#!/bin/sh
# Megatron's linear biases (its default, no --disable-bias-linear), and --qk-layernorm, across layouts: TP2 x PP2 x DP2 with
# sequence parallelism and the distributed optimizer, and TP2 x CP2 x DP2, train like one rank (fp32,
# 1e-5) — the column-parallel biases split with their rows, the row-parallel ones added once after the
# reduction and their gradients summed over TP with sequence parallelism. --add-qkv-bias likewise.
# Usage: biases.sh BIN_DIR SOURCE_DIR WORK_DIR
set -u
bin=$1 src=$2 work=$3
mkdir -p "$work" && cd "$work" || exit 1
base="--num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0
 --vocab-size 300 --micro-batch-size 1 --global-batch-size 8 --train-iters 6 --lr 3e-3 --lr-decay-style cosine
 --mock-data --data-cache-path $work/cache --log-interval 1 --eval-iters 0"
fail() { echo "FAIL: $*"; exit 1; }
run() { # name world flags...
    name=$1 world=$2; shift 2
    # shellcheck disable=SC2086
    env WORLD_SIZE=$world "$bin/train_llama3" $base "$@" --metrics-jsonl "$work/$name.jsonl" >"$work/$name.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { tail -5 "$work/$name.log"; fail "$name: exit status $rc"; }
}
for bias in "linear:" "qkv:--disable-bias-linear --add-qkv-bias" "qknorm:--disable-bias-linear --qk-layernorm"; do
    kind=${bias%%:*} flags=${bias#*:}
    # shellcheck disable=SC2086
    run "${kind}_one" 1 $flags
    grep -q "number of parameters" "$work/${kind}_one.log" || fail "no banner"
    # shellcheck disable=SC2086
    run "${kind}_tp2pp2dp2" 8 $flags --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
        --sequence-parallel --use-distributed-optimizer
    # shellcheck disable=SC2086
    run "${kind}_tp2cp2dp2" 8 $flags --tensor-model-parallel-size 2 --context-parallel-size 2
    for l in tp2pp2dp2 tp2cp2dp2; do
        python3 "$src/ci/compare_metrics.py" "$work/${kind}_$l.jsonl" "$work/${kind}_one.jsonl" 1e-5 ||
            fail "$kind biases: $l differs from one rank"
    done
done
# the biases are really there: one rank's parameter count grows by q, k, v, o, fc1, fc2 biases per layer
one=$(sed -n 's/.*model parallel rank (0, 0): //p' "$work/linear_one.log")
qkv=$(sed -n 's/.*model parallel rank (0, 0): //p' "$work/qkv_one.log")
[ $((one - qkv)) -eq $((4 * (32 + 2 * 64 + 32))) ] || fail "parameter counts $one (linear) and $qkv (qkv only)"
# a TP2 x PP2 checkpoint with biases resumes on one rank (for two more iterations: a longer schedule,
# which Megatron takes only with --override-opt_param-scheduler) and exports to Hugging Face with them
rm -rf "$work/save" "$work/hf"
run save 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --save "$work/save" --save-interval 6
run resume 1 --train-iters 8 --override-opt_param-scheduler --load "$work/save"
grep -q "loaded checkpoint from $work/save at iteration 6" "$work/resume.log" || fail "resume did not load"
"$bin/ckpt" export "$work/save" --hf "$work/hf" >"$work/export.log" 2>&1 || fail "ckpt export: $(cat "$work/export.log")"
grep -q '"attention_bias":[[:space:]]*true' "$work/hf/config.json" || fail "config.json lacks attention_bias true"
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
rm -rf "$work/cache" "$work/save"
echo "biases: every layout within 1e-5 of one rank; checkpoint resumed across layouts and exported"
