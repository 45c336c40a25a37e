#!/bin/sh
# Megatron-parity checks of the programs' command lines: each case runs a program the way a
# user would, checks its exit status and what it printed. Usage: cli_parity.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd) # the source tree: tests/unit/cli_parity.sh
mkdir -p "$work" && cd "$work" || exit 1
out=$work/$case.out

. "$src/tests/common/expect.sh" # fail, expect_rc, has, count

# a tiny Llama every case starts from (the model flags of the seeds, shrunk)
tiny="--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
 --normalization RMSNorm --attention-dropout 0 --hidden-dropout 0 --vocab-size 256 --micro-batch-size 1
 --train-iters 2 --lr 1e-3 --mock-data --data-cache-path $work/$case.cache --eval-iters 0 --log-interval 1"

llama="--swiglu --untie-embeddings-and-output-weights --disable-bias-linear"

case $case in
version)
    # every program says which twinrun, commit and backend it is, and exits 0
    [ -x "$bin/train_llama3" ] || fail "no programs in $bin"
    for p in "$bin"/*; do
        [ -x "$p" ] || continue
        name=$(basename "$p")
        expect_rc 0 "$p" --version
        has "^$name (twinrun [0-9.]*, commit [0-9a-f]*[a-z-]*, backend [a-z]*)$"
    done ;;
errors_once)
    # two model errors at WORLD_SIZE=64: one report naming both, not 65 copies of the first
    # shellcheck disable=SC2086
    expect_rc 2 env WORLD_SIZE=64 "$bin/train_llama3" $tiny --disable-bias-linear
    has "2 problems in the configuration:"
    count "twinrun's Llama has a SwiGLU MLP: add --swiglu" 1
    count "tied embeddings are not supported: add --untie-embeddings-and-output-weights" 1
    count "rank [0-9]*:" 0 ;;
simulated)
    # the twin's times are its cost model's: the log line and the metrics say so
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny --swiglu --untie-embeddings-and-output-weights --disable-bias-linear \
        --log-throughput --metrics-jsonl "$work/sim.jsonl"
    has "elapsed time per iteration (ms): [0-9.]* (simulated, H100 spec) |"
    has "throughput per GPU (TFLOP/s/GPU): [0-9.]* (simulated, H100 spec) |"
    [ "$(grep -c '"simulated":true}$' "$work/sim.jsonl")" -eq 2 ] || fail "metrics lack \"simulated\":true" ;;
sigterm)
    # a real SIGTERM (what a scheduler sends before preempting): finish the iteration, save, exit 0
    rm -rf "$work/sigterm_save"
    # shellcheck disable=SC2086
    "$bin/train_llama3" $tiny --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --train-iters 1000000 \
        --exit-signal-handler --save "$work/sigterm_save" --save-interval 1000000 >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 200); do grep -q "iteration  *[0-9]*/" "$out" && break; sleep 0.1; done
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc after SIGTERM, expected 0"
    has "exiting program after receiving SIGTERM."
    has "saved checkpoint at iteration [0-9]* to $work/sigterm_save"
    expect_rc 0 "$bin/ckpt" verify "$work/sigterm_save" ;;
preempt)
    # a scenario's preemption through TWINRUN_FAULTS: with the handler the whole job stops after
    # iteration 3, saved; without it the rank dies as SIGTERM would kill it, and the job fails
    rm -rf "$work/preempt_save"
    # shellcheck disable=SC2086
    expect_rc 0 env WORLD_SIZE=4 TWINRUN_FAULTS="preempt@3:rank=1" "$bin/train_llama3" $tiny --swiglu \
        --untie-embeddings-and-output-weights --disable-bias-linear --train-iters 6 --global-batch-size 4 \
        --exit-signal-handler --save "$work/preempt_save" --save-interval 100
    has "fault injected: preemption: SIGTERM to rank 1 at iteration 3"
    has "saved checkpoint at iteration 3 to"
    has "exiting program after receiving SIGTERM."
    count "iteration  *4/" 0
    # shellcheck disable=SC2086
    WORLD_SIZE=4 TWINRUN_FAULTS="preempt@3:rank=1" "$bin/train_llama3" $tiny --swiglu \
        --untie-embeddings-and-output-weights --disable-bias-linear --train-iters 6 --global-batch-size 4 >"$out" 2>&1
    [ $? -ne 0 ] || fail "a preempted rank without --exit-signal-handler must fail the job"
    has "killed by SIGTERM" ;;
final_eval)
    # Megatron evaluates once more when training ends
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama --eval-interval 2 --eval-iters 1 --train-iters 3
    has "validation loss at iteration 2 | lm loss value"
    has "validation loss at iteration 3 on validation set | lm loss value" ;;
resume_finished)
    # resuming a run that already reached its last iteration says so (no "lm loss 0.000000E+00 -> 0.000000E+00")
    rm -rf "$work/finished_save"
    run="$bin/train_llama3 $tiny $llama --save $work/finished_save --save-interval 2"
    # shellcheck disable=SC2086
    expect_rc 0 $run --train-iters 3
    # shellcheck disable=SC2086
    expect_rc 0 $run --train-iters 3 --load "$work/finished_save"
    has "nothing left to train"
    has "no iteration to run: resumed at iteration 3"
    count "0.000000E+00" 0 ;;
resume_no_eval)
    # a run that validated 4 samples saves that position; resuming it with --eval-iters 0 builds a
    # validation set of one sample (a small corpus, long sequences) and must not place the position in it
    rm -rf "$work/noeval_save"
    cp "$src/tests/data/megatron_data/gpt_u16_seq64/corpus."* "$work/"
    data="${tiny% --mock-data*} --data-path $work/corpus --split 99,1,0 --vocab-size 32000 --seq-length 256
     --max-position-embeddings 256 --data-cache-path $work/$case.noeval_cache --log-interval 1"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $data $llama --eval-interval 2 --eval-iters 4 --train-iters 2 \
        --save "$work/noeval_save" --save-interval 2
    # shellcheck disable=SC2086
    # a longer run stretches the lr decay: Megatron's flag takes this run's schedule
    expect_rc 0 "$bin/train_llama3" $data $llama --eval-iters 0 --train-iters 3 --load "$work/noeval_save" \
        --override-opt_param-scheduler
    has "iteration        3/       3"
    count "validation loss" 0 ;;
tokenizer)
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model /nonexistent
    has "--tokenizer-model /nonexistent: No such file or directory"
    # the tokenizer is read: an empty directory, a malformed file, a vocabulary the model cannot hold
    rm -rf "$work/tok_empty" "$work/tok_bad" && mkdir -p "$work/tok_empty" "$work/tok_bad"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/tok_empty"
    hasF "$work/tok_empty/tokenizer.json: No such file or directory; a Hugging Face tokenizer directory holds"
    echo '{"model": {"type": "Unigram"}, "decoder": {"type": "ByteLevel"}}' >"$work/tok_bad/tokenizer.json"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/tok_bad"
    hasF "tok_bad/tokenizer.json: model Unigram is not implemented"
    small=$src/tests/data/tokenizer_small
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$small"
    hasF "has 4096 tokens, more than the model's vocabulary (--vocab-size 256, padded to 256)"
    # eod and bos are the tokenizer's own (tokenizer_config.json's eos_token and bos_token)
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$small" \
        --vocab-size 4096 --eod-mask-loss
    hasF " > building HuggingFaceTokenizer tokenizer from $small: 4096 tokens, eod 1, bos 0"
    has " > padded vocab (size: 4096) with 0 dummy tokens"
    # data made with a larger vocabulary (ids up to 31999) than the tokenizer's 4096: refused at its
    # first sample, naming the file
    corpus=$src/tests/data/megatron_data/gpt_u16_seq64/corpus
    real=$(echo "$tiny" | sed "s/--mock-data/--data-path $(echo "$corpus" | sed 's/[\/&]/\\&/g') --split 99,1,0/; s/--vocab-size 256/--vocab-size 32000/")
    # shellcheck disable=SC2086
    expect_rc 1 "$bin/train_llama3" $real $llama --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$small"
    has "$corpus: document [0-9]*, token [0-9]*): token id [0-9]* at position [0-9]* is outside the vocabulary \[0, 4096)"
    # Megatron's TikTokenizer, read at start with its flags: a rank file of the 256 bytes, 3 special
    # tokens (<unk> <s> </s>): 259 ids, bos <s> = 1, eod </s> = 2
    python3 -c '
import base64, json
print(json.dumps([{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": ""}
                  for i in range(256)]))' >"$work/ranks.json"
    tik="--tokenizer-type TikTokenizer --tokenizer-model $work/ranks.json --tiktoken-num-special-tokens 3"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama $tik --tiktoken-pattern v2 --vocab-size 259 --eod-mask-loss
    hasF " > building TikTokenizer tokenizer from $work/ranks.json: 259 tokens, eod 2, bos 1"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama $tik --vocab-size 259
    hasF "$work/ranks.json: TikTokenizer needs --tiktoken-pattern v1 or v2"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama $tik --tiktoken-pattern v1 --vocab-size 300
    hasF "$work/ranks.json has 256 ranks; --vocab-size 300 with 3 special tokens needs 297" ;;
ckpt_flags)
    # --ckpt-step, --exit-on-missing-checkpoint, --use-checkpoint-args, and model flags checked on load
    rm -rf "$work/flags_save" "$work/flags_empty" && mkdir -p "$work/flags_empty"
    run="$bin/train_llama3 $tiny $llama --save $work/flags_save --save-interval 2"
    # shellcheck disable=SC2086
    expect_rc 0 $run --train-iters 4 --apply-layernorm-1p
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama --train-iters 4 --apply-layernorm-1p --load "$work/flags_save" \
        --ckpt-step 2
    has "loaded checkpoint from $work/flags_save at iteration 2"
    has "iteration        3/       4"
    # shellcheck disable=SC2086
    expect_rc 2 $run --train-iters 4 --apply-layernorm-1p --load "$work/flags_save" --ckpt-step 3
    has "--ckpt-step 3: $work/flags_save has no checkpoint of that iteration (it has: 2, 4)"
    # shellcheck disable=SC2086
    expect_rc 0 $run --train-iters 6 --load "$work/flags_save" --use-checkpoint-args --hidden-size 64 \
        --override-opt_param-scheduler
    has "loaded checkpoint from $work/flags_save at iteration 4"
    # shellcheck disable=SC2086
    expect_rc 1 $run --train-iters 6 --load "$work/flags_empty" --exit-on-missing-checkpoint
    has "'--exit-on-missing-checkpoint' is set but no checkpoint was found: --load $work/flags_empty is empty"
    count "iteration  *1/" 0 ;;
ln1p)
    # a checkpoint saved with --apply-layernorm-1p does not load silently into a run without it
    rm -rf "$work/ln1p_save"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama --apply-layernorm-1p --save "$work/ln1p_save" --save-interval 2
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $tiny $llama --train-iters 4 --load "$work/ln1p_save"
    has "the checkpoint was saved with --apply-layernorm-1p, this run has not; add it" ;;
export)
    # ckpt export --hf: a TP2 checkpoint as a Hugging Face model; training from it starts exactly where
    # --finetune from the checkpoint starts (same first loss and grad norm, every bit)
    rm -rf "$work/export_save" "$work/export_hf"
    # shellcheck disable=SC2086
    expect_rc 0 env WORLD_SIZE=2 "$bin/train_llama3" $tiny $llama --tensor-model-parallel-size 2 \
        --save "$work/export_save" --save-interval 2
    expect_rc 0 "$bin/ckpt" export "$work/export_save" --hf "$work/export_hf"
    has "exported iteration 2 of $work/export_save to $work/export_hf"
    [ -f "$work/export_hf/config.json" ] && [ -f "$work/export_hf/model.safetensors" ] || fail "no HF files"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny $llama --train-iters 1 --load "$work/export_save" --finetune \
        --metrics-jsonl "$work/export_a.jsonl"
    expect_rc 0 "$bin/train_llama3" --hf-load "$work/export_hf" --seq-length 16 --micro-batch-size 1 --lr 1e-3 \
        --mock-data --data-cache-path "$work/$case.cache" --eval-iters 0 --attention-dropout 0 --hidden-dropout 0 \
        --train-iters 1 --metrics-jsonl "$work/export_b.jsonl"
    cmp "$work/export_a.jsonl" "$work/export_b.jsonl" >"$out" 2>&1 || fail "HF export trains differently" ;;
banner)
    # Megatron's start-up banner, once per job (not once per rank): build, sizes, arguments, vocabulary,
    # parameters per (tensor, pipeline) rank
    # shellcheck disable=SC2086
    expect_rc 0 env WORLD_SIZE=4 "$bin/train_llama3" $tiny $llama --tensor-model-parallel-size 2 \
        --pipeline-model-parallel-size 2 --vocab-size 300
    has "^train_llama3 (twinrun [0-9.]*, commit [0-9a-f]*[a-z-]*, backend [a-z]*)$"
    count "^using world size: 4, data-parallel size: 1, context-parallel size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2$" 1
    count "^------------------------ arguments ------------------------$" 1
    has "^  num_layers \.\{38\} 2$"
    has "^  add_bias_linear \.\{33\} False$"
    has "^  lr \.\{46\} 0.001$"
    has "^ > padded vocab (size: 300) with 212 dummy tokens (new size: 512)$"
    count "^ > number of parameters on (tensor, pipeline) model parallel rank ([01], [01]): [0-9]*$" 4 ;;
*) echo "unknown case $case"; exit 2 ;;
esac
# a passed case leaves no data cache behind (~150 MB a mock-data configuration: the test tree must fit
# a CI runner's disk); each case has its own, as the cases run at the same time
rm -rf "$work/$case.cache" "$work/$case.noeval_cache"
echo "ok ($case)"
