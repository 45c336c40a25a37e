#!/usr/bin/env bash
# Attention alone on one GPU: twinrun's paths (cuda/tools/attn_bench.c: cuDNN,
# cuDNN with the deterministic backward, twinrun's flash kernels) and torch SDPA's cuDNN and flash
# backends (lab/bench/torch_sdpa.py) at the same shapes, one table sorted by shape: ms and TFLOP/s per
# direction. Writes OUTDIR/attn_bench.txt (and build.log, attn_twinrun.txt, attn_torch.txt).
# Usage (repository root): lab/attn_bench.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR  the results (made if absent); --debs: a folder of .deb files for what the system lacks
#   (lab/gpu_env.sh); --build: the cuda build folder (default /tmp/build-cuda-attn)
# Environment: TWINRUN_ATTN_BENCH_BIN (an attn_bench already built: no build).
# Exit status 1 when the build, twinrun's benchmark or torch's failed (torch with CUDA is needed).
set -euo pipefail
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] || lab_die "usage: lab/attn_bench.sh [--debs DIR] [--build DIR] OUTDIR"
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
exit $rc
