#!/usr/bin/env bash
# Stress: the ctest tests matching REGEX, RUNS times each, one after the other, beside BUSY busy loops
# (a loaded 2-core CI runner). The multi-process tests race processes against each other and against
# wall-clock watchdogs, so a rare failure shows only under load and only over many runs; this counts
# them. Prints one line per failed run (its log kept under the work folder), one line per round (the
# failures so far, the seconds and the load average: a run cut short still leaves its count), and the
# tally per test.
#   lab/stress_multiproc.sh [REGEX] [RUNS] [BUSY]
#   REGEX  ctest -R pattern (default "^(test_twin_xproc|multiproc_.*)$")
#   RUNS   runs of each test (default 200)
#   BUSY   busy loops beside them (default 2)
#   BUILD  the ctest build folder (default build/twin); logs go to $BUILD/stress_multiproc
# Exit 0 when every run passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
regex=${1:-'^(test_twin_xproc|multiproc_.*)$'} runs=${2:-200} nbusy=${3:-2}
build=${BUILD:-build/twin}
case $runs$nbusy in *[!0-9]*) echo "stress_multiproc: RUNS and BUSY are whole numbers (got '$runs', '$nbusy')" >&2; exit 2 ;; esac
[ -f "$build/CTestTestfile.cmake" ] || { echo "stress_multiproc: $build is not a ctest build folder: cmake --preset twin && cmake --build $build, or BUILD=..." >&2; exit 2; }
mapfile -t tests < <(ctest --test-dir "$build" -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
[ ${#tests[@]} -gt 0 ] || { echo "stress_multiproc: no test matches '$regex' in $build (ctest --test-dir $build -N lists them)" >&2; exit 2; }
logs=$build/stress_multiproc
mkdir -p "$logs"

busy=()
for ((b = 0; b < nbusy; b++)); do bash -c 'while :; do :; done' & busy+=($!); done
trap '[ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null' EXIT

declare -A pass fail
t0=$SECONDS
for t in "${tests[@]}"; do pass[$t]=0 fail[$t]=0; done
for ((i = 1; i <= runs; i++)); do
    for t in "${tests[@]}"; do
        log=$logs/${t}_$i.log
        if ctest --test-dir "$build" -R "^$t\$" --output-on-failure >"$log" 2>&1; then
            pass[$t]=$((pass[$t] + 1))
            rm -f "$log"
        else
            fail[$t]=$((fail[$t] + 1))
            echo "run $i: $t FAILED ($log): $(grep -m1 -E 'ERROR|FAILED|error|Failed' "$log" | grep -v '^ *[0-9]*/[0-9]* Test')"
        fi
    done
    # a run cut short (a reboot, a killed session) still leaves its count
    echo "round $i/$runs done: $(($(printf '+%s' "${fail[@]}"))) failed so far, $((SECONDS - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
done
failed=0
for t in "${tests[@]}"; do
    echo "$t: ${pass[$t]}/$runs passed"
    failed=$((failed + fail[$t]))
done
echo "stress_multiproc: ${#tests[@]} tests x $runs runs beside $nbusy busy loops: $failed failed ($((SECONDS - t0)) s)"
[ "$failed" -eq 0 ]
