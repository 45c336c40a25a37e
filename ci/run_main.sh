#!/usr/bin/env bash
# The main job (`make run`): the flagship rehearsal on the CPU twin — the Llama3-70B guide's
# 1024-card layout (128 nodes x 8 MTT S5000, TP8 PP8 DP16) with a hung rank, a NaN and a node crash
# thrown at it, every one diagnosed and recovered from the latest checkpoint, the result compared
# bit for bit with the fault-free run. Reports go to build/scenarios/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/scenarios
mkdir -p "$out"
exec build/twin/bin/scenario run scenarios/thousand_card.yaml --work "$out" \
  --json "$out/thousand_card.json" --junit "$out/thousand_card.xml" --log "$out/thousand_card.log" "$@"
