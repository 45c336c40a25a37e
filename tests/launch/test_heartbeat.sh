#!/usr/bin/env bash
# The job's heartbeat (base/launch/heartbeat.h) with two real processes on loopback: launch_check
# --hold keeps both ranks on it as train_llama3's ranks are. A rank killed with SIGKILL, the rank
# that serves the store killed, and a rank stopped (SIGSTOP: silent, sockets open) must each make the
# other exit 1 within 10 s, naming the lost rank; with nobody lost both exit 0.
#   tests/launch/test_heartbeat.sh LAUNCH_CHECK_BIN BASE_PORT
set -u
BIN=$1
PORT=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
export MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 TWINRUN_STORE_TOKEN=heartbeat-test-token-0123456789

# case NAME PORT SIGNAL VICTIM REGEX: start ranks 0 and 1, signal VICTIM once both are on the heartbeat,
# then the survivor must have exited 1 within 10 s with REGEX in its output.
case_lost() {
    local name=$1 port=$2 sig=$3 victim=$4 regex=$5 survivor=$((1 - $4)) pids=()
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r MASTER_PORT=$port "$BIN" 20 --hold 60 >"$W/$name.$r" 2>&1 &
        pids[$r]=$!
    done
    for _ in $(seq 100); do
        grep -q "on the heartbeat" "$W/$name.0" "$W/$name.1" 2>/dev/null &&
            [ "$(cat "$W/$name.0" "$W/$name.1" | grep -c 'on the heartbeat')" = 2 ] && break
        sleep 0.1
    done
    local t0
    t0=$(date +%s.%N)
    kill "-$sig" "${pids[$victim]}"
    wait "${pids[$survivor]}"
    local rc=$? t1
    t1=$(date +%s.%N)
    kill -CONT "${pids[$victim]}" 2>/dev/null; kill -9 "${pids[$victim]}" 2>/dev/null
    wait "${pids[$victim]}" 2>/dev/null
    local took
    took=$(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }")
    if [ "$rc" = 1 ] && grep -Eq -- "$regex" "$W/$name.$survivor" && awk "BEGIN { exit !($took < 10) }"; then
        echo "ok   $name: rank $survivor exited 1 after $took s: $(grep heartbeat: "$W/$name.$survivor")"
    else
        echo "FAIL $name: rank $survivor exit $rc after $took s; its output:"
        sed 's/^/    /' "$W/$name.$survivor"
        fails=$((fails + 1))
    fi
}

case_lost kill_member $PORT KILL 1 "rank 0: heartbeat: rank 1 \(.* pid [0-9]+\) is gone: its connection to the rendezvous store closed without a goodbye.*stopped first: rank 1"
case_lost kill_store $((PORT + 1)) KILL 0 "rank 1: heartbeat: rank 0 \(the rendezvous store's process, 127.0.0.1:$((PORT + 1))\) is gone.*stopped first: rank 0"
case_lost stop_member $((PORT + 2)) STOP 1 "rank 0: heartbeat: rank 1 \(.* pid [0-9]+\) sent no heartbeat for 5 s.*stopped first: rank 1"

# nobody lost: both leave cleanly and exit 0
for r in 0 1; do RANK=$r LOCAL_RANK=$r MASTER_PORT=$((PORT + 3)) "$BIN" 20 --hold 2 >"$W/clean.$r" 2>&1 & done
wait -n; a=$?
wait -n; b=$?
if [ "$a$b" = 00 ] && grep -q "all 2 ranks reached" "$W/clean.0" && ! grep -q "heartbeat:" "$W/clean.0" "$W/clean.1"; then
    echo "ok   clean: both ranks left the heartbeat and exited 0"
else
    echo "FAIL clean: exits $a $b"
    cat "$W/clean.0" "$W/clean.1"
    fails=$((fails + 1))
fi
[ $fails = 0 ] && echo "heartbeat: every case passed"
exit $fails
