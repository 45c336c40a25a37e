#!/usr/bin/env bash
# Everything that needs a GPU, in one run (cuda/README.md, "Build and test"):
#   1. cuda/tools/device_check.sh: build the cuda preset, ctest -L gpu (kernel tests against
#      finite differences, refcheck on the Hugging Face reference, training tests), kern_oracle, NCCL smoke;
#   2. twin vs GPU: the same small config, seed and mock data for TWINRUN_STEPS steps in fp32 and bf16,
#      compared with the twin's metrics written beforehand on the CPU machine (ci/twin_metrics.sh) into
#      TWIN_DIR: fp32 within 1e-5, bf16 within 2e-2 relative at every step, and the collective traces
#      (flight dumps) identical.
# Usage: ci/gpu_check.sh OUTDIR [DEBS_DIR] [TWIN_DIR]
set -u
OUT=${1:-/tmp/twinrun-gpu}
DEBS=${2:-.debs}
TWIN=${3:-.gpu_inputs}
B=${TWINRUN_GPU_BUILD:-/tmp/build-cuda-dev}
export TWINRUN_GPU_BUILD=$B
mkdir -p "$OUT"
# every step's exit status counts (rc: 1 when any failed); each prints its own verdict
rc=0
bash cuda/tools/device_check.sh "$OUT" "$DEBS" || { echo "device_check.sh: FAILED"; rc=1; }
# device_check.sh set these up in its own shell; the programs below need them too
P=/tmp/twinrun-debs
[ -d $P ] && export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$P/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
NR=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null) && export LD_LIBRARY_PATH=$NR/lib:$LD_LIBRARY_PATH
echo "== twin vs GPU"
for dt in fp32 bf16; do
    [ -f "$TWIN/twin_$dt.jsonl" ] || { echo "no $TWIN/twin_$dt.jsonl: run ci/twin_metrics.sh first"; rc=1; continue; }
    args=$(cat "$TWIN/args_$dt.txt")
    rm -rf "$OUT/flight_$dt" && mkdir -p "$OUT/flight_$dt"
    # shellcheck disable=SC2086
    TWINRUN_FLIGHT_DIR="$OUT/flight_$dt" TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
        "$B/bin/train_llama3" $args --data-cache-path /tmp/gpu_cache_$dt --metrics-jsonl "$OUT/gpu_$dt.jsonl" >"$OUT/gpu_$dt.log" 2>&1 ||
        { echo "train_llama3 $dt: exit $?"; tail -5 "$OUT/gpu_$dt.log"; rc=1; }
    tol=1e-5; [ $dt = bf16 ] && tol=2e-2
    python3 ci/compare_metrics.py "$OUT/gpu_$dt.jsonl" "$TWIN/twin_$dt.jsonl" $tol || rc=1
    # the collective trace: the same collectives in the same order on both (ci/compare_flight.py)
    if [ ! -d "$TWIN/flight_$dt" ]; then
        echo "no $TWIN/flight_$dt: run ci/twin_metrics.sh first"; rc=1
    elif python3 ci/compare_flight.py "$OUT/flight_$dt" "$TWIN/flight_$dt"; then
        echo "  collective trace $dt: identical to the twin's"
    else
        rc=1
    fi
done
if [ $rc -eq 0 ]; then echo "gpu check: every step passed"; else echo "gpu check: FAILED (see above)"; fi
exit $rc
