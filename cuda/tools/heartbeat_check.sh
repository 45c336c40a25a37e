#!/usr/bin/env bash
# The job's heartbeat on GPUs (docs/launch.md, "The heartbeat"): two train_llama3 processes of the cuda
# build, one per GPU, torchrun-style on loopback; once both train, one is killed with SIGKILL and the
# other must dump its flight recorder, name the lost rank and exit 1 within 10 s (instead of waiting
# out --distributed-timeout-minutes). Once with rank 1 killed, once with rank 0 (the store's process).
# tests/launch/test_heartbeat.sh checks the same heartbeat with launch_check on a machine without GPUs.
#
# Usage (from the repository root, a machine with 2 GPUs): cuda/tools/heartbeat_check.sh BUILD OUTDIR
set -u
B=${1:?usage: heartbeat_check.sh BUILD_DIR OUTDIR}
OUTDIR=${2:-/tmp/twinrun-heartbeat}
mkdir -p "$OUTDIR"
[ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { echo "heartbeat_check: needs 2 GPUs"; exit 2; }
unset TWINRUN_RENDEZVOUS_DIR # the heartbeat rides the store, which a file rendezvous replaces
export MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 TWINRUN_STORE_TOKEN=heartbeat-check-token-0123456789
job=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 4 --seq-length 32
    --max-position-embeddings 32 --position-embedding-type rope --normalization RMSNorm --swiglu
    --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
    --micro-batch-size 1 --global-batch-size 2 --train-iters 1000000 --lr 1e-4 --mock-data --vocab-size 256
    --eval-iters 0 --log-interval 1 --distributed-timeout-minutes 60 --data-cache-path "$OUTDIR/cache")
fails=0
lost() { # lost NAME PORT VICTIM
    local name=$1 victim=$3 survivor=$((1 - $3)) pids=()
    rm -rf "$OUTDIR/$name" && mkdir -p "$OUTDIR/$name"
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r MASTER_PORT=$2 TWINRUN_FLIGHT_DIR=$OUTDIR/$name \
            "$B/bin/train_llama3" "${job[@]}" >"$OUTDIR/$name/rank$r.log" 2>&1 &
        pids[$r]=$!
    done
    for _ in $(seq 600); do # both training: the reporting rank logged iteration 3
        cat "$OUTDIR/$name"/rank*.log 2>/dev/null | grep -q "iteration *3/" && break
        sleep 0.5
    done
    local t0 t1 rc took
    t0=$(date +%s.%N)
    kill -9 "${pids[$victim]}"
    wait "${pids[$survivor]}"
    rc=$?
    t1=$(date +%s.%N)
    wait "${pids[$victim]}" 2>/dev/null
    took=$(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }")
    local log=$OUTDIR/$name/rank$survivor.log dump
    dump=$(printf "%s/flight_rank%05d.txt" "$OUTDIR/$name" $survivor)
    if [ $rc = 1 ] && grep -q "heartbeat: rank $victim .*stopped first: rank $victim" "$log" && [ -s "$dump" ] &&
        awk "BEGIN { exit !($took < 10) }"; then
        echo "ok   $name: rank $survivor exited 1 after $took s with its flight recorder in $dump"
    else
        echo "FAIL $name: rank $survivor exit $rc after $took s (dump $dump: $([ -s "$dump" ] && echo there || echo missing))"
        tail -5 "$log" | sed 's/^/    /'
        fails=$((fails + 1))
    fi
}
lost kill_rank1 29661 1
lost kill_rank0 29662 0
[ $fails = 0 ] && echo "heartbeat_check: both cases passed"
exit $fails
