#!/usr/bin/env bash
# The seeds' commands as users type them, on one GPU node, with this tree's cuda build (docs/launch.md,
# docs/doctor.md): what tests/launch/tests.cmake runs on the twin and with stand-in builds, here with the
# real build, the node's own nvidia-smi and mpirun.
#   1. the 70B guide's `bash train_llama3_70b_multi_nodes.sh --dataset_dir DIR --data_format bf16` over a
#      one-node ./hostfile (localhost, one slot per GPU, TP 1 PP 1: data-parallel over the node's GPUs), a
#      tiny Llama after `--`, stopped after iteration 4 (--exit-interval 4, as a job that lost its nodes
#      there); then the guide's resume as written, --load DIR/checkpoints/iter_0000004, for the fifth;
#   2. the same with --data_format fp8 (its own --save);
#   3. the 8B tutorial's single-node quick test (FAST_TEST_MODE=1) through scripts/train_llama3_8b_dynamic.sh;
#   4. doctor over the node (one rank a GPU, under mpirun) with the guide's --dataset_dir: JSON and JUnit.
# Each step prints "ok" or "FAILED" with what its output lacked; the training directory is
# tests/launch/launchers_fixture.sh's (a Megatron-written corpus under the guide's data prefix and a
# Hugging Face tokenizer of its 32000-token vocabulary), without its stand-in tools.
# Usage (repository root): lab/gpu_seeds.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR   the logs and the doctor's reports (made if absent)
#   --debs   a folder of .deb files for what the system lacks (lab/gpu_env.sh); --build: the cuda build
#            folder (default /tmp/build-cuda-seeds)
# Environment: TWINRUN_SEEDS_BIN_DIR (a bin/ folder already built: no build), TWINRUN_SEEDS_BACKEND=twin
#   (the dry run of the script on a twin build: every step on the CPU twin, one rank, no mpirun),
#   MPIRUN (default mpirun; Open MPI's, which the 70B script's hostfile and rank variables assume).
# Exit status 1 when a step failed or the build did; every step runs.
set -uo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] || lab_die "usage: lab/gpu_seeds.sh [--debs DIR] [--build DIR] OUTDIR"
OUTDIR=$(lab_outdir "${ARGS[0]}")
cd "$(dirname "$0")/.." || exit 1
SRC=$(pwd)
backend=${TWINRUN_SEEDS_BACKEND:-cuda}
case $backend in cuda | twin) ;; *) lab_die "TWINRUN_SEEDS_BACKEND=$backend: use cuda (default) or twin" ;; esac
BIN=${TWINRUN_SEEDS_BIN_DIR:-}
if [ "$backend" = cuda ]; then
    lab_deps "$DEBS" >/dev/null || exit 1
    if [ -z "$BIN" ]; then
        B=${GPU_BUILD:-/tmp/build-cuda-seeds}
        echo "== $(date +%T) build train_llama3 and doctor ($B)"
        gpu_build "$B" "$OUTDIR/build.log" train_llama3 doctor || lab_die "the build failed (see $OUTDIR/build.log)"
        BIN=$B/bin
    fi
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    [ "${gpus:-0}" -gt 0 ] || lab_die "nvidia-smi lists no GPU: this script runs the cuda build on a GPU node (TWINRUN_SEEDS_BACKEND=twin for the dry run)"
    command -v "${MPIRUN:-mpirun}" >/dev/null || lab_die "no ${MPIRUN:-mpirun}: the 70B guide's script starts its ranks with Open MPI's mpirun (apt-get install openmpi-bin, or MPIRUN=...)"
else
    [ -n "$BIN" ] || BIN=$SRC/build/twin/bin
    gpus=1
fi
BIN=$(cd "$BIN" && pwd) || lab_die "no folder $BIN"
for p in train_llama3 doctor; do [ -x "$BIN/$p" ] || lab_die "no $BIN/$p"; done
echo "== $(date +%T) at $(lab_commit), backend $backend, $gpus GPU(s)"

W=$OUTDIR/work
bash "$SRC/tests/launch/launchers_fixture.sh" "$W" "$SRC" 1 >"$OUTDIR/fixture.log" 2>&1 || lab_die "the training directory (see $OUTDIR/fixture.log)"
rm -rf "${W:?}/bin" "${W:?}/builds" # the stand-ins: this node's own tools and this build run here
echo "localhost slots=$gpus" >"$W/hostfile"
cd "$W" || exit 1
export TRAIN_BIN=$BIN/train_llama3 TWINRUN_BACKEND=$backend OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset DRY_RUN CUDA_VISIBLE_DEVICES WORLD_SIZE RANK MASTER_ADDR MASTER_PORT
# a Llama shrunk to a test's size, after the script's own flags (the last value wins, as in Megatron)
TINY=(--num-layers 8 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --num-query-groups 8
    --kv-channels 8 --seq-length 32 --max-position-embeddings 32)
L70=(bash "$SRC/scripts/train_llama3_70b_multi_nodes.sh")
failed=()

# step NAME LOG REGEX...: every REGEX (grep -E, across lines: the log is joined) must match the log
check() {
    local name=$1 log=$2 rc=$3 miss=()
    shift 3
    local text
    text=$(tr '\n' ' ' <"$log")
    for re in "$@"; do grep -qE -- "$re" <<<"$text" || miss+=("$re"); done
    if [ "$rc" -eq 0 ] && [ ${#miss[@]} -eq 0 ]; then
        echo "ok      $name"
    else
        echo "FAILED  $name (exit $rc${miss:+; missing: ${miss[*]}}): $log"
        tail -15 "$log" | sed 's/^/    /'
        failed+=("$name")
    fi
}

# bf16 as the guide writes it (checkpoints in DIR/checkpoints); fp8 beside it, its own --save
for fmt in bf16 fp8; do
    save=ds/checkpoints
    save_opt=()
    if [ $fmt = fp8 ]; then
        save=ds/checkpoints_fp8
        save_opt=(--save "$save")
    fi
    log=$OUTDIR/seed70_$fmt.log
    rc=0
    (export VOCAB_SIZE=32000 SAVE_INTERVAL=4 EVAL_INTERVAL=4 EVAL_ITERS=1 TRAIN_ITERS=5 TP_SIZE=1 PP_SIZE=1 CP_SIZE=1
        "${L70[@]}" --dataset_dir ds --data_format $fmt "${save_opt[@]}" -- "${TINY[@]}" --exit-interval 4 &&
            "${L70[@]}" --dataset_dir ds --data_format $fmt "${save_opt[@]}" --load $save/iter_0000004 -- "${TINY[@]}") \
        >"$log" 2>&1 || rc=$?
    check "70B guide's command, --data_format $fmt, stopped at 4 and resumed with --load .../iter_0000004" "$log" $rc \
        "iteration +4/ +5 [|]" "saved checkpoint at iteration 4" "loaded checkpoint from .* at iteration 4" \
        "iteration +5/ +5 [|]" "训练成功完成!"
done

log=$OUTDIR/seed8_quick.log
rc=0
(export TP_SIZE=1 CP_SIZE=1 PP_SIZE=1 MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=32 FAST_TEST_MODE=1 EXP_NAME=test-aistudio \
    NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=128 NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 KV_CHANNELS=8 SEQ_LENGTH=32 \
    VOCAB_SIZE=512 EVAL_ITERS=1
    bash "$SRC/scripts/train_llama3_8b_dynamic.sh" --backend "$backend") >"$log" 2>&1 || rc=$?
check "8B tutorial's single-node quick test (FAST_TEST_MODE=1)" "$log" $rc "启用快速测试模式" "后端: $backend" \
    "iteration +31/ +31 [|]" "训练成功完成!"

log=$OUTDIR/doctor.log
rc=0
if [ "$backend" = cuda ]; then
    "${MPIRUN:-mpirun}" -np "$gpus" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29517 "$BIN/doctor" --dataset_dir ds \
        --hostfile hostfile --gpus-per-node "$gpus" --json "$OUTDIR/doctor.json" --junit "$OUTDIR/doctor.xml" >"$log" 2>&1 || rc=$?
else
    WORLD_SIZE=1 "$BIN/doctor" --dataset_dir ds --gpus-per-node 1 --json "$OUTDIR/doctor.json" --junit "$OUTDIR/doctor.xml" \
        >"$log" 2>&1 || rc=$?
fi
check "doctor over the node, --dataset_dir (JSON and JUnit)" "$log" $rc "."
if [ -f "$OUTDIR/doctor.json" ] && [ -f "$OUTDIR/doctor.xml" ]; then
    python3 - "$OUTDIR/doctor.json" "$OUTDIR/doctor.xml" <<'PY' || failed+=("doctor's reports")
import json, sys, xml.etree.ElementTree as ET
j = json.load(open(sys.argv[1]))
x = ET.parse(sys.argv[2]).getroot()
cases = x.findall(".//testcase")
bad = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
print(f"        doctor's JSON: {len(j.get('checks', []))} checks; JUnit: {len(cases)} cases, {len(bad)} failing {bad}")
checks = j.get("checks", [])
sys.exit(0 if j.get("passed") is True and cases and len(cases) == len(checks) and not bad else 1)
PY
else
    echo "FAILED  doctor's reports: no $OUTDIR/doctor.json or doctor.xml"
    failed+=("doctor's reports")
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "gpu_seeds: ${#failed[@]} failed: ${failed[*]}"
    exit 1
fi
echo "gpu_seeds: every step passed"
