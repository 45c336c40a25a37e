#!/usr/bin/env bash
# Builds the cuda backend on a GPU machine and runs what can only run there:
#   1. ctest -L gpu (every test, linked against twinrun_cuda), GEMM path cuBLASLt (default);
#   2. the GEMM-using tests again with TWINRUN_GEMM=blas (the GemmEx path MUSA uses) and =naive;
#   3. compute-sanitizer memcheck/racecheck on a few kernel tests;
#   4. kern_oracle: the twin's kernels vs the GPU's on large random shapes (+ determinism);
#   5. coll_smoke: NCCL with 1 rank (asynchronous, synchronous, an injected hang the watchdog must end),
#      and with 2 ranks (file rendezvous, a timeout) when 2 GPUs exist. The fuller check of the
#      asynchronous collectives and the watchdog: tools/async_check.sh.
#
# Usage (repository root): cuda/tools/device_check.sh [--debs DIR] [--build DIR] OUTDIR
#   OUTDIR  the logs (made if absent); --debs: a folder of .deb files for what the system lacks, unpacked
#   under /tmp, never into / (lab/gpu_env.sh, lab/README.md); --build: the build folder (default
#   /tmp/build-cuda-dev). Exit status 1 when any step exited otherwise than it should.
set -u
. "$(dirname "$0")/../../lab/gpu_env.sh"
lab_args "$@"
[ ${#ARGS[@]} -eq 1 ] && [ "${ARGS[0]#-}" = "${ARGS[0]}" ] ||
    lab_die "usage: cuda/tools/device_check.sh [--debs DIR] [--build DIR] OUTDIR"
OUTDIR=$(lab_outdir "${ARGS[0]}") || exit 1
cd "$(dirname "$0")/../.." || exit 1
B=${GPU_BUILD:-/tmp/build-cuda-dev}
log() { echo "== $*"; }

log machine
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
# what the system lacks (from the .debs), NCCL and cuDNN where the toolkit has none: CMAKE_EXTRA, NVCC
lab_deps "$DEBS" || exit 1
"$NVCC" --version | tail -2; cmake --version | head -1; gcc --version | head -1; head -2 /etc/os-release

# want NAME EXPECTED GOT: one check's exit status against the one it should have; the script ends with
# the list of those that differed and exit 1 (each check's output is in OUTDIR, its status printed too)
failed=()
want() { [ "$3" -eq "$2" ] || failed+=("$1 (exit $3, want $2)"); }

log configure and build
gpu_build "$B" "$OUTDIR/build.log"
rc=$?
want build 0 $rc
tail -5 "$OUTDIR/build.log"
if [ $rc -ne 0 ]; then # a target that failed: report it, test what did build
    grep -E "error|Error" "$OUTDIR/build.log" | head -20
    [ -e "$B/cuda/libtwinrun_cuda.a" ] || exit 1
    cmake --build "$B" -j"$(nproc)" -- -k >>"$OUTDIR/build.log" 2>&1
fi

log "ctest -L gpu (cuBLASLt)"
ctest --test-dir "$B" -L gpu --no-tests=error --output-on-failure --timeout 240 -j4 >"$OUTDIR/ctest.log" 2>&1
want "ctest -L gpu" 0 $?
grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$OUTDIR/ctest.log"

for mode in blas naive; do
    log "TWINRUN_GEMM=$mode"
    TWINRUN_GEMM=$mode ctest --test-dir "$B" -R 'kern_gemm|refcheck|test_train$' --output-on-failure --timeout 240 \
        --no-tests=error -j4 >"$OUTDIR/ctest_$mode.log" 2>&1
    want "ctest TWINRUN_GEMM=$mode" 0 $?
    grep -E "tests passed|Failed|\*\*\*" "$OUTDIR/ctest_$mode.log"
done

log "kern_oracle (twin kernels vs GPU kernels, large shapes)"
timeout 240 "$B/bin/kern_oracle" >"$OUTDIR/oracle.log" 2>&1
rc=$?
echo "kern_oracle rc=$rc"
want kern_oracle 0 $rc
grep -E "FAILED|NOT DETERMINISTIC|kern_oracle:" "$OUTDIR/oracle.log"

log compute-sanitizer
if command -v compute-sanitizer >/dev/null; then
    for t in test_kern_attention test_kern_cp test_kern_norm test_kern_cross_entropy test_kern_embedding \
        test_kern_elementwise test_kern_multi_tensor test_kern_swiglu test_kern_rope; do
        timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/$t" >>"$OUTDIR/sanitizer.log" 2>&1
        rc=$?
        echo "memcheck $t rc=$rc"
        want "memcheck $t" 0 $rc
    done
    # racecheck twice per test: with twinrun's own attention kernels forced (TWINRUN_ATTENTION=flash),
    # which must be clean; and with the default path, where cuDNN's generated sm90 kernels order their
    # shared memory through TMA and mbarriers that racecheck does not model (cuda/README.md, "Sanitizers
    # and cuDNN"): there every reported access must be inside a cuDNN kernel, any other is a failure
    for t in test_kern_attention test_kern_cp; do
        TWINRUN_ATTENTION=flash timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/$t" \
            >>"$OUTDIR/sanitizer.log" 2>&1
        rc=$?
        echo "racecheck $t (twinrun's kernels) rc=$rc"
        want "racecheck $t (TWINRUN_ATTENTION=flash)" 0 $rc
        timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$B/tests/$t" >"$OUTDIR/racecheck_$t.log" 2>&1
        rc=$?
        cat "$OUTDIR/racecheck_$t.log" >>"$OUTDIR/sanitizer.log"
        if [ $rc -eq 9 ]; then
            # "... access at KERNEL+0xOFFSET [N hazards]" (or "at 0xPC in [file:line:]KERNEL(args)" with line
            # information): the kernels the hazards were found in
            sed -nE 's/.* access at (0x[0-9a-fA-F]+ in )?(.*)$/\2/p' "$OUTDIR/racecheck_$t.log" |
                sed -E 's/ \[[0-9]+ hazards?\]$//; s/\+0x[0-9a-fA-F]+$//' | sort -u >"$OUTDIR/racecheck_$t.kernels"
            outside=$(grep -vE 'sdpa|cudnn' "$OUTDIR/racecheck_$t.kernels")
            if [ -s "$OUTDIR/racecheck_$t.kernels" ] && [ -z "$outside" ]; then
                echo "racecheck $t (default path): hazards only inside cuDNN's kernels ($(wc -l <"$OUTDIR/racecheck_$t.kernels") names)"
                rc=0
            else # none named (another format) counts as outside
                echo "racecheck $t (default path): hazards outside cuDNN's kernels:"
                echo "${outside:-(no kernel named in $OUTDIR/racecheck_$t.log)}" | head -5
            fi
        else
            echo "racecheck $t (default path) rc=$rc"
        fi
        want "racecheck $t (default path)" 0 $rc
    done
fi

log coll_smoke
export TWINRUN_RENDEZVOUS_DIR
TWINRUN_RENDEZVOUS_DIR=$(mktemp -d)
{
    timeout 120 "$B/bin/coll_smoke" 0 1
    rc=$?
    echo "1 rank rc=$rc"
    want "coll_smoke 1 rank" 0 $rc
    TWINRUN_COLL_SYNC=1 timeout 120 "$B/bin/coll_smoke" 0 1
    rc=$?
    echo "1 rank synchronous rc=$rc"
    want "coll_smoke 1 rank synchronous" 0 $rc
    # an injected GPU hang: the watchdog thread must end the process with 1 (tools/async_check.sh times it)
    TWINRUN_COLL_TIMEOUT_S=5 TWINRUN_FLIGHT_DIR=$OUTDIR timeout 60 "$B/bin/coll_smoke" 0 1 hang
    rc=$?
    echo "1 rank hang rc=$rc (want 1)"
    want "coll_smoke hang" 1 $rc
    if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        TWINRUN_RUN_ID=two timeout 120 "$B/bin/coll_smoke" 1 2 & p=$!
        TWINRUN_RUN_ID=two timeout 120 "$B/bin/coll_smoke" 0 2; r0=$?
        wait $p; r1=$?; echo "2 ranks rc=$r0,$r1"
        want "coll_smoke 2 ranks, rank 0" 0 $r0; want "coll_smoke 2 ranks, rank 1" 0 $r1
        export TWINRUN_COLL_TIMEOUT_S=5
        TWINRUN_RUN_ID=late timeout 120 "$B/bin/coll_smoke" 1 2 timeout & p=$!
        TWINRUN_RUN_ID=late timeout 120 "$B/bin/coll_smoke" 0 2 timeout; r0=$?
        wait $p; r1=$?; echo "2 ranks timeout rc=$r0,$r1"
        want "coll_smoke 2 ranks timeout, rank 0" 0 $r0; want "coll_smoke 2 ranks timeout, rank 1" 0 $r1
    fi
} >"$OUTDIR/smoke.log" 2>&1
grep -E "FAILED|rc=|all ok|returned" "$OUTDIR/smoke.log"
ls "$TWINRUN_RENDEZVOUS_DIR"
if [ ${#failed[@]} -gt 0 ]; then
    echo "device check: ${#failed[@]} failed: ${failed[*]}"
    exit 1
fi
echo "device check: every step exited as it should"
