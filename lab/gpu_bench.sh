#!/usr/bin/env bash
# The step benchmark on one GPU: builds the cuda preset, runs train_llama3 (bf16, mock
# data, Llama-3-style models with the 128256-token vocabulary, untied: the 1.5B model (16 layers,
# hidden 2048, 32 heads / 8 query groups, FFN 8192) and the 8B and 70B seeds' layers at seq 8192, see
# CONFIGS) and the two PyTorch baselines of lab/bench/pytorch_llama.py (HF LlamaForCausalLM with SDPA
# and fused AdamW: pure bf16, and fp32 master weights with bf16 autocast)
# on the same configs, and prints one table: tokens/s, TFLOP/s (Megatron's formula), step ms, peak
# memory, start-up seconds, twinrun / PyTorch, then whether the twin's calibration for this GPU is older
# than the kernels (lab/calib/calibration_age.py). Writes into OUTDIR as it goes, so a run cut short still
# leaves what it measured:
#   gpu_bench.json (docs/results/gpu_bench.json's format), gpu_bench.md (for docs/benchmarks.md),
#   runs/<config>.<recipe>.{log,json}, profile_*.txt (--profile), oracle.log, sanitizer.log (--checks).
#
# Usage (repository root): lab/gpu_bench.sh [--debs DIR] [--build DIR] [--quick] [--profile] [--checks] [--no-oracle]
#          [--no-baseline] OUTDIR
#   OUTDIR       the results (made if absent)
#   --debs       a folder of .deb files for what the system lacks (lab/gpu_env.sh)
#   --build      the cuda build folder (default /tmp/build-cuda-bench)
#   --quick      one config (seq 1024, micro-batch 4), fewer steps
#   --profile    one more short twinrun run with TWINRUN_GPU_PROFILE=1: where the step's time goes, kernel by
#                kernel (with TWINRUN_OPTIM_AHEAD=0 unless set: the profile serialises the streams)
#   --checks     after the table: compute-sanitizer memcheck/racecheck on the attention and other new kernels
#   --no-oracle  skip kern_oracle (twin kernels vs GPU kernels) before the benchmark
#   --no-baseline  twinrun only (no PyTorch runs, no ratios): a quick look at twinrun's own step
# Environment: TWINRUN_BENCH_BIN (a train_llama3 already built: no build), TWINRUN_BENCH_TINY=1 (a tiny
#   model: the dry run of the script on the twin build), TWINRUN_BENCH_STEPS, TWINRUN_BENCH_TIMEOUT (s per run),
#   TWINRUN_BENCH_PROFILE_CONFIG (the configs --profile runs: 0 .. 4 in the order below, comma-separated, or
#   `all`; default 0),
#   TWINRUN_BENCH_CONFIGS (a comma-separated subset, "name seq mb" each, e.g. "llama8b-8l 8192 1"),
#   TWINRUN_BENCH_FLAGS (more train_llama3 flags for every twinrun run, e.g. the 8B seed's FP8 recipe
#   "--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max"; lab/bench/fp8_ratio.py
#   sets two such runs' tables side by side).
# Exit status 1 when a step failed (the build, kern_oracle, a run, the table, a sanitizer check), after
# everything else has run and the table is written.
set -euo pipefail
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
quick=0 profile=0 checks=0 oracle=1 baseline=1 pos=()
for a in "${ARGS[@]}"; do
    case $a in
    --quick) quick=1 ;;
    --profile) profile=1 ;;
    --checks) checks=1 ;;
    --no-oracle) oracle=0 ;;
    --no-baseline) baseline=0 ;;
    -*) lab_die "unknown option $a" ;;
    *) pos+=("$a") ;;
    esac
done
[ ${#pos[@]} -eq 1 ] || lab_die "usage: lab/gpu_bench.sh [--debs DIR] [--build DIR] [--quick] [--profile] [--checks] [--no-oracle] [--no-baseline] OUTDIR"
OUTDIR=$(lab_outdir "${pos[0]}")
cd "$(dirname "$0")/.."
R=$OUTDIR/runs
mkdir -p "$R"
failed=() # the steps that failed: the exit status, at the end
log() { echo "== $(date +%T) $*"; }
commit=$(lab_commit)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
gpu=${gpu:-"no GPU (dry run)"}
log "twinrun benchmark at $commit on $gpu -> $OUTDIR"

B=${GPU_BUILD:-/tmp/build-cuda-bench}
BIN=${TWINRUN_BENCH_BIN:-}
if [ -z "$BIN" ]; then
    log "configure and build the cuda backend ($B)"
    lab_deps "$DEBS"
    targets=(train_llama3)
    [ $oracle = 1 ] && targets+=(kern_oracle)
    [ $checks = 1 ] && targets+=(test_kern_attention test_kern_cp test_kern_adamw test_kern_master_split test_kern_init test_kern_multi_tensor
        test_kern_embedding test_kern_tp)
    if ! gpu_build "$B" "$OUTDIR/build.log" "${targets[@]}"; then
        grep -E "error|Error" "$OUTDIR/build.log" | head -30 || true
        lab_die "the build failed (see $OUTDIR/build.log)"
    fi
    BIN=$B/bin/train_llama3
fi

if [ $oracle = 1 ] && [ -x "$(dirname "$BIN")/kern_oracle" ]; then
    log "kern_oracle: twin kernels vs GPU kernels (large shapes, T 4096, D 128)"
    rc=0
    timeout 240 "$(dirname "$BIN")/kern_oracle" >"$OUTDIR/oracle.log" 2>&1 || rc=$?
    grep -E "FAILED|NOT DETERMINISTIC|kern_oracle:" "$OUTDIR/oracle.log" || true
    echo "kern_oracle rc=$rc"
    [ $rc -eq 0 ] || failed+=("kern_oracle (exit $rc)")
fi

if [ "${TWINRUN_BENCH_TINY:-0}" = 1 ]; then
    MODEL=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --num-query-groups 2
        --vocab-size 512)
    PT_MODEL=(--layers 2 --hidden 64 --ffn 176 --heads 8 --groups 2 --vocab 512)
    CONFIGS=("tiny 32 2")
else
    # the 1.5B model; the 8B seed's layer (hidden 4096, FFN 14336, 32 heads / 8 groups, head dim 128) x 8 and
    # the 70B seed's (hidden 8192, FFN 28672, 64 heads / 8 groups) x 2, at the seeds' sequence length: as many
    # layers as fit one card beside the embedding and output layer of the 128256-token vocabulary
    CONFIGS=("llama1.5b 1024 4" "llama1.5b 4096 1" "llama1.5b 4096 4" "llama8b-8l 8192 1" "llama70b-2l 8192 1")
    [ $quick = 1 ] && CONFIGS=("llama1.5b 1024 4")
    [ -n "${TWINRUN_BENCH_CONFIGS:-}" ] && mapfile -t CONFIGS < <(tr ',' '\n' <<<"$TWINRUN_BENCH_CONFIGS")
fi
# MODEL / PT_MODEL of a config's name
model_of() {
    [ "${TWINRUN_BENCH_TINY:-0}" = 1 ] && return
    lab_model "$1"
    MODEL=(--num-layers $LAB_L --hidden-size $LAB_H --ffn-hidden-size $LAB_F --num-attention-heads $LAB_NH
        --num-query-groups $LAB_G --vocab-size 128256)
    PT_MODEL=(--layers $LAB_L --hidden $LAB_H --ffn $LAB_F --heads $LAB_NH --groups $LAB_G --vocab 128256)
}
STEPS=${TWINRUN_BENCH_STEPS:-$([ $quick = 1 ] && echo 6 || echo 10)}
TMO=${TWINRUN_BENCH_TIMEOUT:-150}
printf '%s\n' "${CONFIGS[@]}" >"$R/configs.txt"
have_torch=0
[ $baseline = 1 ] && python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null && have_torch=1

# The Megatron flags of the 8B seed's recipe, shrunk to the 1.5B model; one micro-batch a step, as the
# PyTorch loop does.
twinrun_args() { # seq mb iters metrics cache
    echo "${MODEL[@]}" --group-query-attention --seq-length "$1" --max-position-embeddings "$1" \
        --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu \
        --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 \
        --micro-batch-size "$2" --global-batch-size "$2" --train-iters "$3" --lr 3e-4 --min-lr 3e-5 \
        --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 \
        --adam-beta2 0.95 --bf16 --mock-data --eval-iters 0 --log-interval 1 --seed 1234 \
        --metrics-jsonl "$4" --data-cache-path "$5" ${TWINRUN_BENCH_FLAGS:-}
}

for c in "${CONFIGS[@]}"; do
    read -r name seq mb <<<"$c"
    model_of "$name"
    key=${name}_seq${seq}_mb${mb}
    log "$key: twinrun ($STEPS iterations)"
    rc=0
    # shellcheck disable=SC2046
    timeout "$TMO" "$BIN" $(twinrun_args "$seq" "$mb" "$STEPS" "$R/$key.metrics.jsonl" "/tmp/twinrun-bench-cache") \
        >"$R/$key.twinrun.log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
        echo "  twinrun exit $rc:"; tail -5 "$R/$key.twinrun.log" | sed 's/^/    /'
        failed+=("$key twinrun (exit $rc)")
    fi
    if python3 lab/bench/twinrun_result.py "$R/$key.twinrun.log" "$R/$key.metrics.jsonl" "$seq" "$mb" 2 \
        >"$R/$key.twinrun.json"; then cat "$R/$key.twinrun.json"; else failed+=("$key twinrun_result.py"); fi
    if [ $have_torch = 1 ]; then
        for mode in bf16 amp; do
            log "$key: PyTorch $mode"
            rc=0
            timeout "$TMO" python3 lab/bench/pytorch_llama.py --mode $mode --seq "$seq" --micro-batch "$mb" \
                --steps $((STEPS - 2)) --warmup 2 "${PT_MODEL[@]}" --json "$R/$key.pytorch_$mode.json" \
                >"$R/$key.pytorch_$mode.log" 2>&1 || rc=$?
            if [ $rc -ne 0 ]; then
                echo "  PyTorch $mode exit $rc:"; tail -5 "$R/$key.pytorch_$mode.log" | sed 's/^/    /'
                failed+=("$key PyTorch $mode (exit $rc)")
            else tail -1 "$R/$key.pytorch_$mode.log"; fi
        done
    else
        [ $baseline = 0 ] || echo "  (no torch with CUDA here: PyTorch baselines skipped)"
    fi
done

log "table"
python3 lab/bench/bench_table.py "$R" "$commit" "$gpu" "$OUTDIR/gpu_bench.json" "$OUTDIR/gpu_bench.md" ||
    failed+=("bench_table.py")
# whether the twin's kernel table for this GPU was measured on these kernels (docs/prediction.md#calibration)
python3 lab/calib/calibration_age.py "$gpu" | tee -a "$OUTDIR/gpu_bench.md" || true

if [ $profile = 1 ]; then
    pcs=${TWINRUN_BENCH_PROFILE_CONFIG:-0}
    [ "$pcs" = all ] && pcs=$(seq -s, 0 $((${#CONFIGS[@]} - 1)))
    for pc in ${pcs//,/ }; do
        [[ $pc =~ ^[0-9]+$ ]] && [ "$pc" -lt "${#CONFIGS[@]}" ] || lab_die "TWINRUN_BENCH_PROFILE_CONFIG: $pc is not 0 .. $((${#CONFIGS[@]} - 1)) or all"
        read -r name seq mb <<<"${CONFIGS[$pc]}"
        model_of "$name"
        pf=$OUTDIR/profile_${name}_seq${seq}_mb${mb}.txt
        log "profile: ${name} seq $seq mb $mb, 4 iterations with TWINRUN_GPU_PROFILE=1"
        rc=0
        # the kernels' own times (the table lab/fit_cost_model.py fits): the profile serialises the streams,
        # so the optimizer's step ahead is off unless asked for (its share would slow the forward's GEMMs)
        # shellcheck disable=SC2046
        TWINRUN_OPTIM_AHEAD=${TWINRUN_OPTIM_AHEAD:-0} TWINRUN_GPU_PROFILE=1 TWINRUN_GPU_PROFILE_FILE="$pf" \
            timeout "$TMO" "$BIN" $(twinrun_args "$seq" "$mb" 4 "$R/profile.metrics.jsonl" "/tmp/twinrun-bench-cache") \
            >"$R/profile_$pc.log" 2>&1 || rc=$?
        echo "profiled run exit $rc"
        [ $rc -eq 0 ] || failed+=("profiled run $name seq $seq mb $mb (exit $rc)")
        head -40 "$pf" 2>/dev/null || tail -5 "$R/profile_$pc.log"
    done
fi

if [ $checks = 1 ]; then
    log "compute-sanitizer on the kernel tests of the new kernels"
    if command -v compute-sanitizer >/dev/null; then
        for t in test_kern_attention test_kern_cp test_kern_adamw test_kern_master_split test_kern_init test_kern_multi_tensor test_kern_embedding test_kern_tp; do
            [ -x "$B/tests/$t" ] || continue
            rc=0
            timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/$t" >>"$OUTDIR/sanitizer.log" 2>&1 || rc=$?
            echo "memcheck $t rc=$rc"
            [ $rc -eq 0 ] || failed+=("memcheck $t (exit $rc)")
        done
        for t in test_kern_attention test_kern_cp; do
            rc=0
            timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/$t" >>"$OUTDIR/sanitizer.log" 2>&1 || rc=$?
            echo "racecheck $t rc=$rc"
            [ $rc -eq 0 ] || failed+=("racecheck $t (exit $rc)")
        done
    else
        echo "no compute-sanitizer on PATH"
        failed+=("--checks: no compute-sanitizer on PATH")
    fi
fi
if [ ${#failed[@]} -gt 0 ]; then
    log "done; FAILED: ${failed[*]}"
    exit 1
fi
log done
