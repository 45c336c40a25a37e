# shellcheck shell=bash
# Sourced by ci/twin_multi.sh (the twin's side, on the CPU machine) and ci/gpu_multi.sh (the GPU
# side): the one small fp32 job both backends run through scripts/launch_llama3.sh in each layout.
#   run_layout NAME OUTDIR [VAR=value ...]   runs layout NAME (L1 TP2 DP2 PP2) into OUTDIR/NAME:
#   metrics.jsonl, console.txt, logs/ (per rank), flight/ (every rank's dump at exit), tensorboard/
MULTI_STEPS=${MULTI_STEPS:-20}
layout_vars() {
    case $1 in
    L1) echo "GPUS_PER_NODE=1" ;;
    TP2) echo "GPUS_PER_NODE=2 TP_SIZE=2" ;;
    DP2) echo "GPUS_PER_NODE=2" ;; # the launcher always passes --use-distributed-optimizer
    PP2) echo "GPUS_PER_NODE=2 PP_SIZE=2" ;;
    *) return 1 ;;
    esac
}
run_layout() {
    local name=$1 out
    out=$(mkdir -p "$2/$1" && cd "$2/$1" && pwd)
    shift 2
    rm -rf "$out"
    mkdir -p "$out/flight"
    # shellcheck disable=SC2046
    (cd "$out" && env $(layout_vars "$name") WORLD_SIZE=1 RANK=0 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$((29700 + RANDOM % 200)) USE_BF16=0 NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=176 \
        NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 KV_CHANNELS=8 SEQ_LENGTH=32 VOCAB_SIZE=512 MICRO_BATCH_SIZE=1 \
        GLOBAL_BATCH_SIZE=4 TRAIN_SAMPLES=$((4 * MULTI_STEPS)) LR_DECAY_SAMPLES=$((4 * MULTI_STEPS)) \
        LR_WARMUP_SAMPLES=8 LEARNING_RATE=3e-3 MIN_LEARNING_RATE=3e-4 LOG_INTERVAL=5 EVAL_ITERS=0 \
        EXP_NAME="$name" USE_EXP_STRUCTURE=1 EXP_DIR=. LOG_DIR=logs TWINRUN_FLIGHT_DIR="$out/flight" \
        TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
        EXTRA_ARGS="--seed 1234 --metrics-jsonl metrics.jsonl --log-timers-to-tensorboard --log-memory-to-tensorboard" \
        "$@" bash "$REPO/scripts/launch_llama3.sh" >console.txt 2>&1)
}
