#!/usr/bin/env bash
# The multi-GPU checks, on a machine with 2 GPUs or more:
#   1. build the cuda preset;
#   2. each layout of lab/multi_layouts.sh for the machine's GPU count (2: 1 GPU; TP=2; DP=2 with the
#      distributed optimizer; PP=2; 4 and 8 GPUs add TP2DP2, TP2PP2, ...: multi_layouts_for),
#      launched by scripts/launch_llama3.sh (node-level env -> per-GPU torchrun-style variables ->
#      TCP rendezvous -> NCCL), 20 fp32 steps: each multi-GPU run vs the 1-GPU run within 1e-5, each
#      GPU run vs the twin's run of the same layout within 1e-5, and the collective traces (flight
#      dumps) of GPU and twin identical;
#   3. an injected hang (TWINRUN_FAULTS) on rank 1 of DP=2 with --distributed-timeout-minutes 0.25:
#      the watchdog must end the job non-zero within the timeout, and blame must name rank 1;
#   4. TP=2 again under mpirun, where the machine has it;
#   5. TensorBoard's own reader on the 1-GPU run's event file; the 50-step twin-vs-GPU run with its
#      trace; coll_smoke with 2 ranks; ctest -L gpu.
# Usage (repository root): lab/gpu_multi.sh [--debs DIR] [--build DIR] [--twin TWIN_DIR] OUTDIR
#   OUTDIR   the logs' tarball gpu_multi_logs.tar.gz (made if absent); the summary on stdout
#   --twin   the twin's side, from lab/twin_metrics.sh and lab/twin_multi.sh on any machine with a twin
#            build (default .gpu_inputs at the repository root)
#   --build  the cuda build folder (default /tmp/build-cuda-dev); --debs: a folder of .deb files for what
#            the system lacks (lab/gpu_env.sh)
# Environment (lab/gpu_multi_bench.sh sets them): MULTI_LAYOUTS (the layouts of step 2, default by the
#   GPU count nvidia-smi lists), TWINRUN_MULTI_ONLY=layouts (steps 2 and 3 only), TWINRUN_MULTI_BIN (a
#   train_llama3 already built, blame beside it: no build), TWINRUN_MULTI_BACKEND (cuda; twin: the dry
#   run of steps 2-3 on the twin build), TWINRUN_MULTI_WORK (scratch folder, default /tmp/gpu_multi).
# Exit status 1 when a check failed or the build did; every check runs and prints its verdict.
set -u
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
lab_twin_outdir "lab/gpu_multi.sh [--debs DIR] [--build DIR] [--twin TWIN_DIR] OUTDIR" lab/twin_multi.sh
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=${GPU_BUILD:-/tmp/build-cuda-dev}
W=${TWINRUN_MULTI_WORK:-/tmp/gpu_multi}
BACKEND=${TWINRUN_MULTI_BACKEND:-cuda}
ONLY=${TWINRUN_MULTI_ONLY:-}
rm -rf "$W"
mkdir -p "$W"
log() { echo "== $*"; }
pass=0 fail=0
check() { # check NAME COMMAND...: runs it, counts it
    if "${@:2}" >"$W/check.txt" 2>&1; then pass=$((pass + 1)); echo "ok   $1: $(tail -1 "$W/check.txt")"
    else fail=$((fail + 1)); echo "FAIL $1:"; tail -8 "$W/check.txt" | sed 's/^/    /'; fi
}
finish() { # the summary line, the logs' tarball, the exit status
    log "summary: $pass passed, $fail failed"
    tar czf "$OUTDIR/gpu_multi_logs.tar.gz" -C "$(dirname "$W")" --exclude='*/checkpoints' --exclude='*/benchmark_cache_*' \
        --exclude='cache_*' "$(basename "$W")" || { echo "gpu_multi.sh: packing the logs failed"; exit 1; }
    [ "$fail" -eq 0 ]
    exit
}
# shellcheck source=lab/multi_layouts.sh
. "$REPO/lab/multi_layouts.sh"
ngpu=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU')
LAYOUTS=${MULTI_LAYOUTS:-$(multi_layouts_for "$ngpu")}

if [ -z "$ONLY" ]; then
    log machine
    nvidia-smi -L
    nvidia-smi topo -m 2>/dev/null | head -4
    echo "mpirun: $(command -v mpirun || echo none)"; command -v mpirun >/dev/null && mpirun --version 2>&1 | head -1
    python3 -c 'import tensorboard; print("tensorboard", tensorboard.__version__)' 2>&1 | tail -1
fi

cd "$REPO" || exit 1
if [ -n "${TWINRUN_MULTI_BIN:-}" ]; then
    BIN=$TWINRUN_MULTI_BIN
    B=$(cd "$(dirname "$BIN")/.." && pwd)
else
    log build
    lab_deps "$DEBS" || exit 1
    t0=$(date +%s)
    gpu_build "$B" "$W/build.log" || { tail -30 "$W/build.log"; lab_die "the build failed"; }
    echo "built in $(($(date +%s) - t0)) s"
    BIN=$B/bin/train_llama3
fi

log "layouts through scripts/launch_llama3.sh (torchrun-style variables, TCP rendezvous): $LAYOUTS"
for l in $LAYOUTS; do
    t0=$(date +%s)
    run_layout "$l" "$W/multi" TWINRUN_BACKEND="$BACKEND" TRAIN_BIN="$BIN"
    rc=$?
    echo "$l: exit $rc in $(($(date +%s) - t0)) s; $(grep -c iteration "$W/multi/$l/console.txt") log lines"
    rm -rf "$W/multi/$l"/benchmark_cache_* # the mock data's indexes (~75 MB), which nothing reads again
    [ $rc -eq 0 ] || tail -15 "$W/multi/$l/console.txt"
done
for l in $LAYOUTS; do
    [ "$l" = L1 ] && continue
    check "$l vs 1 GPU (fp32, 1e-5)" python3 ci/compare_metrics.py "$W/multi/$l/metrics.jsonl" "$W/multi/L1/metrics.jsonl" 1e-5
done
for l in $LAYOUTS; do
    check "$l GPU vs twin (fp32, 1e-5)" python3 ci/compare_metrics.py "$W/multi/$l/metrics.jsonl" "$TWIN/multi/$l/metrics.jsonl" 1e-5
    check "$l collective trace GPU vs twin" python3 lab/compare_flight.py "$W/multi/$l/flight" "$TWIN/multi/$l/flight"
done
grep -h "throughput per GPU" "$W/multi/TP2/console.txt" | tail -1

log "injected hang on rank 1 of DP=2, --distributed-timeout-minutes 0.25"
t0=$(date +%s)
run_layout DP2 "$W/hang" TWINRUN_BACKEND="$BACKEND" TRAIN_BIN="$BIN" TWINRUN_FLIGHT_AT_EXIT=0 \
    TWINRUN_FAULTS="hang@3:rank=1,group=dp_cp,op=all_reduce" DISTRIBUTED_TIMEOUT_MINUTES=0.25 KILL_GRACE_SECONDS=3
rc=$?
took=$(($(date +%s) - t0))
rm -rf "$W"/hang/DP2/benchmark_cache_*
echo "hang job: exit $rc after $took s (timeout 15 s + start-up)"
grep -h "watchdog\|fault injected\|flight recorder dumped\|exiting after\|训练失败" "$W/hang/DP2/console.txt" "$W"/hang/DP2/logs/*.log | sort -u
check "hang: job exits non-zero" test $rc -ne 0
check "hang: within the timeout (< 90 s in all)" test "$took" -lt 90
"$B/bin/blame" "$W"/hang/DP2/flight/flight_rank*.txt >"$W/hang/blame.txt" 2>&1
cat "$W/hang/blame.txt"
check "hang: blame names rank 1" grep -q "stopped first: rank 1" "$W/hang/blame.txt"

[ "$ONLY" = layouts ] && finish

log "TP=2 under mpirun"
if command -v mpirun >/dev/null; then
    mkdir -p "$W/mpi" && cd "$W/mpi" || exit 1
    read -r -a cmd <<<"$(sed -n 's/^训练命令: //p' "$W/multi/TP2/console.txt")"
    t0=$(date +%s)
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
        -x MASTER_PORT=29811 "${cmd[@]}" >console.txt 2>&1
    rc=$?
    echo "mpirun TP2: exit $rc in $(($(date +%s) - t0)) s"
    check "mpirun TP2: exit 0" test $rc -eq 0
    cd "$REPO" || exit 1
    check "mpirun TP2 vs 1 GPU (fp32, 1e-5)" python3 ci/compare_metrics.py "$W/mpi/metrics.jsonl" "$W/multi/L1/metrics.jsonl" 1e-5
else
    echo "no mpirun on this machine: only torchrun-style launches were possible"
fi

log "TensorBoard's reader on the 1-GPU run"
check "EventAccumulator reads the event file" python3 lab/read_tensorboard.py "$W/multi/L1/L1/tensorboard"
cat "$W/check.txt"

log "50 steps twin vs GPU (1 GPU), with the collective trace"
for dt in fp32 bf16; do
    args=$(cat "$TWIN/args_$dt.txt")
    mkdir -p "$W/f50_$dt"
    # shellcheck disable=SC2086
    TWINRUN_FLIGHT_DIR="$W/f50_$dt" TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 "$BIN" $args \
        --data-cache-path "$W/cache_$dt" --metrics-jsonl "$W/gpu_$dt.jsonl" >"$W/gpu_$dt.log" 2>&1
    rc=$?
    check "50 steps $dt: train_llama3 exit 0" test $rc -eq 0
    tol=1e-5; [ $dt = bf16 ] && tol=2e-2
    check "50 steps $dt GPU vs twin ($tol)" python3 ci/compare_metrics.py "$W/gpu_$dt.jsonl" "$TWIN/twin_$dt.jsonl" $tol
    check "50 steps $dt collective trace" python3 lab/compare_flight.py "$W/f50_$dt" "$TWIN/flight_$dt"
done

log "coll_smoke, 2 ranks (file rendezvous), and the timeout case"
export TWINRUN_RENDEZVOUS_DIR
TWINRUN_RENDEZVOUS_DIR=$(mktemp -d)
(TWINRUN_RUN_ID=two timeout 120 "$B/bin/coll_smoke" 1 2 >"$W/smoke1.txt" 2>&1) &
p=$!
check "coll_smoke 2 ranks" env TWINRUN_RUN_ID=two timeout 120 "$B/bin/coll_smoke" 0 2
wait $p
check "coll_smoke 2 ranks, rank 1 exit 0" test $? -eq 0
(TWINRUN_RUN_ID=late TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$W timeout 120 "$B/bin/coll_smoke" 1 2 timeout >"$W/smoke2.txt" 2>&1) &
p=$!
check "coll_smoke timeout" env TWINRUN_RUN_ID=late TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$W timeout 120 "$B/bin/coll_smoke" 0 2 timeout
wait $p
check "coll_smoke timeout, rank 1 exit 0" test $? -eq 0
unset TWINRUN_RENDEZVOUS_DIR

log "ctest -L gpu"
check "ctest -L gpu" timeout 600 ctest --test-dir "$B" -L gpu --no-tests=error --output-on-failure --timeout 120 -j8
cp "$W/check.txt" "$W/ctest.log"
grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$W/ctest.log"

finish
