#!/usr/bin/env bash
# The C style (.clang-format, clang-format 14) over every C source and header of the tree.
# .cu/.cuh files stay as written: clang-format 14 does not know CUDA's launch syntax well.
# Usage: check_format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = --fix ]; then
    clang-format -i "${files[@]}"
    exit 0
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check_format: ${#files[@]} files (every C source and header) follow .clang-format"
