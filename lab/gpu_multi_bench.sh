#!/usr/bin/env bash
# The multi-GPU scaling benchmark, on a machine with 2, 4 or 8 GPUs: builds the cuda preset's train_llama3 and blame, then runs each layout the
# GPU count allows (nvidia-smi -L), each started by scripts/launch_llama3.sh as the 8B seed's platform
# would (node-level WORLD_SIZE=1 RANK=0; one train_llama3 per GPU with torchrun-style variables; bf16,
# mock data, sequence parallelism, the distributed optimizer with --overlap-grad-reduce
# --overlap-param-gather, all the launcher's own flags):
#   2 GPUs: the 1.5B model of lab/gpu_bench.sh (16 layers, hidden 2048, FFN 8192, 32 heads / 8 query
#           groups, vocabulary 128256) on 1 GPU (L1), TP2, DP2, PP2;
#   4 GPUs: also 1.5B TP2DP2, TP2PP2, DP4, and a Llama-3-8B-shaped model (32 layers, hidden 4096, FFN
#           14336, 32 heads / 8 groups) in TP2PP2 and TP4 (skipped where the twin predicts it does not fit);
#   8 GPUs: also 1.5B TP2PP2DP2, DP8 and 8B TP2PP2DP2.
# Sequence 4096, micro-batch 1, 8 micro-batches per DP rank (global batch 8 x DP: more micro-batches than
# pipeline stages). Per layout: tokens/s per GPU, scaling efficiency against the same model's one-GPU
# run (the 8B: against its first layout), the step time (median after 2 warm-up iterations), peak memory
# (the engine's accounted peak; nvidia-smi's, less what was in use before), the share of step time the
# ranks spent in collectives (flight-recorder start/end times, lab/bench/multi_bench_report.py), and the
# twin's simulated step time of the same job on the H200 spec (predict mode). Between the 1.5B and the 8B
# runs: lab/gpu_multi.sh's correctness checks for the GPU count (each layout of the small fp32 job vs 1 GPU
# within 1e-5 over 20 steps and vs the twin, collective traces identical to the twin's, an injected hang
# caught, blamed and aborted), which need the twin's side in TWIN_DIR/multi.
#
# Before it, on any machine with a twin build of the same commit (the GPU machine's own will do):
#   lab/twin_multi.sh                  the twin's side of the checks -> .gpu_inputs/multi
#   lab/gpu_multi_bench.sh --predict   the twin's predictions of every layout -> .gpu_inputs/multi_bench
# Then on the GPU machine (.gpu_inputs at the repository root, or named by the variables below):
#   set -o pipefail; lab/gpu_multi_bench.sh [--debs DIR] OUTDIR 2>&1 | tee summary.txt
# OUTDIR gets, as it goes: gpu_multi_bench.json (docs/results/gpu_multi_bench.json's format) and
# gpu_multi_bench.md (the table), rewritten after every layout; gpu_multi_bench_runs.tar.gz (runs/: every
# run's console, per-rank logs, metrics, flight dumps, nvidia-smi samples, the predictions, the build
# log), repacked after every layout so that a run cut short keeps what it measured; gpu_multi_logs.tar.gz
# (the checks'). Exit status 1 when the build, a run or the checks failed (after the table).
#
# Usage (repository root): lab/gpu_multi_bench.sh [--debs DIR] [--build DIR] [--budget S] OUTDIR   the benchmark
#                          lab/gpu_multi_bench.sh --predict [DIR]   the twin's predictions only (default .gpu_inputs/multi_bench)
#   OUTDIR    the results (made if absent)
#   --debs    a folder of .deb files for what the system lacks (lab/gpu_env.sh)
#   --build   the cuda build folder (default /tmp/build-cuda-multibench)
#   --budget  seconds for the whole run: layouts that would start after it are skipped and noted in the
#             table (default none: every layout runs)
# Environment: TWINRUN_MULTI_BENCH_BIN (a train_llama3 already built, blame beside it: no build),
#   TWINRUN_MULTI_BENCH_GPUS (the GPU count, instead of nvidia-smi's), TWINRUN_MULTI_BENCH_LAYOUTS (names
#   such as "llama1.5b_TP2 llama8b_TP2PP2" instead of the GPU count's list), TWINRUN_MULTI_BENCH_STEPS
#   (iterations, default 10), TWINRUN_MULTI_BENCH_MICRO (micro-batches per DP rank, default 8),
#   TWINRUN_MULTI_BENCH_TIMEOUT (s per run, default 240), TWINRUN_MULTI_BENCH_CHECKS=0 (no checks),
#   TWINRUN_MULTI_BENCH_TWIN_DIR (the checks' twin side, default .gpu_inputs), TWINRUN_MULTI_BENCH_PREDICT_DIR
#   (the predictions, default .gpu_inputs/multi_bench), TWINRUN_MULTI_BENCH_TWIN_BIN (a twin train_llama3
#   that predicts what that folder lacks; --predict's default build/twin/bin/train_llama3),
#   TWINRUN_MULTI_BENCH_WORK (scratch folder, default a fresh one under /tmp).
#   TWINRUN_MULTI_BENCH_DRY=1: the dry run on the twin, no GPU (test multi_bench_dry_run): tiny stand-ins for
#   the two models ("tiny", "tiny4l"), TWINRUN_MULTI_BENCH_GPUS simulated GPUs (default 2), the "measured"
#   side the twin's own run of each layout through the launcher (TWINRUN_BACKEND=twin, H200 spec), the
#   predictions made on the spot, the checks' twin side made by lab/twin_multi.sh; BIN defaults to
#   build/twin/bin/train_llama3. Its figures are labelled as the twin's, never GPU figures.
set -euo pipefail
export PYTHONUNBUFFERED=1
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
mode=bench pos=() BUDGET=${TWINRUN_MULTI_BENCH_BUDGET_S:-0}
set -- "${ARGS[@]}"
while [ $# -gt 0 ]; do
    case $1 in
    --predict) mode=predict; shift ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift 2 ;;
    -*) lab_die "unknown option $1" ;;
    *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -le 1 ] || lab_die "one folder only: lab/gpu_multi_bench.sh [--debs DIR] [--build DIR] [--budget S] OUTDIR"
outdir=${pos[0]:-}
if [ $mode = bench ]; then
    [ -n "$outdir" ] || lab_die "usage: lab/gpu_multi_bench.sh [--debs DIR] [--build DIR] [--budget S] OUTDIR"
    OUTDIR=$(lab_outdir "$outdir")
fi
cd "$(dirname "$0")/.."
REPO=$PWD
# shellcheck source=lab/multi_layouts.sh
. lab/multi_layouts.sh
log() { echo "== $(date +%T) $*"; }
DRY=${TWINRUN_MULTI_BENCH_DRY:-0}
STEPS=${TWINRUN_MULTI_BENCH_STEPS:-10}
MICRO=${TWINRUN_MULTI_BENCH_MICRO:-8}
TMO=${TWINRUN_MULTI_BENCH_TIMEOUT:-240}
CHECKS=${TWINRUN_MULTI_BENCH_CHECKS:-1}
REPORT=lab/bench/multi_bench_report.py
WORK=${TWINRUN_MULTI_BENCH_WORK:-$(mktemp -d /tmp/twinrun-multibench.XXXXXX)}
R=$WORK/runs
rm -rf "$R"
mkdir -p "$R/predict"
commit=$(lab_commit)
if [ "$DRY" = 1 ]; then
    M1=tiny M8=tiny4l
else
    M1=llama1.5b M8=llama8b
fi

model_env() { # MODEL: the launcher's model variables
    case $1 in
    llama1.5b) echo NUM_LAYERS=16 HIDDEN_SIZE=2048 FFN_HIDDEN_SIZE=8192 NUM_ATTENTION_HEADS=32 NUM_QUERY_GROUPS=8 \
        KV_CHANNELS=64 VOCAB_SIZE=128256 SEQ_LENGTH=4096 ;;
    llama8b) echo NUM_LAYERS=32 HIDDEN_SIZE=4096 FFN_HIDDEN_SIZE=14336 NUM_ATTENTION_HEADS=32 NUM_QUERY_GROUPS=8 \
        KV_CHANNELS=128 VOCAB_SIZE=128256 SEQ_LENGTH=4096 ;;
    tiny) echo NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=176 NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 \
        KV_CHANNELS=8 VOCAB_SIZE=512 SEQ_LENGTH=32 ;;
    tiny4l) echo NUM_LAYERS=4 HIDDEN_SIZE=128 FFN_HIDDEN_SIZE=352 NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=4 \
        KV_CHANNELS=16 VOCAB_SIZE=512 SEQ_LENGTH=64 ;;
    *) echo "gpu_multi_bench.sh: unknown model $1" >&2; return 1 ;;
    esac
}
bench_layouts() { # N: the "MODEL_LAYOUT" names N GPUs allow, in run order (the 1.5B's, then the 8B's)
    local l="${M1}_L1 ${M1}_TP2 ${M1}_DP2 ${M1}_PP2"
    [ "$1" -ge 4 ] && l="$l ${M1}_TP2DP2 ${M1}_TP2PP2 ${M1}_DP4"
    [ "$1" -ge 8 ] && l="$l ${M1}_TP2PP2DP2 ${M1}_DP8"
    [ "$1" -ge 4 ] && l="$l ${M8}_TP2PP2 ${M8}_TP4"
    [ "$1" -ge 8 ] && l="$l ${M8}_TP2PP2DP2"
    echo "$l"
}
job_env() { # NAME ITERATIONS: the launcher's variables of a benchmark job (besides EXTRA_ARGS)
    local tp pp dp gbs
    read -r tp pp dp < <(layout_sizes "$1")
    gbs=$((MICRO * dp))
    echo "$(model_env "${1%_*}")" MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=$gbs TRAIN_SAMPLES=$((gbs * $2)) \
        LR_DECAY_SAMPLES=$((gbs * $2)) LR_WARMUP_SAMPLES=$gbs LEARNING_RATE=1.5e-4 MIN_LEARNING_RATE=1e-5 USE_BF16=1 \
        LOG_INTERVAL=1 EVAL_ITERS=0 DISTRIBUTED_TIMEOUT_MINUTES=5
}
spec_line() { # NAME: layouts.txt's "name model gpus tp pp dp seq micro_batch global_batch"
    local tp pp dp seq
    read -r tp pp dp < <(layout_sizes "$1")
    seq=$(model_env "${1%_*}" | tr ' ' '\n' | sed -n 's/^SEQ_LENGTH=//p')
    echo "$1 ${1%_*} $((tp * pp * dp)) $tp $pp $dp $seq 1 $((MICRO * dp))"
}
predict() { # NAME JSON [TIMEOUT]: the twin's shape-only run of the job on the H200 spec, 2 iterations
    # shellcheck disable=SC2046
    MULTI_TIMEOUT=${3:-$TMO} run_layout "$1" "$WORK/predict_runs" TWINRUN_BACKEND=twin TRAIN_BIN="$TWIN_BIN" \
        TWINRUN_TWIN_DEVICE=H200 $(job_env "$1" 2) \
        EXTRA_ARGS="--seed 1234 --save= --load= --predict --predict-json $2 --data-cache-path $WORK/data_cache"
}

if [ $mode = predict ]; then
    PRED=${outdir:-.gpu_inputs/multi_bench}
    TWIN_BIN=${TWINRUN_MULTI_BENCH_TWIN_BIN:-$REPO/build/twin/bin/train_llama3}
    mkdir -p "$PRED"
    PRED=$(cd "$PRED" && pwd)
    echo "$commit" >"$PRED/commit.txt"
    for name in ${TWINRUN_MULTI_BENCH_LAYOUTS:-$(bench_layouts 8)}; do
        rc=0
        predict "$name" "$PRED/$name.predict.json" || rc=$?
        cp "$WORK/predict_runs/$name/console.txt" "$PRED/$name.predict.log"
        fit=$(python3 $REPORT fits "$PRED/$name.predict.json" || true)
        echo "$name: exit $rc; $(grep -h '^\[predict\] step time' "$PRED/$name.predict.log" | cut -c11-) ${fit:+($fit)}"
    done
    rm -rf "$WORK/data_cache" "$WORK/predict_runs"
    log "predictions of commit $commit in $PRED"
    exit 0
fi

if [ "$DRY" = 1 ]; then
    NGPU=${TWINRUN_MULTI_BENCH_GPUS:-2}
    gpu="twin H200 spec (dry run, no GPU)"
    BACKEND=twin
    BIN=${TWINRUN_MULTI_BENCH_BIN:-$REPO/build/twin/bin/train_llama3}
    TWIN_BIN=$BIN
else
    NGPU=${TWINRUN_MULTI_BENCH_GPUS:-$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)}
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
    gpu=${gpu:-unknown GPU}
    BACKEND=cuda
    BIN=${TWINRUN_MULTI_BENCH_BIN:-}
    TWIN_BIN=${TWINRUN_MULTI_BENCH_TWIN_BIN:-}
fi
T0=$(date +%s)
dry=()
[ "$DRY" = 1 ] && dry=(--dry-run)
pack() { tar -C "$WORK" -czf "$OUTDIR/gpu_multi_bench_runs.tar.gz" runs; }
report() {
    python3 $REPORT report "$R" --commit "$commit" --gpus "$NGPU" --device "$gpu" "${dry[@]}" "$@" \
        --json "$OUTDIR/gpu_multi_bench.json" --md "$OUTDIR/gpu_multi_bench.md"
}
left() { # seconds left of --budget (none: as good as unbounded)
    if [ "$BUDGET" -gt 0 ]; then echo $((BUDGET - ($(date +%s) - T0))); else echo 1000000000; fi
}
log "twinrun multi-GPU benchmark at $commit on $NGPU x $gpu -> $OUTDIR (work: $WORK)"
[ "$NGPU" -ge 2 ] || { echo "gpu_multi_bench.sh: $NGPU GPU(s): the benchmark needs 2 or more"; exit 1; }

if [ -z "$BIN" ]; then
    B=${GPU_BUILD:-/tmp/build-cuda-multibench}
    log "configure and build the cuda backend's train_llama3 and blame ($B)"
    lab_deps "$DEBS"
    if ! gpu_build "$B" "$R/build.log" train_llama3 blame; then
        grep -E "error|Error" "$R/build.log" | head -30 || true
        pack
        lab_die "the build failed (runs/build.log in the tarball)"
    fi
    BIN=$B/bin/train_llama3
    echo "built in $(($(date +%s) - T0)) s"
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
[ "$DRY" = 1 ] || nvidia-smi topo -m 2>/dev/null | head -$((NGPU + 1)) || true

LAYOUTS=${TWINRUN_MULTI_BENCH_LAYOUTS:-$(bench_layouts "$NGPU")}
for name in $LAYOUTS; do spec_line "$name"; done >"$R/layouts.txt"
PRED_SRC=${TWINRUN_MULTI_BENCH_PREDICT_DIR:-.gpu_inputs/multi_bench}
if [ "$DRY" != 1 ] && [ -f "$PRED_SRC/commit.txt" ] && [ "$(cat "$PRED_SRC/commit.txt")" != "$commit" ]; then
    echo "warning: the twin's predictions in $PRED_SRC are of commit $(cat "$PRED_SRC/commit.txt"), this is $commit"
fi

# every GPU's memory.used (MiB) every 100 ms into $1 until smi_stop; nothing in the dry run
SMI_PID=0 failed=0
smi_start() {
    [ "$DRY" = 1 ] && return 0
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits >"$1.smi_base.txt" 2>/dev/null || return 0
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 100 >"$1.smi.txt" 2>/dev/null &
    SMI_PID=$!
}
smi_stop() {
    [ "$SMI_PID" = 0 ] || { kill "$SMI_PID" 2>/dev/null || true; wait "$SMI_PID" 2>/dev/null || true; }
    SMI_PID=0
}

run_bench() { # NAME: predict (or take the prediction made beforehand), then run the layout and report it
    local name=$1 tp pp dp rc t fit="" frc=0
    read -r tp pp dp < <(layout_sizes "$name")
    if [ $((tp * pp * dp)) -gt "$NGPU" ]; then
        echo "needs $((tp * pp * dp)) GPUs, the machine has $NGPU" >"$R/$name.note"
        return 0
    fi
    if [ "$DRY" != 1 ] && [ -f "$PRED_SRC/$name.predict.json" ]; then
        cp "$PRED_SRC/$name.predict.json" "$R/predict/$name.json"
    elif [ -n "$TWIN_BIN" ]; then
        predict "$name" "$R/predict/$name.json" || echo "  the twin's prediction failed (runs/predict_runs/$name)"
        cp "$WORK/predict_runs/$name/console.txt" "$R/predict/$name.log" 2>/dev/null || true
    fi
    [ -f "$R/predict/$name.json" ] && { fit=$(python3 $REPORT fits "$R/predict/$name.json") || frc=$?; }
    if [ $frc = 1 ]; then # 2: no readable prediction, so nothing says it does not fit
        echo "$fit" >"$R/$name.note"
        log "$name: skipped: $fit"
        return 0
    fi
    t=$(left)
    if [ "$t" -lt 60 ]; then
        echo "skipped: the run's time budget (--budget $BUDGET) was spent" >"$R/$name.note"
        log "$name: skipped (time budget)"
        return 0
    fi
    [ "$t" -gt $((TMO + 20)) ] && t=$((TMO + 20))
    log "$name: $((tp * pp * dp)) GPU(s), TP $tp PP $pp DP $dp, $STEPS iterations"
    smi_start "$R/$name"
    rc=0
    # shellcheck disable=SC2046
    MULTI_TIMEOUT=$((t - 20)) run_layout "$name" "$R" TWINRUN_BACKEND=$BACKEND TRAIN_BIN="$BIN" \
        $([ "$DRY" = 1 ] && echo TWINRUN_TWIN_DEVICE=H200) $(job_env "$name" "$STEPS") \
        EXTRA_ARGS="--seed 1234 --metrics-jsonl metrics.jsonl --save= --data-cache-path $WORK/data_cache" || rc=$?
    smi_stop
    echo "$rc" >"$R/$name.exit"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    rm -rf "$R/$name"/benchmark_cache_* # empty: the runs share $WORK/data_cache (the launcher's own is overridden)
    if [ $rc -ne 0 ]; then
        echo "  exit $rc:"
        tail -8 "$R/$name/console.txt" | sed 's/^/    /'
    fi
    grep -h "^\[memory\] rank [0-9]*: weights \|^\[startup\]" "$R/$name/console.txt" | sed 's/^/  /' || true
    report --quiet || echo "  (the report failed)"
    grep -F "| $name |" "$OUTDIR/gpu_multi_bench.md" | sed 's/^/  /' || true
    pack
}

run_checks() { # lab/gpu_multi.sh's layouts and hang for the GPU count, on the build above
    local twin=${TWINRUN_MULTI_BENCH_TWIN_DIR:-.gpu_inputs} layouts t rc=0
    layouts=$(multi_layouts_for "$NGPU")
    t=$(left)
    if [ "$t" -lt 90 ]; then
        log "correctness checks skipped: the run's time budget was spent"
        return 0
    fi
    if [ "$DRY" = 1 ]; then
        twin=$WORK/twin_side
        log "the checks' twin side: lab/twin_multi.sh ($layouts)"
        MULTI_LAYOUTS=$layouts TWIN_BIN=$BIN lab/twin_multi.sh "$twin/multi" >"$R/twin_side.log" 2>&1 ||
            { tail -5 "$R/twin_side.log"; echo "  lab/twin_multi.sh failed: the checks against the twin will fail"; }
    elif [ ! -d "$twin/multi" ]; then
        echo "warning: no $twin/multi (lab/twin_multi.sh writes it): the GPU-vs-twin checks will fail"
    fi
    mkdir -p "$twin"
    log "correctness: lab/gpu_multi.sh's layouts ($layouts) and the injected hang"
    MULTI_LAYOUTS=$layouts TWINRUN_MULTI_ONLY=layouts TWINRUN_MULTI_BIN=$BIN TWINRUN_MULTI_BACKEND=$BACKEND \
        TWINRUN_MULTI_WORK="$WORK/checks" timeout $((t - 30)) bash lab/gpu_multi.sh --twin "$twin" "$OUTDIR" \
        2>&1 | tee "$R/checks.txt" || rc=$?
    echo "correctness checks: exit $rc"
    [ $rc -eq 0 ] || failed=$((failed + 1))
    report --quiet || true
    pack
}

for name in $LAYOUTS; do
    case $name in ${M8}_*) [ "$CHECKS" = 1 ] && [ ! -f "$R/checks.txt" ] && run_checks ;; esac
    run_bench "$name"
done
[ "$CHECKS" = 1 ] && [ ! -f "$R/checks.txt" ] && run_checks

rm -rf "$WORK/data_cache" "$WORK/predict_runs" # the mock data's indexes (~75 MB a configuration); the predictions' runs
log "table ($(($(date +%s) - T0)) s in all)"
report
pack
files=$(find "$OUTDIR" -maxdepth 1 -type f -printf '%f ' | tr ' ' '\n' | sort | tr '\n' ' ')
log "done: $(find "$OUTDIR" -maxdepth 1 -type f | wc -l) files in $OUTDIR: $files"
[ $failed -eq 0 ] || lab_die "$failed run(s) or the checks failed"
