#!/usr/bin/env bash
# The flash-attention variants timed on a GPU: builds flash_bench (the cuda preset's
# configuration, only what it links), runs it and writes OUTDIR/flash_bench.txt (and build.log).
# Usage (repository root): cuda/tools/flash_bench.sh [--debs DIR] [--build DIR] OUTDIR [-- VARIANT ...]
#   OUTDIR  the results (made if absent); --debs: a folder of .deb files for what the system lacks
#   (lab/gpu_env.sh); --build: the build folder (default /tmp/build-cuda-flash). Its exit status is
#   flash_bench's (or 1 when the build failed).
set -euo pipefail
. "$(dirname "$0")/../../lab/gpu_env.sh"
variants=()
for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = "--" ]; then variants=("${@:i+1}"); set -- "${@:1:i-1}"; break; fi
done
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] ||
    lab_die "usage: cuda/tools/flash_bench.sh [--debs DIR] [--build DIR] OUTDIR [-- VARIANT ...]"
OUTDIR=$(lab_outdir "${ARGS[0]}")
cd "$(dirname "$0")/../.."
B=${GPU_BUILD:-/tmp/build-cuda-flash}
lab_deps "$DEBS"
echo "== $(date +%T) build flash_bench ($B)"
if ! gpu_build "$B" "$OUTDIR/build.log" flash_bench; then
    grep -E "error|Error" "$OUTDIR/build.log" | head -30 || true
    lab_die "the build failed (see $OUTDIR/build.log)"
fi
echo "== $(date +%T) run"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv 2>/dev/null || true
"$B/bin/flash_bench" "${variants[@]}" 2>&1 | tee "$OUTDIR/flash_bench.txt"
exit "${PIPESTATUS[0]}"
