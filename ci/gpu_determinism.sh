#!/usr/bin/env bash
# --deterministic-mode on one GPU: the 1.5B model of ci/gpu_bench.sh (bf16, seq 1024,
# micro-batch 4) three times — once without the flag, twice with it — and a bitwise comparison of the
# metrics (losses, grad norms, learning rates; timing fields aside) plus each run's step time: two
# runs with the flag must give the same bits, and the step times say what the flag costs.
# Usage: ci/gpu_determinism.sh BIN OUTDIR [STEPS]   (BIN: a cuda build's train_llama3)
set -u
BIN=$1
OUT=${2:-/tmp/twinrun-determinism}
STEPS=${3:-8}
mkdir -p "$OUT"
args="--num-layers 16 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 32 --num-query-groups 8
 --vocab-size 128256 --group-query-attention --seq-length 1024 --max-position-embeddings 1024
 --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu
 --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
 --micro-batch-size 4 --global-batch-size 4 --train-iters $STEPS --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine
 --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --mock-data
 --eval-iters 0 --log-interval 1 --seed 1234 --data-cache-path $OUT/cache"
export NCCL_ALGO=Ring # Megatron's rule for --deterministic-mode
# the libraries BIN links (NCCL from the Python wheel, the .debs): run on its own, the loader would
# find neither (exit 127)
DEBS=${DEBS:-.debs} . "$(dirname "$0")/gpu_env.sh" >/dev/null 2>&1
rc=0
for run in plain det1 det2; do
    flag=""; [ $run = plain ] || flag=--deterministic-mode
    # shellcheck disable=SC2086
    "$BIN" $args $flag --metrics-jsonl "$OUT/$run.jsonl" >"$OUT/$run.log" 2>&1 || { echo "$run: exit $?"; rc=1; }
    sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$OUT/$run.jsonl" >"$OUT/$run.bits"
    # the step time of the iterations after the first two (warm-up), as ci/bench/twinrun_result.py takes it
    ms=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][2:]; print("%.1f" % (sum(x["elapsed_ms_per_iter"] for x in r)/max(len(r),1)))' "$OUT/$run.jsonl" 2>/dev/null)
    echo "$run: $(wc -l <"$OUT/$run.jsonl") iterations, step ${ms:-?} ms, last loss $(tail -1 "$OUT/$run.jsonl" | grep -o '"lm_loss":[^,]*')"
done
if cmp -s "$OUT/det1.bits" "$OUT/det2.bits" && [ -s "$OUT/det1.bits" ]; then
    echo "--deterministic-mode: two runs identical bit for bit (losses, grad norms, learning rates)"
else
    echo "--deterministic-mode: the two runs DIFFER"; rc=1
fi
if cmp -s "$OUT/plain.bits" "$OUT/det1.bits"; then echo "without the flag: the same bits too"
else echo "without the flag: other bits (cuDNN's default attention backward sums dQ with atomics)"; fi
exit $rc
