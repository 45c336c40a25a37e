#!/usr/bin/env bash
# scripts/launch_llama3.sh on a machine without GPUs: the node-level platform variables turned into
# per-process torchrun-style ones, the seed's summary, per-rank logs, validation messages, the first
# failure's exit code with the node's other (hung) ranks stopped, and one real run of train_llama3
# through the script (the twin binary here; the CUDA one on the GPU machine).
#   tests/launch/test_launch_script.sh TRAIN_BIN BACKEND
set -u
BIN=$1
BACKEND=${2:-twin}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
L="$HERE/scripts/launch_llama3.sh"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
fails=0 passes=0
ok() { echo "ok   $*"; passes=$((passes + 1)); }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
expect() { # expect NAME FILE REGEX
    if grep -Eq -- "$3" "$2"; then ok "$1"; else bad "$1: no /$3/ in $2:"; sed 's/^/    /' "$2" | tail -20; fi
}

# a GPU-less machine that believes it has MOCK_GPUS GPUs, and a train_llama3 that reports itself
mkdir -p mock
cat >mock/nvidia-smi <<'SH'
#!/bin/sh
i=0; while [ $i -lt "${MOCK_GPUS:-0}" ]; do echo "GPU $i: Mock H200 (UUID: GPU-$i)"; i=$((i + 1)); done
SH
cat >mock/train_llama3 <<'SH'
#!/usr/bin/env bash
echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT FLIGHT=$TWINRUN_FLIGHT_DIR ARGS=$*" >"$MOCK_OUT/rank_$RANK"
echo "${TWINRUN_STORE_TOKEN:-none}" >"$MOCK_OUT/token_$RANK"
echo "rank $RANK says hello"
[ "$RANK" = "${MOCK_HANG_RANK:-x}" ] && exec sleep 600
[ "$RANK" = "${MOCK_FAIL_RANK:-x}" ] && { sleep 0.5; exit "${MOCK_FAIL_CODE:-1}"; }
exit 0
SH
chmod +x mock/nvidia-smi mock/train_llama3
export MOCK_OUT=$W/out
mkdir -p out
mockenv=(env PATH="$W/mock:$PATH" TRAIN_BIN="$W/mock/train_llama3" MOCK_GPUS=2 KILL_GRACE_SECONDS=1)

# node 1 of 2 (the platform's WORLD_SIZE=2 RANK=1), 2 GPUs each: global ranks 2 and 3
"${mockenv[@]}" WORLD_SIZE=2 RANK=1 MASTER_ADDR=worker-0 MASTER_PORT=29555 TP_SIZE=2 EXP_NAME=t1 \
    bash "$L" >node1.txt 2>&1
echo "exit $?" >>node1.txt
expect "node 1: exits 0" node1.txt "^exit 0$"
expect "node 1: platform variables" node1.txt "平台注入变量: WORLD_SIZE=2 \(节点数\), RANK=1 \(节点编号\)"
expect "node 1: GPU summary" node1.txt "GPU 配置: 2 GPUs/节点 × 2 节点 = 4 总GPU"
expect "node 1: parallel summary" node1.txt "并行配置: TP=2, CP=1, PP=1"
expect "node 1: master" node1.txt "主节点: worker-0:29555"
expect "node 1: rank 2's variables" out/rank_2 "^RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER=worker-0:29555 "
expect "node 1: rank 3's variables" out/rank_3 "^RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 "
expect "node 1: seed flags" out/rank_3 "--tensor-model-parallel-size 2 .*--sequence-parallel .*--tensorboard-dir tensorboard_logs/llama3_8b_fp8"
expect "node 1: per-rank logs" logs/t1/rank_00002.log "rank 2 says hello"
expect "node 1: flight dumps dir" out/rank_2 "FLIGHT=logs/t1/flight"
[ ! -e out/rank_0 ] && ok "node 1 starts no rank of node 0" || bad "node 1 started rank 0"
[ -e logs/t1/rank_00000.log ] && bad "node 1 wrote rank 0's log" || ok "node 1 writes only its own logs"
# two nodes and no rendezvous token in the job's spec: said so, none invented (it would differ per node)
expect "node 1: no token, warned" node1.txt "no TWINRUN_STORE_TOKEN: the rendezvous store on worker-0:29555 accepts any client"
expect "node 1: no token invented" out/token_2 "^none$"

# the first failure's code comes back; the node's hung rank is stopped, not waited for
rm -f out/*
start=$(date +%s)
"${mockenv[@]}" MOCK_FAIL_RANK=1 MOCK_FAIL_CODE=7 MOCK_HANG_RANK=0 EXP_NAME=t2 bash "$L" >fail.txt 2>&1
echo "exit $?" >>fail.txt
took=$(($(date +%s) - start))
expect "failure: exit code of the failed rank" fail.txt "^exit 7$"
expect "failure: said so" fail.txt "训练失败，退出码: 7"
# one node: a fresh random token, the same for every rank of the node
expect "one node: a token for rank 0" out/token_0 "^[0-9a-f]{32}$"
cmp -s out/token_0 out/token_1 && ok "one node: every rank holds the same token" || bad "one node: ranks got different tokens"
[ "$took" -lt 30 ] && ok "failure: hung rank stopped (${took}s)" || bad "failure took ${took}s: the hung rank was waited for"

# FAST_TEST_MODE and USE_EXP_STRUCTURE as the seed defines them; DRY_RUN lists the ranks
rm -f out/*
"${mockenv[@]}" FAST_TEST_MODE=1 USE_EXP_STRUCTURE=1 EXP_NAME=t3 DRY_RUN=1 bash "$L" >dry.txt 2>&1
echo "exit $?" >>dry.txt
expect "dry run: exits 0" dry.txt "^exit 0$"
expect "dry run: fast test mode" dry.txt "启用快速测试模式"
expect "dry run: fast test batch" dry.txt "--global-batch-size 32 --train-samples 1000 "
expect "dry run: experiment structure" dry.txt "--save ./experiments/t3/checkpoints .*--tensorboard-dir ./experiments/t3/tensorboard"
expect "dry run: rank lines" dry.txt "rank process 1: RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=localhost MASTER_PORT=29500"
[ -e out/rank_0 ] && bad "dry run started a rank" || ok "dry run starts nothing"

# mistakes, each with its message and no rank started
check_refusal() { # NAME CODE REGEX ENV...
    local name=$1 code=$2 re=$3
    shift 3
    "${mockenv[@]}" "$@" bash "$L" >refuse.txt 2>&1
    echo "exit $?" >>refuse.txt
    expect "$name: exit $code" refuse.txt "^exit $code$"
    expect "$name: message" refuse.txt "$re"
}
check_refusal "TP too large" 1 "超过总 GPU 数量 \(2\)" TP_SIZE=4
check_refusal "TP does not divide" 1 "不能被 TP×CP×PP = 3 整除" GPUS_PER_NODE=4 TP_SIZE=3 MOCK_GPUS=4
check_refusal "bad port" 2 "MASTER_PORT=http is not a TCP port" MASTER_PORT=http
check_refusal "node index" 2 "RANK=2 .* must be in 0..1" WORLD_SIZE=2 RANK=2
check_refusal "bad knob" 2 "MICRO_BATCH_SIZE=zero" MICRO_BATCH_SIZE=zero
check_refusal "bad dtype" 2 "DTYPE=fp4" DTYPE=fp4
[ -e out/rank_0 ] && bad "a refused launch started a rank" || ok "refusals start nothing"

# a real run through the script: one GPU (or the twin), a tiny Llama, TensorBoard and a checkpoint
env PATH="$PATH" TRAIN_BIN="$BIN" TWINRUN_BACKEND="$BACKEND" GPUS_PER_NODE=1 WORLD_SIZE=1 EXP_NAME=real \
    USE_EXP_STRUCTURE=1 NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=176 NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 \
    KV_CHANNELS=8 SEQ_LENGTH=32 VOCAB_SIZE=512 MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=4 TRAIN_SAMPLES=12 \
    LR_DECAY_SAMPLES=8 LR_WARMUP_SAMPLES=4 EVAL_ITERS=1 EVAL_INTERVAL=2 bash "$L" >real.txt 2>&1
echo "exit $?" >>real.txt
expect "real run: exits 0" real.txt "^exit 0$"
expect "real run: iteration lines" real.txt "iteration +3/ +3 \| consumed samples: +12 \|.*lm loss"
expect "real run: success message" real.txt "训练成功完成!"
ls experiments/real/tensorboard/events.out.tfevents.* >/dev/null 2>&1 && ok "real run: TensorBoard file" ||
    bad "real run: no TensorBoard event file"
ls experiments/real/logs/*.log >/dev/null 2>&1 && ok "real run: per-rank log" || bad "real run: no log file"
[ -d experiments/real/checkpoints ] && ok "real run: checkpoint directory" || bad "real run: no checkpoint"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
