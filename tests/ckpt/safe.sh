#!/bin/sh
# Checkpoints are never destroyed and --load takes the paths users give it: each case
# reproduces what lost a run before and checks that every file is as it was (a hash of the tree
# before and after), the exit status, and that the message names the fix.
# Usage: safe.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work" && cd "$work" || exit 1
out=$work/$case.out
ck=$work/$case.ck
rm -rf "$ck" "$work/$case".* # what an earlier run of this case left

. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks, count

tiny="--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
 --lr-warmup-iters 1 --mock-data --vocab-size 128 --eval-iters 0 --log-interval 1 --train-iters 8"
train="$bin/train_llama3 $tiny"

# every file's path and bytes under DIR (the lock file is the job's, not data)
tree_hash() { (cd "$1" && find . -type f ! -name .twinrun.lock | LC_ALL=C sort | xargs -r sha256sum | sha256sum); }
# the metrics that must agree bit for bit (timings are the cost model's, not the math's)
bits() { sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$1"; }
# iterations 2 and 4 saved, the run stopped after 4 (as a job killed after its last save)
four() {
    # shellcheck disable=SC2086
    expect_rc 0 $train --save "$ck" --save-interval 2 --exit-interval 4
}
same_tail() { # RESUMED STRAIGHT N: the resumed run's N lines are the straight run's last N, byte for byte
    bits "$2" | tail -n "$3" >"$work/$case.want"
    bits "$1" >"$work/$case.got"
    [ "$(wc -l <"$work/$case.got")" -eq "$3" ] && cmp -s "$work/$case.want" "$work/$case.got" ||
        fail "resumed losses differ from the uninterrupted run's: $(diff "$work/$case.want" "$work/$case.got" | head -3)"
}

case $case in
guide_resume)
    # the 70B guide's command: CHECKPOINT_DIR=.../checkpoints/<STEP_DIR>; --load "${CHECKPOINT_DIR}", with
    # the launch script's own --save and --load of the root before it
    # shellcheck disable=SC2086
    expect_rc 0 $train --metrics-jsonl "$work/$case.straight.jsonl"
    four
    CHECKPOINT_DIR=$ck/iter_0000004
    # shellcheck disable=SC2086
    expect_rc 0 $train --save "$ck" --load "$ck" --save-interval 2 --load "${CHECKPOINT_DIR}" \
        --metrics-jsonl "$work/$case.resumed.jsonl"
    hasF " > checkpoint: loading iteration 4 from $ck"
    hasF " loaded checkpoint from $ck at iteration 4"
    has "iteration  *5/  *8 |"
    lacks "iteration  *[1-4]/"
    same_tail "$work/$case.resumed.jsonl" "$work/$case.straight.jsonl" 4
    # saves went beside it into the root, none nested inside iter_0000004
    [ -f "$ck/iter_0000008/manifest.json" ] || fail "no iter_0000008 in the root"
    [ -z "$(find "$ck/iter_0000004" -mindepth 1 -name 'iter_*')" ] || fail "checkpoints nested inside iter_0000004"
    expect_rc 0 "$bin/ckpt" verify "$ck" ;;
save_iter_dir)
    # --save given an iteration directory saves into its root
    four
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck/iter_0000004" --save "$ck/iter_0000004" --save-interval 2
    [ -f "$ck/iter_0000006/manifest.json" ] || fail "no iter_0000006 in the root"
    [ -z "$(find "$ck/iter_0000004" -mindepth 1 -name 'iter_*')" ] || fail "checkpoints nested inside iter_0000004" ;;
step_conflict)
    four
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck/iter_0000004" --ckpt-step 2
    hasF "names iteration 4 but --ckpt-step says 2: give the checkpoint root with --ckpt-step"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed" ;;
fresh_over_complete)
    # --save on a directory holding iterations 2 and 4, without --load: refused, nothing replaced
    four
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --save "$ck" --save-interval 2
    hasF "--save $ck already holds complete checkpoints (iterations 2, 4) and this run starts from scratch"
    hasF "add --load $ck (the latest) or --load $ck --ckpt-step N with N one of 2, 4"
    hasF "pass --overwrite-checkpoints"
    lacks "iteration  *1/"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # asked to: it trains and replaces them (the flag says so)
    # shellcheck disable=SC2086
    expect_rc 0 $train --save "$ck" --save-interval 2 --overwrite-checkpoints
    [ "$(cat "$ck/latest_checkpointed_iteration.txt")" = 8 ] || fail "the tracker does not name 8" ;;
no_tracker)
    # --load DIR --save DIR where the tracker is missing: an error naming --ckpt-step, nothing replaced
    four
    rm "$ck/latest_checkpointed_iteration.txt"
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck" --save "$ck" --save-interval 2
    hasF "--load $ck holds complete checkpoints (iterations 2, 4) but no latest_checkpointed_iteration.txt"
    hasF "resume from the newest with --load $ck --ckpt-step 4"
    lacks "iteration  *1/"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --save "$ck" --save-interval 2 --ckpt-step 4
    has "iteration  *5/" ;;
older_step)
    # resuming from an older --ckpt-step would save over the newer iteration: refused, then allowed by the flag
    # shellcheck disable=SC2086
    expect_rc 0 $train --metrics-jsonl "$work/$case.straight.jsonl"
    # shellcheck disable=SC2086
    expect_rc 0 $train --save "$ck" --save-interval 2 --exit-interval 6
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck" --ckpt-step 2 --save "$ck" --save-interval 2
    hasF "--save $ck holds complete checkpoints after iteration 2, where this run starts (iterations 4, 6)"
    hasF "Resume from the newest with --load $ck --ckpt-step 6"
    hasF "--overwrite-checkpoints"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --ckpt-step 2 --save "$ck" --save-interval 2 --overwrite-checkpoints \
        --metrics-jsonl "$work/$case.resumed.jsonl"
    same_tail "$work/$case.resumed.jsonl" "$work/$case.straight.jsonl" 6
    expect_rc 0 "$bin/ckpt" verify "$ck" ;;
missing)
    # --exit-on-missing-checkpoint: non-zero, saying what was missing and what to give instead
    # shellcheck disable=SC2086
    expect_rc 1 $train --load "$work/$case.nothere" --exit-on-missing-checkpoint
    hasF ">> '--exit-on-missing-checkpoint' is set but no checkpoint was found: --load $work/$case.nothere does not exist"
    hasF "give the directory --save wrote (or its iter_NNNNNNN), or drop the flag"
    lacks "iteration  *1/"
    # without it: a fresh start, said plainly in the banner
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$work/$case.nothere"
    hasF " > checkpoint: nothing to load: --load $work/$case.nothere does not exist; training starts from scratch"
    mkdir -p "$work/$case.empty"
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$work/$case.empty"
    hasF " > checkpoint: nothing to load: --load $work/$case.empty is empty; training starts from scratch" ;;
not_checkpoint)
    # a --load path that holds files but no checkpoint is an error, not a fresh start
    mkdir -p "$ck" && echo notes >"$ck/notes.txt"
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck" --save "$ck" --save-interval 2
    hasF "--load $ck holds no twinrun checkpoint"
    hasF "it has 'notes.txt'): give the directory --save wrote"
    lacks "iteration  *1/"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the directory changed"
    # a regular file where the directory should be
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck/notes.txt"
    hasF "is not a directory; give the checkpoint directory" ;;
two_jobs)
    # a second job saving into the same directory is refused naming the first; the first's saves are intact
    four
    # shellcheck disable=SC2086
    $train --load "$ck" --save "$ck" --save-interval 1000000 --train-iters 50000 --log-interval 1000000 \
        --override-opt_param-scheduler >"$work/$case.first.out" 2>&1 &
    first=$!
    for _ in $(seq 300); do [ -s "$ck/.twinrun.lock" ] && break; sleep 0.1; done
    h=$(tree_hash "$ck")
    # shellcheck disable=SC2086
    expect_rc 2 $train --load "$ck" --save "$ck" --save-interval 2
    kill $first
    wait $first 2>/dev/null
    hasF "--save $ck is in use by another job (host $(hostname), pid $first, since "
    hasF "wait for that job to end, or give this one another --save"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # the lock died with its job (a killed job leaves no stale lock)
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --save "$ck" --save-interval 2
    has "iteration  *5/" ;;
read_only)
    # a --save that cannot be written is found at start, not at the first save
    mkdir -p "$ck" && chmod a-w "$ck"
    dir=$ck
    touch "$ck/probe" 2>/dev/null && rm -f "$ck/probe" && dir=/sys # root writes anywhere; sysfs refuses it too
    # shellcheck disable=SC2086
    expect_rc 2 $train --save "$dir" --save-interval 2
    chmod u+w "$ck"
    hasF "--save $dir cannot be written ("
    hasF "the first checkpoint would fail; fix its permissions or mount, or give another --save"
    lacks "iteration  *1/" ;;
resume_changes)
    # a resume that changes what the checkpoint recorded names each change and its fix; nothing is saved
    # over the checkpoint when it is refused; the flag that allows the change lets the run go on
    four
    h=$(tree_hash "$ck")
    refused() { # STATUS TEXT FLAGS...: the resume is refused naming TEXT, the checkpoints as they were
        want=$1 text=$2; shift 2
        # shellcheck disable=SC2086
        expect_rc "$want" $train --load "$ck" --save "$ck" --save-interval 2 "$@"
        hasF "$text"
        lacks "iteration  *5/"
        [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed after: $*"
    }
    at="--load $ck iteration 4"
    refused 2 "$at was saved with --seed 1234, this run has --seed 7: the seed orders the data" --seed 7
    hasF "pass --seed 1234 to continue the run, or --no-load-rng to go on with --seed 7"
    refused 2 "$at was saved with another learning-rate schedule: --lr 0.002 (the checkpoint's 0.001); pass --override-opt_param-scheduler to use this run's, or --use-checkpoint-opt_param-scheduler to keep the checkpoint's (Megatron's rule)" --lr 2e-3
    refused 2 "decay 20 samples (--lr-decay-iters/-samples, else --train-iters/-samples; the checkpoint's 16)" --train-iters 10
    refused 2 "--lr-decay-style linear (the checkpoint's cosine)" --lr-decay-style linear
    refused 2 "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler are both set" --lr 2e-3 \
        --override-opt_param-scheduler --use-checkpoint-opt_param-scheduler
    # another model shape is an error (no flag resumes it)
    refused 2 "$ck iteration 4: the checkpoint has --hidden-size 32, this run 64; use the checkpoint's value" \
        --hidden-size 64
    # the global batch is said, and (with an iteration-counted schedule) the schedule it stretches refused
    refused 2 "$at: --global-batch-size 4 (the checkpoint's 2): the data position (8 samples) carries over" \
        --global-batch-size 4
    hasF "warmup 4 samples (--lr-warmup-iters/-samples/-fraction; the checkpoint's 2)"
    # --use-checkpoint-opt_param-scheduler: the checkpoint's schedule, so the uninterrupted run's losses
    # shellcheck disable=SC2086
    expect_rc 0 $train --metrics-jsonl "$work/$case.straight.jsonl"
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --lr 2e-3 --min-lr 0 --use-checkpoint-opt_param-scheduler \
        --metrics-jsonl "$work/$case.resumed.jsonl"
    hasF "$at: --use-checkpoint-opt_param-scheduler: the checkpoint's learning-rate schedule, not the command line's: --lr 0.002 (the checkpoint's 0.001); --min-lr 0 (the checkpoint's 0.0001)"
    same_tail "$work/$case.resumed.jsonl" "$work/$case.straight.jsonl" 4
    # --override-opt_param-scheduler and --no-load-rng: this run's values, each change said
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --train-iters 10 --override-opt_param-scheduler --seed 7 --no-load-rng
    hasF "$at: --override-opt_param-scheduler: this run's learning-rate schedule: decay 20 samples"
    hasF "$at: --no-load-rng: --seed 7, not the checkpoint's 1234: the data order changes from here"
    has "iteration  *10/  *10 |"
    # --finetune loads neither: each change only said
    # shellcheck disable=SC2086
    expect_rc 0 $train --load "$ck" --finetune --seed 7 --lr 2e-3
    hasF "$at: --seed 7 (the checkpoint's 1234): --finetune starts the data over in its order"
    hasF "$at: this run's learning-rate schedule (--finetune does not load the checkpoint's): --lr 0.002" ;;
resume_data)
    # another dataset or tokenizer than the checkpoint's: refused naming both, unless the flag says so
    tok=$src/tests/data/tokenizer_small
    cp -r "$tok" "$work/$case.tok"
    awk 'BEGIN { for (i = 0; i < 200; i++) printf "{\"text\": \"the quick brown fox %d jumps over the lazy dog %d\"}\n", i, i * 7 }' >"$work/$case.a.jsonl"
    awk 'BEGIN { for (i = 0; i < 200; i++) printf "{\"text\": \"a slow green turtle %d walks under the busy cat %d\"}\n", i, i * 3 }' >"$work/$case.b.jsonl"
    for d in a b; do
        expect_rc 0 "$bin/dataset" preprocess --input "$work/$case.$d.jsonl" --output-prefix "$work/$case.$d" \
            --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/$case.tok"
    done
    real=$(echo "$tiny" | sed 's/--mock-data//; s/--vocab-size 128//')
    data() { echo "$real --vocab-size 4096 --tokenizer-type HuggingFaceTokenizer --tokenizer-model $work/$case.tok --data-path $work/$case.$1_text_document --split 100,0,0"; }
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $(data a) --save "$ck" --save-interval 2 --exit-interval 4
    h=$(tree_hash "$ck")
    at="--load $ck iteration 4"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $(data b) --load "$ck" --save "$ck" --save-interval 2
    hasF "$at was trained on other data: --data-path $work/$case.b_text_document (the checkpoint's $work/$case.a_text_document); its position (8 samples) means other samples here: give the checkpoint's data, or pass --allow-data-change to go on"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # the same path, other bytes: named by the fingerprint
    cp "$work/$case.a_text_document.bin" "$work/$case.keep.bin"
    cp "$work/$case.a_text_document.idx" "$work/$case.keep.idx"
    cp "$work/$case.b_text_document.bin" "$work/$case.a_text_document.bin"
    cp "$work/$case.b_text_document.idx" "$work/$case.a_text_document.idx"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $(data a) --load "$ck" --save "$ck" --save-interval 2
    hasF "$at was trained on other data: the files of --data-path $work/$case.a_text_document changed since the save (fingerprint "
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $(data a) --load "$ck" --allow-data-change
    hasF "$at: --allow-data-change: the files of --data-path $work/$case.a_text_document changed since the save"
    has "iteration  *8/  *8 |"
    mv "$work/$case.keep.bin" "$work/$case.a_text_document.bin"
    mv "$work/$case.keep.idx" "$work/$case.a_text_document.idx"
    # another tokenizer (its files edited since the save)
    echo '{}' >"$work/$case.tok/tokenizer_config.json"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/train_llama3" $(data a) --load "$ck" --save "$ck" --save-interval 2
    hasF "$at was trained with another tokenizer: --tokenizer-type HuggingFaceTokenizer --tokenizer-model $work/$case.tok whose files changed since the save"
    hasF "give the checkpoint's tokenizer, or pass --allow-tokenizer-change to go on"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $(data a) --load "$ck" --allow-tokenizer-change
    hasF "$at: --allow-tokenizer-change: --tokenizer-type HuggingFaceTokenizer"
    rm -rf "$work/$case.tok" ;;
fifo)
    # a FIFO where a file must be (a shard, the manifest, the lock file, a dataset, --tokens-file) is
    # refused at once, naming it, instead of blocking the open forever; the checkpoints as they were
    four
    fifo_in() { rm "$1" && mkfifo "$1"; }
    h=$(tree_hash "$ck")
    for f in shard_00000.bin manifest.json; do
        rm -rf "$ck.f" && cp -r "$ck" "$ck.f" && fifo_in "$ck.f/iter_0000004/$f"
        msg="$ck.f/iter_0000004/$f: is a FIFO, not a regular file; a checkpoint's files are regular files: put back the file the save wrote"
        expect_rc 1 timeout 60 "$bin/ckpt" verify "$ck.f"
        hasF "$msg"
        hasF "an older complete checkpoint exists: iteration 2"
        expect_rc 1 timeout 60 "$bin/ckpt" export "$ck.f" --hf "$work/$case.hf"
        hasF "$msg"
        # shellcheck disable=SC2086
        expect_rc 2 timeout 60 $train --load "$ck.f"
        hasF "$msg"
        lacks "iteration  *5/"
    done
    expect_rc 1 timeout 60 "$bin/ckpt" inspect "$ck.f"
    hasF "manifest.json: is a FIFO, not a regular file"
    [ "$(tree_hash "$ck")" = "$h" ] || fail "the checkpoints changed"
    # the lock file of --save: the holder's line is not read from a FIFO
    rm -rf "$ck.f" && cp -r "$ck" "$ck.f" && mkfifo "$ck.f/.twinrun.lock"
    # shellcheck disable=SC2086
    expect_rc 2 timeout 120 $train --load "$ck.f" --save "$ck.f" --save-interval 2
    hasF "--save $ck.f: $ck.f/.twinrun.lock is not a regular file (twinrun's lock file is one); remove it"
    lacks "iteration  *5/"
    # data files and --tokens-file
    mkfifo "$work/$case.d.idx" && : >"$work/$case.d.bin" && mkfifo "$work/$case.tokens"
    real=$(echo "$tiny" | sed 's/--mock-data//')
    # shellcheck disable=SC2086
    expect_rc 2 timeout 60 "$bin/train_llama3" $real --data-path "$work/$case.d"
    hasF "$work/$case.d.idx: cannot open: is a FIFO, not a regular file"
    # shellcheck disable=SC2086
    expect_rc 2 timeout 60 "$bin/train_llama3" $real --tokens-file "$work/$case.tokens"
    hasF "--tokens-file $work/$case.tokens: cannot open: is a FIFO, not a regular file"
    # a tokenizer's files
    mkdir "$work/$case.tok" && cp "$src/tests/data/tokenizer_small/tokenizer_config.json" "$work/$case.tok/" &&
        mkfifo "$work/$case.tok/tokenizer.json"
    # shellcheck disable=SC2086
    expect_rc 2 timeout 60 $train --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$work/$case.tok"
    hasF "$work/$case.tok/tokenizer.json: is a FIFO, not a regular file"
    rm -rf "$ck.f" "$work/$case.tok" ;;
*)
    fail "no case $case" ;;
esac
rm -rf "$ck" "$work/$case".*
echo "ok ($case)"
