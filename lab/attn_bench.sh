#!/usr/bin/env bash
# Attention alone on one GPU: twinrun's paths (cuda/tools/attn_bench.c: cuDNN,
# cuDNN with the deterministic backward, twinrun's flash kernels) and torch SDPA's cuDNN and flash
# backends (lab/bench/torch_sdpa.py) at the same shapes, one table sorted by shape: ms and TFLOP/s per
# direction. Writes OUTDIR/attn_bench.txt (and build.log, attn_twinrun.txt, attn_torch.txt).
# With --rounds N, then the A/B the ratios are read from: per shape, N rounds of one process timing
# twinrun's cuDNN path and one timing torch's cuDNN backend, in the order ABBA (a drift of the card's
# clocks or temperature over the rounds falls on both sides), each side's median over its rounds
# (lab/bench/attn_ab.py; OUTDIR/attn_ab.txt and attn_rounds.txt). The first table runs every path of
# one side after the other, so a side is timed after different work than the other.
# Usage (repository root): lab/attn_bench.sh [--debs DIR] [--build DIR] [--rounds N] OUTDIR
#   OUTDIR  the results (made if absent); --debs: a folder of .deb files for what the system lacks
#   (lab/gpu_env.sh); --build: the cuda build folder (default /tmp/build-cuda-attn)
# Environment: TWINRUN_ATTN_BENCH_BIN (an attn_bench already built: no build), TWINRUN_ATTN_AB_SHAPES
#   (the rounds' shapes, "D T B" separated by commas; default every shape of the table).
# Exit status 1 when the build, twinrun's benchmark or torch's failed (torch with CUDA is needed).
set -euo pipefail
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
ROUNDS=0
set -- "${ARGS[@]}"
ARGS=()
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) [ $# -gt 1 ] || lab_die "--rounds needs a number"; ROUNDS=$2; shift 2 ;;
    --rounds=*) ROUNDS=${1#--rounds=}; shift ;;
    *) ARGS+=("$1"); shift ;;
    esac
done
case $ROUNDS in '' | *[!0-9]*) lab_die "--rounds $ROUNDS: give a whole number of rounds (0: no A/B)" ;; esac
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] ||
    lab_die "usage: lab/attn_bench.sh [--debs DIR] [--build DIR] [--rounds N] OUTDIR"
OUTDIR=$(lab_outdir "${ARGS[0]}")
cd "$(dirname "$0")/.."
B=${GPU_BUILD:-/tmp/build-cuda-attn}
BIN=${TWINRUN_ATTN_BENCH_BIN:-}
lab_deps "$DEBS"
if [ -z "$BIN" ]; then
    echo "== $(date +%T) build attn_bench ($B)"
    if ! gpu_build "$B" "$OUTDIR/build.log" attn_bench; then
        grep -E "error|Error" "$OUTDIR/build.log" | head -30 || true
        lab_die "the build failed (see $OUTDIR/build.log)"
    fi
    BIN=$B/bin/attn_bench
fi
echo "== $(date +%T) run at $(lab_commit)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>/dev/null || true
rc=0
"$BIN" >"$OUTDIR/attn_twinrun.txt" 2>&1 || { rc=$?; echo "attn_bench: exit $rc (see $OUTDIR/attn_twinrun.txt)"; }
python3 lab/bench/torch_sdpa.py >"$OUTDIR/attn_torch.txt" 2>&1 || { rc=$?; echo "torch_sdpa.py: exit $rc (see $OUTDIR/attn_torch.txt)"; }
{
    grep -v '^attn ' "$OUTDIR/attn_twinrun.txt" "$OUTDIR/attn_torch.txt" | sed 's/^[^:]*://' || true
    # one block per shape (D, then T), twinrun's paths first
    grep -h '^attn ' "$OUTDIR/attn_twinrun.txt" "$OUTDIR/attn_torch.txt" | sort -s -k4,4n -k6,6n || true
} | tee "$OUTDIR/attn_bench.txt"
[ "$ROUNDS" -gt 0 ] || exit $rc

echo "== $(date +%T) $ROUNDS rounds a shape, ABBA: twinrun's cudnn path against torch's cudnn backend"
: >"$OUTDIR/attn_rounds.txt"
IFS=, read -r -a SHAPES <<<"${TWINRUN_ATTN_AB_SHAPES:-64 1024 4,64 4096 1,64 8192 1,128 1024 4,128 4096 1,128 8192 1}"
one_twinrun() {
    TWINRUN_ATTN_BENCH_SHAPE="$1 $2" TWINRUN_ATTN_BENCH_PATHS=cudnn "$BIN" 2>&1 | grep '^attn ' |
        sed "s/^attn /attn round $4 /" >>"$OUTDIR/attn_rounds.txt" || { echo "attn_bench: D $1 T $2 failed"; rc=1; }
}
one_torch() {
    python3 lab/bench/torch_sdpa.py --shape "$1" "$2" "$3" --backend cudnn 2>&1 | grep '^attn ' |
        sed "s/^attn /attn round $4 /" >>"$OUTDIR/attn_rounds.txt" || { echo "torch_sdpa.py: D $1 T $2 failed"; rc=1; }
}
for shape in "${SHAPES[@]}"; do
    read -r d t b <<<"$shape"
    [ -n "$b" ] || lab_die "TWINRUN_ATTN_AB_SHAPES: '$shape' is not \"D T B\""
    for ((r = 0; r < ROUNDS; r++)); do
        if [ $((r % 2)) -eq 0 ]; then one_twinrun "$d" "$t" "$b" "$r"; one_torch "$d" "$t" "$b" "$r"
        else one_torch "$d" "$t" "$b" "$r"; one_twinrun "$d" "$t" "$b" "$r"; fi
    done
done
python3 lab/bench/attn_ab.py "$OUTDIR/attn_rounds.txt" | tee "$OUTDIR/attn_ab.txt" || rc=1
exit $rc
