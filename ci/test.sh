#!/usr/bin/env bash
# The test command (`make test`): everything CI checks, in order of how fast it fails.
#   0. architecture: no include across a library's boundary, no include loop between folders, one
#      include-guard style (ci/check_boundaries.py); clang-format on the formatted folders
#   1. twin build with gcc; the ctest tests labelled `heavy` (the 1024-rank rehearsal, fault campaigns,
#      multi-process jobs) or `gcc-plain` (full layout sweeps, helgrind); the others run in stage 5
#   2. twin build with clang (-Wall -Wextra -Werror there too); its training bits equal gcc's
#      (tests labelled `heavy` or `slow` run with gcc only)
#   3. valgrind memcheck over every test that runs one of our programs directly (ci/memcheck.py; a
#      script's programs would run natively, valgrind following no exec, so scripts are left out)
#   4. libFuzzer targets (clang, ASan/UBSan), each run briefly over its seed corpus
#   5. coverage build (gcc -O2 --coverage), every test less `heavy` (unit, reference, scenarios, ...),
#      gcovr summary and line coverage per folder and per top folder
#      (ci/coverage_by_folder.py; the layout sweep runs in its short form there: tests/parallel/tests.cmake)
#   6. cuda preset compiles (where nvcc exists; it runs on the GPU machine, not here), and the MUSA code
#      paths against stub headers (cuda/tools/musa_mapping_check.sh); the flash-attention
#      kernels run on the CPU with emulated warps (flash_emu, g++ only)
# Every stage runs even when an earlier one failed (TWINRUN_FAIL_FAST=1 stops at the first), so one
# run shows every failure; the end prints one table: each stage, its wall time and its result. After
# each ctest run, ci/ctest_margin.py lists the slowest tests against their timeouts and fails when one
# came within 30% of its limit (a test that slow is one loaded machine away from a timeout).
# TWINRUN_FUZZ_SECONDS (default 10) sets the time per fuzz target: a smoke run over the kept corpus (the
# million-execution runs: docs/benchmarks.md, "Fuzz targets").
# TWINRUN_SKIP="valgrind coverage ..." skips stages by name for a quick local loop.
# TWINRUN_TEST_TREE_MIB (default 800): what a stage's tests may leave in its build tree (test_tree_size).
# `ci/test.sh --quick` (`make test-quick`): the inner loop, a few minutes — the architecture check, the
# gcc build and its tests less those labelled `heavy` or `slow` (tests/CMakeLists.txt); not what CI runs.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
skip=" ${TWINRUN_SKIP:-} "
skipped() { [[ "$skip" == *" $1 "* ]]; }
t_all=$SECONDS
names=() times=() results=() free=()
failed=0
# free disk space in MiB where the build goes: every stage's line in the summary shows it, since a full
# disk fails tests in ways that point elsewhere (a CI runner's disk is shared and sometimes nearly full)
free_mib() { df -Pm . 2>/dev/null | awk 'NR == 2 { print $4 }'; }

# run_stage NAME FUNCTION: runs one stage in a subshell with `set -e`, so its first failing command
# ends the stage (not the whole run), then records its time and result.
run_stage() {
  local name=$1 fn=$2 t0=$SECONDS rc
  echo
  echo "==== $name ===="
  ( set -euo pipefail; "$fn" )
  rc=$?
  names+=("$name")
  times+=($((SECONDS - t0)))
  free+=("$(free_mib)")
  if [ $rc -eq 0 ]; then
    results+=("passed")
  else
    results+=("FAILED (exit $rc)")
    failed=1
    echo "==== $name: FAILED (exit $rc) ===="
    if [ "${TWINRUN_FAIL_FAST:-0}" = 1 ]; then summary; exit 1; fi
  fi
}
skip_stage() { names+=("$1"); times+=(0); results+=("skipped ($2)"); free+=("$(free_mib)"); }

summary() {
  echo
  echo "==== make test: summary ===="
  printf '%-44s %9s %10s  %s\n' "stage" "wall" "disk free" "result"
  local i
  for i in "${!names[@]}"; do
    printf '%-44s %6d:%02d %7s MiB  %s\n' "${names[$i]}" $((times[i] / 60)) $((times[i] % 60)) "${free[$i]}" "${results[$i]}"
  done
  local t=$((SECONDS - t_all))
  printf '%-44s %6d:%02d\n' "total" $((t / 60)) $((t % 60))
}

# ctest_stage BUILD_DIR [ctest args...]: the tests, then their margins against their timeouts. A test
# without a TIMEOUT property gets 300 s. ctest_jobs (default: the core count) sets ctest's -j.
ctest_stage() {
  local dir=$1; shift
  local junit=$dir/ctest_junit.xml
  local rc=0
  rm -f "$junit"
  # --no-tests=error: a label or name filter that matches nothing (a renamed label, a build without the
  # tests) fails rather than passing with no test run
  ctest --test-dir "$dir" -j"${ctest_jobs:-$jobs}" --timeout 300 --no-tests=error --output-on-failure --output-junit "$(realpath "$junit")" "$@" || rc=$?
  python3 ci/ctest_margin.py "$dir" "$junit" --default-timeout 300 || rc=1
  test_tree_size "$dir" || rc=1
  return $rc
}

# test_tree_size BUILD_DIR: what the tests left in BUILD_DIR/tests (their build files aside) against
# TWINRUN_TEST_TREE_MIB (default 800). A test keeps what a failure's post-mortem needs, but a passed one
# removes its checkpoints and data caches, or writes none (mock data without --data-cache-path builds its
# indices in memory, faster than it loads them): one mock-data index cache is 70-300 MB a configuration,
# and a CI runner's ~10 GB for every stage's tree ran out so, failing tests with "No space left on device".
test_tree_size() {
  local tree=$1/tests limit=${TWINRUN_TEST_TREE_MIB:-800} mib
  mib=$(du -sm --exclude=CMakeFiles "$tree" | cut -f1)
  if [ "$mib" -gt "$limit" ]; then
    echo "FAIL: the tests left $mib MiB in $tree, over $limit MiB (TWINRUN_TEST_TREE_MIB): a passed test removes"
    echo "      its checkpoints and data caches (see ci/test.sh, test_tree_size); the largest folders:"
    du -sm --exclude=CMakeFiles "$tree"/* | sort -rn | head -n 8 | sed 's/^/      /'
    return 1
  fi
  echo "test tree: $mib MiB left in $tree (limit $limit MiB)"
}

# TWINRUN_TWIN_THREADS=1 in the stages that run ctest or valgrind (exported in each of them): the
# twin's worker pool (docs/twin.md#threads) would only add queueing and contention there, since
# `ctest -j$(nproc)` (and memcheck.py's nproc programs at a time) already keep every core busy. `make
# run` (ci/run_main.sh) keeps the default, where the flagship alone should use the cores. The tests that
# are about the pool (test_twin_pool, twin_threads_identical, twin_pool_helgrind) set their own counts.

stage_architecture() {
  python3 ci/check_boundaries.py
  ci/check_format.sh
}

# Every test runs once with gcc: here on the plain build those labelled `heavy` (the 1024-rank rehearsal,
# the multi-process jobs, the 64-rank campaign: too slow for the coverage build) or `gcc-plain` (the
# coverage build has only a short form of them, or none: the full layout sweeps, helgrind), the rest in
# the coverage stage on the same code built with --coverage (gcc -O2 as here; the instrumentation changes
# counts, not results). Running those here too doubled this stage for no new check. With the coverage
# stage skipped (TWINRUN_SKIP), this stage runs every test.
stage_gcc() {
  export TWINRUN_TWIN_THREADS=1 # ctest -j fills the cores: no worker pool (see above stage_architecture)
  cmake --preset twin >/dev/null
  cmake --build build/twin -j"$jobs"
  # -j cores (ctest_jobs): -j3 on 2 cores was tried for the multi-process jobs' waits; it starved the
  # flagship (94-119 s alone in a lane, 171-198 s sharing), and the stage took 175-205 s against 164-200 s
  if skipped coverage; then ctest_stage build/twin
  else ctest_stage build/twin -L '^(heavy|gcc-plain)$'; fi
}

stage_clang() {
  export TWINRUN_TWIN_THREADS=1 # ctest -j fills the cores: no worker pool (see above stage_architecture)
  cmake --preset twin-clang >/dev/null
  cmake --build build/twin-clang -j"$jobs"
  # less `heavy` and `slow` (tests/CMakeLists.txt): sweeps of the same code at more layouts and ranks,
  # whose gcc runs (gcc stage or coverage stage) are the check; this stage checks the compiler (warnings,
  # and the same bits below)
  ctest_stage build/twin-clang -LE 'heavy|slow'
  # Determinism across compilers: the cli_deterministic run gives the same bits with gcc and clang (gcc's
  # run made here: the gcc stage runs only `heavy` tests when the coverage stage runs the rest)
  # its output shown (a failure here must say why); --no-tests=error: a renamed test fails, not passes
  ctest --test-dir build/twin -R '^cli_deterministic$' --no-tests=error --output-on-failure
  cmp build/twin/tests/det_a.jsonl build/twin-clang/tests/det_a.jsonl
  echo "gcc and clang twins wrote byte-identical training metrics"
}

stage_valgrind() {
  export TWINRUN_TWIN_THREADS=1 # memcheck.py runs nproc programs at a time: no worker pool (see above)
  python3 ci/memcheck.py build/twin
}

# fuzz_one TARGET SECS: one libFuzzer target over a copy of its seed corpus; its result in one block
# (a crash's report is the end of libFuzzer's output: kept whole when the target fails)
fuzz_one() {
  local t=$1 secs=$2 name work rc=0
  name=$(basename "$t")
  work=$(mktemp -d)
  # every target has its seeds in fuzz/corpus/<target>: a folder of another name left a target to start
  # from nothing, unnoticed
  if [ ! -d "fuzz/corpus/$name" ]; then
    echo "-- $name: FAILED: no seed corpus fuzz/corpus/$name"
    rm -rf "$work"
    return 1
  fi
  cp -r "fuzz/corpus/$name/." "$work/"
  "$t" -max_total_time="$secs" -print_final_stats=0 "$work" >"$work.log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    { echo "-- $name (${secs}s): FAILED"; cat "$work.log"; }
  else
    echo "-- $name (${secs}s): $(tail -n 1 "$work.log")"
  fi
  rm -rf "$work" "$work.log"
  [ $rc -eq 0 ] # 1 for any failure: xargs reads 1-125 as "a command failed", some others as "stop"
}

stage_fuzz() {
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j"$jobs"
  local secs=${TWINRUN_FUZZ_SECONDS:-10}
  export -f fuzz_one
  # as many targets at a time as cores: each is one process, and one at a time left a core idle
  find build/fuzz/fuzz -maxdepth 1 -name 'fuzz_*' -type f -perm -u+x | sort |
    xargs -P"$jobs" -I{} bash -c 'fuzz_one "$1" "$2"' _ {} "$secs"
}

stage_coverage() {
  export TWINRUN_TWIN_THREADS=1 # ctest -j fills the cores: no worker pool (see above stage_architecture)
  cmake --preset coverage >/dev/null
  cmake --build build/coverage -j"$jobs"
  ctest_stage build/coverage -LE heavy
  # --gcov-ignore-parse-errors: threads (the worker pool's tests, the rendezvous store's server) update
  # the same counters without atomics; a lost update makes gcov derive a negative count for another arc
  # ("branch 1 taken -1"), which gcovr otherwise refuses (a make test failed so); the line is skipped
  # and reported on stderr, the rest counted
  gcovr -r . --object-directory build/coverage --gcov-ignore-parse-errors \
    --filter 'base/' --filter 'engine/' --filter 'sim/' --filter 'fault/' --filter 'runner/' \
    --print-summary --txt build/coverage/coverage.txt \
    --json-summary build/coverage/coverage_summary.json
  python3 ci/coverage_by_folder.py build/coverage/coverage_summary.json
  echo "per-file report: build/coverage/coverage.txt"
}

stage_cuda() {
  cmake --preset cuda >/dev/null
  cmake --build build/cuda -j"$jobs"
  # the musa preset as far as it goes without the SDK: every source with -DTWINRUN_MUSA against
  # CUDA-backed stub headers (docs/musa.md)
  cuda/tools/musa_mapping_check.sh
}

stage_flash_emu() {
  tests/tools/flash_emu/flash_emu.sh build/flash_emu
}

stage_gcc_quick() {
  export TWINRUN_TWIN_THREADS=1 # ctest -j fills the cores: no worker pool (see above stage_architecture)
  cmake --preset twin >/dev/null
  cmake --build build/twin -j"$jobs"
  ctest_stage build/twin -LE 'heavy|slow'
}

# The whole run needs about TWINRUN_DISK_MIB of free disk (measured: docs/benchmarks.md); less is
# said up front, since a full disk fails tests with messages about data caches and checkpoints.
need_mib=${TWINRUN_DISK_MIB:-3072}
have_mib=$(free_mib)
echo "disk: ${have_mib:-?} MiB free here; make test needs about $need_mib MiB"
if [ -n "$have_mib" ] && [ "$have_mib" -lt "$need_mib" ]; then
  echo "WARNING: less free disk than make test needs; tests that write data caches or checkpoints may fail with"
  echo "         'No space left on device' (free some space, or remove build/ trees of other presets)"
fi
run_stage "architecture: include boundaries, loops, guards; C style" stage_architecture
if [ "${1:-}" = --quick ]; then
  run_stage "twin (gcc): build, tests less heavy and slow" stage_gcc_quick
  summary
  [ $failed -eq 0 ] || { echo "twinrun: quick checks FAILED"; exit 1; }
  echo
  echo "twinrun: quick checks passed (make test runs everything)"
  exit 0
fi
run_stage "twin (gcc): build and test" stage_gcc
if skipped clang; then skip_stage "twin (clang): build and test" TWINRUN_SKIP
else run_stage "twin (clang): build and test" stage_clang; fi
if skipped valgrind; then skip_stage "valgrind memcheck over the test suite" TWINRUN_SKIP
else run_stage "valgrind memcheck over the test suite" stage_valgrind; fi
if skipped fuzz; then skip_stage "fuzz targets (libFuzzer, ASan/UBSan)" TWINRUN_SKIP
else run_stage "fuzz targets (libFuzzer, ASan/UBSan)" stage_fuzz; fi
if skipped coverage; then skip_stage "coverage (gcovr)" TWINRUN_SKIP
else run_stage "coverage (gcovr)" stage_coverage; fi
if skipped cuda; then skip_stage "cuda preset: compile" TWINRUN_SKIP
elif command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  run_stage "cuda preset: compile (runs on the GPU machine); musa paths" stage_cuda
else skip_stage "cuda preset: compile" "no nvcc on this machine"; fi
if skipped cuda; then skip_stage "flash attention on the CPU (emulated warps)" TWINRUN_SKIP
else run_stage "flash attention on the CPU (emulated warps)" stage_flash_emu; fi

summary
if [ $failed -ne 0 ]; then
  echo "twinrun: some checks FAILED (see the table above and each stage's output)"
  exit 1
fi
echo
echo "twinrun: all checks passed"
