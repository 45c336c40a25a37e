#!/usr/bin/env bash
# The cost model's calibration data from one GPU (≤ 9 min from a bare machine): builds the cuda
# preset's train_llama3, then runs the Llama-3-style 1.5B model (16 layers, hidden 2048, FFN 8192, 32
# heads / 8 groups, vocabulary 128256, bf16, mock data: lab/gpu_bench.sh's flags) at several sequence
# lengths, micro-batches and recompute settings, and the 8B and 70B seeds' layers at seq 8192 (8 and 2
# of them: lab/gpu_bench.sh's llama8b-8l and llama70b-2l). Each config runs twice: once plain (the step time: the
# median of the iterations after the first 2; the peaks: the engine's accounted one from its [memory]
# line, and the device's from nvidia-smi sampled every 20 ms, minus what was in use before), once with
# TWINRUN_GPU_PROFILE=1 (the kernel table per steady iteration, the first left out as warm-up).
# lab/calib/collect_calibration.py then writes calibration.json. Afterwards, on any machine with a twin
# build, with the tarball's calib/ folder as DIR (docs/prediction.md#calibration):
#   lab/fit_cost_model.py DIR --c-out sim/cost/calibration_<h100|h200>.c --md-out fit.md   (refit the kernels)
#   lab/predict_vs_measured.py DIR                                               (step time within 10%, peak within 5%)
# The runs' files gather in a scratch folder (TWINRUN_CALIB_WORK, default a fresh one under /tmp) and are
# packed into OUTDIR/gpu_calibrate.tar.gz after every config, so a run cut short still leaves what it
# measured; calibration.json and summary.txt land beside it at the end.
#
# Usage (repository root): lab/gpu_calibrate.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR  the tarball, calibration.json and summary.txt (made if absent); --debs: a folder of .deb files
#   for what the system lacks (lab/gpu_env.sh); --build: the cuda build folder (default /tmp/build-cuda-calib)
# Environment: TWINRUN_CALIB_BIN (a train_llama3 already built: no build), TWINRUN_CALIB_TINY=1 (a tiny model and
#   two configs: the dry run of this script on the twin build, TWINRUN_CALIB_BIN=build/twin/bin/train_llama3),
#   TWINRUN_CALIB_STEPS (plain run's iterations, default 8), TWINRUN_CALIB_TIMEOUT (s per run, default 90),
#   TWINRUN_CALIB_CONFIGS (a space-separated subset of the config names below), TWINRUN_CALIB_SET=holdout
#   (three configs the fit did not use: the out-of-sample check) or fp8 (the 8B seed's layer and the 1.5B
#   model with the 8B seed's FP8 flags: the folder lab/fit_cost_model.py --fp8-data fits the FP8 kernels
#   to), TWINRUN_CALIB_DEVICE (the twin spec the
#   kernel fit divides by; default the GPU's: H100 or H200 by its name).
# Exit status 1 when the build, a run or the collector failed (every config is tried first).
set -euo pipefail
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] || lab_die "usage: lab/gpu_calibrate.sh [--debs DIR] [--build DIR] OUTDIR"
OUTDIR=$(lab_outdir "${ARGS[0]}")
cd "$(dirname "$0")/.."
WORK=${TWINRUN_CALIB_WORK:-$(mktemp -d /tmp/twinrun-calib-work.XXXXXX)}
D=$WORK/calib
mkdir -p "$D"
log() { echo "== $(date +%T) $*"; }
pack() { tar -C "$WORK" -czf "$OUTDIR/gpu_calibrate.tar.gz" calib; }
commit=$(lab_commit)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
gpu=${gpu:-"no GPU (dry run)"}
# the twin spec whose peaks the kernel fit divides by: the GPU's own where the twin has one
case ${TWINRUN_CALIB_DEVICE:-$gpu} in
*H100*) spec=H100 ;;
*H200* | "no GPU (dry run)") spec=H200 ;;
*) spec=${TWINRUN_CALIB_DEVICE:-}
   [ -n "$spec" ] || lab_die "the twin has no spec for '$gpu': set TWINRUN_CALIB_DEVICE to the spec to fit against (sim/cost/device_spec.c: H100, H200, MTT-S5000)" ;;
esac
log "twinrun calibration at $commit on $gpu -> $OUTDIR"

BIN=${TWINRUN_CALIB_BIN:-}
if [ -z "$BIN" ]; then
    B=${GPU_BUILD:-/tmp/build-cuda-calib}
    log "configure and build the cuda backend's train_llama3 ($B)"
    lab_deps "$DEBS"
    if ! gpu_build "$B" "$D/build.log" train_llama3; then
        grep -E "error|Error" "$D/build.log" | head -30 || true
        pack
        lab_die "the build failed (see calib/build.log in the tarball)"
    fi
    BIN=$B/bin/train_llama3
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
failed=0

if [ "${TWINRUN_CALIB_TINY:-0}" = 1 ]; then
    # name seq micro-batch recompute(none|selective|full) model(tiny or lab_model's: llama1.5b, llama8b-8l, llama70b-2l)
    CONFIGS=("tiny_seq32_mb2 32 2 none tiny" "tiny_seq64_mb2_full 64 2 full tiny")
    [ "${TWINRUN_CALIB_SET:-fit}" = fp8 ] && CONFIGS=("tiny_seq32_mb2_fp8 32 2 none tiny")
else
    # the three 1.5B configs of lab/gpu_bench.sh, a long sequence (attention's share grows), both recompute
    # kinds (peaks with and without recompute), and the seeds' layers (head dim 128, hidden 4096 and 8192)
    CONFIGS=("seq1024_mb4 1024 4 none llama1.5b" "seq4096_mb1 4096 1 none llama1.5b" "seq4096_mb4 4096 4 none llama1.5b"
        "seq8192_mb1 8192 1 none llama1.5b" "seq2048_mb8_selective 2048 8 selective llama1.5b"
        "seq4096_mb4_full 4096 4 full llama1.5b" "llama8b-8l_seq8192_mb1 8192 1 none llama8b-8l"
        "llama70b-2l_seq8192_mb1 8192 1 none llama70b-2l")
    # TWINRUN_CALIB_SET=holdout: configs the fit never saw (other sequence lengths and batches), to check
    # the calibrated model out of sample (lab/predict_vs_measured.py on their folder)
    [ "${TWINRUN_CALIB_SET:-fit}" = holdout ] &&
        CONFIGS=("seq2048_mb4 2048 4 none llama1.5b" "seq1024_mb8_selective 1024 8 selective llama1.5b"
            "seq8192_mb2_full 8192 2 full llama1.5b")
    # TWINRUN_CALIB_SET=fp8: the 8B seed's DTYPE=fp8 recipe (a config named *_fp8 gets its flags)
    [ "${TWINRUN_CALIB_SET:-fit}" = fp8 ] &&
        CONFIGS=("llama8b-8l_seq8192_mb1_fp8 8192 1 none llama8b-8l" "seq1024_mb4_fp8 1024 4 none llama1.5b")
fi
case ${TWINRUN_CALIB_SET:-fit} in fit | holdout | fp8) ;; *) lab_die "TWINRUN_CALIB_SET=$TWINRUN_CALIB_SET: give fit (the default), holdout or fp8" ;; esac
if [ -n "${TWINRUN_CALIB_CONFIGS:-}" ]; then
    keep=()
    for c in "${CONFIGS[@]}"; do
        for w in $TWINRUN_CALIB_CONFIGS; do [ "${c%% *}" = "$w" ] && keep+=("$c"); done
    done
    CONFIGS=("${keep[@]}")
fi
STEPS=${TWINRUN_CALIB_STEPS:-8}
TMO=${TWINRUN_CALIB_TIMEOUT:-90}

# A model's flags: the tiny dry-run model, or lab/gpu_bench.sh's (lab_model).
model_of() {
    if [ "$1" = tiny ]; then
        echo "--num-layers 2 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 8 --num-query-groups 2 --vocab-size 512"
        return
    fi
    lab_model "$1"
    echo "--num-layers $LAB_L --hidden-size $LAB_H --ffn-hidden-size $LAB_F --num-attention-heads $LAB_NH --num-query-groups $LAB_G --vocab-size 128256"
}

# The flags of a config, one a line (the .args file the collector reads and the twin replays).
flags() { # seq mb recompute iters model name
    local model
    model=$(model_of "$5") || exit 2
    # shellcheck disable=SC2086
    printf '%s\n' $model --group-query-attention --seq-length "$1" --max-position-embeddings "$1" \
        --position-embedding-type rope --rotary-base 500000 --normalization RMSNorm --swiglu \
        --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 \
        --micro-batch-size "$2" --global-batch-size "$2" --train-iters "$4" --lr 3e-4 --min-lr 3e-5 \
        --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 \
        --adam-beta2 0.95 --bf16 --mock-data --eval-iters 0 --log-interval 1 --seed 1234
    case $3 in
    none) ;;
    selective) printf '%s\n' --recompute-granularity selective ;;
    full) printf '%s\n' --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 ;;
    *) echo "gpu_calibrate.sh: unknown recompute setting $3" >&2; exit 2 ;;
    esac
    case $6 in # the 8B seed's DTYPE=fp8 (Megatron's flags; --fp8-param-gather is the distributed optimizer's)
    *_fp8) printf '%s\n' --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max ;;
    esac
}

# nvidia-smi's memory.used (MiB) every 20 ms into $1 until the returned pid is killed; nothing without a GPU.
sample_memory() {
    if command -v nvidia-smi >/dev/null && nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 20 >"$1" 2>/dev/null &
        echo $!
    else
        echo 0
    fi
}

printf '%s\n' "${CONFIGS[@]}" >"$D/configs.txt"
for c in "${CONFIGS[@]}"; do
    read -r name seq mb rec model <<<"$c"
    flags "$seq" "$mb" "$rec" "$STEPS" "$model" "$name" >"$D/$name.args"
    mapfile -t args <"$D/$name.args"
    log "$name: $STEPS iterations"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 >"$D/$name.smi_base.txt" 2>/dev/null || true
    pid=$(sample_memory "$D/$name.smi.txt")
    rc=0
    timeout "$TMO" "$BIN" "${args[@]}" --metrics-jsonl "$D/$name.metrics.jsonl" --data-cache-path /tmp/twinrun-calib-cache \
        >"$D/$name.log" 2>&1 || rc=$?
    [ "$pid" != 0 ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    echo "$rc" >"$D/$name.exit"
    [ $rc -eq 0 ] || { echo "  exit $rc:"; tail -5 "$D/$name.log" | sed 's/^/    /'; failed=1; }
    grep -E "^\[memory\] rank 0: weights |^\[after training\]" "$D/$name.log" | sed 's/^/  /' || true

    log "$name: profiled, 4 iterations (the first is warm-up)"
    mapfile -t pargs < <(flags "$seq" "$mb" "$rec" 4 "$model" "$name")
    rc=0
    # the kernels' own times: the profile serialises the streams, and with the optimizer's step ahead the
    # forward's GEMMs would run on the multiprocessors its share leaves them and the update's spans hold
    # their waits; the step ahead's effect is fitted to the step times (lab/calib/fit_background_rate.py)
    TWINRUN_OPTIM_AHEAD=${TWINRUN_OPTIM_AHEAD:-0} TWINRUN_GPU_PROFILE=1 TWINRUN_GPU_PROFILE_FILE="$D/profile_$name.txt" \
        timeout "$TMO" "$BIN" "${pargs[@]}" \
        --data-cache-path /tmp/twinrun-calib-cache >"$D/$name.profile.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || { echo "  profiled run exit $rc"; tail -3 "$D/$name.profile.log" | sed 's/^/    /'; failed=1; }
    [ -f "$D/profile_$name.txt" ] && head -4 "$D/profile_$name.txt" | sed 's/^/  /'
    pack
done

log "calibration.json"
python3 lab/calib/collect_calibration.py "$D" --commit "$commit" --gpu "$gpu" --device "$spec" | tee "$D/summary.txt"
cp "$D/calibration.json" "$D/summary.txt" "$OUTDIR/"
pack
[ $failed -eq 0 ] || lab_die "some runs failed (see above; their logs are in the tarball)"
log "done: $OUTDIR/gpu_calibrate.tar.gz (calib/ of $WORK)"
