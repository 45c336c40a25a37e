#!/usr/bin/env bash
# Benchmark: the thousand-card layout (lab/bench_thousand.sh: TP8 x PP8 x DP16 = 1024 ranks, 80 layers) in one
# process and as P processes of 1024/P ranks under mpirun (docs/multiprocess.md). Every run's metrics must be
# byte-identical to the one-process run's; prints the wall time and peak RSS of each.
#   lab/bench_multiproc.sh [STEPS]
#   PROCS   process counts to try (default "4")
#   CHUNK   TWINRUN_RANK_CHUNK (default 8: ranks dealt to processes in TP-sized chunks, so each process holds
#           whole pipelines of some data-parallel replicas and the processes compute in parallel; CHUNK=block:
#           one contiguous block per process, i.e. two pipeline stages each at 4 processes)
#   FI_PROVIDER (default tcp;ofi_rxm), BIN (default build/twin/bin), MPIRUN_ARGS (more mpirun options)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
out=build/bench_multiproc
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 FI_PROVIDER=${FI_PROVIDER:-"tcp;ofi_rxm"}
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
rss() { grep -o "host peak RSS [0-9.]* MiB" "$1" | awk '{ if ($4 > m) m = $4; s += $4 } END { printf "%.0f MiB (sum %.0f MiB)", m, s }'; }

t0=$(now)
lab/bench_thousand.sh "$steps" --metrics-jsonl "$out/one.jsonl" >"$out/one.log" 2>&1
t1=$(now)
grep "iteration *$steps/" "$out/one.log" | head -1
printf "%-28s %8s s wall, peak RSS %s\n" "1 process x 1024 ranks:" "$(secs "$t0" "$t1")" "$(rss "$out/one.log")"
for procs in ${PROCS:-4}; do
    per=$((1024 / procs))
    chunk=${CHUNK:-8}
    [ "$chunk" = block ] && chunk=$per
    t0=$(now)
    LAUNCH="mpirun --oversubscribe ${MPIRUN_ARGS:-} -np $procs -x FI_PROVIDER -x TWINRUN_TWIN_DEVICE -x TWINRUN_RANKS_PER_PROCESS=$per \
        -x TWINRUN_RANK_CHUNK=$chunk" lab/bench_thousand.sh "$steps" --metrics-jsonl "$out/multi$procs.jsonl" \
        >"$out/multi$procs.log" 2>&1
    t1=$(now)
    cmp "$out/one.jsonl" "$out/multi$procs.jsonl"
    printf "%-28s %8s s wall, peak RSS per process %s; metrics byte-identical (chunks of %d, %s)\n" \
        "$procs processes x $per ranks:" "$(secs "$t0" "$t1")" "$(rss "$out/multi$procs.log")" "$chunk" "$FI_PROVIDER"
done
