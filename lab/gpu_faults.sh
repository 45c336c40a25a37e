#!/usr/bin/env bash
# The fault library on the real build, on a 1-GPU machine:
# builds the cuda preset and runs train_llama3 with TWINRUN_FAULTS (docs/faults.md) — a NaN in a
# layer's output, +Inf in a layer's gradient, a NaN in the loss, an OOM, a checkpoint ENOSPC, and the
# straggler report — checking that each is diagnosed as on the twin (rank, layer, tensor; exit codes).
# Usage (repository root): lab/gpu_faults.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR  the build log and each case's log (made if absent); --debs: a folder of .deb files for what
#   the system lacks (lab/gpu_env.sh); --build: the cuda build folder (default /tmp/build-cuda-faults).
# Exit status 1 when a case was not diagnosed as on the twin, or a step before the cases failed.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] ||
    lab_die "usage: lab/gpu_faults.sh [--debs DIR] [--build DIR] OUTDIR"
W=$(lab_outdir "${ARGS[0]}") || exit 1
B=${GPU_BUILD:-/tmp/build-cuda-faults}
cd "$(dirname "$0")/.." || exit 1
lab_deps "$DEBS" || exit 1
nvidia-smi -L || lab_die "nvidia-smi -L failed: no GPU visible"
rm -rf "$W/cache" "$W/save"
gpu_build "$B" "$W/build.log" train_llama3 || { tail -30 "$W/build.log"; lab_die "the build failed (see $W/build.log)"; }
JOB=(--num-layers 4 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --group-query-attention
     --num-query-groups 2 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope
     --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
     --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 2 --global-batch-size 4 --train-iters 6
     --lr 1e-3 --mock-data --vocab-size 512 --eval-iters 0 --log-interval 1 --data-cache-path "$W/cache")
pass=0 fail=0
expect() { # expect NAME EXIT REGEX FAULTS [extra flags...]
    local name=$1 want=$2 re=$3 faults=$4; shift 4
    TWINRUN_FAULTS="$faults" "$B/bin/train_llama3" "${JOB[@]}" "$@" >"$W/$name.log" 2>&1
    local rc=$?
    if [ "$rc" -eq "$want" ] && grep -Eq "$re" "$W/$name.log"; then pass=$((pass + 1)); echo "ok   $name: exit $rc; $(grep -Eo "$re" "$W/$name.log" | head -1)"
    else fail=$((fail + 1)); echo "FAIL $name: exit $rc (want $want)"; tail -6 "$W/$name.log" | sed 's/^/    /'; fi
}
expect nan_activation 16 "First non-finite value: rank 0 \(tp 0, pp 0, cp 0, dp 0\), layer 2 activation, micro-batch 0" \
    "nan@3:rank=0,tensor=activation,layer=2"
expect inf_gradient 16 "First non-finite value: rank 0 \(tp 0, pp 0, cp 0, dp 0\), layer 1 gradient" \
    "nan@2:rank=0,tensor=gradient,layer=1,inf=true"
expect nan_loss 16 "First non-finite value: rank 0 \(tp 0, pp 0, cp 0, dp 0\), the loss" "nan@4:rank=0,tensor=loss"
expect oom 1 "out of device memory allocating [0-9]+ bytes for activations of the next micro-batch" "oom@2:rank=0"
expect ckpt_enospc 1 "no space left on device" "ckpt_enospc@2:rank=0" --save "$W/save" --save-interval 2
expect straggler 0 "straggler report \(iterations 3-3\)" "straggler@3:rank=0,factor=3" --log-straggler
expect clean 0 "iteration +6/ +6" ""
echo "gpu faults: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
