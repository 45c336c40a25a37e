#!/usr/bin/env bash
# The twin's side of the multi-GPU checks (lab/gpu_multi.sh), on any machine with a twin build: each
# layout of lab/multi_layouts.sh run by the twin through scripts/launch_llama3.sh, metrics and flight
# dumps into DIR (default .gpu_inputs/multi), which lab/gpu_multi.sh reads (--twin names its parent). MULTI_LAYOUTS: the layouts
# (default: those of 8 GPUs, which include those of 2 and 4: multi_layouts_for).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$REPO/.gpu_inputs/multi}
BIN=${TWIN_BIN:-$REPO/build/twin/bin/train_llama3}
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
# shellcheck source=lab/multi_layouts.sh
. "$REPO/lab/multi_layouts.sh"
mkdir -p "$DIR"
for l in ${MULTI_LAYOUTS:-$(multi_layouts_for 8)}; do
    run_layout "$l" "$DIR" TWINRUN_BACKEND=twin TRAIN_BIN="$BIN" || { cat "$DIR/$l/console.txt"; exit 1; }
    rm -rf "$DIR/$l/$l/checkpoints" "$DIR/$l"/benchmark_cache_*
    echo "twin $l: $(wc -l <"$DIR/$l/metrics.jsonl") iterations, $(ls "$DIR/$l/flight" | wc -l) flight dumps"
done
