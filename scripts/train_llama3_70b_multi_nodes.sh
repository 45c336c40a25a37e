#!/usr/bin/env bash
# =============================================================================
# twinrun's train_llama3_70b_multi_nodes.sh: the entry point of the Llama3-70B thousand-card guide
# (MTT S5000, 128 nodes × 8 GPUs, TP8 PP8 CP1 DP16), with train_llama3 in place of pretrain_gpt.py.
#
#   bash train_llama3_70b_multi_nodes.sh --dataset_dir /data/shared/llama3-70b --data_format bf16
#   bash train_llama3_70b_multi_nodes.sh --dataset_dir DIR --load DIR/checkpoints/iter_0000004   # resume
#   bash train_llama3_70b_multi_nodes.sh          # prints its parameters and exits 0 (the guide's check)
#
# As the guide's script: --dataset_dir DIR gives DATA_PATH=DIR/dataset/dedup-md5-pile-pile-cc_text_document
# and TOKENIZED_MODEL=DIR/tokenizer, ./hostfile ("host slots=8" lines) gives the nodes, and one mpirun
# over the hostfile starts every rank. Unlike it, the checkpoint paths are options (--save, --load),
# and the backend follows the node's GPUs (mthreads-gmi: MUSA; nvidia-smi: CUDA), the CPU twin only
# with --backend twin. The code it shares with scripts/launch_llama3.sh is scripts/lib/launch_common.sh.
# =============================================================================
set -euo pipefail

# shellcheck disable=SC2034 # read by the library's messages
LC_PROG=train_llama3_70b_multi_nodes
LC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/launch_common.sh
. "$LC_ROOT/scripts/lib/launch_common.sh"

# The data set's fixed prefix: the guide renames the downloaded .bin/.idx to it (§3.2.1).
DATA_PREFIX_NAME=dedup-md5-pile-pile-cc_text_document

usage() {
    cat <<USAGE
用法 (usage): train_llama3_70b_multi_nodes.sh --dataset_dir DIR [OPTIONS] [-- TRAIN_LLAMA3_FLAGS...]

Llama3-70B pre-training over every node of ./hostfile with one mpirun (the thousand-card guide's entry
point). Run it in the training directory that holds ./hostfile. Without --dataset_dir it prints its
parameters and exits 0, which checks the argument parsing without starting anything.

Options (underscores and hyphens are the same: --dataset_dir or --dataset-dir; --opt=value also works):
  --dataset_dir DIR          the shared directory of the guide's §2.1: data from
                             DIR/dataset/$DATA_PREFIX_NAME.{bin,idx}, tokenizer from
                             DIR/tokenizer (tokenizer.json), checkpoints in DIR/checkpoints, logs in DIR/logs
  --data_format bf16|fp8     bf16 (default) or bf16 with FP8 (hybrid) matmuls
  --load DIR                 resume from DIR: a --save directory (its latest checkpoint) or one iteration
                             of it, e.g. DIR/checkpoints/iter_0000004; it must exist (default: --save, when
                             it holds a checkpoint)
  --save DIR                 where checkpoints go (default: DATASET_DIR/checkpoints)
  --hostfile FILE            the OpenMPI hostfile (default: ./hostfile, as the guide's script)
  --backend auto|cuda|musa|twin
                             what runs the ranks (default: TWINRUN_BACKEND, else auto). auto: the MUSA build
                             when mthreads-gmi lists GPUs, the CUDA build when nvidia-smi does; no GPU is
                             an error. twin: the CPU twin runs the whole job in one process on this machine
  --dry-run                  check everything, print the mpirun command and each node's ranks; start nothing
  -h, --help                 this text
  -- FLAGS...                more train_llama3 (Megatron) flags, after the script's own: the last value wins

Environment: TP_SIZE PP_SIZE CP_SIZE (8 8 1), MICRO_BATCH_SIZE (1), NUM_MICROBATCHES (8: the global batch
is MICRO_BATCH_SIZE × NUM_MICROBATCHES × DP), TRAIN_ITERS (10000), LR (1.5e-4), MIN_LR (1.5e-5),
LR_WARMUP_ITERS (1% of TRAIN_ITERS), VOCAB_SIZE (128256), SAVE_INTERVAL (1000), EVAL_INTERVAL (1000), EVAL_ITERS (10), LOG_INTERVAL (1),
MASTER_ADDR (the hostfile's first host), MASTER_PORT (29500), LOG_DIR, TENSORBOARD_DIR, DATA_CACHE_PATH,
TRAIN_BIN (default: BACKEND/bin/train_llama3 under TWINRUN_BUILD_ROOT, the repository's build/ unless set),
MPIRUN (mpirun), MPIRUN_ARGS (more mpirun words), EXTRA_ARGS (more train_llama3 flags).
See docs/launch.md.
USAGE
}

VALID_OPTS="--dataset_dir, --data_format, --load, --save, --hostfile, --backend, --dry-run, --help, -- (train_llama3 flags)"
DATASET_DIR='' DATA_FORMAT=bf16 LOAD='' SAVE='' HOSTFILE=./hostfile
BACKEND_REQ=${TWINRUN_BACKEND:-auto}
DRY_RUN=${DRY_RUN:-0}
PASS=()
while [ $# -gt 0 ]; do
    opt=$(lc_norm_opt "$1")
    case "$opt" in
    -h | --help) usage; exit 0 ;;
    --dry-run) [[ "$1" != *=* ]] || lc_die "--dry-run takes no value"; DRY_RUN=1; shift; continue ;;
    --) shift; PASS=("$@"); break ;;
    --dataset-dir | --data-format | --load | --save | --hostfile | --backend)
        lc_opt_value "$1" $(($# - 1)) "${2-}"
        case "$opt" in
        --dataset-dir) DATASET_DIR=$LC_VAL ;;
        --data-format) DATA_FORMAT=$LC_VAL ;;
        --load) LOAD=$LC_VAL ;;
        --save) SAVE=$LC_VAL ;;
        --hostfile) HOSTFILE=$LC_VAL ;;
        --backend) BACKEND_REQ=$LC_VAL ;;
        esac
        shift "$LC_SHIFT" ;;
    -*) lc_unknown_option "$1" "$VALID_OPTS" ;;
    *) lc_die "unexpected argument '$1': this script takes options only (the data set is --dataset_dir DIR; valid options: $VALID_OPTS)" ;;
    esac
done
lc_check_choice --data_format "$DATA_FORMAT" bf16 fp8
lc_check_choice "--backend (TWINRUN_BACKEND)" "$BACKEND_REQ" auto cuda musa twin

# The guide's layout (§1.1, §4.1) and the batch it leaves to the user (§4.2).
TP_SIZE=${TP_SIZE:-8}
PP_SIZE=${PP_SIZE:-8}
CP_SIZE=${CP_SIZE:-1}
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-1}
NUM_MICROBATCHES=${NUM_MICROBATCHES:-8}
TRAIN_ITERS=${TRAIN_ITERS:-10000}
LR=${LR:-1.5e-4}
MIN_LR=${MIN_LR:-1.5e-5}
SAVE_INTERVAL=${SAVE_INTERVAL:-1000}
EVAL_INTERVAL=${EVAL_INTERVAL:-1000}
EVAL_ITERS=${EVAL_ITERS:-10}
LOG_INTERVAL=${LOG_INTERVAL:-1}
VOCAB_SIZE=${VOCAB_SIZE:-128256} # Llama 3's tokenizer: 128000 tokens and 256 special ones
for v in TP_SIZE PP_SIZE CP_SIZE MICRO_BATCH_SIZE NUM_MICROBATCHES TRAIN_ITERS SAVE_INTERVAL EVAL_INTERVAL \
    LOG_INTERVAL VOCAB_SIZE; do lc_need_pos "$v"; done
LR_WARMUP_ITERS=${LR_WARMUP_ITERS:-$((TRAIN_ITERS / 100))} # 1%: the warmup must end inside the decay
lc_is_uint "$LR_WARMUP_ITERS" || lc_die "LR_WARMUP_ITERS=$LR_WARMUP_ITERS is not a non-negative integer"
lc_is_uint "$EVAL_ITERS" || lc_die "EVAL_ITERS=$EVAL_ITERS is not a non-negative integer"

if [ -n "$DATASET_DIR" ]; then
    DATASET_DIR=${DATASET_DIR%/}
    DATA_PATH="$DATASET_DIR/dataset/$DATA_PREFIX_NAME"
    TOKENIZED_MODEL="$DATASET_DIR/tokenizer"
    SAVE=${SAVE:-"$DATASET_DIR/checkpoints"}
    LOG_DIR=${LOG_DIR:-"$DATASET_DIR/logs"}
else
    DATA_PATH="<dataset_dir>/dataset/$DATA_PREFIX_NAME"
    TOKENIZED_MODEL="<dataset_dir>/tokenizer"
    SAVE=${SAVE:-"<dataset_dir>/checkpoints"}
    LOG_DIR=${LOG_DIR:-"<dataset_dir>/logs"}
fi
TENSORBOARD_DIR=${TENSORBOARD_DIR:-"$LOG_DIR/tensorboard"}

print_params() {
    echo "==================== Llama3-70B 训练参数 ===================="
    echo "--dataset_dir      ${DATASET_DIR:-(未指定 / not given)}"
    echo "--data_format      $DATA_FORMAT"
    echo "--load             ${LOAD:-(未指定: --save 中最新的检查点 / the latest checkpoint in --save, if any)}"
    echo "--save             $SAVE"
    echo "--hostfile         $HOSTFILE"
    echo "--backend          $BACKEND_REQ"
    echo "DATA_PATH          $DATA_PATH"
    echo "TOKENIZED_MODEL    $TOKENIZED_MODEL"
    echo "日志目录           $LOG_DIR (每个 rank 一个日志), TensorBoard $TENSORBOARD_DIR"
    echo "并行配置           TP=$TP_SIZE, PP=$PP_SIZE, CP=$CP_SIZE, DP=WORLD_SIZE/$((TP_SIZE * PP_SIZE * CP_SIZE)) (WORLD_SIZE: the hostfile's slots)"
    echo "批处理配置         Micro=$MICRO_BATCH_SIZE, microbatches=$NUM_MICROBATCHES, Global=Micro×microbatches×DP"
    echo "训练               $TRAIN_ITERS iterations, lr $LR → $MIN_LR (cosine, warmup $LR_WARMUP_ITERS)"
    echo "模型配置           80层, 8192隐藏维度, 28672 FFN, 64 heads / 8 query groups, 8192序列长度"
    echo "============================================================="
}

if [ -z "$DATASET_DIR" ]; then
    print_params
    if [ -n "$LOAD" ]; then
        echo "未指定 --dataset_dir: --load 已解析, 但没有启动训练 (nothing started: to resume, give the data set too: --dataset_dir DIR --load $LOAD)"
    else
        echo "未指定 --dataset_dir: 只打印参数, 没有启动训练 (nothing started: --dataset_dir DIR [--data_format bf16|fp8] starts the job; --help lists every option)"
    fi
    exit 0
fi

# ---- everything the job needs, checked before any node is touched -----------------------------------
[ -d "$DATASET_DIR" ] || lc_die "--dataset_dir $DATASET_DIR is not a directory"
for ext in bin idx; do
    [ -s "$DATA_PATH.$ext" ] ||
        lc_die "数据文件缺失或为空 (missing or empty): $DATA_PATH.$ext — the guide's §3.2 downloads the .bin/.idx pair under this prefix"
done
[ -f "$TOKENIZED_MODEL/tokenizer.json" ] ||
    lc_die "找不到 Tokenizer: $TOKENIZED_MODEL/tokenizer.json — put the Llama3 Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) in $TOKENIZED_MODEL (the guide's §3.2.1)"
LOAD_ARGS=(--load "$SAVE")
if [ -n "$LOAD" ]; then
    # An explicit resume point must be there: a typo would otherwise start from scratch.
    [ -d "$LOAD" ] || lc_die "--load $LOAD does not exist: nothing to resume from (a checkpoint directory, or one of its iter_NNNNNNN)"
    LOAD_ARGS=(--load "$LOAD" --exit-on-missing-checkpoint)
fi

lc_read_hostfile "$HOSTFILE"
NUM_NODES=${#LC_HOSTS[@]}
WORLD_SIZE=$LC_SLOT_TOTAL
MP=$((TP_SIZE * PP_SIZE * CP_SIZE))
[ $((WORLD_SIZE % MP)) -eq 0 ] ||
    lc_die "WORLD_SIZE=$WORLD_SIZE (the slots of $HOSTFILE, $NUM_NODES nodes) is not a multiple of TP×PP×CP = $TP_SIZE×$PP_SIZE×$CP_SIZE = $MP: WORLD_SIZE = TP × PP × CP × DP (the guide's §1.1); change the hostfile or TP_SIZE/PP_SIZE/CP_SIZE"
DP_SIZE=$((WORLD_SIZE / MP))
GLOBAL_BATCH_SIZE=$((MICRO_BATCH_SIZE * NUM_MICROBATCHES * DP_SIZE))
for s in "${LC_SLOTS[@]}"; do
    if [ "$s" -lt "$TP_SIZE" ]; then
        lc_warn "a node of $HOSTFILE has slots=$s < TP=$TP_SIZE: tensor-parallel groups span nodes (the guide keeps them inside a node)"
        break
    fi
done

lc_select_backend "$BACKEND_REQ"
BACKEND=$LC_BACKEND
if [ "$BACKEND" != twin ] && [ "$LC_GPUS" -gt 0 ]; then
    # This node's slots cannot exceed its GPUs (other nodes are checked by their own ranks at start).
    for i in "${!LC_HOSTS[@]}"; do
        if lc_is_this_host "${LC_HOSTS[$i]}" && [ "${LC_SLOTS[$i]}" -gt "$LC_GPUS" ]; then
            lc_die "$HOSTFILE gives this node (${LC_HOSTS[$i]}) slots=${LC_SLOTS[$i]} but it has $LC_GPUS $BACKEND GPUs ($LC_GPU_TOOLS): slots must be the node's GPU count"
        fi
    done
fi
lc_train_bin "$BACKEND"
MASTER_ADDR=${MASTER_ADDR:-${LC_HOSTS[0]}} # rank 0 runs on the hostfile's first node (--map-by slot)
MASTER_PORT=${MASTER_PORT:-29500}
{ lc_is_uint "$MASTER_PORT" && [ "$MASTER_PORT" -ge 1 ] && [ "$MASTER_PORT" -le 65535 ]; } ||
    lc_die "MASTER_PORT=$MASTER_PORT is not a TCP port (1..65535)"
DATA_CACHE_PATH=${DATA_CACHE_PATH:-"$DATASET_DIR/data_cache"}
export TWINRUN_FLIGHT_DIR=${TWINRUN_FLIGHT_DIR:-"$LOG_DIR/flight"}

# ---- train_llama3's flags -------------------------------------------------------------------------
# §3.1 verbatim, then what Llama 3 is that Megatron's defaults are not: no linear biases, no dropout,
# RoPE base 500000 (Meta's config.json rope_theta).
MODEL_ARGS=(
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --seq-length 8192
    --max-position-embeddings 8192
    --position-embedding-type rope
    --normalization RMSNorm
    --swiglu
    --untie-embeddings-and-output-weights
    --bf16
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --rotary-base 500000
)
# §4.1 verbatim
PARALLEL_ARGS=(
    --tensor-model-parallel-size "$TP_SIZE"
    --pipeline-model-parallel-size "$PP_SIZE"
    --context-parallel-size "$CP_SIZE"
    --sequence-parallel
    --use-distributed-optimizer
)
TRAINING_ARGS=(
    --micro-batch-size "$MICRO_BATCH_SIZE"
    --global-batch-size "$GLOBAL_BATCH_SIZE"
    --train-iters "$TRAIN_ITERS"
    --lr "$LR"
    --min-lr "$MIN_LR"
    --lr-decay-style cosine
    --lr-warmup-iters "$LR_WARMUP_ITERS"
    --weight-decay 0.1
    --clip-grad 1.0
    --adam-beta1 0.9
    --adam-beta2 0.95
)
DTYPE_ARGS=()
if [ "$DATA_FORMAT" = fp8 ]; then
    DTYPE_ARGS=(--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max)
fi
DATA_ARGS=(
    --data-path "$DATA_PATH"
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model "$TOKENIZED_MODEL"
    --vocab-size "$VOCAB_SIZE"
    --split "99,1,0"
    --data-cache-path "$DATA_CACHE_PATH"
)
LOGGING_ARGS=(
    --log-interval "$LOG_INTERVAL"
    --eval-interval "$EVAL_INTERVAL"
    --eval-iters "$EVAL_ITERS"
    --save "$SAVE"
    --save-interval "$SAVE_INTERVAL"
    "${LOAD_ARGS[@]}"
    --ckpt-format torch_dist
    --tensorboard-dir "$TENSORBOARD_DIR"
    --distributed-timeout-minutes 60
)
read -r -a EXTRA <<<"${EXTRA_ARGS:-}"
ARGS=("${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DTYPE_ARGS[@]}" "${DATA_ARGS[@]}"
    "${LOGGING_ARGS[@]}" "${EXTRA[@]}" "${PASS[@]}")

# ---- the launch -----------------------------------------------------------------------------------
# GPUs: one mpirun over the hostfile, ranks by slot (node 0 holds ranks 0..7, so TP groups stay inside
# a node), each through rank_log.sh for its own log. Variables mpirun does not forward by itself go by
# name (-x NAME), so the rendezvous token's value never appears on a command line.
if [ "$BACKEND" = twin ]; then
    CMD=(env WORLD_SIZE="$WORLD_SIZE" "$TRAIN_BIN" "${ARGS[@]}")
else
    MPIRUN=${MPIRUN:-mpirun}
    export MASTER_ADDR MASTER_PORT
    FORWARD=(MASTER_ADDR MASTER_PORT TWINRUN_STORE_TOKEN TWINRUN_FLIGHT_DIR PATH)
    [ -z "${LD_LIBRARY_PATH:-}" ] || FORWARD+=(LD_LIBRARY_PATH)
    while IFS= read -r v; do
        case "$v" in
        NCCL_* | MCCL_* | MUSA_* | MTHREADS_* | CUDA_* | FI_* | OMP_NUM_THREADS) FORWARD+=("$v") ;;
        TWINRUN_*) [ "$v" = TWINRUN_STORE_TOKEN ] || [ "$v" = TWINRUN_FLIGHT_DIR ] || [ "$v" = TWINRUN_BACKEND ] ||
            FORWARD+=("$v") ;;
        esac
    done < <(compgen -e | sort)
    read -r -a MPIRUN_EXTRA <<<"${MPIRUN_ARGS:-}"
    CMD=("$MPIRUN" --hostfile "$HOSTFILE" -np "$WORLD_SIZE" --map-by slot --bind-to none)
    [ "$(id -u)" -ne 0 ] || CMD+=(--allow-run-as-root)
    for v in "${FORWARD[@]}"; do CMD+=(-x "$v"); done
    CMD+=("${MPIRUN_EXTRA[@]}" bash "$LC_ROOT/scripts/lib/rank_log.sh" "$LOG_DIR" "$TRAIN_BIN" "${ARGS[@]}")
fi

print_params
echo "节点: $NUM_NODES ($HOSTFILE), WORLD_SIZE=$WORLD_SIZE = TP $TP_SIZE × PP $PP_SIZE × CP $CP_SIZE × DP $DP_SIZE, Global batch $GLOBAL_BATCH_SIZE"
echo "后端: $BACKEND ($TRAIN_BIN; $LC_GPU_TOOLS), 主节点: $MASTER_ADDR:$MASTER_PORT"

# Which ranks each node holds, in Megatron's tp-cp-dp-pp order: rank = tp + TP·(cp + CP·(dp + DP·pp)).
describe_nodes() {
    local i first=0 last s
    for i in "${!LC_HOSTS[@]}"; do
        s=${LC_SLOTS[$i]}
        last=$((first + s - 1))
        printf 'node %d %s (slots=%d): ranks %d-%d, LOCAL_RANK 0-%d, pipeline stages %d-%d, logs %s/rank_%05d.log .. rank_%05d.log\n' \
            "$i" "${LC_HOSTS[$i]}" "$s" "$first" "$last" $((s - 1)) $((first / (TP_SIZE * CP_SIZE * DP_SIZE))) \
            $((last / (TP_SIZE * CP_SIZE * DP_SIZE))) "$LOG_DIR" "$first" "$last"
        first=$((last + 1))
    done
}

if [ "$DRY_RUN" = 1 ]; then
    echo "dry run: nothing started"
    if [ "$BACKEND" = twin ]; then
        echo "twin: one process on this machine runs all $WORLD_SIZE ranks (log $LOG_DIR/twin.log):"
    else
        echo "mpirun (on this node; it starts every rank below):"
    fi
    lc_quote_cmd "${CMD[@]}"
    describe_nodes
    echo "each rank runs: $(lc_quote_cmd "$TRAIN_BIN" "${ARGS[@]}")"
    exit 0
fi

if [ "$BACKEND" != twin ]; then
    command -v "$MPIRUN" >/dev/null 2>&1 ||
        lc_die "找不到 $MPIRUN (OpenMPI's launcher): install OpenMPI in the image, or set MPIRUN"
fi
mkdir -p "$LOG_DIR" "$TENSORBOARD_DIR" "$DATA_CACHE_PATH" "$TWINRUN_FLIGHT_DIR" "$SAVE" ||
    lc_die "cannot create the job's directories under $DATASET_DIR"
# One launcher starts every rank, so a fresh secret is the same for all of them (docs/launch.md).
export TWINRUN_STORE_TOKEN=${TWINRUN_STORE_TOKEN:-$(lc_new_token)}

echo "开始训练..."
echo "训练命令: $(lc_quote_cmd "${CMD[@]}")"
set +e
if [ "$BACKEND" = twin ]; then
    (unset RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT; exec "${CMD[@]}") 2>&1 | tee "$LOG_DIR/twin.log"
    TRAIN_EXIT_CODE=${PIPESTATUS[0]}
else
    "${CMD[@]}"
    TRAIN_EXIT_CODE=$?
fi
set -e
if [ "$TRAIN_EXIT_CODE" -eq 0 ]; then
    echo "训练成功完成!"
    echo "检查点保存在: $SAVE"
    echo "TensorBoard 日志: $TENSORBOARD_DIR"
else
    echo "训练失败，退出码: $TRAIN_EXIT_CODE"
    if [ "$BACKEND" = twin ]; then echo "日志: $LOG_DIR/twin.log"; else echo "查看每个 rank 的日志: $LOG_DIR/rank_*.log"; fi
    echo "挂起诊断: blame $TWINRUN_FLIGHT_DIR/flight_rank*.txt"
    exit "$TRAIN_EXIT_CODE"
fi
