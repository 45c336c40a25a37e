#!/usr/bin/env bash
# Recomputation and biases on one GPU (the figures go to docs/gpu_results.md): activation recomputation (full uniform,
# full block, selective) against the run without it, and Megatron's linear biases and --qk-layernorm
# against the twin. Prints compare_metrics' verdicts and each run's memory report.
# Usage (repository root):
#   lab/gpu_recompute.sh [--debs DIR] [--build DIR] [--twin DIR] OUTDIR   on the GPU machine
#   lab/gpu_recompute.sh --twin-only OUTDIR                               the twin's side alone, on any
#                                                                         machine with a twin build
#   OUTDIR       every run's log and metrics (made if absent)
#   --build      the cuda build folder (default /tmp/build-cuda-dev; train_llama3 is built there)
#   --twin DIR   the twin's side made beforehand by --twin-only (e.g. .gpu_inputs/recompute); without it the
#                twin runs here, TWIN_BIN (a twin build's bin/, default build/twin/bin)
#   --debs       a folder of .deb files for what the system lacks (lab/gpu_env.sh)
# Exit status 1 when a run or a comparison failed.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
twin_only=0 TWIN_DIR="" pos=()
set -- "${ARGS[@]}"
while [ $# -gt 0 ]; do
    case $1 in
    --twin-only) twin_only=1; shift ;;
    --twin) TWIN_DIR=${2:?--twin needs a folder}; shift 2 ;;
    -*) lab_die "unknown option $1" ;;
    *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -eq 1 ] || lab_die "usage: lab/gpu_recompute.sh [--debs DIR] [--build DIR] [--twin DIR] OUTDIR, or --twin-only OUTDIR"
OUTDIR=$(lab_outdir "${pos[0]}") || exit 1
[ -z "$TWIN_DIR" ] || TWIN_DIR=$(cd "$TWIN_DIR" && pwd) || lab_die "--twin $TWIN_DIR: no such folder"
cd "$(dirname "$0")/.." || exit 1
B=${GPU_BUILD:-/tmp/build-cuda-dev}
TWIN_BIN=${TWIN_BIN:-build/twin/bin}
if [ $twin_only = 0 ]; then
    lab_deps "$DEBS" || exit 1
    gpu_build "$B" "$OUTDIR/build.log" train_llama3 || { tail -30 "$OUTDIR/build.log"; lab_die "the build failed (see $OUTDIR/build.log)"; }
fi
rc=0 # 1 when a run or a comparison failed: the script's exit status
base="--num-layers 4 --hidden-size 256 --ffn-hidden-size 704 --num-attention-heads 8 --group-query-attention
 --num-query-groups 2 --seq-length 256 --max-position-embeddings 256 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0
 --vocab-size 1000 --micro-batch-size 2 --global-batch-size 8 --train-iters 10 --lr 1e-3 --lr-decay-style cosine
 --mock-data --log-interval 1 --eval-iters 0"
run() { # bin name flags...
    local bin=$1 name=$2; shift 2
    # shellcheck disable=SC2086
    "$bin/train_llama3" $base --data-cache-path "$OUTDIR/cache_$name" "$@" --metrics-jsonl "$OUTDIR/$name.jsonl" \
        >"$OUTDIR/$name.log" 2>&1 || { echo "$name: failed"; tail -3 "$OUTDIR/$name.log"; rc=1; }
    grep "^\[memory\]" "$OUTDIR/$name.log" | sed "s/^/  $name: /"
}
if [ $twin_only = 1 ]; then
    for v in "bias:" "qknorm:--disable-bias-linear --qk-layernorm"; do
        # shellcheck disable=SC2086
        run "$TWIN_BIN" "twin_${v%%:*}" ${v#*:}
        rm -rf "$OUTDIR/cache_twin_${v%%:*}"
    done
    exit $rc
fi
echo "== recompute on the GPU: each against the run without it (fp32, 1e-6)"
run "$B/bin" plain --disable-bias-linear
for v in "uniform1:--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" \
         "block2:--recompute-granularity full --recompute-method block --recompute-num-layers 2" \
         "selective:--recompute-granularity selective"; do
    # shellcheck disable=SC2086
    run "$B/bin" "${v%%:*}" --disable-bias-linear ${v#*:}
    python3 ci/compare_metrics.py "$OUTDIR/${v%%:*}.jsonl" "$OUTDIR/plain.jsonl" 1e-6 || rc=1
done
echo "== biases and --qk-layernorm: GPU against the twin (fp32, 1e-5)"
for v in "bias:" "qknorm:--disable-bias-linear --qk-layernorm"; do
    # shellcheck disable=SC2086
    run "$B/bin" "gpu_${v%%:*}" ${v#*:}
    if [ -n "$TWIN_DIR" ]; then
        cp "$TWIN_DIR/twin_${v%%:*}.jsonl" "$OUTDIR/" || rc=1
    else
        # shellcheck disable=SC2086
        run "$TWIN_BIN" "twin_${v%%:*}" ${v#*:}
    fi
    python3 ci/compare_metrics.py "$OUTDIR/gpu_${v%%:*}.jsonl" "$OUTDIR/twin_${v%%:*}.jsonl" 1e-5 || rc=1
done
exit $rc
