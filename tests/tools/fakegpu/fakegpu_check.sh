#!/usr/bin/env bash
# The real backend's collective code (cuda/coll_nccl.c, coll_watchdog.c, coll_flight.c and the
# bootstrap) and tools/coll_smoke.c, compiled against fakegpu — a CPU stand-in for the CUDA runtime and
# NCCL (streams drained by threads, events, non-blocking NCCL calls whose enqueue comes late,
# communicators that spin until aborted) — and run without a GPU: both modes' smoke test, the injected
# hang (exit 1 within the timeout + 5 s, the dump, blame), TWINRUN_COLL_ON_TIMEOUT=return, a 1 ms
# watchdog poll; then all of it again under ThreadSanitizer (the watchdog thread against the main one).
# Without ThreadSanitizer on the host the last line says that half was skipped and why.
# What it cannot show: anything about real CUDA or NCCL (cuda/tools/async_check.sh on a GPU does).
# Usage (repository root): tests/tools/fakegpu/fakegpu_check.sh [BASE_LIB]
#   BASE_LIB: a built libtwinrun_base.a (default: build/cuda's, else build/twin's) and its blame next to it
set -u
F=tests/tools/fakegpu
LIB=${1:-}
[ -z "$LIB" ] && for b in build/cuda build/twin; do [ -e "$b/libtwinrun_base.a" ] && LIB=$b/libtwinrun_base.a && break; done
[ -e "$LIB" ] || { echo "fakegpu_check: no libtwinrun_base.a (build the cuda or twin preset first)"; exit 2; }
BLAME=$(dirname "$LIB")/bin/blame
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
SRC=("$F"/fake_cuda.c "$F"/fake_nccl.c "$F"/fake_dev.c cuda/coll_nccl.c cuda/coll_watchdog.c
    cuda/coll_flight.c cuda/coll_bootstrap.c cuda/coll_rendezvous.c cuda/tools/coll_smoke.c)
build() { # build OUT [extra flags]
    local out=$1; shift
    gcc -std=c11 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE "$@" -I"$F" -Ibase/include -Ibase -Icuda \
        "${SRC[@]}" -Wl,--start-group "$LIB" -Wl,--end-group -lcjson -lz -lm -lpthread -o "$out"
}

run_smoke() { # run_smoke NAME BIN: the smoke test in both modes, the hang in both, return mode
    local name=$1 bin=$2
    for mode in 0 1; do
        d=$T/$name.smoke$mode && mkdir -p "$d"
        if TWINRUN_COLL_SYNC=$mode TWINRUN_COLL_WATCHDOG_POLL_MS=1 TWINRUN_FLIGHT_DIR=$d TWINRUN_FLIGHT_AT_EXIT=1 \
            timeout 120 "$bin" 0 1 >"$d/log" 2>&1 && grep -q "all ok" "$d/log"; then
            ok "$name: coll_smoke 0 1, TWINRUN_COLL_SYNC=$mode"
        else bad "$name: coll_smoke 0 1, TWINRUN_COLL_SYNC=$mode"; tail -8 "$d/log"; fi
        if [ "$mode" = 0 ]; then
            python3 - "$d/flight_rank00000.txt" <<'EOF' && ok "$name: async exit dump: every record completed, times ordered" || bad "$name: async exit dump"
import sys
recs = [dict(zip(l.split()[2::2], l.split()[3::2])) for l in open(sys.argv[1]) if l.startswith("rec ")]
bad = [r for r in recs if r["state"] != "completed" or not (float(r["t_sched"]) - 1e-4 <= float(r["t_start"]) <= float(r["t_end"]))]
for r in bad[:5]: print("  ", r)
sys.exit(1 if bad or not recs else 0)
EOF
        fi
        d=$T/$name.hang$mode && mkdir -p "$d"
        local rc took t_hang
        TWINRUN_COLL_SYNC=$mode TWINRUN_COLL_TIMEOUT_S=2 TWINRUN_FLIGHT_DIR=$d timeout 60 "$bin" 0 1 hang >"$d/log" 2>&1
        rc=$?
        t_hang=$(grep -o "unix time [0-9.]*" "$d/log" | head -1 | awk '{print $3}')
        took=$(awk -v a="$(date +%s.%N)" -v b="${t_hang:-0}" 'BEGIN { printf "%.1f", a - b }')
        if [ $rc -eq 1 ] && grep -q "watchdog:" "$d/log" && awk -v t="$took" 'BEGIN { exit !(t <= 2 + 5) }'; then
            ok "$name: hang, TWINRUN_COLL_SYNC=$mode: exit 1, $took s from the hang (timeout 2 s)"
        else bad "$name: hang, TWINRUN_COLL_SYNC=$mode: exit $rc after $took s"; tail -8 "$d/log"; fi
        if [ -x "$BLAME" ]; then
            "$BLAME" "$d"/flight_rank*.txt >"$d/blame" 2>&1
            [ $? -eq 1 ] && grep -q "comm 'hang'.* seq 1 all_reduce" "$d/blame" && ok "$name: blame reads the hang's dump" ||
                { bad "$name: blame on the hang's dump"; cat "$d/blame"; }
        fi
    done
    d=$T/$name.return && mkdir -p "$d"
    TWINRUN_COLL_ON_TIMEOUT=return TWINRUN_COLL_TIMEOUT_S=1 TWINRUN_FLIGHT_DIR=$d timeout 60 "$bin" 0 1 hang >"$d/log" 2>&1
    rc=$?
    if [ $rc -eq 3 ] && grep -q "came back from the injected hang" "$d/log"; then
        ok "$name: TWINRUN_COLL_ON_TIMEOUT=return: the stream comes back after the watchdog's abort"
    else bad "$name: TWINRUN_COLL_ON_TIMEOUT=return: exit $rc"; tail -8 "$d/log"; fi
}

if build "$T/smoke"; then ok "build against fakegpu"; run_smoke plain "$T/smoke"; else bad "build against fakegpu"; fi
# The ThreadSanitizer half needs gcc's -fsanitize=thread (libtsan) and a kernel it runs on: a program of
# one line, built and run, says whether this host has them. Without, the half is skipped, saying why
# (the last line: ctest reports the test skipped, tests/launch/tests.cmake); with them, a failure to
# build the collective code under it is a failure.
no_tsan=
echo 'int main(void) { return 0; }' >"$T/probe.c"
if ! gcc -fsanitize=thread "$T/probe.c" -o "$T/probe" >"$T/probe.log" 2>&1; then
    no_tsan="gcc lacks -fsanitize=thread: $(head -1 "$T/probe.log")"
elif ! "$T/probe" >"$T/probe.log" 2>&1; then
    no_tsan="a ThreadSanitizer program does not run here: $(head -1 "$T/probe.log")"
elif build "$T/smoke_tsan" -fsanitize=thread 2>"$T/tsan_build.log"; then
    ok "build against fakegpu under ThreadSanitizer"
    export TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_signal_unsafe=0" COLL_SMOKE_BIG_MB=4
    run_smoke tsan "$T/smoke_tsan"
    grep -h "WARNING: ThreadSanitizer" "$T"/tsan.*/log | sort | uniq -c
else
    bad "build against fakegpu under ThreadSanitizer"; head -20 "$T/tsan_build.log"
fi
echo "fakegpu check: $pass passed, $fail failed"
[ $fail -eq 0 ] || exit 1
[ -z "$no_tsan" ] || echo "fakegpu check: ThreadSanitizer half SKIPPED: $no_tsan"
exit 0
