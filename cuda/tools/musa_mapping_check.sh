#!/usr/bin/env bash
# Compiles cuda with -DTWINRUN_MUSA against STUB musa_runtime.h / mublas.h / mccl.h that map
# every musaX name gpu_compat.h uses back onto CUDA (generated from gpu_compat.h itself), with nvcc
# and gcc. It proves the MUSA code paths (#if TWINRUN_MUSA branches, GemmEx instead of cuBLASLt)
# compile and that gpu_compat.h maps every vendor name the sources use; it proves nothing about the
# real MUSA SDK's spelling of those names (see docs/musa.md).
# Usage (repository root): cuda/tools/musa_mapping_check.sh
set -eu
D=cuda
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CUDA_INC=$(dirname "$NVCC")/../include

# "#define cudaX musaX" in a section -> "#define musaX cudaX" in the stub for that section.
stub() { # $1 = stub file, $2 = the real CUDA header it wraps, $3 = awk range start, $4 = range end
    {
        echo "#pragma once"
        echo "#include <$2>"
        awk -v a="$3" -v b="$4" '$0 ~ a {on=1} $0 ~ b {on=0} on && /^#define / && NF == 3 && $3 ~ /^[A-Za-z_][A-Za-z0-9_]*$/ {print "#define " $3 " " $2}' \
            "$D/gpu_compat.h"
    } >"$T/$1"
}
stub musa_runtime.h cuda_runtime.h '^#include <musa_runtime.h>' '^#ifdef GPU_COMPAT_BLAS'
stub mublas.h cublas_v2.h '^#include <mublas.h>' '^#endif'
stub mccl.h nccl.h '^#include <mccl.h>' '^#endif'
# Names that are macros in the CUDA headers, which gpu_compat.h redefines: stand them in with constants.
for m in cudaStreamNonBlocking cudaEventDisableTiming cudaHostAllocMapped; do
    mu=musa${m#cuda}
    sed -i "s|^#define $mu $m\$|enum { stub_$m = $m };\\n#undef $m\\n#define $mu stub_$m|" "$T/musa_runtime.h"
done
for m in cublasCreate cublasDestroy cublasSetStream; do # cublas_v2.h: macros for the _v2 functions
    mu=mu${m#cu}
    sed -i "s|^#define $mu $m\$|#undef $m\\n#define $mu ${m}_v2|" "$T/mublas.h"
done
# NCCL_CONFIG_INITIALIZER is a macro in nccl.h, which gpu_compat.h redefines: stand it in with a constant.
sed -i 's|^#define MCCL_CONFIG_INITIALIZER NCCL_CONFIG_INITIALIZER$|static const ncclConfig_t stub_mccl_config = NCCL_CONFIG_INITIALIZER;\n#undef NCCL_CONFIG_INITIALIZER\n#define MCCL_CONFIG_INITIALIZER stub_mccl_config|' "$T/mccl.h"

rc=0
# Completeness: every CUDA/cuBLAS/NCCL name in the code (comments stripped) is mapped, except the
# cuBLASLt path (its FP8 types CUDA_R_8F_* included) and cublasGetStatusString, which the sources
# compile only for CUDA.
for f in "$D"/*.cu "$D"/*.c "$D"/*.cuh "$D"/cuda_check.h "$D"/cuda_dev.h; do
    gcc -x c -fpreprocessed -E -P "$f" 2>/dev/null
done | grep -ohE '\b(cuda[A-Z][A-Za-z_]*|CUDA_R_[0-9A-Z]+|cublas[A-Z][A-Za-z_]*|CUBLAS_[A-Z0-9_]+|nccl[A-Z][A-Za-z0-9_]*|NCCL_[A-Z_]+)\b' |
    sort -u | grep -vE '^(cublasLt|CUBLASLT_|cublasGetStatusString$|CUDA_R_8F$)' >"$T/used"
grep -oE '^#define [A-Za-z_0-9]+' "$D/gpu_compat.h" | awk '{print $2}' | sort -u >"$T/mapped"
if comm -23 "$T/used" "$T/mapped" | grep .; then
    echo "FAILED: the names above are used but not mapped in gpu_compat.h"
    rc=1
fi
# Every source compiled on its own, as many at a time as cores (one at a time was ~40 s of one core on
# a 2-core runner); a failing file prints its compiler output and "FAILED: FILE".
compile_one() {
    case $1 in
    *.cu) "$NVCC" -std=c++17 -arch=sm_90 --fmad=false -Xcompiler=-Wall,-Wextra,-Werror -Werror=all-warnings \
        -DTWINRUN_MUSA -I"$T" -Ibase/include -Ibase -I"$D" -c "$1" -o "$T/$(basename "$1").o" ;;
    *) gcc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -DTWINRUN_MUSA -I"$T" -I"$CUDA_INC" -Ibase/include \
        -Ibase -I"$D" -c "$1" -o "$T/$(basename "$1").o" ;;
    esac || { echo "FAILED: $1"; return 1; }
}
export -f compile_one
export NVCC T D CUDA_INC
if ! printf '%s\n' "$D"/*.cu "$D"/*.c | xargs -P"$(nproc 2>/dev/null || echo 2)" -I{} bash -c 'compile_one "$1"' _ {}; then
    rc=1
fi
[ $rc -eq 0 ] && echo "MUSA mapping check: every source compiles with -DTWINRUN_MUSA against CUDA-backed stubs"
exit $rc
