#!/bin/sh
# FP8 training on the twin (--fp8-format, docs/fp8.md), case by case:
#   resume    a run stopped at iteration 5 and resumed gives the uninterrupted run's metrics bit for bit
#             (the scales and amax histories travel in the checkpoint), and differs from bf16's
#   layouts   TP2 PP2 CP2 with sequence parallelism and the distributed optimizer (8 ranks) against one
#             rank (the same micro-batches in the same order: data parallelism would change which passes'
#             amaxes a scale sees, as it does in Megatron): losses within bf16's 2e-2 at every iteration,
#             grad norms over the first three. A layout's bf16 roundings (the row-parallel partial sums)
#             flip some FP8 roundings, and training amplifies them: measured at TP2, grad norms 1e-3 apart at
#             iteration 1 and 4e-2 at 6 (bf16 alone: 5e-4 and 3e-3); losses stay within 1e-3
#   reshard   a TP2 checkpoint resumed at TP1 keeps every tensor's amax history: the resumed save's
#             older entries are the TP2 save's, moved by the step's two passes
#   shapes    a width the GPU's FP8 GEMMs refuse (not a multiple of 16) trains on the twin with one note
#   formats   a bf16 checkpoint resumes in FP8 (histories fresh, said once) and an FP8 one in bf16
#   gather    --fp8-param-gather: with one micro-batch a step the FP8 weights' bytes and scales are the run's
#             without it, so the metrics are too (DP2 with per-parameter buckets, both runs' shards alike;
#             one rank, whose optimizer casts chunk by chunk ahead of the forward); with two micro-batches a
#             step the second reuses the step's bytes (Transformer Engine's): close, not equal; the FP8 copy
#             inside the bf16 parameters' other half costs no memory and trains as in a buffer of its own
#             (DP2; TP2 CP2 DP2); a resume bit for bit; Megatron's rule (the distributed optimizer) with its fix
#   scratch   the FP8 scratch inside the logits buffer (the default where the logits hold it) trains bit for
#             bit as with buffers of its own (TWINRUN_FP8_SCRATCH=own), with recomputation and at PP2 too,
#             and leaves FP8's peak at bf16's plus the amax histories
# Usage: fp8_train.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2/$3 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
out=$work.out
. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks, count

# every dimension of every FP8 GEMM a multiple of 16 at TP 1 and 2; two micro-batches a step
model="--num-layers 4 --hidden-size 128 --ffn-hidden-size 192 --num-attention-heads 8 --group-query-attention
 --num-query-groups 4 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope --rotary-base 500000
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine
 --lr-warmup-iters 2 --lr-decay-iters 20 --clip-grad 1.0 --weight-decay 0.1 --mock-data --vocab-size 512 --eval-iters 0 --log-interval 1
 --seed 1234 --bf16"
fp8="--fp8-format hybrid --fp8-amax-history-len 8 --fp8-amax-compute-algo max"
# the metrics without the timing fields (simulated, but they name the layout's clock)
bits() { sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$1"; }
run() { expect_rc 0 "$bin/train_llama3" $model "$@"; }
# the losses of two 6-iteration runs within bf16's 2e-2 (relative) at every iteration
losses_close() {
    expect_rc 0 python3 -c '
import json, sys
a, b = ([json.loads(l)["lm_loss"] for l in open(f)] for f in sys.argv[1:3])
worst = max(abs(x / y - 1) for x, y in zip(a, b))
print("losses: %d iterations, largest relative difference %.3g" % (len(a), worst))
sys.exit(len(a) != 6 or worst > 2e-2)' "$1" "$2"
    has "losses: 6 iterations"
}

case $case in
resume)
    run $fp8 --train-iters 10 --metrics-jsonl full.jsonl
    run --train-iters 10 --metrics-jsonl bf16.jsonl
    run $fp8 --train-iters 10 --save ck --save-interval 5 --exit-interval 5
    run $fp8 --train-iters 10 --load ck --save ck --save-interval 5 --metrics-jsonl resumed.jsonl
    lacks "FP8 scales start at 1"
    tail -n 5 full.jsonl >tail.jsonl
    [ "$(bits tail.jsonl)" = "$(bits resumed.jsonl)" ] || fail "the resumed FP8 run differs from the uninterrupted one"
    [ "$(wc -l <resumed.jsonl)" -eq 5 ] || fail "the resumed run did not run iterations 6-10"
    ! cmp -s full.jsonl bf16.jsonl || fail "FP8 and bf16 gave the same metrics: FP8 did not run"
    expect_rc 0 "$bin/ckpt" inspect ck
    has "^fp8 state: *4 of 4 layers, amax history 8, scales [0-9.e+]* to [0-9.e+]*, largest amax [0-9.]*[1-9]"
    ;;
layouts)
    run $fp8 --train-iters 6 --metrics-jsonl one.jsonl
    expect_rc 0 env WORLD_SIZE=8 "$bin/train_llama3" $model $fp8 --train-iters 6 --tensor-model-parallel-size 2 \
        --pipeline-model-parallel-size 2 --context-parallel-size 2 --sequence-parallel --use-distributed-optimizer \
        --metrics-jsonl eight.jsonl
    head -n 3 eight.jsonl >eight3.jsonl && head -n 3 one.jsonl >one3.jsonl
    expect_rc 0 python3 "$src/ci/compare_metrics.py" eight3.jsonl one3.jsonl 2e-2
    hasF "3 iterations, all within tolerance"
    losses_close eight.jsonl one.jsonl
    ;;
reshard)
    expect_rc 0 env WORLD_SIZE=2 "$bin/train_llama3" $model $fp8 --train-iters 5 --tensor-model-parallel-size 2 \
        --save tp2 --save-interval 5
    run $fp8 --train-iters 6 --load tp2 --save tp1 --save-interval 1
    lacks "FP8 scales start at 1"
    "$bin/ckpt" inspect tp2 --fp8 | grep '^fp8 layer' >a.txt || fail "no FP8 tables in the TP2 checkpoint"
    "$bin/ckpt" inspect tp1 --fp8 | grep '^fp8 layer' >b.txt || fail "no FP8 tables in the TP1 checkpoint"
    [ "$(wc -l <a.txt)" -eq 48 ] || fail "$(wc -l <a.txt) FP8 tensors, expected 4 layers x 12"
    # "fp8 layer L MOD.ROLE: scale S scale_inv I history h0 h1 .. h7": h1.. oldest first; two passes a step
    python3 - a.txt b.txt <<'EOF' || fail "the TP1 resume lost amax histories"
import sys
a = [l.split() for l in open(sys.argv[1])]
b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) == 48
for x, y in zip(a, b):
    assert x[:4] == y[:4]
    hx, hy = x[9:], y[9:]
    assert any(float(v) > 0 for v in hx[3:]), x
    assert hx[3:] == hy[1:-2], (x, y)  # the TP2 run's entries, two passes older
print("histories kept")
EOF
    ;;
formats)
    run --train-iters 6 --save bf --save-interval 3 --exit-interval 3
    expect_rc 0 env WORLD_SIZE=2 "$bin/train_llama3" $model $fp8 --train-iters 6 --load bf --save f8 --save-interval 3 \
        --tensor-model-parallel-size 2
    count "the checkpoint has no FP8 state for --fp8-amax-history-len 8 .*: FP8 scales start at 1" 1
    has "iteration *6/ *6"
    expect_rc 0 "$bin/train_llama3" $model --train-iters 9 --load f8 --save f8 --save-interval 3
    has "iteration *9/ *9"
    lacks "FP8"
    ;;
scratch)
    big=$(echo $model | sed 's/--vocab-size 512/--vocab-size 4096/')
    peak() { sed -n 's/.*| device peak \([0-9.]*\) MB.*/\1/p' "$1" | head -1; }
    for extra in "" "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1" \
        "--pipeline-model-parallel-size 2"; do
        ws=$(echo "$extra" | grep -q pipeline && echo 2 || echo 1)
        env WORLD_SIZE=$ws "$bin/train_llama3" $big $fp8 $extra --train-iters 6 --metrics-jsonl in.jsonl >in.log 2>&1 ||
            fail "FP8 with its scratch in the logits ($extra) failed: $(tail -3 in.log)"
        env WORLD_SIZE=$ws TWINRUN_FP8_SCRATCH=own "$bin/train_llama3" $big $fp8 $extra --train-iters 6 \
            --metrics-jsonl own.jsonl >own.log 2>&1 || fail "FP8 with its own scratch ($extra) failed"
        [ "$(bits in.jsonl)" = "$(bits own.jsonl)" ] || fail "the scratch in the logits changed the metrics ($extra)"
        [ "$(wc -l <in.jsonl)" -eq 6 ] || fail "not 6 iterations ($extra)"
        [ -z "$extra" ] && cp in.log plain_in.log && cp own.log plain_own.log
    done
    "$bin/train_llama3" $big --train-iters 2 >bf16.log 2>&1 || fail "bf16 failed"
    python3 - "$(peak plain_in.log)" "$(peak plain_own.log)" "$(peak bf16.log)" <<'EOF' || fail "FP8's peak is not bf16's"
import sys
inl, own, bf = map(float, sys.argv[1:])
print("peaks MB: FP8 %.2f (own scratch %.2f), bf16 %.2f" % (inl, own, bf))
# the amax histories and scales: 48 tensors x (8 + 2) floats and the micro-batch scales, under 0.01 MB
assert own > inl and 0 <= inl - bf <= 0.01, "peaks"
EOF
    env TWINRUN_FP8_SCRATCH=nowhere "$bin/train_llama3" $big $fp8 --train-iters 1 >bad.log 2>&1 && fail "a bad TWINRUN_FP8_SCRATCH ran"
    grep -q "TWINRUN_FP8_SCRATCH=nowhere: use logits" bad.log || fail "no clear error for a bad TWINRUN_FP8_SCRATCH"
    ;;
gather)
    dp2() { expect_rc 0 env WORLD_SIZE=2 "$bin/train_llama3" $model $fp8 --use-distributed-optimizer "$@"; }
    same() { [ "$(bits "$1")" = "$(bits "$2")" ] || fail "$3: $(diff "$1" "$2" | head -4)"; }
    per="--overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 1"
    dp2 $per --train-iters 6 --metrics-jsonl dp.jsonl
    dp2 $per --fp8-param-gather --train-iters 6 --metrics-jsonl dpg.jsonl
    has "FP8 weights (--fp8-param-gather) 0\.[0-9]* MB"
    same dp.jsonl dpg.jsonl "DP2, one micro-batch a step: the FP8 gather changed the metrics"
    run $fp8 --use-distributed-optimizer --global-batch-size 2 --train-iters 6 --metrics-jsonl one.jsonl
    run $fp8 --use-distributed-optimizer --fp8-param-gather --global-batch-size 2 --train-iters 6 --metrics-jsonl oneg.jsonl
    same one.jsonl oneg.jsonl "one rank, one micro-batch a step: the FP8 gather changed the metrics"
    peak() { grep -o "rank 0: weights .* device peak [0-9.]* MB" "$out" | grep -o "peak [0-9.]*"; }
    dp2 --global-batch-size 8 --train-iters 6 --metrics-jsonl acc.jsonl
    p0=$(peak)
    dp2 --fp8-param-gather --global-batch-size 8 --train-iters 6 --metrics-jsonl accg.jsonl
    # the FP8 copy lies in the other shard's half of each bucket's bf16 parameters: no memory of its own
    # (the device peak is the run's without the flag), the bits of a copy in a buffer of its own (below)
    has "rank 0: FP8 weights (--fp8-param-gather) 0\.[0-9]* MB inside the bf16 parameters .* and 0\.00 MB of their own"
    [ "$(peak)" = "$p0" ] || fail "the FP8 copy inside the parameters moved the device $(peak) MB from $p0"
    [ "$(bits acc.jsonl)" != "$(bits accg.jsonl)" ] || fail "two micro-batches a step: the second recast its weights"
    losses_close acc.jsonl accg.jsonl
    expect_rc 0 env WORLD_SIZE=2 TWINRUN_FP8_WEIGHTS=own "$bin/train_llama3" $model $fp8 --use-distributed-optimizer \
        --fp8-param-gather --global-batch-size 8 --train-iters 6 --metrics-jsonl acco.jsonl
    same accg.jsonl acco.jsonl "DP2: the FP8 copy inside the parameters trains otherwise than in a buffer of its own"
    [ "$(peak)" != "$p0" ] || fail "a buffer of its own for the FP8 copy left the device peak as it was"
    # four shards (TP2 CP2 DP2, sequence parallelism): the first and last shards' copies in the parameters
    for w in params own; do
        expect_rc 0 env WORLD_SIZE=8 TWINRUN_FP8_WEIGHTS=$w "$bin/train_llama3" $model $fp8 --use-distributed-optimizer \
            --fp8-param-gather --tensor-model-parallel-size 2 --context-parallel-size 2 --sequence-parallel \
            --global-batch-size 8 --train-iters 4 --metrics-jsonl cp_$w.jsonl
    done
    same cp_params.jsonl cp_own.jsonl "TP2 CP2 DP2: the FP8 copy inside the parameters trains otherwise than in its own buffer"
    expect_rc 2 env TWINRUN_FP8_WEIGHTS=nowhere "$bin/train_llama3" $model $fp8 --use-distributed-optimizer \
        --fp8-param-gather --train-iters 1
    hasF "TWINRUN_FP8_WEIGHTS=nowhere: use params"
    dp2 --fp8-param-gather --train-iters 10 --metrics-jsonl full.jsonl
    dp2 --fp8-param-gather --train-iters 10 --save ck --save-interval 5 --exit-interval 5
    dp2 --fp8-param-gather --train-iters 10 --load ck --metrics-jsonl resumed.jsonl
    tail -n 5 full.jsonl >tail.jsonl
    same tail.jsonl resumed.jsonl "the resumed run with --fp8-param-gather differs from the uninterrupted one"
    [ "$(wc -l <resumed.jsonl)" -eq 5 ] || fail "the resumed run did not run iterations 6-10"
    expect_rc 2 "$bin/train_llama3" $model $fp8 --fp8-param-gather --train-iters 1
    hasF "--fp8-param-gather all-gathers the distributed optimizer's FP8 shards (Megatron's rule): add --use-distributed-optimizer"
    ;;
shapes)
    expect_rc 0 "$bin/train_llama3" $(echo $model | sed 's/--ffn-hidden-size 192/--ffn-hidden-size 168/') $fp8 --train-iters 2
    count "note: --fp8-format: model.layers.0.mlp.down_proj.weight is \[128, 168\] for 64 tokens .* need every dimension a multiple of 16" 1
    has "iteration *2/ *2"
    ;;
*) fail "unknown case $case" ;;
esac
echo "fp8_train $case: ok"
