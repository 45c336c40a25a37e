#!/usr/bin/env bash
# The test command (`make test`): everything CI checks, in order of how fast it fails.
#   1. twin build with gcc, all ctest tests (unit, reference, ...)
#   2. twin build with clang (-Wall -Wextra -Werror there too); its training bits equal gcc's
#      (tests labelled `heavy` — the 1024-rank rehearsal, fault campaigns — run in stage 1 only)
#   3. valgrind memcheck over every test program
#   4. libFuzzer targets (clang, ASan/UBSan), each run briefly over its seed corpus
#   5. coverage build, tests again, gcovr summary
#   6. cuda preset compiles (where nvcc exists; it runs on the GPU machine, not here)
# TWINRUN_FUZZ_SECONDS (default 20) sets the time per fuzz target; TWINRUN_SKIP="valgrind coverage ..."
# skips stages by name for a quick local loop.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
skip=" ${TWINRUN_SKIP:-} "
stage() { echo; echo "==== $* ===="; }
skipped() { [[ "$skip" == *" $1 "* ]]; }

stage "architecture: include boundaries, include loops, include guards; C style of the formatted folders"
python3 ci/check_boundaries.py
ci/check_format.sh

stage "twin (gcc): build and test"
cmake --preset twin >/dev/null
cmake --build build/twin -j"$jobs"
ctest --test-dir build/twin -j"$jobs" --output-on-failure

if ! skipped clang; then
  stage "twin (clang): build and test"
  cmake --preset twin-clang >/dev/null
  cmake --build build/twin-clang -j"$jobs"
  ctest --test-dir build/twin-clang -j"$jobs" --output-on-failure -LE heavy
  # Determinism across compilers: the cli_deterministic run gives the same bits with gcc and clang.
  cmp build/twin/tests/det_a.jsonl build/twin-clang/tests/det_a.jsonl
  echo "gcc and clang twins wrote byte-identical training metrics"
fi

if ! skipped valgrind; then
  stage "valgrind memcheck over the test suite"
  python3 ci/memcheck.py build/twin
fi

if ! skipped fuzz; then
  stage "fuzz targets (libFuzzer, ASan/UBSan)"
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j"$jobs"
  secs=${TWINRUN_FUZZ_SECONDS:-20}
  for t in build/fuzz/fuzz/fuzz_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    work=$(mktemp -d)
    [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$work/"
    echo "-- $name (${secs}s)"
    "$t" -max_total_time="$secs" -print_final_stats=0 "$work" 2>&1 | tail -n 2
    rm -rf "$work"
  done
fi

if ! skipped coverage; then
  stage "coverage (gcovr)"
  cmake --preset coverage >/dev/null
  cmake --build build/coverage -j"$jobs"
  ctest --test-dir build/coverage -j"$jobs" --output-on-failure -LE heavy >/dev/null
  gcovr -r . --object-directory build/coverage --filter 'engine/' --filter 'sim/' --filter 'fault/' \
    --exclude 'engine/cuda/' --print-summary --txt build/coverage/coverage.txt
  echo "per-file report: build/coverage/coverage.txt"
fi

if ! skipped cuda; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    stage "cuda preset: compile (runs on the GPU machine: ci/gpu_check.sh)"
    cmake --preset cuda >/dev/null
    cmake --build build/cuda -j"$jobs"
  else
    stage "cuda preset: skipped, no nvcc on this machine"
  fi
fi

echo
echo "twinrun: all checks passed"
