#!/usr/bin/env bash
# The twin across processes (docs/multiprocess.md): the same job as one process and as several,
# started by mpirun or with torchrun-style variables, over libfabric's tcp;ofi_rxm and shm.
#   multiproc.sh BIN_DIR WORK_DIR identical   metrics JSONL byte-identical to one process
#   multiproc.sh BIN_DIR WORK_DIR kill        kill -9 of one process: every survivor exits non-zero, blame names it
#   multiproc.sh BIN_DIR WORK_DIR stop        SIGSTOP of one process: the same, found by the wall-clock watchdog
#   multiproc.sh BIN_DIR WORK_DIR mpirun_kill kill -9 under mpirun: mpirun stops the job, the blame names the rank
#   multiproc.sh BIN_DIR WORK_DIR bad_input   hostfile short of slots, unreachable rendezvous, unknown provider
set -uo pipefail
bin=$1 work=$2 mode=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # CI runs as root
args=(--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
      --num-query-groups 4 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4
      --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --mock-data --vocab-size 512
      --eval-iters 0 --log-interval 1000 --data-cache-path "$work/cache")
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# a free port below the ephemeral range at each call (free_port.py says why)
port() { python3 "$here/free_port.py"; }

# torchrun-style: N processes of PER ranks each, in the background; pids in PIDS
PIDS=()
start_torchrun() { # NAME N PER [train args...]
    local name=$1 n=$2 per=$3 p
    shift 3
    p=$(port)
    PIDS=()
    for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$p TWINRUN_RANKS_PER_PROCESS=$per \
            "$bin/train_llama3" "${args[@]}" "$@" --metrics-jsonl "$name.jsonl" >"${name}_$r.log" 2>&1 &
        PIDS+=($!)
    done
}

same_as_one_process() { # NAME WORLD [train args...]: NAME.jsonl against the in-process run
    local name=$1 world=$2
    shift 2
    WORLD_SIZE=$world "$bin/train_llama3" "${args[@]}" "$@" --metrics-jsonl "${name}_one.jsonl" >"${name}_one.log" 2>&1 ||
        bad "$name: the one-process run failed"
    if [ -s "$name.jsonl" ] && cmp "$name.jsonl" "${name}_one.jsonl"; then
        echo "$name: metrics byte-identical to one process ($(wc -l <"$name.jsonl") steps)"
    else
        bad "$name: metrics differ from one process"
    fi
}

case $mode in
identical)
    tp2pp2=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 6)
    dist=("${tp2pp2[@]}" --use-distributed-optimizer --sequence-parallel)
    # 4 processes of one rank: TP and PP between processes, tcp;ofi_rxm
    FI_PROVIDER="tcp;ofi_rxm" mpirun --oversubscribe -np 4 -x FI_PROVIDER "$bin/train_llama3" "${args[@]}" \
        "${tp2pp2[@]}" --metrics-jsonl mpi_4x1.jsonl >mpi_4x1.log 2>&1 || { bad "mpirun 4x1 failed"; tail -20 mpi_4x1.log; }
    same_as_one_process mpi_4x1 4 "${tp2pp2[@]}"
    # 4 processes of two ranks (TP2 PP2 DP2, sequence parallel, distributed optimizer), shm
    FI_PROVIDER=shm mpirun --oversubscribe -np 4 -x FI_PROVIDER -x TWINRUN_RANKS_PER_PROCESS=2 "$bin/train_llama3" \
        "${args[@]}" "${dist[@]}" --metrics-jsonl mpi_4x2.jsonl >mpi_4x2.log 2>&1 || { bad "mpirun 4x2 failed"; tail -20 mpi_4x2.log; }
    same_as_one_process mpi_4x2 8 "${dist[@]}"
    # the same without mpirun: torchrun-style variables and the rendezvous store; ranks dealt in chunks of 2 (TP)
    TWINRUN_RANK_CHUNK=2 start_torchrun tr_2x4 2 4 "${dist[@]}"
    for p in "${PIDS[@]}"; do wait "$p" || bad "torchrun-style process $p failed"; done
    same_as_one_process tr_2x4 8 "${dist[@]}"
    ;;
kill | stop)
    sig=KILL victim=2
    [ "$mode" = stop ] && sig=STOP victim=1
    export TWINRUN_REMOTE_TIMEOUT=5
    start_torchrun "$mode" 4 1 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 100000
    for ((i = 0; i < 300 && $(cat "$mode.jsonl" 2>/dev/null | wc -l) < 3; i++)); do sleep 0.1; done
    [ -s "$mode.jsonl" ] || bad "the job never trained"
    t0=$SECONDS
    kill -$sig "${PIDS[$victim]}"
    for r in 0 1 2 3; do
        [ $r = $victim ] && continue
        wait "${PIDS[$r]}"
        rc=$?
        [ $rc -ne 0 ] || bad "survivor $r exited 0"
        grep -q "stopped first: rank $victim (no dump)" "${mode}_$r.log" || { bad "survivor $r does not blame rank $victim"; tail -20 "${mode}_$r.log"; }
        grep -q "no answer from process $victim " "${mode}_$r.log" || bad "survivor $r does not name process $victim"
    done
    kill -KILL "${PIDS[$victim]}" 2>/dev/null
    wait "${PIDS[$victim]}" 2>/dev/null
    echo "kill -$sig of process $victim: every survivor exited non-zero blaming rank $victim after $((SECONDS - t0)) s"
    grep -h -A12 "^twinrun: process 0 " "${mode}_0.log" | grep -v "^  comm"
    [ $((SECONDS - t0)) -lt 60 ] || bad "took $((SECONDS - t0)) s"
    ;;
mpirun_kill)
    # mpirun stops the survivors with SIGTERM, then SIGKILL after odls_base_sigkill_timeout (1 s by default;
    # 10 here so that a loaded CI machine still prints the blame)
    mpirun --oversubscribe --mca odls_base_sigkill_timeout 10 -np 4 -x TWINRUN_REMOTE_TIMEOUT=5 "$bin/train_llama3" \
        "${args[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --train-iters 100000 \
        --metrics-jsonl mk.jsonl >mk.log 2>&1 &
    mp=$!
    for ((i = 0; i < 300 && $(cat mk.jsonl 2>/dev/null | wc -l) < 3; i++)); do sleep 0.1; done
    victim=$(pgrep -P $mp -f train_llama3 | sed -n 3p)
    [ -n "$victim" ] && kill -KILL "$victim"
    t0=$SECONDS
    wait $mp
    rc=$?
    [ $rc -ne 0 ] || bad "mpirun exited 0"
    grep -q "stopped first: rank 2 (no dump)" mk.log || { bad "no survivor blamed rank 2"; tail -30 mk.log; }
    echo "mpirun: kill -9 of process 2, mpirun exited $rc after $((SECONDS - t0)) s; a survivor's report:"
    grep -m1 -A12 "^twinrun: process " mk.log | grep -v "^  comm"
    ;;
bad_input)
    # a hostfile whose slots do not add up to the processes asked for: mpirun refuses, at once
    echo "localhost slots=2" >hostfile
    timeout 60 mpirun --hostfile hostfile -np 4 "$bin/train_llama3" "${args[@]}" --tensor-model-parallel-size 2 \
        --pipeline-model-parallel-size 2 --train-iters 4 >slots.log 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "not enough slots" slots.log; } || { bad "short hostfile: exit $rc"; cat slots.log; }
    # a hostfile whose slots (3) are not the layout's world (TP2 x PP2 = 4): every process says so
    echo "localhost slots=3" >hostfile
    timeout 60 mpirun --hostfile hostfile "$bin/train_llama3" "${args[@]}" --tensor-model-parallel-size 2 \
        --pipeline-model-parallel-size 2 --train-iters 4 >world.log 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "3 is not divisible" world.log; } || { bad "3 slots: exit $rc"; cat world.log; }
    # nobody serves the rendezvous (process 0 never started): a clear message within the bootstrap timeout
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(port) TWINRUN_BOOTSTRAP_TIMEOUT=3 timeout 60 \
        "$bin/train_llama3" "${args[@]}" --tensor-model-parallel-size 2 --train-iters 4 >unreachable.log 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "could not reach 127.0.0.1:[0-9]* within 3 s" unreachable.log; } ||
        { bad "unreachable rendezvous: exit $rc"; cat unreachable.log; }
    # RANK without a rendezvous address
    RANK=0 WORLD_SIZE=2 timeout 60 "$bin/train_llama3" "${args[@]}" --tensor-model-parallel-size 2 --train-iters 4 \
        >nomaster.log 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "MASTER_ADDR" nomaster.log; } || { bad "no MASTER_ADDR: exit $rc"; cat nomaster.log; }
    # a libfabric provider that does not exist
    FI_PROVIDER=nosuch timeout 60 mpirun --oversubscribe -np 2 -x FI_PROVIDER "$bin/train_llama3" "${args[@]}" \
        --tensor-model-parallel-size 2 --train-iters 4 >provider.log 2>&1
    rc=$?
    { [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'no provider matching FI_PROVIDER="nosuch"' provider.log; } ||
        { bad "unknown provider: exit $rc"; cat provider.log; }
    [ $fail = 0 ] && for f in slots world unreachable nomaster provider; do
        echo "$f: $(grep -m1 -E "slots|train_llama3:" $f.log)"
    done
    ;;
*)
    echo "usage: multiproc.sh BIN_DIR WORK_DIR identical|kill|stop|mpirun_kill|bad_input" >&2
    exit 2
    ;;
esac
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
[ $fail -ne 0 ] || rm -rf "$work/cache"
exit $fail
