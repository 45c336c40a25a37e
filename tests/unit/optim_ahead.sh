#!/bin/sh
# The optimizer step ahead of the next forward pass (engine/optim/optimizer.c, docs/parallel.md) against
# the update on the model's stream (TWINRUN_OPTIM_AHEAD=0), case by case; the twin's stream-race check
# fails a run whose streams touch the same memory unordered:
#   bits      bf16 with --decoupled-lr (two parameter groups a chunk), an evaluation every 3 iterations and
#             a save at 4 that a resume reads back: metrics bit for bit, the resumed run's too, and the
#             simulated step shorter ahead (the twin times the optimizer's stream on its own clock: the
#             chunks ran there)
#   layouts   fp32, PP2 x DP2 (not distributed) in one process: bit for bit
#   norm      the grad norm's sums during the backward pass (TWINRUN_NORM_AHEAD=0: after it, on the
#             model's stream): metrics bit for bit, with per-token loss too (its scale of the gradients
#             after the backward makes the optimizer sum them again), and the simulated step shorter
#   share     the multiprocessors the forward's GEMMs leave the update (TWINRUN_BACKGROUND_SMS): the
#             simulated step grows with the share, below the step without the update ahead; the bits
#             stay; a share over half the device is refused with the range
#   rate      the background stream's speed beside the model's (the spec's background_rate, fitted:
#             lab/calib/fit_background_rate.py; TWINRUN_TWIN_BACKGROUND_RATE): on H100-cal the step grows as
#             the rate falls, the spec's own figure between full speed and a slower one; the bits stay; a
#             rate outside (0, 1] is refused
# Usage: optim_ahead.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2/$3 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
out=$work.out
. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks, count

model="--num-layers 4 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --group-query-attention
 --num-query-groups 2 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope --rotary-base 500000
 --normalization RMSNorm --swiglu --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 2
 --lr-decay-iters 20 --clip-grad 1.0 --weight-decay 0.1 --mock-data --vocab-size 512 --log-interval 1 --seed 1234"
# the metrics without the timing fields
bits() { sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$1"; }
ms() { python3 -c 'import json,sys; print(sum(json.loads(l)["elapsed_ms_per_iter"] for l in open(sys.argv[1])))' "$1"; }

case $case in
bits)
    m="$model --bf16 --untie-embeddings-and-output-weights --decoupled-lr 1e-3 --eval-interval 3 --eval-iters 1"
    for a in 0 1; do
        expect_rc 0 env TWINRUN_OPTIM_AHEAD=$a "$bin/train_llama3" $m --train-iters 8 --metrics-jsonl full$a.jsonl \
            --save ck$a --save-interval 4 --exit-interval 4
        expect_rc 0 env TWINRUN_OPTIM_AHEAD=$a "$bin/train_llama3" $m --train-iters 8 --load ck$a \
            --metrics-jsonl resumed$a.jsonl
        expect_rc 0 env TWINRUN_OPTIM_AHEAD=$a "$bin/train_llama3" $m --train-iters 8 --metrics-jsonl whole$a.jsonl
    done
    for f in full resumed whole; do
        [ "$(bits ${f}0.jsonl)" = "$(bits ${f}1.jsonl)" ] || fail "$f: the step ahead changed the metrics"
    done
    [ "$(wc -l <whole1.jsonl)" -eq 8 ] && [ "$(wc -l <resumed1.jsonl)" -eq 4 ] || fail "iterations missing"
    tail -n 4 whole1.jsonl >tail.jsonl
    [ "$(bits tail.jsonl)" = "$(bits resumed1.jsonl)" ] || fail "the resumed run differs from the uninterrupted one"
    python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' "$(ms whole1.jsonl)" \
        "$(ms whole0.jsonl)" || fail "the simulated step ahead ($(ms whole1.jsonl) ms) is not shorter than" \
        "without ($(ms whole0.jsonl) ms): the update did not run on its own stream"
    ;;
layouts)
    for a in 0 1; do
        expect_rc 0 env TWINRUN_OPTIM_AHEAD=$a WORLD_SIZE=4 "$bin/train_llama3" $model --train-iters 6 \
            --pipeline-model-parallel-size 2 --untie-embeddings-and-output-weights --eval-iters 0 \
            --metrics-jsonl pp$a.jsonl
    done
    [ "$(wc -l <pp1.jsonl)" -eq 6 ] || fail "iterations missing"
    [ "$(bits pp0.jsonl)" = "$(bits pp1.jsonl)" ] || fail "PP2 x DP2: the step ahead changed the metrics"
    ;;
norm)
    m="$model --bf16 --untie-embeddings-and-output-weights --eval-iters 0"
    for a in 0 1; do
        expect_rc 0 env TWINRUN_TWIN_DEVICE=H100 TWINRUN_NORM_AHEAD=$a "$bin/train_llama3" $m --train-iters 6 \
            --metrics-jsonl norm$a.jsonl
        expect_rc 0 env TWINRUN_NORM_AHEAD=$a "$bin/train_llama3" $m --train-iters 4 --calculate-per-token-loss \
            --metrics-jsonl tok$a.jsonl
    done
    [ "$(wc -l <norm1.jsonl)" -eq 6 ] && [ "$(wc -l <tok1.jsonl)" -eq 4 ] || fail "iterations missing"
    [ "$(bits norm0.jsonl)" = "$(bits norm1.jsonl)" ] || fail "the norm's sums during the backward changed the metrics"
    [ "$(bits tok0.jsonl)" = "$(bits tok1.jsonl)" ] || fail "per-token loss: the norm ahead changed the metrics"
    python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' "$(ms norm1.jsonl)" \
        "$(ms norm0.jsonl)" || fail "the simulated step with the norm's sums ahead ($(ms norm1.jsonl) ms) is not" \
        "shorter than without ($(ms norm0.jsonl) ms): they did not run beside the backward pass"
    ;;
share)
    # the GEMMs beside the update keep the device's multiprocessors less TWINRUN_BACKGROUND_SMS (the
    # twin charges them that: sim/dev/dev_sim.c), so the simulated step lies between the update on the
    # model's stream and the update overlapped for free; the same bits every way
    m="$model --bf16 --untie-embeddings-and-output-weights --eval-iters 0"
    for v in TWINRUN_OPTIM_AHEAD=0 TWINRUN_BACKGROUND_SMS=0 TWINRUN_BACKGROUND_SMS=24 TWINRUN_BACKGROUND_SMS=48; do
        expect_rc 0 env TWINRUN_TWIN_DEVICE=H100 $v "$bin/train_llama3" $m --train-iters 4 --metrics-jsonl "$v.jsonl"
    done
    for v in TWINRUN_BACKGROUND_SMS=0 TWINRUN_BACKGROUND_SMS=24 TWINRUN_BACKGROUND_SMS=48; do
        [ "$(bits TWINRUN_OPTIM_AHEAD=0.jsonl)" = "$(bits $v.jsonl)" ] || fail "$v changed the metrics"
    done
    t0=$(ms TWINRUN_BACKGROUND_SMS=0.jsonl) t24=$(ms TWINRUN_BACKGROUND_SMS=24.jsonl)
    t48=$(ms TWINRUN_BACKGROUND_SMS=48.jsonl) tno=$(ms TWINRUN_OPTIM_AHEAD=0.jsonl)
    python3 -c 'import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(not a[0] < a[1] < a[2] < a[3])' \
        "$t0" "$t24" "$t48" "$tno" || fail "simulated steps (ms) not in the order share 0 < 24 < 48 < no step" \
        "ahead: $t0, $t24, $t48, $tno"
    expect_rc 1 env TWINRUN_BACKGROUND_SMS=67 "$bin/train_llama3" $m --train-iters 2 --metrics-jsonl bad.jsonl
    hasF "TWINRUN_BACKGROUND_SMS=67: give a whole number of multiprocessors from 0"
    hasF "to 66 (half of this device's 132)"
    ;;
rate)
    m="$model --bf16 --untie-embeddings-and-output-weights --eval-iters 0"
    for v in TWINRUN_TWIN_BACKGROUND_RATE=1 TWINRUN_TWIN_BACKGROUND_RATE= TWINRUN_TWIN_BACKGROUND_RATE=0.2; do
        expect_rc 0 env TWINRUN_TWIN_DEVICE=H100-cal $v "$bin/train_llama3" $m --train-iters 4 --metrics-jsonl "$v.jsonl"
        [ "$(bits TWINRUN_TWIN_BACKGROUND_RATE=1.jsonl)" = "$(bits $v.jsonl)" ] || fail "$v changed the metrics"
    done
    t1=$(ms TWINRUN_TWIN_BACKGROUND_RATE=1.jsonl) tspec=$(ms TWINRUN_TWIN_BACKGROUND_RATE=.jsonl)
    t02=$(ms TWINRUN_TWIN_BACKGROUND_RATE=0.2.jsonl)
    python3 -c 'import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(not a[0] < a[1] < a[2])' \
        "$t1" "$tspec" "$t02" || fail "simulated steps (ms) not in the order rate 1 < the spec's < 0.2: $t1, $tspec, $t02"
    for r in 0 1.5 fast; do
        expect_rc 1 env TWINRUN_TWIN_BACKGROUND_RATE=$r "$bin/train_llama3" $m --train-iters 2 --metrics-jsonl bad.jsonl
        hasF "TWINRUN_TWIN_BACKGROUND_RATE=$r: give the fraction of full speed a background stream's kernels run at"
    done
    ;;
*) fail "unknown case $case" ;;
esac
echo "optim_ahead $case: ok"
