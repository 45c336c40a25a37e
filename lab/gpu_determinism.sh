#!/usr/bin/env bash
# --deterministic-mode on one GPU: the 1.5B model of lab/gpu_bench.sh (bf16, seq 1024,
# micro-batch 4) three times — once without the flag, twice with it — and a bitwise comparison of the
# metrics (losses, grad norms, learning rates; timing fields aside) plus each run's step time: two
# runs with the flag must give the same bits, and the step times say what the flag costs.
# Usage (repository root): lab/gpu_determinism.sh [--debs DIR] [--build DIR] [--bin TRAIN_LLAMA3] [--steps N] OUTDIR
#   OUTDIR  each run's log, metrics and bits (made if absent)
#   --bin   a cuda build's train_llama3 (default: build one in --build, default /tmp/build-cuda-dev)
#   --steps iterations per run (default 8); --debs: a folder of .deb files for what the system lacks
#   (lab/gpu_env.sh). Exit status 1 when a run failed or the two runs with the flag differ.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
BIN="" STEPS=8 pos=()
set -- "${ARGS[@]}"
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=${2:?--bin needs a program}; shift 2 ;;
    --steps) STEPS=${2:?--steps needs a count}; shift 2 ;;
    -*) lab_die "unknown option $1" ;;
    *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -eq 1 ] || lab_die "usage: lab/gpu_determinism.sh [--debs DIR] [--build DIR] [--bin TRAIN_LLAMA3] [--steps N] OUTDIR"
OUTDIR=$(lab_outdir "${pos[0]}") || exit 1
[ -z "$BIN" ] || BIN=$(realpath "$BIN") || exit 1
cd "$(dirname "$0")/.." || exit 1
# the libraries train_llama3 links (NCCL from the Python wheel, the .debs): without them the loader
# finds neither (exit 127)
lab_deps "$DEBS" || exit 1
if [ -z "$BIN" ]; then
    B=${GPU_BUILD:-/tmp/build-cuda-dev}
    gpu_build "$B" "$OUTDIR/build.log" train_llama3 || { tail -30 "$OUTDIR/build.log"; lab_die "the build failed (see $OUTDIR/build.log)"; }
    BIN=$B/bin/train_llama3
fi
args="--num-layers 16 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 32 --num-query-groups 8
 --vocab-size 128256 --group-query-attention --seq-length 1024 --max-position-embeddings 1024
 --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu
 --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
 --micro-batch-size 4 --global-batch-size 4 --train-iters $STEPS --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine
 --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --mock-data
 --eval-iters 0 --log-interval 1 --seed 1234 --data-cache-path $OUTDIR/cache"
export NCCL_ALGO=Ring # Megatron's rule for --deterministic-mode
rc=0
for run in plain det1 det2; do
    flag=""; [ $run = plain ] || flag=--deterministic-mode
    # shellcheck disable=SC2086
    "$BIN" $args $flag --metrics-jsonl "$OUTDIR/$run.jsonl" >"$OUTDIR/$run.log" 2>&1 || { echo "$run: exit $?"; rc=1; }
    sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$OUTDIR/$run.jsonl" >"$OUTDIR/$run.bits"
    # the step time of the iterations after the first two (warm-up), as lab/bench/twinrun_result.py takes it
    ms=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][2:]; print("%.1f" % (sum(x["elapsed_ms_per_iter"] for x in r)/max(len(r),1)))' "$OUTDIR/$run.jsonl" 2>/dev/null)
    echo "$run: $(wc -l <"$OUTDIR/$run.jsonl") iterations, step ${ms:-?} ms, last loss $(tail -1 "$OUTDIR/$run.jsonl" | grep -o '"lm_loss":[^,]*')"
done
if cmp -s "$OUTDIR/det1.bits" "$OUTDIR/det2.bits" && [ -s "$OUTDIR/det1.bits" ]; then
    echo "--deterministic-mode: two runs identical bit for bit (losses, grad norms, learning rates)"
else
    echo "--deterministic-mode: the two runs DIFFER"; rc=1
fi
if cmp -s "$OUTDIR/plain.bits" "$OUTDIR/det1.bits"; then echo "without the flag: the same bits too"
else echo "without the flag: other bits (cuDNN's default attention backward sums dQ with atomics)"; fi
exit $rc
