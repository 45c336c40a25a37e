#!/usr/bin/env bash
# Builds and runs flash_emu (tools/flash_emu.cpp): the flash-attention kernels of kern_attention_flash.cuh
# on the CPU with emulated warps, against double-precision attention. Needs only g++; no GPU.
# Usage (repository root): engine/cuda/tools/flash_emu.sh [BUILD_DIR]
set -euo pipefail
B=${1:-build/flash_emu}
mkdir -p "$B"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -Wno-unknown-pragmas -Iengine/cuda engine/cuda/tools/flash_emu.cpp \
    -o "$B/flash_emu"
"$B/flash_emu"
