#!/usr/bin/env bash
# The flash-attention variants timed on a GPU: builds flash_bench (the cuda preset's
# configuration, only what it links), runs it and writes OUTDIR/flash_bench.txt (and build.log).
# Usage (repository root, GPU machine): cuda/tools/flash_bench.sh [OUTDIR] [-- VARIANT ...]
# Environment: DEBS (.deb files for a node without internet, default .debs; ci/gpu_env.sh), TWINRUN_GPU_BUILD (build dir).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUTDIR=${OUT:-/tmp/twinrun-flash-bench}
if [ $# -gt 0 ] && [ "$1" != "--" ]; then OUTDIR=$1; shift; fi
[ "${1:-}" = "--" ] && shift
mkdir -p "$OUTDIR"
B=${TWINRUN_GPU_BUILD:-/tmp/build-cuda-flash}
set +eu # gpu_env.sh probes (pkg-config, python3 -c 'import nvidia.nccl') and may fail its probes
DEBS=${DEBS:-.debs} . ci/gpu_env.sh
set -eu
echo "== $(date +%T) build flash_bench ($B)"
if ! { cmake -S . -B "$B" -DTWINRUN_BACKEND=cuda -DCMAKE_C_COMPILER=gcc -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release "${CMAKE_EXTRA[@]}" &&
    cmake --build "$B" -j"$(nproc)" --target flash_bench; } >"$OUTDIR/build.log" 2>&1; then
    grep -E "error|Error" "$OUTDIR/build.log" | head -30
    echo "flash_bench.sh: the build failed (see $OUTDIR/build.log)"
    exit 1
fi
echo "== $(date +%T) run"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>/dev/null || true
"$B/bin/flash_bench" "$@" 2>&1 | tee "$OUTDIR/flash_bench.txt"
exit "${PIPESTATUS[0]}"
