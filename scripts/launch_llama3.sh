#!/usr/bin/env bash
# =============================================================================
# twinrun Llama-3 launcher: the 8B seed's train_llama3_8b_dynamic.sh, with train_llama3 in place of
# torchrun + pretrain_gpt.py. Same knobs (environment variables), same node-level convention of
# Kubeflow/AIStudio (WORLD_SIZE = nodes, RANK = node index, MASTER_ADDR/MASTER_PORT injected), same
# configuration summary. Run it once per node; it starts one train_llama3 per GPU with torchrun-style
# variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), writes one
# log per rank, and exits with the first non-zero exit code after stopping the node's other ranks.
#
#   scripts/launch_llama3.sh [--backend B] [--dry-run] [CHECKPOINT_PATH [TENSORBOARD_LOGS_PATH [TOKENIZER_ARG [DATA_ARG]]]]
#   scripts/launch_llama3.sh --help
#
# The four positional paths are the seed's ($1..$4, as Megatron's train_llama3_8b_h100_fp8.sh); a word
# starting with '-' is never taken as one. The multi-node 70B guide's entry point is
# scripts/train_llama3_70b_multi_nodes.sh; the code both share is scripts/lib/launch_common.sh.
# =============================================================================
set -euo pipefail

# shellcheck disable=SC2034 # read by the library's messages
LC_PROG=launch_llama3
LC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/launch_common.sh
. "$LC_ROOT/scripts/lib/launch_common.sh"

usage() {
    cat <<'USAGE'
用法 (usage): launch_llama3.sh [OPTIONS] [CHECKPOINT_PATH [TENSORBOARD_LOGS_PATH [TOKENIZER_ARG [DATA_ARG]]]]

The Llama3-8B tutorial's train_llama3_8b_dynamic.sh with twinrun's train_llama3. Run it once per node;
the platform's WORLD_SIZE (nodes), RANK (this node), MASTER_ADDR and MASTER_PORT say where it is.
With no argument it trains the tutorial's Llama3-8B on mock data, as the tutorial's script does.

Positional paths (each also an environment variable of the same name):
  CHECKPOINT_PATH        --save and --load (default checkpoints/llama3_8b_fp8)
  TENSORBOARD_LOGS_PATH  --tensorboard-dir (default tensorboard_logs/llama3_8b_fp8)
  TOKENIZER_ARG          Hugging Face tokenizer directory, or MOCK (default) for mock data
  DATA_ARG               Megatron data prefix (.bin/.idx), or MOCK (default)

Options:
  --backend auto|cuda|musa|twin   what runs the ranks (default: TWINRUN_BACKEND, else auto). auto: the
                                  MUSA build with mthreads-gmi's GPUs, the CUDA build with nvidia-smi's;
                                  no GPU is an error. twin: the CPU twin runs the whole job on node 0
  --dry-run                       print the configuration and each rank's command line; start nothing
                                  (the same as DRY_RUN=1)
  -h, --help                      this text
  --                              the words after it are positional paths even if they start with '-'

Environment knobs (the tutorial's): TP_SIZE CP_SIZE PP_SIZE MICRO_BATCH_SIZE GLOBAL_BATCH_SIZE DTYPE
USE_BF16 FAST_TEST_MODE NUM_LAYERS HIDDEN_SIZE FFN_HIDDEN_SIZE NUM_ATTENTION_HEADS NUM_QUERY_GROUPS
SEQ_LENGTH MAX_POSITION_EMBEDDINGS LEARNING_RATE MIN_LEARNING_RATE LR_DECAY_STYLE WEIGHT_DECAY
TRAIN_SAMPLES LR_DECAY_SAMPLES LR_WARMUP_SAMPLES EXP_NAME EXP_DIR USE_EXP_STRUCTURE LOG_INTERVAL
SAVE_INTERVAL EVAL_INTERVAL ENABLE_PROFILING GPUS_PER_NODE. twinrun's: TRAIN_BIN (default: BACKEND/bin/train_llama3
under TWINRUN_BUILD_ROOT, the repository's build/ unless set), TWINRUN_BACKEND,
LOG_DIR, KV_CHANNELS, VOCAB_SIZE, EVAL_ITERS, DISTRIBUTED_TIMEOUT_MINUTES, EXTRA_ARGS (more flags for
train_llama3, word-split, appended last so they win), KILL_GRACE_SECONDS. See docs/launch.md.
USAGE
}

# Options first, then at most the seed's four positional paths. Anything else starting with '-' is a
# mistake (e.g. the 70B script's --dataset_dir given here) and is refused, never read as a path.
VALID_OPTS="--backend, --dry-run, --help, --"
POSITIONAL=()
BACKEND_REQ=${TWINRUN_BACKEND:-auto}
while [ $# -gt 0 ]; do
    if [ ${#POSITIONAL[@]} -gt 0 ] && [[ "$1" != -* ]]; then POSITIONAL+=("$1"); shift; continue; fi
    case "$(lc_norm_opt "$1")" in
    -h | --help) usage; exit 0 ;;
    --dry-run) [[ "$1" != *=* ]] || lc_die "--dry-run takes no value"; DRY_RUN=1; shift ;;
    --backend) lc_opt_value "$1" $(($# - 1)) "${2-}"; BACKEND_REQ=$LC_VAL; shift "$LC_SHIFT" ;;
    --) shift; POSITIONAL+=("$@"); break ;;
    --dataset-dir | --data-format | --load | --hostfile)
        lc_die "未知选项 (unknown option) '$1': it is the 70B guide's; that entry point is scripts/train_llama3_70b_multi_nodes.sh. This script takes: $VALID_OPTS and up to four positional paths (see --help)" ;;
    -*) lc_unknown_option "$1" "$VALID_OPTS" ;;
    *) POSITIONAL+=("$1"); shift ;;
    esac
done
[ ${#POSITIONAL[@]} -le 4 ] ||
    lc_die "too many arguments (${#POSITIONAL[@]}): at most CHECKPOINT_PATH TENSORBOARD_LOGS_PATH TOKENIZER_ARG DATA_ARG (see --help)"
for a in "${POSITIONAL[@]}"; do [ -n "$a" ] || lc_die "an empty positional path: give a path or leave it out"; done

# 性能调优环境变量 (the seed's; NCCL reads them)
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
export NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-0}
export NCCL_IB_TIMEOUT=${NCCL_IB_TIMEOUT:-23}
export NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-0}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

die() { lc_die "$@"; }
is_uint() { lc_is_uint "$1"; }
need_pos() { lc_need_pos "$1"; }

# AIStudio 平台环境变量适配: the platform's variables are node-level
PLATFORM_WORLD_SIZE=${WORLD_SIZE:-1} # 平台：节点数量
PLATFORM_RANK=${RANK:-0}             # 平台：节点编号
PLATFORM_MASTER_ADDR=${MASTER_ADDR:-localhost}
PLATFORM_MASTER_PORT=${MASTER_PORT:-29500}
NUM_NODES=$PLATFORM_WORLD_SIZE
NODE_RANK=$PLATFORM_RANK
MASTER_ADDR=$PLATFORM_MASTER_ADDR
MASTER_PORT=$PLATFORM_MASTER_PORT
need_pos NUM_NODES
{ is_uint "$NODE_RANK" && [ "$NODE_RANK" -lt "$NUM_NODES" ]; } ||
    die "RANK=$NODE_RANK (节点编号) must be in 0..$((NUM_NODES - 1)) for WORLD_SIZE=$NUM_NODES nodes"
{ is_uint "$MASTER_PORT" && [ "$MASTER_PORT" -ge 1 ] && [ "$MASTER_PORT" -le 65535 ]; } ||
    die "MASTER_PORT=$MASTER_PORT is not a TCP port (1..65535; torchrun's default is 29500)"
[[ "$MASTER_ADDR" =~ ^[^[:space:]]+$ ]] || die "MASTER_ADDR='$MASTER_ADDR' must be a host name or address"

# The backend from this node's GPUs (nvidia-smi or mthreads-gmi), or the twin when asked for.
lc_select_backend "$BACKEND_REQ"
BACKEND=$LC_BACKEND
AVAILABLE_GPUS=$LC_GPUS
lc_train_bin "$BACKEND"

# 自动检测每个节点的 GPU 数量
if [ -z "${GPUS_PER_NODE:-}" ]; then
    GPUS_PER_NODE=$AVAILABLE_GPUS
    [ "$GPUS_PER_NODE" -ge 1 ] || GPUS_PER_NODE=1
fi
need_pos GPUS_PER_NODE
WORLD_SIZE=$((GPUS_PER_NODE * NUM_NODES))

# 基础路径配置
CHECKPOINT_PATH=${POSITIONAL[0]:-${CHECKPOINT_PATH:-"checkpoints/llama3_8b_fp8"}}
TENSORBOARD_LOGS_PATH=${POSITIONAL[1]:-${TENSORBOARD_LOGS_PATH:-"tensorboard_logs/llama3_8b_fp8"}}
TOKENIZER_ARG=${POSITIONAL[2]:-${TOKENIZER_ARG:-"MOCK"}}
DATA_ARG=${POSITIONAL[3]:-${DATA_ARG:-"MOCK"}}
EXP_NAME=${EXP_NAME:-"llama3-8b-fp8-training"}
EXP_DIR=${EXP_DIR:-"./experiments"}
FULL_EXP_PATH="${EXP_DIR}/${EXP_NAME}"
if [[ "${USE_EXP_STRUCTURE:-0}" == "1" ]]; then
    CHECKPOINT_PATH="${FULL_EXP_PATH}/checkpoints"
    TENSORBOARD_LOGS_PATH="${FULL_EXP_PATH}/tensorboard"
    LOG_DIR=${LOG_DIR:-"${FULL_EXP_PATH}/logs"}
fi
LOG_DIR=${LOG_DIR:-"logs/${EXP_NAME}"}

if [ "$BACKEND" != twin ] && [ "$GPUS_PER_NODE" -gt "$AVAILABLE_GPUS" ]; then
    echo "警告: 配置的 GPU 数量 ($GPUS_PER_NODE) 超过可用 GPU 数量 ($AVAILABLE_GPUS)"
    echo "自动调整为可用 GPU 数量: $AVAILABLE_GPUS"
    GPUS_PER_NODE=$AVAILABLE_GPUS
    [ "$GPUS_PER_NODE" -ge 1 ] || die "这个节点没有 $BACKEND GPU (no GPU on this node: $LC_GPU_TOOLS): to rehearse on the CPU twin use --backend twin (or TWINRUN_BACKEND=twin)"
    WORLD_SIZE=$((GPUS_PER_NODE * NUM_NODES))
fi

echo "==================== AIStudio 平台环境变量适配 ===================="
echo "平台注入变量: WORLD_SIZE=$PLATFORM_WORLD_SIZE (节点数), RANK=$PLATFORM_RANK (节点编号)"
echo "转换后变量: NUM_NODES=$NUM_NODES, NODE_RANK=$NODE_RANK"
echo "GPU 配置: ${GPUS_PER_NODE} GPUs/节点 × ${NUM_NODES} 节点 = ${WORLD_SIZE} 总GPU"
echo "主节点: $MASTER_ADDR:$MASTER_PORT"
echo "=================================================================="

# 默认并行配置
TP_SIZE=${TP_SIZE:-1}
CP_SIZE=${CP_SIZE:-1}
PP_SIZE=${PP_SIZE:-1}
need_pos TP_SIZE
need_pos CP_SIZE
need_pos PP_SIZE
TOTAL_PARALLEL=$((TP_SIZE * CP_SIZE * PP_SIZE))
if [[ $TOTAL_PARALLEL -gt $WORLD_SIZE ]]; then
    echo "错误: 并行配置 (TP=$TP_SIZE × CP=$CP_SIZE × PP=$PP_SIZE = $TOTAL_PARALLEL) 超过总 GPU 数量 ($WORLD_SIZE)"
    exit 1
fi
if [[ $((WORLD_SIZE % TOTAL_PARALLEL)) -ne 0 ]]; then
    echo "错误: 总 GPU 数量 ($WORLD_SIZE) 不能被 TP×CP×PP = $TOTAL_PARALLEL 整除 (WORLD_SIZE = TP × PP × CP × DP)"
    exit 1
fi

# 训练参数配置
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-1}
GLOBAL_BATCH_SIZE=${GLOBAL_BATCH_SIZE:-128}
NUM_LAYERS=${NUM_LAYERS:-32}
HIDDEN_SIZE=${HIDDEN_SIZE:-4096}
FFN_HIDDEN_SIZE=${FFN_HIDDEN_SIZE:-14336}
NUM_ATTENTION_HEADS=${NUM_ATTENTION_HEADS:-32}
NUM_QUERY_GROUPS=${NUM_QUERY_GROUPS:-8}
KV_CHANNELS=${KV_CHANNELS:-128}
SEQ_LENGTH=${SEQ_LENGTH:-8192}
MAX_POSITION_EMBEDDINGS=${MAX_POSITION_EMBEDDINGS:-$SEQ_LENGTH}
VOCAB_SIZE=${VOCAB_SIZE:-128256}
DTYPE=${DTYPE:-"bf16"}
USE_BF16=${USE_BF16:-1}
LEARNING_RATE=${LEARNING_RATE:-0.00015}
MIN_LEARNING_RATE=${MIN_LEARNING_RATE:-0.00001}
LR_DECAY_STYLE=${LR_DECAY_STYLE:-"cosine"}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.1}
TRAIN_SAMPLES=${TRAIN_SAMPLES:-1953125000}
LR_DECAY_SAMPLES=${LR_DECAY_SAMPLES:-1949218748}
LR_WARMUP_SAMPLES=${LR_WARMUP_SAMPLES:-3906252}
for v in MICRO_BATCH_SIZE GLOBAL_BATCH_SIZE NUM_LAYERS HIDDEN_SIZE SEQ_LENGTH; do need_pos $v; done
case "$DTYPE" in bf16 | fp8 | fp16) ;; *) die "DTYPE=$DTYPE: use bf16, fp8 or fp16 (精度类型)" ;; esac
if [[ "${FAST_TEST_MODE:-0}" == "1" ]]; then
    echo "启用快速测试模式，调整训练参数..."
    TRAIN_SAMPLES=1000
    LR_DECAY_SAMPLES=800
    LR_WARMUP_SAMPLES=100
    GLOBAL_BATCH_SIZE=32
fi
DATA_CACHE_PATH="${PWD}/benchmark_cache_${EXP_NAME}"

echo "==================== 训练配置 ===================="
echo "实验名称: $EXP_NAME"
echo "检查点路径: $CHECKPOINT_PATH"
echo "TensorBoard 路径: $TENSORBOARD_LOGS_PATH"
echo "分布式配置: ${NUM_NODES} 节点, 节点排名 ${NODE_RANK}"
echo "GPU 配置: ${GPUS_PER_NODE} GPUs/节点 × ${NUM_NODES} 节点 = ${WORLD_SIZE} 总GPU"
echo "并行配置: TP=${TP_SIZE}, CP=${CP_SIZE}, PP=${PP_SIZE}"
echo "批处理配置: Micro=${MICRO_BATCH_SIZE}, Global=${GLOBAL_BATCH_SIZE}"
echo "模型配置: ${NUM_LAYERS}层, ${HIDDEN_SIZE}隐藏维度, ${SEQ_LENGTH}序列长度"
echo "精度配置: ${DTYPE}${USE_BF16:+, BF16}"
echo "数据模式: ${TOKENIZER_ARG}"
echo "日志目录: ${LOG_DIR} (每个 rank 一个日志), 后端: ${BACKEND} (${TRAIN_BIN})"
echo "=================================================="

MODEL_ARGS=(
    --use-mcore-models
    --num-layers "$NUM_LAYERS"
    --hidden-size "$HIDDEN_SIZE"
    --ffn-hidden-size "$FFN_HIDDEN_SIZE"
    --num-attention-heads "$NUM_ATTENTION_HEADS"
    --group-query-attention
    --num-query-groups "$NUM_QUERY_GROUPS"
    --kv-channels "$KV_CHANNELS"
    --seq-length "$SEQ_LENGTH"
    --max-position-embeddings "$MAX_POSITION_EMBEDDINGS"
    --position-embedding-type rope
    --rotary-base 1000000
    --rotary-percent 1.0
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --swiglu
    --init-method-std 0.0134
    --attention-backend fused
    --apply-layernorm-1p
    --untie-embeddings-and-output-weights
    --disable-bias-linear
)
TRAINING_ARGS=(
    --micro-batch-size "$MICRO_BATCH_SIZE"
    --global-batch-size "$GLOBAL_BATCH_SIZE"
    --train-samples "$TRAIN_SAMPLES"
    --lr-decay-samples "$LR_DECAY_SAMPLES"
    --lr-warmup-samples "$LR_WARMUP_SAMPLES"
    --lr "$LEARNING_RATE"
    --min-lr "$MIN_LEARNING_RATE"
    --lr-decay-style "$LR_DECAY_STYLE"
    --clip-grad 1.0
    --weight-decay "$WEIGHT_DECAY"
    --adam-beta1 0.9
    --adam-beta2 0.95
)
if [[ "$USE_BF16" == "1" ]]; then TRAINING_ARGS+=(--bf16 --grad-reduce-in-bf16); fi
TRAINING_ARGS+=(--cross-entropy-loss-fusion --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1
    --exit-duration-in-mins 235)
DTYPE_ARGS=()
if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max --fp8-param-gather)
fi
MODEL_PARALLEL_ARGS=(--tensor-model-parallel-size "$TP_SIZE" --context-parallel-size "$CP_SIZE" --sequence-parallel)
if [[ $PP_SIZE -gt 1 ]]; then MODEL_PARALLEL_ARGS+=(--pipeline-model-parallel-size "$PP_SIZE"); fi
TRAINING_ARGS+=(--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather)
if [[ "$TOKENIZER_ARG" == "MOCK" ]] || [[ "$DATA_ARG" == "MOCK" ]] || [[ -z "$TOKENIZER_ARG" ]]; then
    echo "使用 Mock 数据模式进行训练..."
    DATA_ARGS_LIST=(--mock-data --tokenizer-type NullTokenizer --vocab-size "$VOCAB_SIZE"
        --data-cache-path "$DATA_CACHE_PATH" --tiktoken-pattern v2 --split "99,1,0"
        --no-create-attention-mask-in-dataloader --no-mmap-bin-files --num-workers 1)
else
    echo "使用真实数据进行训练..."
    DATA_ARGS_LIST=(--data-path "$DATA_ARG" --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$TOKENIZER_ARG"
        --data-cache-path "$DATA_CACHE_PATH" --split "99,1,0" --no-create-attention-mask-in-dataloader
        --no-mmap-bin-files --num-workers 1 --vocab-size "$VOCAB_SIZE")
fi
LOG_INTERVAL=${LOG_INTERVAL:-1}
SAVE_INTERVAL=${SAVE_INTERVAL:-1000}
EVAL_INTERVAL=${EVAL_INTERVAL:-100}
EVAL_AND_LOGGING_ARGS=(
    --log-interval "$LOG_INTERVAL"
    --eval-iters "${EVAL_ITERS:-32}"
    --eval-interval "$EVAL_INTERVAL"
    --save-interval "$SAVE_INTERVAL"
    --log-throughput
    --distributed-timeout-minutes "${DISTRIBUTED_TIMEOUT_MINUTES:-60}"
    --save "$CHECKPOINT_PATH"
    --load "$CHECKPOINT_PATH"
    --tensorboard-dir "$TENSORBOARD_LOGS_PATH"
    --ckpt-format torch_dist
)
if [[ "${ENABLE_PROFILING:-0}" == "1" ]]; then
    EVAL_AND_LOGGING_ARGS+=(--profile --profile-step-start 4 --profile-step-end 6)
fi
read -r -a EXTRA <<<"${EXTRA_ARGS:-}"
ARGS=("${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DTYPE_ARGS[@]}" "${MODEL_PARALLEL_ARGS[@]}"
    "${DATA_ARGS_LIST[@]}" "${EVAL_AND_LOGGING_ARGS[@]}" "${EXTRA[@]}")

# What each local process gets: "RANK WORLD_SIZE LOCAL_RANK" lines (the twin: one process for all).
if [ "$BACKEND" = twin ]; then
    if [ "$NODE_RANK" -ne 0 ]; then
        echo "twin: 节点 $NODE_RANK 无需运行 (the twin runs all $WORLD_SIZE ranks in one process on node 0)"
        exit 0
    fi
    NPROC=1
else
    NPROC=$GPUS_PER_NODE
fi
echo "开始训练..."
echo "训练命令: $(lc_quote_cmd "$TRAIN_BIN" "${ARGS[@]}")"
if [[ "${DRY_RUN:-0}" == "1" ]]; then
    for ((l = 0; l < NPROC; l++)); do
        if [ "$BACKEND" = twin ]; then
            echo "rank process $l: WORLD_SIZE=$WORLD_SIZE (twin: all ranks) log=$LOG_DIR/twin.log"
        else
            echo "rank process $l: RANK=$((NODE_RANK * GPUS_PER_NODE + l)) WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$l" \
                "LOCAL_WORLD_SIZE=$GPUS_PER_NODE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT" \
                "log=$LOG_DIR/rank_$(printf %05d $((NODE_RANK * GPUS_PER_NODE + l))).log"
        fi
    done
    exit 0
fi

mkdir -p "$(dirname "$CHECKPOINT_PATH")" "$(dirname "$TENSORBOARD_LOGS_PATH")" "$DATA_CACHE_PATH" "$LOG_DIR" ||
    die "cannot create the experiment directories under $PWD"
export TWINRUN_FLIGHT_DIR=${TWINRUN_FLIGHT_DIR:-"$LOG_DIR/flight"}
mkdir -p "$TWINRUN_FLIGHT_DIR"
# The rendezvous store's job token (docs/launch.md): rank 0's store answers only clients that hold it.
# One node: a fresh random one. Several nodes: each runs this script, so the secret must come from
# the job's spec (the same TWINRUN_STORE_TOKEN on every node); without one the store is open and says so.
if [ -z "${TWINRUN_STORE_TOKEN:-}" ]; then
    if [ "$NUM_NODES" -eq 1 ]; then
        TWINRUN_STORE_TOKEN=$(lc_new_token)
    else
        # shellcheck disable=SC2028 # the \n is part of a command for the user to paste
        echo "launch_llama3: warning: $NUM_NODES nodes and no TWINRUN_STORE_TOKEN: the rendezvous store on" \
            "$MASTER_ADDR:$MASTER_PORT accepts any client; export the same secret on every node, e.g." \
            "TWINRUN_STORE_TOKEN=\$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n') in the job's spec" >&2
    fi
fi
[ -n "${TWINRUN_STORE_TOKEN:-}" ] && export TWINRUN_STORE_TOKEN

PIDS=()
alive() { for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
stop_all() { # TERM, then KILL whatever is still there after KILL_GRACE_SECONDS (a rank stuck in a hang)
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for ((i = 0; i < ${KILL_GRACE_SECONDS:-5} * 10; i++)); do alive || return 0; sleep 0.1; done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}
trap 'echo "launch_llama3: interrupted: stopping the ranks" >&2; stop_all; exit 130' INT TERM

# The console copy of a rank's output goes through tee; the launcher must wait for tee too, or its last
# lines can land after the launcher's own verdict (and after whatever the caller appends to the same
# file: a truncating redirect keeps each writer's own offset). A `cmd > >(tee)` pipeline gives no handle
# on tee, so open it first: TEE_FD is the pipe, TEE_PIDS what to wait for at the end.
TEE_FD='' TEE_PIDS=()
console_tee() {
    exec {TEE_FD}> >(tee "$1")
    TEE_PIDS+=($!)
}

for ((l = 0; l < NPROC; l++)); do
    if [ "$BACKEND" = twin ]; then
        log="$LOG_DIR/twin.log"
        console_tee "$log"
        (unset RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
            exec env WORLD_SIZE="$WORLD_SIZE" "$TRAIN_BIN" "${ARGS[@]}") >&"$TEE_FD" 2>&1 &
    else
        g=$((NODE_RANK * GPUS_PER_NODE + l))
        log="$LOG_DIR/rank_$(printf %05d "$g").log"
        cmd=(env RANK="$g" WORLD_SIZE="$WORLD_SIZE" LOCAL_RANK="$l" LOCAL_WORLD_SIZE="$GPUS_PER_NODE"
            GROUP_RANK="$NODE_RANK" MASTER_ADDR="$MASTER_ADDR" MASTER_PORT="$MASTER_PORT" "$TRAIN_BIN" "${ARGS[@]}")
        # the node's last rank (Megatron logs from the job's last rank) is shown on the console too
        if [ "$l" -eq $((NPROC - 1)) ]; then
            console_tee "$log"
            "${cmd[@]}" >&"$TEE_FD" 2>&1 &
        else
            "${cmd[@]}" >"$log" 2>&1 &
        fi
    fi
    PIDS+=($!)
    if [ -n "$TEE_FD" ]; then exec {TEE_FD}>&-; TEE_FD=; fi # the rank holds the pipe now: tee ends when it does
done

TRAIN_EXIT_CODE=0
# wait for the ranks one by one, each only once: asking `wait -n` again for a rank already reaped answers
# 127 ("no such job"), which would read as a failed rank
running=("${PIDS[@]}")
while [ ${#running[@]} -gt 0 ]; do
    ended=
    rc=0
    wait -n -p ended "${running[@]}" || rc=$?
    [ -n "$ended" ] || break # nothing left to wait for
    left=()
    for p in "${running[@]}"; do [ "$p" = "$ended" ] || left+=("$p"); done
    running=("${left[@]}")
    if [ "$rc" -ne 0 ]; then
        TRAIN_EXIT_CODE=$rc
        echo "launch_llama3: a rank exited with code $rc: stopping the node's other ranks (logs: $LOG_DIR)" >&2
        stop_all
        break
    fi
done
wait 2>/dev/null
# tee ends once every rank writing into it has (stop_all above took care of hung ones)
for p in "${TEE_PIDS[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.02; done; done
if [[ $TRAIN_EXIT_CODE -eq 0 ]]; then
    echo "训练成功完成!"
    echo "检查点保存在: $CHECKPOINT_PATH"
    echo "TensorBoard 日志: $TENSORBOARD_LOGS_PATH"
else
    echo "训练失败，退出码: $TRAIN_EXIT_CODE"
    echo "查看每个 rank 的日志: $LOG_DIR/rank_*.log; 挂起诊断: blame $TWINRUN_FLIGHT_DIR/flight_rank*.txt"
    exit $TRAIN_EXIT_CODE
fi
