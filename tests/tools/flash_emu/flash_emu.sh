#!/usr/bin/env bash
# Builds and runs flash_emu (tools/flash_emu.cpp): the flash-attention kernels of kern_attention_flash.cuh
# on the CPU with emulated warps, against double-precision attention. Needs only g++; no GPU.
# The emulator is single-threaded: its cases run side by side, one process each (as many at a time as
# cores), and their outputs are printed in case order; any case's failure fails the script.
# Usage (repository root): tests/tools/flash_emu/flash_emu.sh [BUILD_DIR]
set -euo pipefail
B=${1:-build/flash_emu}
mkdir -p "$B"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -Wno-unknown-pragmas -Icuda tests/tools/flash_emu/flash_emu.cpp \
    -o "$B/flash_emu"
n=$("$B/flash_emu" --cases)
echo "flash_emu: kern_attention_flash.cuh's kernels on the CPU (emulated warps) vs double-precision attention ($n cases)"
rm -f "$B"/case_*.log "$B"/case_*.rc
# each case's exit status in its own file: xargs only says that some case failed
seq 0 $((n - 1)) | xargs -P"$(nproc 2>/dev/null || echo 2)" -I{} \
    sh -c '"$1/flash_emu" {} >"$1/case_{}.log" 2>&1; echo $? >"$1/case_{}.rc"' _ "$B"
failed=0
for ((k = 0; k < n; k++)); do
    cat "$B/case_$k.log"
    rc=$(cat "$B/case_$k.rc" 2>/dev/null || echo missing)
    [ "$rc" = 0 ] || { echo "flash_emu: case $k FAILED (exit $rc)"; failed=$((failed + 1)); }
done
[ $failed -eq 0 ] || { echo "flash_emu: $failed of $n cases FAILED"; exit 1; }
echo "flash_emu: all $n cases ok"
