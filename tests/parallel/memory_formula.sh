#!/bin/sh
# The distributed optimizer's static memory per rank (weights, gradients and optimizer state as the
# twin's device counted them) equals the documented formula (docs/parallel.md, optimizer.h) within 1%:
# bf16 2 + 4 + 10/DP bytes per parameter (the fp32 master as 16-bit remainders; Megatron's 6 + 12/DP,
# which --no-store-param-remainders gives), fp32 4 + 4 + 8/DP, at TP2 PP2 DP2 and at the 70B seed's
# TP8 PP8 DP16 (1024 ranks, a narrow model: the formula is per parameter).
# Usage: memory_formula.sh BIN_DIR WORK_DIR
set -u
bin=$1 work=$2
mkdir -p "$work" && cd "$work" || exit 1
base="--num-layers 8 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
 --num-query-groups 8 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --vocab-size 1024 --micro-batch-size 1 --train-iters 1 --lr 1e-3 --mock-data
 --data-cache-path $work/cache --log-interval 1 --eval-iters 0 --use-distributed-optimizer --sequence-parallel"
fail() { echo "FAIL: $*"; exit 1; }

# name, world, DP, want, meg (bytes per parameter; meg "-": not checked), flags...: every [memory]
# per-parameter line of the run must give the formula `want`, Megatron's `meg`, and measure within 1% of want
check() {
    name=$1 world=$2 dp=$3 want=$4 meg=$5; shift 5
    # shellcheck disable=SC2086
    env WORLD_SIZE="$world" "$bin/train_llama3" $base --global-batch-size "$dp" "$@" >"$work/$name.log" 2>&1 ||
        { tail -5 "$work/$name.log"; fail "$name: exit status $?"; }
    lines=$(grep "^\[memory\] rank [0-9]*: weights+gradients+optimizer" "$work/$name.log")
    # each pipeline stage's first rank (PP lines) and the last rank
    pp=$(echo "$*" | sed -n 's/.*--pipeline-model-parallel-size \([0-9]*\).*/\1/p')
    [ "$(echo "$lines" | wc -l)" -eq $((${pp:-1} + 1)) ] ||
        fail "$name: expected each pipeline stage's first rank's line and the last rank's: $lines"
    echo "$lines" | while read -r line; do
        echo "$line" | awk -v want="$want" -v dp="$dp" -v meg="$meg" '{
            for (i = 1; i <= NF; i++) {
                if ($i == "bytes/parameter;") got = $(i - 1)
                if ($i == "DP" && $(i - 1) == "at") { at = $(i + 1); f = $(i + 3) }
                if ($i == "Megatron'"'"'s" && $(i + 4) == "=") m = $(i + 5)
            }
            if (at != dp) { print "DP " at " instead of " dp; exit 1 }
            if (f + 0 != want + 0) { print "formula gives " f " instead of " want; exit 1 }
            if (meg != "-" && m + 0 != meg + 0) { print "Megatron gives " m " instead of " meg; exit 1 }
            d = got / want - 1; if (d < 0) d = -d
            if (d > 0.01) { print "measured " got " bytes/parameter, " d * 100 "% off the formula " want; exit 1 }
        }' || fail "$name: $line"
        echo "$name: $line"
    done || exit 1
}

# TP2 PP2 DP2: bf16 2 + 4 + 10/2 = 11; with a whole fp32 master 2 + 4 + 12/2 = 12 (= Megatron's 6 + 12/2);
# with bf16 gradients 2 + 2 + 5; fp32 4 + 4 + 8/2
check tp2pp2dp2_bf16 8 2 11 12 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16
check tp2pp2dp2_bf16_whole 8 2 12 12 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16 \
    --no-store-param-remainders
check tp2pp2dp2_bf16_gradbf16 8 2 9 - --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16 \
    --grad-reduce-in-bf16
check tp2pp2dp2_fp32 8 2 12 - --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
# the 70B seed's layout: 2 + 4 + 10/16 = 6.625 (Megatron's 6 + 12/16 = 6.75)
check tp8pp8dp16_bf16 1024 16 6.625 6.75 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --bf16
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
rm -rf "$work/cache"
echo "memory formula: OK"
