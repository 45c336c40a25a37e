#!/usr/bin/env bash
# One rank of an mpirun job (scripts/train_llama3_70b_multi_nodes.sh): its output goes to
# LOG_DIR/rank_RRRRR.log, the numbering scripts/launch_llama3.sh uses too; the job's last rank is also
# copied to mpirun's console, because Megatron prints its iteration lines from the last rank.
#   rank_log.sh LOG_DIR PROGRAM ARGS...
# The program replaces this shell (exec), so mpirun signals and reaps the rank itself and sees its
# exit code.
set -euo pipefail
log_dir=$1
shift
rank=${OMPI_COMM_WORLD_RANK:?rank_log.sh: not started by mpirun (no OMPI_COMM_WORLD_RANK)}
size=${OMPI_COMM_WORLD_SIZE:?rank_log.sh: not started by mpirun (no OMPI_COMM_WORLD_SIZE)}
mkdir -p "$log_dir"
log=$(printf '%s/rank_%05d.log' "$log_dir" "$rank")
if [ "$rank" -eq $((size - 1)) ]; then
    exec > >(tee "$log") 2>&1
else
    exec >"$log" 2>&1
fi
exec "$@"
