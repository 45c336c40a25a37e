#!/usr/bin/env bash
# Benchmark: the thousand-card layout (ci/bench_thousand.sh: TP8 x PP8 x DP16 = 1024 ranks, 80 layers) in one
# process and as PROCS processes of 1024/PROCS ranks under mpirun (docs/multiprocess.md). The two runs' metrics
# must be byte-identical; prints the wall time and peak RSS of both.
#   ci/bench_multiproc.sh [STEPS]     PROCS (default 4), FI_PROVIDER (default tcp;ofi_rxm), CHUNK (default 8:
#   TWINRUN_RANK_CHUNK, ranks dealt to processes in TP-sized chunks, so each process holds whole pipelines of
#   some data-parallel replicas and the processes compute in parallel; CHUNK=256: one block of 2 stages each)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3} procs=${PROCS:-4} chunk=${CHUNK:-8}
out=build/bench_multiproc
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 FI_PROVIDER=${FI_PROVIDER:-"tcp;ofi_rxm"}
now() { date +%s.%N; }

t0=$(now)
ci/bench_thousand.sh "$steps" --metrics-jsonl "$out/one.jsonl" >"$out/one.log" 2>&1
t1=$(now)
LAUNCH="mpirun --oversubscribe -np $procs -x FI_PROVIDER -x TWINRUN_TWIN_DEVICE -x TWINRUN_RANKS_PER_PROCESS=$((1024 / procs)) \
    -x TWINRUN_RANK_CHUNK=$chunk" \
    ci/bench_thousand.sh "$steps" --metrics-jsonl "$out/multi.jsonl" >"$out/multi.log" 2>&1
t2=$(now)

grep "iteration *$steps/" "$out/one.log" | head -1
cmp "$out/one.jsonl" "$out/multi.jsonl"
echo "metrics of $steps steps byte-identical: 1 process and $procs processes x $((1024 / procs)) ranks in chunks of" \
    "$chunk ($FI_PROVIDER)"
rss() { grep -o "host peak RSS [0-9.]* MiB" "$1" | awk '{ if ($4 > m) m = $4; s += $4 } END { printf "%.0f MiB (sum %.0f MiB)", m, s }'; }
printf "1 process x 1024 ranks:  %6.2f s wall, peak RSS %s\n" "$(echo "$t1 - $t0" | bc)" "$(rss "$out/one.log")"
printf "%d processes x %d ranks:  %6.2f s wall, peak RSS per process %s\n" "$procs" $((1024 / procs)) \
    "$(echo "$t2 - $t1" | bc)" "$(rss "$out/multi.log")"
