# shellcheck shell=bash
# Sourced by lab/twin_multi.sh (the twin's side), lab/gpu_multi.sh (the GPU side) and
# lab/gpu_multi_bench.sh: the one small fp32 job both backends run through scripts/launch_llama3.sh
# in each layout.
#   run_layout NAME OUTDIR [VAR=value ...]   runs layout NAME into OUTDIR/NAME: metrics.jsonl,
#     console.txt, logs/ (per rank), flight/ (every rank's dump at exit), tensorboard/. The VAR=value
#     words come last, so they override the small job's (the benchmark's model and batch); with
#     MULTI_TIMEOUT set (seconds) the launcher is stopped after that long (it stops its ranks).
#   NAME is a layout, or MODEL_LAYOUT (llama1.5b_TP2PP2): the part after the last '_' is the layout,
#     L1 (one GPU) or TPn, PPn, DPn in that order, each optional (TP2, DP2, PP2, TP2PP2DP2, ...).
#   multi_layouts_for N   the small job's layouts for N GPUs (2: L1 TP2 DP2 PP2; 4 and 8 add theirs).
MULTI_STEPS=${MULTI_STEPS:-20}
# "tp pp dp" of a layout name, or nothing (status 1) when it is not one
layout_sizes() {
    local l=${1##*_}
    [ "$l" = L1 ] && { echo "1 1 1"; return 0; }
    [[ $l =~ ^(TP([0-9]+))?(PP([0-9]+))?(DP([0-9]+))?$ ]] && [ -n "$l" ] || return 1
    echo "${BASH_REMATCH[2]:-1} ${BASH_REMATCH[4]:-1} ${BASH_REMATCH[6]:-1}"
}
layout_vars() { # the launcher's variables of a layout (DP: the launcher always passes --use-distributed-optimizer)
    local tp pp dp
    read -r tp pp dp < <(layout_sizes "$1") || return 1
    echo "GPUS_PER_NODE=$((tp * pp * dp)) TP_SIZE=$tp PP_SIZE=$pp"
}
multi_layouts_for() { # the small job (2 layers, 2 query groups, global batch 4) bounds TP and PP at 2
    local l="L1 TP2 DP2 PP2"
    [ "$1" -ge 4 ] && l="$l TP2DP2 TP2PP2 PP2DP2 DP4"
    [ "$1" -ge 8 ] && l="$l TP2PP2DP2 TP2DP4"
    echo "$l"
}
run_layout() {
    local name=$1 out vars
    vars=$(layout_vars "$name") || { echo "run_layout: $name is not a layout" >&2; return 2; }
    out=$(mkdir -p "$2/$1" && cd "$2/$1" && pwd)
    shift 2
    rm -rf "$out"
    mkdir -p "$out/flight"
    # shellcheck disable=SC2086
    (cd "$out" && env $vars WORLD_SIZE=1 RANK=0 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$((29700 + RANDOM % 200)) USE_BF16=0 NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=176 \
        NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 KV_CHANNELS=8 SEQ_LENGTH=32 VOCAB_SIZE=512 MICRO_BATCH_SIZE=1 \
        GLOBAL_BATCH_SIZE=4 TRAIN_SAMPLES=$((4 * MULTI_STEPS)) LR_DECAY_SAMPLES=$((4 * MULTI_STEPS)) \
        LR_WARMUP_SAMPLES=8 LEARNING_RATE=3e-3 MIN_LEARNING_RATE=3e-4 LOG_INTERVAL=5 EVAL_ITERS=0 \
        EXP_NAME="$name" USE_EXP_STRUCTURE=1 EXP_DIR=. LOG_DIR=logs TWINRUN_FLIGHT_DIR="$out/flight" \
        TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
        EXTRA_ARGS="--seed 1234 --metrics-jsonl metrics.jsonl --log-timers-to-tensorboard --log-memory-to-tensorboard" \
        "$@" ${MULTI_TIMEOUT:+timeout "$MULTI_TIMEOUT"} bash "$REPO/scripts/launch_llama3.sh" >console.txt 2>&1)
}
