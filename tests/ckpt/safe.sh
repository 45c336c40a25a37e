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
rm -rf "$ck" "$work/$case".*.jsonl

. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks, count

tiny="--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
 --lr-warmup-iters 1 --mock-data --vocab-size 128 --eval-iters 0 --log-interval 1 --train-iters 8
 --data-cache-path $work/cache"
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
        >"$work/$case.first.out" 2>&1 &
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
*)
    fail "no case $case" ;;
esac
rm -rf "$ck" "$work/$case".*
echo "ok ($case)"
