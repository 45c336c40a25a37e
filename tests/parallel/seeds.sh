#!/bin/bash
# The seeds' own arrays, verbatim (../shared/seeds: the Llama3-70B thousand-card guide and the
# Llama3-8B Megatron-LM tutorial), run on the twin at a small layout. Each array is copied as the
# document writes it, with the document's variable names; the model is shrunk only by flags appended
# after the arrays (argparse keeps the last value, as Megatron does) and by the tutorial's own
# environment knobs. Usage: seeds.sh BIN_DIR SOURCE_DIR WORK_DIR CASE (llama3_70b | llama3_8b_mock | llama3_8b_real)
set -u
bin=$(cd "$1" && pwd) src=$(cd "$2" && pwd) work=$3 case=$4
rm -rf "${work:?}/$case" && mkdir -p "$work/$case" && cd "$work/$case" || exit 1
fail() { echo "FAIL ($case): $*"; tail -20 "$work/$case/run.log"; exit 1; }

# The model shrunk to a test's size: appended after the arrays, so the last value wins.
SHRINK=(--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --num-query-groups 2
        --kv-channels 8 --seq-length 32 --max-position-embeddings 32)

case $case in
llama3_70b)
    # 000_5aea59eedf97bc8b.txt, 3.1 模型结构 (verbatim)
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
    )
    # 4.1 并行参数 (verbatim), at TP2 x PP2 x CP1 on 8 ranks instead of TP8 x PP8 on 1024
    TP_SIZE=2
    PP_SIZE=2
    CP_SIZE=1
    WORLD_SIZE=8
    DP_SIZE=$((WORLD_SIZE / (TP_SIZE * PP_SIZE * CP_SIZE)))
    test $((TP_SIZE * PP_SIZE * CP_SIZE * DP_SIZE)) -eq "${WORLD_SIZE}" || fail "layout arithmetic"
    PARALLEL_ARGS=(
      --tensor-model-parallel-size "${TP_SIZE}"
      --pipeline-model-parallel-size "${PP_SIZE}"
      --context-parallel-size "${CP_SIZE}"
      --sequence-parallel
      --use-distributed-optimizer
    )
    # 4.2 Batch 参数: the document leaves them to be filled in
    MICRO_BATCH_SIZE=1
    NUM_MICROBATCHES=2
    GLOBAL_BATCH_SIZE=$((MICRO_BATCH_SIZE * NUM_MICROBATCHES * DP_SIZE))
    # the document gives no training array: what a dry run (5.1) needs
    DRY_RUN=(--micro-batch-size "$MICRO_BATCH_SIZE" --global-batch-size "$GLOBAL_BATCH_SIZE" --train-iters 3
             --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --mock-data --vocab-size 1000
             --data-cache-path "$work/$case/cache" --log-interval 1 --eval-iters 2 --eval-interval 2
             --save "$work/$case/checkpoints" --save-interval 2)
    env WORLD_SIZE=$WORLD_SIZE "$bin/train_llama3" "${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${DRY_RUN[@]}" \
        "${SHRINK[@]}" >run.log 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    # Megatron's default linear biases, with the one-line note that Llama 3 has none
    grep -q "linear layers have biases" run.log || fail "no note about the biases"
    grep -q "add_bias_linear \.* True" run.log || fail "banner lacks add_bias_linear True"
    # the checkpoint reloads: the guide's 5.1 dry run asks for it (one iteration more: a longer lr decay,
    # which Megatron too takes only with --override-opt_param-scheduler)
    env WORLD_SIZE=$WORLD_SIZE "$bin/train_llama3" "${MODEL_ARGS[@]}" "${PARALLEL_ARGS[@]}" "${DRY_RUN[@]}" \
        "${SHRINK[@]}" --train-iters 4 --load "$work/$case/checkpoints" --override-opt_param-scheduler >run.log 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "reload: exit status $rc"
    grep -q "loaded checkpoint from .* at iteration 3" run.log || fail "no reload" ;;
llama3_8b_mock | llama3_8b_real)
    # 001_222ebcc9d255c300.txt, train_llama3_8b_dynamic.sh, with the tutorial's knobs set small
    WORLD_SIZE=8 TP_SIZE=2 CP_SIZE=2 PP_SIZE=2 # the tutorial's multi-node template
    MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=4 NUM_LAYERS=4 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=128 NUM_ATTENTION_HEADS=8
    NUM_QUERY_GROUPS=2 SEQ_LENGTH=32 MAX_POSITION_EMBEDDINGS=$SEQ_LENGTH DTYPE=fp8 USE_BF16=1
    LEARNING_RATE=0.00015 MIN_LEARNING_RATE=0.00001 LR_DECAY_STYLE=cosine WEIGHT_DECAY=0.1
    TRAIN_SAMPLES=12 LR_DECAY_SAMPLES=8 LR_WARMUP_SAMPLES=4
    EXP_NAME=seed-test DATA_CACHE_PATH="${PWD}/benchmark_cache_${EXP_NAME}"
    CHECKPOINT_PATH=checkpoints/llama3_8b_fp8 TENSORBOARD_LOGS_PATH=tensorboard_logs/llama3_8b_fp8
    LOG_INTERVAL=1 SAVE_INTERVAL=1000 EVAL_INTERVAL=100 ENABLE_PROFILING=1
    if [ "$case" = llama3_8b_mock ]; then
        TOKENIZER_ARG=MOCK DATA_ARG=MOCK
    else # a Megatron-written corpus (tests/data/megatron_data) and a tokenizer directory of its
        # vocabulary (32000, eod 31999)
        cp "$src/tests/data/megatron_data/gpt_u16_seq64/corpus."* .
        python3 "$src/tests/common/synth_tokenizer.py" tokenizer 32000
        TOKENIZER_ARG=$PWD/tokenizer DATA_ARG=$PWD/corpus
    fi
    mkdir -p "$DATA_CACHE_PATH"
    # ---- verbatim from the tutorial -----------------------------------------------------------
    MODEL_ARGS=(
    --use-mcore-models
    --num-layers $NUM_LAYERS
    --hidden-size $HIDDEN_SIZE
    --ffn-hidden-size $FFN_HIDDEN_SIZE
    --num-attention-heads $NUM_ATTENTION_HEADS
    --group-query-attention
    --num-query-groups $NUM_QUERY_GROUPS
    --kv-channels 128
    --seq-length $SEQ_LENGTH
    --max-position-embeddings $MAX_POSITION_EMBEDDINGS
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
    --micro-batch-size $MICRO_BATCH_SIZE
    --global-batch-size $GLOBAL_BATCH_SIZE
    --train-samples $TRAIN_SAMPLES
    --lr-decay-samples $LR_DECAY_SAMPLES
    --lr-warmup-samples $LR_WARMUP_SAMPLES
    --lr $LEARNING_RATE
    --min-lr $MIN_LEARNING_RATE
    --lr-decay-style $LR_DECAY_STYLE
    --clip-grad 1.0
    --weight-decay $WEIGHT_DECAY
    --adam-beta1 0.9
    --adam-beta2 0.95
    )
    if [[ "$USE_BF16" == "1" ]]; then
    TRAINING_ARGS+=(--bf16)
    TRAINING_ARGS+=(--grad-reduce-in-bf16)
    fi
    TRAINING_ARGS+=(
    --cross-entropy-loss-fusion
    --calculate-per-token-loss
    --manual-gc
    --empty-unused-memory-level 1
    --exit-duration-in-mins 235
    )
    DTYPE_ARGS=()
    if [[ "$DTYPE" == "fp8" ]]; then
    DTYPE_ARGS+=(
    "--fp8-format hybrid"
    "--fp8-amax-history-len 1024"
    "--fp8-amax-compute-algo max"
    "--fp8-param-gather"
    )
    fi
    MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP_SIZE
    --context-parallel-size $CP_SIZE
    --sequence-parallel
    )
    if [[ $PP_SIZE -gt 1 ]]; then
    MODEL_PARALLEL_ARGS+=(--pipeline-model-parallel-size $PP_SIZE)
    fi
    DDP_ARGS=(
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
    )
    TRAINING_ARGS+=("${DDP_ARGS[@]}")
    DATA_ARGS_LIST=()
    if [[ "$TOKENIZER_ARG" == "MOCK" ]] || [[ "$DATA_ARG" == "MOCK" ]] || [[ -z "$TOKENIZER_ARG" ]]; then
    DATA_ARGS_LIST+=(
    "--mock-data"
    "--tokenizer-type NullTokenizer"
    "--vocab-size 128256"
    "--data-cache-path ${DATA_CACHE_PATH}"
    "--tiktoken-pattern v2"
    "--split '99,1,0'"
    "--no-create-attention-mask-in-dataloader"
    "--no-mmap-bin-files"
    "--num-workers 1"
    )
    else
    DATA_ARGS_LIST+=(
    "--data-path $DATA_ARG"
    "--tokenizer-type HuggingFaceTokenizer"
    "--tokenizer-model $TOKENIZER_ARG"
    "--data-cache-path ${DATA_CACHE_PATH}"
    "--split '99,1,0'"
    "--no-create-attention-mask-in-dataloader"
    "--no-mmap-bin-files"
    "--num-workers 1"
    "--vocab-size 128256"
    )
    fi
    EVAL_AND_LOGGING_ARGS=(
    --log-interval $LOG_INTERVAL
    --eval-iters 32
    --eval-interval $EVAL_INTERVAL
    --save-interval $SAVE_INTERVAL
    --log-throughput
    --distributed-timeout-minutes 60
    --save "$CHECKPOINT_PATH"
    --load "$CHECKPOINT_PATH"
    --tensorboard-dir "$TENSORBOARD_LOGS_PATH"
    --ckpt-format torch_dist
    )
    if [[ "$ENABLE_PROFILING" == "1" ]]; then
    EVAL_AND_LOGGING_ARGS+=(
    --profile
    --profile-step-start 4
    --profile-step-end 6
    )
    fi
    # ---- end of the tutorial's arrays; torchrun's line expands them unquoted, so do we ----------
    # shellcheck disable=SC2068,SC2086
    env WORLD_SIZE=$WORLD_SIZE "$bin/train_llama3" ${MODEL_ARGS[@]} ${TRAINING_ARGS[@]} ${DTYPE_ARGS[@]} \
        ${MODEL_PARALLEL_ARGS[@]} ${DATA_ARGS_LIST[@]} ${EVAL_AND_LOGGING_ARGS[@]} \
        --kv-channels 8 --vocab-size 32000 >run.log 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q "iteration        3/       3" run.log || fail "did not train 3 iterations"
    grep -q "validation loss at iteration 3 on validation set" run.log || fail "no end-of-training evaluation"
    ls "$TENSORBOARD_LOGS_PATH"/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard file"
    ls "$CHECKPOINT_PATH"/iter_0000003 >/dev/null 2>&1 || fail "no final checkpoint" ;;
*) echo "unknown case $case"; exit 2 ;;
esac
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
rm -rf "$work/$case"/cache "$work/$case"/benchmark_cache_* "$work/$case"/checkpoints
echo "ok ($case)"
