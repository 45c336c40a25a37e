#!/usr/bin/env bash
# Attention alone on one GPU: twinrun's paths (cuda/tools/attn_bench.c: cuDNN,
# cuDNN with the deterministic backward, twinrun's flash kernels) and torch SDPA's cuDNN and flash
# backends (ci/bench/torch_sdpa.py) at the same shapes, one table sorted by shape: ms and TFLOP/s per
# direction. Writes OUTDIR/attn_bench.txt (and build.log).
# Usage (repository root, GPU machine): ci/attn_bench.sh [OUTDIR]
# Environment: DEBS (.deb files for a node without internet, default .debs; ci/gpu_env.sh), TWINRUN_GPU_BUILD (build dir),
#   TWINRUN_ATTN_BENCH_BIN (an attn_bench already built: no build).
set -euo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-/tmp/twinrun-attn-bench}}
mkdir -p "$OUTDIR"
B=${TWINRUN_GPU_BUILD:-/tmp/build-cuda-attn}
BIN=${TWINRUN_ATTN_BENCH_BIN:-}
set +eu # gpu_env.sh probes (pkg-config, python3 -c 'import nvidia.nccl') and may fail its probes
DEBS=${DEBS:-.debs} . ci/gpu_env.sh
set -eu
if [ -z "$BIN" ]; then
    echo "== $(date +%T) build attn_bench ($B)"
    if ! gpu_build "$B" "$OUTDIR/build.log" attn_bench; then
        grep -E "error|Error" "$OUTDIR/build.log" | head -30
        echo "attn_bench.sh: the build failed (see $OUTDIR/build.log)"
        exit 1
    fi
    BIN=$B/bin/attn_bench
fi
echo "== $(date +%T) run at $(cat .gpu_commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>/dev/null || true
rc=0
"$BIN" >"$OUTDIR/attn_twinrun.txt" 2>&1 || rc=$?
python3 ci/bench/torch_sdpa.py >"$OUTDIR/attn_torch.txt" 2>&1 || rc=$?
{
    grep -v '^attn ' "$OUTDIR/attn_twinrun.txt" "$OUTDIR/attn_torch.txt" | sed 's/^[^:]*://'
    # one block per shape (D, then T), twinrun's paths first
    grep -h '^attn ' "$OUTDIR/attn_twinrun.txt" "$OUTDIR/attn_torch.txt" | sort -s -k4,4n -k6,6n
} | tee "$OUTDIR/attn_bench.txt"
exit $rc
