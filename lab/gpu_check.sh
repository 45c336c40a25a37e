#!/usr/bin/env bash
# Everything that needs one GPU, in one run (cuda/README.md, "Build and test"):
#   1. cuda/tools/device_check.sh: build the cuda backend, ctest -L gpu (kernel tests against
#      finite differences, refcheck on the Hugging Face reference, training tests), kern_oracle, NCCL smoke;
#   2. twin vs GPU: the same small config, seed and mock data in fp32 and bf16, compared with the twin's
#      metrics written beforehand by lab/twin_metrics.sh (on any machine with a twin build) into TWIN_DIR:
#      fp32 within 1e-5, bf16 within 2e-2 relative at every step, and the collective traces (flight
#      dumps) identical.
# Usage (repository root): lab/gpu_check.sh [--debs DIR] [--build DIR] [--twin TWIN_DIR] OUTDIR
#   OUTDIR    logs, metrics and flight dumps (made if absent)
#   --debs    a folder of .deb files for what the system lacks (lab/gpu_env.sh)
#   --build   the cuda build folder (default /tmp/build-cuda-dev)
#   --twin    the twin's side (default .gpu_inputs at the repository root)
# Exit status 1 when any step failed; every step runs and prints its own verdict.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
lab_twin_outdir "lab/gpu_check.sh [--debs DIR] [--build DIR] [--twin TWIN_DIR] OUTDIR" lab/twin_metrics.sh
cd "$(dirname "$0")/.." || exit 1
B=${GPU_BUILD:-/tmp/build-cuda-dev}
rc=0
bash cuda/tools/device_check.sh --debs "${DEBS:-}" --build "$B" "$OUTDIR" || { echo "device_check.sh: FAILED"; rc=1; }
# device_check.sh set the libraries' paths up in its own shell; the programs below need them too
lab_deps "$DEBS" >/dev/null || exit 1
echo "== twin vs GPU"
for dt in fp32 bf16; do
    [ -f "$TWIN/twin_$dt.jsonl" ] || { echo "no $TWIN/twin_$dt.jsonl: run lab/twin_metrics.sh first"; rc=1; continue; }
    args=$(cat "$TWIN/args_$dt.txt")
    rm -rf "$OUTDIR/flight_$dt" && mkdir -p "$OUTDIR/flight_$dt"
    # shellcheck disable=SC2086
    TWINRUN_FLIGHT_DIR="$OUTDIR/flight_$dt" TWINRUN_FLIGHT_AT_EXIT=1 TWINRUN_FLIGHT_RECORDS=65536 \
        "$B/bin/train_llama3" $args --data-cache-path "$OUTDIR/cache_$dt" --metrics-jsonl "$OUTDIR/gpu_$dt.jsonl" >"$OUTDIR/gpu_$dt.log" 2>&1 ||
        { echo "train_llama3 $dt: exit $?"; tail -5 "$OUTDIR/gpu_$dt.log"; rc=1; }
    rm -rf "$OUTDIR/cache_$dt"
    tol=1e-5; [ $dt = bf16 ] && tol=2e-2
    python3 ci/compare_metrics.py "$OUTDIR/gpu_$dt.jsonl" "$TWIN/twin_$dt.jsonl" $tol || rc=1
    # the collective trace: the same collectives in the same order on both (lab/compare_flight.py)
    if [ ! -d "$TWIN/flight_$dt" ]; then
        echo "no $TWIN/flight_$dt: run lab/twin_metrics.sh first"; rc=1
    elif python3 lab/compare_flight.py "$OUTDIR/flight_$dt" "$TWIN/flight_$dt"; then
        echo "  collective trace $dt: identical to the twin's"
    else
        rc=1
    fi
done
if [ $rc -eq 0 ]; then echo "gpu check: every step passed"; else echo "gpu check: FAILED (see above)"; fi
exit $rc
