#!/usr/bin/env bash
# Asynchronous collectives on one GPU: asynchronous collectives (each communicator's own stream,
# ordered by events, no host wait) and the watchdog thread (timeout -> flight dump -> abort -> exit 1).
#   1. build the cuda preset's coll_smoke, train_llama3 and blame;
#   2. coll_smoke 0 1, asynchronous (the default) and TWINRUN_COLL_SYNC=1; in asynchronous mode the exit
#      dump's records must all be completed, with t_sched <= t_start <= t_end (times from CUDA events);
#   3. the hang case: coll_smoke 0 1 hang with TWINRUN_COLL_TIMEOUT_S=5 (a spin kernel before an
#      all-reduce on the GPU, TWINRUN_COLL_HANG): exit 1 within timeout + 5 s of the hang, a dump, and
#      `blame` reading it (exit 1: a hang found, naming the communicator 'hang' and seq 1) — asynchronous
#      mode only: in synchronous mode a group of one never waits on the host (coll_nccl.c), so nothing
#      there can see a hang on one GPU (a synchronous run times out so after 59 s); its host-side
#      timeout is checked with two processes (step 4, lab/gpu_multi.sh);
#   4. with 2 GPUs: coll_smoke with 2 processes, normal and the timeout case (TWINRUN_COLL_ON_TIMEOUT=return);
#   5. train_llama3 on one GPU, asynchronous and synchronous: the metrics (losses, grad norms, learning
#      rates) identical bit for bit, and the step times — a tiny fp32 model (launch-bound: what the events
#      cost) and the 1.5B bf16 model of lab/gpu_bench.sh (compute-bound);
#   6. a training hang: TWINRUN_COLL_HANG=dp_cp:6 with --distributed-timeout-minutes 0.1 (6 s): exit 1
#      within 6 + 5 s of the hang, the dump, blame.
# Prints one line per check and "async check: N passed, M failed"; exit 1 on a failure.
#
# Usage (repository root): cuda/tools/async_check.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR  the logs, flight dumps and metrics (made if absent); --debs: a folder of .deb files for what
#   the system lacks (lab/gpu_env.sh); --build: the build folder (default /tmp/build-cuda-async).
#   TWINRUN_ASYNC_STEPS: the training runs' iterations (default 12). Exit status 1 when a check failed.
# Example, keeping a summary and one tarball of the logs, dumps and metrics:
#   cuda/tools/async_check.sh /tmp/ac > summary.txt 2>&1; tar czf async_check.tgz -C /tmp ac
set -u
. "$(dirname "$0")/../../lab/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] ||
    lab_die "usage: cuda/tools/async_check.sh [--debs DIR] [--build DIR] OUTDIR"
OUTDIR=$(lab_outdir "${ARGS[0]}") || exit 1
B=${GPU_BUILD:-/tmp/build-cuda-async}
STEPS=${TWINRUN_ASYNC_STEPS:-12}
rm -rf "$OUTDIR"/smoke_* "$OUTDIR"/hang_* "$OUTDIR"/two_* "$OUTDIR"/train_* # this script's own, from an earlier run
cd "$(dirname "$0")/../.." || exit 1
pass=0 fail=0
log() { echo "== $(date +%T) $*"; }
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }  # a - b, one decimal
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }        # a <= b

log "async check at $(lab_commit)"
nvidia-smi -L || lab_die "nvidia-smi -L failed: no GPU visible"
lab_deps "$DEBS" || exit 1
log build
if ! gpu_build "$B" "$OUTDIR/build.log" coll_smoke train_llama3 blame; then
    grep -E "error|Error" "$OUTDIR/build.log" | head -30
    lab_die "the build failed (see $OUTDIR/build.log)"
fi
export TWINRUN_RENDEZVOUS_DIR
TWINRUN_RENDEZVOUS_DIR=$(mktemp -d)

# ---- 2. coll_smoke, both modes ------------------------------------------------------------------
for mode in async sync; do
    sync=0; [ $mode = sync ] && sync=1
    d=$OUTDIR/smoke_$mode
    mkdir -p "$d"
    t0=$(now)
    TWINRUN_COLL_SYNC=$sync TWINRUN_FLIGHT_DIR=$d TWINRUN_FLIGHT_AT_EXIT=1 timeout 120 "$B/bin/coll_smoke" 0 1 \
        >"$d/log.txt" 2>&1
    rc=$?
    took=$(sub "$(now)" "$t0")
    if [ $rc -eq 0 ] && grep -q "all ok" "$d/log.txt"; then ok "coll_smoke 1 rank, $mode: all ok (${took} s)"
    else bad "coll_smoke 1 rank, $mode: exit $rc"; grep -E "FAILED|fatal" "$d/log.txt" | head -5; fi
done
python3 - "$OUTDIR/smoke_async/flight_rank00000.txt" <<'EOF' && ok "async flight records: all completed, times ordered" || bad "async flight records"
import statistics, sys
recs = [dict(zip(l.split()[2::2], l.split()[3::2])) for l in open(sys.argv[1]) if l.startswith("rec ")]
bad = [r for r in recs if r["state"] != "completed"]
t = [(float(r["t_sched"]), float(r["t_start"]), float(r["t_end"])) for r in recs if r["state"] == "completed"]
order = [x for x in t if not (x[0] - 1e-4 <= x[1] <= x[2])]
wait = [b - a for a, b, _ in t]; run = [c - b for _, b, c in t]
print(f"  {len(recs)} records; enqueue->start median {statistics.median(wait)*1e6:.0f} us, "
      f"start->end median {statistics.median(run)*1e6:.0f} us, max {max(run)*1e3:.2f} ms")
for r in (bad + order)[:5]: print("  ", r)
sys.exit(1 if bad or order or not recs else 0)
EOF

# ---- 3. the hang case, asynchronous mode (see the header for synchronous mode) ----------------------
for mode in async; do
    sync=0; [ $mode = sync ] && sync=1
    d=$OUTDIR/hang_$mode
    mkdir -p "$d"
    TWINRUN_COLL_SYNC=$sync TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$d timeout 60 "$B/bin/coll_smoke" 0 1 hang \
        >"$d/log.txt" 2>&1
    rc=$?
    t_exit=$(now)
    t_hang=$(grep -o "unix time [0-9.]*" "$d/log.txt" | head -1 | awk '{print $3}')
    took=$(sub "$t_exit" "${t_hang:-0}")
    grep -E "watchdog|TWINRUN_COLL_HANG|exiting" "$d/log.txt" | sed 's/^/    /'
    if [ $rc -eq 1 ] && le "$took" 10; then
        ok "hang, $mode: exit 1, ${took} s from the hang to the exit (timeout 5 s + 5)"
    else bad "hang, $mode: exit $rc after ${took} s"; tail -5 "$d/log.txt"; fi
    if [ -s "$d/flight_rank00000.txt" ]; then
        "$B/bin/blame" "$d"/flight_rank*.txt >"$d/blame.txt" 2>&1
        brc=$?
        sed 's/^/    /' "$d/blame.txt"
        if [ $brc -eq 1 ] && grep -q "comm 'hang'.* seq 1 all_reduce" "$d/blame.txt"; then
            ok "hang, $mode: the dump exists and blame names comm 'hang' seq 1"
        else bad "hang, $mode: blame exit $brc"; fi
    else bad "hang, $mode: no dump in $d"; fi
done

# ---- 4. two GPUs ------------------------------------------------------------------------------------
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    for mode in async sync; do
        sync=0; [ $mode = sync ] && sync=1
        d=$OUTDIR/two_$mode
        mkdir -p "$d"
        (TWINRUN_COLL_SYNC=$sync TWINRUN_RUN_ID=two$mode timeout 120 "$B/bin/coll_smoke" 1 2 >"$d/r1.txt" 2>&1) &
        p=$!
        TWINRUN_COLL_SYNC=$sync TWINRUN_RUN_ID=two$mode timeout 120 "$B/bin/coll_smoke" 0 2 >"$d/r0.txt" 2>&1
        r0=$?; wait $p; r1=$?
        [ $r0 -eq 0 ] && [ $r1 -eq 0 ] && ok "coll_smoke 2 ranks, $mode" || bad "coll_smoke 2 ranks, $mode: $r0,$r1"
        (TWINRUN_COLL_SYNC=$sync TWINRUN_RUN_ID=late$mode TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$d timeout 120 \
            "$B/bin/coll_smoke" 1 2 timeout >"$d/t1.txt" 2>&1) &
        p=$!
        TWINRUN_COLL_SYNC=$sync TWINRUN_RUN_ID=late$mode TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$d timeout 120 \
            "$B/bin/coll_smoke" 0 2 timeout >"$d/t0.txt" 2>&1
        r0=$?; wait $p; r1=$?
        grep -E "returned|came back" "$d/t0.txt" | sed 's/^/    /'
        [ $r0 -eq 0 ] && [ $r1 -eq 0 ] && ok "coll_smoke 2 ranks timeout, $mode" || bad "coll_smoke 2 ranks timeout, $mode: $r0,$r1"
    done
else
    echo "(one GPU: the two-process coll_smoke cases are lab/gpu_multi.sh's)"
fi

# ---- 5. training, asynchronous vs synchronous -------------------------------------------------------
TINY="--num-layers 4 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --group-query-attention
 --num-query-groups 2 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
 --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 2 --global-batch-size 4 --train-iters 40
 --lr 1e-3 --mock-data --vocab-size 512 --eval-iters 0 --log-interval 1 --seed 1234"
BIG="--num-layers 16 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 32 --num-query-groups 8
 --vocab-size 128256 --group-query-attention --seq-length 1024 --max-position-embeddings 1024
 --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu
 --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
 --micro-batch-size 4 --global-batch-size 4 --train-iters $STEPS --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine
 --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --mock-data
 --eval-iters 0 --log-interval 1 --seed 1234 --deterministic-mode"
# (the bf16 model's attention goes to cuDNN where it is built in, whose default backward sums dQ with
# atomics: without --deterministic-mode two runs need not agree, whatever the collectives do)
step_ms() { # mean elapsed_ms_per_iter after the first two iterations
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][2:]; print("%.2f" % (sum(x["elapsed_ms_per_iter"] for x in r)/max(len(r),1)))' "$1" 2>/dev/null || echo "?"
}
for model in tiny big; do
    args=$TINY; [ $model = big ] && args=$BIG
    for mode in async sync; do
        sync=0; [ $mode = sync ] && sync=1
        d=$OUTDIR/train_${model}_$mode
        mkdir -p "$d"
        # shellcheck disable=SC2086
        TWINRUN_COLL_SYNC=$sync TWINRUN_FLIGHT_DIR=$d TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
            timeout 240 "$B/bin/train_llama3" $args --data-cache-path "$OUTDIR/cache" --metrics-jsonl "$d/metrics.jsonl" \
            >"$d/log.txt" 2>&1
        rc=$?
        sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$d/metrics.jsonl" >"$d/bits" 2>/dev/null
        echo "    $model $mode: exit $rc, $(wc -l <"$d/bits" 2>/dev/null || echo 0) iterations, step $(step_ms "$d/metrics.jsonl") ms, last $(tail -1 "$d/metrics.jsonl" 2>/dev/null | grep -o '"lm_loss":[^,]*')"
        [ $rc -eq 0 ] || { bad "train $model $mode: exit $rc"; tail -5 "$d/log.txt"; }
    done
    a=$OUTDIR/train_${model}_async b=$OUTDIR/train_${model}_sync
    if [ -s "$a/bits" ] && cmp -s "$a/bits" "$b/bits"; then
        ok "train $model: async and sync metrics identical bit for bit; step $(step_ms "$a/metrics.jsonl") ms async, $(step_ms "$b/metrics.jsonl") ms sync"
    else bad "train $model: the metrics differ (or a run failed)"; diff "$a/bits" "$b/bits" | head -4; fi
    if python3 lab/compare_flight.py "$a" "$b" >/dev/null 2>&1; then ok "train $model: collective traces identical (compare_flight)"
    else bad "train $model: collective traces differ"; python3 lab/compare_flight.py "$a" "$b" 2>&1 | tail -3; fi
done

# ---- 6. a hang in training ---------------------------------------------------------------------------
d=$OUTDIR/train_hang
mkdir -p "$d"
# shellcheck disable=SC2086
TWINRUN_COLL_HANG=dp_cp:6 TWINRUN_FLIGHT_DIR=$d timeout 120 "$B/bin/train_llama3" $TINY --distributed-timeout-minutes 0.1 \
    --data-cache-path "$OUTDIR/cache" >"$d/log.txt" 2>&1
rc=$?
t_exit=$(now)
t_hang=$(grep -o "unix time [0-9.]*" "$d/log.txt" | head -1 | awk '{print $3}')
took=$(sub "$t_exit" "${t_hang:-0}")
grep -E "watchdog|TWINRUN_COLL_HANG|exiting" "$d/log.txt" | sed 's/^/    /'
if [ $rc -eq 1 ] && le "$took" 11; then ok "training hang: exit 1, ${took} s from the hang (timeout 6 s + 5)"
else bad "training hang: exit $rc after ${took} s"; tail -5 "$d/log.txt"; fi
"$B/bin/blame" "$d"/flight_rank*.txt >"$d/blame.txt" 2>&1
brc=$?
sed 's/^/    /' "$d/blame.txt"
[ $brc -eq 1 ] && grep -q "comm 'dp_cp'.* seq 6 " "$d/blame.txt" && ok "training hang: blame names dp_cp seq 6" ||
    bad "training hang: blame exit $brc"

rm -rf "$OUTDIR/cache"
echo "async check: $pass passed, $fail failed"
[ $fail -eq 0 ]
